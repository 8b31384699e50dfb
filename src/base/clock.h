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

/* RFC 3339 UTC, second precision ("2026-12-02T15:42:26Z"), as Kubernetes' metav1.Time.
 * out must hold 21 bytes. */
void kite_time_format(int64_t wall_ns, char out[21]);
/* RFC 3339 UTC with microseconds ("2026-12-02T15:42:26.123456Z"), as metav1.MicroTime.
 * out must hold 28 bytes. */
void kite_microtime_format(int64_t wall_ns, char out[28]);
/* Parses RFC 3339 (Z or ±hh:mm offset, optional fraction). 0 or -EINVAL. */
int kite_time_parse(const char *s, int64_t *ret_wall_ns);
