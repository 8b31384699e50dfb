/* The Node authorizer, as kube-apiserver 1.32's (plugin/pkg/auth/authorizer/node, with
 * AuthorizeNodeWithSelectors): a kubelet's identity needs no binding. A node may read its own
 * Node and write Nodes and their status (NodeRestriction admission keeps both to its own),
 * get, create, update, patch and delete its own Lease in kube-node-lease, read the pods bound
 * to it (lists and watches only with fieldSelector spec.nodeName=NAME), write their status,
 * evict them and create or delete mirror pods (NodeRestriction again), write events, and read
 * the Secrets, ConfigMaps and PersistentVolumeClaims and request tokens of the
 * ServiceAccounts its pods reference (the pods graph, node_graph.c). Anything else gets no
 * opinion with upstream's reason, so a later authorizer (RBAC) may decide; except a request
 * about another node's own objects (its Node, its Lease, a pod bound to it), which is denied
 * outright, whatever a later authorizer would say.
 *
 * Lease renewals come through here on every heartbeat: the path to that answer compares
 * strings and allocates nothing. */
#include "apiserver/internal.h"

#include <stdarg.h>
#include <stdio.h>

#define NODE_USER_PREFIX "system:node:"
#define NODE_LEASE_NAMESPACE "kube-node-lease"

bool kite_node_identity(const struct kite_user *u, const char **ret_name) {
    bool in = false;
    for (size_t i = 0; !in && i < u->n_groups; i++) in = strcmp(u->groups[i], "system:nodes") == 0;
    if (!in) return false;
    const char *n = u->name ? u->name : "";
    *ret_name = strncmp(n, NODE_USER_PREFIX, strlen(NODE_USER_PREFIX)) == 0 ? n + strlen(NODE_USER_PREFIX) : "";
    if (strchr(*ret_name, '/')) *ret_name = ""; /* no object name has one */
    return true;
}

static enum kite_authz_decision say(enum kite_authz_decision d, char **why, const char *fmt, ...) KITE_PRINTF(3, 4);
static enum kite_authz_decision say(enum kite_authz_decision d, char **why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && vasprintf(why, fmt, ap) < 0) *why = NULL;
    va_end(ap);
    return d;
}

static bool is(const char *a, const char *b) { return a && strcmp(a, b) == 0; }
static bool empty(const char *s) { return !s || !*s; }

static bool verb_in(const char *verb, const char *const *verbs) {
    for (; *verbs; verbs++)
        if (is(verb, *verbs)) return true;
    return false;
}

#define NO_RELATION(why, node) say(KITE_AUTHZ_NO_OPINION, why, "no relationship found between node '%s' and this object", node)

/* ---- per resource -------------------------------------------------------------------------- */

typedef enum kite_authz_decision (*node_rule)(const char *node, const struct kite_authz_attrs *a, char **why);

static enum kite_authz_decision graph_ref(const char *node, const struct kite_authz_attrs *a, enum kite_node_ref t,
                                          char **why) {
    if (empty(a->name)) return say(KITE_AUTHZ_NO_OPINION, why, "No Object name found");
    if (kite_node_graph_has(a->view ? a->view->node_graph : NULL, t, a->ns, a->name, node)) return KITE_AUTHZ_ALLOW;
    return NO_RELATION(why, node);
}

/* Secrets, ConfigMaps: one named object, read (upstream's authorizeReadNamespacedObject). */
static enum kite_authz_decision read_ref(const char *node, const struct kite_authz_attrs *a, enum kite_node_ref t,
                                         char **why) {
    static const char *const reads[] = {"get", "list", "watch", NULL};
    if (!verb_in(a->verb, reads)) return say(KITE_AUTHZ_NO_OPINION, why, "can only read resources of this type");
    if (!empty(a->sub)) return say(KITE_AUTHZ_NO_OPINION, why, "cannot read subresource");
    if (empty(a->ns)) return say(KITE_AUTHZ_NO_OPINION, why, "can only read namespaced object of this type");
    return graph_ref(node, a, t, why);
}

static enum kite_authz_decision secrets(const char *node, const struct kite_authz_attrs *a, char **why) {
    return read_ref(node, a, KITE_NODE_REF_SECRET, why);
}

static enum kite_authz_decision configmaps(const char *node, const struct kite_authz_attrs *a, char **why) {
    return read_ref(node, a, KITE_NODE_REF_CONFIGMAP, why);
}

/* PersistentVolumeClaims: get, and update/patch of status (authorizeGet, authorizeStatusUpdate). */
static enum kite_authz_decision pvcs(const char *node, const struct kite_authz_attrs *a, char **why) {
    if (is(a->sub, "status")) {
        if (!is(a->verb, "update") && !is(a->verb, "patch"))
            return say(KITE_AUTHZ_NO_OPINION, why, "can only get/update/patch this type");
        return graph_ref(node, a, KITE_NODE_REF_PVC, why);
    }
    if (!is(a->verb, "get")) return say(KITE_AUTHZ_NO_OPINION, why, "can only get individual resources of this type");
    if (!empty(a->sub)) return say(KITE_AUTHZ_NO_OPINION, why, "cannot get subresource");
    return graph_ref(node, a, KITE_NODE_REF_PVC, why);
}

/* ServiceAccounts: a token of one its pods run as (authorizeCreateToken). */
static enum kite_authz_decision serviceaccounts(const char *node, const struct kite_authz_attrs *a, char **why) {
    if (!is(a->verb, "create") || empty(a->name))
        return say(KITE_AUTHZ_NO_OPINION, why, "can only create tokens for individual service accounts");
    if (!is(a->sub, "token")) return say(KITE_AUTHZ_NO_OPINION, why, "can only create token subresource of serviceaccount");
    return graph_ref(node, a, KITE_NODE_REF_SERVICEACCOUNT, why);
}

/* Leases: its own, in kube-node-lease (authorizeLease; create is named by the body, which
 * NodeRestriction checks). Another node's lease is denied. */
static enum kite_authz_decision leases(const char *node, const struct kite_authz_attrs *a, char **why) {
    static const char *const verbs[] = {"get", "create", "update", "patch", "delete", NULL};
    bool lease_ns = is(a->ns, NODE_LEASE_NAMESPACE);
    if (lease_ns && !empty(a->name) && !is(a->name, node))
        return say(KITE_AUTHZ_DENY, why, "can only access node lease with the same name as the requesting node");
    if (!verb_in(a->verb, verbs))
        return say(KITE_AUTHZ_NO_OPINION, why, "can only get, create, update, patch, or delete a node lease");
    if (!lease_ns)
        return say(KITE_AUTHZ_NO_OPINION, why, "can only access leases in the \"" NODE_LEASE_NAMESPACE "\" system namespace");
    if (!is(a->verb, "create") && !is(a->name, node))
        return say(KITE_AUTHZ_NO_OPINION, why, "can only access node lease with the same name as the requesting node");
    return KITE_AUTHZ_ALLOW;
}

/* Nodes: read its own by name; create, update and patch (NodeRestriction: its own); status.
 * Another node by name is denied, whatever the verb. */
static enum kite_authz_decision nodes(const char *node, const struct kite_authz_attrs *a, char **why) {
    static const char *const reads[] = {"get", "list", "watch", NULL};
    bool read = verb_in(a->verb, reads);
    if (!empty(a->name) && !is(a->name, node)) {
        if (read) return say(KITE_AUTHZ_DENY, why, "node '%s' cannot read '%s', only its own Node object", node, a->name);
        return say(KITE_AUTHZ_DENY, why, "node \"%s\" is not allowed to modify node \"%s\"", node, a->name);
    }
    if (empty(a->sub)) {
        static const char *const writes[] = {"create", "update", "patch", NULL};
        if (verb_in(a->verb, writes)) return KITE_AUTHZ_ALLOW;
        if (read) {
            if (is(a->name, node)) return KITE_AUTHZ_ALLOW;
            return say(KITE_AUTHZ_NO_OPINION, why, "node '%s' cannot read all nodes, only its own Node object", node);
        }
    } else if (is(a->sub, "status") && (is(a->verb, "update") || is(a->verb, "patch"))) {
        return KITE_AUTHZ_ALLOW;
    }
    return KITE_AUTHZ_NO_OPINION;
}

/* Pods: get those bound to it; list and watch them by spec.nodeName; create and delete (mirror
 * pods: NodeRestriction), status, eviction. A pod bound to another node is denied. */
static enum kite_authz_decision pods(const char *node, const struct kite_authz_attrs *a, char **why) {
    struct kite_node_graph *g = a->view ? a->view->node_graph : NULL;
    if (empty(a->sub)) {
        if (is(a->verb, "get") || ((is(a->verb, "list") || is(a->verb, "watch")))) {
            if (!is(a->verb, "get")) {
                const char *bound = a->fields ? kite_field_selector_exact(a->fields, "spec.nodeName") : NULL;
                if (is(bound, node)) return KITE_AUTHZ_ALLOW;
                if (bound && *bound)
                    return say(KITE_AUTHZ_DENY, why, "can only list/watch pods with spec.nodeName field selector");
                if (empty(a->name))
                    return say(KITE_AUTHZ_NO_OPINION, why, "can only list/watch pods with spec.nodeName field selector");
            }
            if (empty(a->name)) return say(KITE_AUTHZ_NO_OPINION, why, "No Object name found");
            switch (kite_node_graph_pod(g, a->ns, a->name, node)) {
            case KITE_NODE_POD_OWN: return KITE_AUTHZ_ALLOW;
            case KITE_NODE_POD_OTHER:
                return say(KITE_AUTHZ_DENY, why, "no relationship found between node '%s' and this object", node);
            default: return NO_RELATION(why, node);
            }
        }
        if (is(a->verb, "create") || is(a->verb, "delete")) return KITE_AUTHZ_ALLOW;
    } else if (is(a->sub, "status")) {
        if (is(a->verb, "update") || is(a->verb, "patch")) return KITE_AUTHZ_ALLOW;
    } else if (is(a->sub, "eviction")) {
        if (is(a->verb, "create")) return KITE_AUTHZ_ALLOW;
    }
    return KITE_AUTHZ_NO_OPINION;
}

static const struct { const char *group, *resource; node_rule rule; } SUBDIVIDED[] = {
    {"coordination.k8s.io", "leases", leases}, /* first: every heartbeat */
    {"", "nodes", nodes},
    {"", "pods", pods},
    {"", "secrets", secrets},
    {"", "configmaps", configmaps},
    {"", "persistentvolumeclaims", pvcs},
    {"", "serviceaccounts", serviceaccounts},
};

/* Everything else a node may do, the same for every node (upstream's NodeRules(), less what
 * is subdivided above; events of both groups). */
static const struct { const char *group, *resource; const char *verbs[5]; } STATIC_RULES[] = {
    {"", "events", {"create", "update", "patch"}},
    {"events.k8s.io", "events", {"create", "update", "patch"}},
    {"", "services", {"get", "list", "watch"}},
    {"", "endpoints", {"get"}},
    {"authentication.k8s.io", "tokenreviews", {"create"}},
    {"authorization.k8s.io", "subjectaccessreviews", {"create"}},
    {"authorization.k8s.io", "localsubjectaccessreviews", {"create"}},
    {"certificates.k8s.io", "certificatesigningrequests", {"create", "get", "list", "watch"}},
    {"storage.k8s.io", "csidrivers", {"get", "list", "watch"}},
    {"node.k8s.io", "runtimeclasses", {"get", "list", "watch"}},
};

enum kite_authz_decision kite_authz_node(const struct kite_authz_attrs *a, char **why) {
    const char *node;
    if (!kite_node_identity(a->user, &node)) return KITE_AUTHZ_NO_OPINION;
    if (!*node) return say(KITE_AUTHZ_NO_OPINION, why, "unknown node for user \"%s\"", a->user->name ? a->user->name : "");
    if (!a->resource) return KITE_AUTHZ_NO_OPINION;
    const char *group = a->group ? a->group : "";
    for (size_t i = 0; i < KITE_ARRAY_SIZE(SUBDIVIDED); i++)
        if (strcmp(SUBDIVIDED[i].resource, a->resource) == 0 && strcmp(SUBDIVIDED[i].group, group) == 0)
            return SUBDIVIDED[i].rule(node, a, why);
    for (size_t i = 0; i < KITE_ARRAY_SIZE(STATIC_RULES); i++)
        if (strcmp(STATIC_RULES[i].resource, a->resource) == 0 && strcmp(STATIC_RULES[i].group, group) == 0 &&
            empty(a->sub) && verb_in(a->verb, STATIC_RULES[i].verbs))
            return KITE_AUTHZ_ALLOW;
    return KITE_AUTHZ_NO_OPINION;
}
