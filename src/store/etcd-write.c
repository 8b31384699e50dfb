/* The etcd backend: writes (one Txn each), leases, their completions, the backlog of writes not
 * yet sent and the read-back of writes whose answer was lost (etcd-int.h). */
#include "store/etcd-int.h"

/* ---- writes ---- */

/* Queues p's completion (by wait_rev) for the completion thread. Under p_mu. */
void kite_store_etcd_ready_locked(struct etcd_store *s, struct epending *p) {
    struct epending **pp = &s->ready;
    while (*pp && (*pp)->wait_rev <= p->wait_rev) pp = &(*pp)->next;
    p->next = *pp;
    *pp = p;
    pthread_cond_signal(&s->p_cond);
}

static void txn_msg(void *ud, const unsigned char *msg, size_t len) {
    struct epending *p = ud;
    kite_buf_reset(&p->resp);
    kite_buf_append(&p->resp, msg, len);
}

/* The result of an answered Txn (p->resp): err, rev, rec, wait_rev. */
static void txn_result(struct etcd_store *s, struct epending *p) {
    struct pb_reader r = pb_reader(p->resp.p, p->resp.len);
    struct pb_field f;
    bool ok = false;
    struct kv kv = {0};
    p->err = -EIO;
    while (kite_store_pb_next(&r, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) p->rev = kite_store_etcd_header_rev(&f);
        else if (f.field == F_TXN_RESP_SUCCEEDED && f.wire == 0) ok = f.u;
        else if (f.field == F_TXN_RESP_RESPONSES && f.wire == 2) {
            /* ResponseOp { response_range | response_put | response_delete_range } */
            struct pb_reader o = pb_sub(&f);
            struct pb_field g, h;
            while (kite_store_pb_next(&o, &g) > 0) {
                if (g.wire != 2) continue;
                struct pb_reader q = pb_sub(&g);
                unsigned want = g.field == F_OP_RANGE ? F_RANGE_RESP_KVS
                                : g.field == F_OP_PUT ? F_PUT_RESP_PREV_KV : F_DEL_RESP_PREV_KVS;
                while (kite_store_pb_next(&q, &h) > 0)
                    if (h.field == want && h.wire == 2 && !kv.present) kite_store_etcd_kv_parse(h.data, h.len, &kv);
            }
        }
    }
    if (!p->rev) return;
    if (ok) {
        p->err = 0;
        p->wait_rev = p->rev;
        if (p->type == KITE_WRITE_DELETE) {
            /* the DeleteRange's prev_kv: the version deleted */
            struct kite_record *last = kv.present ? kite_store_etcd_kv_record(s, &kv) : NULL;
            if (!last) last = kite_record_alloc(p->key, strlen(p->key), "", 0);
            p->rec = kite_record_tombstone(last, p->rev);
            kite_record_unref(last);
        } else {
            /* the Put's prev_kv: create_revision and version of the version it replaced */
            p->rec = kite_record_new(p->key, p->val->value, p->val->len, kv.present ? kv.create_rev : p->rev, p->rev,
                                     kv.present ? kv.version + 1 : 1);
        }
        return;
    }
    /* the compare failed; the failure branch read the key */
    if (!kv.present) {
        p->err = p->type == KITE_WRITE_CREATE ? -EEXIST : -ENOENT;
        return;
    }
    p->rec = kite_store_etcd_kv_record(s, &kv);
    p->wait_rev = kv.mod_rev;
    p->err = p->type == KITE_WRITE_CREATE ? -EEXIST : -ESTALE;
}

static void txn_done(void *ud, int status, const char *message) {
    struct epending *p = ud;
    struct etcd_store *s = p->s;
    if (status == GRPC_OK) txn_result(s, p);
    if (status != GRPC_OK && p->type != KITE_WRITE_DELETE && !s->stopping && status != GRPC_INVALID_ARGUMENT &&
        status != GRPC_FAILED_PRECONDITION) {
        /* sent, and the answer lost (a member killed, a timeout under a leader change): never sent
         * again; the supervisor reads the key back to find out whether it was applied */
        log_warn("store", "etcd: the answer to a write of %s was lost (%d: %s): reading it back", p->key, status, message);
        pthread_mutex_lock(&s->p_mu);
        p->next = s->unknown;
        s->unknown = p;
        pthread_cond_signal(&s->sup_cond);
        pthread_mutex_unlock(&s->p_mu);
        return;
    }
    if (status != GRPC_OK || p->err == -EIO) {
        /* sent, and not answered (or refused): the outcome is unknown, and the write is not repeated */
        if (!s->stopping) log_warn("store", "etcd: a write of %s failed, its outcome unknown (%d: %s)", p->key, status, message);
        p->err = -EIO;
        p->wait_rev = 0;
        s->n_commits_failed++;
    }
    if (p->err) p->rev = s->applied_rev;
    pthread_mutex_lock(&s->p_mu);
    kite_store_etcd_ready_locked(s, p);
    pthread_mutex_unlock(&s->p_mu);
}

/* Sends p on the current connection: 0, or -ENOTCONN (nothing was sent). */
static int send_txn(struct etcd_store *s, struct epending *p) {
    pthread_rwlock_rdlock(&s->conn_lock);
    int r = s->conn && s->watching ? kite_store_grpc_call_start(s->conn, "/etcdserverpb.KV/Txn", p->msg, p->msg_len, false,
                                                     txn_msg, txn_done, p)
                                   : -ENOTCONN;
    pthread_rwlock_unlock(&s->conn_lock);
    return r < 0 ? r : 0;
}

static void pending_free(struct epending *p) {
    free(p->key);
    free(p->sent);
    free(p->msg);
    kite_record_unref(p->val);
    kite_record_unref(p->rec);
    kite_buf_release(&p->resp);
    free(p);
}

/* A lease for a key to expire about ttl seconds from now: as kube-apiserver's lease manager, one
 * lease serves every such write of a window of min(60 s, ttl/20) and is granted for ttl plus that
 * window. Granting is one round trip, once per window; when it fails the key gets no lease (the
 * API server's TTL clean-up deletes it then). */
static int64_t lease_for(struct etcd_store *s, int64_t ttl) {
    int64_t reuse_ns = KITE_MIN(60, ttl / 20) * KITE_NS_PER_SEC, now = kite_now_mono(kite_clock_real());
    pthread_mutex_lock(&s->lease_mu);
    if (s->lease_id && s->lease_ttl == ttl && now < s->lease_from + reuse_ns) {
        int64_t id = s->lease_id;
        pthread_mutex_unlock(&s->lease_mu);
        return id;
    }
    struct kite_buf req = {0}, resp = {0};
    kite_store_pb_put_uint(&req, F_LEASE_TTL, (uint64_t)(ttl + reuse_ns / KITE_NS_PER_SEC));
    char *msg = NULL;
    int st = kite_store_etcd_call_once(s, "/etcdserverpb.Lease/LeaseGrant", &req, &resp, &msg);
    int64_t id = 0;
    struct pb_reader r = pb_reader(resp.p, resp.len);
    struct pb_field f;
    while (st == GRPC_OK && kite_store_pb_next(&r, &f) > 0)
        if (f.field == F_LEASE_RESP_ID && f.wire == 0) id = (int64_t)f.u;
    if (id) {
        s->lease_id = id;
        s->lease_ttl = ttl;
        s->lease_from = now;
    } else if (!s->stopping) {
        log_warn("store", "etcd: cannot grant a lease (%d: %s): keys written without one", st, msg ? msg : "");
    }
    pthread_mutex_unlock(&s->lease_mu);
    kite_buf_release(&req);
    kite_buf_release(&resp);
    free(msg);
    return id;
}

int kite_store_etcd_submit(struct kite_store *b, const struct kite_write *w, kite_write_cb cb, void *ud) {
    struct etcd_store *s = es(b);
    if (!kite_startswith(w->key, "/registry/")) return -EINVAL;
    bool del = w->type == KITE_WRITE_DELETE;
    _cleanup_free_ char *sealed = NULL, *encoded = NULL;
    const char *val = del ? "" : w->value ? w->value : "";
    size_t len = del ? 0 : w->len;
    /* the codec's form (kube-apiserver's protobuf envelope), sealed after when encrypted as
     * kube-apiserver seals its protobuf */
    if (!del && s->codec.encode && s->codec.encode(s->codec.ud, w->key, val, len, &encoded, &len) == 0) val = encoded;
    else if (!del) free(encoded), encoded = NULL, len = w->len;
    if (!del && kite_store_crypt_applies(s->crypt, w->key)) {
        int r = kite_store_crypt_seal(s->crypt, w->key, val, len, &sealed, &len);
        if (r < 0) return r;
        val = sealed;
    }
    pthread_mutex_lock(&s->p_mu);
    int r = s->stopping ? -ESHUTDOWN : s->inflight >= KITE_STORE_QUEUE_MAX ? -EAGAIN : 0;
    if (r == 0) s->inflight++;
    pthread_mutex_unlock(&s->p_mu);
    if (r == -EAGAIN) s->n_rejected++;
    if (r < 0) return r;
    struct epending *p = kite_calloc(1, sizeof *p);
    p->s = s;
    p->type = w->type;
    p->key = kite_strdup(w->key);
    if (!del) {
        p->val = kite_record_alloc(w->key, strlen(w->key), w->value ? w->value : "", w->len);
        p->sent = kite_malloc(len + 1);
        memcpy(p->sent, val, len);
        p->sent_len = len;
    }
    p->expect = w->expect_mod_rev;
    p->cb = cb;
    p->ud = ud;
    p->queued_ns = kite_now_mono(kite_clock_real());
    _cleanup_free_ char *ekey = kite_store_etcd_key_out(s, w->key);
    struct kite_buf m = {0};
    bool ttl = false;
    for (size_t i = 0; !del && s->ttl_s > 0 && i < s->n_ttl_prefixes; i++)
        ttl = ttl || kite_startswith(w->key, s->ttl_prefixes[i]);
    kite_store_etcd_encode_txn(&m, w->type, ekey, val, len, w->expect_mod_rev, ttl ? lease_for(s, s->ttl_s) : 0);
    p->msg = kite_buf_detach(&m, &p->msg_len);
    if (send_txn(s, p) < 0) {
        /* not sent: it waits for the next connection */
        pthread_mutex_lock(&s->p_mu);
        struct epending **pp = &s->backlog;
        while (*pp) pp = &(*pp)->next;
        *pp = p;
        pthread_cond_signal(&s->sup_cond);
        pthread_mutex_unlock(&s->p_mu);
    }
    return 0;
}

/* The completion thread: fires every answered write whose revision the watch has applied (so
 * its subscribers have the event), in revision order; failures without a record at once. */
void *kite_store_etcd_completer_main(void *arg) {
    struct etcd_store *s = arg;
    pthread_mutex_lock(&s->p_mu);
    for (;;) {
        struct epending *batch = NULL, **tail = &batch;
        while (s->ready && (s->ready->wait_rev <= s->applied_rev || s->draining)) {
            struct epending *p = s->ready;
            s->ready = p->next;
            p->next = NULL;
            *tail = p;
            tail = &p->next;
        }
        if (!batch) {
            if (s->stopping && !s->inflight) break;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&s->p_cond, &s->p_mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&s->p_mu);
        size_t n = 0;
        while (batch) {
            struct epending *p = batch;
            batch = p->next;
            if (p->err == 0) s->n_writes++;
            else s->n_failed++;
            p->cb(p->ud, p->err, p->rev, p->rec);
            pending_free(p);
            n++;
        }
        pthread_mutex_lock(&s->p_mu);
        s->inflight -= n;
    }
    pthread_mutex_unlock(&s->p_mu);
    return NULL;
}

/* Fails backlogged writes that waited too long (all of them when stopping). Under p_mu. */
void kite_store_etcd_backlog_expire_locked(struct etcd_store *s) {
    int64_t now = kite_now_mono(kite_clock_real());
    for (struct epending **pp = &s->backlog; *pp;) {
        struct epending *p = *pp;
        if (!s->stopping && now - p->queued_ns < (int64_t)ETCD_BACKLOG_MS * 1000000) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        p->err = -EIO;
        p->rev = s->applied_rev;
        p->wait_rev = 0;
        kite_store_etcd_ready_locked(s, p);
    }
}

void kite_store_etcd_backlog_send(struct etcd_store *s) {
    pthread_mutex_lock(&s->p_mu);
    struct epending *list = TAKE_PTR(s->backlog);
    pthread_mutex_unlock(&s->p_mu);
    while (list) {
        struct epending *p = list;
        list = p->next;
        p->next = NULL;
        if (send_txn(s, p) < 0) {
            pthread_mutex_lock(&s->p_mu);
            p->next = s->backlog;
            s->backlog = p;
            pthread_mutex_unlock(&s->p_mu);
        }
    }
}

/* The writes whose answer was lost: each key read back; one holding exactly the bytes the write
 * sent (with a new mod_revision past its compare) was applied by it, and completes as a success at
 * that revision; otherwise it fails -EIO (unknown: the client reads the object). A read that cannot
 * be made now is tried again on the next round, for up to ETCD_BACKLOG_MS. */
void kite_store_etcd_read_back(struct etcd_store *s) {
    pthread_mutex_lock(&s->p_mu);
    struct epending *list = TAKE_PTR(s->unknown);
    pthread_mutex_unlock(&s->p_mu);
    while (list) {
        struct epending *p = list;
        list = p->next;
        p->next = NULL;
        _cleanup_free_ char *ekey = kite_store_etcd_key_out(s, p->key);
        struct kite_buf req = {0}, resp = {0};
        kite_store_etcd_encode_range(&req, ekey, strlen(ekey), NULL, 0, 0);
        char *msg = NULL;
        int st = kite_store_etcd_call_once(s, "/etcdserverpb.KV/Range", &req, &resp, &msg);
        kite_buf_release(&req);
        free(msg);
        bool late = kite_now_mono(kite_clock_real()) - p->queued_ns > (int64_t)ETCD_BACKLOG_MS * 1000000;
        if (st != GRPC_OK && !late && !s->stopping) {
            kite_buf_release(&resp);
            pthread_mutex_lock(&s->p_mu);
            p->next = s->unknown;
            s->unknown = p;
            pthread_mutex_unlock(&s->p_mu);
            continue;
        }
        struct kv kv = {0};
        struct pb_reader r = pb_reader(resp.p, resp.len);
        struct pb_field f;
        while (st == GRPC_OK && kite_store_pb_next(&r, &f) > 0)
            if (f.field == F_RANGE_RESP_KVS && f.wire == 2) kite_store_etcd_kv_parse(f.data, f.len, &kv);
        bool applied = kv.present && kv.mod_rev > p->expect && kv.value_len == p->sent_len &&
                       memcmp(kv.value, p->sent, p->sent_len) == 0 &&
                       (p->type != KITE_WRITE_CREATE || kv.version == 1);
        if (applied) {
            p->err = 0;
            p->rev = p->wait_rev = kv.mod_rev;
            p->rec = kite_record_new(p->key, p->val->value, p->val->len, kv.create_rev, kv.mod_rev, kv.version);
            log_info("store", "etcd: the write of %s was applied (revision %lld)", p->key, (long long)kv.mod_rev);
        } else {
            log_warn("store", "etcd: the write of %s is not found applied: its outcome stays unknown", p->key);
            p->err = -EIO;
            p->rev = s->applied_rev;
            p->wait_rev = 0;
            s->n_commits_failed++;
        }
        kite_buf_release(&resp);
        pthread_mutex_lock(&s->p_mu);
        kite_store_etcd_ready_locked(s, p);
        pthread_mutex_unlock(&s->p_mu);
    }
}
