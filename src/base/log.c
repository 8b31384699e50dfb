#include "base/log.h"
#include "base/clock.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static enum kite_log_level min_level = KITE_LOG_INFO;

void kite_log_set_level(enum kite_log_level level) { min_level = level; }

void kite_log(enum kite_log_level level, const char *component, const char *fmt, ...) {
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < min_level) return;
    char ts[28], line[2048];
    kite_microtime_format(kite_now_wall(kite_clock_real()), ts);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* one write per line so concurrent threads do not interleave */
    fprintf(stderr, "%s %-5s %s: %s\n", ts, names[level], component, line);
}

bool kite_log_ratelimit_allow(struct kite_log_ratelimit *rl, int64_t now_ns, uint64_t *ret_suppressed) {
    int64_t next = atomic_load_explicit(&rl->next_ns, memory_order_relaxed);
    if (now_ns < next ||
        !atomic_compare_exchange_strong_explicit(&rl->next_ns, &next, now_ns + rl->interval_ns, memory_order_relaxed,
                                                 memory_order_relaxed)) {
        atomic_fetch_add_explicit(&rl->suppressed, 1, memory_order_relaxed);
        return false;
    }
    *ret_suppressed = atomic_exchange_explicit(&rl->suppressed, 0, memory_order_relaxed);
    return true;
}
