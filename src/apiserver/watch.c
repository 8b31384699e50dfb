/* Watch streams. A watch is a kite_watcher on the resource's watch cache plus a chunked HTTP
 * stream: the store's writer thread queues events and wakes the stream; the HTTP layer pulls
 * them when the socket can take more. A watcher that falls too far behind is dropped so no
 * client can slow the writer or other watchers: its queue is released at once and its stream
 * ends with an ERROR event (410 Expired), as kube-apiserver ends a watch the client must
 * restart with a list. */
#include "apiserver/internal.h"
#include "api/protobuf.h"
#include "api/selector.h"
#include "base/backoff.h"
#include "base/clock.h"
#include "json/parse.h"

#include <stdio.h>

/* Events and bytes a watcher may lag behind before it is dropped (why these: wcache.h,
 * KITE_WATCHER_QUEUE_DEFAULT / _BYTES_DEFAULT); --watch-queue-events / --watch-queue-bytes
 * change them (the e2e tests lower them to fill a queue with few writes). */
#define KITE_WATCH_QUEUE 10000
#define KITE_WATCH_QUEUE_BYTES ((size_t)16 << 20)
#define KITE_WATCH_BATCH 128          /* events rendered per pull */

struct watch {
    struct req *rq;
    struct kite_watcher *watcher;
    struct kite_http_stream *stream;
    pthread_mutex_t mu;               /* guards stream (notify may race stream_begin) */
    struct kite_label_selector *ls;
    struct kite_field_selector *fs;
    struct kite_record **initial;     /* synthetic ADDED events still to send */
    size_t n_initial, next_initial;
    int64_t last_rev;
    int64_t deadline_ns, next_bookmark_ns;
    bool bookmarks;
    bool initial_end;                 /* watch-list: a bookmark marks the end of the initial events */
    bool table_columns_sent;
    char *error_event;                /* a terminal ERROR event to send, then end */
};

static bool matches(struct watch *w, struct kite_record *rec) {
    struct req *rq = w->rq;
    if (rq->name) { /* the key's last segment is the name: no parse of every object watched */
        const char *slash = strrchr(rec->key, '/');
        if (!kite_streq(slash ? slash + 1 : rec->key, rq->name)) return false;
    }
    return kite_apiserver_record_matches(rq->res, rec, w->ls, w->fs);
}

/* Selector transitions, as kube-apiserver's cacher: starting to match is ADDED, ceasing to
 * match is DELETED. */
static int filter(const struct kite_watch_event *ev, void *ud) {
    struct watch *w = ud;
    switch (ev->type) {
    case KITE_EV_ADDED: return matches(w, ev->rec) ? KITE_EV_ADDED : 0;
    case KITE_EV_DELETED: return matches(w, ev->rec) ? KITE_EV_DELETED : 0;
    default: {
        bool now = matches(w, ev->rec), before = ev->prev && matches(w, ev->prev);
        if (now && before) return KITE_EV_MODIFIED;
        if (now) return KITE_EV_ADDED;
        if (before) return KITE_EV_DELETED;
        return 0;
    }
    }
}

static void notify(void *ud) {
    struct watch *w = ud;
    pthread_mutex_lock(&w->mu);
    /* also when the watcher was dropped: pull then ends the stream with the ERROR event */
    if (w->stream) kite_http_stream_wake(w->stream);
    pthread_mutex_unlock(&w->mu);
}

static const char *type_name(int t) {
    return t == KITE_EV_ADDED ? "ADDED" : t == KITE_EV_MODIFIED ? "MODIFIED" : "DELETED";
}

/* The event written as a JSON line at out[start..] becomes a protobuf frame when the watch
 * negotiated protobuf. An object kite's schemas cannot carry (an unknown field kept from a JSON
 * write) travels as its JSON text in the RawExtension. */
static void finish_event(struct watch *w, struct kite_buf *out, size_t start) {
    if (!w->rq->protobuf) return;
    enum json_tokener_error e;
    size_t used;
    json_object *ev = kite_json_parse(out->p + start, out->len - start, KITE_JSON_MAX_DEPTH, &e, &used);
    out->len = start;
    const char *type = kite_obj_str(ev, "type");
    json_object *obj = kite_obj_get(ev, "object");
    if (!type || !obj) {
        json_object_put(ev);
        return;
    }
    struct kite_buf raw = {0};
    if (kite_pb_encode_any(obj, &raw) < 0) {
        size_t len;
        const char *j = json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
        kite_buf_append(&raw, j, len);
    }
    kite_pb_watch_frame(type, raw.p ? raw.p : "", raw.len, out);
    kite_buf_release(&raw);
    json_object_put(ev);
}

/* The kind and apiVersion of a bookmark's object: the resource's, or PartialObjectMetadata's. */
static void bookmark_type(struct watch *w, const char **kind, const char **api_version) {
    *kind = w->rq->partial ? "PartialObjectMetadata" : w->rq->res->kind;
    *api_version = w->rq->partial ? kite_apiserver_negotiated_meta_api_version(w->rq) : kite_resource_api_version(w->rq->res);
}

/* Writes one event: rec's object with resourceVersion rev. */
static void emit(struct watch *w, int type, struct kite_record *rec, int64_t rev, struct kite_buf *out) {
    struct req *rq = w->rq;
    size_t start = out->len;
    kite_buf_printf(out, "{\"type\":\"%s\",\"object\":", type_name(type));
    if (rq->partial) {
        kite_apiserver_render_partial(rq, rec, out);
    } else if (rq->table) {
        kite_apiserver_table_begin(rq, out, rev, NULL, -1, !w->table_columns_sent);
        w->table_columns_sent = true;
        kite_apiserver_table_row(rq, out, rec, true);
        kite_apiserver_table_end(out);
    } else if (rev == rec->mod_rev || rq->res->from_storage) {
        kite_apiserver_render_record(rq, rec, out);
    } else {
        kite_object_render(rec->value, rec->len, rev, out);
    }
    kite_buf_puts(out, "}\n");
    finish_event(w, out, start);
    if (rev > w->last_rev) w->last_rev = rev;
}

/* A bookmark carries the revision the watch is current to, which for a filtered watch is
 * usually past its last event: a client resuming from it skips what it never wanted. */
static void emit_bookmark(struct watch *w, struct kite_buf *out) {
    int64_t rev = KITE_MAX(w->last_rev, kite_watcher_progress(w->watcher));
    if (!rev) return;
    w->last_rev = rev;
    const char *kind, *av;
    bookmark_type(w, &kind, &av);
    size_t start = out->len;
    kite_buf_printf(out, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%lld\"}}}\n",
                    kind, av, (long long)rev);
    finish_event(w, out, start);
}

/* Watch-list (sendInitialEvents=true): the bookmark after the initial events, at the
 * revision of the state they showed, annotated as client-go's reflector waits for. */
static void emit_initial_end(struct watch *w, struct kite_buf *out) {
    const char *kind, *av;
    bookmark_type(w, &kind, &av);
    size_t start = out->len;
    kite_buf_printf(out, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%lld\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n",
                    kind, av, (long long)w->last_rev);
    finish_event(w, out, start);
}

/* As kube-apiserver's cacher: a bookmark about every KITE_WATCH_BOOKMARK_S, and one 2 s before
 * the watch times out, so a client's next watch starts as close to now as possible. */
static int64_t next_bookmark(const struct watch *w, int64_t now) {
    int64_t t = now + KITE_WATCH_BOOKMARK_S * KITE_NS_PER_SEC, pre = w->deadline_ns - 2 * KITE_NS_PER_SEC;
    if (pre < t) t = pre;
    return t < now ? INT64_MAX : t;
}

static int pull(void *ud, struct kite_buf *out) {
    struct watch *w = ud;
    if (w->error_event) {
        size_t start = out->len;
        kite_buf_puts(out, w->error_event);
        finish_event(w, out, start);
        return -1;
    }
    if (w->next_initial < w->n_initial) {
        size_t end = KITE_MIN(w->n_initial, w->next_initial + KITE_WATCH_BATCH);
        for (; w->next_initial < end; w->next_initial++) {
            emit(w, KITE_EV_ADDED, w->initial[w->next_initial], w->initial[w->next_initial]->mod_rev, out);
            kite_record_unref(w->initial[w->next_initial]);
            w->initial[w->next_initial] = NULL;
        }
        if (w->next_initial < w->n_initial) {
            kite_http_stream_wake(w->stream);
            return 1;
        }
    }
    if (w->initial_end) {
        emit_initial_end(w, out);
        w->initial_end = false;
    }
    struct kite_watch_event ev[KITE_WATCH_BATCH];
    int n = kite_watcher_next(w->watcher, ev, KITE_WATCH_BATCH);
    if (n == -EPIPE) {
        /* dropped for falling behind (its backlog is already released): the client re-lists */
        struct kite_watcher_stats st;
        kite_watcher_stats(w->watcher, &st);
        size_t start = out->len;
        kite_buf_printf(out, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"watcher too slow: %zu events / %zu bytes behind\",\"reason\":\"Expired\",\"code\":410}}\n",
                        st.behind, st.behind_bytes);
        finish_event(w, out, start);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        /* an object that stopped matching the selector leaves as DELETED carrying its last
         * matching state at the event's revision, as kube-apiserver's cacher sends it */
        bool left = ev[i].type == KITE_EV_DELETED && ev[i].prev && !ev[i].rec->deleted;
        emit(w, (int)ev[i].type, left ? ev[i].prev : ev[i].rec, ev[i].rev, out);
        kite_record_unref(ev[i].rec);
        kite_record_unref(ev[i].prev);
    }
    if (n == KITE_WATCH_BATCH) kite_http_stream_wake(w->stream);
    int64_t now = kite_now_mono(w->rq->srv->clock);
    if (now >= w->deadline_ns) return -1;
    if (w->bookmarks && now >= w->next_bookmark_ns) {
        emit_bookmark(w, out);
        w->next_bookmark_ns = next_bookmark(w, now + 1);
    }
    kite_http_stream_wake_at(w->stream, w->bookmarks ? KITE_MIN(w->deadline_ns, w->next_bookmark_ns) : w->deadline_ns);
    return out->len ? 1 : 0;
}

static void watch_free(struct watch *w) {
    kite_watcher_close(w->watcher);
    for (size_t i = w->next_initial; i < w->n_initial; i++) kite_record_unref(w->initial[i]);
    free(w->initial);
    kite_label_selector_free(w->ls);
    kite_field_selector_free(w->fs);
    free(w->error_event);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void done(void *ud) {
    struct watch *w = ud;
    struct req *rq = w->rq;
    /* handle_watch may still be inside its critical section right after stream_begin */
    pthread_mutex_lock(&w->mu);
    w->stream = NULL;
    pthread_mutex_unlock(&w->mu);
    kite_apiserver_metrics_watch_delta(rq->srv->metrics, kite_apiserver_req_resource_label(rq), -1);
    kite_apiserver_metrics_observe(rq->srv->metrics, "watch", kite_apiserver_req_resource_label(rq), 200,
                    kite_now_mono(rq->srv->clock) - rq->start_ns);
    kite_apiserver_audit(rq, KITE_AUDIT_RESPONSE_COMPLETE, 200);
    watch_free(w);
    kite_apiserver_req_free(rq);
}

static bool list_filter(struct kite_record *rec, void *ud) { return matches(ud, rec); }

void kite_apiserver_handle_watch(struct req *rq) {
    struct kite_http_req *h = rq->http;
    struct kite_wcache *cache = kite_apiserver_storage_cache(rq->srv, rq->res);
    int64_t from = 0, timeout_s = 0;
    if (!kite_apiserver_list_options_ok(rq)) return;
    const char *rv = kite_http_query(h, "resourceVersion");
    if (rv && *rv && (kite_parse_int64(rv, &from) < 0 || from < 0)) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "invalid resource version \"%s\"", rv);
        return;
    }
    const char *ts = kite_http_query(h, "timeoutSeconds");
    if (ts && *ts && (kite_parse_int64(ts, &timeout_s) < 0 || timeout_s < 0)) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "invalid timeoutSeconds \"%s\"", ts);
        return;
    }
    struct watch *w = kite_calloc(1, sizeof *w);
    w->rq = rq;
    pthread_mutex_init(&w->mu, NULL);
    if (!kite_apiserver_parse_selectors(rq, &w->ls, &w->fs)) {
        watch_free(w);
        return;
    }
    const char *bm = kite_http_query(h, "allowWatchBookmarks");
    w->bookmarks = kite_apiserver_query_true(bm);
    int64_t now = kite_now_mono(rq->srv->clock);
    if (!timeout_s) {
        uint64_t seed = (uint64_t)now;
        timeout_s = KITE_WATCH_MIN_TIMEOUT_S + (int64_t)(kite_rand01(&seed) * KITE_WATCH_MIN_TIMEOUT_S);
    }
    w->deadline_ns = kite_sat_add(now, kite_sec_to_ns(timeout_s)); /* a huge timeoutSeconds: never */
    w->next_bookmark_ns = next_bookmark(w, now);

    _cleanup_free_ char *prefix = kite_object_prefix(rq->res, rq->ns);
    int r = 0;
    /* sendInitialEvents (validated above: with resourceVersionMatch=NotOlderThan) overrides
     * the legacy meaning of resourceVersion: true sends the state at least as new as it, false
     * starts from it, or from now when it is unset or "0" */
    const char *sie = kite_http_query(h, "sendInitialEvents");
    bool initial = sie ? kite_apiserver_query_true(sie) : from == 0;
    if (sie && from > kite_wcache_rev(cache)) {
        watch_free(w);
        kite_apiserver_reply_too_large_rv(rq, from, kite_wcache_rev(cache));
        return;
    }
    if (sie && !initial && from == 0) from = kite_wcache_rev(cache);
    if (initial) {
        /* the current state as synthetic ADDED events, then changes after it */
        bool more;
        w->initial_end = sie && w->bookmarks;
        r = kite_wcache_list(cache, prefix, NULL, 0, list_filter, w, &w->initial, &w->n_initial, &from, &more);
    }
    w->last_rev = from;
    size_t queue = rq->srv->watch_queue ? rq->srv->watch_queue : KITE_WATCH_QUEUE,
           queue_bytes = rq->srv->watch_queue_bytes ? rq->srv->watch_queue_bytes : KITE_WATCH_QUEUE_BYTES;
    /* A watch with initial events may fall behind by as much again as they hold: the changes
     * made while they stream (a watch-list of 92,000 Leases takes seconds, and 9,000 renewals
     * come each of them) wait behind them. It then holds at most twice its state. */
    queue += w->n_initial;
    for (size_t i = 0; i < w->n_initial; i++) queue_bytes += sizeof *w->initial[i] + strlen(w->initial[i]->key) + w->initial[i]->len + 2;
    if (r == 0)
        r = kite_wcache_watch(cache, prefix, from, queue, queue_bytes, (w->ls || w->fs || rq->name) ? filter : NULL,
                              notify, w, &w->watcher);
    if (r == -ENODATA) {
        w->error_event = kite_asprintf("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: %lld (%lld)\",\"reason\":\"Expired\",\"code\":410}}\n",
                                       (long long)from, (long long)kite_wcache_oldest_rev(cache));
    } else if (r < 0) {
        watch_free(w);
        kite_apiserver_reply_error(rq, 500, "InternalError", "watch failed: %s", strerror(-r));
        return;
    }
    kite_apiserver_metrics_watch_delta(rq->srv->metrics, kite_apiserver_req_resource_label(rq), 1);
    struct kite_http_stream *st = NULL;
    pthread_mutex_lock(&w->mu);
    kite_apiserver_audit(rq, KITE_AUDIT_RESPONSE_STARTED, 200); /* while the request is readable */
    /* as kube-apiserver: JSON streams say application/json, others add ;stream=watch */
    r = kite_http_stream_begin(h, 200, rq->protobuf ? KITE_PB_WATCH_MEDIA_TYPE : "application/json", pull, done, w, &st);
    if (r < 0) {
        kite_apiserver_audit(rq, KITE_AUDIT_RESPONSE_COMPLETE, 500);
        pthread_mutex_unlock(&w->mu);
        kite_apiserver_metrics_watch_delta(rq->srv->metrics, kite_apiserver_req_resource_label(rq), -1);
        watch_free(w);
        kite_apiserver_req_free(rq);
        return;
    }
    w->stream = st;
    kite_http_stream_wake(st);
    pthread_mutex_unlock(&w->mu);
}
