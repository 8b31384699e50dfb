/* SelfSubjectRulesReview (authorization.k8s.io/v1): what the requester may do in a namespace,
 * as the authorizers can list it (kubectl auth can-i --list). Never stored. */
#include "api/kinds/kind.h"

STRUCT(ssrr_spec, "SelfSubjectRulesReviewSpec", F(1, "namespace", S));
STRUCT(resource_rule, "ResourceRule", FK(1, "verbs", SLIST), F(2, "apiGroups", SLIST), F(3, "resources", SLIST),
       F(4, "resourceNames", SLIST));
LIST(resource_rules, NULL, resource_rule);
STRUCT(non_resource_rule, "NonResourceRule", FK(1, "verbs", SLIST), F(2, "nonResourceURLs", SLIST));
LIST(non_resource_rules, NULL, non_resource_rule);
/* resourceRules, nonResourceRules and incomplete have no omitempty in Go */
STRUCT(rules_status, "SubjectRulesReviewStatus", FK(1, "resourceRules", resource_rules),
       FK(2, "nonResourceRules", non_resource_rules), FK(3, "incomplete", B), F(4, "evaluationError", S));
ROOT(kite_schema_selfsubjectrulesreview, "SelfSubjectRulesReview", TYPE_META, F(2, "spec", ssrr_spec),
     F(3, "status", rules_status));

static int evaluate(json_object *obj, const struct kite_review_env *env, struct kite_causes *c, char **ret_msg) {
    (void)c;
    const char *ns = STR(obj, "spec", "namespace");
    if (!*ns) {
        *ret_msg = kite_strdup("no namespace on request");
        return 400;
    }
    json_object *st = json_object_new_object();
    env->rules(env, env->requester, ns, st);
    kite_obj_set(obj, "status", st);
    return 0;
}

const struct kite_resource kite_kind_selfsubjectrulesreview = {
    .schema = &kite_schema_selfsubjectrulesreview,
    KITE_GROUP_VERSION("authorization.k8s.io", "v1"), .kind = "SelfSubjectRulesReview",
    .list_kind = "SelfSubjectRulesReviewList", .plural = "selfsubjectrulesreviews",
    .singular = "selfsubjectrulesreview", .evaluate = evaluate,
};
