/* The EndpointSlice controller's endpoint conditions, ports and reconcile, and its writes
 * against the fake API server: each plan applied, read back and reconciled again asks for
 * nothing (no churn). */
#include <criterion/criterion.h>

#include "controllers/endpointslice.h"
#include "fakeapi.h"

#include <stdio.h>

#define SVC_UID "svc-uid"
#define NSP "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"

static json_object *service(const char *extra_spec) {
    return fakeapi_json("{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
                        "\"uid\":\"" SVC_UID "\",\"labels\":{\"tier\":\"front\"}},\"spec\":{\"selector\":{\"app\":\"web\"},"
                        "\"clusterIP\":\"10.96.0.9\",\"ports\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\","
                        "\"targetPort\":\"web\"}]%s}}",
                        extra_spec ? extra_spec : "");
}

/* A pod of app=web named name with address ip, Ready or not, maybe being deleted. */
static json_object *pod(const char *name, const char *ip, bool ready, bool deleting) {
    return fakeapi_json(
        "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"uid-%s\",\"labels\":{\"app\":\"web\"}%s},"
        "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"ports\":[{\"name\":\"web\",\"containerPort\":8080}]}]},"
        "\"status\":{\"phase\":\"Running\",\"podIP\":\"%s\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
        name, name, deleting ? ",\"deletionTimestamp\":\"2026-12-05T00:00:00Z\"" : "", ip, ready ? "True" : "False");
}

static const char *zone(void *ud, const char *node) { return strcmp(node, "n1") == 0 ? "zone-a" : NULL; }

Test(endpointslice, conditions_as_upstream) {
    static const struct {
        bool ready, deleting, publish;
        struct kite_eps_conditions want;
    } cases[] = {
        {true, false, false, {true, true, false}},   {true, true, false, {false, true, true}},
        {false, true, false, {false, false, true}},  {false, false, false, {false, false, false}},
        {false, false, true, {true, false, false}},  {false, true, true, {true, false, true}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_object *p = pod("p", "10.1.0.2", cases[i].ready, cases[i].deleting);
        struct kite_eps_conditions c = kite_eps_conditions(p, cases[i].publish);
        cr_expect(c.ready == cases[i].want.ready && c.serving == cases[i].want.serving &&
                      c.terminating == cases[i].want.terminating,
                  "case %zu: got ready=%d serving=%d terminating=%d", i, c.ready, c.serving, c.terminating);
        json_object_put(p);
    }
    json_object *p = pod("p", "10.1.0.2", true, false);
    json_object_object_del(kite_obj_get(p, "status"), "conditions"); /* no Ready condition: not serving */
    cr_expect(!kite_eps_conditions(p, false).serving);
    json_object_put(p);
}

Test(endpointslice, which_pods_are_endpoints) {
    json_object *p = pod("p", "", true, false);
    cr_expect(!kite_eps_pod_included(p), "no address");
    json_object_put(p);
    static const struct {
        const char *policy, *phase;
        bool in;
    } cases[] = {{"Never", "Succeeded", false}, {"Never", "Failed", false},   {"OnFailure", "Succeeded", false},
                 {"OnFailure", "Failed", true}, {"Always", "Failed", true},   {"Always", "Running", true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        p = pod("p", "10.1.0.2", true, true); /* terminating pods are included */
        kite_obj_set(kite_obj_get(p, "spec"), "restartPolicy", json_object_new_string(cases[i].policy));
        kite_obj_set(kite_obj_get(p, "status"), "phase", json_object_new_string(cases[i].phase));
        cr_expect(kite_eps_pod_included(p) == cases[i].in, "%s/%s", cases[i].policy, cases[i].phase);
        json_object_put(p);
    }
}

Test(endpointslice, endpoint_and_named_ports) {
    json_object *svc = service(",\"publishNotReadyAddresses\":false");
    json_object *p = pod("p1", "10.1.0.2", true, false);
    json_object *ep = kite_eps_endpoint(svc, p, "zone-a");
    cr_assert_str_eq(json_object_to_json_string_ext(ep, JSON_C_TO_STRING_PLAIN),
                     "{\"addresses\":[\"10.1.0.2\"],\"conditions\":{\"ready\":true,\"serving\":true,\"terminating\":false},"
                     "\"targetRef\":{\"kind\":\"Pod\",\"namespace\":\"default\",\"name\":\"p1\",\"uid\":\"uid-p1\"},"
                     "\"nodeName\":\"n1\",\"zone\":\"zone-a\"}");
    json_object_put(ep);
    json_object *ports = kite_eps_ports(svc, p);
    cr_assert_str_eq(json_object_to_json_string_ext(ports, JSON_C_TO_STRING_PLAIN),
                     "[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"}]");
    json_object_put(ports);
    /* a named port the pod lacks (or with another protocol) is left out; a number is taken as is */
    json_object_put(svc);
    svc = fakeapi_json("{\"metadata\":{\"name\":\"s\"},\"spec\":{\"selector\":{\"app\":\"web\"},\"ports\":["
                       "{\"name\":\"a\",\"port\":1,\"protocol\":\"UDP\",\"targetPort\":\"web\"},"
                       "{\"name\":\"b\",\"port\":2,\"protocol\":\"TCP\",\"targetPort\":\"nope\"},"
                       "{\"name\":\"c\",\"port\":3,\"protocol\":\"TCP\",\"targetPort\":9000}]}}");
    ports = kite_eps_ports(svc, p);
    cr_assert_str_eq(json_object_to_json_string_ext(ports, JSON_C_TO_STRING_PLAIN),
                     "[{\"name\":\"c\",\"port\":9000,\"protocol\":\"TCP\"}]");
    json_object_put(ports);
    json_object_put(svc);
    json_object_put(p);
}

/* ---- reconcile against the fake API server ---------------------------------------------------- */

struct world {
    struct fakeapi f;
    json_object *svc;
    json_object *pods[300];
    size_t n_pods;
};

static size_t stored_slices(struct world *w, json_object **out, size_t max) {
    size_t n = 0;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&w->f.objs, &i, &k, &v);)
        if (strncmp(k, NSP "/", strlen(NSP) + 1) == 0 && n < max) out[n++] = v;
    return n;
}

/* Reconciles and applies; returns the plan's (creates, updates, deletes) as a number cuu...: c*100+u*10+d. */
static int step(struct world *w) {
    json_object *slices[16];
    size_t n = stored_slices(w, slices, 16);
    struct kite_eps_plan p;
    kite_eps_reconcile(w->svc, w->pods, w->n_pods, slices, n, zone, NULL, 100, &p);
    int shape = (int)(p.n_create * 100 + p.n_update * 10 + p.n_del);
    cr_assert_eq(kite_eps_apply(w->f.client, "default", &p, NULL, NULL, NULL), 0);
    kite_eps_plan_release(&p);
    /* applied: the next reconcile asks for nothing */
    n = stored_slices(w, slices, 16);
    kite_eps_reconcile(w->svc, w->pods, w->n_pods, slices, n, zone, NULL, 100, &p);
    cr_assert_eq(p.n_create + p.n_update + p.n_del, 0, "a second reconcile churns: %zu/%zu/%zu", p.n_create, p.n_update,
                 p.n_del);
    kite_eps_plan_release(&p);
    return shape;
}

static void world_init(struct world *w) {
    memset(w, 0, sizeof *w);
    fakeapi_init(&w->f);
    w->svc = service(NULL);
}
static void world_release(struct world *w) {
    for (size_t i = 0; i < w->n_pods; i++) json_object_put(w->pods[i]);
    json_object_put(w->svc);
    fakeapi_release(&w->f);
}
static void add_pod(struct world *w, const char *name, const char *ip, bool ready) {
    w->pods[w->n_pods++] = pod(name, ip, ready, false);
}
static json_object *only_slice(struct world *w) {
    json_object *s[16];
    cr_assert_eq(stored_slices(w, s, 16), 1);
    return s[0];
}

Test(endpointslice, placeholder_then_endpoints_in_place) {
    struct world w;
    world_init(&w);
    cr_expect_eq(step(&w), 100, "a Service with no pods gets one placeholder slice");
    json_object *s = only_slice(&w);
    const char *name = kite_meta_str(s, "name");
    cr_expect(strncmp(name, "web-", 4) == 0 && strlen(name) > 4 /* generateName: the fake API appends a counter */, "%s", name);
    cr_expect_eq(json_object_array_length(kite_obj_get(s, "endpoints")), 0);
    cr_expect_null(kite_obj_get(s, "ports"));
    json_object *labels = kite_obj_get(kite_obj_meta(s), "labels");
    cr_expect_str_eq(kite_obj_str(labels, "kubernetes.io/service-name"), "web");
    cr_expect_str_eq(kite_obj_str(labels, "endpointslice.kubernetes.io/managed-by"), "endpointslice-controller.k8s.io");
    cr_expect_str_eq(kite_obj_str(labels, "tier"), "front", "the Service's labels are copied");
    json_object *owner = json_object_array_get_idx(kite_obj_get(kite_obj_meta(s), "ownerReferences"), 0);
    cr_expect_str_eq(kite_obj_str(owner, "uid"), SVC_UID);
    cr_expect(json_object_get_boolean(kite_obj_get(owner, "controller")));
    char *first = strdup(name);

    /* pods come: the placeholder is reused (updated in place), not replaced */
    add_pod(&w, "b", "10.1.0.3", true);
    add_pod(&w, "a", "10.1.0.2", true);
    cr_expect_eq(step(&w), 10);
    s = only_slice(&w);
    cr_expect_str_eq(kite_meta_str(s, "name"), first);
    json_object *eps = kite_obj_get(s, "endpoints");
    cr_assert_eq(json_object_array_length(eps), 2);
    cr_expect_str_eq(kite_obj_str(kite_obj_get(json_object_array_get_idx(eps, 0), "targetRef"), "name"), "a");
    cr_expect_str_eq(kite_obj_str(json_object_array_get_idx(eps, 0), "zone"), "zone-a");
    cr_expect_str_eq(json_object_to_json_string_ext(kite_obj_get(s, "ports"), JSON_C_TO_STRING_PLAIN),
                     "[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\"}]");

    /* b stops being ready: one update of the same slice, b's conditions flipped in place */
    json_object_put(w.pods[0]);
    w.pods[0] = pod("b", "10.1.0.3", false, false);
    cr_expect_eq(step(&w), 10);
    s = only_slice(&w);
    cr_expect_str_eq(kite_meta_str(s, "name"), first);
    json_object *b = json_object_array_get_idx(kite_obj_get(s, "endpoints"), 1);
    cr_expect_str_eq(kite_obj_str(kite_obj_get(b, "targetRef"), "name"), "b");
    cr_expect(!json_object_get_boolean(kite_obj_get(kite_obj_get(b, "conditions"), "ready")));
    cr_expect_eq(fakeapi_count(&w.f, "DELETE", NSP), 0);

    /* publishNotReadyAddresses: b is ready again in the slice though the pod is not */
    json_object_put(w.svc);
    w.svc = service(",\"publishNotReadyAddresses\":true");
    cr_expect_eq(step(&w), 10);
    b = json_object_array_get_idx(kite_obj_get(only_slice(&w), "endpoints"), 1);
    cr_expect(json_object_get_boolean(kite_obj_get(kite_obj_get(b, "conditions"), "ready")));

    /* the Service goes: its slices go */
    json_object_put(w.svc);
    w.svc = NULL;
    cr_expect_eq(step(&w), 1);
    json_object *none[1];
    cr_expect_eq(stored_slices(&w, none, 1), 0);
    free(first);
    world_release(&w);
}

Test(endpointslice, at_most_100_a_slice_and_least_churn) {
    struct world w;
    world_init(&w);
    char name[16], ip[32];
    for (unsigned i = 0; i < 250; i++) {
        snprintf(name, sizeof name, "p%03u", i);
        snprintf(ip, sizeof ip, "10.1.%u.%u", i / 200, i % 200 + 1);
        add_pod(&w, name, ip, true);
    }
    cr_expect_eq(step(&w), 300, "250 endpoints: three new slices");
    json_object *s[16];
    size_t n = stored_slices(&w, s, 16), total = 0;
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < n; i++) {
        size_t k = json_object_array_length(kite_obj_get(s[i], "endpoints"));
        cr_expect(k <= 100);
        total += k;
    }
    cr_expect_eq(total, 250);
    /* one pod goes and another comes: the slice that loses one takes the new one, one write */
    json_object_put(w.pods[7]);
    w.pods[7] = pod("q000", "10.2.0.1", true, false);
    cr_expect_eq(step(&w), 10);
    /* one more pod with every slice full but the 50-endpoint one: it goes there */
    add_pod(&w, "q001", "10.2.0.2", true);
    cr_expect_eq(step(&w), 10);
    world_release(&w);
}

Test(endpointslice, no_selector_no_slices) {
    struct world w;
    world_init(&w);
    add_pod(&w, "a", "10.1.0.2", true);
    cr_expect_eq(step(&w), 100);
    json_object_object_del(kite_obj_get(w.svc, "spec"), "selector");
    cr_expect_eq(step(&w), 1, "a Service that loses its selector loses the slices this controller made");
    world_release(&w);
}
