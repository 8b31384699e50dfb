/* /metrics in the Prometheus text format: request counts and latency histograms by
 * verb/resource/code, open watches, the store's commit latency and how often writes were
 * recomputed. One mutex; the request path does one map lookup and a few increments under it.
 * The write counters are atomics: the store's writer thread bumps them. */
#include "apiserver/internal.h"
#include "base/map.h"

#include <stdatomic.h>
#include <stdio.h>

static const double BUCKETS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NB KITE_ARRAY_SIZE(BUCKETS)

struct hist {
    uint64_t counts[NB];
    uint64_t n;
    double sum;
};

static void hist_add(struct hist *h, int64_t ns) {
    double s = (double)ns / 1e9;
    for (size_t i = 0; i < NB; i++)
        if (s <= BUCKETS[i]) h->counts[i]++;
    h->n++;
    h->sum += s;
}

struct series {
    char verb[24], resource[64];
    uint64_t codes[600];
    struct hist lat;
};

struct kite_metrics {
    pthread_mutex_t mu;
    struct kite_map series;  /* "verb resource" -> struct series */
    struct kite_map watches; /* resource -> (intptr_t) count */
    struct hist commit;
    atomic_uint_least64_t renewals_spliced; /* Lease renewals written by renewal.c's splice */
    atomic_uint_least64_t write_retries; /* writes recomputed after losing a race in the store */
    atomic_uint_least64_t write_queued;  /* writes that waited for the one in flight of their object */
    atomic_uint_least64_t store_errors;  /* writes the store failed to commit (500) */
};

struct kite_metrics *kite_apiserver_metrics_new(void) {
    struct kite_metrics *m = kite_calloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void kite_apiserver_metrics_free(struct kite_metrics *m) {
    if (!m) return;
    size_t it = 0;
    void *v;
    while (kite_map_next(&m->series, &it, NULL, &v)) free(v);
    kite_map_release(&m->series);
    kite_map_release(&m->watches);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* kube-apiserver reports the HTTP-level verb: GET, LIST, WATCH, POST, PUT, PATCH, DELETE. */
static const char *metric_verb(const char *verb) {
    static const char *const map[][2] = {{"get", "GET"},     {"list", "LIST"},     {"watch", "WATCH"},
                                         {"create", "POST"}, {"update", "PUT"},    {"patch", "PATCH"},
                                         {"delete", "DELETE"}, {"deletecollection", "DELETE"}};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(map); i++)
        if (strcmp(verb, map[i][0]) == 0) return map[i][1];
    return verb;
}

void kite_apiserver_metrics_observe(struct kite_metrics *m, const char *verb, const char *resource, int code, int64_t ns) {
    char key[96];
    verb = metric_verb(verb);
    snprintf(key, sizeof key, "%s %s", verb, resource);
    pthread_mutex_lock(&m->mu);
    struct series *s = kite_map_get(&m->series, key);
    if (!s) {
        s = kite_calloc(1, sizeof *s);
        snprintf(s->verb, sizeof s->verb, "%s", verb);
        snprintf(s->resource, sizeof s->resource, "%s", resource);
        kite_map_put(&m->series, key, s);
    }
    if (code >= 0 && code < 600) s->codes[code]++;
    hist_add(&s->lat, ns);
    pthread_mutex_unlock(&m->mu);
}

void kite_apiserver_metrics_watch_delta(struct kite_metrics *m, const char *resource, int delta) {
    pthread_mutex_lock(&m->mu);
    intptr_t v = (intptr_t)kite_map_get(&m->watches, resource) + delta;
    kite_map_put(&m->watches, resource, (void *)v);
    pthread_mutex_unlock(&m->mu);
}

void kite_apiserver_metrics_store_commit(struct kite_metrics *m, int64_t ns) {
    pthread_mutex_lock(&m->mu);
    hist_add(&m->commit, ns);
    pthread_mutex_unlock(&m->mu);
}

void kite_apiserver_metrics_write_retry(struct kite_metrics *m) {
    atomic_fetch_add_explicit(&m->write_retries, 1, memory_order_relaxed);
}

void kite_apiserver_metrics_renewal_spliced(struct kite_metrics *m) {
    atomic_fetch_add_explicit(&m->renewals_spliced, 1, memory_order_relaxed);
}

void kite_apiserver_metrics_write_queued(struct kite_metrics *m) {
    atomic_fetch_add_explicit(&m->write_queued, 1, memory_order_relaxed);
}

void kite_apiserver_metrics_store_error(struct kite_metrics *m) {
    atomic_fetch_add_explicit(&m->store_errors, 1, memory_order_relaxed);
}

static void render_hist(struct kite_buf *b, const char *name, const char *labels, const struct hist *h) {
    const char *sep = *labels ? "," : "";
    for (size_t i = 0; i < NB; i++)
        kite_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, BUCKETS[i], (unsigned long long)h->counts[i]);
    kite_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)h->n);
    if (*labels)
        kite_buf_printf(b, "%s_sum{%s} %g\n%s_count{%s} %llu\n", name, labels, h->sum, name, labels, (unsigned long long)h->n);
    else
        kite_buf_printf(b, "%s_sum %g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->n);
}

void kite_apiserver_metrics_render(struct kite_metrics *m, struct kite_buf *b) {
    pthread_mutex_lock(&m->mu);
    kite_buf_puts(b, "# HELP apiserver_request_total Counter of apiserver requests broken out by verb, resource and HTTP response code.\n"
                     "# TYPE apiserver_request_total counter\n");
    size_t it = 0;
    void *v;
    while (kite_map_next(&m->series, &it, NULL, &v)) {
        struct series *s = v;
        for (int c = 0; c < 600; c++)
            if (s->codes[c])
                kite_buf_printf(b, "apiserver_request_total{verb=\"%s\",resource=\"%s\",code=\"%d\"} %llu\n", s->verb,
                                s->resource, c, (unsigned long long)s->codes[c]);
    }
    kite_buf_puts(b, "# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb and resource.\n"
                     "# TYPE apiserver_request_duration_seconds histogram\n");
    it = 0;
    while (kite_map_next(&m->series, &it, NULL, &v)) {
        struct series *s = v;
        char labels[128];
        snprintf(labels, sizeof labels, "verb=\"%s\",resource=\"%s\"", s->verb, s->resource);
        render_hist(b, "apiserver_request_duration_seconds", labels, &s->lat);
    }
    kite_buf_puts(b, "# HELP apiserver_registered_watchers Number of currently open watches for a given resource.\n"
                     "# TYPE apiserver_registered_watchers gauge\n");
    it = 0;
    const char *k;
    while (kite_map_next(&m->watches, &it, &k, &v))
        kite_buf_printf(b, "apiserver_registered_watchers{resource=\"%s\"} %ld\n", k, (long)(intptr_t)v);
    kite_buf_puts(b, "# HELP kite_store_commit_duration_seconds Time from submitting a write to its durable commit.\n"
                     "# TYPE kite_store_commit_duration_seconds histogram\n");
    render_hist(b, "kite_store_commit_duration_seconds", "", &m->commit);
    kite_buf_printf(b, "# HELP kite_write_conflict_retries_total Writes recomputed against the current object after another write of it committed first.\n"
                       "# TYPE kite_write_conflict_retries_total counter\n"
                       "kite_write_conflict_retries_total %llu\n",
                    (unsigned long long)atomic_load_explicit(&m->write_retries, memory_order_relaxed));
    kite_buf_printf(b, "# HELP kite_lease_renewals_spliced_total Lease renewals written into the stored text without a parse.\n"
                       "# TYPE kite_lease_renewals_spliced_total counter\n"
                       "kite_lease_renewals_spliced_total %llu\n",
                    (unsigned long long)atomic_load_explicit(&m->renewals_spliced, memory_order_relaxed));
    kite_buf_printf(b, "# HELP kite_write_queued_total Writes that waited for an earlier write of the same object to complete.\n"
                       "# TYPE kite_write_queued_total counter\n"
                       "kite_write_queued_total %llu\n",
                    (unsigned long long)atomic_load_explicit(&m->write_queued, memory_order_relaxed));
    kite_buf_printf(b, "# HELP kite_store_write_errors_total Writes the store failed to make durable (answered 500).\n"
                       "# TYPE kite_store_write_errors_total counter\n"
                       "kite_store_write_errors_total %llu\n",
                    (unsigned long long)atomic_load_explicit(&m->store_errors, memory_order_relaxed));
    pthread_mutex_unlock(&m->mu);
}
