/* Services and the pods they select (svcpods.h): the caches, the queue of Service keys and the
 * runner the endpoints and EndpointSlice controllers share. */
#include "controllers/svcpods.h"
#include "client/informer.h"
#include "controllers/endpointslice.h"
#include "framework/ctlutil.h"
#include "json/obj.h"
#include "json/scan.h"

#include <stdio.h>

void kite_svcpods_init(struct kite_svcpods *s, struct kite_clock *clock, unsigned n_feeds, int64_t backoff_max_ns) {
    *s = (struct kite_svcpods){.clock = clock, .all = (1u << n_feeds) - 1};
    s->wq.backoff_base_ns = KITE_NS_PER_SEC;
    s->wq.backoff_max_ns = backoff_max_ns;
    pthread_mutex_init(&s->mu, NULL);
}

void kite_svcpods_release(struct kite_svcpods *s) {
    kite_svcpods_cache_release(&s->svcs);
    kite_svcpods_cache_release(&s->pods);
    kite_wq_release(&s->wq);
    pthread_mutex_destroy(&s->mu);
}

/* ---- the caches ---------------------------------------------------------------------------- */

static json_object *copy(json_object *o) {
    json_object *c = NULL;
    json_object_deep_copy(o, &c, NULL);
    return c;
}

/* What the endpoints controllers read of a pod: its metadata but managedFields, where it runs
 * and its name there, the ports of its containers, its restart policy and its status (a whole
 * pod's tree is tens of KB, a copy kept for every pod of the cluster). */
static const char *const pod_members[] = {
    "metadata.name", "metadata.generateName", "metadata.namespace", "metadata.uid", "metadata.resourceVersion",
    "metadata.creationTimestamp", "metadata.deletionTimestamp", "metadata.deletionGracePeriodSeconds",
    "metadata.labels", "metadata.annotations", "metadata.ownerReferences", "spec.nodeName", "spec.hostname",
    "spec.subdomain", "spec.restartPolicy", "spec.containers", "spec.initContainers", "status", NULL};

static void put_pod(struct kite_map *m, json_object *pod) {
    _cleanup_free_ char *key = kite_informer_key(pod);
    if (key) json_object_put(kite_map_put(m, key, kite_obj_project_copy(pod, pod_members)));
}

void kite_svcpods_cache_del(struct kite_map *m, json_object *obj) {
    _cleanup_free_ char *key = kite_informer_key(obj);
    if (key) json_object_put(kite_map_del(m, key));
}

void kite_svcpods_cache_put_newer(struct kite_map *m, json_object *obj) {
    _cleanup_free_ char *key = kite_informer_key(obj);
    if (!key) return;
    json_object *have = kite_map_get(m, key);
    if (have && kite_ctl_rv(have) > kite_ctl_rv(obj)) return;
    json_object_put(kite_map_put(m, key, copy(obj)));
}

void kite_svcpods_cache_release(struct kite_map *m) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(m, &i, &k, &v);) json_object_put(v);
    kite_map_release(m);
}

/* ---- the queue (mu held) ------------------------------------------------------------------- */

bool kite_svcpods_ready(const struct kite_svcpods *s) { return s->synced == s->all; }

void kite_svcpods_enqueue(struct kite_svcpods *s, const char *key) { kite_wq_add(&s->wq, key, kite_now_mono(s->clock)); }

void kite_svcpods_enqueue_ns_name(struct kite_svcpods *s, const char *ns, const char *name) {
    if (!ns || !name || !*name) return;
    char key[512];
    if ((size_t)snprintf(key, sizeof key, "%s/%s", ns, name) < sizeof key) kite_svcpods_enqueue(s, key);
}

void kite_svcpods_forget(struct kite_svcpods *s, const char *key) { kite_wq_forget(&s->wq, key); }

void kite_svcpods_retry(struct kite_svcpods *s, const char *key) { kite_wq_add_backoff(&s->wq, key, kite_now_mono(s->clock)); }

void kite_svcpods_enqueue_all(struct kite_svcpods *s) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&s->svcs, &i, &k, &v);) kite_svcpods_enqueue(s, k);
    if (s->resync) s->resync(s);
}

/* Queues the Services of pod's namespace that select it (before or after a change). */
static void pod_changed(struct kite_svcpods *s, json_object *old, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace");
    json_object *labels = kite_obj_get(kite_obj_meta(pod), "labels");
    json_object *old_labels = old ? kite_obj_get(kite_obj_meta(old), "labels") : NULL;
    const char *k;
    void *v;
    for (size_t i = 0; ns && kite_map_next(&s->svcs, &i, &k, &v);) {
        if (!kite_streq(kite_meta_str(v, "namespace"), ns)) continue;
        json_object *sel = kite_eps_selector(v);
        if (kite_eps_selects(sel, labels) || (old && kite_eps_selects(sel, old_labels))) kite_svcpods_enqueue(s, k);
    }
}

json_object **kite_svcpods_pods_for(struct kite_svcpods *s, const char *key, json_object *svc, size_t *n) {
    *n = 0;
    const char *slash = strchr(key, '/');
    if (!svc || !slash || !kite_eps_selector(svc)) return NULL;
    size_t nsl = (size_t)(slash - key);
    json_object **pods = NULL;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&s->pods, &i, &k, &v);) {
        if (strncmp(k, key, nsl) != 0 || k[nsl] != '/') continue;
        pods = kite_realloc(pods, (*n + 1) * sizeof *pods);
        pods[(*n)++] = json_object_get(v);
    }
    return pods;
}

/* ---- the feeds' handlers (informer threads) ------------------------------------------------- */

void kite_svcpods_svc_upsert(void *core, json_object *svc, uintptr_t tag) {
    struct kite_svcpods *s = core;
    _cleanup_free_ char *key = kite_informer_key(svc);
    if (!key) return;
    pthread_mutex_lock(&s->mu);
    json_object_put(kite_map_put(&s->svcs, key, copy(svc)));
    kite_svcpods_enqueue(s, key);
    pthread_mutex_unlock(&s->mu);
}

void kite_svcpods_svc_del(void *core, json_object *svc, uintptr_t tag) {
    struct kite_svcpods *s = core;
    _cleanup_free_ char *key = kite_informer_key(svc);
    if (!key) return;
    pthread_mutex_lock(&s->mu);
    json_object_put(kite_map_del(&s->svcs, key));
    if (s->svc_gone) s->svc_gone(s, key);
    kite_svcpods_enqueue(s, key);
    pthread_mutex_unlock(&s->mu);
}

void kite_svcpods_pod_upsert(void *core, json_object *pod, uintptr_t tag) { kite_svcpods_pod_update(core, NULL, pod, tag); }

void kite_svcpods_pod_update(void *core, json_object *old, json_object *pod, uintptr_t tag) {
    struct kite_svcpods *s = core;
    pthread_mutex_lock(&s->mu);
    put_pod(&s->pods, pod);
    pod_changed(s, old, pod);
    pthread_mutex_unlock(&s->mu);
}

void kite_svcpods_pod_del(void *core, json_object *pod, uintptr_t tag) {
    struct kite_svcpods *s = core;
    pthread_mutex_lock(&s->mu);
    kite_svcpods_cache_del(&s->pods, pod);
    pod_changed(s, NULL, pod);
    pthread_mutex_unlock(&s->mu);
}

void kite_svcpods_synced(void *core, uintptr_t tag) {
    struct kite_svcpods *s = core;
    pthread_mutex_lock(&s->mu);
    s->synced |= 1u << tag;
    /* after every (re)list: reconcile everything once all caches are current */
    if (kite_svcpods_ready(s)) kite_svcpods_enqueue_all(s);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the runner ---------------------------------------------------------------------------- */

/* Works the keys due, once every cache is current: ns to the next one due (-1: none). */
int64_t kite_svcpods_step(void *core) {
    struct kite_svcpods *s = core;
    pthread_mutex_lock(&s->mu);
    int64_t next = -1;
    if (kite_svcpods_ready(s)) {
        char *key;
        while ((key = kite_wq_pop_due(&s->wq, kite_now_mono(s->clock)))) {
            s->sync(s, key); /* may drop mu while it writes */
            free(key);
        }
        next = kite_wq_next(&s->wq, kite_now_mono(s->clock));
    }
    pthread_mutex_unlock(&s->mu);
    return next;
}

bool kite_svcpods_pending(void *core) {
    struct kite_svcpods *s = core;
    pthread_mutex_lock(&s->mu);
    bool due = kite_svcpods_ready(s) && kite_wq_due(&s->wq, kite_now_mono(s->clock));
    pthread_mutex_unlock(&s->mu);
    return due;
}
