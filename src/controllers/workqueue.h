/* A keyed work queue as client-go's rate-limited queue is used by the workload controllers: a
 * key added while already queued is queued once, at the earlier of its two times; keys come
 * out when their time is due. Not thread-safe: the owner locks. */
#pragma once
#include "base/map.h"
#include "controllers/timers.h"

struct kite_wq {
    struct kite_map items; /* key -> struct kite_wq_item */
    struct kite_timers timers;
};
/* Queues key (copied) at `at` (monotonic ns), or moves it earlier when already queued later. */
void kite_wq_add(struct kite_wq *q, const char *key, int64_t at);
/* The first key due at now (malloc'ed; no longer queued), or NULL. */
char *kite_wq_pop_due(struct kite_wq *q, int64_t now);
/* ns from now to the next key's time (0 when one is due), or -1 when empty. */
int64_t kite_wq_next(const struct kite_wq *q, int64_t now);
bool kite_wq_due(const struct kite_wq *q, int64_t now);
void kite_wq_release(struct kite_wq *q);
