/* The Pod row's strategy hooks, called directly: defaults (and the QoS class), validation,
 * the immutable spec on update, the graceful-deletion grace, the default tolerations and the
 * binding action. */
#include <criterion/criterion.h>

#include "api/registry.h"
#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>

static const struct kite_resource *pods(void) { return kite_registry_find("", "v1", "pods"); }

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "bad test JSON: %s", s);
    return o;
}

/* a pod with the given containers JSON, defaulted */
static json_object *pod(const char *containers) {
    char *s = kite_asprintf("{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\",\"namespace\":\"default\"},"
                            "\"spec\":{\"containers\":%s}}", containers);
    json_object *o = parse(s);
    free(s);
    pods()->defaults(o);
    return o;
}

static const char *at(json_object *o, const char *path) {
    /* dotted path with numeric array indexes */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save)) {
        if (json_object_is_type(o, json_type_array)) o = json_object_array_get_idx(o, (size_t)atoi(k));
        else o = kite_obj_get(o, k);
    }
    return o ? json_object_get_string(o) : NULL;
}

static char *causes_text(struct kite_causes *c) { return kite_causes_summary(c); }

Test(pod, defaults_as_kubernetes) {
    json_object *p = pod("[{\"name\":\"c\",\"image\":\"busybox\",\"ports\":[{\"containerPort\":80}]},"
                         "{\"name\":\"d\",\"image\":\"nginx:1.25\"},{\"name\":\"e\",\"image\":\"reg:5000/x\"},"
                         "{\"name\":\"f\",\"image\":\"x:latest\"},{\"name\":\"g\",\"image\":\"x@sha256:abc\"}]");
    cr_assert_str_eq(at(p, "spec.restartPolicy"), "Always");
    cr_assert_str_eq(at(p, "spec.terminationGracePeriodSeconds"), "30");
    cr_assert_str_eq(at(p, "spec.dnsPolicy"), "ClusterFirst");
    cr_assert_str_eq(at(p, "spec.schedulerName"), "default-scheduler");
    cr_assert_str_eq(at(p, "spec.enableServiceLinks"), "true");
    cr_assert_str_eq(at(p, "spec.priority"), "0");
    cr_assert_str_eq(at(p, "spec.securityContext"), "{ }");
    cr_assert_str_eq(at(p, "spec.containers.0.imagePullPolicy"), "Always");
    cr_assert_str_eq(at(p, "spec.containers.1.imagePullPolicy"), "IfNotPresent");
    cr_assert_str_eq(at(p, "spec.containers.2.imagePullPolicy"), "Always", "a registry port is no tag");
    cr_assert_str_eq(at(p, "spec.containers.3.imagePullPolicy"), "Always");
    cr_assert_str_eq(at(p, "spec.containers.4.imagePullPolicy"), "IfNotPresent");
    cr_assert_str_eq(at(p, "spec.containers.0.terminationMessagePath"), "/dev/termination-log");
    cr_assert_str_eq(at(p, "spec.containers.0.terminationMessagePolicy"), "File");
    cr_assert_str_eq(at(p, "spec.containers.0.ports.0.protocol"), "TCP");
    cr_assert_str_eq(at(p, "spec.containers.0.resources"), "{ }");
    cr_assert_str_eq(at(p, "status.phase"), "Pending");
    cr_assert_str_eq(at(p, "status.qosClass"), "BestEffort");
    json_object_put(p);

    /* a set value is kept */
    json_object *q = parse("{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                           "\"imagePullPolicy\":\"Never\"}]}}");
    pods()->defaults(q);
    cr_assert_str_eq(at(q, "spec.restartPolicy"), "Never");
    cr_assert_str_eq(at(q, "spec.containers.0.imagePullPolicy"), "Never");
    json_object_put(q);
}

Test(pod, qos_class) {
    struct { const char *containers, *want; } cases[] = {
        {"[{\"name\":\"c\",\"image\":\"x\"}]", "BestEffort"},
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]", "Burstable"},
        /* limits alone: requests default to them */
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}]", "Guaranteed"},
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"},"
         "\"requests\":{\"cpu\":\"500m\"}}}]", "Burstable"},
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]", "Burstable"},
        /* every container must be limited */
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}},"
         "{\"name\":\"d\",\"image\":\"x\"}]", "Burstable"},
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}},"
         "{\"name\":\"d\",\"image\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"2\",\"memory\":\"1M\"}}}]", "Guaranteed"},
        /* resources other than cpu and memory do not count */
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"requests\":{\"ephemeral-storage\":\"1Gi\"}}}]", "BestEffort"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_object *p = pod(cases[i].containers);
        cr_assert_str_eq(at(p, "status.qosClass"), cases[i].want, "case %zu", i);
        json_object_put(p);
    }
}

static char *validate(json_object *obj, json_object *old) {
    struct kite_causes c = {0};
    pods()->validate(obj, old, &c);
    char *s = causes_text(&c);
    kite_causes_release(&c);
    return s;
}

Test(pod, validation) {
    struct { const char *containers, *want; } cases[] = {
        {"[{\"name\":\"c\",\"image\":\"x\"}]", ""},
        {"[]", "spec.containers: Required value"},
        {"[{\"name\":\"c\"}]", "spec.containers[0].image: Required value"},
        {"[{\"image\":\"x\"}]", "spec.containers[0].name: Required value"},
        {"[{\"name\":\"C_1\",\"image\":\"x\"}]",
         "spec.containers[0].name: Invalid value: \"C_1\": a lowercase RFC 1123 label must consist of lower case "
         "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
         "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
        {"[{\"name\":\"c\",\"image\":\"x\"},{\"name\":\"c\",\"image\":\"y\"}]", "spec.containers[1].name: Duplicate value: \"c\""},
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"2\"},\"limits\":{\"cpu\":\"1\"}}}]",
         "spec.containers[0].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit of 1"},
        {"[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"requests\":{\"memory\":\"-1\"}}}]",
         "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0"},
        {"[{\"name\":\"c\",\"image\":\"x\",\"ports\":[{\"containerPort\":80,\"protocol\":\"ICMP\"}]}]",
         "spec.containers[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_object *p = pod(cases[i].containers);
        _cleanup_free_ char *got = validate(p, NULL);
        cr_assert_str_eq(got, cases[i].want, "case %zu", i);
        json_object_put(p);
    }
    /* init and regular containers share one name space */
    json_object *p = parse("{\"spec\":{\"initContainers\":[{\"name\":\"c\",\"image\":\"x\"}],"
                           "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}],\"restartPolicy\":\"Sometimes\",\"dnsPolicy\":\"X\"}}");
    pods()->defaults(p);
    _cleanup_free_ char *got = validate(p, NULL);
    cr_assert_str_eq(got, "[spec.containers[0].name: Duplicate value: \"c\", spec.restartPolicy: Unsupported value: "
                          "\"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\", spec.dnsPolicy: "
                          "Unsupported value: \"X\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", "
                          "\"Default\", \"None\"]");
    json_object_put(p);
}

static json_object *copy(json_object *o) {
    json_object *c = NULL;
    json_object_deep_copy(o, &c, NULL);
    return c;
}

Test(pod, immutable_spec) {
    json_object *old = pod("[{\"name\":\"c\",\"image\":\"x\"}]");
    pods()->default_tolerations(old, 300, 300);
    /* what may change */
    json_object *n = copy(old);
    json_object *spec = kite_obj_get(n, "spec");
    kite_obj_set(json_object_array_get_idx(kite_obj_get(spec, "containers"), 0), "image", json_object_new_string("y"));
    kite_obj_set(spec, "activeDeadlineSeconds", json_object_new_int(60));
    json_object_array_add(kite_obj_get(spec, "tolerations"), parse("{\"key\":\"k\",\"operator\":\"Exists\"}"));
    _cleanup_free_ char *ok = validate(n, old);
    cr_assert_str_eq(ok, "");
    json_object_put(n);

    /* anything else: Forbidden, with the fields that changed */
    n = copy(old);
    kite_obj_set(kite_obj_get(n, "spec"), "restartPolicy", json_object_new_string("Never"));
    _cleanup_free_ char *bad = validate(n, old);
    cr_assert(kite_startswith(bad, "spec: Forbidden: pod updates may not change fields other than "
                                   "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                                   "`spec.tolerations` (only additions to existing tolerations),"
                                   "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"),
              "%s", bad);
    cr_assert(strstr(bad, "- \tRestartPolicy: \"Always\",\n+ \tRestartPolicy: \"Never\",\n"), "%s", bad);
    json_object_put(n);

    /* a toleration removed, a node name set, a container added: all forbidden */
    n = copy(old);
    json_object_array_del_idx(kite_obj_get(kite_obj_get(n, "spec"), "tolerations"), 0, 1);
    _cleanup_free_ char *t = validate(n, old);
    cr_assert(kite_startswith(t, "spec: Forbidden"), "%s", t);
    json_object_put(n);
    n = copy(old);
    kite_obj_set(kite_obj_get(n, "spec"), "nodeName", json_object_new_string("n1"));
    _cleanup_free_ char *nn = validate(n, old);
    cr_assert(kite_startswith(nn, "spec: Forbidden"), "%s", nn);
    json_object_put(n);
    n = copy(old);
    json_object_array_add(kite_obj_get(kite_obj_get(n, "spec"), "containers"), parse("{\"name\":\"d\",\"image\":\"x\"}"));
    pods()->defaults(n);
    _cleanup_free_ char *add = validate(n, old);
    cr_assert_str_eq(add, "spec.containers: Forbidden: pod updates may not add or remove containers");
    json_object_put(n);
    json_object_put(old);
}

Test(pod, update_of_a_pod_stored_before_a_default) {
    /* stored without the defaults added since: an update that defaults them changes nothing */
    json_object *old = parse("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
    json_object *n = copy(old);
    pods()->defaults(n);
    _cleanup_free_ char *got = validate(n, old);
    cr_assert_str_eq(got, "");
    json_object_put(n);
    json_object_put(old);
}

Test(pod, default_tolerations) {
    json_object *p = pod("[{\"name\":\"c\",\"image\":\"x\"}]");
    pods()->default_tolerations(p, 300, 200);
    cr_assert_str_eq(at(p, "spec.tolerations.0.key"), "node.kubernetes.io/not-ready");
    cr_assert_str_eq(at(p, "spec.tolerations.0.operator"), "Exists");
    cr_assert_str_eq(at(p, "spec.tolerations.0.effect"), "NoExecute");
    cr_assert_str_eq(at(p, "spec.tolerations.0.tolerationSeconds"), "300");
    cr_assert_str_eq(at(p, "spec.tolerations.1.key"), "node.kubernetes.io/unreachable");
    cr_assert_str_eq(at(p, "spec.tolerations.1.tolerationSeconds"), "200");
    json_object_put(p);
    /* a pod tolerating everything (no key, no effect) gets none */
    json_object *q = parse("{\"spec\":{\"tolerations\":[{\"operator\":\"Exists\"}]}}");
    pods()->default_tolerations(q, 300, 300);
    cr_assert_eq(json_object_array_length(kite_obj_get(kite_obj_get(q, "spec"), "tolerations")), 1);
    json_object_put(q);
}

Test(pod, delete_grace) {
    json_object *p = pod("[{\"name\":\"c\",\"image\":\"x\"}]");
    int64_t (*grace)(json_object *, int64_t) = pods()->delete_grace;
    cr_assert_eq(grace(p, -1), 0, "never bound: deleted at once");
    cr_assert_eq(grace(p, 10), 0);
    kite_obj_set(kite_obj_get(p, "spec"), "nodeName", json_object_new_string("n1"));
    cr_assert_eq(grace(p, -1), 30, "the spec's grace");
    cr_assert_eq(grace(p, 5), 5, "the request's");
    cr_assert_eq(grace(p, 0), 0);
    kite_obj_set(kite_obj_get(p, "status"), "phase", json_object_new_string("Succeeded"));
    cr_assert_eq(grace(p, -1), 0, "finished: nothing to wait for");
    json_object_put(p);
}

Test(pod, binding) {
    const struct kite_subresource *b = kite_resource_subresource(pods(), "binding");
    cr_assert(kite_subresource_is_action(b));
    cr_assert_str_eq(b->body_kind, "Binding");
    const struct kite_subresource *e = kite_resource_subresource(pods(), "eviction");
    cr_assert(e && e->deletes && strcmp(e->body_group, "policy") == 0);
    json_object *p = pod("[{\"name\":\"c\",\"image\":\"x\"}]");
    json_object *body = parse("{\"metadata\":{\"name\":\"p\"},\"target\":{\"kind\":\"Node\",\"name\":\"n1\"}}");
    char *msg = NULL;
    cr_assert_eq(b->act(p, body, 0, &msg), 0);
    cr_assert_str_eq(at(p, "spec.nodeName"), "n1");
    cr_assert_str_eq(at(p, "status.conditions.0.type"), "PodScheduled");
    cr_assert_str_eq(at(p, "status.conditions.0.status"), "True");
    cr_assert_str_eq(at(p, "status.conditions.0.lastTransitionTime"), "1970-01-01T00:00:00Z");
    cr_assert_eq(b->act(p, body, 0, &msg), 409);
    cr_assert_str_eq(msg, "pod p is already assigned to node \"n1\"");
    free(msg);
    json_object_put(body);
    body = parse("{\"metadata\":{\"name\":\"p\"},\"target\":{}}");
    msg = NULL;
    cr_assert_eq(b->act(p, body, 0, &msg), 422);
    free(msg);
    json_object_put(body);
    json_object_put(p);
}
