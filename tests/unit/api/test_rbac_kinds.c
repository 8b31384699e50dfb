/* The RBAC kinds (src/api/kinds/rbac.c): validation with pkg/apis/rbac/validation's fields and
 * messages, defaults of subjects and roleRefs, and the printers' cells. */
#include "api/kinds/kinds.h"
#include "api/registry.h"
#include "api/table.h"
#include "base/clock.h"

#include <criterion/criterion.h>

struct vcase {
    const struct kite_resource *r;
    const char *obj, *old;
    const char *field;   /* the first cause's field, or NULL: valid */
    const char *message; /* its message starts with this */
};

#define RULE_OK "{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}"
#define REF(kind, name) "\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"" kind "\",\"name\":\"" name "\"}"

static const struct vcase CASES[] = {
    {&kite_kind_role, "{\"rules\":[" RULE_OK "]}", NULL, NULL, NULL},
    {&kite_kind_role, "{\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]}", NULL, "rules[0].verbs",
     "Required value: verbs must contain at least one value"},
    {&kite_kind_role, "{\"rules\":[{\"verbs\":[\"get\"],\"resources\":[\"pods\"]}]}", NULL, "rules[0].apiGroups",
     "Required value: resource rules must supply at least one api group"},
    {&kite_kind_role, "{\"rules\":[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"]}]}", NULL, "rules[0].resources",
     "Required value: resource rules must supply at least one resource"},
    {&kite_kind_role, "{\"rules\":[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/x\"]}]}", NULL, "rules[0].nonResourceURLs",
     "Invalid value: [/x]: namespaced rules cannot apply to non-resource URLs"},
    {&kite_kind_clusterrole, "{\"rules\":[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/x\",\"/y*\"]}]}", NULL, NULL, NULL},
    {&kite_kind_clusterrole, "{\"rules\":[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/x\"],\"resources\":[\"pods\"]}]}", NULL,
     "rules[0].nonResourceURLs", "Invalid value: [/x]: rules cannot apply to both regular resources and non-resource URLs"},
    {&kite_kind_clusterrole, "{\"aggregationRule\":{}}", NULL, "aggregationRule.clusterRoleSelectors",
     "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"},
    {&kite_kind_clusterrole, "{\"aggregationRule\":{\"clusterRoleSelectors\":[{\"matchLabels\":{\"a\":\"b\"}}]}}", NULL, NULL, NULL},
    {&kite_kind_rolebinding, "{" REF("ClusterRole", "view") ",\"subjects\":[{\"kind\":\"User\",\"apiGroup\":\"rbac.authorization.k8s.io\",\"name\":\"a\"}]}",
     NULL, NULL, NULL},
    {&kite_kind_rolebinding, "{" REF("Role", "r") ",\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"default\"}]}", NULL, NULL, NULL},
    {&kite_kind_rolebinding, "{" REF("Pod", "r") "}", NULL, "roleRef.kind",
     "Unsupported value: \"Pod\": supported values: \"Role\", \"ClusterRole\""},
    {&kite_kind_rolebinding, "{\"roleRef\":{\"apiGroup\":\"x\",\"kind\":\"Role\",\"name\":\"r\"}}", NULL, "roleRef.apiGroup",
     "Unsupported value: \"x\": supported values: \"rbac.authorization.k8s.io\""},
    {&kite_kind_rolebinding, "{" REF("Role", "") "}", NULL, "roleRef.name", "Required value"},
    {&kite_kind_rolebinding, "{" REF("Role", "a/b") "}", NULL, "roleRef.name", "Invalid value: \"a/b\": may not contain '/'"},
    {&kite_kind_rolebinding, "{" REF("Role", "r") ",\"subjects\":[{\"kind\":\"Robot\",\"name\":\"x\"}]}", NULL, "subjects[0].kind",
     "Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\""},
    {&kite_kind_rolebinding, "{" REF("Role", "r") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"x\"}]}", NULL, "subjects[0].apiGroup",
     "Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\""},
    {&kite_kind_rolebinding, "{" REF("Role", "r") ",\"subjects\":[{\"kind\":\"ServiceAccount\",\"apiGroup\":\"rbac.authorization.k8s.io\",\"name\":\"x\"}]}",
     NULL, "subjects[0].apiGroup", "Unsupported value: \"rbac.authorization.k8s.io\": supported values: \"\""},
    {&kite_kind_rolebinding, "{" REF("Role", "r") ",\"subjects\":[{\"kind\":\"Group\",\"apiGroup\":\"rbac.authorization.k8s.io\"}]}", NULL,
     "subjects[0].name", "Required value"},
    {&kite_kind_rolebinding, "{" REF("Role", "r") "}", "{" REF("Role", "other") "}", "roleRef",
     "Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"r\"}: cannot change roleRef"},
    {&kite_kind_rolebinding, "{" REF("Role", "r") ",\"subjects\":[]}", "{" REF("Role", "r") "}", NULL, NULL},
    {&kite_kind_clusterrolebinding, "{" REF("Role", "r") "}", NULL, "roleRef.kind",
     "Unsupported value: \"Role\": supported values: \"ClusterRole\""},
    {&kite_kind_clusterrolebinding, "{" REF("ClusterRole", "r") ",\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"default\"}]}",
     NULL, "subjects[0].namespace", "Required value"},
};

Test(rbac_kinds, validation_table) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CASES); i++) {
        const struct vcase *c = &CASES[i];
        json_object *obj = json_tokener_parse(c->obj), *old = c->old ? json_tokener_parse(c->old) : NULL;
        cr_assert_not_null(obj, "case %zu: bad JSON", i);
        struct kite_causes causes = {0};
        c->r->validate(obj, old, &causes);
        if (!c->field) {
            cr_expect_eq(causes.n, 0, "case %zu: %s: unexpected %s: %s", i, c->obj, causes.n ? causes.v[0].field : "",
                         causes.n ? causes.v[0].message : "");
        } else {
            cr_expect_geq(causes.n, 1, "case %zu: %s: want an error on %s", i, c->obj, c->field);
            if (causes.n) {
                cr_expect_str_eq(causes.v[0].field, c->field, "case %zu", i);
                cr_expect(strncmp(causes.v[0].message, c->message, strlen(c->message)) == 0, "case %zu: %s, want %s", i,
                          causes.v[0].message, c->message);
            }
        }
        kite_causes_release(&causes);
        json_object_put(obj);
        json_object_put(old);
    }
}

Test(rbac_kinds, subjects_and_role_ref_default_to_the_rbac_group) {
    json_object *o = json_tokener_parse("{\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":\"view\"},\"subjects\":["
                                        "{\"kind\":\"User\",\"name\":\"a\"},{\"kind\":\"Group\",\"name\":\"g\"},"
                                        "{\"kind\":\"ServiceAccount\",\"name\":\"s\",\"namespace\":\"n\"}]}");
    kite_kind_rolebinding.defaults(o);
    cr_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                     "{\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":\"view\",\"apiGroup\":\"rbac.authorization.k8s.io\"},"
                     "\"subjects\":[{\"kind\":\"User\",\"name\":\"a\",\"apiGroup\":\"rbac.authorization.k8s.io\"},"
                     "{\"kind\":\"Group\",\"name\":\"g\",\"apiGroup\":\"rbac.authorization.k8s.io\"},"
                     "{\"kind\":\"ServiceAccount\",\"name\":\"s\",\"namespace\":\"n\"}]}");
    json_object_put(o);
}

static char *cells(const struct kite_resource *r, const char *json) {
    json_object *obj = json_tokener_parse(json), *c = json_object_new_array();
    int64_t now;
    cr_assert_eq(kite_time_parse("2030-01-02T03:04:05Z", &now), 0);
    kite_table_cells(r->table, obj, now / KITE_NS_PER_SEC, c);
    char *s = strdup(json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(c);
    json_object_put(obj);
    return s;
}

Test(rbac_kinds, printers) {
    char *s = cells(&kite_kind_clusterrole, "{\"metadata\":{\"name\":\"view\",\"creationTimestamp\":\"2030-01-01T00:00:00Z\"}}");
    cr_assert_str_eq(s, "[\"view\",\"2030-01-01T00:00:00Z\"]");
    free(s);
    s = cells(&kite_kind_rolebinding,
              "{\"metadata\":{\"name\":\"b\",\"creationTimestamp\":\"2030-01-02T03:03:05Z\"}," REF("ClusterRole", "view") ","
              "\"subjects\":[{\"kind\":\"User\",\"name\":\"a\"},{\"kind\":\"User\",\"name\":\"b\"},{\"kind\":\"Group\",\"name\":\"g\"},"
              "{\"kind\":\"ServiceAccount\",\"name\":\"s\",\"namespace\":\"n\"},{\"kind\":\"ServiceAccount\",\"name\":\"t\"}]}");
    cr_assert_str_eq(s, "[\"b\",\"ClusterRole/view\",\"60s\",\"a, b\",\"g\",\"n/s, t\"]");
    free(s);
}
