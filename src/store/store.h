/* kite store: a revisioned key-value store with etcd's semantics (DESIGN.md "Store").
 *
 * - One global revision counter, incremented by every successful write; each key carries
 *   create_rev (revision of its creation), mod_rev (revision of its last change) and version
 *   (1 at creation, +1 per update). Deleting then re-creating a key gives a new create_rev and
 *   version 1. Revisions never go backwards, also across restarts.
 * - A write is acknowledged only once durable (SQLite WAL, synchronous=FULL: fsynced).
 * - Group commit: one writer thread takes everything queued, runs it as one SQLite
 *   transaction with one fsync, then fires subscriptions (in revision order), then completions.
 * - The latest version of every live key is kept in memory, so get() and CAS checks cost no SQL.
 *   History (older versions and deletions) lives in SQLite until compacted.
 *
 * Ordering guarantee (the API server's read-your-writes rests on it; every backend keeps it):
 * a write's completion callback is called only after every subscriber whose prefix covers the
 * write's key has been handed the write's event, and after kite_store_rev and kite_store_get
 * show it. In the SQLite backend the writer thread, for each committed batch, applies the batch
 * to the in-memory state and calls every subscriber's callback with the batch's events (holding
 * the subscription lock), returns from all of them, and only then calls the batch's completions
 * in submission order. Events reach a subscriber in revision order, one call per batch.
 *
 * Thread-safety: every function is safe to call from any thread, except where noted
 * (callbacks run on the writer thread and must not block or call back into the store's
 * write path synchronously: kite_store_write from a callback would deadlock).
 *
 * Backends: struct kite_store_ops below; kite_store_open picks one by the url's scheme and the
 * kite_store_* functions dispatch through it (the SQLite backend is the first and only row). */
#pragma once
#include "base/base.h"

#include <stdatomic.h>

/* Writes waiting for the writer thread; kite_store_submit returns -EAGAIN beyond this. */
#define KITE_STORE_QUEUE_MAX 8192
/* At most this many writes go into one transaction (bounds a batch's latency and memory). */
#define KITE_STORE_BATCH_MAX 1024
/* Largest accepted key and value; larger writes fail with -E2BIG (etcd's request limit). */
#define KITE_STORE_KEY_MAX 4096
#define KITE_STORE_VALUE_MAX (3 * 1024 * 1024 / 2)
/* Most prefixes one store fans committed events out to (one per watch cache). */
#define KITE_STORE_SUBSCRIBERS_MAX 256

/* An immutable version of one key. Refcounted; ref/unref are thread-safe. value is
 * NUL-terminated (not counted in len) for the convenience of text parsers. */
struct kite_record {
    const char *key;
    const char *value;
    size_t len; /* opaque bytes (the API server stores JSON) */
    /* etcd meanings. For a DELETE event record: value = the last value, mod_rev = the
     * delete's revision, create_rev and version = those of the deleted version. */
    int64_t create_rev, mod_rev, version;

    /* private */
    atomic_int refs;
    bool deleted;                  /* a DELETE event record (tombstone) */
    _Atomic(void *) cache;         /* kite_record_set_cache */
    void (*cache_free)(void *);
    struct kite_record *owner;     /* a tombstone borrows its value bytes from here */
};

/* Takes a new reference; returns r. */
struct kite_record *kite_record_ref(struct kite_record *r);
/* Drops a reference (NULL ok); the last one frees the record and its cached object. */
void kite_record_unref(struct kite_record *r);
/* The decoded form attached with kite_record_set_cache, or NULL. Borrowed: valid while the
 * caller holds a reference to r. */
void *kite_record_cache(const struct kite_record *r);
/* Attaches a decoded form (e.g. parsed JSON) once. Thread-safe set-once: returns the winning
 * value — obj, or the one another thread set first, in which case obj is freed with free_fn
 * right away. Takes ownership of obj; the record frees the winner with its free_fn. */
void *kite_record_set_cache(struct kite_record *r, void *obj, void (*free_fn)(void *));
/* A new standalone record (revisions as given) — for tests and for other store backends.
 * Copies key and value. Returns it with one reference. */
struct kite_record *kite_record_new(const char *key, const void *value, size_t len, int64_t create_rev,
                                    int64_t mod_rev, int64_t version);

struct kite_store_ops;
/* A store handle. Backends embed it as their state's first member. */
struct kite_store {
    const struct kite_store_ops *ops;
};

/* The SQLite backend keeps the last acknowledged revision in a small marker file next to the
 * database (<db>.rev), so that a database or WAL that lost acknowledged writes is refused at open
 * instead of served as an older cluster. The writer updates it (pwrite + fdatasync) at most once
 * per this interval while writes come, once more this long after the last one, and at close: an
 * open detects the loss of any write acknowledged this long before the crash or damage. */
#define KITE_STORE_MARKER_INTERVAL_MS 100
/* SQLite truncates the WAL back to this size after a checkpoint that reset it (a large
 * transaction otherwise leaves the file at its largest size for as long as the store runs). */
#define KITE_STORE_WAL_SIZE_LIMIT (64 * 1024 * 1024)

/* Encryption at rest (crypt.c): values of keys under the given prefixes are stored sealed
 * with AES-256-GCM under key. The handle may be shared by stores; free it after them. */
#define KITE_STORE_CRYPT_KEY_LEN 32
struct kite_store_crypt;
int kite_store_crypt_new(const unsigned char key[KITE_STORE_CRYPT_KEY_LEN], const char *const *prefixes,
                         struct kite_store_crypt **ret);
void kite_store_crypt_free(struct kite_store_crypt *c);

/* How values are kept in a backend that another writer shares (etcd): the API server fills it, the
 * store knowing no object model. A value stored starting with KITE_STORE_ENVELOPE_MAGIC
 * (kube-apiserver's protobuf envelope) is handed to decode, and read as the bytes it gives (the
 * API server's JSON); without decode, or when it fails, the key is left out (logged). encode
 * (NULL: values are stored as given) may give other bytes to store for a write's value; a
 * failure stores the value as given. The completion's record keeps the caller's value. Both run
 * on the store's threads and must not block; *ret is malloc'ed. The SQLite backend ignores it. */
#define KITE_STORE_ENVELOPE_MAGIC "k8s\0"
#define KITE_STORE_ENVELOPE_MAGIC_LEN 4
struct kite_store_codec {
    int (*decode)(void *ud, const char *key, const void *value, size_t len, char **ret, size_t *ret_len,
                  char **ret_error);
    int (*encode)(void *ud, const char *key, const char *value, size_t len, char **ret, size_t *ret_len);
    void *ud;
};

struct kite_store_options {
    /* The value codec (borrowed, outlives the store; NULL = values as given, envelopes left out). */
    const struct kite_store_codec *codec;
    /* Encrypts values at rest under its prefixes (borrowed; NULL = none). */
    struct kite_store_crypt *crypt;
    /* Open a store found damaged (older than its marker's acknowledged revision, a failed
     * integrity check, an unreadable marker) anyway, accepting the loss: the revision counter is
     * raised to the acknowledged one so revisions still never go backwards. */
    bool force_recover;
    /* The etcd backend (etcd.c): TLS files (PEM; a CA file makes bare endpoints https), the key
     * prefix ("/registry" when NULL), and the connect/keepalive timeout (0 = 2 s). */
    const char *etcd_cafile, *etcd_certfile, *etcd_keyfile, *etcd_prefix;
    int etcd_timeout_ms;
    /* Keys under these prefixes (NULL-terminated; borrowed) may be expired by the backend about
     * ttl_s seconds after their last write (etcd: a lease shared by the writes of a short window,
     * as kube-apiserver's for Events). The SQLite backend ignores it: the API server's TTL
     * clean-up deletes such objects there (and on etcd when no lease could be granted). */
    const char *const *ttl_prefixes;
    int64_t ttl_s;
};

/* Opens (creating if needed) the store at url: "sqlite:/path/to/file.db" (parent dir must
 * exist), or "etcd:URL,URL,..." (etcd v3 members, each http://HOST:PORT or https://HOST:PORT; see
 * etcd.c). opts may be NULL (defaults). Checks the store (see KITE_STORE_MARKER_INTERVAL_MS; SQLite's
 * quick_check), loads the latest version of every live key into memory and starts the writer
 * thread. On failure *ret_error (optional) gets a message naming the file and the cause (caller
 * frees) and the return is -EINVAL for a bad url, -EUCLEAN for a damaged store, -EROFS, -EACCES,
 * -ENOSPC or -EIO (the rest) when the database cannot be opened or set up. */
int kite_store_open(const char *url, const struct kite_store_options *opts, struct kite_store **ret,
                    char **ret_error);
/* Drains pending writes (their completions fire), stops the threads, closes the database.
 * NULL ok. No subscriber or completion callback runs after it returns. */
void kite_store_close(struct kite_store *s);
/* The latest committed (and applied) revision. */
int64_t kite_store_rev(struct kite_store *s);
/* The revision every subscriber has been handed the changes up to: a subscriber that, under
 * its own lock, reads this and finds no change of its own above it is current to it (a list of
 * a resource nothing wrote since start is still at the store's revision, not at 0). */
int64_t kite_store_applied_rev(struct kite_store *s);
/* The revision history was compacted at (0 = never). Reads below it get -ENODATA. */
int64_t kite_store_compacted_rev(struct kite_store *s);

enum kite_write_type { KITE_WRITE_CREATE, KITE_WRITE_UPDATE, KITE_WRITE_DELETE };
struct kite_write {
    enum kite_write_type type;
    const char *key;
    const char *value;
    size_t len;             /* copied on submit; ignored for DELETE */
    int64_t expect_mod_rev; /* UPDATE/DELETE: 0 = unconditional, else must equal the key's mod_rev */
};

/* Completion: err 0, or -EEXIST (CREATE of existing key), -ENOENT (UPDATE/DELETE of missing
 * key), -ESTALE (expect_mod_rev mismatch), -EIO (storage failure; nothing of that batch was
 * acknowledged). rev: the write's revision on success, else the store's current revision.
 * rec: on success the new record (CREATE/UPDATE) or the delete-event record (DELETE); on
 * -ESTALE/-EEXIST the current record (so callers can report/merge); NULL otherwise. Borrowed
 * for the call: kite_record_ref it to keep it. Called from the store's writer thread AFTER the
 * write is durable (fsynced) and AFTER every subscriber (watch cache) has applied it
 * (read-your-writes). Must not block. */
typedef void (*kite_write_cb)(void *ud, int err, int64_t rev, struct kite_record *rec);

/* Queues a write; the writer thread batches all queued writes into one SQLite transaction and
 * one fsync (group commit). Never blocks on I/O; cb is never called from inside this call.
 * Returns 0 (cb will be called exactly once), -EAGAIN when KITE_STORE_QUEUE_MAX writes are
 * queued (the server answers 429), -EINVAL for a bad write, -E2BIG for an oversized one,
 * -ESHUTDOWN while closing. */
int kite_store_submit(struct kite_store *s, const struct kite_write *w, kite_write_cb cb, void *ud);
/* Blocking convenience wrapper around kite_store_submit: returns the completion's err (or
 * submit's). *ret_rev (optional) gets the completion's rev; *ret_rec (optional) a new
 * reference to the completion's rec (may be NULL). Must not be called from a store callback. */
int kite_store_write(struct kite_store *s, const struct kite_write *w, int64_t *ret_rev,
                     struct kite_record **ret_rec);
/* Point read of the latest version: *ret gets a new reference. -ENOENT if absent. No SQL. */
int kite_store_get(struct kite_store *s, const char *key, struct kite_record **ret);
/* Keys starting with prefix, in key order (bytewise), strictly after start_after (NULL = from
 * the start), as of revision at_rev (0 = latest), at most limit (0 = no limit). *ret_more (optional)
 * is set when more remain. *ret gets an array of new references (caller unrefs each and frees the
 * array; NULL when *ret_n is 0). -ENODATA if at_rev is below the compacted revision, -ERANGE if
 * at_rev is above the current revision, -EIO on a storage error. Reads SQLite. */
int kite_store_range(struct kite_store *s, const char *prefix, int64_t at_rev, const char *start_after,
                     size_t limit, struct kite_record ***ret, size_t *ret_n, bool *ret_more);
/* Counters since open, for metrics and benchmarks. */
struct kite_store_stats {
    uint64_t batches;        /* transactions committed (one fsync each) */
    uint64_t writes;         /* writes acknowledged with err 0 */
    uint64_t failed;         /* writes completed with an error (also -EEXIST, -ENOENT, -ESTALE) */
    uint64_t rejected;       /* submits refused with -EAGAIN (queue full) */
    uint64_t commits_failed; /* transactions that failed in storage (their writes got -EIO) */
    uint64_t marker_failed;  /* revision marker updates that failed (detection then lags) */
};
void kite_store_stats(struct kite_store *s, struct kite_store_stats *ret);
/* Drops history at or below rev, keeping the latest version (<= rev) of keys live at rev; reads
 * at revisions >= rev keep working. Runs on the writer thread between batches; blocks until
 * done. 0 (also when rev is already compacted), -ERANGE if rev > current revision, -EIO. */
int kite_store_compact(struct kite_store *s, int64_t rev);

/* A committed change. rec: the new record (CREATE/UPDATE) or the delete-event record (DELETE);
 * prev: the version it replaced (NULL for CREATE, and when history was compacted away).
 * Both borrowed for the callback. */
struct kite_store_event {
    enum kite_write_type type;
    int64_t rev;
    struct kite_record *rec, *prev;
};
typedef void (*kite_store_event_cb)(void *ud, const struct kite_store_event *ev);
/* The committed changes of one batch under a subscriber's prefix: n >= 1 events in revision
 * order. evs and the records in it are borrowed for the call. */
typedef void (*kite_store_batch_cb)(void *ud, const struct kite_store_event *evs, size_t n);
/* Committed-event subscription: cb is called on the writer thread once per committed batch that
 * changed a key under prefix, with those changes in revision order (batches in revision order),
 * before the batch's write completions fire. Must not block. (cb, ud) must stay valid until
 * kite_store_unsubscribe or kite_store_close. -ENOSPC beyond KITE_STORE_SUBSCRIBERS_MAX. */
int kite_store_subscribe(struct kite_store *s, const char *prefix, kite_store_batch_cb cb, void *ud);
/* Removes the subscription (cb, ud). After it returns cb is not running and will not be called.
 * Must not be called from inside a store callback. */
void kite_store_unsubscribe(struct kite_store *s, kite_store_batch_cb cb, void *ud);
/* What kite_store_subscribe_snapshot replays of the history before its snapshot. */
struct kite_store_replay {
    kite_store_event_cb cb; /* called on the caller's thread, before the subscription returns */
    void *ud;
    size_t max;   /* at most the newest max changes under the prefix (0: every one in history) */
    int64_t from; /* set by the call: the replay held every change under the prefix after it */
};

/* Atomically subscribes and hands back a consistent starting point: *ret_recs gets new references
 * to the latest version of every live key under prefix (key order, caller unrefs each and frees the
 * array), *ret_rev the revision they are current to; cb then receives exactly the changes with
 * rev > *ret_rev. If replay is not NULL, replay->cb is first called with the changes under prefix
 * still in history (the newest replay->max of them when it is set), in order, with
 * replay->from < rev <= *ret_rev. A backend keeping no history replays none (from = *ret_rev). */
int kite_store_subscribe_snapshot(struct kite_store *s, const char *prefix, kite_store_batch_cb cb, void *ud,
                                  struct kite_store_replay *replay, struct kite_record ***ret_recs,
                                  size_t *ret_n, int64_t *ret_rev);
/* Calls cb (on the caller's thread) with every change under prefix with rev > from_rev still in
 * history, in revision order, up to the current revision (used to fill a watch cache's ring after a
 * restart so watchers can resume from their last resourceVersion). -ENODATA if from_rev is below
 * the compacted revision (some of those changes are gone), -EIO on a storage error. */
int kite_store_history(struct kite_store *s, const char *prefix, int64_t from_rev, kite_store_event_cb cb,
                       void *ud);

/* ---- backends ----
 *
 * One row per backend. The public functions above check what they document for every backend
 * (arguments, url scheme) and call the row's function with the same meaning; a backend keeps the
 * ordering guarantee stated at the top. */
struct kite_store_ops {
    const char *scheme; /* url prefix including the colon, e.g. "sqlite:" */
    /* target: the url after the scheme */
    int (*open)(const char *target, const struct kite_store_options *opts, struct kite_store **ret,
                char **ret_error);
    void (*close)(struct kite_store *s);
    int64_t (*rev)(struct kite_store *s);
    int64_t (*compacted_rev)(struct kite_store *s);
    int64_t (*applied_rev)(struct kite_store *s);
    int (*submit)(struct kite_store *s, const struct kite_write *w, kite_write_cb cb, void *ud);
    int (*get)(struct kite_store *s, const char *key, struct kite_record **ret);
    int (*range)(struct kite_store *s, const char *prefix, int64_t at_rev, const char *start_after, size_t limit,
                 struct kite_record ***ret, size_t *ret_n, bool *ret_more);
    void (*stats)(struct kite_store *s, struct kite_store_stats *ret);
    int (*compact)(struct kite_store *s, int64_t rev);
    int (*subscribe)(struct kite_store *s, const char *prefix, kite_store_batch_cb cb, void *ud);
    void (*unsubscribe)(struct kite_store *s, kite_store_batch_cb cb, void *ud);
    int (*subscribe_snapshot)(struct kite_store *s, const char *prefix, kite_store_batch_cb cb, void *ud,
                              struct kite_store_replay *replay, struct kite_record ***ret_recs, size_t *ret_n,
                              int64_t *ret_rev);
    int (*history)(struct kite_store *s, const char *prefix, int64_t from_rev, kite_store_event_cb cb, void *ud);
    /* kite_store_health; NULL = always healthy (an embedded store that is open) */
    int (*health)(struct kite_store *s, char **ret_why);
};

/* The embedded SQLite backend (sqlite.c). */
extern const struct kite_store_ops kite_store_sqlite_ops;
/* The etcd v3 backend (etcd.c). */
extern const struct kite_store_ops kite_store_etcd_ops;

/* Whether the store can serve writes now (the /readyz "etcd" check): 0, or -EIO with *ret_why
 * (optional; caller frees) saying why not. */
int kite_store_health(struct kite_store *s, char **ret_why);
