/* Namespace (core/v1): the spec.finalizers the namespace controller clears before a deleted
 * namespace goes away, phase Active/Terminating, the immutable kubernetes.io/metadata.name
 * label, and the namespaces every cluster has. */
#include "api/kinds/kind.h"

/* ---- core/v1 Namespace --------------------------------------------------------------------- */
LIST(ns_finalizers, "[]v1.FinalizerName", S);
STRUCT(ns_spec, "NamespaceSpec", F(1, "finalizers", ns_finalizers));
STRUCT(ns_condition, "NamespaceCondition", FR(1, "type", S), FR(2, "status", S), F(4, "lastTransitionTime", T),
    F(5, "reason", S), F(6, "message", S));
LIST(ns_conditions, NULL, ns_condition);
STRUCT(ns_status, "NamespaceStatus", F(1, "phase", S), F(2, "conditions", ns_conditions));
ROOT_DOC(kite_schema_namespace, "Namespace",
    "Namespace provides a scope for Names. Use of multiple namespaces is optional.", TYPE_META, F(2, "spec", ns_spec), F(3, "status", ns_status));

static const struct kite_smp_rule rules[] = {
    META_RULES,
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

static const char *const fields[] = {"status.phase", NULL};

static void namespace_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!kite_obj_get(spec, "finalizers")) {
        json_object *f = json_object_new_array();
        json_object_array_add(f, json_object_new_string("kubernetes"));
        kite_obj_set(spec, "finalizers", f);
    }
    json_object *status = kite_obj_ensure(obj, "status");
    if (!kite_obj_str(status, "phase")) kite_obj_set(status, "phase", json_object_new_string("Active"));
    /* the immutable kubernetes.io/metadata.name label, as the NamespaceDefaultLabelName gate does */
    json_object *labels = kite_obj_ensure(kite_obj_ensure(obj, "metadata"), "labels");
    const char *name = kite_meta_str(obj, "name");
    if (name) kite_obj_set(labels, "kubernetes.io/metadata.name", json_object_new_string(name));
}

/* The namespace controller's finalizer: a deleted namespace stays, Terminating, until the
 * controller emptied it and removed "kubernetes" from spec.finalizers (the finalize
 * subresource). */
static bool finalizing(json_object *obj) {
    json_object *f = kite_obj_get(kite_obj_get(obj, "spec"), "finalizers");
    return f && json_object_is_type(f, json_type_array) && json_object_array_length(f) > 0;
}

static void terminating(json_object *obj) {
    kite_obj_set(kite_obj_ensure(obj, "status"), "phase", json_object_new_string("Terminating"));
}

static json_object *namespace_status(const struct kite_table_row *r) { return cell_str(STR(r->obj, "status", "phase")); }

static const struct kite_table_column namespace_cols[] = {
    COL_NAME,
    {"Status", namespace_status, "string", "", "The status of the namespace", 0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(namespace_cols);

static const struct kite_subresource subresources[] = {{.name = "finalize", .field = "spec", .update_only = true}, {0}};
static const char *const bootstrap[] = {"default", "kube-system", "kube-public", "kube-node-lease", NULL};
/* kube-apiserver's NamespaceLifecycle: the namespaces the system itself lives in */
static const char *const undeletable[] = {"default", "kube-system", "kube-public", NULL};

const struct kite_resource kite_kind_namespace = {
    .schema = &kite_schema_namespace,
    KITE_CORE_V1, .kind = "Namespace", .list_kind = "NamespaceList", .plural = "namespaces",
    .singular = "namespace", .short_names = {"ns"}, .has_status = true, .name_rule = KITE_NAME_LABEL,
    .no_deletecollection = true, .delete_returns_object = true, .smp = &smp, .table = &printer,
    .subresources = subresources, .bootstrap = bootstrap, .undeletable = undeletable, .fields = fields,
    .defaults = namespace_defaults, .finalizing = finalizing, .terminating = terminating,
};
