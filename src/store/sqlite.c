/* The embedded store backend: SQLite, with application-level group commit.
 *
 * Schema: one append-only log table, `kv`, whose INTEGER PRIMARY KEY is the revision (kine's
 * shape). Every successful write appends one row. Appending at the end of a rowid table dirties
 * few pages per batch, unlike updating rows in place at random keys (research/deps.md §4). A
 * delete appends a tombstone row (deleted = 1, empty value: the last value is the row before it).
 * `meta` holds the compacted revision, written in the compaction's transaction, so the revision
 * counter never goes backwards even when compaction removed the newest rows (tombstones).
 *
 * No index is kept per key. Each row records the revision of its key's row before it
 * (`prev_rev`, 0 for a key's first row; a row after a tombstone points at the tombstone), so a
 * key's rows form a chain from the newest, which `live` and `gone` hold in memory. The only index
 * is on (bucket, rev), the bucket being the key's first three '/'-separated parts
 * ("/registry/leases/"): every write appends at the end of its bucket's run, and compaction
 * removes from the start of it, so neither touches a page at random. An index on (key, rev) put
 * each write's entry, and each compacted row's, on a leaf picked by the key: with 10,000 leases
 * renewed every second the writer read thousands of pages a second back from the WAL and every
 * commit rewrote hundreds of leaves. Reads use the chains:
 * - range at a revision: the keys under the prefix from live and gone, each followed back from its
 *   newest row to the newest row <= the revision (none when the key is new since; a lease renewed
 *   every 10 s read 10 s after is one step);
 * - history and the watch caches' replay: the bucket's rows in revision order through the index,
 *   each first change's predecessor by its prev_rev;
 * - compaction: the rows in the compacted range name the rows they supersede.
 *
 * Invariants:
 * - Only the writer thread writes SQLite (wdb) and mutates `live` (key -> latest live record)
 *   and `gone` (key -> its tombstone's revision, while the tombstone is kept); it reads them
 *   without a lock, everyone else under live_lock.
 * - A batch is applied to `live` and fanned out to subscribers under sub_mu, then completions
 *   fire: subscribers see changes in revision order and before the writer's caller does.
 * - Every row with rev > compact_rev is intact; for each key the newest row <= compact_rev is
 *   kept unless it is a tombstone. So reads at revisions >= compact_rev are exact.
 *
 * Durability: journal_mode=WAL with synchronous=FULL: COMMIT returns after the WAL is fsynced.
 * A revision marker next to the database lets open tell a damaged store from an intact one
 * (see "the revision marker" below).
 * Checkpoints run on their own thread and connection (PASSIVE, not blocking the writer); the
 * writer finishes what each one left (see "checkpoints" below), and checkpoints everything itself
 * only if the WAL outgrows KITE_STORE_WAL_HARD_PAGES. */
#include "store/store-int.h"
#include "base/clock.h"

#include <fcntl.h>
#include <libgen.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

/* WAL size (pages) at which the checkpoint thread is woken, and at which the writer checkpoints
 * itself (bounds the WAL when the checkpointer cannot catch up under continuous writes). */
#define KITE_STORE_WAL_SOFT_PAGES 4000
#define KITE_STORE_WAL_HARD_PAGES 65536
/* The writer finishes a background checkpoint only when at most this many frames are left. */
#define KITE_STORE_WAL_TAIL_PAGES 256
/* SQLite page cache and mmap window per connection (deps.md: both helped). The cache is kept
 * small: every commit ends with a truncation of the pager's cache whose cost here grows with the
 * cache's size (pcache1TruncateUnsafe walks its hash table: a quarter of the writer's time with
 * 64 MiB over 10,000 nodes), while reads of pages not cached come from the mmap window. */
#define KITE_STORE_CACHE_KIB 8192
#define KITE_STORE_MMAP_BYTES (256 * 1024 * 1024)
/* Group commit under a stream of concurrent writes: a batch is taken at least this long after
 * the one before it was, when that one held more than one write, so the writes that come
 * meanwhile share its commit and fsync. Without it, at 10,000 lease renewals a second the
 * writer committed ~1,500 times a second, ~7 writes each, and the fsyncs were a third of its
 * time. One client's writes one after another (batches of one) are never held. */
#define KITE_STORE_COMMIT_GAP_NS (2 * 1000 * 1000)
/* How long readers wait on SQLite's internal locks (only contended during checkpoints). */
#define KITE_STORE_BUSY_MS 10000
/* Revisions compacted per writer-thread transaction (see kite_store_compact): a step holds the
 * writes back while it runs, ~20 us per revision at 92,000 leases (bench/store-hold.c: with
 * 10,000 a step took 240-260 ms and the renewals' p99 was 362 ms; with 1,000, 20 ms and 85 ms). */
#define KITE_STORE_COMPACT_STEP 1000

/* The length up to and including the third '/' (0: fewer than three). */
static size_t third_slash(const char *s) {
    int slashes = 0;
    for (size_t i = 0; s[i]; i++)
        if (s[i] == '/' && ++slashes == 3) return i + 1;
    return 0;
}

size_t kite_store_bucket_len(const char *key) {
    size_t n = third_slash(key);
    return n ? n : strlen(key);
}

size_t kite_store_prefix_bucket_len(const char *prefix) { return third_slash(prefix); }

char *kite_store_prefix_end(const char *prefix) {
    size_t n = strlen(prefix);
    while (n > 0 && (unsigned char)prefix[n - 1] == 0xff) n--;
    if (n == 0) return NULL;
    char *e = kite_strndup(prefix, n);
    e[n - 1] = (char)((unsigned char)e[n - 1] + 1);
    return e;
}

static int exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* The errno closest to a failed SQLite call's error on db (NULL: out of memory). */
static int db_errno(sqlite3 *db) {
    if (!db) return -ENOMEM;
    switch (sqlite3_extended_errcode(db) & 0xff) {
    case SQLITE_READONLY: return -EROFS;
    case SQLITE_PERM:
    case SQLITE_AUTH: return -EACCES;
    case SQLITE_FULL: return -ENOSPC;
    case SQLITE_NOMEM: return -ENOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return -EUCLEAN;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR: {
        int e = sqlite3_system_errno(db);
        return e > 0 ? -e : -EIO;
    }
    default: return -EIO;
    }
}

/* Sets *ret_error (when asked for and not set yet) to msg, which it takes; returns r. */
static int set_error(char **ret_error, int r, char *msg) {
    if (ret_error && !*ret_error)
        *ret_error = msg;
    else
        free(msg);
    return r;
}

/* A failed SQLite call on db while doing what to the store at path: the message names the file,
 * what failed, SQLite's own text and extended code, and the system error behind it if any. */
static int db_fail(sqlite3 *db, const char *path, const char *what, char **ret_error) {
    int r = db_errno(db);
    if (!ret_error || *ret_error) return r;
    int rc = db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM;
    int se = db && ((rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_IOERR) ? sqlite3_system_errno(db) : 0;
    return set_error(ret_error, r,
                     kite_asprintf("store %s: %s: %s (SQLite error %d%s%s)", path, what,
                                   db ? sqlite3_errmsg(db) : "out of memory", rc, se ? ", " : "",
                                   se ? strerror(se) : ""));
}

static int open_conn(const char *path, sqlite3 **ret, char **ret_error) {
    sqlite3 *db = NULL;
    const char *vfs = kite_store_walbuf_register() == 0 ? KITE_STORE_VFS : NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs) !=
        SQLITE_OK) {
        int r = db_fail(db, path, "cannot open the database", ret_error);
        sqlite3_close(db);
        return r;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, KITE_STORE_BUSY_MS);
    char *pragmas = kite_asprintf("PRAGMA cache_size=-%d; PRAGMA mmap_size=%d; PRAGMA synchronous=FULL;"
                                  "PRAGMA temp_store=MEMORY; PRAGMA journal_size_limit=%d;",
                                  KITE_STORE_CACHE_KIB, KITE_STORE_MMAP_BYTES, KITE_STORE_WAL_SIZE_LIMIT);
    int r = exec(db, pragmas);
    free(pragmas);
    if (r < 0) {
        r = db_fail(db, path, "cannot set up the connection", ret_error);
        sqlite3_close(db);
        return r;
    }
    *ret = db;
    return 0;
}

/* ---- records from rows ---- */

static struct kite_record *row_record(struct sqlite_store *s, sqlite3_stmt *st, int col_rev, int col_key,
                                      int col_create, int col_ver, int col_val) {
    const char *key = (const char *)sqlite3_column_text(st, col_key);
    size_t key_len = sqlite3_column_bytes(st, col_key);
    const void *val = sqlite3_column_blob(st, col_val);
    size_t len = sqlite3_column_bytes(st, col_val);
    struct kite_record *r = kite_record_from_row(s->crypt, key, key_len, val, len);
    if (!r) return NULL;
    r->mod_rev = sqlite3_column_int64(st, col_rev);
    r->create_rev = sqlite3_column_int64(st, col_create);
    r->version = sqlite3_column_int64(st, col_ver);
    return r;
}

static int load(struct sqlite_store *s) {
    sqlite3_stmt *st = NULL;
    int64_t max_rev = 0, crev = 0;
    if (sqlite3_prepare_v2(s->wdb, "SELECT value FROM meta WHERE name = 'compact_rev'", -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    if (sqlite3_step(st) == SQLITE_ROW) crev = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(s->wdb, "SELECT value FROM meta WHERE name = 'rev_floor'", -1, &st, NULL) != SQLITE_OK)
        return -EIO;
    if (sqlite3_step(st) == SQLITE_ROW) max_rev = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(s->wdb, "SELECT max(ifnull((SELECT max(rev) FROM kv), 0), ?1)", -1, &st, NULL) != SQLITE_OK) return -EIO;
    sqlite3_bind_int64(st, 1, max_rev);
    if (sqlite3_step(st) == SQLITE_ROW) max_rev = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    /* Newest first: a key's first row seen is its newest (live, or gone when a tombstone). One
     * pass over the table: the history bound keeps it to ~KITE_HISTORY_MAX rows. */
    if (sqlite3_prepare_v2(s->wdb, "SELECT rev, key, create_rev, version, value, deleted FROM kv ORDER BY rev DESC", -1,
                           &st, NULL) != SQLITE_OK)
        return -EIO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 1);
        if (kite_map_get(&s->live, key) || kite_map_get(&s->gone, key)) continue;
        if (sqlite3_column_int(st, 5)) {
            kite_map_put(&s->gone, key, (void *)(intptr_t)sqlite3_column_int64(st, 0));
            continue;
        }
        struct kite_record *r = row_record(s, st, 0, 1, 2, 3, 4);
        if (!r) { /* sealed under another key, or damaged */
            sqlite3_finalize(st);
            return -EBADMSG;
        }
        kite_map_put(&s->live, r->key, r);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return -EIO;
    atomic_store(&s->rev, KITE_MAX(max_rev, crev));
    atomic_store(&s->applied_rev, atomic_load(&s->rev));
    atomic_store(&s->compact_rev, crev);
    return 0;
}

/* ---- the revision marker ----
 *
 * SQLite discards WAL frames whose checksums fail, and a WAL whose header is damaged, as it must
 * for a write torn by a crash; and it opens an empty or truncated database file as a new one. On
 * its own the store would then come up as an older or empty cluster without a word. So the
 * writer records the last acknowledged revision outside the database, in <db>.rev, and open
 * refuses a store older than that (kite_store_options.force_recover overrides).
 *
 * The file holds two MARKER_SLOT-byte slots, written alternately (pwrite + fdatasync, never a
 * size change, so no metadata is written): a write torn by a crash spoils at most the slot it
 * went to, and the other still holds an older, and so still true, revision. A slot is valid
 * when its magic and checksum match; the valid slot with the larger sequence number wins.
 *
 * The writer updates it after a batch's completions fired, at most once per
 * KITE_STORE_MARKER_INTERVAL_MS while writes come, once more that long after the last one, and
 * at close: one fdatasync per interval instead of one per batch. It only ever records a revision
 * already fsynced, so a crash never makes an intact store look damaged; the writes of the last
 * interval before a crash are not covered (their loss looks like a crash before them). */
#define MARKER_SLOT 512
#define MARKER_MAGIC "kite-rev"
#define MARKER_INTERVAL_NS ((int64_t)KITE_STORE_MARKER_INTERVAL_MS * 1000000)

struct marker_rec {
    char magic[8];
    uint64_t seq;
    int64_t rev;
    uint64_t check; /* FNV-1a of the bytes before it */
};

static uint64_t marker_check(const struct marker_rec *m) {
    const unsigned char *p = (const unsigned char *)m;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < offsetof(struct marker_rec, check); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Reads the marker at path: 0 with *ret_rev and *ret_seq, -ENOENT when there is none (no file, or
 * an empty one: created but never written), -EBADMSG when no slot is valid, else -errno. */
static int marker_read(const char *path, int64_t *ret_rev, uint64_t *ret_seq) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    char buf[2 * MARKER_SLOT];
    ssize_t n = pread(fd, buf, sizeof(buf), 0);
    int e = errno;
    close(fd);
    if (n < 0) return -e;
    if (n == 0) return -ENOENT;
    bool found = false;
    for (int i = 0; i < 2; i++) {
        struct marker_rec m;
        if (n < i * MARKER_SLOT + (ssize_t)sizeof(m)) break;
        memcpy(&m, buf + i * MARKER_SLOT, sizeof(m));
        if (memcmp(m.magic, MARKER_MAGIC, sizeof(m.magic)) != 0 || m.check != marker_check(&m) || m.rev < 0) continue;
        if (!found || m.seq > *ret_seq) {
            *ret_rev = m.rev;
            *ret_seq = m.seq;
        }
        found = true;
    }
    return found ? 0 : -EBADMSG;
}

/* Records rev (already durable) in the marker; durable when it returns 0. */
static int marker_write(struct sqlite_store *s, int64_t rev) {
    struct marker_rec m = { .seq = s->marker_seq + 1, .rev = rev };
    memcpy(m.magic, MARKER_MAGIC, sizeof(m.magic));
    m.check = marker_check(&m);
    char slot[MARKER_SLOT] = {0};
    memcpy(slot, &m, sizeof(m));
    if (pwrite(s->marker_fd, slot, sizeof(slot), (off_t)(m.seq % 2) * MARKER_SLOT) != (ssize_t)sizeof(slot))
        return errno ? -errno : -EIO;
    if (fdatasync(s->marker_fd) < 0) return -errno;
    s->marker_seq = m.seq;
    s->marker_rev = rev;
    return 0;
}

/* Writer thread: brings the marker up to the applied revision when it is behind and its interval
 * has passed. Returns the ns until it is next due (0: it is current). */
static int64_t marker_tick(struct sqlite_store *s) {
    int64_t rev = atomic_load(&s->rev);
    if (rev <= s->marker_rev) return 0;
    int64_t now = kite_now_mono(kite_clock_real());
    if (now - s->marker_ns < MARKER_INTERVAL_NS) return s->marker_ns + MARKER_INTERVAL_NS - now;
    s->marker_ns = now;
    if (marker_write(s, rev) < 0) {
        /* Detection lags until a write succeeds; the counter shows it. */
        atomic_fetch_add_explicit(&s->n_marker_failed, 1, memory_order_relaxed);
        return MARKER_INTERVAL_NS;
    }
    return 0;
}

/* ---- the writer thread ---- */

static struct kite_record *current(struct sqlite_store *s, struct kite_map *overlay, const char *key) {
    struct kite_record *r = kite_map_get(overlay, key);
    if (!r) r = kite_map_get(&s->live, key);
    return r && !r->deleted ? r : NULL;
}

/* The revision of key's newest row, tombstones included (0: none kept). Writer thread. */
static int64_t newest_rev(struct sqlite_store *s, struct kite_map *overlay, const char *key) {
    struct kite_record *r = kite_map_get(overlay, key);
    if (!r) r = kite_map_get(&s->live, key);
    return r ? r->mod_rev : (int64_t)(intptr_t)kite_map_get(&s->gone, key);
}

static int insert_row(struct sqlite_store *s, struct kite_record *r, int64_t prev_rev) {
    sqlite3_stmt *st = s->ins;
    sqlite3_bind_int64(st, 7, prev_rev);
    sqlite3_bind_text(st, 8, r->key, (int)kite_store_bucket_len(r->key), SQLITE_STATIC);
    sqlite3_bind_int64(st, 1, r->mod_rev);
    sqlite3_bind_text(st, 2, r->key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, r->create_rev);
    sqlite3_bind_int64(st, 4, r->version);
    sqlite3_bind_int(st, 5, r->deleted);
    _cleanup_free_ char *sealed = NULL;
    size_t sealed_len = 0;
    if (r->deleted)
        sqlite3_bind_zeroblob(st, 6, 0);
    else if (kite_store_crypt_applies(s->crypt, r->key)) {
        if (kite_store_crypt_seal(s->crypt, r->key, r->value, r->len, &sealed, &sealed_len) < 0) {
            sqlite3_clear_bindings(st);
            return -EIO;
        }
        sqlite3_bind_blob(st, 6, sealed, (int)sealed_len, SQLITE_STATIC);
    } else
        sqlite3_bind_blob(st, 6, r->value, (int)r->len, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? 0 : -EIO;
}

/* Decides one write against the state so far (live + this batch's overlay) and appends its row. */
static int stage(struct sqlite_store *s, struct kite_map *overlay, struct pending *p, int64_t *rev) {
    struct kite_record *cur = current(s, overlay, p->rec->key);
    if (p->type == KITE_WRITE_CREATE && cur) {
        p->err = -EEXIST;
    } else if (p->type != KITE_WRITE_CREATE && !cur) {
        p->err = -ENOENT;
    } else if (p->type != KITE_WRITE_CREATE && p->expect && p->expect != cur->mod_rev) {
        p->err = -ESTALE;
    }
    if (p->err) {
        p->res = kite_record_ref(cur);
        return 0;
    }
    int64_t r = ++*rev, prev_rev = newest_rev(s, overlay, p->rec->key);
    struct kite_record *n;
    if (p->type == KITE_WRITE_DELETE) {
        n = kite_record_tombstone(cur, r);
    } else {
        n = kite_record_ref(p->rec);
        n->mod_rev = r;
        n->create_rev = cur ? cur->create_rev : r;
        n->version = cur ? cur->version + 1 : 1;
    }
    p->rev = r;
    p->res = n;
    p->prev = kite_record_ref(cur);
    kite_map_put(overlay, n->key, n);
    return insert_row(s, n, prev_rev);
}

/* Hands each subscriber the batch's changes under its prefix in one call, so a watch cache
 * takes its locks once per batch rather than once per change. */
static void fan_out(struct sqlite_store *s, struct pending *batch, size_t n) {
    if (n > s->evs_cap) {
        s->evs_cap = KITE_MAX(n, 2 * s->evs_cap);
        s->evs = kite_realloc(s->evs, s->evs_cap * sizeof(*s->evs));
    }
    for (size_t i = 0; i < s->nsubs; i++) {
        size_t k = 0;
        for (struct pending *p = batch; p; p = p->next)
            if (!p->err && kite_startswith(p->res->key, s->subs[i].prefix))
                s->evs[k++] = (struct kite_store_event){ .type = p->type, .rev = p->rev, .rec = p->res, .prev = p->prev };
        if (k) s->subs[i].cb(s->subs[i].ud, s->evs, k);
    }
}

static void run_batch(struct sqlite_store *s, struct pending *batch) {
    struct kite_map overlay = {0};
    int64_t rev = atomic_load(&s->rev);
    int r = sqlite3_step(s->begin) == SQLITE_DONE ? 0 : -EIO;
    sqlite3_reset(s->begin);
    size_t nwrote = 0;
    for (struct pending *p = batch; p && r == 0; p = p->next) {
        r = stage(s, &overlay, p, &rev);
        nwrote += !p->err;
    }
    bool wrote = nwrote > 0;
    if (r == 0) {
        /* The fsync happens here (a batch of only failed checks writes nothing). */
        r = sqlite3_step(s->commit) == SQLITE_DONE ? 0 : -EIO;
        sqlite3_reset(s->commit);
    }
    kite_map_release(&overlay);
    if (r < 0) {
        atomic_fetch_add_explicit(&s->n_commits_failed, 1, memory_order_relaxed);
        sqlite3_step(s->rollback);
        sqlite3_reset(s->rollback);
        for (struct pending *p = batch; p; p = p->next) {
            p->err = -EIO;
            kite_record_unref(p->res);
            kite_record_unref(p->prev);
            p->res = p->prev = NULL;
        }
    }

    pthread_mutex_lock(&s->sub_mu);
    if (r == 0 && wrote) {
        pthread_rwlock_wrlock(&s->live_lock);
        for (struct pending *p = batch; p; p = p->next) {
            if (p->err) continue;
            if (p->res->deleted) {
                kite_record_unref(kite_map_del(&s->live, p->res->key));
                kite_map_put(&s->gone, p->res->key, (void *)(intptr_t)p->res->mod_rev);
            } else {
                kite_record_unref(kite_map_put(&s->live, p->res->key, kite_record_ref(p->res)));
                if (s->gone.len) kite_map_del(&s->gone, p->res->key);
            }
        }
        atomic_store(&s->rev, rev);
        pthread_rwlock_unlock(&s->live_lock);
        fan_out(s, batch, nwrote);
        atomic_store(&s->applied_rev, rev);
    }
    pthread_mutex_unlock(&s->sub_mu);

    if (r == 0 && wrote) atomic_fetch_add_explicit(&s->n_batches, 1, memory_order_relaxed);
    int64_t now = atomic_load(&s->rev);
    while (batch) {
        struct pending *p = batch;
        batch = p->next;
        atomic_fetch_add_explicit(p->err ? &s->n_failed : &s->n_writes, 1, memory_order_relaxed);
        p->cb(p->ud, p->err, p->err ? now : p->rev, p->res);
        kite_record_unref(p->res);
        kite_record_unref(p->prev);
        kite_record_unref(p->rec);
        free(p);
    }
}

/* Runs one of do_compact's DELETEs over the revisions (from, to]. */
static int compact_delete(struct sqlite_store *s, const char *sql, int64_t from, int64_t to) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->wdb, sql, -1, &st, NULL) != SQLITE_OK) return -EIO;
    sqlite3_bind_int64(st, 1, to);
    sqlite3_bind_int64(st, 2, from);
    int r = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
    sqlite3_finalize(st);
    return r;
}

/* A row goes when a newer row of its key is also <= rev, or when it is a tombstone. After the
 * compaction to prev (the compacted revision), no tombstone <= prev is left and each key keeps
 * only its newest row <= prev; so what goes now is found from the rows in (prev, rev] alone:
 * the row each of them supersedes (its prev_rev), and the tombstones there. A step then costs
 * what it compacts, not a scan of every live key's row below prev with a subquery each (which
 * made each step of a backlog cost O(keys): with 60,000 nodes' revisions piled up, the writer
 * spent seconds per step and the renewals queued behind it lagged past their leases). The rows
 * superseded were written one renewal period before the rows in the range, in about the same
 * order, so the deletes walk the table's pages in order. */
static int do_compact(struct sqlite_store *s, int64_t rev) {
    if (rev > atomic_load(&s->rev)) return -ERANGE;
    int64_t prev = atomic_load(&s->compact_rev);
    if (rev <= prev) return 0;
    sqlite3_stmt *st = NULL;
    int r = exec(s->wdb, "BEGIN IMMEDIATE");
    if (r < 0) return r;
    r = compact_delete(s, "DELETE FROM kv WHERE rev IN (SELECT prev_rev FROM kv WHERE rev > ?2 AND rev <= ?1 AND prev_rev > 0)",
                       prev, rev);
    if (r == 0) r = compact_delete(s, "DELETE FROM kv WHERE rev > ?2 AND rev <= ?1 AND deleted = 1", prev, rev);
    if (r == 0 && sqlite3_prepare_v2(s->wdb, "INSERT OR REPLACE INTO meta(name, value) VALUES('compact_rev', ?1)",
                                     -1, &st, NULL) != SQLITE_OK)
        r = -EIO;
    if (r == 0) {
        sqlite3_bind_int64(st, 1, rev);
        r = sqlite3_step(st) == SQLITE_DONE ? 0 : -EIO;
    }
    sqlite3_finalize(st);
    if (r == 0) r = exec(s->wdb, "COMMIT");
    if (r < 0) {
        exec(s->wdb, "ROLLBACK");
        return r;
    }
    atomic_store(&s->compact_rev, rev);
    /* The tombstones just removed no longer chain anything a read may ask for. */
    if (s->gone.len) {
        pthread_rwlock_wrlock(&s->live_lock);
        const char *k;
        void *v;
        for (size_t i = 0; kite_map_next(&s->gone, &i, &k, &v);)
            if ((int64_t)(intptr_t)v <= rev) kite_map_del(&s->gone, k);
        pthread_rwlock_unlock(&s->live_lock);
    }
    return 0;
}

static void *writer_main(void *arg) {
    struct sqlite_store *s = arg;
    pthread_mutex_lock(&s->q_mu);
    for (;;) {
        while (!s->q_head && !s->compact_req && !s->stopping) {
            /* Idle: the marker catches up with the last writes once its interval has passed. */
            pthread_mutex_unlock(&s->q_mu);
            int64_t wait_ns = marker_tick(s);
            pthread_mutex_lock(&s->q_mu);
            if (s->q_head || s->compact_req || s->stopping) break;
            if (wait_ns > 0) {
                int64_t at = kite_now_mono(kite_clock_real()) + wait_ns;
                struct timespec ts = { at / KITE_NS_PER_SEC, at % KITE_NS_PER_SEC };
                pthread_cond_timedwait(&s->q_cond, &s->q_mu, &ts); /* q_cond runs on CLOCK_MONOTONIC */
            } else {
                pthread_cond_wait(&s->q_cond, &s->q_mu);
            }
        }
        if (s->compact_req) {
            int64_t rev = s->compact_req;
            pthread_mutex_unlock(&s->q_mu);
            int r = do_compact(s, rev);
            pthread_mutex_lock(&s->q_mu);
            s->compact_req = 0;
            s->compact_res = r;
            s->compact_gen++;
            pthread_cond_broadcast(&s->compact_cond);
            continue;
        }
        if (!s->q_head) break; /* stopping and drained */
        if (s->batch_n > 1) {
            int64_t due = s->batch_ns + KITE_STORE_COMMIT_GAP_NS;
            while (s->q_len < KITE_STORE_BATCH_MAX && !s->stopping && !s->compact_req &&
                   kite_now_mono(kite_clock_real()) < due) {
                struct timespec ts = {due / KITE_NS_PER_SEC, due % KITE_NS_PER_SEC};
                pthread_cond_timedwait(&s->q_cond, &s->q_mu, &ts); /* enqueue signals at a full batch */
            }
            if (s->compact_req) continue;
        }
        /* Take everything queued (up to a batch): this is the group commit. */
        struct pending *batch = s->q_head, *last = batch;
        size_t n = 1;
        while (last->next && n < KITE_STORE_BATCH_MAX) {
            last = last->next;
            n++;
        }
        s->q_head = last->next;
        if (!s->q_head) s->q_tail = &s->q_head;
        last->next = NULL;
        s->q_len -= n;
        s->batch_ns = kite_now_mono(kite_clock_real());
        s->batch_n = n;
        pthread_mutex_unlock(&s->q_mu);
        run_batch(s, batch);
        marker_tick(s);
        pthread_mutex_lock(&s->q_mu);
    }
    pthread_mutex_unlock(&s->q_mu);
    return NULL;
}

/* ---- checkpoints ----
 *
 * The checkpoint thread copies the WAL's frames into the database file (and fsyncs it) once
 * KITE_STORE_WAL_SOFT_PAGES frames accumulated since its last run, not after every commit: each
 * run costs a database fsync and rewrites the pages every batch touches (page 1, the table's
 * last pages), so back-to-back runs under a steady write load cost more than the writes.
 * SQLite starts the WAL over (instead of growing it) only when a write begins with every frame
 * checkpointed, which a background run that races the writer rarely leaves behind: so after each
 * background run (repeated while the writer added more than a tail meanwhile) the writer
 * checkpoints the few frames committed meanwhile itself, between two batches. The WAL then
 * stays near KITE_STORE_WAL_SOFT_PAGES frames and is rewritten in place (an fsync that does not
 * change the file's size writes no inode). */

static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages) {
    struct sqlite_store *s = arg;
    if (pages >= KITE_STORE_WAL_HARD_PAGES) {
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return SQLITE_OK;
    }
    pthread_mutex_lock(&s->ck_mu);
    if (pages < s->ck_wal_pages) s->ck_from = 0; /* the WAL started over */
    s->ck_wal_pages = pages;
    bool finish = s->ck_fresh && !s->ck_busy && pages - s->ck_from <= KITE_STORE_WAL_TAIL_PAGES;
    s->ck_fresh = false;
    bool wake = !s->ck_busy && pages - s->ck_from >= KITE_STORE_WAL_SOFT_PAGES;
    if (wake) {
        s->ck_req = true;
        pthread_cond_signal(&s->ck_cond);
    }
    pthread_mutex_unlock(&s->ck_mu);
    if (finish && !wake) sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

static void *ckpt_main(void *arg) {
    struct sqlite_store *s = arg;
    pthread_mutex_lock(&s->ck_mu);
    for (;;) {
        while (!s->ck_req && !s->ck_stop) pthread_cond_wait(&s->ck_cond, &s->ck_mu);
        if (s->ck_stop) break;
        s->ck_req = false;
        s->ck_busy = true;
        pthread_mutex_unlock(&s->ck_mu);
        int nlog = -1, nckpt = -1, rc;
        /* Again while the writer added more than a tail meanwhile: what the writer finishes
         * itself holds up a batch. */
        for (int pass = 0; pass < 3; pass++) {
            rc = sqlite3_wal_checkpoint_v2(s->cdb, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog, &nckpt);
            if (rc != SQLITE_OK || nlog - nckpt <= KITE_STORE_WAL_TAIL_PAGES / 2) break;
        }
        pthread_mutex_lock(&s->ck_mu);
        s->ck_busy = false;
        /* (If the WAL started over during the run, ck_from is stale until the writer next sees
         * the WAL shrink: the next run just comes later.) */
        if (rc == SQLITE_OK && nckpt >= 0) s->ck_from = nckpt;
        s->ck_fresh = true;
    }
    pthread_mutex_unlock(&s->ck_mu);
    return NULL;
}

/* ---- opening and closing ---- */

static void store_free(struct sqlite_store *s) {
    sqlite3_finalize(s->ins);
    sqlite3_finalize(s->begin);
    sqlite3_finalize(s->commit);
    sqlite3_finalize(s->rollback);
    sqlite3_close(s->wdb);
    sqlite3_close(s->rdb);
    sqlite3_close(s->cdb);
    if (s->marker_fd >= 0) close(s->marker_fd);
    for (size_t i = 0; kite_map_next(&s->live, &i, NULL, NULL);) kite_record_unref(s->live.slots[i - 1].value);
    kite_map_release(&s->live);
    kite_map_release(&s->gone);
    for (size_t i = 0; i < KITE_STORE_KEY_SNAPS; i++) kite_store_key_snap_free(s->snaps[i]);
    for (size_t i = 0; i < s->nsubs; i++) free(s->subs[i].prefix);
    free(s->evs);
    pthread_mutex_destroy(&s->rdb_mu);
    pthread_mutex_destroy(&s->q_mu);
    pthread_cond_destroy(&s->q_cond);
    pthread_cond_destroy(&s->compact_cond);
    pthread_rwlock_destroy(&s->live_lock);
    pthread_mutex_destroy(&s->sub_mu);
    pthread_mutex_destroy(&s->ck_mu);
    pthread_cond_destroy(&s->ck_cond);
    free(s->path);
    free(s->marker_path);
    free(s);
}

/* One integer from sql on db (0 when there is no row or it is NULL). */
static int query_int(sqlite3 *db, const char *sql, int64_t *ret) {
    sqlite3_stmt *st = NULL;
    *ret = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -EIO;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *ret = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -EIO;
}

static void sql_bucket(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const char *key = (const char *)sqlite3_value_text(argv[0]);
    if (!key) {
        sqlite3_result_null(ctx);
        return;
    }
    sqlite3_result_text(ctx, key, (int)kite_store_bucket_len(key), SQLITE_TRANSIENT);
}

/* A store written before the chains (an index on (key, rev), no prev_rev or bucket column) gets
 * them in one transaction: each row's predecessor found through the old index, which then goes.
 * Idempotent: a store with the index on (bucket, rev) is left alone. */
static int upgrade(sqlite3 *db) {
    int64_t has_prev = 0, has_bucket = 0, has_old = 0;
    int r = query_int(db, "SELECT count(*) FROM pragma_table_info('kv') WHERE name = 'prev_rev'", &has_prev);
    if (r == 0) r = query_int(db, "SELECT count(*) FROM pragma_table_info('kv') WHERE name = 'bucket'", &has_bucket);
    if (r == 0) r = query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'kv_key_rev'", &has_old);
    if (r < 0) return r;
    if (has_prev && has_bucket && !has_old) return exec(db, "CREATE INDEX IF NOT EXISTS kv_bucket_rev ON kv(bucket, rev)");
    if (sqlite3_create_function(db, "kite_bucket", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, sql_bucket, NULL, NULL) !=
        SQLITE_OK)
        return -EIO;
    if ((r = exec(db, "BEGIN IMMEDIATE")) < 0) return r;
    if (!has_prev) r = exec(db, "ALTER TABLE kv ADD COLUMN prev_rev INTEGER NOT NULL DEFAULT 0");
    if (r == 0 && !has_bucket) r = exec(db, "ALTER TABLE kv ADD COLUMN bucket TEXT NOT NULL DEFAULT ''");
    if (r == 0) r = exec(db, "CREATE INDEX IF NOT EXISTS kv_key_rev ON kv(key, rev)");
    if (r == 0)
        r = exec(db, "UPDATE kv SET bucket = kite_bucket(key), prev_rev = ifnull((SELECT max(k2.rev) FROM kv AS k2 "
                     "WHERE k2.key = kv.key AND k2.rev < kv.rev), 0)");
    if (r == 0) r = exec(db, "DROP INDEX kv_key_rev; CREATE INDEX IF NOT EXISTS kv_bucket_rev ON kv(bucket, rev)");
    if (r == 0) r = exec(db, "COMMIT");
    if (r < 0) exec(db, "ROLLBACK");
    return r;
}

/* The revision the database holds, read before the schema is created (a new, empty or truncated
 * database has none: 0) so that nothing is written to a store about to be refused. */
static int stored_rev(sqlite3 *db, int64_t *ret) {
    int64_t kv = 0, meta = 0, a = 0, b = 0;
    int r = query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'kv'", &kv);
    if (r == 0) r = query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'", &meta);
    if (r == 0 && kv) r = query_int(db, "SELECT max(rev) FROM kv", &a);
    if (r == 0 && meta) r = query_int(db, "SELECT max(value) FROM meta WHERE name IN ('compact_rev', 'rev_floor')", &b);
    *ret = KITE_MAX(a, b);
    return r;
}

/* SQLite's quick_check (page structure, records, NOT NULL; not index contents): 0, or -EUCLEAN
 * with its first complaint in *ret_what (caller frees). */
static int quick_check(sqlite3 *db, char **ret_what) {
    sqlite3_stmt *st = NULL;
    *ret_what = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK) return -EIO;
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        if (!t || strcmp(t, "ok") != 0) {
            *ret_what = kite_strdup(t ? t : "no result");
            r = -EUCLEAN;
        }
    } else {
        r = -EIO;
    }
    sqlite3_finalize(st);
    return r;
}

/* Opens and creates the marker file and records rev in it (fsyncing the directory the first
 * time, so the file itself survives a crash). */
static int marker_init(struct sqlite_store *s, int64_t rev) {
    struct stat stb;
    bool fresh = stat(s->marker_path, &stb) < 0 || stb.st_size == 0;
    s->marker_fd = open(s->marker_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->marker_fd < 0) return -errno;
    int r = marker_write(s, rev);
    if (r == 0 && fresh) {
        _cleanup_free_ char *dir = kite_strdup(s->path);
        int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fsync(dfd) < 0) r = -errno;
        if (dfd >= 0) close(dfd);
    }
    s->marker_ns = kite_now_mono(kite_clock_real());
    return r;
}

/* Checks the store against its marker and its integrity before anything writes to it, then sets
 * it up. Only wdb is open while the checks run. */
/* The store holds every object (Secrets' keys aside, tokens and certificates are in it), so its
 * files are the owner's alone. SQLite creates a database 0644 less the umask and gives its WAL and
 * shared-memory files the database's mode: the database is made 0600 before SQLite opens it, and
 * files an older kite left readable are made private. A file that cannot be made is left to
 * SQLite's open to report. */
static void private_files(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    (void)!fchmod(fd, 0600);
    close(fd);
    for (const char *const *sfx = (const char *const[]){"-wal", "-shm", NULL}; *sfx; sfx++) {
        _cleanup_free_ char *f = kite_asprintf("%s%s", path, *sfx);
        (void)!chmod(f, 0600);
    }
}

static int open_checked(struct sqlite_store *s, const struct kite_store_options *o, char **ret_error) {
    const char *p = s->path, *mp = s->marker_path;
    int64_t acked = 0;
    uint64_t seq = 0;
    int r = marker_read(mp, &acked, &seq);
    s->marker_seq = seq;
    if (r == -EBADMSG && !o->force_recover)
        return set_error(ret_error, -EUCLEAN,
                         kite_asprintf("store %s: its revision marker %s is damaged, so whether acknowledged writes "
                                       "were lost cannot be checked; restore the store or start with "
                                       "--force-recover to accept it as it is",
                                       p, mp));
    if (r < 0 && r != -ENOENT && r != -EBADMSG)
        return set_error(ret_error, r, kite_asprintf("store %s: cannot read its revision marker %s: %s", p, mp, strerror(-r)));
    if (r < 0) acked = 0;

    private_files(p);
    if ((r = open_conn(p, &s->wdb, ret_error)) < 0) return r;
    _cleanup_free_ char *what = NULL;
    r = quick_check(s->wdb, &what);
    if (r == -EIO) return db_fail(s->wdb, p, "cannot check the database", ret_error);
    if (r < 0 && !o->force_recover)
        return set_error(ret_error, r,
                         kite_asprintf("store %s failed SQLite's integrity check (%s): the database is damaged; "
                                       "restore it or start with --force-recover to accept the loss",
                                       p, what));
    int64_t have = 0;
    if (stored_rev(s->wdb, &have) < 0) return db_fail(s->wdb, p, "cannot read the revision", ret_error);
    if (have < acked && !o->force_recover)
        return set_error(ret_error, -EUCLEAN,
                         kite_asprintf("store %s is at revision %lld but revision %lld was acknowledged (marker %s): "
                                       "the database or its WAL is damaged; restore it or start with "
                                       "--force-recover to accept the loss",
                                       p, (long long)have, (long long)acked, mp));

    if (exec(s->wdb, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;"
                     "CREATE TABLE IF NOT EXISTS kv (rev INTEGER PRIMARY KEY, key TEXT NOT NULL,"
                     " create_rev INTEGER NOT NULL, version INTEGER NOT NULL, deleted INTEGER NOT NULL,"
                     " value BLOB NOT NULL, prev_rev INTEGER NOT NULL DEFAULT 0, bucket TEXT NOT NULL DEFAULT '');"
                     "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);") < 0)
        return db_fail(s->wdb, p, "cannot create the schema", ret_error);
    if ((r = upgrade(s->wdb)) < 0) return db_fail(s->wdb, p, "cannot upgrade the schema (chains instead of the key index)", ret_error);
    if (have < acked) {
        /* Accepting the loss: revisions up to acked were handed out; keep them unused so clients
         * never see a revision go backwards or name two different states. */
        _cleanup_free_ char *sql =
            kite_asprintf("INSERT OR REPLACE INTO meta(name, value) VALUES('rev_floor', %lld)", (long long)acked);
        if (exec(s->wdb, sql) < 0) return db_fail(s->wdb, p, "cannot record the recovered revision", ret_error);
    }
    if ((r = open_conn(p, &s->rdb, ret_error)) < 0 || (r = open_conn(p, &s->cdb, ret_error)) < 0) return r;
    if (sqlite3_prepare_v3(s->wdb,
                           "INSERT INTO kv(rev, key, create_rev, version, deleted, value, prev_rev, bucket) "
                           "VALUES(?,?,?,?,?,?,?,?)",
                           -1, SQLITE_PREPARE_PERSISTENT, &s->ins, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->wdb, "BEGIN IMMEDIATE", -1, &s->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->wdb, "COMMIT", -1, &s->commit, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->wdb, "ROLLBACK", -1, &s->rollback, NULL) != SQLITE_OK)
        return db_fail(s->wdb, p, "cannot prepare statements", ret_error);
    if ((r = load(s)) == -EBADMSG)
        return set_error(ret_error, -EUCLEAN,
                         kite_asprintf("store %s holds encrypted values that do not open with this encryption key "
                                       "(a different key, or damaged values)", p));
    if (r < 0) return db_fail(s->wdb, p, "cannot load the keys", ret_error);
    if ((r = marker_init(s, atomic_load(&s->rev))) < 0)
        return set_error(ret_error, r, kite_asprintf("store %s: cannot write its revision marker %s: %s", p, mp, strerror(-r)));
    return 0;
}

static void sq_close(struct kite_store *b);

static int sq_open(const char *path, const struct kite_store_options *opts, struct kite_store **ret,
                   char **ret_error) {
    struct sqlite_store *s = kite_calloc(1, sizeof(*s));
    s->base.ops = &kite_store_sqlite_ops;
    s->path = kite_strdup(path);
    s->marker_path = kite_asprintf("%s.rev", path);
    s->marker_fd = -1;
    s->crypt = opts ? opts->crypt : NULL;
    s->q_tail = &s->q_head;
    pthread_mutex_init(&s->rdb_mu, NULL);
    pthread_mutex_init(&s->q_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the writer's idle wait for the marker */
    pthread_cond_init(&s->q_cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&s->compact_cond, NULL);
    pthread_rwlock_init(&s->live_lock, NULL);
    pthread_mutex_init(&s->sub_mu, NULL);
    pthread_mutex_init(&s->ck_mu, NULL);
    pthread_cond_init(&s->ck_cond, NULL);

    int r = open_checked(s, opts, ret_error);
    if (r < 0) {
        /* Closing the last connection would checkpoint what SQLite could read and delete the WAL:
         * a refused store keeps its files as they were found. */
        if (s->wdb) sqlite3_db_config(s->wdb, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
        store_free(s);
        return r;
    }
    sqlite3_wal_hook(s->wdb, wal_hook, s);
    if (pthread_create(&s->writer, NULL, writer_main, s) != 0) {
        store_free(s);
        return set_error(ret_error, -EAGAIN, kite_asprintf("store %s: cannot start its writer thread", path));
    }
    pthread_setname_np(s->writer, "store-writer"); /* names show in top -H and perf */
    if (pthread_create(&s->ckpt, NULL, ckpt_main, s) != 0) {
        s->ckpt = 0;
        sq_close(&s->base);
        return set_error(ret_error, -EAGAIN, kite_asprintf("store %s: cannot start its checkpoint thread", path));
    }
    pthread_setname_np(s->ckpt, "store-ckpt");
    *ret = &s->base;
    return 0;
}

static void sq_close(struct kite_store *b) {
    struct sqlite_store *s = sq(b);
    pthread_mutex_lock(&s->q_mu);
    s->stopping = true;
    pthread_cond_signal(&s->q_cond);
    pthread_mutex_unlock(&s->q_mu);
    pthread_join(s->writer, NULL);
    if (s->ckpt) {
        pthread_mutex_lock(&s->ck_mu);
        s->ck_stop = true;
        pthread_cond_signal(&s->ck_cond);
        pthread_mutex_unlock(&s->ck_mu);
        pthread_join(s->ckpt, NULL);
    }
    /* The writer is gone: the marker gets the final revision (a failure only weakens the check). */
    if (atomic_load(&s->rev) > s->marker_rev && marker_write(s, atomic_load(&s->rev)) < 0)
        atomic_fetch_add_explicit(&s->n_marker_failed, 1, memory_order_relaxed);
    store_free(s);
}

/* ---- the rest of the operations ---- */

static int64_t sq_rev(struct kite_store *b) { return atomic_load(&sq(b)->rev); }
static int64_t sq_applied_rev(struct kite_store *b) { return atomic_load(&sq(b)->applied_rev); }
static int64_t sq_compacted_rev(struct kite_store *b) { return atomic_load(&sq(b)->compact_rev); }

static int sq_submit(struct kite_store *b, const struct kite_write *w, kite_write_cb cb, void *ud) {
    struct sqlite_store *s = sq(b);
    bool del = w->type == KITE_WRITE_DELETE;
    struct pending *p = kite_calloc(1, sizeof(*p));
    p->type = w->type;
    p->expect = w->type == KITE_WRITE_CREATE ? 0 : w->expect_mod_rev;
    p->rec = kite_record_alloc(w->key, strlen(w->key), del ? NULL : w->value, del ? 0 : w->len);
    p->cb = cb;
    p->ud = ud;
    int r = 0;
    pthread_mutex_lock(&s->q_mu);
    if (s->stopping)
        r = -ESHUTDOWN;
    else if (s->q_len >= KITE_STORE_QUEUE_MAX) {
        r = -EAGAIN;
        atomic_fetch_add_explicit(&s->n_rejected, 1, memory_order_relaxed);
    }
    else {
        *s->q_tail = p;
        s->q_tail = &p->next;
        if (s->q_len++ == 0 || s->q_len == KITE_STORE_BATCH_MAX) pthread_cond_signal(&s->q_cond);
    }
    pthread_mutex_unlock(&s->q_mu);
    if (r < 0) {
        kite_record_unref(p->rec);
        free(p);
    }
    return r;
}

static int sq_get(struct kite_store *b, const char *key, struct kite_record **ret) {
    struct sqlite_store *s = sq(b);
    pthread_rwlock_rdlock(&s->live_lock);
    struct kite_record *r = kite_record_ref(kite_map_get(&s->live, key));
    pthread_rwlock_unlock(&s->live_lock);
    if (!r) return -ENOENT;
    *ret = r;
    return 0;
}

static int compact_once(struct sqlite_store *s, int64_t rev) {
    pthread_mutex_lock(&s->q_mu);
    /* One compaction at a time: wait for a running one to finish before asking. */
    while (s->compact_req) pthread_cond_wait(&s->compact_cond, &s->q_mu);
    s->compact_req = rev;
    uint64_t gen = s->compact_gen;
    pthread_cond_signal(&s->q_cond);
    while (s->compact_gen == gen) pthread_cond_wait(&s->compact_cond, &s->q_mu);
    int r = s->compact_res;
    pthread_mutex_unlock(&s->q_mu);
    return r;
}

/* Compaction runs on the writer thread and holds writes back while it runs, so a large backlog
 * is compacted in steps of KITE_STORE_COMPACT_STEP revisions, each its own transaction: the
 * writes queued meanwhile commit between two steps instead of waiting for the whole backlog. */
static int sq_compact(struct kite_store *b, int64_t rev) {
    struct sqlite_store *s = sq(b);
    for (;;) {
        int64_t done = atomic_load(&s->compact_rev);
        if (done >= rev) return 0;
        int r = compact_once(s, KITE_MIN(rev, done + KITE_STORE_COMPACT_STEP));
        if (r < 0) return r;
    }
}

static int sq_subscribe(struct kite_store *b, const char *prefix, kite_store_batch_cb cb, void *ud) {
    struct sqlite_store *s = sq(b);
    int r = 0;
    pthread_mutex_lock(&s->sub_mu);
    if (s->nsubs >= KITE_STORE_SUBSCRIBERS_MAX)
        r = -ENOSPC;
    else
        s->subs[s->nsubs++] = (struct sub){ kite_strdup(prefix), cb, ud };
    pthread_mutex_unlock(&s->sub_mu);
    return r;
}

static void sq_unsubscribe(struct kite_store *b, kite_store_batch_cb cb, void *ud) {
    struct sqlite_store *s = sq(b);
    pthread_mutex_lock(&s->sub_mu);
    for (size_t i = 0; i < s->nsubs; i++) {
        if (s->subs[i].cb != cb || s->subs[i].ud != ud) continue;
        free(s->subs[i].prefix);
        memmove(&s->subs[i], &s->subs[i + 1], (s->nsubs - i - 1) * sizeof(s->subs[0]));
        s->nsubs--;
        break;
    }
    pthread_mutex_unlock(&s->sub_mu);
}

static void sq_stats(struct kite_store *b, struct kite_store_stats *ret) {
    struct sqlite_store *s = sq(b);
    *ret = (struct kite_store_stats){
        .batches = atomic_load(&s->n_batches),
        .writes = atomic_load(&s->n_writes),
        .failed = atomic_load(&s->n_failed),
        .rejected = atomic_load(&s->n_rejected),
        .commits_failed = atomic_load(&s->n_commits_failed),
        .marker_failed = atomic_load(&s->n_marker_failed),
    };
}

const struct kite_store_ops kite_store_sqlite_ops = {
    .scheme = "sqlite:",
    .open = sq_open,
    .close = sq_close,
    .rev = sq_rev,
    .applied_rev = sq_applied_rev,
    .compacted_rev = sq_compacted_rev,
    .submit = sq_submit,
    .get = sq_get,
    .range = kite_store_sqlite_range,
    .stats = sq_stats,
    .compact = sq_compact,
    .subscribe = sq_subscribe,
    .unsubscribe = sq_unsubscribe,
    .subscribe_snapshot = kite_store_sqlite_subscribe_snapshot,
    .history = kite_store_sqlite_history,
};
