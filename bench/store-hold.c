/* store-hold: the SQLite store under a steady lease-renewal load, as `kite up` sees it at scale,
 * without the apiserver or the simulator: where a renewal's latency comes from when the store is
 * the only thing running.
 *
 * Build (from the repo root, after `make build/lib/libkite_store.a build/lib/libkite_base.a`):
 *   cc -O2 -g -std=gnu11 -D_GNU_SOURCE -Isrc -o build/store-hold bench/store-hold.c \
 *      build/lib/libkite_store.a build/lib/libkite_base.a -lsqlite3 -lgnutls -lnghttp2 -lpthread -lm
 * Run: build/store-hold DIR KEYS RATE SECONDS [HISTORY] [PREFILL_ROUNDS]
 *
 * KEYS Lease-sized records (700 bytes under /registry/leases/kube-node-lease/node-NNNNNN) are
 * created, then each is rewritten PREFILL_ROUNDS times as fast as the store goes (so the history
 * is as long as a store's after minutes of renewals), then renewed at RATE writes/s in all, each
 * key once per KEYS/RATE seconds, by 1,024 threads of blocking writes (as many as the writes a stall of 100 ms holds at 10,000/s) (each write due at its time;
 * its latency counts from then, so a stall shows as the lag of every write due during it). A
 * compactor keeps the history as the apiserver's bound does (KITE_HISTORY_MAX and its slack):
 * once more than HISTORY + 20,000 revisions are kept, it compacts back to HISTORY (HISTORY 0: never,
 * the baseline: the same load on a store that only grows).
 * Every second: writes, latency p50/p99/max of the writes due in it, the WAL's size. At the end
 * the same over the whole run. */
#include "base/base.h"
#include "store/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define THREADS 1024
#define VALUE_LEN 700
#define SLACK 20000
#define MAX_SECONDS 3600
#define PER_SEC_SAMPLES 65536

static struct kite_store *store;
static int KEYS;
static double RATE;
static int64_t t_start;
static volatile int stop;
static char value[VALUE_LEN];

struct second {
    _Atomic size_t n;
    int64_t lat[PER_SEC_SAMPLES];
};
static struct second *secs;
static int64_t *all_lat;
static _Atomic size_t n_all;
static size_t max_all;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void key_of(char *buf, size_t len, int i) {
    snprintf(buf, len, "/registry/leases/kube-node-lease/node-%06d", i);
}

static void put(int k, enum kite_write_type type) {
    char key[96];
    key_of(key, sizeof key, k);
    struct kite_write w = {type, key, value, VALUE_LEN, 0};
    int r = kite_store_write(store, &w, NULL, NULL);
    if (r < 0 && !(type == KITE_WRITE_CREATE && r == -EEXIST)) {
        fprintf(stderr, "write %s: %s\n", key, strerror(-r));
        exit(1);
    }
}

struct fill {
    int t, rounds;
};

static void *filler(void *arg) {
    struct fill *f = arg;
    for (int round = 0; round <= f->rounds; round++)
        for (int i = f->t; i < KEYS; i += THREADS) put(i, round ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE);
    return NULL;
}

/* Thread t writes the j-th write overall when j % THREADS == t, due at t_start + j / RATE, to key
 * j % KEYS. */
static void *renewer(void *arg) {
    int t = (int)(intptr_t)arg;
    for (uint64_t j = (uint64_t)t; !stop; j += THREADS) {
        int64_t due = t_start + (int64_t)((double)j * 1e9 / RATE);
        int64_t now = now_ns();
        if (due > now) {
            struct timespec d = {(due - now) / 1000000000LL, (due - now) % 1000000000LL};
            nanosleep(&d, NULL);
        }
        if (stop) break;
        put((int)(j % (uint64_t)KEYS), KITE_WRITE_UPDATE);
        int64_t lat = now_ns() - due;
        int64_t s = (due - t_start) / 1000000000LL;
        if (s >= 0 && s < MAX_SECONDS) {
            size_t i = atomic_fetch_add(&secs[s].n, 1);
            if (i < PER_SEC_SAMPLES) secs[s].lat[i] = lat;
        }
        size_t i = atomic_fetch_add(&n_all, 1);
        if (i < max_all) all_lat[i] = lat;
    }
    return NULL;
}

static void *compactor(void *arg) {
    int64_t history = (int64_t)(intptr_t)arg;
    while (!stop && history > 0) {
        usleep(100000);
        int64_t rev = kite_store_rev(store), done = kite_store_compacted_rev(store);
        if (rev - done > history + SLACK) {
            int64_t t0 = now_ns();
            int r = kite_store_compact(store, rev - history);
            if (r < 0) fprintf(stderr, "compact: %s\n", strerror(-r));
            else
                fprintf(stderr, "compacted %lld revisions in %.0f ms\n", (long long)(rev - history - done),
                        (now_ns() - t0) / 1e6);
        }
    }
    return NULL;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, int64_t *v, size_t n) {
    if (!n) {
        printf("%s: no writes\n", what);
        return;
    }
    qsort(v, n, sizeof *v, cmp64);
    printf("%s %7zu writes  p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms", what, n, v[n / 2] / 1e6, v[n * 99 / 100] / 1e6,
           v[n - 1] / 1e6);
}

/* CPU seconds this process used so far (every thread). */
static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Bytes this process had written to the disk so far (/proc/self/io), -1 where unknown. */
static long long disk_written(void) {
    FILE *f = fopen("/proc/self/io", "r");
    long long v = -1;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "write_bytes: %lld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: store-hold DIR KEYS RATE SECONDS [HISTORY] [PREFILL_ROUNDS]\n");
        return 2;
    }
    const char *dir = argv[1];
    KEYS = atoi(argv[2]);
    RATE = atof(argv[3]);
    int seconds = atoi(argv[4]);
    int64_t history = argc > 5 ? atoll(argv[5]) : 1000000;
    int rounds = argc > 6 ? atoi(argv[6]) : (int)(((history > 0 ? history : 1000000) + KEYS - 1) / KEYS);
    if (KEYS < 1 || RATE <= 0 || seconds < 1 || seconds > MAX_SECONDS) return 2;
    memset(value, 'v', sizeof value);
    secs = calloc((size_t)MAX_SECONDS, sizeof *secs);
    max_all = (size_t)(RATE * seconds * 1.1) + 1024;
    all_lat = malloc(max_all * sizeof *all_lat);
    mkdir(dir, 0700);
    char url[600], wal[600];
    snprintf(url, sizeof url, "sqlite:%s/hold.db", dir);
    snprintf(wal, sizeof wal, "%s/hold.db-wal", dir);
    char *err = NULL;
    int r = kite_store_open(url, NULL, &store, &err);
    if (r < 0) {
        fprintf(stderr, "%s\n", err ? err : strerror(-r));
        return 1;
    }
    int64_t f0 = now_ns();
    pthread_t th[THREADS], ct;
    struct fill fills[THREADS];
    for (int t = 0; t < THREADS; t++) {
        fills[t] = (struct fill){t, rounds};
        pthread_create(&th[t], NULL, filler, &fills[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    printf("store-hold: %d keys created and rewritten %d times in %.1f s (revision %lld)\n", KEYS, rounds,
           (now_ns() - f0) / 1e9, (long long)kite_store_rev(store));
    printf("store-hold: %.0f renewals/s (each key every %.1f s), history %lld revisions, %d s\n", RATE, KEYS / RATE,
           (long long)history, seconds);
    fflush(stdout);
    long long w0 = disk_written();
    double c0 = cpu_seconds();
    struct kite_store_stats st0;
    kite_store_stats(store, &st0);
    pthread_create(&ct, NULL, compactor, (void *)(intptr_t)history);
    t_start = now_ns() + 100000000LL;
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, renewer, (void *)(intptr_t)t);
    for (int s = 0; s < seconds; s++) {
        int64_t at = t_start + (int64_t)(s + 2) * 1000000000LL, now = now_ns();
        if (at > now) {
            struct timespec d = {(at - now) / 1000000000LL, (at - now) % 1000000000LL};
            nanosleep(&d, NULL);
        }
        /* second s is complete once its writes are done: reported a second late */
        struct stat sb;
        long long walsz = stat(wal, &sb) == 0 ? (long long)sb.st_size : -1;
        char what[32];
        snprintf(what, sizeof what, "second %4d", s);
        size_t n = KITE_MIN(atomic_load(&secs[s].n), (size_t)PER_SEC_SAMPLES);
        report(what, secs[s].lat, n);
        printf("  WAL %6.1f MiB\n", walsz / 1048576.0);
        fflush(stdout);
    }
    stop = 1;
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    pthread_join(ct, NULL);
    size_t n_done = KITE_MIN(atomic_load(&n_all), max_all);
    report("all        ", all_lat, n_done);
    long long w1 = disk_written();
    double c1 = cpu_seconds();
    struct kite_store_stats st1;
    kite_store_stats(store, &st1);
    if (w0 >= 0 && w1 >= 0)
        printf("  disk %.2f GB written, %.1f KB per write", (w1 - w0) / 1e9, n_done ? (w1 - w0) / 1e3 / n_done : 0.0);
    printf("  CPU %.1f us per write, %.1f writes per commit", n_done ? (c1 - c0) * 1e6 / n_done : 0.0,
           st1.batches > st0.batches ? (double)(st1.writes - st0.writes) / (double)(st1.batches - st0.batches) : 0.0);
    printf("\n");
    kite_store_close(store);
    return 0;
}
