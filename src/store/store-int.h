/* Internal to the store module: the SQLite store's state (shared by sqlite.c, the write side,
 * and sqlite-read.c, the read side) and record constructors. */
#pragma once
#include "store/store.h"
#include "base/map.h"

#include <pthread.h>
#include <sqlite3.h>

/* A record with a copy of key (key_len bytes) and value, refs = 1, revisions zero. */
struct kite_record *kite_record_alloc(const char *key, size_t key_len, const void *value, size_t len);

/* crypt.c: sealing values of encrypted prefixes. *ret is malloc'ed; crypt_open leaves *ret
 * NULL (0) for a value stored in the clear, and fails -EBADMSG for one that does not open. */
bool kite_store_crypt_applies(const struct kite_store_crypt *c, const char *key);
int kite_store_crypt_seal(struct kite_store_crypt *c, const char *key, const void *plain, size_t len, char **ret, size_t *ret_len);
int kite_store_crypt_open(struct kite_store_crypt *c, const char *key, const void *sealed, size_t len, char **ret, size_t *ret_len);
/* A record from a row's key and stored value, opened when its key is encrypted; NULL when the
 * value does not open (another key, or damaged). */
struct kite_record *kite_record_from_row(struct kite_store_crypt *c, const char *key, size_t key_len, const void *val,
                                    size_t len);
/* The delete-event record for live deleted at rev: borrows live's key and value (holds a ref). */
struct kite_record *kite_record_tombstone(struct kite_record *live, int64_t rev);

/* walbuf.c: the VFS the store opens its connections with (WAL writes gathered until a sync).
 * walbuf_register registers it once; 0, or -EIO when it cannot (then the default VFS is used). */
#define KITE_STORE_VFS "kite-walbuf"
int kite_store_walbuf_register(void);

/* The first string greater than every string starting with prefix, or NULL when there is none
 * (empty prefix, or all bytes 0xff). Caller frees. */
char *kite_store_prefix_end(const char *prefix);

/* The length of key's bucket: the key up to and including its third '/' ("/registry/leases/"),
 * or the whole key when it has fewer. The SQLite store indexes its rows by (bucket, rev), so every
 * key under a prefix that holds three '/' shares the prefix's bucket; prefix_bucket_len is that
 * bucket's length, or 0 when the prefix holds fewer (its keys may lie in many buckets). */
size_t kite_store_bucket_len(const char *key);
size_t kite_store_prefix_bucket_len(const char *prefix);

struct pending {
    struct pending *next;
    enum kite_write_type type;
    int64_t expect;
    struct kite_record *rec; /* CREATE/UPDATE: the new record (revisions filled in); DELETE: key holder */
    kite_write_cb cb;
    void *ud;
    /* results */
    int err;
    int64_t rev;
    struct kite_record *res, *prev; /* owned refs */
};

/* The sorted keys under a prefix as of a revision, kept for the next pages of a paginated range
 * (sqlite-read.c). */
struct key_snap {
    char *prefix;
    char *from;      /* it holds the keys under prefix after from (and from itself when !from_after) */
    bool from_after;
    int64_t rev;     /* live and gone as of it: every key that existed at a revision <= it */
    int64_t used_ns; /* monotonic */
    size_t n;
    char *arena;     /* the keys, NUL-terminated, in order */
    size_t *off;     /* key i at arena + off[i] */
};
#define KITE_STORE_KEY_SNAPS 4

struct sub {
    char *prefix;
    kite_store_batch_cb cb;
    void *ud;
};

/* Locks, in the order they nest: sub_mu, then live_lock; rdb_mu alone; q_mu alone; ck_mu alone. */
struct sqlite_store {
    struct kite_store base; /* ops = &kite_store_sqlite_ops */
    struct kite_store_crypt *crypt; /* borrowed: values sealed at rest under its prefixes */
    char *path;
    char *marker_path; /* <path>.rev: the last acknowledged revision (sqlite.c "revision marker") */
    sqlite3 *wdb, *rdb, *cdb; /* writer, reader (under rdb_mu), checkpointer */
    sqlite3_stmt *ins, *begin, *commit, *rollback;
    pthread_mutex_t rdb_mu;
    struct key_snap *snaps[KITE_STORE_KEY_SNAPS]; /* under rdb_mu */

    pthread_t writer;
    pthread_mutex_t q_mu;
    pthread_cond_t q_cond, compact_cond;
    struct pending *q_head, **q_tail;
    size_t q_len;
    bool stopping;
    int64_t batch_ns;  /* writer: when the last batch was taken (monotonic) */
    size_t batch_n;    /* writer: its writes */
    int64_t compact_req; /* > 0: a compaction is requested (under q_mu) */
    int compact_res;
    uint64_t compact_gen; /* bumped when a compaction finished */

    pthread_rwlock_t live_lock;
    struct kite_map live;
    /* key -> the revision of its tombstone row ((void *)(intptr_t)rev), for every key deleted and
     * not created again whose tombstone compaction has not removed yet: with `live`, the newest
     * row of every key a read at a revision >= compact_rev may need (same rules as `live`) */
    struct kite_map gone;
    _Atomic int64_t rev, compact_rev;
    _Atomic int64_t applied_rev; /* fan-out of every batch up to it is done (kite_store_applied_rev) */

    pthread_mutex_t sub_mu;
    struct sub subs[KITE_STORE_SUBSCRIBERS_MAX];
    size_t nsubs;
    struct kite_store_event *evs; /* fan-out scratch (writer thread only) */
    size_t evs_cap;

    _Atomic uint64_t n_batches, n_writes, n_failed, n_rejected, n_commits_failed, n_marker_failed;

    /* The revision marker: written by the writer thread only (and by open and close). */
    int marker_fd;
    uint64_t marker_seq;    /* writes so far: picks the slot the next one goes to */
    int64_t marker_rev;     /* the revision it holds */
    int64_t marker_ns;      /* when it was last written (monotonic) */

    pthread_t ckpt;
    pthread_mutex_t ck_mu;
    pthread_cond_t ck_cond;
    bool ck_req, ck_stop;
    bool ck_busy;      /* a background checkpoint is running */
    bool ck_fresh;     /* one finished since the writer's last commit */
    int ck_from;       /* WAL frames the last one copied (in the current WAL) */
    int ck_wal_pages;  /* the WAL's size at the last commit */
};


/* The SQLite backend's state behind a handle. */
static inline struct sqlite_store *sq(struct kite_store *b) { return (struct sqlite_store *)b; }

/* sqlite-read.c: the backend's read side (struct kite_store_ops rows). */
void kite_store_key_snap_free(struct key_snap *k);
int kite_store_sqlite_range(struct kite_store *b, const char *prefix, int64_t at_rev, const char *start_after, size_t limit,
                 struct kite_record ***ret, size_t *ret_n, bool *ret_more);
int kite_store_sqlite_history(struct kite_store *b, const char *prefix, int64_t from_rev, kite_store_event_cb cb, void *ud);
int kite_store_sqlite_subscribe_snapshot(struct kite_store *b, const char *prefix, kite_store_batch_cb cb, void *ud,
                              struct kite_store_replay *replay, struct kite_record ***ret_recs,
                              size_t *ret_n, int64_t *ret_rev);
