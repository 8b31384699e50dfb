/* RBAC inside the API server: policy rules compiled from Roles and ClusterRoles, the matching
 * and covering rules of k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go and
 * pkg/registry/rbac/validation (rbac_rules.c), and the authorizer's index of who is bound to
 * what (authz_rbac.c). */
#pragma once
#include "apiserver/internal.h"

#define KITE_RBAC_GROUP "rbac.authorization.k8s.io"

struct rbac_strs {
    char **v;
    size_t n;
};
/* One PolicyRule. An empty list is "none" (resourceNames: "any"). */
struct rbac_rule {
    struct rbac_strs verbs, groups, resources, names, urls;
};
struct rbac_rules {
    struct rbac_rule *v;
    size_t n;
};

/* Compiles a JSON array of PolicyRules (borrowed; not an array: no rules) and appends them to
 * out; release with rbac_rules_release. */
void kite_apiserver_rbac_rules_append(struct rbac_rules *out, json_object *rules);
void kite_apiserver_rbac_rules_release(struct rbac_rules *r);
/* Appends deep copies of in's rules to out. */
void kite_apiserver_rbac_rules_extend(struct rbac_rules *out, const struct rbac_rules *in);

/* RuleAllows: whether rule r grants the request a (a resource request when a->resource is set,
 * else a non-resource one on a->path): verbs, API groups, resources ("*", "res/sub",
 * "*\/sub"), resource names, and non-resource URLs (exact, "*", or a prefix ending in "*"). */
bool kite_apiserver_rbac_rule_allows(const struct rbac_rule *r, const struct kite_authz_attrs *a);

/* Whether owner (the rules a user holds) covers every permission of the rules `wanted`, as
 * rbac validation's Covers: each wanted rule is broken down into one verb x group x resource x
 * name (or URL x verb) and each piece must be covered by one owner rule. Appends what is not
 * covered, one rule per line in Kubernetes' compact form ({APIGroups:["",...], Resources:[...],
 * Verbs:[...]}), to missing when given. */
bool kite_apiserver_rbac_rules_cover(const struct rbac_rules *owner, const struct rbac_rules *wanted, struct kite_buf *missing);

/* Whether a binding's subject (kind, name, its namespace) in a binding of namespace binding_ns
 * ("" for a ClusterRoleBinding) names user u: a User by name, a Group among u's groups, a
 * ServiceAccount as the user system:serviceaccount:NS:NAME (NS defaulting to the binding's). */
bool kite_apiserver_rbac_subject_matches(const char *kind, const char *name, const char *sa_ns, const char *binding_ns,
                          const struct kite_user *u);

/* ---- the index (authz_rbac.c) -------------------------------------------------------------- */
struct rbac_index;
/* Builds the index from the four kinds' watch caches and keeps it current from their events
 * (applied on the store's writer thread before any write completion fires, so a request that
 * follows a committed binding sees it). Sets s->rbac. */
int kite_apiserver_rbac_start(struct kite_apiserver *s);
void kite_apiserver_rbac_stop(struct kite_apiserver *s);
/* The authorizer of the chain (authz.c's "RBAC" row). */
enum kite_authz_decision kite_apiserver_rbac_authorize(const struct kite_authz_attrs *a, char **ret_reason);
/* Every rule u holds through RBAC in namespace ns (NULL: cluster bindings only), appended to out. */
void kite_apiserver_rbac_rules_for(struct kite_apiserver *s, const struct kite_user *u, const char *ns, struct rbac_rules *out);
/* The rules of a role reference (kind Role in ns, or ClusterRole), appended to out; -ENOENT
 * when the role does not exist. */
int kite_apiserver_rbac_role_rules(struct kite_apiserver *s, const char *kind, const char *ns, const char *name,
                              struct rbac_rules *out);

/* ---- escalation prevention (authz_rbac.c), a validating admission plugin ------------------- */
int kite_apiserver_rbac_admit(const struct kite_admission_attrs *a, struct kite_admission_denial *d);

/* ---- bootstrap policy (rbac_bootstrap.c) --------------------------------------------------- */
/* Creates the default ClusterRoles and ClusterRoleBindings that are missing, and puts back
 * those marked rbac.authorization.kubernetes.io/autoupdate=true whose rules or subjects
 * lack what the defaults hold (kube-apiserver's RBAC post-start hook). 0 or -errno. */
int kite_apiserver_rbac_bootstrap(struct kite_apiserver *s, const struct kite_apiserver_role *extra, size_t n_extra);
