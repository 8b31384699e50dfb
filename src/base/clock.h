/* Clocks. Every timer and timestamp goes through a struct kite_clock so tests can swap in
 * a fake one (DESIGN.md "Clock"). wall = CLOCK_REALTIME, mono = CLOCK_MONOTONIC, both ns. */
#pragma once
#include "base/base.h"

#include <pthread.h>

struct kite_clock {
    int64_t (*wall_ns)(struct kite_clock *c);
    int64_t (*mono_ns)(struct kite_clock *c);
};

/* The process-wide real clock (borrowed; never freed). */
struct kite_clock *kite_clock_real(void);

/* A fake clock whose time moves only when told. Thread-safe. */
struct kite_fake_clock {
    struct kite_clock clock;
    pthread_mutex_t lock;
    int64_t wall, mono;
};
void kite_fake_clock_init(struct kite_fake_clock *f, int64_t wall_ns);
void kite_fake_clock_advance(struct kite_fake_clock *f, int64_t ns);

static inline int64_t kite_now_wall(struct kite_clock *c) { return c->wall_ns(c); }
static inline int64_t kite_now_mono(struct kite_clock *c) { return c->mono_ns(c); }

/* Condition variables whose timed waits run on CLOCK_MONOTONIC: a wall-clock jump (NTP, a
 * suspended VM) neither delays nor hurries them. kite_cond_deadline is the absolute
 * timespec for pthread_cond_timedwait on such a condition, ns from now. */
void kite_cond_init_mono(pthread_cond_t *c);
void kite_cond_deadline(struct timespec *ts, int64_t ns_from_now);

#define KITE_NS_PER_SEC INT64_C(1000000000)
#define KITE_NS_PER_MS INT64_C(1000000)

/* Instants are int64 ns since the epoch. RFC 3339 (and so every time field a client may
 * write) spans years 1-9999, past int64 ns; a parsed time, and a time plus a duration, is
 * clamped to [KITE_TIME_MIN, KITE_TIME_MAX] (+-(2^62-1) ns: 1823-11-12 to 2116-02-20). Ordering
 * survives the clamp (year 1 is still long ago, year 9999 still ahead), and the difference of
 * any two instants fits int64, so code may subtract times without overflow checks. */
#define KITE_TIME_MAX ((INT64_C(1) << 62) - 1)
#define KITE_TIME_MIN (-KITE_TIME_MAX)
static inline int64_t kite_time_clamp(int64_t t) { return KITE_MAX(KITE_TIME_MIN, KITE_MIN(t, KITE_TIME_MAX)); }
/* t plus d ns (any int64, e.g. a client's seconds through kite_sec_to_ns), clamped. */
static inline int64_t kite_time_add(int64_t t, int64_t d) { return kite_time_clamp(kite_sat_add(t, d)); }
/* Seconds to ns, saturating at INT64_MAX / INT64_MIN. */
static inline int64_t kite_sec_to_ns(int64_t s) { return kite_sat_mul(s, KITE_NS_PER_SEC); }

/* RFC 3339 UTC, second precision ("2026-12-02T15:42:26Z"), as Kubernetes' metav1.Time.
 * out must hold 21 bytes. */
void kite_time_format(int64_t wall_ns, char out[21]);
/* RFC 3339 UTC with microseconds ("2026-12-02T15:42:26.123456Z"), as metav1.MicroTime.
 * out must hold 28 bytes. */
void kite_microtime_format(int64_t wall_ns, char out[28]);
/* Parses RFC 3339 as Go does (gotime.h: Z or ±hh:mm offset, optional fraction), clamped to
 * KITE_TIME_MIN..MAX.
 * 0 or -EINVAL. */
int kite_time_parse(const char *s, int64_t *ret_wall_ns);
