/* The agent's pods on the fake runtime, a fake API and a fake clock: the worker state machine,
 * the status manager (dedup, retry, terminal phase kept, final delete), conditions, back-off,
 * admission and the event recorder. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "base/base.h"
#include "api/registry.h"
#include "json/parse.h"
#include "json/patch.h"

struct rec {
    char method[8];
    char *path, *ctype;
    json_object *body;
    json_object *applied; /* a status PATCH the fake server took: the object after it */
};
static struct rec reqs[512];
static size_t n_reqs;
/* the objects the fake server starts from, by status path (set by add()) */
static struct {
    char *path;
    json_object *obj;
} seeds[64];
static size_t n_seeds;
static int fail_next; /* next n requests answer 500 */

static int handler(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                   struct kite_response *ret) {
    if (n_reqs < 512) {
        struct rec *r = &reqs[n_reqs++];
        snprintf(r->method, sizeof(r->method), "%s", method);
        r->path = kite_strdup(path);
        r->ctype = kite_strdup(ct ? ct : "");
        r->body = body ? json_tokener_parse(body) : NULL;
    }
    if (fail_next > 0) {
        fail_next--;
        ret->status = 500;
        ret->body = kite_strdup("{\"kind\":\"Status\",\"code\":500}");
    } else {
        /* the server's side of a status PATCH: applied, as a strategic merge, to the object the
         * last one left (so what a patch fails to remove stays, as on a real server) */
        struct rec *r = &reqs[n_reqs - 1];
        if (n_reqs <= 512 && strcmp(method, "PATCH") == 0 && strstr(path, "/status") && r->body) {
            json_object *prev = NULL;
            for (size_t i = n_reqs - 1; i-- > 0 && !prev;)
                if (reqs[i].applied && strcmp(reqs[i].path, path) == 0) prev = reqs[i].applied;
            for (size_t i = 0; i < n_seeds && !prev; i++)
                if (strcmp(seeds[i].path, path) == 0) prev = seeds[i].obj;
            char *err = NULL;
            cr_assert_eq(kite_smp_apply(prev, r->body, kite_registry_find_kind("", "Pod")->smp, &r->applied, &err), 0,
                         "%s", err ? err : "");
            free(err);
        }
        ret->status = 200;
        ret->body = kite_strdup("{}");
    }
    ret->len = strlen(ret->body);
    return 0;
}

static void clear_reqs(void) {
    for (size_t i = 0; i < n_reqs; i++) {
        free(reqs[i].path);
        free(reqs[i].ctype);
        json_object_put(reqs[i].body);
        json_object_put(reqs[i].applied);
    }
    memset(reqs, 0, sizeof reqs);
    n_reqs = 0;
    for (size_t i = 0; i < n_seeds; i++) {
        free(seeds[i].path);
        json_object_put(seeds[i].obj);
    }
    n_seeds = 0;
}

static size_t count(const char *method, const char *frag) {
    size_t n = 0;
    for (size_t i = 0; i < n_reqs; i++)
        if (strcmp(reqs[i].method, method) == 0 && strstr(reqs[i].path, frag)) n++;
    return n;
}

static struct rec *last(const char *method, const char *frag) {
    for (size_t i = n_reqs; i-- > 0;)
        if (strcmp(reqs[i].method, method) == 0 && strstr(reqs[i].path, frag)) return &reqs[i];
    return NULL;
}

static struct kite_fake_clock clk;
static struct kite_client *cl;
static struct kite_runtime *rt;
static struct kite_pods *P;

static void setup(void) {
    kite_fake_clock_init(&clk, INT64_C(1700000000) * KITE_NS_PER_SEC);
    cl = kite_client_fake_new(handler, NULL, NULL);
    rt = kite_runtime_fake_new("1.0");
    char *names[] = {"docker.io/library/busybox:latest"};
    struct kite_image img = {names, 1, 1000, "sha256:abc", NULL};
    kite_runtime_fake_set_images(rt, &img, 1);
    struct kite_pods_options o = {.client = cl, .runtime = rt, .clock = &clk.clock, .node_name = "n1", .seed = 1};
    cr_assert_eq(kite_pods_new(&o, &P), 0);
    json_object *ns = json_tokener_parse("{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}");
    kite_pods_node_status(P, ns);
    json_object_put(ns);
}

static void teardown(void) {
    kite_pods_free(P);
    kite_runtime_free(rt);
    kite_client_free(cl);
    clear_reqs();
    fail_next = 0;
}

TestSuite(pods, .init = setup, .fini = teardown);

static json_object *mkpod(const char *name, const char *policy, const char *containers, const char *inits) {
    char *s = kite_asprintf("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\","
                            "\"uid\":\"uid-%s\",\"resourceVersion\":\"1\"},\"spec\":{\"nodeName\":\"n1\","
                            "\"restartPolicy\":\"%s\",\"containers\":%s%s%s},\"status\":{\"phase\":\"Pending\"}}",
                            name, name, policy, containers, inits ? ",\"initContainers\":" : "", inits ? inits : "");
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "%s", s);
    free(s);
    return o;
}

static void add(json_object *pod) {
    if (n_seeds < KITE_ARRAY_SIZE(seeds)) {
        seeds[n_seeds].path = kite_asprintf("/api/v1/namespaces/%s/pods/%s/status", kite_agent_pjs(pod, "metadata.namespace"),
                                            kite_agent_pjs(pod, "metadata.name"));
        json_object *o = json_object_new_object();
        json_object *st = json_object_object_get(pod, "status");
        if (st) json_object_object_add(o, "status", json_object_get(st));
        seeds[n_seeds++].obj = o;
    }
    json_object *items = json_object_new_array();
    json_object_array_add(items, pod);
    kite_pods_pod_list(P, items);
    json_object_put(items);
}

static void step(void) { kite_pods_step(P); }
static void advance(int64_t s) { kite_fake_clock_advance(&clk, s * KITE_NS_PER_SEC); }
static void rsleep(int ms) { usleep((useconds_t)ms * 1000); }

static json_object *last_status(const char *name) {
    char frag[64];
    snprintf(frag, sizeof(frag), "/pods/%s/status", name);
    struct rec *r = last("PATCH", frag);
    return r ? json_object_object_get(r->applied, "status") : NULL;
}

static json_object *cs(json_object *st, const char *list, size_t i) {
    return json_object_array_get_idx(json_object_object_get(st, list), i);
}

Test(pods, runs_to_succeeded_and_patches_only_changes) {
    add(mkpod("a", "Never", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    struct kite_fake_script s = {.exit_after_ns = 200 * KITE_NS_PER_MS, .exit_code = 0};
    kite_runtime_fake_script(rt, "c", &s);
    step();
    struct rec *r = last("PATCH", "/api/v1/namespaces/ns/pods/a/status");
    cr_assert_not_null(r);
    cr_assert_str_eq(r->ctype, "application/strategic-merge-patch+json");
    cr_assert_str_eq(kite_agent_pjs(r->body, "metadata.uid"), "uid-a");
    json_object *st = last_status("a");
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Running");
    cr_assert_not_null(kite_agent_pj(cs(st, "containerStatuses", 0), "state.running.startedAt"));
    cr_assert(kite_startswith(kite_agent_pjs(cs(st, "containerStatuses", 0), "containerID"), "kite-fake://"));
    size_t n = count("PATCH", "/status");
    step();
    step();
    cr_assert_eq(count("PATCH", "/status"), n, "no change, no patch");
    rsleep(300);
    advance(11); /* the relist */
    step();
    st = last_status("a");
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Succeeded");
    cr_assert_eq(json_object_get_int(kite_agent_pj(cs(st, "containerStatuses", 0), "state.terminated.exitCode")), 0);
    cr_assert_str_eq(kite_agent_pjs(cs(st, "containerStatuses", 0), "state.terminated.reason"), "Completed");
    /* conditions: Ready False with PodCompleted */
    json_object *conds = json_object_object_get(st, "conditions");
    bool found = false;
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(kite_agent_pjs(c, "type"), "Ready")) {
            found = true;
            cr_assert_str_eq(kite_agent_pjs(c, "status"), "False");
            cr_assert_str_eq(kite_agent_pjs(c, "reason"), "PodCompleted");
        }
    }
    cr_assert(found);
    /* events were posted for the pod's container */
    cr_assert_geq(count("POST", "/api/v1/namespaces/ns/events"), 3);
}

Test(pods, status_retry_with_backoff) {
    fail_next = 1;
    add(mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1});
    /* events are best effort; make sure the failure hits the status patch */
    step();
    size_t n = count("PATCH", "/pods/a/status");
    cr_assert_geq(n, 1);
    if (!last_status("a")) cr_assert_fail();
    step();
    size_t m = count("PATCH", "/pods/a/status");
    advance(1);
    step();
    cr_assert_geq(count("PATCH", "/pods/a/status"), m);
    step();
    size_t k = count("PATCH", "/pods/a/status");
    step();
    cr_assert_eq(count("PATCH", "/pods/a/status"), k, "acknowledged: no more patches");
}

Test(pods, crash_loop_backoff_grows) {
    add(mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = 0, .exit_code = 2});
    step();
    rsleep(5);
    step(); /* exited: the first restart is immediate */
    json_object *st = last_status("a");
    rsleep(5);
    step(); /* exited again: back-off 10 s */
    st = last_status("a");
    json_object *c = cs(st, "containerStatuses", 0);
    cr_assert_str_eq(kite_agent_pjs(c, "state.waiting.reason"), "CrashLoopBackOff");
    cr_assert(strstr(kite_agent_pjs(c, "state.waiting.message"), "back-off 10s restarting failed container=c pod=a_ns(uid-a)"));
    cr_assert_eq(json_object_get_int(kite_agent_pj(c, "restartCount")), 1);
    cr_assert_eq(json_object_get_int(kite_agent_pj(c, "lastState.terminated.exitCode")), 2);
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Running");
    advance(5);
    step();
    cr_assert_eq(json_object_get_int(kite_agent_pj(cs(last_status("a"), "containerStatuses", 0), "restartCount")), 1);
    advance(6);
    step();
    rsleep(5);
    step();
    c = cs(last_status("a"), "containerStatuses", 0);
    cr_assert_eq(json_object_get_int(kite_agent_pj(c, "restartCount")), 2);
    cr_assert(strstr(kite_agent_pjs(c, "state.waiting.message"), "back-off 20s"), "%s", kite_agent_pjs(c, "state.waiting.message"));
    cr_assert_geq(count("POST", "/events"), 1);
}

/* A container that ended before the runtime watched it sends no exit event, and the relist finds
 * nothing new once the worker's own refresh saw the exit: the pod is synced again at once, not
 * after the relist's 10 s (a pod whose init container or first attempt ended at once waited there
 * for good). */
Test(pods, an_exit_without_event_is_acted_on) {
    add(mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = 0, .exit_code = 3, .no_exit_event = true});
    step();
    advance(1); /* well before the relist */
    step();
    json_object *c = cs(last_status("a"), "containerStatuses", 0);
    cr_assert_eq(json_object_get_int(kite_agent_pj(c, "restartCount")), 1, "restarted without an exit event");
}

/* An exit is reported as it is before the worker acts on it (the kubelet's syncPod sets the
 * status first): the terminated state of the first attempt reaches the API even though the
 * restart follows in the same sync. */
Test(pods, exit_is_reported_before_the_restart) {
    add(mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    /* the exit comes well after the first sync, even on a loaded machine */
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = 200 * KITE_NS_PER_MS, .exit_code = 7});
    step();
    cr_assert_not_null(kite_agent_pj(cs(last_status("a"), "containerStatuses", 0), "state.running"));
    rsleep(250);
    clear_reqs();
    step(); /* exited: reported, then restarted at once */
    bool terminated = false;
    for (size_t i = 0; i < n_reqs; i++) {
        if (strcmp(reqs[i].method, "PATCH") || !strstr(reqs[i].path, "/pods/a/status")) continue;
        json_object *c = cs(json_object_object_get(reqs[i].body, "status"), "containerStatuses", 0);
        if (json_object_get_int(kite_agent_pj(c, "state.terminated.exitCode")) == 7 &&
            json_object_get_int(kite_agent_pj(c, "restartCount")) == 0)
            terminated = true;
    }
    cr_assert(terminated, "no status showed the exit before the restart");
    json_object *c = cs(last_status("a"), "containerStatuses", 0);
    cr_assert_eq(json_object_get_int(kite_agent_pj(c, "restartCount")), 1);
    cr_assert_eq(json_object_get_int(kite_agent_pj(c, "lastState.terminated.exitCode")), 7);
}

/* The agent keeps pods without their managedFields (memory per pod): from a list and from
 * watch events alike. */
Test(pods, pods_are_kept_without_managed_fields) {
    json_object *a = mkpod("a", "Never", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL);
    json_object *mf = json_tokener_parse("[{\"manager\":\"kubectl\",\"operation\":\"Update\",\"fieldsType\":"
                                         "\"FieldsV1\",\"fieldsV1\":{\"f:spec\":{}}}]");
    json_object_object_add(json_object_object_get(a, "metadata"), "managedFields", json_object_get(mf));
    add(a);
    json_object *b = mkpod("b", "Never", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL);
    json_object_object_add(json_object_object_get(b, "metadata"), "managedFields", json_object_get(mf));
    kite_pods_pod_event(P, "ADDED", b);
    step();
    cr_assert_eq(P->n_pods, 2);
    for (size_t i = 0; i < P->n_pods; i++) {
        cr_assert_not_null(kite_agent_pj(P->pods[i]->obj, "metadata.uid"));
        cr_assert_null(kite_agent_pj(P->pods[i]->obj, "metadata.managedFields"), "pod %s keeps its managedFields", P->pods[i]->name);
    }
    json_object_put(b);
    json_object_put(mf);
}

Test(pods, init_containers_in_order_and_failure_with_never) {
    add(mkpod("a", "Never", "[{\"name\":\"c\",\"image\":\"busybox\"}]",
              "[{\"name\":\"i1\",\"image\":\"busybox\"},{\"name\":\"i2\",\"image\":\"busybox\"}]"));
    kite_runtime_fake_script(rt, "i1", &(struct kite_fake_script){.exit_after_ns = 100 * KITE_NS_PER_MS});
    kite_runtime_fake_script(rt, "i2", &(struct kite_fake_script){.exit_after_ns = 0, .exit_code = 5});
    step();
    json_object *st = last_status("a");
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Pending");
    cr_assert_not_null(kite_agent_pj(cs(st, "initContainerStatuses", 0), "state.running"));
    cr_assert_str_eq(kite_agent_pjs(cs(st, "initContainerStatuses", 1), "state.waiting.reason"), "PodInitializing");
    cr_assert_str_eq(kite_agent_pjs(cs(st, "containerStatuses", 0), "state.waiting.reason"), "PodInitializing");
    rsleep(150);
    step();
    rsleep(5);
    step();
    st = last_status("a");
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Failed");
    cr_assert_eq(json_object_get_int(kite_agent_pj(cs(st, "initContainerStatuses", 1), "state.terminated.exitCode")), 5);
    cr_assert_null(kite_agent_pjs(cs(st, "containerStatuses", 0), "containerID"), "the main container never ran");
}

Test(pods, terminal_phase_never_reversed_and_final_delete) {
    json_object *pod = mkpod("a", "Never", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL);
    add(json_object_get(pod));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = 0, .exit_code = 1});
    step();
    rsleep(5);
    step();
    cr_assert_str_eq(kite_agent_pjs(last_status("a"), "phase"), "Failed");
    /* whatever happens next, Failed stays */
    struct pod *pp = P->pods[0];
    kite_container_status_release(&pp->c[0].st);
    pp->c[0].have_st = false;
    kite_pods_status_update(P, pp);
    cr_assert_str_eq(kite_agent_pjs(pp->status, "phase"), "Failed");
    /* deletion: the final grace-0 delete with the uid precondition */
    json_object *meta = json_object_object_get(pod, "metadata");
    json_object_object_add(meta, "deletionTimestamp", json_object_new_string("2023-11-14T22:13:20Z"));
    json_object_object_add(meta, "deletionGracePeriodSeconds", json_object_new_int(30));
    kite_pods_pod_event(P, "MODIFIED", pod);
    step();
    struct rec *r = last("DELETE", "/api/v1/namespaces/ns/pods/a?gracePeriodSeconds=0");
    cr_assert_not_null(r);
    cr_assert_str_eq(kite_agent_pjs(r->body, "preconditions.uid"), "uid-a");
    cr_assert_eq(json_object_get_int(kite_agent_pj(r->body, "gracePeriodSeconds")), 0);
    json_object_put(pod);
}

Test(pods, deleted_running_pod_is_stopped_then_deleted) {
    json_object *pod = mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL);
    add(json_object_get(pod));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1});
    step();
    cr_assert_str_eq(kite_agent_pjs(last_status("a"), "phase"), "Running");
    json_object *meta = json_object_object_get(pod, "metadata");
    json_object_object_add(meta, "deletionTimestamp", json_object_new_string("2023-11-14T22:13:20Z"));
    json_object_object_add(meta, "deletionGracePeriodSeconds", json_object_new_int(1));
    kite_pods_pod_event(P, "MODIFIED", pod);
    step();
    json_object *st = last_status("a");
    cr_assert_eq(json_object_get_int(kite_agent_pj(cs(st, "containerStatuses", 0), "state.terminated.exitCode")), 143);
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Failed");
    cr_assert_eq(count("DELETE", "gracePeriodSeconds=0"), 1);
    /* the DELETED event: sandbox and containers removed, the pod forgotten */
    kite_pods_pod_event(P, "DELETED", pod);
    step();
    cr_assert_eq(P->n_pods, 0);
    struct kite_container_status *v = NULL;
    size_t n = 0;
    cr_assert_eq(rt->ops->list_containers(rt, NULL, 0, &v, &n), 0);
    cr_assert_eq(n, 0);
    kite_container_statuses_free(v, n);
    json_object_put(pod);
}

Test(pods, missing_image_backs_off) {
    add(mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"nginx:1\"}]", NULL));
    step();
    json_object *c = cs(last_status("a"), "containerStatuses", 0);
    cr_assert_str_eq(kite_agent_pjs(c, "state.waiting.reason"), "ErrImagePull");
    advance(1);
    step();
    c = cs(last_status("a"), "containerStatuses", 0);
    cr_assert_str_eq(kite_agent_pjs(c, "state.waiting.reason"), "ImagePullBackOff");
    advance(10);
    step();
    cr_assert_str_eq(kite_agent_pjs(cs(last_status("a"), "containerStatuses", 0), "state.waiting.reason"), "ErrImagePull");
    cr_assert_eq(P->pods[0]->c[0].img_delay, 20 * KITE_NS_PER_SEC);
}

Test(pods, admission_rejects_what_does_not_fit) {
    json_object *ns = json_tokener_parse("{\"allocatable\":{\"cpu\":\"2\",\"memory\":\"1Gi\",\"pods\":\"110\"},"
                                         "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"}]}");
    kite_pods_node_status(P, ns);
    json_object_put(ns);
    add(mkpod("big", "Always", "[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":{\"requests\":{\"cpu\":\"3\"}}}]",
              NULL));
    step();
    json_object *st = last_status("big");
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Failed");
    cr_assert_str_eq(kite_agent_pjs(st, "reason"), "OutOfcpu");
    cr_assert_str_eq(kite_agent_pjs(st, "message"),
                     "Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000");
    cr_assert_eq(count("POST", "/events"), 1);
}

Test(pods, admission_counts_sidecars_and_overhead) {
    /* api/podrequests.h, as the scheduler counts: 1000m + the 500m sidecar + 600m overhead */
    json_object *ns = json_tokener_parse("{\"allocatable\":{\"cpu\":\"2\",\"memory\":\"1Gi\",\"pods\":\"110\"},"
                                         "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"}]}");
    kite_pods_node_status(P, ns);
    json_object_put(ns);
    json_object *pod = mkpod("side", "Always", "[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]",
                             "[{\"name\":\"s\",\"image\":\"busybox\",\"restartPolicy\":\"Always\","
                             "\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}]");
    json_object_object_add(kite_agent_pj(pod, "spec"), "overhead", json_tokener_parse("{\"cpu\":\"600m\"}"));
    add(pod);
    step();
    json_object *st = last_status("side");
    cr_assert_str_eq(kite_agent_pjs(st, "phase"), "Failed");
    cr_assert_str_eq(kite_agent_pjs(st, "message"),
                     "Pod was rejected: Node didn't have enough resource: cpu, requested: 2100, used: 0, capacity: 2000");
}

Test(pods, status_content) {
    json_object *ns = json_tokener_parse("{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"}]}");
    kite_pods_node_status(P, ns);
    json_object_put(ns);
    add(mkpod("g", "Always",
              "[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}]",
              NULL));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1});
    step();
    json_object *st = last_status("g");
    cr_assert_str_eq(kite_agent_pjs(st, "qosClass"), "Guaranteed");
    cr_assert_str_eq(kite_agent_pjs(st, "hostIP"), "10.0.0.5");
    /* the sandbox's address, from the runtime */
    cr_assert_str_eq(kite_agent_pjs(st, "podIP"), "10.88.0.2");
    cr_assert_str_eq(kite_agent_pjs(json_object_array_get_idx(json_object_object_get(st, "podIPs"), 0), "ip"), "10.88.0.2");
    cr_assert_not_null(kite_agent_pjs(st, "startTime"));
    const char *want[] = {"PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled"};
    json_object *conds = json_object_object_get(st, "conditions");
    cr_assert_eq(json_object_array_length(conds), 5);
    for (size_t i = 0; i < 5; i++) {
        cr_assert_str_eq(kite_agent_pjs(json_object_array_get_idx(conds, i), "type"), want[i]);
        cr_assert_str_eq(kite_agent_pjs(json_object_array_get_idx(conds, i), "status"), "True");
    }
    /* an unchanged condition keeps its lastTransitionTime */
    const char *t0 = kite_agent_pjs(json_object_array_get_idx(conds, 3), "lastTransitionTime");
    char *keep = kite_strdup(t0);
    advance(100);
    struct pod *pp = P->pods[0];
    json_object *again = kite_pods_build_status(P, pp, pp->status, kite_now_wall(&clk.clock));
    cr_assert_str_eq(kite_agent_pjs(json_object_array_get_idx(json_object_object_get(again, "conditions"), 3),
                         "lastTransitionTime"), keep);
    json_object_put(again);
    free(keep);
}

Test(pods, host_network_pod_reports_the_host_ip) {
    json_object *ns = json_tokener_parse("{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"}]}");
    kite_pods_node_status(P, ns);
    json_object_put(ns);
    json_object *hp = mkpod("h", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL);
    json_object_object_add(json_object_object_get(hp, "spec"), "hostNetwork", json_object_new_boolean(1));
    add(hp);
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1});
    step();
    json_object *st = last_status("h");
    cr_assert_str_eq(kite_agent_pjs(st, "podIP"), "10.0.0.5");
    cr_assert_str_eq(kite_agent_pjs(json_object_array_get_idx(json_object_object_get(st, "podIPs"), 0), "ip"), "10.0.0.5");
    cr_assert_str_eq(kite_agent_pjs(st, "hostIP"), "10.0.0.5");
}

Test(pods, recorder_dedups_and_filters_spam) {
    struct kite_recorder r;
    kite_recorder_init(&r, cl, &clk.clock, "kite-agent", "n1");
    json_object *pod = mkpod("a", "Always", "[]", NULL);
    kite_recorder_pod_event(&r, pod, "spec.containers{c}", "Normal", "Pulled", "same");
    kite_recorder_pod_event(&r, pod, "spec.containers{c}", "Normal", "Pulled", "same");
    cr_assert_eq(r.posted, 1);
    cr_assert_eq(r.patched, 1);
    struct rec *p = last("PATCH", "/api/v1/namespaces/ns/events/");
    cr_assert_eq(json_object_get_int(kite_agent_pj(p->body, "count")), 2);
    struct rec *post = last("POST", "/events");
    cr_assert_str_eq(kite_agent_pjs(post->body, "involvedObject.kind"), "Pod");
    cr_assert_str_eq(kite_agent_pjs(post->body, "involvedObject.apiVersion"), "v1");
    cr_assert_str_eq(kite_agent_pjs(post->body, "involvedObject.uid"), "uid-a");
    cr_assert_str_eq(kite_agent_pjs(post->body, "source.component"), "kite-agent");
    cr_assert_str_eq(kite_agent_pjs(post->body, "source.host"), "n1");
    /* similar events with 10 distinct messages aggregate */
    for (int i = 0; i < 12; i++) {
        char m[32];
        snprintf(m, sizeof(m), "msg %d", i);
        kite_recorder_pod_event(&r, pod, NULL, "Warning", "Failed", m);
    }
    post = last("POST", "/events");
    cr_assert(strstr(kite_agent_pjs(post->body, "message"), "(combined from similar events): "), "%s", kite_agent_pjs(post->body, "message"));
    /* 14 events so far: the burst of 25 ends at 25, then one per 5 minutes */
    for (int i = 0; i < 20; i++) kite_recorder_pod_event(&r, pod, NULL, "Normal", "X", "y");
    cr_assert_eq(r.dropped, 9);
    advance(300);
    uint64_t before = r.dropped;
    kite_recorder_pod_event(&r, pod, NULL, "Normal", "X", "y");
    cr_assert_eq(r.dropped, before);
    kite_recorder_pod_event(&r, pod, NULL, "Normal", "X", "y");
    cr_assert_eq(r.dropped, before + 1);
    json_object_put(pod);
    kite_recorder_release(&r);
}

static json_object *ctr_status(const char *pod) { return cs(last_status(pod), "containerStatuses", 0); }
static bool ctr_flag(const char *pod, const char *flag) {
    return json_object_get_boolean(json_object_object_get(ctr_status(pod), flag));
}
static json_object *cond_of(const char *pod, const char *type) {
    json_object *conds = json_object_object_get(last_status(pod), "conditions");
    for (size_t i = 0; i < json_object_array_length(conds); i++)
        if (kite_streq(kite_agent_pjs(json_object_array_get_idx(conds, i), "type"), type))
            return json_object_array_get_idx(conds, i);
    return NULL;
}
static const char *pod_cond(const char *pod, const char *type) { return kite_agent_pjs(cond_of(pod, type), "status"); }
static size_t events_with(const char *reason, const char *msg) {
    size_t n = 0;
    for (size_t i = 0; i < n_reqs; i++)
        if (strcmp(reqs[i].method, "POST") == 0 && strstr(reqs[i].path, "/events") &&
            kite_streq(kite_agent_pjs(reqs[i].body, "reason"), reason) && strstr(kite_agent_pjs(reqs[i].body, "message"), msg))
            n++;
    return n;
}
/* Steps the pods each second for s seconds of the fake clock. */
static void run_secs(int s) {
    for (int i = 0; i < s; i++) {
        advance(1);
        step();
    }
}

/* Readiness: not ready until the probe passes (the container runs meanwhile), ready at once
 * when it does, not ready again after failureThreshold failures; every failure an Unhealthy
 * event with the probe's output. */
Test(pods, readiness_probe_flips_ready) {
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1, .exec_exit_code = 1,
                                                                 .exec_output = "not yet\n"});
    add(mkpod("a", "Always",
              "[{\"name\":\"c\",\"image\":\"busybox\",\"readinessProbe\":{\"exec\":{\"command\":[\"check\"]},"
              "\"periodSeconds\":1,\"failureThreshold\":2}}]", NULL));
    step();
    run_secs(2);
    cr_assert_str_eq(kite_agent_pjs(ctr_status("a"), "state.running.startedAt") ? "running" : "", "running");
    cr_assert(!ctr_flag("a", "ready"));
    cr_assert(ctr_flag("a", "started"), "no startup probe: started once running");
    cr_assert_str_eq(pod_cond("a", "Ready"), "False");
    cr_assert_str_eq(pod_cond("a", "ContainersReady"), "False");
    cr_assert_geq(events_with("Unhealthy", "Readiness probe failed: not yet"), 1);

    kite_runtime_fake_set_exec(rt, "c", 0, "");
    run_secs(1);
    cr_assert(ctr_flag("a", "ready"));
    cr_assert_str_eq(pod_cond("a", "Ready"), "True");

    kite_runtime_fake_set_exec(rt, "c", 1, "gone");
    run_secs(1);
    cr_assert(ctr_flag("a", "ready"), "one failure is below failureThreshold 2");
    run_secs(1);
    cr_assert(!ctr_flag("a", "ready"));
    cr_assert_str_eq(pod_cond("a", "Ready"), "False");
    cr_assert_str_eq(kite_agent_pjs(last_status("a"), "phase"), "Running", "readiness never stops the container");
    cr_assert_eq(json_object_get_int(json_object_object_get(ctr_status("a"), "restartCount")), 0);
}

/* A condition True again keeps no reason or message on the server: the patch removes them (a
 * status sent whole merges by condition type, and they stayed: Ready True "ContainersNotReady"). */
Test(pods, ready_again_drops_the_reason_on_the_server) {
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1, .exec_exit_code = 1,
                                                                 .exec_output = "not yet\n"});
    add(mkpod("a", "Always",
              "[{\"name\":\"c\",\"image\":\"busybox\",\"readinessProbe\":{\"exec\":{\"command\":[\"check\"]},"
              "\"periodSeconds\":1,\"failureThreshold\":1}}]", NULL));
    step();
    run_secs(2);
    cr_assert_str_eq(kite_agent_pjs(cond_of("a", "Ready"), "reason"), "ContainersNotReady");
    kite_runtime_fake_set_exec(rt, "c", 0, "");
    run_secs(2);
    for (size_t i = 0; i < 2; i++) {
        json_object *c = cond_of("a", i ? "ContainersReady" : "Ready");
        cr_assert_str_eq(kite_agent_pjs(c, "status"), "True");
        cr_assert_null(json_object_object_get(c, "reason"), "%s", json_object_to_json_string(c));
        cr_assert_null(json_object_object_get(c, "message"), "%s", json_object_to_json_string(c));
    }
}

/* A new sandbox's address replaces the old one in podIPs (merged by ip, the old one stayed
 * beside it); conditions of others (DisruptionTarget) are left alone by an agent that has had
 * nothing acknowledged yet. */
Test(pods, status_patch_replaces_the_old_address) {
    json_object *server = json_tokener_parse(
        "{\"status\":{\"phase\":\"Running\",\"podIP\":\"10.88.0.2\",\"podIPs\":[{\"ip\":\"10.88.0.2\"}],"
        "\"nominatedNodeName\":\"n2\",\"conditions\":[{\"type\":\"DisruptionTarget\",\"status\":\"True\"},"
        "{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"ContainersNotReady\"}]}}");
    struct pod pod = {.uid = "u1", .obj = server};
    pod.status = json_tokener_parse("{\"phase\":\"Running\",\"podIP\":\"10.88.0.3\",\"podIPs\":[{\"ip\":\"10.88.0.3\"}],"
                                    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}");
    for (int acked = 0; acked < 2; acked++) {
        if (acked) pod.acked = json_tokener_parse("{\"phase\":\"Running\",\"podIP\":\"10.88.0.2\",\"podIPs\":[{\"ip\":"
                                                  "\"10.88.0.2\"}],\"conditions\":[{\"type\":\"Ready\",\"status\":"
                                                  "\"False\",\"reason\":\"ContainersNotReady\"}]}");
        json_object *patch = kite_pods_status_patch(&pod), *out = NULL;
        cr_assert_str_eq(kite_agent_pjs(patch, "metadata.uid"), "u1");
        cr_assert_eq(kite_smp_apply(server, patch, kite_registry_find_kind("", "Pod")->smp, &out, NULL), 0);
        json_object *ips = kite_agent_pj(out, "status.podIPs");
        cr_assert_eq(json_object_array_length(ips), 1, "%s", json_object_to_json_string(ips));
        cr_assert_str_eq(kite_agent_pjs(json_object_array_get_idx(ips, 0), "ip"), "10.88.0.3");
        cr_assert_str_eq(kite_agent_pjs(out, "status.nominatedNodeName"), "n2");
        json_object *conds = kite_agent_pj(out, "status.conditions");
        cr_assert_eq(json_object_array_length(conds), 2, "%s", json_object_to_json_string(conds));
        for (size_t i = 0; i < 2; i++) {
            json_object *c = json_object_array_get_idx(conds, i);
            if (kite_streq(kite_agent_pjs(c, "type"), "Ready")) cr_assert_null(json_object_object_get(c, "reason"));
            else cr_assert_str_eq(kite_agent_pjs(c, "type"), "DisruptionTarget");
        }
        json_object_put(patch);
        json_object_put(out);
    }
    json_object_put(pod.acked);
    json_object_put(pod.status);
    json_object_put(server);
}

/* Liveness: failureThreshold failures kill the container (Killing names the probe), and the
 * restart policy brings it back. */
Test(pods, liveness_probe_restarts) {
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1, .exec_exit_code = 1,
                                                                 .exec_output = "dead"});
    add(mkpod("a", "Always",
              "[{\"name\":\"c\",\"image\":\"busybox\",\"livenessProbe\":{\"exec\":{\"command\":[\"check\"]},"
              "\"periodSeconds\":1,\"failureThreshold\":3,\"initialDelaySeconds\":2}}]", NULL));
    step();
    run_secs(3);
    cr_assert_eq(events_with("Killing", "failed liveness probe"), 0, "initialDelaySeconds, then two failures");
    cr_assert(ctr_flag("a", "ready"), "liveness starts at success; no readiness probe");
    run_secs(2);
    cr_assert_eq(events_with("Killing", "Container c failed liveness probe, will be restarted"), 1);
    cr_assert_geq(events_with("Unhealthy", "Liveness probe failed: dead"), 1, "the same event again bumps its count");
    rsleep(5);
    run_secs(1);
    json_object *c = ctr_status("a");
    cr_assert_eq(json_object_get_int(json_object_object_get(c, "restartCount")), 1, "%s",
                 json_object_to_json_string(c));
    cr_assert_not_null(kite_agent_pj(c, "lastState.terminated"));
}

/* Startup: holds readiness and liveness back and keeps started false until it succeeds. */
Test(pods, startup_probe_holds_the_others) {
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1, .exec_exit_code = 1});
    add(mkpod("a", "Always",
              "[{\"name\":\"c\",\"image\":\"busybox\","
              "\"startupProbe\":{\"exec\":{\"command\":[\"s\"]},\"periodSeconds\":1,\"failureThreshold\":30},"
              "\"livenessProbe\":{\"exec\":{\"command\":[\"l\"]},\"periodSeconds\":1,\"failureThreshold\":1}}]",
              NULL));
    step();
    run_secs(5);
    cr_assert(!ctr_flag("a", "started"));
    cr_assert(!ctr_flag("a", "ready"));
    cr_assert_eq(events_with("Killing", "liveness"), 0, "liveness waits for the startup probe");
    kite_runtime_fake_set_exec(rt, "c", 0, "");
    run_secs(1);
    cr_assert(ctr_flag("a", "started"));
    cr_assert(ctr_flag("a", "ready"));
}

/* No pod runs before the node's status is known (allocatable for admission, hostIP). */
Test(pods, waits_for_the_node_status) {
    kite_pods_free(P);
    struct kite_pods_options o = {.client = cl, .runtime = rt, .clock = &clk.clock, .node_name = "n1", .seed = 1};
    cr_assert_eq(kite_pods_new(&o, &P), 0);
    add(mkpod("a", "Never", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    step();
    cr_assert_null(last_status("a"), "nothing before the node status");
    json_object *ns = json_tokener_parse("{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.7\"}]}");
    kite_pods_node_status(P, ns);
    json_object_put(ns);
    step();
    cr_assert_not_null(last_status("a"));
    cr_assert_str_eq(kite_agent_pjs(last_status("a"), "hostIP"), "10.0.0.7");
}

static int log_changes;
static void on_log_change(void *ud) { (*(int *)ud)++; }

Test(pods, log_index_names_the_current_and_previous_attempts) {
    kite_pods_log_subscribe(P, on_log_change, &log_changes);
    add(mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = 0, .exit_code = 2});
    char *path = NULL;
    bool running = true;
    cr_assert_eq(kite_pods_log_lookup(P, "ns", "nope", "c", false, &path, &running), -ENOENT);
    step();
    cr_assert_eq(kite_pods_log_lookup(P, "ns", "a", "x", false, &path, &running), -ESRCH);
    cr_assert_eq(kite_pods_log_lookup(P, "ns", "a", "c", true, &path, &running), -ENODATA);
    cr_assert_eq(kite_pods_log_lookup(P, "ns", "a", "c", false, &path, &running), 0);
    cr_assert(strstr(path, "/c/0.log"), "%s", path);
    free(path);
    int before = log_changes;
    cr_assert_gt(before, 0);
    rsleep(5);
    step(); /* exited: restarted at once as attempt 1 */
    cr_assert_gt(log_changes, before);
    cr_assert_eq(kite_pods_log_lookup(P, "ns", "a", "c", false, &path, &running), 0);
    cr_assert(strstr(path, "/c/1.log"), "%s", path);
    free(path);
    cr_assert_eq(kite_pods_log_lookup(P, "ns", "a", "c", true, &path, &running), 0);
    cr_assert(strstr(path, "/c/0.log"), "%s", path);
    cr_assert_not(running); /* a previous attempt never runs */
    free(path);
    kite_pods_log_subscribe(P, NULL, NULL);
}

/* A pod deleted from the API while the agent was down: at the first list the agent removes its
 * volume dir, unmounting its tmpfs emptyDir and secret volume (else the mounts and their memory
 * stay). Needs root. */
Test(pods, orphaned_pod_volumes_are_unmounted_and_removed) {
    if (geteuid() != 0) cr_skip_test("mounting a tmpfs needs root");
    char root[] = "/tmp/kite-pods-orphan-XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    _cleanup_free_ char *mem = kite_asprintf("%s/pods/gone-uid/volumes/kubernetes.io~empty-dir/mem", root);
    _cleanup_free_ char *sec = kite_asprintf("%s/pods/gone-uid/volumes/kubernetes.io~secret/s", root);
    _cleanup_free_ char *kept = kite_asprintf("%s/pods/uid-kept", root);
    _cleanup_free_ char *cmd = kite_asprintf("mkdir -p %s %s %s", mem, sec, kept);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(mount("tmpfs", mem, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m"), 0, "%s", strerror(errno));
    cr_assert_eq(mount("tmpfs", sec, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m"), 0, "%s", strerror(errno));
    _cleanup_free_ char *file = kite_asprintf("%s/f", mem);
    FILE *f = fopen(file, "w");
    fputs("x", f);
    fclose(f);

    kite_pods_free(P);
    struct kite_pods_options o = {.client = cl, .runtime = rt, .clock = &clk.clock, .node_name = "n1", .seed = 1,
                                  .root_dir = root};
    cr_assert_eq(kite_pods_new(&o, &P), 0);
    json_object *ns = json_tokener_parse("{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}");
    kite_pods_node_status(P, ns);
    json_object_put(ns);
    add(mkpod("kept", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    for (int i = 0; i < 5; i++) step();

    bool mounted = false, sec_mounted = false;
    FILE *m = fopen("/proc/self/mounts", "r");
    char line[4096];
    while (fgets(line, sizeof line, m)) {
        mounted |= strstr(line, mem) != NULL;
        sec_mounted |= strstr(line, sec) != NULL;
    }
    fclose(m);
    if (mounted) umount2(mem, MNT_DETACH);
    if (sec_mounted) umount2(sec, MNT_DETACH);
    cr_assert(!mounted, "the orphan's tmpfs emptyDir is still mounted");
    cr_assert(!sec_mounted, "the orphan's secret volume is still mounted");
    _cleanup_free_ char *gone = kite_asprintf("%s/pods/gone-uid", root);
    cr_assert_neq(access(gone, F_OK), 0, "the orphan's pod dir is removed");
    cr_assert_eq(access(kept, F_OK), 0, "a known pod's dir stays");
    _cleanup_free_ char *rm = kite_asprintf("rm -rf %s", root);
    cr_assert_eq(system(rm), 0);
}

/* The server's copy of a pod carrying the status the agent last sent, with changes made by
 * someone else (the node lifecycle controller during a partition). */
static json_object *server_copy(const char *name, const char *ready) {
    json_object *pod = mkpod(name, "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL);
    json_object *st = NULL;
    cr_assert_eq(json_object_deep_copy(last_status(name), &st, NULL), 0);
    json_object *conds = json_object_object_get(st, "conditions");
    for (size_t i = 0; ready && i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(kite_agent_pjs(c, "type"), "Ready")) {
            json_object_object_add(c, "status", json_object_new_string(ready));
            json_object_object_add(c, "reason", json_object_new_string("NodeNotReady"));
        }
    }
    /* a condition the agent does not own stays someone else's */
    json_object *dt = json_tokener_parse("{\"type\":\"DisruptionTarget\",\"status\":\"True\"}");
    json_object_array_add(conds, dt);
    json_object_object_add(pod, "status", st);
    return pod;
}

Test(pods, status_changed_by_others_is_repaired_at_resync) {
    add(mkpod("a", "Always", "[{\"name\":\"c\",\"image\":\"busybox\"}]", NULL));
    kite_runtime_fake_script(rt, "c", &(struct kite_fake_script){.exit_after_ns = -1});
    run_secs(2);
    cr_assert_str_eq(pod_cond("a", "Ready"), "True");
    /* the server holds what the agent sent (and another's condition): nothing to send at resync */
    add(server_copy("a", NULL));
    size_t n = count("PATCH", "/pods/a/status");
    run_secs(12);
    cr_assert_eq(count("PATCH", "/pods/a/status"), n, "the server's copy agrees: no patch");
    /* the node lifecycle controller set Ready=False while the node was unreachable; the phase is
     * unchanged, and the agent must still repair the condition within a resync period */
    add(server_copy("a", "False"));
    run_secs(12);
    cr_assert_gt(count("PATCH", "/pods/a/status"), n, "Ready=False written by another is repaired");
    cr_assert_str_eq(pod_cond("a", "Ready"), "True");
    cr_assert_str_eq(kite_agent_pjs(last_status("a"), "phase"), "Running");
}
