#include "helpers.h"

#include <poll.h>
#include <pthread.h>
#include <sqlite3.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
    cr_assert_eq(kite_store_open("nosuch://x", NULL, &(struct kite_store *){0}, NULL), -EINVAL);
    tstore_cleanup(&t);
}

static mode_t file_mode(const char *dir, const char *name) {
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0, "%s: %s", p, strerror(errno));
    return st.st_mode & 0777;
}

/* The store's files are the owner's alone from the first start, whatever the umask, and files
 * an older kite left readable are made private at the next. */
Test(store, files_are_private) {
    mode_t old_umask = umask(022);
    struct tstore t = {0};
    tstore_open(&t);
    put_ok(t.s, KITE_WRITE_CREATE, "/secret", "v");
    static const char *const files[] = {"s.db", "s.db-wal", "s.db-shm", "s.db.rev"};
    for (size_t i = 0; i < 4; i++) cr_assert_eq(file_mode(t.dir, files[i]), 0600, "%s: %o", files[i], file_mode(t.dir, files[i]));
    kite_store_close(t.s);
    char p[128];
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", t.dir, files[i]);
        if (access(p, F_OK) == 0) cr_assert_eq(chmod(p, 0644), 0);
    }
    tstore_open(&t);
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", t.dir, files[i]);
        if (access(p, F_OK) == 0) cr_assert_eq(file_mode(t.dir, files[i]), 0600, "%s after reopen", files[i]);
    }
    tstore_cleanup(&t);
    umask(old_umask);
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

/* Reads at older revisions follow each key's chain of rows (prev_rev) back from its newest:
 * across a delete and a create again, past keys created since, through compaction and reopen
 * (live and gone rebuilt from the table). The prefix holds three '/', so history goes through
 * the (bucket, rev) index. */
Test(store, chains_across_delete_create_compaction_and_reopen) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    put_ok(s, KITE_WRITE_CREATE, "/r/p/a", "a1"); /* 1 */
    put_ok(s, KITE_WRITE_CREATE, "/r/p/b", "b1"); /* 2 */
    put_ok(s, KITE_WRITE_UPDATE, "/r/p/a", "a2"); /* 3 */
    put_ok(s, KITE_WRITE_DELETE, "/r/p/b", NULL); /* 4 */
    put_ok(s, KITE_WRITE_CREATE, "/r/p/c", "c1"); /* 5 */
    put_ok(s, KITE_WRITE_CREATE, "/r/p/b", "b2"); /* 6 */
    put_ok(s, KITE_WRITE_UPDATE, "/r/p/a", "a3"); /* 7 */
    put_ok(s, KITE_WRITE_DELETE, "/r/p/c", NULL); /* 8 */
    put_ok(s, KITE_WRITE_CREATE, "/r/q/a", "qa"); /* 9: another bucket */
    static const char *const at[] = {"", "/r/p/a=a1 ", "/r/p/a=a1 /r/p/b=b1 ", "/r/p/a=a2 /r/p/b=b1 ",
                                      "/r/p/a=a2 ", "/r/p/a=a2 /r/p/c=c1 ", "/r/p/a=a2 /r/p/b=b2 /r/p/c=c1 ",
                                      "/r/p/a=a3 /r/p/b=b2 /r/p/c=c1 ", "/r/p/a=a3 /r/p/b=b2 "};
    for (int rev = 1; rev <= 8; rev++) expect_range(s, "/r/p/", rev, NULL, 0, at[rev], false);
    expect_range(s, "/r/p/", 3, NULL, 1, "/r/p/a=a2 ", true);
    expect_range(s, "/r/p/", 3, "/r/p/a", 1, "/r/p/b=b1 ", false);
    expect_range(s, "/r/", 9, NULL, 0, "/r/p/a=a3 /r/p/b=b2 /r/q/a=qa ", false);
    /* nine keys between a and b created after revision 9: a page at 9 passes over all of them
     * (the candidates are taken in rounds of 2, 4, 8, ...) */
    char key[32];
    for (int i = 1; i <= 9; i++) {
        snprintf(key, sizeof(key), "/r/p/a%d", i);
        put_ok(s, KITE_WRITE_CREATE, key, "new"); /* 10..18 */
    }
    expect_range(s, "/r/p/", 9, "/r/p/a", 1, "/r/p/b=b2 ", false);
    expect_range(s, "/r/p/", 18, "/r/p/a8", 1, "/r/p/a9=new ", true);

    struct hist h = {0};
    cr_assert_eq(kite_store_history(s, "/r/p/", 3, on_hist, &h), 0);
    cr_assert_str_eq(h.log, "D4:/r/p/b=b1<b1 C5:/r/p/c=c1<- C6:/r/p/b=b2<- U7:/r/p/a=a3<a2 D8:/r/p/c=c1<c1 "
                            "C10:/r/p/a1=new<- C11:/r/p/a2=new<- C12:/r/p/a3=new<- C13:/r/p/a4=new<- "
                            "C14:/r/p/a5=new<- C15:/r/p/a6=new<- C16:/r/p/a7=new<- C17:/r/p/a8=new<- "
                            "C18:/r/p/a9=new<- ");

    cr_assert_eq(kite_store_compact(s, 6), 0);
    expect_range(s, "/r/p/", 6, NULL, 0, at[6], false);
    expect_range(s, "/r/p/", 7, NULL, 3, at[7], false);
    kite_store_close(s);
    tstore_open(&t);
    s = t.s;
    expect_range(s, "/r/p/", 7, NULL, 0, at[7], false);  /* c's tombstone (8) is kept: c existed at 7 */
    expect_range(s, "/r/p/", 8, NULL, 0, at[8], false);
    memset(&h, 0, sizeof(h));
    cr_assert_eq(kite_store_history(s, "/r/p/", 6, on_hist, &h), 0);
    cr_assert(strncmp(h.log, "U7:/r/p/a=a3<a2 D8:/r/p/c=c1<c1 C10:", 36) == 0, "%s", h.log);
    cr_assert_eq(kite_store_compact(s, 18), 0);
    expect_range(s, "/r/p/", 18, "/r/p/a8", 0, "/r/p/a9=new /r/p/b=b2 ", false);
    put_ok(s, KITE_WRITE_CREATE, "/r/p/c", "c2"); /* 19: after its tombstone was compacted */
    put_ok(s, KITE_WRITE_UPDATE, "/r/p/b", "b3"); /* 20 */
    expect_range(s, "/r/p/", 18, "/r/p/a9", 0, "/r/p/b=b2 ", false);
    expect_range(s, "/r/p/", 19, "/r/p/a9", 0, "/r/p/b=b2 /r/p/c=c2 ", false);
    expect_range(s, "/r/p/", 0, "/r/p/a9", 0, "/r/p/b=b3 /r/p/c=c2 ", false);
    tstore_cleanup(&t);
}

/* All of a range's pages at one revision, limit at a time (the continue pages after the first
 * use the kept sorted keys: more than SNAP_MIN_PAGES pages' worth), with writes between pages
 * that the pages must not show: the pages put together equal the range read whole. */
static void pages_equal_whole(struct kite_store *s, const char *prefix, int64_t rev, size_t limit, int round) {
    struct kite_record **whole = NULL, **v = NULL;
    size_t nw = 0, n = 0, got = 0;
    bool more = false;
    cr_assert_eq(kite_store_range(s, prefix, rev, NULL, 0, &whole, &nw, NULL), 0);
    char last[64] = "";
    for (int page = 0;; page++) {
        cr_assert_eq(kite_store_range(s, prefix, rev, page ? last : NULL, limit, &v, &n, &more), 0);
        for (size_t i = 0; i < n; i++, got++) {
            cr_assert_lt(got, nw, "round %d: more keys in the pages than in the whole", round);
            cr_assert_str_eq(v[i]->key, whole[got]->key, "round %d page %d", round, page);
            cr_assert_str_eq(v[i]->value, whole[got]->value, "round %d page %d %s", round, page, v[i]->key);
            cr_assert_eq(v[i]->mod_rev, whole[got]->mod_rev);
        }
        if (n) snprintf(last, sizeof(last), "%s", v[n - 1]->key);
        free_recs(v, n);
        if (!more) break;
        /* writes between the pages: an update, a delete, a key created ahead of the pages */
        char key[32], val[32];
        snprintf(key, sizeof(key), "%sk%02d", prefix, (page * 7 + round) % 30);
        snprintf(val, sizeof(val), "r%dp%d", round, page);
        struct kite_record *cur = NULL;
        if (kite_store_get(s, key, &cur) == 0) {
            kite_record_unref(cur);
            put_ok(s, page % 3 == 2 ? KITE_WRITE_DELETE : KITE_WRITE_UPDATE, key, page % 3 == 2 ? NULL : val);
        } else {
            put_ok(s, KITE_WRITE_CREATE, key, val);
        }
        snprintf(key, sizeof(key), "%sk%02d5-r%dp%d", prefix, (page * 3 + 5) % 30, round, page);
        put_ok(s, KITE_WRITE_CREATE, key, val);
    }
    cr_assert_eq(got, nw, "round %d: the pages hold every key", round);
    free_recs(whole, nw);
}

Test(store, pages_of_a_large_prefix_are_one_snapshot) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    char key[32];
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof(key), "/r/s/k%02d", i);
        put_ok(s, KITE_WRITE_CREATE, key, "v0");
    }
    put_ok(s, KITE_WRITE_CREATE, "/r/t/x", "other prefix");
    for (int round = 0; round < 4; round++) {
        /* the revision read: the current one, then one a few writes back (chains to follow) */
        int64_t rev = kite_store_rev(s) - (round % 2 ? 5 : 0);
        pages_equal_whole(s, "/r/s/", rev, round < 2 ? 3 : 1, round);
    }
    cr_assert_eq(kite_store_compact(s, kite_store_rev(s) - 3), 0);
    pages_equal_whole(s, "/r/s/", kite_store_rev(s) - 3, 2, 9);

    /* two lists of the same prefix at one revision: the one further along keeps the keys after
     * its page; the one behind it must not be served from them */
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof(key), "/r/u/k%02d", i);
        put_ok(s, KITE_WRITE_CREATE, key, "u");
    }
    int64_t rev = kite_store_rev(s);
    expect_range(s, "/r/u/", rev, "/r/u/k20", 1, "/r/u/k21=u ", true);
    expect_range(s, "/r/u/", rev, "/r/u/k01", 1, "/r/u/k02=u ", true);
    expect_range(s, "/r/u/", rev, "/r/u/k21", 1, "/r/u/k22=u ", true);
    tstore_cleanup(&t);
}

/* A store written with the key index (no prev_rev, no bucket) is upgraded at open: the chains are
 * built from the index, which goes, and reads and writes carry on. */
Test(store, upgrade_from_the_key_index) {
    struct tstore t = {0};
    strcpy(t.dir, "/tmp/kite-store-test-XXXXXX");
    cr_assert_not_null(mkdtemp(t.dir));
    snprintf(t.url, sizeof(t.url), "sqlite:%s/s.db", t.dir);
    char path[128];
    snprintf(path, sizeof(path), "%s/s.db", t.dir);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db,
                              "CREATE TABLE kv (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, create_rev INTEGER NOT NULL,"
                              " version INTEGER NOT NULL, deleted INTEGER NOT NULL, value BLOB NOT NULL);"
                              "CREATE INDEX kv_key_rev ON kv(key, rev);"
                              "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
                              "INSERT INTO kv VALUES (1, '/r/p/a', 1, 1, 0, 'a1'), (2, '/r/p/b', 2, 1, 0, 'b1'),"
                              " (3, '/r/p/a', 1, 2, 0, 'a2'), (4, '/r/p/b', 2, 2, 1, ''), (5, '/r/p/b', 5, 1, 0, 'b2'),"
                              " (6, '/s', 6, 1, 0, 's1');",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    tstore_open(&t);
    struct kite_store *s = t.s;
    cr_assert_eq(kite_store_rev(s), 6);
    expect_range(s, "/r/p/", 2, NULL, 0, "/r/p/a=a1 /r/p/b=b1 ", false);
    expect_range(s, "/r/p/", 4, NULL, 0, "/r/p/a=a2 ", false);
    expect_range(s, "/r/p/", 0, NULL, 0, "/r/p/a=a2 /r/p/b=b2 ", false);
    struct hist h = {0};
    cr_assert_eq(kite_store_history(s, "/r/p/", 2, on_hist, &h), 0);
    cr_assert_str_eq(h.log, "U3:/r/p/a=a2<a1 D4:/r/p/b=b1<b1 C5:/r/p/b=b2<- ");
    put_ok(s, KITE_WRITE_UPDATE, "/r/p/b", "b3"); /* 7 */
    expect_range(s, "/r/p/", 6, NULL, 0, "/r/p/a=a2 /r/p/b=b2 ", false);
    cr_assert_eq(kite_store_compact(s, 5), 0);
    expect_range(s, "/r/p/", 5, NULL, 0, "/r/p/a=a2 /r/p/b=b2 ", false);
    expect_range(s, "", 0, NULL, 0, "/r/p/a=a2 /r/p/b=b3 /s=s1 ", false);
    kite_store_close(s);
    t.s = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db,
                                    "SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master "
                                    "WHERE type = 'index' AND tbl_name = 'kv' ORDER BY name)",
                                    -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "kv_bucket_rev");
    sqlite3_finalize(st);
    /* rows left after the compaction to 5: a's newest <= 5 (3), b's create again (5) and what
     * came later; each names the row before it, and its bucket */
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT group_concat(rev || ':' || prev_rev || ':' || bucket, ' ') FROM kv", -1, &st,
                                    NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "3:1:/r/p/ 5:4:/r/p/ 6:0:/s 7:5:/r/p/");
    sqlite3_finalize(st);
    sqlite3_close(db);
    tstore_open(&t);
    expect_range(t.s, "/r/p/", 5, NULL, 0, "/r/p/a=a2 /r/p/b=b2 ", false);
    tstore_cleanup(&t);
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
    if (kite_store_open(url, NULL, &s, NULL) < 0) _exit(2);
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
/* The revisions rows of the kv table hold, read straight from the database file. */
static size_t kv_revs(const char *dir, int64_t *out, size_t cap) {
    char path[160];
    snprintf(path, sizeof path, "%s/s.db", dir);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT rev FROM kv ORDER BY rev", -1, &st, NULL), SQLITE_OK);
    size_t n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        cr_assert_lt(n, cap);
        out[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* A compaction finds what goes from the rows written since the last one: a key's row kept by an
 * earlier compaction goes once a newer row of it is passed, a tombstone goes with what it
 * deleted, and a key untouched since stays. */
Test(store, compaction_after_compaction_drops_what_later_rows_supersede) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    int64_t a1 = put_ok(s, KITE_WRITE_CREATE, "/r/a", "1");
    put_ok(s, KITE_WRITE_CREATE, "/r/b", "1");
    int64_t c1 = put_ok(s, KITE_WRITE_CREATE, "/r/c", "1");
    cr_assert_eq(kite_store_compact(s, c1), 0);
    int64_t revs[16];
    cr_assert_eq(kv_revs(t.dir, revs, 16), 3, "nothing superseded yet");
    int64_t a2 = put_ok(s, KITE_WRITE_UPDATE, "/r/a", "2");
    int64_t bdel = put_ok(s, KITE_WRITE_DELETE, "/r/b", NULL);
    int64_t a3 = put_ok(s, KITE_WRITE_UPDATE, "/r/a", "3");
    cr_assert_eq(kite_store_compact(s, bdel), 0);
    size_t n = kv_revs(t.dir, revs, 16);
    cr_assert_eq(n, 3);
    cr_assert(revs[0] == c1 && revs[1] == a2 && revs[2] == a3, "kept c@%lld a@%lld a@%lld, not a@%lld or b",
              (long long)revs[0], (long long)revs[1], (long long)revs[2], (long long)a1);
    cr_assert_eq(kite_store_compact(s, a3), 0);
    n = kv_revs(t.dir, revs, 16);
    cr_assert(n == 2 && revs[0] == c1 && revs[1] == a3);
    /* reads at the compacted revision are exact */
    struct kite_record **recs = NULL;
    bool more = false;
    cr_assert_eq(kite_store_range(s, "/r/", a3, NULL, 0, &recs, &n, &more), 0);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(recs[0]->key, "/r/a");
    cr_assert_eq(recs[0]->mod_rev, a3);
    cr_assert_str_eq(recs[1]->key, "/r/c");
    free_recs(recs, n);
    tstore_cleanup(&t);
}

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

/* A subscription replays only the newest changes asked for, each with its predecessor (read
 * from before the replayed window when it is a key's first change there), and says where the
 * replay starts. */
Test(store, snapshot_replays_the_newest_changes) {
    struct tstore t = {0};
    tstore_open(&t);
    struct kite_store *s = t.s;
    put_ok(s, KITE_WRITE_CREATE, "/p/a", "a1"); /* 1 */
    put_ok(s, KITE_WRITE_CREATE, "/q/x", "x");  /* 2 */
    put_ok(s, KITE_WRITE_CREATE, "/p/b", "b1"); /* 3 */
    put_ok(s, KITE_WRITE_UPDATE, "/p/a", "a2"); /* 4 */
    put_ok(s, KITE_WRITE_CREATE, "/q/y", "y");  /* 5 */
    put_ok(s, KITE_WRITE_UPDATE, "/p/b", "b2"); /* 6 */
    put_ok(s, KITE_WRITE_UPDATE, "/p/a", "a3"); /* 7 */
    put_ok(s, KITE_WRITE_UPDATE, "/q/x", "x2"); /* 8 */
    static const struct {
        size_t max;
        int64_t from;
        const char *log;
    } cases[] = {
        {0, 0, "C1:/p/a=a1<- C3:/p/b=b1<- U4:/p/a=a2<a1 U6:/p/b=b2<b1 U7:/p/a=a3<a2 "},
        {2, 5, "U6:/p/b=b2<b1 U7:/p/a=a3<a2 "},
        {3, 3, "U4:/p/a=a2<a1 U6:/p/b=b2<b1 U7:/p/a=a3<a2 "},
        {5, 0, "C1:/p/a=a1<- C3:/p/b=b1<- U4:/p/a=a2<a1 U6:/p/b=b2<b1 U7:/p/a=a3<a2 "},
        {9, 0, "C1:/p/a=a1<- C3:/p/b=b1<- U4:/p/a=a2<a1 U6:/p/b=b2<b1 U7:/p/a=a3<a2 "},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct hist h = {0}, live = {0};
        struct kite_store_replay replay = {.cb = on_hist, .ud = &h, .max = cases[i].max, .from = -1};
        struct kite_record **recs = NULL;
        size_t n = 0;
        int64_t rev = 0;
        cr_assert_eq(kite_store_subscribe_snapshot(s, "/p/", on_batch, &live, &replay, &recs, &n, &rev), 0);
        cr_assert_eq(rev, 8);
        cr_assert_eq(n, 2, "the snapshot holds /p/a and /p/b");
        cr_assert_str_eq(h.log, cases[i].log, "max %zu", cases[i].max);
        cr_assert_eq(replay.from, cases[i].from, "max %zu: from %lld", cases[i].max, (long long)replay.from);
        for (size_t k = 0; k < n; k++) kite_record_unref(recs[k]);
        free(recs);
        kite_store_unsubscribe(s, on_batch, &live);
    }
    /* after a compaction the replay starts no earlier than it */
    cr_assert_eq(kite_store_compact(s, 4), 0);
    struct hist h = {0}, live = {0};
    struct kite_store_replay replay = {.cb = on_hist, .ud = &h, .max = 9};
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev = 0;
    cr_assert_eq(kite_store_subscribe_snapshot(s, "/p/", on_batch, &live, &replay, &recs, &n, &rev), 0);
    cr_assert_str_eq(h.log, "U6:/p/b=b2<b1 U7:/p/a=a3<a2 ");
    cr_assert_eq(replay.from, 4);
    for (size_t k = 0; k < n; k++) kite_record_unref(recs[k]);
    free(recs);
    kite_store_unsubscribe(s, on_batch, &live);
    tstore_cleanup(&t);
}

/* ---- a damaged store is refused, not served as an older cluster ---- */

static char *tpath(const struct tstore *t, const char *name) {
    static char p[4][160];
    static int i;
    char *r = p[i++ % 4];
    snprintf(r, sizeof(p[0]), "%s/%s", t->dir, name);
    return r;
}

/* Opening must fail with -EUCLEAN and a message naming the database and saying what is wrong. */
static void expect_refused(struct tstore *t, const char *why) {
    struct kite_store *s = NULL;
    char *err = NULL;
    int r = kite_store_open(t->url, NULL, &s, &err);
    cr_assert_eq(r, -EUCLEAN, "open of a damaged store: %d (%s)", r, err ? err : "no message");
    cr_assert_not_null(err);
    cr_assert(strstr(err, tpath(t, "s.db")), "message names the file: %s", err);
    cr_assert(strstr(err, why), "message says \"%s\": %s", why, err);
    cr_assert(strstr(err, "--force-recover"), "message says how to go on: %s", err);
    free(err);
}

static void force_open(struct tstore *t) {
    struct kite_store_options o = { .force_recover = true };
    char *err = NULL;
    int r = kite_store_open(t->url, &o, &t->s, &err);
    cr_assert_eq(r, 0, "force_recover opens: %s", err ? err : "");
}

Test(store, truncated_db_is_refused) {
    struct tstore t = {0};
    tstore_open(&t);
    for (int i = 0; i < 300; i++) {
        char key[32];
        snprintf(key, sizeof key, "/leases/%d", i);
        put_ok(t.s, KITE_WRITE_CREATE, key, "x");
    }
    kite_store_close(t.s);
    cr_assert_eq(truncate(tpath(&t, "s.db"), 0), 0);
    expect_refused(&t, "is at revision 0 but revision 300 was acknowledged");
    expect_refused(&t, "revision 300"); /* the refused open changed nothing */
    force_open(&t);
    /* the loss is accepted, but revisions handed out are never reused */
    cr_assert_eq(kite_store_rev(t.s), 300);
    cr_assert_eq(put_ok(t.s, KITE_WRITE_CREATE, "/after", "y"), 301);
    kite_store_close(t.s);
    tstore_open(&t); /* recovered: opens normally again */
    cr_assert_eq(kite_store_rev(t.s), 301);
    tstore_cleanup(&t);
}

Test(store, clean_reopen_keeps_marker_in_step) {
    struct tstore t = {0};
    tstore_open(&t);
    for (int round = 0; round < 3; round++) {
        put_ok(t.s, round ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE, "/k", "v");
        kite_store_close(t.s);
        tstore_open(&t);
        cr_assert_eq(kite_store_rev(t.s), round + 1);
    }
    tstore_cleanup(&t);
}

/* A child process opens the store, writes `n` acknowledged updates (reporting each revision on
 * a pipe), then idles; the parent waits well past the marker interval and SIGKILLs it. Returns
 * the last acknowledged revision. */
static int64_t crash_after_acks(struct tstore *t, int n) {
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        struct kite_store *s;
        if (kite_store_open(t->url, NULL, &s, NULL) < 0) _exit(2);
        for (int i = 0; i < n; i++) {
            char key[32], val[64];
            snprintf(key, sizeof key, "/leases/%d", i % 50);
            snprintf(val, sizeof val, "renewed-%d", i);
            int64_t rev;
            if (kite_store_write(s, &(struct kite_write){ KITE_WRITE_UPDATE, key, val, strlen(val), 0 }, &rev, NULL))
                _exit(3);
            if (write(pfd[1], &rev, sizeof rev) != sizeof rev) _exit(4);
        }
        close(pfd[1]);
        for (;;) pause();
    }
    close(pfd[1]);
    int64_t rev, last = 0;
    int got = 0;
    while (read(pfd[0], &rev, sizeof rev) == sizeof rev) {
        last = rev;
        got++;
    }
    close(pfd[0]);
    cr_assert_eq(got, n, "the child acknowledged every write");
    usleep(10 * KITE_STORE_MARKER_INTERVAL_MS * 1000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFSIGNALED(status), "child died on its own (status %d)", status);
    return last;
}

static int64_t setup_leases(struct tstore *t) {
    tstore_open(t);
    for (int i = 0; i < 50; i++) {
        char key[32];
        snprintf(key, sizeof key, "/leases/%d", i);
        put_ok(t->s, KITE_WRITE_CREATE, key, "0");
    }
    int64_t rev = kite_store_rev(t->s);
    kite_store_close(t->s);
    return rev;
}

static void damage_wal(struct tstore *t, bool header) {
    const char *wal = tpath(t, "s.db-wal");
    struct stat st;
    cr_assert_eq(stat(wal, &st), 0, "the killed writer left its WAL");
    cr_assert_gt(st.st_size, 32 + 24 + 4096 * 4);
    FILE *f = fopen(wal, "r+b");
    cr_assert_not_null(f);
    if (header) {
        static const char zero[32];
        cr_assert_eq(fwrite(zero, 1, 32, f), 32);
    } else {
        cr_assert_eq(fseek(f, st.st_size / 2, SEEK_SET), 0);
        int c = fgetc(f);
        cr_assert_eq(fseek(f, st.st_size / 2, SEEK_SET), 0);
        fputc(c ^ 0x5a, f);
    }
    cr_assert_eq(fclose(f), 0);
}

Test(store, crash_with_intact_files_opens) {
    struct tstore t = {0};
    setup_leases(&t);
    int64_t last = crash_after_acks(&t, 200);
    tstore_open(&t);
    cr_assert_geq(kite_store_rev(t.s), last);
    tstore_cleanup(&t);
}

Test(store, flipped_wal_byte_after_crash_is_refused) {
    struct tstore t = {0};
    int64_t base = setup_leases(&t);
    int64_t last = crash_after_acks(&t, 200);
    cr_assert_eq(last, base + 200);
    damage_wal(&t, false);
    expect_refused(&t, "was acknowledged");
    expect_refused(&t, "the database or its WAL is damaged");
    force_open(&t);
    cr_assert_eq(kite_store_rev(t.s), last, "revisions go on from the acknowledged one");
    tstore_cleanup(&t);
}

Test(store, zeroed_wal_header_after_crash_is_refused) {
    struct tstore t = {0};
    int64_t base = setup_leases(&t);
    int64_t last = crash_after_acks(&t, 200);
    damage_wal(&t, true);
    char want[96];
    snprintf(want, sizeof want, "is at revision %lld but revision %lld", (long long)base, (long long)last);
    expect_refused(&t, want);
    force_open(&t);
    struct kite_record *rec;
    cr_assert_eq(kite_store_get(t.s, "/leases/7", &rec), 0);
    cr_assert_str_eq(rec->value, "0", "the state before the lost WAL");
    kite_record_unref(rec);
    tstore_cleanup(&t);
}

Test(store, damaged_marker_is_refused) {
    struct tstore t = {0};
    tstore_open(&t);
    put_ok(t.s, KITE_WRITE_CREATE, "/k", "v");
    kite_store_close(t.s);
    FILE *f = fopen(tpath(&t, "s.db.rev"), "r+b");
    cr_assert_not_null(f);
    static char junk[1024];
    memset(junk, 0x77, sizeof junk);
    cr_assert_eq(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    fclose(f);
    expect_refused(&t, "revision marker");
    force_open(&t);
    cr_assert_eq(kite_store_rev(t.s), 1);
    kite_store_close(t.s);
    tstore_open(&t);
    tstore_cleanup(&t);
}

Test(store, corrupt_page_fails_integrity_check) {
    struct tstore t = {0};
    tstore_open(&t);
    char val[2000];
    memset(val, 'v', sizeof val - 1);
    val[sizeof val - 1] = 0;
    for (int i = 0; i < 200; i++) {
        char key[32];
        snprintf(key, sizeof key, "/k/%03d", i);
        put_ok(t.s, KITE_WRITE_CREATE, key, val);
    }
    kite_store_close(t.s); /* checkpoints everything into s.db */
    t.s = NULL;
    /* Scribble over the middle of an index page's cell area: page 3 onwards hold the table and
     * index b-trees. */
    FILE *f = fopen(tpath(&t, "s.db"), "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    static char junk[4096];
    memset(junk, 0xff, sizeof junk);
    for (long off = 4096 * 2; off + 4096 <= size; off += 4096 * 3) {
        cr_assert_eq(fseek(f, off + 8, SEEK_SET), 0);
        cr_assert_eq(fwrite(junk, 1, 64, f), 64);
    }
    fclose(f);
    struct kite_store *s = NULL;
    char *err = NULL;
    int r = kite_store_open(t.url, NULL, &s, &err);
    cr_assert_lt(r, 0, "a store with scribbled pages must not open");
    cr_assert_not_null(err);
    cr_assert(strstr(err, tpath(&t, "s.db")), "message names the file: %s", err);
    free(err);
    tstore_cleanup(&t);
}

/* ---- startup errors name the file and the cause ---- */

Test(store, open_errors_name_the_file) {
    /* A read-only directory (root may write anywhere but sysfs). */
    char ro[64] = "/tmp/kite-store-ro-XXXXXX", url[128], *err = NULL;
    const char *dir = ro;
    if (geteuid() == 0)
        dir = "/sys";
    else {
        cr_assert_not_null(mkdtemp(ro));
        chmod(ro, 0555);
    }
    snprintf(url, sizeof url, "sqlite:%s/kite-test.db", dir);
    struct kite_store *s = NULL;
    int r = kite_store_open(url, NULL, &s, &err);
    cr_assert_lt(r, 0);
    cr_assert_neq(r, -EIO, "a read-only directory is not an I/O error");
    cr_assert_not_null(err);
    cr_assert(strstr(err, url + strlen("sqlite:")), "message names the file: %s", err);
    cr_assert(strstr(err, "unable to open"), "SQLite's own text: %s", err);
    free(err);
    err = NULL;
    if (dir == ro) rmdir(ro);

    /* A file that is not a database. */
    struct tstore t = {0};
    strcpy(t.dir, "/tmp/kite-store-test-XXXXXX");
    cr_assert_not_null(mkdtemp(t.dir));
    snprintf(t.url, sizeof t.url, "sqlite:%s/s.db", t.dir);
    FILE *f = fopen(tpath(&t, "s.db"), "w");
    for (int i = 0; i < 200; i++) fputs("this is not a database, it is a text file\n", f);
    fclose(f);
    r = kite_store_open(t.url, NULL, &s, &err);
    cr_assert_lt(r, 0);
    cr_assert_not_null(err);
    cr_assert(strstr(err, tpath(&t, "s.db")), "message names the file: %s", err);
    cr_assert(strstr(err, "not a database"), "SQLite's own text: %s", err);
    free(err);
    err = NULL;

    /* A bad url. */
    cr_assert_eq(kite_store_open("nosuch://x", NULL, &s, &err), -EINVAL);
    cr_assert(err && strstr(err, "nosuch://x"), "%s", err ? err : "no message");
    free(err);
    /* etcd: a bad endpoint is named; no member answering is -EIO naming the last one tried */
    err = NULL;
    cr_assert_eq(kite_store_open("etcd:http://127.0.0.1:port", NULL, &s, &err), -EINVAL);
    cr_assert(err && strstr(err, "127.0.0.1:port"), "%s", err ? err : "no message");
    free(err);
    err = NULL;
    cr_assert_eq(kite_store_open("etcd:http://127.0.0.1:1,127.0.0.1:2", NULL, &s, &err), -EIO);
    cr_assert(err && strstr(err, "127.0.0.1:2") && strstr(err, "refused"), "%s", err ? err : "no message");
    free(err);
    tstore_cleanup(&t);
}

/* ---- the WAL does not keep the size of the largest transaction ---- */

struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool entered, open;
};

/* A subscriber that holds the writer thread on the first batch until the gate opens, so that
 * everything submitted meanwhile commits as one transaction. */
static void gate_batch(void *ud, const struct kite_store_event *evs, size_t n) {
    struct gate *g = ud;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cond);
    while (!g->open) pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static off_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

Test(store, wal_is_truncated_after_a_large_transaction) {
    struct tstore t = {0};
    tstore_open(&t);
    struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false };
    cr_assert_eq(kite_store_subscribe(t.s, "/gate", gate_batch, &g), 0);
    int pending = 1;
    cr_assert_eq(kite_store_submit(t.s, &(struct kite_write){ KITE_WRITE_CREATE, "/gate", "g", 1, 0 }, batch_done,
                                   &pending), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.entered) pthread_cond_wait(&g.cond, &g.mu);
    pthread_mutex_unlock(&g.mu);
    /* One transaction of KITE_STORE_WAL_SIZE_LIMIT + 8 MiB of values. */
    size_t len = KITE_STORE_VALUE_MAX;
    char *val = malloc(len);
    memset(val, 'w', len);
    int n = (int)((KITE_STORE_WAL_SIZE_LIMIT + 8 * 1024 * 1024) / len) + 1;
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "/big/%d", i);
        __atomic_add_fetch(&pending, 1, __ATOMIC_SEQ_CST);
        cr_assert_eq(kite_store_submit(t.s, &(struct kite_write){ KITE_WRITE_CREATE, key, val, len, 0 }, batch_done,
                                       &pending), 0);
    }
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.mu);
    while (__atomic_load_n(&pending, __ATOMIC_SEQ_CST) > 0) usleep(1000);
    free(val);
    const char *wal = tpath(&t, "s.db-wal");
    cr_assert_gt(file_size(wal), KITE_STORE_WAL_SIZE_LIMIT, "the large transaction grew the WAL past the limit");
    /* Small writes go on; once a checkpoint let the WAL start over, it is cut back to the limit. */
    int i = 0;
    for (; i < 2000 && file_size(wal) > KITE_STORE_WAL_SIZE_LIMIT; i++) {
        put_ok(t.s, i ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE, "/small", "s");
        usleep(5000);
    }
    cr_assert_leq(file_size(wal), KITE_STORE_WAL_SIZE_LIMIT, "WAL still %lld bytes after %d writes",
                  (long long)file_size(wal), i);
    kite_store_unsubscribe(t.s, gate_batch, &g);
    tstore_cleanup(&t);
}

/* ---- storage errors are counted ---- */

Test(store, failed_commits_are_counted) {
    struct tstore t = {0};
    tstore_open(&t);
    put_ok(t.s, KITE_WRITE_CREATE, "/small", "s");
    /* Files may not grow past 1 MiB: the next large transaction fails in storage. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim = { 1024 * 1024, 1024 * 1024 };
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    size_t len = 1200 * 1024;
    char *val = malloc(len);
    memset(val, 'x', len);
    int r = kite_store_write(t.s, &(struct kite_write){ KITE_WRITE_CREATE, "/big", val, len, 0 }, NULL, NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    free(val);
    cr_assert_eq(r, -EIO);
    struct kite_store_stats st;
    kite_store_stats(t.s, &st);
    cr_assert_eq(st.commits_failed, 1);
    cr_assert_eq(st.failed, 1);
    cr_assert_eq(st.writes, 1);
    /* the store goes on */
    put_ok(t.s, KITE_WRITE_UPDATE, "/small", "t");
    kite_store_stats(t.s, &st);
    cr_assert_eq(st.commits_failed, 1);
    tstore_cleanup(&t);
}

/* ---- the ordering guarantee of store.h: subscribers before completions ---- */

#define ORDER_WRITES 3000

struct order {
    struct kite_store *s;
    _Atomic int64_t seen_all, seen_o; /* the newest revision each subscriber was handed */
    _Atomic int bad, done;
};

static void order_all(void *ud, const struct kite_store_event *evs, size_t n) {
    struct order *o = ud;
    atomic_store(&o->seen_all, evs[n - 1].rev);
}

static void order_o(void *ud, const struct kite_store_event *evs, size_t n) {
    struct order *o = (struct order *)((char *)ud - offsetof(struct order, seen_o));
    atomic_store(&o->seen_o, evs[n - 1].rev);
}

static void order_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    struct order *o = ud;
    struct kite_record *cur = NULL;
    if (err || atomic_load(&o->seen_all) < rev || atomic_load(&o->seen_o) < rev || kite_store_rev(o->s) < rev ||
        kite_store_get(o->s, rec->key, &cur) < 0 || cur->mod_rev < rev)
        atomic_fetch_add(&o->bad, 1);
    kite_record_unref(cur);
    atomic_fetch_add(&o->done, 1);
}

Test(store, completion_after_every_subscriber) {
    struct tstore t = {0};
    tstore_open(&t);
    struct order o = { .s = t.s };
    cr_assert_eq(kite_store_subscribe(t.s, "", order_all, &o), 0);
    cr_assert_eq(kite_store_subscribe(t.s, "/o/", order_o, &o.seen_o), 0);
    for (int i = 0; i < ORDER_WRITES; i++) {
        char key[32];
        snprintf(key, sizeof key, "/o/%d", i % 100);
        struct kite_write w = { i < 100 ? KITE_WRITE_CREATE : KITE_WRITE_UPDATE, key, "v", 1, 0 };
        while (kite_store_submit(t.s, &w, order_done, &o) == -EAGAIN) usleep(1000);
    }
    while (atomic_load(&o.done) < ORDER_WRITES) usleep(1000);
    cr_assert_eq(atomic_load(&o.bad), 0, "%d completions came before their event reached a subscriber",
                 atomic_load(&o.bad));
    struct kite_store_stats st;
    kite_store_stats(t.s, &st);
    cr_assert_lt(st.batches, ORDER_WRITES, "writes were batched");
    tstore_cleanup(&t);
}
