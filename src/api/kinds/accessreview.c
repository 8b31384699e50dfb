/* SubjectAccessReview, SelfSubjectAccessReview and LocalSubjectAccessReview
 * (authorization.k8s.io/v1): "may this user do that?", answered by the authorizer chain and
 * never stored (kubectl auth can-i). Validation as pkg/apis/authorization/validation. */
#include "api/kinds/kind.h"

/* ---- schemas (k8s.io/api/authorization/v1 generated.proto) ---- */
STRUCT(field_req, "FieldSelectorRequirement", F(1, "key", S), F(2, "operator", S), F(3, "values", SLIST));
LIST(field_reqs, NULL, field_req);
STRUCT(field_sel, "FieldSelectorAttributes", F(1, "rawSelector", S), F(2, "requirements", field_reqs));
STRUCT(label_req, "LabelSelectorRequirement", F(1, "key", S), F(2, "operator", S), F(3, "values", SLIST));
LIST(label_reqs, NULL, label_req);
STRUCT(label_sel, "LabelSelectorAttributes", F(1, "rawSelector", S), F(2, "requirements", label_reqs));
STRUCT(resource_attrs, "ResourceAttributes", F(1, "namespace", S), F(2, "verb", S), F(3, "group", S),
       F(4, "version", S), F(5, "resource", S), F(6, "subresource", S), F(7, "name", S),
       F(8, "fieldSelector", field_sel), F(9, "labelSelector", label_sel));
STRUCT(non_resource_attrs, "NonResourceAttributes", F(1, "path", S), F(2, "verb", S));
/* extra is map<string, ExtraValue{1: repeated string}>: RAW (the hook checks its shape), so a
 * protobuf body or answer carrying it falls back to JSON */
STRUCT(sar_spec, "SubjectAccessReviewSpec", F(1, "resourceAttributes", resource_attrs),
       F(2, "nonResourceAttributes", non_resource_attrs), F(3, "user", S), F(4, "groups", SLIST), F(5, "extra", RAW),
       F(6, "uid", S));
STRUCT(ssar_spec, "SelfSubjectAccessReviewSpec", F(1, "resourceAttributes", resource_attrs),
       F(2, "nonResourceAttributes", non_resource_attrs));
/* allowed has no omitempty in Go: a false answer is written */
STRUCT(sar_status, "SubjectAccessReviewStatus", FK(1, "allowed", B), F(4, "denied", B), F(2, "reason", S),
       F(3, "evaluationError", S));
ROOT(kite_schema_subjectaccessreview, "SubjectAccessReview", TYPE_META, F(2, "spec", sar_spec),
     F(3, "status", sar_status));
ROOT(kite_schema_selfsubjectaccessreview, "SelfSubjectAccessReview", TYPE_META, F(2, "spec", ssar_spec),
     F(3, "status", sar_status));
ROOT(kite_schema_localsubjectaccessreview, "LocalSubjectAccessReview", TYPE_META, F(2, "spec", sar_spec),
     F(3, "status", sar_status));

/* ---- validation ---- */

/* ObjectMeta{} as Go compares it: every member empty (kubectl's protobuf sends empty strings). */
static bool meta_empty(json_object *meta, const char *except) {
    if (!meta) return true;
    json_object_object_foreach(meta, k, v) {
        if (except && strcmp(k, except) == 0) continue;
        if (strcmp(k, "managedFields") == 0 || !v) continue;
        if (json_object_is_type(v, json_type_string) && !*json_object_get_string(v)) continue;
        if (json_object_is_type(v, json_type_object) && json_object_object_length(v) == 0) continue;
        if (json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0) continue;
        if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 0) continue;
        return false;
    }
    return true;
}

static void spec_validate(json_object *spec, bool subject, struct kite_causes *c) {
    json_object *ra = kite_obj_get(spec, "resourceAttributes"), *nra = kite_obj_get(spec, "nonResourceAttributes");
    if (ra && nra)
        kite_causes_add(c, "FieldValueInvalid", "spec.nonResourceAttributes",
                        "Invalid value: %s: cannot be specified in combination with resourceAttributes",
                        json_object_to_json_string(nra));
    if (!ra && !nra)
        kite_causes_add(c, "FieldValueInvalid", "spec.resourceAttributes",
                        "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified");
    if (subject && !*STR(spec, "user") && arr_len(kite_obj_get(spec, "groups")) == 0)
        kite_causes_add(c, "FieldValueInvalid", "spec.user", "Invalid value: \"\": at least one of user or group must be specified");
}

/* spec.extra: map[string][]string */
static bool extra_valid(json_object *extra, struct kite_causes *c) {
    if (!extra) return true;
    bool ok = json_object_is_type(extra, json_type_object);
    if (ok) {
        json_object_object_foreach(extra, k, v) {
            (void)k;
            if (!v) continue;
            ok &= json_object_is_type(v, json_type_array);
            for (size_t i = 0; ok && i < arr_len(v); i++)
                ok &= json_object_is_type(json_object_array_get_idx(v, i), json_type_string);
        }
    }
    if (!ok)
        kite_causes_add(c, "FieldValueInvalid", "spec.extra", "Invalid value: %s: must map keys to lists of strings",
                        json_object_to_json_string(extra));
    return ok;
}

/* ---- evaluation ---- */

/* A subject the server can hold: as many groups and extra values as impersonation may give
 * (the apiserver's KITE_IMPERSONATE_*_MAX); past them 422. */
#define REVIEW_MAX_GROUPS 32  /* spec.groups of a SubjectAccessReview */
#define REVIEW_MAX_EXTRA 32   /* spec.extra values, all keys together */

static void fill_status(json_object *obj, const struct kite_review_env *env, const struct kite_review_attrs *a) {
    struct kite_review_decision d = {0};
    env->authorize(env, a, &d);
    json_object *st = json_object_new_object();
    kite_obj_set(st, "allowed", json_object_new_boolean(d.allowed));
    if (d.denied) kite_obj_set(st, "denied", json_object_new_boolean(true));
    if (d.reason && *d.reason) kite_obj_set(st, "reason", json_object_new_string(d.reason));
    if (d.error && *d.error) kite_obj_set(st, "evaluationError", json_object_new_string(d.error));
    kite_obj_set(obj, "status", st);
    free(d.reason);
    free(d.error);
}

/* The question of spec, for user u (borrowed strings of obj). */
static void attrs_of(json_object *spec, const struct kite_review_user *u, struct kite_review_attrs *a) {
    json_object *ra = kite_obj_get(spec, "resourceAttributes");
    *a = (struct kite_review_attrs){.user = u};
    if (ra) {
        a->verb = STR(ra, "verb");
        a->group = STR(ra, "group");
        a->version = STR(ra, "version");
        a->resource = STR(ra, "resource");
        a->sub = STR(ra, "subresource");
        a->ns = STR(ra, "namespace");
        a->name = STR(ra, "name");
    } else {
        json_object *nra = kite_obj_get(spec, "nonResourceAttributes");
        a->verb = STR(nra, "verb");
        a->path = STR(nra, "path");
    }
}

static int self_evaluate(json_object *obj, const struct kite_review_env *env, struct kite_causes *c, char **ret_msg) {
    (void)ret_msg;
    json_object *spec = kite_obj_get(obj, "spec");
    spec_validate(spec, false, c);
    if (!meta_empty(kite_obj_get(obj, "metadata"), NULL))
        kite_causes_add(c, "FieldValueInvalid", "metadata", "Invalid value: %s: must be empty",
                        json_object_to_json_string(kite_obj_get(obj, "metadata")));
    if (c->n) return 422;
    struct kite_review_attrs a;
    attrs_of(spec, env->requester, &a);
    fill_status(obj, env, &a);
    return 0;
}

/* The subject of a SubjectAccessReview's spec; arrays sized by the limits above. */
static int subject_of(json_object *spec, struct kite_review_user *u, const char **groups, const char **extra,
                      struct kite_causes *c) {
    json_object *g = kite_obj_get(spec, "groups"), *x = kite_obj_get(spec, "extra");
    if (arr_len(g) > REVIEW_MAX_GROUPS) {
        kite_causes_add(c, "FieldValueTooMany", "spec.groups", "Too many: %zu: must have at most %d items", arr_len(g),
                        REVIEW_MAX_GROUPS);
        return 422;
    }
    if (!extra_valid(x, c)) return 422;
    *u = (struct kite_review_user){.name = STR(spec, "user"), .uid = STR(spec, "uid"), .groups = groups, .extra = extra};
    for (size_t i = 0; i < arr_len(g); i++) groups[u->n_groups++] = str_of(json_object_array_get_idx(g, i));
    if (x) {
        json_object_object_foreach(x, k, v) {
            for (size_t i = 0; i < arr_len(v); i++) {
                if (u->n_extra == REVIEW_MAX_EXTRA) {
                    kite_causes_add(c, "FieldValueTooMany", "spec.extra", "Too many: must have at most %d values",
                                    REVIEW_MAX_EXTRA);
                    return 422;
                }
                extra[2 * u->n_extra] = k;
                extra[2 * u->n_extra + 1] = str_of(json_object_array_get_idx(v, i));
                u->n_extra++;
            }
        }
    }
    return 0;
}

static int subject_evaluate(json_object *obj, const struct kite_review_env *env, struct kite_causes *c, bool local,
                            char **ret_msg) {
    json_object *spec = kite_obj_get(obj, "spec"), *meta = kite_obj_get(obj, "metadata");
    spec_validate(spec, true, c);
    if (!meta_empty(meta, local ? "namespace" : NULL))
        kite_causes_add(c, "FieldValueInvalid", "metadata", "Invalid value: %s: must be empty%s",
                        json_object_to_json_string(meta), local ? " except for namespace" : "");
    if (local) {
        json_object *ra = kite_obj_get(spec, "resourceAttributes");
        if (ra && strcmp(STR(ra, "namespace"), STR(obj, "metadata", "namespace")) != 0)
            kite_causes_add(c, "FieldValueInvalid", "spec.resourceAttributes.namespace",
                            "Invalid value: \"%s\": must match metadata.namespace", STR(ra, "namespace"));
        if (kite_obj_get(spec, "nonResourceAttributes"))
            kite_causes_add(c, "FieldValueInvalid", "spec.nonResourceAttributes",
                            "Invalid value: %s: disallowed on this kind of request",
                            json_object_to_json_string(kite_obj_get(spec, "nonResourceAttributes")));
    }
    if (c->n) return 422;
    if (local && (!env->ns || strcmp(env->ns, STR(obj, "metadata", "namespace")) != 0)) {
        *ret_msg = kite_asprintf("spec.resourceAttributes.namespace must match namespace: %s", env->ns ? env->ns : "");
        return 400;
    }
    const char *groups[REVIEW_MAX_GROUPS], *extra[2 * REVIEW_MAX_EXTRA];
    struct kite_review_user u;
    int r = subject_of(spec, &u, groups, extra, c);
    if (r) return r;
    struct kite_review_attrs a;
    attrs_of(spec, &u, &a);
    fill_status(obj, env, &a);
    return 0;
}

static int sar_evaluate(json_object *obj, const struct kite_review_env *env, struct kite_causes *c, char **ret_msg) {
    return subject_evaluate(obj, env, c, false, ret_msg);
}

static int local_evaluate(json_object *obj, const struct kite_review_env *env, struct kite_causes *c, char **ret_msg) {
    return subject_evaluate(obj, env, c, true, ret_msg);
}

const struct kite_resource kite_kind_selfsubjectaccessreview = {
    .schema = &kite_schema_selfsubjectaccessreview,
    KITE_GROUP_VERSION("authorization.k8s.io", "v1"), .kind = "SelfSubjectAccessReview",
    .list_kind = "SelfSubjectAccessReviewList", .plural = "selfsubjectaccessreviews",
    .singular = "selfsubjectaccessreview", .evaluate = self_evaluate,
};

const struct kite_resource kite_kind_subjectaccessreview = {
    .schema = &kite_schema_subjectaccessreview,
    KITE_GROUP_VERSION("authorization.k8s.io", "v1"), .kind = "SubjectAccessReview",
    .list_kind = "SubjectAccessReviewList", .plural = "subjectaccessreviews", .singular = "subjectaccessreview",
    .evaluate = sar_evaluate,
};

const struct kite_resource kite_kind_localsubjectaccessreview = {
    .schema = &kite_schema_localsubjectaccessreview,
    KITE_GROUP_VERSION("authorization.k8s.io", "v1"), .kind = "LocalSubjectAccessReview",
    .list_kind = "LocalSubjectAccessReviewList", .plural = "localsubjectaccessreviews",
    .singular = "localsubjectaccessreview", .namespaced = true, .evaluate = local_evaluate,
};
