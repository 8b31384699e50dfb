/* StatefulSet (apps/v1): schema (k8s.io/api apps/v1 generated.proto), defaults
 * (SetDefaults_StatefulSet), validation (ValidateStatefulSet, ValidateStatefulSetUpdate),
 * /status and /scale, and kubectl's printer. volumeClaimTemplates are refused (422): kite
 * serves no PersistentVolumeClaims to bind them to. Its pods are the StatefulSet controller's
 * work (src/controllers/statefulset.c). */
#include "api/kinds/workload.h"

STRUCT(sts_rolling_update, "RollingUpdateStatefulSetStrategy", F(1, "partition", I32),
       F(2, "maxUnavailable", kite_schema_int_or_string));
STRUCT(sts_strategy, "StatefulSetUpdateStrategy", F(1, "type", S), F(2, "rollingUpdate", sts_rolling_update));
STRUCT(sts_retention, "StatefulSetPersistentVolumeClaimRetentionPolicy", F(1, "whenDeleted", S), F(2, "whenScaled", S));
STRUCT(sts_ordinals, "StatefulSetOrdinals", F(1, "start", I32));
LIST(sts_claims, NULL, kite_schema_raw);
STRUCT(sts_spec, "StatefulSetSpec", F(1, "replicas", I32), F(2, "selector", kite_schema_label_selector),
       FR(3, "template", kite_schema_pod_template_spec), F(4, "volumeClaimTemplates", sts_claims),
       F(5, "serviceName", S), F(6, "podManagementPolicy", S), F(7, "updateStrategy", sts_strategy),
       F(8, "revisionHistoryLimit", I32), F(9, "minReadySeconds", I32),
       F(10, "persistentVolumeClaimRetentionPolicy", sts_retention), F(11, "ordinals", sts_ordinals));
STRUCT(sts_condition, "StatefulSetCondition", FR(1, "type", S), FR(2, "status", S), F(3, "lastTransitionTime", T),
       F(4, "reason", S), F(5, "message", S));
LIST(sts_conditions, NULL, sts_condition);
STRUCT(sts_status, "StatefulSetStatus", F(1, "observedGeneration", I64), FR(2, "replicas", I32),
       F(3, "readyReplicas", I32), F(4, "currentReplicas", I32), F(5, "updatedReplicas", I32),
       F(6, "currentRevision", S), F(7, "updateRevision", S), F(9, "collisionCount", I32),
       F(10, "conditions", sts_conditions), FK(11, "availableReplicas", I32));
ROOT_DOC(kite_schema_statefulset, "StatefulSet",
         "StatefulSet represents a set of pods with consistent identities. Identities are defined as:\n  - Network: A "
         "single stable DNS and hostname.\n  - Storage: As many VolumeClaims as requested.\n\nThe StatefulSet guarantees "
         "that a given network identity will always map to the same storage identity.",
         TYPE_META, F(2, "spec", sts_spec), F(3, "status", sts_status));

static const struct kite_smp_rule rules[] = {META_RULES, TEMPLATE_RULES};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

#define DEFAULT(o, k, v)                                \
    do {                                                \
        if (!kite_obj_get(o, k)) kite_obj_set(o, k, v); \
    } while (0)

static void sts_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    DEFAULT(spec, "podManagementPolicy", json_object_new_string("OrderedReady"));
    json_object *st = kite_obj_ensure(spec, "updateStrategy");
    if (!*STR(st, "type")) kite_obj_set(st, "type", json_object_new_string("RollingUpdate"));
    if (strcmp(STR(st, "type"), "RollingUpdate") == 0) DEFAULT(kite_obj_ensure(st, "rollingUpdate"), "partition", json_object_new_int(0));
    DEFAULT(spec, "replicas", json_object_new_int(1));
    DEFAULT(spec, "revisionHistoryLimit", json_object_new_int(10));
    json_object *rp = kite_obj_ensure(spec, "persistentVolumeClaimRetentionPolicy");
    DEFAULT(rp, "whenDeleted", json_object_new_string("Retain"));
    DEFAULT(rp, "whenScaled", json_object_new_string("Retain"));
    json_object *tmpl = OBJ(spec, "template");
    if (tmpl) kite_pod_template_defaults(tmpl);
}

static void sts_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec");
    const char *pmp = STR(spec, "podManagementPolicy");
    if (strcmp(pmp, "OrderedReady") != 0 && strcmp(pmp, "Parallel") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.podManagementPolicy",
                        "Unsupported value: \"%s\": supported values: \"OrderedReady\", \"Parallel\"", pmp);
    json_object *st = OBJ(spec, "updateStrategy");
    const char *t = STR(st, "type");
    if (strcmp(t, "RollingUpdate") == 0) {
        if (int_of(OBJ(st, "rollingUpdate", "partition")) < 0)
            kite_causes_add(c, "FieldValueInvalid", "spec.updateStrategy.rollingUpdate.partition",
                            "Invalid value: %lld: must be greater than or equal to 0",
                            (long long)int_of(OBJ(st, "rollingUpdate", "partition")));
    } else if (strcmp(t, "OnDelete") == 0) {
        if (OBJ(st, "rollingUpdate"))
            kite_causes_add(c, "FieldValueInvalid", "spec.updateStrategy.rollingUpdate",
                            "Invalid value: \"null\": only allowed for updateStrategy 'RollingUpdate'");
    } else {
        kite_causes_add(c, "FieldValueNotSupported", "spec.updateStrategy.type",
                        "Unsupported value: \"%s\": supported values: \"OnDelete\", \"RollingUpdate\"", t);
    }
    json_object *claims = OBJ(spec, "volumeClaimTemplates");
    if (claims && json_object_is_type(claims, json_type_array) && json_object_array_length(claims) > 0)
        kite_causes_add(c, "FieldValueForbidden", "spec.volumeClaimTemplates",
                        "Forbidden: not supported: this cluster serves no PersistentVolumeClaims (use emptyDir or "
                        "hostPath volumes in the template)");
    kite_workload_validate(obj, old, "empty selector is invalid for statefulset", c);
    if (old) {
        /* ValidateStatefulSetUpdate: only these may change */
        static const char *const mutable[] = {"replicas", "ordinals", "template", "updateStrategy",
                                              "persistentVolumeClaimRetentionPolicy", "minReadySeconds"};
        json_object *ospec = OBJ(old, "spec");
        json_object_object_foreach(spec, k, v) {
            bool m = false;
            for (size_t i = 0; i < KITE_ARRAY_SIZE(mutable); i++) m |= strcmp(k, mutable[i]) == 0;
            if (!m && strcmp(k, "selector") != 0 && !kite_json_equal(v, OBJ(ospec, k))) {
                kite_causes_add(c, "FieldValueForbidden", "spec",
                                "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                                "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                                "'minReadySeconds' are forbidden");
                break;
            }
        }
    }
}

static json_object *sts_ready(const struct kite_table_row *r) {
    _cleanup_free_ char *s = kite_asprintf("%lld/%lld", (long long)int_of(OBJ(r->obj, "status", "readyReplicas")),
                                           (long long)int_of(OBJ(r->obj, "spec", "replicas")));
    return json_object_new_string(s);
}

static const struct kite_table_column sts_cols[] = {
    COL_NAME,
    {"Ready", sts_ready, "string", "", "Number of the pod with ready state", 0},
    COL_AGE,
    {"Containers", kite_workload_cell_containers, "string", "", "Names of each container in the template.", 1},
    {"Images", kite_workload_cell_images, "string", "", "Images referenced by each container in the template.", 1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(sts_cols);

static const struct kite_subresource subresources[] = {KITE_WORKLOAD_SCALE, {0}};

const struct kite_resource kite_kind_statefulset = {
    .schema = &kite_schema_statefulset,
    KITE_GROUP_VERSION("apps", "v1"), .kind = "StatefulSet", .list_kind = "StatefulSetList", .plural = "statefulsets",
    .singular = "statefulset", .short_names = {"sts"}, .categories = {"all"}, .namespaced = true, .has_status = true,
    .spec_generation = true, .unconditional_update = true, .gc_owner = true, .smp = &smp, .table = &printer,
    .subresources = subresources, .defaults = sts_defaults, .validate = sts_validate, .pod_template = "spec.template",
};
