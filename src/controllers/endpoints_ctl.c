/* The endpoints controller (endpoints.h) around the reconcile: informers on services, pods and
 * endpoints keep a cache under one lock; a change queues the Services it concerns and the
 * runner reconciles the queue (the Services, the pods and the queue as the EndpointSlice
 * controller has them: svcpods.h). The Endpoints it writes go into the cache from the write's
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
#include "controllers/svcpods.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#define LOG "endpoints-controller"
enum { INF_SERVICES, INF_PODS, INF_ENDPOINTS, INF_COUNT };

struct kite_epc {
    struct kite_svcpods sp;                  /* first: the lock, Services, pods and the queue */
    struct kite_client *client;
    struct kite_map eps;                     /* "ns/name" -> json_object (owned) */
    struct kite_map gone;                    /* Services seen deleted, not yet reconciled ("ns/name" -> 1) */
    struct kite_map triggers;                /* "ns/name" -> the trigger-time tracker's state (owned) */
};
_Static_assert(offsetof(struct kite_epc, sp) == 0, "the handlers take the core as its kite_svcpods");

static void svc_gone(void *core, const char *key) {
    struct kite_epc *c = core;
    kite_map_put(&c->gone, key, (void *)1);
}

/* checkLeftoverEndpoints: this controller's Endpoints whose Service is gone */
static void resync(void *core) {
    struct kite_epc *c = core;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->eps, &i, &k, &v);)
        if (!kite_map_get(&c->sp.svcs, k) && kite_obj_str(kite_obj_get(kite_obj_meta(v), "annotations"), KITE_EPC_ANN_TRIGGER))
            kite_svcpods_enqueue(&c->sp, k);
}

/* ---- the Endpoints' cache (informer threads) ------------------------------------------------ */

static void ep_add(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epc *c = ud;
    pthread_mutex_lock(&c->sp.mu);
    kite_svcpods_cache_put_newer(&c->eps, o);
    pthread_mutex_unlock(&c->sp.mu);
}
/* onEndpointsDelete: the Service's Endpoints are written again */
static void ep_del(void *ud, json_object *o, uintptr_t tag) {
    struct kite_epc *c = ud;
    _cleanup_free_ char *key = kite_informer_key(o);
    pthread_mutex_lock(&c->sp.mu);
    kite_svcpods_cache_del(&c->eps, o);
    if (key) kite_svcpods_enqueue(&c->sp, key);
    pthread_mutex_unlock(&c->sp.mu);
}

/* ---- the worker ------------------------------------------------------------------------------ */

/* Called with mu held; drops it for the write only. */
static void sync_one(void *core, const char *key) {
    struct kite_epc *c = core;
    const char *slash = strchr(key, '/');
    if (!slash) return;
    size_t nsl = (size_t)(slash - key);
    json_object *svc = json_object_get(kite_map_get(&c->sp.svcs, key));
    json_object *cur = json_object_get(kite_map_get(&c->eps, key));
    bool gone = kite_map_del(&c->gone, key) != NULL ||
                (cur && kite_obj_str(kite_obj_get(kite_obj_meta(cur), "annotations"), KITE_EPC_ANN_TRIGGER));
    size_t n;
    json_object **pods = kite_svcpods_pods_for(&c->sp, key, svc, &n);
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
        kite_svcpods_forget(&c->sp, key);
        return;
    }
    pthread_mutex_unlock(&c->sp.mu);
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
    pthread_mutex_lock(&c->sp.mu);
    if (err == 0 && op == KITE_EPC_DELETE) json_object_put(kite_map_del(&c->eps, key));
    else if (err == 0 && ans) kite_svcpods_cache_put_newer(&c->eps, ans);
    json_object_put(ans);
    if (err == 0) {
        kite_svcpods_forget(&c->sp, key);
    } else {
        if (op == KITE_EPC_DELETE) kite_map_put(&c->gone, key, (void *)1); /* tried again */
        kite_svcpods_retry(&c->sp, key);
        if (err != -EEXIST) /* a conflict is settled by the watch's newer version, quietly */
            log_warn(LOG, "service %s: cannot %s its endpoints: %s (will retry)", key,
                     op == KITE_EPC_DELETE ? "delete" : op == KITE_EPC_CREATE ? "create" : "update", strerror(-err));
    }
}

static void epc_free(void *core) {
    struct kite_epc *c = core;
    kite_svcpods_cache_release(&c->eps);
    kite_svcpods_cache_release(&c->triggers);
    kite_map_release(&c->gone);
    kite_svcpods_release(&c->sp);
    free(c);
}

int kite_epc_run(struct kite_ctl_group *g) {
    struct kite_epc *c = kite_calloc(1, sizeof *c);
    kite_svcpods_init(&c->sp, kite_ctl_group_clock(g), INF_COUNT, KITE_EPC_RETRY_MAX_S * KITE_NS_PER_SEC);
    c->sp.sync = sync_one;
    c->sp.svc_gone = svc_gone;
    c->sp.resync = resync;
    c->client = kite_ctl_group_client(g);
    static const struct kite_ctl_feed feeds[INF_COUNT] = {
        [INF_SERVICES] = KITE_SVCPODS_FEED_SERVICES(INF_SERVICES),
        [INF_PODS] = KITE_SVCPODS_FEED_PODS(INF_PODS),
        [INF_ENDPOINTS] = {.path = "/api/v1/endpoints", .upsert = ep_add, .del = ep_del, .synced = kite_svcpods_synced,
                           .tag = INF_ENDPOINTS},
    };
    struct kite_ctl_spec spec = {.name = "endpoint", .step = kite_svcpods_step, .pending = kite_svcpods_pending,
                                 .free = epc_free, .feeds = feeds, .n_feeds = INF_COUNT};
    return kite_ctl_run(g, &spec, c);
}
