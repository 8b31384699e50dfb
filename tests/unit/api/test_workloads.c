/* apps/v1 ReplicaSet and Deployment: defaults (the template's as a Pod's, without what only a
 * pod gets), validation with upstream's messages, the autoscaling/v1 Scale view, and the
 * protobuf field numbers of their schemas. */
#include "api/kinds/kinds.h"
#include "api/kinds/workload.h"
#include "api/protobuf.h"
#include "api/registry.h"

#include <criterion/criterion.h>

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "bad JSON in the test: %s", s);
    return o;
}

#define TMPL(labels, extra) \
    "\"template\":{\"metadata\":{\"labels\":" labels "},\"spec\":{" extra "\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}"

static bool has_cause(struct kite_causes *c, const char *field, const char *msg_part) {
    for (size_t i = 0; i < c->n; i++)
        if (kite_streq(c->v[i].field, field) && strstr(c->v[i].message, msg_part)) return true;
    return false;
}

Test(workloads, deployment_defaults) {
    json_object *d = parse("{\"metadata\":{\"name\":\"web\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}}," TMPL("{\"app\":\"web\"}", "") "}}");
    kite_kind_deployment.defaults(d);
    json_object *spec = kite_obj_get(d, "spec");
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "replicas")), 1);
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "revisionHistoryLimit")), 10);
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "progressDeadlineSeconds")), 600);
    json_object *st = kite_obj_get(spec, "strategy");
    cr_assert_str_eq(kite_obj_str(st, "type"), "RollingUpdate");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(st, "rollingUpdate"), "maxSurge"), "25%");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(st, "rollingUpdate"), "maxUnavailable"), "25%");
    json_object *ps = kite_obj_get(kite_obj_get(spec, "template"), "spec");
    cr_assert_str_eq(kite_obj_str(ps, "restartPolicy"), "Always");
    cr_assert_str_eq(kite_obj_str(ps, "dnsPolicy"), "ClusterFirst");
    cr_assert_eq(json_object_get_int(kite_obj_get(ps, "terminationGracePeriodSeconds")), 30);
    cr_assert_str_eq(kite_obj_str(json_object_array_get_idx(kite_obj_get(ps, "containers"), 0), "imagePullPolicy"), "Always");
    cr_assert_null(kite_obj_get(ps, "priority"), "the Priority plugin's default is a pod's, not a template's");
    cr_assert_null(kite_obj_get(ps, "enableServiceLinks"));
    cr_assert_null(kite_obj_get(kite_obj_get(spec, "template"), "status"));
    json_object_put(d);
    /* Recreate gets no rollingUpdate */
    d = parse("{\"spec\":{\"strategy\":{\"type\":\"Recreate\"}}}");
    kite_kind_deployment.defaults(d);
    cr_assert_null(kite_obj_get(kite_obj_get(kite_obj_get(d, "spec"), "strategy"), "rollingUpdate"));
    json_object_put(d);
}

Test(workloads, replicaset_defaults) {
    json_object *rs = parse("{\"spec\":{" TMPL("{\"app\":\"web\"}", "") "}}");
    kite_kind_replicaset.defaults(rs);
    cr_assert_eq(json_object_get_int(kite_obj_get(kite_obj_get(rs, "spec"), "replicas")), 1);
    json_object_put(rs);
}

Test(workloads, validation) {
    static const struct {
        const struct kite_resource *r;
        const char *spec, *field, *msg;
    } cases[] = {
        {&kite_kind_deployment, "{" TMPL("{\"app\":\"web\"}", "") "}", "spec.selector", "Required value"},
        {&kite_kind_deployment, "{\"selector\":{}," TMPL("{\"app\":\"web\"}", "") "}", "spec.selector", "empty selector is invalid for deployment"},
        {&kite_kind_deployment, "{\"selector\":{\"matchLabels\":{\"app\":\"x\"}}," TMPL("{\"app\":\"web\"}", "") "}",
         "spec.template.metadata.labels", "`selector` does not match template `labels`"},
        {&kite_kind_deployment, "{\"selector\":{\"matchLabels\":{\"app\":\"web\"}}," TMPL("{\"app\":\"web\"}", "\"restartPolicy\":\"Never\",") "}",
         "spec.template.spec.restartPolicy", "Unsupported value: \"Never\": supported values: \"Always\""},
        {&kite_kind_deployment, "{\"replicas\":-1,\"selector\":{\"matchLabels\":{\"app\":\"web\"}}," TMPL("{\"app\":\"web\"}", "") "}",
         "spec.replicas", "must be greater than or equal to 0"},
        {&kite_kind_deployment, "{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":0,\"maxUnavailable\":0}},"
                                "\"selector\":{\"matchLabels\":{\"app\":\"web\"}}," TMPL("{\"app\":\"web\"}", "") "}",
         "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0"},
        {&kite_kind_deployment, "{\"strategy\":{\"type\":\"Recreate\",\"rollingUpdate\":{}},"
                                "\"selector\":{\"matchLabels\":{\"app\":\"web\"}}," TMPL("{\"app\":\"web\"}", "") "}",
         "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"},
        {&kite_kind_deployment, "{\"progressDeadlineSeconds\":5,\"minReadySeconds\":5,"
                                "\"selector\":{\"matchLabels\":{\"app\":\"web\"}}," TMPL("{\"app\":\"web\"}", "") "}",
         "spec.progressDeadlineSeconds", "must be greater than minReadySeconds"},
        {&kite_kind_replicaset, "{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{}}}",
         "spec.template.spec.containers", "Required value"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        _cleanup_free_ char *text = kite_asprintf("{\"metadata\":{\"name\":\"web\"},\"spec\":%s}", cases[i].spec);
        json_object *o = parse(text);
        cases[i].r->defaults(o);
        struct kite_causes c = {0};
        cases[i].r->validate(o, NULL, &c);
        cr_assert(has_cause(&c, cases[i].field, cases[i].msg), "case %zu: no %s: %s (%zu causes, first %s: %s)", i,
                  cases[i].field, cases[i].msg, c.n, c.n ? c.v[0].field : "", c.n ? c.v[0].message : "");
        kite_causes_release(&c);
        json_object_put(o);
    }
}

Test(workloads, selector_is_immutable) {
    json_object *old = parse("{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}}," TMPL("{\"app\":\"web\",\"v\":\"1\"}", "") "}}");
    json_object *nw = parse("{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\",\"v\":\"1\"}}," TMPL("{\"app\":\"web\",\"v\":\"1\"}", "") "}}");
    kite_kind_deployment.defaults(old);
    kite_kind_deployment.defaults(nw);
    struct kite_causes c = {0};
    kite_kind_deployment.validate(nw, old, &c);
    cr_assert(has_cause(&c, "spec.selector", "field is immutable"));
    kite_causes_release(&c);
    json_object_put(old), json_object_put(nw);
}

Test(workloads, scale_view_and_apply) {
    const struct kite_subresource *sr = kite_resource_subresource(&kite_kind_deployment, "scale");
    cr_assert_not_null(sr);
    cr_assert_str_eq(sr->body_kind, "Scale");
    cr_assert_str_eq(sr->body_group, "autoscaling");
    json_object *d = parse("{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":\"7\"},"
                           "\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"b\":\"2\",\"a\":\"1\"},"
                           "\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"In\",\"values\":[\"y\",\"x\"]},{\"key\":\"z\",\"operator\":\"DoesNotExist\"}]}},"
                           "\"status\":{\"replicas\":2}}");
    json_object *v = sr->view(d);
    cr_assert_str_eq(kite_obj_str(v, "apiVersion"), "autoscaling/v1");
    cr_assert_str_eq(kite_meta_str(v, "resourceVersion"), "7");
    cr_assert_eq(json_object_get_int(kite_obj_get(kite_obj_get(v, "spec"), "replicas")), 3);
    cr_assert_eq(json_object_get_int(kite_obj_get(kite_obj_get(v, "status"), "replicas")), 2);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(v, "status"), "selector"), "!z,a=1,b=2,t in (x,y)");
    kite_obj_set(kite_obj_get(v, "spec"), "replicas", json_object_new_int(9));
    sr->apply(d, v);
    cr_assert_eq(json_object_get_int(kite_obj_get(kite_obj_get(d, "spec"), "replicas")), 9);
    json_object_put(v), json_object_put(d);
}

Test(workloads, protobuf_numbers_as_upstream) {
    /* DeploymentSpec.progressDeadlineSeconds is field 9, ReplicaSetSpec.minReadySeconds 4:
     * a round trip through the codec keeps them */
    bool list;
    const struct kite_schema *s = kite_pb_schema_for("apps/v1", "Deployment", &list);
    cr_assert_eq(s, &kite_schema_deployment);
    json_object *d = parse("{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":\"x\"},"
                           "\"spec\":{\"replicas\":2,\"progressDeadlineSeconds\":77,\"strategy\":{\"type\":\"RollingUpdate\","
                           "\"rollingUpdate\":{\"maxSurge\":\"25%\",\"maxUnavailable\":1}}}}");
    struct kite_buf b = {0};
    cr_assert_eq(kite_pb_encode_any(d, &b), 0);
    /* spec (2) holds progressDeadlineSeconds: tag (9 << 3 | 0) = 0x48, value 77 */
    bool found = false;
    for (size_t i = 0; i + 1 < b.len; i++) found |= (unsigned char)b.p[i] == 0x48 && b.p[i + 1] == 77;
    cr_assert(found);
    kite_buf_release(&b);
    json_object_put(d);
}
