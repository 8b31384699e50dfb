/* The write engine through HTTPS against a server in this process: optimistic concurrency,
 * generation, the status/spec split of subresources, timestamps from the injected clock and
 * graceful deletion behind finalizers. */
#include "harness.h"
#include "api/registry.h"

#include <criterion/criterion.h>
#include <stdio.h>

TestSuite(writes, .init = api_start, .fini = api_stop, .timeout = 120);

/* the default tolerations and ServiceAccount the server adds on create: an update that dropped
 * them would be refused */
#define POD_TOLERATIONS "\"serviceAccountName\":\"default\",\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],"
#define POD(name, extra_meta)                                                                              \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\"" extra_meta "},"          \
    "\"spec\":{" POD_TOLERATIONS "\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}"

static json_object *create(const char *path, const char *body) {
    json_object *o = NULL;
    long code = api_req("POST", path, NULL, body, &o);
    cr_assert_eq(code, 201, "POST %s: %ld %s", path, code, json_object_to_json_string(o));
    return o;
}

static json_object *get(const char *path) {
    json_object *o = NULL;
    long code = api_req("GET", path, NULL, NULL, &o);
    cr_assert_eq(code, 200, "GET %s: %ld", path, code);
    return o;
}

/* ---- optimistic concurrency ------------------------------------------------------------- */

Test(writes, put_with_a_stale_resource_version_is_a_conflict) {
    json_object *p = create("/api/v1/namespaces/default/pods", POD("p", ""));
    char stale[32];
    snprintf(stale, sizeof stale, "%s", jstr(p, "metadata.resourceVersion"));
    json_object_put(p);
    json_object *o = NULL;
    /* someone else's change makes our copy stale */
    cr_assert_eq(api_reqf("PATCH", "/api/v1/namespaces/default/pods/p", &o, "{\"metadata\":{\"labels\":{\"a\":\"1\"}}}"), 200);
    json_object_put(o);
    long code = api_reqf("PUT", "/api/v1/namespaces/default/pods/p", &o,
                         "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"resourceVersion\":\"%s\","
                         "\"labels\":{\"b\":\"2\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}",
                         stale);
    cr_assert_eq(code, 409);
    cr_assert_str_eq(jstr(o, "reason"), "Conflict");
    cr_assert_str_eq(jstr(o, "message"), "Operation cannot be fulfilled on pods \"p\": the object has been modified; "
                                         "please apply your changes to the latest version and try again");
    cr_assert_str_eq(jstr(o, "details.name"), "p");
    cr_assert_str_eq(jstr(o, "details.kind"), "pods");
    json_object_put(o);
    /* the stale write changed nothing */
    o = get("/api/v1/namespaces/default/pods/p");
    cr_assert_str_eq(jstr(o, "metadata.labels.a"), "1");
    cr_assert_null(jget(o, "metadata.labels.b"));
    json_object_put(o);
}

/* Which kinds let a PUT leave out metadata.resourceVersion (the rows' unconditional_update). */
struct uncond_case {
    const char *collection, *name, *body;
    long want;
};

Test(writes, put_without_resource_version_follows_the_row) {
    const struct uncond_case cases[] = {
        /* namespaces: the version must be given */
        {"/api/v1/namespaces", "team-a", "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"team-a\"}}", 422},
        {"/api/v1/namespaces/default/pods", "p", POD("p", ""), 200},
        {"/apis/coordination.k8s.io/v1/namespaces/default/leases", "l",
         "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"l\"}}", 200},
        {"/api/v1/nodes", "n1", "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}}", 200},
    };
    const struct kite_resource *nsr = kite_registry_namespaces();
    cr_assert(!nsr->unconditional_update); /* the case the 422 row stands for */
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        const struct uncond_case *c = &cases[i];
        json_object_put(create(c->collection, c->body));
        _cleanup_free_ char *path = kite_asprintf("%s/%s", c->collection, c->name);
        json_object *o = NULL;
        long code = api_req("PUT", path, NULL, c->body, &o);
        cr_assert_eq(code, c->want, "PUT %s: %ld %s", path, code, json_object_to_json_string(o));
        if (c->want == 422) {
            cr_assert_str_eq(jstr(o, "reason"), "Invalid");
            cr_assert_str_eq(jstr(o, "message"), "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update");
        }
        json_object_put(o);
    }
}

Test(writes, patch_applies_to_the_latest_version) {
    json_object_put(create("/api/v1/namespaces/default/pods", POD("p", ",\"labels\":{\"a\":\"1\"}")));
    json_object *o = NULL;
    /* an update the patch's author never saw */
    cr_assert_eq(api_req("PUT", "/api/v1/namespaces/default/pods/p", NULL, POD("p", ",\"labels\":{\"a\":\"1\",\"b\":\"2\"}"), &o), 200);
    const char *rv_put = jstr(o, "metadata.resourceVersion");
    cr_assert_not_null(rv_put);
    char rv[32];
    snprintf(rv, sizeof rv, "%s", rv_put);
    json_object_put(o);
    const char *types[] = {"application/merge-patch+json", "application/strategic-merge-patch+json"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(types); i++) {
        _cleanup_free_ char *body = kite_asprintf("{\"metadata\":{\"labels\":{\"c%zu\":\"3\"}}}", i);
        cr_assert_eq(api_req("PATCH", "/api/v1/namespaces/default/pods/p", types[i], body, &o), 200);
        cr_assert_str_eq(jstr(o, "metadata.labels.a"), "1");
        cr_assert_str_eq(jstr(o, "metadata.labels.b"), "2", "%s lost the update before it", types[i]);
        _cleanup_free_ char *k = kite_asprintf("metadata.labels.c%zu", i);
        cr_assert_str_eq(jstr(o, k), "3");
        int64_t before = strtoll(rv, NULL, 10), after = strtoll(jstr(o, "metadata.resourceVersion"), NULL, 10);
        cr_assert_gt(after, before);
        snprintf(rv, sizeof rv, "%lld", (long long)after);
        json_object_put(o);
    }
    /* a patch that names a resourceVersion is a precondition: stale -> 409 */
    cr_assert_eq(api_reqf("PATCH", "/api/v1/namespaces/default/pods/p", &o,
                          "{\"metadata\":{\"resourceVersion\":\"%lld\",\"labels\":{\"d\":\"4\"}}}", strtoll(rv, NULL, 10) - 1),
                 409);
    cr_assert_str_eq(jstr(o, "reason"), "Conflict");
    json_object_put(o);
    cr_assert_eq(api_reqf("PATCH", "/api/v1/namespaces/default/pods/p", &o,
                          "{\"metadata\":{\"resourceVersion\":\"%s\",\"labels\":{\"d\":\"4\"}}}", rv), 200);
    cr_assert_str_eq(jstr(o, "metadata.labels.d"), "4");
    json_object_put(o);
}

/* ---- generation ------------------------------------------------------------------------- */

/* No served kind counts spec changes yet (no row sets spec_generation): metadata.generation is
 * the server's field, never the client's, and stays absent through spec changes. */
Test(writes, generation_is_the_servers_field) {
    for (size_t i = 0; kite_resources[i]; i++)
        if (kite_resources[i]->spec_generation) cr_skip_test("a served kind counts generations: test it here");
    json_object *o = create("/api/v1/namespaces/default/pods", POD("p", ",\"generation\":7"));
    cr_assert_null(jget(o, "metadata.generation"));
    json_object_put(o);
    const char *images[] = {"busybox:2", "busybox:3"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(images); i++) {
        cr_assert_eq(api_reqf("PATCH", "/api/v1/namespaces/default/pods/p", &o,
                              "{\"metadata\":{\"generation\":9},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"%s\",\"imagePullPolicy\":\"Always\"}]}}",
                              images[i]), 200);
        cr_assert_str_eq(jstr(o, "spec.containers.0.image"), images[i]);
        cr_assert_null(jget(o, "metadata.generation"));
        json_object_put(o);
    }
}

/* ---- status / spec ---------------------------------------------------------------------- */

static const char *NODE_V1 =
    "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"spec\":{\"podCIDR\":\"10.0.0.0/24\"},"
    "\"status\":{\"phase\":\"Running\",\"nodeInfo\":{\"osImage\":\"one\"}}}";

Test(writes, node_status_put_changes_status_only) {
    json_object_put(create("/api/v1/nodes", NODE_V1));
    json_object *o = NULL;
    long code = api_req("PUT", "/api/v1/nodes/n1/status", NULL,
                        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},"
                        "\"spec\":{\"podCIDR\":\"10.9.9.0/24\",\"unschedulable\":true},"
                        "\"status\":{\"nodeInfo\":{\"osImage\":\"two\"}}}",
                        &o);
    cr_assert_eq(code, 200, "%ld %s", code, json_object_to_json_string(o));
    json_object_put(o);
    o = get("/api/v1/nodes/n1");
    cr_assert_str_eq(jstr(o, "status.nodeInfo.osImage"), "two");
    cr_assert_null(jget(o, "status.phase"), "status is replaced as a whole");
    cr_assert_str_eq(jstr(o, "spec.podCIDR"), "10.0.0.0/24", "spec in a status write is ignored");
    cr_assert_null(jget(o, "spec.unschedulable"));
    json_object_put(o);
}

Test(writes, node_put_keeps_status) {
    json_object_put(create("/api/v1/nodes", NODE_V1));
    json_object *o = NULL;
    long code = api_req("PUT", "/api/v1/nodes/n1", NULL,
                        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},"
                        "\"spec\":{\"podCIDR\":\"10.0.0.0/24\",\"unschedulable\":true},\"status\":{\"nodeInfo\":{\"osImage\":\"two\"}}}",
                        &o);
    cr_assert_eq(code, 200);
    json_object_put(o);
    o = get("/api/v1/nodes/n1");
    cr_assert(json_object_get_boolean(jget(o, "spec.unschedulable")));
    cr_assert_str_eq(jstr(o, "status.nodeInfo.osImage"), "one");
    cr_assert_str_eq(jstr(o, "status.phase"), "Running");
    json_object_put(o);
    /* a patch of the main resource leaves status alone too */
    cr_assert_eq(api_reqf("PATCH", "/api/v1/nodes/n1", &o, "{\"status\":{\"phase\":\"Pending\"}}"), 200);
    cr_assert_str_eq(jstr(o, "status.phase"), "Running");
    json_object_put(o);
}

Test(writes, namespace_finalize_changes_spec_finalizers_only) {
    json_object *ns = create("/api/v1/namespaces", "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"team-a\"}}");
    cr_assert_str_eq(jstr(ns, "spec.finalizers.0"), "kubernetes");
    /* the namespace as read, with other finalizers and a changed status */
    json_object *f = json_object_new_array();
    json_object_array_add(f, json_object_new_string("example.com/x"));
    kite_obj_set(kite_obj_get(ns, "spec"), "finalizers", f);
    kite_obj_set(kite_obj_get(ns, "status"), "phase", json_object_new_string("Terminating"));
    json_object *o = NULL;
    long code = api_req("PUT", "/api/v1/namespaces/team-a/finalize", NULL, json_object_to_json_string(ns), &o);
    cr_assert_eq(code, 200, "%ld %s", code, json_object_to_json_string(o));
    json_object_put(o);
    o = get("/api/v1/namespaces/team-a");
    cr_assert_str_eq(jstr(o, "spec.finalizers.0"), "example.com/x");
    cr_assert_null(jget(o, "spec.finalizers.1"));
    cr_assert_str_eq(jstr(o, "status.phase"), "Active");
    json_object_put(o);
    /* and the main resource cannot change spec.finalizers (only finalize can) */
    kite_obj_set(kite_obj_get(ns, "spec"), "finalizers", json_object_new_array());
    json_object_object_del(kite_obj_meta(ns), "resourceVersion");
    cr_assert_eq(api_req("PATCH", "/api/v1/namespaces/team-a", "application/merge-patch+json",
                         "{\"spec\":{\"finalizers\":[]}}", &o), 200);
    cr_assert_str_eq(jstr(o, "spec.finalizers.0"), "example.com/x");
    json_object_put(o);
    /* finalize is PUT only (kube-apiserver serves no other verb there) */
    cr_assert_eq(api_req("PATCH", "/api/v1/namespaces/team-a/finalize", "application/merge-patch+json",
                         "{\"spec\":{\"finalizers\":[]}}", &o), 405);
    cr_assert_str_eq(jstr(o, "reason"), "MethodNotAllowed");
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/team-a/finalize", NULL, NULL, &o), 405);
    json_object_put(o);
    o = get("/api/v1/namespaces/team-a");
    cr_assert_str_eq(jstr(o, "spec.finalizers.0"), "example.com/x");
    json_object_put(o);
    json_object_put(ns);
}

/* ---- timestamps from the injected clock ------------------------------------------------- */

Test(writes, creation_timestamp_comes_from_the_clock) {
    const struct {
        const char *collection, *body;
    } cases[] = {
        {"/api/v1/namespaces", "{\"metadata\":{\"name\":\"team-a\"}}"},
        {"/api/v1/nodes", "{\"metadata\":{\"name\":\"n1\"}}"},
        {"/api/v1/namespaces/default/pods", POD("p", "")},
        {"/apis/coordination.k8s.io/v1/namespaces/default/leases", "{\"metadata\":{\"name\":\"l\"}}"},
        {"/api/v1/namespaces/default/events", "{\"metadata\":{\"name\":\"e\"},\"involvedObject\":{\"kind\":\"Pod\"}}"},
        {"/apis/events.k8s.io/v1/namespaces/default/events", "{\"metadata\":{\"name\":\"e2\"},\"regarding\":{\"kind\":\"Pod\"}}"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        api_advance_s(3600 + (int64_t)i); /* far from the real time, and different each time */
        char now[21];
        api_now(now);
        json_object *o = NULL;
        long code = api_req("POST", cases[i].collection, NULL, cases[i].body, &o);
        cr_assert_eq(code, 201, "%s: %ld %s", cases[i].collection, code, json_object_to_json_string(o));
        cr_assert_str_eq(jstr(o, "metadata.creationTimestamp"), now, "%s", cases[i].collection);
        /* a client's value is replaced */
        json_object_put(o);
    }
    json_object *o = create("/api/v1/namespaces/default/pods", POD("q", ",\"creationTimestamp\":\"2001-01-01T00:00:00Z\""));
    char now[21];
    api_now(now);
    cr_assert_str_eq(jstr(o, "metadata.creationTimestamp"), now);
    json_object_put(o);
}

/* ---- graceful deletion ------------------------------------------------------------------ */

Test(writes, finalizers_hold_a_deleted_object_until_removed) {
    json_object_put(create("/api/v1/namespaces/default/pods", POD("p", ",\"finalizers\":[\"example.com/hold\"]")));
    json_object_put(create("/apis/coordination.k8s.io/v1/namespaces/default/leases",
                           "{\"metadata\":{\"name\":\"l\",\"finalizers\":[\"example.com/hold\"]}}"));
    const char *paths[] = {"/api/v1/namespaces/default/pods/p", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(paths); i++) {
        api_advance_s(1000);
        char deleted_at[21];
        api_now(deleted_at);
        json_object *o = NULL;
        long code = api_req("DELETE", paths[i], NULL, NULL, &o);
        cr_assert(code == 200 || code == 202, "DELETE %s: %ld", paths[i], code);
        cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), deleted_at, "%s", json_object_to_json_string(o));
        json_object_put(o);
        api_advance_s(5);
        o = get(paths[i]);
        cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), deleted_at);
        cr_assert_str_eq(jstr(o, "metadata.finalizers.0"), "example.com/hold");
        json_object_put(o);
        /* deleting again changes nothing: 202 with the object as it is */
        cr_assert_eq(api_req("DELETE", paths[i], NULL, NULL, &o), 202);
        cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), deleted_at);
        json_object_put(o);
        /* an update cannot move deletionTimestamp */
        cr_assert_eq(api_reqf("PATCH", paths[i], &o, "{\"metadata\":{\"deletionTimestamp\":null,\"labels\":{\"x\":\"y\"}}}"), 200);
        cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), deleted_at);
        json_object_put(o);
        /* the last finalizer goes: so does the object */
        code = api_reqf("PATCH", paths[i], &o, "{\"metadata\":{\"finalizers\":null}}");
        cr_assert_eq(code, 200, "%ld %s", code, json_object_to_json_string(o));
        json_object_put(o);
        cr_assert_eq(api_req("GET", paths[i], NULL, NULL, &o), 404, "%s still there", paths[i]);
        json_object_put(o);
    }
}

Test(writes, namespace_deletion_waits_for_finalize) {
    json_object_put(create("/api/v1/namespaces", "{\"metadata\":{\"name\":\"team-a\"}}"));
    api_advance_s(86400);
    char deleted_at[21];
    api_now(deleted_at);
    json_object *o = NULL;
    cr_assert_eq(api_req("DELETE", "/api/v1/namespaces/team-a", NULL, NULL, &o), 200);
    cr_assert_str_eq(jstr(o, "status.phase"), "Terminating");
    cr_assert_str_eq(jstr(o, "metadata.deletionTimestamp"), deleted_at);
    json_object_put(o);
    api_advance_s(60);
    json_object *ns = get("/api/v1/namespaces/team-a");
    cr_assert_str_eq(jstr(ns, "status.phase"), "Terminating");
    cr_assert_str_eq(jstr(ns, "metadata.deletionTimestamp"), deleted_at);
    cr_assert_str_eq(jstr(ns, "spec.finalizers.0"), "kubernetes");
    kite_obj_set(kite_obj_get(ns, "spec"), "finalizers", json_object_new_array());
    long code = api_req("PUT", "/api/v1/namespaces/team-a/finalize", NULL, json_object_to_json_string(ns), &o);
    cr_assert_eq(code, 200, "%ld %s", code, json_object_to_json_string(o));
    json_object_put(o);
    json_object_put(ns);
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/team-a", NULL, NULL, &o), 404);
    json_object_put(o);
}
