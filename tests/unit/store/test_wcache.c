#include "helpers.h"
#include "store/wcache.h"

#include <pthread.h>

static void event_unref_pair(struct kite_watch_event *e) {
    kite_record_unref(e->rec);
    kite_record_unref(e->prev);
}

static void free_recs(struct kite_record **v, size_t n) {
    for (size_t i = 0; i < n; i++) kite_record_unref(v[i]);
    free(v);
}

static void expect_list(struct kite_wcache *c, const char *sub, const char *after, size_t limit,
                        kite_record_filter f, const char *want, bool want_more) {
    struct kite_record **v;
    size_t n;
    int64_t rev;
    bool more;
    cr_assert_eq(kite_wcache_list(c, sub, after, limit, f, NULL, &v, &n, &rev, &more), 0);
    char got[512] = "";
    for (size_t i = 0; i < n; i++) {
        strcat(got, v[i]->key);
        strcat(got, " ");
    }
    cr_assert_str_eq(got, want, "list(%s, %s, %zu)", sub ? sub : "-", after ? after : "-", limit);
    cr_assert_eq(more, want_more, "list(%s, %s, %zu) more", sub ? sub : "-", after ? after : "-", limit);
    cr_assert_eq(rev, kite_wcache_rev(c));
    free_recs(v, n);
}

static bool only_b(struct kite_record *r, void *ud) { return strstr(r->key, "/b") != NULL; }

Test(wcache, list_and_get) {
    struct tstore t = {0};
    tstore_open(&t);
    put_ok(t.s, KITE_WRITE_CREATE, "/r/ns1/b", "1");
    put_ok(t.s, KITE_WRITE_CREATE, "/other/x", "1");
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/r/", 16, &c), 0);
    cr_assert_eq(kite_wcache_rev(c), 2);
    put_ok(t.s, KITE_WRITE_CREATE, "/r/ns1/a", "1");
    put_ok(t.s, KITE_WRITE_CREATE, "/r/ns2/b", "1");
    put_ok(t.s, KITE_WRITE_CREATE, "/r/ns1/c", "1");
    int64_t r = put_ok(t.s, KITE_WRITE_UPDATE, "/r/ns1/a", "2"); /* cache is current when the write returns */
    struct kite_record *rec = kite_wcache_get(c, "/r/ns1/a");
    cr_assert_not_null(rec);
    cr_assert_str_eq(rec->value, "2");
    cr_assert_eq(rec->mod_rev, r);
    kite_record_unref(rec);
    cr_assert_null(kite_wcache_get(c, "/other/x"));
    cr_assert_null(kite_wcache_get(c, "/r/ns1/zz"));
    cr_assert_eq(kite_wcache_count(c), 4);

    expect_list(c, NULL, NULL, 0, NULL, "/r/ns1/a /r/ns1/b /r/ns1/c /r/ns2/b ", false);
    expect_list(c, "/r/ns1/", NULL, 0, NULL, "/r/ns1/a /r/ns1/b /r/ns1/c ", false);
    expect_list(c, "/r/ns1/", NULL, 2, NULL, "/r/ns1/a /r/ns1/b ", true);
    expect_list(c, "/r/ns1/", "/r/ns1/b", 2, NULL, "/r/ns1/c ", false);
    expect_list(c, "/r/ns1/", "/r/ns1/a", 1, NULL, "/r/ns1/b ", true);
    expect_list(c, "/r/", NULL, 0, only_b, "/r/ns1/b /r/ns2/b ", false);
    expect_list(c, "/r/", NULL, 1, only_b, "/r/ns1/b ", true);
    expect_list(c, "/r/ns3/", NULL, 0, NULL, "", false);
    put_ok(t.s, KITE_WRITE_DELETE, "/r/ns1/b", NULL);
    expect_list(c, "/r/ns1/", NULL, 0, NULL, "/r/ns1/a /r/ns1/c ", false);
    cr_assert_eq(kite_wcache_count(c), 3);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

static void count_ok(void *ud, int err, int64_t rev, struct kite_record *rec) {
    if (err == 0) __atomic_add_fetch((int *)ud, 1, __ATOMIC_RELAXED);
}

/* Many keys: inserting and deleting in random order keeps the skip list sorted. */
Test(wcache, many_keys_sorted) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/m/", 0, &c), 0);
    enum { N = 2000 };
    int oks = 0;
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof(key), "/m/%05d", (i * 7919) % N);
        struct kite_write w = { KITE_WRITE_CREATE, key, "v", 1, 0 };
        cr_assert_eq(kite_store_submit(t.s, &w, count_ok, &oks), 0);
    }
    put_ok(t.s, KITE_WRITE_CREATE, "/m/sync", "v"); /* queued after all of them: they are done */
    cr_assert_eq(__atomic_load_n(&oks, __ATOMIC_RELAXED), N);
    for (int i = 0; i < N; i += 3) {
        char key[32];
        snprintf(key, sizeof(key), "/m/%05d", i);
        put_ok(t.s, KITE_WRITE_DELETE, key, NULL);
    }
    /* page through 100 at a time */
    char after[32] = "";
    size_t total = 0;
    int prev = -1;
    for (;;) {
        struct kite_record **v;
        size_t n;
        bool more;
        cr_assert_eq(kite_wcache_list(c, "/m/0", after[0] ? after : NULL, 100, NULL, NULL, &v, &n, NULL, &more), 0);
        for (size_t i = 0; i < n; i++) {
            int k = atoi(v[i]->key + 3);
            cr_assert_gt(k, prev);
            cr_assert_neq(k % 3, 0);
            prev = k;
        }
        total += n;
        if (n) snprintf(after, sizeof(after), "%s", v[n - 1]->key);
        free_recs(v, n);
        if (!more) break;
    }
    cr_assert_eq(total, N - (N + 2) / 3);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

static void expect_get(struct kite_wcache *c, int i, const char *want) {
    char key[32];
    snprintf(key, sizeof(key), "/h/%05d", i);
    struct kite_record *r = kite_wcache_get(c, key);
    if (!want) {
        cr_assert_null(r, "%s still there", key);
        return;
    }
    cr_assert_not_null(r, "%s missing", key);
    cr_assert_str_eq(r->value, want, "%s", key);
    kite_record_unref(r);
}

/* The hash index beside the skip list: gets after creates, updates, deletes (whose slots are
 * refilled from their probe runs) and re-creates, from a cache filled live and from one loaded
 * from the store. */
Test(wcache, index_follows_every_change) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/h/", 0, &c), 0);
    enum { N = 3000 };
    int oks = 0;
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "/h/%05d", (i * 7919) % N);
        struct kite_write w = { KITE_WRITE_CREATE, key, "a", 1, 0 };
        cr_assert_eq(kite_store_submit(t.s, &w, count_ok, &oks), 0);
    }
    put_ok(t.s, KITE_WRITE_CREATE, "/h/sync", "v");
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "/h/%05d", i);
        if (i % 3 == 0) put_ok(t.s, KITE_WRITE_DELETE, key, NULL);
        else if (i % 3 == 1) put_ok(t.s, KITE_WRITE_UPDATE, key, "b");
    }
    for (int i = 0; i < N; i += 6) {
        snprintf(key, sizeof(key), "/h/%05d", i);
        put_ok(t.s, KITE_WRITE_CREATE, key, "c");
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N; i++)
            expect_get(c, i, i % 6 == 0 ? "c" : i % 3 == 0 ? NULL : i % 3 == 1 ? "b" : "a");
        cr_assert_eq(kite_wcache_count(c), (size_t)(N - N / 3 + N / 6 + 1));
        kite_wcache_free(c);
        if (pass == 0) cr_assert_eq(kite_wcache_new(t.s, "/h/", 0, &c), 0); /* the index of a loaded cache */
    }
    tstore_cleanup(&t);
}

struct nctx {
    pthread_mutex_t mu;
    int notified;
};

static void on_notify(void *ud) {
    struct nctx *n = ud;
    pthread_mutex_lock(&n->mu);
    n->notified++;
    pthread_mutex_unlock(&n->mu);
}

static void drain(struct kite_watcher *w, char *out, size_t cap) {
    struct kite_watch_event ev[8];
    int n;
    out[0] = 0;
    while ((n = kite_watcher_next(w, ev, 8)) > 0)
        for (int i = 0; i < n; i++) {
            char line[96];
            static const char *const names[] = { "", "A", "M", "D" };
            snprintf(line, sizeof(line), "%s%ld:%s=%s ", names[ev[i].type], (long)ev[i].rev, ev[i].rec->key,
                     ev[i].rec->value);
            cr_assert_lt(strlen(out) + strlen(line), cap);
            strcat(out, line);
            kite_record_unref(ev[i].rec);
            kite_record_unref(ev[i].prev);
        }
}

/* selector-like filter: only values "on" match; entering -> ADDED, leaving -> DELETED */
static int on_filter(const struct kite_watch_event *ev, void *ud) {
    bool now = ev->type != KITE_EV_DELETED && strcmp(ev->rec->value, "on") == 0;
    bool before = ev->prev && strcmp(ev->prev->value, "on") == 0;
    if (ev->type == KITE_EV_DELETED) return before ? KITE_EV_DELETED : 0;
    if (now && !before) return KITE_EV_ADDED;
    if (!now && before) return KITE_EV_DELETED;
    return now ? KITE_EV_MODIFIED : 0;
}

Test(wcache, watch) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 16, &c), 0);
    struct nctx nc = { PTHREAD_MUTEX_INITIALIZER, 0 };
    struct kite_watcher *all, *ns, *sel;
    int64_t start = kite_wcache_rev(c);
    cr_assert_eq(kite_wcache_watch(c, NULL, start, 0, 0, NULL, on_notify, &nc, &all), 0);
    cr_assert_eq(kite_wcache_watch(c, "/w/a/", start, 0, 0, NULL, NULL, NULL, &ns), 0);
    cr_assert_eq(kite_wcache_watch(c, NULL, start, 0, 0, on_filter, NULL, NULL, &sel), 0);
    put_ok(t.s, KITE_WRITE_CREATE, "/w/a/1", "off");   /* 1 */
    put_ok(t.s, KITE_WRITE_CREATE, "/w/b/1", "on");    /* 2 */
    put_ok(t.s, KITE_WRITE_UPDATE, "/w/a/1", "on");    /* 3 */
    put_ok(t.s, KITE_WRITE_UPDATE, "/w/a/1", "off");   /* 4 */
    put_ok(t.s, KITE_WRITE_CREATE, "/x/1", "on");      /* 5: other prefix */
    put_ok(t.s, KITE_WRITE_DELETE, "/w/b/1", NULL);    /* 6 */
    cr_assert_eq(nc.notified, 1, "edge-triggered: one notify until drained");
    char out[512];
    drain(all, out, sizeof(out));
    cr_assert_str_eq(out, "A1:/w/a/1=off A2:/w/b/1=on M3:/w/a/1=on M4:/w/a/1=off D6:/w/b/1=on ");
    drain(ns, out, sizeof(out));
    cr_assert_str_eq(out, "A1:/w/a/1=off M3:/w/a/1=on M4:/w/a/1=off ");
    drain(sel, out, sizeof(out));
    cr_assert_str_eq(out, "A2:/w/b/1=on A3:/w/a/1=on D4:/w/a/1=off D6:/w/b/1=on ");
    put_ok(t.s, KITE_WRITE_UPDATE, "/w/a/1", "x");     /* 7 */
    cr_assert_eq(nc.notified, 2);

    /* a watch from an older revision replays from the ring */
    struct kite_watcher *late;
    cr_assert_eq(kite_wcache_watch(c, NULL, 3, 0, 0, NULL, NULL, NULL, &late), 0);
    drain(late, out, sizeof(out));
    cr_assert_str_eq(out, "M4:/w/a/1=off D6:/w/b/1=on M7:/w/a/1=x ");
    kite_watcher_close(late);
    kite_watcher_close(all);
    kite_watcher_close(ns);
    kite_watcher_close(sel);
    put_ok(t.s, KITE_WRITE_UPDATE, "/w/a/1", "y");
    cr_assert_eq(nc.notified, 2, "no notify after close");
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

/* Progress: once a watcher's queue is drained, the revision every change it could see has been
 * delivered up to, past its last event when its filter skipped later changes. */
Test(wcache, watcher_progress) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 16, &c), 0);
    int64_t r0 = put_ok(t.s, KITE_WRITE_CREATE, "/w/z", "off");
    struct kite_watcher *sel;
    cr_assert_eq(kite_wcache_watch(c, NULL, r0, 0, 0, on_filter, NULL, NULL, &sel), 0);
    cr_assert_eq(kite_watcher_progress(sel), r0);
    int64_t r1 = put_ok(t.s, KITE_WRITE_CREATE, "/w/a", "off"); /* filtered out */
    cr_assert_eq(kite_watcher_progress(sel), r1, "a skipped change still moves the watcher on");
    int64_t r2 = put_ok(t.s, KITE_WRITE_CREATE, "/w/b", "on");
    cr_assert_eq(kite_watcher_progress(sel), 0, "an event is still queued");
    char out[256];
    drain(sel, out, sizeof(out));
    cr_assert_eq(kite_watcher_progress(sel), r2);
    int64_t r3 = put_ok(t.s, KITE_WRITE_UPDATE, "/w/a", "off");
    cr_assert_eq(kite_watcher_progress(sel), r3);

    /* a watch from an older revision is behind until it has taken the replayed events */
    struct kite_watcher *late;
    cr_assert_eq(kite_wcache_watch(c, NULL, r1, 0, 0, NULL, NULL, NULL, &late), 0);
    cr_assert_eq(kite_watcher_progress(late), 0);
    drain(late, out, sizeof(out));
    cr_assert_eq(kite_watcher_progress(late), r3);
    kite_watcher_close(late);

    /* a dropped watcher makes no progress */
    struct kite_watcher *tiny;
    cr_assert_eq(kite_wcache_watch(c, NULL, r3, 1, 0, NULL, NULL, NULL, &tiny), 0);
    put_ok(t.s, KITE_WRITE_UPDATE, "/w/a", "1");
    put_ok(t.s, KITE_WRITE_UPDATE, "/w/a", "2");
    drain(tiny, out, sizeof(out));
    cr_assert_eq(kite_watcher_progress(tiny), 0);
    kite_watcher_close(tiny);
    kite_watcher_close(sel);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

Test(wcache, ring_bound_and_too_old) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 4, &c), 0);
    cr_assert_eq(kite_wcache_oldest_rev(c), 0);
    put_ok(t.s, KITE_WRITE_CREATE, "/w/k", "1");
    for (int i = 2; i <= 10; i++) put_ok(t.s, KITE_WRITE_UPDATE, "/w/k", "v");
    /* ring of 4 holds 7..10: watches from 6 work, from 5 are too old */
    cr_assert_eq(kite_wcache_oldest_rev(c), 6);
    struct kite_watcher *w;
    cr_assert_eq(kite_wcache_watch(c, NULL, 5, 0, 0, NULL, NULL, NULL, &w), -ENODATA);
    cr_assert_eq(kite_wcache_watch(c, NULL, 6, 0, 0, NULL, NULL, NULL, &w), 0);
    struct kite_watch_event ev[8];
    cr_assert_eq(kite_watcher_next(w, ev, 8), 4);
    cr_assert_eq(ev[0].rev, 7);
    cr_assert_eq(ev[3].rev, 10);
    for (int i = 0; i < 4; i++) {
        kite_record_unref(ev[i].rec);
        kite_record_unref(ev[i].prev);
    }
    kite_watcher_close(w);
    cr_assert_eq(kite_wcache_watch(c, NULL, 0, 0, 0, NULL, NULL, NULL, &w), -ENODATA);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

Test(wcache, slow_watcher_dropped) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 64, &c), 0);
    struct nctx nc = { PTHREAD_MUTEX_INITIALIZER, 0 };
    struct kite_watcher *slow, *fast;
    cr_assert_eq(kite_wcache_watch(c, NULL, 0, 3, 0, NULL, on_notify, &nc, &slow), 0);
    cr_assert_eq(kite_wcache_watch(c, NULL, 0, 100, 0, NULL, NULL, NULL, &fast), 0);
    put_ok(t.s, KITE_WRITE_CREATE, "/w/k", "1");
    for (int i = 0; i < 9; i++) put_ok(t.s, KITE_WRITE_UPDATE, "/w/k", "v");
    cr_assert(kite_watcher_dropped(slow));
    cr_assert_not(kite_watcher_dropped(fast));
    cr_assert_eq(nc.notified, 2, "once for data, once for the drop");
    struct kite_watcher_stats st;
    kite_watcher_stats(slow, &st);
    cr_assert(st.dropped);
    cr_assert_eq(st.behind, 4, "3 queued + the one that did not fit");
    cr_assert_eq(st.queued, 0, "the backlog is released at the drop");
    cr_assert_eq(st.queued_bytes, 0);
    struct kite_watch_event ev[16];
    cr_assert_eq(kite_watcher_next(slow, ev, 16), -EPIPE);
    cr_assert_eq(kite_watcher_next(fast, ev, 16), 10);
    for (int i = 0; i < 10; i++) {
        kite_record_unref(ev[i].rec);
        kite_record_unref(ev[i].prev);
    }
    kite_watcher_close(slow);
    kite_watcher_close(fast);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

/* After a restart the ring is refilled from history: resuming from a pre-restart revision gets
 * every later change exactly once. */
Test(wcache, resume_after_restart) {
    struct tstore t = {0};
    tstore_open(&t);
    put_ok(t.s, KITE_WRITE_CREATE, "/w/a", "1");          /* 1 */
    int64_t seen = put_ok(t.s, KITE_WRITE_CREATE, "/w/b", "1"); /* 2 */
    put_ok(t.s, KITE_WRITE_UPDATE, "/w/a", "2");          /* 3 */
    put_ok(t.s, KITE_WRITE_CREATE, "/z/other", "1");      /* 4 */
    put_ok(t.s, KITE_WRITE_DELETE, "/w/b", NULL);         /* 5 */
    kite_store_close(t.s);
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 16, &c), 0);
    cr_assert_eq(kite_wcache_rev(c), 5);
    expect_list(c, NULL, NULL, 0, NULL, "/w/a ", false);
    struct kite_watcher *w;
    cr_assert_eq(kite_wcache_watch(c, NULL, seen, 0, 0, NULL, NULL, NULL, &w), 0);
    put_ok(t.s, KITE_WRITE_CREATE, "/w/c", "1");          /* 6 */
    char out[256];
    drain(w, out, sizeof(out));
    cr_assert_str_eq(out, "M3:/w/a=2 D5:/w/b=1 A6:/w/c=1 ");
    kite_watcher_close(w);
    kite_wcache_free(c);

    /* a small ring keeps only the newest; compaction bounds what history can give */
    cr_assert_eq(kite_store_compact(t.s, 3), 0);
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 1, &c), 0);
    cr_assert_eq(kite_wcache_oldest_rev(c), 5);
    kite_wcache_free(c);
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 16, &c), 0);
    cr_assert_eq(kite_wcache_oldest_rev(c), 3);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

/* Readers list concurrently with the writer applying changes. */
struct reader_arg {
    struct kite_wcache *c;
    volatile int *stop;
    int lists;
};

static void *reader(void *p) {
    struct reader_arg *a = p;
    while (!*a->stop) {
        struct kite_record **v;
        size_t n;
        kite_wcache_list(a->c, NULL, NULL, 0, NULL, NULL, &v, &n, NULL, NULL);
        for (size_t i = 1; i < n; i++) cr_assert_lt(strcmp(v[i - 1]->key, v[i]->key), 0);
        free_recs(v, n);
        a->lists++;
    }
    return NULL;
}

Test(wcache, concurrent_readers) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 0, &c), 0);
    volatile int stop = 0;
    struct reader_arg ra = { c, &stop, 0 };
    pthread_t th;
    pthread_create(&th, NULL, reader, &ra);
    for (int i = 0; i < 300; i++) {
        char key[32];
        snprintf(key, sizeof(key), "/w/%03d", (i * 37) % 100);
        struct kite_write w = { KITE_WRITE_CREATE, key, "v", 1, 0 };
        struct kite_record *r = kite_wcache_get(c, key);
        w.type = r ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE;
        kite_record_unref(r);
        cr_assert_eq(kite_store_write(t.s, &w, NULL, NULL), 0);
    }
    stop = 1;
    pthread_join(th, NULL);
    cr_assert_gt(ra.lists, 0);
    cr_assert_eq(kite_wcache_count(c), 100);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

/* Holds the store's writer inside its first batch until released, so the writes submitted
 * meanwhile are committed together as the next batch. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool entered, open;
    size_t max_batch;
};

static void gate_cb(void *ud, const struct kite_store_event *evs, size_t n) {
    struct gate *g = ud;
    pthread_mutex_lock(&g->mu);
    if (n > g->max_batch) g->max_batch = n;
    g->entered = true;
    pthread_cond_broadcast(&g->cond);
    while (!g->open) pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void count_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    cr_assert_eq(err, 0);
    __atomic_add_fetch((int *)ud, 1, __ATOMIC_RELAXED);
}

/* One batch longer than the ring: watchers still get each of its events once, in order (some
 * of them left the ring again before the fan-out), and the cache is current after it. */
Test(wcache, batch_longer_than_ring) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 4, &c), 0);
    struct kite_watcher *w;
    cr_assert_eq(kite_wcache_watch(c, NULL, 0, 64, 0, NULL, NULL, NULL, &w), 0);
    struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, 0 };
    cr_assert_eq(kite_store_subscribe(t.s, "/w/", gate_cb, &g), 0);
    int done = 0;
    struct kite_write first = { KITE_WRITE_CREATE, "/w/k0", "0", 1, 0 };
    cr_assert_eq(kite_store_submit(t.s, &first, count_done, &done), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.entered) pthread_cond_wait(&g.cond, &g.mu);
    pthread_mutex_unlock(&g.mu);
    enum { N = 10 };
    for (int i = 1; i <= N; i++) {
        char key[16], val[16];
        snprintf(key, sizeof key, "/w/k%d", i % 3); /* creates, then updates of the same keys */
        snprintf(val, sizeof val, "%d", i);
        struct kite_write wr = { i < 3 ? KITE_WRITE_CREATE : KITE_WRITE_UPDATE, key, val, strlen(val), 0 };
        cr_assert_eq(kite_store_submit(t.s, &wr, count_done, &done), 0);
    }
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.mu);
    put_ok(t.s, KITE_WRITE_CREATE, "/w/sync", "s"); /* queued after all of them */
    cr_assert_eq(__atomic_load_n(&done, __ATOMIC_RELAXED), N + 1);
    cr_assert_geq(g.max_batch, N, "the ten writes were one batch (max %zu)", g.max_batch);
    char out[512];
    drain(w, out, sizeof(out));
    cr_assert_str_eq(out, "A1:/w/k0=0 A2:/w/k1=1 A3:/w/k2=2 M4:/w/k0=3 M5:/w/k1=4 M6:/w/k2=5 M7:/w/k0=6 "
                          "M8:/w/k1=7 M9:/w/k2=8 M10:/w/k0=9 M11:/w/k1=10 A12:/w/sync=s ");
    expect_list(c, NULL, NULL, 0, NULL, "/w/k0 /w/k1 /w/k2 /w/sync ", false);
    struct kite_record *r = kite_wcache_get(c, "/w/k1");
    cr_assert_str_eq(r->value, "10");
    kite_record_unref(r);
    cr_assert_eq(kite_wcache_oldest_rev(c), 8, "the ring holds 9..12");
    kite_store_unsubscribe(t.s, gate_cb, &g);
    kite_watcher_close(w);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

static void put_big(struct kite_store *s, const char *key, size_t len, char fill) {
    char *v = malloc(len);
    memset(v, fill, len);
    struct kite_write w = { KITE_WRITE_UPDATE, key, v, len, 0 };
    int rc = kite_store_write(s, &w, NULL, NULL);
    if (rc == -ENOENT) {
        w.type = KITE_WRITE_CREATE;
        rc = kite_store_write(s, &w, NULL, NULL);
    }
    cr_assert_eq(rc, 0, "write %s: %d", key, rc);
    free(v);
}

/* The history is bounded by bytes as well as events: big objects push old events out early,
 * and a watch resuming from one of them is told it is too old. */
Test(wcache, history_bounded_by_bytes) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 1000, &c), 0);
    enum { VAL = 10000, MAXB = 100000 };
    kite_wcache_set_history_bytes(c, MAXB);
    int64_t first = kite_wcache_rev(c) + 1;
    for (int i = 0; i < 50; i++) put_big(t.s, i % 2 ? "/w/a" : "/w/b", VAL, 'a' + i % 26);
    struct kite_wcache_stats hs;
    kite_wcache_stats(c, &hs);
    cr_assert_leq(hs.bytes, MAXB);
    cr_assert_geq(hs.events, MAXB / (VAL + 200) - 1, "about as many events as fit: %zu", hs.events);
    cr_assert_lt(hs.events, MAXB / VAL + 1, "bounded by bytes, not by the 1000 events: %zu", hs.events);
    cr_assert_eq(hs.oldest_rev, kite_wcache_oldest_rev(c));
    cr_assert_eq(hs.oldest_rev, first + 49 - (int64_t)hs.events, "the ring holds the newest events");
    struct kite_watcher *w;
    cr_assert_eq(kite_wcache_watch(c, NULL, first + 5, 0, 0, NULL, NULL, NULL, &w), -ENODATA,
                 "resuming from a dropped revision: too old");
    cr_assert_eq(kite_wcache_watch(c, NULL, hs.oldest_rev, 0, 0, NULL, NULL, NULL, &w), 0);
    struct kite_watcher_stats st;
    kite_watcher_stats(w, &st);
    cr_assert_eq(st.queued, hs.events, "a resume from the oldest revision replays the whole ring");
    kite_watcher_close(w);

    /* lowering the bound trims at once; the newest event always stays */
    kite_wcache_set_history_bytes(c, 1);
    kite_wcache_stats(c, &hs);
    cr_assert_eq(hs.events, 1);
    cr_assert_eq(hs.oldest_rev, first + 48);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

/* A watcher that stops reading is dropped once its queue holds more bytes than its bound, well
 * before its event bound, with its backlog released and how far behind it was recorded. */
Test(wcache, watcher_queue_bounded_by_bytes) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 0, &c), 0);
    struct nctx nc = { PTHREAD_MUTEX_INITIALIZER, 0 };
    struct kite_watcher *slow, *fast;
    enum { VAL = 10000, MAXB = 50000 };
    cr_assert_eq(kite_wcache_watch(c, NULL, kite_wcache_rev(c), 1000, MAXB, NULL, on_notify, &nc, &slow), 0);
    cr_assert_eq(kite_wcache_watch(c, NULL, kite_wcache_rev(c), 1000, 0, NULL, NULL, NULL, &fast), 0);
    for (int i = 0; i < 4; i++) put_big(t.s, "/w/k", VAL, 'x');
    struct kite_watcher_stats st;
    kite_watcher_stats(slow, &st);
    cr_assert_not(st.dropped);
    cr_assert_eq(st.queued, 4);
    cr_assert_geq(st.queued_bytes, 4 * VAL);
    cr_assert_leq(st.queued_bytes, 4 * (VAL + 200));
    put_big(t.s, "/w/k", VAL, 'y'); /* 5 x 10 KB + overhead > 50,000 */
    kite_watcher_stats(slow, &st);
    cr_assert(st.dropped);
    cr_assert_eq(st.behind, 5);
    cr_assert_gt(st.behind_bytes, MAXB);
    cr_assert_eq(st.queued, 0);
    cr_assert_eq(st.slots, 0, "the queue itself is freed too");
    cr_assert_eq(nc.notified, 2, "once for data, once for the drop");
    struct kite_watch_event ev[8];
    cr_assert_eq(kite_watcher_next(slow, ev, 8), -EPIPE);
    put_big(t.s, "/w/k", VAL, 'z');
    cr_assert_eq(nc.notified, 2, "a dropped watcher is told once");
    cr_assert_eq(kite_watcher_next(slow, ev, 8), -EPIPE);
    kite_watcher_stats(fast, &st);
    cr_assert_not(st.dropped, "the default byte bound is far above 60 KB");
    cr_assert_eq(st.queued, 6);
    for (int n; (n = kite_watcher_next(fast, ev, 8)) > 0;)
        for (int i = 0; i < n; i++) event_unref_pair(&ev[i]);
    kite_watcher_close(slow);
    kite_watcher_close(fast);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}

/* A watcher's queue is allocated as it fills, not at its bound: idle watches are cheap. */
Test(wcache, idle_watcher_queue_is_small) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_wcache *c;
    cr_assert_eq(kite_wcache_new(t.s, "/w/", 0, &c), 0);
    struct kite_watcher *w;
    cr_assert_eq(kite_wcache_watch(c, NULL, kite_wcache_rev(c), 10000, 0, NULL, NULL, NULL, &w), 0);
    struct kite_watcher_stats st;
    kite_watcher_stats(w, &st);
    cr_assert_eq(st.slots, 0, "no events yet: no slots (was 10,000 slots up front)");
    put_ok(t.s, KITE_WRITE_CREATE, "/w/a", "1");
    kite_watcher_stats(w, &st);
    cr_assert_eq(st.slots, KITE_WATCHER_QUEUE_INITIAL);
    cr_assert_leq(st.slot_bytes, 1024);
    struct kite_watch_event ev[64];
    for (int i = 0; i < 9; i++) put_ok(t.s, KITE_WRITE_UPDATE, "/w/a", "2");
    cr_assert_eq(kite_watcher_next(w, ev, 8), 8); /* the queue's start moves to slot 8 */
    for (int i = 0; i < 8; i++) event_unref_pair(&ev[i]);
    int64_t next = ev[7].rev + 1;
    for (int i = 0; i < 40; i++) put_ok(t.s, KITE_WRITE_UPDATE, "/w/a", "3");
    kite_watcher_stats(w, &st);
    cr_assert_eq(st.queued, 42);
    cr_assert_eq(st.slots, 4 * KITE_WATCHER_QUEUE_INITIAL, "doubled as it filled: 16 -> 32 -> 64");
    /* order survives growing a queue that had wrapped around */
    cr_assert_eq(kite_watcher_next(w, ev, 64), 42);
    for (int i = 0; i < 42; i++) {
        cr_assert_eq(ev[i].rev, next + i);
        event_unref_pair(&ev[i]);
    }
    kite_watcher_stats(w, &st);
    cr_assert_eq(st.queued_bytes, 0);
    kite_watcher_close(w);
    kite_wcache_free(c);
    tstore_cleanup(&t);
}
