/* kite's controllers: API clients that act on what they watch, as kube-controller-manager's.
 * They use the client and the api modules only (DESIGN.md): the same code runs against one
 * kite apiserver, several on etcd, or any Kubernetes API server. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

/* The controllers kite controller-manager runs, one bit each (--controllers turns them off;
 * the table of their names is in selection.c, the one that starts them in
 * cmd/controller_manager.c). */
enum {
    KITE_CTL_NAMESPACE = 1u << 0,
    KITE_CTL_NODE_LIFECYCLE = 1u << 1,
    KITE_CTL_TAINT_EVICTION = 1u << 2,
    KITE_CTL_POD_GC = 1u << 3,
    KITE_CTL_DISRUPTION = 1u << 4,
    KITE_CTL_REPLICASET = 1u << 5,
    KITE_CTL_DEPLOYMENT = 1u << 6,
    KITE_CTL_GARBAGE_COLLECTOR = 1u << 7,
    KITE_CTL_JOB = 1u << 8,
    KITE_CTL_DAEMONSET = 1u << 9,
    KITE_CTL_CSR_APPROVING = 1u << 10,
    KITE_CTL_CSR_SIGNING = 1u << 11,
    KITE_CTL_ENDPOINTSLICE = 1u << 12,
    KITE_CTL_CLUSTERROLE_AGGREGATION = 1u << 13,
    KITE_CTL_SERVICEACCOUNT = 1u << 14,
    KITE_CTL_ROOT_CA_PUBLISHER = 1u << 15,
    KITE_CTL_REPLICATION = 1u << 16,
    KITE_CTL_STATEFULSET = 1u << 17,
    KITE_CTL_CRONJOB = 1u << 18,
};
/* --controllers (selection.c): names[0..n) as kube-controller-manager reads them ("*", "foo",
 * "-foo"; upstream's names or their short aliases) to the bits of the controllers that are
 * off. 0, or -EINVAL with *ret_error (malloc'ed) naming an unknown controller. */
int kite_controllers_off(char *const *names, size_t n, unsigned *ret_off, char **ret_error);
/* The short names, ", "-separated, for help texts (from the same table). */
const char *kite_controllers_names(void);

/* The namespace controller: a namespace being deleted (deletionTimestamp set, "kubernetes"
 * still in spec.finalizers) is emptied with a deletecollection per namespaced resource, in
 * batches on the server; when nothing is left it removes its finalizer through the finalize
 * subresource and the server deletes the namespace. What failed or remains (objects held by
 * their own finalizers) is written to the namespace's status.conditions as
 * NamespaceDeletionContentFailure / NamespaceContentRemaining / NamespaceFinalizersRemaining,
 * and the namespace is tried again with back-off (1 s doubling to KITE_NSCTL_RETRY_MAX_S). */
#define KITE_NSCTL_RETRY_MAX_S 30
#define KITE_NSCTL_RESYNC_S 300 /* every namespace is looked at again this often */

struct kite_nsctl;
struct kite_nsctl_options {
    struct kite_client *client; /* borrowed: must outlive the controller */
    struct kite_clock *clock;   /* NULL = real */
};
/* Starts the controller's thread (list + watch of namespaces). */
int kite_nsctl_start(const struct kite_nsctl_options *o, struct kite_nsctl **ret);
/* Stops it: cancels the watch and joins. NULL is a no-op. */
void kite_nsctl_stop(struct kite_nsctl *c);
/* One pass over namespace `name` (what the thread does for each terminating namespace):
 * 0 when it is finalized (or not terminating, or gone), -EAGAIN when content remains (the
 * conditions say what), another -errno on a failed request. */
int kite_nsctl_sync(struct kite_client *client, struct kite_clock *clock, const char *name);

/* ClusterRole aggregation: every ClusterRole with an aggregationRule gets the union of the
 * rules of the ClusterRoles its clusterRoleSelectors match (by name order, each rule once),
 * patched in when it differs. One thread: list + watch of clusterroles; a failed patch is
 * tried again after a back-off (1 s doubling to KITE_AGGREGATION_RETRY_MAX_S). */
#define KITE_AGGREGATION_RETRY_MAX_S 30
#define KITE_AGGREGATION_RESYNC_S 300

struct kite_aggregator;
struct kite_aggregator_options {
    struct kite_client *client; /* borrowed: must outlive the controller */
    struct kite_clock *clock;   /* NULL = real */
};
int kite_aggregator_start(const struct kite_aggregator_options *o, struct kite_aggregator **ret);
/* Cancels the watch and joins. NULL is a no-op. */
void kite_aggregator_stop(struct kite_aggregator *a);
/* The rules role (borrowed) aggregates from roles[0..n) (borrowed; role itself among them is
 * skipped): a new JSON array. */
json_object *kite_aggregated_rules(json_object *role, json_object *const *roles, size_t n);
/* A metav1.LabelSelector (JSON: matchLabels, matchExpressions) matches labels (may be NULL). */
bool kite_label_selector_json_matches(json_object *sel, json_object *labels);

/* CertificateSigningRequests (certificates.c), as kube-controller-manager's csrapproving and
 * csrsigning controllers: one thread lists and watches CSRs; the approver approves node
 * client requests whose requester a SubjectAccessReview allows (certificatesigningrequests/
 * selfnodeclient for a node renewing its own, /nodeclient for a bootstrap token); the signer
 * (only when given the CA) signs approved requests of the two client signers below. */
#define KITE_CSR_SIGNER_KUBELET_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"
#define KITE_CSR_SIGNER_CLIENT "kubernetes.io/kube-apiserver-client"
#define KITE_CSR_SIGNING_DURATION_DEFAULT_S (365 * 24 * 3600) /* --cluster-signing-duration */
#define KITE_CSR_MIN_EXPIRATION_S 600                          /* spec.expirationSeconds floor */
#define KITE_CSR_RETRY_MAX_S 30
#define KITE_CSR_RESYNC_S 300

struct kite_csrctl;
struct kite_csrctl_options {
    struct kite_client *client;          /* borrowed: must outlive the controller */
    struct kite_clock *clock;            /* NULL = real */
    const char *ca_cert_pem, *ca_key_pem; /* copied; both NULL: approve only, sign nothing */
    int64_t signing_duration_s;          /* longest certificate issued; 0 = 1 year */
    bool no_approve;                     /* sign only (--controllers=-csrapproving) */
};
int kite_csrctl_start(const struct kite_csrctl_options *o, struct kite_csrctl **ret);
/* Cancels the watch and joins. NULL is a no-op. */
void kite_csrctl_stop(struct kite_csrctl *c);

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
