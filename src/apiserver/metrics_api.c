/* The resource metrics API, `metrics.k8s.io/v1beta1` (NodeMetrics, PodMetrics), served by the API
 * server itself as a built-in metrics-server: a thread scrapes every Ready node's agent
 * (`/metrics/resource`, the kubelet's endpoint, with the API server's kubelet-client
 * certificate) every resolution (--metric-resolution, 15 s by default as metrics-server's), keeps
 * the last two samples of each node and container, and answers with the CPU rate between them
 * (the window is the time between their timestamps) and the last memory working set.
 *
 * As metrics-server: a node or container shows once it has two samples (at most two resolutions
 * after it starts); a node that is not Ready or fails its scrape loses its samples; a container
 * whose start time changed (a restart) starts over; a pod is listed once every container of it
 * that the agent reports has a rate, and label and field selectors apply to the Node and Pod
 * objects in the watch caches (a metric of a pod or node the API no longer has is not shown).
 *
 * Kubernetes serves this group from an aggregated APIService; kite serves it in-process, so
 * discovery lists it beside the registry's groups (discovery.c) and requests are authorized as
 * any resource request (`get`/`list` on `nodes`/`pods` in group `metrics.k8s.io`). Like
 * nodestate.c, this file names the kinds it reads (Node, Pod). */
#include "apiserver/internal.h"

#include "base/clock.h"
#include "base/map.h"
#include "pki/pki.h"

#include <stdio.h>
#include <time.h>

#define MAPI_GROUP "metrics.k8s.io"
#define MAPI_VERSION "v1beta1"
#define MAPI_GV MAPI_GROUP "/" MAPI_VERSION

/* Rows that exist only for routing, authorization, audit and error details: never stored, not
 * in kite_resources[] (the registry's tables know nothing of them). */
static const struct kite_resource NODE_METRICS = {KITE_GROUP_VERSION(MAPI_GROUP, MAPI_VERSION), .kind = "NodeMetrics",
                                                  .list_kind = "NodeMetricsList", .plural = "nodes",
                                                  .singular = "nodemetrics", .read_only = true};
static const struct kite_resource POD_METRICS = {KITE_GROUP_VERSION(MAPI_GROUP, MAPI_VERSION), .kind = "PodMetrics",
                                                 .list_kind = "PodMetricsList", .plural = "pods",
                                                 .singular = "podmetrics", .namespaced = true, .read_only = true};

/* ---- the samples kept ---------------------------------------------------------------- */

struct point {
    uint64_t cpu_ns;
    int64_t ts;
};

struct ctr_state {
    char *name;
    int64_t start_ns;
    struct point prev, cur; /* prev.ts == 0: one sample so far */
    uint64_t mem;
    int64_t mem_ts;
    bool has_mem;
};

struct pod_state {
    char *ns, *name;
    struct ctr_state *c;
    size_t n;
};

struct node_state {
    struct point prev, cur;
    uint64_t mem;
    int64_t mem_ts;
    bool has_cpu, has_mem;
    struct kite_map pods; /* "ns/name" -> struct pod_state */
    int64_t seen;         /* the cycle that last scraped it */
};

struct kite_metrics_api {
    struct kite_apiserver *srv;
    int64_t resolution_ns;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards nodes and stop */
    pthread_cond_t cond;
    bool stop;
    struct kite_map nodes; /* name -> struct node_state */
    int64_t cycle;
    /* the scrape thread's own: the Ready nodes with an agent endpoint, kept from the nodes'
     * watch cache (O(changes) per cycle, not a list and a parse of every Node) */
    struct kite_map targets; /* name -> struct endpoint */
    struct kite_watcher *w;
};

struct endpoint {
    char *host;
    uint16_t port;
};

static void endpoint_free(struct endpoint *e) {
    if (e) free(e->host);
    free(e);
}

static void pod_state_free(struct pod_state *p) {
    for (size_t i = 0; p && i < p->n; i++) free(p->c[i].name);
    if (p) {
        free(p->c);
        free(p->ns);
        free(p->name);
    }
    free(p);
}

static void node_state_free(struct node_state *n) {
    if (!n) return;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&n->pods, &i, &k, &v);) pod_state_free(v);
    kite_map_release(&n->pods);
    free(n);
}

static struct ctr_state *find_ctr(struct pod_state *p, const char *name) {
    for (size_t i = 0; p && i < p->n; i++)
        if (strcmp(p->c[i].name, name) == 0) return &p->c[i];
    return NULL;
}

/* A new sample of a counter: the previous one moves back unless the new one is not newer, and
 * a counter that went down (a reset) keeps only the new one. */
static void advance(struct point *prev, struct point *cur, uint64_t cpu_ns, int64_t ts) {
    if (cur->ts && ts <= cur->ts) return;
    if (cur->ts && cpu_ns >= cur->cpu_ns) *prev = *cur;
    else *prev = (struct point){0};
    *cur = (struct point){cpu_ns, ts};
}

/* Folds a node's scrape into its state (mu held). */
static void store_batch(struct kite_metrics_api *m, const char *node, const struct mapi_batch *b) {
    struct node_state *n = kite_map_get(&m->nodes, node);
    if (!n) {
        n = kite_calloc(1, sizeof *n);
        kite_map_put(&m->nodes, node, n);
    }
    n->seen = m->cycle;
    if (b->node_has_cpu) {
        advance(&n->prev, &n->cur, b->node_cpu_ns, b->node_cpu_ts);
        n->has_cpu = true;
    }
    n->has_mem = b->node_has_mem;
    n->mem = b->node_mem;
    n->mem_ts = b->node_mem_ts;
    struct kite_map pods = {0};
    for (size_t i = 0; i < b->n; i++) {
        const struct mapi_ctr *c = &b->c[i];
        if (!c->has_cpu && !c->has_mem) continue;
        _cleanup_free_ char *key = kite_asprintf("%s/%s", c->ns, c->pod);
        struct pod_state *np = kite_map_get(&pods, key);
        if (!np) {
            np = kite_calloc(1, sizeof *np);
            np->ns = kite_strdup(c->ns);
            np->name = kite_strdup(c->pod);
            kite_map_put(&pods, key, np);
        }
        struct ctr_state *old = find_ctr(kite_map_get(&n->pods, key), c->name);
        np->c = kite_realloc(np->c, (np->n + 1) * sizeof *np->c);
        struct ctr_state *s = &np->c[np->n++];
        *s = (struct ctr_state){.name = kite_strdup(c->name), .start_ns = c->start_ns};
        if (old && old->start_ns == c->start_ns) {
            s->prev = old->prev;
            s->cur = old->cur;
        }
        if (c->has_cpu) advance(&s->prev, &s->cur, c->cpu_ns, c->cpu_ts);
        s->has_mem = c->has_mem;
        s->mem = c->mem;
        s->mem_ts = c->mem_ts;
    }
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&n->pods, &i, &k, &v);) pod_state_free(v);
    kite_map_release(&n->pods);
    n->pods = pods;
}

/* ---- scraping ------------------------------------------------------------------------ */

struct target {
    char *name, *host;
    uint16_t port;
    struct mapi_batch batch;
    int err;
};

struct cycle {
    struct target *t;
    size_t n;
    size_t next; /* under mu */
    pthread_mutex_t mu;
    const char *cert, *key;
    int timeout_ms;
    struct kite_clock *clock;
};

/* The node's address and agent port as the log proxy picks them; false when it has none or is
 * not Ready. */
static bool node_target(json_object *node, struct target *t) {
    json_object *st = kite_obj_get(node, "status"), *conds = kite_obj_get(st, "conditions");
    bool ready = false;
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(kite_obj_str(c, "type"), "Ready")) ready = kite_streq(kite_obj_str(c, "status"), "True");
    }
    int port = 0;
    const char *addr = kite_apiserver_node_address(node, &port);
    if (!ready || !addr || !port) return false;
    t->name = kite_strdup(kite_meta_str(node, "name"));
    t->host = kite_strdup(addr);
    t->port = (uint16_t)port;
    return true;
}

static void scrape_one(struct cycle *cy, struct target *t) {
    struct kite_http_fetch_options fo = {.host = t->host, .port = t->port, .path = "/metrics/resource",
                                         .cert_pem = cy->cert, .key_pem = cy->key, .timeout_ms = cy->timeout_ms,
                                         .body_timeout_ms = cy->timeout_ms};
    struct kite_http_fetch *f = NULL;
    int code = 0;
    int r = kite_http_fetch_open(&fo, &f, &code);
    if (r < 0) {
        t->err = r;
        return;
    }
    struct kite_buf b = {0};
    char chunk[16384];
    ssize_t n;
    int64_t deadline = kite_now_mono(cy->clock) + (int64_t)cy->timeout_ms * 1000000;
    while ((n = kite_http_fetch_read(f, chunk, sizeof chunk)) > 0) {
        if (b.len + (size_t)n > KITE_METRICS_SCRAPE_MAX_BYTES || kite_now_mono(cy->clock) > deadline) {
            n = -EFBIG;
            break;
        }
        kite_buf_append(&b, chunk, (size_t)n);
    }
    kite_http_fetch_close(f);
    if (n < 0 || code != 200) t->err = n < 0 ? (int)n : -EPROTO;
    else if (kite_apiserver_mapi_parse(b.p ? b.p : "", b.len, kite_now_wall(cy->clock), &t->batch) < 0) t->err = -EBADMSG;
    kite_buf_release(&b);
}

static void *scrape_worker(void *ud) {
    struct cycle *cy = ud;
    for (;;) {
        pthread_mutex_lock(&cy->mu);
        size_t i = cy->next < cy->n ? cy->next++ : SIZE_MAX;
        pthread_mutex_unlock(&cy->mu);
        if (i == SIZE_MAX) return NULL;
        scrape_one(cy, &cy->t[i]);
    }
}

/* One Node as listed or changed: its endpoint is kept while it is Ready with one. The record's
 * parse is used when another reader made it, else a parse of its own is dropped at once (keeping
 * one per Node would hold a tree for each of 150k nodes). */
static void target_apply(struct kite_metrics_api *m, struct kite_record *rec, bool deleted) {
    json_object *o = kite_record_cache(rec), *own = o ? NULL : kite_apiserver_record_parse(rec);
    if (!o) o = own;
    const char *name = kite_meta_str(o, "name");
    struct target t = {0};
    if (name && !deleted && node_target(o, &t)) {
        struct endpoint *e = kite_calloc(1, sizeof *e);
        e->host = TAKE_PTR(t.host);
        e->port = t.port;
        endpoint_free(kite_map_put(&m->targets, name, e));
    } else if (name) {
        endpoint_free(kite_map_del(&m->targets, name));
    }
    free(t.name);
    json_object_put(own);
}

static void targets_clear(struct kite_metrics_api *m) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&m->targets, &i, &k, &v);) endpoint_free(v);
    kite_map_release(&m->targets);
}

/* Brings the targets up to date: the watch's events since the last cycle, or a list and a new
 * watch at the first cycle and after the watcher fell behind. */
static void targets_sync(struct kite_metrics_api *m) {
    struct kite_apiserver *s = m->srv;
    const struct kite_resource *nodes = kite_registry_find("", "v1", "nodes");
    if (!nodes) return;
    struct kite_wcache *c = kite_apiserver_storage_cache(s, nodes);
    if (m->w) {
        struct kite_watch_event evs[64];
        int k;
        while ((k = kite_watcher_next(m->w, evs, KITE_ARRAY_SIZE(evs))) > 0)
            for (int i = 0; i < k; i++) {
                target_apply(m, evs[i].rec, evs[i].type == KITE_EV_DELETED);
                kite_record_unref(evs[i].rec);
                kite_record_unref(evs[i].prev);
            }
        if (k == 0) return;
        kite_watcher_close(TAKE_PTR(m->w));
        targets_clear(m);
    }
    struct kite_record **recs = NULL;
    size_t nrec = 0;
    int64_t rev = 0;
    _cleanup_free_ char *prefix = kite_object_prefix(nodes, NULL);
    if (kite_wcache_list(c, prefix, NULL, 0, NULL, NULL, &recs, &nrec, &rev, NULL) < 0) return;
    for (size_t i = 0; i < nrec; i++) {
        target_apply(m, recs[i], false);
        kite_record_unref(recs[i]);
    }
    free(recs);
    /* a cycle takes what queued in one resolution: room for 150k nodes' status reports */
    if (kite_wcache_watch(c, prefix, rev, 1u << 20, (size_t)256 << 20, NULL, NULL, NULL, &m->w) < 0) m->w = NULL;
}

static void scrape_all(struct kite_metrics_api *m) {
    struct kite_apiserver *s = m->srv;
    targets_sync(m);
    struct cycle cy = {.t = kite_calloc(m->targets.len ? m->targets.len : 1, sizeof *cy.t), .clock = s->clock};
    const char *tk;
    void *tv;
    for (size_t i = 0; kite_map_next(&m->targets, &i, &tk, &tv);) {
        const struct endpoint *e = tv;
        cy.t[cy.n++] = (struct target){.name = kite_strdup(tk), .host = kite_strdup(e->host), .port = e->port};
    }
    _cleanup_free_ char *cert = NULL, *key = NULL;
    bool creds = cy.n && kite_apiserver_kubelet_client(s->data_dir, &cert, &key, NULL) == 0;
    if (creds) {
        cy.cert = cert;
        cy.key = key;
        /* a scrape ends before the next is due, as metrics-server's (0.9 x resolution), and
         * within KITE_METRICS_SCRAPE_TIMEOUT_MS */
        int64_t t = m->resolution_ns / 1000000 * 9 / 10;
        cy.timeout_ms = (int)KITE_MIN(t > 0 ? t : 1, (int64_t)KITE_METRICS_SCRAPE_TIMEOUT_MS);
        pthread_mutex_init(&cy.mu, NULL);
        size_t nt = KITE_MIN(cy.n, (size_t)KITE_METRICS_SCRAPE_PARALLEL);
        pthread_t th[KITE_METRICS_SCRAPE_PARALLEL];
        size_t started = 0;
        for (size_t i = 0; i < nt; i++)
            if (pthread_create(&th[started], NULL, scrape_worker, &cy) == 0) started++;
        if (!started) scrape_worker(&cy);
        for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
        pthread_mutex_destroy(&cy.mu);
    }
    pthread_mutex_lock(&m->mu);
    m->cycle++;
    for (size_t i = 0; creds && i < cy.n; i++) {
        if (cy.t[i].err < 0) {
            /* said once when a node that was scraped stops answering, not at every period */
            if (kite_map_get(&m->nodes, cy.t[i].name))
                log_warn("metrics", "scraping node %s (%s:%u) failed: %s; its metrics are dropped until it answers",
                         cy.t[i].name, cy.t[i].host, cy.t[i].port, strerror(-cy.t[i].err));
            log_debug("metrics", "scraping node %s (%s:%u): %s", cy.t[i].name, cy.t[i].host, cy.t[i].port,
                      strerror(-cy.t[i].err));
            continue;
        }
        store_batch(m, cy.t[i].name, &cy.t[i].batch);
    }
    /* nodes not scraped this time (gone, not Ready, failed) lose their samples */
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&m->nodes, &i, &k, &v);) {
        struct node_state *n = v;
        if (n->seen != m->cycle) node_state_free(kite_map_del(&m->nodes, k));
    }
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < cy.n; i++) {
        free(cy.t[i].name);
        free(cy.t[i].host);
        kite_apiserver_mapi_batch_release(&cy.t[i].batch);
    }
    free(cy.t);
}

static void *scrape_thread(void *ud) {
    struct kite_metrics_api *m = ud;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        pthread_mutex_unlock(&m->mu);
        int64_t begin = kite_now_mono(m->srv->clock);
        scrape_all(m);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t wait = m->resolution_ns - (kite_now_mono(m->srv->clock) - begin);
        if (wait < 0) wait = 0;
        until.tv_sec += wait / KITE_NS_PER_SEC;
        until.tv_nsec += wait % KITE_NS_PER_SEC;
        if (until.tv_nsec >= KITE_NS_PER_SEC) {
            until.tv_sec++;
            until.tv_nsec -= KITE_NS_PER_SEC;
        }
        pthread_mutex_lock(&m->mu);
        while (!m->stop && pthread_cond_timedwait(&m->cond, &m->mu, &until) == 0) {}
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int kite_apiserver_metrics_api_start(struct kite_apiserver *s, int64_t resolution_ns) {
    struct kite_metrics_api *m = kite_calloc(1, sizeof *m);
    m->srv = s;
    m->resolution_ns = resolution_ns > 0 ? resolution_ns : KITE_METRICS_RESOLUTION_NS;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    int r = pthread_create(&m->thread, NULL, scrape_thread, m);
    m->started = r == 0;
    /* published: the HTTP workers serve already, and a request may come meanwhile */
    __atomic_store_n(&s->metrics_api, m, __ATOMIC_RELEASE);
    return -r;
}

void kite_apiserver_metrics_api_stop(struct kite_apiserver *s) {
    struct kite_metrics_api *m = TAKE_PTR(s->metrics_api);
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->mu);
    if (m->started) pthread_join(m->thread, NULL);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&m->nodes, &i, &k, &v);) node_state_free(v);
    kite_map_release(&m->nodes);
    kite_watcher_close(m->w);
    targets_clear(m);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cond);
    free(m);
}

/* ---- rendering ----------------------------------------------------------------------- */

/* metav1.Time */
static void put_time(struct kite_buf *b, int64_t ns) {
    char s[21];
    kite_time_format(ns, s);
    kite_buf_printf(b, "\"%s\"", s);
}

/* The CPU rate over a counter's two samples (nanocores), false without two. */
static bool rate(const struct point *prev, const struct point *cur, uint64_t *ret_nanocores, int64_t *ret_window) {
    if (!prev->ts || cur->ts <= prev->ts || cur->cpu_ns < prev->cpu_ns) return false;
    int64_t w = cur->ts - prev->ts;
    *ret_nanocores = (uint64_t)((long double)(cur->cpu_ns - prev->cpu_ns) * KITE_NS_PER_SEC / (long double)w);
    *ret_window = w;
    return true;
}

static void usage(struct kite_buf *b, uint64_t nanocores, uint64_t mem) {
    char cpu[32], memory[32];
    kite_apiserver_mapi_format_cpu(nanocores, cpu);
    kite_apiserver_mapi_format_memory(mem, memory);
    kite_buf_printf(b, "{\"cpu\":\"%s\",\"memory\":\"%s\"}", cpu, memory);
}

/* A string as a JSON value (names are DNS names, labels anything). */
static void put_str(struct kite_buf *b, const char *v) {
    json_object *j = json_object_new_string(v ? v : "");
    kite_buf_puts(b, json_object_to_json_string_ext(j, JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(j);
}

/* metadata as metrics-server writes it: name, namespace, creationTimestamp (now), the object's labels. */
static void put_meta(struct kite_buf *b, const char *ns, const char *name, json_object *obj, int64_t now) {
    kite_buf_puts(b, "\"metadata\":{\"name\":");
    put_str(b, name);
    if (ns) {
        kite_buf_puts(b, ",\"namespace\":");
        put_str(b, ns);
    }
    kite_buf_puts(b, ",\"creationTimestamp\":");
    put_time(b, now);
    /* obj is a cached parse shared between threads: read it, never print it (json-c prints
     * into the object's own buffer) */
    json_object *labels = kite_obj_get(kite_obj_meta(obj), "labels");
    if (labels && json_object_is_type(labels, json_type_object)) {
        kite_buf_puts(b, ",\"labels\":{");
        bool first = true;
        json_object_object_foreach(labels, k, v) {
            if (!first) kite_buf_putc(b, ',');
            put_str(b, k);
            kite_buf_putc(b, ':');
            put_str(b, json_object_get_string(v));
            first = false;
        }
        kite_buf_putc(b, '}');
    }
    kite_buf_putc(b, '}');
}

/* One NodeMetrics (mu held), or false when the node has no rate yet. */
static bool node_item(struct kite_buf *b, const struct node_state *n, json_object *node, int64_t now) {
    uint64_t nc;
    int64_t w;
    if (!n->has_cpu || !n->has_mem || !rate(&n->prev, &n->cur, &nc, &w)) return false;
    char win[64];
    kite_apiserver_mapi_format_duration(w, win);
    kite_buf_puts(b, "{\"kind\":\"NodeMetrics\",\"apiVersion\":\"" MAPI_GV "\",");
    put_meta(b, NULL, kite_meta_str(node, "name"), node, now);
    kite_buf_puts(b, ",\"timestamp\":");
    put_time(b, n->cur.ts);
    kite_buf_printf(b, ",\"window\":\"%s\",\"usage\":", win);
    usage(b, nc, n->mem);
    kite_buf_putc(b, '}');
    return true;
}

/* One PodMetrics (mu held), or false when a container of it has no rate yet. */
static bool pod_item(struct kite_buf *b, const struct pod_state *p, json_object *pod, int64_t now) {
    if (!p->n) return false;
    struct kite_buf cs = {0};
    int64_t ts = 0, win = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct ctr_state *c = &p->c[i];
        uint64_t nc;
        int64_t w;
        if (!c->has_mem || !rate(&c->prev, &c->cur, &nc, &w)) {
            kite_buf_release(&cs);
            return false;
        }
        if (c->cur.ts > ts) {
            ts = c->cur.ts;
            win = w;
        }
        kite_buf_puts(&cs, i ? ",{\"name\":" : "{\"name\":");
        put_str(&cs, c->name);
        kite_buf_puts(&cs, ",\"usage\":");
        usage(&cs, nc, c->mem);
        kite_buf_putc(&cs, '}');
    }
    kite_buf_puts(b, "{\"kind\":\"PodMetrics\",\"apiVersion\":\"" MAPI_GV "\",");
    put_meta(b, p->ns, p->name, pod, now);
    char w[64];
    kite_apiserver_mapi_format_duration(win, w);
    kite_buf_puts(b, ",\"timestamp\":");
    put_time(b, ts);
    kite_buf_printf(b, ",\"window\":\"%s\",\"containers\":[", w);
    kite_buf_append(b, cs.p ? cs.p : "", cs.len);
    kite_buf_puts(b, "]}");
    kite_buf_release(&cs);
    return true;
}

/* The pod's metrics, searched on every node (mu held); NULL when none. */
static const struct pod_state *find_pod(struct kite_metrics_api *m, const char *ns, const char *name) {
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&m->nodes, &i, &k, &v);) {
        const struct pod_state *p = kite_map_get(&((struct node_state *)v)->pods, key);
        if (p) return p;
    }
    return NULL;
}

/* ---- serving ------------------------------------------------------------------------- */

static struct kite_record **list_cache(struct kite_apiserver *s, const char *plural, const char *ns, size_t *n) {
    const struct kite_resource *r = kite_registry_find("", "v1", plural);
    struct kite_record **recs = NULL;
    _cleanup_free_ char *prefix = kite_object_prefix(r, ns);
    *n = 0;
    if (kite_wcache_list(kite_apiserver_storage_cache(s, r), prefix, NULL, 0, NULL, NULL, &recs, n, NULL, NULL) < 0) *n = 0;
    return recs;
}

static void not_found(struct req *rq, const char *what, const char *name) {
    struct status_details d = {.name = name, .group = MAPI_GROUP, .kind = what};
    kite_apiserver_reply_error_about(rq, 404, "NotFound", &d, "%s.%s \"%s\" not found", what, MAPI_GROUP, name);
}

static void send_json(struct req *rq, struct kite_buf *b) {
    kite_buf_putc(b, '\n');
    size_t len;
    char *p = kite_buf_detach(b, &len);
    kite_apiserver_reply(rq, 200, "application/json", p, len);
}

/* GET /apis/metrics.k8s.io/v1beta1/{nodes[/NAME] | pods | namespaces/NS/pods[/NAME]} */
bool kite_apiserver_metrics_api_handle(struct req *rq) {
    const char *p = rq->http->path, *base = "/apis/" MAPI_GV "/";
    if (!kite_startswith(p, base)) return false;
    _cleanup_free_ char *path = kite_strdup(p + strlen(base));
    char *seg[5];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == KITE_ARRAY_SIZE(seg)) {
            n++;
            break;
        }
        seg[n++] = t;
    }
    size_t i = 0;
    rq->group = kite_strdup(MAPI_GROUP);
    rq->version = kite_strdup(MAPI_VERSION);
    if (n >= 3 && strcmp(seg[0], "namespaces") == 0) {
        rq->ns = kite_strdup(seg[1]);
        i = 2;
    }
    if (i < n && strcmp(seg[i], "nodes") == 0 && !rq->ns) rq->res = &NODE_METRICS;
    else if (i < n && strcmp(seg[i], "pods") == 0) rq->res = &POD_METRICS;
    if (!rq->res || n > i + 2) {
        rq->res = NULL;
        rq->verb = "get";
        kite_apiserver_reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
        return true;
    }
    if (n == i + 2) rq->name = kite_strdup(seg[i + 1]);
    const char *meth = rq->http->method;
    bool watch = kite_apiserver_query_true(kite_http_query(rq->http, "watch"));
    rq->verb = strcmp(meth, "GET") == 0 || strcmp(meth, "HEAD") == 0 ? (rq->name ? "get" : watch ? "watch" : "list")
                                                                     : NULL;
    if (!rq->verb || watch) {
        if (!rq->verb) rq->verb = "create";
        kite_apiserver_reply_error(rq, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        return true;
    }
    if (!kite_apiserver_authorize(rq)) return true;
    struct kite_label_selector *ls = NULL;
    struct kite_field_selector *fs = NULL;
    if (!rq->name && !kite_apiserver_parse_selectors(rq, &ls, &fs)) return true;
    struct kite_apiserver *s = rq->srv;
    struct kite_metrics_api *m = __atomic_load_n(&s->metrics_api, __ATOMIC_ACQUIRE);
    int64_t now = kite_now_wall(s->clock);
    bool nodes = rq->res == &NODE_METRICS;
    const struct kite_resource *obj_row = kite_registry_find("", "v1", nodes ? "nodes" : "pods");
    struct kite_buf b = {0};
    if (rq->name) {
        json_object *obj = kite_apiserver_lookup(s, obj_row, rq->ns, rq->name);
        bool ok = false;
        if (obj && m) {
            pthread_mutex_lock(&m->mu);
            if (nodes) {
                const struct node_state *ns = kite_map_get(&m->nodes, rq->name);
                ok = ns && node_item(&b, ns, obj, now);
            } else {
                const struct pod_state *ps = find_pod(m, rq->ns, rq->name);
                ok = ps && pod_item(&b, ps, obj, now);
            }
            pthread_mutex_unlock(&m->mu);
        }
        json_object_put(obj);
        if (!ok) {
            kite_buf_release(&b);
            if (nodes) {
                not_found(rq, "nodemetrics", rq->name);
            } else {
                _cleanup_free_ char *full = kite_asprintf("%s/%s", rq->ns, rq->name);
                not_found(rq, "podmetrics", full);
            }
            return true;
        }
        send_json(rq, &b);
        return true;
    }
    size_t nrec = 0;
    struct kite_record **recs = list_cache(s, nodes ? "nodes" : "pods", rq->ns, &nrec);
    kite_buf_printf(&b, "{\"kind\":\"%s\",\"apiVersion\":\"" MAPI_GV "\",\"metadata\":{},\"items\":[",
                    rq->res->list_kind);
    bool first = true;
    if (m) pthread_mutex_lock(&m->mu);
    for (size_t k = 0; k < nrec; k++) {
        json_object *obj = kite_apiserver_record_object(recs[k]);
        if (!m || !kite_apiserver_object_matches(obj_row, obj, ls, fs)) continue;
        size_t mark = b.len;
        if (!first) kite_buf_putc(&b, ',');
        bool ok;
        if (nodes) {
            const struct node_state *ns = kite_map_get(&m->nodes, kite_meta_str(obj, "name"));
            ok = ns && node_item(&b, ns, obj, now);
        } else {
            const struct pod_state *ps = find_pod(m, kite_meta_str(obj, "namespace"), kite_meta_str(obj, "name"));
            ok = ps && pod_item(&b, ps, obj, now);
        }
        if (ok) first = false;
        else b.len = mark;
    }
    if (m) pthread_mutex_unlock(&m->mu);
    for (size_t k = 0; k < nrec; k++) kite_record_unref(recs[k]);
    free(recs);
    kite_label_selector_free(ls);
    kite_field_selector_free(fs);
    kite_buf_puts(&b, "]}");
    send_json(rq, &b);
    return true;
}

/* ---- discovery ----------------------------------------------------------------------- */

void kite_apiserver_metrics_api_discovery_agg(struct kite_buf *b) {
    kite_buf_puts(b, "{\"metadata\":{\"name\":\"" MAPI_GROUP "\",\"creationTimestamp\":null},\"versions\":[{\"version\":\"" MAPI_VERSION "\",\"resources\":["
                     "{\"resource\":\"nodes\",\"responseKind\":{\"group\":\"" MAPI_GROUP "\",\"version\":\"" MAPI_VERSION "\",\"kind\":\"NodeMetrics\"},"
                     "\"scope\":\"Cluster\",\"singularResource\":\"nodemetrics\",\"verbs\":[\"get\",\"list\"]},"
                     "{\"resource\":\"pods\",\"responseKind\":{\"group\":\"" MAPI_GROUP "\",\"version\":\"" MAPI_VERSION "\",\"kind\":\"PodMetrics\"},"
                     "\"scope\":\"Namespaced\",\"singularResource\":\"podmetrics\",\"verbs\":[\"get\",\"list\"]}],\"freshness\":\"Current\"}]}");
}

void kite_apiserver_metrics_api_discovery_group(struct kite_buf *b) {
    kite_buf_puts(b, "{\"name\":\"" MAPI_GROUP "\",\"versions\":[{\"groupVersion\":\"" MAPI_GV "\",\"version\":\"" MAPI_VERSION "\"}],"
                     "\"preferredVersion\":{\"groupVersion\":\"" MAPI_GV "\",\"version\":\"" MAPI_VERSION "\"}}");
}

bool kite_apiserver_metrics_api_discovery(struct req *rq) {
    const char *p = rq->http->path;
    struct kite_buf b = {0};
    if (strcmp(p, "/apis/" MAPI_GROUP) == 0 || strcmp(p, "/apis/" MAPI_GROUP "/") == 0) {
        kite_buf_puts(&b, "{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",");
        struct kite_buf g = {0};
        kite_apiserver_metrics_api_discovery_group(&g);
        kite_buf_puts(&b, g.p + 1);
        kite_buf_release(&g);
    } else if (strcmp(p, "/apis/" MAPI_GV) == 0 || strcmp(p, "/apis/" MAPI_GV "/") == 0) {
        kite_buf_puts(&b, "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"" MAPI_GV "\",\"resources\":["
                          "{\"name\":\"nodes\",\"singularName\":\"\",\"namespaced\":false,\"kind\":\"NodeMetrics\",\"verbs\":[\"get\",\"list\"]},"
                          "{\"name\":\"pods\",\"singularName\":\"\",\"namespaced\":true,\"kind\":\"PodMetrics\",\"verbs\":[\"get\",\"list\"]}]}");
    } else {
        return false;
    }
    rq->verb = "get";
    size_t len;
    char *body = kite_buf_detach(&b, &len);
    kite_apiserver_reply(rq, 200, "application/json", body, len);
    return true;
}
