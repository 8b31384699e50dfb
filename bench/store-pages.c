/* store-pages: what opening a SQLite store and paging through a prefix at an older revision cost,
 * as an informer's list of every Lease or Node does after an apiserver's restart.
 *
 * Build (from the repo root, after `make build/lib/libkite_store.a build/lib/libkite_base.a`):
 *   cc -O2 -g -std=gnu11 -D_GNU_SOURCE -Isrc -o build/store-pages bench/store-pages.c \
 *      build/lib/libkite_store.a build/lib/libkite_base.a -lsqlite3 -lgnutls -lnghttp2 -lpthread -lm
 * Run: build/store-pages DB PREFIX BACK LIMIT PAGES
 *   e.g. on the store `store-hold` leaves: build/store-pages DIR/hold.db /registry/leases/ 100000 500 20
 *
 * Opens sqlite:DB (an older store is upgraded first: its time shows as the open's), then reads
 * PAGES pages of LIMIT under PREFIX at the revision BACK writes before the newest, each page
 * after the last key of the one before, as the apiserver serves continue pages. Prints the open's
 * time, the first and second pages' and the median and total of all of them. */
#include "base/base.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double ms_since(const struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s DB PREFIX BACK LIMIT PAGES\n", argv[0]);
        return 2;
    }
    const char *prefix = argv[2];
    long back = atol(argv[3]), limit = atol(argv[4]), pages = atol(argv[5]);
    if (limit <= 0 || pages <= 0 || back < 0) return 2;
    char *url = kite_asprintf("sqlite:%s", argv[1]), *err = NULL;
    struct kite_store *s = NULL;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int r = kite_store_open(url, NULL, &s, &err);
    if (r < 0) {
        fprintf(stderr, "open %s: %s\n", url, err ? err : strerror(-r));
        return 1;
    }
    printf("open: %.0f ms (revision %lld)\n", ms_since(&t), (long long)kite_store_rev(s));
    int64_t at = kite_store_rev(s) - back;
    double *took = kite_calloc((size_t)pages, sizeof(*took)), total = 0;
    char *after = NULL;
    long done = 0, keys = 0;
    for (; done < pages; done++) {
        struct kite_record **v = NULL;
        size_t n = 0;
        bool more = false;
        clock_gettime(CLOCK_MONOTONIC, &t);
        r = kite_store_range(s, prefix, at, after, (size_t)limit, &v, &n, &more);
        took[done] = ms_since(&t);
        if (r < 0) {
            fprintf(stderr, "page %ld at %lld: %s\n", done + 1, (long long)at, strerror(-r));
            return 1;
        }
        total += took[done];
        keys += (long)n;
        if (n) {
            free(after);
            after = kite_strdup(v[n - 1]->key);
        }
        for (size_t i = 0; i < n; i++) kite_record_unref(v[i]);
        free(v);
        if (!more) {
            done++;
            break;
        }
    }
    double first = took[0], second = done > 1 ? took[1] : 0;
    qsort(took, (size_t)done, sizeof(*took), cmp_double);
    printf("%ld pages of %ld (%ld keys) at revision %lld: first %.1f ms, second %.1f ms, median %.1f ms, total %.0f ms\n",
           done, limit, keys, (long long)at, first, second, took[done / 2], total);
    free(after);
    free(took);
    free(url);
    kite_store_close(s);
    return 0;
}
