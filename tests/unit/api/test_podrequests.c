/* PodRequests, pinned to upstream's component-helpers/resource: containers summed, sidecars
 * (restartPolicy Always init containers) beside the containers and every later init container,
 * the larger of that and the init-time peak, plus overhead. */
#include <criterion/criterion.h>

#include "api/podrequests.h"

#include <json-c/json.h>
#include <stdio.h>

#define MI (INT64_C(1024) * 1024 * 1000) /* one Mi in milli-bytes */

static void requests_of(const char *spec, bool nonzero, struct kite_pod_requests *r) {
    char buf[2048];
    snprintf(buf, sizeof(buf), "{\"spec\":%s}", spec);
    json_object *pod = json_tokener_parse(buf);
    cr_assert_not_null(pod, "%s", buf);
    kite_pod_requests(pod, nonzero, r);
    json_object_put(pod);
}

#define C(cpu, mem) "{\"resources\":{\"requests\":{\"cpu\":\"" cpu "\",\"memory\":\"" mem "\"}}}"
#define SIDECAR(cpu, mem) "{\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{\"cpu\":\"" cpu "\",\"memory\":\"" mem "\"}}}"

Test(podrequests, upstream_cases) {
    static const struct {
        const char *spec;
        int64_t cpu_m, mem_m;
    } cases[] = {
        {"{\"containers\":[" C("1", "1Mi") "," C("500m", "2Mi") "]}", 1500, 3 * MI},
        /* a plain init container: the max of it and the containers */
        {"{\"containers\":[" C("1", "1Mi") "],\"initContainers\":[" C("2", "1Mi") "]}", 2000, 1 * MI},
        /* a sidecar adds to the containers */
        {"{\"containers\":[" C("1", "1Mi") "],\"initContainers\":[" SIDECAR("500m", "4Mi") "]}", 1500, 5 * MI},
        /* an init container after a sidecar runs beside it: 500m + 2 = 2500m > 1500m */
        {"{\"containers\":[" C("1", "1Mi") "],\"initContainers\":[" SIDECAR("500m", "1Mi") "," C("2", "1Mi") "]}", 2500, 2 * MI},
        /* one before the sidecar does not */
        {"{\"containers\":[" C("1", "1Mi") "],\"initContainers\":[" C("1200m", "1Mi") "," SIDECAR("500m", "1Mi") "]}", 1500, 2 * MI},
        /* overhead on top */
        {"{\"containers\":[" C("1", "1Mi") "],\"initContainers\":[" SIDECAR("500m", "1Mi") "],\"overhead\":{\"cpu\":\"600m\",\"memory\":\"10Mi\"}}",
         2100, 12 * MI},
        /* limits alone count nothing: the API has defaulted requests from them */
        {"{\"containers\":[{\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]}", 0, 0},
        {"{}", 0, 0},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct kite_pod_requests r;
        requests_of(cases[i].spec, false, &r);
        cr_expect_eq(r.cpu_m, cases[i].cpu_m, "case %zu cpu %lld", i, (long long)r.cpu_m);
        cr_expect_eq(r.mem_m, cases[i].mem_m, "case %zu memory %lld", i, (long long)r.mem_m);
    }
}

Test(podrequests, nonzero_defaults) {
    struct kite_pod_requests r;
    requests_of("{\"containers\":[{},{\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}", true, &r);
    cr_assert_eq(r.cpu_m, 1100);
    cr_assert_eq(r.mem_m, 2 * 200 * MI);
    requests_of("{\"containers\":[{}]}", false, &r);
    cr_assert_eq(r.cpu_m, 0);
    cr_assert_eq(r.mem_m, 0);
}
