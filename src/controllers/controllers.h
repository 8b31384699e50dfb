/* kite's controllers: API clients that act on what they watch, as kube-controller-manager's.
 * They use the client and the api modules only (DESIGN.md): the same code runs against one
 * kite apiserver, several on etcd, or any Kubernetes API server. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

struct kite_ctl_group;

/* What the controllers' starts read: kite controller-manager's flags (cmd fills it). */
struct kite_ctl_config {
    int64_t grace_ns, startup_grace_ns, period_ns, large_cluster; /* node lifecycle */
    double eviction_rate, secondary_rate, unhealthy_threshold;
    int64_t node_cleanup_ns;                       /* --node-cleanup-after (0: off) */
    int64_t terminated_pod_gc_threshold, pod_gc_orphan_delay_ns;
    const char *signing_cert, *signing_key;        /* the CSR signer's CA, PEM (NULL: no signer) */
    int64_t signing_duration_s;
    const char *root_ca;                           /* PEM kube-root-ca.crt publishes (NULL: no publisher) */
};

/* One controller: a row of KITE_CONTROLLERS (registry.c). Everything per controller derives
 * from its row: --controllers and its help (name, alias), what lead() starts (start), the
 * default RBAC policy (its ClusterRole system:controller:<name>, bound to the user
 * system:kube-controller-manager). */
struct kite_ctl_desc {
    const char *name;  /* kube-controller-manager's (1.28+) name: "job-controller" */
    const char *alias; /* its older short name ("job"), or NULL */
    /* Adds the controller to g (framework.h): 0, or -errno. */
    int (*start)(struct kite_ctl_group *g, const struct kite_ctl_config *cfg);
    const char *rbac;  /* JSON array of the PolicyRules it needs (api/policy_rules.h) */
};
extern const struct kite_ctl_desc KITE_CONTROLLERS[];
extern const size_t KITE_N_CONTROLLERS;
#define KITE_CTL_ROLE_PREFIX "system:controller:"
#define KITE_CTL_USER "system:kube-controller-manager"

/* --controllers: names[0..n) as kube-controller-manager reads them ("*", "foo", "-foo";
 * upstream's names or their short aliases) to on[i] for KITE_CONTROLLERS[i] (on has
 * KITE_N_CONTROLLERS entries). 0, or -EINVAL with *ret_error (malloc'ed) naming an unknown
 * controller. */
int kite_controllers_select(char *const *names, size_t n, bool *on, char **ret_error);
/* The names (and aliases, in parentheses), ", "-separated, for help texts. */
const char *kite_controllers_names(void);
/* Row i's ClusterRole name, "system:controller:<name>" (static storage). */
const char *kite_controllers_role(size_t i);

/* The namespace controller: a namespace being deleted (deletionTimestamp set, "kubernetes"
 * still in spec.finalizers) is emptied with a deletecollection per namespaced resource, in
 * batches on the server; when nothing is left it removes its finalizer through the finalize
 * subresource and the server deletes the namespace. What failed or remains (objects held by
 * their own finalizers) is written to the namespace's status.conditions as
 * NamespaceDeletionContentFailure / NamespaceContentRemaining / NamespaceFinalizersRemaining,
 * and the namespace is tried again with back-off (1 s doubling to KITE_NSCTL_RETRY_MAX_S). */
#define KITE_NSCTL_RETRY_MAX_S 30
#define KITE_NSCTL_RESYNC_S 300 /* every namespace is looked at again this often */

/* Adds the controller to g (framework.h): a reconciler over namespaces. */
int kite_nsctl_run(struct kite_ctl_group *g);
/* One pass over namespace `name` (what the thread does for each terminating namespace):
 * 0 when it is finalized (or not terminating, or gone), -EAGAIN when content remains (the
 * conditions say what), another -errno on a failed request. */
int kite_nsctl_sync(struct kite_client *client, struct kite_clock *clock, const char *name);

/* ClusterRole aggregation: every ClusterRole with an aggregationRule gets the union of the
 * rules of the ClusterRoles its clusterRoleSelectors match (by name order, each rule once),
 * patched in when it differs. A reconciler on the shared ClusterRole informer; a failed patch
 * is tried again after a back-off (1 s doubling to KITE_AGGREGATION_RETRY_MAX_S). */
#define KITE_AGGREGATION_RETRY_MAX_S 30
#define KITE_AGGREGATION_RESYNC_S 300

/* Adds the controller to g (framework.h). */
int kite_aggregator_run(struct kite_ctl_group *g);
/* The rules role (borrowed) aggregates from roles[0..n) (borrowed; role itself among them is
 * skipped): a new JSON array. */
json_object *kite_aggregated_rules(json_object *role, json_object *const *roles, size_t n);
/* A metav1.LabelSelector (JSON: matchLabels, matchExpressions) matches labels (may be NULL). */
bool kite_label_selector_json_matches(json_object *sel, json_object *labels);

/* CertificateSigningRequests (certificates.c), as kube-controller-manager's csrapproving and
 * csrsigning controllers, each a reconciler on the shared CSR informer: the approver approves node
 * client requests whose requester a SubjectAccessReview allows (certificatesigningrequests/
 * selfnodeclient for a node renewing its own, /nodeclient for a bootstrap token); the signer
 * (only when given the CA) signs approved requests of the two client signers below. A failed
 * write is tried again after the CSR's back-off (1 s doubling to KITE_CSR_RETRY_MAX_S). */
#define KITE_CSR_SIGNER_KUBELET_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"
#define KITE_CSR_SIGNER_CLIENT "kubernetes.io/kube-apiserver-client"
#define KITE_CSR_SIGNING_DURATION_DEFAULT_S (365 * 24 * 3600) /* --cluster-signing-duration */
#define KITE_CSR_MIN_EXPIRATION_S 600                          /* spec.expirationSeconds floor */
#define KITE_CSR_RETRY_MAX_S 30
#define KITE_CSR_RESYNC_S 300

struct kite_csr_signer_options {
    const char *ca_cert_pem, *ca_key_pem; /* copied; both required */
    int64_t signing_duration_s;          /* longest certificate issued; 0 = 1 year */
};
/* Add the approver / the signer to g (framework.h). */
int kite_csr_approver_run(struct kite_ctl_group *g);
int kite_csr_signer_run(struct kite_ctl_group *g, const struct kite_csr_signer_options *o);

/* Asks whether the requester in a CSR's spec (borrowed: username, uid, groups, extra) may
 * create certificatesigningrequests/<subresource>: 0 with *ret_allowed, or -errno. */
typedef int (*kite_csr_sar_fn)(void *ud, json_object *spec, const char *subresource, bool *ret_allowed);
/* The approver's decision on csr (borrowed): 1 approve (*ret_message: the condition's
 * message, static), 0 not one for it (another signer, already decided, not a node client
 * request), -EPERM a node client request its requester may not have approved, another -errno
 * when a review failed. */
int kite_csr_approval(json_object *csr, kite_csr_sar_fn sar, void *ud, const char **ret_message);
/* The signer's work on csr (borrowed): 1 with *ret_cert_pem (malloc'ed) valid for
 * min(max_s, spec.expirationSeconds), 0 nothing to do (another signer, not approved, already
 * issued), or -errno with *ret_failure (static) when the request can never be signed. */
int kite_csr_sign(json_object *csr, const char *ca_cert_pem, const char *ca_key_pem, int64_t max_s, char **ret_cert_pem,
                  const char **ret_failure);
