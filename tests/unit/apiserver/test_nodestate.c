/* The node-state report kept from the watch stream: a pass classifies what changed and what time
 * could change (a lease expiring), not every node; the report (GET /debug/kite/nodes) stays the
 * same as a full computation's. */
#include "harness.h"
#include "apiserver/internal.h"

#include <criterion/criterion.h>
#include <stdio.h>

TestSuite(nodestate, .init = api_start, .fini = api_stop, .timeout = 120);

#define NODES 20
#define LEASES "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

static void make_node(int i) {
    char ts[21];
    api_now(ts);
    long c = api_reqf("POST", "/api/v1/nodes", NULL,
                      "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n%d\"},"
                      "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\","
                      "\"message\":\"ok\",\"lastHeartbeatTime\":\"%s\",\"lastTransitionTime\":\"%s\"}]}}",
                      i, ts, ts);
    cr_assert_eq(c, 201);
}

static void renew(int i, bool create) {
    char ts[21];
    api_now(ts);
    if (create) {
        cr_assert_eq(api_reqf("POST", LEASES, NULL,
                              "{\"metadata\":{\"name\":\"n%d\",\"namespace\":\"kube-node-lease\"},"
                              "\"spec\":{\"holderIdentity\":\"n%d\",\"leaseDurationSeconds\":40,"
                              "\"renewTime\":\"%.19s.000000Z\"}}",
                              i, i, ts),
                     201);
        return;
    }
    char p2[128];
    snprintf(p2, sizeof p2, LEASES "/n%d", i);
    char body[256];
    snprintf(body, sizeof body, "{\"spec\":{\"renewTime\":\"%.19s.000000Z\"}}", ts);
    cr_assert_eq(api_req("PATCH", p2, "application/merge-patch+json", body, NULL), 200);
}

static const char *state_of(json_object *rep, const char *name) {
    json_object *items = jget(rep, "items");
    for (size_t i = 0; items && i < json_object_array_length(items); i++) {
        json_object *it = json_object_array_get_idx(items, i);
        if (!strcmp(jstr(it, "name"), name)) return jstr(it, "state");
    }
    return NULL;
}

/* Passes until the watch stream is drained: the classifications the changes cost. */
static uint64_t pass(void) {
    uint64_t before = kite_apiserver_nodestate_classified(api.srv);
    kite_apiserver_nodestate_pass(api.srv);
    return kite_apiserver_nodestate_classified(api.srv) - before;
}

Test(nodestate, a_quiet_pass_classifies_nothing) {
    for (int i = 0; i < NODES; i++) {
        make_node(i);
        renew(i, true);
    }
    pass(); /* the first sight of every node (a background pass may have taken some) */
    cr_assert_eq(pass(), 0, "a pass with no change classified nodes");
    /* renewals of healthy nodes move their expiry only */
    for (int i = 0; i < NODES; i++) renew(i, false);
    cr_assert_eq(pass(), 0, "renewals of healthy nodes were classified");
    json_object *rep = NULL;
    cr_assert_eq(api_req("GET", "/debug/kite/nodes", NULL, NULL, &rep), 200);
    cr_assert_eq(json_object_array_length(jget(rep, "items")), NODES);
    cr_assert_str_eq(state_of(rep, "n3"), "Healthy");
    json_object_put(rep);

    /* one cordoned: that one is classified, and stays so while cordoned (its pods count) */
    cr_assert_eq(api_req("PATCH", "/api/v1/nodes/n5", "application/merge-patch+json", "{\"spec\":{\"unschedulable\":true}}",
                         NULL),
                 200);
    pass();
    cr_assert_eq(api_req("GET", "/debug/kite/nodes", NULL, NULL, &rep), 200);
    cr_assert_str_eq(state_of(rep, "n5"), "Cordoned");
    json_object_put(rep);
    cr_assert_eq(pass(), 1, "only the cordoned node is judged again");

    /* time alone: past the grace, leases not renewed expire; renewed ones do not */
    api_advance_s(30);
    for (int i = 0; i < NODES / 2; i++) renew(i, false);
    pass();
    api_advance_s(30); /* 60 s after the first renewals, 30 s after the others' */
    uint64_t n = pass();
    cr_assert_eq(n, NODES / 2 + 1, "expected the %d expired leases and the cordoned node, got %llu", NODES / 2,
                 (unsigned long long)n);
    cr_assert_eq(api_req("GET", "/debug/kite/nodes", NULL, NULL, &rep), 200);
    cr_assert_str_eq(state_of(rep, "n15"), "LeaseExpired");
    cr_assert_str_eq(state_of(rep, "n2"), "Healthy");
    json_object_put(rep);
    /* an expired node is judged again when a threshold of time comes, not at every pass */
    api_advance_s(10);
    n = pass();
    cr_assert_eq(n, 1, "only the cordoned node is judged again, got %llu", (unsigned long long)n);

    /* a renewal brings an expired node back */
    renew(15, false);
    pass();
    cr_assert_eq(api_req("GET", "/debug/kite/nodes", NULL, NULL, &rep), 200);
    cr_assert_str_eq(state_of(rep, "n15"), "Healthy");
    json_object_put(rep);

    /* a deleted Node leaves the report */
    cr_assert_eq(api_req("DELETE", "/api/v1/nodes/n7", NULL, NULL, NULL), 200);
    pass();
    cr_assert_eq(api_req("GET", "/debug/kite/nodes", NULL, NULL, &rep), 200);
    cr_assert_null(state_of(rep, "n7"));
    json_object_put(rep);
}

#define IDENTITY "/apis/coordination.k8s.io/v1/namespaces/kite-node-identities/leases/ghost"

/* A node credential calling with no Node is published as an identity Lease (for the other API
 * servers); a machine that stops calling before its Node comes does not leave it forever: once
 * it has not called for the stale threshold (--node-stale-after, 1 h) the Lease is deleted. A
 * call in between keeps it. */
Test(nodestate, an_identity_that_stopped_calling_has_its_lease_deleted_once_stale) {
    kite_apiserver_nodestate_seen(api.srv, "system:node:ghost", "GET", "/api/v1/nodes/ghost");
    pass();
    pass(); /* published, and its Lease seen back through the watch */
    json_object *l = NULL;
    cr_assert_eq(api_req("GET", IDENTITY, NULL, NULL, &l), 200, "the identity was published");
    cr_assert_str_eq(jstr(l, "spec.holderIdentity"), "system:node:ghost");
    json_object_put(l);
    api_advance_s(1800);
    kite_apiserver_nodestate_seen(api.srv, "system:node:ghost", "GET", "/api/v1/nodes/ghost");
    pass();
    pass();
    api_advance_s(3000); /* 50 min after its last call */
    pass();
    pass();
    cr_assert_eq(api_req("GET", IDENTITY, NULL, NULL, NULL), 200, "deleted before it was stale");
    api_advance_s(601); /* an hour and a second after its last call */
    pass();
    pass();
    cr_assert_eq(api_req("GET", IDENTITY, NULL, NULL, NULL), 404, "a stale identity's Lease stays");
}
