/* kite's controllers: API clients that act on what they watch, as kube-controller-manager's.
 * They use the client and the api modules only (DESIGN.md): the same code runs against one
 * kite apiserver, several on etcd, or any Kubernetes API server. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

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
