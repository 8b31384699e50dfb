/* Services and the pods they select, as the endpoints and the EndpointSlice controllers both
 * follow them (upstream's two controllers share the same handlers: serviceQueue, addPod,
 * updatePod, deletePod through endpointsliceutil's GetPodServiceMemberships).
 *
 * A controller's core begins with a struct kite_svcpods (its first member), so the handlers
 * and the runner below take the core as kite_ctl_run hands it. It holds the controller's lock,
 * caches of the Services and pods by "namespace/name" (copies: json-c's reference counts are
 * not atomic, and the informer and the writes' answers release theirs on other threads; every
 * reference to a cached object is taken and dropped under mu), and the queue of Service keys:
 *  - a Service added, changed or deleted queues its own key;
 *  - a pod added, changed or deleted queues every Service of its namespace whose selector
 *    matches its labels, before or after the change;
 *  - after every (re)list, once all of the controller's feeds have synced, every Service is
 *    queued (and the controller's resync hook queues what else it wants looked at);
 *  - the runner (kite_svcpods_step) does nothing before that first sync, then hands each key
 *    due to the controller's sync, which forgets it or queues it again after its back-off
 *    (1 s doubling to the controller's cap). */
#pragma once
#include "base/clock.h"
#include "base/map.h"
#include "framework/workqueue.h"
#include "json/scan.h"

#include <pthread.h>

struct kite_svcpods {
    pthread_mutex_t mu;         /* the controller's lock: all below and the controller's own state */
    struct kite_clock *clock;   /* borrowed */
    struct kite_map svcs, pods; /* "namespace/name" -> json_object (owned copies) */
    struct kite_wq wq;          /* Service keys, with their back-off */
    unsigned synced, all;       /* a bit per feed tag that has synced; every feed's bit */
    /* The controller's hooks, called with mu held (core: the struct this one begins). */
    void (*sync)(void *core, const char *key); /* the work for one key (may drop mu to write) */
    void (*svc_gone)(void *core, const char *key); /* NULL, or a Service was seen deleted (before its key is queued) */
    void (*resync)(void *core);    /* NULL, or after every Service was queued at a (re)list */
};

/* n_feeds: how many feeds the controller has (at most 31, tagged 0..n_feeds-1; each must sync
 * before the first step); clock is borrowed. The hooks are the caller's to set. */
void kite_svcpods_init(struct kite_svcpods *s, struct kite_clock *clock, unsigned n_feeds, int64_t backoff_max_ns);
void kite_svcpods_release(struct kite_svcpods *s);

/* The feeds' handlers (core: the controller's). */
void kite_svcpods_svc_upsert(void *core, json_object *svc, uintptr_t tag);
void kite_svcpods_svc_del(void *core, json_object *svc, uintptr_t tag);
void kite_svcpods_pod_upsert(void *core, json_object *pod, uintptr_t tag);
void kite_svcpods_pod_update(void *core, json_object *old, json_object *pod, uintptr_t tag);
void kite_svcpods_pod_del(void *core, json_object *pod, uintptr_t tag);
/* Any of the controller's feeds' synced (tag: the feed's bit). */
void kite_svcpods_synced(void *core, uintptr_t tag);

/* The two feed rows (struct kite_ctl_feed initializers). */
#define KITE_SVCPODS_FEED_SERVICES(t)                                                                      \
    {.path = "/api/v1/services", .upsert = kite_svcpods_svc_upsert, .del = kite_svcpods_svc_del,            \
     .synced = kite_svcpods_synced, .tag = (t)}
#define KITE_SVCPODS_FEED_PODS(t)                                                                          \
    {.path = "/api/v1/pods", .upsert = kite_svcpods_pod_upsert, .update = kite_svcpods_pod_update,          \
     .del = kite_svcpods_pod_del, .synced = kite_svcpods_synced, .tag = (t)}

/* The runner's step and pending (struct kite_ctl_spec's, core: the controller's). */
int64_t kite_svcpods_step(void *core);
bool kite_svcpods_pending(void *core);

/* ---- with mu held ---- */
/* Every feed has synced at least once. */
bool kite_svcpods_ready(const struct kite_svcpods *s);
/* Queues key now. */
void kite_svcpods_enqueue(struct kite_svcpods *s, const char *key);
/* Queues "ns/name" now (nothing when either is NULL or name is empty). */
void kite_svcpods_enqueue_ns_name(struct kite_svcpods *s, const char *ns, const char *name);
/* After key's work: done (its back-off starts over), or failed (queued again after it). */
void kite_svcpods_forget(struct kite_svcpods *s, const char *key);
void kite_svcpods_retry(struct kite_svcpods *s, const char *key);
/* Queues every cached Service, then calls resync. */
void kite_svcpods_enqueue_all(struct kite_svcpods *s);
/* The cached pods of Service key's namespace (new references: the caller puts each and frees
 * the array; *n of them), none when svc (the cached Service) is NULL or selects nothing. */
json_object **kite_svcpods_pods_for(struct kite_svcpods *s, const char *key, json_object *svc, size_t *n);

/* ---- the controllers' other caches of copies ("namespace/name" -> json_object, owned) ---- */
void kite_svcpods_cache_del(struct kite_map *m, json_object *obj);
/* Puts obj unless the cached version is newer (a write's answer may be ahead of the watch). */
void kite_svcpods_cache_put_newer(struct kite_map *m, json_object *obj);
/* Puts every object and releases the map. */
void kite_svcpods_cache_release(struct kite_map *m);
