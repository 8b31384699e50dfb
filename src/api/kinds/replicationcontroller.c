/* ReplicationController (v1): schema (k8s.io/api core/v1 generated.proto), defaults
 * (SetDefaults_ReplicationController: the selector and labels from the template's labels),
 * validation (ValidateReplicationController: a map selector, which, unlike a ReplicaSet's, may
 * change), /status and /scale, and kubectl's printer. Its pods are kept by the ReplicaSet
 * controller's core run for this kind (src/controllers/replication.c). */
#include "api/kinds/workload.h"

STRUCT(rc_condition, "ReplicationControllerCondition", FR(1, "type", S), FR(2, "status", S),
       F(3, "lastTransitionTime", T), F(4, "reason", S), F(5, "message", S));
LIST(rc_conditions, NULL, rc_condition);
STRUCT(rc_spec, "ReplicationControllerSpec", FK(1, "replicas", I32), F(4, "minReadySeconds", I32),
       F(2, "selector", SMAP), F(3, "template", kite_schema_pod_template_spec));
STRUCT(rc_status, "ReplicationControllerStatus", FR(1, "replicas", I32), F(2, "fullyLabeledReplicas", I32),
       F(4, "readyReplicas", I32), F(5, "availableReplicas", I32), F(3, "observedGeneration", I64),
       F(6, "conditions", rc_conditions));
ROOT_DOC(kite_schema_replicationcontroller, "ReplicationController",
         "ReplicationController represents the configuration of a replication controller.", TYPE_META,
         F(2, "spec", rc_spec), F(3, "status", rc_status));

static const struct kite_smp_rule rules[] = {META_RULES, TEMPLATE_RULES};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

static bool empty_map(json_object *m) {
    return !m || !json_object_is_type(m, json_type_object) || json_object_object_length(m) == 0;
}

static json_object *copy(json_object *o) {
    json_object *c = NULL;
    return json_object_deep_copy(o, &c, NULL) == 0 ? c : NULL;
}

static void rc_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    json_object *tmpl = OBJ(spec, "template"), *tlabels = OBJ(tmpl, "metadata", "labels");
    if (!empty_map(tlabels)) {
        if (empty_map(OBJ(spec, "selector"))) kite_obj_set(spec, "selector", copy(tlabels));
        if (empty_map(OBJ(obj, "metadata", "labels"))) kite_obj_set(kite_obj_ensure(obj, "metadata"), "labels", copy(tlabels));
    }
    if (!kite_obj_get(spec, "replicas")) kite_obj_set(spec, "replicas", json_object_new_int(1));
    if (tmpl) kite_pod_template_defaults(tmpl);
}

/* labels.FormatLabels / SelectorFromSet's String(): "k=v,k2=v2", keys sorted */
static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }
static void map_string(json_object *m, struct kite_buf *out) {
    if (empty_map(m)) return;
    size_t n = 0;
    const char **keys = kite_calloc((size_t)json_object_object_length(m), sizeof *keys);
    json_object_object_foreach(m, k, v) {
        (void)v;
        keys[n++] = k;
    }
    qsort(keys, n, sizeof *keys, cmp_str);
    for (size_t i = 0; i < n; i++) kite_buf_printf(out, "%s%s=%s", i ? "," : "", keys[i], STR(m, keys[i]));
    free(keys);
}

static void rc_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec"), *sel = OBJ(spec, "selector"), *tmpl = OBJ(spec, "template");
    static const char *const nonneg[] = {"replicas", "minReadySeconds"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(nonneg); i++)
        if (int_of(OBJ(spec, nonneg[i])) < 0)
            kite_causes_add(c, "FieldValueInvalid", nonneg[i][0] == 'r' ? "spec.replicas" : "spec.minReadySeconds",
                            "Invalid value: %lld: must be greater than or equal to 0", (long long)int_of(OBJ(spec, nonneg[i])));
    if (empty_map(sel)) kite_causes_add(c, "FieldValueRequired", "spec.selector", "Required value");
    if (!tmpl || json_object_is_type(tmpl, json_type_null)) {
        kite_causes_add(c, "FieldValueRequired", "spec.template", "Required value");
        return;
    }
    json_object *tlabels = OBJ(tmpl, "metadata", "labels");
    if (!empty_map(sel)) {
        json_object_object_foreach(sel, k, v) {
            const char *have = STR(tlabels, k);
            if (!OBJ(tlabels, k) || strcmp(have, json_object_get_string(v)) != 0) {
                struct kite_buf m = {0};
                kite_buf_printf(&m, "map[");
                map_string(tlabels, &m);
                for (char *p = m.p; p && *p; p++)
                    if (*p == ',') *p = ' ';
                for (char *p = m.p; p && *p; p++)
                    if (*p == '=') *p = ':';
                kite_buf_printf(&m, "]");
                kite_causes_add(c, "FieldValueInvalid", "spec.template.metadata.labels",
                                "Invalid value: %s: selector does not match template labels", m.p);
                kite_buf_release(&m);
                break;
            }
        }
    }
    kite_pod_template_validate(tmpl, "spec.template", c);
    const char *rp = STR(tmpl, "spec", "restartPolicy");
    if (*rp && strcmp(rp, "Always") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.template.spec.restartPolicy",
                        "Unsupported value: \"%s\": supported values: \"Always\"", rp);
    if (OBJ(tmpl, "spec", "activeDeadlineSeconds"))
        kite_causes_add(c, "FieldValueForbidden", "spec.template.spec.activeDeadlineSeconds",
                        "Forbidden: activeDeadlineSeconds in ReplicationController is not Supported");
}

/* /scale: the workloads' Scale with the map selector's string */
static json_object *rc_scale_view(json_object *obj) {
    json_object *v = kite_workload_scale_view(obj);
    struct kite_buf s = {0};
    map_string(OBJ(obj, "spec", "selector"), &s);
    kite_obj_set(kite_obj_ensure(v, "status"), "selector", json_object_new_string(s.p ? s.p : ""));
    kite_buf_release(&s);
    return v;
}

static json_object *cell_int(json_object *obj, const char *a, const char *b) { return json_object_new_int64(int_of(OBJ(obj, a, b))); }
static json_object *rc_desired(const struct kite_table_row *r) { return cell_int(r->obj, "spec", "replicas"); }
static json_object *rc_current(const struct kite_table_row *r) { return cell_int(r->obj, "status", "replicas"); }
static json_object *rc_ready(const struct kite_table_row *r) { return cell_int(r->obj, "status", "readyReplicas"); }
static json_object *rc_selector(const struct kite_table_row *r) {
    struct kite_buf s = {0};
    map_string(OBJ(r->obj, "spec", "selector"), &s);
    json_object *v = json_object_new_string(s.p ? s.p : "");
    kite_buf_release(&s);
    return v;
}

static const struct kite_table_column rc_cols[] = {
    COL_NAME,
    {"Desired", rc_desired, "integer", "", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller", 0},
    {"Current", rc_current, "integer", "", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller", 0},
    {"Ready", rc_ready, "integer", "", "The number of ready replicas for this replication controller.", 0},
    COL_AGE,
    {"Containers", kite_workload_cell_containers, "string", "", "Names of each container in the template.", 1},
    {"Images", kite_workload_cell_images, "string", "", "Images referenced by each container in the template.", 1},
    {"Selector", rc_selector, "string", "", "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors", 1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(rc_cols);

static const struct kite_subresource subresources[] = {
    {.name = "scale", .field = "spec", .body_group = "autoscaling", .body_version = "v1", .body_kind = "Scale",
     .view = rc_scale_view, .apply = kite_workload_scale_apply},
    {0}};

const struct kite_resource kite_kind_replicationcontroller = {
    .schema = &kite_schema_replicationcontroller,
    KITE_CORE_V1, .kind = "ReplicationController", .list_kind = "ReplicationControllerList",
    .plural = "replicationcontrollers", .singular = "replicationcontroller", .short_names = {"rc"},
    .categories = {"all"}, .namespaced = true, .has_status = true, .spec_generation = true,
    .unconditional_update = true, .gc_owner = true, .smp = &smp, .table = &printer, .subresources = subresources,
    .defaults = rc_defaults, .validate = rc_validate, .pod_template = "spec.template",
};
