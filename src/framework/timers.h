/* Deadlines of many objects in one indexed binary min-heap: setting, moving or cancelling
 * one object's deadline is O(log n), reading the earliest is O(1). The node lifecycle
 * controller keeps one deadline per node here (a renewal moves it: no sweep over the nodes),
 * the taint eviction controller one per pod waiting out its tolerationSeconds.
 * Entries are embedded in the caller's structs (kite_container_of gets them back). Not
 * thread-safe: callers lock. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define KITE_TIMER_IDLE SIZE_MAX

struct kite_timer {
    int64_t at;  /* deadline (ns on the owner's monotonic clock) */
    size_t idx;  /* place in the heap, KITE_TIMER_IDLE when not armed */
};
struct kite_timer_slot {
    int64_t at; /* a copy of v->at: sifting compares without touching the timers (cache misses) */
    struct kite_timer *t;
};
struct kite_timers {
    struct kite_timer_slot *v;
    size_t n, cap;
};

#define kite_container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static inline void kite_timer_init(struct kite_timer *t) { t->idx = KITE_TIMER_IDLE, t->at = 0; }
static inline bool kite_timer_armed(const struct kite_timer *t) { return t->idx != KITE_TIMER_IDLE; }
/* Arms t at `at`, or moves it there when already armed. */
void kite_timers_set(struct kite_timers *h, struct kite_timer *t, int64_t at);
/* Disarms t (no-op when idle). */
void kite_timers_cancel(struct kite_timers *h, struct kite_timer *t);
/* The earliest armed timer, or NULL. */
static inline struct kite_timer *kite_timers_peek(const struct kite_timers *h) { return h->n ? h->v[0].t : NULL; }
/* ns from now until the earliest armed timer (0 when due), at most idle_ns. */
static inline int64_t kite_timers_next_in(const struct kite_timers *h, int64_t now, int64_t idle_ns) {
    int64_t in = h->n ? h->v[0].at - now : idle_ns;
    return in < 0 ? 0 : in < idle_ns ? in : idle_ns;
}
/* Disarms and returns the earliest timer whose deadline is <= now, or NULL. */
struct kite_timer *kite_timers_pop_due(struct kite_timers *h, int64_t now);
void kite_timers_release(struct kite_timers *h);
