/* What the workload controllers (ReplicaSet, Deployment, garbage collector) share: a cache of
 * deep-copied objects by namespace/name, owner references, and the pod states they count
 * (k8s.io/kubernetes pkg/controller/controller_utils.go, pkg/api/v1/pod). */
#pragma once
#include "base/clock.h"
#include "base/map.h"
#include "client/client.h"

/* Objects by "namespace/name": own deep copies (informer objects are borrowed for a call). */
struct kite_wl_cache {
    struct kite_map m;
};
/* Stores a copy of obj; returns the previous one (caller frees with json_object_put) or NULL. */
json_object *kite_wl_cache_put(struct kite_wl_cache *c, json_object *obj);
/* Removes obj's key; returns what was stored (caller frees) or NULL. */
json_object *kite_wl_cache_del(struct kite_wl_cache *c, json_object *obj);
json_object *kite_wl_cache_get(const struct kite_wl_cache *c, const char *key);
void kite_wl_cache_release(struct kite_wl_cache *c);

/* "namespace/name" (malloc'ed). */
char *kite_wl_key(const char *ns, const char *name);
/* The ownerReference with controller: true (borrowed), or NULL. */
json_object *kite_wl_controller_ref(json_object *obj);
/* A controller reference to the owner, as the workload controllers set it (blockOwnerDeletion). */
json_object *kite_wl_new_controller_ref(const char *api_version, const char *kind, json_object *owner);
/* metadata.deletionTimestamp is set. */
bool kite_wl_deleting(json_object *obj);
/* FilterActivePods: not terminal (Succeeded, Failed) and not being deleted. */
bool kite_wl_pod_active(json_object *pod);
/* The Ready condition is True; *ret_since (may be NULL) its lastTransitionTime (wall ns; 0). */
bool kite_wl_pod_ready(json_object *pod, int64_t *ret_since);
/* IsPodAvailable: ready for at least min_ready_s at now (wall ns). When ready but not yet
 * available, *ret_wait_ns (may be NULL) is how long until it is; else left alone. */
bool kite_wl_pod_available(json_object *pod, int64_t min_ready_s, int64_t now, int64_t *ret_wait_ns);
/* An integer field (0 when absent). */
int64_t kite_wl_int(json_object *obj, const char *a, const char *b);
/* Lowers *min to v when v >= 0 and (*min < 0 or v < *min). */
static inline void kite_wl_min(int64_t *min, int64_t v) {
    if (v >= 0 && (*min < 0 || v < *min)) *min = v;
}
