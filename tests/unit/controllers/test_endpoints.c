/* The endpoints controller's reconcile: ready and not-ready pods, named target ports, the
 * subsets' grouping, the labels and trigger time, Services it leaves alone, and deletion. */
#include <criterion/criterion.h>

#include "controllers/endpoints.h"
#include "fakeapi.h"
#include "json/patch.h"

#include <stdio.h>

/* A Service web selecting app=web; ports: the JSON of spec.ports; extra: more of spec. */
static json_object *service(const char *ports, const char *extra) {
    return fakeapi_json("{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
                        "\"uid\":\"svc-uid\",\"creationTimestamp\":\"2026-12-01T00:00:00Z\",\"labels\":{\"tier\":\"front\"}},"
                        "\"spec\":{\"selector\":{\"app\":\"web\"},\"clusterIP\":\"10.96.0.9\",\"ports\":%s%s}}",
                        ports, extra ? extra : "");
}
#define HTTP_NAMED "[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\",\"targetPort\":\"web\"}]"

/* A pod of app=web with address ip whose container names port 8080 `web` (containerPort web_port). */
static json_object *pod(const char *name, const char *ip, bool ready, int web_port, const char *ready_at) {
    return fakeapi_json(
        "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"uid-%s\",\"labels\":{\"app\":\"web\"}},"
        "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"ports\":[{\"name\":\"web\",\"containerPort\":%d}]}]},"
        "\"status\":{\"phase\":\"Running\",\"podIP\":\"%s\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\","
        "\"lastTransitionTime\":\"%s\"}]}}",
        name, name, web_port, ip, ready ? "True" : "False", ready_at ? ready_at : "2026-12-02T00:00:00Z");
}

static void expect_json(json_object *got, const char *want) {
    json_object *w = json_tokener_parse(want);
    cr_assert_not_null(w, "bad test json %s", want);
    cr_expect(kite_json_equal(got, w), "got  %s\nwant %s", json_object_to_json_string_ext(got, JSON_C_TO_STRING_PLAIN), want);
    json_object_put(w);
}

#define ADDR(ip, name) "{\"ip\":\"" ip "\",\"nodeName\":\"n1\",\"targetRef\":{\"kind\":\"Pod\",\"namespace\":\"default\",\"name\":\"" name "\",\"uid\":\"uid-" name "\"}}"

Test(endpoints, ready_and_not_ready_with_named_ports) {
    json_object *svc = service(HTTP_NAMED, NULL);
    json_object *pods[] = {pod("b", "10.1.0.3", false, 8080, NULL), pod("a", "10.1.0.2", true, 8080, NULL),
                           pod("c", "10.1.0.4", true, 8080, NULL)};
    json_object *subsets = kite_epc_subsets(svc, pods, 3);
    expect_json(subsets, "[{\"addresses\":[" ADDR("10.1.0.2", "a") "," ADDR("10.1.0.4", "c") "],\"notReadyAddresses\":["
                         ADDR("10.1.0.3", "b") "],\"ports\":[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"}]}]");
    json_object_put(subsets);
    /* publishNotReadyAddresses: every pod is an address */
    json_object_put(svc);
    svc = service(HTTP_NAMED, ",\"publishNotReadyAddresses\":true");
    subsets = kite_epc_subsets(svc, pods, 3);
    expect_json(subsets, "[{\"addresses\":[" ADDR("10.1.0.2", "a") "," ADDR("10.1.0.3", "b") "," ADDR("10.1.0.4", "c")
                         "],\"ports\":[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"}]}]");
    json_object_put(subsets);
    json_object_put(svc);
    for (size_t i = 0; i < 3; i++) json_object_put(pods[i]);
}

Test(endpoints, pods_left_out) {
    json_object *svc = service(HTTP_NAMED, NULL);
    json_object *no_ip = pod("a", "", true, 8080, NULL), *other = pod("o", "10.1.0.9", true, 8080, NULL),
                *done = pod("d", "10.1.0.7", true, 8080, NULL), *going = pod("g", "10.1.0.8", true, 8080, NULL);
    kite_obj_set(kite_obj_meta(other), "labels", fakeapi_json("{\"app\":\"db\"}"));
    kite_obj_set(kite_obj_get(done, "spec"), "restartPolicy", json_object_new_string("Never"));
    kite_obj_set(kite_obj_get(done, "status"), "phase", json_object_new_string("Succeeded"));
    kite_obj_set(kite_obj_meta(going), "deletionTimestamp", json_object_new_string("2026-12-05T00:00:00Z"));
    json_object *pods[] = {no_ip, other, done, going};
    json_object *subsets = kite_epc_subsets(svc, pods, 4);
    expect_json(subsets, "[]");
    json_object_put(subsets);
    /* publishNotReadyAddresses keeps the terminating pod */
    json_object_put(svc);
    svc = service(HTTP_NAMED, ",\"publishNotReadyAddresses\":true");
    subsets = kite_epc_subsets(svc, pods, 4);
    expect_json(subsets, "[{\"addresses\":[" ADDR("10.1.0.8", "g") "],\"ports\":[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"}]}]");
    json_object_put(subsets);
    json_object_put(svc);
    for (size_t i = 0; i < 4; i++) json_object_put(pods[i]);
}

Test(endpoints, subsets_grouped_by_port_set) {
    /* two ports: a numeric one every pod has, a named one whose number differs by pod; a pod
     * without the named port serves only the numeric one */
    json_object *svc = service("[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\",\"targetPort\":\"web\"},"
                               "{\"name\":\"metrics\",\"port\":9090,\"protocol\":\"TCP\",\"targetPort\":9100}]", NULL);
    json_object *c = pod("c", "10.1.0.4", true, 8081, NULL);
    json_object_object_del(json_object_array_get_idx(kite_obj_get(kite_obj_get(c, "spec"), "containers"), 0), "ports");
    json_object *pods[] = {pod("a", "10.1.0.2", true, 8080, NULL), pod("b", "10.1.0.3", false, 8080, NULL), c,
                           pod("d", "10.1.0.5", true, 8081, NULL)};
    json_object *subsets = kite_epc_subsets(svc, pods, 4);
    expect_json(subsets,
                "[{\"addresses\":[" ADDR("10.1.0.2", "a") "],\"notReadyAddresses\":[" ADDR("10.1.0.3", "b") "],"
                "\"ports\":[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"}]},"
                "{\"addresses\":[" ADDR("10.1.0.5", "d") "],\"ports\":[{\"name\":\"http\",\"port\":8081,\"protocol\":\"TCP\"}]},"
                "{\"addresses\":[" ADDR("10.1.0.2", "a") "," ADDR("10.1.0.4", "c") "," ADDR("10.1.0.5", "d") "],"
                "\"notReadyAddresses\":[" ADDR("10.1.0.3", "b") "],\"ports\":[{\"name\":\"metrics\",\"port\":9100,\"protocol\":\"TCP\"}]}]");
    json_object_put(subsets);
    json_object_put(svc);
    for (size_t i = 0; i < 4; i++) json_object_put(pods[i]);
}

Test(endpoints, headless_without_ports) {
    json_object *svc = service("[]", ",\"clusterIP\":\"None\"");
    json_object *p = pod("a", "10.1.0.2", true, 8080, NULL);
    kite_obj_set(kite_obj_get(p, "spec"), "hostname", json_object_new_string("a"));
    kite_obj_set(kite_obj_get(p, "spec"), "subdomain", json_object_new_string("web"));
    json_object *subsets = kite_epc_subsets(svc, &p, 1);
    expect_json(subsets, "[{\"addresses\":[{\"ip\":\"10.1.0.2\",\"hostname\":\"a\",\"nodeName\":\"n1\",\"targetRef\":{\"kind\":"
                         "\"Pod\",\"namespace\":\"default\",\"name\":\"a\",\"uid\":\"uid-a\"}}]}]");
    json_object_put(subsets);
    json_object *want = NULL;
    cr_assert_eq(kite_epc_reconcile(svc, &p, 1, NULL, false, "", &want), KITE_EPC_CREATE);
    cr_expect_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(want), "labels"), "service.kubernetes.io/headless"), "");
    json_object_put(want);
    json_object_put(svc);
    /* a Service with a cluster IP and no ports gets no endpoints */
    svc = service("[]", NULL);
    subsets = kite_epc_subsets(svc, &p, 1);
    expect_json(subsets, "[]");
    json_object_put(subsets);
    json_object_put(svc);
    json_object_put(p);
}

Test(endpoints, create_update_and_no_churn) {
    json_object *svc = service(HTTP_NAMED, NULL);
    json_object *p = pod("a", "10.1.0.2", true, 8080, NULL);
    json_object *want = NULL;
    cr_assert_eq(kite_epc_reconcile(svc, &p, 1, NULL, false, "2026-12-02T00:00:00Z", &want), KITE_EPC_CREATE);
    expect_json(want, "{\"apiVersion\":\"v1\",\"kind\":\"Endpoints\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
                      "\"labels\":{\"tier\":\"front\"},\"annotations\":{\"endpoints.kubernetes.io/last-change-trigger-time\":"
                      "\"2026-12-02T00:00:00Z\"}},\"subsets\":[{\"addresses\":[" ADDR("10.1.0.2", "a") "],"
                      "\"ports\":[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"}]}]}");
    cr_expect_null(kite_obj_get(kite_obj_meta(want), "ownerReferences"));
    cr_expect_null(kite_obj_str(kite_obj_get(kite_obj_meta(want), "labels"), "endpoints.kubernetes.io/managed-by"));
    /* what it wrote, read back: nothing to do */
    json_object *cur = want, *again = NULL;
    kite_obj_set(kite_obj_meta(cur), "resourceVersion", json_object_new_string("7"));
    cr_expect_eq(kite_epc_reconcile(svc, &p, 1, cur, false, "", &again), KITE_EPC_NONE);
    cr_expect_null(again);
    /* the pod turns not ready: an update of the current object, the annotation replaced */
    json_object_put(p);
    p = pod("a", "10.1.0.2", false, 8080, "2026-12-03T00:00:00Z");
    cr_assert_eq(kite_epc_reconcile(svc, &p, 1, cur, false, "2026-12-03T00:00:00Z", &again), KITE_EPC_UPDATE);
    cr_expect_str_eq(kite_obj_str(kite_obj_meta(again), "resourceVersion"), "7");
    cr_expect_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(again), "annotations"), "endpoints.kubernetes.io/last-change-trigger-time"),
                     "2026-12-03T00:00:00Z");
    json_object *ss = json_object_array_get_idx(kite_obj_get(again, "subsets"), 0);
    cr_expect_null(kite_obj_get(ss, "addresses"));
    cr_expect_eq(kite_array_len(kite_obj_get(ss, "notReadyAddresses")), 1);
    json_object_put(again);
    /* the Service's labels change: an update */
    kite_obj_set(kite_obj_meta(svc), "labels", fakeapi_json("{\"tier\":\"back\"}"));
    json_object_put(p);
    p = pod("a", "10.1.0.2", true, 8080, NULL);
    cr_assert_eq(kite_epc_reconcile(svc, &p, 1, cur, false, "", &again), KITE_EPC_UPDATE);
    cr_expect_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(again), "labels"), "tier"), "back");
    cr_expect_null(kite_obj_get(kite_obj_meta(again), "annotations"), "no trigger time: the annotation goes");
    json_object_put(again);
    json_object_put(cur);
    json_object_put(p);
    json_object_put(svc);
}

Test(endpoints, services_left_alone_and_deletion) {
    json_object *p = pod("a", "10.1.0.2", true, 8080, NULL);
    json_object *user = fakeapi_json("{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"subsets\":[{\"addresses\":"
                                     "[{\"ip\":\"192.0.2.1\"}],\"ports\":[{\"port\":5432,\"protocol\":\"TCP\"}]}]}");
    json_object *want = NULL;
    /* no selector: the user's Endpoints stay as they are */
    json_object *svc = fakeapi_json("{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"clusterIP\":"
                                    "\"10.96.0.9\",\"ports\":[{\"port\":5432,\"protocol\":\"TCP\"}]}}");
    cr_expect_eq(kite_epc_reconcile(svc, &p, 1, user, false, "", &want), KITE_EPC_NONE);
    cr_expect_eq(kite_epc_reconcile(svc, &p, 1, NULL, false, "", &want), KITE_EPC_NONE);
    json_object_put(svc);
    svc = fakeapi_json("{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"selector\":{},\"ports\":[]}}");
    cr_expect_eq(kite_epc_reconcile(svc, &p, 1, user, false, "", &want), KITE_EPC_NONE, "an empty selector is none");
    json_object_put(svc);
    svc = fakeapi_json("{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"type\":\"ExternalName\","
                       "\"externalName\":\"db.example\",\"selector\":{\"app\":\"web\"}}}");
    cr_expect_eq(kite_epc_reconcile(svc, &p, 1, user, false, "", &want), KITE_EPC_NONE);
    json_object_put(svc);
    cr_expect_null(want);
    /* the Service deleted: its Endpoints go; with no Service seen deleted, they stay */
    cr_expect_eq(kite_epc_reconcile(NULL, NULL, 0, user, true, "", &want), KITE_EPC_DELETE);
    cr_expect_eq(kite_epc_reconcile(NULL, NULL, 0, user, false, "", &want), KITE_EPC_NONE);
    cr_expect_eq(kite_epc_reconcile(NULL, NULL, 0, NULL, true, "", &want), KITE_EPC_NONE);
    json_object_put(user);
    json_object_put(p);
}

Test(endpoints, trigger_time) {
    json_object *svc = service(HTTP_NAMED, NULL);
    json_object *pods[] = {pod("a", "10.1.0.2", true, 8080, "2026-12-03T00:00:00Z"),
                           pod("b", "10.1.0.3", true, 8080, "2026-12-04T00:00:00Z")};
    json_object *state = NULL;
    char t[40];
    /* first sight: the earliest of everything (the Service's creation) */
    kite_epc_trigger_time(&state, svc, pods, 2, t);
    cr_expect_str_eq(t, "2026-12-01T00:00:00Z");
    kite_epc_trigger_time(&state, svc, pods, 2, t);
    cr_expect_str_eq(t, "", "nothing changed");
    /* b's readiness changed: its transition time */
    json_object_put(pods[1]);
    pods[1] = pod("b", "10.1.0.3", false, 8080, "2026-12-05T00:00:00Z");
    kite_epc_trigger_time(&state, svc, pods, 2, t);
    cr_expect_str_eq(t, "2026-12-05T00:00:00Z");
    json_object_put(state);
    json_object_put(svc);
    for (size_t i = 0; i < 2; i++) json_object_put(pods[i]);
}

/* A subset of `ready` and `not_ready` addresses (10.x.y.z from base). */
static json_object *big_subset(size_t ready, size_t not_ready, unsigned base) {
    json_object *ss = json_object_new_object(), *r = json_object_new_array(), *n = json_object_new_array();
    for (size_t i = 0; i < ready + not_ready; i++) {
        char ip[32];
        unsigned v = base + (unsigned)i;
        snprintf(ip, sizeof ip, "10.%u.%u.%u", (v >> 16) & 255, (v >> 8) & 255, v & 255);
        json_object *a = json_object_new_object();
        json_object_object_add(a, "ip", json_object_new_string(ip));
        json_object_array_add(i < ready ? r : n, a);
    }
    if (ready) json_object_object_add(ss, "addresses", r);
    else json_object_put(r);
    if (not_ready) json_object_object_add(ss, "notReadyAddresses", n);
    else json_object_put(n);
    return ss;
}

static size_t len_at(json_object *subsets, size_t i, const char *k) {
    return kite_array_len(kite_obj_get(json_object_array_get_idx(subsets, i), k));
}

Test(endpoints, over_capacity_truncated_as_upstream) {
    /* 1000 exactly: kept whole */
    json_object *s = json_object_new_array();
    json_object_array_add(s, big_subset(900, 100, 0));
    cr_expect_not(kite_epc_truncate(s));
    cr_expect_eq(len_at(s, 0, "notReadyAddresses"), 100);
    json_object_put(s);
    /* the ready ones fit: the not-ready ones are cut, in proportion per subset */
    s = json_object_new_array();
    json_object_array_add(s, big_subset(500, 300, 0));
    json_object_array_add(s, big_subset(300, 100, 10000));
    cr_expect(kite_epc_truncate(s));
    cr_expect_eq(len_at(s, 0, "addresses"), 500);
    cr_expect_eq(len_at(s, 0, "notReadyAddresses"), 150); /* ceil(300/400 * 200) */
    cr_expect_eq(len_at(s, 1, "addresses"), 300);
    cr_expect_eq(len_at(s, 1, "notReadyAddresses"), 50);
    json_object_put(s);
    /* more ready ones than fit: not-ready ones all go, the ready ones cut */
    s = json_object_new_array();
    json_object_array_add(s, big_subset(700, 10, 0));
    json_object_array_add(s, big_subset(700, 0, 10000));
    cr_expect(kite_epc_truncate(s));
    cr_expect_eq(len_at(s, 0, "addresses"), 500);
    cr_expect_null(kite_obj_get(json_object_array_get_idx(s, 0), "notReadyAddresses"));
    cr_expect_eq(len_at(s, 1, "addresses"), 500);
    json_object_put(s);
}

Test(endpoints, over_capacity_marked) {
    json_object *svc = service("[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\",\"targetPort\":8080}]", NULL);
    size_t n = KITE_EPC_MAX_CAPACITY + 5;
    json_object **pods = calloc(n, sizeof *pods);
    for (size_t i = 0; i < n; i++) {
        char name[16], ip[32];
        snprintf(name, sizeof name, "p%zu", i);
        snprintf(ip, sizeof ip, "10.1.%zu.%zu", i / 250, i % 250 + 1);
        pods[i] = pod(name, ip, true, 8080, NULL);
    }
    json_object *want = NULL, *again = NULL;
    cr_assert_eq(kite_epc_reconcile(svc, pods, n, NULL, false, "", &want), KITE_EPC_CREATE);
    cr_expect_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(want), "annotations"), "endpoints.kubernetes.io/over-capacity"),
                     "truncated");
    cr_expect_eq(len_at(kite_obj_get(want, "subsets"), 0, "addresses"), KITE_EPC_MAX_CAPACITY);
    cr_expect_eq(kite_epc_reconcile(svc, pods, n, want, false, "", &again), KITE_EPC_NONE, "no churn once truncated");
    /* back under the capacity: the mark goes */
    cr_assert_eq(kite_epc_reconcile(svc, pods, 10, want, false, "", &again), KITE_EPC_UPDATE);
    cr_expect_null(kite_obj_get(kite_obj_meta(again), "annotations"));
    json_object_put(again);
    json_object_put(want);
    for (size_t i = 0; i < n; i++) json_object_put(pods[i]);
    free(pods);
    json_object_put(svc);
}
