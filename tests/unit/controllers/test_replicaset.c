/* The ReplicaSet controller's core on the fake API and a fake clock: creates and deletes
 * against replicas, expectations while its own creates are in flight, the scale-down ranking,
 * adoption and release by labels, and status with minReadySeconds. */
#include "controllers/workloads/replicaset.h"
#include "base/log.h"
#include "fakeapi.h"
#include "framework/ctlutil.h"

#include <criterion/criterion.h>
#include <string.h>

#define S KITE_NS_PER_SEC
#define PODS "/api/v1/namespaces/default/pods"
#define RS "/apis/apps/v1/namespaces/default/replicasets/web"

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_rsc *c;
};

static void env_init(struct env *e) {
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&e->clock, INT64_C(1893553445) * S); /* 2030-01-02T03:04:05Z */
    fakeapi_init(&e->api);
    struct kite_rsc_options o = {.client = e->api.client, .clock = &e->clock.clock};
    e->c = kite_rsc_new(&o);
}

static void env_release(struct env *e) {
    kite_rsc_free(e->c);
    fakeapi_release(&e->api);
}

static void step(struct env *e) {
    kite_rsc_step(e->c);
}

static json_object *set_rs(struct env *e, int replicas, int min_ready) {
    json_object *rs = fakeapi_json(
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
        "\"uid\":\"rs-uid\",\"generation\":2},\"spec\":{\"replicas\":%d,\"minReadySeconds\":%d,"
        "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\",\"tier\":\"x\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}}}",
        replicas, min_ready);
    if (!fakeapi_get(&e->api, RS)) fakeapi_put(&e->api, RS, json_object_get(rs));
    kite_rsc_rs_upsert(e->c, rs);
    return rs;
}

/* A pod of the ReplicaSet (owned unless orphan); ready: "" (no Ready condition) or the time
 * it became Ready. */
static json_object *set_pod(struct env *e, const char *name, bool orphan, const char *node, const char *phase,
                            const char *ready_since, const char *created, const char *labels) {
    json_object *p = fakeapi_json(
        "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"u-%s\",\"creationTimestamp\":\"%s\","
        "\"labels\":%s%s},\"spec\":{\"nodeName\":\"%s\"},\"status\":{\"phase\":\"%s\",\"conditions\":[%s%s%s]}}",
        name, name, created, labels,
        orphan ? "" : ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web\",\"uid\":\"rs-uid\",\"controller\":true}]",
        node, phase, *ready_since ? "{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"" : "", ready_since,
        *ready_since ? "\"}" : "");
    _cleanup_free_ char *path = kite_asprintf(PODS "/%s", name);
    json_object_put(kite_map_del(&e->api.objs, path));
    fakeapi_put(&e->api, path, json_object_get(p));
    kite_rsc_pod_upsert(e->c, p);
    json_object_put(p);
    return fakeapi_get(&e->api, path);
}

/* The pods the controller created, sorted by name (up to max; their creates go at once, so
 * the names the fake API gave them follow no order): how many. */
static size_t created_pods(struct env *e, json_object **out, size_t max) {
    size_t n = 0;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);)
        if (strncmp(k, PODS "/web-", strlen(PODS "/web-")) == 0 && n < max) out[n++] = v;
    for (size_t i = 1; i < n; i++) /* insertion sort: a handful */
        for (size_t j = i; j > 0 && strcmp(kite_meta_str(out[j - 1], "name"), kite_meta_str(out[j], "name")) > 0; j--) {
            json_object *t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return n;
}

#define T0 "2030-01-02T03:00:00Z"
#define APP "{\"app\":\"web\",\"tier\":\"x\"}"

Test(replicaset, creates_missing_pods_once_while_its_creates_are_in_flight) {
    struct env e;
    env_init(&e);
    json_object_put(set_rs(&e, 3, 0));
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 3);
    /* created pods carry the template, generateName and a controller reference */
    json_object *made[3];
    cr_assert_eq(created_pods(&e, made, 3), 3);
    json_object *p = made[0];
    cr_assert_str_eq(kite_meta_str(p, "generateName"), "web-");
    json_object *ref = json_object_array_get_idx(kite_obj_get(kite_obj_meta(p), "ownerReferences"), 0);
    cr_assert_str_eq(kite_obj_str(ref, "uid"), "rs-uid");
    cr_assert(json_object_get_boolean(kite_obj_get(ref, "controller")));
    cr_assert(json_object_get_boolean(kite_obj_get(ref, "blockOwnerDeletion")));
    cr_assert_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(p), "labels"), "tier"), "x");
    /* the ReplicaSet changes again before its pods are seen: no second round of creates */
    json_object_put(set_rs(&e, 3, 0));
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 3);
    /* two of three are seen, then one is deleted by someone: one more is created */
    kite_rsc_pod_upsert(e.c, made[0]);
    kite_rsc_pod_upsert(e.c, made[1]);
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 3);
    kite_rsc_pod_upsert(e.c, made[2]);
    kite_rsc_pod_delete(e.c, made[2]);
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 4);
    cr_assert_eq(fakeapi_events(&e.api, "SuccessfulCreate", "web"), 4);
    env_release(&e);
}

Test(replicaset, expectations_expire) {
    struct env e;
    env_init(&e);
    json_object_put(set_rs(&e, 2, 0));
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 2);
    kite_fake_clock_advance(&e.clock, (KITE_RSC_EXPECTATIONS_TTL_S + 1) * S);
    json_object_put(set_rs(&e, 2, 0));
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 4, "creates never seen are given up after the TTL");
    env_release(&e);
}

Test(replicaset, scale_down_deletes_unscheduled_then_not_ready_then_newest) {
    struct env e;
    env_init(&e);
    json_object_put(set_rs(&e, 5, 0));
    set_pod(&e, "old-ready", false, "n1", "Running", T0, "2030-01-01T00:00:00Z", APP);
    set_pod(&e, "new-ready", false, "n1", "Running", T0, "2030-01-02T00:00:00Z", APP);
    set_pod(&e, "notready", false, "n1", "Running", "", "2030-01-01T00:00:00Z", APP);
    set_pod(&e, "pending", false, "n1", "Pending", "", "2030-01-01T00:00:00Z", APP);
    set_pod(&e, "unscheduled", false, "", "Pending", "", "2029-01-01T00:00:00Z", APP);
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", PODS), 0);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 0);
    json_object_put(set_rs(&e, 1, 0));
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", PODS), 4);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", "/unscheduled"), 1);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", "/pending"), 1);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", "/notready"), 1);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", "/new-ready"), 1);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", "/old-ready"), 0, "the oldest ready pod stays");
    env_release(&e);
}

Test(replicaset, rank_orders_pods_as_upstream) {
    json_object *a = fakeapi_json("{\"metadata\":{\"name\":\"a\",\"creationTimestamp\":\"2030-01-01T00:00:00Z\"},\"spec\":{\"nodeName\":\"n\"},"
                                  "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2030-01-01T00:00:00Z\"}]}}");
    json_object *b = fakeapi_json("{\"metadata\":{\"name\":\"b\",\"creationTimestamp\":\"2030-01-01T00:00:00Z\"},\"spec\":{\"nodeName\":\"n\"},"
                                  "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2030-01-01T00:05:00Z\"}]}}");
    json_object *c = fakeapi_json("{\"metadata\":{\"name\":\"c\",\"creationTimestamp\":\"2030-01-01T00:00:00Z\"},\"spec\":{\"nodeName\":\"n\"},"
                                  "\"status\":{\"phase\":\"Running\",\"containerStatuses\":[{\"restartCount\":5}],\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2030-01-01T00:00:00Z\"}]}}");
    json_object *d = fakeapi_json("{\"metadata\":{\"name\":\"d\"},\"spec\":{\"nodeName\":\"m\"},"
                                  "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2030-01-01T00:00:00Z\"}]}}");
    json_object *v[] = {a, d, c, b};
    kite_rsc_rank(v, 4);
    /* the crowded node's pods first (3 on n, 1 on m); among them ready more recently first, then
     * more restarts */
    cr_assert_str_eq(kite_meta_str(v[0], "name"), "b");
    cr_assert_str_eq(kite_meta_str(v[1], "name"), "c");
    cr_assert_str_eq(kite_meta_str(v[2], "name"), "a");
    cr_assert_str_eq(kite_meta_str(v[3], "name"), "d");
    json_object_put(a), json_object_put(b), json_object_put(c), json_object_put(d);
}

Test(replicaset, adopts_orphans_and_releases_pods_it_no_longer_selects) {
    struct env e;
    env_init(&e);
    json_object_put(set_rs(&e, 2, 0));
    set_pod(&e, "orphan", true, "n1", "Running", T0, T0, APP);
    set_pod(&e, "strayed", false, "n1", "Running", T0, T0, "{\"app\":\"other\"}");
    set_pod(&e, "other", true, "n1", "Running", T0, T0, "{\"app\":\"other\"}");
    step(&e);
    json_object *o = fakeapi_get(&e.api, PODS "/orphan");
    json_object *refs = kite_obj_get(kite_obj_meta(o), "ownerReferences");
    cr_assert_eq(json_object_array_length(refs), 1);
    cr_assert_str_eq(kite_obj_str(json_object_array_get_idx(refs, 0), "uid"), "rs-uid");
    json_object *s = fakeapi_get(&e.api, PODS "/strayed");
    refs = kite_obj_get(kite_obj_meta(s), "ownerReferences");
    cr_assert(!refs || json_object_array_length(refs) == 0, "released: %s", json_object_to_json_string(refs));
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", PODS "/other"), 0);
    /* the adopted orphan counts: one created for the second replica */
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 1);
    env_release(&e);
}

Test(replicaset, status_counts_available_after_min_ready_seconds) {
    struct env e;
    env_init(&e);
    json_object_put(set_rs(&e, 2, 10));
    /* ready since now (the fake clock's 03:04:05) and since long ago; one not fully labeled */
    set_pod(&e, "fresh", false, "n1", "Running", "2030-01-02T03:04:05Z", T0, APP);
    set_pod(&e, "old", false, "n1", "Running", T0, T0, "{\"app\":\"web\"}");
    kite_rsc_step(e.c);
    json_object *st = kite_obj_get(fakeapi_get(&e.api, RS), "status");
    cr_assert_eq(json_object_get_int(kite_obj_get(st, "replicas")), 2);
    cr_assert_eq(json_object_get_int(kite_obj_get(st, "readyReplicas")), 2);
    cr_assert_eq(json_object_get_int(kite_obj_get(st, "availableReplicas")), 1);
    cr_assert_eq(json_object_get_int(kite_obj_get(st, "fullyLabeledReplicas")), 1);
    cr_assert_eq(json_object_get_int(kite_obj_get(st, "observedGeneration")), 2);
    /* the controller looks again when the fresh pod's minReadySeconds are over */
    int64_t next = kite_rsc_step(e.c);
    cr_assert(next > 9 * S && next <= 10 * S, "next %lld", (long long)next);
    kite_fake_clock_advance(&e.clock, next);
    cr_assert(kite_rsc_pending(e.c));
    kite_rsc_step(e.c);
    st = kite_obj_get(fakeapi_get(&e.api, RS), "status");
    cr_assert_eq(json_object_get_int(kite_obj_get(st, "availableReplicas")), 2);
    env_release(&e);
}

/* A ReplicaSet's creates do not depend on one another: they go KITE_CTL_WORKERS at once (one
 * at a time, 5,000 pods took 30 s behind a busy apiserver), every one with its event */
Test(replicaset, creates_go_several_at_once) {
    struct env e;
    env_init(&e);
    struct fakeapi_meter m = {.method = "POST", .part = PODS, .delay_us = 2000};
    e.api.on_request = fakeapi_meter_hook, e.api.on_request_ud = &m;
    json_object_put(set_rs(&e, 40, 0));
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 40);
    cr_assert_eq(fakeapi_events(&e.api, "SuccessfulCreate", "web"), 40);
    cr_assert_gt(atomic_load(&m.most), 1, "the creates went out one at a time");
    cr_assert_leq(atomic_load(&m.most), KITE_CTL_WORKERS);
    /* all 40 expected: no second round before they are seen */
    json_object_put(set_rs(&e, 40, 0));
    step(&e);
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 40);
    env_release(&e);
}
