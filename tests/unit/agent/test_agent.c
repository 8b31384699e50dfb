/* The agent core against the in-memory API (agent_fake_api.c) on a fake clock: no network,
 * no sleeps. A fake status source stands in for the node status setters. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "agent/agent.h"
#include "json/patch.h"
#include "agent_fake_api.h"
#include "agent/runtime/runtime.h"
#include "test_nodestatus_util.h"

#define T0_WALL (INT64_C(1796226146) * KITE_NS_PER_SEC)
#define SEC KITE_NS_PER_SEC

struct env {
    struct kite_fake_clock clk;
    struct fake_api api;
    struct kite_client *client;
    struct kite_agent_config cfg;
    struct kite_agent *a;
    json_object *machine; /* what the fake status source reports (heartbeats added per call) */
    int computes;
    const char *event_reason; /* next compute emits this event */
    json_object *last_prev;   /* the acknowledged status the last compute was given */
};

static int fake_status(void *ud, json_object *prev, json_object **ret, struct kite_ns_events *ev) {
    struct env *e = ud;
    e->computes++;
    json_object_put(e->last_prev);
    e->last_prev = prev ? json_object_get(prev) : NULL;
    json_object *st = NULL;
    json_object_deep_copy(e->machine, &st, NULL);
    char ts[21];
    kite_time_format(kite_now_wall(&e->clk.clock), ts);
    json_object *conds = json_object_object_get(st, "conditions");
    for (size_t i = 0; i < json_object_array_length(conds); i++)
        json_object_object_add(json_object_array_get_idx(conds, i), "lastHeartbeatTime", json_object_new_string(ts));
    if (e->event_reason) {
        ev->v = kite_realloc(ev->v, (ev->n + 1) * sizeof(*ev->v));
        ev->v[ev->n++] = (struct kite_ns_event){"Normal", kite_strdup(e->event_reason), kite_strdup("msg")};
        e->event_reason = NULL;
    }
    *ret = st;
    return 0;
}

static const char *MACHINE =
    "{\"capacity\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\"},"
    "\"allocatable\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\"},"
    "\"conditions\":["
    "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"reason\":\"KubeletHasSufficientMemory\"},"
    "{\"type\":\"DiskPressure\",\"status\":\"False\",\"reason\":\"KubeletHasNoDiskPressure\"},"
    "{\"type\":\"PIDPressure\",\"status\":\"False\",\"reason\":\"KubeletHasSufficientPID\"},"
    "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\"}],"
    "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.5\"},{\"type\":\"Hostname\",\"address\":\"n1\"}],"
    "\"images\":[{\"names\":[\"a:1\"],\"sizeBytes\":100}]}";

static void env_init(struct env *e) {
    memset(e, 0, sizeof(*e));
    kite_fake_clock_init(&e->clk, T0_WALL);
    fake_api_init(&e->api);
    e->client = fake_api_client(&e->api);
    kite_agent_config_init(&e->cfg);
    free(e->cfg.node_name);
    e->cfg.node_name = kite_strdup("N1");
    e->machine = json_tokener_parse(MACHINE);
}

static void env_start(struct env *e) {
    struct kite_agent_options o = {.config = &e->cfg, .client = e->client, .clock = &e->clk.clock,
                                   .status_fn = fake_status, .status_ud = e, .seed = 42};
    char *err = NULL;
    cr_assert_eq(kite_agent_new(&o, &e->a, &err), 0, "%s", err ? err : "");
}

static void env_release(struct env *e) {
    json_object_put(e->last_prev);
    kite_agent_free(e->a);
    kite_client_free(e->client);
    kite_agent_config_release(&e->cfg);
    fake_api_release(&e->api);
    json_object_put(e->machine);
}

static int64_t mono(struct env *e) { return kite_now_mono(&e->clk.clock); }

/* Runs the agent's timers until the fake clock has advanced by d. */
static void run_for(struct env *e, int64_t d) {
    int64_t end = mono(e) + d;
    for (int guard = 0; guard < 100000; guard++) {
        int64_t next = kite_agent_step(e->a);
        if (next > end) {
            kite_fake_clock_advance(&e->clk, end - mono(e));
            return;
        }
        if (next > mono(e)) kite_fake_clock_advance(&e->clk, next - mono(e));
    }
    cr_assert_fail("agent loop did not settle");
}

static const char *jstr(json_object *o, const char *path) {
    /* dotted path lookup; "metadata.labels.kubernetes\\.io/os" not needed: keys looked up whole after first dot */
    char *copy = kite_strdup(path), *save = NULL;
    json_object *cur = o;
    for (char *t = strtok_r(copy, ".", &save); t && cur; t = strtok_r(NULL, ".", &save))
        if (!json_object_object_get_ex(cur, t, &cur)) cur = NULL;
    free(copy);
    return cur ? json_object_get_string(cur) : NULL;
}

static json_object *label(json_object *node, const char *key) {
    json_object *m = json_object_object_get(json_object_object_get(node, "metadata"), "labels");
    return json_object_object_get(m, key);
}

static const char *owner_uid(json_object *lease) {
    json_object *refs = json_object_object_get(json_object_object_get(lease, "metadata"), "ownerReferences");
    return refs ? jstr(json_object_array_get_idx(refs, 0), "uid") : NULL;
}

/* Registered and settled: the fast updates are over and the lease exists. */
static void env_up(struct env *e) {
    env_start(e);
    run_for(e, 5 * SEC);
    cr_assert_not_null(e->api.node);
    cr_assert_not_null(e->api.lease);
    fake_api_clear(&e->api);
}

Test(agent, registers_node_and_creates_owned_lease) {
    struct env e;
    env_init(&e);
    char *err = NULL;
    cr_assert_eq(kite_agent_config_set_flag(&e.cfg, "node-labels", "role=edge,zone=a", &err), 0);
    cr_assert_eq(kite_agent_config_set_flag(&e.cfg, "register-with-taints", "dedicated=infra:NoExecute", &err), 0);
    cr_assert_eq(kite_agent_config_set_flag(&e.cfg, "register-schedulable", "false", &err), 0);
    cr_assert_eq(kite_agent_config_set_flag(&e.cfg, "pod-cidr", "10.244.3.0/24", &err), 0);
    e.event_reason = "NodeHasSufficientMemory";
    env_start(&e);
    cr_assert_str_eq(kite_agent_node_name(e.a), "n1", "node names are lower-cased");
    run_for(&e, 1 * SEC);
    struct fake_req *post = fake_api_find(&e.api, "POST", "/api/v1/nodes", 0);
    cr_assert_not_null(post);
    json_object *n = post->body;
    cr_assert_str_eq(jstr(n, "metadata.name"), "n1");
    cr_assert_str_eq(json_object_get_string(label(n, "kubernetes.io/hostname")), "n1");
    cr_assert_str_eq(json_object_get_string(label(n, "kubernetes.io/os")), "linux");
    cr_assert_not_null(label(n, "kubernetes.io/arch"));
    cr_assert_not_null(label(n, "beta.kubernetes.io/arch"));
    cr_assert_str_eq(json_object_get_string(label(n, "beta.kubernetes.io/os")), "linux");
    cr_assert_str_eq(json_object_get_string(label(n, "role")), "edge");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(
                         json_object_object_get(json_object_object_get(n, "metadata"), "annotations"),
                         "volumes.kubernetes.io/controller-managed-attach-detach")),
                     "true");
    json_object *spec = json_object_object_get(n, "spec");
    cr_assert(json_object_get_boolean(json_object_object_get(spec, "unschedulable")));
    json_object *taints = json_object_object_get(spec, "taints");
    cr_assert_eq(json_object_array_length(taints), 2);
    cr_assert_str_eq(jstr(json_object_array_get_idx(taints, 0), "key"), "dedicated");
    cr_assert_str_eq(jstr(json_object_array_get_idx(taints, 0), "effect"), "NoExecute");
    cr_assert_str_eq(jstr(json_object_array_get_idx(taints, 1), "key"), "node.kubernetes.io/unschedulable");
    /* --pod-cidr names the node's pod range, as a kubelet given it does with no controller */
    cr_assert_str_eq(jstr(spec, "podCIDR"), "10.244.3.0/24");
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(json_object_object_get(spec, "podCIDRs"), 0)),
                     "10.244.3.0/24");
    cr_assert_not_null(json_object_object_get(json_object_object_get(n, "status"), "capacity"));
    /* lease: GET 404 then POST, owned by the Node */
    cr_assert_eq(fake_api_count(&e.api, "POST", "/leases"), 1);
    json_object *l = e.api.lease;
    cr_assert_str_eq(jstr(l, "spec.holderIdentity"), "n1");
    cr_assert_eq(json_object_get_int(json_object_object_get(json_object_object_get(l, "spec"), "leaseDurationSeconds")), 40);
    cr_assert_eq(strlen(jstr(l, "spec.renewTime")), 27, "MicroTime: %s", jstr(l, "spec.renewTime"));
    cr_assert_str_eq(owner_uid(l), "uid-1");
    json_object *ref = json_object_array_get_idx(
        json_object_object_get(json_object_object_get(l, "metadata"), "ownerReferences"), 0);
    cr_assert_str_eq(jstr(ref, "kind"), "Node");
    cr_assert_str_eq(jstr(ref, "apiVersion"), "v1");
    cr_assert_str_eq(jstr(ref, "name"), "n1");
    /* the transition event went to default with the kubelet's node reference */
    struct fake_req *ev = fake_api_find(&e.api, "POST", "/api/v1/namespaces/default/events", 0);
    cr_assert_not_null(ev);
    cr_assert_str_eq(jstr(ev->body, "reason"), "NodeHasSufficientMemory");
    cr_assert_str_eq(jstr(ev->body, "involvedObject.kind"), "Node");
    /* kubectl events --for node/n1 selects on involvedObject.apiVersion=v1 */
    cr_assert_str_eq(jstr(ev->body, "involvedObject.apiVersion"), "v1");
    cr_assert_str_eq(jstr(ev->body, "involvedObject.uid"), "n1");
    cr_assert_str_eq(jstr(ev->body, "source.component"), "kubelet");
    cr_assert_str_eq(jstr(ev->body, "reportingInstance"), "n1");
    env_release(&e);
}

Test(agent, heartbeat_only_changes_send_no_patch_and_lease_is_put_without_get) {
    struct env e;
    env_init(&e);
    env_up(&e);
    run_for(&e, 100 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);
    cr_assert_geq(e.computes, 10, "status recomputed every 10 s");
    size_t puts = fake_api_count(&e.api, "PUT", "/leases/n1");
    cr_assert(puts >= 9 && puts <= 10, "lease PUT every 10-10.4 s: %zu", puts);
    cr_assert_eq(fake_api_count(&e.api, "GET", NULL), 0);
    cr_assert_eq(fake_api_count(&e.api, NULL, NULL), puts);
    env_release(&e);
}

Test(agent, new_image_patches_only_images) {
    struct env e;
    env_init(&e);
    env_up(&e);
    json_object *imgs = json_tokener_parse("[{\"names\":[\"b:2\"],\"sizeBytes\":500},{\"names\":[\"a:1\"],\"sizeBytes\":100}]");
    json_object_object_add(e.machine, "images", imgs);
    run_for(&e, 11 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", "/api/v1/nodes/n1/status"), 1);
    struct fake_req *p = fake_api_find(&e.api, "PATCH", "/status", 0);
    const char *s = json_object_to_json_string_ext(p->body, JSON_C_TO_STRING_PLAIN);
    cr_assert_str_eq(s, "{\"status\":{\"images\":[{\"names\":[\"b:2\"],\"sizeBytes\":500},"
                        "{\"names\":[\"a:1\"],\"sizeBytes\":100}]}}");
    /* acknowledged: no further patch */
    fake_api_clear(&e.api);
    run_for(&e, 30 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);
    env_release(&e);
}

Test(agent, condition_flip_patches_only_that_condition) {
    struct env e;
    env_init(&e);
    env_up(&e);
    json_object *mp = json_object_array_get_idx(json_object_object_get(e.machine, "conditions"), 0);
    json_object_object_add(mp, "status", json_object_new_string("True"));
    json_object_object_add(mp, "reason", json_object_new_string("KubeletHasInsufficientMemory"));
    run_for(&e, 11 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 1);
    json_object *st = json_object_object_get(fake_api_find(&e.api, "PATCH", "/status", 0)->body, "status");
    json_object *conds = json_object_object_get(st, "conditions");
    cr_assert_eq(json_object_array_length(conds), 1, "%s", json_object_to_json_string(st));
    cr_assert_str_eq(jstr(json_object_array_get_idx(conds, 0), "type"), "MemoryPressure");
    cr_assert_str_eq(jstr(json_object_array_get_idx(conds, 0), "status"), "True");
    cr_assert_null(json_object_object_get(st, "images"));
    cr_assert_null(json_object_object_get(st, "capacity"));
    /* the server merged it by type: four conditions, MemoryPressure True */
    json_object *server = json_object_object_get(json_object_object_get(e.api.node, "status"), "conditions");
    cr_assert_eq(json_object_array_length(server), 4);
    env_release(&e);
}

Test(agent, report_frequency_forces_a_patch) {
    struct env e;
    env_init(&e);
    env_up(&e);
    run_for(&e, 290 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);
    run_for(&e, 25 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 1);
    /* only heartbeats changed: the patch carries conditions and nothing else */
    json_object *st = json_object_object_get(fake_api_find(&e.api, "PATCH", "/status", 0)->body, "status");
    json_object_object_foreach(st, k, v) {
        (void)v;
        cr_assert(kite_streq(k, "conditions") || kite_startswith(k, "$setElementOrder"), "unexpected %s", k);
    }
    env_release(&e);
}

/* Each renewal sends back the Lease the server last returned (its resourceVersion, the labels
 * someone else set), with a new renewTime, and never the members the server keeps anyway. */
Test(agent, lease_renewal_sends_back_the_answer_with_a_new_renew_time) {
    struct env e;
    env_init(&e);
    e.api.lease_server_fields = true;
    env_up(&e);
    run_for(&e, 45 * SEC);
    size_t n = fake_api_count(&e.api, "PUT", "/leases/n1");
    cr_assert_geq(n, 4);
    cr_assert_eq(fake_api_count(&e.api, "GET", NULL), 0);
    const char *prev_time = NULL;
    int prev_rv = -1;
    for (size_t i = 0; i < n; i++) {
        json_object *b = fake_api_find(&e.api, "PUT", "/leases/n1", i)->body;
        cr_assert_not_null(b);
        json_object *meta = json_object_object_get(b, "metadata"), *spec = json_object_object_get(b, "spec");
        cr_assert_str_eq(jstr(b, "apiVersion"), "coordination.k8s.io/v1");
        cr_assert_str_eq(jstr(b, "kind"), "Lease");
        cr_assert_eq(json_object_object_length(b), 4, "%s", json_object_to_json_string(b));
        cr_assert_str_eq(jstr(meta, "name"), "n1");
        cr_assert_str_eq(jstr(meta, "namespace"), "kube-node-lease");
        cr_assert_str_eq(jstr(meta, "labels.set-by"), "someone/else");
        cr_assert_str_eq(owner_uid(b), "uid-1");
        cr_assert_null(json_object_object_get(meta, "uid"));
        cr_assert_null(json_object_object_get(meta, "creationTimestamp"));
        cr_assert_null(json_object_object_get(meta, "managedFields"));
        cr_assert_eq(json_object_object_length(meta), 5, "%s", json_object_to_json_string(meta));
        int rv = json_object_get_int(json_object_object_get(meta, "resourceVersion"));
        if (prev_rv >= 0) cr_assert_eq(rv, prev_rv + 1, "the previous answer's resourceVersion");
        prev_rv = rv;
        cr_assert_str_eq(jstr(spec, "holderIdentity"), "n1");
        cr_assert_eq(json_object_get_int(json_object_object_get(spec, "leaseDurationSeconds")), 40);
        const char *t = jstr(spec, "renewTime");
        cr_assert_eq(strlen(t), 27, "MicroTime: %s", t);
        if (prev_time) cr_assert_gt(strcmp(t, prev_time), 0, "renewTime moves: %s after %s", t, prev_time);
        prev_time = t;
        cr_assert_eq(json_object_object_length(spec), 3);
    }
    env_release(&e);
}

/* A Lease someone else holds is taken back whole: holder, duration and owner are ours again. */
Test(agent, foreign_lease_is_rewritten_with_our_holder) {
    struct env e;
    env_init(&e);
    env_up(&e);
    run_for(&e, 11 * SEC);
    /* someone else writes the Lease; our next PUT conflicts, we GET it and write ours */
    json_object *spec = json_object_object_get(e.api.lease, "spec");
    json_object_object_add(spec, "holderIdentity", json_object_new_string("intruder"));
    json_object_object_add(spec, "leaseDurationSeconds", json_object_new_int(15));
    json_object_object_add(json_object_object_get(e.api.lease, "metadata"), "resourceVersion",
                           json_object_new_int(++e.api.rv));
    e.api.lease_conflicts = 1;
    fake_api_clear(&e.api);
    run_for(&e, 21 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "GET", "/leases/n1"), 1);
    cr_assert_geq(fake_api_count(&e.api, "PUT", "/leases/n1"), 3);
    json_object *l = e.api.lease;
    cr_assert_str_eq(jstr(l, "spec.holderIdentity"), "n1");
    cr_assert_eq(json_object_get_int(json_object_object_get(json_object_object_get(l, "spec"), "leaseDurationSeconds")), 40);
    cr_assert_str_eq(owner_uid(l), "uid-1");
    env_release(&e);
}

/* A status source is given what it reads of the acknowledged status: its conditions (with the
 * server's heartbeats), allocatable and addresses, as the server has them. */
Test(agent, status_source_gets_the_acknowledged_conditions_allocatable_and_addresses) {
    struct env e;
    env_init(&e);
    env_up(&e);
    run_for(&e, 11 * SEC);
    json_object *prev = e.last_prev, *acked = json_object_object_get(e.api.node, "status");
    cr_assert_not_null(prev);
    cr_assert_eq(json_object_object_length(prev), 3, "%s", json_object_to_json_string(prev));
    static const char *const keys[] = {"conditions", "allocatable", "addresses"};
    for (size_t i = 0; i < 3; i++)
        cr_assert(kite_json_equal(json_object_object_get(prev, keys[i]), json_object_object_get(acked, keys[i])),
                  "%s: %s", keys[i], json_object_to_json_string(prev));
    env_release(&e);
}

Test(agent, lease_conflict_gets_then_puts) {
    struct env e;
    env_init(&e);
    env_up(&e);
    e.api.lease_conflicts = 1;
    run_for(&e, 11 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PUT", "/leases/n1"), 2);
    cr_assert_eq(fake_api_count(&e.api, "GET", "/leases/n1"), 1);
    cr_assert_str_eq(e.api.reqs[0].method, "PUT");
    cr_assert_str_eq(e.api.reqs[1].method, "GET");
    cr_assert_str_eq(e.api.reqs[2].method, "PUT");
    env_release(&e);
}

Test(agent, missing_lease_is_recreated_with_owner) {
    struct env e;
    env_init(&e);
    env_up(&e);
    json_object_put(e.api.lease);
    e.api.lease = NULL;
    run_for(&e, 11 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "POST", "/leases"), 1);
    cr_assert_eq(fake_api_count(&e.api, "POST", "/api/v1/nodes"), 0, "the node still exists: no re-registration");
    cr_assert_str_eq(owner_uid(fake_api_find(&e.api, "POST", "/leases", 0)->body), "uid-1");
    cr_assert_not_null(e.api.lease);
    env_release(&e);
}

static void check_reregistered(struct env *e) {
    cr_assert_eq(fake_api_count(&e->api, "POST", "/api/v1/nodes"), 1);
    cr_assert_str_eq(jstr(e->api.node, "metadata.uid"), "uid-2");
    cr_assert_str_eq(owner_uid(e->api.lease), "uid-2", "lease now owned by the new Node");
    bool found = false;
    for (size_t i = 0; fake_api_find(&e->api, "POST", "/events", i); i++)
        found |= kite_streq(jstr(fake_api_find(&e->api, "POST", "/events", i)->body, "reason"), "NodeReregistered");
    cr_assert(found, "NodeReregistered event posted");
    struct kite_agent_stats st;
    kite_agent_get_stats(e->a, &st);
    cr_assert_eq(st.registrations, 2);
}

Test(agent, status_patch_404_registers_again) {
    struct env e;
    env_init(&e);
    env_up(&e);
    json_object_put(e.api.node);
    e.api.node = NULL; /* deleted; the lease is left for the garbage collector */
    json_object_object_add(e.machine, "images", json_object_new_array()); /* forces a PATCH */
    run_for(&e, 11 * SEC);
    cr_assert_geq(fake_api_count(&e.api, "PATCH", "/status"), 1);
    check_reregistered(&e);
    env_release(&e);
}

Test(agent, watch_deleted_event_registers_again) {
    struct env e;
    env_init(&e);
    env_up(&e);
    json_object_put(e.api.node);
    e.api.node = NULL;
    json_object *stale = json_tokener_parse("{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"n1\",\"uid\":\"uid-0\"}}}");
    kite_agent_node_event(e.a, stale); /* a deletion of some older Node: ignored */
    kite_agent_step(e.a);
    cr_assert_eq(fake_api_count(&e.api, "POST", "/api/v1/nodes"), 0);
    json_object *ev = json_tokener_parse("{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"n1\",\"uid\":\"uid-1\"}}}");
    kite_agent_node_event(e.a, ev);
    run_for(&e, 1 * SEC);
    check_reregistered(&e);
    json_object_put(ev);
    json_object_put(stale);
    env_release(&e);
}

Test(agent, registration_conflict_reconciles_default_labels) {
    struct env e;
    env_init(&e);
    e.api.node = json_tokener_parse(
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"uid\":\"old-uid\","
        "\"labels\":{\"kubernetes.io/hostname\":\"wrong\",\"custom\":\"kept\"}},"
        "\"spec\":{\"taints\":[{\"key\":\"x\",\"effect\":\"NoSchedule\"}]},"
        "\"status\":{\"capacity\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\"}}}");
    env_start(&e);
    run_for(&e, 1 * SEC);
    cr_assert_eq(e.api.reqs[0].method[0], 'P');
    cr_assert_eq(fake_api_count(&e.api, "POST", "/api/v1/nodes"), 1);
    cr_assert_eq(fake_api_count(&e.api, "GET", "/api/v1/nodes/n1"), 1);
    struct fake_req *p = fake_api_find(&e.api, "PATCH", "/api/v1/nodes/n1/status", 0);
    cr_assert_not_null(p);
    json_object *meta = json_object_object_get(p->body, "metadata");
    json_object *labels = json_object_object_get(meta, "labels");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(labels, "kubernetes.io/hostname")), "n1");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(labels, "kubernetes.io/os")), "linux");
    cr_assert_null(json_object_object_get(labels, "custom"), "unchanged labels are not in the patch");
    cr_assert_not_null(json_object_object_get(json_object_object_get(meta, "annotations"),
                                              "volumes.kubernetes.io/controller-managed-attach-detach"));
    cr_assert_null(json_object_object_get(p->body, "spec"), "taints are not reconciled");
    json_object *alloc = json_object_object_get(json_object_object_get(p->body, "status"), "allocatable");
    cr_assert_not_null(alloc, "missing allocatable filled in");
    /* adopted the existing uid for its lease */
    cr_assert_str_eq(owner_uid(e.api.lease), "old-uid");
    cr_assert_str_eq(json_object_get_string(label(e.api.node, "custom")), "kept");
    env_release(&e);
}

Test(agent, outage_backs_off_then_reports_at_once) {
    struct env e;
    env_init(&e);
    env_up(&e);
    e.api.down = true;
    run_for(&e, 120 * SEC);
    size_t during = fake_api_count(&e.api, NULL, NULL);
    /* capped backoff: a bounded number of attempts, each round at most 5 tries */
    cr_assert(during > 10 && during < 400, "%zu requests in a 2 min outage", during);
    cr_assert_gt(kite_client_fake_resets(e.client), 0, "connections reset after repeated failures");
    fake_api_clear(&e.api);
    e.api.down = false;
    run_for(&e, 8 * SEC);
    /* within one backoff period the lease got through, and the status was checked against the
     * Node the server has: unchanged, so nothing was sent */
    cr_assert_geq(fake_api_count(&e.api, "PUT", "/leases/n1"), 1);
    cr_assert_eq(fake_api_count(&e.api, "GET", "/api/v1/nodes/n1"), 1, "the Node read again on reconnect");
    cr_assert_eq(fake_api_count(&e.api, "PATCH", "/status"), 0, "no report of an unchanged status");
    env_release(&e);
}

/* Sets the Ready condition of the fake server's Node to status. */
static void set_ready(struct env *e, const char *status) {
    json_object *conds = json_object_object_get(json_object_object_get(e->api.node, "status"), "conditions");
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(jstr(c, "type"), "Ready")) json_object_object_add(c, "status", json_object_new_string(status));
    }
}

/* The node lifecycle controller marked the node Unknown while the agent could not reach the
 * server: on reconnect the agent sees it in the Node it reads again and corrects it at once. */
Test(agent, outage_marked_unknown_is_corrected_on_reconnect) {
    struct env e;
    env_init(&e);
    env_up(&e);
    e.api.down = true;
    run_for(&e, 60 * SEC);
    set_ready(&e, "Unknown");
    fake_api_clear(&e.api);
    e.api.down = false;
    run_for(&e, 8 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", "/status"), 1, "Ready corrected at once on reconnect");
    json_object *conds =
        json_object_object_get(json_object_object_get(fake_api_find(&e.api, "PATCH", "/status", 0)->body, "status"),
                               "conditions");
    cr_assert_eq(json_object_array_length(conds), 1, "only the condition that differs: %s",
                 json_object_to_json_string(conds));
    cr_assert_str_eq(jstr(json_object_array_get_idx(conds, 0), "type"), "Ready");
    cr_assert_str_eq(jstr(json_object_array_get_idx(conds, 0), "status"), "True");
    env_release(&e);
}

Test(agent, fast_updates_until_ready) {
    struct env e;
    env_init(&e);
    json_object *ready = json_object_array_get_idx(json_object_object_get(e.machine, "conditions"), 3);
    json_object_object_add(ready, "status", json_object_new_string("False"));
    env_start(&e);
    run_for(&e, 3 * SEC);
    fake_api_clear(&e.api);
    json_object_object_add(ready, "status", json_object_new_string("True"));
    int before = e.computes;
    run_for(&e, 1100 * KITE_NS_PER_MS);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", "/status"), 1, "Ready reported within ~1 s");
    cr_assert_gt(e.computes, before);
    before = e.computes;
    run_for(&e, 9 * SEC);
    cr_assert_leq(e.computes - before, 1, "back to the 10 s period once Ready is reported");
    env_release(&e);
}

Test(agent, registration_retries_with_backoff) {
    struct env e;
    env_init(&e);
    e.api.down = true;
    env_start(&e);
    run_for(&e, 10 * SEC);
    /* 100 ms doubling: t=0, .1, .3, .7, 1.5, 3.1, 6.3 -> 7 attempts in 10 s */
    size_t n = fake_api_count(&e.api, "POST", "/api/v1/nodes");
    cr_assert(n >= 6 && n <= 8, "%zu", n);
    e.api.down = false;
    run_for(&e, 8 * SEC);
    cr_assert_not_null(e.api.node);
    env_release(&e);
}

Test(agent, threads_start_and_stop_promptly) {
    struct fake_api api;
    fake_api_init(&api);
    struct kite_client *c = fake_api_client(&api);
    struct kite_agent_config cfg;
    kite_agent_config_init(&cfg);
    cfg.node_name = kite_strdup("t1");
    struct env e; /* only for the status source */
    memset(&e, 0, sizeof(e));
    kite_fake_clock_init(&e.clk, T0_WALL);
    e.machine = json_tokener_parse(MACHINE);
    struct kite_agent_options o = {.config = &cfg, .client = c, .status_fn = fake_status, .status_ud = &e};
    struct kite_agent *a = NULL;
    cr_assert_eq(kite_agent_start(&o, &a), 0);
    struct timespec ts = {0, 2 * 1000 * 1000};
    for (int i = 0; i < 500 && (!api.lease || !api.watching); i++) nanosleep(&ts, NULL);
    cr_assert_not_null(api.node);
    cr_assert_not_null(api.lease);
    cr_assert(api.watching, "node watch running");
    cr_assert_gt(kite_agent_bytes_sent(a), 0);
    kite_agent_stop(a);
    cr_assert_not(api.watching);
    kite_client_free(c);
    kite_agent_config_release(&cfg);
    fake_api_release(&api);
    json_object_put(e.machine);
}

Test(agent, watch_modified_status_is_diffed_against) {
    struct env e;
    env_init(&e);
    env_up(&e);
    /* the node controller set Ready to Unknown; the watch shows it */
    set_ready(&e, "Unknown");
    json_object *node = NULL;
    json_object_deep_copy(e.api.node, &node, NULL);
    json_object *ev = json_object_new_object();
    json_object_object_add(ev, "type", json_object_new_string("MODIFIED"));
    json_object_object_add(ev, "object", node);
    kite_agent_node_event(e.a, ev);
    json_object_put(ev);
    run_for(&e, 11 * SEC);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", "/status"), 1, "Ready corrected back to True");
    json_object *c = json_object_array_get_idx(
        json_object_object_get(json_object_object_get(fake_api_find(&e.api, "PATCH", "/status", 0)->body, "status"),
                               "conditions"), 0);
    cr_assert_str_eq(jstr(c, "type"), "Ready");
    cr_assert_str_eq(jstr(c, "status"), "True");
    env_release(&e);
}

Test(agent, explicit_update_frequency_is_also_the_report_frequency) {
    struct env e;
    env_init(&e);
    char *err = NULL;
    cr_assert_eq(kite_agent_config_set_flag(&e.cfg, "node-status-update-frequency", "20s", &err), 0);
    env_up(&e);
    run_for(&e, 61 * SEC);
    size_t n = fake_api_count(&e.api, "PATCH", "/status");
    cr_assert(n >= 2 && n <= 3, "a report every ~20 s even with no change: %zu", n);
    env_release(&e);
}

static const char *ready_field(struct env *e, const char *field) {
    json_object *conds = json_object_object_get(json_object_object_get(e->api.node, "status"), "conditions");
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(jstr(c, "type"), "Ready") == 0) return jstr(c, field);
    }
    return NULL;
}

/* The node status computed from the machine asks the runtime's Status each time: a runtime that
 * cannot run containers turns Ready False with kubelet's message, and Ready comes back with it;
 * failing runtime calls (a container's trouble) do not touch Ready. */
Test(agent, runtime_status_drives_ready) {
    struct env e;
    env_init(&e);
    char root[] = "/tmp/kite-agent-test-XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    free(e.cfg.root_dir);
    e.cfg.root_dir = kite_strdup(root);
    struct kite_runtime *rt = kite_runtime_fake_new("1.0.0");
    struct kite_agent_options o = {.config = &e.cfg, .client = e.client, .clock = &e.clk.clock, .runtime = rt,
                                   .sysroot = "", .seed = 42};
    char *err = NULL;
    cr_assert_eq(kite_agent_new(&o, &e.a, &err), 0, "%s", err ? err : "");
    run_for(&e, 2 * SEC);
    cr_assert_str_eq(ready_field(&e, "status"), "True");

    kite_runtime_fake_set_ready(rt, false, "RuncNotFound", "the OCI runtime runc /usr/sbin/runc: No such file");
    run_for(&e, 20 * SEC);
    cr_assert_str_eq(ready_field(&e, "status"), "False");
    cr_assert_str_eq(ready_field(&e, "reason"), "KubeletNotReady");
    cr_assert_str_eq(ready_field(&e, "message"), "container runtime not ready: RuntimeReady=false reason:RuncNotFound "
                                                 "message:the OCI runtime runc /usr/sbin/runc: No such file");

    kite_runtime_fake_set_ready(rt, true, NULL, NULL);
    run_for(&e, 20 * SEC);
    cr_assert_str_eq(ready_field(&e, "status"), "True");

    kite_runtime_fake_set_error(rt, -EIO); /* every runtime call fails: images, containers */
    run_for(&e, 20 * SEC);
    cr_assert_str_eq(ready_field(&e, "status"), "True", "a failing call is not a runtime that is down");
    kite_runtime_fake_set_error(rt, 0);

    kite_agent_free(e.a);
    e.a = NULL;
    kite_runtime_free(rt);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    cr_assert_eq(system(cmd), 0);
    env_release(&e);
}

/* ---- a status source in two steps (agent.h, kite_agent_status_source): a sync whose inputs'
 * digest and acknowledged status did not change since one that found nothing to report does
 * not build; any change of either, or a due full report, builds again. ---- */

struct two_step {
    struct env *e;
    uint64_t digest; /* what the next read reports */
    int reads, builds;
};

static int two_step_read(void *ud, void **ret, uint64_t *ret_digest) {
    struct two_step *t = ud;
    t->reads++;
    *ret = t;
    *ret_digest = t->digest;
    return 0;
}

static int two_step_build(void *ud, void *in, json_object *prev, json_object **ret, struct kite_ns_events *ev) {
    struct two_step *t = ud;
    cr_assert_eq(in, t, "build gets what read gave");
    t->builds++;
    return fake_status(t->e, prev, ret, ev);
}

static void two_step_release(void *ud, void *in) {}

static const struct kite_agent_status_source two_step_source = {two_step_read, two_step_build, two_step_release};

static void env_up_two_step(struct env *e, struct two_step *t) {
    *t = (struct two_step){.e = e, .digest = 1};
    struct kite_agent_options o = {.config = &e->cfg, .client = e->client, .clock = &e->clk.clock,
                                   .status_source = &two_step_source, .status_ud = t, .seed = 42};
    char *err = NULL;
    cr_assert_eq(kite_agent_new(&o, &e->a, &err), 0, "%s", err ? err : "");
    run_for(e, 5 * SEC);
    cr_assert_not_null(e->api.node);
    fake_api_clear(&e->api);
    t->reads = t->builds = 0;
}

Test(agent, unchanged_inputs_skip_the_build) {
    struct env e;
    struct two_step t;
    env_init(&e);
    env_up_two_step(&e, &t);
    run_for(&e, 100 * SEC);
    cr_assert_geq(t.reads, 9, "inputs read every 10 s: %d", t.reads);
    cr_assert_eq(t.builds, 0, "nothing changed since a sync that found nothing to report: %d builds", t.builds);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);
    env_release(&e);
}

Test(agent, changed_inputs_build_and_patch) {
    struct env e;
    struct two_step t;
    env_init(&e);
    env_up_two_step(&e, &t);
    run_for(&e, 30 * SEC);
    cr_assert_eq(t.builds, 0);
    /* a source whose digest does not change is not asked: the machine's change stays unseen */
    json_object *imgs = json_tokener_parse("[{\"names\":[\"b:2\"],\"sizeBytes\":500},{\"names\":[\"a:1\"],\"sizeBytes\":100}]");
    json_object_object_add(e.machine, "images", imgs);
    run_for(&e, 20 * SEC);
    cr_assert_eq(t.builds, 0);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);
    /* its digest changes: built, patched */
    t.digest = 2;
    run_for(&e, 11 * SEC);
    cr_assert_eq(t.builds, 1);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", "/api/v1/nodes/n1/status"), 1);
    const char *s = json_object_to_json_string_ext(fake_api_find(&e.api, "PATCH", "/status", 0)->body,
                                                   JSON_C_TO_STRING_PLAIN);
    cr_assert_str_eq(s, "{\"status\":{\"images\":[{\"names\":[\"b:2\"],\"sizeBytes\":500},"
                        "{\"names\":[\"a:1\"],\"sizeBytes\":100}]}}");
    /* the answer is a new acknowledged status: compared once more, then skipped again */
    run_for(&e, 11 * SEC);
    cr_assert_eq(t.builds, 2);
    run_for(&e, 50 * SEC);
    cr_assert_eq(t.builds, 2);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 1);
    env_release(&e);
}

Test(agent, due_report_builds_despite_unchanged_inputs) {
    struct env e;
    struct two_step t;
    env_init(&e);
    env_up_two_step(&e, &t);
    run_for(&e, 290 * SEC);
    cr_assert_eq(t.builds, 0);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);
    run_for(&e, 25 * SEC);
    cr_assert_geq(t.builds, 1);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 1, "nodeStatusReportFrequency: a full report");
    env_release(&e);
}

/* Another writer's change to the Node (the watch) is a new acknowledged status: the next sync
 * builds and compares; Ready set Unknown by the node controller is corrected, a condition of
 * another owner is kept without a patch. */
static void watch_modified(struct env *e, void (*edit)(json_object *conds)) {
    json_object *node = NULL;
    json_object_deep_copy(e->api.node, &node, NULL);
    edit(json_object_object_get(json_object_object_get(node, "status"), "conditions"));
    json_object *ev = json_object_new_object();
    json_object_object_add(ev, "type", json_object_new_string("MODIFIED"));
    json_object_object_add(ev, "object", node);
    kite_agent_node_event(e->a, ev);
    json_object_put(ev);
}

static void add_foreign_condition(json_object *conds) {
    json_object_array_add(conds, json_tokener_parse("{\"type\":\"NetworkUnavailable\",\"status\":\"False\","
                                                    "\"reason\":\"RouteCreated\",\"message\":\"routes created\"}"));
}

static void ready_unknown(json_object *conds) {
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(jstr(c, "type"), "Ready")) json_object_object_add(c, "status", json_object_new_string("Unknown"));
    }
}

Test(agent, acknowledged_status_changed_by_another_writer_builds_again) {
    struct env e;
    struct two_step t;
    env_init(&e);
    env_up_two_step(&e, &t);
    run_for(&e, 30 * SEC);
    cr_assert_eq(t.builds, 0);

    watch_modified(&e, ready_unknown);
    run_for(&e, 11 * SEC);
    cr_assert_eq(t.builds, 1, "a new acknowledged status is compared with");
    cr_assert_eq(fake_api_count(&e.api, "PATCH", "/status"), 1, "Ready corrected back to True");
    cr_assert_str_eq(ready_field(&e, "status"), "True");
    run_for(&e, 11 * SEC);
    cr_assert_eq(t.builds, 2, "and so is the answer");
    run_for(&e, 40 * SEC);
    cr_assert_eq(t.builds, 2);
    env_release(&e);
}

/* The machine's inputs through the agent (kite_nodestatus_read / kite_nodestatus_build over the
 * machine1 fixture and a fake runtime, as the agent's own source and kite sim's): each kind of
 * change is seen and patched, a reading that moves without crossing its threshold is not
 * built for. */
struct machine_source {
    struct env *e;
    char *root;
    struct nst_fake fake;
    struct kite_runtime *rt;
    struct kite_ns_config cfg;
    struct kite_ns_sources src;
    int builds;
};

static int ms_read(void *ud, void **ret, uint64_t *ret_digest) {
    struct machine_source *m = ud;
    struct kite_ns_inputs *in = NULL;
    int r = kite_nodestatus_read(&m->cfg, &m->src, &in);
    if (r < 0) return r;
    *ret_digest = kite_ns_inputs_digest(in);
    *ret = in;
    return 0;
}

static int ms_build(void *ud, void *in, json_object *prev, json_object **ret, struct kite_ns_events *ev) {
    struct machine_source *m = ud;
    m->builds++;
    return kite_nodestatus_build(&m->cfg, &m->src, in, prev, ret, ev);
}

static void ms_release(void *ud, void *in) { kite_ns_inputs_free(in); }

static const struct kite_agent_status_source machine_source_ops = {ms_read, ms_build, ms_release};

static void ms_up(struct env *e, struct machine_source *m) {
    memset(m, 0, sizeof *m);
    m->e = e;
    m->root = nst_fixture_copy("machine1");
    m->fake = NST_FAKE_MACHINE1;
    m->rt = kite_runtime_fake_new("1.7.22");
    struct kite_image img = {.names = (char *[]){"a:1"}, .n_names = 1, .size_bytes = 100, .id = "sha256:a"};
    kite_runtime_fake_set_images(m->rt, &img, 1);
    kite_ns_config_defaults(&m->cfg);
    m->cfg.node_name = "n1";
    m->cfg.root_dir = "/var/lib/kite";
    m->cfg.kubelet_version = "v1.32.0-kite.1";
    m->src = (struct kite_ns_sources){.sysroot = m->root, .clock = &e->clk.clock, .runtime = m->rt,
                                      .statfs = nst_statfs, .default_route_ip = nst_route_ip, .online_cpus = nst_cpus,
                                      .ud = &m->fake, .runtime_ready = true, .pleg_healthy = true};
    /* as the agent's: facts every 5 minutes, readings on every sync */
    m->src.cache = kite_ns_cache_new(m->root, KITE_NS_FACTS_TTL_NS, 0);
    struct kite_agent_options o = {.config = &e->cfg, .client = e->client, .clock = &e->clk.clock,
                                   .status_source = &machine_source_ops, .status_ud = m, .seed = 42};
    char *err = NULL;
    cr_assert_eq(kite_agent_new(&o, &e->a, &err), 0, "%s", err ? err : "");
    run_for(e, 5 * SEC);
    cr_assert_not_null(e->api.node);
    cr_assert_str_eq(ready_field(e, "status"), "True");
    run_for(e, 20 * SEC);
    fake_api_clear(&e->api);
    m->builds = 0;
}

static void ms_release_all(struct machine_source *m) {
    kite_agent_free(m->e->a);
    m->e->a = NULL;
    kite_ns_cache_free(m->src.cache);
    kite_runtime_free(m->rt);
    nst_rmtree(m->root);
    free(m->root);
}

static const char *cond_field(struct env *e, const char *type, const char *field) {
    json_object *conds = json_object_object_get(json_object_object_get(e->api.node, "status"), "conditions");
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(jstr(c, "type"), type) == 0) return jstr(c, field);
    }
    return NULL;
}

/* One change, then: built within a sync, one PATCH (its status member named `member`), and
 * after the answer's comparison no further build. */
static void expect_one_patch(struct env *e, struct machine_source *m, const char *member) {
    run_for(e, 11 * SEC);
    cr_assert_geq(m->builds, 1);
    cr_assert_eq(fake_api_count(&e->api, "PATCH", "/status"), 1);
    json_object *st = json_object_object_get(fake_api_find(&e->api, "PATCH", "/status", 0)->body, "status");
    cr_assert_not_null(json_object_object_get(st, member), "%s", json_object_to_json_string(st));
    run_for(e, 11 * SEC);
    int b = m->builds;
    run_for(e, 40 * SEC);
    cr_assert_eq(m->builds, b, "skipped again once the answer was compared with");
    cr_assert_eq(fake_api_count(&e->api, "PATCH", "/status"), 1);
    fake_api_clear(&e->api);
    m->builds = 0;
}

Test(agent, machine_inputs_are_skipped_until_they_change) {
    struct env e;
    struct machine_source m;
    env_init(&e);
    ms_up(&e, &m);
    run_for(&e, 60 * SEC);
    cr_assert_eq(m.builds, 0);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);

    /* another writer's condition: the acknowledged status changed, built and compared with;
     * the condition is kept, nothing to report */
    watch_modified(&e, add_foreign_condition);
    run_for(&e, 11 * SEC);
    cr_assert_eq(m.builds, 1);
    cr_assert_eq(fake_api_count(&e.api, "PATCH", NULL), 0);
    run_for(&e, 40 * SEC);
    cr_assert_eq(m.builds, 1);
    m.builds = 0;

    /* MemAvailable moves but stays above 100Mi: nothing to build */
    nst_write(m.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 7000000 kB\n");
    m.fake.avail_bytes -= 1000000000; /* the disk fills, still above 10% */
    m.fake.free_inodes -= 1000;
    run_for(&e, 30 * SEC);
    cr_assert_eq(m.builds, 0);

    /* it crosses the eviction threshold */
    nst_write(m.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 50000 kB\n");
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "MemoryPressure", "status"), "True");
    nst_write(m.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 8000000 kB\n");
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "MemoryPressure", "status"), "False");

    /* the disk's free bytes, then its free inodes, cross theirs */
    m.fake.avail_bytes = m.fake.total_bytes / 20;
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "DiskPressure", "status"), "True");
    m.fake.avail_bytes = m.fake.total_bytes / 2;
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "DiskPressure", "status"), "False");
    m.fake.free_inodes = 1000;
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "DiskPressure", "status"), "True", "inodes");
    m.fake.free_inodes = 1000000;
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "DiskPressure", "status"), "False");

    /* the runtime's image list */
    struct kite_image imgs[] = {{.names = (char *[]){"a:1"}, .n_names = 1, .size_bytes = 100, .id = "sha256:a"},
                                {.names = (char *[]){"b:2"}, .n_names = 1, .size_bytes = 500, .id = "sha256:b"}};
    kite_runtime_fake_set_images(m.rt, imgs, 2);
    expect_one_patch(&e, &m, "images");
    cr_assert_eq(json_object_array_length(json_object_object_get(json_object_object_get(e.api.node, "status"), "images")), 2);

    /* the address and the cpus */
    m.fake.route_ip = "10.0.0.99";
    expect_one_patch(&e, &m, "addresses");
    m.fake.cpus = 6;
    expect_one_patch(&e, &m, "capacity");
    cr_assert_str_eq(jstr(e.api.node, "status.capacity.cpu"), "6");

    /* the health inputs, and their messages that carry durations */
    m.src.pleg_healthy = false;
    m.src.pleg_error = "pleg was last seen active 3m0.5s ago; threshold is 3m0s";
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "Ready", "message"),
                     "PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s");
    m.src.pleg_error = "pleg was last seen active 3m10.5s ago; threshold is 3m0s";
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "Ready", "message"),
                     "PLEG is not healthy: pleg was last seen active 3m10.5s ago; threshold is 3m0s");
    m.src.pleg_healthy = true;
    m.src.runtime_ready = false;
    m.src.runtime_error = "container runtime not ready: RuntimeReady=false reason:X message:y";
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "Ready", "message"),
                     "container runtime not ready: RuntimeReady=false reason:X message:y");
    m.src.runtime_ready = true;
    expect_one_patch(&e, &m, "conditions");
    cr_assert_str_eq(cond_field(&e, "Ready", "status"), "True");
    ms_release_all(&m);
    env_release(&e);
}
