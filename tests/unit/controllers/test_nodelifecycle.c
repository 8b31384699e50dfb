/* The node lifecycle controller's core on a fake clock against the in-memory API server:
 * deadlines (grace, startup grace, renewals by lease or heartbeat), what marking writes,
 * taints, pods, events, zone states and the NoExecute rate limits. */
#include "controllers/node/nodelifecycle.h"
#include "framework/ctlutil.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>
#include <stdio.h>

#define T0_S INT64_C(1893553445) /* 2030-01-02T03:04:05Z */
#define T0 "2030-01-02T03:04:05Z"
#define S KITE_NS_PER_SEC

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_nlc *nlc;
    char *alive[128]; /* nodes whose leases run_for renews every 10 s */
    size_t nalive;
    int64_t next_renew;
};

static void env_init(struct env *e) {
    kite_log_set_level(KITE_LOG_ERROR); /* the controllers' progress lines */
    kite_fake_clock_init(&e->clock, T0_S * S);
    fakeapi_init(&e->api);
    e->api.creation = T0;
    struct kite_nlc_options o = {.client = e->api.client,
                                 .clock = &e->clock.clock,
                                 .grace_ns = 50 * S,
                                 .startup_grace_ns = 60 * S,
                                 .period_ns = 5 * S,
                                 .eviction_rate = KITE_NLC_EVICTION_RATE,
                                 .secondary_rate = KITE_NLC_SECONDARY_RATE,
                                 .unhealthy_threshold = KITE_NLC_UNHEALTHY_THRESHOLD,
                                 .large_cluster = KITE_NLC_LARGE_CLUSTER};
    e->nlc = kite_nlc_new(&o);
    e->nalive = 0;
    e->next_renew = kite_now_mono(&e->clock.clock) + 10 * S;
}

static void set_alive(struct env *e, const char *name, bool alive) {
    for (size_t i = 0; i < e->nalive; i++)
        if (strcmp(e->alive[i], name) == 0) {
            if (!alive) {
                free(e->alive[i]);
                e->alive[i] = e->alive[--e->nalive];
            }
            return;
        }
    if (alive) e->alive[e->nalive++] = kite_strdup(name);
}

static void env_release(struct env *e) {
    for (size_t i = 0; i < e->nalive; i++) free(e->alive[i]);
    kite_nlc_free(e->nlc);
    fakeapi_release(&e->api);
}

static char *now_s(struct env *e) {
    char *b = kite_calloc(1, 21);
    kite_time_format(kite_now_wall(&e->clock.clock), b);
    return b;
}

static json_object *node(struct env *e, const char *name) {
    _cleanup_free_ char *p = kite_asprintf("/api/v1/nodes/%s", name);
    json_object *n = fakeapi_get(&e->api, p);
    cr_assert_not_null(n, "no node %s", name);
    return n;
}

/* A node as a kubelet registers it; ready NULL: no status at all. */
static void add_node(struct env *e, const char *name, const char *zone, const char *ready) {
    _cleanup_free_ char *hb = now_s(e), *p = kite_asprintf("/api/v1/nodes/%s", name);
    _cleanup_free_ char *labels = zone ? kite_asprintf("{\"topology.kubernetes.io/zone\":\"%s\"}", zone) : kite_strdup("{}");
    json_object *n;
    if (ready)
        n = fakeapi_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":%s},"
                         "\"spec\":{},\"status\":{\"conditions\":["
                         "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"%s\",\"lastTransitionTime\":\"%s\"},"
                         "{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"%s\",\"lastTransitionTime\":\"%s\"},"
                         "{\"type\":\"PIDPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"%s\",\"lastTransitionTime\":\"%s\"},"
                         "{\"type\":\"Ready\",\"status\":\"%s\",\"lastHeartbeatTime\":\"%s\",\"lastTransitionTime\":\"%s\"}]}}",
                         name, labels, hb, hb, hb, hb, hb, hb, ready, hb, hb);
    else
        n = fakeapi_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":%s},\"spec\":{}}",
                         name, labels);
    fakeapi_put(&e->api, p, n);
    kite_nlc_node_upsert(e->nlc, n);
}

/* The kubelet posts status: every condition's heartbeat is now; ready may change. */
static void heartbeat(struct env *e, const char *name, const char *ready) {
    _cleanup_free_ char *hb = now_s(e);
    json_object *n = node(e, name), *conds = kite_obj_get(kite_obj_get(n, "status"), "conditions");
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        const char *t = kite_obj_str(c, "type");
        kite_obj_set(c, "lastHeartbeatTime", json_object_new_string(hb));
        kite_obj_set(c, "status", json_object_new_string(strcmp(t, "Ready") == 0 ? ready : "False"));
        kite_obj_set(c, "reason", json_object_new_string("Kubelet"));
    }
    _cleanup_free_ char *p = kite_asprintf("/api/v1/nodes/%s", name);
    fakeapi_put(&e->api, p, json_object_get(n));
    kite_nlc_node_upsert(e->nlc, n);
}

static void renew_lease(struct env *e, const char *name) {
    char ts[28];
    kite_microtime_format(kite_now_wall(&e->clock.clock), ts);
    json_object *l = fakeapi_json("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"kube-node-lease\"},"
                                  "\"spec\":{\"holderIdentity\":\"%s\",\"renewTime\":\"%s\"}}", name, name, ts);
    kite_nlc_lease_upsert(e->nlc, l);
    json_object_put(l);
}

static json_object *cond(json_object *obj, const char *type) {
    json_object *conds = kite_obj_get(kite_obj_get(obj, "status"), "conditions");
    for (size_t i = 0; conds && i < json_object_array_length(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), type))
            return json_object_array_get_idx(conds, i);
    return NULL;
}

static const char *ready_of(struct env *e, const char *name) { return kite_obj_str(cond(node(e, name), "Ready"), "status"); }

static bool has_taint(struct env *e, const char *name, const char *key, const char *effect) {
    json_object *ts = kite_obj_get(kite_obj_get(node(e, name), "spec"), "taints");
    for (size_t i = 0; ts && i < json_object_array_length(ts); i++) {
        json_object *t = json_object_array_get_idx(ts, i);
        if (kite_streq(kite_obj_str(t, "key"), key) && kite_streq(kite_obj_str(t, "effect"), effect)) return true;
    }
    return false;
}

static size_t ntaints(struct env *e, const char *name) {
    json_object *ts = kite_obj_get(kite_obj_get(node(e, name), "spec"), "taints");
    return ts ? json_object_array_length(ts) : 0;
}

static void renew_lease(struct env *e, const char *name);

/* Advances the clock by ns in steps as the runner would wake: at each due time, and every
 * 10 s the alive nodes renew their leases. */
static void run_for(struct env *e, int64_t ns) {
    int64_t end = kite_now_mono(&e->clock.clock) + ns;
    for (;;) {
        int64_t now = kite_now_mono(&e->clock.clock);
        if (now >= e->next_renew) {
            for (size_t i = 0; i < e->nalive; i++) renew_lease(e, e->alive[i]);
            e->next_renew += 10 * S;
        }
        int64_t next = kite_nlc_step(e->nlc);
        if (kite_nlc_pending(e->nlc)) continue;
        if (now >= end) break;
        kite_fake_clock_advance(&e->clock, KITE_MIN(KITE_MIN(KITE_MAX(next, 1), end - now), e->next_renew - now));
    }
}

#define UR "node.kubernetes.io/unreachable"
#define NR "node.kubernetes.io/not-ready"

Test(nodelifecycle, marked_at_the_grace_deadline_not_before) {
    struct env e;
    env_init(&e);
    add_node(&e, "n1", NULL, "True");
    add_node(&e, "n2", NULL, "True");
    run_for(&e, 0);
    cr_assert_eq(fakeapi_events(&e.api, "RegisteredNode", "n1"), 1);
    set_alive(&e, "n2", true); /* n2 keeps renewing its lease, n1 stops */
    run_for(&e, 49 * S + 900 * KITE_NS_PER_MS);
    cr_assert_str_eq(ready_of(&e, "n1"), "True");
    /* the runner's next wake-up is the deadline itself, not a sweep later */
    int64_t next = kite_nlc_step(e.nlc);
    cr_assert_leq(next, 100 * KITE_NS_PER_MS, "next step in %lld ns", (long long)next);
    run_for(&e, 100 * KITE_NS_PER_MS);
    cr_assert_str_eq(ready_of(&e, "n1"), "Unknown");
    cr_assert_str_eq(ready_of(&e, "n2"), "True", "a renewing lease keeps a node alive");
    json_object *n1 = node(&e, "n1");
    const char *types[] = {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"};
    for (size_t i = 0; i < 4; i++) {
        json_object *c = cond(n1, types[i]);
        cr_assert_str_eq(kite_obj_str(c, "status"), "Unknown");
        cr_assert_str_eq(kite_obj_str(c, "reason"), "NodeStatusUnknown");
        cr_assert_str_eq(kite_obj_str(c, "message"), "Kubelet stopped posting node status.");
        cr_assert_str_eq(kite_obj_str(c, "lastHeartbeatTime"), T0, "the last heartbeat is kept");
        cr_assert_str_eq(kite_obj_str(c, "lastTransitionTime"), "2030-01-02T03:04:55Z");
    }
    cr_assert_eq(fakeapi_events(&e.api, "NodeNotReady", "n1"), 1);
    /* marked once: later steps write nothing more */
    size_t patches = fakeapi_count(&e.api, "PATCH", "/nodes/n1/status");
    run_for(&e, 120 * S);
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", "/nodes/n1/status"), patches);
    env_release(&e);
}

/* Every request the fake answers takes 10 ms of the fake clock; when n0's status is patched. */
struct slow_api {
    struct env *e;
    int64_t n0_marked;
};
static void slow_request(void *ud, const char *method, const char *path) {
    struct slow_api *s = ud;
    kite_fake_clock_advance(&s->e->clock, 10 * KITE_NS_PER_MS);
    if (!s->n0_marked && strcmp(method, "PATCH") == 0 && strcmp(path, "/api/v1/nodes/n0/status") == 0)
        s->n0_marked = kite_now_mono(&s->e->clock.clock);
}

/* Events take a request each, and a start-up has one RegisteredNode per node (a mass failure one
 * NodeNotReady per node and one per pod): a deadline passing while they are posted is met within
 * a request of it, not after them all. */
Test(nodelifecycle, a_deadline_is_not_held_up_by_events) {
    struct env e;
    env_init(&e);
    struct slow_api s = {.e = &e};
    e.api.on_request = slow_request, e.api.on_request_ud = &s;
    int64_t start = kite_now_mono(&e.clock.clock);
    add_node(&e, "n0", NULL, "True");
    run_for(&e, 45 * S);
    for (int i = 1; i <= 2000; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        add_node(&e, name, NULL, "True"); /* 2000 events: 20 s of requests */
    }
    while (!s.n0_marked && kite_now_mono(&e.clock.clock) - start < 120 * S) {
        int64_t next = kite_nlc_step(e.nlc);
        if (!s.n0_marked && !kite_nlc_pending(e.nlc)) kite_fake_clock_advance(&e.clock, KITE_MAX(next, 1));
    }
    cr_assert_gt(s.n0_marked, 0, "n0 was never marked");
    cr_assert_leq(s.n0_marked - start, 51 * S, "n0 marked %.2f s after its last renewal (grace 50 s)",
                  (double)(s.n0_marked - start) / S);
    cr_assert_str_eq(ready_of(&e, "n0"), "Unknown");
    /* the events put off are posted in the steps after */
    for (int i = 0; i < 10 && fakeapi_events(&e.api, "NodeNotReady", "n0") == 0; i++) kite_nlc_step(e.nlc);
    cr_assert_eq(fakeapi_events(&e.api, "RegisteredNode", "n1"), 1);
    cr_assert_eq(fakeapi_events(&e.api, "RegisteredNode", "n2000"), 1);
    cr_assert_eq(fakeapi_events(&e.api, "NodeNotReady", "n0"), 1);
    env_release(&e);
}

/* A start-up posts one RegisteredNode per node: they go out KITE_CTL_WORKERS at once (one at a
 * time, 92,000 of them behind a busy apiserver took minutes), every one of them. */
Test(nodelifecycle, events_are_posted_by_the_workers_at_once) {
    struct env e;
    env_init(&e);
    struct fakeapi_meter m = {.method = "POST", .part = "/events", .delay_us = 2000};
    e.api.on_request = fakeapi_meter_hook, e.api.on_request_ud = &m;
    for (int i = 0; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        add_node(&e, name, NULL, "True");
    }
    kite_nlc_step(e.nlc);
    for (int i = 0; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        cr_assert_eq(fakeapi_events(&e.api, "RegisteredNode", name), 1, "%s", name);
    }
    cr_assert_gt(atomic_load(&m.most), 1, "the events went out one at a time");
    cr_assert_leq(atomic_load(&m.most), KITE_CTL_WORKERS);
    env_release(&e);
}

Test(nodelifecycle, heartbeats_keep_a_node_alive_and_bring_it_back) {
    struct env e;
    env_init(&e);
    add_node(&e, "n1", NULL, "True");
    for (int i = 0; i < 10; i++) {
        run_for(&e, 40 * S);
        heartbeat(&e, "n1", "True");
    }
    cr_assert_str_eq(ready_of(&e, "n1"), "True");
    run_for(&e, 51 * S);
    cr_assert_str_eq(ready_of(&e, "n1"), "Unknown");
    heartbeat(&e, "n1", "True");
    run_for(&e, 1 * S);
    cr_assert_str_eq(ready_of(&e, "n1"), "True");
    cr_assert_eq(ntaints(&e, "n1"), 0, "taints go when Ready again");
    env_release(&e);
}

Test(nodelifecycle, startup_grace_and_never_updated) {
    struct env e;
    env_init(&e);
    add_node(&e, "n0", NULL, "True");
    add_node(&e, "new", NULL, NULL);
    run_for(&e, 55 * S);
    renew_lease(&e, "n0");
    cr_assert_null(cond(node(&e, "new"), "Ready"), "within the startup grace");
    run_for(&e, 4 * S); /* 59 s */
    cr_assert_null(cond(node(&e, "new"), "Ready"));
    run_for(&e, 1 * S + 1);
    json_object *n = node(&e, "new");
    const char *types[] = {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"};
    for (size_t i = 0; i < 4; i++) {
        json_object *c = cond(n, types[i]);
        cr_assert_not_null(c, "%s", types[i]);
        cr_assert_str_eq(kite_obj_str(c, "status"), "Unknown");
        cr_assert_str_eq(kite_obj_str(c, "reason"), "NodeStatusNeverUpdated");
        cr_assert_str_eq(kite_obj_str(c, "message"), "Kubelet never posted node status.");
        cr_assert_str_eq(kite_obj_str(c, "lastHeartbeatTime"), T0, "its creation");
    }
    /* the heartbeat the controller wrote is not taken for the kubelet's */
    size_t patches = fakeapi_count(&e.api, "PATCH", "/nodes/new/status");
    run_for(&e, 200 * S);
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", "/nodes/new/status"), patches);
    env_release(&e);
}

Test(nodelifecycle, lease_renewals_alone_keep_a_silent_node_alive) {
    struct env e;
    env_init(&e);
    add_node(&e, "quiet", NULL, NULL);
    for (int i = 0; i < 20; i++) {
        renew_lease(&e, "quiet");
        run_for(&e, 10 * S);
    }
    cr_assert_null(cond(node(&e, "quiet"), "Ready"), "never marked while its lease is renewed");
    run_for(&e, 51 * S);
    cr_assert_str_eq(kite_obj_str(cond(node(&e, "quiet"), "Ready"), "reason"), "NodeStatusNeverUpdated");
    env_release(&e);
}

Test(nodelifecycle, noschedule_taints_mirror_conditions) {
    struct env e;
    env_init(&e);
    add_node(&e, "n1", NULL, "True");
    add_node(&e, "n2", NULL, "True");
    set_alive(&e, "n2", true);
    run_for(&e, 0);
    cr_assert_eq(ntaints(&e, "n1"), 0);
    heartbeat(&e, "n1", "False");
    run_for(&e, 0);
    cr_assert(has_taint(&e, "n1", NR, "NoSchedule"));
    cr_assert(has_taint(&e, "n1", NR, "NoExecute"), "first in its zone: at once");
    /* memory pressure and a cordon, with a taint of someone else's kept */
    json_object *n = node(&e, "n2");
    kite_obj_set(cond(n, "MemoryPressure"), "status", json_object_new_string("True"));
    kite_obj_set(kite_obj_get(n, "spec"), "unschedulable", json_object_new_boolean(true));
    kite_obj_set(kite_obj_get(n, "spec"), "taints", fakeapi_json("[{\"key\":\"team\",\"value\":\"a\",\"effect\":\"NoSchedule\"}]"));
    kite_nlc_node_upsert(e.nlc, n);
    run_for(&e, 0);
    cr_assert(has_taint(&e, "n2", "node.kubernetes.io/memory-pressure", "NoSchedule"));
    cr_assert(has_taint(&e, "n2", "node.kubernetes.io/unschedulable", "NoSchedule"));
    cr_assert(has_taint(&e, "n2", "team", "NoSchedule"));
    cr_assert_eq(ntaints(&e, "n2"), 3);
    n = node(&e, "n2");
    kite_obj_set(cond(n, "MemoryPressure"), "status", json_object_new_string("False"));
    json_object_object_del(kite_obj_get(n, "spec"), "unschedulable");
    kite_nlc_node_upsert(e.nlc, n);
    run_for(&e, 0);
    cr_assert_eq(ntaints(&e, "n2"), 1);
    cr_assert(has_taint(&e, "n2", "team", "NoSchedule"));
    /* not ready -> unreachable swaps the NoExecute taint at once */
    run_for(&e, 51 * S);
    cr_assert_str_eq(ready_of(&e, "n1"), "Unknown");
    cr_assert(has_taint(&e, "n1", UR, "NoExecute") && has_taint(&e, "n1", UR, "NoSchedule"));
    cr_assert(!has_taint(&e, "n1", NR, "NoExecute") && !has_taint(&e, "n1", NR, "NoSchedule"));
    env_release(&e);
}

Test(nodelifecycle, pods_of_a_node_not_ready) {
    struct env e;
    env_init(&e);
    add_node(&e, "n1", NULL, "True");
    add_node(&e, "n2", NULL, "True");
    fakeapi_put(&e.api, "/api/v1/namespaces/default/pods/p1",
                fakeapi_json("{\"metadata\":{\"name\":\"p1\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\"},"
                             "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
                             "{\"type\":\"ContainersReady\",\"status\":\"True\"}]}}"));
    fakeapi_put(&e.api, "/api/v1/namespaces/default/pods/p2",
                fakeapi_json("{\"metadata\":{\"name\":\"p2\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n2\"},"
                             "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"));
    set_alive(&e, "n2", true);
    run_for(&e, 60 * S);
    cr_assert_str_eq(ready_of(&e, "n1"), "Unknown");
    json_object *p1 = fakeapi_get(&e.api, "/api/v1/namespaces/default/pods/p1");
    cr_assert_str_eq(kite_obj_str(cond(p1, "Ready"), "status"), "False");
    cr_assert_str_eq(kite_obj_str(cond(p1, "ContainersReady"), "status"), "True", "only Ready changes");
    cr_assert_eq(fakeapi_events(&e.api, "NodeNotReady", "p1"), 1);
    json_object *p2 = fakeapi_get(&e.api, "/api/v1/namespaces/default/pods/p2");
    cr_assert_str_eq(kite_obj_str(cond(p2, "Ready"), "status"), "True");
    /* a pod reporting Ready later on the silent node is set back to False */
    json_object *p3 = fakeapi_put(&e.api, "/api/v1/namespaces/default/pods/p3",
                                  fakeapi_json("{\"metadata\":{\"name\":\"p3\",\"namespace\":\"default\"},"
                                               "\"spec\":{\"nodeName\":\"n1\"},"
                                               "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"));
    kite_nlc_pod_upsert(e.nlc, p3);
    run_for(&e, 0);
    p3 = fakeapi_get(&e.api, "/api/v1/namespaces/default/pods/p3");
    cr_assert_str_eq(kite_obj_str(cond(p3, "Ready"), "status"), "False");
    env_release(&e);
}

static void add_zone(struct env *e, const char *zone, int n, int dead) {
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s-%d", zone, i);
        add_node(e, name, zone, "True");
        set_alive(e, name, i >= dead); /* the first `dead` ones never renew */
    }
}

static int count_noexec(struct env *e, const char *zone, int n) {
    int c = 0;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s-%d", zone, i);
        c += has_taint(e, name, UR, "NoExecute");
    }
    return c;
}

Test(nodelifecycle, noexecute_taints_at_the_zone_rate) {
    struct env e;
    env_init(&e);
    add_zone(&e, "a", 10, 2); /* 2 of 10 dead: Normal, 0.1 nodes/s */
    run_for(&e, 51 * S);
    enum kite_zone_state st;
    double rate;
    cr_assert_eq(kite_nlc_zone(e.nlc, ":a", &st, &rate, NULL), 0);
    cr_assert_eq(st, KITE_ZONE_NORMAL);
    cr_assert_float_eq(rate, 0.1, 1e-9);
    cr_assert_eq(count_noexec(&e, "a", 10), 1, "one token at once");
    run_for(&e, 8 * S);
    cr_assert_eq(count_noexec(&e, "a", 10), 1, "the next after 10 s");
    run_for(&e, 1 * S + 1);
    cr_assert_eq(count_noexec(&e, "a", 10), 2);
    env_release(&e);
}

Test(nodelifecycle, zone_states) {
    struct env e;
    env_init(&e);
    add_zone(&e, "small", 4, 3);
    add_zone(&e, "big", 60, 40);
    add_zone(&e, "gone", 2, 2);
    run_for(&e, 61 * S);
    enum kite_zone_state st;
    double rate;
    size_t queued;
    cr_assert_eq(kite_nlc_zone(e.nlc, ":small", &st, &rate, NULL), 0);
    cr_assert_eq(st, KITE_ZONE_PARTIAL, "3 of 4 not Ready: %s", kite_zone_state_names[st]);
    cr_assert_float_eq(rate, 0, 1e-9, "a small unhealthy zone stops");
    cr_assert_eq(kite_nlc_zone(e.nlc, ":big", &st, &rate, &queued), 0);
    cr_assert_eq(st, KITE_ZONE_PARTIAL);
    cr_assert_float_eq(rate, 0.01, 1e-9, "a large one goes on at the secondary rate");
    cr_assert_eq(kite_nlc_zone(e.nlc, ":gone", &st, &rate, NULL), 0);
    cr_assert_eq(st, KITE_ZONE_FULL);
    cr_assert_float_eq(rate, 0.1, 1e-9, "a fully disrupted zone among healthy ones: the normal rate");
    cr_assert_eq(count_noexec(&e, "gone", 2), 2);
    cr_assert_eq(count_noexec(&e, "small", 4), 0);
    cr_assert_eq(count_noexec(&e, "big", 60), 1, "the token the bucket held at 50 s");
    cr_assert_eq(queued, 39, "big's other dead nodes wait in its queue (%zu)", queued);
    run_for(&e, 88 * S); /* 149 s */
    cr_assert_eq(count_noexec(&e, "big", 60), 1, "no token before 100 s at 0.01/s");
    run_for(&e, 2 * S);
    cr_assert_eq(count_noexec(&e, "big", 60), 2);
    env_release(&e);
}

Test(nodelifecycle, every_zone_down_stops_evictions) {
    struct env e;
    env_init(&e);
    add_zone(&e, "a", 3, 0);
    add_zone(&e, "b", 2, 2);
    /* zone b dies (a stays up): its nodes get NoExecute at the normal rate */
    run_for(&e, 65 * S);
    cr_assert_eq(count_noexec(&e, "b", 2), 2);
    /* then a too: every zone fully disrupted, NoExecute taints come off and none go on */
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "a-%d", i);
        set_alive(&e, name, false);
    }
    run_for(&e, 60 * S);
    enum kite_zone_state st;
    double rate;
    cr_assert_eq(kite_nlc_zone(e.nlc, ":a", &st, &rate, NULL), 0);
    cr_assert_eq(st, KITE_ZONE_FULL);
    cr_assert_float_eq(rate, 0, 1e-9);
    cr_assert_eq(count_noexec(&e, "a", 3), 0);
    cr_assert_eq(count_noexec(&e, "b", 2), 0, "taken off in master disruption mode");
    cr_assert(has_taint(&e, "a-0", UR, "NoSchedule"), "NoSchedule taints stay");
    /* one node back: out of that mode, with the normal rate again */
    heartbeat(&e, "a-0", "True");
    run_for(&e, 1 * S);
    cr_assert_eq(kite_nlc_zone(e.nlc, ":a", &st, &rate, NULL), 0);
    cr_assert_eq(st, KITE_ZONE_NORMAL, "%s", kite_zone_state_names[st]);
    cr_assert_float_eq(rate, 0.1, 1e-9);
    cr_assert_eq(count_noexec(&e, "a", 3), 0, "a rate leaving 0 starts with a drained bucket (SwapLimiter)");
    run_for(&e, 10 * S);
    cr_assert_eq(count_noexec(&e, "a", 3), 1, "tainting resumes, one token at a time in each zone");
    cr_assert_eq(count_noexec(&e, "b", 2), 1);
    env_release(&e);
}
