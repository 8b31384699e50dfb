/* Tolerations and node selector terms (scheduling.h). */
#include "api/scheduling.h"
#include "api/registry.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>


bool kite_toleration_tolerates(json_object *tol, json_object *taint) {
    const char *effect = kite_obj_str(tol, "effect"), *key = kite_obj_str(tol, "key"), *op = kite_obj_str(tol, "operator");
    if (effect && *effect && !kite_streq(effect, kite_obj_str(taint, "effect"))) return false;
    if (key && *key && !kite_streq(key, kite_obj_str(taint, "key"))) return false;
    if (!op || !*op || kite_streq(op, "Equal")) {
        const char *a = kite_obj_str(tol, "value"), *b = kite_obj_str(taint, "value");
        return kite_streq(a ? a : "", b ? b : "");
    }
    return kite_streq(op, "Exists");
}

json_object *kite_tolerations_find(json_object *tols, json_object *taint) {
    for (size_t i = 0; i < kite_array_len(tols); i++)
        if (kite_toleration_tolerates(json_object_array_get_idx(tols, i), taint)) return json_object_array_get_idx(tols, i);
    return NULL;
}

json_object *kite_find_untolerated_taint(json_object *taints, json_object *tols, bool (*filter)(json_object *taint)) {
    for (size_t i = 0; i < kite_array_len(taints); i++) {
        json_object *t = json_object_array_get_idx(taints, i);
        if ((!filter || filter(t)) && !kite_tolerations_find(tols, t)) return t;
    }
    return NULL;
}

bool kite_tolerations_tolerate(json_object *tols, const char *key, const char *effect) {
    json_object *taint = json_object_new_object();
    kite_obj_set(taint, "key", json_object_new_string(key));
    kite_obj_set(taint, "effect", json_object_new_string(effect));
    bool ok = kite_tolerations_find(tols, taint) != NULL;
    json_object_put(taint);
    return ok;
}

bool kite_tolerations_cover(json_object *tols, const char *key, const char *effect) {
    for (size_t i = 0; i < kite_array_len(tols); i++) {
        json_object *t = json_object_array_get_idx(tols, i);
        const char *k = kite_obj_str(t, "key"), *e = kite_obj_str(t, "effect");
        if ((!k || !*k || kite_streq(k, key)) && (!e || !*e || kite_streq(e, effect))) return true;
    }
    return false;
}

/* strconv.ParseInt(s, 10, 64): an optional sign, then decimal digits only, in range */
static bool go_int64(const char *s, int64_t *ret) {
    if (!s) return false;
    const char *d = s + (*s == '+' || *s == '-');
    if (!*d) return false;
    for (const char *p = d; *p; p++)
        if (!isdigit((unsigned char)*p)) return false;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE) return false;
    *ret = v;
    return true;
}

static bool in_values(json_object *values, const char *s) {
    for (size_t i = 0; s && i < kite_array_len(values); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(values, i)), s)) return true;
    return false;
}

bool kite_node_selector_requirement_matches(json_object *req, const char *value) {
    const char *op = kite_obj_str(req, "operator");
    json_object *values = kite_obj_get(req, "values");
    size_t n = kite_array_len(values);
    if (kite_streq(op, "In")) return n && in_values(values, value);
    if (kite_streq(op, "NotIn")) return n && !in_values(values, value);
    if (kite_streq(op, "Exists")) return !n && value;
    if (kite_streq(op, "DoesNotExist")) return !n && !value;
    if (kite_streq(op, "Gt") || kite_streq(op, "Lt")) {
        int64_t have, want;
        if (n != 1 || !go_int64(json_object_get_string(json_object_array_get_idx(values, 0)), &want)) return false;
        if (!go_int64(value, &have)) return false;
        return kite_streq(op, "Gt") ? have > want : have < want;
    }
    return false;
}

bool kite_node_selector_term_matches(json_object *term, json_object *node, const char *name) {
    json_object *exprs = kite_obj_get(term, "matchExpressions"), *fields = kite_obj_get(term, "matchFields");
    if (!kite_array_len(exprs) && !kite_array_len(fields)) return false;
    json_object *labels = node ? kite_obj_get(kite_obj_meta(node), "labels") : NULL;
    for (size_t i = 0; node && i < kite_array_len(exprs); i++) {
        json_object *e = json_object_array_get_idx(exprs, i);
        if (!kite_node_selector_requirement_matches(e, kite_obj_str(labels, kite_obj_str(e, "key")))) return false;
    }
    for (size_t i = 0; i < kite_array_len(fields); i++) {
        json_object *f = json_object_array_get_idx(fields, i);
        const char *op = kite_obj_str(f, "operator");
        if (!kite_streq(kite_obj_str(f, "key"), "metadata.name") || !(kite_streq(op, "In") || kite_streq(op, "NotIn")) ||
            kite_array_len(kite_obj_get(f, "values")) != 1 || !kite_node_selector_requirement_matches(f, name))
            return false;
    }
    return true;
}

bool kite_node_selector_terms_match(json_object *terms, json_object *node, const char *name) {
    for (size_t i = 0; i < kite_array_len(terms); i++)
        if (kite_node_selector_term_matches(json_object_array_get_idx(terms, i), node, name)) return true;
    return false;
}

bool kite_pod_node_affinity_matches(json_object *pod, json_object *node, const char *name) {
    json_object *spec = kite_obj_get(pod, "spec"), *sel = kite_obj_get(spec, "nodeSelector");
    if (node && sel && json_object_is_type(sel, json_type_object)) {
        json_object *labels = kite_obj_get(kite_obj_meta(node), "labels");
        json_object_object_foreach(sel, k, v) {
            const char *have = kite_obj_str(labels, k);
            if (!have || !kite_streq(have, json_object_get_string(v))) return false;
        }
    }
    json_object *req = kite_obj_path(spec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
    return !req || kite_node_selector_terms_match(kite_obj_get(req, "nodeSelectorTerms"), node, name);
}
