/* batch/v1 Job and apps/v1 DaemonSet strategy hooks: defaults (the generated controller-uid
 * selector and labels), validation, and the immutable template. */
#include "api/kinds/kinds.h"
#include "api/registry.h"

#include <criterion/criterion.h>
#include <string.h>

#define JOB_JSON                                                                                                  \
    "{\"metadata\":{\"name\":\"pi\",\"namespace\":\"default\",\"uid\":\"u-1\"},\"spec\":{\"template\":{\"spec\":" \
    "{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}}}"

static json_object *defaulted(const struct kite_resource *r, const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o);
    r->defaults(o);
    return o;
}

static size_t causes(const struct kite_resource *r, json_object *o, json_object *old, const char *field, const char *msg) {
    struct kite_causes c = {0};
    r->validate(o, old, &c);
    size_t n = c.n, hit = 0;
    for (size_t i = 0; i < c.n; i++)
        hit += strcmp(c.v[i].field, field) == 0 && strstr(c.v[i].message, msg) != NULL;
    kite_causes_release(&c);
    return field ? hit : n;
}

#define S(o, ...) kite_obj_str(o, __VA_ARGS__)
static json_object *path(json_object *o, const char *const *keys) {
    for (; *keys; keys++) o = kite_obj_get(o, *keys);
    return o;
}
#define P(o, ...) path(o, (const char *const[]){__VA_ARGS__, NULL})

Test(job_kinds, job_defaults) {
    json_object *o = defaulted(&kite_kind_job, JOB_JSON);
    json_object *spec = kite_obj_get(o, "spec");
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "completions")), 1);
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "parallelism")), 1);
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "backoffLimit")), 6);
    cr_assert_str_eq(S(spec, "completionMode"), "NonIndexed");
    cr_assert_str_eq(S(spec, "podReplacementPolicy"), "TerminatingOrFailed");
    cr_assert(!json_object_get_boolean(kite_obj_get(spec, "suspend")));
    cr_assert(kite_obj_get(spec, "manualSelector") && !json_object_get_boolean(kite_obj_get(spec, "manualSelector")));
    cr_assert_str_eq(S(P(spec, "selector", "matchLabels"), "batch.kubernetes.io/controller-uid"), "u-1");
    json_object *tl = P(spec, "template", "metadata", "labels");
    cr_assert_str_eq(S(tl, "batch.kubernetes.io/controller-uid"), "u-1");
    cr_assert_str_eq(S(tl, "controller-uid"), "u-1");
    cr_assert_str_eq(S(tl, "batch.kubernetes.io/job-name"), "pi");
    cr_assert_str_eq(S(tl, "job-name"), "pi");
    cr_assert_str_eq(S(P(o, "metadata", "labels"), "job-name"), "pi", "a job without labels has its template's");
    cr_assert_eq(causes(&kite_kind_job, o, NULL, NULL, NULL), 0);
    json_object_put(o);

    /* parallelism alone leaves completions unset (a work queue) */
    o = defaulted(&kite_kind_job, "{\"metadata\":{\"name\":\"w\",\"uid\":\"u\"},\"spec\":{\"parallelism\":3,\"template\":{}}}");
    cr_assert_null(P(o, "spec", "completions"));
    json_object_put(o);
}

Test(job_kinds, job_validation) {
    json_object *o = defaulted(&kite_kind_job, JOB_JSON);
    kite_obj_set(P(o, "spec", "template", "spec"), "restartPolicy", json_object_new_string("Always"));
    cr_assert_eq(causes(&kite_kind_job, o, NULL, "spec.template.spec.restartPolicy", "supported values: \"OnFailure\", \"Never\""), 1);
    kite_obj_set(P(o, "spec", "template", "spec"), "restartPolicy", json_object_new_string("OnFailure"));
    kite_obj_set(kite_obj_get(o, "spec"), "backoffLimit", json_object_new_int(-1));
    cr_assert_eq(causes(&kite_kind_job, o, NULL, "spec.backoffLimit", "must be greater than or equal to 0"), 1);
    kite_obj_set(kite_obj_get(o, "spec"), "backoffLimit", json_object_new_int(1));
    /* a generated selector must be the job's own uid */
    kite_obj_set(P(o, "spec", "selector", "matchLabels"), "batch.kubernetes.io/controller-uid", json_object_new_string("other"));
    cr_assert_eq(causes(&kite_kind_job, o, NULL, "spec.selector.matchLabels[batch.kubernetes.io/controller-uid]", "must be 'u-1'"), 1);
    json_object_put(o);
}

Test(job_kinds, job_template_immutable) {
    json_object *old = defaulted(&kite_kind_job, JOB_JSON), *o = defaulted(&kite_kind_job, JOB_JSON);
    cr_assert_eq(causes(&kite_kind_job, o, old, NULL, NULL), 0);
    kite_obj_set(json_object_array_get_idx(P(o, "spec", "template", "spec", "containers"), 0), "image",
                 json_object_new_string("busybox:2"));
    cr_assert_eq(causes(&kite_kind_job, o, old, "spec.template", "field is immutable"), 1);
    json_object_put(o);
    o = defaulted(&kite_kind_job, JOB_JSON);
    kite_obj_set(kite_obj_get(o, "spec"), "completions", json_object_new_int(5));
    cr_assert_eq(causes(&kite_kind_job, o, old, "spec.completions", "field is immutable"), 1);
    json_object_put(o);
    o = defaulted(&kite_kind_job, JOB_JSON);
    kite_obj_set(kite_obj_get(o, "spec"), "parallelism", json_object_new_int(5));
    kite_obj_set(kite_obj_get(o, "spec"), "suspend", json_object_new_boolean(true));
    cr_assert_eq(causes(&kite_kind_job, o, old, NULL, NULL), 0, "parallelism and suspend may change");
    json_object_put(o);
    json_object_put(old);
}

#define DS_JSON                                                                                              \
    "{\"metadata\":{\"name\":\"d\",\"namespace\":\"default\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}}," \
    "\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}"

Test(job_kinds, daemonset_defaults_and_validation) {
    json_object *o = defaulted(&kite_kind_daemonset, DS_JSON);
    json_object *spec = kite_obj_get(o, "spec");
    cr_assert_str_eq(S(P(spec, "updateStrategy"), "type"), "RollingUpdate");
    cr_assert_eq(json_object_get_int(P(spec, "updateStrategy", "rollingUpdate", "maxUnavailable")), 1);
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "revisionHistoryLimit")), 10);
    cr_assert_str_eq(S(P(spec, "template", "spec"), "restartPolicy"), "Always");
    cr_assert_eq(causes(&kite_kind_daemonset, o, NULL, NULL, NULL), 0);
    kite_obj_set(P(spec, "updateStrategy", "rollingUpdate"), "maxUnavailable", json_object_new_int(0));
    cr_assert_eq(causes(&kite_kind_daemonset, o, NULL, "spec.updateStrategy.rollingUpdate.maxUnavailable", "may not be 0"), 1);
    kite_obj_set(P(spec, "updateStrategy", "rollingUpdate"), "maxUnavailable", json_object_new_string("20%"));
    kite_obj_set(P(spec, "selector", "matchLabels"), "a", json_object_new_string("c"));
    cr_assert_eq(causes(&kite_kind_daemonset, o, NULL, "spec.template.metadata.labels", "does not match"), 1);
    json_object_put(o);
    cr_assert_str_eq(kite_kind_daemonset.short_names[0], "ds");
    cr_assert_str_eq(kite_kind_job.categories[0], "all");
}
