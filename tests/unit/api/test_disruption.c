/* PodDisruptionBudget arithmetic (int and percent, rounded up as upstream) and the eviction
 * verdict. */
#include <criterion/criterion.h>

#include "api/disruption.h"

#include <json-c/json.h>
#include <stdio.h>

static json_object *J(const char *s) { return json_tokener_parse(s); }

Test(disruption, scaled_int_and_percent) {
    static const struct {
        const char *v;
        int32_t total;
        bool up;
        int r, want;
    } cases[] = {
        {"3", 10, true, 0, 3},          {"\"50%\"", 3, true, 0, 2},    {"\"50%\"", 3, false, 0, 1},
        {"\"34%\"", 3, true, 0, 2},     {"\"33%\"", 3, true, 0, 1},    {"\"0%\"", 7, true, 0, 0},
        {"\"100%\"", 7, true, 0, 7},    {"\"1%\"", 1, true, 0, 1},     {"\"10%\"", 0, true, 0, 0},
        {"\"half\"", 4, true, -EINVAL, 0}, {"\"5\"", 4, true, -EINVAL, 0}, {"\"%\"", 4, true, -EINVAL, 0},
        {"\"x%\"", 4, true, -EINVAL, 0}, {"true", 4, true, -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_object *v = J(cases[i].v);
        int32_t got = -99;
        int r = kite_pdb_scaled(v, cases[i].total, cases[i].up, &got);
        cr_assert_eq(r, cases[i].r, "%s", cases[i].v);
        if (r == 0) cr_assert_eq(got, cases[i].want, "%s of %d: %d", cases[i].v, cases[i].total, got);
        json_object_put(v);
    }
}

Test(disruption, expected_desired_allowed) {
    static const struct {
        const char *spec;
        int32_t pods, healthy;
        int32_t expected, desired, allowed;
    } cases[] = {
        {"{\"minAvailable\":2}", 3, 3, 3, 2, 1},
        {"{\"minAvailable\":3}", 3, 3, 3, 3, 0},
        {"{\"minAvailable\":5}", 3, 3, 3, 5, 0},          /* never negative */
        {"{\"minAvailable\":\"50%\"}", 5, 5, 5, 3, 2},    /* ceil(2.5) */
        {"{\"maxUnavailable\":1}", 4, 4, 4, 3, 1},
        {"{\"maxUnavailable\":1}", 4, 2, 4, 3, 0},        /* already short */
        {"{\"maxUnavailable\":\"30%\"}", 4, 4, 4, 2, 2},  /* ceil(1.2) = 2 unavailable */
        {"{\"maxUnavailable\":10}", 3, 3, 3, 0, 3},       /* desired floored at 0 */
        {"{\"minAvailable\":0}", 0, 0, 0, 0, 0},          /* nothing expected: nothing allowed */
        {"{}", 2, 2, 2, 0, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "{\"spec\":%s}", cases[i].spec);
        json_object *pdb = J(buf);
        int32_t e, d;
        cr_assert_eq(kite_pdb_expected(pdb, cases[i].pods, &e, &d), 0, "%s", cases[i].spec);
        cr_assert_eq(e, cases[i].expected, "%s expected %d", cases[i].spec, e);
        cr_assert_eq(d, cases[i].desired, "%s desired %d", cases[i].spec, d);
        cr_assert_eq(kite_pdb_allowed(cases[i].healthy, d, e), cases[i].allowed, "%s", cases[i].spec);
        json_object_put(pdb);
    }
}

Test(disruption, selector) {
    json_object *pod = J("{\"metadata\":{\"namespace\":\"a\",\"labels\":{\"app\":\"web\",\"tier\":\"fe\"}}}");
    static const struct {
        const char *pdb;
        bool match;
    } cases[] = {
        {"{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}}", true},
        {"{\"metadata\":{\"namespace\":\"b\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}}", false},
        {"{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"selector\":{}}}", true},   /* policy/v1: empty = all */
        {"{\"metadata\":{\"namespace\":\"a\"},\"spec\":{}}", false},                 /* null = none */
        {"{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"be\"]}]}}}", false},
        {"{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"x\",\"operator\":\"DoesNotExist\"}]}}}", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_object *pdb = J(cases[i].pdb);
        cr_assert_eq(kite_pdb_selects(pdb, pod), cases[i].match, "%s", cases[i].pdb);
        json_object_put(pdb);
    }
    json_object_put(pod);
}

#define READY_POD "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"labels\":{\"app\":\"w\"}},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"
#define UNREADY_POD "{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"labels\":{\"app\":\"w\"}},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}"
#define PDB(extra_spec, status) "{\"metadata\":{\"name\":\"w\",\"namespace\":\"a\",\"generation\":1},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"w\"}}" extra_spec "},\"status\":" status "}"

Test(disruption, eviction_verdicts) {
    static const struct {
        const char *pod, *pdb;
        int code;
        bool update, pin;
        const char *cause;
    } cases[] = {
        {READY_POD, NULL, 0, false, false, NULL},
        {READY_POD, PDB("", "{}"), 429, false, false, "The disruption budget w is still being processed by the server."},
        {READY_POD, PDB("", "{\"observedGeneration\":1,\"disruptionsAllowed\":0,\"desiredHealthy\":2,\"currentHealthy\":2}"), 429,
         false, false, "The disruption budget w needs 2 healthy pods and has 2 currently"},
        {READY_POD, PDB("", "{\"observedGeneration\":1,\"disruptionsAllowed\":1}"), 0, true, false, NULL},
        {READY_POD, PDB("", "{\"observedGeneration\":1,\"disruptionsAllowed\":-1}"), 403, false, false, NULL},
        {UNREADY_POD, PDB("", "{\"observedGeneration\":1,\"currentHealthy\":2,\"desiredHealthy\":2}"), 0, false, true, NULL},
        {UNREADY_POD, PDB("", "{\"observedGeneration\":1,\"currentHealthy\":1,\"desiredHealthy\":2}"), 429, false, false,
         "The disruption budget w needs 2 healthy pods and has 1 currently"},
        {UNREADY_POD, PDB(",\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\"", "{\"observedGeneration\":1}"), 0, false, true, NULL},
        {"{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"labels\":{\"app\":\"w\"}},\"status\":{\"phase\":\"Pending\"}}",
         PDB("", "{}"), 0, false, true, NULL},
        {"{\"metadata\":{\"name\":\"p\",\"namespace\":\"a\",\"labels\":{\"app\":\"w\"}},\"status\":{\"phase\":\"Succeeded\"}}",
         PDB("", "{}"), 0, false, false, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_object *pod = J(cases[i].pod), *pdb = cases[i].pdb ? J(cases[i].pdb) : NULL;
        struct kite_guard_verdict v;
        kite_pdb_evict(pod, &pdb, pdb ? 1 : 0, INT64_C(1893553445) * 1000000000, false, &v);
        cr_assert_eq(v.code, cases[i].code, "case %zu: %d %s", i, v.code, v.message ? v.message : "");
        cr_assert_eq(v.update != SIZE_MAX, cases[i].update, "case %zu", i);
        cr_assert_eq(v.pin, cases[i].pin, "case %zu", i);
        if (cases[i].cause) cr_assert_str_eq(v.cause, cases[i].cause, "case %zu", i);
        if (cases[i].code == 429) {
            cr_assert_str_eq(v.message, "Cannot evict pod as it would violate the pod's disruption budget.");
            cr_assert_str_eq(v.cause_reason, "DisruptionBudget");
        }
        if (v.update != SIZE_MAX) {
            cr_assert_eq(json_object_get_int64(json_object_object_get(v.status, "disruptionsAllowed")), 0);
            cr_assert_str_eq(json_object_get_string(json_object_object_get(json_object_object_get(v.status, "disruptedPods"), "p")),
                             "2030-01-02T03:04:05Z");
        }
        kite_guard_verdict_release(&v);
        json_object_put(pod);
        json_object_put(pdb);
    }
}
