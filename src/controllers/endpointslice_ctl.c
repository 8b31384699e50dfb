/* The EndpointSlice controller (endpointslice.h) around the reconcile: informers on services,
 * pods, the slices it manages and nodes (for zones) keep a cache under one lock; every change
 * queues the Services it concerns, and the runner reconciles the queue, so a pod's
 * readiness reaches its slices as soon as the watch delivers it. The slices it writes go into
 * the cache from the write's answer at once (the informer's echo, older or equal, is then
 * ignored), so a reconcile that follows never works from a version it replaced. A failed
 * write queues the Service again after its back-off (1 s doubling to KITE_EPS_RETRY_MAX_S).
 * It runs on the framework (framework.h): shared informers, its keyed work queue, one runner. */
#include "client/informer.h"
#include "framework/framework.h"
#include "framework/workqueue.h"
#include "framework/ctlutil.h"
#include "controllers/endpointslice.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"

#include <pthread.h>
#include <stdio.h>

#define LOG "endpointslice-controller"
#define SLICES_PATH "/apis/discovery.k8s.io/v1"
enum { INF_SERVICES, INF_PODS, INF_SLICES, INF_NODES, INF_COUNT };

struct kite_epsctl {
    struct kite_client *client;
    struct kite_clock *clock;
    size_t max;
    pthread_mutex_t mu;
    unsigned synced; /* bit per informer */
    struct kite_map svcs, pods, slices; /* "ns/name" -> json_object (owned) */
    struct kite_map zones;              /* node -> zone (malloc'ed) */
    struct kite_wq wq;                  /* service keys, with their back-off */
};

/* ---- the queue (mu held) ------------------------------------------------------------------- */

static void enqueue(struct kite_epsctl *c, const char *key) { kite_wq_add(&c->wq, key, kite_now_mono(c->clock)); }

static void enqueue_ns_name(struct kite_epsctl *c, const char *ns, const char *name) {
    if (!ns || !name || !*name) return;
    char key[512];
    if ((size_t)snprintf(key, sizeof key, "%s/%s", ns, name) < sizeof key) enqueue(c, key);
}

static void enqueue_all(struct kite_epsctl *c) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->svcs, &i, &k, &v);) enqueue(c, k);
    /* slices of Services that are gone */
    for (size_t i = 0; kite_map_next(&c->slices, &i, &k, &v);)
        enqueue_ns_name(c, kite_meta_str(v, "namespace"),
                        kite_obj_str(kite_obj_get(kite_obj_meta(v), "labels"), KITE_EPS_LABEL_SERVICE_NAME));
}

/* ---- the cache (informer threads) -------------------------------------------------------------- */

/* The cache holds its own copies: json-c's reference counts are not atomic, and the informer
 * and the write answers release theirs on other threads. Every reference to a cached object is
 * taken and dropped under mu. */
static json_object *copy(json_object *o) {
    json_object *c = NULL;
    json_object_deep_copy(o, &c, NULL);
    return c;
}

static void cache_put(struct kite_map *m, json_object *obj) {
    _cleanup_free_ char *key = kite_informer_key(obj);
    if (key) json_object_put(kite_map_put(m, key, copy(obj)));
}
static void cache_del(struct kite_map *m, json_object *obj) {
    _cleanup_free_ char *key = kite_informer_key(obj);
    if (key) json_object_put(kite_map_del(m, key));
}

static void svc_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_put(&c->svcs, o);
    enqueue_ns_name(c, kite_meta_str(o, "namespace"), kite_meta_str(o, "name"));
    pthread_mutex_unlock(&c->mu);
}
static void svc_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_del(&c->svcs, o);
    enqueue_ns_name(c, kite_meta_str(o, "namespace"), kite_meta_str(o, "name"));
    pthread_mutex_unlock(&c->mu);
}

/* Queues the Services of pod's namespace that select it (before or after a change). */
static void pod_changed(struct kite_epsctl *c, json_object *old, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace");
    json_object *labels = kite_obj_get(kite_obj_meta(pod), "labels");
    json_object *old_labels = old ? kite_obj_get(kite_obj_meta(old), "labels") : NULL;
    const char *k;
    void *v;
    for (size_t i = 0; ns && kite_map_next(&c->svcs, &i, &k, &v);) {
        if (!kite_streq(kite_meta_str(v, "namespace"), ns)) continue;
        json_object *sel = kite_eps_selector(v);
        if (kite_eps_selects(sel, labels) || (old && kite_eps_selects(sel, old_labels))) enqueue(c, k);
    }
}

static void pod_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_put(&c->pods, o);
    pod_changed(c, NULL, o);
    pthread_mutex_unlock(&c->mu);
}
static void pod_update(void *ud, json_object *old, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_put(&c->pods, o);
    pod_changed(c, old, o);
    pthread_mutex_unlock(&c->mu);
}
static void pod_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_del(&c->pods, o);
    pod_changed(c, NULL, o);
    pthread_mutex_unlock(&c->mu);
}

/* A slice version newer than the cached one (a write's answer may be ahead of the watch). */
static void slice_put(struct kite_epsctl *c, json_object *o) {
    _cleanup_free_ char *key = kite_informer_key(o);
    if (!key) return;
    json_object *have = kite_map_get(&c->slices, key);
    if (have && kite_ctl_rv(have) > kite_ctl_rv(o)) return;
    json_object_put(kite_map_put(&c->slices, key, copy(o)));
}

static void slice_touched(struct kite_epsctl *c, json_object *o) {
    enqueue_ns_name(c, kite_meta_str(o, "namespace"),
                    kite_obj_str(kite_obj_get(kite_obj_meta(o), "labels"), KITE_EPS_LABEL_SERVICE_NAME));
}
static void slice_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    slice_put(c, o);
    slice_touched(c, o);
    pthread_mutex_unlock(&c->mu);
}
static void slice_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_del(&c->slices, o);
    slice_touched(c, o);
    pthread_mutex_unlock(&c->mu);
}

static void node_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    const char *name = kite_meta_str(o, "name");
    const char *zone = kite_obj_str(kite_obj_get(kite_obj_meta(o), "labels"), KITE_EPS_LABEL_ZONE);
    if (!name) return;
    pthread_mutex_lock(&c->mu);
    const char *have = kite_map_get(&c->zones, name);
    if (!kite_streq(have ? have : "", zone ? zone : "")) {
        free(kite_map_put(&c->zones, name, zone ? kite_strdup(zone) : kite_strdup("")));
        if (c->synced == (1u << INF_COUNT) - 1) enqueue_all(c); /* rare: endpoints on it change zone */
    }
    pthread_mutex_unlock(&c->mu);
}
static void node_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    const char *name = kite_meta_str(o, "name");
    if (!name) return;
    pthread_mutex_lock(&c->mu);
    free(kite_map_del(&c->zones, name));
    pthread_mutex_unlock(&c->mu);
}

static void synced(void *ud, uintptr_t which) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    c->synced |= 1u << which;
    /* after every (re)list: reconcile everything once all caches are current */
    if (c->synced == (1u << INF_COUNT) - 1) enqueue_all(c);
    pthread_mutex_unlock(&c->mu);
}

/* ---- the worker ------------------------------------------------------------------------------ */

static const char *zone_of(void *ud, const char *node) {
    struct kite_epsctl *c = ud;
    const char *z = kite_map_get(&c->zones, node);
    return z && *z ? z : NULL;
}

struct snapshot {
    json_object *svc;
    json_object **pods, **slices;
    size_t n_pods, n_slices;
};

static void snapshot_take(struct kite_epsctl *c, const char *key, struct snapshot *s) {
    const char *slash = strchr(key, '/');
    size_t nsl = slash ? (size_t)(slash - key) : 0;
    const char *name = slash ? slash + 1 : key;
    *s = (struct snapshot){.svc = json_object_get(kite_map_get(&c->svcs, key))};
    const char *k;
    void *v;
    if (s->svc && kite_eps_selector(s->svc))
        for (size_t i = 0; kite_map_next(&c->pods, &i, &k, &v);) {
            if (strncmp(k, key, nsl) != 0 || k[nsl] != '/') continue;
            s->pods = kite_realloc(s->pods, (s->n_pods + 1) * sizeof *s->pods);
            s->pods[s->n_pods++] = json_object_get(v);
        }
    for (size_t i = 0; kite_map_next(&c->slices, &i, &k, &v);) {
        json_object *labels = kite_obj_get(kite_obj_meta(v), "labels");
        if (strncmp(k, key, nsl) != 0 || k[nsl] != '/' || !kite_streq(kite_obj_str(labels, KITE_EPS_LABEL_SERVICE_NAME), name) ||
            !kite_streq(kite_obj_str(labels, KITE_EPS_LABEL_MANAGED_BY), KITE_EPS_MANAGED_BY))
            continue;
        s->slices = kite_realloc(s->slices, (s->n_slices + 1) * sizeof *s->slices);
        s->slices[s->n_slices++] = json_object_get(v);
    }
}

static void snapshot_release(struct snapshot *s) {
    json_object_put(s->svc);
    for (size_t i = 0; i < s->n_pods; i++) json_object_put(s->pods[i]);
    for (size_t i = 0; i < s->n_slices; i++) json_object_put(s->slices[i]);
    free(s->pods);
    free(s->slices);
}

static void written(void *ud, json_object *slice) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->mu);
    slice_put(c, slice);
    pthread_mutex_unlock(&c->mu);
}

static void deleted(void *ud, const char *ns, const char *name) {
    struct kite_epsctl *c = ud;
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&c->mu);
    json_object_put(kite_map_del(&c->slices, key));
    pthread_mutex_unlock(&c->mu);
}

/* Called with mu held; drops it for the writes only (the plan holds no cached object). */
static void sync_one(struct kite_epsctl *c, char *key) {
    struct snapshot s;
    snapshot_take(c, key, &s);
    struct kite_eps_plan plan;
    kite_eps_reconcile(s.svc, s.pods, s.n_pods, s.slices, s.n_slices, zone_of, c, c->max, &plan);
    snapshot_release(&s);
    int err = 0;
    if (plan.n_create || plan.n_update || plan.n_del) {
        pthread_mutex_unlock(&c->mu);
        _cleanup_free_ char *ns = kite_strndup(key, strchr(key, '/') ? (size_t)(strchr(key, '/') - key) : 0);
        err = kite_eps_apply(c->client, ns, &plan, written, deleted, c);
        pthread_mutex_lock(&c->mu);
    }
    kite_eps_plan_release(&plan);
    if (err == 0) {
        kite_wq_forget(&c->wq, key);
    } else {
        kite_wq_add_backoff(&c->wq, key, kite_now_mono(c->clock));
        if (err != -EEXIST) /* a conflict is settled by the watch's newer version, quietly */
            log_warn(LOG, "service %s: cannot update its endpoint slices: %s (will retry)", key, strerror(-err));
    }
}

/* Reconciles the Services due, once every cache is current: ns to the next one due (-1: none). */
static int64_t step(void *core) {
    struct kite_epsctl *c = core;
    pthread_mutex_lock(&c->mu);
    int64_t next = -1;
    if (c->synced == (1u << INF_COUNT) - 1) {
        char *key;
        while ((key = kite_wq_pop_due(&c->wq, kite_now_mono(c->clock)))) {
            sync_one(c, key); /* drops mu while it writes */
            free(key);
        }
        next = kite_wq_next(&c->wq, kite_now_mono(c->clock));
    }
    pthread_mutex_unlock(&c->mu);
    return next;
}

static bool pending(void *core) {
    struct kite_epsctl *c = core;
    pthread_mutex_lock(&c->mu);
    bool due = c->synced == (1u << INF_COUNT) - 1 && kite_wq_due(&c->wq, kite_now_mono(c->clock));
    pthread_mutex_unlock(&c->mu);
    return due;
}

static void epsctl_free(void *core) {
    struct kite_epsctl *c = core;
    struct kite_map *objs[] = {&c->svcs, &c->pods, &c->slices};
    const char *k;
    void *v;
    for (size_t m = 0; m < KITE_ARRAY_SIZE(objs); m++) {
        for (size_t i = 0; kite_map_next(objs[m], &i, &k, &v);) json_object_put(v);
        kite_map_release(objs[m]);
    }
    for (size_t i = 0; kite_map_next(&c->zones, &i, &k, &v);) free(v);
    kite_map_release(&c->zones);
    kite_wq_release(&c->wq);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int kite_epsctl_run(struct kite_ctl_group *g, const struct kite_epsctl_options *o) {
    struct kite_epsctl *c = kite_calloc(1, sizeof *c);
    c->client = kite_ctl_group_client(g);
    c->clock = kite_ctl_group_clock(g);
    c->max = o && o->max_per_slice ? o->max_per_slice : KITE_EPS_MAX_PER_SLICE;
    c->wq.backoff_base_ns = KITE_NS_PER_SEC;
    c->wq.backoff_max_ns = KITE_EPS_RETRY_MAX_S * KITE_NS_PER_SEC;
    pthread_mutex_init(&c->mu, NULL);
    static const struct kite_ctl_feed feeds[INF_COUNT] = {
        [INF_SERVICES] = {.path = "/api/v1/services", .upsert = svc_add, .del = svc_del, .synced = synced, .tag = INF_SERVICES},
        [INF_PODS] = {.path = "/api/v1/pods", .upsert = pod_add, .update = pod_update, .del = pod_del, .synced = synced,
                      .tag = INF_PODS},
        [INF_SLICES] = {.path = SLICES_PATH "/endpointslices",
                        .selector = "labelSelector=" "endpointslice.kubernetes.io%2Fmanaged-by%3D" KITE_EPS_MANAGED_BY,
                        .upsert = slice_add, .del = slice_del, .synced = synced, .tag = INF_SLICES},
        [INF_NODES] = {.path = "/api/v1/nodes", .project = kite_ctl_node_members, .upsert = node_add, .del = node_del, .synced = synced, .tag = INF_NODES},
    };
    struct kite_ctl_spec spec = {.name = "endpointslice", .step = step, .pending = pending, .free = epsctl_free,
                                 .feeds = feeds, .n_feeds = INF_COUNT};
    return kite_ctl_run(g, &spec, c);
}
