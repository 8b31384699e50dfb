/* Workload controller helpers (wlutil.h). */
#include "controllers/workloads/wlutil.h"
#include "api/registry.h"
#include "framework/ctlutil.h"

#include <stdlib.h>

char *kite_wl_key(const char *ns, const char *name) { return kite_asprintf("%s/%s", ns ? ns : "", name ? name : ""); }

static char *key_of(json_object *obj) { return kite_wl_key(kite_meta_str(obj, "namespace"), kite_meta_str(obj, "name")); }

json_object *kite_wl_cache_put(struct kite_wl_cache *c, json_object *obj) {
    json_object *copy = NULL;
    json_object_deep_copy(obj, &copy, NULL);
    _cleanup_free_ char *key = key_of(obj);
    return kite_map_put(&c->m, key, copy);
}

json_object *kite_wl_cache_del(struct kite_wl_cache *c, json_object *obj) {
    _cleanup_free_ char *key = key_of(obj);
    return kite_map_del(&c->m, key);
}

json_object *kite_wl_cache_get(const struct kite_wl_cache *c, const char *key) { return kite_map_get(&c->m, key); }

void kite_wl_cache_release(struct kite_wl_cache *c) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->m, &i, &k, &v);) json_object_put(v);
    kite_map_release(&c->m);
}

json_object *kite_wl_controller_ref(json_object *obj) {
    json_object *refs = kite_obj_get(kite_obj_meta(obj), "ownerReferences");
    for (size_t i = 0; refs && json_object_is_type(refs, json_type_array) && i < json_object_array_length(refs); i++) {
        json_object *r = json_object_array_get_idx(refs, i), *ctl = kite_obj_get(r, "controller");
        if (ctl && json_object_get_boolean(ctl)) return r;
    }
    return NULL;
}

json_object *kite_wl_new_controller_ref(const char *api_version, const char *kind, json_object *owner) {
    json_object *r = json_object_new_object();
    kite_obj_set(r, "apiVersion", json_object_new_string(api_version));
    kite_obj_set(r, "kind", json_object_new_string(kind));
    kite_obj_set(r, "name", json_object_new_string(kite_meta_str(owner, "name")));
    kite_obj_set(r, "uid", json_object_new_string(kite_meta_str(owner, "uid")));
    kite_obj_set(r, "controller", json_object_new_boolean(true));
    kite_obj_set(r, "blockOwnerDeletion", json_object_new_boolean(true));
    return r;
}

bool kite_wl_deleting(json_object *obj) { return kite_obj_get(kite_obj_meta(obj), "deletionTimestamp") != NULL; }

bool kite_wl_pod_active(json_object *pod) {
    const char *phase = kite_obj_str(kite_obj_get(pod, "status"), "phase");
    return !kite_wl_deleting(pod) && !kite_streq(phase, "Succeeded") && !kite_streq(phase, "Failed");
}

bool kite_wl_pod_ready(json_object *pod, int64_t *ret_since) {
    json_object *c = kite_ctl_condition(pod, "Ready");
    if (!c || !kite_streq(kite_obj_str(c, "status"), "True")) return false;
    if (ret_since) {
        const char *t = kite_obj_str(c, "lastTransitionTime");
        if (!t || kite_time_parse(t, ret_since) < 0) *ret_since = 0;
    }
    return true;
}

bool kite_wl_pod_available(json_object *pod, int64_t min_ready_s, int64_t now, int64_t *ret_wait_ns) {
    int64_t since;
    if (!kite_wl_pod_ready(pod, &since)) return false;
    if (min_ready_s <= 0) return true;
    int64_t at = kite_time_add(since, kite_sec_to_ns(min_ready_s));
    if (since && at <= now) return true;
    if (ret_wait_ns) *ret_wait_ns = since ? at - now : kite_sec_to_ns(min_ready_s);
    return false;
}

int64_t kite_wl_int(json_object *obj, const char *a, const char *b) {
    json_object *v = kite_obj_get(kite_obj_get(obj, a), b);
    return v && json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
}
