/* Rate limiting for the node lifecycle controller's NoExecute tainting, as Kubernetes'
 * RateLimitedTimedQueue: a token bucket (burst 1 there) on the caller's monotonic clock, and a
 * FIFO of unique node names drained as the bucket allows. Not thread-safe: callers lock. */
#pragma once
#include "base/map.h"

#include <stdbool.h>
#include <stdint.h>

struct kite_bucket {
    double rate;   /* tokens per second; <= 0: never a token */
    double burst;
    double tokens;
    int64_t last;  /* ns, when tokens was computed */
};
/* A full bucket (golang.org/x/time/rate starts full). */
void kite_bucket_init(struct kite_bucket *b, double rate, double burst, int64_t now);
/* Takes a token when there is one. */
bool kite_bucket_try(struct kite_bucket *b, int64_t now);
/* ns from now until a token is there: 0 when there is one, INT64_MAX when the rate is 0. */
int64_t kite_bucket_wait(struct kite_bucket *b, int64_t now);
/* A new rate (SwapLimiter): a new bucket, drained when the old one had no token, so that a
 * rate change does not hand out a token early. A rate equal to the old one keeps the bucket. */
void kite_bucket_set_rate(struct kite_bucket *b, double rate, int64_t now);

struct kite_name_queue {
    char **v;            /* ring of names, some of them removed (absent from `in`) */
    size_t head, n, cap;
    struct kite_map in;  /* the names queued (values unused) */
};
/* Appends name unless queued; returns whether it was added. */
bool kite_name_queue_add(struct kite_name_queue *q, const char *name);
/* Removes name if queued (O(1): its slot is skipped later). */
void kite_name_queue_remove(struct kite_name_queue *q, const char *name);
/* The first queued name (borrowed until the next change), or NULL. */
const char *kite_name_queue_peek(struct kite_name_queue *q);
/* Removes the first queued name. */
void kite_name_queue_pop(struct kite_name_queue *q);
static inline size_t kite_name_queue_len(const struct kite_name_queue *q) { return q->in.len; }
void kite_name_queue_release(struct kite_name_queue *q);
