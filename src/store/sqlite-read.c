/* The read side of the SQLite store: range at a revision, history, and the atomic
 * subscribe-with-snapshot the watch cache starts from. Reads use their own connection (rdb,
 * one reader at a time under rdb_mu); WAL lets them run concurrently with the writer's
 * transactions, and bounding every query by a revision <= the applied revision keeps results
 * consistent with what the in-memory state has published. */
#include "store/store-int.h"

static int cmp_rec(const void *a, const void *b) {
    return strcmp((*(struct kite_record *const *)a)->key, (*(struct kite_record *const *)b)->key);
}

struct rec_vec {
    struct kite_record **v;
    size_t n, cap;
};

static void vec_push(struct rec_vec *v, struct kite_record *r) {
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->v = kite_realloc(v->v, v->cap * sizeof(*v->v));
    }
    v->v[v->n++] = r;
}

static void vec_release(struct rec_vec *v) {
    for (size_t i = 0; i < v->n; i++) kite_record_unref(v->v[i]);
    free(v->v);
    *v = (struct rec_vec){0};
}

/* NULL when an encrypted value does not open (another key, or damaged). */
static struct kite_record *row_rec(struct sqlite_store *s, sqlite3_stmt *st) {
    /* columns: rev, key, create_rev, version, deleted, value */
    const char *key = (const char *)sqlite3_column_text(st, 1);
    struct kite_record *r = sqlite3_column_int(st, 4)
                                ? kite_record_alloc(key, sqlite3_column_bytes(st, 1), NULL, 0)
                                : kite_record_from_row(s->crypt, key, sqlite3_column_bytes(st, 1), sqlite3_column_blob(st, 5),
                                                  sqlite3_column_bytes(st, 5));
    if (!r) return NULL;
    r->mod_rev = sqlite3_column_int64(st, 0);
    r->create_rev = sqlite3_column_int64(st, 2);
    r->version = sqlite3_column_int64(st, 3);
    r->deleted = sqlite3_column_int(st, 4) != 0;
    return r;
}

int kite_store_sqlite_range(struct kite_store *b, const char *prefix, int64_t at_rev, const char *start_after, size_t limit,
                 struct kite_record ***ret, size_t *ret_n, bool *ret_more) {
    struct sqlite_store *s = sq(b);
    int64_t now = atomic_load(&s->rev);
    if (at_rev == 0) at_rev = now;
    if (at_rev < 0 || at_rev > now) return -ERANGE;
    if (at_rev < atomic_load(&s->compact_rev)) return -ENODATA;
    _cleanup_free_ char *end = kite_store_prefix_end(prefix);
    /* The lower bound is the larger of the prefix (inclusive) and start_after (exclusive), so that
     * SQLite seeks straight to it in the (key, rev) index: pages cost O(limit), not O(offset). */
    bool after = start_after && strcmp(start_after, prefix) >= 0;
    const char *lo = after ? start_after : prefix;
    /* Rows in key order straight from the (key, rev) index, each kept when it is its key's
     * newest row <= at_rev (a correlated lookup in the same index), so the LIMIT stops the scan:
     * a page costs O(limit x revisions per key). A GROUP BY key in a subquery instead was
     * materialized for every key after the start before the LIMIT applied (EXPLAIN: MATERIALIZE,
     * TEMP B-TREE FOR ORDER BY): a continue page of 92,000 Leases took 0.9 s, a list of them in
     * pages of 500 minutes. */
    _cleanup_free_ char *sql = kite_asprintf(
        "SELECT kv.rev, kv.key, kv.create_rev, kv.version, kv.deleted, kv.value FROM kv "
        "WHERE kv.key %s ?1 %s AND kv.rev <= ?3 "
        "AND kv.rev = (SELECT max(k2.rev) FROM kv AS k2 WHERE k2.key = kv.key AND k2.rev <= ?3) "
        "AND kv.deleted = 0 ORDER BY kv.key LIMIT ?4",
        after ? ">" : ">=", end ? "AND kv.key < ?2" : "");
    struct rec_vec v = {0};
    int r = 0, rc;
    pthread_mutex_lock(&s->rdb_mu);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->rdb, sql, -1, &st, NULL) != SQLITE_OK) {
        r = -EIO;
    } else {
        sqlite3_bind_text(st, 1, lo, -1, SQLITE_STATIC);
        if (end) sqlite3_bind_text(st, 2, end, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, at_rev);
        sqlite3_bind_int64(st, 4, limit ? (int64_t)limit + 1 : -1);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            struct kite_record *rec = row_rec(s, st);
            if (!rec) {
                r = -EIO;
                break;
            }
            vec_push(&v, rec);
        }
        if (r == 0 && rc != SQLITE_DONE) r = -EIO;
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->rdb_mu);
    /* A concurrent compaction may have removed rows we needed: the result is only valid if the
     * compacted revision is still <= at_rev. */
    if (r == 0 && at_rev < atomic_load(&s->compact_rev)) r = -ENODATA;
    if (r < 0) {
        vec_release(&v);
        return r;
    }
    bool more = limit && v.n > limit;
    if (more) {
        kite_record_unref(v.v[--v.n]);
    }
    if (v.n == 0) {
        free(v.v);
        v.v = NULL;
    }
    *ret = v.v;
    *ret_n = v.n;
    if (ret_more) *ret_more = more;
    return 0;
}

/* History is read through the (key, rev) index, named: without statistics SQLite takes the
 * revision range on the table instead, which reads every row in history (the whole database, a
 * second or more per 1.5 GB) for each prefix, even one with no change in it: with 50,000 nodes
 * that made a restarted apiserver's watch caches take ~25 s before it served. Through the index a
 * prefix costs its own index entries and the rows it returns. */
#define HISTORY_WHERE "FROM kv INDEXED BY kv_key_rev WHERE key >= ?1 %s AND rev > ?3 AND rev <= ?4"

/* Binds a history query's prefix and revision range. */
static void bind_window(sqlite3_stmt *st, const char *prefix, const char *end, int64_t from_rev, int64_t to_rev) {
    sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    if (end) sqlite3_bind_text(st, 2, end, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, from_rev);
    sqlite3_bind_int64(st, 4, to_rev);
}

/* The revision after which the newest max changes under prefix in (from_rev, to_rev] lie
 * (from_rev when there are no more than max), found from the index alone: no value is read. */
static int newest_from(struct sqlite_store *s, const char *prefix, const char *end, int64_t from_rev, int64_t to_rev,
                       size_t max, int64_t *ret) {
    _cleanup_free_ char *sql = kite_asprintf("SELECT rev " HISTORY_WHERE " ORDER BY rev DESC LIMIT 1 OFFSET ?5",
                                             end ? "AND key < ?2" : "");
    sqlite3_stmt *st = NULL;
    *ret = from_rev;
    if (sqlite3_prepare_v2(s->rdb, sql, -1, &st, NULL) != SQLITE_OK) return -EIO;
    bind_window(st, prefix, end, from_rev, to_rev);
    sqlite3_bind_int64(st, 5, (int64_t)max - 1);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *ret = sqlite3_column_int64(st, 0) - 1;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -EIO;
}

/* Replays history under prefix with from_rev < rev <= to_rev, only its newest max changes when
 * max is not 0; *ret_from (optional) gets the revision the replay starts after. Caller holds
 * rdb_mu. */
static int history_locked(struct sqlite_store *s, const char *prefix, int64_t from_rev, int64_t to_rev, size_t max,
                          kite_store_event_cb cb, void *ud, int64_t *ret_from) {
    _cleanup_free_ char *end = kite_store_prefix_end(prefix);
    if (max) {
        int r = newest_from(s, prefix, end, from_rev, to_rev, max, &from_rev);
        if (r < 0) return r;
    }
    if (ret_from) *ret_from = from_rev;
    _cleanup_free_ char *sql = kite_asprintf("SELECT rev, key, create_rev, version, deleted, value " HISTORY_WHERE
                                             " ORDER BY rev", end ? "AND key < ?2" : "");
    sqlite3_stmt *st = NULL, *prev_st = NULL;
    struct kite_map last = {0}; /* key -> newest record seen so far (owned ref) */
    int r = 0, rc;
    if (sqlite3_prepare_v2(s->rdb, sql, -1, &st, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->rdb,
                           "SELECT rev, key, create_rev, version, deleted, value FROM kv "
                           "WHERE key = ?1 AND rev < ?2 ORDER BY rev DESC LIMIT 1",
                           -1, &prev_st, NULL) != SQLITE_OK) {
        r = -EIO;
        goto out;
    }
    bind_window(st, prefix, end, from_rev, to_rev);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct kite_record *row = row_rec(s, st), *prev = NULL;
        if (!row) {
            r = -EIO;
            break;
        }
        prev = kite_map_get(&last, row->key);
        if (!prev) {
            /* The first change of this key in the window: its predecessor is older. */
            sqlite3_bind_text(prev_st, 1, row->key, -1, SQLITE_STATIC);
            sqlite3_bind_int64(prev_st, 2, row->mod_rev);
            if (sqlite3_step(prev_st) == SQLITE_ROW) prev = row_rec(s, prev_st);
            sqlite3_reset(prev_st);
            if (prev && prev->deleted) {
                kite_record_unref(prev);
                prev = NULL;
            }
            if (prev) kite_map_put(&last, row->key, prev);
        }
        struct kite_store_event ev = { .rev = row->mod_rev, .prev = prev };
        if (row->deleted) {
            /* Tombstone rows carry no value: the event shows the deleted version's. */
            struct kite_record *live = prev ? prev : row;
            ev.type = KITE_WRITE_DELETE;
            ev.rec = kite_record_tombstone(live, row->mod_rev);
            cb(ud, &ev);
            kite_record_unref(kite_map_del(&last, row->key));
            kite_record_unref(ev.rec);
            kite_record_unref(row);
        } else {
            ev.type = row->create_rev == row->mod_rev ? KITE_WRITE_CREATE : KITE_WRITE_UPDATE;
            if (ev.type == KITE_WRITE_CREATE) ev.prev = NULL;
            ev.rec = row;
            cb(ud, &ev);
            kite_record_unref(kite_map_put(&last, row->key, row));
        }
    }
    if (r == 0 && rc != SQLITE_DONE) r = -EIO;
out:
    sqlite3_finalize(st);
    sqlite3_finalize(prev_st);
    for (size_t i = 0; kite_map_next(&last, &i, NULL, NULL);) kite_record_unref(last.slots[i - 1].value);
    kite_map_release(&last);
    return r;
}

int kite_store_sqlite_history(struct kite_store *b, const char *prefix, int64_t from_rev, kite_store_event_cb cb, void *ud) {
    struct sqlite_store *s = sq(b);
    int64_t now = atomic_load(&s->rev);
    if (from_rev < atomic_load(&s->compact_rev)) return -ENODATA;
    pthread_mutex_lock(&s->rdb_mu);
    int r = history_locked(s, prefix, from_rev, now, 0, cb, ud, NULL);
    pthread_mutex_unlock(&s->rdb_mu);
    if (r == 0 && from_rev < atomic_load(&s->compact_rev)) r = -ENODATA;
    return r;
}

int kite_store_sqlite_subscribe_snapshot(struct kite_store *b, const char *prefix, kite_store_batch_cb cb, void *ud,
                              struct kite_store_replay *replay, struct kite_record ***ret_recs,
                              size_t *ret_n, int64_t *ret_rev) {
    struct sqlite_store *s = sq(b);
    struct rec_vec v = {0};
    int r = 0;
    /* Holding sub_mu stops the writer from publishing a batch, so the snapshot, the history up to
     * its revision and the subscription meet without a gap or an overlap. */
    pthread_mutex_lock(&s->sub_mu);
    if (s->nsubs >= KITE_STORE_SUBSCRIBERS_MAX) {
        pthread_mutex_unlock(&s->sub_mu);
        return -ENOSPC;
    }
    int64_t rev = atomic_load(&s->rev);
    pthread_rwlock_rdlock(&s->live_lock);
    const char *k;
    void *val;
    for (size_t i = 0; kite_map_next(&s->live, &i, &k, &val);)
        if (kite_startswith(k, prefix)) vec_push(&v, kite_record_ref(val));
    pthread_rwlock_unlock(&s->live_lock);
    if (replay) {
        /* Compaction runs on the writer thread, which may be compacting right now; a compaction
         * racing this read makes the replay start later (only the ring's depth changes). */
        pthread_mutex_lock(&s->rdb_mu);
        r = history_locked(s, prefix, atomic_load(&s->compact_rev), rev, replay->max, replay->cb, replay->ud,
                           &replay->from);
        pthread_mutex_unlock(&s->rdb_mu);
    }
    if (r == 0) s->subs[s->nsubs++] = (struct sub){ kite_strdup(prefix), cb, ud };
    pthread_mutex_unlock(&s->sub_mu);
    if (r < 0) {
        vec_release(&v);
        return r;
    }
    if (v.n) qsort(v.v, v.n, sizeof(*v.v), cmp_rec);
    *ret_recs = v.v;
    *ret_n = v.n;
    *ret_rev = rev;
    return 0;
}
