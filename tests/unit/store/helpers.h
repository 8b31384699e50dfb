/* Shared helpers for the store tests: a fresh store in a temp dir per test. */
#pragma once
#include "store/store.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct tstore {
    char dir[64];
    char url[128];
    struct kite_store *s;
};

static inline void tstore_open(struct tstore *t) {
    if (!t->dir[0]) {
        strcpy(t->dir, "/tmp/kite-store-test-XXXXXX");
        cr_assert_not_null(mkdtemp(t->dir));
        snprintf(t->url, sizeof(t->url), "sqlite:%s/s.db", t->dir);
    }
    char *err = NULL;
    int r = kite_store_open(t->url, NULL, &t->s, &err);
    cr_assert_eq(r, 0, "open %s: %s", t->url, err ? err : strerror(-r));
}

static inline void tstore_cleanup(struct tstore *t) {
    kite_store_close(t->s);
    t->s = NULL;
    char p[128];
    static const char *const files[] = { "s.db", "s.db-wal", "s.db-shm", "s.db.rev" };
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", t->dir, files[i]);
        unlink(p);
    }
    rmdir(t->dir);
}

static inline int put(struct kite_store *s, enum kite_write_type type, const char *key, const char *val,
                      int64_t expect, int64_t *rev) {
    struct kite_write w = { type, key, val, val ? strlen(val) : 0, expect };
    return kite_store_write(s, &w, rev, NULL);
}

static inline int64_t put_ok(struct kite_store *s, enum kite_write_type type, const char *key, const char *val) {
    int64_t rev = 0;
    cr_assert_eq(put(s, type, key, val, 0, &rev), 0, "write %s", key);
    return rev;
}
