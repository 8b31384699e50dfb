/* The EndpointSlice controller (endpointslice.h) around the reconcile: informers on services,
 * pods, the slices it manages and nodes (for zones) keep a cache under one lock; every change
 * queues the Services it concerns, and the runner reconciles the queue, so a pod's
 * readiness reaches its slices as soon as the watch delivers it. The slices it writes go into
 * the cache from the write's answer at once (the informer's echo, older or equal, is then
 * ignored), so a reconcile that follows never works from a version it replaced. A failed
 * write queues the Service again after its back-off (1 s doubling to KITE_EPS_RETRY_MAX_S).
 * It runs on the framework (framework.h): shared informers, its keyed work queue, one runner;
 * the Services, the pods and the queue are the endpoints controller's too (svcpods.h). */
#include "client/informer.h"
#include "framework/framework.h"
#include "framework/workqueue.h"
#include "framework/ctlutil.h"
#include "controllers/endpointslice.h"
#include "controllers/svcpods.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#define LOG "endpointslice-controller"
#define SLICES_PATH "/apis/discovery.k8s.io/v1"
enum { INF_SERVICES, INF_PODS, INF_SLICES, INF_NODES, INF_COUNT };

struct kite_epsctl {
    struct kite_svcpods sp;  /* first: the lock, Services, pods and the queue of Service keys */
    struct kite_client *client;
    size_t max;
    struct kite_map slices;  /* "ns/name" -> json_object (owned) */
    struct kite_map zones;   /* node -> zone (malloc'ed) */
};
_Static_assert(offsetof(struct kite_epsctl, sp) == 0, "the handlers take the core as its kite_svcpods");

/* ---- the queue (mu held) ------------------------------------------------------------------- */

/* At a (re)list: the slices of Services that are gone. */
static void resync(void *core) {
    struct kite_epsctl *c = core;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->slices, &i, &k, &v);)
        kite_svcpods_enqueue_ns_name(&c->sp, kite_meta_str(v, "namespace"),
                                     kite_obj_str(kite_obj_get(kite_obj_meta(v), "labels"), KITE_EPS_LABEL_SERVICE_NAME));
}

/* ---- the slices' and nodes' caches (informer threads) ---------------------------------------- */

static void slice_touched(struct kite_epsctl *c, json_object *o) {
    kite_svcpods_enqueue_ns_name(&c->sp, kite_meta_str(o, "namespace"),
                                 kite_obj_str(kite_obj_get(kite_obj_meta(o), "labels"), KITE_EPS_LABEL_SERVICE_NAME));
}
static void slice_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->sp.mu);
    kite_svcpods_cache_put_newer(&c->slices, o);
    slice_touched(c, o);
    pthread_mutex_unlock(&c->sp.mu);
}
static void slice_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    pthread_mutex_lock(&c->sp.mu);
    kite_svcpods_cache_del(&c->slices, o);
    slice_touched(c, o);
    pthread_mutex_unlock(&c->sp.mu);
}

static void node_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    const char *name = kite_meta_str(o, "name");
    const char *zone = kite_obj_str(kite_obj_get(kite_obj_meta(o), "labels"), KITE_EPS_LABEL_ZONE);
    if (!name) return;
    pthread_mutex_lock(&c->sp.mu);
    const char *have = kite_map_get(&c->zones, name);
    if (!kite_streq(have ? have : "", zone ? zone : "")) {
        free(kite_map_put(&c->zones, name, zone ? kite_strdup(zone) : kite_strdup("")));
        if (kite_svcpods_ready(&c->sp)) kite_svcpods_enqueue_all(&c->sp); /* rare: endpoints on it change zone */
    }
    pthread_mutex_unlock(&c->sp.mu);
}
static void node_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epsctl *c = ud;
    const char *name = kite_meta_str(o, "name");
    if (!name) return;
    pthread_mutex_lock(&c->sp.mu);
    free(kite_map_del(&c->zones, name));
    pthread_mutex_unlock(&c->sp.mu);
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
    *s = (struct snapshot){.svc = json_object_get(kite_map_get(&c->sp.svcs, key))};
    s->pods = kite_svcpods_pods_for(&c->sp, key, s->svc, &s->n_pods);
    const char *k;
    void *v;
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
    pthread_mutex_lock(&c->sp.mu);
    kite_svcpods_cache_put_newer(&c->slices, slice);
    pthread_mutex_unlock(&c->sp.mu);
}

static void deleted(void *ud, const char *ns, const char *name) {
    struct kite_epsctl *c = ud;
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&c->sp.mu);
    json_object_put(kite_map_del(&c->slices, key));
    pthread_mutex_unlock(&c->sp.mu);
}

/* Called with mu held; drops it for the writes only (the plan holds no cached object). */
static void sync_one(void *core, const char *key) {
    struct kite_epsctl *c = core;
    struct snapshot s;
    snapshot_take(c, key, &s);
    struct kite_eps_plan plan;
    kite_eps_reconcile(s.svc, s.pods, s.n_pods, s.slices, s.n_slices, zone_of, c, c->max, &plan);
    snapshot_release(&s);
    int err = 0;
    if (plan.n_create || plan.n_update || plan.n_del) {
        pthread_mutex_unlock(&c->sp.mu);
        _cleanup_free_ char *ns = kite_strndup(key, strchr(key, '/') ? (size_t)(strchr(key, '/') - key) : 0);
        err = kite_eps_apply(c->client, ns, &plan, written, deleted, c);
        pthread_mutex_lock(&c->sp.mu);
    }
    kite_eps_plan_release(&plan);
    if (err == 0) {
        kite_svcpods_forget(&c->sp, key);
    } else {
        kite_svcpods_retry(&c->sp, key);
        if (err != -EEXIST) /* a conflict is settled by the watch's newer version, quietly */
            log_warn(LOG, "service %s: cannot update its endpoint slices: %s (will retry)", key, strerror(-err));
    }
}

static void epsctl_free(void *core) {
    struct kite_epsctl *c = core;
    kite_svcpods_cache_release(&c->slices);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->zones, &i, &k, &v);) free(v);
    kite_map_release(&c->zones);
    kite_svcpods_release(&c->sp);
    free(c);
}

int kite_epsctl_run(struct kite_ctl_group *g, const struct kite_epsctl_options *o) {
    struct kite_epsctl *c = kite_calloc(1, sizeof *c);
    kite_svcpods_init(&c->sp, kite_ctl_group_clock(g), INF_COUNT, KITE_EPS_RETRY_MAX_S * KITE_NS_PER_SEC);
    c->sp.sync = sync_one;
    c->sp.resync = resync;
    c->client = kite_ctl_group_client(g);
    c->max = o && o->max_per_slice ? o->max_per_slice : KITE_EPS_MAX_PER_SLICE;
    static const struct kite_ctl_feed feeds[INF_COUNT] = {
        [INF_SERVICES] = KITE_SVCPODS_FEED_SERVICES(INF_SERVICES),
        [INF_PODS] = KITE_SVCPODS_FEED_PODS(INF_PODS),
        [INF_SLICES] = {.path = SLICES_PATH "/endpointslices",
                        .selector = "labelSelector=" "endpointslice.kubernetes.io%2Fmanaged-by%3D" KITE_EPS_MANAGED_BY,
                        .upsert = slice_add, .del = slice_del, .synced = kite_svcpods_synced, .tag = INF_SLICES},
        [INF_NODES] = {.path = "/api/v1/nodes", .project = kite_ctl_node_members, .upsert = node_add, .del = node_del,
                       .synced = kite_svcpods_synced, .tag = INF_NODES},
    };
    struct kite_ctl_spec spec = {.name = "endpointslice", .step = kite_svcpods_step, .pending = kite_svcpods_pending,
                                 .free = epsctl_free, .feeds = feeds, .n_feeds = INF_COUNT};
    return kite_ctl_run(g, &spec, c);
}
