/* The public store functions: pick a backend by the url's scheme at open, then dispatch through
 * its row of struct kite_store_ops. What holds for every backend (argument checks, the blocking
 * write wrapper) lives here. */
#include "store/store.h"

#include <pthread.h>

static const struct kite_store_ops *const backends[] = {
    &kite_store_sqlite_ops,
    &kite_store_etcd_ops,
};

int kite_store_open(const char *url, const struct kite_store_options *opts, struct kite_store **ret,
                    char **ret_error) {
    if (ret_error) *ret_error = NULL;
    static const struct kite_store_options defaults = {0};
    for (size_t i = 0; url && i < sizeof(backends) / sizeof(backends[0]); i++) {
        const char *scheme = backends[i]->scheme;
        if (!kite_startswith(url, scheme)) continue;
        if (!url[strlen(scheme)]) break;
        return backends[i]->open(url + strlen(scheme), opts ? opts : &defaults, ret, ret_error);
    }
    if (ret_error) *ret_error = kite_asprintf("store url \"%s\": not \"sqlite:PATH\" or \"etcd:URL,...\"", url ? url : "");
    return -EINVAL;
}

void kite_store_close(struct kite_store *s) {
    if (s) s->ops->close(s);
}

int64_t kite_store_rev(struct kite_store *s) { return s->ops->rev(s); }
int kite_store_health(struct kite_store *s, char **ret_why) {
    if (ret_why) *ret_why = NULL;
    return s->ops->health ? s->ops->health(s, ret_why) : 0;
}
int64_t kite_store_applied_rev(struct kite_store *s) { return s->ops->applied_rev(s); }
int64_t kite_store_compacted_rev(struct kite_store *s) { return s->ops->compacted_rev(s); }

int kite_store_submit(struct kite_store *s, const struct kite_write *w, kite_write_cb cb, void *ud) {
    if (!w || !w->key || !w->key[0] || !cb || (unsigned)w->type > KITE_WRITE_DELETE) return -EINVAL;
    bool del = w->type == KITE_WRITE_DELETE;
    if (!del && w->len && !w->value) return -EINVAL;
    if (strlen(w->key) > KITE_STORE_KEY_MAX || (!del && w->len > KITE_STORE_VALUE_MAX)) return -E2BIG;
    return s->ops->submit(s, w, cb, ud);
}

struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool done;
    int err;
    int64_t rev;
    struct kite_record *rec;
};

static void sync_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    struct sync_wait *w = ud;
    pthread_mutex_lock(&w->mu);
    w->err = err;
    w->rev = rev;
    w->rec = kite_record_ref(rec);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

int kite_store_write(struct kite_store *s, const struct kite_write *w, int64_t *ret_rev,
                     struct kite_record **ret_rec) {
    struct sync_wait sw = { .mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
    int r = kite_store_submit(s, w, sync_done, &sw);
    if (r < 0) return r;
    pthread_mutex_lock(&sw.mu);
    while (!sw.done) pthread_cond_wait(&sw.cond, &sw.mu);
    pthread_mutex_unlock(&sw.mu);
    pthread_mutex_destroy(&sw.mu);
    pthread_cond_destroy(&sw.cond);
    if (ret_rev) *ret_rev = sw.rev;
    if (ret_rec)
        *ret_rec = sw.rec;
    else
        kite_record_unref(sw.rec);
    return sw.err;
}

int kite_store_get(struct kite_store *s, const char *key, struct kite_record **ret) {
    return s->ops->get(s, key, ret);
}

int kite_store_range(struct kite_store *s, const char *prefix, int64_t at_rev, const char *start_after,
                     size_t limit, struct kite_record ***ret, size_t *ret_n, bool *ret_more) {
    return s->ops->range(s, prefix ? prefix : "", at_rev, start_after, limit, ret, ret_n, ret_more);
}

void kite_store_stats(struct kite_store *s, struct kite_store_stats *ret) { s->ops->stats(s, ret); }

int kite_store_compact(struct kite_store *s, int64_t rev) {
    if (rev <= 0) return 0;
    if (rev > kite_store_rev(s)) return -ERANGE;
    return s->ops->compact(s, rev);
}

int kite_store_subscribe(struct kite_store *s, const char *prefix, kite_store_batch_cb cb, void *ud) {
    return s->ops->subscribe(s, prefix ? prefix : "", cb, ud);
}

void kite_store_unsubscribe(struct kite_store *s, kite_store_batch_cb cb, void *ud) {
    s->ops->unsubscribe(s, cb, ud);
}

int kite_store_subscribe_snapshot(struct kite_store *s, const char *prefix, kite_store_batch_cb cb, void *ud,
                                  struct kite_store_replay *replay, struct kite_record ***ret_recs,
                                  size_t *ret_n, int64_t *ret_rev) {
    return s->ops->subscribe_snapshot(s, prefix ? prefix : "", cb, ud, replay, ret_recs, ret_n, ret_rev);
}

int kite_store_history(struct kite_store *s, const char *prefix, int64_t from_rev, kite_store_event_cb cb,
                       void *ud) {
    return s->ops->history(s, prefix ? prefix : "", from_rev, cb, ud);
}
