/* The deployment controller: the pod-template hash, the rolling-update arithmetic (simulated
 * to the end, checking maxSurge and maxUnavailable at every step), and one pass of the core on
 * the fake API (the new ReplicaSet's name, labels, selector and revision). */
#include "controllers/workloads/deployment.h"
#include "controllers/workloads/wlutil.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>

#define S KITE_NS_PER_SEC
#define TMPL "{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}"

Test(deployment, fnv32a_known_values) {
    cr_assert_eq(kite_wl_fnv32a("", 0), 0x811c9dc5u);
    cr_assert_eq(kite_wl_fnv32a("a", 1), 0xe40c292cu);
    cr_assert_eq(kite_wl_fnv32a("foobar", 6), 0xbf9cf968u);
}

Test(deployment, template_hash_is_fnv32a_of_sorted_json_in_safe_encoding) {
    json_object *t = fakeapi_json(TMPL);
    /* keys in another order, and a null member, hash the same */
    json_object *u = fakeapi_json("{\"spec\":{\"containers\":[{\"image\":\"busybox\",\"name\":\"c\"}]},"
                                  "\"metadata\":{\"creationTimestamp\":null,\"labels\":{\"app\":\"web\"}}}");
    char h[16], h2[16], hc[16];
    kite_deployctl_template_hash(t, -1, h);
    kite_deployctl_template_hash(u, -1, h2);
    /* fnv32a("{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":...}") = 2429690584, each
     * decimal digit d written as "bcdfghjklmnpqrstvwxz2456789"[d % 27] */
    cr_assert_str_eq(h, "686fbf49d8");
    cr_assert_str_eq(h2, h);
    kite_deployctl_template_hash(t, 1, hc); /* collisionCount 1: its 8 little-endian bytes follow */
    cr_assert_str_eq(hc, "6f844cc749");
    json_object *e = fakeapi_json("{}");
    kite_deployctl_template_hash(e, -1, h);
    cr_assert_str_eq(h, "5859f96865");
    json_object_put(t), json_object_put(u), json_object_put(e);
}

Test(deployment, fenceposts) {
    static const struct {
        const char *surge, *unavail;
        int64_t desired, want_surge, want_unavail;
    } cases[] = {
        {"\"25%\"", "\"25%\"", 3, 1, 0},  {"\"25%\"", "\"25%\"", 10, 3, 2}, {"\"25%\"", "\"25%\"", 100, 25, 25},
        {"0", "0", 5, 0, 1},              {"2", "\"50%\"", 5, 2, 2},        {"\"0%\"", "\"0%\"", 4, 0, 1},
        {"\"100%\"", "0", 1, 1, 0},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *s = fakeapi_json("%s", cases[i].surge), *u = fakeapi_json("%s", cases[i].unavail);
        int64_t gs, gu;
        kite_deployctl_fenceposts(s, u, cases[i].desired, &gs, &gu);
        cr_assert_eq(gs, cases[i].want_surge, "case %zu surge %lld", i, (long long)gs);
        cr_assert_eq(gu, cases[i].want_unavail, "case %zu unavailable %lld", i, (long long)gu);
        json_object_put(s), json_object_put(u);
    }
}

/* Runs rolling steps to the end; after each, pods of the scaled ReplicaSets come and go at
 * once and new ones become available. Checks total <= desired + surge and available >=
 * desired - unavailable throughout; returns the steps taken. */
static int simulate(int64_t desired, int64_t surge, int64_t unavail, int64_t old_replicas) {
    struct kite_deployctl_rs nrs = {0, 0}, old[1] = {{old_replicas, old_replicas}};
    int steps = 0;
    for (; steps < 1000; steps++) {
        int64_t before = nrs.available + old[0].available;
        int r = kite_deployctl_rolling_step(desired, surge, unavail, &nrs, old, 1);
        if (r == 0) break;
        old[0].available = KITE_MIN(old[0].available, old[0].replicas); /* deleted pods go at once */
        cr_assert_leq(nrs.replicas + old[0].replicas, desired + surge, "step %d: %lld + %lld pods", steps,
                      (long long)nrs.replicas, (long long)old[0].replicas);
        cr_assert_geq(nrs.available + old[0].available, KITE_MIN(desired - unavail, before), "step %d: availability dipped",
                      steps);
        nrs.available = nrs.replicas; /* new pods become available before the next step */
    }
    cr_assert_eq(nrs.replicas, desired);
    cr_assert_eq(old[0].replicas, 0);
    return steps;
}

/* A paused Deployment scaled mid-rollout: ReplicaSets with pods share the new size in
 * proportion, the rest to the newest; empty ones stay empty. */
Test(deployment, proportional_scaling_when_paused) {
    struct kite_deployctl_rs a[3] = {{3, 3}, {0, 0}, {7, 7}}; /* newest first */
    kite_deployctl_proportional(20, a, 3);
    cr_assert_eq(a[0].replicas, 6);
    cr_assert_eq(a[1].replicas, 0);
    cr_assert_eq(a[2].replicas, 14);
    struct kite_deployctl_rs b[2] = {{2, 2}, {1, 1}};
    kite_deployctl_proportional(4, b, 2); /* 2*4/3 = 2, 1*4/3 = 1, one left: the newest */
    cr_assert_eq(b[0].replicas, 3);
    cr_assert_eq(b[1].replicas, 1);
    struct kite_deployctl_rs c[2] = {{4, 4}, {6, 6}};
    kite_deployctl_proportional(5, c, 2); /* down: 2 and 3 */
    cr_assert_eq(c[0].replicas + c[1].replicas, 5);
    cr_assert_eq(c[0].replicas, 2);
    struct kite_deployctl_rs d[2] = {{0, 0}, {0, 0}};
    kite_deployctl_proportional(3, d, 2); /* nothing runs: the newest gets them */
    cr_assert_eq(d[0].replicas, 3);
    cr_assert_eq(d[1].replicas, 0);
}

Test(deployment, rolling_step_respects_surge_and_unavailable) {
    cr_assert_eq(simulate(3, 1, 0, 3), 6); /* one up, one down, three times */
    simulate(3, 1, 1, 3);
    simulate(10, 3, 2, 10);
    simulate(100, 25, 25, 100);
    simulate(5, 0, 1, 5);
    simulate(4, 1, 0, 2); /* scaled up while rolling */
}

Test(deployment, rolling_step_scales_unhealthy_old_replicas_first) {
    /* the old ReplicaSet's pods are not available: they go first (cleanupUnhealthyReplicas),
     * as far as maxScaledDown allows, though availability would not let ready ones go */
    struct kite_deployctl_rs nrs = {1, 1}, old[1] = {{3, 0}};
    cr_assert_eq(kite_deployctl_rolling_step(3, 1, 1, &nrs, old, 1), 2);
    cr_assert_eq(old[0].replicas, 1);
    /* with maxUnavailable 0 and a new pod not yet available, nothing may go (as upstream) */
    struct kite_deployctl_rs n2 = {1, 0}, o2[1] = {{3, 0}};
    cr_assert_eq(kite_deployctl_rolling_step(3, 1, 0, &n2, o2, 1), 0);
    /* a new ReplicaSet with more than desired is scaled down first */
    struct kite_deployctl_rs big = {5, 5};
    cr_assert_eq(kite_deployctl_rolling_step(3, 1, 0, &big, NULL, 0), 1);
    cr_assert_eq(big.replicas, 3);
}

/* The controller on the fake API, its clock fixed. */
struct rig {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_deployctl *c;
};

static void rig_init(struct rig *r) {
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&r->clock, INT64_C(1893553445) * S);
    fakeapi_init(&r->api);
    struct kite_deployctl_options o = {.client = r->api.client, .clock = &r->clock.clock};
    r->c = kite_deployctl_new(&o);
}

Test(deployment, creates_the_new_replicaset_by_hash_with_revision) {
    struct rig r;
    rig_init(&r);
    struct kite_deployctl *c = r.c;
    json_object *d = fakeapi_json("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
                                  "\"namespace\":\"default\",\"uid\":\"d-uid\",\"generation\":1,\"annotations\":{\"kubernetes.io/change-cause\":\"v1\"}},"
                                  "\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":" TMPL ","
                                  "\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":\"25%%\",\"maxUnavailable\":\"25%%\"}},"
                                  "\"progressDeadlineSeconds\":600}}");
    fakeapi_put(&r.api, "/apis/apps/v1/namespaces/default/deployments/web", json_object_get(d));
    kite_deployctl_deployment_upsert(c, d);
    kite_deployctl_step(c);
    json_object *rs = fakeapi_get(&r.api, "/apis/apps/v1/namespaces/default/replicasets/web-686fbf49d8");
    cr_assert_not_null(rs);
    json_object *meta = kite_obj_meta(rs), *ann = kite_obj_get(meta, "annotations");
    cr_assert_str_eq(kite_obj_str(ann, "deployment.kubernetes.io/revision"), "1");
    cr_assert_str_eq(kite_obj_str(ann, "deployment.kubernetes.io/desired-replicas"), "3");
    cr_assert_str_eq(kite_obj_str(ann, "deployment.kubernetes.io/max-replicas"), "4");
    cr_assert_str_eq(kite_obj_str(ann, "kubernetes.io/change-cause"), "v1");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(meta, "labels"), "pod-template-hash"), "686fbf49d8");
    json_object *spec = kite_obj_get(rs, "spec");
    cr_assert_eq(json_object_get_int(kite_obj_get(spec, "replicas")), 3);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(kite_obj_get(spec, "selector"), "matchLabels"), "pod-template-hash"), "686fbf49d8");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(kite_obj_get(spec, "template")), "labels"), "pod-template-hash"),
                     "686fbf49d8");
    json_object *ref = json_object_array_get_idx(kite_obj_get(meta, "ownerReferences"), 0);
    cr_assert_str_eq(kite_obj_str(ref, "kind"), "Deployment");
    cr_assert_str_eq(kite_obj_str(ref, "uid"), "d-uid");
    json_object *dd = fakeapi_get(&r.api, "/apis/apps/v1/namespaces/default/deployments/web");
    cr_assert_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(dd), "annotations"), "deployment.kubernetes.io/revision"), "1");
    json_object *conds = kite_obj_get(kite_obj_get(dd, "status"), "conditions");
    bool created = false;
    for (size_t i = 0; i < json_object_array_length(conds); i++)
        created |= kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "reason"), "NewReplicaSetCreated");
    cr_assert(created);
    cr_assert_eq(fakeapi_events(&r.api, "ScalingReplicaSet", "web"), 1);
    json_object_put(d);
    kite_deployctl_free(c);
    fakeapi_release(&r.api);
}

/* A sync before the ReplicaSet informer has seen the controller's own new ReplicaSet posts it
 * again and hears AlreadyExists. That ReplicaSet is this Deployment's (its uid, its template
 * with the hash label): no collision, so status.collisionCount stays unset (upstream's
 * EqualIgnoreHash drops the label on both sides). */
Test(deployment, its_own_replicaset_already_existing_is_no_collision) {
    struct rig r;
    rig_init(&r);
    struct kite_deployctl *c = r.c;
    json_object *d = fakeapi_json("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
                                  "\"namespace\":\"default\",\"uid\":\"d-uid\",\"generation\":1},"
                                  "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":" TMPL "}}");
    fakeapi_put(&r.api, "/apis/apps/v1/namespaces/default/deployments/web", json_object_get(d));
    kite_deployctl_deployment_upsert(c, d);
    kite_deployctl_step(c);
    cr_assert_not_null(fakeapi_get(&r.api, "/apis/apps/v1/namespaces/default/replicasets/web-686fbf49d8"));
    kite_deployctl_deployment_upsert(c, d); /* again, the ReplicaSet not yet heard of */
    kite_deployctl_step(c);
    cr_assert_eq(fakeapi_count(&r.api, "POST", "/replicasets"), 2, "the second sync posts the ReplicaSet again");
    json_object *dd = fakeapi_get(&r.api, "/apis/apps/v1/namespaces/default/deployments/web");
    cr_assert_null(kite_obj_get(kite_obj_get(dd, "status"), "collisionCount"), "%s", json_object_to_json_string(dd));
    cr_assert_not_null(fakeapi_get(&r.api, "/apis/apps/v1/namespaces/default/replicasets/web-686fbf49d8"));
    json_object_put(d);
    kite_deployctl_free(c);
    fakeapi_release(&r.api);
}
