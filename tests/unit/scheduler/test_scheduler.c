/* The scheduler: each filter's reasons, node affinity operators, requests (init containers by
 * the max rule), scores, upstream's aggregated FitError message, and the core on a fake
 * clock — binding with the Scheduled event, FailedScheduling with PodScheduled=False, the
 * back-off (1 s doubling to 10 s) and retries driven by node and pod changes. */
#include "scheduler/scheduler.h"
#include "api/registry.h"
#include "api/scheduling.h"
#include "base/log.h"
#include "unit/controllers/fakeapi.h"

#include <criterion/criterion.h>
#include <stdio.h>

#include "framework/ctlutil.h"

#define S KITE_NS_PER_SEC
#define NS "default"

static json_object *node_json(const char *name, const char *extra_spec, const char *labels, const char *alloc,
                              const char *ready) {
    return fakeapi_json("{\"metadata\":{\"name\":\"%s\",\"labels\":%s},\"spec\":{%s},"
                        "\"status\":{\"allocatable\":%s,\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                        name, labels, extra_spec, alloc, ready);
}

#define ALLOC "{\"cpu\":\"2\",\"memory\":\"4Gi\",\"pods\":\"110\"}"

static json_object *pod_json(const char *name, const char *spec_extra, const char *cpu) {
    return fakeapi_json("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"" NS "\",\"uid\":\"u-%s\"},"
                        "\"spec\":{%s%s\"containers\":[{\"name\":\"c\",\"image\":\"busybox\","
                        "\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}]},\"status\":{\"phase\":\"Pending\"}}",
                        name, name, spec_extra, *spec_extra ? "," : "", cpu);
}

static void verdict_of(json_object *pod, json_object *node, struct kite_sched_verdict *v) {
    struct kite_sched_req req;
    kite_sched_pod_requests(pod, false, &req);
    struct kite_sched_nodeinfo ni;
    kite_sched_nodeinfo_init(&ni, node);
    kite_sched_filter(pod, &req, &ni, v);
}

Test(scheduler, filters) {
    static const struct {
        const char *node_spec, *labels, *alloc, *ready, *pod_spec, *cpu;
        const char *filter, *reason;
        bool unresolvable;
    } cases[] = {
        {"", "{}", ALLOC, "True", "", "100m", NULL, NULL, false},
        {"\"unschedulable\":true", "{}", ALLOC, "True", "", "100m", "NodeUnschedulable", "node(s) were unschedulable", true},
        /* tolerating the unschedulable taint passes a cordoned node */
        {"\"unschedulable\":true", "{}", ALLOC, "True",
         "\"tolerations\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]",
         "100m", NULL, NULL, false},
        {"\"taints\":[{\"key\":\"node.kubernetes.io/not-ready\",\"effect\":\"NoSchedule\"}]", "{}", ALLOC, "False", "",
         "100m", "TaintToleration", "node(s) had untolerated taint {node.kubernetes.io/not-ready: }", true},
        {"\"taints\":[{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoExecute\"}]", "{}", ALLOC, "True", "", "100m",
         "TaintToleration", "node(s) had untolerated taint {dedicated: gpu}", true},
        /* PreferNoSchedule is no filter */
        {"\"taints\":[{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"PreferNoSchedule\"}]", "{}", ALLOC, "True", "",
         "100m", NULL, NULL, false},
        {"\"taints\":[{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoSchedule\"}]", "{}", ALLOC, "True",
         "\"tolerations\":[{\"key\":\"dedicated\",\"value\":\"gpu\"}]", "100m", NULL, NULL, false},
        {"\"taints\":[{\"key\":\"dedicated\",\"value\":\"gpu\",\"effect\":\"NoSchedule\"}]", "{}", ALLOC, "True",
         "\"tolerations\":[{\"key\":\"dedicated\",\"value\":\"cpu\"}]", "100m", "TaintToleration",
         "node(s) had untolerated taint {dedicated: gpu}", true},
        {"", "{}", ALLOC, "False", "", "100m", "NodeReady", "node(s) were not ready", true},
        {"", "{}", ALLOC, "Unknown", "", "100m", "NodeReady", "node(s) were not ready", true},
        {"", "{}", ALLOC, "Unknown",
         "\"tolerations\":[{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\"}]", "100m", NULL, NULL, false},
        {"", "{\"disk\":\"ssd\"}", ALLOC, "True", "\"nodeSelector\":{\"disk\":\"ssd\"}", "100m", NULL, NULL, false},
        {"", "{\"disk\":\"hdd\"}", ALLOC, "True", "\"nodeSelector\":{\"disk\":\"ssd\"}", "100m", "NodeAffinity",
         "node(s) didn't match Pod's node affinity/selector", true},
        {"", "{}", ALLOC, "True", "", "3", "NodeResourcesFit", "Insufficient cpu", false},
        {"", "{}", "{\"cpu\":\"2\",\"memory\":\"4Gi\",\"pods\":\"0\"}", "True", "", "100m", "NodeResourcesFit",
         "Too many pods", false},
        /* the first failing filter speaks: cordoned and too small says unschedulable */
        {"\"unschedulable\":true", "{}", ALLOC, "True", "", "3", "NodeUnschedulable", "node(s) were unschedulable", true},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *node = node_json("n", cases[i].node_spec, cases[i].labels, cases[i].alloc, cases[i].ready);
        json_object *pod = pod_json("p", cases[i].pod_spec, cases[i].cpu);
        struct kite_sched_verdict v;
        verdict_of(pod, node, &v);
        if (!cases[i].filter) {
            cr_expect_null(v.filter, "case %zu: rejected by %s (%s)", i, v.filter, v.n ? v.reasons[0] : "");
        } else {
            cr_expect_str_eq(v.filter ? v.filter : "(none)", cases[i].filter, "case %zu", i);
            cr_expect_eq(v.n, 1, "case %zu: %zu reasons", i, v.n);
            if (v.n) cr_expect_str_eq(v.reasons[0], cases[i].reason, "case %zu", i);
            cr_expect_eq(v.unresolvable, cases[i].unresolvable, "case %zu", i);
        }
        kite_sched_verdict_release(&v);
        json_object_put(node);
        json_object_put(pod);
    }
}

Test(scheduler, fit_gives_every_short_resource) {
    json_object *node = node_json("n", "", "{}", "{\"cpu\":\"1\",\"memory\":\"1Gi\",\"pods\":\"1\"}", "True");
    json_object *pod = fakeapi_json("{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                                    "\"resources\":{\"requests\":{\"cpu\":\"1500m\",\"memory\":\"2Gi\"}}}]}}");
    struct kite_sched_req req;
    kite_sched_pod_requests(pod, false, &req);
    struct kite_sched_nodeinfo ni;
    kite_sched_nodeinfo_init(&ni, node);
    ni.npods = 1;
    struct kite_sched_verdict v;
    kite_sched_filter(pod, &req, &ni, &v);
    cr_assert_eq(v.n, 3);
    cr_expect_str_eq(v.reasons[0], "Too many pods");
    cr_expect_str_eq(v.reasons[1], "Insufficient cpu");
    cr_expect_str_eq(v.reasons[2], "Insufficient memory");
    cr_expect_not(v.unresolvable);
    kite_sched_verdict_release(&v);
    /* a pod requesting nothing fits a full node's cpu (only the pod count matters) */
    ni.npods = 0;
    ni.requested.cpu = 5000;
    struct kite_sched_req zero = {0};
    kite_sched_filter(pod, &zero, &ni, &v);
    cr_expect_null(v.filter);
    json_object_put(node);
    json_object_put(pod);
}

/* A request past int64 milli-units ("10Pi") is huge, never "no request" (upstream keeps inf.Dec);
 * sums of such requests saturate instead of wrapping. */
Test(scheduler, fit_huge_requests_are_insufficient) {
    json_object *node = node_json("n", "", "{}", "{\"cpu\":\"8\",\"memory\":\"23Gi\",\"pods\":\"110\"}", "True");
    const char *mems[] = {"1Pi", "10Pi", "1e30"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(mems); i++) {
        json_object *pod = fakeapi_json("{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":["
                                        "{\"name\":\"a\",\"resources\":{\"requests\":{\"memory\":\"%s\",\"cpu\":\"1e20\"}}},"
                                        "{\"name\":\"b\",\"resources\":{\"requests\":{\"memory\":\"%s\",\"cpu\":\"1e20\"}}}]}}",
                                        mems[i], mems[i]);
        struct kite_sched_req req;
        kite_sched_pod_requests(pod, false, &req);
        cr_expect_gt(req.mem, INT64_C(23) << 30, "%s", mems[i]);
        cr_expect_gt(req.cpu, 8000);
        struct kite_sched_verdict v;
        verdict_of(pod, node, &v);
        cr_assert_eq(v.n, 2, "%s", mems[i]);
        cr_expect_str_eq(v.reasons[0], "Insufficient cpu");
        cr_expect_str_eq(v.reasons[1], "Insufficient memory");
        kite_sched_verdict_release(&v);
        struct kite_sched_nodeinfo ni;
        kite_sched_nodeinfo_init(&ni, node);
        cr_expect_geq(kite_sched_score_least_allocated(&req, &ni), 0);
        json_object_put(pod);
    }
    json_object_put(node);
}

Test(scheduler, node_affinity_operators) {
    json_object *node = fakeapi_json("{\"metadata\":{\"name\":\"n7\",\"labels\":{\"zone\":\"a\",\"cores\":\"8\"}}}");
    static const struct {
        const char *terms;
        bool match;
    } cases[] = {
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}]}]", true},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"b\"]}]}]", false},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"b\"]}]}]", true},
        {"[{\"matchExpressions\":[{\"key\":\"rack\",\"operator\":\"NotIn\",\"values\":[\"b\"]}]}]", true},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"Exists\"}]}]", true},
        {"[{\"matchExpressions\":[{\"key\":\"rack\",\"operator\":\"Exists\"}]}]", false},
        {"[{\"matchExpressions\":[{\"key\":\"rack\",\"operator\":\"DoesNotExist\"}]}]", true},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"DoesNotExist\"}]}]", false},
        {"[{\"matchExpressions\":[{\"key\":\"cores\",\"operator\":\"Gt\",\"values\":[\"4\"]}]}]", true},
        {"[{\"matchExpressions\":[{\"key\":\"cores\",\"operator\":\"Gt\",\"values\":[\"8\"]}]}]", false},
        {"[{\"matchExpressions\":[{\"key\":\"cores\",\"operator\":\"Lt\",\"values\":[\"16\"]}]}]", true},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"Lt\",\"values\":[\"16\"]}]}]", false}, /* not a number */
        {"[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n7\"]}]}]", true},
        {"[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"NotIn\",\"values\":[\"n7\"]}]}]", false},
        /* expressions ANDed, terms ORed, an empty term selects nothing */
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\"]},"
         "{\"key\":\"cores\",\"operator\":\"Lt\",\"values\":[\"2\"]}]}]", false},
        {"[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"z\"]}]},"
         "{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n7\"]}]}]", true},
        {"[{}]", false},
        {"[]", false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *terms = json_tokener_parse(cases[i].terms);
        cr_expect_eq(kite_node_selector_terms_match(terms, node, kite_meta_str(node, "name")), cases[i].match, "case %zu: %s", i, cases[i].terms);
        json_object_put(terms);
    }
    /* through the filter: nodeSelector and the required affinity must both match */
    json_object *pod = fakeapi_json("{\"spec\":{\"nodeSelector\":{\"zone\":\"a\"},\"affinity\":{\"nodeAffinity\":{"
                                    "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":"
                                    "[{\"key\":\"cores\",\"operator\":\"Gt\",\"values\":[\"10\"]}]}]}}},\"containers\":[]}}");
    json_object *full = node_json("n7", "", "{\"zone\":\"a\",\"cores\":\"8\"}", ALLOC, "True");
    struct kite_sched_verdict v;
    verdict_of(pod, full, &v);
    cr_expect_str_eq(v.filter, "NodeAffinity");
    kite_sched_verdict_release(&v);
    json_object_put(pod);
    json_object_put(full);
    json_object_put(node);
}

Test(scheduler, requests_init_max_rule) {
    /* upstream's example: containers 2+1 cpu, 1G+1G memory; init containers 2 cpu/1G, 2 cpu/3G
     * -> cpu 3, memory 3G */
    json_object *pod = fakeapi_json(
        "{\"spec\":{\"initContainers\":[{\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"1G\"}}},"
        "{\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"3G\"}}}],"
        "\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"1G\"}}},"
        "{\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1G\"}}}]}}");
    struct kite_sched_req r;
    kite_sched_pod_requests(pod, false, &r);
    cr_expect_eq(r.cpu, 3000);
    cr_expect_eq(r.mem, INT64_C(3000000000));
    json_object_put(pod);
    /* a sidecar (restartPolicy Always) adds to everything after it; overhead adds */
    pod = fakeapi_json("{\"spec\":{\"initContainers\":[{\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}},"
                       "{\"resources\":{\"requests\":{\"cpu\":\"4\"}}}],"
                       "\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],\"overhead\":{\"cpu\":\"100m\"}}}");
    kite_sched_pod_requests(pod, false, &r);
    cr_expect_eq(r.cpu, 4500 + 100); /* max(1 + 0.5, 4 + 0.5) + overhead */
    cr_expect_eq(r.mem, 0);
    kite_sched_pod_requests(pod, true, &r);
    cr_expect_eq(r.mem, INT64_C(200) * 1024 * 1024 * 2); /* non-zero: 200Mi per container, sidecar + app */
    json_object_put(pod);
}

Test(scheduler, scores) {
    json_object *node = node_json("n", "", "{}", "{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\"}", "True");
    struct kite_sched_nodeinfo ni;
    kite_sched_nodeinfo_init(&ni, node);
    struct kite_sched_req pod = {1000, INT64_C(2) * 1024 * 1024 * 1024};
    /* cpu (4-1)/4 -> 75, memory (8-2)/8 -> 75 */
    cr_expect_eq(kite_sched_score_least_allocated(&pod, &ni), 75);
    ni.nonzero.cpu = 3000; /* cpu now full: 0; memory 75 -> 37 */
    cr_expect_eq(kite_sched_score_least_allocated(&pod, &ni), 37);
    ni.nonzero.cpu = 3500; /* over: 0 */
    cr_expect_eq(kite_sched_score_least_allocated(&pod, &ni), 37);
    json_object_put(node);
    /* ImageLocality: below 23 MiB nothing, 1000 MiB per container the most */
    cr_expect_eq(kite_sched_score_image_locality(0, 1), 0);
    cr_expect_eq(kite_sched_score_image_locality(INT64_C(23) << 20, 1), 0);
    cr_expect_eq(kite_sched_score_image_locality(INT64_C(1000) << 20, 1), 100);
    cr_expect_eq(kite_sched_score_image_locality(INT64_C(5000) << 20, 1), 100);
    cr_expect_eq(kite_sched_score_image_locality(INT64_C(1000) << 20, 2), 49); /* 100 * 977 / 1977 */
    _cleanup_free_ char *a = kite_sched_normalized_image("busybox"), *b = kite_sched_normalized_image("reg:5000/x"),
                        *c = kite_sched_normalized_image("x:1.2"), *d = kite_sched_normalized_image("x@sha256:ab");
    cr_expect_str_eq(a, "busybox:latest");
    cr_expect_str_eq(b, "reg:5000/x:latest");
    cr_expect_str_eq(c, "x:1.2");
    cr_expect_str_eq(d, "x@sha256:ab");
}

static void verdict_set(struct kite_sched_verdict *v, const char *r1, const char *r2) {
    *v = (struct kite_sched_verdict){.filter = "x", .n = r2 ? 2 : 1};
    v->reasons[0] = kite_strdup(r1);
    if (r2) v->reasons[1] = kite_strdup(r2);
}

Test(scheduler, fit_message) {
    struct kite_sched_verdict v[3], p[3];
    verdict_set(&v[0], "node(s) were unschedulable", NULL);
    verdict_set(&v[1], "node(s) had untolerated taint {node.kubernetes.io/not-ready: }", NULL);
    verdict_set(&v[2], "node(s) had untolerated taint {node.kubernetes.io/not-ready: }", NULL);
    for (int i = 0; i < 3; i++) verdict_set(&p[i], "Preemption is not helpful for scheduling", NULL);
    _cleanup_free_ char *post = kite_sched_fit_message(3, p, 3, NULL);
    _cleanup_free_ char *m = kite_sched_fit_message(3, v, 3, post);
    cr_expect_str_eq(m, "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint "
                        "{node.kubernetes.io/not-ready: }. preemption: 0/3 nodes are available: 3 Preemption is not "
                        "helpful for scheduling.");
    for (int i = 0; i < 3; i++) kite_sched_verdict_release(&v[i]), kite_sched_verdict_release(&p[i]);
    /* the histogram is sorted as strings, as upstream's: "10 ..." before "2 ..." */
    struct kite_sched_verdict w[12];
    for (int i = 0; i < 12; i++) verdict_set(&w[i], i < 10 ? "b" : "a", i == 0 ? "Insufficient memory" : NULL);
    _cleanup_free_ char *m2 = kite_sched_fit_message(12, w, 12, NULL);
    cr_expect_str_eq(m2, "0/12 nodes are available: 1 Insufficient memory, 10 b, 2 a.");
    for (int i = 0; i < 12; i++) kite_sched_verdict_release(&w[i]);
}

/* ---- the core on a fake clock ---- */

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_sched *s;
};

static void env_init(struct env *e) {
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&e->clock, INT64_C(1893553445) * S);
    fakeapi_init(&e->api);
    struct kite_sched_options o = {.client = e->api.client, .clock = &e->clock.clock, .seed = 42};
    e->s = kite_sched_new(&o);
}

static void env_release(struct env *e) {
    kite_sched_free(e->s);
    fakeapi_release(&e->api);
}

static void run_for(struct env *e, int64_t ns) {
    int64_t end = kite_now_mono(&e->clock.clock) + ns;
    for (;;) {
        int64_t next = kite_sched_step(e->s);
        if (kite_sched_pending(e->s)) continue;
        int64_t now = kite_now_mono(&e->clock.clock);
        if (now >= end) break;
        kite_fake_clock_advance(&e->clock, KITE_MIN(KITE_MAX(next, 1), end - now));
    }
}

static void add_node(struct env *e, json_object *node) {
    kite_sched_node_upsert(e->s, node);
    json_object_put(node);
}

static void add_pod(struct env *e, json_object *pod) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/" NS "/pods/%s", kite_meta_str(pod, "name"));
    if (!fakeapi_get(&e->api, path)) fakeapi_put(&e->api, path, json_object_get(pod));
    kite_sched_pod_upsert(e->s, pod);
    json_object_put(pod);
}

/* The node a pod was bound to (the Binding the fake API stored), or NULL. */
static const char *bound_to(struct env *e, const char *pod) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/" NS "/pods/%s/binding/%s", pod, pod);
    return kite_obj_str(kite_obj_get(fakeapi_get(&e->api, path), "target"), "name");
}

/* What the informer would then deliver: the pod with spec.nodeName. */
static void confirm(struct env *e, const char *name, const char *cpu) {
    json_object *pod = pod_json(name, "", cpu);
    kite_obj_set(kite_obj_get(pod, "spec"), "nodeName", json_object_new_string(bound_to(e, name)));
    kite_obj_set(kite_obj_get(pod, "status"), "phase", json_object_new_string("Running"));
    kite_sched_pod_upsert(e->s, pod);
    json_object_put(pod);
}

static json_object *scheduled_cond(struct env *e, const char *pod) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/" NS "/pods/%s", pod);
    json_object *conds = kite_obj_get(kite_obj_get(fakeapi_get(&e->api, path), "status"), "conditions");
    for (size_t i = 0; conds && i < json_object_array_length(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), "PodScheduled"))
            return json_object_array_get_idx(conds, i);
    return NULL;
}

Test(scheduler, binds_and_counts_assumed_pods) {
    struct env e;
    env_init(&e);
    add_node(&e, node_json("n1", "", "{}", "{\"cpu\":\"1\",\"memory\":\"4Gi\",\"pods\":\"110\"}", "True"));
    add_pod(&e, pod_json("a", "", "600m"));
    add_pod(&e, pod_json("b", "", "600m"));
    run_for(&e, 0);
    /* a got the node; b, seeing a's requests there before any watch event, did not */
    cr_assert_str_eq(bound_to(&e, "a") ? bound_to(&e, "a") : "", "n1");
    cr_expect_null(bound_to(&e, "b"));
    cr_expect_eq(fakeapi_events(&e.api, "Scheduled", "a"), 1);
    cr_expect_eq(fakeapi_events(&e.api, "FailedScheduling", "b"), 1);
    json_object *c = scheduled_cond(&e, "b");
    cr_assert_not_null(c);
    cr_expect_str_eq(kite_obj_str(c, "status"), "False");
    cr_expect_str_eq(kite_obj_str(c, "reason"), "Unschedulable");
    cr_expect_str_eq(kite_obj_str(c, "message"), "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes "
                                                 "are available: 1 No preemption victims found for incoming pod.");
    cr_expect_str_eq(kite_sched_pod_state(e.s, NS, "a"), "assumed");
    cr_expect_str_eq(kite_sched_pod_state(e.s, NS, "b"), "unschedulable");
    confirm(&e, "a", "600m");
    cr_expect_str_eq(kite_sched_pod_state(e.s, NS, "a"), "bound");
    /* nothing changes: b waits (no retry within the unschedulable timeout) */
    run_for(&e, 60 * S);
    cr_expect_eq(fakeapi_events(&e.api, "FailedScheduling", "b"), 1);
    /* a goes: b is retried at once (its 1 s back-off is over) and bound */
    json_object *a = pod_json("a", "", "600m");
    kite_sched_pod_delete(e.s, a);
    json_object_put(a);
    cr_expect(kite_sched_pending(e.s));
    run_for(&e, 0);
    cr_expect_str_eq(bound_to(&e, "b") ? bound_to(&e, "b") : "", "n1");
    env_release(&e);
}

Test(scheduler, backoff_doubles_to_ten_seconds) {
    struct env e;
    env_init(&e);
    add_node(&e, node_json("n1", "\"unschedulable\":true", "{}", ALLOC, "True"));
    add_pod(&e, pod_json("p", "", "100m"));
    run_for(&e, 0);
    cr_assert_eq(fakeapi_events(&e.api, "FailedScheduling", "p"), 1);
    /* node changes keep coming (a label flips): each attempt waits out its back-off */
    static const int64_t expect[] = {1, 2, 4, 8, 10, 10};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(expect); i++) {
        int64_t t0 = kite_now_mono(&e.clock.clock);
        size_t before = fakeapi_events(&e.api, "FailedScheduling", "p");
        for (int step = 0; fakeapi_events(&e.api, "FailedScheduling", "p") == before && step < 200; step++) {
            _cleanup_free_ char *labels = kite_asprintf("{\"flip\":\"%d\"}", step);
            add_node(&e, node_json("n1", "\"unschedulable\":true", labels, ALLOC, "True"));
            run_for(&e, S / 10);
            /* the informer brings the pod back with its condition */
            kite_sched_pod_upsert(e.s, fakeapi_get(&e.api, "/api/v1/namespaces/" NS "/pods/p"));
        }
        int64_t waited = kite_now_mono(&e.clock.clock) - t0;
        cr_expect(waited >= expect[i] * S && waited <= expect[i] * S + S / 5, "attempt %zu after %lld ms, want %lld s", i + 2,
                  (long long)(waited / KITE_NS_PER_MS), (long long)expect[i]);
    }
    /* the same message is not written again */
    cr_expect_eq(fakeapi_count(&e.api, "PATCH", "/pods/p/status"), 1);
    env_release(&e);
}

Test(scheduler, uncordon_retries_and_other_schedulers_are_left_alone) {
    struct env e;
    env_init(&e);
    add_node(&e, node_json("n1", "\"unschedulable\":true", "{}", ALLOC, "True"));
    add_pod(&e, pod_json("p", "", "100m"));
    add_pod(&e, pod_json("q", "\"schedulerName\":\"other\"", "100m"));
    run_for(&e, 0);
    cr_expect_null(bound_to(&e, "p"));
    cr_expect_null(kite_sched_pod_state(e.s, NS, "q"));
    run_for(&e, 5 * S);
    add_node(&e, node_json("n1", "", "{}", ALLOC, "True")); /* uncordoned */
    cr_expect(kite_sched_pending(e.s));
    run_for(&e, 0);
    cr_expect_str_eq(bound_to(&e, "p") ? bound_to(&e, "p") : "", "n1");
    cr_expect_null(bound_to(&e, "q"));
    cr_expect_eq(fakeapi_count(&e.api, "POST", "/pods/q/"), 0);
    env_release(&e);
}

Test(scheduler, no_nodes_and_aggregated_reasons) {
    struct env e;
    env_init(&e);
    add_pod(&e, pod_json("p", "", "100m"));
    run_for(&e, 0);
    json_object *c = scheduled_cond(&e, "p");
    cr_assert_not_null(c);
    cr_expect_str_eq(kite_obj_str(c, "message"), "no nodes available to schedule pods");
    add_node(&e, node_json("n1", "\"unschedulable\":true", "{}", ALLOC, "True"));
    add_node(&e, node_json("n2", "\"taints\":[{\"key\":\"node.kubernetes.io/not-ready\",\"effect\":\"NoSchedule\"}]", "{}", ALLOC, "False"));
    add_node(&e, node_json("n3", "\"taints\":[{\"key\":\"node.kubernetes.io/not-ready\",\"effect\":\"NoSchedule\"}]", "{}", ALLOC, "False"));
    run_for(&e, 2 * S);
    c = scheduled_cond(&e, "p");
    cr_expect_str_eq(kite_obj_str(c, "message"), "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had "
                                                 "untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/3 nodes "
                                                 "are available: 3 Preemption is not helpful for scheduling.");
    env_release(&e);
}

/* The scheduler's form of a Node: its images in one string, everything else shared. */
Test(scheduler, node_transform_keeps_image_sizes_in_one_string) {
    json_object *n = node_json("n1", "", "{}", ALLOC, "True");
    kite_obj_set(kite_obj_get(n, "status"), "images",
                 fakeapi_json("[{\"names\":[\"a:1\",\"a@sha256:00\"],\"sizeBytes\":10},"
                              "{\"names\":[\"not one\"],\"sizeBytes\":5},{\"names\":[\"e\"],\"sizeBytes\":7}]"));
    json_object *t = kite_sched_node_transform(n), *st = kite_obj_get(t, "status");
    cr_assert_null(kite_obj_get(st, "images"));
    cr_assert_str_eq(kite_obj_str(st, "imageSizes"), "10 a:1\n10 a@sha256:00\n7 e\n");
    cr_assert_eq(kite_obj_get(st, "conditions"), kite_obj_get(kite_obj_get(n, "status"), "conditions"), "shared");
    cr_assert_eq(kite_obj_get(t, "metadata"), kite_obj_get(n, "metadata"), "shared");
    json_object *again = kite_sched_node_transform(t);
    cr_assert_eq(again, t, "a transformed Node is kept as it is");
    json_object_put(again);
    json_object_put(t);
    json_object_put(n);
}

Test(scheduler, prefers_room_and_local_images) {
    struct env e;
    env_init(&e);
    /* n1 is half full, n2 empty: least allocated picks n2 */
    add_node(&e, node_json("n1", "", "{}", ALLOC, "True"));
    add_node(&e, node_json("n2", "", "{}", ALLOC, "True"));
    json_object *big = pod_json("big", "\"nodeName\":\"n1\"", "1");
    kite_sched_pod_upsert(e.s, big);
    json_object_put(big);
    for (int i = 0; i < 5; i++) {
        _cleanup_free_ char *name = kite_asprintf("p%d", i);
        add_pod(&e, pod_json(name, "", "10m"));
        run_for(&e, 0);
        cr_expect_str_eq(bound_to(&e, name) ? bound_to(&e, name) : "", "n2", "pod %d", i);
        confirm(&e, name, "10m");
    }
    /* equal nodes but n3 has the image (900 MiB): it wins every time */
    struct env f;
    env_init(&f);
    json_object *n3 = node_json("n3", "", "{}", ALLOC, "True");
    json_object *imgs = fakeapi_json("[{\"names\":[\"docker.io/library/app:latest\",\"app:latest\"],\"sizeBytes\":943718400}]");
    kite_obj_set(kite_obj_get(n3, "status"), "images", imgs);
    add_node(&f, n3);
    add_node(&f, node_json("n4", "", "{}", ALLOC, "True"));
    for (int i = 0; i < 6; i++) {
        _cleanup_free_ char *name = kite_asprintf("i%d", i);
        json_object *pod = pod_json(name, "", "10m");
        kite_obj_set(json_object_array_get_idx(kite_obj_get(kite_obj_get(pod, "spec"), "containers"), 0), "image",
                     json_object_new_string("app"));
        add_pod(&f, pod);
        run_for(&f, 0);
        cr_expect_str_eq(bound_to(&f, name) ? bound_to(&f, name) : "", "n3", "pod %d", i);
    }
    env_release(&f);
    env_release(&e);
}

Test(scheduler, ties_broken_at_random) {
    struct env e;
    env_init(&e);
    add_node(&e, node_json("n1", "", "{}", ALLOC, "True"));
    add_node(&e, node_json("n2", "", "{}", ALLOC, "True"));
    int on1 = 0;
    for (int i = 0; i < 40; i++) {
        _cleanup_free_ char *name = kite_asprintf("p%d", i);
        add_pod(&e, pod_json(name, "", "0")); /* requests nothing: both nodes score the same forever */
        run_for(&e, 0);
        on1 += kite_streq(bound_to(&e, name), "n1");
    }
    cr_expect(on1 > 5 && on1 < 35, "%d of 40 on n1", on1);
    env_release(&e);
}

Test(scheduler, failed_binding_backs_off) {
    struct env e;
    env_init(&e);
    add_node(&e, node_json("n1", "", "{}", ALLOC, "True"));
    e.api.fail_prefix = "/api/v1/namespaces/" NS "/pods/p/binding";
    e.api.fail_code = 500;
    add_pod(&e, pod_json("p", "", "100m"));
    run_for(&e, 0);
    cr_expect_eq(fakeapi_count(&e.api, "POST", "/pods/p/binding"), 1);
    cr_expect_str_eq(kite_sched_pod_state(e.s, NS, "p"), "backoff");
    e.api.fail_prefix = NULL;
    run_for(&e, S);
    cr_expect_str_eq(bound_to(&e, "p") ? bound_to(&e, "p") : "", "n1");
    env_release(&e);
}

Test(scheduler, preemption_dry_run_message) {
    struct env e;
    env_init(&e);
    add_node(&e, node_json("n1", "", "{}", "{\"cpu\":\"1\",\"memory\":\"4Gi\",\"pods\":\"110\"}", "True"));
    json_object *low = pod_json("low", "\"nodeName\":\"n1\",\"priority\":0", "800m");
    kite_sched_pod_upsert(e.s, low);
    json_object_put(low);
    /* room if the lower-priority pod went: upstream would preempt, kite says it does not */
    add_pod(&e, pod_json("mid", "\"priority\":10", "500m"));
    /* no room even then: the reasons once it is counted out */
    add_pod(&e, pod_json("big", "\"priority\":10", "1500m"));
    /* preemptionPolicy Never: not eligible */
    add_pod(&e, pod_json("meek", "\"priority\":10,\"preemptionPolicy\":\"Never\"", "500m"));
    run_for(&e, 0);
    cr_expect_str_eq(kite_obj_str(scheduled_cond(&e, "mid"), "message"),
                     "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Preemption is not supported.");
    cr_expect_str_eq(kite_obj_str(scheduled_cond(&e, "big"), "message"),
                     "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Insufficient cpu.");
    cr_expect_str_eq(kite_obj_str(scheduled_cond(&e, "meek"), "message"),
                     "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.");
    env_release(&e);
}

/* the pod the agent's admission test rejects (test_pods.c admission_counts_sidecars_and_overhead):
 * the scheduler counts the same 2100m */
Test(scheduler, requests_agree_with_agent_admission) {
    json_object *pod = fakeapi_json("{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],"
                                    "\"initContainers\":[{\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}],"
                                    "\"overhead\":{\"cpu\":\"600m\"}}}");
    struct kite_sched_req r;
    kite_sched_pod_requests(pod, false, &r);
    cr_assert_eq(r.cpu, 2100);
    cr_assert_eq(r.mem, 0);
    json_object_put(pod);
}

/* A burst of pods: each decided in turn (the next sees the last one's requests counted), their
 * bindings posted KITE_CTL_WORKERS at once (one at a time, ~120 pods/s behind a busy apiserver) */
Test(scheduler, a_burst_is_bound_several_at_once) {
    struct env e;
    env_init(&e);
    struct fakeapi_meter m = {.method = "POST", .part = "/binding", .delay_us = 2000};
    e.api.on_request = fakeapi_meter_hook, e.api.on_request_ud = &m;
    add_node(&e, node_json("n1", "", "{}", "{\"cpu\":\"10\",\"memory\":\"40Gi\",\"pods\":\"110\"}", "True"));
    add_node(&e, node_json("n2", "", "{}", "{\"cpu\":\"10\",\"memory\":\"40Gi\",\"pods\":\"110\"}", "True"));
    for (int i = 0; i < 90; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        add_pod(&e, pod_json(name, "", "200m")); /* 90 x 200m: both nodes' 10 cpus, less one pod's */
    }
    run_for(&e, 0);
    int on[2] = {0, 0};
    for (int i = 0; i < 90; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        const char *n = bound_to(&e, name);
        cr_assert_not_null(n, "%s not bound", name);
        on[strcmp(n, "n1") == 0 ? 0 : 1]++;
        cr_assert_eq(fakeapi_events(&e.api, "Scheduled", name), 1, "%s", name);
    }
    /* no node was given more than it holds: each decision saw the ones before it */
    cr_assert_leq(on[0], 50);
    cr_assert_leq(on[1], 50);
    cr_assert_gt(atomic_load(&m.most), 1, "the bindings went out one at a time");
    cr_assert_leq(atomic_load(&m.most), KITE_CTL_WORKERS);
    env_release(&e);
}

/* upstream's numFeasibleNodesToFind with percentageOfNodesToScore unset */
Test(scheduler, feasible_nodes_to_find) {
    static const size_t cases[][2] = {{0, 0},     {1, 1},       {99, 99},     {100, 100},  {200, 100},
                                      {500, 230}, {1000, 420},  {2000, 680},  {5000, 500}, {6000, 300},
                                      {6250, 312}, {150000, 7500}};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++)
        cr_expect_eq(kite_sched_feasible_to_find(cases[i][0]), cases[i][1], "%zu nodes: %zu", cases[i][0],
                     kite_sched_feasible_to_find(cases[i][0]));
}

/* With more nodes than it looks for, the one node that fits is still found wherever it is, and
 * a pod no node fits has every node filtered: its message counts them all */
Test(scheduler, a_search_cut_short_still_finds_the_fit_and_counts_every_node) {
    struct env e;
    env_init(&e);
    for (int i = 0; i < 300; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%03d", i);
        add_node(&e, node_json(name, "", "{}", i == 217 ? "{\"cpu\":\"8\",\"memory\":\"4Gi\",\"pods\":\"110\"}" : ALLOC,
                               "True"));
    }
    for (int k = 0; k < 3; k++) { /* three searches, each starting where the last stopped */
        char name[16];
        snprintf(name, sizeof name, "big%d", k);
        add_pod(&e, pod_json(name, "", "2500m"));
        run_for(&e, 0);
        cr_assert_str_eq(bound_to(&e, name) ? bound_to(&e, name) : "", "n217", "%s", name);
    }
    add_pod(&e, pod_json("huge", "", "9"));
    run_for(&e, 0);
    cr_expect_null(bound_to(&e, "huge"));
    json_object *c = scheduled_cond(&e, "huge");
    cr_assert_not_null(c);
    cr_expect(kite_startswith(kite_obj_str(c, "message"), "0/300 nodes are available: 300 Insufficient cpu."), "%s",
              kite_obj_str(c, "message"));
    env_release(&e);
}
