/* Workload controller helpers (wlutil.h). */
#include "controllers/workloads/wlutil.h"
#include "api/registry.h"
#include "framework/ctlutil.h"
#include "json/scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *kite_wl_key(const char *ns, const char *name) { return kite_asprintf("%s/%s", ns ? ns : "", name ? name : ""); }

static char *key_of(json_object *obj) { return kite_wl_key(kite_meta_str(obj, "namespace"), kite_meta_str(obj, "name")); }

json_object *kite_wl_cache_put(struct kite_wl_cache *c, json_object *obj) {
    json_object *copy = NULL;
    json_object_deep_copy(obj, &copy, NULL);
    _cleanup_free_ char *key = key_of(obj);
    return kite_map_put(&c->m, key, copy);
}

const char *const kite_wl_pod_members[] = {KITE_WL_POD_MEMBERS, NULL};

json_object *kite_wl_cache_put_cut(struct kite_wl_cache *c, json_object *obj, const char *const *paths) {
    _cleanup_free_ char *key = key_of(obj);
    return kite_map_put(&c->m, key, kite_obj_project_copy(obj, paths));
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

char *kite_wl_cache_owned(struct kite_wl_cache *c, json_object *pod, bool gone, const char *api_version, const char *kind) {
    char *owner = kite_wl_controller_key(pod, api_version, kind);
    if (owner) json_object_put(gone ? kite_wl_cache_del(c, pod) : kite_wl_cache_put(c, pod));
    return owner;
}

json_object *kite_wl_copy(json_object *o) {
    json_object *c = NULL;
    return o && json_object_deep_copy(o, &c, NULL) == 0 ? c : NULL;
}

void kite_wl_keep_copy(json_object **slot, json_object *obj) {
    json_object_put(*slot);
    *slot = kite_wl_copy(obj);
}

void *kite_wl_state(struct kite_map *m, const char *key, size_t size) {
    void *s = kite_map_get(m, key);
    if (!s) {
        s = kite_calloc(1, size);
        kite_map_put(m, key, s);
    }
    return s;
}

void kite_wl_names_add(struct kite_wl_names *s, const char *n) {
    s->v = kite_realloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n++] = kite_strdup(n);
}

bool kite_wl_names_has(const struct kite_wl_names *s, const char *n) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], n) == 0) return true;
    return false;
}

void kite_wl_names_release(struct kite_wl_names *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    *s = (struct kite_wl_names){0};
}

void kite_wl_awaited_expire(struct kite_wl_awaited *a, int64_t mono, int64_t ttl_ns) {
    if (a->names.n && mono - a->since > ttl_ns) kite_wl_names_release(&a->names);
}

void kite_wl_awaited_keep(struct kite_wl_awaited *a, struct kite_wl_names *now, int64_t mono) {
    if (now->n > a->names.n) a->since = mono;
    kite_wl_names_release(&a->names);
    a->names = *now;
    *now = (struct kite_wl_names){0};
}

bool kite_wl_owner_uid(json_object *obj, const char *uid) {
    json_object *refs = kite_obj_get(kite_obj_meta(obj), "ownerReferences");
    for (size_t i = 0; i < kite_array_len(refs); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(refs, i), "uid"), uid)) return true;
    return false;
}

json_object *kite_wl_controller_ref(json_object *obj) {
    json_object *refs = kite_obj_get(kite_obj_meta(obj), "ownerReferences");
    for (size_t i = 0; refs && json_object_is_type(refs, json_type_array) && i < json_object_array_length(refs); i++) {
        json_object *r = json_object_array_get_idx(refs, i), *ctl = kite_obj_get(r, "controller");
        if (ctl && json_object_get_boolean(ctl)) return r;
    }
    return NULL;
}

char *kite_wl_controller_key(json_object *obj, const char *api_version, const char *kind) {
    json_object *ref = kite_wl_controller_ref(obj);
    if (!ref || !kite_streq(kite_obj_str(ref, "kind"), kind) ||
        (api_version && !kite_streq(kite_obj_str(ref, "apiVersion"), api_version)))
        return NULL;
    return kite_wl_key(kite_meta_str(obj, "namespace"), kite_obj_str(ref, "name"));
}

json_object *kite_wl_new_controller_ref(const char *api_version, const char *kind, json_object *owner) {
    json_object *r = json_object_new_object();
    const char *name = kite_meta_str(owner, "name"), *uid = kite_meta_str(owner, "uid");
    kite_obj_set(r, "apiVersion", json_object_new_string(api_version));
    kite_obj_set(r, "kind", json_object_new_string(kind));
    kite_obj_set(r, "name", json_object_new_string(name ? name : ""));
    kite_obj_set(r, "uid", json_object_new_string(uid ? uid : ""));
    kite_obj_set(r, "controller", json_object_new_boolean(true));
    kite_obj_set(r, "blockOwnerDeletion", json_object_new_boolean(true));
    return r;
}

void kite_wl_set_controller_ref(json_object *meta, const char *api_version, const char *kind, json_object *owner) {
    json_object *refs = json_object_new_array();
    json_object_array_add(refs, kite_wl_new_controller_ref(api_version, kind, owner));
    kite_obj_set(meta, "ownerReferences", refs);
}

json_object *kite_wl_owner_patch(json_object *obj, json_object *ref) {
    json_object *p = json_object_new_object(), *meta = json_object_new_object(), *refs = json_object_new_array();
    const char *uid = kite_meta_str(obj, "uid");
    json_object_array_add(refs, ref);
    kite_obj_set(meta, "ownerReferences", refs);
    kite_obj_set(meta, "uid", json_object_new_string(uid ? uid : ""));
    kite_obj_set(p, "metadata", meta);
    return p;
}

json_object *kite_wl_pod_from_template(json_object *tmpl, json_object *owner, const char *api_version, const char *kind,
                                       const char *name) {
    json_object *tmeta = kite_obj_meta(tmpl);
    json_object *pod = json_object_new_object(), *meta = json_object_new_object();
    kite_obj_set(pod, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(pod, "kind", json_object_new_string("Pod"));
    if (name) {
        kite_obj_set(meta, "name", json_object_new_string(name));
    } else {
        _cleanup_free_ char *gen = kite_asprintf("%s-", kite_meta_str(owner, "name"));
        kite_obj_set(meta, "generateName", json_object_new_string(gen));
    }
    kite_obj_set(meta, "namespace", json_object_new_string(kite_meta_str(owner, "namespace")));
    static const char *const copied[] = {"labels", "annotations", "finalizers"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(copied); i++) {
        json_object *v = kite_obj_get(tmeta, copied[i]), *cp = NULL;
        if (v && json_object_deep_copy(v, &cp, NULL) == 0) kite_obj_set(meta, copied[i], cp);
    }
    kite_wl_set_controller_ref(meta, api_version, kind, owner);
    kite_obj_set(pod, "metadata", meta);
    json_object *spec = NULL;
    json_object_deep_copy(kite_obj_get(tmpl, "spec"), &spec, NULL);
    kite_obj_set(pod, "spec", spec ? spec : json_object_new_object());
    return pod;
}

void kite_wl_canonical(json_object *o, struct kite_buf *b) {
    if (json_object_is_type(o, json_type_object)) {
        size_t n;
        const char **keys = kite_obj_sorted_keys(o, NULL, &n);
        kite_buf_putc(b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) kite_buf_putc(b, ',');
            kite_buf_json_str(b, keys[i]);
            kite_buf_putc(b, ':');
            kite_wl_canonical(kite_obj_get(o, keys[i]), b);
        }
        kite_buf_putc(b, '}');
        free(keys);
    } else if (json_object_is_type(o, json_type_array)) {
        kite_buf_putc(b, '[');
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            if (i) kite_buf_putc(b, ',');
            kite_wl_canonical(json_object_array_get_idx(o, i), b);
        }
        kite_buf_putc(b, ']');
    } else {
        kite_buf_puts(b, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    }
}

uint32_t kite_wl_fnv32a(const void *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= ((const unsigned char *)p)[i];
        h *= 16777619u;
    }
    return h;
}

void kite_wl_hash(json_object *o, const void *extra, size_t n, char out[16]) {
    struct kite_buf b = {0};
    kite_wl_canonical(o, &b);
    if (extra && n) kite_buf_append(&b, extra, n);
    uint32_t h = kite_wl_fnv32a(b.p ? b.p : "", b.len);
    kite_buf_release(&b);
    static const char alphanums[] = "bcdfghjklmnpqrstvwxz2456789"; /* rand.SafeEncodeString's */
    int len = snprintf(out, 16, "%u", h);
    for (int i = 0; i < len; i++) out[i] = alphanums[(unsigned char)out[i] % (sizeof alphanums - 1)];
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
