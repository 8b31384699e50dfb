/* Resource quantities (k8s.io/apimachinery resource.Quantity) in milli-units, and Go
 * durations. int64 milli-units cover ±9.2e15 units: every realistic cpu/memory/pods value. */
#pragma once
#include "base/base.h"

/* Parses a Kubernetes quantity ("100m", "2", "1Gi", "500Mi", "1e3", "1.5"; "10%" is NOT a
 * quantity) into milli-units ("1" -> 1000, "100m" -> 100, "1Ki" -> 1024000). Precision finer
 * than a milli-unit is rounded up, as Quantity.MilliValue() does. A value beyond int64
 * milli-units ("10Pi" of memory, "1e20") saturates to +-KITE_QUANTITY_MAX_MILLI: it compares
 * as larger than any real capacity; sums of such values must saturate too (kite_sat_add).
 * -EINVAL on bad syntax. */
#define KITE_QUANTITY_MAX_MILLI INT64_MAX
int kite_quantity_parse_milli(const char *s, int64_t *ret_milli);

enum kite_qformat { KITE_Q_DECIMAL_SI, KITE_Q_BINARY_SI };
/* Formats in Kubernetes canonical form (resource.Quantity String()) for the given format.
 * KITE_Q_BINARY_SI (memory, storage): whole units of magnitude >= 1024 print with the largest
 * exact binary suffix ("1Gi", "16179316Ki", "1500"); smaller or fractional values fall back to
 * decimal-SI as Kubernetes does ("1k" for 1000, "1500m"). KITE_Q_DECIMAL_SI (cpu, pods):
 * mantissa with an exponent that is a multiple of 3 ("100m", "2", "1500m", "110", "1k", "4M").
 * out must hold at least 32 bytes. */
void kite_quantity_format_milli(int64_t milli, enum kite_qformat fmt, char out[32]);

/* Durations like Go's time.ParseDuration: "10s", "5m", "1h30m", "300ms", "1.5s", "-1s", "0".
 * Units ns, us (µs, μs), ms, s, m, h. -EINVAL on bad input, -ERANGE on overflow. */
int kite_duration_parse(const char *s, int64_t *ret_ns);
