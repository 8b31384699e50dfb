/* Internal to the etcd backend (etcd.c: open, close, reads, the supervisor; etcd-msg.c: keys,
 * messages, synchronous calls; etcd-watch.c: the watch and resync; etcd-write.c: writes and their
 * completions). What the backend does and its locks: the top of etcd.c. */
#pragma once
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
    struct kite_store_codec codec; /* kite_store_options' (zero: none) */
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

static inline struct etcd_store *es(struct kite_store *b) { return (struct etcd_store *)b; }

struct kv {
    const unsigned char *key, *value;
    size_t key_len, value_len;
    int64_t create_rev, mod_rev, version;
    bool present;
};

/* etcd-msg.c */
char *kite_store_etcd_key_out(struct etcd_store *s, const char *k);
char *kite_store_etcd_key_in(struct etcd_store *s, const unsigned char *k, size_t len);
int kite_store_etcd_kv_parse(const unsigned char *p, size_t len, struct kv *kv);
int64_t kite_store_etcd_header_rev(const struct pb_field *f);
struct kite_record *kite_store_etcd_kv_record(struct etcd_store *s, const struct kv *kv);
/* Why kite_store_etcd_kv_record gives no record. */
enum kv_skip { KV_FOREIGN_KEY = 1, KV_SEALED, KV_ENVELOPE };
struct kite_record *kite_store_etcd_kv_record_why(struct etcd_store *s, const struct kv *kv, enum kv_skip *ret_why,
                                                  char **ret_error);
bool kite_store_etcd_is_envelope(const void *value, size_t len);
void kite_store_etcd_encode_range(struct kite_buf *b, const char *key, size_t key_len, const char *end, int64_t limit,
                         int64_t rev);
char *kite_store_etcd_range_end(const char *p);
void kite_store_etcd_encode_txn(struct kite_buf *b, enum kite_write_type type, const char *ekey, const char *value, size_t len,
                       int64_t expect, int64_t lease);
int kite_store_etcd_call_on(struct etcd_store *s, struct grpc_conn *c, const char *path, const struct kite_buf *req,
                   struct kite_buf *resp, char **ret_msg);
int kite_store_etcd_call_once(struct etcd_store *s, const char *path, const struct kite_buf *req, struct kite_buf *resp,
                     char **ret_msg);
int kite_store_etcd_call_retry(struct etcd_store *s, const char *path, const struct kite_buf *req, struct kite_buf *resp,
                      char **ret_msg);
int kite_store_etcd_read_errno(int st, const char *msg);

/* etcd-watch.c */
int kite_store_etcd_watch_start(struct etcd_store *s, struct grpc_conn *c);
int kite_store_etcd_resync(struct etcd_store *s, struct grpc_conn *c);

/* etcd-write.c */
void *kite_store_etcd_completer_main(void *arg);
void kite_store_etcd_backlog_expire_locked(struct etcd_store *s);
void kite_store_etcd_backlog_send(struct etcd_store *s);
void kite_store_etcd_read_back(struct etcd_store *s);
int kite_store_etcd_submit(struct kite_store *b, const struct kite_write *w, kite_write_cb cb, void *ud);
void kite_store_etcd_ready_locked(struct etcd_store *s, struct epending *p);
