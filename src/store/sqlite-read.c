/* The read side of the SQLite store: range at a revision, history, and the atomic
 * subscribe-with-snapshot the watch cache starts from. Reads use their own connection (rdb,
 * one reader at a time under rdb_mu); WAL lets them run concurrently with the writer's
 * transactions, and bounding every query by a revision <= the applied revision keeps results
 * consistent with what the in-memory state has published. */
#include "store/store-int.h"
#include "base/clock.h"

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

/* ---- range at a revision ---- */

/* A key under the range's prefix as live and gone held it: its newest row's revision, and the
 * live record (NULL when gone). */
struct cand {
    const char *key; /* the record's key, or owned (gone) */
    struct kite_record *rec;
    int64_t newest;
};

static int cmp_cand(const void *a, const void *b) {
    return strcmp(((const struct cand *)a)->key, ((const struct cand *)b)->key);
}

static void cand_free(struct cand *c) {
    if (c->rec) kite_record_unref(c->rec);
    else free((char *)c->key);
}

static void swap_cand(struct cand *a, struct cand *b) {
    struct cand t = *a;
    *a = *b;
    *b = t;
}

/* Restores the max-heap c[0..k) (by key) below j. */
static void sift_down(struct cand *c, size_t k, size_t j) {
    for (;;) {
        size_t l = 2 * j + 1, m = j;
        if (l < k && cmp_cand(&c[l], &c[m]) > 0) m = l;
        if (l + 1 < k && cmp_cand(&c[l + 1], &c[m]) > 0) m = l + 1;
        if (m == j) return;
        swap_cand(&c[j], &c[m]);
        j = m;
    }
}

/* Moves the k smallest of c[0..n) (by key) to c[0..k), sorted: a max-heap of k over the rest, so
 * a page of a large prefix costs O(n log k), not a sort of every key after the page's start. */
static void smallest_sorted(struct cand *c, size_t n, size_t k) {
    if (k >= n) {
        if (n > 1) qsort(c, n, sizeof(*c), cmp_cand);
        return;
    }
    for (size_t i = k / 2; i-- > 0;) sift_down(c, k, i);
    for (size_t i = k; i < n; i++) {
        if (cmp_cand(&c[i], &c[0]) >= 0) continue;
        swap_cand(&c[0], &c[i]);
        sift_down(c, k, 0);
    }
    if (k > 1) qsort(c, k, sizeof(*c), cmp_cand);
}

/* The rows a chain walk reads (caller holds rdb_mu): a row's predecessor, and a whole row. */
struct chain {
    sqlite3_stmt *prev, *row;
};

static int chain_prepare(struct sqlite_store *s, struct chain *ch) {
    if (sqlite3_prepare_v2(s->rdb, "SELECT prev_rev FROM kv WHERE rev = ?1", -1, &ch->prev, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->rdb, "SELECT rev, key, create_rev, version, deleted, value FROM kv WHERE rev = ?1", -1,
                           &ch->row, NULL) != SQLITE_OK)
        return -EIO;
    return 0;
}

static void chain_finalize(struct chain *ch) {
    sqlite3_finalize(ch->prev);
    sqlite3_finalize(ch->row);
}

/* The row at rev as a record: 0 with *ret (NULL when compaction removed it or it is a
 * tombstone), -EIO. */
static int chain_row(struct sqlite_store *s, struct chain *ch, int64_t rev, struct kite_record **ret) {
    *ret = NULL;
    sqlite3_bind_int64(ch->row, 1, rev);
    int rc = sqlite3_step(ch->row), r = 0;
    if (rc == SQLITE_ROW && !sqlite3_column_int(ch->row, 4)) {
        *ret = row_rec(s, ch->row);
        if (!*ret) r = -EIO;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        r = -EIO;
    }
    sqlite3_reset(ch->row);
    return r;
}

/* The key's record at at_rev, from its newest row back along prev_rev: 0 with *ret (NULL when the
 * key did not exist then), -EIO. */
static int at_revision(struct sqlite_store *s, struct chain *ch, const struct cand *c, int64_t at_rev,
                       struct kite_record **ret) {
    *ret = NULL;
    if (c->newest <= at_rev) {
        *ret = c->rec ? kite_record_ref(c->rec) : NULL;
        return 0;
    }
    for (int64_t rev = c->newest;;) {
        sqlite3_bind_int64(ch->prev, 1, rev);
        int rc = sqlite3_step(ch->prev);
        int64_t p = rc == SQLITE_ROW ? sqlite3_column_int64(ch->prev, 0) : 0;
        sqlite3_reset(ch->prev);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) return -EIO;
        if (p <= 0) return 0; /* no row before: created after at_rev (or compacted away) */
        if (p <= at_rev) return chain_row(s, ch, p, ret);
        rev = p;
    }
}

/* The candidate for key, as live and gone hold it now (false: neither does; it did not exist at
 * any revision a read may ask for). Caller holds live_lock. */
static bool cand_of(struct sqlite_store *s, const char *key, struct cand *ret) {
    struct kite_record *r = kite_map_get(&s->live, key);
    if (r) {
        *ret = (struct cand){kite_record_ref(r)->key, r, r->mod_rev};
        return true;
    }
    int64_t t = (int64_t)(intptr_t)kite_map_get(&s->gone, key);
    if (!t) return false;
    *ret = (struct cand){kite_strdup(key), NULL, t};
    return true;
}

/* Pointers to the keys under prefix after lo (exclusive when after) in live and gone, with
 * their records (not referenced). Caller holds live_lock. */
static void scan(struct sqlite_store *s, const char *prefix, const char *lo, bool after, struct cand **ret,
                 size_t *ret_n) {
    struct cand *c = NULL;
    size_t n = 0, cap = 0;
    const char *k;
    void *v;
    for (int pass = 0; pass < 2; pass++) {
        struct kite_map *m = pass ? &s->gone : &s->live;
        for (size_t i = 0; kite_map_next(m, &i, &k, &v);) {
            if (!kite_startswith(k, prefix)) continue;
            int d = strcmp(k, lo);
            if (d < 0 || (d == 0 && after)) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                c = kite_realloc(c, cap * sizeof(*c));
            }
            c[n++] = pass ? (struct cand){k, NULL, (int64_t)(intptr_t)v} : (struct cand){k, v, ((struct kite_record *)v)->mod_rev};
        }
    }
    *ret = c;
    *ret_n = n;
}

void kite_store_key_snap_free(struct key_snap *k) {
    if (!k) return;
    free(k->prefix);
    free(k->from);
    free(k->arena);
    free(k->off);
    free(k);
}

static const char *snap_key(const struct key_snap *k, size_t i) { return k->arena + k->off[i]; }

static int cmp_off(const void *a, const void *b, void *arena) {
    return strcmp((const char *)arena + *(const size_t *)a, (const char *)arena + *(const size_t *)b);
}

/* A snapshot of the n keys in c (borrowed from live and gone: caller holds live_lock), copied;
 * sorted by the caller once the lock is let go. */
static struct key_snap *snap_copy(const char *prefix, const char *from, bool from_after, int64_t rev,
                                  const struct cand *c, size_t n) {
    struct key_snap *k = kite_calloc(1, sizeof(*k));
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += strlen(c[i].key) + 1;
    k->prefix = kite_strdup(prefix);
    k->from = kite_strdup(from);
    k->from_after = from_after;
    k->rev = rev;
    k->n = n;
    k->arena = kite_malloc(bytes);
    k->off = kite_calloc(n, sizeof(*k->off));
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t len = strlen(c[i].key) + 1;
        memcpy(k->arena + at, c[i].key, len);
        k->off[i] = at;
        at += len;
    }
    return k;
}

/* Whether k holds every key after lo (exclusive when after): it was taken from lo or before. */
static bool snap_covers(const struct key_snap *k, const char *lo, bool after) {
    int d = strcmp(lo, k->from);
    return d > 0 || (d == 0 && (after || !k->from_after));
}

/* The kept snapshot of prefix that holds every key after lo existing at at_rev (caller holds
 * rdb_mu), or NULL; drops the ones unused for KITE_STORE_KEY_SNAP_TTL_NS. */
#define KITE_STORE_KEY_SNAP_TTL_NS (60 * KITE_NS_PER_SEC)
static struct key_snap *snap_find(struct sqlite_store *s, const char *prefix, const char *lo, bool after,
                                  int64_t at_rev, int64_t now) {
    struct key_snap *found = NULL;
    for (size_t i = 0; i < KITE_STORE_KEY_SNAPS; i++) {
        struct key_snap *k = s->snaps[i];
        if (!k) continue;
        if (now - k->used_ns > KITE_STORE_KEY_SNAP_TTL_NS) {
            kite_store_key_snap_free(k);
            s->snaps[i] = NULL;
        } else if (!found && k->rev >= at_rev && strcmp(k->prefix, prefix) == 0 && snap_covers(k, lo, after)) {
            found = k;
        }
    }
    if (found) found->used_ns = now;
    return found;
}

/* Keeps k in place of the least recently used snapshot. Caller holds rdb_mu. */
static void snap_keep(struct sqlite_store *s, struct key_snap *k) {
    size_t victim = 0;
    for (size_t i = 0; i < KITE_STORE_KEY_SNAPS; i++) {
        if (!s->snaps[i]) {
            victim = i;
            break;
        }
        if (s->snaps[i]->used_ns < s->snaps[victim]->used_ns) victim = i;
    }
    kite_store_key_snap_free(s->snaps[victim]);
    s->snaps[victim] = k;
}

/* Appends to out the records at at_rev of the candidates c[0..n) (in key order), up to want
 * records in all; frees the candidates. Caller holds rdb_mu. */
static int resolve(struct sqlite_store *s, struct chain *ch, struct cand *c, size_t n, int64_t at_rev, size_t want,
                   struct rec_vec *out) {
    int r = 0;
    if (n && !ch->prev) r = chain_prepare(s, ch);
    for (size_t i = 0; i < n && out->n < want && r == 0; i++) {
        struct kite_record *rec = NULL;
        if ((r = at_revision(s, ch, &c[i], at_rev, &rec)) == 0 && rec) vec_push(out, rec);
    }
    for (size_t i = 0; i < n; i++) cand_free(&c[i]);
    return r;
}

/* A range is read from the keys of live and gone (a pass over the maps, a selection of the
 * page's keys under the read lock on pointers alone) and each key's chain. A continue page of a
 * large prefix (more than SNAP_MIN_PAGES pages' worth of keys after its start) keeps the sorted
 * keys for the pages after it (KITE_STORE_KEY_SNAPS of them, each dropped after a minute
 * unused): an informer listing 150,000 Nodes in pages of 500 then pays for one pass and one sort,
 * not one of each per page. */
#define SNAP_MIN_PAGES 4

int kite_store_sqlite_range(struct kite_store *b, const char *prefix, int64_t at_rev, const char *start_after, size_t limit,
                 struct kite_record ***ret, size_t *ret_n, bool *ret_more) {
    struct sqlite_store *s = sq(b);
    int64_t now = atomic_load(&s->rev);
    if (at_rev == 0) at_rev = now;
    if (at_rev < 0 || at_rev > now) return -ERANGE;
    if (at_rev < atomic_load(&s->compact_rev)) return -ENODATA;
    /* The keys after the lower bound (the larger of the prefix, inclusive, and start_after,
     * exclusive) from live and gone: every key that existed at at_rev (>= compact_rev) is one of
     * them, its tombstone being kept while it may be asked for. */
    bool after = start_after && strcmp(start_after, prefix) >= 0;
    _cleanup_free_ char *lo = kite_strdup(after ? start_after : prefix);
    struct rec_vec out = {0};
    struct chain ch = {0};
    size_t want = limit ? limit + 1 : SIZE_MAX;
    int64_t mono = kite_now_mono(kite_clock_real());
    int r = 0;
    pthread_mutex_lock(&s->rdb_mu);
    struct key_snap *snap = limit && start_after ? snap_find(s, prefix, lo, after, at_rev, mono) : NULL;
    /* In rounds: the next smallest keys, as many as are still wanted (doubled each round, for
     * keys that did not exist at at_rev), until enough or none are left. */
    for (size_t take = want; !snap && r == 0 && out.n < want; take = take > SIZE_MAX / 2 ? SIZE_MAX : 2 * take) {
        struct cand *c = NULL;
        size_t n = 0, keep;
        pthread_rwlock_rdlock(&s->live_lock);
        int64_t snap_rev = atomic_load(&s->rev);
        scan(s, prefix, lo, after, &c, &n);
        if (limit && start_after && n > SNAP_MIN_PAGES * want) {
            snap = snap_copy(prefix, lo, after, snap_rev, c, n);
            pthread_rwlock_unlock(&s->live_lock);
            free(c);
            qsort_r(snap->off, snap->n, sizeof(*snap->off), cmp_off, snap->arena);
            snap->used_ns = mono;
            snap_keep(s, snap);
            break;
        }
        keep = KITE_MIN(take, n);
        smallest_sorted(c, n, keep);
        for (size_t i = 0; i < keep; i++) {
            if (c[i].rec) kite_record_ref(c[i].rec);
            else c[i].key = kite_strdup(c[i].key);
        }
        pthread_rwlock_unlock(&s->live_lock);
        if (keep) {
            free(lo);
            lo = kite_strdup(c[keep - 1].key);
            after = true;
        }
        r = resolve(s, &ch, c, keep, at_rev, want, &out);
        free(c);
        if (n == keep) break;
    }
    if (snap && r == 0) {
        /* the first key after lo, then the page's keys in chunks, each looked up in live and gone
         * under one hold of the read lock */
        size_t lo_i = 0, hi = snap->n;
        while (lo_i < hi) {
            size_t mid = lo_i + (hi - lo_i) / 2;
            int d = strcmp(snap_key(snap, mid), lo);
            if (d < 0 || (d == 0 && after)) lo_i = mid + 1;
            else hi = mid;
        }
        struct cand *c = kite_calloc(KITE_MIN(want, snap->n) + 1, sizeof(*c));
        for (size_t i = lo_i; i < snap->n && out.n < want && r == 0;) {
            size_t chunk = KITE_MIN(want - out.n, snap->n - i), n = 0;
            pthread_rwlock_rdlock(&s->live_lock);
            for (size_t j = 0; j < chunk; j++)
                if (cand_of(s, snap_key(snap, i + j), &c[n])) n++;
            pthread_rwlock_unlock(&s->live_lock);
            i += chunk;
            r = resolve(s, &ch, c, n, at_rev, want, &out);
        }
        free(c);
    }
    chain_finalize(&ch);
    pthread_mutex_unlock(&s->rdb_mu);
    /* A concurrent compaction may have removed rows we needed: the result is only valid if the
     * compacted revision is still <= at_rev. */
    if (r == 0 && at_rev < atomic_load(&s->compact_rev)) r = -ENODATA;
    if (r < 0) {
        vec_release(&out);
        return r;
    }
    bool more = limit && out.n > limit;
    if (more) {
        kite_record_unref(out.v[--out.n]);
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *ret = out.v;
    *ret_n = out.n;
    if (ret_more) *ret_more = more;
    return 0;
}

/* ---- history ---- */

/* History under a prefix with a bucket is read through the (bucket, rev) index, named: without
 * statistics SQLite may take the revision range on the table instead, which reads every row in
 * history (the whole database, a second or more per 1.5 GB) for each prefix, even one with no
 * change in it: with 50,000 nodes that made a restarted apiserver's watch caches take ~25 s
 * before they served. Through the index a prefix costs its bucket's changes in the range. A
 * prefix without a bucket (fewer than three '/') reads the revision range. ?1 prefix, ?2 its
 * end, ?3..?4 the revisions, ?6 the bucket. */
static char *history_sql(const char *select, const char *prefix, const char *end, const char *tail) {
    bool bucket = kite_store_prefix_bucket_len(prefix) > 0;
    return kite_asprintf("SELECT %s FROM kv %s WHERE %s rev > ?3 AND rev <= ?4 AND key >= ?1 %s %s", select,
                         bucket ? "INDEXED BY kv_bucket_rev" : "", bucket ? "bucket = ?6 AND" : "",
                         end ? "AND key < ?2" : "", tail);
}

/* Binds a history query's prefix and revision range. */
static void bind_window(sqlite3_stmt *st, const char *prefix, const char *end, int64_t from_rev, int64_t to_rev) {
    sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    if (end) sqlite3_bind_text(st, 2, end, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, from_rev);
    sqlite3_bind_int64(st, 4, to_rev);
    size_t b = kite_store_prefix_bucket_len(prefix);
    if (b) sqlite3_bind_text(st, 6, prefix, (int)b, SQLITE_STATIC);
}

/* The revision after which the newest max changes under prefix in (from_rev, to_rev] lie
 * (from_rev when there are no more than max). */
static int newest_from(struct sqlite_store *s, const char *prefix, const char *end, int64_t from_rev, int64_t to_rev,
                       size_t max, int64_t *ret) {
    _cleanup_free_ char *sql = history_sql("rev", prefix, end, "ORDER BY rev DESC LIMIT 1 OFFSET ?5");
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
    _cleanup_free_ char *sql =
        history_sql("rev, key, create_rev, version, deleted, value, prev_rev", prefix, end, "ORDER BY rev");
    sqlite3_stmt *st = NULL;
    struct chain ch = {0};
    struct kite_map last = {0}; /* key -> newest record seen so far (owned ref) */
    int r = 0, rc;
    if (sqlite3_prepare_v2(s->rdb, sql, -1, &st, NULL) != SQLITE_OK || chain_prepare(s, &ch) < 0) {
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
        int64_t prev_rev = sqlite3_column_int64(st, 6);
        if (!prev && prev_rev > 0) {
            /* The first change of this key in the window: its predecessor is older. */
            if ((r = chain_row(s, &ch, prev_rev, &prev)) < 0) {
                kite_record_unref(row);
                break;
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
    chain_finalize(&ch);
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
