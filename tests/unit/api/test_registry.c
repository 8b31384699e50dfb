#include <criterion/criterion.h>

#include "api/registry.h"
#include "base/buf.h"

Test(registry, find_by_group_version_plural) {
    const struct kite_resource *n = kite_registry_find("", "v1", "nodes");
    cr_assert_not_null(n);
    cr_assert_str_eq(n->kind, "Node");
    cr_assert(!n->namespaced);
    cr_assert(n->has_status);
    const struct kite_resource *l = kite_registry_find("coordination.k8s.io", "v1", "leases");
    cr_assert_not_null(l);
    cr_assert(l->namespaced);
    cr_assert_str_eq(kite_resource_api_version(l), "coordination.k8s.io/v1");
    cr_assert_null(kite_registry_find("", "v1", "leases"));
    cr_assert_null(kite_registry_find("apps", "v1", "nodes"));
    /* both Event versions share one storage folder */
    const struct kite_resource *e1 = kite_registry_find("", "v1", "events");
    const struct kite_resource *e2 = kite_registry_find("events.k8s.io", "v1", "events");
    _cleanup_free_ char *k1 = kite_object_key(e1, "default", "x"), *k2 = kite_object_key(e2, "default", "x");
    cr_assert_str_eq(k1, k2);
}

Test(registry, keys_and_prefixes) {
    const struct kite_resource *n = kite_registry_find("", "v1", "nodes");
    const struct kite_resource *l = kite_registry_find("coordination.k8s.io", "v1", "leases");
    _cleanup_free_ char *a = kite_object_key(n, NULL, "worker-1"), *b = kite_object_key(l, "kube-node-lease", "w");
    _cleanup_free_ char *c = kite_object_prefix(l, NULL), *d = kite_object_prefix(l, "kube-node-lease");
    cr_assert_str_eq(a, "/registry/nodes/worker-1");
    cr_assert_str_eq(b, "/registry/leases/kube-node-lease/w");
    cr_assert_str_eq(c, "/registry/leases/");
    cr_assert_str_eq(d, "/registry/leases/kube-node-lease/");
}

Test(registry, supported_fields) {
    const struct kite_resource *n = kite_registry_find("", "v1", "nodes");
    const struct kite_resource *e = kite_registry_find("", "v1", "events");
    cr_assert(kite_resource_field_supported(n, "metadata.name"));
    cr_assert(kite_resource_field_supported(n, "spec.unschedulable"));
    cr_assert(!kite_resource_field_supported(n, "spec.nodeName"));
    cr_assert(kite_resource_field_supported(e, "involvedObject.uid"));
    json_object *ev = json_tokener_parse("{\"source\":{\"component\":\"kubelet\"},\"involvedObject\":{\"kind\":\"Node\"}}");
    struct kite_buf buf = {0};
    cr_assert_str_eq(kite_resource_field(e, ev, "source", &buf), "kubelet");
    cr_assert_str_eq(kite_resource_field(e, ev, "involvedObject.kind", &buf), "Node");
    cr_assert_str_eq(kite_resource_field(e, ev, "reason", &buf), "");
    kite_buf_release(&buf);
    json_object_put(ev);
}

/* Absent fields compare as Kubernetes' field sets render them (strconv.FormatBool of a zero
 * bool is "false"), and each kind accepts exactly the labels of its upstream conversion func. */
Test(registry, field_set_as_upstream) {
    const struct kite_resource *n = kite_registry_find("", "v1", "nodes");
    const struct kite_resource *p = kite_registry_find("", "v1", "pods");
    const struct kite_resource *e = kite_registry_find("", "v1", "events");
    const struct kite_resource *ns = kite_registry_find("", "v1", "namespaces");
    const struct kite_resource *l = kite_registry_find("coordination.k8s.io", "v1", "leases");
    struct kite_buf buf = {0};
    json_object *node = json_tokener_parse("{\"metadata\":{\"name\":\"a\"},\"spec\":{}}");
    cr_assert_str_eq(kite_resource_field(n, node, "spec.unschedulable", &buf), "false");
    json_object *cordoned = json_tokener_parse("{\"spec\":{\"unschedulable\":true}}");
    cr_assert_str_eq(kite_resource_field(n, cordoned, "spec.unschedulable", &buf), "true");
    json_object *pod = json_tokener_parse("{\"spec\":{\"nodeName\":\"w\"}}");
    cr_assert_str_eq(kite_resource_field(p, pod, "spec.hostNetwork", &buf), "false");
    cr_assert_str_eq(kite_resource_field(p, pod, "status.phase", &buf), "");
    cr_assert_str_eq(kite_resource_field(p, pod, "spec.host", &buf), "w"); /* v1 clients' old name */
    /* an event with no source.component is selected by its reportingComponent */
    json_object *ev = json_tokener_parse("{\"reportingComponent\":\"ctl\"}");
    cr_assert_str_eq(kite_resource_field(e, ev, "source", &buf), "ctl");
    /* cluster-scoped kinds with their own conversion func know no metadata.namespace */
    cr_assert(!kite_resource_field_supported(n, "metadata.namespace"));
    cr_assert(!kite_resource_field_supported(ns, "metadata.namespace"));
    cr_assert(kite_resource_field_supported(ns, "status.phase"));
    cr_assert(kite_resource_field_supported(p, "spec.host"));
    cr_assert(!kite_resource_field_supported(p, "spec.nodename"));
    cr_assert(kite_resource_field_supported(l, "metadata.namespace"));
    cr_assert(!kite_resource_field_supported(l, "spec.holderIdentity"));
    json_object_put(node);
    json_object_put(cordoned);
    json_object_put(pod);
    json_object_put(ev);
    kite_buf_release(&buf);
}

/* The stored form puts kind, apiVersion, metadata first with the resourceVersion placeholder,
 * and rendering splices the revision into exactly that place. */
Test(registry, encode_render_decode) {
    json_object *o = json_tokener_parse(
        "{\"status\":{\"x\":1},\"metadata\":{\"labels\":{\"resourceVersion\":\"\"},\"resourceVersion\":\"17\",\"name\":\"n\"},"
        "\"apiVersion\":\"v1\",\"spec\":{},\"kind\":\"Node\"}");
    size_t len;
    _cleanup_free_ char *enc = kite_object_encode(o, &len);
    cr_assert_str_eq(enc, "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"\","
                          "\"labels\":{\"resourceVersion\":\"\"}},\"spec\":{},\"status\":{\"x\":1}}");
    struct kite_buf out = {0};
    kite_object_render(enc, len, 42, &out);
    cr_assert_str_eq(out.p, "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"42\","
                            "\"labels\":{\"resourceVersion\":\"\"}},\"spec\":{},\"status\":{\"x\":1}}");
    json_object *d = kite_object_decode(enc, len, 42);
    cr_assert_str_eq(kite_meta_str(d, "resourceVersion"), "42");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(d), "labels"), "resourceVersion"), "");
    /* user data cannot forge the placeholder: quotes inside strings are escaped */
    json_object *evil = json_tokener_parse("{\"kind\":\"\\\"resourceVersion\\\":\\\"\\\"\",\"metadata\":{\"name\":\"a\"}}");
    _cleanup_free_ char *e2 = kite_object_encode(evil, &len);
    kite_buf_reset(&out);
    kite_object_render(e2, len, 7, &out);
    json_object *back = json_tokener_parse(out.p);
    cr_assert_not_null(back);
    cr_assert_str_eq(kite_meta_str(back, "resourceVersion"), "7");
    cr_assert_str_eq(kite_obj_str(back, "kind"), "\"resourceVersion\":\"\"");
    json_object_put(back);
    json_object_put(evil);
    json_object_put(d);
    json_object_put(o);
    kite_buf_release(&out);
}

Test(registry, uuid4_format) {
    char a[37], b[37];
    kite_uuid4(a);
    kite_uuid4(b);
    cr_assert_eq(strlen(a), 36);
    cr_assert_eq(a[8], '-');
    cr_assert_eq(a[14], '4');
    cr_assert(strchr("89ab", a[19]) != NULL);
    cr_assert_str_neq(a, b);
}

Test(registry, event_versions_convert) {
    const struct kite_resource *e2 = kite_registry_find("events.k8s.io", "v1", "events");
    json_object *o = json_tokener_parse("{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",\"regarding\":{\"kind\":\"Node\"},"
                                        "\"note\":\"hi\",\"reportingController\":\"kubelet\",\"deprecatedCount\":3}");
    e2->to_storage(o);
    cr_assert_str_eq(kite_obj_str(o, "apiVersion"), "v1");
    cr_assert_str_eq(kite_obj_str(o, "message"), "hi");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(o, "involvedObject"), "kind"), "Node");
    cr_assert_str_eq(kite_obj_str(o, "reportingComponent"), "kubelet");
    cr_assert_null(kite_obj_get(o, "note"));
    e2->from_storage(o);
    cr_assert_str_eq(kite_obj_str(o, "apiVersion"), "events.k8s.io/v1");
    cr_assert_str_eq(kite_obj_str(o, "note"), "hi");
    cr_assert_eq(json_object_get_int(kite_obj_get(o, "deprecatedCount")), 3);
    json_object_put(o);
}

Test(registry, node_and_namespace_defaults) {
    const struct kite_resource *n = kite_registry_find("", "v1", "nodes");
    const struct kite_resource *ns = kite_registry_find("", "v1", "namespaces");
    json_object *o = json_tokener_parse("{\"metadata\":{\"name\":\"a\"},\"status\":{\"nodeInfo\":{\"osImage\":\"x\"}}}");
    n->defaults(o);
    json_object *ni = kite_obj_get(kite_obj_get(o, "status"), "nodeInfo");
    cr_assert_str_eq(kite_obj_str(ni, "osImage"), "x");
    cr_assert_str_eq(kite_obj_str(ni, "architecture"), "");
    json_object_put(o);
    o = json_tokener_parse("{\"metadata\":{\"name\":\"team-a\"}}");
    ns->defaults(o);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(o, "status"), "phase"), "Active");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(o), "labels"), "kubernetes.io/metadata.name"), "team-a");
    json_object_put(o);
}

Test(registry, node_taint_validation) {
    const struct kite_resource *n = kite_registry_find("", "v1", "nodes");
    json_object *o = json_tokener_parse("{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},"
                                        "{\"key\":\"\",\"effect\":\"Sometimes\"}]}}");
    struct kite_causes c = {0};
    n->validate(o, NULL, &c);
    cr_assert_eq(c.n, 2);
    cr_assert_str_eq(c.v[0].field, "spec.taints[1].key");
    cr_assert_str_eq(c.v[1].field, "spec.taints[1].effect");
    cr_assert_str_eq(c.v[1].reason, "FieldValueNotSupported");
    kite_causes_release(&c);
    json_object_put(o);
}
