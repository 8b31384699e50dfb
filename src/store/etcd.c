/* The etcd v3 backend: the store on an etcd cluster, spoken to over gRPC (etcd-grpc.c, messages
 * hand-encoded after etcd's rpc.proto and kv.proto in etcd-pb.c), with kube-apiserver's etcd3
 * semantics.
 *
 * - Revisions are etcd's: a record's mod_rev is the resourceVersion, create_rev and version are
 *   etcd's create_revision and version.
 * - A write is one Txn: CREATE compares create_revision == 0, UPDATE and DELETE compare
 *   mod_revision == expect (or create_revision > 0, "exists", when unconditional); the success
 *   branch is the Put (prev_kv, for the new record's create_rev and version) or the DeleteRange
 *   (prev_kv, for the tombstone), the failure branch a Range of the key that brings back the
 *   current record on a conflict: one round trip, as kube-apiserver's GuaranteedUpdate.
 * - One etcd watch, from the revision of the load at open, on the whole prefix, keeps the latest
 *   version of every key in memory (get() and the watch caches' subscriptions are served from it,
 *   as the SQLite backend's live map) and fans every change out to the subscribers. Writes of this
 *   and of every other apiserver on the cluster come back through it, in revision order.
 * - Ordering guarantee (store.h): a write's completion waits until the watch has applied its
 *   revision (the subscribers were handed its event), and runs on the backend's completion
 *   thread, never on the connection's.
 * - Keys: kite's "/registry/<resource>/..." is "<prefix>/<resource>/..." in etcd (prefix
 *   "/registry" by default, --etcd-prefix), with kube-apiserver's exceptions for its older
 *   resources: nodes under <prefix>/minions/, services under <prefix>/services/specs/, endpoints
 *   under <prefix>/services/endpoints/. Values are the API server's bytes (JSON), sealed at rest
 *   as in the SQLite backend when encryption is configured; the options' codec (store.h) may
 *   store them otherwise (kube-apiserver's "k8s\0" protobuf envelope) and reads such values back
 *   as JSON: records hold JSON either way.
 * - Failover: the backend keeps every endpoint and one connection to one of them. A connection
 *   that fails (reset, or no answer to its keepalive within the timeout) is replaced by one to the
 *   next member, and the watch resumes there from the last applied revision. Reads are retried on
 *   the new connection. A write that was not yet sent waits (up to ETCD_BACKLOG_MS) and is sent
 *   there; a write whose Txn was sent but not answered is never sent again: its outcome is
 *   unknown, and it fails with -EIO (the client sees a 500 and reads the object back).
 * - History: the watch caches are loaded from the store's current state; events before the
 *   newest load are not kept here, so kite_store_compacted_rev reports that revision and a watch
 *   from an older resourceVersion gets 410 (as kube-apiserver's watch cache after a restart).
 *
 * Threads: the connection's I/O thread (response and watch callbacks: applies events, runs the
 * subscribers), the completion thread (write callbacks, in revision order once applied), the
 * supervisor (reconnects, restarts the watch, sends the backlog, probes Status for health).
 * Locks, in nesting order: conn_lock (rwlock over the current connection; held for reading by a
 * thread starting a call, which sends it itself and may so run a stream's done callback: no
 * callback takes conn_lock; see etcd-grpc.c), then the connection's own mutex; on the I/O thread,
 * sub_mu then live_lock; p_mu (pending completions and the backlog) is a leaf. */
#include "store/etcd-int.h"

/* ---- the supervisor: connections, health ---- */

/* Connects to the first member that answers, starting after the current one (or at it: first). */
static int connect_any(struct etcd_store *s, bool first, struct grpc_conn **ret, char **ret_error) {
    int r = -ENOTCONN;
    for (size_t i = 0; i < s->n_eps; i++) {
        size_t k = (s->cur + i + (first ? 0 : 1)) % s->n_eps;
        struct endpoint *e = &s->eps[k];
        char *err = NULL;
        r = kite_store_grpc_conn_open(e->host, e->port, e->https, &s->tls, s->timeout_ms, ret, &err);
        if (r == 0) {
            s->cur = k;
            return 0;
        }
        if (ret_error) {
            free(*ret_error);
            *ret_error = err;
        } else {
            free(err);
        }
    }
    return r;
}

/* Maintenance.Status of the connected member: 0 when it knows a leader and reports no error. */
static int probe(struct etcd_store *s, char **ret_why) {
    struct kite_buf req = {0}, resp = {0};
    char *msg = NULL;
    int st = kite_store_etcd_call_once(s, "/etcdserverpb.Maintenance/Status", &req, &resp, &msg);
    int r = 0;
    if (st != GRPC_OK) {
        *ret_why = st < 0 ? kite_asprintf("no connection to a member: %s", strerror(-st)) : kite_asprintf("%s", msg);
        r = -EIO;
    } else {
        struct pb_reader rd = pb_reader(resp.p, resp.len);
        struct pb_field f;
        uint64_t leader = 0;
        char *errs = NULL;
        while (kite_store_pb_next(&rd, &f) > 0) {
            if (f.field == F_STATUS_LEADER && f.wire == 0) leader = f.u;
            else if (f.field == F_STATUS_ERRORS && f.wire == 2 && !errs) errs = kite_strndup((const char *)f.data, f.len);
        }
        if (!leader) *ret_why = kite_strdup("the member knows no leader"), r = -EIO;
        else if (errs) *ret_why = kite_asprintf("the member reports: %s", errs), r = -EIO;
        free(errs);
    }
    free(msg);
    kite_buf_release(&resp);
    return r;
}

static void set_health(struct etcd_store *s, bool ok, char *why) {
    pthread_mutex_lock(&s->p_mu);
    free(s->health_error);
    s->health_error = why;
    s->healthy = ok;
    pthread_mutex_unlock(&s->p_mu);
}

static void *supervisor_main(void *arg) {
    struct etcd_store *s = arg;
    int64_t last_probe = 0;
    pthread_mutex_lock(&s->p_mu);
    while (!s->stopping) {
        kite_store_etcd_backlog_expire_locked(s);
        bool dead = !s->conn || kite_store_grpc_conn_dead(s->conn) || !s->watching;
        bool unknown = s->unknown != NULL;
        pthread_mutex_unlock(&s->p_mu);
        if (dead) {
            /* replace the connection: the next member, the watch resumed from the applied revision */
            pthread_rwlock_wrlock(&s->conn_lock);
            struct grpc_conn *old = TAKE_PTR(s->conn);
            pthread_rwlock_unlock(&s->conn_lock);
            kite_store_grpc_conn_close(old);
            struct grpc_conn *c = NULL;
            char *err = NULL;
            int r = connect_any(s, false, &c, &err);
            if (r == 0 && s->resync && (r = kite_store_etcd_resync(s, c)) == 0) s->resync = false;
            if (r == 0 && (r = kite_store_etcd_watch_start(s, c)) == 0) {
                pthread_rwlock_wrlock(&s->conn_lock);
                s->conn = c;
                pthread_rwlock_unlock(&s->conn_lock);
                log_info("store", "etcd: connected to %s:%s, watching from revision %lld", s->eps[s->cur].host,
                         s->eps[s->cur].port, (long long)s->applied_rev + 1);
                kite_store_etcd_backlog_send(s);
                last_probe = 0;
            } else {
                kite_store_grpc_conn_close(c);
                set_health(s, false, kite_asprintf("no member answers: %s", err ? err : "?"));
            }
            usleep(100 * 1000); /* at most 10 attempts a second */
            free(err);
        } else if (unknown) {
            kite_store_etcd_read_back(s);
        } else if (kite_now_mono(kite_clock_real()) - last_probe > KITE_NS_PER_SEC) {
            char *why = NULL;
            last_probe = kite_now_mono(kite_clock_real());
            if (probe(s, &why) == 0) {
                set_health(s, true, NULL);
            } else {
                /* a member cut off from the others: move on */
                log_warn("store", "etcd: %s:%s: %s; moving to another member", s->eps[s->cur].host,
                         s->eps[s->cur].port, why);
                set_health(s, false, why);
                if (s->n_eps > 1) s->watching = false;
            }
        }
        pthread_mutex_lock(&s->p_mu);
        if (!s->stopping) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&s->sup_cond, &s->p_mu, &ts);
        }
    }
    pthread_mutex_unlock(&s->p_mu);
    return NULL;
}

/* ---- reads ---- */

static int64_t etcd_rev(struct kite_store *b) { return es(b)->applied_rev; }
static int64_t etcd_applied_rev(struct kite_store *b) { return es(b)->applied_rev; }
static int64_t etcd_compacted_rev(struct kite_store *b) {
    struct etcd_store *s = es(b);
    return KITE_MAX(s->compact_rev, s->snap_rev);
}

static int etcd_get(struct kite_store *b, const char *key, struct kite_record **ret) {
    struct etcd_store *s = es(b);
    pthread_rwlock_rdlock(&s->live_lock);
    struct kite_record *r = kite_map_get(&s->live, key);
    *ret = kite_record_ref(r);
    pthread_rwlock_unlock(&s->live_lock);
    return r ? 0 : -ENOENT;
}

static int cmp_rec(const void *a, const void *b) {
    return strcmp((*(struct kite_record *const *)a)->key, (*(struct kite_record *const *)b)->key);
}

static int etcd_range(struct kite_store *b, const char *prefix, int64_t at_rev, const char *start_after, size_t limit,
                      struct kite_record ***ret, size_t *ret_n, bool *ret_more) {
    struct etcd_store *s = es(b);
    *ret = NULL;
    *ret_n = 0;
    if (ret_more) *ret_more = false;
    if (at_rev && at_rev > s->applied_rev) return -ERANGE;
    _cleanup_free_ char *ep = kite_store_etcd_key_out(s, prefix);
    _cleanup_free_ char *end = kite_store_etcd_range_end(ep);
    _cleanup_free_ char *from = NULL;
    if (start_after && strcmp(start_after, prefix) >= 0) {
        _cleanup_free_ char *ek = kite_store_etcd_key_out(s, start_after);
        from = kite_malloc(strlen(ek) + 2);
        memcpy(from, ek, strlen(ek) + 1);
        from[strlen(ek) + 1] = 0; /* the key right after start_after: start_after + "\0" */
    }
    struct kite_buf req = {0}, resp = {0};
    kite_store_etcd_encode_range(&req, from ? from : ep, from ? strlen(from) + 1 : strlen(ep), end, (int64_t)limit,
                 at_rev ? at_rev : s->applied_rev);
    char *msg = NULL;
    int st = kite_store_etcd_call_retry(s, "/etcdserverpb.KV/Range", &req, &resp, &msg);
    kite_buf_release(&req);
    int r = kite_store_etcd_read_errno(st, msg);
    free(msg);
    if (r < 0) {
        kite_buf_release(&resp);
        return r;
    }
    struct pb_reader rd = pb_reader(resp.p, resp.len);
    struct pb_field f;
    struct kite_record **recs = NULL;
    size_t n = 0, cap = 0;
    while (kite_store_pb_next(&rd, &f) > 0) {
        if (f.field == F_RANGE_RESP_MORE && f.wire == 0 && ret_more) *ret_more = f.u;
        if (f.field != F_RANGE_RESP_KVS || f.wire != 2) continue;
        struct kv kv;
        kite_store_etcd_kv_parse(f.data, f.len, &kv);
        struct kite_record *rec = kite_store_etcd_kv_record(s, &kv);
        if (!rec || !kite_startswith(rec->key, prefix)) {
            kite_record_unref(rec);
            continue;
        }
        if (n == cap) recs = kite_realloc(recs, (cap = cap ? 2 * cap : 64) * sizeof *recs);
        recs[n++] = rec;
    }
    kite_buf_release(&resp);
    if (n > 1) qsort(recs, n, sizeof *recs, cmp_rec); /* kite's key order (the mapped prefixes sort differently) */
    *ret = recs;
    *ret_n = n;
    return 0;
}

static void etcd_stats(struct kite_store *b, struct kite_store_stats *ret) {
    struct etcd_store *s = es(b);
    *ret = (struct kite_store_stats){.batches = s->n_writes, .writes = s->n_writes, .failed = s->n_failed,
                                     .rejected = s->n_rejected, .commits_failed = s->n_commits_failed};
}

/* kube-apiserver's key for taking turns at compaction (at etcd's root, outside the prefix, so
 * kite and kube-apiservers sharing an etcd take turns with each other too). */
#define COMPACT_KEY "compact_rev_key"

/* Claims this round of compaction: Txn(version(compact_rev_key) == the version last seen) puts
 * rev there; the apiserver whose compare holds compacts, the others learn the new version and sit
 * this round out (kube-apiserver's compactor). 1 = claimed, 0 = another apiserver's turn. */
static int compact_claim(struct etcd_store *s, int64_t rev) {
    struct kite_buf req = {0}, resp = {0};
    size_t m = kite_store_pb_begin(&req, F_TXN_COMPARE);
    /* result EQUAL (0) and target VERSION (0) are proto3 zeros; the version oneof is present */
    kite_store_pb_put_bytes(&req, F_CMP_KEY, COMPACT_KEY, strlen(COMPACT_KEY));
    kite_store_pb_put_varint(&req, (uint64_t)F_CMP_VERSION << 3);
    kite_store_pb_put_varint(&req, (uint64_t)s->compact_version);
    kite_store_pb_end(&req, m);
    char val[24];
    int vl = snprintf(val, sizeof val, "%lld", (long long)rev);
    m = kite_store_pb_begin(&req, F_TXN_SUCCESS);
    size_t p = kite_store_pb_begin(&req, F_OP_PUT);
    kite_store_pb_put_bytes(&req, F_PUT_KEY, COMPACT_KEY, strlen(COMPACT_KEY));
    kite_store_pb_put_bytes(&req, F_PUT_VALUE, val, (size_t)vl);
    kite_store_pb_end(&req, p);
    kite_store_pb_end(&req, m);
    m = kite_store_pb_begin(&req, F_TXN_FAILURE);
    p = kite_store_pb_begin(&req, F_OP_RANGE);
    kite_store_etcd_encode_range(&req, COMPACT_KEY, strlen(COMPACT_KEY), NULL, 0, 0);
    kite_store_pb_end(&req, p);
    kite_store_pb_end(&req, m);
    char *msg = NULL;
    int st = kite_store_etcd_call_retry(s, "/etcdserverpb.KV/Txn", &req, &resp, &msg);
    kite_buf_release(&req);
    free(msg);
    if (st != GRPC_OK) {
        kite_buf_release(&resp);
        return -EIO;
    }
    bool ok = false;
    struct kv kv = {0};
    struct pb_reader r = pb_reader(resp.p, resp.len);
    struct pb_field f, g, h;
    while (kite_store_pb_next(&r, &f) > 0) {
        if (f.field == F_TXN_RESP_SUCCEEDED && f.wire == 0) ok = f.u;
        if (f.field != F_TXN_RESP_RESPONSES || f.wire != 2) continue;
        struct pb_reader o = pb_sub(&f);
        while (kite_store_pb_next(&o, &g) > 0) {
            if (g.field != F_OP_RANGE || g.wire != 2) continue;
            struct pb_reader q = pb_sub(&g);
            while (kite_store_pb_next(&q, &h) > 0)
                if (h.field == F_RANGE_RESP_KVS && h.wire == 2) kite_store_etcd_kv_parse(h.data, h.len, &kv);
        }
    }
    kite_buf_release(&resp);
    s->compact_version = ok ? s->compact_version + 1 : kv.version;
    return ok;
}

static int etcd_compact(struct kite_store *b, int64_t rev) {
    struct etcd_store *s = es(b);
    if (rev <= s->compact_rev) return 0;
    int claimed = compact_claim(s, rev);
    if (claimed <= 0) return claimed; /* another apiserver compacts this round */
    struct kite_buf req = {0}, resp = {0};
    kite_store_pb_put_uint(&req, F_COMPACT_REVISION, (uint64_t)rev);
    char *msg = NULL;
    int st = kite_store_etcd_call_retry(s, "/etcdserverpb.KV/Compact", &req, &resp, &msg);
    kite_buf_release(&req);
    kite_buf_release(&resp);
    int r = kite_store_etcd_read_errno(st, msg);
    free(msg);
    if (r == -ENODATA) r = 0; /* already compacted there */
    if (r == 0 && rev > s->compact_rev) s->compact_rev = rev;
    return r;
}

static int etcd_subscribe(struct kite_store *b, const char *prefix, kite_store_batch_cb cb, void *ud) {
    struct etcd_store *s = es(b);
    pthread_mutex_lock(&s->sub_mu);
    int r = -ENOSPC;
    if (s->nsubs < KITE_STORE_SUBSCRIBERS_MAX) {
        s->subs[s->nsubs++] = (struct esub){kite_strdup(prefix), cb, ud};
        r = 0;
    }
    pthread_mutex_unlock(&s->sub_mu);
    return r;
}

static void etcd_unsubscribe(struct kite_store *b, kite_store_batch_cb cb, void *ud) {
    struct etcd_store *s = es(b);
    pthread_mutex_lock(&s->sub_mu);
    for (size_t i = 0; i < s->nsubs; i++)
        if (s->subs[i].cb == cb && s->subs[i].ud == ud) {
            free(s->subs[i].prefix);
            s->subs[i] = s->subs[--s->nsubs];
            break;
        }
    pthread_mutex_unlock(&s->sub_mu);
}

/* The snapshot comes from the live map; history before it is not kept here (nothing is replayed),
 * so the revision it is current to becomes the compacted revision this backend reports (see the
 * top of the file). */
static int etcd_subscribe_snapshot(struct kite_store *b, const char *prefix, kite_store_batch_cb cb, void *ud,
                                   struct kite_store_replay *replay, struct kite_record ***ret_recs,
                                   size_t *ret_n, int64_t *ret_rev) {
    struct etcd_store *s = es(b);
    pthread_mutex_lock(&s->sub_mu);
    if (s->nsubs >= KITE_STORE_SUBSCRIBERS_MAX) {
        pthread_mutex_unlock(&s->sub_mu);
        return -ENOSPC;
    }
    struct kite_record **recs = NULL;
    size_t n = 0, cap = 0;
    pthread_rwlock_rdlock(&s->live_lock);
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&s->live, &it, &k, &v);) {
        if (!kite_startswith(k, prefix)) continue;
        if (n == cap) recs = kite_realloc(recs, (cap = cap ? 2 * cap : 64) * sizeof *recs);
        recs[n++] = kite_record_ref(v);
    }
    pthread_rwlock_unlock(&s->live_lock);
    if (n > 1) qsort(recs, n, sizeof *recs, cmp_rec);
    s->subs[s->nsubs++] = (struct esub){kite_strdup(prefix), cb, ud};
    *ret_rev = s->applied_rev;
    if (*ret_rev > s->snap_rev) s->snap_rev = *ret_rev;
    if (replay) replay->from = *ret_rev;
    pthread_mutex_unlock(&s->sub_mu);
    *ret_recs = recs;
    *ret_n = n;
    return 0;
}

static int etcd_history(struct kite_store *b, const char *prefix, int64_t from_rev, kite_store_event_cb cb, void *ud) {
    (void)prefix, (void)cb, (void)ud;
    /* no history is kept in this backend (see the top of the file) */
    if (from_rev < etcd_compacted_rev(b)) return -ENODATA;
    return from_rev >= etcd_rev(b) ? 0 : -ENODATA;
}

static int etcd_health(struct kite_store *b, char **ret_why) {
    struct etcd_store *s = es(b);
    pthread_rwlock_rdlock(&s->conn_lock);
    bool connected = s->conn != NULL;
    pthread_rwlock_unlock(&s->conn_lock);
    pthread_mutex_lock(&s->p_mu);
    bool ok = s->healthy && connected && s->watching;
    if (!ok && ret_why) *ret_why = kite_strdup(s->health_error ? s->health_error : "not connected");
    pthread_mutex_unlock(&s->p_mu);
    return ok ? 0 : -EIO;
}

/* ---- open and close ---- */

static void etcd_close(struct kite_store *b) {
    struct etcd_store *s = es(b);
    pthread_mutex_lock(&s->p_mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->sup_cond);
    pthread_cond_broadcast(&s->p_cond);
    pthread_mutex_unlock(&s->p_mu);
    if (s->threads_started) pthread_join(s->supervisor, NULL);
    /* writes still in flight end (-EIO) with the connection */
    pthread_rwlock_wrlock(&s->conn_lock);
    struct grpc_conn *c = TAKE_PTR(s->conn);
    pthread_rwlock_unlock(&s->conn_lock);
    kite_store_grpc_conn_close(c);
    pthread_mutex_lock(&s->p_mu);
    s->draining = true;
    kite_store_etcd_backlog_expire_locked(s);
    while (s->unknown) {
        struct epending *p = s->unknown;
        s->unknown = p->next;
        p->err = -EIO;
        p->rev = s->applied_rev;
        p->wait_rev = 0;
        kite_store_etcd_ready_locked(s, p);
    }
    pthread_cond_broadcast(&s->p_cond);
    pthread_mutex_unlock(&s->p_mu);
    if (s->threads_started) pthread_join(s->completer, NULL);
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&s->live, &it, &k, &v);) kite_record_unref(v);
    kite_map_release(&s->live);
    for (size_t i = 0; i < s->nsubs; i++) free(s->subs[i].prefix);
    for (size_t i = 0; i < s->n_eps; i++) free(s->eps[i].host), free(s->eps[i].port);
    free((char *)s->tls.cafile);
    free((char *)s->tls.certfile);
    free((char *)s->tls.keyfile);
    for (size_t i = 0; i < s->n_ttl_prefixes; i++) free(s->ttl_prefixes[i]);
    free(s->ttl_prefixes);
    free(s->prefix);
    free(s->health_error);
    pthread_rwlock_destroy(&s->conn_lock);
    pthread_rwlock_destroy(&s->live_lock);
    pthread_mutex_destroy(&s->sub_mu);
    pthread_mutex_destroy(&s->p_mu);
    pthread_mutex_destroy(&s->lease_mu);
    pthread_cond_destroy(&s->p_cond);
    pthread_cond_destroy(&s->sup_cond);
    free(s);
}

/* "http://h:p,https://h:p,h:p": a bare endpoint is https when a CA file is given. */
static int parse_endpoints(struct etcd_store *s, const char *target, char **ret_error) {
    const char *p = target;
    if (kite_startswith(p, "//")) p += 2;
    while (*p) {
        size_t len = strcspn(p, ",");
        _cleanup_free_ char *item = kite_strndup(p, len);
        p += len + (p[len] == ',');
        if (!item[0]) continue;
        if (s->n_eps == ETCD_ENDPOINTS_MAX)
            return *ret_error = kite_asprintf("etcd: at most %d endpoints", ETCD_ENDPOINTS_MAX), -EINVAL;
        struct endpoint *e = &s->eps[s->n_eps];
        const char *hp = item;
        e->https = s->tls.cafile != NULL;
        if (kite_startswith(hp, "https://")) hp += 8, e->https = true;
        else if (kite_startswith(hp, "http://")) hp += 7, e->https = false;
        size_t hl = strcspn(hp, "/");
        _cleanup_free_ char *hostport = kite_strndup(hp, hl);
        char *colon = strrchr(hostport, ':');
        const char *host = hostport, *port = "2379";
        if (hostport[0] == '[') {
            char *rb = strchr(hostport, ']');
            if (!rb) return *ret_error = kite_asprintf("etcd endpoint \"%s\": bad address", item), -EINVAL;
            *rb = 0;
            host = hostport + 1;
            if (rb[1] == ':') port = rb + 2;
        } else if (colon) {
            *colon = 0;
            port = colon + 1;
        }
        if (!host[0] || !port[0] || strspn(port, "0123456789") != strlen(port))
            return *ret_error = kite_asprintf("etcd endpoint \"%s\": want [http[s]://]HOST[:PORT]", item), -EINVAL;
        e->host = kite_strdup(host);
        e->port = kite_strdup(port);
        s->n_eps++;
    }
    if (!s->n_eps) return *ret_error = kite_strdup("etcd: no endpoint"), -EINVAL;
    return 0;
}

/* Loads every key under the prefix (one Range at the current revision). */
static int load(struct etcd_store *s, char **ret_error) {
    _cleanup_free_ char *k = kite_asprintf("%s/", s->prefix);
    _cleanup_free_ char *end = kite_store_etcd_range_end(k);
    struct kite_buf req = {0}, resp = {0};
    kite_store_etcd_encode_range(&req, k, strlen(k), end, 0, 0);
    char *msg = NULL;
    int st = kite_store_etcd_call_once(s, "/etcdserverpb.KV/Range", &req, &resp, &msg);
    kite_buf_release(&req);
    if (st != GRPC_OK) {
        *ret_error = kite_asprintf("etcd %s:%s: cannot read %s: %s", s->eps[s->cur].host, s->eps[s->cur].port, k,
                                   st < 0 ? strerror(-st) : msg);
        free(msg);
        kite_buf_release(&resp);
        return -EIO;
    }
    free(msg);
    struct pb_reader rd = pb_reader(resp.p, resp.len);
    struct pb_field f;
    size_t bad = 0, sealed = 0;
    while (kite_store_pb_next(&rd, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) s->applied_rev = kite_store_etcd_header_rev(&f);
        if (f.field != F_RANGE_RESP_KVS || f.wire != 2) continue;
        struct kv kv;
        kite_store_etcd_kv_parse(f.data, f.len, &kv);
        enum kv_skip why = 0;
        _cleanup_free_ char *err = NULL;
        struct kite_record *rec = kite_store_etcd_kv_record_why(s, &kv, &why, &err);
        if (!rec) {
            /* a key of the layout whose value is sealed under another encryption key, or damaged
             * (refused, as the SQLite store refuses); or an envelope the codec does not read (left out) */
            if (why == KV_SEALED) sealed++;
            if (why == KV_ENVELOPE) {
                if (!bad++) log_warn("store", "etcd: %.*s: kube-apiserver's protobuf that kite does not read (%s): left out",
                                     (int)kv.key_len, (const char *)kv.key, err);
            }
            continue;
        }
        kite_record_unref(kite_map_put(&s->live, rec->key, rec));
    }
    kite_buf_release(&resp);
    if (sealed) {
        *ret_error = kite_asprintf("etcd %s:%s: %zu encrypted values under %s do not open with this encryption key "
                                   "(a different key, or damaged values)",
                                   s->eps[s->cur].host, s->eps[s->cur].port, sealed, k);
        return -EUCLEAN;
    }
    if (bad) log_warn("store", "etcd: %zu values under %s are kube-apiserver's protobuf that kite does not read: left out", bad, k);
    s->snap_rev = s->applied_rev;
    return 0;
}

static int etcd_open(const char *target, const struct kite_store_options *opts, struct kite_store **ret,
                     char **ret_error) {
    struct etcd_store *s = kite_calloc(1, sizeof *s);
    s->base.ops = &kite_store_etcd_ops;
    s->crypt = opts->crypt;
    if (opts->codec) s->codec = *opts->codec;
    const char *prefix = opts->etcd_prefix ? opts->etcd_prefix : "/registry";
    s->prefix = kite_strndup(prefix, strlen(prefix) - (strlen(prefix) > 1 && prefix[strlen(prefix) - 1] == '/'));
    if (!strcmp(s->prefix, "/")) s->prefix[0] = 0;
    s->tls.cafile = opts->etcd_cafile ? kite_strdup(opts->etcd_cafile) : NULL;
    s->tls.certfile = opts->etcd_certfile ? kite_strdup(opts->etcd_certfile) : NULL;
    s->tls.keyfile = opts->etcd_keyfile ? kite_strdup(opts->etcd_keyfile) : NULL;
    s->timeout_ms = opts->etcd_timeout_ms > 0 ? opts->etcd_timeout_ms : ETCD_TIMEOUT_MS_DEFAULT;
    s->ttl_s = opts->ttl_s;
    while (opts->ttl_prefixes && opts->ttl_prefixes[s->n_ttl_prefixes]) s->n_ttl_prefixes++;
    s->ttl_prefixes = kite_calloc(s->n_ttl_prefixes + 1, sizeof *s->ttl_prefixes);
    for (size_t i = 0; i < s->n_ttl_prefixes; i++) s->ttl_prefixes[i] = kite_strdup(opts->ttl_prefixes[i]);
    pthread_rwlock_init(&s->conn_lock, NULL);
    pthread_rwlock_init(&s->live_lock, NULL);
    pthread_mutex_init(&s->sub_mu, NULL);
    pthread_mutex_init(&s->p_mu, NULL);
    pthread_mutex_init(&s->lease_mu, NULL);
    pthread_cond_init(&s->p_cond, NULL);
    pthread_cond_init(&s->sup_cond, NULL);
    s->healthy = true;
    int r = parse_endpoints(s, target, ret_error);
    struct grpc_conn *c = NULL;
    if (r == 0 && (r = connect_any(s, true, &c, ret_error)) < 0) r = -EIO;
    if (r == 0) {
        s->conn = c;
        if ((r = load(s, ret_error)) == 0 && (r = kite_store_etcd_watch_start(s, c)) < 0) {
            *ret_error = kite_asprintf("etcd: cannot start the watch: %s", strerror(-r));
            r = -EIO;
        }
    }
    if (r == 0) {
        if (pthread_create(&s->completer, NULL, kite_store_etcd_completer_main, s) != 0) {
            r = -EAGAIN;
        } else if (pthread_create(&s->supervisor, NULL, supervisor_main, s) != 0) {
            pthread_mutex_lock(&s->p_mu);
            s->stopping = true;
            pthread_mutex_unlock(&s->p_mu);
            pthread_join(s->completer, NULL);
            r = -EAGAIN;
        } else {
            s->threads_started = true;
            pthread_setname_np(s->completer, "etcd-complete");
            pthread_setname_np(s->supervisor, "etcd-supervise");
        }
    }
    if (r < 0) {
        etcd_close(&s->base);
        return r;
    }
    *ret = &s->base;
    return 0;
}

const struct kite_store_ops kite_store_etcd_ops = {
    .scheme = "etcd:",
    .open = etcd_open,
    .close = etcd_close,
    .rev = etcd_rev,
    .compacted_rev = etcd_compacted_rev,
    .applied_rev = etcd_applied_rev,
    .submit = kite_store_etcd_submit,
    .get = etcd_get,
    .range = etcd_range,
    .stats = etcd_stats,
    .compact = etcd_compact,
    .subscribe = etcd_subscribe,
    .unsubscribe = etcd_unsubscribe,
    .subscribe_snapshot = etcd_subscribe_snapshot,
    .history = etcd_history,
    .health = etcd_health,
};
