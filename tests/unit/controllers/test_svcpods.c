/* Services and the pods they select (svcpods.h), as both endpoints controllers are fed: which
 * Service keys a change queues, the hooks, and that nothing is worked on before every feed
 * has synced. */
#include <criterion/criterion.h>

#include "controllers/svcpods.h"
#include "fakeapi.h"

#include <stdio.h>
#include <string.h>

enum { FEED_SVCS, FEED_PODS, FEED_OTHER, N_FEEDS };

/* A controller's core as the two controllers lay theirs out: the shared part first. */
struct core {
    struct kite_svcpods sp;
    char synced_keys[8][64]; /* the keys sync was handed, in order */
    size_t n_synced;
    char gone[64];           /* the last Service svc_gone heard of */
    int resyncs;
    bool fail;               /* sync fails every key */
};

static void sync_key(void *core, const char *key) {
    struct core *c = core;
    cr_assert_lt(c->n_synced, 8);
    snprintf(c->synced_keys[c->n_synced++], sizeof c->synced_keys[0], "%s", key);
    if (c->fail) kite_svcpods_retry(&c->sp, key);
    else kite_svcpods_forget(&c->sp, key);
}
static void svc_gone(void *core, const char *key) { snprintf(((struct core *)core)->gone, 64, "%s", key); }
static void resync(void *core) {
    struct core *c = core;
    c->resyncs++;
    kite_svcpods_enqueue(&c->sp, "default/leftover");
}

static struct kite_fake_clock clk;
static struct core c;

static void setup(void) {
    kite_fake_clock_init(&clk, 0);
    memset(&c, 0, sizeof c);
    kite_svcpods_init(&c.sp, &clk.clock, N_FEEDS, 30 * KITE_NS_PER_SEC);
    c.sp.sync = sync_key;
    c.sp.svc_gone = svc_gone;
    c.sp.resync = resync;
}
static void teardown(void) { kite_svcpods_release(&c.sp); }

static json_object *service(const char *ns, const char *name, const char *selector) {
    return fakeapi_json("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{%s%s}}", name, ns,
                        selector ? "\"selector\":" : "", selector ? selector : "");
}
static json_object *pod(const char *ns, const char *name, const char *labels) {
    return fakeapi_json("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"labels\":%s}}", name, ns, labels);
}

static void feed(json_object *o, void (*fn)(void *, json_object *, uintptr_t), uintptr_t tag) {
    fn(&c, o, tag);
    json_object_put(o);
}

/* Pops every key due into keys (in no promised order); how many. */
static size_t drain(char keys[][64], size_t max) {
    size_t n = 0;
    char *k;
    while ((k = kite_wq_pop_due(&c.sp.wq, kite_now_mono(&clk.clock)))) {
        cr_assert_lt(n, max);
        snprintf(keys[n++], 64, "%s", k);
        free(k);
    }
    return n;
}
static bool has(char keys[][64], size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(keys[i], key)) return true;
    return false;
}

TestSuite(svcpods, .init = setup, .fini = teardown);

Test(svcpods, a_service_queues_itself_and_its_deletion_is_heard) {
    feed(service("default", "web", "{\"app\":\"web\"}"), kite_svcpods_svc_upsert, FEED_SVCS);
    char keys[8][64];
    cr_assert_eq(drain(keys, 8), 1);
    cr_expect_str_eq(keys[0], "default/web");
    cr_expect_not_null(kite_map_get(&c.sp.svcs, "default/web"));

    feed(service("default", "web", "{\"app\":\"web\"}"), kite_svcpods_svc_del, FEED_SVCS);
    cr_expect_null(kite_map_get(&c.sp.svcs, "default/web"));
    cr_expect_str_eq(c.gone, "default/web");
    cr_assert_eq(drain(keys, 8), 1);
    cr_expect_str_eq(keys[0], "default/web");
}

Test(svcpods, a_pod_queues_the_services_of_its_namespace_that_select_it_before_or_after) {
    feed(service("default", "web", "{\"app\":\"web\"}"), kite_svcpods_svc_upsert, FEED_SVCS);
    feed(service("default", "db", "{\"app\":\"db\"}"), kite_svcpods_svc_upsert, FEED_SVCS);
    feed(service("default", "manual", NULL), kite_svcpods_svc_upsert, FEED_SVCS); /* no selector: selects nothing */
    feed(service("other", "web", "{\"app\":\"web\"}"), kite_svcpods_svc_upsert, FEED_SVCS);
    char keys[8][64];
    cr_assert_eq(drain(keys, 8), 4);

    feed(pod("default", "p1", "{\"app\":\"web\",\"x\":\"1\"}"), kite_svcpods_pod_upsert, FEED_PODS);
    size_t n = drain(keys, 8);
    cr_expect_eq(n, 1);
    cr_expect(has(keys, n, "default/web"));
    cr_expect_not_null(kite_map_get(&c.sp.pods, "default/p1"));

    /* relabelled from web to db: both the Service it left and the one it joined */
    json_object *old = pod("default", "p1", "{\"app\":\"web\"}");
    json_object *now = pod("default", "p1", "{\"app\":\"db\"}");
    kite_svcpods_pod_update(&c, old, now, FEED_PODS);
    json_object_put(old);
    json_object_put(now);
    n = drain(keys, 8);
    cr_expect_eq(n, 2);
    cr_expect(has(keys, n, "default/web") && has(keys, n, "default/db"));

    feed(pod("default", "p1", "{\"app\":\"db\"}"), kite_svcpods_pod_del, FEED_PODS);
    n = drain(keys, 8);
    cr_expect_eq(n, 1);
    cr_expect(has(keys, n, "default/db"));
    cr_expect_null(kite_map_get(&c.sp.pods, "default/p1"));

    feed(pod("default", "lonely", "{\"app\":\"none\"}"), kite_svcpods_pod_upsert, FEED_PODS);
    cr_expect_eq(drain(keys, 8), 0);
}

Test(svcpods, pods_for_a_service_are_those_of_its_namespace_when_it_has_a_selector) {
    feed(pod("default", "a", "{\"app\":\"web\"}"), kite_svcpods_pod_upsert, FEED_PODS);
    feed(pod("default", "b", "{\"app\":\"db\"}"), kite_svcpods_pod_upsert, FEED_PODS);
    feed(pod("defaultx", "c", "{\"app\":\"web\"}"), kite_svcpods_pod_upsert, FEED_PODS); /* a namespace sharing the prefix */
    json_object *svc = service("default", "web", "{\"app\":\"web\"}");
    size_t n;
    json_object **pods = kite_svcpods_pods_for(&c.sp, "default/web", svc, &n);
    cr_expect_eq(n, 2); /* the reconciles pick the selected ones */
    for (size_t i = 0; i < n; i++) {
        cr_expect_str_eq(kite_meta_str(pods[i], "namespace"), "default");
        json_object_put(pods[i]);
    }
    free(pods);
    json_object_put(svc);

    svc = service("default", "manual", NULL);
    cr_expect_null(kite_svcpods_pods_for(&c.sp, "default/manual", svc, &n));
    cr_expect_eq(n, 0);
    json_object_put(svc);
    cr_expect_null(kite_svcpods_pods_for(&c.sp, "default/gone", NULL, &n));
    cr_expect_eq(n, 0);
}

Test(svcpods, nothing_is_worked_before_every_feed_synced_then_everything_is) {
    feed(service("default", "web", "{\"app\":\"web\"}"), kite_svcpods_svc_upsert, FEED_SVCS);
    kite_svcpods_synced(&c, FEED_SVCS);
    kite_svcpods_synced(&c, FEED_PODS);
    cr_expect_not(kite_svcpods_pending(&c));
    cr_expect_eq(kite_svcpods_step(&c), -1);
    cr_expect_eq(c.n_synced, 0);
    cr_expect_eq(c.resyncs, 0);

    kite_svcpods_synced(&c, FEED_OTHER);
    cr_expect_eq(c.resyncs, 1);
    cr_expect(kite_svcpods_pending(&c));
    cr_expect_eq(kite_svcpods_step(&c), -1);
    cr_assert_eq(c.n_synced, 2);
    cr_expect(has(c.synced_keys, 2, "default/web") && has(c.synced_keys, 2, "default/leftover"));

    /* a relist (any feed synced again) queues everything again */
    kite_svcpods_synced(&c, FEED_PODS);
    cr_expect_eq(c.resyncs, 2);
    cr_expect(kite_svcpods_pending(&c));
}

Test(svcpods, a_failed_key_comes_back_after_its_backoff) {
    c.sp.resync = NULL;
    for (int f = 0; f < N_FEEDS; f++) kite_svcpods_synced(&c, (uintptr_t)f);
    feed(service("default", "web", "{\"app\":\"web\"}"), kite_svcpods_svc_upsert, FEED_SVCS);
    c.fail = true;
    cr_expect_eq(kite_svcpods_step(&c), KITE_NS_PER_SEC); /* 1 s first */
    cr_expect_eq(c.n_synced, 1);
    kite_fake_clock_advance(&clk, KITE_NS_PER_SEC);
    cr_expect_eq(kite_svcpods_step(&c), 2 * KITE_NS_PER_SEC); /* then doubling */
    cr_expect_eq(c.n_synced, 2);
    c.fail = false;
    kite_fake_clock_advance(&clk, 2 * KITE_NS_PER_SEC);
    cr_expect_eq(kite_svcpods_step(&c), -1);
    cr_expect_eq(c.n_synced, 3);
    cr_expect_eq(kite_wq_failures(&c.sp.wq, "default/web"), 0);
}

Test(svcpods, caches_keep_the_newer_version) {
    struct kite_map m = {0};
    json_object *first = fakeapi_json("{\"metadata\":{\"name\":\"e\",\"namespace\":\"d\",\"resourceVersion\":\"7\"}}");
    kite_svcpods_cache_put_newer(&m, first);
    json_object_put(first);
    json_object *older = fakeapi_json("{\"metadata\":{\"name\":\"e\",\"namespace\":\"d\",\"resourceVersion\":\"5\"}}");
    kite_svcpods_cache_put_newer(&m, older);
    cr_expect_str_eq(kite_meta_str(kite_map_get(&m, "d/e"), "resourceVersion"), "7");
    json_object *newer = fakeapi_json("{\"metadata\":{\"name\":\"e\",\"namespace\":\"d\",\"resourceVersion\":\"9\"}}");
    kite_svcpods_cache_put_newer(&m, newer);
    cr_expect_str_eq(kite_meta_str(kite_map_get(&m, "d/e"), "resourceVersion"), "9");
    kite_svcpods_cache_del(&m, newer);
    cr_expect_null(kite_map_get(&m, "d/e"));
    json_object_put(older);
    json_object_put(newer);
    kite_svcpods_cache_release(&m);
}

/* the pod kept for every pod of the cluster is what the endpoints controllers read of it: no
 * volumes, tolerations or managedFields (a whole pod's tree is tens of KB) */
Test(svcpods, keeps_pods_cut_to_what_endpoints_read) {
    json_object *pod = fakeapi_json(
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"u1\",\"labels\":{\"app\":\"web\"},"
        "\"deletionTimestamp\":\"2030-01-01T00:00:00Z\",\"managedFields\":[{\"manager\":\"m\"}]},"
        "\"spec\":{\"nodeName\":\"n1\",\"hostname\":\"h\",\"subdomain\":\"s\",\"restartPolicy\":\"Never\","
        "\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"ports\":[{\"name\":\"http\",\"containerPort\":8080}]}],"
        "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],\"tolerations\":[{\"operator\":\"Exists\"}]},"
        "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    kite_svcpods_pod_upsert(&c.sp, pod, FEED_PODS);
    json_object_put(pod);
    json_object *kept = kite_map_get(&c.sp.pods, "default/p");
    cr_assert_not_null(kept);
    json_object *spec = kite_obj_get(kept, "spec"), *meta = kite_obj_get(kept, "metadata");
    cr_assert_null(kite_obj_get(spec, "volumes"));
    cr_assert_null(kite_obj_get(spec, "tolerations"));
    cr_assert_null(kite_obj_get(meta, "managedFields"));
    cr_assert_str_eq(kite_obj_str(spec, "nodeName"), "n1");
    cr_assert_str_eq(kite_obj_str(spec, "hostname"), "h");
    cr_assert_str_eq(kite_obj_str(spec, "subdomain"), "s");
    cr_assert_str_eq(kite_obj_str(spec, "restartPolicy"), "Never");
    cr_assert_eq(json_object_array_length(kite_obj_get(spec, "containers")), 1);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(meta, "labels"), "app"), "web");
    cr_assert_str_eq(kite_obj_str(meta, "uid"), "u1");
    cr_assert_str_eq(kite_obj_str(meta, "deletionTimestamp"), "2030-01-01T00:00:00Z");
    cr_assert_str_eq(kite_obj_path_str(kept, "status.podIP"), "10.0.0.1");
}
