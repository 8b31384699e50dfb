/* Tolerations and node selector terms, pinned to upstream's core/v1 ToleratesTaint and
 * component-helpers/scheduling/corev1 (nodeaffinity, FindMatchingUntoleratedTaint). */
#include <criterion/criterion.h>

#include "api/scheduling.h"

#include <json-c/json.h>

static json_object *J(const char *s) { return json_tokener_parse(s); }

Test(scheduling, toleration_tolerates_taint) {
    static const struct {
        const char *tol, *taint;
        bool want;
    } cases[] = {
        {"{\"key\":\"a\",\"operator\":\"Equal\",\"value\":\"x\",\"effect\":\"NoSchedule\"}", "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoSchedule\"}", true},
        {"{\"key\":\"a\",\"value\":\"x\"}", "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoExecute\"}", true}, /* "" = Equal, any effect */
        {"{\"key\":\"a\",\"value\":\"y\"}", "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoExecute\"}", false},
        {"{\"key\":\"a\"}", "{\"key\":\"a\",\"effect\":\"NoExecute\"}", true}, /* empty value = empty value */
        {"{\"key\":\"a\",\"operator\":\"Exists\"}", "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoSchedule\"}", true},
        {"{\"key\":\"b\",\"operator\":\"Exists\"}", "{\"key\":\"a\",\"effect\":\"NoSchedule\"}", false},
        {"{\"operator\":\"Exists\"}", "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoSchedule\"}", true},
        {"{\"operator\":\"Exists\",\"effect\":\"NoExecute\"}", "{\"key\":\"a\",\"effect\":\"NoSchedule\"}", false},
        /* an empty key with Equal matches every key whose value is equal (upstream has no
         * empty-key rule; validation keeps such tolerations out of the API) */
        {"{\"operator\":\"Equal\",\"value\":\"x\"}", "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoSchedule\"}", true},
        {"{\"operator\":\"Equal\",\"value\":\"y\"}", "{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoSchedule\"}", false},
        {"{\"key\":\"a\",\"operator\":\"Gt\",\"value\":\"1\"}", "{\"key\":\"a\",\"value\":\"2\",\"effect\":\"NoSchedule\"}", false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *tol = J(cases[i].tol), *taint = J(cases[i].taint);
        cr_expect_eq(kite_toleration_tolerates(tol, taint), cases[i].want, "case %zu: %s vs %s", i, cases[i].tol, cases[i].taint);
        json_object_put(tol);
        json_object_put(taint);
    }
}

static bool no_schedule(json_object *taint) {
    return kite_streq(json_object_get_string(json_object_object_get(taint, "effect")), "NoSchedule");
}

Test(scheduling, find_untolerated_taint) {
    json_object *taints = J("[{\"key\":\"a\",\"effect\":\"NoSchedule\"},{\"key\":\"b\",\"effect\":\"PreferNoSchedule\"},"
                            "{\"key\":\"c\",\"effect\":\"NoSchedule\"}]");
    json_object *tols = J("[{\"key\":\"a\",\"operator\":\"Exists\",\"tolerationSeconds\":5}]");
    json_object *t = kite_find_untolerated_taint(taints, tols, no_schedule);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(t, "key")), "c");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(kite_find_untolerated_taint(taints, tols, NULL), "key")), "b");
    cr_assert_eq(kite_tolerations_find(tols, json_object_array_get_idx(taints, 0)), json_object_array_get_idx(tols, 0));
    cr_assert_null(kite_tolerations_find(NULL, json_object_array_get_idx(taints, 0)));
    cr_assert_null(kite_find_untolerated_taint(NULL, NULL, NULL));
    json_object_put(tols);
    json_object *all = J("[{\"operator\":\"Exists\"}]");
    cr_assert_null(kite_find_untolerated_taint(taints, all, NULL));
    json_object_put(all);
    json_object_put(taints);
}

Test(scheduling, node_selector_requirement) {
    static const struct {
        const char *req, *value; /* value NULL: the label is absent */
        bool want;
    } cases[] = {
        {"{\"operator\":\"In\",\"values\":[\"a\",\"b\"]}", "b", true},
        {"{\"operator\":\"In\",\"values\":[\"a\"]}", NULL, false},
        {"{\"operator\":\"In\",\"values\":[]}", "a", false},
        {"{\"operator\":\"NotIn\",\"values\":[\"a\"]}", "b", true},
        {"{\"operator\":\"NotIn\",\"values\":[\"a\"]}", NULL, true},
        {"{\"operator\":\"NotIn\",\"values\":[]}", "b", false}, /* NotIn needs values */
        {"{\"operator\":\"Exists\"}", "", true},
        {"{\"operator\":\"Exists\"}", NULL, false},
        {"{\"operator\":\"Exists\",\"values\":[\"a\"]}", "a", false}, /* Exists takes no values */
        {"{\"operator\":\"DoesNotExist\"}", NULL, true},
        {"{\"operator\":\"DoesNotExist\"}", "a", false},
        {"{\"operator\":\"Gt\",\"values\":[\"12\"]}", "13", true},
        {"{\"operator\":\"Gt\",\"values\":[\"12\"]}", "12", false},
        {"{\"operator\":\"Lt\",\"values\":[\"12\"]}", "-3", true},
        {"{\"operator\":\"Gt\",\"values\":[\"+1\"]}", "+2", true}, /* ParseInt takes a sign */
        {"{\"operator\":\"Gt\",\"values\":[\"12abc\"]}", "100", false}, /* not a number */
        {"{\"operator\":\"Gt\",\"values\":[\"1\"]}", "12abc", false},
        {"{\"operator\":\"Gt\",\"values\":[\"1\"]}", " 5", false},
        {"{\"operator\":\"Gt\",\"values\":[\"1\"]}", "", false},
        {"{\"operator\":\"Gt\",\"values\":[\"1\"]}", NULL, false},
        {"{\"operator\":\"Lt\",\"values\":[\"99999999999999999999\"]}", "1", false}, /* out of range */
        {"{\"operator\":\"Gt\",\"values\":[\"1\",\"2\"]}", "5", false},
        {"{\"operator\":\"Sideways\",\"values\":[\"a\"]}", "a", false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *req = J(cases[i].req);
        cr_expect_eq(kite_node_selector_requirement_matches(req, cases[i].value), cases[i].want, "case %zu: %s vs %s", i,
                     cases[i].req, cases[i].value ? cases[i].value : "(absent)");
        json_object_put(req);
    }
}

Test(scheduling, node_selector_terms) {
    json_object *node = J("{\"metadata\":{\"name\":\"n7\",\"labels\":{\"zone\":\"a\",\"cores\":\"8\"}}}");
    static const struct {
        const char *terms;
        bool want, name_only; /* name_only: with the node's name alone (labels unknown) */
    } cases[] = {
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]},"
         "{\"key\":\"cores\",\"operator\":\"Gt\",\"values\":[\"4\"]}]}]", true, true},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]},"
         "{\"key\":\"cores\",\"operator\":\"Lt\",\"values\":[\"4\"]}]}]", false, true},
        {"[{\"matchExpressions\":[{\"key\":\"cores\",\"operator\":\"Gt\",\"values\":[\"12abc\"]}]}]", false, true},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"z\"]}]},"
         "{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n7\"]}]}]", true, true},
        {"[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"NotIn\",\"values\":[\"n7\"]}]}]", false, false},
        {"[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"NotIn\",\"values\":[\"n8\"]}]}]", true, true},
        {"[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n7\",\"n8\"]}]}]", false, false},
        {"[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"Exists\"}]}]", false, false},
        {"[{\"matchFields\":[{\"key\":\"metadata.uid\",\"operator\":\"NotIn\",\"values\":[\"x\"]}]}]", false, false},
        {"[{}]", false, false},
        {"[]", false, false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *terms = J(cases[i].terms);
        cr_expect_eq(kite_node_selector_terms_match(terms, node, "n7"), cases[i].want, "case %zu: %s", i, cases[i].terms);
        cr_expect_eq(kite_node_selector_terms_match(terms, NULL, "n7"), cases[i].name_only, "name only, case %zu", i);
        json_object_put(terms);
    }
    json_object_put(node);
}

/* TolerationsTolerateTaint on a value-less taint, as the scheduler's NodeUnschedulable filter
 * builds it ({Key: TaintNodeUnschedulable, Effect: NoSchedule}). */
Test(scheduling, tolerations_tolerate_key_and_effect) {
    static const struct {
        const char *tols;
        bool want;
    } cases[] = {
        {"[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]", true},
        {"[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\"}]", true},
        {"[{\"operator\":\"Exists\"}]", true},
        {"[{\"key\":\"node.kubernetes.io/unschedulable\"}]", true}, /* Equal: "" == "" */
        {"[{\"key\":\"node.kubernetes.io/unschedulable\",\"value\":\"x\"}]", false},
        {"[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"}]", false},
        {"[{\"key\":\"other\",\"operator\":\"Exists\"}]", false},
        {"[]", false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *tols = J(cases[i].tols);
        cr_expect_eq(kite_tolerations_tolerate(tols, "node.kubernetes.io/unschedulable", "NoSchedule"), cases[i].want,
                     "case %zu: %s", i, cases[i].tols);
        json_object_put(tols);
    }
    cr_assert_not(kite_tolerations_tolerate(NULL, "a", "NoSchedule"));
}

/* DefaultTolerationSeconds: (Key == key || Key == "") && (Effect == NoExecute || Effect == "");
 * operator and value are not looked at (upstream's admission plugin). */
Test(scheduling, tolerations_cover_default_toleration_seconds) {
    static const struct {
        const char *tols;
        bool want;
    } cases[] = {
        {"[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"}]", true},
        {"[{\"key\":\"node.kubernetes.io/not-ready\"}]", true},
        {"[{\"operator\":\"Exists\"}]", true},
        {"[{\"effect\":\"NoExecute\"}]", true},
        /* a value that ToleratesTaint would refuse still counts here */
        {"[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Equal\",\"value\":\"x\",\"effect\":\"NoExecute\"}]", true},
        {"[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]", false},
        {"[{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\"}]", false},
        {"[]", false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *tols = J(cases[i].tols);
        cr_expect_eq(kite_tolerations_cover(tols, "node.kubernetes.io/not-ready", "NoExecute"), cases[i].want, "case %zu: %s", i,
                     cases[i].tols);
        json_object_put(tols);
    }
    cr_assert_not(kite_tolerations_cover(NULL, "a", "NoExecute"));
}

/* GetRequiredNodeAffinity(pod).Match(node): spec.nodeSelector ANDed with the required terms; a
 * required affinity without terms matches no node (the DaemonSet copy let every node pass). */
Test(scheduling, pod_node_affinity_matches) {
    json_object *node = J("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"disk\":\"ssd\",\"cores\":\"16\",\"empty\":\"\"}}}");
    static const struct {
        const char *pod;
        bool want, want_name_only;
    } cases[] = {
        {"{}", true, true},
        {"{\"spec\":{}}", true, true},
        {"{\"spec\":{\"nodeSelector\":{\"disk\":\"ssd\"}}}", true, true},
        {"{\"spec\":{\"nodeSelector\":{\"disk\":\"hdd\"}}}", false, true},
        {"{\"spec\":{\"nodeSelector\":{\"missing\":\"\"}}}", false, true}, /* an absent label is not "" */
        {"{\"spec\":{\"nodeSelector\":{\"empty\":\"\"}}}", true, true},
        {"{\"spec\":{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{}}}}}", false, false},
        {"{\"spec\":{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
         "{\"matchExpressions\":[{\"key\":\"cores\",\"operator\":\"Gt\",\"values\":[\"8\"]}]}]}}}}}", true, true},
        {"{\"spec\":{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
         "{\"matchExpressions\":[{\"key\":\"cores\",\"operator\":\"Gt\",\"values\":[\"12abc\"]}]}]}}}}}", false, true},
        {"{\"spec\":{\"nodeSelector\":{\"disk\":\"ssd\"},\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
         "{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n2\"]}]}]}}}}}",
         false, false},
        {"{\"spec\":{\"nodeSelector\":{\"disk\":\"hdd\"},\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
         "{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n1\"]}]}]}}}}}",
         false, true},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *pod = J(cases[i].pod);
        cr_expect_eq(kite_pod_node_affinity_matches(pod, node, "n1"), cases[i].want, "case %zu: %s", i, cases[i].pod);
        cr_expect_eq(kite_pod_node_affinity_matches(pod, NULL, "n1"), cases[i].want_name_only, "case %zu by name: %s", i,
                     cases[i].pod);
        json_object_put(pod);
    }
    json_object_put(node);
}
