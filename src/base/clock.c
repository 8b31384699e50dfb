#include "base/clock.h"
#include "base/gotime.h"

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
    char buf[32];
    kite_gotime_format((int64_t)t, 0, false, buf); /* the int64 ns range is years 1677..2262 */
    memcpy(out, buf, 21);
}

void kite_microtime_format(int64_t wall_ns, char out[28]) {
    int64_t ns;
    time_t t = split_ns(wall_ns, &ns);
    char buf[32];
    kite_gotime_format((int64_t)t, (int32_t)ns, true, buf);
    memcpy(out, buf, 28);
}

int kite_time_parse(const char *s, int64_t *ret) {
    int64_t sec;
    int32_t nsec;
    if (kite_gotime_parse(s, false, &sec, &nsec, NULL) < 0) return -EINVAL;
    /* years 0-9999 fit int64 seconds; only the ns instant needs the clamp */
    *ret = kite_time_add(kite_sec_to_ns(sec), nsec);
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
