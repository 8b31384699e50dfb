/* The keyed work queue (workqueue.h): a map from key to an embedded timer in the min-heap. */
#include "framework/workqueue.h"
#include "base/backoff.h"

#include <stdlib.h>

struct kite_wq_item {
    struct kite_timer timer;
    char *key;
};

void kite_wq_add(struct kite_wq *q, const char *key, int64_t at) {
    struct kite_wq_item *it = kite_map_get(&q->items, key);
    if (!it) {
        it = kite_calloc(1, sizeof *it);
        kite_timer_init(&it->timer);
        it->key = kite_strdup(key);
        kite_map_put(&q->items, key, it);
    } else if (kite_timer_armed(&it->timer) && it->timer.at <= at) {
        return;
    }
    kite_timers_set(&q->timers, &it->timer, at);
}

char *kite_wq_pop_due(struct kite_wq *q, int64_t now) {
    struct kite_timer *t = kite_timers_pop_due(&q->timers, now);
    if (!t) return NULL;
    struct kite_wq_item *it = kite_container_of(t, struct kite_wq_item, timer);
    kite_map_del(&q->items, it->key);
    char *key = it->key;
    free(it);
    return key;
}

int64_t kite_wq_next(const struct kite_wq *q, int64_t now) {
    struct kite_timer *t = kite_timers_peek(&q->timers);
    if (!t) return -1;
    return t->at > now ? t->at - now : 0;
}

bool kite_wq_due(const struct kite_wq *q, int64_t now) { return kite_wq_next(q, now) == 0; }

bool kite_wq_queued(const struct kite_wq *q, const char *key) { return kite_map_get(&q->items, key) != NULL; }

unsigned kite_wq_failures(const struct kite_wq *q, const char *key) {
    return (unsigned)(uintptr_t)kite_map_get(&q->failures, key);
}

void kite_wq_add_backoff(struct kite_wq *q, const char *key, int64_t now) {
    unsigned n = kite_wq_failures(q, key);
    int64_t max = q->backoff_max_ns > 0 ? q->backoff_max_ns : KITE_WQ_BACKOFF_MAX_NS;
    int64_t base = q->backoff_base_ns > 0 ? q->backoff_base_ns : KITE_WQ_BACKOFF_BASE_NS;
    kite_map_put(&q->failures, key, (void *)(uintptr_t)(n + 1));
    kite_wq_add(q, key, now + kite_backoff_exp(base, max, n));
}

void kite_wq_forget(struct kite_wq *q, const char *key) { kite_map_del(&q->failures, key); }

void kite_wq_release(struct kite_wq *q) {
    kite_map_release(&q->failures);
    kite_timers_release(&q->timers); /* first: it disarms the timers embedded in the items */
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&q->items, &i, &k, &v);) {
        struct kite_wq_item *it = v;
        free(it->key);
        free(it);
    }
    kite_map_release(&q->items);
}
