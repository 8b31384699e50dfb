/* ReplicaSet (apps/v1): schema (k8s.io/api apps/v1 generated.proto), defaults
 * (SetDefaults_ReplicaSet), validation (ValidateReplicaSet, ValidateReplicaSetUpdate), /status
 * and /scale, and kubectl's printer. The pods it keeps are the ReplicaSet controller's work
 * (src/controllers/replicaset.c). */
#include "api/kinds/workload.h"

STRUCT(rs_condition, "ReplicaSetCondition", FR(1, "type", S), FR(2, "status", S), F(3, "lastTransitionTime", T),
       F(4, "reason", S), F(5, "message", S));
LIST(rs_conditions, NULL, rs_condition);
STRUCT(rs_spec, "ReplicaSetSpec", FK(1, "replicas", I32), F(4, "minReadySeconds", I32),
       F(2, "selector", kite_schema_label_selector), F(3, "template", kite_schema_pod_template_spec));
STRUCT(rs_status, "ReplicaSetStatus", FR(1, "replicas", I32), F(2, "fullyLabeledReplicas", I32), F(4, "readyReplicas", I32),
       F(5, "availableReplicas", I32), FK(7, "terminatingReplicas", I32), F(3, "observedGeneration", I64),
       F(6, "conditions", rs_conditions));
ROOT_DOC(kite_schema_replicaset, "ReplicaSet",
         "ReplicaSet ensures that a specified number of pod replicas are running at any given time.", TYPE_META,
         F(2, "spec", rs_spec), F(3, "status", rs_status));

static const struct kite_smp_rule rules[] = {META_RULES, TEMPLATE_RULES};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

static void rs_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!kite_obj_get(spec, "replicas")) kite_obj_set(spec, "replicas", json_object_new_int(1));
    json_object *tmpl = OBJ(spec, "template");
    if (tmpl) kite_pod_template_defaults(tmpl);
}

static void rs_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    kite_workload_validate(obj, old, "empty selector is invalid for replicaset", c);
}

static json_object *cell_int(json_object *obj, const char *a, const char *b) { return json_object_new_int64(int_of(OBJ(obj, a, b))); }
static json_object *rs_desired(const struct kite_table_row *r) { return cell_int(r->obj, "spec", "replicas"); }
static json_object *rs_current(const struct kite_table_row *r) { return cell_int(r->obj, "status", "replicas"); }
static json_object *rs_ready(const struct kite_table_row *r) { return cell_int(r->obj, "status", "readyReplicas"); }

static const struct kite_table_column rs_cols[] = {
    COL_NAME,
    {"Desired", rs_desired, "integer", "", "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#how-a-replicaset-works", 0},
    {"Current", rs_current, "integer", "", "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#how-a-replicaset-works", 0},
    {"Ready", rs_ready, "integer", "", "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.", 0},
    COL_AGE,
    {"Containers", kite_workload_cell_containers, "string", "", "Names of each container in the template.", 1},
    {"Images", kite_workload_cell_images, "string", "", "Images referenced by each container in the template.", 1},
    {"Selector", kite_workload_cell_selector, "string", "", "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors", 1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(rs_cols);

static const struct kite_subresource subresources[] = {KITE_WORKLOAD_SCALE, {0}};

const struct kite_resource kite_kind_replicaset = {
    .schema = &kite_schema_replicaset,
    KITE_GROUP_VERSION("apps", "v1"), .kind = "ReplicaSet", .list_kind = "ReplicaSetList", .plural = "replicasets",
    .singular = "replicaset", .short_names = {"rs"}, .categories = {"all"}, .namespaced = true, .has_status = true,
    .spec_generation = true, .unconditional_update = true, .gc_owner = true, .smp = &smp, .table = &printer, .subresources = subresources,
    .defaults = rs_defaults, .validate = rs_validate, .pod_template = "spec.template",
};
