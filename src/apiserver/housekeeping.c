/* Housekeeping, on one thread that wakes every KITE_NODE_STATE_PERIOD_S (the node states of
 * nodestate.c are computed each time), and every KITE_HOUSEKEEPING_PERIOD_S does:
 * - compaction: every compact_interval_s up to the revision seen one interval earlier, as
 *   kube-apiserver's compactor does, and ahead of schedule when more than KITE_HISTORY_MAX
 *   revisions piled up (a fast write rate would otherwise grow the store by millions of rows
 *   between two compactions): then back to KITE_HISTORY_MAX at every pass past it by
 *   KITE_HISTORY_SLACK, a few seconds' writes at a time. (Compacting back to half the bound, as
 *   before, deleted 500,000 revisions at once every minute or so at 9,000 writes/s: tens of
 *   steps back to back on the store's writer, a WAL grown past its hard bound, and every
 *   renewal stalled 4-7 s.);
 * - expiry: objects of kinds that expire (events) whose last occurrence is older than the TTL
 *   are deleted (etcd leases do this for kube-apiserver, --event-ttl=1h); a folder is listed
 *   only when it changed or its earliest object's time came. */
#include "apiserver/internal.h"
#include "base/clock.h"
#include "base/log.h"

#include <time.h>

/* What expiry knows of one storage folder between two housekeeping periods: a watch of its
 * changes, and when its earliest object expires. With neither a change nor that time come, the
 * folder is not listed: a store holding 150k events costs nothing while it is quiet. */
struct apiserver_expiry {
    struct kite_watcher *w; /* NULL: list at the next period */
    int64_t due;            /* wall: no object expires before (0: none can) */
};

static void expiry_later(int64_t *due, int64_t at) {
    if (!*due || at < *due) *due = at;
}

/* The object's last occurrence, from the record's parse when another reader made one, else from
 * one of its own dropped at once. */
static int64_t last_seen_of(const struct kite_storage *st, struct kite_record *rec) {
    json_object *o = kite_record_cache(rec), *own = o ? NULL : kite_apiserver_record_parse(rec);
    int64_t t = st->res->last_seen(o ? o : own);
    json_object_put(own);
    return t;
}

/* Deletes the objects of one storage folder that last happened before the TTL. */
static void expire_storage(struct kite_apiserver *s, const struct kite_storage *st, struct apiserver_expiry *x) {
    int64_t ttl = s->event_ttl_s * KITE_NS_PER_SEC, now = kite_now_wall(s->clock);
    _cleanup_free_ char *prefix = kite_object_prefix(st->res, NULL);
    if (x->w) {
        struct kite_watch_event evs[64];
        int k;
        while ((k = kite_watcher_next(x->w, evs, KITE_ARRAY_SIZE(evs))) > 0)
            for (int i = 0; i < k; i++) {
                int64_t t = evs[i].type == KITE_EV_DELETED ? 0 : last_seen_of(st, evs[i].rec);
                if (t) expiry_later(&x->due, t + ttl + 1); /* expired once older than the TTL */
                kite_record_unref(evs[i].rec);
                kite_record_unref(evs[i].prev);
            }
        if (k == 0 && (!x->due || now < x->due)) return;
        if (k < 0) kite_watcher_close(TAKE_PTR(x->w));
    }
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev;
    bool more;
    if (kite_wcache_list(st->cache, prefix, NULL, 0, NULL, NULL, &recs, &n, &rev, &more) < 0) return;
    s->expiry_scans++;
    int64_t cutoff = now - ttl;
    x->due = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t t = last_seen_of(st, recs[i]);
        if (t && t < cutoff) {
            /* conditional: an event updated meanwhile (count+1) is not deleted */
            struct kite_write w = {.type = KITE_WRITE_DELETE, .key = recs[i]->key, .expect_mod_rev = recs[i]->mod_rev};
            int r = kite_store_write(s->store, &w, NULL, NULL);
            if (r < 0 && r != -ESTALE && r != -ENOENT) /* changed or gone meanwhile: not expired after all */
                log_error("apiserver", "expiry failed: key=%s error=\"%s\"", recs[i]->key, strerror(-r));
        } else if (t) {
            expiry_later(&x->due, t + ttl + 1);
        }
        kite_record_unref(recs[i]);
    }
    free(recs);
    /* from the list's revision on, every change is seen (the deletes above too: harmless) */
    if (!x->w && kite_wcache_watch(st->cache, prefix, rev, 1u << 20, (size_t)64 << 20, NULL, NULL, NULL, &x->w) < 0)
        x->w = NULL;
}

/* The housekeeping thread and apiserver_housekeeping_once (tests) share the state. */
static pthread_mutex_t expiry_mu = PTHREAD_MUTEX_INITIALIZER;

static void expire(struct kite_apiserver *s) {
    pthread_mutex_lock(&expiry_mu);
    if (!s->expiry) s->expiry = kite_calloc(s->n_storages, sizeof *s->expiry);
    for (size_t i = 0; i < s->n_storages; i++)
        if (s->storages[i].res->last_seen) expire_storage(s, &s->storages[i], &s->expiry[i]);
    pthread_mutex_unlock(&expiry_mu);
}

void kite_apiserver_expiry_free(struct kite_apiserver *s) {
    if (!s->expiry) return;
    for (size_t i = 0; i < s->n_storages; i++) kite_watcher_close(s->expiry[i].w);
    free(TAKE_PTR(s->expiry));
}

int64_t kite_apiserver_history_target(int64_t rev, int64_t compacted) {
    return rev - compacted > KITE_HISTORY_MAX + KITE_HISTORY_SLACK ? rev - KITE_HISTORY_MAX : 0;
}

/* A failed compaction is retried at the next period; it is logged, as it means the store is
 * growing without bound. */
static void compact(struct kite_apiserver *s, int64_t rev, const char *why) {
    int r = kite_store_compact(s->store, rev);
    if (r < 0) log_error("apiserver", "compaction failed: rev=%lld reason=\"%s\" error=\"%s\"", (long long)rev, why, strerror(-r));
}

void kite_apiserver_housekeeping_once(struct kite_apiserver *s) { expire(s); }

void *kite_apiserver_housekeeping_main(void *ud) {
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
        } else {
            int64_t to = kite_apiserver_history_target(rev, kite_store_compacted_rev(s->store));
            if (to > 0) compact(s, to, "history over its bound");
        }
        if (now >= next_expire) {
            expire(s);
            next_expire = now + KITE_HOUSEKEEPING_PERIOD_S * KITE_NS_PER_SEC;
        }
        kite_apiserver_nodestate_pass(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
