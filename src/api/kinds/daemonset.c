/* DaemonSet (apps/v1): schema (k8s.io/api apps/v1 generated.proto), defaults
 * (SetDefaults_DaemonSet), validation (ValidateDaemonSet, ValidateDaemonSetUpdate), /status,
 * and kubectl's printer. Placing the pods is the daemon set controller's work
 * (src/controllers/daemonset.c). */
#include "api/kinds/workload.h"

STRUCT(ds_rolling_update, "RollingUpdateDaemonSet", FK(1, "maxUnavailable", kite_schema_int_or_string),
       FK(2, "maxSurge", kite_schema_int_or_string));
STRUCT(ds_strategy, "DaemonSetUpdateStrategy", F(1, "type", S), F(2, "rollingUpdate", ds_rolling_update));
STRUCT(ds_spec, "DaemonSetSpec", F(1, "selector", kite_schema_label_selector),
       FR(2, "template", kite_schema_pod_template_spec), F(3, "updateStrategy", ds_strategy), F(4, "minReadySeconds", I32),
       FK(6, "revisionHistoryLimit", I32));
STRUCT(ds_condition, "DaemonSetCondition", FR(1, "type", S), FR(2, "status", S), F(3, "lastTransitionTime", T),
       F(4, "reason", S), F(5, "message", S));
LIST(ds_conditions, NULL, ds_condition);
STRUCT(ds_status, "DaemonSetStatus", FR(1, "currentNumberScheduled", I32), FR(2, "numberMisscheduled", I32),
       FR(3, "desiredNumberScheduled", I32), FR(4, "numberReady", I32), F(5, "observedGeneration", I64),
       F(6, "updatedNumberScheduled", I32), F(7, "numberAvailable", I32), F(8, "numberUnavailable", I32),
       FK(9, "collisionCount", I32), F(10, "conditions", ds_conditions));
ROOT_DOC(kite_schema_daemonset, "DaemonSet", "DaemonSet represents the configuration of a daemon set.", TYPE_META,
         F(2, "spec", ds_spec), F(3, "status", ds_status));

static const struct kite_smp_rule rules[] = {META_RULES, TEMPLATE_RULES};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

#define DEFAULT(o, k, v)                                \
    do {                                                \
        if (!kite_obj_get(o, k)) kite_obj_set(o, k, v); \
    } while (0)

static void ds_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    json_object *st = kite_obj_ensure(spec, "updateStrategy");
    if (!*STR(st, "type")) kite_obj_set(st, "type", json_object_new_string("RollingUpdate"));
    if (strcmp(STR(st, "type"), "RollingUpdate") == 0) {
        json_object *ru = kite_obj_ensure(st, "rollingUpdate");
        DEFAULT(ru, "maxUnavailable", json_object_new_int(1));
        DEFAULT(ru, "maxSurge", json_object_new_int(0));
    }
    DEFAULT(spec, "revisionHistoryLimit", json_object_new_int(10));
    json_object *tmpl = OBJ(spec, "template");
    if (tmpl) kite_pod_template_defaults(tmpl);
}

/* An IntOrString: its value (a count, or a percentage when *pct); false when not one. */
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

static int64_t check_ios(json_object *ru, const char *k, struct kite_causes *c) {
    _cleanup_free_ char *field = kite_asprintf("spec.updateStrategy.rollingUpdate.%s", k);
    json_object *v = OBJ(ru, k);
    int64_t n;
    bool pct;
    if (!int_or_percent(v, &n, &pct)) {
        kite_causes_add(c, "FieldValueInvalid", field,
                        "Invalid value: \"%s\": a valid percent string must be a numeric string followed by an ending "
                        "'%%' (e.g. '1%%',  or '93%%', regex used for validation is '[0-9]+%%')",
                        str_of(v));
        return 1;
    }
    if (n < 0)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be greater than or equal to 0", (long long)n);
    else if (pct && n > 100)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": must not be greater than 100%%", str_of(v));
    return n;
}

static void ds_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    kite_workload_validate(obj, old, "empty selector is invalid for daemonset", c);
    json_object *spec = OBJ(obj, "spec"), *st = OBJ(spec, "updateStrategy");
    const char *type = STR(st, "type");
    if (strcmp(type, "RollingUpdate") == 0) {
        json_object *ru = OBJ(st, "rollingUpdate");
        int64_t unavail = check_ios(ru, "maxUnavailable", c), surge = check_ios(ru, "maxSurge", c);
        if (unavail == 0 && surge == 0)
            kite_causes_add(c, "FieldValueInvalid", "spec.updateStrategy.rollingUpdate.maxUnavailable",
                            "Invalid value: %s: may not be 0 when `maxSurge` is 0",
                            json_object_to_json_string_ext(OBJ(ru, "maxUnavailable"), JSON_C_TO_STRING_PLAIN));
    } else if (!*type) {
        kite_causes_add(c, "FieldValueRequired", "spec.updateStrategy.type", "Required value");
    } else if (strcmp(type, "OnDelete") != 0) {
        kite_causes_add(c, "FieldValueNotSupported", "spec.updateStrategy.type",
                        "Unsupported value: \"%s\": supported values: \"OnDelete\", \"RollingUpdate\"", type);
    }
    json_object *rhl = OBJ(spec, "revisionHistoryLimit");
    if (rhl && int_of(rhl) < 0)
        kite_causes_add(c, "FieldValueInvalid", "spec.revisionHistoryLimit",
                        "Invalid value: %lld: must be greater than or equal to 0", (long long)int_of(rhl));
}

/* ---- kubectl's printer (printDaemonSet) ---- */

static json_object *count(const struct kite_table_row *r, const char *k) {
    return json_object_new_int64(int_of(OBJ(r->obj, "status", k)));
}
static json_object *ds_desired(const struct kite_table_row *r) { return count(r, "desiredNumberScheduled"); }
static json_object *ds_current(const struct kite_table_row *r) { return count(r, "currentNumberScheduled"); }
static json_object *ds_ready(const struct kite_table_row *r) { return count(r, "numberReady"); }
static json_object *ds_updated(const struct kite_table_row *r) { return count(r, "updatedNumberScheduled"); }
static json_object *ds_available(const struct kite_table_row *r) { return count(r, "numberAvailable"); }

static int cmp_key(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* labels.FormatLabels: "k=v" by key order, "<none>" when empty */
static json_object *ds_node_selector(const struct kite_table_row *r) {
    json_object *ns = OBJ(r->obj, "spec", "template", "spec", "nodeSelector");
    size_t n = ns && json_object_is_type(ns, json_type_object) ? (size_t)json_object_object_length(ns) : 0;
    if (!n) return cell_str("<none>");
    const char **keys = kite_calloc(n, sizeof *keys);
    size_t m = 0;
    json_object_object_foreach(ns, k, v) {
        (void)v;
        keys[m++] = k;
    }
    qsort(keys, m, sizeof *keys, cmp_key);
    struct kite_buf b = {0};
    for (size_t i = 0; i < m; i++) kite_buf_printf(&b, "%s%s=%s", i ? "," : "", keys[i], STR(ns, keys[i]));
    free(keys);
    json_object *cell = cell_str(b.p);
    kite_buf_release(&b);
    return cell;
}

static const struct kite_table_column ds_cols[] = {
    COL_NAME,
    {"Desired", ds_desired, "integer", "",
     "The total number of nodes that should be running the daemon pod (including nodes correctly running the "
     "daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
     0},
    {"Current", ds_current, "integer", "",
     "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More "
     "info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
     0},
    {"Ready", ds_ready, "integer", "",
     "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon "
     "pod running with a Ready Condition.",
     0},
    {"Up-to-date", ds_updated, "integer", "",
     "The total number of nodes that are running updated daemon pod", 0},
    {"Available", ds_available, "integer", "",
     "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and "
     "available (ready for at least spec.minReadySeconds)",
     0},
    {"Node Selector", ds_node_selector, "string", "",
     "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a "
     "node's labels for the pod to be scheduled on that node. More info: "
     "https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
     0},
    COL_AGE,
    {"Containers", kite_workload_cell_containers, "string", "", "Names of each container in the template.", 1},
    {"Images", kite_workload_cell_images, "string", "", "Images referenced by each container in the template.", 1},
    {"Selector", kite_workload_cell_selector, "string", "",
     "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must "
     "match the pod template's labels. More info: "
     "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
     1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(ds_cols);

const struct kite_resource kite_kind_daemonset = {
    .schema = &kite_schema_daemonset,
    KITE_GROUP_VERSION("apps", "v1"), .kind = "DaemonSet", .list_kind = "DaemonSetList", .plural = "daemonsets",
    .singular = "daemonset", .short_names = {"ds"}, .categories = {"all"}, .namespaced = true, .has_status = true, .gc_owner = true,
    .spec_generation = true, .smp = &smp, .table = &printer, .defaults = ds_defaults, .validate = ds_validate,
    .pod_template = "spec.template",
};
