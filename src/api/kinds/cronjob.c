/* CronJob (batch/v1): schema (k8s.io/api batch/v1 generated.proto), defaults
 * (SetDefaults_CronJob), validation (ValidateCronJob: the schedule as robfig/cron reads it,
 * api/cron.h; the time zone as a zoneinfo name), /status, and kubectl's printer. The Jobs it
 * makes are the CronJob controller's work (src/controllers/cronjob.c). */
#include "api/cron.h"
#include "api/kinds/workload.h"

#include <errno.h>

#define KITE_CRONJOB_NAME_MAX 52 /* the Job's name gets "-" and 11 digits; pod names are cut at 63 */

STRUCT(cj_job_template, "JobTemplateSpec", F(1, "metadata", kite_schema_object_meta), F(2, "spec", kite_schema_job_spec));
STRUCT(cj_spec, "CronJobSpec", FR(1, "schedule", S), F(8, "timeZone", S), F(2, "startingDeadlineSeconds", I64),
       F(3, "concurrencyPolicy", S), F(4, "suspend", B), FR(5, "jobTemplate", cj_job_template),
       F(6, "successfulJobsHistoryLimit", I32), F(7, "failedJobsHistoryLimit", I32));
LIST(cj_refs, NULL, kite_schema_object_ref);
STRUCT(cj_status, "CronJobStatus", F(1, "active", cj_refs), F(4, "lastScheduleTime", T), F(5, "lastSuccessfulTime", T));
ROOT_DOC(kite_schema_cronjob, "CronJob", "CronJob represents the configuration of a single cron job.", TYPE_META,
         F(2, "spec", cj_spec), F(3, "status", cj_status));

static const struct kite_smp_rule rules[] = {
    META_RULES,
    {"spec.jobTemplate.spec.template.spec.containers", "name", KITE_SMP_MERGE, NULL},
    {"spec.jobTemplate.spec.template.spec.containers.env", "name", KITE_SMP_MERGE, NULL},
    {"spec.jobTemplate.spec.template.spec.volumes", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS, NULL},
    {"spec.jobTemplate.spec.template.spec.initContainers", "name", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

#define DEFAULT(o, k, v)                                \
    do {                                                \
        if (!kite_obj_get(o, k)) kite_obj_set(o, k, v); \
    } while (0)

static void cj_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    DEFAULT(spec, "concurrencyPolicy", json_object_new_string("Allow"));
    DEFAULT(spec, "suspend", json_object_new_boolean(false));
    DEFAULT(spec, "successfulJobsHistoryLimit", json_object_new_int(3));
    DEFAULT(spec, "failedJobsHistoryLimit", json_object_new_int(1));
    json_object *tmpl = OBJ(spec, "jobTemplate", "spec", "template");
    if (tmpl) kite_pod_template_defaults(tmpl);
}

static void nonnegative(json_object *spec, const char *k, struct kite_causes *c) {
    json_object *v = OBJ(spec, k);
    if (!v || int_of(v) >= 0) return;
    _cleanup_free_ char *field = kite_asprintf("spec.%s", k);
    kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be greater than or equal to 0", (long long)int_of(v));
}

static void cj_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec");
    const char *name = STR(obj, "metadata", "name");
    if (strlen(name) > KITE_CRONJOB_NAME_MAX)
        kite_causes_add(c, "FieldValueInvalid", "metadata.name", "Invalid value: \"%s\": must be no more than 52 characters",
                        name);
    const char *sched = STR(spec, "schedule");
    struct kite_cron cron;
    _cleanup_free_ char *err = NULL;
    if (!*sched) kite_causes_add(c, "FieldValueRequired", "spec.schedule", "Required value");
    else if (kite_cron_parse(sched, &cron, &err) < 0)
        kite_causes_add(c, "FieldValueInvalid", "spec.schedule", "Invalid value: \"%s\": %s", sched, err ? err : "invalid");
    const char *tz_name = STR(spec, "timeZone");
    if (OBJ(spec, "timeZone")) {
        struct kite_tz *tz = NULL;
        int r = kite_tz_load(tz_name, &tz);
        kite_tz_free(tz);
        if (r < 0)
            kite_causes_add(c, "FieldValueInvalid", "spec.timeZone", "Invalid value: \"%s\": unknown time zone %s", tz_name,
                            tz_name);
    }
    const char *cp = STR(spec, "concurrencyPolicy");
    if (strcmp(cp, "Allow") != 0 && strcmp(cp, "Forbid") != 0 && strcmp(cp, "Replace") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.concurrencyPolicy",
                        "Unsupported value: \"%s\": supported values: \"Allow\", \"Forbid\", \"Replace\"", cp);
    nonnegative(spec, "startingDeadlineSeconds", c);
    nonnegative(spec, "successfulJobsHistoryLimit", c);
    nonnegative(spec, "failedJobsHistoryLimit", c);
    json_object *tmpl = OBJ(spec, "jobTemplate", "spec", "template");
    if (!tmpl) {
        kite_causes_add(c, "FieldValueRequired", "spec.jobTemplate.spec.template", "Required value");
        return;
    }
    kite_pod_template_validate(tmpl, "spec.jobTemplate.spec.template", c);
    const char *rp = STR(tmpl, "spec", "restartPolicy");
    if (strcmp(rp, "OnFailure") != 0 && strcmp(rp, "Never") != 0)
        kite_causes_add(c, "FieldValueNotSupported", "spec.jobTemplate.spec.template.spec.restartPolicy",
                        "Unsupported value: \"%s\": supported values: \"OnFailure\", \"Never\"", rp);
}

static json_object *cj_schedule(const struct kite_table_row *r) { return json_object_new_string(STR(r->obj, "spec", "schedule")); }
static json_object *cj_tz(const struct kite_table_row *r) {
    const char *tz = STR(r->obj, "spec", "timeZone");
    return json_object_new_string(*tz ? tz : "<none>");
}
static json_object *cj_suspend(const struct kite_table_row *r) {
    json_object *s = OBJ(r->obj, "spec", "suspend");
    return json_object_new_string(!s ? "<none>" : json_object_get_boolean(s) ? "True" : "False");
}
static json_object *cj_active(const struct kite_table_row *r) {
    json_object *a = OBJ(r->obj, "status", "active");
    return json_object_new_int64(a && json_object_is_type(a, json_type_array) ? (int64_t)json_object_array_length(a) : 0);
}
static json_object *cj_last(const struct kite_table_row *r) {
    const char *t = STR(r->obj, "status", "lastScheduleTime");
    if (!*t) return json_object_new_string("<none>");
    char buf[32];
    since(t, r->now_s, buf);
    return json_object_new_string(buf);
}
static json_object *cj_containers(const struct kite_table_row *r) {
    struct kite_table_row sub = *r;
    sub.obj = OBJ(r->obj, "spec", "jobTemplate");
    return kite_workload_cell_containers(&sub);
}
static json_object *cj_images(const struct kite_table_row *r) {
    struct kite_table_row sub = *r;
    sub.obj = OBJ(r->obj, "spec", "jobTemplate");
    return kite_workload_cell_images(&sub);
}
static json_object *cj_selector(const struct kite_table_row *r) {
    struct kite_table_row sub = *r;
    sub.obj = OBJ(r->obj, "spec", "jobTemplate");
    return kite_workload_cell_selector(&sub);
}

static const struct kite_table_column cj_cols[] = {
    COL_NAME,
    {"Schedule", cj_schedule, "string", "", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.", 0},
    {"Timezone", cj_tz, "string", "", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones", 0},
    {"Suspend", cj_suspend, "boolean", "", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.", 0},
    {"Active", cj_active, "integer", "", "A list of pointers to currently running jobs.", 0},
    {"Last Schedule", cj_last, "string", "", "Information when was the last time the job was successfully scheduled.", 0},
    COL_AGE,
    {"Containers", cj_containers, "string", "", "Names of each container in the template.", 1},
    {"Images", cj_images, "string", "", "Images referenced by each container in the template.", 1},
    {"Selector", cj_selector, "string", "", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors", 1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(cj_cols);

const struct kite_resource kite_kind_cronjob = {
    .schema = &kite_schema_cronjob,
    KITE_GROUP_VERSION("batch", "v1"), .kind = "CronJob", .list_kind = "CronJobList", .plural = "cronjobs",
    .singular = "cronjob", .short_names = {"cj"}, .categories = {"all"}, .namespaced = true, .has_status = true,
    .spec_generation = true, .unconditional_update = true, .gc_owner = true, .smp = &smp, .table = &printer,
    .defaults = cj_defaults, .validate = cj_validate,
};
