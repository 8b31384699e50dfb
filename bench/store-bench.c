/* store-bench: durable update throughput of the SQLite store against the disk's raw limit.
 *
 * Build (from the repo root, after `make build/lib/libkite_store.a build/lib/libkite_base.a`):
 *   cc -O2 -g -std=gnu11 -D_GNU_SOURCE -Isrc -o build/store-bench bench/store-bench.c \
 *      build/lib/libkite_store.a build/lib/libkite_base.a -lsqlite3 -lgnutls -lnghttp2 -lpthread -lm
 * Run: build/store-bench [dir] [seconds] [keys]   (dir defaults to a fresh directory under /tmp,
 *      keys to 10,000)
 *
 * (a) 64 submitter threads each do blocking 400-byte UPDATEs of random keys among `keys`,
 *     for `seconds`: durable updates/s, p50/p99 latency, the average group-commit batch.
 * (b) the baseline: appends of 400-byte records to a plain file, fdatasync per batch, batched
 *     with the average batch size (a) achieved, for the same number of records. */
#include "store/store.h"

#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define THREADS 64
static int KEYS = 10000;
#define VALUE_LEN 400
#define MAX_SAMPLES (1 << 22)

static struct kite_store *store;
static volatile int stop;
static int64_t *lat_ns;
static _Atomic size_t nlat;
static char value[VALUE_LEN];

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *submitter(void *arg) {
    uint64_t x = (uintptr_t)arg * 2654435761u + 1;
    char key[64];
    while (!stop) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        snprintf(key, sizeof(key), "/registry/pods/default/pod-%07d", (int)(x % (uint64_t)KEYS));
        struct kite_write w = { KITE_WRITE_UPDATE, key, value, VALUE_LEN, 0 };
        int64_t t0 = now_ns();
        int r = kite_store_write(store, &w, NULL, NULL);
        int64_t t1 = now_ns();
        if (r < 0) {
            fprintf(stderr, "write: %s\n", strerror(-r));
            exit(1);
        }
        size_t i = atomic_fetch_add(&nlat, 1);
        if (i < MAX_SAMPLES) lat_ns[i] = t1 - t0;
    }
    return NULL;
}

static void *creator(void *arg) {
    int t = (int)(intptr_t)arg;
    char key[64];
    for (int i = t; i < KEYS; i += THREADS) {
        snprintf(key, sizeof(key), "/registry/pods/default/pod-%07d", i);
        struct kite_write w = { KITE_WRITE_CREATE, key, value, VALUE_LEN, 0 };
        int r = kite_store_write(store, &w, NULL, NULL);
        if (r < 0 && r != -EEXIST) {
            fprintf(stderr, "create: %s\n", strerror(-r));
            exit(1);
        }
    }
    return NULL;
}

/* CPU seconds (user + system) of this process's thread named `name`, -1 when there is none. */
static double thread_cpu(const char *name) {
    DIR *d = opendir("/proc/self/task");
    double ret = -1;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], comm[64] = "", stat[1024];
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof(comm), f)) comm[0] = 0;
        fclose(f);
        comm[strcspn(comm, "\n")] = 0;
        if (strcmp(comm, name) != 0) continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        size_t n = fread(stat, 1, sizeof(stat) - 1, f);
        fclose(f);
        stat[n] = 0;
        const char *p = strrchr(stat, ')');
        unsigned long ut = 0, st = 0;
        /* after the comm: state, then fields 4..13, then utime (14) and stime (15) */
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
            ret = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    }
    if (d) closedir(d);
    return ret;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    char tmpl[] = "/tmp/store-bench-XXXXXX";
    const char *dir = argc > 1 && argv[1][0] ? argv[1] : mkdtemp(tmpl);
    double secs = argc > 2 ? atof(argv[2]) : 5;
    if (argc > 3) KEYS = atoi(argv[3]);
    if (KEYS < 1) KEYS = 1;
    memset(value, 'v', sizeof(value));
    lat_ns = malloc(MAX_SAMPLES * sizeof(*lat_ns));
    char url[600], path[512];
    snprintf(path, sizeof(path), "%s/bench.db", dir);
    snprintf(url, sizeof(url), "sqlite:%s", path);
    char *err = NULL;
    int r = kite_store_open(url, NULL, &store, &err);
    if (r < 0) {
        fprintf(stderr, "%s\n", err ? err : strerror(-r));
        return 1;
    }
    /* Create the keys: THREADS creators, so the load is group-committed too. */
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, creator, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);

    struct kite_store_stats st0, st1;
    kite_store_stats(store, &st0);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double w0 = thread_cpu("store-writer");
    int64_t t0 = now_ns();
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, submitter, (void *)(intptr_t)(t + 1));
    struct timespec d = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };
    nanosleep(&d, NULL);
    stop = 1;
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    int64_t t1 = now_ns();
    getrusage(RUSAGE_SELF, &ru1);
    double w1 = thread_cpu("store-writer");
    kite_store_stats(store, &st1);
    size_t n = KITE_MIN(atomic_load(&nlat), (size_t)MAX_SAMPLES);
    qsort(lat_ns, n, sizeof(*lat_ns), cmp64);
    uint64_t writes = st1.writes - st0.writes, batches = st1.batches - st0.batches;
    double rate = writes / ((t1 - t0) / 1e9);
    double avg_batch = batches ? (double)writes / batches : 1;
    printf("store: %d threads, %d-byte updates over %d keys, %.1f s\n", THREADS, VALUE_LEN, KEYS, (t1 - t0) / 1e9);
    printf("store: %.0f durable updates/s, p50 %.2f ms, p99 %.2f ms, %.1f writes per batch (%.0f fsyncs/s)\n", rate,
           lat_ns[n / 2] / 1e6, lat_ns[n * 99 / 100] / 1e6, avg_batch, batches / ((t1 - t0) / 1e9));
    double cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    printf("store: CPU %.1f us per write (all threads, submitters included), the writer thread's %.1f us\n",
           writes ? cpu * 1e6 / writes : 0, writes && w0 >= 0 ? (w1 - w0) * 1e6 / writes : 0);
    kite_store_close(store);

    /* (b) baseline: the same records appended to a file, one fdatasync per batch. */
    snprintf(path, sizeof(path), "%s/baseline.log", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0) {
        perror("open baseline");
        return 1;
    }
    size_t per = (size_t)(avg_batch + 0.5);
    if (per < 1) per = 1;
    char *buf = malloc(per * VALUE_LEN);
    memset(buf, 'v', per * VALUE_LEN);
    uint64_t recs = 0;
    int64_t b0 = now_ns();
    while (recs < writes) {
        if (write(fd, buf, per * VALUE_LEN) != (ssize_t)(per * VALUE_LEN) || fdatasync(fd) < 0) {
            perror("baseline write");
            return 1;
        }
        recs += per;
    }
    int64_t b1 = now_ns();
    close(fd);
    double base = recs / ((b1 - b0) / 1e9);
    printf("baseline: %.0f records/s appending %zu x %d bytes per fdatasync (%.0f fsyncs/s)\n", base, per, VALUE_LEN,
           recs / (double)per / ((b1 - b0) / 1e9));
    printf("ratio store/baseline: %.2f\n", rate / base);
    unlink(path);
    snprintf(path, sizeof(path), "%s/bench.db", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/bench.db-wal", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/bench.db-shm", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/bench.db.rev", dir);
    unlink(path);
    if (dir == tmpl) rmdir(dir);
    free(buf);
    free(lat_ns);
    return 0;
}
