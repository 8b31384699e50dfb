/* The one Event builder: the fields client-go's recorder writes, as the controllers, the agent
 * and the apiserver's node-state reports fill them. */
#include <criterion/criterion.h>
#include <string.h>

#include "api/events.h"
#include "api/registry.h"

#define WALL (INT64_C(1700000000) * 1000000000)

Test(events, a_pod_event_as_the_kubelet_writes_it) {
    struct kite_event_spec s = {.ns = "ns1", .name = "p.1", .kind = "Pod", .obj_name = "p", .obj_ns = "ns1", .uid = "u1",
                                .field_path = "spec.containers{c}", .type = "Warning", .reason = "BackOff",
                                .message = "m", .component = "kubelet", .host = "n1", .instance = "n1", .wall_ns = WALL,
                                .first_ts = "2023-01-01T00:00:00Z", .count = 3};
    json_object *ev = kite_event_build(&s);
    json_object *io = kite_obj_get(ev, "involvedObject");
    cr_assert_str_eq(kite_obj_str(ev, "kind"), "Event");
    cr_assert_str_eq(kite_meta_str(ev, "name"), "p.1");
    cr_assert_str_eq(kite_meta_str(ev, "namespace"), "ns1");
    cr_assert_str_eq(kite_obj_str(io, "kind"), "Pod");
    cr_assert_str_eq(kite_obj_str(io, "namespace"), "ns1");
    cr_assert_str_eq(kite_obj_str(io, "uid"), "u1");
    cr_assert_str_eq(kite_obj_str(io, "fieldPath"), "spec.containers{c}");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(ev, "source"), "host"), "n1");
    cr_assert_str_eq(kite_obj_str(ev, "firstTimestamp"), "2023-01-01T00:00:00Z");
    cr_assert_str_eq(kite_obj_str(ev, "lastTimestamp"), "2023-11-14T22:13:20Z");
    cr_assert_eq(json_object_get_int(kite_obj_get(ev, "count")), 3);
    cr_assert_str_eq(kite_obj_str(ev, "reportingComponent"), "kubelet");
    cr_assert_str_eq(kite_obj_str(ev, "reportingInstance"), "n1");
    json_object_put(ev);
}

Test(events, a_node_event_has_no_namespace_in_its_reference_and_a_generated_name) {
    struct kite_event_spec s = {.ns = "default", .kind = "Node", .obj_name = "n1", .type = "Normal", .reason = "R",
                                .message = "m", .component = "kite-apiserver", .wall_ns = WALL};
    json_object *ev = kite_event_build(&s), *ev2 = kite_event_build(&s);
    json_object *io = kite_obj_get(ev, "involvedObject");
    cr_assert_null(kite_obj_get(io, "namespace"));
    cr_assert_null(kite_obj_get(io, "uid"));
    cr_assert_null(kite_obj_get(kite_obj_get(ev, "source"), "host"));
    cr_assert_null(kite_obj_get(ev, "reportingInstance"));
    cr_assert_eq(json_object_get_int(kite_obj_get(ev, "count")), 1);
    cr_assert_eq(strncmp(kite_meta_str(ev, "name"), "n1.", 3), 0, "%s", kite_meta_str(ev, "name"));
    cr_assert_str_neq(kite_meta_str(ev, "name"), kite_meta_str(ev2, "name"), "two of one instant differ");
    cr_assert_str_eq(kite_obj_str(ev, "firstTimestamp"), kite_obj_str(ev, "lastTimestamp"));
    json_object_put(ev);
    json_object_put(ev2);
}

/* The one family of JSON accessors: a path of keys, or a dotted path. */
Test(json_access, paths_of_keys_and_dotted_paths) {
    json_object *o = json_tokener_parse("{\"spec\":{\"nodeName\":\"n1\",\"n\":3,\"labels\":{\"a.b/c\":\"v\"}}}");
    cr_assert_str_eq(kite_obj_str_at(o, "spec", "nodeName"), "n1");
    cr_assert_str_eq(kite_obj_str_at(o, "spec", "labels", "a.b/c"), "v", "keys with dots");
    cr_assert_null(kite_obj_str_at(o, "spec", "n"), "not a string");
    cr_assert_null(kite_obj_str_at(o, "spec", "nodeName", "x"), "through a string");
    cr_assert_null(kite_obj_str_at(o, "status", "phase"));
    cr_assert_eq(kite_obj_at(o, "spec", NULL, "nodeName"), kite_obj_get(o, "spec"), "the keys up to the first NULL");
    cr_assert_str_eq(kite_obj_path_str(o, "spec.nodeName"), "n1");
    cr_assert_eq(json_object_get_int(kite_obj_path(o, "spec.n")), 3);
    cr_assert_null(kite_obj_path(o, "spec.nodeName.x"));
    cr_assert_null(kite_obj_str_at(NULL, "spec"));
    json_object_put(o);
}
