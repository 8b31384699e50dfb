/* RBAC's rule evaluation (src/apiserver/rbac_rules.c): RuleAllows, Covers and subject
 * matching, table-driven against Kubernetes' semantics; and the authorizer's index kept
 * current from the store's events (a binding created, its role changed, the binding deleted). */
#include "apiserver/rbac.h"
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>

static struct rbac_rules compile(const char *json) {
    struct rbac_rules r = {0};
    json_object *o = json_tokener_parse(json);
    cr_assert_not_null(o, "bad test JSON: %s", json);
    kite_apiserver_rbac_rules_append(&r, o);
    json_object_put(o);
    return r;
}

struct allow_case {
    const char *rule; /* one PolicyRule */
    const char *verb, *group, *resource, *sub, *name, *path;
    bool allowed;
};

static const struct allow_case ALLOW[] = {
    /* verbs */
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", "get", "", "pods", NULL, "p", NULL, true},
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", "list", "", "pods", NULL, NULL, NULL, false},
    {"{\"verbs\":[\"*\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", "deletecollection", "", "pods", NULL, NULL, NULL, true},
    {"{\"verbs\":[],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}", "get", "", "pods", NULL, NULL, NULL, false},
    /* API groups */
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"apps\"],\"resources\":[\"pods\"]}", "get", "", "pods", NULL, NULL, NULL, false},
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"*\"],\"resources\":[\"leases\"]}", "get", "coordination.k8s.io", "leases", NULL, NULL, NULL, true},
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\",\"coordination.k8s.io\"],\"resources\":[\"leases\"]}", "get", "coordination.k8s.io", "leases", NULL, NULL, NULL, true},
    /* resources and subresources */
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"*\"]}", "get", "", "secrets", NULL, NULL, NULL, true},
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"*\"]}", "get", "", "pods", "log", NULL, NULL, true},
    {"{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"nodes\"]}", "update", "", "nodes", "status", "n", NULL, false},
    {"{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"nodes/status\"]}", "update", "", "nodes", "status", "n", NULL, true},
    {"{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"nodes/status\"]}", "update", "", "nodes", NULL, "n", NULL, false},
    {"{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"*/status\"]}", "update", "", "pods", "status", "p", NULL, true},
    {"{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"*/status\"]}", "update", "", "pods", NULL, "p", NULL, false},
    {"{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"*/status\"]}", "update", "", "pods", "statusx", "p", NULL, false},
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods/log\"]}", "get", "", "pods", "logs", NULL, NULL, false},
    /* resource names */
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"a\",\"b\"]}", "get", "", "configmaps", NULL, "b", NULL, true},
    {"{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"a\"]}", "get", "", "configmaps", NULL, "c", NULL, false},
    {"{\"verbs\":[\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"a\"]}", "list", "", "configmaps", NULL, NULL, NULL, false},
    /* non-resource URLs */
    {"{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/healthz\"]}", "get", NULL, NULL, NULL, NULL, "/healthz", true},
    {"{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/healthz\"]}", "get", NULL, NULL, NULL, NULL, "/healthz/etcd", false},
    {"{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/healthz*\"]}", "get", NULL, NULL, NULL, NULL, "/healthz/etcd", true},
    {"{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/apis/*\"]}", "get", NULL, NULL, NULL, NULL, "/apis/apps/v1", true},
    {"{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/apis/*\"]}", "get", NULL, NULL, NULL, NULL, "/apis", false},
    {"{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"*\"]}", "get", NULL, NULL, NULL, NULL, "/metrics", true},
    {"{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"*\"]}", "post", NULL, NULL, NULL, NULL, "/metrics", false},
    /* a resource rule grants no URL, a URL rule no resource */
    {"{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}", "get", NULL, NULL, NULL, NULL, "/metrics", false},
    {"{\"verbs\":[\"*\"],\"nonResourceURLs\":[\"*\"]}", "get", "", "pods", NULL, NULL, NULL, false},
};

Test(rbac, rule_allows_table) {
    for (size_t i = 0; i < sizeof ALLOW / sizeof *ALLOW; i++) {
        const struct allow_case *c = &ALLOW[i];
        _cleanup_free_ char *arr = kite_asprintf("[%s]", c->rule);
        struct rbac_rules r = compile(arr);
        cr_assert_eq(r.n, 1);
        struct kite_user u = {.name = "u"};
        struct kite_authz_attrs a = {.user = &u, .verb = c->verb, .group = c->group, .resource = c->resource,
                                     .sub = c->sub, .name = c->name, .path = c->path};
        cr_expect_eq(kite_apiserver_rbac_rule_allows(&r.v[0], &a), c->allowed, "case %zu: %s %s %s/%s %s %s: want %s", i, c->rule,
                     c->verb, c->resource ? c->resource : "-", c->sub ? c->sub : "-", c->name ? c->name : "-",
                     c->path ? c->path : "-", c->allowed ? "allowed" : "denied");
        kite_apiserver_rbac_rules_release(&r);
    }
}

struct cover_case {
    const char *owner, *wanted;
    bool covered;
    const char *missing; /* expected text of what is missing (first line), or NULL */
};

static const struct cover_case COVER[] = {
    {"[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}]",
     "[{\"verbs\":[\"get\",\"create\"],\"apiGroups\":[\"\",\"apps\"],\"resources\":[\"pods\",\"deployments/scale\"]}]", true, NULL},
    {"[{\"verbs\":[\"get\",\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]",
     "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]", true, NULL},
    {"[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]",
     "[{\"verbs\":[\"get\",\"create\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]", false,
     "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"create\"]}"},
    /* a "*" wanted is covered by a "*" owned only */
    {"[{\"verbs\":[\"get\",\"list\",\"watch\",\"create\",\"update\",\"patch\",\"delete\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]",
     "[{\"verbs\":[\"*\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]", false,
     "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"*\"]}"},
    /* pieces split across owner rules */
    {"[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]},{\"verbs\":[\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]",
     "[{\"verbs\":[\"get\",\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]", true, NULL},
    /* "*\/sub" covers "res/sub" */
    {"[{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"*/status\"]}]",
     "[{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"nodes/status\"]}]", true, NULL},
    {"[{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"*/status\"]}]",
     "[{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"nodes\"]}]", false, NULL},
    /* resource names: an owner limited to names covers only those names */
    {"[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"a\"]}]",
     "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"a\"]}]", true, NULL},
    {"[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"a\"]}]",
     "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"]}]", false, NULL},
    {"[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"]}]",
     "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"x\",\"y\"]}]", true, NULL},
    /* URLs, with prefixes */
    {"[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/apis/*\"]}]", "[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/apis/apps\"]}]", true, NULL},
    {"[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/apis/*\"]}]", "[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics\"]}]", false,
     "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"},
    /* nothing wanted is always covered; something wanted from nothing is not */
    {"[]", "[]", true, NULL},
    {"[]", "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]", false, NULL},
};

Test(rbac, covers_table) {
    for (size_t i = 0; i < sizeof COVER / sizeof *COVER; i++) {
        const struct cover_case *c = &COVER[i];
        struct rbac_rules o = compile(c->owner), w = compile(c->wanted);
        struct kite_buf missing = {0};
        bool got = kite_apiserver_rbac_rules_cover(&o, &w, &missing);
        cr_expect_eq(got, c->covered, "case %zu: %s covers %s: want %d", i, c->owner, c->wanted, c->covered);
        if (got) cr_expect_eq(missing.len, 0, "case %zu: nothing should be missing, got %s", i, missing.p);
        if (c->missing) {
            cr_assert_not_null(missing.p, "case %zu", i);
            cr_expect(strncmp(missing.p, c->missing, strlen(c->missing)) == 0, "case %zu: missing %s, want %s", i, missing.p,
                      c->missing);
        }
        kite_buf_release(&missing);
        kite_apiserver_rbac_rules_release(&o);
        kite_apiserver_rbac_rules_release(&w);
    }
}

struct subject_case {
    const char *kind, *name, *sa_ns, *binding_ns, *user;
    bool matches;
};

static const struct subject_case SUBJECTS[] = {
    {"User", "alice", NULL, "", "alice", true},
    {"User", "alice", NULL, "", "bob", false},
    {"User", "system:serviceaccount:ns1:default", NULL, "", "system:serviceaccount:ns1:default", true},
    {"Group", "devs", NULL, "", "bob", true},
    {"Group", "ops", NULL, "", "bob", false},
    {"Group", "system:serviceaccounts:ns1", NULL, "", "system:serviceaccount:ns1:robot", true},
    {"ServiceAccount", "robot", "ns1", "", "system:serviceaccount:ns1:robot", true},
    {"ServiceAccount", "robot", "ns1", "", "system:serviceaccount:ns2:robot", false},
    {"ServiceAccount", "robot", NULL, "ns1", "system:serviceaccount:ns1:robot", true}, /* the binding's namespace */
    {"ServiceAccount", "robot", NULL, "", "system:serviceaccount:ns1:robot", false},  /* none at all */
    {"ServiceAccount", "robot", "ns1", "", "system:serviceaccount:ns1:robotx", false},
    {"ServiceAccount", "robot", "ns", "", "system:serviceaccount:ns1:robot", false},
    {"Unknown", "alice", NULL, "", "alice", false},
};

Test(rbac, subjects_table) {
    for (size_t i = 0; i < sizeof SUBJECTS / sizeof *SUBJECTS; i++) {
        const struct subject_case *c = &SUBJECTS[i];
        struct kite_user u = {.name = c->user};
        u.groups[u.n_groups++] = "devs";
        u.groups[u.n_groups++] = "system:authenticated";
        if (strncmp(c->user, "system:serviceaccount:ns1:", 26) == 0) u.groups[u.n_groups++] = "system:serviceaccounts:ns1";
        cr_expect_eq(kite_apiserver_rbac_subject_matches(c->kind, c->name, c->sa_ns, c->binding_ns, &u), c->matches,
                     "case %zu: %s %s (ns %s) vs user %s", i, c->kind, c->name, c->sa_ns ? c->sa_ns : "-", c->user);
    }
}

/* ---- the index, in a real server ---------------------------------------------------------- */

static enum kite_authz_decision decide(const char *user, const char *group, const char *verb, const char *resource,
                                       const char *ns) {
    struct kite_user u = {.name = user};
    if (group) u.groups[u.n_groups++] = group;
    u.groups[u.n_groups++] = "system:authenticated";
    struct kite_authz_attrs a = {.user = &u, .verb = verb, .group = "", .resource = resource, .ns = ns, .view = api.srv};
    return kite_apiserver_rbac_authorize(&a, NULL);
}

TestSuite(rbac_index, .init = api_start, .fini = api_stop);

Test(rbac_index, follows_the_stores_events) {
    cr_assert_eq(decide("carol", NULL, "get", "pods", "default"), KITE_AUTHZ_NO_OPINION);
    long code = api_reqf("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", NULL,
                         "{\"metadata\":{\"name\":\"r\"},\"rules\":[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]}");
    cr_assert_eq(code, 201);
    code = api_reqf("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", NULL,
                    "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"r\"},"
                    "\"subjects\":[{\"kind\":\"User\",\"name\":\"carol\"},{\"kind\":\"Group\",\"name\":\"team\"}]}");
    cr_assert_eq(code, 201);
    /* the write's answer came after the index had it */
    cr_assert_eq(decide("carol", NULL, "get", "pods", "default"), KITE_AUTHZ_ALLOW);
    cr_assert_eq(decide("dave", "team", "get", "pods", "default"), KITE_AUTHZ_ALLOW);
    cr_assert_eq(decide("carol", NULL, "get", "pods", "kube-system"), KITE_AUTHZ_NO_OPINION);
    cr_assert_eq(decide("carol", NULL, "get", "pods", NULL), KITE_AUTHZ_NO_OPINION); /* all namespaces */
    cr_assert_eq(decide("carol", NULL, "delete", "pods", "default"), KITE_AUTHZ_NO_OPINION);
    /* the role changes: the binding grants the new rules */
    code = api_reqf("PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/r", NULL,
                    "{\"metadata\":{\"name\":\"r\"},\"rules\":[{\"verbs\":[\"delete\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]}");
    cr_assert_eq(code, 200);
    cr_assert_eq(decide("carol", NULL, "delete", "pods", "default"), KITE_AUTHZ_ALLOW);
    cr_assert_eq(decide("carol", NULL, "get", "pods", "default"), KITE_AUTHZ_NO_OPINION);
    /* the roleRef is fixed */
    json_object *st = NULL;
    code = api_reqf("PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/b", &st,
                    "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"view\"},"
                    "\"subjects\":[{\"kind\":\"User\",\"name\":\"carol\"}]}");
    cr_assert_eq(code, 422);
    cr_assert(strstr(jstr(st, "message"), "cannot change roleRef"), "%s", jstr(st, "message"));
    json_object_put(st);
    /* the binding goes: so does the grant */
    cr_assert_eq(api_req("DELETE", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/b", NULL, NULL, NULL), 200);
    cr_assert_eq(decide("carol", NULL, "delete", "pods", "default"), KITE_AUTHZ_NO_OPINION);
    cr_assert_eq(decide("dave", "team", "delete", "pods", "default"), KITE_AUTHZ_NO_OPINION);
}

/* what the Discovery authorizer granted before RBAC did, through the whole chain */
Test(rbac_index, discovery_through_the_chain) {
    const struct {
        const char *user, *group, *path;
        enum kite_authz_decision want;
    } cases[] = {
        {"bob", "system:authenticated", "/api", KITE_AUTHZ_ALLOW},
        {"bob", "system:authenticated", "/api/v1", KITE_AUTHZ_ALLOW},
        {"bob", "system:authenticated", "/apis/coordination.k8s.io/v1", KITE_AUTHZ_ALLOW},
        {"bob", "system:authenticated", "/version", KITE_AUTHZ_ALLOW},
        {"bob", "system:authenticated", "/healthz", KITE_AUTHZ_ALLOW},
        {"bob", "system:authenticated", "/openapi/v2", KITE_AUTHZ_ALLOW}, /* system:discovery, as upstream */
        {"bob", "system:authenticated", "/metrics", KITE_AUTHZ_DENY},
        {"bob", "system:authenticated", "/apix", KITE_AUTHZ_DENY},
        {"system:anonymous", "system:unauthenticated", "/api", KITE_AUTHZ_DENY},
        {"system:anonymous", "system:unauthenticated", "/readyz", KITE_AUTHZ_ALLOW},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct kite_user u = {.name = cases[i].user, .groups = {cases[i].group}, .n_groups = 1};
        struct kite_authz_attrs a = {.user = &u, .verb = "get", .path = cases[i].path, .view = api.srv};
        char *why = NULL;
        cr_expect_eq(kite_authorize(&a, &why), cases[i].want, "case %zu: %s %s", i, cases[i].user, cases[i].path);
        free(why);
    }
}

Test(rbac_index, bootstrap_policy_grants_discovery_and_admin) {
    struct kite_user anon = {.name = "system:anonymous", .groups = {"system:unauthenticated"}, .n_groups = 1};
    struct kite_authz_attrs a = {.user = &anon, .verb = "get", .path = "/version", .view = api.srv};
    cr_assert_eq(kite_apiserver_rbac_authorize(&a, NULL), KITE_AUTHZ_ALLOW);
    a.path = "/apis";
    cr_assert_eq(kite_apiserver_rbac_authorize(&a, NULL), KITE_AUTHZ_NO_OPINION);
    struct kite_user someone = {.name = "x", .groups = {"system:authenticated"}, .n_groups = 1};
    a.user = &someone;
    a.path = "/apis/apps/v1";
    cr_assert_eq(kite_apiserver_rbac_authorize(&a, NULL), KITE_AUTHZ_ALLOW);
    a.path = "/metrics";
    cr_assert_eq(kite_apiserver_rbac_authorize(&a, NULL), KITE_AUTHZ_NO_OPINION);
    cr_assert_eq(decide("root", "system:masters", "deletecollection", "secrets", "kube-system"), KITE_AUTHZ_ALLOW);
    cr_assert_eq(decide("system:kube-controller-manager", NULL, "deletecollection", "configmaps", "x"), KITE_AUTHZ_ALLOW);
    cr_assert_eq(decide("system:kube-controller-manager", NULL, "create", "configmaps", "x"), KITE_AUTHZ_ALLOW); /* kube-root-ca.crt */
    cr_assert_eq(decide("system:kube-controller-manager", NULL, "create", "secrets", "x"), KITE_AUTHZ_NO_OPINION);
}
