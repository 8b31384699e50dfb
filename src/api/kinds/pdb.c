/* PodDisruptionBudget (policy/v1): how many of a set of pods evictions may take down at once.
 * The disruption controller keeps its status; the eviction subresource of pods reads and
 * decrements it (api/disruption.h). */
#include "api/disruption.h"
#include "api/kinds/kind.h"

STRUCT(pdb_label_requirement, "LabelSelectorRequirement", FR(1, "key", S), FR(2, "operator", S), F(3, "values", SLIST));
LIST(pdb_label_requirements, NULL, pdb_label_requirement);
STRUCT(pdb_label_selector, "LabelSelector", F(1, "matchLabels", SMAP), F(2, "matchExpressions", pdb_label_requirements));
STRUCT(pdb_spec, "PodDisruptionBudgetSpec", F(1, "minAvailable", kite_schema_int_or_string),
    F(2, "selector", pdb_label_selector), F(3, "maxUnavailable", kite_schema_int_or_string),
    F(4, "unhealthyPodEvictionPolicy", S));
STRUCT(pdb_condition, "Condition", FR(1, "type", S), FR(2, "status", S), F(3, "observedGeneration", I64),
    FR(4, "lastTransitionTime", T), FR(5, "reason", S), FR(6, "message", S));
LIST(pdb_conditions, NULL, pdb_condition);
static const struct kite_schema pdb_time_map = {.type = KITE_SCHEMA_MAP, .go_type = "map[string]v1.Time", .elem = &T};
STRUCT(pdb_status, "PodDisruptionBudgetStatus", F(1, "observedGeneration", I64), F(2, "disruptedPods", pdb_time_map),
    FR(3, "disruptionsAllowed", I32), FR(4, "currentHealthy", I32), FR(5, "desiredHealthy", I32),
    FR(6, "expectedPods", I32), F(7, "conditions", pdb_conditions));
ROOT_DOC(kite_schema_pdb, "PodDisruptionBudget",
    "PodDisruptionBudget is an object to define the max disruption that can be caused to a collection of pods",
    TYPE_META, F(2, "spec", pdb_spec), F(3, "status", pdb_status));

static const struct kite_smp_rule smp_rules[] = {
    META_RULES,
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema smp = {smp_rules, KITE_ARRAY_SIZE(smp_rules)};

/* ValidatePositiveIntOrPercent and IsNotMoreThan100Percent */
static void validate_int_or_percent(json_object *v, const char *field, struct kite_causes *c) {
    if (!v || json_object_is_type(v, json_type_null)) return;
    const char *shown = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
    if (json_object_is_type(v, json_type_int)) {
        if (json_object_get_int64(v) < 0)
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: must be greater than or equal to 0", shown);
        return;
    }
    int32_t pct;
    if (kite_pdb_scaled(v, 100, false, &pct) < 0) { /* scaled against 100: the percentage itself */
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: must be an integer or percentage (e.g '5%%')", shown);
        return;
    }
    if (pct < 0) kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: must be greater than or equal to 0", shown);
    else if (pct > 100) kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: must not be greater than 100%%", shown);
}

static void pdb_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec");
    json_object *mina = OBJ(spec, "minAvailable"), *maxu = OBJ(spec, "maxUnavailable");
    bool has_min = mina && !json_object_is_type(mina, json_type_null), has_max = maxu && !json_object_is_type(maxu, json_type_null);
    if (has_min && has_max)
        kite_causes_add(c, "FieldValueInvalid", "spec", "Invalid value: %s: minAvailable and maxUnavailable cannot be both set",
                        json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN));
    validate_int_or_percent(mina, "spec.minAvailable", c);
    validate_int_or_percent(maxu, "spec.maxUnavailable", c);
    const char *policy = STR(obj, "spec", "unhealthyPodEvictionPolicy");
    if (*policy && strcmp(policy, "IfHealthyBudget") != 0 && strcmp(policy, "AlwaysAllow") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.unhealthyPodEvictionPolicy",
                        "Unsupported value: \"%s\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"", policy);
    json_object *exprs = OBJ(spec, "selector", "matchExpressions");
    for (size_t i = 0; i < arr_len(exprs); i++) {
        json_object *e = json_object_array_get_idx(exprs, i);
        const char *op = STR(e, "operator");
        char field[96];
        snprintf(field, sizeof field, "spec.selector.matchExpressions[%zu].operator", i);
        bool set = strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0;
        if (!set && strcmp(op, "Exists") != 0 && strcmp(op, "DoesNotExist") != 0)
            kite_causes_add(c, "FieldValueNotSupported", field, "Unsupported value: \"%s\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\"", op);
        snprintf(field, sizeof field, "spec.selector.matchExpressions[%zu].values", i);
        if (set && !arr_len(OBJ(e, "values")))
            kite_causes_add(c, "FieldValueRequired", field, "Required value: must be specified when `operator` is 'In' or 'NotIn'");
        if (!set && arr_len(OBJ(e, "values")))
            kite_causes_add(c, "FieldValueForbidden", field, "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
    }
}

/* IntOrString.String(): the integer, or the string as given; "N/A" when unset */
static json_object *int_or_string_cell(json_object *v) {
    if (!v || json_object_is_type(v, json_type_null)) return cell_str("N/A");
    if (json_object_is_type(v, json_type_string)) return cell_str(json_object_get_string(v));
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)json_object_get_int64(v));
    return cell_str(buf);
}
static json_object *pdb_min(const struct kite_table_row *r) { return int_or_string_cell(OBJ(r->obj, "spec", "minAvailable")); }
static json_object *pdb_max(const struct kite_table_row *r) { return int_or_string_cell(OBJ(r->obj, "spec", "maxUnavailable")); }
static json_object *pdb_allowed(const struct kite_table_row *r) {
    return json_object_new_int64(int_of(OBJ(r->obj, "status", "disruptionsAllowed")));
}

static const struct kite_table_column pdb_cols[] = {
    COL_NAME,
    {"Min Available", pdb_min, "string", "", "The minimum number or percentage of available pods this budget requires.", 0},
    {"Max Unavailable", pdb_max, "string", "", "The maximum number or percentage of unavailable pods this budget requires.", 0},
    {"Allowed Disruptions", pdb_allowed, "integer", "", "Calculated number of pods that may be disrupted at this time.", 0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(pdb_cols);

const struct kite_resource kite_kind_pdb = {
    .schema = &kite_schema_pdb,
    KITE_GROUP_VERSION("policy", "v1"), .kind = "PodDisruptionBudget", .list_kind = "PodDisruptionBudgetList",
    .plural = "poddisruptionbudgets", .singular = "poddisruptionbudget", .short_names = {"pdb"}, .namespaced = true,
    .has_status = true, .spec_generation = true, .smp = &smp, .table = &printer, .validate = pdb_validate,
};
