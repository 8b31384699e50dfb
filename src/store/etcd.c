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
 *   as in the SQLite backend when encryption is configured.
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
 * Locks, in nesting order: conn_lock (rwlock over the current connection; never held while a
 * callback of it runs: see etcd-grpc.c), then the connection's own mutex; on the I/O thread,
 * sub_mu then live_lock; p_mu (pending completions and the backlog) is a leaf. */
#include "store/store-int.h"

#include "base/clock.h"
#include "base/log.h"
#include "store/etcd-grpc.h"
#include "store/etcd-pb.h"
#include <stdio.h>
#include <unistd.h>

/* How long a write not yet sent waits for a connection before it fails with -EIO. */
#define ETCD_BACKLOG_MS 10000
/* Default for connecting, the TLS handshake, and a connection's keepalive (--etcd-healthcheck-timeout). */
#define ETCD_TIMEOUT_MS_DEFAULT 2000
#define ETCD_ENDPOINTS_MAX 16

/* field numbers (etcdserverpb rpc.proto, mvccpb kv.proto) */
enum {
    F_HEADER = 1,
    F_HEADER_REVISION = 3,
    F_KV_KEY = 1, F_KV_CREATE = 2, F_KV_MOD = 3, F_KV_VERSION = 4, F_KV_VALUE = 5,
    F_RANGE_KEY = 1, F_RANGE_END = 2, F_RANGE_LIMIT = 3, F_RANGE_REVISION = 4,
    F_RANGE_RESP_KVS = 2, F_RANGE_RESP_MORE = 3,
    F_PUT_KEY = 1, F_PUT_VALUE = 2, F_PUT_LEASE = 3, F_PUT_PREV_KV = 4, F_PUT_RESP_PREV_KV = 2,
    F_LEASE_TTL = 1, F_LEASE_RESP_ID = 2,
    F_DEL_KEY = 1, F_DEL_PREV_KV = 3, F_DEL_RESP_PREV_KVS = 3,
    F_CMP_RESULT = 1, F_CMP_TARGET = 2, F_CMP_KEY = 3, F_CMP_VERSION = 4, F_CMP_CREATE_REV = 5, F_CMP_MOD_REV = 6,
    CMP_EQUAL = 0, CMP_GREATER = 1, CMP_TARGET_CREATE = 1, CMP_TARGET_MOD = 2,
    F_TXN_COMPARE = 1, F_TXN_SUCCESS = 2, F_TXN_FAILURE = 3,
    F_TXN_RESP_SUCCEEDED = 2, F_TXN_RESP_RESPONSES = 3,
    F_OP_RANGE = 1, F_OP_PUT = 2, F_OP_DELETE = 3,
    F_WATCH_CREATE = 1,
    F_WC_KEY = 1, F_WC_RANGE_END = 2, F_WC_START_REV = 3, F_WC_PROGRESS_NOTIFY = 4,
    F_WR_CREATED = 3, F_WR_CANCELED = 4, F_WR_COMPACT_REV = 5, F_WR_CANCEL_REASON = 6, F_WR_EVENTS = 11,
    F_EV_TYPE = 1, F_EV_KV = 2, EV_DELETE = 1,
    F_COMPACT_REVISION = 1,
    F_STATUS_LEADER = 4, F_STATUS_ERRORS = 8,
};

struct endpoint {
    char *host, *port;
    bool https;
};

/* A write from submit to completion. */
struct epending {
    struct epending *next;
    struct etcd_store *s;
    enum kite_write_type type;
    char *key;   /* kite's key */
    struct kite_record *val; /* CREATE/UPDATE: the key and the caller's value (the completion's record) */
    char *sent;              /* CREATE/UPDATE: the value bytes as sent (sealed when encrypted) */
    size_t sent_len;
    char *msg;   /* the encoded TxnRequest */
    size_t msg_len;
    int64_t expect;
    kite_write_cb cb;
    void *ud;
    int64_t queued_ns;
    /* the response */
    struct kite_buf resp;
    /* the result, fired once wait_rev <= applied_rev */
    int err;
    int64_t rev, wait_rev;
    struct kite_record *rec;
};

struct esub {
    char *prefix;
    kite_store_batch_cb cb;
    void *ud;
};

struct etcd_store {
    struct kite_store base;
    struct kite_store_crypt *crypt;
    char *prefix; /* etcd key prefix without the trailing '/' */
    struct endpoint eps[ETCD_ENDPOINTS_MAX];
    size_t n_eps;
    struct grpc_tls tls;
    int timeout_ms;

    pthread_rwlock_t conn_lock;
    struct grpc_conn *conn; /* NULL while none is up */
    size_t cur;             /* eps[cur] is (or was last) connected */
    _Atomic bool watching;  /* the watch on conn is running */
    _Atomic bool healthy;   /* the last Status probe found a leader */
    _Atomic bool resync;    /* the watch was compacted: reload before watching again */
    char *health_error;     /* why not (under p_mu) */

    pthread_mutex_t sub_mu;
    struct esub subs[KITE_STORE_SUBSCRIBERS_MAX];
    size_t nsubs;
    pthread_rwlock_t live_lock;
    struct kite_map live;
    _Atomic int64_t applied_rev, compact_rev, snap_rev;
    int64_t compact_version; /* compact_rev_key's version last seen (compact_claim; the housekeeping thread) */
    char **ttl_prefixes; /* kite keys under them get a lease of ttl_s (kite_store_options) */
    size_t n_ttl_prefixes;
    int64_t ttl_s;
    pthread_mutex_t lease_mu; /* the lease shared by writes with a TTL (lease_for) */
    int64_t lease_id, lease_ttl, lease_from;

    pthread_mutex_t p_mu;
    pthread_cond_t p_cond, sup_cond;
    struct epending *ready;    /* answered, by wait_rev */
    struct epending *unknown;  /* sent, the answer lost: to be read back (supervisor) */
    struct epending *backlog;  /* not yet sent (no connection) */
    size_t inflight;
    _Atomic bool stopping;
    _Atomic bool draining; /* closing, the connection gone: answered writes fire without their event */
    pthread_t completer, supervisor;
    bool threads_started;

    _Atomic uint64_t n_writes, n_failed, n_rejected, n_commits_failed;
};

static struct etcd_store *es(struct kite_store *b) { return (struct etcd_store *)b; }

/* ---- keys ---- */

static const struct {
    const char *kite, *etcd;
} key_map[] = {
    {"/registry/nodes/", "/minions/"},
    {"/registry/services/", "/services/specs/"},
    {"/registry/endpoints/", "/services/endpoints/"},
};

/* kite's key or prefix -> etcd's (caller frees). */
static char *key_to_etcd(struct etcd_store *s, const char *k) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(key_map); i++)
        if (kite_startswith(k, key_map[i].kite))
            return kite_asprintf("%s%s%s", s->prefix, key_map[i].etcd, k + strlen(key_map[i].kite));
    if (kite_startswith(k, "/registry/") || strcmp(k, "/registry") == 0)
        return kite_asprintf("%s%s", s->prefix, k + strlen("/registry"));
    return kite_asprintf("%s%s", s->prefix, k);
}

/* etcd's key -> kite's (caller frees), NULL when outside the prefix. */
static char *key_from_etcd(struct etcd_store *s, const unsigned char *k, size_t len) {
    size_t pl = strlen(s->prefix);
    if (len <= pl || memcmp(k, s->prefix, pl) != 0 || k[pl] != '/' || memchr(k, 0, len)) return NULL;
    const char *rest = (const char *)k + pl;
    size_t rl = len - pl;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(key_map); i++) {
        size_t el = strlen(key_map[i].etcd);
        if (rl >= el && memcmp(rest, key_map[i].etcd, el) == 0)
            return kite_asprintf("%s%.*s", key_map[i].kite, (int)(rl - el), rest + el);
    }
    return kite_asprintf("/registry%.*s", (int)rl, rest);
}

/* ---- messages ---- */

struct kv {
    const unsigned char *key, *value;
    size_t key_len, value_len;
    int64_t create_rev, mod_rev, version;
    bool present;
};

static int kv_parse(const unsigned char *p, size_t len, struct kv *kv) {
    struct pb_reader r = pb_reader(p, len);
    struct pb_field f;
    int n;
    *kv = (struct kv){.present = true, .key = (const unsigned char *)"", .value = (const unsigned char *)""};
    while ((n = pb_next(&r, &f)) > 0) {
        if (f.field == F_KV_KEY && f.wire == 2) kv->key = f.data, kv->key_len = f.len;
        else if (f.field == F_KV_VALUE && f.wire == 2) kv->value = f.data, kv->value_len = f.len;
        else if (f.field == F_KV_CREATE && f.wire == 0) kv->create_rev = (int64_t)f.u;
        else if (f.field == F_KV_MOD && f.wire == 0) kv->mod_rev = (int64_t)f.u;
        else if (f.field == F_KV_VERSION && f.wire == 0) kv->version = (int64_t)f.u;
    }
    return n;
}

static int64_t header_rev(const struct pb_field *f) {
    struct pb_reader r = pb_sub(f);
    struct pb_field h;
    while (pb_next(&r, &h) > 0)
        if (h.field == F_HEADER_REVISION && h.wire == 0) return (int64_t)h.u;
    return 0;
}

/* A record of a key-value from etcd (value opened when sealed); NULL when the key is not the
 * store's or the value does not open. */
static struct kite_record *kv_record(struct etcd_store *s, const struct kv *kv) {
    _cleanup_free_ char *k = key_from_etcd(s, kv->key, kv->key_len);
    if (!k) return NULL;
    /* kube-apiserver's protobuf envelope: not what the API server here reads */
    if (kv->value_len >= 4 && memcmp(kv->value, "k8s\0", 4) == 0) return NULL;
    struct kite_record *rec = record_from_row(s->crypt, k, strlen(k), kv->value, kv->value_len);
    if (!rec) return NULL;
    rec->create_rev = kv->create_rev;
    rec->mod_rev = kv->mod_rev;
    rec->version = kv->version;
    return rec;
}

/* RangeRequest of [key, end) (end NULL: the one key), at rev (0: latest), at most limit. */
static void encode_range(struct kite_buf *b, const char *key, size_t key_len, const char *end, int64_t limit,
                         int64_t rev) {
    pb_put_bytes(b, F_RANGE_KEY, key, key_len);
    if (end) pb_put_bytes(b, F_RANGE_END, end, strlen(end));
    pb_put_uint(b, F_RANGE_LIMIT, (uint64_t)limit);
    pb_put_uint(b, F_RANGE_REVISION, (uint64_t)rev);
}

/* The end of the range of keys starting with p ("\0" when none: every key after p). */
static char *range_end(const char *p) {
    char *e = prefix_end(p);
    return e ? e : kite_strdup("\0");
}

static void encode_txn(struct kite_buf *b, enum kite_write_type type, const char *ekey, const char *value, size_t len,
                       int64_t expect, int64_t lease) {
    size_t ek = strlen(ekey);
    size_t m = pb_begin(b, F_TXN_COMPARE);
    if (type == KITE_WRITE_CREATE) {
        /* create_revision == 0: the key does not exist (proto3 leaves the zero fields out) */
        pb_put_uint(b, F_CMP_RESULT, CMP_EQUAL);
        pb_put_uint(b, F_CMP_TARGET, CMP_TARGET_CREATE);
        pb_put_bytes(b, F_CMP_KEY, ekey, ek);
        /* the target_union oneof's member, present although 0 */
        pb_put_varint(b, (uint64_t)F_CMP_CREATE_REV << 3);
        pb_put_varint(b, 0);
    } else if (expect) {
        pb_put_uint(b, F_CMP_RESULT, CMP_EQUAL);
        pb_put_uint(b, F_CMP_TARGET, CMP_TARGET_MOD);
        pb_put_bytes(b, F_CMP_KEY, ekey, ek);
        pb_put_uint(b, F_CMP_MOD_REV, (uint64_t)expect);
    } else {
        pb_put_uint(b, F_CMP_RESULT, CMP_GREATER);
        pb_put_uint(b, F_CMP_TARGET, CMP_TARGET_CREATE);
        pb_put_bytes(b, F_CMP_KEY, ekey, ek);
        pb_put_varint(b, (uint64_t)F_CMP_CREATE_REV << 3);
        pb_put_varint(b, 0);
    }
    pb_end(b, m);
    m = pb_begin(b, F_TXN_SUCCESS);
    if (type == KITE_WRITE_DELETE) {
        size_t d = pb_begin(b, F_OP_DELETE);
        pb_put_bytes(b, F_DEL_KEY, ekey, ek);
        pb_put_uint(b, F_DEL_PREV_KV, 1);
        pb_end(b, d);
    } else {
        size_t p = pb_begin(b, F_OP_PUT);
        pb_put_bytes(b, F_PUT_KEY, ekey, ek);
        pb_put_bytes(b, F_PUT_VALUE, value, len);
        pb_put_uint(b, F_PUT_LEASE, (uint64_t)lease);
        pb_put_uint(b, F_PUT_PREV_KV, 1);
        pb_end(b, p);
    }
    pb_end(b, m);
    m = pb_begin(b, F_TXN_FAILURE);
    size_t r = pb_begin(b, F_OP_RANGE);
    encode_range(b, ekey, ek, NULL, 0, 0);
    pb_end(b, r);
    pb_end(b, m);
}

/* ---- synchronous calls (reads, compaction, probes), retried across failover ---- */

struct sync_call {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool done;
    int status;
    char *message;
    struct kite_buf resp;
};

static void sync_msg(void *ud, const unsigned char *msg, size_t len) {
    struct sync_call *sc = ud;
    kite_buf_reset(&sc->resp);
    kite_buf_append(&sc->resp, msg, len);
}

static void sync_done(void *ud, int status, const char *message) {
    struct sync_call *sc = ud;
    pthread_mutex_lock(&sc->mu);
    sc->status = status;
    sc->message = kite_strdup(message);
    sc->done = true;
    pthread_cond_signal(&sc->cond);
    pthread_mutex_unlock(&sc->mu);
}

/* One call on c (NULL: the current connection); status as grpc_done_cb's, -ENOTCONN when there
 * is none. */
static int call_on(struct etcd_store *s, struct grpc_conn *c, const char *path, const struct kite_buf *req,
                   struct kite_buf *resp, char **ret_msg) {
    struct sync_call sc = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    int r;
    if (c) {
        r = grpc_call_start(c, path, req->p, req->len, false, sync_msg, sync_done, &sc);
    } else {
        pthread_rwlock_rdlock(&s->conn_lock);
        r = s->conn ? grpc_call_start(s->conn, path, req->p, req->len, false, sync_msg, sync_done, &sc) : -ENOTCONN;
        pthread_rwlock_unlock(&s->conn_lock);
    }
    if (r < 0) return r;
    pthread_mutex_lock(&sc.mu);
    while (!sc.done) pthread_cond_wait(&sc.cond, &sc.mu);
    pthread_mutex_unlock(&sc.mu);
    if (ret_msg) *ret_msg = sc.message;
    else free(sc.message);
    *resp = sc.resp;
    return sc.status;
}

static int call_once(struct etcd_store *s, const char *path, const struct kite_buf *req, struct kite_buf *resp,
                     char **ret_msg) {
    return call_on(s, NULL, path, req, resp, ret_msg);
}

/* A call that is safe to repeat (a read, a compaction): retried while the connection is being
 * replaced, for up to twice the time a failover takes. */
static int call_retry(struct etcd_store *s, const char *path, const struct kite_buf *req, struct kite_buf *resp,
                      char **ret_msg) {
    int64_t deadline = kite_now_mono(kite_clock_real()) + (int64_t)s->timeout_ms * 1000000 * 2 * (int64_t)s->n_eps + 5 * KITE_NS_PER_SEC;
    for (;;) {
        char *msg = NULL;
        *resp = (struct kite_buf){0};
        int st = call_once(s, path, req, resp, &msg);
        bool again = st == -ENOTCONN || st == -ECONNRESET || st == GRPC_UNAVAILABLE;
        if (!again || kite_now_mono(kite_clock_real()) > deadline || s->stopping) {
            if (ret_msg) *ret_msg = msg;
            else free(msg);
            return st;
        }
        free(msg);
        kite_buf_release(resp);
        pthread_mutex_lock(&s->p_mu);
        pthread_cond_signal(&s->sup_cond);
        pthread_mutex_unlock(&s->p_mu);
        usleep(50 * 1000);
    }
}

/* gRPC status of a read -> errno (store.h's meanings). */
static int read_errno(int st, const char *msg) {
    if (st == GRPC_OK) return 0;
    if (st == GRPC_OUT_OF_RANGE && msg && strstr(msg, "compacted")) return -ENODATA;
    if (st == GRPC_OUT_OF_RANGE && msg && strstr(msg, "future")) return -ERANGE;
    return -EIO;
}

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
    while (pb_next(&evs_r, &f) > 0) {
        if (f.field != F_WR_EVENTS || f.wire != 2) continue;
        struct pb_reader er = pb_sub(&f);
        struct pb_field g;
        int type = 0;
        struct kv kv = {0};
        while (pb_next(&er, &g) > 0) {
            if (g.field == F_EV_TYPE && g.wire == 0) type = (int)g.u;
            else if (g.field == F_EV_KV && g.wire == 2) kv_parse(g.data, g.len, &kv);
        }
        if (!kv.present) continue;
        _cleanup_free_ char *k = key_from_etcd(s, kv.key, kv.key_len);
        if (!k) continue;
        struct kite_record *prev = kite_map_get(&s->live, k);
        struct kite_store_event ev = {.rev = kv.mod_rev, .prev = prev};
        if (type == EV_DELETE) {
            if (!prev) continue;
            kite_map_del(&s->live, k);
            ev.type = KITE_WRITE_DELETE;
            ev.rec = record_tombstone(prev, kv.mod_rev);
        } else {
            struct kite_record *rec = kv_record(s, &kv);
            if (!rec) {
                log_warn("store", "etcd: the value of %s does not open (sealed with another key, or protobuf): left out", k);
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
    while (pb_next(&r, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) hrev = header_rev(&f);
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

static int watch_start(struct etcd_store *s, struct grpc_conn *c) {
    struct kite_buf b = {0};
    _cleanup_free_ char *k = kite_asprintf("%s/", s->prefix);
    _cleanup_free_ char *end = range_end(k);
    size_t m = pb_begin(&b, F_WATCH_CREATE);
    pb_put_bytes(&b, F_WC_KEY, k, strlen(k));
    pb_put_bytes(&b, F_WC_RANGE_END, end, strlen(end));
    pb_put_uint(&b, F_WC_START_REV, (uint64_t)s->applied_rev + 1);
    pb_put_uint(&b, F_WC_PROGRESS_NOTIFY, 1);
    pb_end(&b, m);
    s->watching = true;
    int r = grpc_call_start(c, "/etcdserverpb.Watch/Watch", b.p, b.len, true, watch_msg, watch_done, s);
    if (r < 0) s->watching = false;
    kite_buf_release(&b);
    return r < 0 ? r : 0;
}

/* ---- writes ---- */

/* Queues p's completion (by wait_rev) for the completion thread. Under p_mu. */
static void ready_locked(struct etcd_store *s, struct epending *p) {
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
    while (pb_next(&r, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) p->rev = header_rev(&f);
        else if (f.field == F_TXN_RESP_SUCCEEDED && f.wire == 0) ok = f.u;
        else if (f.field == F_TXN_RESP_RESPONSES && f.wire == 2) {
            /* ResponseOp { response_range | response_put | response_delete_range } */
            struct pb_reader o = pb_sub(&f);
            struct pb_field g, h;
            while (pb_next(&o, &g) > 0) {
                if (g.wire != 2) continue;
                struct pb_reader q = pb_sub(&g);
                unsigned want = g.field == F_OP_RANGE ? F_RANGE_RESP_KVS
                                : g.field == F_OP_PUT ? F_PUT_RESP_PREV_KV : F_DEL_RESP_PREV_KVS;
                while (pb_next(&q, &h) > 0)
                    if (h.field == want && h.wire == 2 && !kv.present) kv_parse(h.data, h.len, &kv);
            }
        }
    }
    if (!p->rev) return;
    if (ok) {
        p->err = 0;
        p->wait_rev = p->rev;
        if (p->type == KITE_WRITE_DELETE) {
            /* the DeleteRange's prev_kv: the version deleted */
            struct kite_record *last = kv.present ? kv_record(s, &kv) : NULL;
            if (!last) last = record_alloc(p->key, strlen(p->key), "", 0);
            p->rec = record_tombstone(last, p->rev);
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
    p->rec = kv_record(s, &kv);
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
    ready_locked(s, p);
    pthread_mutex_unlock(&s->p_mu);
}

/* Sends p on the current connection: 0, or -ENOTCONN (nothing was sent). */
static int send_txn(struct etcd_store *s, struct epending *p) {
    pthread_rwlock_rdlock(&s->conn_lock);
    int r = s->conn && s->watching ? grpc_call_start(s->conn, "/etcdserverpb.KV/Txn", p->msg, p->msg_len, false,
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
    pb_put_uint(&req, F_LEASE_TTL, (uint64_t)(ttl + reuse_ns / KITE_NS_PER_SEC));
    char *msg = NULL;
    int st = call_once(s, "/etcdserverpb.Lease/LeaseGrant", &req, &resp, &msg);
    int64_t id = 0;
    struct pb_reader r = pb_reader(resp.p, resp.len);
    struct pb_field f;
    while (st == GRPC_OK && pb_next(&r, &f) > 0)
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

static int etcd_submit(struct kite_store *b, const struct kite_write *w, kite_write_cb cb, void *ud) {
    struct etcd_store *s = es(b);
    if (!kite_startswith(w->key, "/registry/")) return -EINVAL;
    bool del = w->type == KITE_WRITE_DELETE;
    _cleanup_free_ char *sealed = NULL;
    const char *val = del ? "" : w->value ? w->value : "";
    size_t len = del ? 0 : w->len;
    if (!del && crypt_applies(s->crypt, w->key)) {
        int r = crypt_seal(s->crypt, w->key, val, len, &sealed, &len);
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
        p->val = record_alloc(w->key, strlen(w->key), w->value ? w->value : "", w->len);
        p->sent = kite_malloc(len + 1);
        memcpy(p->sent, val, len);
        p->sent_len = len;
    }
    p->expect = w->expect_mod_rev;
    p->cb = cb;
    p->ud = ud;
    p->queued_ns = kite_now_mono(kite_clock_real());
    _cleanup_free_ char *ekey = key_to_etcd(s, w->key);
    struct kite_buf m = {0};
    bool ttl = false;
    for (size_t i = 0; !del && s->ttl_s > 0 && i < s->n_ttl_prefixes; i++)
        ttl = ttl || kite_startswith(w->key, s->ttl_prefixes[i]);
    encode_txn(&m, w->type, ekey, val, len, w->expect_mod_rev, ttl ? lease_for(s, s->ttl_s) : 0);
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
static void *completer_main(void *arg) {
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

static int cmp_ev(const void *a, const void *b) {
    const struct kite_store_event *x = a, *y = b;
    return x->rev < y->rev ? -1 : x->rev > y->rev;
}

/* After a compacted watch: reads every key at the current revision R on c and hands the
 * subscribers what changed since the last applied revision, as events in revision order (a
 * changed key at its mod_revision, which is past the applied revision; a key gone as a DELETE at
 * R, when it went is no longer known). Then the watch goes on from R. */
static int resync(struct etcd_store *s, struct grpc_conn *c) {
    _cleanup_free_ char *k = kite_asprintf("%s/", s->prefix);
    _cleanup_free_ char *end = range_end(k);
    struct kite_buf req = {0}, resp = {0};
    encode_range(&req, k, strlen(k), end, 0, 0);
    char *msg = NULL;
    int st = call_on(s, c, "/etcdserverpb.KV/Range", &req, &resp, &msg);
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
    while (pb_next(&rd, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) rev = header_rev(&f);
        if (f.field != F_RANGE_RESP_KVS || f.wire != 2) continue;
        struct kv kv;
        kv_parse(f.data, f.len, &kv);
        struct kite_record *rec = kv_record(s, &kv);
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
        evs[n++] = (struct kite_store_event){KITE_WRITE_DELETE, rev, record_tombstone(v, rev), v};
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

/* ---- the supervisor: connections, the backlog, health ---- */

/* Fails backlogged writes that waited too long (all of them when stopping). Under p_mu. */
static void backlog_expire_locked(struct etcd_store *s) {
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
        ready_locked(s, p);
    }
}

static void backlog_send(struct etcd_store *s) {
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

/* Connects to the first member that answers, starting after the current one (or at it: first). */
static int connect_any(struct etcd_store *s, bool first, struct grpc_conn **ret, char **ret_error) {
    int r = -ENOTCONN;
    for (size_t i = 0; i < s->n_eps; i++) {
        size_t k = (s->cur + i + (first ? 0 : 1)) % s->n_eps;
        struct endpoint *e = &s->eps[k];
        char *err = NULL;
        r = grpc_conn_open(e->host, e->port, e->https, &s->tls, s->timeout_ms, ret, &err);
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
    int st = call_once(s, "/etcdserverpb.Maintenance/Status", &req, &resp, &msg);
    int r = 0;
    if (st != GRPC_OK) {
        *ret_why = st < 0 ? kite_asprintf("no connection to a member: %s", strerror(-st)) : kite_asprintf("%s", msg);
        r = -EIO;
    } else {
        struct pb_reader rd = pb_reader(resp.p, resp.len);
        struct pb_field f;
        uint64_t leader = 0;
        char *errs = NULL;
        while (pb_next(&rd, &f) > 0) {
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

/* The writes whose answer was lost: each key read back; one holding exactly the bytes the write
 * sent (with a new mod_revision past its compare) was applied by it, and completes as a success at
 * that revision; otherwise it fails -EIO (unknown: the client reads the object). A read that cannot
 * be made now is tried again on the next round, for up to ETCD_BACKLOG_MS. */
static void read_back(struct etcd_store *s) {
    pthread_mutex_lock(&s->p_mu);
    struct epending *list = TAKE_PTR(s->unknown);
    pthread_mutex_unlock(&s->p_mu);
    while (list) {
        struct epending *p = list;
        list = p->next;
        p->next = NULL;
        _cleanup_free_ char *ekey = key_to_etcd(s, p->key);
        struct kite_buf req = {0}, resp = {0};
        encode_range(&req, ekey, strlen(ekey), NULL, 0, 0);
        char *msg = NULL;
        int st = call_once(s, "/etcdserverpb.KV/Range", &req, &resp, &msg);
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
        while (st == GRPC_OK && pb_next(&r, &f) > 0)
            if (f.field == F_RANGE_RESP_KVS && f.wire == 2) kv_parse(f.data, f.len, &kv);
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
        ready_locked(s, p);
        pthread_mutex_unlock(&s->p_mu);
    }
}

static void *supervisor_main(void *arg) {
    struct etcd_store *s = arg;
    int64_t last_probe = 0;
    pthread_mutex_lock(&s->p_mu);
    while (!s->stopping) {
        backlog_expire_locked(s);
        bool dead = !s->conn || grpc_conn_dead(s->conn) || !s->watching;
        bool unknown = s->unknown != NULL;
        pthread_mutex_unlock(&s->p_mu);
        if (dead) {
            /* replace the connection: the next member, the watch resumed from the applied revision */
            pthread_rwlock_wrlock(&s->conn_lock);
            struct grpc_conn *old = TAKE_PTR(s->conn);
            pthread_rwlock_unlock(&s->conn_lock);
            grpc_conn_close(old);
            struct grpc_conn *c = NULL;
            char *err = NULL;
            int r = connect_any(s, false, &c, &err);
            if (r == 0 && s->resync && (r = resync(s, c)) == 0) s->resync = false;
            if (r == 0 && (r = watch_start(s, c)) == 0) {
                pthread_rwlock_wrlock(&s->conn_lock);
                s->conn = c;
                pthread_rwlock_unlock(&s->conn_lock);
                log_info("store", "etcd: connected to %s:%s, watching from revision %lld", s->eps[s->cur].host,
                         s->eps[s->cur].port, (long long)s->applied_rev + 1);
                backlog_send(s);
                last_probe = 0;
            } else {
                grpc_conn_close(c);
                set_health(s, false, kite_asprintf("no member answers: %s", err ? err : "?"));
            }
            usleep(100 * 1000); /* at most 10 attempts a second */
            free(err);
        } else if (unknown) {
            read_back(s);
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
    _cleanup_free_ char *ep = key_to_etcd(s, prefix);
    _cleanup_free_ char *end = range_end(ep);
    _cleanup_free_ char *from = NULL;
    if (start_after && strcmp(start_after, prefix) >= 0) {
        _cleanup_free_ char *ek = key_to_etcd(s, start_after);
        from = kite_malloc(strlen(ek) + 2);
        memcpy(from, ek, strlen(ek) + 1);
        from[strlen(ek) + 1] = 0; /* the key right after start_after: start_after + "\0" */
    }
    struct kite_buf req = {0}, resp = {0};
    encode_range(&req, from ? from : ep, from ? strlen(from) + 1 : strlen(ep), end, (int64_t)limit,
                 at_rev ? at_rev : s->applied_rev);
    char *msg = NULL;
    int st = call_retry(s, "/etcdserverpb.KV/Range", &req, &resp, &msg);
    kite_buf_release(&req);
    int r = read_errno(st, msg);
    free(msg);
    if (r < 0) {
        kite_buf_release(&resp);
        return r;
    }
    struct pb_reader rd = pb_reader(resp.p, resp.len);
    struct pb_field f;
    struct kite_record **recs = NULL;
    size_t n = 0, cap = 0;
    while (pb_next(&rd, &f) > 0) {
        if (f.field == F_RANGE_RESP_MORE && f.wire == 0 && ret_more) *ret_more = f.u;
        if (f.field != F_RANGE_RESP_KVS || f.wire != 2) continue;
        struct kv kv;
        kv_parse(f.data, f.len, &kv);
        struct kite_record *rec = kv_record(s, &kv);
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
    size_t m = pb_begin(&req, F_TXN_COMPARE);
    /* result EQUAL (0) and target VERSION (0) are proto3 zeros; the version oneof is present */
    pb_put_bytes(&req, F_CMP_KEY, COMPACT_KEY, strlen(COMPACT_KEY));
    pb_put_varint(&req, (uint64_t)F_CMP_VERSION << 3);
    pb_put_varint(&req, (uint64_t)s->compact_version);
    pb_end(&req, m);
    char val[24];
    int vl = snprintf(val, sizeof val, "%lld", (long long)rev);
    m = pb_begin(&req, F_TXN_SUCCESS);
    size_t p = pb_begin(&req, F_OP_PUT);
    pb_put_bytes(&req, F_PUT_KEY, COMPACT_KEY, strlen(COMPACT_KEY));
    pb_put_bytes(&req, F_PUT_VALUE, val, (size_t)vl);
    pb_end(&req, p);
    pb_end(&req, m);
    m = pb_begin(&req, F_TXN_FAILURE);
    p = pb_begin(&req, F_OP_RANGE);
    encode_range(&req, COMPACT_KEY, strlen(COMPACT_KEY), NULL, 0, 0);
    pb_end(&req, p);
    pb_end(&req, m);
    char *msg = NULL;
    int st = call_retry(s, "/etcdserverpb.KV/Txn", &req, &resp, &msg);
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
    while (pb_next(&r, &f) > 0) {
        if (f.field == F_TXN_RESP_SUCCEEDED && f.wire == 0) ok = f.u;
        if (f.field != F_TXN_RESP_RESPONSES || f.wire != 2) continue;
        struct pb_reader o = pb_sub(&f);
        while (pb_next(&o, &g) > 0) {
            if (g.field != F_OP_RANGE || g.wire != 2) continue;
            struct pb_reader q = pb_sub(&g);
            while (pb_next(&q, &h) > 0)
                if (h.field == F_RANGE_RESP_KVS && h.wire == 2) kv_parse(h.data, h.len, &kv);
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
    pb_put_uint(&req, F_COMPACT_REVISION, (uint64_t)rev);
    char *msg = NULL;
    int st = call_retry(s, "/etcdserverpb.KV/Compact", &req, &resp, &msg);
    kite_buf_release(&req);
    kite_buf_release(&resp);
    int r = read_errno(st, msg);
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

/* The snapshot comes from the live map; history before it is not kept here (hist_cb is not
 * called), so the revision it is current to becomes the compacted revision this backend reports
 * (see the top of the file). */
static int etcd_subscribe_snapshot(struct kite_store *b, const char *prefix, kite_store_batch_cb cb, void *ud,
                                   kite_store_event_cb hist_cb, void *hist_ud, struct kite_record ***ret_recs,
                                   size_t *ret_n, int64_t *ret_rev) {
    struct etcd_store *s = es(b);
    (void)hist_cb, (void)hist_ud;
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
    grpc_conn_close(c);
    pthread_mutex_lock(&s->p_mu);
    s->draining = true;
    backlog_expire_locked(s);
    while (s->unknown) {
        struct epending *p = s->unknown;
        s->unknown = p->next;
        p->err = -EIO;
        p->rev = s->applied_rev;
        p->wait_rev = 0;
        ready_locked(s, p);
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
    _cleanup_free_ char *end = range_end(k);
    struct kite_buf req = {0}, resp = {0};
    encode_range(&req, k, strlen(k), end, 0, 0);
    char *msg = NULL;
    int st = call_once(s, "/etcdserverpb.KV/Range", &req, &resp, &msg);
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
    size_t bad = 0;
    while (pb_next(&rd, &f) > 0) {
        if (f.field == F_HEADER && f.wire == 2) s->applied_rev = header_rev(&f);
        if (f.field != F_RANGE_RESP_KVS || f.wire != 2) continue;
        struct kv kv;
        kv_parse(f.data, f.len, &kv);
        struct kite_record *rec = kv_record(s, &kv);
        if (!rec) {
            bad++;
            continue;
        }
        kite_record_unref(kite_map_put(&s->live, rec->key, rec));
    }
    kite_buf_release(&resp);
    if (bad) log_warn("store", "etcd: %zu values under %s do not open (another encryption key, or protobuf): left out", bad, k);
    s->snap_rev = s->applied_rev;
    return 0;
}

static int etcd_open(const char *target, const struct kite_store_options *opts, struct kite_store **ret,
                     char **ret_error) {
    struct etcd_store *s = kite_calloc(1, sizeof *s);
    s->base.ops = &kite_store_etcd_ops;
    s->crypt = opts->crypt;
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
        if ((r = load(s, ret_error)) == 0 && (r = watch_start(s, c)) < 0) {
            *ret_error = kite_asprintf("etcd: cannot start the watch: %s", strerror(-r));
            r = -EIO;
        }
    }
    if (r == 0) {
        if (pthread_create(&s->completer, NULL, completer_main, s) != 0) {
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
    .submit = etcd_submit,
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
