/* Members out of JSON text without a full parse (json/scan.h): the text cut gives what a full
 * parse followed by the same cut gives, and says "cannot tell" (NULL, -1) where the text could
 * hide a member behind an escape or is not well formed. */
#include "helpers.h"

#include <string.h>

#include "json/scan.h"

static const char *const LEASE[] = {"metadata.name", "metadata.namespace", "metadata.resourceVersion", "spec.renewTime",
                                    NULL};

/* kite_json_project(text) == kite_obj_project(parse(text)) */
static void same_cut(const char *text, const char *const *paths, const char *want) {
    json_object *cut = kite_json_project(text, strlen(text), paths);
    cr_assert_not_null(cut, "the scan could not follow %s", text);
    assert_json(cut, want, "text cut of %s", text);
    json_object *whole = J(text), *tree_cut = kite_obj_project(whole, paths);
    assert_json(tree_cut, want, "tree cut of %s", text);
    json_object_put(whole);
    json_object_put(tree_cut);
    json_object_put(cut);
}

Test(json_scan, a_lease_cut_to_what_the_lifecycle_controller_reads) {
    same_cut("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"n1\","
             "\"namespace\":\"kube-node-lease\",\"uid\":\"u\",\"resourceVersion\":\"42\",\"ownerReferences\":[{\"kind\":"
             "\"Node\",\"name\":\"n1\"}],\"managedFields\":[{\"fieldsV1\":{\"f:spec\":{\"f:renewTime\":{}}}}]},\"spec\":"
             "{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,\"renewTime\":\"2026-12-06T16:36:54.138224Z\"}}",
             LEASE,
             "{\"metadata\":{\"name\":\"n1\",\"namespace\":\"kube-node-lease\",\"resourceVersion\":\"42\"},"
             "\"spec\":{\"renewTime\":\"2026-12-06T16:36:54.138224Z\"}}");
}

Test(json_scan, whitespace_nesting_strings_with_braces_and_duplicates) {
    /* a "}" and an escaped quote inside strings do not end anything; the last of two equal
     * members wins, as with the parser; a member the path goes through that is null or absent
     * leaves the path out; numbers, objects and arrays are kept whole */
    same_cut(" { \"metadata\" : { \"name\" : \"a}\\\"b\" , \"labels\":{\"x\":\"{[\"} } ,\n"
             "\"spec\":{\"renewTime\":\"t1\",\"renewTime\":\"t2\",\"n\":-12.5e3,\"list\":[1,{\"a\":[]},\"]\"]},"
             "\"status\":null }",
             (const char *const[]){"metadata.name", "metadata.labels", "spec.renewTime", "spec.n", "spec.list",
                                   "status.phase", "metadata.uid", NULL},
             "{\"metadata\":{\"name\":\"a}\\\"b\",\"labels\":{\"x\":\"{[\"}},\"spec\":{\"renewTime\":\"t2\","
             "\"n\":-12.5e3,\"list\":[1,{\"a\":[]},\"]\"]}}");
    same_cut("{}", LEASE, "{}");
    same_cut("{\"metadata\":null,\"spec\":{\"renewTime\":null}}", LEASE, "{}");
}

Test(json_scan, what_the_scan_cannot_follow_is_left_to_the_parser) {
    const char *hidden[] = {
        "{\"metadata\":{\"n\\u0061me\":\"a\"}}",    /* a member name with an escape could be "name" */
        "{\"metadata\":{\"name\":\"a\"}",           /* cut short */
        "[{\"metadata\":{}}]",                      /* not an object */
        "{\"metadata\":{\"name\":\"a\",}}",         /* a trailing comma */
        "{\"metadata\" {\"name\":\"a\"}}",          /* no colon */
        "{\"metadata\":{\"name\":tru}}",            /* a value that does not parse */
    };
    for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++)
        cr_assert_null(kite_json_project(hidden[i], strlen(hidden[i]), LEASE), "%s", hidden[i]);
    const char *v;
    size_t n;
    cr_assert_eq(kite_json_member("{\"a\":1,\"b\":\"x\"}", 15, "b", &v, &n), 1);
    cr_assert_eq(n, 3);
    cr_assert_eq(memcmp(v, "\"x\"", 3), 0);
    cr_assert_eq(kite_json_member("{\"a\":1}", 7, "b", &v, &n), 0);
    cr_assert_eq(kite_json_member("{\"\\u0062\":1}", 12, "b", &v, &n), -1);
}

Test(json_scan, an_escaped_value_is_unescaped_as_the_parser_does) {
    same_cut("{\"metadata\":{\"name\":\"a\\u00e9\\n\"}}", LEASE, "{\"metadata\":{\"name\":\"a\\u00e9\\n\"}}");
}
