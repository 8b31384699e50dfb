/* rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding, ClusterRoleBinding: their
 * schemas (field numbers of k8s.io/api/rbac/v1/generated.proto), defaults and validation as
 * pkg/apis/rbac/validation, and the printers kube-apiserver's are. Who may do what with them
 * is the RBAC authorizer's business (src/apiserver/authz_rbac.c). */
#include "api/kinds/kind.h"

#define RBAC_GROUP "rbac.authorization.k8s.io"

/* ---- schemas ------------------------------------------------------------------------------- */
STRUCT(policy_rule, "PolicyRule", FK(1, "verbs", SLIST), F(2, "apiGroups", SLIST), F(3, "resources", SLIST),
       F(4, "resourceNames", SLIST), F(5, "nonResourceURLs", SLIST));
LIST(policy_rules, NULL, policy_rule);
STRUCT(label_requirement, "LabelSelectorRequirement", FK(1, "key", S), FK(2, "operator", S), F(3, "values", SLIST));
LIST(label_requirements, NULL, label_requirement);
STRUCT(label_selector, "LabelSelector", F(1, "matchLabels", SMAP), F(2, "matchExpressions", label_requirements));
LIST(label_selectors, NULL, label_selector);
STRUCT(aggregation_rule, "AggregationRule", F(1, "clusterRoleSelectors", label_selectors));
STRUCT(subject, "Subject", FK(1, "kind", S), F(2, "apiGroup", S), FK(3, "name", S), F(4, "namespace", S));
LIST(subjects, NULL, subject);
STRUCT(role_ref, "RoleRef", FK(1, "apiGroup", S), FK(2, "kind", S), FK(3, "name", S));

ROOT(kite_schema_role, "Role", TYPE_META, FK(2, "rules", policy_rules));
ROOT(kite_schema_clusterrole, "ClusterRole", TYPE_META, FK(2, "rules", policy_rules),
     F(3, "aggregationRule", aggregation_rule));
ROOT(kite_schema_rolebinding, "RoleBinding", TYPE_META, F(2, "subjects", subjects), FK(3, "roleRef", role_ref));
ROOT(kite_schema_clusterrolebinding, "ClusterRoleBinding", TYPE_META, F(2, "subjects", subjects),
     FK(3, "roleRef", role_ref));

/* ---- defaults: a User or Group subject and a roleRef belong to the RBAC group ------------- */
static void binding_defaults(json_object *obj) {
    json_object *subs = kite_obj_get(obj, "subjects");
    for (size_t i = 0; i < arr_len(subs); i++) {
        json_object *s = json_object_array_get_idx(subs, i);
        const char *kind = STR(s, "kind");
        if (json_object_is_type(s, json_type_object) && !*STR(s, "apiGroup") &&
            (strcmp(kind, "User") == 0 || strcmp(kind, "Group") == 0))
            kite_obj_set(s, "apiGroup", json_object_new_string(RBAC_GROUP));
    }
    json_object *ref = kite_obj_get(obj, "roleRef");
    if (ref && json_object_is_type(ref, json_type_object) && !*STR(ref, "apiGroup"))
        kite_obj_set(ref, "apiGroup", json_object_new_string(RBAC_GROUP));
}

/* ---- validation ---------------------------------------------------------------------------- */

/* field.NotSupported: `Unsupported value: "x": supported values: "a", "b"`. */
static void not_supported(struct kite_causes *c, const char *field, const char *value, const char *const *ok) {
    struct kite_buf b = {0};
    for (const char *const *o = ok; *o; o++) kite_buf_printf(&b, "%s\"%s\"", o == ok ? "" : ", ", *o);
    kite_causes_add(c, "FieldValueNotSupported", field, "Unsupported value: \"%s\": supported values: %s", value,
                    b.p ? b.p : "");
    kite_buf_release(&b);
}

/* A []string as Go's %v prints it in field.Invalid: [a b]. */
static void list_text(json_object *a, struct kite_buf *b) {
    kite_buf_puts(b, "[");
    for (size_t i = 0; i < arr_len(a); i++)
        kite_buf_printf(b, "%s%s", i ? " " : "", str_of(json_object_array_get_idx(a, i)));
    kite_buf_puts(b, "]");
}

static void validate_rules(json_object *obj, bool namespaced, struct kite_causes *c) {
    json_object *rules = kite_obj_get(obj, "rules");
    for (size_t i = 0; i < arr_len(rules); i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        char f[64];
        if (!arr_len(OBJ(r, "verbs"))) {
            snprintf(f, sizeof f, "rules[%zu].verbs", i);
            kite_causes_add(c, "FieldValueRequired", f, "Required value: verbs must contain at least one value");
        }
        json_object *urls = OBJ(r, "nonResourceURLs");
        if (arr_len(urls)) {
            snprintf(f, sizeof f, "rules[%zu].nonResourceURLs", i);
            struct kite_buf v = {0};
            list_text(urls, &v);
            if (namespaced)
                kite_causes_add(c, "FieldValueInvalid", f, "Invalid value: %s: namespaced rules cannot apply to non-resource URLs", v.p);
            if (arr_len(OBJ(r, "apiGroups")) || arr_len(OBJ(r, "resources")) || arr_len(OBJ(r, "resourceNames")))
                kite_causes_add(c, "FieldValueInvalid", f,
                                "Invalid value: %s: rules cannot apply to both regular resources and non-resource URLs", v.p);
            kite_buf_release(&v);
            continue;
        }
        if (!arr_len(OBJ(r, "apiGroups"))) {
            snprintf(f, sizeof f, "rules[%zu].apiGroups", i);
            kite_causes_add(c, "FieldValueRequired", f, "Required value: resource rules must supply at least one api group");
        }
        if (!arr_len(OBJ(r, "resources"))) {
            snprintf(f, sizeof f, "rules[%zu].resources", i);
            kite_causes_add(c, "FieldValueRequired", f, "Required value: resource rules must supply at least one resource");
        }
    }
}

static void role_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    (void)old;
    validate_rules(obj, true, c);
}

static void clusterrole_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    (void)old;
    validate_rules(obj, false, c);
    json_object *agg = kite_obj_get(obj, "aggregationRule");
    if (agg && json_object_is_type(agg, json_type_object) && !arr_len(OBJ(agg, "clusterRoleSelectors")))
        kite_causes_add(c, "FieldValueRequired", "aggregationRule.clusterRoleSelectors",
                        "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil");
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", NULL};
    json_object *sels = OBJ(agg, "clusterRoleSelectors");
    for (size_t i = 0; i < arr_len(sels); i++) {
        json_object *exprs = OBJ(json_object_array_get_idx(sels, i), "matchExpressions");
        for (size_t j = 0; j < arr_len(exprs); j++) {
            const char *op = STR(json_object_array_get_idx(exprs, j), "operator");
            bool known = false;
            for (const char *const *o = ops; *o; o++) known |= strcmp(*o, op) == 0;
            if (known) continue;
            char f[128];
            snprintf(f, sizeof f, "aggregationRule.clusterRoleSelectors[%zu].matchExpressions[%zu].operator", i, j);
            not_supported(c, f, op, ops);
        }
    }
}

static void validate_subjects(json_object *obj, bool namespaced, struct kite_causes *c) {
    static const char *const kinds[] = {"ServiceAccount", "User", "Group", NULL};
    static const char *const rbac_group[] = {RBAC_GROUP, NULL}, *const core_group[] = {"", NULL};
    json_object *subs = kite_obj_get(obj, "subjects");
    for (size_t i = 0; i < arr_len(subs); i++) {
        json_object *s = json_object_array_get_idx(subs, i);
        const char *kind = STR(s, "kind"), *name = STR(s, "name"), *group = STR(s, "apiGroup");
        char f[64];
        if (!*name) {
            snprintf(f, sizeof f, "subjects[%zu].name", i);
            kite_causes_add(c, "FieldValueRequired", f, "Required value");
        }
        if (strcmp(kind, "ServiceAccount") == 0) {
            const char *msgs[KITE_NAME_ERRS_MAX];
            size_t n = *name ? kite_dns1123_subdomain_errs(name, msgs) : 0;
            snprintf(f, sizeof f, "subjects[%zu].name", i);
            kite_causes_add_invalid(c, f, name, msgs, n);
            snprintf(f, sizeof f, "subjects[%zu].apiGroup", i);
            if (*group) not_supported(c, f, group, core_group);
            snprintf(f, sizeof f, "subjects[%zu].namespace", i);
            if (!namespaced && !*STR(s, "namespace")) kite_causes_add(c, "FieldValueRequired", f, "Required value");
        } else if (strcmp(kind, "User") == 0 || strcmp(kind, "Group") == 0) {
            snprintf(f, sizeof f, "subjects[%zu].apiGroup", i);
            if (strcmp(group, RBAC_GROUP) != 0) not_supported(c, f, group, rbac_group);
        } else {
            snprintf(f, sizeof f, "subjects[%zu].kind", i);
            not_supported(c, f, kind, kinds);
        }
    }
}

static void validate_role_ref(json_object *obj, json_object *old, const char *const *kinds, struct kite_causes *c) {
    static const char *const rbac_group[] = {RBAC_GROUP, NULL};
    json_object *ref = kite_obj_get(obj, "roleRef");
    const char *group = STR(ref, "apiGroup"), *kind = STR(ref, "kind"), *name = STR(ref, "name");
    if (strcmp(group, RBAC_GROUP) != 0) not_supported(c, "roleRef.apiGroup", group, rbac_group);
    bool known = false;
    for (const char *const *k = kinds; *k; k++) known |= strcmp(*k, kind) == 0;
    if (!known) not_supported(c, "roleRef.kind", kind, kinds);
    if (!*name) {
        kite_causes_add(c, "FieldValueRequired", "roleRef.name", "Required value");
    } else {
        const char *msgs[KITE_NAME_ERRS_MAX];
        size_t n = kite_path_segment_errs(name, msgs);
        kite_causes_add_invalid(c, "roleRef.name", name, msgs, n);
    }
    /* ValidateRoleBindingUpdate: a binding's role is fixed for its life (a new role is a new binding) */
    json_object *was = kite_obj_get(old, "roleRef");
    if (old && (strcmp(STR(was, "apiGroup"), group) != 0 || strcmp(STR(was, "kind"), kind) != 0 ||
                strcmp(STR(was, "name"), name) != 0))
        kite_causes_add(c, "FieldValueInvalid", "roleRef",
                        "Invalid value: rbac.RoleRef{APIGroup:\"%s\", Kind:\"%s\", Name:\"%s\"}: cannot change roleRef", group,
                        kind, name);
}

static void rolebinding_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    static const char *const kinds[] = {"Role", "ClusterRole", NULL};
    validate_role_ref(obj, old, kinds, c);
    validate_subjects(obj, true, c);
}

static void clusterrolebinding_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    static const char *const kinds[] = {"ClusterRole", NULL};
    validate_role_ref(obj, old, kinds, c);
    validate_subjects(obj, false, c);
}

/* ---- printers (pkg/printers/internalversion: printRole, printRoleBinding...) ---------------- */
static json_object *created_at(const struct kite_table_row *r) {
    return cell_str(STR(r->obj, "metadata", "creationTimestamp"));
}

static const struct kite_table_column role_cols[] = {
    COL_NAME,
    {"Created At", created_at, "date", "", AGE_DESC, 0},
};
static const struct kite_table_printer role_printer = TABLE_PRINTER(role_cols);

static json_object *binding_role(const struct kite_table_row *r) {
    struct kite_buf b = {0};
    kite_buf_printf(&b, "%s/%s", STR(r->obj, "roleRef", "kind"), STR(r->obj, "roleRef", "name"));
    json_object *o = cell_str(b.p);
    kite_buf_release(&b);
    return o;
}

/* rbac.SubjectsStrings: the subjects of one kind, ", "-joined; service accounts as ns/name. */
static json_object *subjects_of(const struct kite_table_row *r, const char *kind) {
    struct kite_buf b = {0};
    json_object *subs = OBJ(r->obj, "subjects");
    bool any = false;
    for (size_t i = 0; i < arr_len(subs); i++) {
        json_object *s = json_object_array_get_idx(subs, i);
        if (strcmp(STR(s, "kind"), kind) != 0) continue;
        const char *ns = STR(s, "namespace");
        kite_buf_printf(&b, "%s%s%s%s", any ? ", " : "", strcmp(kind, "ServiceAccount") == 0 && *ns ? ns : "",
                        strcmp(kind, "ServiceAccount") == 0 && *ns ? "/" : "", STR(s, "name"));
        any = true;
    }
    json_object *o = cell_str(b.p ? b.p : "");
    kite_buf_release(&b);
    return o;
}
static json_object *binding_users(const struct kite_table_row *r) { return subjects_of(r, "User"); }
static json_object *binding_groups(const struct kite_table_row *r) { return subjects_of(r, "Group"); }
static json_object *binding_sas(const struct kite_table_row *r) { return subjects_of(r, "ServiceAccount"); }

static const struct kite_table_column binding_cols[] = {
    COL_NAME,
    {"Role", binding_role, "string", "",
     "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef "
     "cannot be resolved, the Authorizer must return an error. This field is immutable.",
     0},
    COL_AGE,
    {"Users", binding_users, "string", "", "Users in the roleBinding", 1},
    {"Groups", binding_groups, "string", "", "Groups in the roleBinding", 1},
    {"ServiceAccounts", binding_sas, "string", "", "ServiceAccounts in the roleBinding", 1},
};
static const struct kite_table_printer binding_printer = TABLE_PRINTER(binding_cols);

/* ---- rows ---------------------------------------------------------------------------------- */
#define RBAC_ROW KITE_GROUP_VERSION(RBAC_GROUP, "v1"), .unconditional_update = true, .name_rule = KITE_NAME_PATH_SEGMENT, \
                 .smp = &kite_meta_smp_schema

const struct kite_resource kite_kind_role = {
    RBAC_ROW, .schema = &kite_schema_role, .kind = "Role", .list_kind = "RoleList", .plural = "roles",
    .singular = "role", .namespaced = true, .table = &role_printer, .validate = role_validate,
};

const struct kite_resource kite_kind_clusterrole = {
    RBAC_ROW, .schema = &kite_schema_clusterrole, .kind = "ClusterRole", .list_kind = "ClusterRoleList",
    .plural = "clusterroles", .singular = "clusterrole", .table = &role_printer, .validate = clusterrole_validate,
};

const struct kite_resource kite_kind_rolebinding = {
    RBAC_ROW, .schema = &kite_schema_rolebinding, .kind = "RoleBinding", .list_kind = "RoleBindingList",
    .plural = "rolebindings", .singular = "rolebinding", .namespaced = true, .table = &binding_printer,
    .defaults = binding_defaults, .validate = rolebinding_validate,
};

const struct kite_resource kite_kind_clusterrolebinding = {
    RBAC_ROW, .schema = &kite_schema_clusterrolebinding, .kind = "ClusterRoleBinding",
    .list_kind = "ClusterRoleBindingList", .plural = "clusterrolebindings", .singular = "clusterrolebinding",
    .table = &binding_printer, .defaults = binding_defaults, .validate = clusterrolebinding_validate,
};
