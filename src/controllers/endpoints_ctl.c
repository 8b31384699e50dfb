/* The endpoints controller (endpoints.h) around the reconcile: informers on services, pods and
 * endpoints keep a cache under one lock; a change queues the Services it concerns and the
 * runner reconciles the queue. The Endpoints it writes go into the cache from the write's
 * answer at once (the informer's echo, older or equal, is then ignored). A failed write queues
 * the Service again after its back-off (1 s doubling to KITE_EPC_RETRY_MAX_S). As upstream's,
 * it deletes an Endpoints when it sees its Service deleted, or, after a (re)list, when it
 * carries the trigger-time annotation (this controller wrote it) and its Service is gone; an
 * Endpoints deleted under a Service with a selector is written again. */
#include "client/informer.h"
#include "framework/framework.h"
#include "framework/workqueue.h"
#include "framework/ctlutil.h"
#include "controllers/endpoints.h"
#include "controllers/endpointslice.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"

#include <pthread.h>
#include <stdio.h>

#define LOG "endpoints-controller"
enum { INF_SERVICES, INF_PODS, INF_ENDPOINTS, INF_COUNT };
#define ALL_SYNCED ((1u << INF_COUNT) - 1)

struct kite_epc {
    struct kite_client *client;
    struct kite_clock *clock;
    pthread_mutex_t mu;
    unsigned synced;                         /* bit per informer */
    struct kite_map svcs, pods, eps;         /* "ns/name" -> json_object (owned) */
    struct kite_map gone;                    /* Services seen deleted, not yet reconciled ("ns/name" -> 1) */
    struct kite_map triggers;                /* "ns/name" -> the trigger-time tracker's state (owned) */
    struct kite_wq wq;
};

static void enqueue(struct kite_epc *c, const char *key) { kite_wq_add(&c->wq, key, kite_now_mono(c->clock)); }

static void enqueue_obj(struct kite_epc *c, json_object *o) {
    _cleanup_free_ char *key = kite_informer_key(o);
    if (key) enqueue(c, key);
}

static void enqueue_all(struct kite_epc *c) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->svcs, &i, &k, &v);) enqueue(c, k);
    /* checkLeftoverEndpoints: this controller's Endpoints whose Service is gone */
    for (size_t i = 0; kite_map_next(&c->eps, &i, &k, &v);)
        if (!kite_map_get(&c->svcs, k) && kite_obj_str(kite_obj_get(kite_obj_meta(v), "annotations"), KITE_EPC_ANN_TRIGGER))
            enqueue(c, k);
}

/* ---- the cache (informer threads; copies, as json-c's reference counts are not atomic) ---- */

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
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_put(&c->svcs, o);
    enqueue_obj(c, o);
    pthread_mutex_unlock(&c->mu);
}
static void svc_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epc *c = ud;
    _cleanup_free_ char *key = kite_informer_key(o);
    if (!key) return;
    pthread_mutex_lock(&c->mu);
    json_object_put(kite_map_del(&c->svcs, key));
    kite_map_put(&c->gone, key, (void *)1);
    enqueue(c, key);
    pthread_mutex_unlock(&c->mu);
}

/* Queues the Services of pod's namespace that select it (before or after a change). */
static void pod_changed(struct kite_epc *c, json_object *old, json_object *pod) {
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
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_put(&c->pods, o);
    pod_changed(c, NULL, o);
    pthread_mutex_unlock(&c->mu);
}
static void pod_update(void *ud, json_object *old, json_object *o, uintptr_t tag) {
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_put(&c->pods, o);
    pod_changed(c, old, o);
    pthread_mutex_unlock(&c->mu);
}
static void pod_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_del(&c->pods, o);
    pod_changed(c, NULL, o);
    pthread_mutex_unlock(&c->mu);
}

/* An Endpoints version newer than the cached one (a write's answer may be ahead of the watch). */
static void ep_put(struct kite_epc *c, json_object *o) {
    _cleanup_free_ char *key = kite_informer_key(o);
    if (!key) return;
    json_object *have = kite_map_get(&c->eps, key);
    if (have && kite_ctl_rv(have) > kite_ctl_rv(o)) return;
    json_object_put(kite_map_put(&c->eps, key, copy(o)));
}
static void ep_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->mu);
    ep_put(c, o);
    pthread_mutex_unlock(&c->mu);
}
/* onEndpointsDelete: the Service's Endpoints are written again */
static void ep_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->mu);
    cache_del(&c->eps, o);
    enqueue_obj(c, o);
    pthread_mutex_unlock(&c->mu);
}

static void synced(void *ud, uintptr_t which) {
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->mu);
    c->synced |= 1u << which;
    if (c->synced == ALL_SYNCED) enqueue_all(c);
    pthread_mutex_unlock(&c->mu);
}

/* ---- the worker ------------------------------------------------------------------------------ */

/* Called with mu held; drops it for the write only. */
static void sync_one(struct kite_epc *c, const char *key) {
    const char *slash = strchr(key, '/');
    if (!slash) return;
    size_t nsl = (size_t)(slash - key);
    json_object *svc = json_object_get(kite_map_get(&c->svcs, key));
    json_object *cur = json_object_get(kite_map_get(&c->eps, key));
    bool gone = kite_map_del(&c->gone, key) != NULL ||
                (cur && kite_obj_str(kite_obj_get(kite_obj_meta(cur), "annotations"), KITE_EPC_ANN_TRIGGER));
    json_object **pods = NULL;
    size_t n = 0;
    const char *k;
    void *v;
    if (svc && kite_eps_selector(svc))
        for (size_t i = 0; kite_map_next(&c->pods, &i, &k, &v);) {
            if (strncmp(k, key, nsl) != 0 || k[nsl] != '/') continue;
            pods = kite_realloc(pods, (n + 1) * sizeof *pods);
            pods[n++] = json_object_get(v);
        }
    char trigger[40] = "";
    if (svc && kite_eps_selector(svc)) {
        json_object *state = kite_map_del(&c->triggers, key);
        kite_epc_trigger_time(&state, svc, pods, n, trigger);
        kite_map_put(&c->triggers, key, state);
    } else if (!svc) {
        json_object_put(kite_map_del(&c->triggers, key));
    }
    json_object *want = NULL;
    enum kite_epc_op op = kite_epc_reconcile(svc, pods, n, cur, gone, trigger, &want);
    json_object_put(svc);
    json_object_put(cur);
    for (size_t i = 0; i < n; i++) json_object_put(pods[i]);
    free(pods);
    if (op == KITE_EPC_NONE) {
        kite_wq_forget(&c->wq, key);
        return;
    }
    pthread_mutex_unlock(&c->mu);
    _cleanup_free_ char *ns = kite_strndup(key, nsl);
    _cleanup_free_ char *coll = kite_asprintf("/api/v1/namespaces/%s/endpoints", ns);
    _cleanup_free_ char *one = kite_asprintf("%s/%s", coll, slash + 1);
    json_object *ans = NULL;
    int err;
    if (op == KITE_EPC_DELETE) {
        err = kite_client_json(c->client, "DELETE", one, NULL, NULL, NULL, NULL);
        if (err == -ENOENT) err = 0;
    } else {
        err = kite_client_json(c->client, op == KITE_EPC_CREATE ? "POST" : "PUT", op == KITE_EPC_CREATE ? coll : one, NULL,
                               want, NULL, &ans);
        if (err == -ENOENT && op == KITE_EPC_CREATE) err = 0; /* the namespace is going */
    }
    json_object_put(want);
    pthread_mutex_lock(&c->mu);
    if (err == 0 && op == KITE_EPC_DELETE) json_object_put(kite_map_del(&c->eps, key));
    else if (err == 0 && ans) ep_put(c, ans);
    json_object_put(ans);
    if (err == 0) {
        kite_wq_forget(&c->wq, key);
    } else {
        if (op == KITE_EPC_DELETE) kite_map_put(&c->gone, key, (void *)1); /* tried again */
        kite_wq_add_backoff(&c->wq, key, kite_now_mono(c->clock));
        if (err != -EEXIST) /* a conflict is settled by the watch's newer version, quietly */
            log_warn(LOG, "service %s: cannot %s its endpoints: %s (will retry)", key,
                     op == KITE_EPC_DELETE ? "delete" : op == KITE_EPC_CREATE ? "create" : "update", strerror(-err));
    }
}

static int64_t step(void *core) {
    struct kite_epc *c = core;
    pthread_mutex_lock(&c->mu);
    int64_t next = -1;
    if (c->synced == ALL_SYNCED) {
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
    struct kite_epc *c = core;
    pthread_mutex_lock(&c->mu);
    bool due = c->synced == ALL_SYNCED && kite_wq_due(&c->wq, kite_now_mono(c->clock));
    pthread_mutex_unlock(&c->mu);
    return due;
}

static void epc_free(void *core) {
    struct kite_epc *c = core;
    struct kite_map *objs[] = {&c->svcs, &c->pods, &c->eps, &c->triggers};
    const char *k;
    void *v;
    for (size_t m = 0; m < KITE_ARRAY_SIZE(objs); m++) {
        for (size_t i = 0; kite_map_next(objs[m], &i, &k, &v);) json_object_put(v);
        kite_map_release(objs[m]);
    }
    kite_map_release(&c->gone);
    kite_wq_release(&c->wq);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int kite_epc_run(struct kite_ctl_group *g) {
    struct kite_epc *c = kite_calloc(1, sizeof *c);
    c->client = kite_ctl_group_client(g);
    c->clock = kite_ctl_group_clock(g);
    c->wq.backoff_base_ns = KITE_NS_PER_SEC;
    c->wq.backoff_max_ns = KITE_EPC_RETRY_MAX_S * KITE_NS_PER_SEC;
    pthread_mutex_init(&c->mu, NULL);
    static const struct kite_ctl_feed feeds[INF_COUNT] = {
        [INF_SERVICES] = {.path = "/api/v1/services", .upsert = svc_add, .del = svc_del, .synced = synced, .tag = INF_SERVICES},
        [INF_PODS] = {.path = "/api/v1/pods", .upsert = pod_add, .update = pod_update, .del = pod_del, .synced = synced,
                      .tag = INF_PODS},
        [INF_ENDPOINTS] = {.path = "/api/v1/endpoints", .upsert = ep_add, .del = ep_del, .synced = synced, .tag = INF_ENDPOINTS},
    };
    struct kite_ctl_spec spec = {.name = "endpoint", .step = step, .pending = pending, .free = epc_free,
                                 .feeds = feeds, .n_feeds = INF_COUNT};
    return kite_ctl_run(g, &spec, c);
}
