#include <criterion/criterion.h>

#include "api/yaml.h"

/* What kite answers to Accept: application/yaml reads back as the same tree, with keys sorted
 * and strings that look like other types quoted (a reader must not turn "true" into a bool). */
Test(yaml, emit_round_trips_and_quotes) {
    const char *json = "{\"metadata\":{\"name\":\"n\",\"labels\":{\"b\":\"true\",\"a\":\"123\",\"c\":\"\",\"d\":\"yes\","
                       "\"e\":\"1.5\",\"f\":\"null\",\"g\":\"x: y\",\"h\":\"two\\nlines\",\"i\":\"0x1F\",\"j\":\"é\",\"k\":\"2026-12-05T05:12:08Z\"}},"
                       "\"spec\":{\"unschedulable\":true,\"n\":-42,\"f\":2.5,\"z\":null,\"empty\":{},\"list\":[],"
                       "\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}";
    json_object *o = json_tokener_parse(json);
    struct kite_buf b = {0};
    cr_assert_eq(kite_yaml_emit(o, &b), 0);
    kite_buf_putc(&b, 0);
    cr_assert(strstr(b.p, "metadata:\n") == b.p, "%s", b.p); /* sorted: metadata before spec */
    cr_assert(strstr(b.p, "a: \"123\"") && strstr(b.p, "b: \"true\"") && strstr(b.p, "d: \"yes\""), "%s", b.p);
    cr_assert(strstr(b.p, "unschedulable: true"), "%s", b.p);
    cr_assert(strstr(b.p, "k: \"2026-12-05T05:12:08Z\""), "%s", b.p); /* times quoted, as kubectl shows them */
    json_object *back = NULL;
    char *err = NULL;
    cr_assert_eq(kite_yaml_parse(b.p, b.len - 1, &back, &err), 0, "%s", err);
    /* the parser reads floats as strings (it serves config files); compare the rest */
    json_object_object_del(json_object_object_get(o, "spec"), "f");
    json_object_object_del(json_object_object_get(back, "spec"), "f");
    cr_assert(json_object_equal(o, back), "%s\n%s", b.p, json_object_to_json_string(back));
    json_object_put(o);
    json_object_put(back);
    kite_buf_release(&b);
}
