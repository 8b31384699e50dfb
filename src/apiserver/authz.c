/* The authorizer chain. Each authorizer says allow, deny or no opinion; the first decision
 * wins and no opinion from all of them denies (kube-apiserver's union authorizer). For now:
 * system:masters may do everything, and so may system:nodes (the Node authorizer replaces
 * that rule in its own issue); every other user has what RBAC grants (authz_rbac.c). */
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

static enum kite_authz_decision nodes_interim(const struct kite_authz_attrs *a, char **why) {
    if (!in_group(a->user, "system:nodes")) return KITE_AUTHZ_NO_OPINION;
    if (a->verb && strcmp(a->verb, "impersonate") == 0) return KITE_AUTHZ_NO_OPINION;
    return KITE_AUTHZ_ALLOW;
}

bool apiserver_is_health_path(const char *p) {
    static const char *const roots[] = {"/healthz", "/livez", "/readyz"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(roots); i++) {
        size_t n = strlen(roots[i]);
        if (strncmp(p, roots[i], n) == 0 && (p[n] == 0 || p[n] == '/')) return true;
    }
    return false;
}

bool apiserver_is_public_path(const char *p) {
    return apiserver_is_health_path(p) || strcmp(p, "/version") == 0 || strcmp(p, "/version/") == 0;
}

/* Adding an authorizer is a function and a row here. */
static const struct kite_authorizer CHAIN[] = {
    {"Masters", masters},
    {"NodesInterim", nodes_interim},
    /* discovery and the public paths are RBAC's system:discovery and system:public-info-viewer */
    {"RBAC", apiserver_rbac_authorize},
};

const struct kite_authorizer *kite_authorizers(size_t *ret_n) {
    *ret_n = KITE_ARRAY_SIZE(CHAIN);
    return CHAIN;
}

enum kite_authz_decision kite_authorize(const struct kite_authz_attrs *a, char **ret_reason) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CHAIN); i++) {
        enum kite_authz_decision d = CHAIN[i].authorize(a, ret_reason);
        if (d != KITE_AUTHZ_NO_OPINION) return d;
    }
    return KITE_AUTHZ_DENY;
}
