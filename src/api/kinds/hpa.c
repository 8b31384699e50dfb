/* HorizontalPodAutoscaler (autoscaling/v2), stored and served only: schema (k8s.io/api
 * autoscaling/v2 generated.proto), defaults (SetDefaults_HorizontalPodAutoscaler), validation
 * (ValidateHorizontalPodAutoscaler's spec checks) and kubectl's printer. No controller scales
 * anything: kite has no metrics API (metrics.k8s.io) to read utilization from, so status stays
 * as written and TARGETS shows <unknown>, as on a cluster without metrics-server. */
#include "api/kinds/workload.h"

STRUCT(hpa_ref, "CrossVersionObjectReference", FR(1, "kind", S), FR(2, "name", S), F(3, "apiVersion", S));
STRUCT(hpa_target, "MetricTarget", FR(1, "type", S), F(2, "value", Q), F(3, "averageValue", Q),
       F(4, "averageUtilization", I32));
STRUCT(hpa_value_status, "MetricValueStatus", F(1, "value", Q), F(2, "averageValue", Q), F(3, "averageUtilization", I32));
STRUCT(hpa_metric_id, "MetricIdentifier", FR(1, "name", S), F(2, "selector", kite_schema_label_selector));
STRUCT(hpa_resource, "ResourceMetricSource", FR(1, "name", S), FR(2, "target", hpa_target));
STRUCT(hpa_container_resource, "ContainerResourceMetricSource", FR(1, "name", S), FR(2, "target", hpa_target),
       FR(3, "container", S));
STRUCT(hpa_pods, "PodsMetricSource", FR(1, "metric", hpa_metric_id), FR(2, "target", hpa_target));
STRUCT(hpa_object, "ObjectMetricSource", FR(1, "describedObject", hpa_ref), FR(2, "target", hpa_target),
       FR(3, "metric", hpa_metric_id));
STRUCT(hpa_external, "ExternalMetricSource", FR(1, "metric", hpa_metric_id), FR(2, "target", hpa_target));
STRUCT(hpa_metric, "MetricSpec", FR(1, "type", S), F(2, "object", hpa_object), F(3, "pods", hpa_pods),
       F(4, "resource", hpa_resource), F(7, "containerResource", hpa_container_resource), F(5, "external", hpa_external));
LIST(hpa_metrics, NULL, hpa_metric);
STRUCT(hpa_resource_status, "ResourceMetricStatus", FR(1, "name", S), FR(2, "current", hpa_value_status));
STRUCT(hpa_container_resource_status, "ContainerResourceMetricStatus", FR(1, "name", S),
       FR(2, "current", hpa_value_status), FR(3, "container", S));
STRUCT(hpa_pods_status, "PodsMetricStatus", FR(1, "metric", hpa_metric_id), FR(2, "current", hpa_value_status));
STRUCT(hpa_object_status, "ObjectMetricStatus", FR(1, "metric", hpa_metric_id), FR(2, "current", hpa_value_status),
       FR(3, "describedObject", hpa_ref));
STRUCT(hpa_external_status, "ExternalMetricStatus", FR(1, "metric", hpa_metric_id), FR(2, "current", hpa_value_status));
STRUCT(hpa_metric_status, "MetricStatus", FR(1, "type", S), F(2, "object", hpa_object_status),
       F(3, "pods", hpa_pods_status), F(4, "resource", hpa_resource_status),
       F(7, "containerResource", hpa_container_resource_status), F(5, "external", hpa_external_status));
LIST(hpa_metric_statuses, NULL, hpa_metric_status);
STRUCT(hpa_policy, "HPAScalingPolicy", FR(1, "type", S), FR(2, "value", I32), FR(3, "periodSeconds", I32));
LIST(hpa_policies, NULL, hpa_policy);
STRUCT(hpa_rules, "HPAScalingRules", F(3, "stabilizationWindowSeconds", I32), F(1, "selectPolicy", S),
       F(2, "policies", hpa_policies));
STRUCT(hpa_behavior, "HorizontalPodAutoscalerBehavior", F(1, "scaleUp", hpa_rules), F(2, "scaleDown", hpa_rules));
STRUCT(hpa_spec, "HorizontalPodAutoscalerSpec", FR(1, "scaleTargetRef", hpa_ref), F(2, "minReplicas", I32),
       FR(3, "maxReplicas", I32), F(4, "metrics", hpa_metrics), F(5, "behavior", hpa_behavior));
STRUCT(hpa_condition, "HorizontalPodAutoscalerCondition", FR(1, "type", S), FR(2, "status", S),
       F(3, "lastTransitionTime", T), F(4, "reason", S), F(5, "message", S));
LIST(hpa_conditions, NULL, hpa_condition);
STRUCT(hpa_status, "HorizontalPodAutoscalerStatus", F(1, "observedGeneration", I64), F(2, "lastScaleTime", T),
       F(3, "currentReplicas", I32), FR(4, "desiredReplicas", I32), F(5, "currentMetrics", hpa_metric_statuses),
       F(6, "conditions", hpa_conditions));
ROOT_DOC(kite_schema_hpa, "HorizontalPodAutoscaler",
         "HorizontalPodAutoscaler is the configuration for a horizontal pod autoscaler, which automatically manages the "
         "replica count of any resource implementing the scale subresource based on the metrics specified.",
         TYPE_META, F(2, "spec", hpa_spec), F(3, "status", hpa_status));

static const struct kite_smp_rule rules[] = {META_RULES, {"status.conditions", "type", KITE_SMP_MERGE, NULL}};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

static json_object *parse(const char *s) { return json_tokener_parse(s); }

static void hpa_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!kite_obj_get(spec, "minReplicas")) kite_obj_set(spec, "minReplicas", json_object_new_int(1));
    json_object *m = OBJ(spec, "metrics");
    if (!m || !json_object_is_type(m, json_type_array) || json_object_array_length(m) == 0)
        kite_obj_set(spec, "metrics", parse("[{\"type\":\"Resource\",\"resource\":{\"name\":\"cpu\",\"target\":"
                                            "{\"type\":\"Utilization\",\"averageUtilization\":80}}}]"));
    /* a behavior given is completed with the default rules (GenerateHPAScaleUpRules, ...Down) */
    json_object *b = OBJ(spec, "behavior");
    if (b && json_object_is_type(b, json_type_object)) {
        if (!kite_obj_get(b, "scaleUp"))
            kite_obj_set(b, "scaleUp", parse("{\"stabilizationWindowSeconds\":0,\"selectPolicy\":\"Max\",\"policies\":["
                                             "{\"type\":\"Pods\",\"value\":4,\"periodSeconds\":15},"
                                             "{\"type\":\"Percent\",\"value\":100,\"periodSeconds\":15}]}"));
        if (!kite_obj_get(b, "scaleDown"))
            kite_obj_set(b, "scaleDown", parse("{\"stabilizationWindowSeconds\":300,\"selectPolicy\":\"Max\",\"policies\":["
                                               "{\"type\":\"Percent\",\"value\":100,\"periodSeconds\":15}]}"));
    }
}

static void hpa_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec");
    if (!*STR(spec, "scaleTargetRef", "kind"))
        kite_causes_add(c, "FieldValueRequired", "spec.scaleTargetRef.kind", "Required value");
    if (!*STR(spec, "scaleTargetRef", "name"))
        kite_causes_add(c, "FieldValueRequired", "spec.scaleTargetRef.name", "Required value");
    int64_t min = int_of(OBJ(spec, "minReplicas")), max = int_of(OBJ(spec, "maxReplicas"));
    if (min < 1)
        kite_causes_add(c, "FieldValueInvalid", "spec.minReplicas", "Invalid value: %lld: must be greater than or equal to 1",
                        (long long)min);
    if (max < 1)
        kite_causes_add(c, "FieldValueInvalid", "spec.maxReplicas", "Invalid value: %lld: must be greater than 0",
                        (long long)max);
    else if (max < min)
        kite_causes_add(c, "FieldValueInvalid", "spec.maxReplicas",
                        "Invalid value: %lld: must be greater than or equal to `minReplicas`", (long long)max);
}

static json_object *hpa_reference(const struct kite_table_row *r) {
    _cleanup_free_ char *s = kite_asprintf("%s/%s", STR(r->obj, "spec", "scaleTargetRef", "kind"),
                                           STR(r->obj, "spec", "scaleTargetRef", "name"));
    return json_object_new_string(s);
}

/* kubectl's formatHPAMetrics: "NAME: CURRENT/TARGET" per metric, <unknown> without a current */
static void target_text(json_object *t, struct kite_buf *b) {
    if (strcmp(STR(t, "type"), "Utilization") == 0) kite_buf_printf(b, "%lld%%", (long long)int_of(OBJ(t, "averageUtilization")));
    else if (*STR(t, "averageValue")) kite_buf_printf(b, "%s", STR(t, "averageValue"));
    else kite_buf_printf(b, "%s", STR(t, "value"));
}
static json_object *hpa_targets(const struct kite_table_row *r) {
    json_object *v1 = OBJ(r->obj, "spec", "targetCPUUtilizationPercentage"); /* an autoscaling/v1 object */
    if (v1) {
        _cleanup_free_ char *s = kite_asprintf("cpu: <unknown>/%lld%%", (long long)int_of(v1));
        return json_object_new_string(s);
    }
    json_object *ms = OBJ(r->obj, "spec", "metrics");
    size_t n = ms && json_object_is_type(ms, json_type_array) ? json_object_array_length(ms) : 0;
    if (!n) return json_object_new_string("<none>");
    struct kite_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(ms, i);
        const char *type = STR(m, "type");
        json_object *src = strcmp(type, "Resource") == 0            ? OBJ(m, "resource")
                           : strcmp(type, "ContainerResource") == 0 ? OBJ(m, "containerResource")
                           : strcmp(type, "Pods") == 0              ? OBJ(m, "pods")
                           : strcmp(type, "Object") == 0            ? OBJ(m, "object")
                                                                    : OBJ(m, "external");
        const char *name = *STR(src, "name") ? STR(src, "name") : STR(src, "metric", "name");
        kite_buf_printf(&b, "%s%s: <unknown>/", i ? ", " : "", name);
        target_text(OBJ(src, "target"), &b);
    }
    json_object *v = json_object_new_string(b.p);
    kite_buf_release(&b);
    return v;
}
static json_object *hpa_min(const struct kite_table_row *r) {
    json_object *m = OBJ(r->obj, "spec", "minReplicas");
    if (!m) return json_object_new_string("<unset>");
    _cleanup_free_ char *s = kite_asprintf("%lld", (long long)int_of(m));
    return json_object_new_string(s);
}
static json_object *hpa_max(const struct kite_table_row *r) { return json_object_new_int64(int_of(OBJ(r->obj, "spec", "maxReplicas"))); }
static json_object *hpa_replicas(const struct kite_table_row *r) {
    return json_object_new_int64(int_of(OBJ(r->obj, "status", "currentReplicas")));
}

static const struct kite_table_column hpa_cols[] = {
    COL_NAME,
    {"Reference", hpa_reference, "string", "", "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.", 0},
    {"Targets", hpa_targets, "string", "", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).", 0},
    {"MinPods", hpa_min, "string", "", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.", 0},
    {"MaxPods", hpa_max, "integer", "", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.", 0},
    {"Replicas", hpa_replicas, "integer", "", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.", 0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(hpa_cols);

const struct kite_resource kite_kind_hpa = {
    .schema = &kite_schema_hpa,
    KITE_GROUP_VERSION("autoscaling", "v2"), .kind = "HorizontalPodAutoscaler",
    .list_kind = "HorizontalPodAutoscalerList", .plural = "horizontalpodautoscalers",
    .singular = "horizontalpodautoscaler", .short_names = {"hpa"}, .categories = {"all"}, .namespaced = true,
    .has_status = true, .spec_generation = true, .unconditional_update = true, .smp = &smp, .table = &printer,
    .defaults = hpa_defaults, .validate = hpa_validate,
};

/* ---- autoscaling/v1: served by conversion to and from the stored autoscaling/v2 form ----
 * (targetCPUUtilizationPercentage <-> a cpu Utilization metric; other v2 metrics and the
 * behavior are not shown in v1 and are kept when a v1 write does not name them) */
STRUCT(hpa1_spec, "HorizontalPodAutoscalerSpec", FR(1, "scaleTargetRef", hpa_ref), F(2, "minReplicas", I32),
       FR(3, "maxReplicas", I32), F(4, "targetCPUUtilizationPercentage", I32));
STRUCT(hpa1_status, "HorizontalPodAutoscalerStatus", F(1, "observedGeneration", I64), F(2, "lastScaleTime", T),
       FR(3, "currentReplicas", I32), FR(4, "desiredReplicas", I32), F(5, "currentCPUUtilizationPercentage", I32));
ROOT_DOC(kite_schema_hpa_v1, "HorizontalPodAutoscaler", "configuration of a horizontal pod autoscaler.", TYPE_META,
         F(2, "spec", hpa1_spec), F(3, "status", hpa1_status));

static bool cpu_utilization(json_object *m) {
    return strcmp(STR(m, "type"), "Resource") == 0 && strcmp(STR(m, "resource", "name"), "cpu") == 0 &&
           strcmp(STR(m, "resource", "target", "type"), "Utilization") == 0;
}

static void hpa1_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!kite_obj_get(spec, "minReplicas")) kite_obj_set(spec, "minReplicas", json_object_new_int(1));
}

static void hpa1_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    hpa_validate(obj, old, c);
    json_object *t = OBJ(obj, "spec", "targetCPUUtilizationPercentage");
    if (t && int_of(t) < 1)
        kite_causes_add(c, "FieldValueInvalid", "spec.targetCPUUtilizationPercentage",
                        "Invalid value: %lld: must be greater than or equal to 1", (long long)int_of(t));
}

static void hpa1_to_storage(json_object *obj) {
    json_object_object_add(obj, "apiVersion", json_object_new_string("autoscaling/v2"));
    json_object *spec = kite_obj_ensure(obj, "spec"), *t = OBJ(spec, "targetCPUUtilizationPercentage");
    _cleanup_free_ char *m = kite_asprintf("[{\"type\":\"Resource\",\"resource\":{\"name\":\"cpu\",\"target\":"
                                           "{\"type\":\"Utilization\",\"averageUtilization\":%lld}}}]",
                                           (long long)(t ? int_of(t) : 80));
    kite_obj_set(spec, "metrics", json_tokener_parse(m));
    json_object_object_del(spec, "targetCPUUtilizationPercentage");
    json_object *st = OBJ(obj, "status"), *cur = OBJ(st, "currentCPUUtilizationPercentage");
    if (cur) {
        _cleanup_free_ char *cm = kite_asprintf("[{\"type\":\"Resource\",\"resource\":{\"name\":\"cpu\",\"current\":"
                                                "{\"averageUtilization\":%lld}}}]", (long long)int_of(cur));
        kite_obj_set(st, "currentMetrics", json_tokener_parse(cm));
        json_object_object_del(st, "currentCPUUtilizationPercentage");
    }
}

static void hpa1_from_storage(json_object *obj) {
    json_object_object_add(obj, "apiVersion", json_object_new_string("autoscaling/v1"));
    json_object *spec = OBJ(obj, "spec"), *ms = OBJ(spec, "metrics");
    size_t n = ms && json_object_is_type(ms, json_type_array) ? json_object_array_length(ms) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(ms, i);
        if (cpu_utilization(m))
            kite_obj_set(spec, "targetCPUUtilizationPercentage",
                         json_object_new_int64(int_of(OBJ(m, "resource", "target", "averageUtilization"))));
    }
    if (spec) {
        json_object_object_del(spec, "metrics");
        json_object_object_del(spec, "behavior");
    }
    json_object *st = OBJ(obj, "status"), *cms = OBJ(st, "currentMetrics");
    n = cms && json_object_is_type(cms, json_type_array) ? json_object_array_length(cms) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(cms, i);
        if (strcmp(STR(m, "type"), "Resource") == 0 && strcmp(STR(m, "resource", "name"), "cpu") == 0 &&
            OBJ(m, "resource", "current", "averageUtilization"))
            kite_obj_set(st, "currentCPUUtilizationPercentage",
                         json_object_new_int64(int_of(OBJ(m, "resource", "current", "averageUtilization"))));
    }
    if (st) {
        json_object_object_del(st, "currentMetrics");
        json_object_object_del(st, "conditions");
    }
}

const struct kite_resource kite_kind_hpa_v1 = {
    .schema = &kite_schema_hpa_v1,
    KITE_GROUP_VERSION("autoscaling", "v1"), .kind = "HorizontalPodAutoscaler",
    .list_kind = "HorizontalPodAutoscalerList", .plural = "horizontalpodautoscalers",
    .singular = "horizontalpodautoscaler", .short_names = {"hpa"}, .categories = {"all"},
    .storage = "horizontalpodautoscalers", .namespaced = true, .has_status = true, .spec_generation = true,
    .unconditional_update = true, .smp = &smp, .table = &printer, .defaults = hpa1_defaults,
    .validate = hpa1_validate, .to_storage = hpa1_to_storage, .from_storage = hpa1_from_storage,
};
