/* The etcd backend: the watch that feeds the live map and the subscribers, and the resync after a
 * compacted watch (etcd-int.h). */
#include "store/etcd-int.h"

/* ---- the watch: applying changes ---- */

/* Hands evs (revision order; the live map already changed) to every subscriber whose prefix
 * covers some, marks rev applied, releases sub_mu (held since before the live map changed), drops
 * the events' references and wakes the completions. */
static void fan_out_unlock(struct etcd_store *s, struct kite_store_event *evs, size_t n, int64_t rev) {
    if (n) {
        struct kite_store_event *mine = kite_calloc(n, sizeof *mine);
        for (size_t i = 0; i < s->nsubs; i++) {
            size_t m = 0;
            for (size_t j = 0; j < n; j++)
                if (kite_startswith(evs[j].rec->key, s->subs[i].prefix)) mine[m++] = evs[j];
            if (m) s->subs[i].cb(s->subs[i].ud, mine, m);
        }
        free(mine);
    }
    if (rev > s->applied_rev) s->applied_rev = rev;
    pthread_mutex_unlock(&s->sub_mu);
    for (size_t i = 0; i < n; i++) {
        kite_record_unref(evs[i].rec);
        kite_record_unref(evs[i].prev); /* the live map's reference it displaced */
    }
    free(evs);
    pthread_mutex_lock(&s->p_mu);
    pthread_cond_signal(&s->p_cond);
    pthread_mutex_unlock(&s->p_mu);
}

static void apply_events(struct etcd_store *s, struct pb_reader evs_r) {
    struct kite_store_event *evs = NULL;
    size_t n = 0, cap = 0;
    struct pb_field f;
    pthread_mutex_lock(&s->sub_mu);
    pthread_rwlock_wrlock(&s->live_lock);
    while (kite_store_pb_next(&evs_r, &f) > 0) {
        if (f.field != F_WR_EVENTS || f.wire != 2) continue;
        struct pb_reader er = pb_sub(&f);
        struct pb_field g;
        int type = 0;
        struct kv kv = {0};
        while (kite_store_pb_next(&er, &g) > 0) {
            if (g.field == F_EV_TYPE && g.wire == 0) type = (int)g.u;
            else if (g.field == F_EV_KV && g.wire == 2) kite_store_etcd_kv_parse(g.data, g.len, &kv);
        }
        if (!kv.present) continue;
        _cleanup_free_ char *k = kite_store_etcd_key_in(s, kv.key, kv.key_len);
        if (!k) continue;
        struct kite_record *prev = kite_map_get(&s->live, k);
        struct kite_store_event ev = {.rev = kv.mod_rev, .prev = prev};
        if (type == EV_DELETE) {
            if (!prev) continue;
            kite_map_del(&s->live, k);
            ev.type = KITE_WRITE_DELETE;
            ev.rec = kite_record_tombstone(prev, kv.mod_rev);
        } else {
            enum kv_skip why = 0;
            _cleanup_free_ char *err = NULL;
            struct kite_record *rec = kite_store_etcd_kv_record_why(s, &kv, &why, &err);
            if (!rec) {
                if (why == KV_ENVELOPE)
                    log_warn("store", "etcd: the value of %s is kube-apiserver's protobuf that kite does not read (%s): left out", k, err);
                else
                    log_warn("store", "etcd: the value of %s does not open (sealed with another key): left out", k);
                continue;
            }
            kite_map_put(&s->live, rec->key, rec);
            ev.type = prev ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE;
            ev.rec = kite_record_ref(rec);
        }
        if (n == cap) evs = kite_realloc(evs, (cap = cap ? 2 * cap : 8) * sizeof *evs);
        evs[n++] = ev;
    }
    pthread_rwlock_unlock(&s->live_lock);
    fan_out_unlock(s, evs, n, n ? evs[n - 1].rev : 0);
}

static void watch_msg(void *ud, const unsigned char *msg, size_t len) {
    struct etcd_store *s = ud;
    struct pb_reader r = pb_reader(msg, len);
    struct pb_field f;
    int64_t hrev = 0, compact = 0;
    bool created = false, canceled = false, events = false;
    const unsigned char *reason = NULL;
    size_t reason_len = 0;
    while (kite_store_pb_next(&r, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) hrev = kite_store_etcd_header_rev(&f);
        else if (f.field == F_WR_CREATED && f.wire == 0) created = f.u;
        else if (f.field == F_WR_CANCELED && f.wire == 0) canceled = f.u;
        else if (f.field == F_WR_COMPACT_REV && f.wire == 0) compact = (int64_t)f.u;
        else if (f.field == F_WR_CANCEL_REASON && f.wire == 2) reason = f.data, reason_len = f.len;
        else if (f.field == F_WR_EVENTS) events = true;
    }
    if (canceled) {
        if (compact) {
            /* the changes since the last applied revision are gone: the supervisor reads
             * everything again and hands the subscribers the difference (resync) */
            if (compact > s->compact_rev) s->compact_rev = compact;
            log_warn("store", "etcd: the watch from revision %lld was compacted (at %lld): reading everything again",
                     (long long)s->applied_rev + 1, (long long)compact);
            s->resync = true;
        } else {
            log_warn("store", "etcd: the watch was canceled: %.*s", (int)reason_len, reason ? (const char *)reason : "");
        }
        s->watching = false;
        return;
    }
    if (events) {
        apply_events(s, pb_reader(msg, len));
    } else if (!created && hrev > s->applied_rev) {
        /* a progress notification: every change up to hrev was sent */
        pthread_mutex_lock(&s->sub_mu);
        if (hrev > s->applied_rev) s->applied_rev = hrev;
        pthread_mutex_unlock(&s->sub_mu);
        pthread_mutex_lock(&s->p_mu);
        pthread_cond_signal(&s->p_cond);
        pthread_mutex_unlock(&s->p_mu);
    }
}

static void watch_done(void *ud, int status, const char *message) {
    struct etcd_store *s = ud;
    if (!s->stopping) log_warn("store", "etcd: the watch ended (%d: %s)", status, message);
    s->watching = false;
    pthread_mutex_lock(&s->p_mu);
    pthread_cond_signal(&s->sup_cond);
    pthread_mutex_unlock(&s->p_mu);
}

int kite_store_etcd_watch_start(struct etcd_store *s, struct grpc_conn *c) {
    struct kite_buf b = {0};
    _cleanup_free_ char *k = kite_asprintf("%s/", s->prefix);
    _cleanup_free_ char *end = kite_store_etcd_range_end(k);
    size_t m = kite_store_pb_begin(&b, F_WATCH_CREATE);
    kite_store_pb_put_bytes(&b, F_WC_KEY, k, strlen(k));
    kite_store_pb_put_bytes(&b, F_WC_RANGE_END, end, strlen(end));
    kite_store_pb_put_uint(&b, F_WC_START_REV, (uint64_t)s->applied_rev + 1);
    kite_store_pb_put_uint(&b, F_WC_PROGRESS_NOTIFY, 1);
    kite_store_pb_end(&b, m);
    s->watching = true;
    int r = kite_store_grpc_call_start(c, "/etcdserverpb.Watch/Watch", b.p, b.len, true, watch_msg, watch_done, s);
    if (r < 0) s->watching = false;
    kite_buf_release(&b);
    return r < 0 ? r : 0;
}

static int cmp_ev(const void *a, const void *b) {
    const struct kite_store_event *x = a, *y = b;
    return x->rev < y->rev ? -1 : x->rev > y->rev;
}

/* After a compacted watch: reads every key at the current revision R on c and hands the
 * subscribers what changed since the last applied revision, as events in revision order (a
 * changed key at its mod_revision, which is past the applied revision; a key gone as a DELETE at
 * R, when it went is no longer known). Then the watch goes on from R. */
int kite_store_etcd_resync(struct etcd_store *s, struct grpc_conn *c) {
    _cleanup_free_ char *k = kite_asprintf("%s/", s->prefix);
    _cleanup_free_ char *end = kite_store_etcd_range_end(k);
    struct kite_buf req = {0}, resp = {0};
    kite_store_etcd_encode_range(&req, k, strlen(k), end, 0, 0);
    char *msg = NULL;
    int st = kite_store_etcd_call_on(s, c, "/etcdserverpb.KV/Range", &req, &resp, &msg);
    kite_buf_release(&req);
    free(msg);
    if (st != GRPC_OK) {
        kite_buf_release(&resp);
        return -EIO;
    }
    struct kite_map fresh = {0};
    int64_t rev = 0;
    struct pb_reader rd = pb_reader(resp.p, resp.len);
    struct pb_field f;
    while (kite_store_pb_next(&rd, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) rev = kite_store_etcd_header_rev(&f);
        if (f.field != F_RANGE_RESP_KVS || f.wire != 2) continue;
        struct kv kv;
        kite_store_etcd_kv_parse(f.data, f.len, &kv);
        struct kite_record *rec = kite_store_etcd_kv_record(s, &kv);
        if (rec) kite_record_unref(kite_map_put(&fresh, rec->key, rec));
    }
    kite_buf_release(&resp);
    struct kite_store_event *evs = NULL;
    size_t n = 0, cap = 0;
    const char *key;
    void *v;
    pthread_mutex_lock(&s->sub_mu);
    pthread_rwlock_wrlock(&s->live_lock);
    for (size_t it = 0; kite_map_next(&fresh, &it, &key, &v);) {
        struct kite_record *rec = v, *old = kite_map_get(&s->live, key);
        if (old && old->mod_rev == rec->mod_rev) {
            kite_record_unref(rec);
            continue;
        }
        kite_map_put(&s->live, rec->key, rec);
        if (n == cap) evs = kite_realloc(evs, (cap = cap ? 2 * cap : 16) * sizeof *evs);
        evs[n++] = (struct kite_store_event){old ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE, rec->mod_rev,
                                             kite_record_ref(rec), old};
    }
    for (size_t it = 0; kite_map_next(&s->live, &it, &key, &v);) {
        if (kite_map_get(&fresh, key)) continue;
        if (n == cap) evs = kite_realloc(evs, (cap = cap ? 2 * cap : 16) * sizeof *evs);
        evs[n++] = (struct kite_store_event){KITE_WRITE_DELETE, rev, kite_record_tombstone(v, rev), v};
    }
    for (size_t i = 0; i < n; i++)
        if (evs[i].type == KITE_WRITE_DELETE) kite_map_del(&s->live, evs[i].rec->key);
    pthread_rwlock_unlock(&s->live_lock);
    kite_map_release(&fresh);
    if (n > 1) qsort(evs, n, sizeof *evs, cmp_ev);
    fan_out_unlock(s, evs, n, rev);
    log_info("store", "etcd: resynchronized at revision %lld: %zu changes", (long long)rev, n);
    return 0;
}
