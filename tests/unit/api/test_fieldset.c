/* Field sets, diff, merge and pruning (fieldset.h) over the kinds' own schemas and list rules:
 * Pod (containers as a map keyed by name, env inside them), Node (conditions keyed by type,
 * podCIDRs a set, taints atomic), ConfigMap (data a granular map), metadata (finalizers a set). */
#include <criterion/criterion.h>
#include <string.h>

#include "api/fieldset.h"
#include "api/kinds/kinds.h"
#include "api/registry.h"
#include "json/patch.h"

static json_object *J(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert(o, "test JSON parses: %s", s);
    return o;
}

static json_object *V1(const char *s) {
    json_object *o = J(s), *r = kite_fieldset_from_v1(o);
    json_object_put(o);
    return r;
}

static struct kite_fs_scope scope(const struct kite_resource *r) {
    return (struct kite_fs_scope){.schema = r->schema, .smp = r->smp, .skip = r->has_status ? "status" : NULL};
}

/* set (internal form) equals the FieldsV1 text want */
static void assert_v1(json_object *set, const char *want) {
    json_object *v1 = kite_fieldset_to_v1(set), *w = J(want);
    cr_assert(kite_json_equal(v1, w), "fieldsV1 %s, want %s", json_object_to_json_string(v1), want);
    json_object_put(v1);
    json_object_put(w);
}

Test(fieldset, pod_containers_are_a_map_by_name) {
    struct kite_fs_scope sc = scope(&kite_kind_pod);
    json_object *pod = J("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"d\","
                         "\"uid\":\"u\",\"labels\":{\"a\":\"1\"},\"finalizers\":[\"x/y\"]},"
                         "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"env\":[{\"name\":\"E\",\"value\":\"v\"}],"
                         "\"args\":[\"a\",\"b\"]}],\"tolerations\":[{\"key\":\"k\"}]},\"status\":{\"phase\":\"Running\"}}");
    json_object *set = kite_fieldset_of(&sc, pod);
    /* args atomic; env a map by name; tolerations (no rule) atomic; status, name, uid never */
    assert_v1(set, "{\"f:metadata\":{\"f:labels\":{\"f:a\":{}},\"f:finalizers\":{\"v:\\\"x/y\\\"\":{}}},"
                   "\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:name\":{},\"f:image\":{},"
                   "\"f:args\":{},\"f:env\":{\"k:{\\\"name\\\":\\\"E\\\"}\":{\".\":{},\"f:name\":{},\"f:value\":{}}}}},"
                   "\"f:tolerations\":{}}}");
    json_object_put(set);
    json_object_put(pod);
}

Test(fieldset, empty_struct_and_map_are_members) {
    struct kite_fs_scope sc = scope(&kite_kind_configmap);
    json_object *cm = J("{\"metadata\":{\"name\":\"c\",\"labels\":{}},\"data\":{}}");
    json_object *set = kite_fieldset_of(&sc, cm);
    assert_v1(set, "{\"f:data\":{},\"f:metadata\":{\"f:labels\":{}}}");
    json_object_put(set);
    json_object_put(cm);
}

Test(fieldset, paths_print_as_upstream) {
    struct kite_fs_scope sc = scope(&kite_kind_node);
    json_object *node = J("{\"metadata\":{\"name\":\"n\"},\"spec\":{\"podCIDRs\":[\"10.0.0.0/24\"],\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}");
    json_object *set = kite_fieldset_of(&sc, node);
    struct kite_buf b = {0};
    kite_fieldset_each(set, (void (*)(void *, const char *))kite_buf_puts, &b);
    /* each member once, fields before list values */
    cr_assert_str_eq(b.p, ".spec.podCIDRs[=\"10.0.0.0/24\"].spec.taints");
    kite_buf_release(&b);
    json_object_put(set);
    json_object_put(node);
}

Test(fieldset, diff_of_node_status_conditions) {
    struct kite_fs_scope sc = {.schema = kite_kind_node.schema, .smp = kite_kind_node.smp, .only = "status"};
    json_object *a = J("{\"metadata\":{\"name\":\"n\"},\"spec\":{\"unschedulable\":true},\"status\":{\"conditions\":["
                       "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"t1\"},{\"type\":\"DiskPressure\",\"status\":\"False\"}]}}");
    json_object *b = J("{\"metadata\":{\"name\":\"n\"},\"spec\":{},\"status\":{\"conditions\":["
                       "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"t2\"},{\"type\":\"PIDPressure\",\"status\":\"False\"}]}}");
    json_object *add, *rm, *mod;
    kite_fieldset_diff(&sc, a, b, &add, &rm, &mod);
    /* spec is out of a status write's scope */
    assert_v1(mod, "{\"f:status\":{\"f:conditions\":{\"k:{\\\"type\\\":\\\"Ready\\\"}\":{\"f:lastHeartbeatTime\":{}}}}}");
    assert_v1(add, "{\"f:status\":{\"f:conditions\":{\"k:{\\\"type\\\":\\\"PIDPressure\\\"}\":{\".\":{},\"f:type\":{},\"f:status\":{}}}}}");
    assert_v1(rm, "{\"f:status\":{\"f:conditions\":{\"k:{\\\"type\\\":\\\"DiskPressure\\\"}\":{\".\":{},\"f:type\":{},\"f:status\":{}}}}}");
    json_object_put(add), json_object_put(rm), json_object_put(mod);
    /* equal objects: nothing */
    kite_fieldset_diff(&sc, a, a, &add, &rm, &mod);
    cr_assert(kite_fieldset_empty(add) && kite_fieldset_empty(rm) && kite_fieldset_empty(mod));
    json_object_put(add), json_object_put(rm), json_object_put(mod);
    json_object_put(a), json_object_put(b);
}

Test(fieldset, diff_of_atomic_list_is_the_whole_list) {
    struct kite_fs_scope sc = scope(&kite_kind_node);
    json_object *a = J("{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"}]}}");
    json_object *b = J("{\"spec\":{\"taints\":[{\"key\":\"b\",\"effect\":\"NoSchedule\"}]}}");
    json_object *add, *rm, *mod;
    kite_fieldset_diff(&sc, a, b, &add, &rm, &mod);
    assert_v1(mod, "{\"f:spec\":{\"f:taints\":{}}}");
    cr_assert(kite_fieldset_empty(add) && kite_fieldset_empty(rm));
    json_object_put(add), json_object_put(rm), json_object_put(mod);
    json_object_put(a), json_object_put(b);
}

Test(fieldset, merge_by_key_set_and_atomic) {
    struct kite_fs_scope sc = scope(&kite_kind_pod);
    json_object *live = J("{\"metadata\":{\"finalizers\":[\"a/x\"],\"labels\":{\"k\":\"1\"}},\"spec\":{\"containers\":["
                          "{\"name\":\"c1\",\"image\":\"i1\",\"args\":[\"x\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"}]},"
                          "{\"name\":\"c2\",\"image\":\"i2\"}]}}");
    json_object *cfg = J("{\"metadata\":{\"finalizers\":[\"b/y\",\"a/x\"],\"labels\":{\"k\":null,\"j\":\"2\"}},\"spec\":{\"containers\":["
                         "{\"name\":\"c1\",\"args\":[\"y\"],\"env\":[{\"name\":\"B\",\"value\":\"2\"}]},{\"name\":\"c3\",\"image\":\"i3\"}]}}");
    kite_fieldset_merge(&sc, live, cfg);
    json_object *want = J("{\"metadata\":{\"finalizers\":[\"a/x\",\"b/y\"],\"labels\":{\"j\":\"2\"}},\"spec\":{\"containers\":["
                          "{\"name\":\"c1\",\"image\":\"i1\",\"args\":[\"y\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}]},"
                          "{\"name\":\"c2\",\"image\":\"i2\"},{\"name\":\"c3\",\"image\":\"i3\"}]}}");
    cr_assert(kite_json_equal(live, want), "merged %s", json_object_to_json_string(live));
    json_object_put(live), json_object_put(cfg), json_object_put(want);
}

Test(fieldset, list_without_keys_falls_back_to_atomic) {
    struct kite_fs_scope sc = scope(&kite_kind_pod);
    /* two containers with one name: no map can hold them; the list is one value */
    json_object *pod = J("{\"spec\":{\"containers\":[{\"name\":\"c\"},{\"name\":\"c\"}]}}");
    json_object *set = kite_fieldset_of(&sc, pod);
    assert_v1(set, "{\"f:spec\":{\"f:containers\":{}}}");
    json_object_put(set), json_object_put(pod);
}

Test(fieldset, pruned_keeps_what_others_own) {
    json_object *last = V1("{\"f:data\":{\"f:a\":{},\"f:b\":{},\"f:c\":{}}}");
    json_object *applied = V1("{\"f:data\":{\"f:a\":{}}}");
    json_object *others = V1("{\"f:data\":{\"f:c\":{}}}");
    json_object *gone = kite_fieldset_pruned(last, applied, others);
    assert_v1(gone, "{\"f:data\":{\"f:b\":{}}}");
    json_object *obj = J("{\"data\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\"}}");
    kite_fieldset_remove_from(obj, gone);
    json_object *want = J("{\"data\":{\"a\":\"1\",\"c\":\"3\"}}");
    cr_assert(kite_json_equal(obj, want), "%s", json_object_to_json_string(obj));
    json_object_put(last), json_object_put(applied), json_object_put(others), json_object_put(gone);
    json_object_put(obj), json_object_put(want);
}

Test(fieldset, remove_list_item_by_key_and_value) {
    json_object *set = V1("{\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"b\\\"}\":{}}},"
                                               "\"f:metadata\":{\"f:finalizers\":{\"v:\\\"x/y\\\"\":{}}}}");
    json_object *obj = J("{\"metadata\":{\"finalizers\":[\"x/y\",\"z/w\"]},\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}");
    kite_fieldset_remove_from(obj, set);
    json_object *want = J("{\"metadata\":{\"finalizers\":[\"z/w\"]},\"spec\":{\"containers\":[{\"name\":\"a\"}]}}");
    cr_assert(kite_json_equal(obj, want), "%s", json_object_to_json_string(obj));
    json_object_put(set), json_object_put(obj), json_object_put(want);
}

Test(fieldset, algebra_and_v1_round_trip) {
    json_object *a = V1("{\"f:spec\":{\".\":{},\"f:x\":{},\"f:y\":{}}}");
    json_object *b = V1("{\"f:spec\":{\"f:y\":{},\"f:z\":{}}}");
    json_object *i = kite_fieldset_intersection(a, b), *d = kite_fieldset_difference(a, b);
    assert_v1(i, "{\"f:spec\":{\"f:y\":{}}}");
    assert_v1(d, "{\"f:spec\":{\".\":{},\"f:x\":{}}}");
    kite_fieldset_union_into(d, b);
    assert_v1(d, "{\"f:spec\":{\".\":{},\"f:x\":{},\"f:y\":{},\"f:z\":{}}}");
    cr_assert_null(V1("{\"bad\":{}}"), "not a FieldsV1 element");
    json_object_put(a), json_object_put(b), json_object_put(i), json_object_put(d);
}

/* A conflict, as an apply computes it: the fields the merge changes or adds that another
 * manager's set holds; equal values are shared, not in conflict. */
Test(fieldset, conflicts_are_changed_fields_another_manager_set) {
    struct kite_fs_scope sc = scope(&kite_kind_configmap);
    json_object *live = J("{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"1\",\"b\":\"2\"}}");
    json_object *other = V1("{\"f:data\":{\"f:a\":{},\"f:b\":{}}}");
    json_object *cfg = J("{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"1\",\"b\":\"3\",\"c\":\"4\"}}");
    json_object *merged = NULL;
    json_object_deep_copy(live, &merged, NULL);
    kite_fieldset_merge(&sc, merged, cfg);
    json_object *add, *rm, *mod;
    kite_fieldset_diff(&sc, live, merged, &add, &rm, &mod);
    kite_fieldset_union_into(mod, add);
    json_object *conflicts = kite_fieldset_intersection(other, mod);
    assert_v1(conflicts, "{\"f:data\":{\"f:b\":{}}}");
    cr_assert(kite_fieldset_empty(rm));
    json_object_put(live), json_object_put(other), json_object_put(cfg), json_object_put(merged);
    json_object_put(add), json_object_put(rm), json_object_put(mod), json_object_put(conflicts);
}
