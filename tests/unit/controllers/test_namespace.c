/* The namespace controller's pass (kite_nsctl_sync) against the fake client transport: what
 * it deletes, what it writes back (finalize, or conditions) and what it leaves alone. */
#include "controllers/controllers.h"
#include "api/registry.h"

#include <criterion/criterion.h>
#include <stdio.h>

#define T0_S INT64_C(1893553445) /* 2030-01-02T03:04:05Z */
#define T0 "2030-01-02T03:04:05Z"

struct call {
    char *method, *path, *ctype;
    json_object *body; /* parsed, or NULL */
};

/* What the fake server answers. */
struct fake {
    const char *ns_json;        /* GET of the namespace (NULL: 404) */
    long ns_code;               /* 0 = 200 / 404 as above */
    const char *fail_delete;    /* a collection path whose DELETE answers 500 */
    const char *fail_delete2;
    const char *fail_list;      /* a collection path whose GET answers 500 */
    const char *remaining_path; /* a collection path whose GET lists remaining_items */
    const char *remaining_items;
    long finalize_code;         /* 0 = 200 */
    struct call calls[64];
    size_t n;
};

static char *status_body(int code, const char *reason, const char *msg) {
    return kite_asprintf("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                         "\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}", msg, reason, code);
}

static int handler(void *ud, const char *method, const char *path, const char *ctype, const char *body, size_t len,
                   struct kite_response *ret) {
    struct fake *f = ud;
    cr_assert_lt(f->n, KITE_ARRAY_SIZE(f->calls));
    struct call *c = &f->calls[f->n++];
    c->method = kite_strdup(method);
    c->path = kite_strdup(path);
    c->ctype = ctype ? kite_strdup(ctype) : NULL;
    c->body = body && len ? json_tokener_parse(body) : NULL;

    if (strcmp(method, "GET") == 0 && strncmp(path, "/api/v1/namespaces/", 19) == 0 && !strchr(path + 19, '/')) {
        if (!f->ns_json || f->ns_code == 404) {
            ret->status = 404;
            ret->body = status_body(404, "NotFound", "namespaces not found");
        } else if (f->ns_code && f->ns_code != 200) {
            ret->status = f->ns_code;
            ret->body = status_body((int)f->ns_code, "InternalError", "boom");
        } else {
            ret->status = 200;
            ret->body = kite_strdup(f->ns_json);
        }
        return 0;
    }
    if (strcmp(method, "DELETE") == 0) {
        if ((f->fail_delete && strcmp(path, f->fail_delete) == 0) || (f->fail_delete2 && strcmp(path, f->fail_delete2) == 0)) {
            ret->status = 500;
            ret->body = status_body(500, "InternalError", "storage error: disk full");
        } else {
            ret->status = 200;
            ret->body = kite_strdup("{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[]}");
        }
        return 0;
    }
    if (strcmp(method, "GET") == 0 && f->fail_list && strcmp(path, f->fail_list) == 0) {
        ret->status = 500;
        ret->body = status_body(500, "InternalError", "storage error: disk full");
        return 0;
    }
    if (strcmp(method, "GET") == 0) { /* a collection */
        ret->status = 200;
        const char *items = f->remaining_path && strcmp(path, f->remaining_path) == 0 ? f->remaining_items : "[]";
        ret->body = kite_asprintf("{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":%s}", items);
        return 0;
    }
    if (strcmp(method, "PUT") == 0 && strstr(path, "/finalize")) {
        ret->status = f->finalize_code ? f->finalize_code : 200;
        ret->body = ret->status == 200 ? kite_strndup(body, len) : status_body((int)ret->status, "NotFound", "gone");
        return 0;
    }
    ret->status = 200;
    ret->body = kite_strdup(f->ns_json ? f->ns_json : "{}");
    return 0;
}

static void release(struct fake *f) {
    for (size_t i = 0; i < f->n; i++) {
        free(f->calls[i].method);
        free(f->calls[i].path);
        free(f->calls[i].ctype);
        json_object_put(f->calls[i].body);
    }
}

static int sync_ns(struct fake *f, const char *name) {
    struct kite_fake_clock clock;
    kite_fake_clock_init(&clock, T0_S * KITE_NS_PER_SEC);
    struct kite_client *c = kite_client_fake_new(handler, NULL, f);
    int r = kite_nsctl_sync(c, &clock.clock, name);
    kite_client_free(c);
    return r;
}

static size_t count(const struct fake *f, const char *method) {
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++) n += strcmp(f->calls[i].method, method) == 0;
    return n;
}

static const struct call *find(const struct fake *f, const char *method, const char *path_part) {
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->calls[i].method, method) == 0 && strstr(f->calls[i].path, path_part)) return &f->calls[i];
    return NULL;
}

static json_object *condition(const struct call *patch, const char *type) {
    json_object *conds = kite_obj_get(kite_obj_get(patch->body, "status"), "conditions");
    cr_assert_not_null(conds);
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(kite_obj_str(c, "type"), type)) return c;
    }
    cr_assert_fail("no condition %s", type);
    return NULL;
}

/* The namespaced collections the controller empties: one per stored resource. */
static const char *const COLLECTIONS[] = {
    "/api/v1/namespaces/team-a/pods",
    "/api/v1/namespaces/team-a/events",
    "/apis/coordination.k8s.io/v1/namespaces/team-a/leases",
    "/api/v1/namespaces/team-a/configmaps",
    "/api/v1/namespaces/team-a/secrets",
    "/api/v1/namespaces/team-a/serviceaccounts",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings",
    "/apis/policy/v1/namespaces/team-a/poddisruptionbudgets",
    "/apis/apps/v1/namespaces/team-a/replicasets",
    "/api/v1/namespaces/team-a/replicationcontrollers",
    "/apis/apps/v1/namespaces/team-a/deployments",
    "/apis/batch/v1/namespaces/team-a/jobs",
    "/apis/batch/v1/namespaces/team-a/cronjobs",
    "/apis/apps/v1/namespaces/team-a/daemonsets",
    "/apis/apps/v1/namespaces/team-a/statefulsets",
    "/apis/apps/v1/namespaces/team-a/controllerrevisions",
    "/apis/autoscaling/v2/namespaces/team-a/horizontalpodautoscalers",
    "/api/v1/namespaces/team-a/services",
    "/api/v1/namespaces/team-a/endpoints",
    "/apis/discovery.k8s.io/v1/namespaces/team-a/endpointslices",
};

#define TERMINATING(finalizers)                                                                          \
    "{\"kind\":\"Namespace\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"team-a\",\"resourceVersion\":\"7\"," \
    "\"deletionTimestamp\":\"2030-01-01T00:00:00Z\"},\"spec\":{\"finalizers\":" finalizers "},"          \
    "\"status\":{\"phase\":\"Terminating\"}}"

Test(nsctl, empty_namespace_is_finalized) {
    struct fake f = {.ns_json = TERMINATING("[\"example.com/keep\",\"kubernetes\"]")};
    cr_assert_eq(sync_ns(&f, "team-a"), 0);
    /* each collection deleted, then listed */
    for (size_t i = 0; i < KITE_ARRAY_SIZE(COLLECTIONS); i++) {
        bool deleted = false, listed = false;
        for (size_t j = 0; j < f.n; j++) {
            if (strcmp(f.calls[j].path, COLLECTIONS[i]) != 0) continue;
            if (strcmp(f.calls[j].method, "DELETE") == 0) deleted = true;
            if (strcmp(f.calls[j].method, "GET") == 0) listed = deleted; /* after the delete */
        }
        cr_assert(deleted && listed, "%s", COLLECTIONS[i]);
    }
    cr_assert_null(find(&f, "DELETE", "/apis/events.k8s.io/"), "events.k8s.io/v1 is the same storage as core events");
    cr_assert_eq(count(&f, "DELETE"), KITE_ARRAY_SIZE(COLLECTIONS));
    cr_assert_eq(count(&f, "PATCH"), 0);
    const struct call *put = find(&f, "PUT", "/api/v1/namespaces/team-a/finalize");
    cr_assert_not_null(put);
    cr_assert_eq(count(&f, "PUT"), 1);
    json_object *fin = kite_obj_get(kite_obj_get(put->body, "spec"), "finalizers");
    cr_assert_eq(json_object_array_length(fin), 1, "%s", json_object_to_json_string(put->body));
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(fin, 0)), "example.com/keep");
    /* the namespace as read: its resourceVersion makes the PUT conditional */
    cr_assert_str_eq(kite_meta_str(put->body, "resourceVersion"), "7");
    cr_assert_str_eq(kite_meta_str(put->body, "name"), "team-a");
    release(&f);
}

Test(nsctl, finalize_of_a_namespace_gone_meanwhile_is_done) {
    struct fake f = {.ns_json = TERMINATING("[\"kubernetes\"]"), .finalize_code = 404};
    cr_assert_eq(sync_ns(&f, "team-a"), 0);
    cr_assert_eq(count(&f, "PUT"), 1);
    release(&f);
}

Test(nsctl, remaining_content_is_reported) {
    struct fake f = {
        .ns_json = TERMINATING("[\"kubernetes\"]"),
        .remaining_path = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases",
        .remaining_items = "[{\"metadata\":{\"name\":\"a\",\"finalizers\":[\"example.com/hold\"]}},"
                           "{\"metadata\":{\"name\":\"b\",\"finalizers\":[\"example.com/hold\",\"example.com/other\"]}}]",
    };
    cr_assert_eq(sync_ns(&f, "team-a"), -EAGAIN);
    cr_assert_eq(count(&f, "PUT"), 0, "not finalized while content remains");
    cr_assert_eq(count(&f, "PATCH"), 1);
    const struct call *p = find(&f, "PATCH", "/api/v1/namespaces/team-a/status");
    cr_assert_not_null(p);
    cr_assert_str_eq(p->ctype, "application/strategic-merge-patch+json");
    json_object *c = condition(p, "NamespaceContentRemaining");
    cr_assert_str_eq(kite_obj_str(c, "status"), "True");
    cr_assert_str_eq(kite_obj_str(c, "reason"), "SomeResourcesRemain");
    cr_assert_str_eq(kite_obj_str(c, "message"), "Some resources are remaining: leases.coordination.k8s.io has 2 resource instances");
    cr_assert_str_eq(kite_obj_str(c, "lastTransitionTime"), T0);
    /* per finalizer, how many objects it holds (sorted), as kube-controller-manager */
    c = condition(p, "NamespaceFinalizersRemaining");
    cr_assert_str_eq(kite_obj_str(c, "status"), "True");
    cr_assert_str_eq(kite_obj_str(c, "reason"), "SomeFinalizersRemain");
    cr_assert_str_eq(kite_obj_str(c, "message"), "Some content in the namespace has finalizers remaining: "
                                                 "example.com/hold in 2 resource instances, example.com/other in 1 resource instances");
    c = condition(p, "NamespaceDeletionContentFailure");
    cr_assert_str_eq(kite_obj_str(c, "status"), "False");
    release(&f);
}

Test(nsctl, failed_deletecollection_is_reported) {
    struct fake f = {.ns_json = TERMINATING("[\"kubernetes\"]"), .fail_delete = "/api/v1/namespaces/team-a/pods"};
    cr_assert_eq(sync_ns(&f, "team-a"), -EAGAIN);
    cr_assert_eq(count(&f, "PUT"), 0);
    /* the other collections are still emptied */
    cr_assert_not_null(find(&f, "DELETE", "/leases"));
    const struct call *p = find(&f, "PATCH", "/api/v1/namespaces/team-a/status");
    cr_assert_not_null(p);
    json_object *c = condition(p, "NamespaceDeletionContentFailure");
    cr_assert_str_eq(kite_obj_str(c, "status"), "True");
    cr_assert_str_eq(kite_obj_str(c, "reason"), "ContentDeletionFailed");
    cr_assert_str_eq(kite_obj_str(c, "message"),
                     "Failed to delete all resource types, 1 remaining: pods: storage error: disk full");
    c = condition(p, "NamespaceContentRemaining");
    cr_assert_str_eq(kite_obj_str(c, "status"), "False");
    release(&f);

    /* two failures: the count says so */
    struct fake g = {.ns_json = TERMINATING("[\"kubernetes\"]"), .fail_delete = "/api/v1/namespaces/team-a/pods",
                     .fail_delete2 = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases"};
    cr_assert_eq(sync_ns(&g, "team-a"), -EAGAIN);
    p = find(&g, "PATCH", "/api/v1/namespaces/team-a/status");
    cr_assert_not_null(p);
    c = condition(p, "NamespaceDeletionContentFailure");
    cr_assert_str_eq(kite_obj_str(c, "message"),
                     "Failed to delete all resource types, 2 remaining: [pods: storage error: disk full, "
                     "leases.coordination.k8s.io: storage error: disk full]");
    release(&g);
}

Test(nsctl, failed_list_is_reported) {
    struct fake f = {.ns_json = TERMINATING("[\"kubernetes\"]"), .fail_list = "/api/v1/namespaces/team-a/events"};
    cr_assert_eq(sync_ns(&f, "team-a"), -EAGAIN);
    cr_assert_eq(count(&f, "PUT"), 0);
    const struct call *p = find(&f, "PATCH", "/api/v1/namespaces/team-a/status");
    cr_assert_not_null(p);
    json_object *c = condition(p, "NamespaceDeletionContentFailure");
    cr_assert_str_eq(kite_obj_str(c, "status"), "True");
    cr_assert_str_eq(kite_obj_str(c, "message"),
                     "Failed to delete all resource types, 1 remaining: events: listing what remains: Input/output error");
    release(&f);
}

Test(nsctl, nothing_written_for_other_namespaces) {
    const struct {
        const char *what, *json;
        long code;
        int want;
    } cases[] = {
        {"gone", NULL, 404, 0},
        {"active", "{\"metadata\":{\"name\":\"team-a\"},\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}}",
         0, 0},
        {"terminating, already finalized", TERMINATING("[]"), 0, 0},
        {"terminating, only another finalizer left", TERMINATING("[\"example.com/x\"]"), 0, 0},
        {"the server fails", TERMINATING("[\"kubernetes\"]"), 500, -EIO},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct fake f = {.ns_json = cases[i].json, .ns_code = cases[i].code};
        cr_assert_eq(sync_ns(&f, "team-a"), cases[i].want, "%s", cases[i].what);
        cr_assert_eq(f.n, 1, "%s: %zu requests, the last %s %s", cases[i].what, f.n, f.calls[f.n - 1].method,
                     f.calls[f.n - 1].path);
        cr_assert_str_eq(f.calls[0].method, "GET");
        cr_assert_str_eq(f.calls[0].path, "/api/v1/namespaces/team-a");
        release(&f);
    }
}
