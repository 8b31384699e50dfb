/* Housekeeping, on one thread that wakes every KITE_NODE_STATE_PERIOD_S (the node states of
 * nodestate.c are computed each time), and every KITE_HOUSEKEEPING_PERIOD_S does:
 * - compaction: every compact_interval_s up to the revision seen one interval earlier, as
 *   kube-apiserver's compactor does, and ahead of schedule when more than KITE_HISTORY_MAX
 *   revisions piled up (a fast write rate would otherwise grow the store by millions of rows
 *   between two compactions);
 * - expiry: objects of kinds that expire (events) whose last occurrence is older than the TTL
 *   are deleted (etcd leases do this for kube-apiserver, --event-ttl=1h). */
#include "apiserver/internal.h"
#include "base/clock.h"
#include "base/log.h"

#include <time.h>

/* Deletes the objects of one storage folder that last happened before the TTL. */
static void expire_storage(struct kite_apiserver *s, const struct kite_storage *st) {
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev;
    bool more;
    _cleanup_free_ char *prefix = kite_object_prefix(st->res, NULL);
    if (kite_wcache_list(st->cache, prefix, NULL, 0, NULL, NULL, &recs, &n, &rev, &more) < 0) return;
    int64_t cutoff = kite_now_wall(s->clock) - s->event_ttl_s * KITE_NS_PER_SEC;
    for (size_t i = 0; i < n; i++) {
        int64_t t = st->res->last_seen(record_object(recs[i]));
        if (t && t < cutoff) {
            /* conditional: an event updated meanwhile (count+1) is not deleted */
            struct kite_write w = {.type = KITE_WRITE_DELETE, .key = recs[i]->key, .expect_mod_rev = recs[i]->mod_rev};
            int r = kite_store_write(s->store, &w, NULL, NULL);
            if (r < 0 && r != -ESTALE && r != -ENOENT) /* changed or gone meanwhile: not expired after all */
                log_error("apiserver", "expiry failed: key=%s error=\"%s\"", recs[i]->key, strerror(-r));
        }
        kite_record_unref(recs[i]);
    }
    free(recs);
}

static void expire(struct kite_apiserver *s) {
    for (size_t i = 0; i < s->n_storages; i++)
        if (s->storages[i].res->last_seen) expire_storage(s, &s->storages[i]);
}

/* A failed compaction is retried at the next period; it is logged, as it means the store is
 * growing without bound. */
static void compact(struct kite_apiserver *s, int64_t rev, const char *why) {
    int r = kite_store_compact(s->store, rev);
    if (r < 0) log_error("apiserver", "compaction failed: rev=%lld reason=\"%s\" error=\"%s\"", (long long)rev, why, strerror(-r));
}

void apiserver_housekeeping_once(struct kite_apiserver *s) { expire(s); }

void *housekeeping_main(void *ud) {
    struct kite_apiserver *s = ud;
    int64_t last_rev = kite_store_rev(s->store);
    int64_t next_compact = kite_now_mono(s->clock) + s->compact_interval_s * KITE_NS_PER_SEC;
    int64_t period = KITE_MIN(KITE_NODE_STATE_PERIOD_S, s->compact_interval_s);
    int64_t next_expire = kite_now_mono(s->clock) + KITE_HOUSEKEEPING_PERIOD_S * KITE_NS_PER_SEC;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts;
        kite_cond_deadline(&ts, period * KITE_NS_PER_SEC);
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
        if (s->stopping) break;
        pthread_mutex_unlock(&s->mu);
        int64_t now = kite_now_mono(s->clock), rev = kite_store_rev(s->store);
        if (now >= next_compact) {
            if (last_rev > kite_store_compacted_rev(s->store)) compact(s, last_rev, "scheduled");
            last_rev = rev;
            next_compact = now + s->compact_interval_s * KITE_NS_PER_SEC;
        } else if (rev - kite_store_compacted_rev(s->store) > KITE_HISTORY_MAX) {
            compact(s, rev - KITE_HISTORY_MAX / 2, "history over its bound");
        }
        if (now >= next_expire) {
            expire(s);
            next_expire = now + KITE_HOUSEKEEPING_PERIOD_S * KITE_NS_PER_SEC;
        }
        nodestate_pass(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
