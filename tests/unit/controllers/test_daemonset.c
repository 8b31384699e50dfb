/* The DaemonSet controller's node eligibility (nodeSelector, required node affinity, taints
 * against the daemon tolerations), the pod it makes, one pod per eligible node with status
 * counts, and a rolling update within maxUnavailable. */
#include "controllers/workloads/daemonset.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>
#include <stdio.h>

#define S KITE_NS_PER_SEC
#define DS "/apis/apps/v1/namespaces/default/daemonsets/d"
#define PODS "/api/v1/namespaces/default/pods"

static json_object *ds_with(const char *tmpl_spec) {
    return fakeapi_json("{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"d\",\"namespace\":"
                        "\"default\",\"uid\":\"du\",\"generation\":1},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"d\"}},"
                        "\"updateStrategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":1}},"
                        "\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{%s\"containers\":[{\"name\":\"c\","
                        "\"image\":\"busybox\"}]}}}}",
                        tmpl_spec);
}

Test(daemonset, eligibility) {
    static const struct {
        const char *tmpl, *node;
        bool run, stay;
    } cases[] = {
        {"", "{\"metadata\":{\"name\":\"n\"}}", true, true},
        /* nodeSelector */
        {"\"nodeSelector\":{\"disk\":\"ssd\"},", "{\"metadata\":{\"name\":\"n\",\"labels\":{\"disk\":\"ssd\"}}}", true, true},
        {"\"nodeSelector\":{\"disk\":\"ssd\"},", "{\"metadata\":{\"name\":\"n\",\"labels\":{\"disk\":\"hdd\"}}}", false, false},
        {"\"nodeSelector\":{\"disk\":\"ssd\"},", "{\"metadata\":{\"name\":\"n\"}}", false, false},
        /* required node affinity: terms ORed, requirements ANDed */
        {"\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
         "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}]}]}}},",
         "{\"metadata\":{\"name\":\"n\",\"labels\":{\"zone\":\"b\"}}}", true, true},
        {"\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
         "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"b\"]}]}]}}},",
         "{\"metadata\":{\"name\":\"n\",\"labels\":{\"zone\":\"b\"}}}", false, false},
        {"\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
         "{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}]},"
         "{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"n\"]}]}]}}},",
         "{\"metadata\":{\"name\":\"n\"}}", true, true},
        {"\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":["
         "{\"matchExpressions\":[{\"key\":\"cpus\",\"operator\":\"Gt\",\"values\":[\"4\"]}]}]}}},",
         "{\"metadata\":{\"name\":\"n\",\"labels\":{\"cpus\":\"8\"}}}", true, true},
        /* taints: the daemon tolerations cover the node conditions' taints */
        {"", "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"node.kubernetes.io/not-ready\",\"effect\":\"NoExecute\"},"
             "{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"},"
             "{\"key\":\"node.kubernetes.io/memory-pressure\",\"effect\":\"NoSchedule\"}]}}", true, true},
        /* network-unavailable only for host-network pods */
        {"", "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"node.kubernetes.io/network-unavailable\",\"effect\":\"NoSchedule\"}]}}",
         false, true},
        {"\"hostNetwork\":true,", "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"node.kubernetes.io/network-unavailable\",\"effect\":\"NoSchedule\"}]}}",
         true, true},
        /* a user's taint: NoSchedule keeps new pods away, NoExecute removes them */
        {"", "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"x\",\"effect\":\"NoSchedule\"}]}}",
         false, true},
        {"", "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"x\",\"effect\":\"NoExecute\"}]}}",
         false, false},
        {"\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Equal\",\"value\":\"x\"}],",
         "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"x\",\"effect\":\"NoExecute\"}]}}",
         true, true},
        {"\"tolerations\":[{\"operator\":\"Exists\"}],",
         "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"any\",\"effect\":\"NoExecute\"}]}}", true, true},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *ds = ds_with(cases[i].tmpl), *node = fakeapi_json("%s", cases[i].node);
        json_object *pod = kite_ds_new_pod(ds, "elsewhere", "h");
        /* the pin is the node's own; judge the template's affinity */
        json_object *aff = kite_obj_get(kite_obj_get(kite_obj_get(kite_obj_get(ds, "spec"), "template"), "spec"), "affinity");
        json_object *spec = kite_obj_get(pod, "spec");
        if (aff) {
            json_object *c = NULL;
            json_object_deep_copy(aff, &c, NULL);
            kite_obj_set(spec, "affinity", c);
        } else {
            json_object_object_del(spec, "affinity");
        }
        bool stay;
        bool run = kite_ds_should_run(pod, node, &stay);
        cr_expect_eq(run, cases[i].run, "case %zu: run %d", i, run);
        cr_expect_eq(stay, cases[i].stay, "case %zu: stay %d", i, stay);
        json_object_put(pod);
        json_object_put(ds);
        json_object_put(node);
    }
}

/* the rules are upstream's (api/scheduling.h): a Gt value that is no number matches nothing, and
 * an empty-key Equal toleration tolerates a taint of equal value, as ToleratesTaint does */
Test(daemonset, eligibility_follows_upstream_helpers) {
    json_object *node = fakeapi_json("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"cores\":\"100\"}},"
                                     "\"spec\":{\"taints\":[{\"key\":\"a\",\"value\":\"x\",\"effect\":\"NoSchedule\"}]}}");
    json_object *gt = fakeapi_json("{\"spec\":{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
                                   "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"cores\",\"operator\":\"Gt\","
                                   "\"values\":[\"12abc\"]}]}]}}}}}");
    cr_assert(!kite_node_affinity_matches(gt, node));
    json_object *tol = fakeapi_json("{\"spec\":{\"tolerations\":[{\"operator\":\"Equal\",\"value\":\"x\"}]}}");
    bool stay = false;
    cr_assert(kite_ds_should_run(tol, node, &stay));
    cr_assert(stay);
    json_object_put(tol);
    json_object_put(gt);
    json_object_put(node);
}

Test(daemonset, new_pod) {
    json_object *ds = ds_with("\"hostNetwork\":true,\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\","
                              "\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":5}],");
    json_object *pod = kite_ds_new_pod(ds, "n2", "abc");
    json_object *meta = kite_obj_meta(pod), *spec = kite_obj_get(pod, "spec");
    cr_assert_str_eq(kite_obj_str(meta, "generateName"), "d-");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(meta, "labels"), "controller-revision-hash"), "abc");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(meta, "labels"), "app"), "d");
    json_object *ref = json_object_array_get_idx(kite_obj_get(meta, "ownerReferences"), 0);
    cr_assert_str_eq(kite_obj_str(ref, "kind"), "DaemonSet");
    cr_assert_str_eq(kite_obj_str(ref, "uid"), "du");
    json_object *tols = kite_obj_get(spec, "tolerations");
    cr_assert_eq(json_object_array_length(tols), 7, "the template's not-ready one kept, six added");
    cr_assert_eq(json_object_get_int64(kite_obj_get(json_object_array_get_idx(tols, 0), "tolerationSeconds")), 5);
    json_object *f = json_object_array_get_idx(
        kite_obj_get(json_object_array_get_idx(
                         kite_obj_get(kite_obj_get(kite_obj_get(kite_obj_get(spec, "affinity"), "nodeAffinity"),
                                                   "requiredDuringSchedulingIgnoredDuringExecution"),
                                      "nodeSelectorTerms"),
                         0),
                     "matchFields"),
        0);
    cr_assert_str_eq(kite_obj_str(f, "key"), "metadata.name");
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(kite_obj_get(f, "values"), 0)), "n2");
    cr_assert(kite_node_affinity_allows_name(pod, "n2"));
    cr_assert(!kite_node_affinity_allows_name(pod, "n1"));
    json_object_put(pod);
    json_object_put(ds);
}

/* GetPodFromTemplate, as every workload controller makes its pods: the template's labels,
 * annotations and finalizers, one controller reference blocking its owner's deletion. */
Test(daemonset, new_pod_from_template_metadata) {
    json_object *ds = json_tokener_parse(
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"d\",\"namespace\":\"ns\","
        "\"uid\":\"du\"},\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"a\":\"1\"},"
        "\"finalizers\":[\"example.com/f\"]},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}");
    json_object *pod = kite_ds_new_pod(ds, "n1", "h");
    json_object *meta = kite_obj_meta(pod);
    cr_assert_str_eq(kite_obj_str(meta, "namespace"), "ns");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(meta, "labels"), "controller-revision-hash"), "h", "labels made for the hash");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(meta, "annotations"), "a"), "1");
    json_object *fins = kite_obj_get(meta, "finalizers");
    cr_assert_eq(kite_array_len(fins), 1);
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(fins, 0)), "example.com/f");
    json_object *refs = kite_obj_get(meta, "ownerReferences"), *ref = json_object_array_get_idx(refs, 0);
    cr_assert_eq(kite_array_len(refs), 1);
    cr_assert_str_eq(kite_obj_str(ref, "apiVersion"), "apps/v1");
    cr_assert_str_eq(kite_obj_str(ref, "name"), "d");
    cr_assert(json_object_get_boolean(kite_obj_get(ref, "controller")));
    cr_assert(json_object_get_boolean(kite_obj_get(ref, "blockOwnerDeletion")));
    cr_assert_str_eq(kite_obj_str(json_object_array_get_idx(kite_obj_path(pod, "spec.containers"), 0), "image"), "i");
    json_object_put(pod);
    json_object_put(ds);
}

/* ---- the core against the fake API ---- */

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_dsctl *c;
    struct kite_map seen; /* pod path -> the copy last delivered */
};

/* Delivers the deletes of pods the fake API no longer holds, as an informer would. */
static void deliver_deletes(struct env *e) {
    const char *k;
    void *v;
    char *gone[64];
    size_t n = 0;
    for (size_t it = 0; kite_map_next(&e->seen, &it, &k, &v);)
        if (!fakeapi_get(&e->api, k) && n < 64) gone[n++] = kite_strdup(k);
    for (size_t i = 0; i < n; i++) {
        json_object *p = kite_map_del(&e->seen, gone[i]);
        kite_dsctl_pod_delete(e->c, p);
        json_object_put(p);
        free(gone[i]);
    }
    for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);)
        if (strncmp(k, PODS "/", sizeof PODS) == 0 && !kite_map_get(&e->seen, k)) kite_map_put(&e->seen, k, json_object_get(v));
}

static void settle(struct env *e) {
    for (int round = 0; round < 20; round++) {
        size_t before = e->api.nlog;
        deliver_deletes(e);
        kite_dsctl_ds_upsert(e->c, fakeapi_get(&e->api, DS));
        const char *k;
        void *v;
        for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);) {
            if (strncmp(k, PODS "/", sizeof PODS) == 0 && !strchr(k + sizeof PODS, '/')) kite_dsctl_pod_upsert(e->c, v);
            if (strncmp(k, "/api/v1/nodes/", 14) == 0) kite_dsctl_node_upsert(e->c, v);
        }
        kite_dsctl_step(e->c);
        if (e->api.nlog == before) return;
    }
}

static size_t count_pods(struct env *e, const char *node, const char *hash) {
    size_t n = 0;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);) {
        if (strncmp(k, PODS "/", sizeof PODS) != 0) continue;
        if (!kite_node_affinity_allows_name(v, node)) continue;
        if (hash && !kite_streq(kite_obj_str(kite_obj_get(kite_obj_meta(v), "labels"), "controller-revision-hash"), hash))
            continue;
        n++;
    }
    return n;
}

static int64_t st(struct env *e, const char *k) {
    json_object *v = kite_obj_get(kite_obj_get(fakeapi_get(&e->api, DS), "status"), k);
    return v ? json_object_get_int64(v) : -1;
}

static void make_ready(struct env *e) {
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);)
        if (strncmp(k, PODS "/", sizeof PODS) == 0 && !kite_obj_get(v, "status"))
            kite_obj_set(v, "status", fakeapi_json("{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}"));
}

Test(daemonset, one_pod_per_eligible_node_and_rolling_update) {
    struct env e = {0};
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&e.clock, INT64_C(1893553445) * S);
    fakeapi_init(&e.api);
    struct kite_dsctl_options o = {.client = e.api.client, .clock = &e.clock.clock};
    e.c = kite_dsctl_new(&o);
    fakeapi_put(&e.api, "/api/v1/nodes/n1", fakeapi_json("{\"metadata\":{\"name\":\"n1\"}}"));
    fakeapi_put(&e.api, "/api/v1/nodes/n2", fakeapi_json("{\"metadata\":{\"name\":\"n2\"}}"));
    fakeapi_put(&e.api, "/api/v1/nodes/n3",
                fakeapi_json("{\"metadata\":{\"name\":\"n3\"},\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}"));
    fakeapi_put(&e.api, DS, ds_with(""));
    settle(&e);
    cr_assert_eq(count_pods(&e, "n1", NULL), 1);
    cr_assert_eq(count_pods(&e, "n2", NULL), 1);
    cr_assert_eq(count_pods(&e, "n3", NULL), 0, "a NoSchedule taint it does not tolerate");
    cr_assert_eq(st(&e, "desiredNumberScheduled"), 2);
    cr_assert_eq(st(&e, "currentNumberScheduled"), 2);
    cr_assert_eq(st(&e, "numberReady"), 0);
    cr_assert_eq(st(&e, "numberMisscheduled"), 0);
    cr_assert_eq(st(&e, "observedGeneration"), 1);
    make_ready(&e);
    settle(&e);
    cr_assert_eq(st(&e, "numberReady"), 2);
    cr_assert_eq(st(&e, "numberAvailable"), 2);
    cr_assert_eq(st(&e, "updatedNumberScheduled"), 2);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 2, "no more pods than nodes");

    /* a new template: one node at a time (maxUnavailable 1) */
    json_object *ds = fakeapi_get(&e.api, DS);
    json_object *c0 = json_object_array_get_idx(
        kite_obj_get(kite_obj_get(kite_obj_get(kite_obj_get(ds, "spec"), "template"), "spec"), "containers"), 0);
    kite_obj_set(c0, "image", json_object_new_string("busybox:2"));
    kite_obj_set(kite_obj_meta(ds), "generation", json_object_new_int(2));
    settle(&e);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", PODS), 1, "one old pod at a time");
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 3, "its replacement");
    make_ready(&e);
    settle(&e);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", PODS), 2, "then the other");
    make_ready(&e);
    settle(&e);
    cr_assert_eq(st(&e, "updatedNumberScheduled"), 2);
    cr_assert_eq(st(&e, "numberAvailable"), 2);
    cr_assert_eq(st(&e, "observedGeneration"), 2);

    /* a node gains a NoExecute taint: its pod goes */
    json_object *n2 = fakeapi_get(&e.api, "/api/v1/nodes/n2");
    kite_obj_set(n2, "spec", fakeapi_json("{\"taints\":[{\"key\":\"k\",\"effect\":\"NoExecute\"}]}"));
    settle(&e);
    cr_assert_eq(count_pods(&e, "n2", NULL), 0);
    cr_assert_eq(st(&e, "desiredNumberScheduled"), 1);
    kite_dsctl_free(e.c);
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e.seen, &it, &k, &v);) json_object_put(v);
    kite_map_release(&e.seen);
    fakeapi_release(&e.api);
}
