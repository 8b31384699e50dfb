/* Job (batch/v1): schema (k8s.io/api batch/v1 generated.proto), defaults (SetDefaults_Job and
 * the registry's generateSelector: the controller-uid selector and the labels it selects),
 * validation (ValidateJob, ValidateJobUpdate), /status, and kubectl's printer. Running the
 * pods is the job controller's work (src/controllers/job.c). */
#include "api/kinds/workload.h"

LIST(int32_list, NULL, I32);
STRUCT(exit_codes, "PodFailurePolicyOnExitCodesRequirement", F(1, "containerName", S), FR(2, "operator", S),
       F(3, "values", int32_list));
STRUCT(pod_cond_pattern, "PodFailurePolicyOnPodConditionsPattern", FR(1, "type", S), FR(2, "status", S));
LIST(pod_cond_patterns, NULL, pod_cond_pattern);
STRUCT(pfp_rule, "PodFailurePolicyRule", FR(1, "action", S), F(2, "onExitCodes", exit_codes),
       F(3, "onPodConditions", pod_cond_patterns));
LIST(pfp_rules, NULL, pfp_rule);
STRUCT(pod_failure_policy, "PodFailurePolicy", FR(1, "rules", pfp_rules));
STRUCT(success_rule, "SuccessPolicyRule", FK(1, "succeededIndexes", S), FK(2, "succeededCount", I32));
LIST(success_rules, NULL, success_rule);
STRUCT(success_policy, "SuccessPolicy", FR(1, "rules", success_rules));
/* exported: a CronJob's jobTemplate.spec (cronjob.c) */
ROOT(kite_schema_job_spec, "JobSpec", FK(1, "parallelism", I32), FK(2, "completions", I32), FK(3, "activeDeadlineSeconds", I64),
       F(11, "podFailurePolicy", pod_failure_policy), F(16, "successPolicy", success_policy), FK(7, "backoffLimit", I32),
       FK(12, "backoffLimitPerIndex", I32), FK(13, "maxFailedIndexes", I32), F(4, "selector", kite_schema_label_selector),
       FK(5, "manualSelector", B), FR(6, "template", kite_schema_pod_template_spec), FK(8, "ttlSecondsAfterFinished", I32),
       FK(9, "completionMode", S), FK(10, "suspend", B), FK(14, "podReplacementPolicy", S), FK(15, "managedBy", S));
STRUCT(job_condition, "JobCondition", FR(1, "type", S), FR(2, "status", S), F(3, "lastProbeTime", T),
       F(4, "lastTransitionTime", T), F(5, "reason", S), F(6, "message", S));
LIST(job_conditions, NULL, job_condition);
STRUCT(uncounted, "UncountedTerminatedPods", F(1, "succeeded", SLIST), F(2, "failed", SLIST));
STRUCT(job_status, "JobStatus", F(1, "conditions", job_conditions), F(2, "startTime", T), F(3, "completionTime", T),
       F(4, "active", I32), F(5, "succeeded", I32), F(6, "failed", I32), FK(11, "terminating", I32),
       F(7, "completedIndexes", S), FK(10, "failedIndexes", S), F(8, "uncountedTerminatedPods", uncounted),
       FK(9, "ready", I32));
ROOT_DOC(kite_schema_job, "Job", "Job represents the configuration of a single job.", TYPE_META,
         F(2, "spec", kite_schema_job_spec),
         F(3, "status", job_status));

static const struct kite_smp_rule rules[] = {META_RULES, TEMPLATE_RULES};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

#define DEFAULT(o, k, v)                                \
    do {                                                \
        if (!kite_obj_get(o, k)) kite_obj_set(o, k, v); \
    } while (0)

/* the labels generateSelector puts on the template, the legacy ones first */
static const char *const uid_labels[] = {"controller-uid", "batch.kubernetes.io/controller-uid"};
static const char *const name_labels[] = {"job-name", "batch.kubernetes.io/job-name"};

static bool manual_selector(json_object *spec) {
    json_object *m = OBJ(spec, "manualSelector");
    return m && json_object_is_type(m, json_type_boolean) && json_object_get_boolean(m);
}

/* generateSelector (pkg/registry/batch/job/strategy.go): the template gets the job's name and
 * uid as labels unless it has them, and the selector matches the uid. A user's own values are
 * kept for validation to refuse. */
static void generate_selector(json_object *obj, json_object *spec) {
    const char *name = STR(obj, "metadata", "name"), *uid = STR(obj, "metadata", "uid");
    if (!*uid) return; /* not created yet (a dry decode): nothing to select by */
    json_object *tmpl = kite_obj_ensure(spec, "template");
    json_object *labels = kite_obj_ensure(kite_obj_ensure(tmpl, "metadata"), "labels");
    for (size_t i = 0; i < 2; i++) {
        DEFAULT(labels, name_labels[i], json_object_new_string(name));
        DEFAULT(labels, uid_labels[i], json_object_new_string(uid));
    }
    json_object *sel = OBJ(spec, "selector");
    if (!sel || !json_object_is_type(sel, json_type_object)) {
        sel = json_object_new_object();
        kite_obj_set(spec, "selector", sel);
    }
    DEFAULT(kite_obj_ensure(sel, "matchLabels"), uid_labels[1], json_object_new_string(uid));
}

static void job_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!OBJ(spec, "completions") && !OBJ(spec, "parallelism")) kite_obj_set(spec, "completions", json_object_new_int(1));
    DEFAULT(spec, "parallelism", json_object_new_int(1));
    DEFAULT(spec, "backoffLimit", json_object_new_int(OBJ(spec, "backoffLimitPerIndex") ? INT32_MAX : 6));
    DEFAULT(spec, "completionMode", json_object_new_string("NonIndexed"));
    DEFAULT(spec, "suspend", json_object_new_boolean(false));
    DEFAULT(spec, "podReplacementPolicy",
            json_object_new_string(OBJ(spec, "podFailurePolicy") ? "Failed" : "TerminatingOrFailed"));
    DEFAULT(spec, "manualSelector", json_object_new_boolean(false));
    json_object *tmpl = OBJ(spec, "template");
    if (tmpl) kite_pod_template_defaults(tmpl);
    if (!manual_selector(spec)) generate_selector(obj, spec);
    /* a job without labels has its template's (read after generateSelector, as a stored job
     * is defaulted again when read) */
    json_object *labels = OBJ(obj, "metadata", "labels"), *tl = OBJ(spec, "template", "metadata", "labels");
    if ((!labels || !json_object_is_type(labels, json_type_object) || !json_object_object_length(labels)) && tl &&
        json_object_is_type(tl, json_type_object) && json_object_object_length(tl)) {
        json_object *copy = NULL;
        json_object_deep_copy(tl, &copy, NULL);
        kite_obj_set(kite_obj_ensure(obj, "metadata"), "labels", copy);
    }
}

static void nonnegative(json_object *spec, const char *k, struct kite_causes *c) {
    json_object *v = OBJ(spec, k);
    if (!v || int_of(v) >= 0) return;
    _cleanup_free_ char *field = kite_asprintf("spec.%s", k);
    kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be greater than or equal to 0", (long long)int_of(v));
}

static void immutable(json_object *spec, json_object *ospec, const char *k, struct kite_causes *c) {
    json_object *v = OBJ(spec, k), *ov = OBJ(ospec, k);
    if (kite_json_equal(v, ov)) return;
    _cleanup_free_ char *field = kite_asprintf("spec.%s", k);
    kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: field is immutable",
                    v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "null");
}

/* ValidateGeneratedSelector: a generated selector must be the job's uid, on both ends. */
static void validate_generated(json_object *obj, json_object *spec, struct kite_causes *c) {
    const char *uid = STR(obj, "metadata", "uid");
    if (!*uid) return;
    json_object *labels = OBJ(spec, "template", "metadata", "labels");
    for (size_t i = 0; i < 2; i++) {
        const char *v = STR(labels, uid_labels[i]);
        if (strcmp(v, uid) == 0) continue;
        _cleanup_free_ char *field = kite_asprintf("spec.template.metadata.labels[%s]", uid_labels[i]);
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": must be '%s'", v, uid);
    }
    const char *sv = STR(spec, "selector", "matchLabels", uid_labels[1]);
    if (strcmp(sv, uid) != 0)
        kite_causes_add(c, "FieldValueInvalid", "spec.selector.matchLabels[batch.kubernetes.io/controller-uid]",
                        "Invalid value: \"%s\": must be '%s'", sv, uid);
}

static void job_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec"), *tmpl = OBJ(spec, "template");
    static const char *const nonneg[] = {"parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
                                         "backoffLimitPerIndex", "maxFailedIndexes", "ttlSecondsAfterFinished"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(nonneg); i++) nonnegative(spec, nonneg[i], c);
    const char *mode = STR(spec, "completionMode");
    if (strcmp(mode, "NonIndexed") != 0 && strcmp(mode, "Indexed") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.completionMode",
                        "Unsupported value: \"%s\": supported values: \"NonIndexed\", \"Indexed\"", mode);
    if (strcmp(mode, "Indexed") == 0 && !OBJ(spec, "completions"))
        kite_causes_add(c, "FieldValueRequired", "spec.completions", "Required value: when completion mode is Indexed");
    json_object *sel = OBJ(spec, "selector");
    if (!sel || json_object_is_type(sel, json_type_null))
        kite_causes_add(c, "FieldValueRequired", "spec.selector", "Required value");
    else if (!kite_workload_selector_matches(sel, OBJ(tmpl, "metadata", "labels")))
        kite_causes_add(c, "FieldValueInvalid", "spec.template.metadata.labels",
                        "Invalid value: %s: `selector` does not match template `labels`",
                        json_object_to_json_string_ext(OBJ(tmpl, "metadata", "labels"), JSON_C_TO_STRING_PLAIN));
    if (!manual_selector(spec)) validate_generated(obj, spec, c);
    kite_pod_template_validate(tmpl, "spec.template", c);
    const char *rp = STR(tmpl, "spec", "restartPolicy");
    if (strcmp(rp, "OnFailure") != 0 && strcmp(rp, "Never") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.template.spec.restartPolicy",
                        "Unsupported value: \"%s\": supported values: \"OnFailure\", \"Never\"", rp);
    if (!old) return;
    /* ValidateJobSpecUpdate: what the pods are made from and counted by is fixed */
    json_object *ospec = OBJ(old, "spec");
    static const char *const fixed[] = {"selector", "template", "completionMode"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(fixed); i++) immutable(spec, ospec, fixed[i], c);
    if (strcmp(mode, "Indexed") != 0) immutable(spec, ospec, "completions", c);
}

/* ---- kubectl's printer (printJob) ---- */

static bool has_condition(json_object *obj, const char *type) {
    json_object *conds = OBJ(obj, "status", "conditions");
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *cd = json_object_array_get_idx(conds, i);
        if (strcmp(STR(cd, "type"), type) == 0 && strcmp(STR(cd, "status"), "True") == 0) return true;
    }
    return false;
}

static json_object *job_status_cell(const struct kite_table_row *r) {
    static const struct {
        const char *cond, *shown;
    } order[] = {{"Complete", "Complete"}, {"Failed", "Failed"}, {NULL, "Terminating"}, {"Suspended", "Suspended"},
                 {"FailureTarget", "FailureTarget"}, {"SuccessCriteriaMet", "SuccessCriteriaMet"}};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(order); i++) {
        bool hit = order[i].cond ? has_condition(r->obj, order[i].cond) : *STR(r->obj, "metadata", "deletionTimestamp") != 0;
        if (hit) return cell_str(order[i].shown);
    }
    return cell_str("Running");
}

static json_object *job_completions(const struct kite_table_row *r) {
    json_object *spec = OBJ(r->obj, "spec"), *comp = OBJ(spec, "completions");
    long long succeeded = (long long)int_of(OBJ(r->obj, "status", "succeeded")), par = (long long)int_of(OBJ(spec, "parallelism"));
    char buf[64];
    if (strcmp(STR(spec, "completionMode"), "Indexed") == 0 || comp)
        snprintf(buf, sizeof buf, "%lld/%lld", succeeded, (long long)int_of(comp));
    else if (par > 1)
        snprintf(buf, sizeof buf, "%lld/1 of %lld", succeeded, par);
    else
        snprintf(buf, sizeof buf, "%lld/1", succeeded);
    return cell_str(buf);
}

static json_object *job_duration(const struct kite_table_row *r) {
    const char *start = STR(r->obj, "status", "startTime"), *end = STR(r->obj, "status", "completionTime");
    int64_t s, e;
    char out[32] = "";
    if (!*start || kite_time_parse(start, &s) < 0) return cell_str("");
    if (*end && kite_time_parse(end, &e) == 0) kite_human_duration((e - s) / KITE_NS_PER_SEC, out);
    else since_ns(s, r->now_s, out);
    return cell_str(out);
}

static const struct kite_table_column job_cols[] = {
    COL_NAME,
    {"Status", job_status_cell, "string", "", "Status of the job.", 0},
    {"Completions", job_completions, "string", "",
     "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. "
     "However, it may decrease in reaction to scale down of elastic indexed jobs.",
     0},
    {"Duration", job_duration, "string", "", "Time required to complete the job.", 0},
    COL_AGE,
    {"Containers", kite_workload_cell_containers, "string", "", "Names of each container in the template.", 1},
    {"Images", kite_workload_cell_images, "string", "", "Images referenced by each container in the template.", 1},
    {"Selector", kite_workload_cell_selector, "string", "",
     "A label query over pods that should match the pod count. Normally, the system sets this field for you. More "
     "info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
     1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(job_cols);

const struct kite_resource kite_kind_job = {
    .schema = &kite_schema_job,
    KITE_GROUP_VERSION("batch", "v1"), .kind = "Job", .list_kind = "JobList", .plural = "jobs", .singular = "job",
    .categories = {"all"}, .namespaced = true, .has_status = true, .spec_generation = true, .gc_owner = true, .smp = &smp,
    .table = &printer, .defaults = job_defaults, .validate = job_validate, .pod_template = "spec.template",
};
