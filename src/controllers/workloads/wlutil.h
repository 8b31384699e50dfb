/* What the workload controllers (ReplicaSet, Deployment, garbage collector) share: a cache of
 * deep-copied objects by namespace/name, owner references, and the pod states they count
 * (k8s.io/kubernetes pkg/controller/controller_utils.go, pkg/api/v1/pod). */
#pragma once
#include "base/buf.h"
#include "base/clock.h"
#include "base/map.h"
#include "client/client.h"

/* Objects by "namespace/name": own deep copies (informer objects are borrowed for a call). */
struct kite_wl_cache {
    struct kite_map m;
};
/* Stores a copy of obj; returns the previous one (caller frees with json_object_put) or NULL. */
json_object *kite_wl_cache_put(struct kite_wl_cache *c, json_object *obj);
/* kite_wl_cache_put of obj cut to paths (a NULL-terminated list, kite_obj_project's). */
json_object *kite_wl_cache_put_cut(struct kite_wl_cache *c, json_object *obj, const char *const *paths);
/* What the workload controllers read of the pods they count (every pod of the cluster, in each
 * of them): its metadata but managedFields, spec.nodeName and its status. A whole pod is a json-c
 * tree of tens of KB, and the ReplicaSet, Deployment, StatefulSet and disruption controllers
 * kept one each, ~0.8 MB a pod in all with the endpoints'; Kubernetes' controller-manager shares
 * one cache and drops managedFields from it. */
#define KITE_WL_POD_MEMBERS                                                                                          \
    "metadata.name", "metadata.generateName", "metadata.namespace", "metadata.uid", "metadata.resourceVersion",    \
        "metadata.generation", "metadata.creationTimestamp", "metadata.deletionTimestamp",                        \
        "metadata.deletionGracePeriodSeconds", "metadata.labels", "metadata.annotations", "metadata.ownerReferences", \
        "metadata.finalizers", "spec.nodeName", "status"
extern const char *const kite_wl_pod_members[];
/* Removes obj's key; returns what was stored (caller frees) or NULL. */
json_object *kite_wl_cache_del(struct kite_wl_cache *c, json_object *obj);
json_object *kite_wl_cache_get(const struct kite_wl_cache *c, const char *key);
void kite_wl_cache_release(struct kite_wl_cache *c);

/* A pod change to a cache of the pods controlled by an owner of kind (and api_version): stored
 * (a copy) or, when gone, dropped. Returns the owner's key (malloc'ed), or NULL when pod is
 * not such a pod (then not cached). */
char *kite_wl_cache_owned(struct kite_wl_cache *c, json_object *pod, bool gone, const char *api_version, const char *kind);

/* A deep copy (NULL for NULL). */
json_object *kite_wl_copy(json_object *o);
/* Replaces *slot (put) with a copy of obj. */
void kite_wl_keep_copy(json_object **slot, json_object *obj);
/* A controller's per-key state in m: found, or made (size bytes, zeroed) and stored. */
void *kite_wl_state(struct kite_map *m, const char *key, size_t size);

/* A set of names (own copies). */
struct kite_wl_names {
    char **v;
    size_t n;
};
void kite_wl_names_add(struct kite_wl_names *s, const char *n);
bool kite_wl_names_has(const struct kite_wl_names *s, const char *n);
void kite_wl_names_release(struct kite_wl_names *s);
/* Expectations (ControllerExpectations): the names a controller awaits seeing, since when. */
struct kite_wl_awaited {
    struct kite_wl_names names;
    int64_t since; /* monotonic ns of the last time it grew */
};
/* Forgets every name once the wait is longer than ttl_ns at mono. */
void kite_wl_awaited_expire(struct kite_wl_awaited *a, int64_t mono, int64_t ttl_ns);
/* Keeps now (taken: left empty) as what is awaited; since moves to mono when it grew. */
void kite_wl_awaited_keep(struct kite_wl_awaited *a, struct kite_wl_names *now, int64_t mono);

/* "namespace/name" (malloc'ed). */
char *kite_wl_key(const char *ns, const char *name);
/* Whether one of obj's ownerReferences has uid. */
bool kite_wl_owner_uid(json_object *obj, const char *uid);
/* The ownerReference with controller: true (borrowed), or NULL. */
json_object *kite_wl_controller_ref(json_object *obj);
/* The owner key ("namespace/name" of obj's namespace; malloc'ed) its controller reference names
 * when that is of kind and, unless api_version is NULL, of api_version; else NULL. */
char *kite_wl_controller_key(json_object *obj, const char *api_version, const char *kind);
/* A controller reference to the owner, as the workload controllers set it (blockOwnerDeletion). */
json_object *kite_wl_new_controller_ref(const char *api_version, const char *kind, json_object *owner);
/* Sets meta's ownerReferences to the one controller reference to owner. */
void kite_wl_set_controller_ref(json_object *meta, const char *api_version, const char *kind, json_object *owner);
/* A strategic merge patch of obj's ownerReferences merging ref (owned: a new controller reference
 * adopts, {"$patch":"delete","uid":...} releases), pinned to obj by its uid (a precondition, as
 * ClaimPods sends it, so a namesake made since is not hit). */
json_object *kite_wl_owner_patch(json_object *obj, json_object *ref);
/* GetPodFromTemplate: a pod (new object) in owner's namespace from the pod template tmpl (its
 * labels, annotations and finalizers, a copy of its spec), controlled by owner; named name, or
 * when name is NULL generateName "OWNER-". */
json_object *kite_wl_pod_from_template(json_object *tmpl, json_object *owner, const char *api_version, const char *kind,
                                       const char *name);

/* JSON text of o with object keys sorted, as Go's json.Marshal writes a map: the same template
 * hashes the same whatever order a patch left its keys in. */
void kite_wl_canonical(json_object *o, struct kite_buf *b);
uint32_t kite_wl_fnv32a(const void *p, size_t n);
/* The name hash of a template or revision (ComputeHash, HashControllerRevision): FNV-32a of o's
 * canonical text followed by the n bytes of extra (NULL: none), its decimal text through
 * rand.SafeEncodeString. */
void kite_wl_hash(json_object *o, const void *extra, size_t n, char out[16]);
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
