/* A keyed work queue as client-go's rate-limited queue is used by the workload controllers: a
 * key added while already queued is queued once, at the earlier of its two times (AddAfter);
 * keys come out when their time is due. A key whose sync failed is added again after its own
 * exponential back-off (AddRateLimited: client-go's ItemExponentialFailureRateLimiter, 5 ms
 * doubling per failure to 1000 s), until the owner forgets it (Forget, after a sync that
 * succeeded). Not thread-safe: the owner locks. */
#pragma once
#include "base/clock.h"
#include "base/map.h"
#include "framework/timers.h"

#define KITE_WQ_BACKOFF_BASE_NS (5 * KITE_NS_PER_MS)
#define KITE_WQ_BACKOFF_MAX_NS (1000 * KITE_NS_PER_SEC)

struct kite_wq {
    struct kite_map items;    /* key -> struct kite_wq_item */
    struct kite_timers timers;
    struct kite_map failures; /* key -> failures since its last forget (a uintptr_t) */
    int64_t backoff_base_ns;  /* the owner's first back-off; 0 = KITE_WQ_BACKOFF_BASE_NS */
    int64_t backoff_max_ns;   /* the owner's cap; 0 = KITE_WQ_BACKOFF_MAX_NS */
};
/* Queues key (copied) at `at` (monotonic ns), or moves it earlier when already queued later. */
void kite_wq_add(struct kite_wq *q, const char *key, int64_t at);
/* The first key due at now (malloc'ed; no longer queued), or NULL. */
char *kite_wq_pop_due(struct kite_wq *q, int64_t now);
/* ns from now to the next key's time (0 when one is due), or -1 when empty. */
int64_t kite_wq_next(const struct kite_wq *q, int64_t now);
bool kite_wq_due(const struct kite_wq *q, int64_t now);
/* Whether key is queued. */
bool kite_wq_queued(const struct kite_wq *q, const char *key);
/* Queues key at now + its back-off (capped at backoff_max_ns), and counts the failure. */
void kite_wq_add_backoff(struct kite_wq *q, const char *key, int64_t now);
/* Clears key's failures: its next back-off is the base again. */
void kite_wq_forget(struct kite_wq *q, const char *key);
/* Failures counted for key since its last forget (NumRequeues). */
unsigned kite_wq_failures(const struct kite_wq *q, const char *key);
void kite_wq_release(struct kite_wq *q);
