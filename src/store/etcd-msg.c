/* The etcd backend: kite keys to etcd keys, etcd messages, synchronous calls (etcd-int.h). */
#include "store/etcd-int.h"

/* ---- keys ---- */

static const struct {
    const char *kite, *etcd;
} key_map[] = {
    {"/registry/nodes/", "/minions/"},
    {"/registry/services/", "/services/specs/"},
    {"/registry/endpoints/", "/services/endpoints/"},
};

/* kite's key or prefix -> etcd's (caller frees). */
char *kite_store_etcd_key_out(struct etcd_store *s, const char *k) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(key_map); i++)
        if (kite_startswith(k, key_map[i].kite))
            return kite_asprintf("%s%s%s", s->prefix, key_map[i].etcd, k + strlen(key_map[i].kite));
    if (kite_startswith(k, "/registry/") || strcmp(k, "/registry") == 0)
        return kite_asprintf("%s%s", s->prefix, k + strlen("/registry"));
    return kite_asprintf("%s%s", s->prefix, k);
}

/* etcd's key -> kite's (caller frees), NULL when outside the prefix. */
char *kite_store_etcd_key_in(struct etcd_store *s, const unsigned char *k, size_t len) {
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


int kite_store_etcd_kv_parse(const unsigned char *p, size_t len, struct kv *kv) {
    struct pb_reader r = pb_reader(p, len);
    struct pb_field f;
    int n;
    *kv = (struct kv){.present = true, .key = (const unsigned char *)"", .value = (const unsigned char *)""};
    while ((n = kite_store_pb_next(&r, &f)) > 0) {
        if (f.field == F_KV_KEY && f.wire == 2) kv->key = f.data, kv->key_len = f.len;
        else if (f.field == F_KV_VALUE && f.wire == 2) kv->value = f.data, kv->value_len = f.len;
        else if (f.field == F_KV_CREATE && f.wire == 0) kv->create_rev = (int64_t)f.u;
        else if (f.field == F_KV_MOD && f.wire == 0) kv->mod_rev = (int64_t)f.u;
        else if (f.field == F_KV_VERSION && f.wire == 0) kv->version = (int64_t)f.u;
    }
    return n;
}

int64_t kite_store_etcd_header_rev(const struct pb_field *f) {
    struct pb_reader r = pb_sub(f);
    struct pb_field h;
    while (kite_store_pb_next(&r, &h) > 0)
        if (h.field == F_HEADER_REVISION && h.wire == 0) return (int64_t)h.u;
    return 0;
}

bool kite_store_etcd_is_envelope(const void *value, size_t len) {
    return len >= KITE_STORE_ENVELOPE_MAGIC_LEN && memcmp(value, KITE_STORE_ENVELOPE_MAGIC, KITE_STORE_ENVELOPE_MAGIC_LEN) == 0;
}

/* A record of a key-value from etcd (value opened when sealed, kube-apiserver's protobuf envelope
 * decoded by the codec); NULL when the key is not the store's (*ret_why KV_FOREIGN_KEY), the value
 * does not open (KV_SEALED) or is an envelope the codec does not read (KV_ENVELOPE, *ret_error
 * saying why when asked for). */
struct kite_record *kite_store_etcd_kv_record_why(struct etcd_store *s, const struct kv *kv, enum kv_skip *ret_why,
                                                  char **ret_error) {
    enum kv_skip why_;
    if (!ret_why) ret_why = &why_;
    _cleanup_free_ char *k = kite_store_etcd_key_in(s, kv->key, kv->key_len);
    if (!k) return *ret_why = KV_FOREIGN_KEY, NULL;
    struct kite_record *rec = kite_record_from_row(s->crypt, k, strlen(k), kv->value, kv->value_len);
    if (!rec) return *ret_why = KV_SEALED, NULL;
    if (kite_store_etcd_is_envelope(rec->value, rec->len)) {
        char *json = NULL, *err = NULL;
        size_t json_len = 0;
        int r = s->codec.decode ? s->codec.decode(s->codec.ud, k, rec->value, rec->len, &json, &json_len, &err) : -ENOTSUP;
        kite_record_unref(rec);
        if (r < 0) {
            if (ret_error) *ret_error = err ? err : kite_strdup(s->codec.decode ? strerror(-r) : "no protobuf codec");
            else free(err);
            free(json);
            return *ret_why = KV_ENVELOPE, NULL;
        }
        free(err);
        rec = kite_record_alloc(k, strlen(k), json, json_len);
        free(json);
    }
    rec->create_rev = kv->create_rev;
    rec->mod_rev = kv->mod_rev;
    rec->version = kv->version;
    return rec;
}

struct kite_record *kite_store_etcd_kv_record(struct etcd_store *s, const struct kv *kv) {
    return kite_store_etcd_kv_record_why(s, kv, NULL, NULL);
}

/* RangeRequest of [key, end) (end NULL: the one key), at rev (0: latest), at most limit. */
void kite_store_etcd_encode_range(struct kite_buf *b, const char *key, size_t key_len, const char *end, int64_t limit,
                         int64_t rev) {
    kite_store_pb_put_bytes(b, F_RANGE_KEY, key, key_len);
    if (end) kite_store_pb_put_bytes(b, F_RANGE_END, end, strlen(end));
    kite_store_pb_put_uint(b, F_RANGE_LIMIT, (uint64_t)limit);
    kite_store_pb_put_uint(b, F_RANGE_REVISION, (uint64_t)rev);
}

/* The end of the range of keys starting with p ("\0" when none: every key after p). */
char *kite_store_etcd_range_end(const char *p) {
    char *e = kite_store_prefix_end(p);
    return e ? e : kite_strdup("\0");
}

void kite_store_etcd_encode_txn(struct kite_buf *b, enum kite_write_type type, const char *ekey, const char *value, size_t len,
                       int64_t expect, int64_t lease) {
    size_t ek = strlen(ekey);
    size_t m = kite_store_pb_begin(b, F_TXN_COMPARE);
    if (type == KITE_WRITE_CREATE) {
        /* create_revision == 0: the key does not exist (proto3 leaves the zero fields out) */
        kite_store_pb_put_uint(b, F_CMP_RESULT, CMP_EQUAL);
        kite_store_pb_put_uint(b, F_CMP_TARGET, CMP_TARGET_CREATE);
        kite_store_pb_put_bytes(b, F_CMP_KEY, ekey, ek);
        /* the target_union oneof's member, present although 0 */
        kite_store_pb_put_varint(b, (uint64_t)F_CMP_CREATE_REV << 3);
        kite_store_pb_put_varint(b, 0);
    } else if (expect) {
        kite_store_pb_put_uint(b, F_CMP_RESULT, CMP_EQUAL);
        kite_store_pb_put_uint(b, F_CMP_TARGET, CMP_TARGET_MOD);
        kite_store_pb_put_bytes(b, F_CMP_KEY, ekey, ek);
        kite_store_pb_put_uint(b, F_CMP_MOD_REV, (uint64_t)expect);
    } else {
        kite_store_pb_put_uint(b, F_CMP_RESULT, CMP_GREATER);
        kite_store_pb_put_uint(b, F_CMP_TARGET, CMP_TARGET_CREATE);
        kite_store_pb_put_bytes(b, F_CMP_KEY, ekey, ek);
        kite_store_pb_put_varint(b, (uint64_t)F_CMP_CREATE_REV << 3);
        kite_store_pb_put_varint(b, 0);
    }
    kite_store_pb_end(b, m);
    m = kite_store_pb_begin(b, F_TXN_SUCCESS);
    if (type == KITE_WRITE_DELETE) {
        size_t d = kite_store_pb_begin(b, F_OP_DELETE);
        kite_store_pb_put_bytes(b, F_DEL_KEY, ekey, ek);
        kite_store_pb_put_uint(b, F_DEL_PREV_KV, 1);
        kite_store_pb_end(b, d);
    } else {
        size_t p = kite_store_pb_begin(b, F_OP_PUT);
        kite_store_pb_put_bytes(b, F_PUT_KEY, ekey, ek);
        kite_store_pb_put_bytes(b, F_PUT_VALUE, value, len);
        kite_store_pb_put_uint(b, F_PUT_LEASE, (uint64_t)lease);
        kite_store_pb_put_uint(b, F_PUT_PREV_KV, 1);
        kite_store_pb_end(b, p);
    }
    kite_store_pb_end(b, m);
    m = kite_store_pb_begin(b, F_TXN_FAILURE);
    size_t r = kite_store_pb_begin(b, F_OP_RANGE);
    kite_store_etcd_encode_range(b, ekey, ek, NULL, 0, 0);
    kite_store_pb_end(b, r);
    kite_store_pb_end(b, m);
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
int kite_store_etcd_call_on(struct etcd_store *s, struct grpc_conn *c, const char *path, const struct kite_buf *req,
                   struct kite_buf *resp, char **ret_msg) {
    struct sync_call sc = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    int r;
    if (c) {
        r = kite_store_grpc_call_start(c, path, req->p, req->len, false, sync_msg, sync_done, &sc);
    } else {
        pthread_rwlock_rdlock(&s->conn_lock);
        r = s->conn ? kite_store_grpc_call_start(s->conn, path, req->p, req->len, false, sync_msg, sync_done, &sc) : -ENOTCONN;
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

int kite_store_etcd_call_once(struct etcd_store *s, const char *path, const struct kite_buf *req, struct kite_buf *resp,
                     char **ret_msg) {
    return kite_store_etcd_call_on(s, NULL, path, req, resp, ret_msg);
}

/* A call that is safe to repeat (a read, a compaction): retried while the connection is being
 * replaced, for up to twice the time a failover takes. */
int kite_store_etcd_call_retry(struct etcd_store *s, const char *path, const struct kite_buf *req, struct kite_buf *resp,
                      char **ret_msg) {
    int64_t deadline = kite_now_mono(kite_clock_real()) + (int64_t)s->timeout_ms * 1000000 * 2 * (int64_t)s->n_eps + 5 * KITE_NS_PER_SEC;
    for (;;) {
        char *msg = NULL;
        *resp = (struct kite_buf){0};
        int st = kite_store_etcd_call_once(s, path, req, resp, &msg);
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
int kite_store_etcd_read_errno(int st, const char *msg) {
    if (st == GRPC_OK) return 0;
    if (st == GRPC_OUT_OF_RANGE && msg && strstr(msg, "compacted")) return -ENODATA;
    if (st == GRPC_OUT_OF_RANGE && msg && strstr(msg, "future")) return -ERANGE;
    return -EIO;
}
