/* RFC 3339 times as Go's time package parses and prints them for Kubernetes' metav1.Time
 * ("2006-01-02T15:04:05Z07:00") and metav1.MicroTime (".000000" fraction): the one parser and
 * formatter, strict as Go's (two-digit fields, ranges checked, a zone required). */
#pragma once
#include "base/base.h"

/* Parses s (a fraction of any length is accepted, as Go's parser does): seconds since the
 * epoch and nanoseconds apart (years 0..9999 overflow int64 nanoseconds). 0, or -EINVAL with
 * *err (if err is not NULL; malloc'ed) worded as Go's time.Parse for the layout (micro: the
 * MicroTime one). */
int kite_gotime_parse(const char *s, bool micro, int64_t *ret_sec, int32_t *ret_nsec, char **err);
/* "2006-01-02T15:04:05Z", or with ".000000" (micro), in UTC; -EINVAL outside years 0..9999. */
int kite_gotime_format(int64_t sec, int32_t nsec, bool micro, char out[32]);
