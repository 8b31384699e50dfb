/* SelfSubjectReview (authentication.k8s.io/v1): who the server takes the requester for, after
 * authentication and impersonation (kubectl auth whoami). Never stored. */
#include "api/kinds/kind.h"

/* extra is map<string, ExtraValue>: RAW, so an answer carrying it is JSON (see accessreview.c) */
STRUCT(user_info, "UserInfo", F(1, "username", S), F(2, "uid", S), F(3, "groups", SLIST), F(4, "extra", RAW));
STRUCT(ssr_status, "SelfSubjectReviewStatus", F(1, "userInfo", user_info));
ROOT(kite_schema_selfsubjectreview, "SelfSubjectReview", TYPE_META, F(2, "status", ssr_status));

static int evaluate(json_object *obj, const struct kite_review_env *env, struct kite_causes *c, char **ret_msg) {
    (void)c;
    (void)ret_msg;
    const struct kite_review_user *u = env->requester;
    json_object *info = json_object_new_object();
    kite_obj_set(info, "username", json_object_new_string(u->name));
    if (u->uid && *u->uid) kite_obj_set(info, "uid", json_object_new_string(u->uid));
    json_object *groups = json_object_new_array();
    for (size_t i = 0; i < u->n_groups; i++) json_object_array_add(groups, json_object_new_string(u->groups[i]));
    kite_obj_set(info, "groups", groups);
    if (u->n_extra) {
        json_object *extra = json_object_new_object();
        for (size_t i = 0; i < u->n_extra; i++) {
            json_object *vals = kite_obj_get(extra, u->extra[2 * i]);
            if (!vals) kite_obj_set(extra, u->extra[2 * i], vals = json_object_new_array());
            json_object_array_add(vals, json_object_new_string(u->extra[2 * i + 1]));
        }
        kite_obj_set(info, "extra", extra);
    }
    json_object *st = json_object_new_object();
    kite_obj_set(st, "userInfo", info);
    kite_obj_set(obj, "status", st);
    /* as kube-apiserver: a fresh object stamped now, whatever metadata the request held */
    json_object *meta = json_object_new_object();
    char ts[21];
    kite_time_format(env->now_ns, ts);
    kite_obj_set(meta, "creationTimestamp", json_object_new_string(ts));
    kite_obj_set(obj, "metadata", meta);
    return 0;
}

const struct kite_resource kite_kind_selfsubjectreview = {
    .schema = &kite_schema_selfsubjectreview,
    KITE_GROUP_VERSION("authentication.k8s.io", "v1"), .kind = "SelfSubjectReview",
    .list_kind = "SelfSubjectReviewList", .plural = "selfsubjectreviews", .singular = "selfsubjectreview",
    .evaluate = evaluate,
};
