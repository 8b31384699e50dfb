/* Token bucket and unique name queue (ratelimit.h). */
#include "framework/ratelimit.h"
#include "base/base.h"
#include "base/clock.h"

static void refill(struct kite_bucket *b, int64_t now) {
    if (now > b->last && b->rate > 0) {
        b->tokens += (double)(now - b->last) / (double)KITE_NS_PER_SEC * b->rate;
        if (b->tokens > b->burst) b->tokens = b->burst;
    }
    if (now > b->last) b->last = now;
}

void kite_bucket_init(struct kite_bucket *b, double rate, double burst, int64_t now) {
    *b = (struct kite_bucket){.rate = rate, .burst = burst, .tokens = rate > 0 ? burst : 0, .last = now};
}

bool kite_bucket_try(struct kite_bucket *b, int64_t now) {
    if (b->rate <= 0) return false;
    refill(b, now);
    if (b->tokens < 1) return false;
    b->tokens -= 1;
    return true;
}

int64_t kite_bucket_wait(struct kite_bucket *b, int64_t now) {
    if (b->rate <= 0) return INT64_MAX;
    refill(b, now);
    if (b->tokens >= 1) return 0;
    double s = (1 - b->tokens) / b->rate;
    return (int64_t)(s * (double)KITE_NS_PER_SEC) + 1;
}

void kite_bucket_set_rate(struct kite_bucket *b, double rate, int64_t now) {
    if (rate == b->rate || (rate <= 0 && b->rate <= 0)) return;
    bool had = kite_bucket_try(b, now);
    kite_bucket_init(b, rate, b->burst, now);
    if (!had) kite_bucket_try(b, now);
}

bool kite_name_queue_add(struct kite_name_queue *q, const char *name) {
    if (kite_map_get(&q->in, name)) return false;
    if (q->n == q->cap) {
        /* full: keep only live slots (a flapping node leaves dead ones), growing if need be */
        size_t cap = q->cap && q->in.len < q->cap / 2 ? q->cap : (q->cap ? q->cap * 2 : 16), live = 0;
        char **v = kite_calloc(cap, sizeof *v);
        for (size_t i = 0; i < q->n; i++) {
            char *s = q->v[(q->head + i) % q->cap];
            if (kite_map_get(&q->in, s) == s) v[live++] = s;
            else free(s);
        }
        free(q->v);
        q->v = v, q->cap = cap, q->head = 0, q->n = live;
    }
    char *s = kite_strdup(name);
    q->v[(q->head + q->n++) % q->cap] = s;
    kite_map_put(&q->in, name, s);
    return true;
}

void kite_name_queue_remove(struct kite_name_queue *q, const char *name) { kite_map_del(&q->in, name); }

/* Frees leading slots whose names were removed. */
static void skip_removed(struct kite_name_queue *q) {
    while (q->n && kite_map_get(&q->in, q->v[q->head]) != q->v[q->head]) {
        free(q->v[q->head]);
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
}

const char *kite_name_queue_peek(struct kite_name_queue *q) {
    skip_removed(q);
    return q->n ? q->v[q->head] : NULL;
}

void kite_name_queue_pop(struct kite_name_queue *q) {
    skip_removed(q);
    if (!q->n) return;
    kite_map_del(&q->in, q->v[q->head]);
    skip_removed(q);
}

void kite_name_queue_release(struct kite_name_queue *q) {
    for (size_t i = 0; i < q->n; i++) free(q->v[(q->head + i) % q->cap]);
    free(q->v);
    kite_map_release(&q->in);
    *q = (struct kite_name_queue){0};
}
