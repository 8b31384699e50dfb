/* The Node authorizer, its pods graph and NodeRestriction: decisions called directly (tables
 * against Kubernetes' rules), the graph followed as pods come, change and go, and the refusals
 * a node's certificate gets through HTTPS with kube-apiserver's message shape. */
#include "harness.h"
#include "apiserver/internal.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <stdio.h>

static const char *const NODE_GROUPS[] = {"system:nodes", "system:authenticated", NULL};

static struct kite_user node_user(const char *name) {
    struct kite_user u = {.name = name};
    for (const char *const *g = NODE_GROUPS; *g; g++) u.groups[u.n_groups++] = *g;
    return u;
}

/* ---- the authorizer alone (no graph: graph-based grants have no relationship) ---------- */

struct authz_case {
    const char *user, *verb, *group, *resource, *sub, *ns, *name, *field_selector;
    enum kite_authz_decision want;
    const char *reason; /* NULL: not checked */
};

static void run_authz(const struct authz_case *c, size_t n, struct kite_apiserver *view) {
    for (size_t i = 0; i < n; i++) {
        struct kite_user u = node_user(c[i].user);
        struct kite_field_selector *fs = NULL;
        if (c[i].field_selector) cr_assert_eq(kite_field_selector_parse(c[i].field_selector, &fs, NULL), 0);
        struct kite_authz_attrs a = {.user = &u, .verb = c[i].verb, .group = c[i].group, .resource = c[i].resource,
                                     .sub = c[i].sub, .ns = c[i].ns, .name = c[i].name, .fields = fs, .view = view};
        if (fs && !a.name) a.name = kite_field_selector_exact(fs, "metadata.name");
        char *why = NULL;
        enum kite_authz_decision d = kite_authz_node(&a, &why);
        cr_assert_eq(d, c[i].want, "case %zu: %s %s %s%s%s %s/%s: got %d (%s)", i, c[i].user, c[i].verb, c[i].resource,
                     c[i].sub ? "/" : "", c[i].sub ? c[i].sub : "", c[i].ns ? c[i].ns : "", c[i].name ? c[i].name : "", d,
                     why ? why : "");
        if (c[i].reason) cr_assert_str_eq(why ? why : "", c[i].reason, "case %zu", i);
        free(why);
        kite_field_selector_free(fs);
    }
}

#define A KITE_AUTHZ_ALLOW
#define D KITE_AUTHZ_DENY
#define N KITE_AUTHZ_NO_OPINION
#define NA "system:node:a"
#define COORD "coordination.k8s.io"

Test(node_authz, decisions) {
    const struct authz_case cases[] = {
        /* nodes */
        {NA, "get", "", "nodes", NULL, NULL, "a", NULL, A, NULL},
        {NA, "get", "", "nodes", NULL, NULL, "b", NULL, D, "node 'a' cannot read 'b', only its own Node object"},
        {NA, "list", "", "nodes", NULL, NULL, NULL, NULL, N, "node 'a' cannot read all nodes, only its own Node object"},
        {NA, "watch", "", "nodes", NULL, NULL, NULL, NULL, N, "node 'a' cannot read all nodes, only its own Node object"},
        {NA, "list", "", "nodes", NULL, NULL, NULL, "metadata.name=a", A, NULL},
        {NA, "watch", "", "nodes", NULL, NULL, NULL, "metadata.name=a", A, NULL},
        {NA, "watch", "", "nodes", NULL, NULL, NULL, "metadata.name=b", D, NULL},
        {NA, "create", "", "nodes", NULL, NULL, NULL, NULL, A, NULL},
        {NA, "update", "", "nodes", NULL, NULL, "a", NULL, A, NULL},
        {NA, "patch", "", "nodes", NULL, NULL, "a", NULL, A, NULL},
        {NA, "patch", "", "nodes", NULL, NULL, "b", NULL, D, "node \"a\" is not allowed to modify node \"b\""},
        {NA, "patch", "", "nodes", "status", NULL, "a", NULL, A, NULL},
        {NA, "update", "", "nodes", "status", NULL, "a", NULL, A, NULL},
        {NA, "patch", "", "nodes", "status", NULL, "b", NULL, D, "node \"a\" is not allowed to modify node \"b\""},
        {NA, "delete", "", "nodes", NULL, NULL, "a", NULL, N, ""},
        {NA, "delete", "", "nodes", NULL, NULL, "b", NULL, D, NULL},
        {NA, "deletecollection", "", "nodes", NULL, NULL, NULL, NULL, N, NULL},
        /* leases */
        {NA, "get", COORD, "leases", NULL, "kube-node-lease", "a", NULL, A, NULL},
        {NA, "update", COORD, "leases", NULL, "kube-node-lease", "a", NULL, A, NULL},
        {NA, "patch", COORD, "leases", NULL, "kube-node-lease", "a", NULL, A, NULL},
        {NA, "delete", COORD, "leases", NULL, "kube-node-lease", "a", NULL, A, NULL},
        {NA, "create", COORD, "leases", NULL, "kube-node-lease", NULL, NULL, A, NULL},
        {NA, "update", COORD, "leases", NULL, "kube-node-lease", "b", NULL, D,
         "can only access node lease with the same name as the requesting node"},
        {NA, "delete", COORD, "leases", NULL, "kube-node-lease", "b", NULL, D, NULL},
        {NA, "list", COORD, "leases", NULL, "kube-node-lease", NULL, NULL, N,
         "can only get, create, update, patch, or delete a node lease"},
        {NA, "create", COORD, "leases", NULL, "kube-system", NULL, NULL, N,
         "can only access leases in the \"kube-node-lease\" system namespace"},
        {NA, "update", COORD, "leases", NULL, "kube-system", "kube-controller-manager", NULL, N, NULL},
        /* pods */
        {NA, "list", "", "pods", NULL, NULL, NULL, NULL, N, "can only list/watch pods with spec.nodeName field selector"},
        {NA, "list", "", "pods", NULL, "default", NULL, NULL, N, NULL},
        {NA, "list", "", "pods", NULL, NULL, NULL, "spec.nodeName=a", A, NULL},
        {NA, "watch", "", "pods", NULL, NULL, NULL, "spec.nodeName=a", A, NULL},
        {NA, "watch", "", "pods", NULL, NULL, NULL, "spec.nodeName==a,status.phase=Running", A, NULL},
        {NA, "watch", "", "pods", NULL, NULL, NULL, "spec.nodeName=b", D, NULL},
        {NA, "list", "", "pods", NULL, NULL, NULL, "spec.nodeName!=a", N, NULL},
        {NA, "get", "", "pods", NULL, "default", "p", NULL, N, "no relationship found between node 'a' and this object"},
        {NA, "create", "", "pods", NULL, "default", NULL, NULL, A, NULL},
        {NA, "delete", "", "pods", NULL, "default", "p", NULL, A, NULL},
        {NA, "update", "", "pods", NULL, "default", "p", NULL, N, NULL},
        {NA, "patch", "", "pods", "status", "default", "p", NULL, A, NULL},
        {NA, "update", "", "pods", "status", "default", "p", NULL, A, NULL},
        {NA, "get", "", "pods", "status", "default", "p", NULL, N, NULL},
        {NA, "create", "", "pods", "eviction", "default", "p", NULL, A, NULL},
        {NA, "create", "", "pods", "binding", "default", "p", NULL, N, NULL},
        {NA, "deletecollection", "", "pods", NULL, "default", NULL, NULL, N, NULL},
        /* graph-scoped reads */
        {NA, "get", "", "secrets", NULL, "default", "s", NULL, N, "no relationship found between node 'a' and this object"},
        {NA, "list", "", "secrets", NULL, "default", NULL, NULL, N, "No Object name found"},
        {NA, "list", "", "secrets", NULL, NULL, NULL, NULL, N, "can only read namespaced object of this type"},
        {NA, "create", "", "secrets", NULL, "default", NULL, NULL, N, "can only read resources of this type"},
        {NA, "get", "", "configmaps", NULL, "default", "c", NULL, N, NULL},
        {NA, "get", "", "persistentvolumeclaims", NULL, "default", "c", NULL, N, NULL},
        {NA, "list", "", "persistentvolumeclaims", NULL, "default", NULL, NULL, N,
         "can only get individual resources of this type"},
        {NA, "create", "", "serviceaccounts", "token", "default", "sa", NULL, N, NULL},
        {NA, "get", "", "serviceaccounts", NULL, "default", "sa", NULL, N,
         "can only create tokens for individual service accounts"},
        /* static rules */
        {NA, "create", "", "events", NULL, "default", NULL, NULL, A, NULL},
        {NA, "patch", "", "events", NULL, "default", "e", NULL, A, NULL},
        {NA, "update", "events.k8s.io", "events", NULL, "default", "e", NULL, A, NULL},
        {NA, "delete", "", "events", NULL, "default", "e", NULL, N, NULL},
        {NA, "list", "", "events", NULL, "default", NULL, NULL, N, NULL},
        {NA, "create", "authorization.k8s.io", "subjectaccessreviews", NULL, NULL, NULL, NULL, A, NULL},
        {NA, "get", "", "services", NULL, "default", "svc", NULL, A, NULL},
        /* everything else: no opinion */
        {NA, "delete", "", "namespaces", NULL, NULL, "team-a", NULL, N, ""},
        {NA, "list", "", "namespaces", NULL, NULL, NULL, NULL, N, NULL},
        {NA, "create", "", "namespaces", NULL, NULL, NULL, NULL, N, NULL},
        {NA, "impersonate", "", "users", NULL, NULL, "admin", NULL, N, NULL},
        /* an unidentifiable node */
        {"kubelet-x", "get", "", "nodes", NULL, NULL, "a", NULL, N, "unknown node for user \"kubelet-x\""},
        {"system:node:", "get", "", "nodes", NULL, NULL, "a", NULL, N, "unknown node for user \"system:node:\""},
    };
    run_authz(cases, KITE_ARRAY_SIZE(cases), NULL);
}

Test(node_authz, not_a_node_gets_no_opinion) {
    struct kite_user u = {.name = "system:node:a", .groups = {"system:authenticated"}, .n_groups = 1};
    struct kite_authz_attrs a = {.user = &u, .verb = "get", .group = "", .resource = "nodes", .name = "a"};
    char *why = NULL;
    cr_assert_eq(kite_authz_node(&a, &why), KITE_AUTHZ_NO_OPINION, "the name alone makes no node");
    cr_assert_null(why);
    const char *n;
    cr_assert_not(kite_node_identity(&u, &n));
}

Test(node_authz, forbidden_message_shape) {
    struct kite_user u = node_user(NA);
    struct kite_authz_attrs a = {.user = &u, .verb = "patch", .group = "", .resource = "nodes", .sub = "status", .name = "b"};
    char *m = kite_authz_forbidden_message(&a, "why");
    cr_assert_str_eq(m, "nodes \"b\" is forbidden: User \"system:node:a\" cannot patch resource \"nodes/status\" in API group "
                        "\"\" at the cluster scope: why");
    free(m);
    a = (struct kite_authz_attrs){.user = &u, .verb = "create", .group = COORD, .resource = "leases", .ns = "kube-system"};
    m = kite_authz_forbidden_message(&a, NULL);
    cr_assert_str_eq(m, "leases.coordination.k8s.io is forbidden: User \"system:node:a\" cannot create resource \"leases\" in "
                        "API group \"coordination.k8s.io\" in the namespace \"kube-system\"");
    free(m);
    a = (struct kite_authz_attrs){.user = &u, .verb = "get", .path = "/metrics"};
    m = kite_authz_forbidden_message(&a, "");
    cr_assert_str_eq(m, "forbidden: User \"system:node:a\" cannot get path \"/metrics\"");
    free(m);
}

/* The union of the chain: no decision joins the reasons, one a line; a decision keeps its own. */
Test(node_authz, chain_reasons) {
    struct kite_user u = node_user(NA);
    struct kite_authz_attrs a = {.user = &u, .verb = "list", .group = "", .resource = "nodes"};
    char *why = NULL;
    cr_assert_eq(kite_authorize(&a, &why), KITE_AUTHZ_DENY);
    cr_assert_str_eq(why, "node 'a' cannot read all nodes, only its own Node object");
    free(why);
    why = NULL;
    a.name = "a";
    a.verb = "get";
    cr_assert_eq(kite_authorize(&a, &why), KITE_AUTHZ_ALLOW);
    free(why);
}

/* ---- NodeRestriction alone ----------------------------------------------------------------- */

struct nr_case {
    const char *what, *user, *resource, *sub, *ns, *name;
    enum kite_admission_op op;
    const char *obj, *old; /* JSON */
    const char *message;   /* NULL: admitted */
};

static void run_nr(const struct nr_case *c, size_t n, struct kite_apiserver *srv) {
    for (size_t i = 0; i < n; i++) {
        struct kite_user u = node_user(c[i].user);
        const char *group = strcmp(c[i].resource, "leases") == 0 ? COORD : "";
        json_object *obj = c[i].obj ? json_tokener_parse(c[i].obj) : NULL, *old = c[i].old ? json_tokener_parse(c[i].old) : NULL;
        cr_assert(!c[i].obj || obj, "%s: bad JSON", c[i].what);
        cr_assert(!c[i].old || old, "%s: bad JSON", c[i].what);
        struct kite_admission_attrs a = {.srv = srv, .user = &u, .op = c[i].op,
                                         .res = kite_registry_find(group, "v1", c[i].resource), .sub = c[i].sub,
                                         .ns = c[i].ns, .name = c[i].name, .obj = obj, .old = old};
        cr_assert_not_null(a.res);
        struct kite_admission_denial d = {0};
        int r = kite_admission_node_restriction(&a, &d);
        if (!c[i].message) {
            cr_assert_eq(r, 0, "%s: refused: %s", c[i].what, d.message ? d.message : "");
        } else {
            cr_assert_eq(r, -EPERM, "%s: admitted", c[i].what);
            cr_assert_str_eq(d.message, c[i].message, "%s", c[i].what);
            cr_assert_eq(d.code, 403, "%s", c[i].what);
            cr_assert_str_eq(d.reason, "Forbidden");
        }
        free(d.message);
        json_object_put(obj);
        json_object_put(old);
    }
}

#define NODE_OBJ(name, labels, taints) "{\"metadata\":{\"name\":\"" name "\",\"labels\":{" labels "}},\"spec\":{" taints "}}"
#define POD_ON(node, labels) "{\"metadata\":{\"name\":\"p\",\"labels\":{" labels "}},\"spec\":{\"nodeName\":\"" node "\"}}"
#define LEASE(name) "{\"metadata\":{\"name\":\"" name "\"}}"

Test(node_restriction, decisions) {
    const struct nr_case cases[] = {
        /* nodes */
        {"create own", NA, "nodes", NULL, NULL, NULL, KITE_ADMIT_CREATE,
         NODE_OBJ("a", "\"kubernetes.io/hostname\":\"a\",\"kubernetes.io/arch\":\"amd64\",\"beta.kubernetes.io/os\":\"linux\","
                       "\"node.kubernetes.io/instance-type\":\"x\",\"kubelet.kubernetes.io/k\":\"v\",\"x.node.kubernetes.io/k\":\"v\","
                       "\"topology.kubernetes.io/zone\":\"z\",\"failure-domain.beta.kubernetes.io/region\":\"r\",\"team\":\"t\","
                       "\"example.com/x\":\"y\"",
                  "\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]"),
         NULL, NULL},
        {"create another", NA, "nodes", NULL, NULL, NULL, KITE_ADMIT_CREATE, NODE_OBJ("b", "", ""), NULL,
         "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""},
        {"create with forbidden labels", NA, "nodes", NULL, NULL, NULL, KITE_ADMIT_CREATE,
         NODE_OBJ("a", "\"node-restriction.kubernetes.io/x\":\"y\",\"node-role.kubernetes.io/control-plane\":\"\","
                       "\"kubernetes.io/hostname\":\"a\",\"foo.k8s.io/z\":\"1\"", ""),
         NULL,
         "nodes \"a\" is forbidden: node \"a\" is not allowed to set the following labels: foo.k8s.io/z, "
         "node-restriction.kubernetes.io/x, node-role.kubernetes.io/control-plane"},
        {"create with configSource", NA, "nodes", NULL, NULL, NULL, KITE_ADMIT_CREATE,
         NODE_OBJ("a", "", "\"configSource\":{\"configMap\":{}}"), NULL,
         "nodes \"a\" is forbidden: node \"a\" is not allowed to create pods with a non-nil configSource"},
        {"update own", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_UPDATE, NODE_OBJ("a", "\"kubernetes.io/os\":\"linux\"", ""),
         NODE_OBJ("a", "", ""), NULL},
        {"update another", NA, "nodes", NULL, NULL, "b", KITE_ADMIT_UPDATE, NODE_OBJ("b", "", ""), NODE_OBJ("b", "", ""),
         "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""},
        {"status of another", NA, "nodes", "status", NULL, "b", KITE_ADMIT_UPDATE, NODE_OBJ("b", "", ""),
         NODE_OBJ("b", "", ""), "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""},
        {"label itself node-restriction", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_UPDATE,
         NODE_OBJ("a", "\"node-restriction.kubernetes.io/x\":\"y\"", ""), NODE_OBJ("a", "", ""),
         "nodes \"a\" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/x"},
        {"label itself control-plane", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_UPDATE,
         NODE_OBJ("a", "\"node-role.kubernetes.io/control-plane\":\"\"", ""), NODE_OBJ("a", "", ""),
         "nodes \"a\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane"},
        {"remove a forbidden label", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_UPDATE, NODE_OBJ("a", "", ""),
         NODE_OBJ("a", "\"sub.node-restriction.kubernetes.io/x\":\"y\"", ""),
         "nodes \"a\" is forbidden: is not allowed to modify labels: sub.node-restriction.kubernetes.io/x"},
        {"keep a forbidden label", NA, "nodes", "status", NULL, "a", KITE_ADMIT_UPDATE,
         NODE_OBJ("a", "\"node-role.kubernetes.io/worker\":\"\"", ""), NODE_OBJ("a", "\"node-role.kubernetes.io/worker\":\"\"", ""),
         NULL},
        {"change taints", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_UPDATE, NODE_OBJ("a", "", "\"taints\":[]"),
         NODE_OBJ("a", "", "\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]"),
         "nodes \"a\" is forbidden: node \"a\" is not allowed to modify taints"},
        {"no taints, empty taints", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_UPDATE, NODE_OBJ("a", "", "\"taints\":[]"),
         NODE_OBJ("a", "", ""), NULL},
        {"new configSource", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_UPDATE, NODE_OBJ("a", "", "\"configSource\":{\"x\":1}"),
         NODE_OBJ("a", "", ""),
         "nodes \"a\" is forbidden: node \"a\" is not allowed to update configSource to a new non-nil configSource"},
        {"delete itself", NA, "nodes", NULL, NULL, "a", KITE_ADMIT_DELETE, NULL, NODE_OBJ("a", "", ""),
         "nodes \"a\" is forbidden: node \"a\" is not allowed to delete node \"a\""},
        {"delete another", NA, "nodes", NULL, NULL, "b", KITE_ADMIT_DELETE, NULL, NODE_OBJ("b", "", ""),
         "nodes \"b\" is forbidden: node \"a\" is not allowed to modify node \"b\""},
        /* pods */
        {"status of own pod", NA, "pods", "status", "default", "p", KITE_ADMIT_UPDATE, POD_ON("a", "\"x\":\"1\""),
         POD_ON("a", "\"x\":\"1\""), NULL},
        {"status of another's pod", NA, "pods", "status", "default", "p", KITE_ADMIT_UPDATE, POD_ON("b", ""), POD_ON("b", ""),
         "pods \"p\" is forbidden: node \"a\" can only update pod status for pods with spec.nodeName set to itself"},
        {"labels through status", NA, "pods", "status", "default", "p", KITE_ADMIT_UPDATE, POD_ON("a", "\"x\":\"2\""),
         POD_ON("a", "\"x\":\"1\""), "pods \"p\" is forbidden: node \"a\" cannot update labels through pod status"},
        {"update a pod", NA, "pods", NULL, "default", "p", KITE_ADMIT_UPDATE, POD_ON("a", ""), POD_ON("a", ""),
         "pods \"p\" is forbidden: unexpected operation \"UPDATE\", node \"a\" can only create and delete mirror pods"},
        {"delete own pod", NA, "pods", NULL, "default", "p", KITE_ADMIT_DELETE, NULL, POD_ON("a", ""), NULL},
        {"delete another's pod", NA, "pods", NULL, "default", "p", KITE_ADMIT_DELETE, NULL, POD_ON("b", ""),
         "pods \"p\" is forbidden: node \"a\" can only delete pods with spec.nodeName set to itself"},
        {"delete an unbound pod", NA, "pods", NULL, "default", "p", KITE_ADMIT_DELETE, NULL, POD_ON("", ""),
         "pods \"p\" is forbidden: node \"a\" can only delete pods with spec.nodeName set to itself"},
        {"evict own pod", NA, "pods", "eviction", "default", "p", KITE_ADMIT_DELETE, NULL, POD_ON("a", ""), NULL},
        {"evict another's pod", NA, "pods", "eviction", "default", "p", KITE_ADMIT_DELETE, NULL, POD_ON("b", ""),
         "pods \"p\" is forbidden: node a can only evict pods with spec.nodeName set to itself"},
        {"bind a pod", NA, "pods", "binding", "default", "p", KITE_ADMIT_UPDATE, POD_ON("a", ""), POD_ON("", ""),
         "pods \"p\" is forbidden: unexpected pod subresource \"binding\", only 'status' and 'eviction' are allowed"},
        {"create a pod that is no mirror pod", NA, "pods", NULL, "default", NULL, KITE_ADMIT_CREATE, POD_ON("a", ""), NULL,
         "pods \"p\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"a\" can only "
         "create mirror pods"},
        {"mirror pod for another node", NA, "pods", NULL, "default", NULL, KITE_ADMIT_CREATE,
         "{\"metadata\":{\"name\":\"m\",\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}},\"spec\":{\"nodeName\":\"b\"}}",
         NULL, "pods \"m\" is forbidden: node \"a\" can only create pods with spec.nodeName set to itself"},
        {"mirror pod without owner", NA, "pods", NULL, "default", NULL, KITE_ADMIT_CREATE,
         "{\"metadata\":{\"name\":\"m\",\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}},\"spec\":{\"nodeName\":\"a\"}}",
         NULL, "pods \"m\" is forbidden: node \"a\" can only create pods with an owner reference set to itself"},
        {"mirror pod owned by a pod", NA, "pods", NULL, "default", NULL, KITE_ADMIT_CREATE,
         "{\"metadata\":{\"name\":\"m\",\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"},\"ownerReferences\":[{"
         "\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"a\",\"uid\":\"u\",\"controller\":true}]},\"spec\":{\"nodeName\":\"a\"}}",
         NULL, "pods \"m\" is forbidden: node \"a\" can only create pods with an owner reference set to itself"},
        {"mirror pod not controlled", NA, "pods", NULL, "default", NULL, KITE_ADMIT_CREATE,
         "{\"metadata\":{\"name\":\"m\",\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"},\"ownerReferences\":[{"
         "\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"a\",\"uid\":\"u\"}]},\"spec\":{\"nodeName\":\"a\"}}",
         NULL, "pods \"m\" is forbidden: node \"a\" can only create pods with a controller owner reference set to itself"},
        {"mirror pod blocking deletion", NA, "pods", NULL, "default", NULL, KITE_ADMIT_CREATE,
         "{\"metadata\":{\"name\":\"m\",\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"},\"ownerReferences\":[{"
         "\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"a\",\"uid\":\"u\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
         "\"spec\":{\"nodeName\":\"a\"}}",
         NULL, "pods \"m\" is forbidden: node \"a\" must not set blockOwnerDeletion on an owner reference"},
        /* leases */
        {"create own lease", NA, "leases", NULL, "kube-node-lease", NULL, KITE_ADMIT_CREATE, LEASE("a"), NULL, NULL},
        {"update own lease", NA, "leases", NULL, "kube-node-lease", "a", KITE_ADMIT_UPDATE, LEASE("a"), LEASE("a"), NULL},
        {"delete own lease", NA, "leases", NULL, "kube-node-lease", "a", KITE_ADMIT_DELETE, NULL, LEASE("a"), NULL},
        {"create another's lease", NA, "leases", NULL, "kube-node-lease", NULL, KITE_ADMIT_CREATE, LEASE("b"), NULL,
         "leases.coordination.k8s.io \"b\" is forbidden: can only access node lease with the same name as the requesting node"},
        {"replace another's lease", NA, "leases", NULL, "kube-node-lease", "b", KITE_ADMIT_UPDATE, LEASE("b"), LEASE("b"),
         "leases.coordination.k8s.io \"b\" is forbidden: can only access node lease with the same name as the requesting node"},
        {"leader election lease", NA, "leases", NULL, "kube-system", NULL, KITE_ADMIT_CREATE, LEASE("kube-controller-manager"),
         NULL,
         "leases.coordination.k8s.io \"kube-controller-manager\" is forbidden: can only access leases in the "
         "\"kube-node-lease\" system namespace"},
        /* not restricted */
        {"an event", NA, "events", NULL, "default", NULL, KITE_ADMIT_CREATE, LEASE("e"), NULL, NULL},
        /* an unidentifiable node */
        {"unidentifiable", "kubelet", "events", NULL, "default", NULL, KITE_ADMIT_CREATE, LEASE("e"), NULL,
         "events \"e\" is forbidden: could not determine node from user \"kubelet\""},
    };
    run_nr(cases, KITE_ARRAY_SIZE(cases), NULL);
}

Test(node_restriction, other_users_pass) {
    struct kite_user u = {.name = "system:node:a", .groups = {"system:masters"}, .n_groups = 1};
    json_object *obj = json_tokener_parse(NODE_OBJ("b", "\"node-restriction.kubernetes.io/x\":\"y\"", ""));
    struct kite_admission_attrs a = {.user = &u, .op = KITE_ADMIT_CREATE, .res = kite_registry_find("", "v1", "nodes"),
                                     .obj = obj};
    struct kite_admission_denial d = {0};
    cr_assert_eq(kite_admission_node_restriction(&a, &d), 0);
    json_object_put(obj);
    size_t n;
    const struct kite_admission_plugin *p = kite_admission_plugins(&n);
    bool found = false;
    for (size_t i = 0; i < n; i++) found |= strcmp(p[i].name, "NodeRestriction") == 0 && p[i].validate && !p[i].mutate;
    cr_assert(found, "NodeRestriction is a validating plugin of the chain");
}

/* ---- with a server: the graph, and HTTPS as a node ----------------------------------------- */

TestSuite(node_graph, .init = api_start, .fini = api_stop, .timeout = 120);

static void create(const char *path, const char *body) {
    json_object *o = NULL;
    long code = api_req("POST", path, NULL, body, &o);
    cr_assert_eq(code, 201, "POST %s: %ld %s", path, code, json_object_to_json_string(o));
    json_object_put(o);
}

#define PODS "/api/v1/namespaces/default/pods"
#define REF_POD(name, node, extra)                                                                                  \
    "{\"metadata\":{\"name\":\"" name "\"},\"spec\":{\"nodeName\":\"" node "\",\"serviceAccountName\":\"sa-" name   \
    "\",\"imagePullSecrets\":[{\"name\":\"pull-" name "\"}],\"containers\":[{\"name\":\"c\",\"image\":\"i\","       \
    "\"env\":[{\"name\":\"E\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"env-" name "\",\"key\":\"k\"}}},"          \
    "{\"name\":\"F\",\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"envcm-" name "\",\"key\":\"k\"}}}],"             \
    "\"envFrom\":[{\"secretRef\":{\"name\":\"from-" name "\"}},{\"configMapRef\":{\"name\":\"fromcm-" name "\"}}]}]," \
    "\"volumes\":[{\"name\":\"v1\",\"secret\":{\"secretName\":\"vol-" name "\"}},"                                   \
    "{\"name\":\"v2\",\"configMap\":{\"name\":\"volcm-" name "\"}},"                                               \
    "{\"name\":\"v3\",\"persistentVolumeClaim\":{\"claimName\":\"claim-" name "\"}},"                              \
    "{\"name\":\"v4\",\"projected\":{\"sources\":[{\"secret\":{\"name\":\"proj-" name "\"}},"                      \
    "{\"configMap\":{\"name\":\"projcm-" name "\"}}]}}" extra "]}}"

/* the ServiceAccount a REF_POD runs as (admission refuses a pod naming a missing one) */
static void create_ref_sa(const char *pod) {
    char body[128];
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"sa-%s\"}}", pod);
    create("/api/v1/namespaces/default/serviceaccounts", body);
}

static bool has(enum kite_node_ref t, const char *name, const char *node) {
    return kite_node_graph_has(api.srv->node_graph, t, "default", name, node);
}

Test(node_graph, follows_pods) {
    create_ref_sa("p1");
    create(PODS, REF_POD("p1", "a", ""));
    create_ref_sa("p2");
    create(PODS, REF_POD("p2", "", ""));
    struct kite_node_graph *g = api.srv->node_graph;
    cr_assert_eq(kite_node_graph_pod(g, "default", "p1", "a"), KITE_NODE_POD_OWN);
    cr_assert_eq(kite_node_graph_pod(g, "default", "p1", "b"), KITE_NODE_POD_OTHER);
    cr_assert_eq(kite_node_graph_pod(g, "default", "p2", "a"), KITE_NODE_POD_UNKNOWN, "unbound");
    cr_assert_eq(kite_node_graph_pod(g, "other", "p1", "a"), KITE_NODE_POD_UNKNOWN);
    static const struct { enum kite_node_ref t; const char *name; } refs[] = {
        {KITE_NODE_REF_SERVICEACCOUNT, "sa-p1"}, {KITE_NODE_REF_SECRET, "pull-p1"}, {KITE_NODE_REF_SECRET, "env-p1"},
        {KITE_NODE_REF_CONFIGMAP, "envcm-p1"},   {KITE_NODE_REF_SECRET, "from-p1"}, {KITE_NODE_REF_CONFIGMAP, "fromcm-p1"},
        {KITE_NODE_REF_SECRET, "vol-p1"},        {KITE_NODE_REF_CONFIGMAP, "volcm-p1"}, {KITE_NODE_REF_PVC, "claim-p1"},
        {KITE_NODE_REF_SECRET, "proj-p1"},       {KITE_NODE_REF_CONFIGMAP, "projcm-p1"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(refs); i++) {
        cr_assert(has(refs[i].t, refs[i].name, "a"), "%s", refs[i].name);
        cr_assert_not(has(refs[i].t, refs[i].name, "b"), "%s", refs[i].name);
    }
    cr_assert_not(has(KITE_NODE_REF_CONFIGMAP, "vol-p1", "a"), "a secret's name is no configmap");
    cr_assert_not(has(KITE_NODE_REF_SECRET, "vol-p2", "a"), "an unbound pod grants nothing");
    cr_assert_not(kite_node_graph_has(g, KITE_NODE_REF_SECRET, "other", "vol-p1", "a"), "another namespace");
    /* the graph read p1 for its moment: no tree is left with the pod's stored record (one per
     * pod, tens of KB each) */
    struct kite_wcache *pc = kite_apiserver_storage_cache(api.srv, kite_registry_find("", "v1", "pods"));
    struct kite_record *stored = kite_wcache_get(pc, "/registry/pods/default/p1");
    cr_assert_not_null(stored);
    cr_assert_null(kite_record_cache(stored), "the graph left the pod's parse with its record");
    kite_record_unref(stored);
    /* a pod that references nothing is still the node's */
    create(PODS, "{\"metadata\":{\"name\":\"bare\"},\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}");
    cr_assert_eq(kite_node_graph_pod(g, "default", "bare", "a"), KITE_NODE_POD_OWN);

    /* binding p2 adds its edges at once (the write's reply comes after the graph has it) */
    json_object *o = NULL;
    cr_assert_eq(api_reqf("POST", PODS "/p2/binding", &o,
                          "{\"metadata\":{\"name\":\"p2\"},\"target\":{\"kind\":\"Node\",\"name\":\"b\"}}"), 201);
    json_object_put(o);
    cr_assert(has(KITE_NODE_REF_SECRET, "vol-p2", "b"));
    cr_assert_eq(kite_node_graph_pod(g, "default", "p2", "b"), KITE_NODE_POD_OWN);

    /* two pods referencing one secret: it stays reachable until both are gone */
    create(PODS, "{\"metadata\":{\"name\":\"p3\"},\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],"
                 "\"volumes\":[{\"name\":\"v\",\"secret\":{\"secretName\":\"vol-p1\"}}]}}");
    cr_assert_eq(api_req("DELETE", PODS "/p1?gracePeriodSeconds=0", NULL, NULL, &o), 200);
    json_object_put(o);
    cr_assert_eq(kite_node_graph_pod(g, "default", "p1", "a"), KITE_NODE_POD_UNKNOWN);
    cr_assert(has(KITE_NODE_REF_SECRET, "vol-p1", "a"), "still referenced by p3");
    cr_assert_not(has(KITE_NODE_REF_SECRET, "env-p1", "a"));
    /* a status write changes no edge */
    cr_assert_eq(api_reqf("PATCH", PODS "/p3/status", &o, "{\"status\":{\"phase\":\"Running\"}}"), 200);
    json_object_put(o);
    cr_assert(has(KITE_NODE_REF_SECRET, "vol-p1", "a"));
    cr_assert_eq(api_req("DELETE", PODS "/p3?gracePeriodSeconds=0", NULL, NULL, &o), 200);
    json_object_put(o);
    cr_assert_not(has(KITE_NODE_REF_SECRET, "vol-p1", "a"));
}

/* the graph is rebuilt from the store at start */
Test(node_graph, rebuilt_at_start) {
    create_ref_sa("p1");
    create(PODS, REF_POD("p1", "a", ""));
    kite_apiserver_stop(api.srv);
    _cleanup_free_ char *data = kite_asprintf("%s/data", api.dir);
    struct kite_apiserver_options o = {.data_dir = data, .listen = "127.0.0.1:0", .threads = 2, .clock = &api.clock.clock};
    char *err = NULL;
    cr_assert_eq(kite_apiserver_start(&o, &api.srv, &err), 0, "%s", err ? err : "");
    cr_assert(has(KITE_NODE_REF_SECRET, "vol-p1", "a"));
    cr_assert_eq(kite_node_graph_pod(api.srv->node_graph, "default", "p1", "a"), KITE_NODE_POD_OWN);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static char *admin_cert, *admin_key;

static void as_node(const char *name) {
    _cleanup_free_ char *pki = kite_asprintf("%s/data/pki", api.dir), *cn = kite_asprintf("system:node:%s", name);
    const char *orgs[] = {"system:nodes"};
    char *cert = NULL, *key = NULL;
    cr_assert_eq(kite_pki_issue_client(pki, cn, orgs, 1, &cert, &key), 0);
    char *cp = kite_asprintf("%s/%s.crt", api.dir, name), *kp = kite_asprintf("%s/%s.key", api.dir, name);
    write_file(cp, cert);
    write_file(kp, key);
    free(cert);
    free(key);
    if (!admin_cert) {
        admin_cert = api.cert;
        admin_key = api.key;
    } else {
        free(api.cert);
        free(api.key);
    }
    api.cert = cp;
    api.key = kp;
}

static void as_admin(void) {
    if (!admin_cert) return;
    free(api.cert);
    free(api.key);
    api.cert = admin_cert;
    api.key = admin_key;
    admin_cert = admin_key = NULL;
}

static const char *ctype(const char *method) {
    return strcmp(method, "PATCH") == 0 ? "application/merge-patch+json" : NULL;
}

static void expect_403(const char *method, const char *path, const char *body, const char *message, const char *dname,
                       const char *dgroup, const char *dkind) {
    json_object *o = NULL;
    long code = api_req(method, path, ctype(method), body, &o);
    cr_assert_eq(code, 403, "%s %s: %ld %s", method, path, code, json_object_to_json_string(o));
    cr_assert_str_eq(jstr(o, "kind"), "Status");
    cr_assert_str_eq(jstr(o, "reason"), "Forbidden");
    cr_assert_eq(json_object_get_int(jget(o, "code")), 403);
    cr_assert_str_eq(jstr(o, "message"), message, "%s %s", method, path);
    if (dname) cr_assert_str_eq(jstr(o, "details.name"), dname);
    else cr_assert_null(jget(o, "details.name"));
    if (dgroup) cr_assert_str_eq(jstr(o, "details.group"), dgroup);
    else cr_assert_null(jget(o, "details.group"));
    cr_assert_str_eq(jstr(o, "details.kind"), dkind);
    json_object_put(o);
}

static void expect_code(const char *method, const char *path, const char *body, long want) {
    json_object *o = NULL;
    long code = api_req(method, path, ctype(method), body, &o);
    cr_assert_eq(code, want, "%s %s: %ld %s", method, path, code, json_object_to_json_string(o));
    json_object_put(o);
}

Test(node_graph, https_as_a_node) {
    create("/api/v1/nodes", "{\"metadata\":{\"name\":\"b\"}}");
    create_ref_sa("pa");
    create(PODS, REF_POD("pa", "a", ""));
    create_ref_sa("pb");
    create(PODS, REF_POD("pb", "b", ""));
    create("/api/v1/namespaces/default/secrets", "{\"metadata\":{\"name\":\"vol-pa\"},\"data\":{\"k\":\"dg==\"}}");
    create("/api/v1/namespaces/default/secrets", "{\"metadata\":{\"name\":\"vol-pb\"},\"data\":{\"k\":\"dg==\"}}");
    as_node("a");
    for (int round = 0; round < 20; round++) { /* refusals repeated: each frees what it built */
        expect_code("POST", "/api/v1/nodes", "{\"metadata\":{\"name\":\"a\"}}", round ? 409 : 201);
        expect_code("GET", "/api/v1/nodes/a", NULL, 200);
        expect_code("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Da", NULL, 200);
        expect_code("GET", PODS "/pa", NULL, 200);
        expect_code("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Da", NULL, 200);
        expect_code("GET", "/api/v1/namespaces/default/secrets/vol-pa", NULL, 200);
        expect_code("PATCH", "/api/v1/nodes/a/status", "{\"metadata\":{\"labels\":{\"kubernetes.io/os\":\"linux\"}}}", 200);
        expect_403("PATCH", "/api/v1/nodes/b/status", "{}",
                   "nodes \"b\" is forbidden: User \"system:node:a\" cannot patch resource \"nodes/status\" in API group \"\" "
                   "at the cluster scope: node \"a\" is not allowed to modify node \"b\"",
                   "b", NULL, "nodes");
        expect_403("GET", "/api/v1/nodes", NULL,
                   "nodes is forbidden: User \"system:node:a\" cannot list resource \"nodes\" in API group \"\" at the "
                   "cluster scope: node 'a' cannot read all nodes, only its own Node object",
                   NULL, NULL, "nodes");
        expect_403("GET", "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Db", NULL,
                   "nodes \"b\" is forbidden: User \"system:node:a\" cannot watch resource \"nodes\" in API group \"\" at "
                   "the cluster scope: node 'a' cannot read 'b', only its own Node object",
                   "b", NULL, "nodes");
        expect_403("GET", PODS "/pb", NULL,
                   "pods \"pb\" is forbidden: User \"system:node:a\" cannot get resource \"pods\" in API group \"\" in the "
                   "namespace \"default\": no relationship found between node 'a' and this object",
                   "pb", NULL, "pods");
        expect_403("GET", "/api/v1/namespaces/default/secrets/vol-pb", NULL,
                   "secrets \"vol-pb\" is forbidden: User \"system:node:a\" cannot get resource \"secrets\" in API group "
                   "\"\" in the namespace \"default\": no relationship found between node 'a' and this object",
                   "vol-pb", NULL, "secrets");
        expect_403("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                   "{\"metadata\":{\"name\":\"kube-controller-manager\"}}",
                   "leases.coordination.k8s.io is forbidden: User \"system:node:a\" cannot create resource \"leases\" in "
                   "API group \"coordination.k8s.io\" in the namespace \"kube-system\": can only access leases in the "
                   "\"kube-node-lease\" system namespace",
                   NULL, "coordination.k8s.io", "leases");
        expect_403("PATCH", PODS "/pb/status", "{\"status\":{\"phase\":\"Failed\"}}",
                   "pods \"pb\" is forbidden: node \"a\" can only update pod status for pods with spec.nodeName set to itself",
                   "pb", NULL, "pods");
        expect_403("POST", "/api/v1/nodes", "{\"metadata\":{\"name\":\"c\"}}",
                   "nodes \"c\" is forbidden: node \"a\" is not allowed to modify node \"c\"", "c", NULL, "nodes");
        expect_403("PATCH", "/api/v1/nodes/a", "{\"metadata\":{\"labels\":{\"node-role.kubernetes.io/control-plane\":\"\"}}}",
                   "nodes \"a\" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane", "a",
                   NULL, "nodes");
        expect_403("DELETE", "/api/v1/namespaces/default", NULL,
                   "namespaces \"default\" is forbidden: User \"system:node:a\" cannot delete resource \"namespaces\" in "
                   "API group \"\" at the cluster scope",
                   "default", NULL, "namespaces");
    }
    as_admin();
    json_object *o = NULL;
    cr_assert_eq(api_req("GET", PODS "/pb", NULL, NULL, &o), 200);
    cr_assert_str_neq(jstr(o, "status.phase") ? jstr(o, "status.phase") : "", "Failed", "nothing a refusal touched changed");
    json_object_put(o);
    cr_assert_eq(api_req("GET", "/api/v1/nodes/c", NULL, NULL, &o), 404);
    json_object_put(o);
}
