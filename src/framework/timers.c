/* The indexed min-heap of timers.h: each timer knows its slot, so a deadline moves by sifting
 * from where it is instead of searching for it; slots carry the deadline so a sift reads only
 * the heap's array. */
#include "framework/timers.h"
#include "base/base.h"

static void place(struct kite_timers *h, size_t i, struct kite_timer_slot s) {
    h->v[i] = s;
    s.t->idx = i;
}

static void sift_up(struct kite_timers *h, size_t i) {
    struct kite_timer_slot s = h->v[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->v[p].at <= s.at) break;
        place(h, i, h->v[p]);
        i = p;
    }
    place(h, i, s);
}

static void sift_down(struct kite_timers *h, size_t i) {
    struct kite_timer_slot s = h->v[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        int64_t best = s.at;
        if (l < h->n && h->v[l].at < best) m = l, best = h->v[l].at;
        if (l + 1 < h->n && h->v[l + 1].at < best) m = l + 1;
        if (m == i) break;
        place(h, i, h->v[m]);
        i = m;
    }
    place(h, i, s);
}

void kite_timers_set(struct kite_timers *h, struct kite_timer *t, int64_t at) {
    if (!kite_timer_armed(t)) {
        if (h->n == h->cap) {
            h->cap = h->cap ? h->cap * 2 : 16;
            h->v = kite_realloc(h->v, h->cap * sizeof *h->v);
        }
        t->at = at;
        place(h, h->n++, (struct kite_timer_slot){at, t});
        sift_up(h, t->idx);
        return;
    }
    int64_t old = t->at;
    t->at = at;
    h->v[t->idx].at = at;
    if (at < old) sift_up(h, t->idx);
    else sift_down(h, t->idx);
}

void kite_timers_cancel(struct kite_timers *h, struct kite_timer *t) {
    if (!kite_timer_armed(t)) return;
    size_t i = t->idx;
    t->idx = KITE_TIMER_IDLE;
    struct kite_timer_slot last = h->v[--h->n];
    if (i == h->n) return;
    place(h, i, last);
    if (i > 0 && h->v[(i - 1) / 2].at > last.at) sift_up(h, i);
    else sift_down(h, i);
}

struct kite_timer *kite_timers_pop_due(struct kite_timers *h, int64_t now) {
    if (!h->n || h->v[0].at > now) return NULL;
    struct kite_timer *t = h->v[0].t;
    kite_timers_cancel(h, t);
    return t;
}

void kite_timers_release(struct kite_timers *h) {
    for (size_t i = 0; i < h->n; i++) h->v[i].t->idx = KITE_TIMER_IDLE;
    free(h->v);
    *h = (struct kite_timers){0};
}
