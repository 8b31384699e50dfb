/* Pod GC on a fake clock: orphaned pods deleted only after the quarantine and a GET that finds
 * no Node (with phase Failed and DisruptionTarget first), pods on out-of-service nodes
 * force-deleted, terminated pods beyond the threshold collected evicted-first then oldest. */
#include "controllers/node/podgc.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>

#define S KITE_NS_PER_SEC
#define PODS "/api/v1/namespaces/default/pods/"

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_podgc *gc;
};

static void env_init(struct env *e, int64_t threshold) {
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&e->clock, INT64_C(1893553445) * S);
    fakeapi_init(&e->api);
    struct kite_podgc_options o = {.client = e->api.client, .clock = &e->clock.clock, .terminated_threshold = threshold};
    e->gc = kite_podgc_new(&o);
}

static void env_release(struct env *e) {
    kite_podgc_free(e->gc);
    fakeapi_release(&e->api);
}

static void run_for(struct env *e, int64_t ns) {
    int64_t end = kite_now_mono(&e->clock.clock) + ns;
    for (;;) {
        int64_t next = kite_podgc_step(e->gc);
        if (kite_podgc_pending(e->gc)) continue;
        int64_t now = kite_now_mono(&e->clock.clock);
        if (now >= end) break;
        kite_fake_clock_advance(&e->clock, KITE_MIN(KITE_MAX(next, 1), end - now));
    }
}

static void set_node(struct env *e, const char *name, const char *ready, const char *taints) {
    json_object *n = fakeapi_json("{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"taints\":%s},"
                                  "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}", name, taints, ready);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s", name);
    fakeapi_put(&e->api, path, json_object_get(n));
    kite_podgc_node_upsert(e->gc, n);
    json_object_put(n);
}

static void set_pod(struct env *e, const char *name, const char *node, const char *phase, const char *extra_meta,
                    const char *extra_status) {
    json_object *p = fakeapi_json("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"u-%s\"%s},"
                                  "\"spec\":{%s%s%s\"containers\":[]},\"status\":{\"phase\":\"%s\"%s}}",
                                  name, name, extra_meta, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "",
                                  phase, extra_status);
    _cleanup_free_ char *path = kite_asprintf(PODS "%s", name);
    json_object *stored = NULL;
    json_object_deep_copy(p, &stored, NULL);
    fakeapi_put(&e->api, path, stored);
    kite_podgc_pod_upsert(e->gc, p);
    json_object_put(p);
}

static bool exists(struct env *e, const char *pod) {
    _cleanup_free_ char *path = kite_asprintf(PODS "%s", pod);
    return fakeapi_get(&e->api, path) != NULL;
}

Test(podgc, orphan_deleted_after_quarantine_and_check) {
    struct env e;
    env_init(&e, 12500);
    set_pod(&e, "a", "gone-node", "Running", "", "");
    run_for(&e, 39 * S);
    cr_expect(exists(&e, "a"), "deleted inside the quarantine");
    cr_expect_eq(fakeapi_count(&e.api, "GET", "/api/v1/nodes/gone-node"), 0);
    /* the delete fails once: the pod stays with what was patched before it */
    e.api.fail_prefix = PODS "a";
    e.api.fail_method = "DELETE";
    e.api.fail_code = 500;
    run_for(&e, 1 * S + 1);
    cr_expect_eq(fakeapi_count(&e.api, "GET", "/api/v1/nodes/gone-node"), 1);
    json_object *st = kite_obj_get(fakeapi_get(&e.api, PODS "a"), "status");
    cr_expect_str_eq(kite_obj_str(st, "phase"), "Failed");
    json_object *c = json_object_array_get_idx(kite_obj_get(st, "conditions"), 0);
    cr_expect_str_eq(kite_obj_str(c, "type"), "DisruptionTarget");
    cr_expect_str_eq(kite_obj_str(c, "reason"), "DeletionByPodGC");
    cr_expect_str_eq(kite_obj_str(c, "message"), "PodGC: node no longer exists");
    e.api.fail_prefix = NULL;
    run_for(&e, KITE_PODGC_RETRY_NS);
    cr_expect_not(exists(&e, "a"));
    /* a pod bound later to the node known gone goes at once */
    set_pod(&e, "b", "gone-node", "Pending", "", "");
    run_for(&e, 0);
    cr_expect_not(exists(&e, "b"));
    env_release(&e);
}

Test(podgc, node_the_informer_lacks_is_checked_and_kept) {
    struct env e;
    env_init(&e, 12500);
    /* the API has n2 though the informer has not shown it yet */
    fakeapi_put(&e.api, "/api/v1/nodes/n2", fakeapi_json("{\"metadata\":{\"name\":\"n2\"}}"));
    set_pod(&e, "a", "n2", "Running", "", "");
    run_for(&e, 60 * S);
    cr_expect_eq(fakeapi_count(&e.api, "GET", "/api/v1/nodes/n2"), 1);
    cr_expect(exists(&e, "a"));
    /* a node deleted and back within the delay keeps its pods */
    set_node(&e, "n3", "True", "[]");
    set_pod(&e, "b", "n3", "Running", "", "");
    json_object *n3 = fakeapi_json("{\"metadata\":{\"name\":\"n3\"}}");
    kite_podgc_node_delete(e.gc, n3);
    json_object_put(n3);
    run_for(&e, 30 * S);
    set_node(&e, "n3", "True", "[]");
    run_for(&e, 60 * S);
    cr_expect(exists(&e, "b"));
    cr_expect_eq(fakeapi_count(&e.api, "GET", "/api/v1/nodes/n3"), 0);
    env_release(&e);
}

Test(podgc, deleted_node_pods_go_after_the_delay_from_deletion) {
    struct env e;
    env_init(&e, 12500);
    set_node(&e, "n1", "True", "[]");
    set_pod(&e, "a", "n1", "Running", "", "");
    run_for(&e, 100 * S);
    cr_expect(exists(&e, "a"));
    json_object_put(kite_map_del(&e.api.objs, "/api/v1/nodes/n1")); /* kubectl delete node */
    json_object *n1 = fakeapi_json("{\"metadata\":{\"name\":\"n1\"}}");
    kite_podgc_node_delete(e.gc, n1);
    json_object_put(n1);
    run_for(&e, 39 * S);
    cr_expect(exists(&e, "a"));
    run_for(&e, 1 * S + 1);
    cr_expect_not(exists(&e, "a"));
    env_release(&e);
}

#define OOS "[{\"key\":\"node.kubernetes.io/out-of-service\",\"value\":\"nodeshutdown\",\"effect\":\"NoExecute\"}]"
#define TERMINATING ",\"deletionTimestamp\":\"2030-01-01T00:00:00Z\""

Test(podgc, out_of_service_force_deletes_terminating_pods) {
    struct env e;
    env_init(&e, 12500);
    set_node(&e, "n1", "Unknown", "[]");
    set_pod(&e, "t", "n1", "Running", TERMINATING, "");
    set_pod(&e, "r", "n1", "Running", "", "");
    run_for(&e, 10 * S);
    cr_expect(exists(&e, "t"), "no taint yet: the pod waits for its node");
    set_node(&e, "n1", "Unknown", OOS);
    run_for(&e, 0);
    cr_expect_not(exists(&e, "t"));
    cr_expect_eq(fakeapi_count(&e.api, "PATCH", PODS "t/status"), 1);
    cr_expect(exists(&e, "r"), "a pod not being deleted is taint eviction's to delete");
    /* once deleted (taint eviction), it goes too */
    set_pod(&e, "r", "n1", "Running", TERMINATING, "");
    run_for(&e, 0);
    cr_expect_not(exists(&e, "r"));
    /* a Ready node with the taint is left alone */
    set_node(&e, "n2", "True", OOS);
    set_pod(&e, "u", "n2", "Running", TERMINATING, "");
    run_for(&e, 0);
    cr_expect(exists(&e, "u"));
    /* an unscheduled pod being deleted goes at once */
    set_pod(&e, "v", NULL, "Pending", TERMINATING, "");
    run_for(&e, 0);
    cr_expect_not(exists(&e, "v"));
    env_release(&e);
}

Test(podgc, terminated_beyond_threshold_oldest_and_evicted_first) {
    struct env e;
    env_init(&e, 2);
    set_node(&e, "n1", "True", "[]");
    set_pod(&e, "old", "n1", "Succeeded", ",\"creationTimestamp\":\"2030-01-01T00:00:01Z\"", "");
    set_pod(&e, "mid", "n1", "Failed", ",\"creationTimestamp\":\"2030-01-01T00:00:02Z\"", "");
    run_for(&e, 0);
    cr_expect(exists(&e, "old") && exists(&e, "mid"), "at the threshold nothing goes");
    set_pod(&e, "new", "n1", "Succeeded", ",\"creationTimestamp\":\"2030-01-01T00:00:03Z\"", "");
    set_pod(&e, "evicted", "n1", "Failed", ",\"creationTimestamp\":\"2030-01-01T00:00:04Z\"", ",\"reason\":\"Evicted\"");
    set_pod(&e, "running", "n1", "Running", ",\"creationTimestamp\":\"2030-01-01T00:00:00Z\"", "");
    run_for(&e, 0);
    cr_expect_not(exists(&e, "evicted"));
    cr_expect_not(exists(&e, "old"));
    cr_expect(exists(&e, "mid") && exists(&e, "new") && exists(&e, "running"));
    cr_expect_eq(fakeapi_count(&e.api, "PATCH", "/status"), 0, "terminated pods are not patched");
    env_release(&e);
}
