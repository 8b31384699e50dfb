/* The JSON accessors every module uses (json/obj.h): absent, null and mistyped members read as
 * NULL or 0, never crash. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "json/obj.h"

Test(obj, get_str_int_and_paths) {
    json_object *o = json_tokener_parse("{\"metadata\":{\"name\":\"a\",\"labels\":{\"x.y\":\"1\"}},\"spec\":{\"n\":7,\"s\":\"9\","
                                        "\"nil\":null,\"list\":[1,2,3],\"obj\":{}}}");
    cr_assert_str_eq(kite_meta_str(o, "name"), "a");
    cr_assert_null(kite_meta_str(o, "namespace"));
    cr_assert_null(kite_obj_str(kite_obj_get(o, "spec"), "n"), "a number is no string");
    cr_assert_eq(kite_obj_int(kite_obj_get(o, "spec"), "n"), 7);
    cr_assert_eq(kite_obj_int(kite_obj_get(o, "spec"), "s"), 9, "json-c's conversion of a string");
    cr_assert_eq(kite_obj_int(kite_obj_get(o, "spec"), "absent"), 0);
    cr_assert_eq(kite_obj_int(kite_obj_get(o, "spec"), "nil"), 0);
    cr_assert_null(kite_obj_get(kite_obj_get(o, "spec"), "nil"));
    cr_assert_eq(kite_obj_int(kite_obj_path(o, "spec"), "n"), 7);
    cr_assert_str_eq(kite_obj_str_at(o, "metadata", "name"), "a");
    cr_assert_null(kite_obj_at(o, "metadata", "name", "deeper"), "a string has no members");
    cr_assert_null(kite_obj_path_str(o, "metadata.labels.x.y"), "a dotted path cannot name a key with a dot");
    cr_assert_str_eq(kite_obj_str(kite_obj_path(o, "metadata.labels"), "x.y"), "1");
    cr_assert_eq(kite_array_len(kite_obj_path(o, "spec.list")), 3);
    cr_assert_eq(kite_array_len(kite_obj_path(o, "spec.obj")), 0, "an object is no array");
    cr_assert_eq(kite_array_len(NULL), 0);
    cr_assert_null(kite_obj_get(NULL, "a"));
    cr_assert_null(kite_obj_get(kite_obj_path(o, "spec.list"), "a"), "an array has no members");
    json_object *m = kite_obj_ensure(kite_obj_get(o, "spec"), "s"); /* a string there: replaced by an object */
    cr_assert(json_object_is_type(m, json_type_object));
    kite_obj_set(m, "k", json_object_new_int(1));
    cr_assert_eq(kite_obj_int(kite_obj_path(o, "spec.s"), "k"), 1);
    json_object_put(o);
}

Test(obj, sorted_keys) {
    json_object *o = json_tokener_parse("{\"b\":1,\"a\":2,\"B\":3,\"ab\":4}");
    size_t n;
    const char **k = kite_obj_sorted_keys(o, NULL, &n);
    cr_assert_eq(n, 4);
    const char *want[] = {"B", "a", "ab", "b"}; /* bytewise, as Go sorts map keys */
    for (size_t i = 0; i < n; i++) cr_assert_str_eq(k[i], want[i]);
    free(k);
    json_object *e = json_object_new_object();
    k = kite_obj_sorted_keys(e, NULL, &n);
    cr_assert_eq(n, 0);
    free(k);
    json_object *a = json_object_new_array();
    cr_assert_null(kite_obj_sorted_keys(a, NULL, &n), "an array has no members");
    cr_assert_eq(n, 0);
    json_object_put(a);
    json_object_put(e);
    json_object_put(o);
}
