/* Housekeeping, on one thread that wakes every KITE_HOUSEKEEPING_PERIOD_S:
 * - compaction: every compact_interval_s up to the revision seen one interval earlier, as
 *   kube-apiserver's compactor does, and ahead of schedule when more than KITE_HISTORY_MAX
 *   revisions piled up (a fast write rate would otherwise grow the store by millions of rows
 *   between two compactions);
 * - event expiry: events whose last occurrence is older than the TTL are deleted (etcd leases
 *   do this for kube-apiserver, --event-ttl=1h). */
#include "apiserver/internal.h"
#include "base/clock.h"

#include <time.h>

static const char *const EVENT_TIME_FIELDS[] = {"lastTimestamp", "eventTime", "firstTimestamp"};

/* When the event last happened: lastTimestamp, eventTime (MicroTime), series.lastObservedTime,
 * or its creation time. */
static int64_t event_time(json_object *ev) {
    int64_t t = 0, v;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(EVENT_TIME_FIELDS); i++) {
        const char *s = kite_obj_str(ev, EVENT_TIME_FIELDS[i]);
        if (s && kite_time_parse(s, &v) == 0 && v > t) t = v;
    }
    const char *s = kite_obj_str(kite_obj_get(ev, "series"), "lastObservedTime");
    if (s && kite_time_parse(s, &v) == 0 && v > t) t = v;
    if (!t && (s = kite_meta_str(ev, "creationTimestamp")) && kite_time_parse(s, &v) == 0) t = v;
    return t;
}

static void expire_events(struct kite_apiserver *s) {
    const struct kite_resource *r = kite_registry_find("", "v1", "events");
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev;
    bool more;
    if (kite_wcache_list(storage_cache(s, r), "/registry/events/", NULL, 0, NULL, NULL, &recs, &n, &rev, &more) < 0)
        return;
    int64_t cutoff = kite_now_wall(kite_clock_real()) - s->event_ttl_s * KITE_NS_PER_SEC;
    for (size_t i = 0; i < n; i++) {
        int64_t t = event_time(record_object(recs[i]));
        if (t && t < cutoff) {
            /* conditional: an event updated meanwhile (count+1) is not deleted */
            struct kite_write w = {.type = KITE_WRITE_DELETE, .key = recs[i]->key, .expect_mod_rev = recs[i]->mod_rev};
            kite_store_write(s->store, &w, NULL, NULL);
        }
        kite_record_unref(recs[i]);
    }
    free(recs);
}

void *housekeeping_main(void *ud) {
    struct kite_apiserver *s = ud;
    int64_t last_rev = kite_store_rev(s->store);
    int64_t next_compact = kite_now_mono(kite_clock_real()) + s->compact_interval_s * KITE_NS_PER_SEC;
    int64_t period = KITE_MIN(KITE_HOUSEKEEPING_PERIOD_S, s->compact_interval_s);
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts;
        kite_cond_deadline(&ts, period * KITE_NS_PER_SEC);
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
        if (s->stopping) break;
        pthread_mutex_unlock(&s->mu);
        int64_t now = kite_now_mono(kite_clock_real()), rev = kite_store_rev(s->store);
        if (now >= next_compact) {
            if (last_rev > kite_store_compacted_rev(s->store)) kite_store_compact(s->store, last_rev);
            last_rev = rev;
            next_compact = now + s->compact_interval_s * KITE_NS_PER_SEC;
        } else if (rev - kite_store_compacted_rev(s->store) > KITE_HISTORY_MAX) {
            kite_store_compact(s->store, rev - KITE_HISTORY_MAX / 2);
        }
        expire_events(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
