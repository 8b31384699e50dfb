#include "base/log.h"
#include "base/clock.h"

#include <stdarg.h>
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
