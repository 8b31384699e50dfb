/* The admission and authorizer chains: their tables and decisions called directly, and the
 * refusals a client sees through HTTPS (each repeated: a refusal once freed a request field
 * twice, which ASan catches on a repeat). */
#include "harness.h"
#include "apiserver/internal.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <stdio.h>

/* ---- the chains, directly --------------------------------------------------------------- */

Test(chains, admission_plugins_in_order) {
    size_t n = 0;
    const struct kite_admission_plugin *p = kite_admission_plugins(&n);
    cr_assert_geq(n, 1);
    cr_assert_str_eq(p[0].name, "NamespaceLifecycle");
    cr_assert_null(p[0].mutate, "NamespaceLifecycle only validates");
    cr_assert_not_null(p[0].validate);
    for (size_t i = 0; i < n; i++) cr_assert(p[i].mutate || p[i].validate, "%s does nothing", p[i].name);
    /* upstream's order: NodeRestriction, ..., PodSecurity, ..., the certificate plugins */
    size_t node = n, psa = n, cert = n;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(p[i].name, "NodeRestriction") == 0) node = i;
        if (strcmp(p[i].name, "PodSecurity") == 0) psa = i;
        if (strcmp(p[i].name, "CertificateApproval") == 0) cert = i;
    }
    cr_assert(node < psa && psa < cert && cert < n, "NodeRestriction %zu, PodSecurity %zu, CertificateApproval %zu",
              node, psa, cert);
    cr_assert_null(p[psa].mutate, "PodSecurity only validates");
}

/* NamespaceLifecycle without a server: what it decides from the request alone. */
Test(chains, namespace_lifecycle_protects_the_system_namespaces) {
    size_t n;
    const struct kite_admission_plugin *p = kite_admission_plugins(&n);
    const struct kite_resource *nsr = kite_registry_namespaces();
    const struct kite_resource *nodes = kite_registry_find("", "v1", "nodes");
    const struct {
        const struct kite_resource *res;
        enum kite_admission_op op;
        const char *name;
        int want;
    } cases[] = {
        {nsr, KITE_ADMIT_DELETE, "kube-system", -EPERM},
        {nsr, KITE_ADMIT_DELETE, "default", -EPERM},
        {nsr, KITE_ADMIT_DELETE, "kube-public", -EPERM},
        {nsr, KITE_ADMIT_DELETE, "kube-node-lease", 0}, /* bootstrapped, but deletable as upstream */
        {nsr, KITE_ADMIT_DELETE, "team-a", 0},
        {nsr, KITE_ADMIT_UPDATE, "kube-system", 0},
        {nodes, KITE_ADMIT_DELETE, "kube-system", 0}, /* a node of that name is no namespace */
        {nodes, KITE_ADMIT_CREATE, "n1", 0},          /* cluster-scoped: no namespace to check */
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct kite_user u = {.name = "admin"};
        struct kite_admission_attrs a = {.user = &u, .op = cases[i].op, .res = cases[i].res, .name = cases[i].name};
        struct kite_admission_denial d = {0};
        int r = p[0].validate(&a, &d);
        cr_assert_eq(r, cases[i].want, "case %zu (%s %s)", i, cases[i].res->plural, cases[i].name);
        if (r < 0) {
            cr_assert_eq(d.code, 403);
            cr_assert_str_eq(d.reason, "Forbidden");
            char want[128];
            snprintf(want, sizeof want, "namespaces \"%s\" is forbidden: this namespace may not be deleted", cases[i].name);
            cr_assert_str_eq(d.message, want);
        }
        free(d.message);
    }
}

static enum kite_authz_decision authz(const char *user, const char *const *groups, const char *verb,
                                      const char *resource, const char *path) {
    struct kite_user u = {.name = user};
    for (; groups && *groups; groups++) u.groups[u.n_groups++] = *groups;
    struct kite_authz_attrs a = {.user = &u, .verb = verb, .group = resource ? "" : NULL, .resource = resource,
                                 .path = path};
    char *why = NULL;
    enum kite_authz_decision d = kite_authorize(&a, &why);
    free(why);
    return d;
}

Test(chains, authorizers_decide) {
    size_t n = 0;
    const struct kite_authorizer *chain = kite_authorizers(&n);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(chain[0].name, "Masters");
    cr_assert_str_eq(chain[1].name, "Node");
    cr_assert_str_eq(chain[2].name, "RBAC"); /* its decisions need a server: test_rbac.c */
    const char *const masters[] = {"system:masters", "system:authenticated", NULL};
    const char *const nodes[] = {"system:nodes", "system:authenticated", NULL};
    const char *const authed[] = {"system:authenticated", NULL};
    const char *const anon[] = {"system:unauthenticated", NULL};
    const struct {
        const char *user;
        const char *const *groups;
        const char *verb, *resource, *path;
        enum kite_authz_decision want;
    } cases[] = {
        {"kite-admin", masters, "delete", "namespaces", NULL, KITE_AUTHZ_ALLOW},
        {"kite-admin", masters, "impersonate", "users", NULL, KITE_AUTHZ_ALLOW},
        {"kite-admin", masters, "get", NULL, "/metrics", KITE_AUTHZ_ALLOW},
        {"system:node:n1", nodes, "create", "nodes", NULL, KITE_AUTHZ_ALLOW},
        {"system:node:n1", nodes, "create", "pods", NULL, KITE_AUTHZ_ALLOW},
        {"system:node:n1", nodes, "list", "nodes", NULL, KITE_AUTHZ_DENY},
        {"system:node:n1", nodes, "delete", "namespaces", NULL, KITE_AUTHZ_DENY},
        {"system:node:n1", nodes, "impersonate", "users", NULL, KITE_AUTHZ_DENY},
        {"bob", authed, "get", "pods", NULL, KITE_AUTHZ_DENY},
        {"bob", authed, "list", "namespaces", NULL, KITE_AUTHZ_DENY},
        {"bob", authed, "get", NULL, "/metrics", KITE_AUTHZ_DENY},
        {"system:anonymous", anon, "get", NULL, "/api", KITE_AUTHZ_DENY},
        {"nobody", NULL, "get", "pods", NULL, KITE_AUTHZ_DENY},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++)
        cr_assert_eq(authz(cases[i].user, cases[i].groups, cases[i].verb, cases[i].resource, cases[i].path), cases[i].want,
                     "case %zu: %s %s %s", i, cases[i].user, cases[i].verb,
                     cases[i].resource ? cases[i].resource : cases[i].path);
}

/* ---- refusals through HTTPS ------------------------------------------------------------- */

TestSuite(admission, .init = api_start, .fini = api_stop, .timeout = 120);

#define REPEAT 50

static void terminating_namespace(const char *name) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", "/api/v1/namespaces", &o, "{\"metadata\":{\"name\":\"%s\"}}", name), 201);
    json_object_put(o);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s", name);
    cr_assert_eq(api_req("DELETE", path, NULL, NULL, &o), 200);
    cr_assert_str_eq(jstr(o, "status.phase"), "Terminating");
    json_object_put(o);
}

struct refusal {
    const char *what, *method, *path, *body;
    long code;
    const char *reason, *message;
    const char *details_name, *details_group, *details_kind;
};

static void check(const struct refusal *r, int round) {
    json_object *o = NULL;
    long code = api_req(r->method, r->path, NULL, r->body, &o);
    cr_assert_eq(code, r->code, "%s (round %d): %ld %s", r->what, round, code, json_object_to_json_string(o));
    cr_assert_str_eq(jstr(o, "kind"), "Status");
    cr_assert_str_eq(jstr(o, "reason"), r->reason, "%s", r->what);
    if (r->message) cr_assert_str_eq(jstr(o, "message"), r->message, "%s", r->what);
    if (r->details_name) cr_assert_str_eq(jstr(o, "details.name"), r->details_name, "%s", r->what);
    if (r->details_group) cr_assert_str_eq(jstr(o, "details.group"), r->details_group, "%s", r->what);
    else cr_assert_null(jget(o, "details.group"), "%s", r->what);
    if (r->details_kind) cr_assert_str_eq(jstr(o, "details.kind"), r->details_kind, "%s", r->what);
    cr_assert_eq(json_object_get_int(jget(o, "code")), r->code);
    json_object_put(o);
}

#define POD(name) "{\"metadata\":{\"name\":\"" name "\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}"

Test(admission, refusals_repeated) {
    terminating_namespace("going");
    const struct refusal cases[] = {
        {"create in a missing namespace", "POST", "/api/v1/namespaces/nope/pods", POD("p"), 404, "NotFound",
         "namespaces \"nope\" not found", "nope", NULL, "namespaces"},
        {"create (generateName) in a missing namespace", "POST", "/api/v1/namespaces/nope/pods",
         "{\"metadata\":{\"generateName\":\"p-\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}", 404,
         "NotFound", "namespaces \"nope\" not found", "nope", NULL, "namespaces"},
        {"create a lease in a missing namespace", "POST", "/apis/coordination.k8s.io/v1/namespaces/nope/leases",
         "{\"metadata\":{\"name\":\"l\"}}", 404, "NotFound", "namespaces \"nope\" not found", "nope", NULL, "namespaces"},
        {"create in a terminating namespace", "POST", "/api/v1/namespaces/going/pods", POD("p"), 403, "Forbidden",
         "pods \"p\" is forbidden: unable to create new content in namespace going because it is being terminated", "p",
         NULL, "pods"},
        {"create a lease in a terminating namespace", "POST", "/apis/coordination.k8s.io/v1/namespaces/going/leases",
         "{\"metadata\":{\"name\":\"l\"}}", 403, "Forbidden",
         "leases.coordination.k8s.io \"l\" is forbidden: unable to create new content in namespace going because it is "
         "being terminated",
         "l", "coordination.k8s.io", "leases"},
        {"PUT-create of an event in a missing namespace", "PUT", "/api/v1/namespaces/nope/events/e",
         "{\"metadata\":{\"name\":\"e\"},\"involvedObject\":{\"kind\":\"Pod\"}}", 404, "NotFound",
         "namespaces \"nope\" not found", "nope", NULL, "namespaces"},
        {"delete kube-system", "DELETE", "/api/v1/namespaces/kube-system", NULL, 403, "Forbidden",
         "namespaces \"kube-system\" is forbidden: this namespace may not be deleted", "kube-system", NULL, "namespaces"},
        {"delete default", "DELETE", "/api/v1/namespaces/default", NULL, 403, "Forbidden",
         "namespaces \"default\" is forbidden: this namespace may not be deleted", "default", NULL, "namespaces"},
        /* the object's own validation comes before the validating plugins: an invalid name in
         * a missing namespace is a 422, not the namespace's 404 */
        {"invalid name in a missing namespace", "POST", "/api/v1/namespaces/nope/pods", POD("Bad_Name"), 422, "Invalid",
         NULL, "Bad_Name", NULL, "Pod"},
        {"invalid lease in a terminating namespace", "POST", "/apis/coordination.k8s.io/v1/namespaces/going/leases",
         "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"leaseDurationSeconds\":0}}", 422, "Invalid", NULL, "l",
         "coordination.k8s.io", "Lease"},
    };
    for (int round = 0; round < REPEAT; round++)
        for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) check(&cases[i], round);
    /* nothing was created, nothing deleted */
    json_object *o = NULL;
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/nope", NULL, NULL, &o), 404);
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/going/pods", NULL, NULL, &o), 200);
    cr_assert_eq(json_object_array_length(jget(o, "items")), 0);
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/kube-system", NULL, NULL, &o), 200);
    cr_assert_null(jget(o, "metadata.deletionTimestamp"));
    json_object_put(o);
}

/* Objects already in a terminating namespace can still be changed and deleted (the namespace
 * controller deletes them; their own controllers update them meanwhile). */
Test(admission, terminating_namespace_allows_updates_and_deletes) {
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", "/api/v1/namespaces", &o, "{\"metadata\":{\"name\":\"going\"}}"), 201);
    json_object_put(o);
    cr_assert_eq(api_req("POST", "/api/v1/namespaces/going/pods", NULL, POD("p"), &o), 201);
    json_object_put(o);
    cr_assert_eq(api_req("DELETE", "/api/v1/namespaces/going", NULL, NULL, &o), 200);
    json_object_put(o);
    cr_assert_eq(api_reqf("PATCH", "/api/v1/namespaces/going/pods/p", &o, "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}"), 200);
    json_object_put(o);
    cr_assert_eq(api_req("DELETE", "/api/v1/namespaces/going/pods/p", NULL, NULL, &o), 200);
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/api/v1/namespaces/going/pods/p", NULL, NULL, &o), 404);
    json_object_put(o);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(admission, unknown_user_is_forbidden) {
    /* a client certificate the server trusts, for a user no authorizer allows */
    _cleanup_free_ char *pki = kite_asprintf("%s/data/pki", api.dir);
    char *cert = NULL, *key = NULL;
    cr_assert_eq(kite_pki_issue_client(pki, "bob", NULL, 0, &cert, &key), 0);
    char *cp = kite_asprintf("%s/bob.crt", api.dir), *kp = kite_asprintf("%s/bob.key", api.dir);
    write_file(cp, cert);
    write_file(kp, key);
    free(cert);
    free(key);
    char *admin_cert = api.cert, *admin_key = api.key;
    api.cert = cp;
    api.key = kp;
    json_object *o = NULL;
    for (int round = 0; round < REPEAT; round++) {
        cr_assert_eq(api_req("GET", "/api/v1/namespaces/default/pods", NULL, NULL, &o), 403);
        cr_assert_str_eq(jstr(o, "reason"), "Forbidden");
        cr_assert_str_eq(jstr(o, "message"), "pods is forbidden: User \"bob\" cannot list resource \"pods\" in API group \"\" "
                                             "in the namespace \"default\"");
        json_object_put(o);
        cr_assert_eq(api_req("DELETE", "/api/v1/namespaces/team-a", NULL, NULL, &o), 403);
        cr_assert_str_eq(jstr(o, "message"), "namespaces \"team-a\" is forbidden: User \"bob\" cannot delete resource "
                                             "\"namespaces\" in API group \"\" at the cluster scope");
        json_object_put(o);
        cr_assert_eq(api_req("GET", "/metrics", NULL, NULL, &o), 403);
        json_object_put(o);
    }
    /* discovery is open to every authenticated user */
    cr_assert_eq(api_req("GET", "/api", NULL, NULL, &o), 200);
    cr_assert_str_eq(jstr(o, "kind"), "APIVersions");
    json_object_put(o);
    api.cert = admin_cert;
    api.key = admin_key;
    free(cp);
    free(kp);
}
