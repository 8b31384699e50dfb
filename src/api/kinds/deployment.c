/* Deployment (apps/v1): schema (k8s.io/api apps/v1 generated.proto), defaults
 * (SetDefaults_Deployment), validation (ValidateDeployment, ValidateDeploymentUpdate), /status
 * and /scale, and kubectl's printer. Rollouts are the deployment controller's work
 * (src/controllers/deployment.c). */
#include "api/kinds/workload.h"

STRUCT(rolling_update, "RollingUpdateDeployment", FK(1, "maxUnavailable", kite_schema_int_or_string),
       FK(2, "maxSurge", kite_schema_int_or_string));
STRUCT(strategy, "DeploymentStrategy", F(1, "type", S), F(2, "rollingUpdate", rolling_update));
STRUCT(d_condition, "DeploymentCondition", FR(1, "type", S), FR(2, "status", S), F(6, "lastUpdateTime", T),
       F(7, "lastTransitionTime", T), F(4, "reason", S), F(5, "message", S));
LIST(d_conditions, NULL, d_condition);
STRUCT(d_spec, "DeploymentSpec", FK(1, "replicas", I32), F(2, "selector", kite_schema_label_selector),
       FR(3, "template", kite_schema_pod_template_spec), F(4, "strategy", strategy), F(5, "minReadySeconds", I32),
       FK(6, "revisionHistoryLimit", I32), F(7, "paused", B), FK(9, "progressDeadlineSeconds", I32));
STRUCT(d_status, "DeploymentStatus", F(1, "observedGeneration", I64), F(2, "replicas", I32), F(3, "updatedReplicas", I32),
       F(7, "readyReplicas", I32), F(4, "availableReplicas", I32), F(5, "unavailableReplicas", I32),
       FK(9, "terminatingReplicas", I32), F(6, "conditions", d_conditions), FK(8, "collisionCount", I32));
ROOT_DOC(kite_schema_deployment, "Deployment", "Deployment enables declarative updates for Pods and ReplicaSets.",
         TYPE_META, F(2, "spec", d_spec), F(3, "status", d_status));

static const struct kite_smp_rule rules[] = {META_RULES, TEMPLATE_RULES};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

#define DEFAULT(o, k, v)                                \
    do {                                                \
        if (!kite_obj_get(o, k)) kite_obj_set(o, k, v); \
    } while (0)

static void d_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    DEFAULT(spec, "replicas", json_object_new_int(1));
    json_object *st = kite_obj_ensure(spec, "strategy");
    if (!*STR(st, "type")) kite_obj_set(st, "type", json_object_new_string("RollingUpdate"));
    if (strcmp(STR(st, "type"), "RollingUpdate") == 0) {
        json_object *ru = kite_obj_ensure(st, "rollingUpdate");
        DEFAULT(ru, "maxUnavailable", json_object_new_string("25%"));
        DEFAULT(ru, "maxSurge", json_object_new_string("25%"));
    }
    DEFAULT(spec, "revisionHistoryLimit", json_object_new_int(10));
    DEFAULT(spec, "progressDeadlineSeconds", json_object_new_int(600));
    json_object *tmpl = OBJ(spec, "template");
    if (tmpl) kite_pod_template_defaults(tmpl);
}

/* An IntOrString of a rolling update: an int >= 0, or "N%" with N <= 100. Its value as a
 * percentage (pct) or a count. Returns false when it is not one. */
static bool int_or_percent(json_object *v, int64_t *ret, bool *pct) {
    *pct = false;
    if (!v) return *ret = 0, true;
    if (json_object_is_type(v, json_type_int)) return *ret = json_object_get_int64(v), true;
    const char *s = str_of(v);
    char *end;
    long long n = strtoll(s, &end, 10);
    if (!*s || end == s || strcmp(end, "%") != 0) return false;
    *pct = true;
    *ret = n;
    return true;
}

static void check_ios(json_object *ru, const char *k, int64_t *ret, struct kite_causes *c) {
    char field[64];
    snprintf(field, sizeof field, "spec.strategy.rollingUpdate.%s", k);
    bool pct;
    json_object *v = OBJ(ru, k);
    if (!int_or_percent(v, ret, &pct)) {
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": a valid percent string must be a numeric string followed by an ending '%%' (e.g. '1%%',  or '93%%', regex used for validation is '[0-9]+%%')", str_of(v));
        *ret = 1;
        return;
    }
    if (*ret < 0)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be greater than or equal to 0", (long long)*ret);
    else if (pct && *ret > 100)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": must not be greater than 100%%", str_of(v));
}

static void d_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    kite_workload_validate(obj, old, "empty selector is invalid for deployment", c);
    json_object *spec = OBJ(obj, "spec"), *st = OBJ(spec, "strategy");
    const char *type = STR(st, "type");
    if (strcmp(type, "Recreate") == 0) {
        if (OBJ(st, "rollingUpdate"))
            kite_causes_add(c, "FieldValueForbidden", "spec.strategy.rollingUpdate",
                            "Forbidden: may not be specified when strategy `type` is 'Recreate'");
    } else if (strcmp(type, "RollingUpdate") == 0) {
        json_object *ru = OBJ(st, "rollingUpdate");
        int64_t surge, unavail;
        check_ios(ru, "maxSurge", &surge, c);
        check_ios(ru, "maxUnavailable", &unavail, c);
        if (surge == 0 && unavail == 0)
            kite_causes_add(c, "FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable",
                            "Invalid value: %s: may not be 0 when `maxSurge` is 0",
                            json_object_to_json_string(OBJ(ru, "maxUnavailable")));
    } else if (!*type) {
        kite_causes_add(c, "FieldValueRequired", "spec.strategy.type", "Required value");
    } else {
        kite_causes_add(c, "FieldValueNotSupported", "spec.strategy.type",
                        "Unsupported value: \"%s\": supported values: \"Recreate\", \"RollingUpdate\"", type);
    }
    json_object *rhl = OBJ(spec, "revisionHistoryLimit");
    if (rhl && int_of(rhl) < 0)
        kite_causes_add(c, "FieldValueInvalid", "spec.revisionHistoryLimit",
                        "Invalid value: %lld: must be greater than or equal to 0", (long long)int_of(rhl));
    json_object *pds = OBJ(spec, "progressDeadlineSeconds");
    if (pds) {
        if (int_of(pds) < 0)
            kite_causes_add(c, "FieldValueInvalid", "spec.progressDeadlineSeconds",
                            "Invalid value: %lld: must be greater than or equal to 0", (long long)int_of(pds));
        else if (int_of(pds) <= int_of(OBJ(spec, "minReadySeconds")))
            kite_causes_add(c, "FieldValueInvalid", "spec.progressDeadlineSeconds",
                            "Invalid value: %lld: must be greater than minReadySeconds", (long long)int_of(pds));
    }
}

static json_object *d_ready(const struct kite_table_row *r) {
    char buf[48];
    snprintf(buf, sizeof buf, "%lld/%lld", (long long)int_of(OBJ(r->obj, "status", "readyReplicas")),
             (long long)int_of(OBJ(r->obj, "spec", "replicas")));
    return cell_str(buf);
}
static json_object *d_updated(const struct kite_table_row *r) { return json_object_new_int64(int_of(OBJ(r->obj, "status", "updatedReplicas"))); }
static json_object *d_available(const struct kite_table_row *r) { return json_object_new_int64(int_of(OBJ(r->obj, "status", "availableReplicas"))); }

static const struct kite_table_column d_cols[] = {
    COL_NAME,
    {"Ready", d_ready, "string", "", "Number of the pod with ready state", 0},
    {"Up-to-date", d_updated, "string", "", "Total number of non-terminating pods targeted by this deployment that have the desired template spec.", 0},
    {"Available", d_available, "string", "", "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.", 0},
    COL_AGE,
    {"Containers", kite_workload_cell_containers, "string", "", "Names of each container in the template.", 1},
    {"Images", kite_workload_cell_images, "string", "", "Images referenced by each container in the template.", 1},
    {"Selector", kite_workload_cell_selector, "string", "", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.", 1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(d_cols);

static const struct kite_subresource subresources[] = {KITE_WORKLOAD_SCALE, {0}};

const struct kite_resource kite_kind_deployment = {
    .schema = &kite_schema_deployment,
    KITE_GROUP_VERSION("apps", "v1"), .kind = "Deployment", .list_kind = "DeploymentList", .plural = "deployments",
    .singular = "deployment", .short_names = {"deploy"}, .categories = {"all"}, .namespaced = true, .has_status = true,
    .spec_generation = true, .unconditional_update = true, .gc_owner = true, .smp = &smp, .table = &printer, .subresources = subresources,
    .defaults = d_defaults, .validate = d_validate, .pod_template = "spec.template", .status_keeps_meta = {"labels"},
};
