/* Logging. Only cmd/ and the top of each component log (STYLE.md); library code returns
 * -errno instead. Lines go to stderr as "LEVEL component: message". */
#pragma once
#include "base/base.h"

enum kite_log_level { KITE_LOG_DEBUG, KITE_LOG_INFO, KITE_LOG_WARN, KITE_LOG_ERROR };

void kite_log_set_level(enum kite_log_level level);
void kite_log(enum kite_log_level level, const char *component, const char *fmt, ...) KITE_PRINTF(3, 4);

#define log_debug(comp, ...) kite_log(KITE_LOG_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...) kite_log(KITE_LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...) kite_log(KITE_LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) kite_log(KITE_LOG_ERROR, comp, __VA_ARGS__)

/* A log line at most once per interval: the first event of an interval is let through with
 * the count of the ones held back since the last line, the rest only counted. Lock-free, for
 * errors that can repeat thousands of times a second (a full disk fails every write). */
struct kite_log_ratelimit {
    int64_t interval_ns;
    _Atomic int64_t next_ns;       /* monotonic time the next line may be written */
    _Atomic uint64_t suppressed;   /* events held back since the last line */
};
/* True when the caller should log now; *ret_suppressed is then the number held back. */
bool kite_log_ratelimit_allow(struct kite_log_ratelimit *rl, int64_t now_ns, uint64_t *ret_suppressed);
