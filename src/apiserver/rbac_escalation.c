/* RBAC's privilege-escalation prevention (pkg/registry/rbac/role/policybased and its siblings): a user may write
 * a Role or ClusterRole only with rules they already hold where it applies (or the `escalate`
 * verb on it), and a binding only to a role whose rules they hold in the binding's namespace
 * (or the `bind` verb on that role). system:masters is exempt, as upstream. A validating
 * admission plugin, so the object checked is the one that would be stored (after defaults and
 * patches). */
#include "apiserver/rbac.h"

#include <stdio.h>

static bool in_group(const struct kite_user *u, const char *g) {
    for (size_t i = 0; i < u->n_groups; i++)
        if (strcmp(u->groups[i], g) == 0) return true;
    return false;
}

static bool authorized(const struct kite_admission_attrs *a, const char *verb, const char *resource, const char *ns,
                       const char *name) {
    struct kite_authz_attrs z = {.user = a->user, .verb = verb, .group = KITE_RBAC_GROUP, .resource = resource,
                                 .ns = ns, .name = name, .view = a->srv};
    _cleanup_free_ char *why = NULL;
    return kite_authorize(&z, &why) == KITE_AUTHZ_ALLOW;
}

static int forbid(const struct kite_admission_attrs *a, struct kite_admission_denial *d, const char *why) {
    char gr[128];
    kite_resource_gr(a->res, gr);
    const char *name = kite_meta_str(a->obj, "name") ? kite_meta_str(a->obj, "name") : "";
    d->code = 403;
    d->reason = "Forbidden";
    d->message = kite_asprintf("%s \"%s\" is forbidden: %s", gr, name, why);
    return -EPERM;
}

/* ConfirmNoEscalation: wanted must be covered by what the user holds in ns. */
static int confirm(const struct kite_admission_attrs *a, struct kite_admission_denial *d, const char *ns,
                   const struct rbac_rules *wanted) {
    struct rbac_rules owner = {0};
    kite_apiserver_rbac_rules_for(a->srv, a->user, ns, &owner);
    struct kite_buf missing = {0};
    bool ok = kite_apiserver_rbac_rules_cover(&owner, wanted, &missing);
    kite_apiserver_rbac_rules_release(&owner);
    if (ok) {
        kite_buf_release(&missing);
        return 0;
    }
    if (missing.len && missing.p[missing.len - 1] == '\n') missing.p[--missing.len] = 0;
    struct kite_buf why = {0};
    kite_buf_printf(&why, "user \"%s\" (groups=[", a->user->name);
    for (size_t i = 0; i < a->user->n_groups; i++) kite_buf_printf(&why, "%s\"%s\"", i ? " " : "", a->user->groups[i]);
    kite_buf_printf(&why, "]) is attempting to grant RBAC permissions not currently held:\n%s", missing.p);
    int r = forbid(a, d, why.p);
    kite_buf_release(&why);
    kite_buf_release(&missing);
    return r;
}

static int check_role(const struct kite_admission_attrs *a, struct kite_admission_denial *d, bool cluster) {
    if (authorized(a, "escalate", a->res->plural, a->ns, kite_meta_str(a->obj, "name"))) return 0;
    struct rbac_rules wanted = {0};
    int r;
    json_object *agg = cluster ? kite_obj_get(a->obj, "aggregationRule") : NULL;
    if (agg && !json_object_is_type(agg, json_type_null)) {
        /* an aggregated role takes any rules: only who holds everything may make one */
        json_object *all = json_tokener_parse("[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]},"
                                              "{\"verbs\":[\"*\"],\"nonResourceURLs\":[\"*\"]}]");
        kite_apiserver_rbac_rules_append(&wanted, all);
        json_object_put(all);
        struct rbac_rules owner = {0};
        kite_apiserver_rbac_rules_for(a->srv, a->user, NULL, &owner);
        bool ok = kite_apiserver_rbac_rules_cover(&owner, &wanted, NULL);
        kite_apiserver_rbac_rules_release(&owner);
        kite_apiserver_rbac_rules_release(&wanted);
        return ok ? 0 : forbid(a, d, "must have cluster-admin privileges to use the aggregationRule");
    }
    kite_apiserver_rbac_rules_append(&wanted, kite_obj_get(a->obj, "rules"));
    r = confirm(a, d, cluster ? NULL : a->ns, &wanted);
    kite_apiserver_rbac_rules_release(&wanted);
    return r;
}

static int check_binding(const struct kite_admission_attrs *a, struct kite_admission_denial *d, bool cluster) {
    json_object *ref = kite_obj_get(a->obj, "roleRef");
    const char *kind = kite_obj_str(ref, "kind") ? kite_obj_str(ref, "kind") : "";
    const char *name = kite_obj_str(ref, "name") ? kite_obj_str(ref, "name") : "";
    const char *ns = cluster ? NULL : a->ns;
    bool clusterrole = strcmp(kind, "ClusterRole") == 0;
    if (authorized(a, "bind", clusterrole ? "clusterroles" : "roles", ns, name)) return 0;
    struct rbac_rules wanted = {0};
    if (kite_apiserver_rbac_role_rules(a->srv, kind, ns, name, &wanted) < 0) {
        const char *plural = clusterrole ? "clusterroles" : "roles";
        d->code = 404;
        d->reason = "NotFound";
        d->details = (struct status_details){.name = name, .group = KITE_RBAC_GROUP, .kind = plural};
        d->message = kite_asprintf("%s." KITE_RBAC_GROUP " \"%s\" not found", plural, name);
        return -EPERM;
    }
    int r = confirm(a, d, ns, &wanted);
    kite_apiserver_rbac_rules_release(&wanted);
    return r;
}

int kite_apiserver_rbac_admit(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (a->op == KITE_ADMIT_DELETE || !a->obj || strcmp(a->res->group, KITE_RBAC_GROUP) != 0) return 0;
    if (in_group(a->user, "system:masters")) return 0;
    const char *p = a->res->plural;
    if (strcmp(p, "roles") == 0) return check_role(a, d, false);
    if (strcmp(p, "clusterroles") == 0) return check_role(a, d, true);
    if (strcmp(p, "rolebindings") == 0) return check_binding(a, d, false);
    if (strcmp(p, "clusterrolebindings") == 0) return check_binding(a, d, true);
    return 0;
}
