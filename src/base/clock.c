#include "base/clock.h"

#include <stdio.h>
#include <time.h>

static int64_t ts_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * KITE_NS_PER_SEC + ts.tv_nsec;
}
static int64_t real_wall(struct kite_clock *c) { return ts_ns(CLOCK_REALTIME); }
static int64_t real_mono(struct kite_clock *c) { return ts_ns(CLOCK_MONOTONIC); }

static struct kite_clock real_clock = {real_wall, real_mono};
struct kite_clock *kite_clock_real(void) { return &real_clock; }

static int64_t fake_wall(struct kite_clock *c) {
    struct kite_fake_clock *f = (struct kite_fake_clock *)c;
    pthread_mutex_lock(&f->lock);
    int64_t v = f->wall;
    pthread_mutex_unlock(&f->lock);
    return v;
}
static int64_t fake_mono(struct kite_clock *c) {
    struct kite_fake_clock *f = (struct kite_fake_clock *)c;
    pthread_mutex_lock(&f->lock);
    int64_t v = f->mono;
    pthread_mutex_unlock(&f->lock);
    return v;
}

void kite_fake_clock_init(struct kite_fake_clock *f, int64_t wall_ns) {
    f->clock = (struct kite_clock){fake_wall, fake_mono};
    pthread_mutex_init(&f->lock, NULL);
    f->wall = wall_ns;
    f->mono = KITE_NS_PER_SEC; /* arbitrary non-zero origin */
}

void kite_fake_clock_advance(struct kite_fake_clock *f, int64_t ns) {
    pthread_mutex_lock(&f->lock);
    f->wall += ns;
    f->mono += ns;
    pthread_mutex_unlock(&f->lock);
}

/* Seconds, rounded down (before 1970 too), and the ns into that second. */
static time_t split_ns(int64_t wall_ns, int64_t *ret_ns) {
    int64_t s = wall_ns / KITE_NS_PER_SEC, ns = wall_ns % KITE_NS_PER_SEC;
    if (ns < 0) s--, ns += KITE_NS_PER_SEC;
    *ret_ns = ns;
    return (time_t)s;
}

void kite_time_format(int64_t wall_ns, char out[21]) {
    int64_t ns;
    time_t t = split_ns(wall_ns, &ns);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void kite_microtime_format(int64_t wall_ns, char out[28]) {
    int64_t ns;
    time_t t = split_ns(wall_ns, &ns);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 28, "%Y-%m-%dT%H:%M:%S", &tm);
    unsigned us = (unsigned)(ns / 1000);
    out[n++] = '.';
    for (int i = 5; i >= 0; i--, us /= 10) out[n + (size_t)i] = (char)('0' + us % 10);
    out[n + 6] = 'Z';
    out[n + 7] = 0;
}

int kite_time_parse(const char *s, int64_t *ret) {
    struct tm tm = {0};
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p) return -EINVAL;
    int64_t frac = 0;
    if (*p == '.') {
        int64_t scale = KITE_NS_PER_SEC / 10;
        p++;
        if (*p < '0' || *p > '9') return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++, scale /= 10) frac += (*p - '0') * scale;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2) return -EINVAL;
        off = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -EINVAL;
    }
    if (*p) return -EINVAL;
    /* years 1-9999 fit time_t seconds; only the ns instant needs the clamp */
    *ret = kite_time_add(kite_sec_to_ns((int64_t)timegm(&tm) - off), frac);
    return 0;
}

void kite_cond_init_mono(pthread_cond_t *c) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

void kite_cond_deadline(struct timespec *ts, int64_t ns_from_now) {
    int64_t t = kite_sat_add(ts_ns(CLOCK_MONOTONIC), ns_from_now);
    ts->tv_sec = t / KITE_NS_PER_SEC;
    ts->tv_nsec = t % KITE_NS_PER_SEC;
}
