#include "helpers.h"

#include <poll.h>
#include <pthread.h>
#include <sqlite3.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

Test(store, crud_and_revisions) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    cr_assert_eq(kite_store_rev(s), 0);
    int64_t r1 = put_ok(s, KITE_WRITE_CREATE, "/a", "one");
    int64_t r2 = put_ok(s, KITE_WRITE_CREATE, "/b", "two");
    cr_assert_eq(r1, 1);
    cr_assert_eq(r2, 2);
    int64_t r3 = put_ok(s, KITE_WRITE_UPDATE, "/a", "one-b");
    cr_assert_eq(r3, 3);
    struct kite_record *rec = NULL;
    cr_assert_eq(kite_store_get(s, "/a", &rec), 0);
    cr_assert_str_eq(rec->value, "one-b");
    cr_assert_eq(rec->len, 5);
    cr_assert_eq(rec->create_rev, 1);
    cr_assert_eq(rec->mod_rev, 3);
    cr_assert_eq(rec->version, 2);
    kite_record_unref(rec);

    /* delete returns the tombstone: last value, mod_rev = delete's revision */
    struct kite_write del = { KITE_WRITE_DELETE, "/a", NULL, 0, 0 };
    int64_t r4 = 0;
    cr_assert_eq(kite_store_write(s, &del, &r4, &rec), 0);
    cr_assert_eq(r4, 4);
    cr_assert_str_eq(rec->value, "one-b");
    cr_assert_eq(rec->mod_rev, 4);
    cr_assert_eq(rec->create_rev, 1);
    kite_record_unref(rec);
    cr_assert_eq(kite_store_get(s, "/a", &rec), -ENOENT);

    /* re-create: new create_rev, version 1 */
    int64_t r5 = put_ok(s, KITE_WRITE_CREATE, "/a", "again");
    cr_assert_eq(kite_store_get(s, "/a", &rec), 0);
    cr_assert_eq(rec->create_rev, r5);
    cr_assert_eq(rec->version, 1);
    kite_record_unref(rec);
    cr_assert_eq(kite_store_rev(s), 5);
    tstore_cleanup(&t);
}

Test(store, errors) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    int64_t r1 = put_ok(s, KITE_WRITE_CREATE, "/k", "v1");
    struct {
        enum kite_write_type type;
        const char *key;
        int64_t expect;
        int err;
        bool rec;
    } cases[] = {
        { KITE_WRITE_CREATE, "/k", 0, -EEXIST, true },
        { KITE_WRITE_UPDATE, "/missing", 0, -ENOENT, false },
        { KITE_WRITE_DELETE, "/missing", 0, -ENOENT, false },
        { KITE_WRITE_UPDATE, "/k", r1 + 100, -ESTALE, true },
        { KITE_WRITE_DELETE, "/k", r1 + 100, -ESTALE, true },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_write w = { cases[i].type, cases[i].key, "x", 1, cases[i].expect };
        struct kite_record *rec = NULL;
        int64_t rev = -1;
        cr_assert_eq(kite_store_write(s, &w, &rev, &rec), cases[i].err, "case %zu", i);
        cr_assert_eq(rev, r1, "case %zu: failed writes report the current revision", i);
        if (cases[i].rec) {
            cr_assert_not_null(rec, "case %zu", i);
            cr_assert_str_eq(rec->value, "v1");
            cr_assert_eq(rec->mod_rev, r1);
        } else {
            cr_assert_null(rec, "case %zu", i);
        }
        kite_record_unref(rec);
    }
    /* the right expectation works */
    int64_t r2 = 0;
    cr_assert_eq(put(s, KITE_WRITE_UPDATE, "/k", "v2", r1, &r2), 0);
    cr_assert_eq(r2, r1 + 1);
    cr_assert_eq(put(s, KITE_WRITE_DELETE, "/k", NULL, r2, NULL), 0);
    cr_assert_eq(kite_store_rev(s), r2 + 1);
    /* invalid writes */
    struct kite_write bad = { KITE_WRITE_CREATE, "", "x", 1, 0 };
    cr_assert_eq(kite_store_write(s, &bad, NULL, NULL), -EINVAL);
    cr_assert_eq(kite_store_open("etcd://x", &(struct kite_store *){0}), -EINVAL);
    tstore_cleanup(&t);
}

Test(store, revisions_survive_reopen) {
    struct tstore t = {0};
    tstore_open(&t);
    put_ok(t.s, KITE_WRITE_CREATE, "/x", "1");
    put_ok(t.s, KITE_WRITE_UPDATE, "/x", "2");
    put_ok(t.s, KITE_WRITE_CREATE, "/y", "1");
    int64_t last = put_ok(t.s, KITE_WRITE_DELETE, "/y", NULL);
    /* compacting everything removes the newest row (the tombstone): the counter must hold */
    cr_assert_eq(kite_store_compact(t.s, last), 0);
    kite_store_close(t.s);
    tstore_open(&t);
    cr_assert_eq(kite_store_rev(t.s), last);
    cr_assert_eq(kite_store_compacted_rev(t.s), last);
    struct kite_record *rec;
    cr_assert_eq(kite_store_get(t.s, "/x", &rec), 0);
    cr_assert_str_eq(rec->value, "2");
    cr_assert_eq(rec->version, 2);
    kite_record_unref(rec);
    cr_assert_eq(kite_store_get(t.s, "/y", &rec), -ENOENT);
    cr_assert_eq(put_ok(t.s, KITE_WRITE_CREATE, "/y", "again"), last + 1);
    tstore_cleanup(&t);
}

static void free_recs(struct kite_record **v, size_t n) {
    for (size_t i = 0; i < n; i++) kite_record_unref(v[i]);
    free(v);
}

static void expect_range(struct kite_store *s, const char *prefix, int64_t rev, const char *after, size_t limit,
                         const char *want, bool want_more) {
    struct kite_record **v = NULL;
    size_t n = 0;
    bool more = !want_more;
    cr_assert_eq(kite_store_range(s, prefix, rev, after, limit, &v, &n, &more), 0);
    char got[256] = "";
    for (size_t i = 0; i < n; i++) {
        strcat(got, v[i]->key);
        strcat(got, "=");
        strcat(got, v[i]->value);
        strcat(got, " ");
    }
    cr_assert_str_eq(got, want, "range(%s, %ld, %s, %zu)", prefix, (long)rev, after ? after : "-", limit);
    cr_assert_eq(more, want_more, "range(%s, %ld) more", prefix, (long)rev);
    free_recs(v, n);
}

Test(store, range) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    put_ok(s, KITE_WRITE_CREATE, "/p/b", "b1");     /* 1 */
    put_ok(s, KITE_WRITE_CREATE, "/p/a", "a1");     /* 2 */
    put_ok(s, KITE_WRITE_CREATE, "/p/c", "c1");     /* 3 */
    put_ok(s, KITE_WRITE_CREATE, "/q/a", "qa");     /* 4 */
    put_ok(s, KITE_WRITE_UPDATE, "/p/a", "a2");     /* 5 */
    put_ok(s, KITE_WRITE_DELETE, "/p/b", NULL);     /* 6 */
    expect_range(s, "/p/", 0, NULL, 0, "/p/a=a2 /p/c=c1 ", false);
    expect_range(s, "/p/", 0, NULL, 1, "/p/a=a2 ", true);
    expect_range(s, "/p/", 0, "/p/a", 1, "/p/c=c1 ", false);
    expect_range(s, "/p/", 0, "/p/c", 0, "", false);
    expect_range(s, "/p/", 5, NULL, 0, "/p/a=a2 /p/b=b1 /p/c=c1 ", false);
    expect_range(s, "/p/", 4, NULL, 0, "/p/a=a1 /p/b=b1 /p/c=c1 ", false);
    expect_range(s, "/p/", 1, NULL, 0, "/p/b=b1 ", false);
    expect_range(s, "/p/", 4, "/p/a", 1, "/p/b=b1 ", true);
    expect_range(s, "", 0, NULL, 0, "/p/a=a2 /p/c=c1 /q/a=qa ", false);
    expect_range(s, "/q/", 3, NULL, 0, "", false);
    struct kite_record **v;
    size_t n;
    cr_assert_eq(kite_store_range(s, "/p/", 7, NULL, 0, &v, &n, NULL), -ERANGE);

    /* compaction: reads below the compacted revision fail, reads at/above it stay exact */
    cr_assert_eq(kite_store_compact(s, 5), 0);
    cr_assert_eq(kite_store_compacted_rev(s), 5);
    cr_assert_eq(kite_store_range(s, "/p/", 4, NULL, 0, &v, &n, NULL), -ENODATA);
    expect_range(s, "/p/", 5, NULL, 0, "/p/a=a2 /p/b=b1 /p/c=c1 ", false);
    expect_range(s, "/p/", 6, NULL, 0, "/p/a=a2 /p/c=c1 ", false);
    cr_assert_eq(kite_store_compact(s, 3), 0, "already compacted is a no-op");
    cr_assert_eq(kite_store_compact(s, 99), -ERANGE);
    cr_assert_eq(kite_store_compact(s, 6), 0);
    expect_range(s, "/p/", 6, NULL, 0, "/p/a=a2 /p/c=c1 ", false);
    tstore_cleanup(&t);
}

struct hist {
    char log[512];
};

static void on_hist(void *ud, const struct kite_store_event *ev) {
    struct hist *h = ud;
    static const char *const names[] = { "C", "U", "D" };
    char line[96];
    snprintf(line, sizeof(line), "%s%ld:%s=%s<%s ", names[ev->type], (long)ev->rev, ev->rec->key, ev->rec->value,
             ev->prev ? ev->prev->value : "-");
    strcat(h->log, line);
}

static void on_batch(void *ud, const struct kite_store_event *evs, size_t n) {
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) on_hist(ud, &evs[i]);
}

Test(store, history_and_subscribe) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    struct hist live = {0};
    cr_assert_eq(kite_store_subscribe(s, "/p/", on_batch, &live), 0);
    put_ok(s, KITE_WRITE_CREATE, "/p/a", "a1");   /* 1 */
    put_ok(s, KITE_WRITE_CREATE, "/q/x", "x");    /* 2 */
    put_ok(s, KITE_WRITE_UPDATE, "/p/a", "a2");   /* 3 */
    put_ok(s, KITE_WRITE_DELETE, "/p/a", NULL);   /* 4 */
    put_ok(s, KITE_WRITE_CREATE, "/p/a", "a3");   /* 5 */
    const char *want = "C1:/p/a=a1<- U3:/p/a=a2<a1 D4:/p/a=a2<a2 C5:/p/a=a3<- ";
    cr_assert_str_eq(live.log, want);
    struct hist h = {0};
    cr_assert_eq(kite_store_history(s, "/p/", 0, on_hist, &h), 0);
    cr_assert_str_eq(h.log, want);
    memset(&h, 0, sizeof(h));
    cr_assert_eq(kite_store_history(s, "/p/", 3, on_hist, &h), 0);
    cr_assert_str_eq(h.log, "D4:/p/a=a2<a2 C5:/p/a=a3<- ");
    kite_store_unsubscribe(s, on_batch, &live);
    put_ok(s, KITE_WRITE_UPDATE, "/p/a", "a4");
    cr_assert_str_eq(live.log, want, "no events after unsubscribe");
    cr_assert_eq(kite_store_compact(s, 3), 0);
    cr_assert_eq(kite_store_history(s, "/p/", 2, on_hist, &h), -ENODATA);
    memset(&h, 0, sizeof(h));
    cr_assert_eq(kite_store_history(s, "/p/", 3, on_hist, &h), 0);
    cr_assert_str_eq(h.log, "D4:/p/a=a2<a2 C5:/p/a=a3<- U6:/p/a=a4<a3 ");
    tstore_cleanup(&t);
}

Test(store, record_cache) {
    struct kite_record *r = kite_record_new("/k", "v", 1, 1, 1, 1);
    cr_assert_null(kite_record_cache(r));
    char *a = strdup("a"), *b = strdup("b");
    cr_assert_eq(kite_record_set_cache(r, a, free), a);
    cr_assert_eq(kite_record_set_cache(r, b, free), a, "set-once: the first wins, b is freed");
    cr_assert_eq(kite_record_cache(r), a);
    kite_record_unref(kite_record_ref(r));
    kite_record_unref(r);
}

/* ---- concurrency ---- */

#define CONC_THREADS 16
#define CONC_PER 200

struct conc_arg {
    struct kite_store *s;
    int id;
    int64_t revs[CONC_PER];
};

static void *conc_main(void *p) {
    struct conc_arg *a = p;
    char key[64];
    for (int i = 0; i < CONC_PER; i++) {
        snprintf(key, sizeof(key), "/c/%02d/%04d", a->id, i);
        a->revs[i] = put_ok(a->s, KITE_WRITE_CREATE, key, key);
    }
    return NULL;
}

Test(store, concurrent_submitters) {
    struct tstore t = {0};
    tstore_open(&t);
    struct conc_arg args[CONC_THREADS];
    pthread_t th[CONC_THREADS];
    for (int i = 0; i < CONC_THREADS; i++) {
        args[i] = (struct conc_arg){ .s = t.s, .id = i };
        pthread_create(&th[i], NULL, conc_main, &args[i]);
    }
    for (int i = 0; i < CONC_THREADS; i++) pthread_join(th[i], NULL);
    cr_assert_eq(kite_store_rev(t.s), CONC_THREADS * CONC_PER);
    struct kite_store_stats st;
    kite_store_stats(t.s, &st);
    cr_assert_eq(st.writes, CONC_THREADS * CONC_PER);
    cr_assert_lt(st.batches, st.writes, "concurrent writes share transactions (group commit)");
    /* all revisions distinct, per thread increasing, and every key present with its revision */
    static char seen[CONC_THREADS * CONC_PER + 1];
    for (int i = 0; i < CONC_THREADS; i++)
        for (int j = 0; j < CONC_PER; j++) {
            int64_t r = args[i].revs[j];
            cr_assert(r >= 1 && r <= CONC_THREADS * CONC_PER && !seen[r]);
            seen[r] = 1;
            if (j) cr_assert_gt(r, args[i].revs[j - 1]);
        }
    kite_store_close(t.s);
    tstore_open(&t);
    struct kite_record **v;
    size_t n;
    cr_assert_eq(kite_store_range(t.s, "/c/", 0, NULL, 0, &v, &n, NULL), 0);
    cr_assert_eq(n, CONC_THREADS * CONC_PER);
    for (size_t i = 0; i < n; i++) {
        int id, j;
        cr_assert_eq(sscanf(v[i]->key, "/c/%d/%d", &id, &j), 2);
        cr_assert_eq(v[i]->mod_rev, args[id].revs[j]);
    }
    free_recs(v, n);
    tstore_cleanup(&t);
}

/* ---- crash safety: SIGKILL a writer, check every acknowledged write survived ---- */

#define CRASH_ROUNDS 4
#define CRASH_KEYS 50
#define CRASH_ACKS_MAX 100000

struct ack {
    int32_t key;
    int32_t pad;
    int64_t rev;
};

static struct ack acks[CRASH_ACKS_MAX];

struct child_ctx {
    int fd;
    int seq;
};

static void child_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    struct child_ctx *c = ud;
    if (err) _exit(3);
    int k;
    sscanf(rec->key, "/crash/%d", &k);
    struct ack a = { k, 0, rev };
    if (write(c->fd, &a, sizeof(a)) != sizeof(a)) _exit(4);
}

static void crash_child(const char *url, int fd, unsigned seed) {
    struct kite_store *s;
    if (kite_store_open(url, &s) < 0) _exit(2);
    struct child_ctx ctx = { fd, 0 };
    char key[32], val[64];
    for (unsigned i = 0;; i++) {
        int k = (int)((seed + i * 7919u) % CRASH_KEYS);
        snprintf(key, sizeof(key), "/crash/%d", k);
        snprintf(val, sizeof(val), "v%u-%u", seed, i);
        struct kite_write w = { KITE_WRITE_UPDATE, key, val, strlen(val), 0 };
        /* Keep a few writes in flight so batches form; retry when the queue is full. */
        int r = kite_store_submit(s, &w, child_done, &ctx);
        if (r < 0 && r != -EAGAIN) _exit(5);
        if (i % 8 == 7) kite_store_write(s, &(struct kite_write){ KITE_WRITE_UPDATE, "/crash/sync", "s", 1, 0 }, NULL, NULL);
    }
}

Test(store, crash_keeps_acknowledged_writes) {
    struct tstore t = {0};
    tstore_open(&t);
    put_ok(t.s, KITE_WRITE_CREATE, "/crash/sync", "s");
    for (int k = 0; k < CRASH_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof(key), "/crash/%d", k);
        put_ok(t.s, KITE_WRITE_CREATE, key, "0");
    }
    kite_store_close(t.s);
    int64_t last_rev = CRASH_KEYS + 1;
    srand((unsigned)time(NULL));
    for (int round = 0; round < CRASH_ROUNDS; round++) {
        int pfd[2];
        cr_assert_eq(pipe(pfd), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            close(pfd[0]);
            crash_child(t.url, pfd[1], (unsigned)round * 1000u + 1);
        }
        close(pfd[1]);
        /* Wait for its first acknowledgement (opening the store may take a while on a loaded
         * machine or under ASan), let it run 20-120 ms more, then kill it without warning. */
        size_t n = 0;
        ssize_t got;
        char *p = (char *)acks;
        size_t off = 0;
        struct pollfd first = { .fd = pfd[0], .events = POLLIN };
        cr_assert_eq(poll(&first, 1, 30000), 1, "round %d: no write acknowledged within 30 s", round);
        struct timespec d = { 0, (20 + rand() % 100) * 1000000L };
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        while ((got = read(pfd[0], p + off, sizeof(acks) - off)) > 0) off += (size_t)got;
        close(pfd[0]);
        n = off / sizeof(struct ack);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status), "child died on its own (status %d)", status);
        cr_assert_gt(n, 0, "round %d: the child acknowledged writes before the kill", round);

        tstore_open(&t);
        int64_t rev = kite_store_rev(t.s);
        cr_assert_geq(rev, last_rev, "revisions never go backwards");
        for (size_t i = 0; i < n; i++) {
            cr_assert_gt(acks[i].rev, last_rev, "acknowledged revisions are new");
            if (i) cr_assert_gt(acks[i].rev, acks[i - 1].rev, "acks in revision order");
            char key[32];
            snprintf(key, sizeof(key), "/crash/%d", acks[i].key);
            struct kite_record *rec;
            cr_assert_eq(kite_store_get(t.s, key, &rec), 0, "acknowledged %s lost", key);
            cr_assert_geq(rec->mod_rev, acks[i].rev, "%s at %ld, acknowledged at %ld", key, (long)rec->mod_rev,
                          (long)acks[i].rev);
            kite_record_unref(rec);
        }
        cr_assert_geq(rev, acks[n - 1].rev);
        last_rev = rev;
        kite_store_close(t.s);
    }
    tstore_open(&t);
    tstore_cleanup(&t);
}

/* A backlog larger than one compaction step is compacted in several writer transactions and
 * ends exactly at the target, keeping the latest version of every live key. */
static void batch_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    int *pending = ud;
    cr_assert_eq(err, 0);
    __atomic_sub_fetch(pending, 1, __ATOMIC_SEQ_CST);
}

Test(store, compaction_in_steps) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    char key[32], val[32];
    int pending = 0;
    /* 25,000 revisions over 50 keys, submitted asynchronously so they batch */
    for (int i = 0; i < 25000; i++) {
        snprintf(key, sizeof key, "/k/%02d", i % 50);
        snprintf(val, sizeof val, "v%d", i);
        struct kite_write w = {i < 50 ? KITE_WRITE_CREATE : KITE_WRITE_UPDATE, key, val, strlen(val), 0};
        __atomic_add_fetch(&pending, 1, __ATOMIC_SEQ_CST);
        while (kite_store_submit(s, &w, batch_done, &pending) == -EAGAIN) usleep(1000);
    }
    while (__atomic_load_n(&pending, __ATOMIC_SEQ_CST) > 0) usleep(1000);
    int64_t last = kite_store_rev(s);
    cr_assert_eq(last, 25000);
    cr_assert_eq(kite_store_compact(s, 24990), 0);
    cr_assert_eq(kite_store_compacted_rev(s), 24990);
    struct kite_record **recs = NULL;
    size_t n = 0;
    bool more = false;
    cr_assert_eq(kite_store_range(s, "/k/", 24990, NULL, 0, &recs, &n, &more), 0);
    cr_assert_eq(n, 50);
    for (size_t i = 0; i < n; i++) {
        /* the version of each key current at 24990 */
        cr_assert_leq(recs[i]->mod_rev, 24990);
        cr_assert_gt(recs[i]->mod_rev, 24990 - 50);
        kite_record_unref(recs[i]);
    }
    free(recs);
    cr_assert_eq(kite_store_range(s, "/k/", 24000, NULL, 0, &recs, &n, &more), -ENODATA);
    tstore_cleanup(&t);
}

/* The store's connections use its WAL-buffering VFS, and a reopened store sees every write. */
Test(store, wal_buffering_vfs) {
    struct tstore t = {0};
    tstore_open(&t);
    cr_assert_not_null(sqlite3_vfs_find("kite-walbuf"));
    for (int i = 0; i < 200; i++) {
        char key[32], val[600];
        snprintf(key, sizeof key, "/v/%d", i % 37);
        memset(val, 'a' + i % 26, sizeof val - 1);
        val[sizeof val - 1] = 0;
        struct kite_write w = { i < 37 ? KITE_WRITE_CREATE : KITE_WRITE_UPDATE, key, val, strlen(val), 0 };
        cr_assert_eq(kite_store_write(t.s, &w, NULL, NULL), 0);
    }
    int64_t rev = kite_store_rev(t.s);
    kite_store_close(t.s);
    tstore_open(&t);
    cr_assert_eq(kite_store_rev(t.s), rev);
    struct kite_record *r;
    cr_assert_eq(kite_store_get(t.s, "/v/5", &r), 0);
    cr_assert_eq(r->value[0], 'a' + (5 + 37 * 5) % 26);
    kite_record_unref(r);
    tstore_cleanup(&t);
}
