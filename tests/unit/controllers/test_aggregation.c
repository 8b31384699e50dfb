/* ClusterRole aggregation (src/controllers/aggregation.c): label selectors as JSON, and the
 * union an aggregated role gets (by name order, each rule once, never from itself). */
#include "controllers/controllers.h"
#include "api/registry.h"

#include <criterion/criterion.h>

static const struct {
    const char *selector, *labels;
    bool matches;
} SELECTORS[] = {
    {"{\"matchLabels\":{\"a\":\"1\"}}", "{\"a\":\"1\",\"b\":\"2\"}", true},
    {"{\"matchLabels\":{\"a\":\"1\"}}", "{\"a\":\"2\"}", false},
    {"{\"matchLabels\":{\"a\":\"1\"}}", "null", false},
    {"{}", "{\"x\":\"y\"}", true}, /* the empty selector selects everything, as upstream */
    {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"1\",\"2\"]}]}", "{\"a\":\"2\"}", true},
    {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"1\"]}]}", "{}", false},
    {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"NotIn\",\"values\":[\"1\"]}]}", "{}", true},
    {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"NotIn\",\"values\":[\"1\"]}]}", "{\"a\":\"1\"}", false},
    {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\"}]}", "{\"a\":\"\"}", true},
    {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"DoesNotExist\"}]}", "{\"a\":\"\"}", false},
    {"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Bogus\"}]}", "{\"a\":\"\"}", false},
    {"{\"matchLabels\":{\"a\":\"1\"},\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"Exists\"}]}", "{\"a\":\"1\"}", false},
};

Test(aggregation, selectors_table) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(SELECTORS); i++) {
        json_object *sel = json_tokener_parse(SELECTORS[i].selector), *labels = json_tokener_parse(SELECTORS[i].labels);
        cr_expect_eq(kite_label_selector_json_matches(sel, labels), SELECTORS[i].matches, "case %zu: %s on %s", i,
                     SELECTORS[i].selector, SELECTORS[i].labels);
        json_object_put(sel);
        json_object_put(labels);
    }
}

Test(aggregation, union_in_name_order_once_and_not_from_itself) {
    json_object *roles[] = {
        json_tokener_parse("{\"metadata\":{\"name\":\"view\",\"labels\":{\"agg\":\"true\"}},"
                           "\"aggregationRule\":{\"clusterRoleSelectors\":[{\"matchLabels\":{\"agg\":\"true\"}}]},"
                           "\"rules\":[{\"verbs\":[\"stale\"]}]}"),
        json_tokener_parse("{\"metadata\":{\"name\":\"z-last\",\"labels\":{\"agg\":\"true\"}},"
                           "\"rules\":[{\"verbs\":[\"z\"]},{\"verbs\":[\"a\"]}]}"),
        json_tokener_parse("{\"metadata\":{\"name\":\"a-first\",\"labels\":{\"agg\":\"true\"}},\"rules\":[{\"verbs\":[\"a\"]}]}"),
        json_tokener_parse("{\"metadata\":{\"name\":\"other\",\"labels\":{\"agg\":\"false\"}},\"rules\":[{\"verbs\":[\"o\"]}]}"),
    };
    json_object *got = kite_aggregated_rules(roles[0], roles, KITE_ARRAY_SIZE(roles));
    cr_assert_str_eq(json_object_to_json_string_ext(got, JSON_C_TO_STRING_PLAIN), "[{\"verbs\":[\"a\"]},{\"verbs\":[\"z\"]}]");
    json_object_put(got);
    for (size_t i = 0; i < KITE_ARRAY_SIZE(roles); i++) json_object_put(roles[i]);
}
