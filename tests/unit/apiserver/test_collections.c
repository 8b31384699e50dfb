/* Dry runs, deletecollection and event expiry, through HTTPS against a server in this
 * process with a fake clock. */
#include "harness.h"
#include "apiserver/internal.h"

#include <criterion/criterion.h>
#include <stdio.h>

TestSuite(dryrun, .init = api_start, .fini = api_stop, .timeout = 120);

#define PODS "/api/v1/namespaces/default/pods"
#define LEASES "/apis/coordination.k8s.io/v1/namespaces/default/leases"
/* the default tolerations and ServiceAccount the server adds on create: an update that dropped
 * them would be refused */
#define POD_TOLERATIONS "\"serviceAccountName\":\"default\",\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],"
#define POD(name, extra_meta)                                                                              \
    "{\"metadata\":{\"name\":\"" name "\"" extra_meta "},\"spec\":{" POD_TOLERATIONS "\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}"

static json_object *get(const char *path, long want) {
    json_object *o = NULL;
    long code = api_req("GET", path, NULL, NULL, &o);
    cr_assert_eq(code, want, "GET %s: %ld", path, code);
    return o;
}

static void put_get(const char *path, long want) { json_object_put(get(path, want)); }

Test(dryrun, create_answers_the_object_and_stores_nothing) {
    json_object *o = NULL;
    long code = api_req("POST", PODS "?dryRun=All", NULL, POD("p", ",\"labels\":{\"a\":\"1\"}"), &o);
    cr_assert_eq(code, 201, "%ld %s", code, json_object_to_json_string(o));
    cr_assert_str_eq(jstr(o, "metadata.name"), "p");
    cr_assert_str_eq(jstr(o, "metadata.creationTimestamp"), API_T0);
    cr_assert_not_null(jstr(o, "metadata.uid"));
    cr_assert_str_eq(jstr(o, "metadata.labels.a"), "1");
    json_object_put(o);
    put_get(PODS "/p", 404);
    /* a dry run is still refused what the real one would be */
    cr_assert_eq(api_req("POST", "/api/v1/namespaces/nope/pods?dryRun=All", NULL, POD("p", ""), &o), 404);
    json_object_put(o);
    cr_assert_eq(api_req("POST", PODS "?dryRun=All", NULL, POD("Bad_Name", ""), &o), 422);
    json_object_put(o);
    /* and an existing object still conflicts */
    cr_assert_eq(api_req("POST", PODS, NULL, POD("q", ""), &o), 201);
    json_object_put(o);
    cr_assert_eq(api_req("POST", PODS "?dryRun=All", NULL, POD("q", ""), &o), 409);
    json_object_put(o);
}

Test(dryrun, update_patch_delete_change_nothing) {
    json_object *o = NULL;
    cr_assert_eq(api_req("POST", PODS, NULL, POD("p", ",\"labels\":{\"v\":\"1\"}"), &o), 201);
    char rv[32];
    snprintf(rv, sizeof rv, "%s", jstr(o, "metadata.resourceVersion"));
    json_object_put(o);
    cr_assert_eq(api_req("POST", LEASES, NULL, "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"holderIdentity\":\"a\"}}", &o), 201);
    json_object_put(o);

    const struct {
        const char *method, *path, *ctype, *body;
        long code;
        const char *field, *want; /* in the answer: what would be */
    } cases[] = {
        {"PUT", PODS "/p?dryRun=All", NULL, POD("p", ",\"labels\":{\"v\":\"2\"}"), 200, "metadata.labels.v", "2"},
        {"PATCH", PODS "/p?dryRun=All", "application/merge-patch+json", "{\"metadata\":{\"labels\":{\"v\":\"3\"}}}", 200,
         "metadata.labels.v", "3"},
        {"PATCH", PODS "/p?dryRun=All", "application/json-patch+json",
         "[{\"op\":\"replace\",\"path\":\"/metadata/labels/v\",\"value\":\"4\"}]", 200, "metadata.labels.v", "4"},
        {"PATCH", LEASES "/l?dryRun=All", "application/strategic-merge-patch+json", "{\"spec\":{\"holderIdentity\":\"b\"}}",
         200, "spec.holderIdentity", "b"},
        /* pods answer a delete with the object */
        {"DELETE", PODS "/p?dryRun=All", NULL, NULL, 200, "metadata.name", "p"},
        /* leases with a Status, a dry run as the real one */
        {"DELETE", LEASES "/l?dryRun=All", NULL, NULL, 200, "status", "Success"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        long code = api_req(cases[i].method, cases[i].path, cases[i].ctype, cases[i].body, &o);
        cr_assert_eq(code, cases[i].code, "case %zu: %ld %s", i, code, json_object_to_json_string(o));
        cr_assert_str_eq(jstr(o, cases[i].field), cases[i].want, "case %zu: %s", i, json_object_to_json_string(o));
        json_object_put(o);
        o = get(PODS "/p", 200);
        cr_assert_str_eq(jstr(o, "metadata.labels.v"), "1", "case %zu changed the pod", i);
        cr_assert_str_eq(jstr(o, "metadata.resourceVersion"), rv, "case %zu wrote", i);
        json_object_put(o);
        o = get(LEASES "/l", 200);
        cr_assert_str_eq(jstr(o, "spec.holderIdentity"), "a", "case %zu changed the lease", i);
        json_object_put(o);
    }
}

Test(dryrun, graceful_delete_answers_the_marked_object) {
    json_object *o = NULL;
    cr_assert_eq(api_req("POST", PODS, NULL, POD("p", ",\"finalizers\":[\"example.com/hold\"]"), &o), 201);
    json_object_put(o);
    cr_assert_eq(api_reqf("POST", "/api/v1/namespaces", &o, "{\"metadata\":{\"name\":\"team-a\"}}"), 201);
    json_object_put(o);
    api_advance_s(30);
    char now[21];
    api_now(now);
    cr_assert_eq(api_req("DELETE", PODS "/p?dryRun=All", NULL, NULL, &o), 200);
    cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), now);
    json_object_put(o);
    o = get(PODS "/p", 200);
    cr_assert_null(jget(o, "metadata.deletionTimestamp"));
    json_object_put(o);
    cr_assert_eq(api_req("DELETE", "/api/v1/namespaces/team-a?dryRun=All", NULL, NULL, &o), 200);
    cr_assert_str_eq(jstr(o, "status.phase"), "Terminating");
    cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), now);
    json_object_put(o);
    o = get("/api/v1/namespaces/team-a", 200);
    cr_assert_str_eq(jstr(o, "status.phase"), "Active");
    cr_assert_null(jget(o, "metadata.deletionTimestamp"));
    json_object_put(o);
    /* the namespace is not terminating: creates in it go on */
    cr_assert_eq(api_req("POST", "/api/v1/namespaces/team-a/pods", NULL, POD("p", ""), &o), 201);
    json_object_put(o);
}

/* ---- deletecollection ------------------------------------------------------------------- */

TestSuite(collection, .init = api_start, .fini = api_stop, .timeout = 120);

#define N_LABELED 1500
#define N_HELD 3
#define N_OTHER 5

static size_t count_items(const char *path) {
    json_object *o = get(path, 200);
    size_t n = json_object_array_length(jget(o, "items"));
    json_object_put(o);
    return n;
}

static void create_leases(void) {
    json_object *o = NULL;
    for (int i = 0; i < N_LABELED; i++) {
        cr_assert_eq(api_reqf("POST", LEASES, &o, "{\"metadata\":{\"name\":\"l%04d\",\"labels\":{\"batch\":\"x\"}}}", i), 201);
        json_object_put(o);
    }
    for (int i = 0; i < N_HELD; i++) {
        cr_assert_eq(api_reqf("POST", LEASES, &o,
                              "{\"metadata\":{\"name\":\"held%d\",\"labels\":{\"batch\":\"x\"},"
                              "\"finalizers\":[\"example.com/hold\"]}}", i), 201);
        json_object_put(o);
    }
    for (int i = 0; i < N_OTHER; i++) {
        cr_assert_eq(api_reqf("POST", LEASES, &o, "{\"metadata\":{\"name\":\"other%d\",\"labels\":{\"batch\":\"y\"}}}", i), 201);
        json_object_put(o);
    }
}

Test(collection, deletes_what_the_selector_matches) {
    create_leases();
    json_object *o = NULL;
    /* a dry run lists the same and deletes nothing */
    cr_assert_eq(api_req("DELETE", LEASES "?labelSelector=batch%3Dx&dryRun=All", NULL, NULL, &o), 200);
    cr_assert_eq(json_object_array_length(jget(o, "items")), N_LABELED + N_HELD);
    json_object_put(o);
    cr_assert_eq(count_items(LEASES), N_LABELED + N_HELD + N_OTHER);

    api_advance_s(120);
    char now[21];
    api_now(now);
    long code = api_req("DELETE", LEASES "?labelSelector=batch%3Dx", NULL, NULL, &o);
    cr_assert_eq(code, 200);
    cr_assert_str_eq(jstr(o, "kind"), "LeaseList");
    cr_assert_str_eq(jstr(o, "apiVersion"), "coordination.k8s.io/v1");
    json_object *items = jget(o, "items");
    cr_assert_eq(json_object_array_length(items), N_LABELED + N_HELD, "the answer lists every object deleted or marked");
    /* in key order, each once */
    for (int i = 0; i < N_LABELED; i++) {
        char want[16];
        snprintf(want, sizeof want, "l%04d", i);
        cr_assert_str_eq(kite_meta_str(json_object_array_get_idx(items, N_HELD + (size_t)i), "name"), want);
    }
    for (int i = 0; i < N_HELD; i++) {
        json_object *it = json_object_array_get_idx(items, (size_t)i);
        char want[16];
        snprintf(want, sizeof want, "held%d", i);
        cr_assert_str_eq(kite_meta_str(it, "name"), want);
        /* as kube-apiserver: the object as the delete left it */
        cr_assert_str_eq(kite_meta_str(it, "deletionTimestamp"), now, "%s", json_object_to_json_string(it));
    }
    json_object_put(o);

    /* the labeled ones are gone but those held by finalizers, marked; the others untouched */
    o = get(LEASES, 200);
    items = jget(o, "items");
    cr_assert_eq(json_object_array_length(items), N_HELD + N_OTHER);
    for (size_t i = 0; i < json_object_array_length(items); i++) {
        json_object *it = json_object_array_get_idx(items, i);
        const char *name = kite_meta_str(it, "name");
        if (kite_startswith(name, "held"))
            cr_assert_str_eq(kite_meta_str(it, "deletionTimestamp"), now, "%s", name);
        else
            cr_assert(kite_startswith(name, "other") && !kite_meta_str(it, "deletionTimestamp"), "%s", name);
    }
    json_object_put(o);

    /* again: the marked ones stay as they are (not marked again), nothing else matches */
    api_advance_s(60);
    cr_assert_eq(api_req("DELETE", LEASES "?labelSelector=batch%3Dx", NULL, NULL, &o), 200);
    cr_assert_eq(json_object_array_length(jget(o, "items")), 0);
    json_object_put(o);
    o = get(LEASES "/held0", 200);
    cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), now);
    json_object_put(o);
}

Test(collection, namespaces_have_no_deletecollection) {
    json_object *o = NULL;
    cr_assert_eq(api_req("DELETE", "/api/v1/namespaces", NULL, NULL, &o), 405);
    cr_assert_str_eq(jstr(o, "reason"), "MethodNotAllowed");
    json_object_put(o);
    put_get("/api/v1/namespaces/kube-public", 200);
}

/* ---- event expiry ----------------------------------------------------------------------- */

#define TTL_S 60
static void start_short_ttl(void) { api_start_ttl(TTL_S); }
TestSuite(expiry, .init = start_short_ttl, .fini = api_stop, .timeout = 120);

#define EVENTS "/api/v1/namespaces/default/events"

Test(expiry, events_older_than_the_ttl_are_deleted) {
    json_object *o = NULL;
    char later[21];
    kite_time_format((API_T0_S + 100) * KITE_NS_PER_SEC, later);
    /* created now, nothing else: its creation time counts */
    cr_assert_eq(api_req("POST", EVENTS, NULL, "{\"metadata\":{\"name\":\"old\"},\"involvedObject\":{\"kind\":\"Pod\"}}", &o), 201);
    json_object_put(o);
    /* happened again 100 s from now: lastTimestamp counts */
    cr_assert_eq(api_reqf("POST", EVENTS, &o,
                          "{\"metadata\":{\"name\":\"recurring\"},\"involvedObject\":{\"kind\":\"Pod\"},"
                          "\"firstTimestamp\":\"%s\",\"lastTimestamp\":\"%s\"}", API_T0, later), 201);
    json_object_put(o);
    /* the new API, stored with the core events */
    cr_assert_eq(api_req("POST", "/apis/events.k8s.io/v1/namespaces/default/events", NULL,
                         "{\"metadata\":{\"name\":\"v1\"},\"regarding\":{\"kind\":\"Pod\"},\"eventTime\":\"" API_T0 "\"}", &o), 201);
    json_object_put(o);
    /* what does not expire: a lease */
    cr_assert_eq(api_req("POST", LEASES, NULL, "{\"metadata\":{\"name\":\"l\"}}", &o), 201);
    json_object_put(o);

    struct kite_apiserver *s = api.srv;
    kite_apiserver_housekeeping_once(s); /* nothing is older than the TTL yet */
    cr_assert_eq(count_items(EVENTS), 3);

    api_advance_s(TTL_S); /* exactly the TTL: not older */
    uint64_t scans = s->expiry_scans;
    kite_apiserver_housekeeping_once(s);
    cr_assert_eq(count_items(EVENTS), 3);
    /* nothing changed and nothing due: the events were not listed again */
    cr_assert_eq(s->expiry_scans, scans, "a quiet period listed the events");

    api_advance_s(2);
    kite_apiserver_housekeeping_once(s);
    put_get(EVENTS "/old", 404);
    put_get("/apis/events.k8s.io/v1/namespaces/default/events/v1", 404);
    put_get(EVENTS "/recurring", 200);
    put_get(LEASES "/l", 200);

    api_advance_s(100);
    kite_apiserver_housekeeping_once(s);
    put_get(EVENTS "/recurring", 404);
    cr_assert_eq(count_items(EVENTS), 0);
    put_get(LEASES "/l", 200);
}
