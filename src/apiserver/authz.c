/* The authorizer chain. Each authorizer says allow, deny or no opinion; the first decision
 * wins and no opinion from all of them denies (kube-apiserver's union authorizer). For now:
 * system:masters may do everything; nodes what the Node authorizer (authz_node.c) allows;
 * every user what RBAC grants (authz_rbac.c), discovery and the health paths included. */
#include "apiserver/internal.h"
#include "apiserver/rbac.h"

static bool in_group(const struct kite_user *u, const char *g) {
    for (size_t i = 0; i < u->n_groups; i++)
        if (strcmp(u->groups[i], g) == 0) return true;
    return false;
}

static enum kite_authz_decision masters(const struct kite_authz_attrs *a, char **why) {
    return in_group(a->user, "system:masters") ? KITE_AUTHZ_ALLOW : KITE_AUTHZ_NO_OPINION;
}

static const char *const ALL[] = {"*", NULL};

static void masters_rules(struct kite_apiserver *s, const struct kite_user *u, const char *ns, struct kite_authz_rules *out) {
    if (!in_group(u, "system:masters")) return;
    kite_authz_rule_add(out, ALL, ALL, ALL, NULL);
    kite_authz_rule_add_paths(out, ALL, ALL);
}

/* As kube-apiserver's Node authorizer: a node's permissions follow its pods and are not
 * listed, so its rules review is incomplete; other users get nothing from it. */
static void node_rules(struct kite_apiserver *s, const struct kite_user *u, const char *ns, struct kite_authz_rules *out) {
    const char *node;
    if (kite_node_identity(u, &node)) out->incomplete = true;
}

bool kite_apiserver_is_health_path(const char *p) {
    static const char *const roots[] = {"/healthz", "/livez", "/readyz"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(roots); i++) {
        size_t n = strlen(roots[i]);
        if (strncmp(p, roots[i], n) == 0 && (p[n] == 0 || p[n] == '/')) return true;
    }
    return false;
}

bool kite_apiserver_is_public_path(const char *p) {
    return kite_apiserver_is_health_path(p) || strcmp(p, "/version") == 0 || strcmp(p, "/version/") == 0;
}

/* RBAC's rules for a user in ns, for SelfSubjectRulesReview (upstream's RBAC RulesFor). */
static void rbac_rules(struct kite_apiserver *s, const struct kite_user *u, const char *ns, struct kite_authz_rules *out) {
    struct rbac_rules r = {0};
    kite_apiserver_rbac_rules_for(s, u, ns, &r);
    for (size_t i = 0; i < r.n; i++) {
        const struct rbac_rule *x = &r.v[i];
        const struct rbac_strs *lists[] = {&x->verbs, &x->groups, &x->resources, &x->names, &x->urls};
        const char **v[KITE_ARRAY_SIZE(lists)];
        for (size_t j = 0; j < KITE_ARRAY_SIZE(lists); j++) {
            v[j] = kite_calloc(lists[j]->n + 1, sizeof *v[j]);
            for (size_t k = 0; k < lists[j]->n; k++) v[j][k] = lists[j]->v[k];
        }
        if (x->urls.n) kite_authz_rule_add_paths(out, v[0], v[4]);
        else kite_authz_rule_add(out, v[0], v[1], v[2], v[3]);
        for (size_t j = 0; j < KITE_ARRAY_SIZE(lists); j++) free(v[j]);
    }
    kite_apiserver_rbac_rules_release(&r);
}

/* Adding an authorizer is a function and a row here (and, for SelfSubjectRulesReview, a
 * function listing its rules; without one the review says it is incomplete). */
static const struct kite_authorizer CHAIN[] = {
    {"Masters", masters, masters_rules},
    {"Node", kite_authz_node, node_rules},
    {"RBAC", kite_apiserver_rbac_authorize, rbac_rules},
};

const struct kite_authorizer *kite_authorizers(size_t *ret_n) {
    *ret_n = KITE_ARRAY_SIZE(CHAIN);
    return CHAIN;
}

/* As kube-apiserver's union authorizer: the deciding authorizer's reason, or when none decides
 * the reasons of all, one a line. */
enum kite_authz_decision kite_authorize(const struct kite_authz_attrs *a, char **ret_reason) {
    char *all = NULL;
    /* kube-apiserver's AlwaysAllow mode: the chain is not asked */
    if (a->view && a->view->always_allow) {
        if (ret_reason) *ret_reason = NULL;
        return KITE_AUTHZ_ALLOW;
    }
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CHAIN); i++) {
        char *why = NULL;
        enum kite_authz_decision d = CHAIN[i].authorize(a, &why);
        if (d != KITE_AUTHZ_NO_OPINION) {
            free(all);
            if (ret_reason) *ret_reason = why;
            else free(why);
            return d;
        }
        if (why && *why) {
            char *joined = all ? kite_asprintf("%s\n%s", all, why) : why;
            if (joined != why) free(why);
            free(all);
            all = joined;
        } else {
            free(why);
        }
    }
    if (ret_reason) *ret_reason = all;
    else free(all);
    return KITE_AUTHZ_DENY;
}

char *kite_authz_forbidden_message(const struct kite_authz_attrs *a, const char *reason) {
    struct kite_buf m = {0};
    const char *user = a->user && a->user->name ? a->user->name : "";
    if (!a->resource) {
        kite_buf_printf(&m, "forbidden: User \"%s\" cannot %s path \"%s\"", user, a->verb ? a->verb : "get",
                        a->path ? a->path : "");
    } else {
        /* the group resource as schema.GroupResource prints it: "nodes", "leases.coordination.k8s.io" */
        const char *group = a->group ? a->group : "";
        kite_buf_printf(&m, "%s%s%s", a->resource, *group ? "." : "", group);
        if (a->name && *a->name) kite_buf_printf(&m, " \"%s\"", a->name);
        kite_buf_printf(&m, " is forbidden: User \"%s\" cannot %s resource \"%s%s%s\" in API group \"%s\" ", user,
                        a->verb ? a->verb : "", a->resource, a->sub ? "/" : "", a->sub ? a->sub : "", group);
        if (a->ns && *a->ns) kite_buf_printf(&m, "in the namespace \"%s\"", a->ns);
        else kite_buf_puts(&m, "at the cluster scope");
    }
    if (reason && *reason) kite_buf_printf(&m, ": %s", reason);
    size_t len;
    return kite_buf_detach(&m, &len);
}
