/* The deployment controller (k8s.io/kubernetes pkg/controller/deployment): a Deployment owns
 * ReplicaSets named <deployment>-<pod-template-hash>, one per template it has had; the one
 * whose template is the Deployment's is the new one, and a rollout moves pods to it:
 * RollingUpdate scales it up within maxSurge and the old ones down within maxUnavailable, as
 * their pods become available; Recreate scales the old ones to 0, waits for their pods to end,
 * then scales the new one up. The new ReplicaSet carries the revision
 * (deployment.kubernetes.io/revision: one more than any old one's), and so does the
 * Deployment; old ReplicaSets past revisionHistoryLimit are deleted. Status counts the
 * ReplicaSets' replicas, with the Available and Progressing conditions (NewReplicaSetCreated,
 * ReplicaSetUpdated, NewReplicaSetAvailable, ProgressDeadlineExceeded after
 * progressDeadlineSeconds without progress). Not done: proportional scaling of a rollout in
 * progress (a replica change mid-rollout goes through the rolling step as any other), pause. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_DEPLOYCTL_RETRY_NS (1 * KITE_NS_PER_SEC)      /* a failed pass: looked at again after this, */
#define KITE_DEPLOYCTL_RETRY_MAX_NS (10 * KITE_NS_PER_SEC) /* doubling per failure to this */

struct kite_deployctl_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_deployctl;
struct kite_deployctl *kite_deployctl_new(const struct kite_deployctl_options *o);
void kite_deployctl_free(struct kite_deployctl *c);

void kite_deployctl_deployment_upsert(struct kite_deployctl *c, json_object *d);
void kite_deployctl_deployment_delete(struct kite_deployctl *c, json_object *d);
void kite_deployctl_rs_upsert(struct kite_deployctl *c, json_object *rs);
void kite_deployctl_rs_delete(struct kite_deployctl *c, json_object *rs);
void kite_deployctl_pod_upsert(struct kite_deployctl *c, json_object *pod);
void kite_deployctl_pod_delete(struct kite_deployctl *c, json_object *pod);
int64_t kite_deployctl_step(struct kite_deployctl *c);
bool kite_deployctl_pending(struct kite_deployctl *c);

/* controller.ComputeHash: FNV-32a of the template (borrowed; rendered as JSON with sorted
 * keys, where upstream renders the Go struct with spew) and, when collision_count >= 0, its 8
 * little-endian bytes; the sum's decimal digits in rand.SafeEncodeString's alphabet. */
void kite_deployctl_template_hash(json_object *tmpl, int64_t collision_count, char out[16]);

/* One rolling-update step (rolloutRolling): a ReplicaSet's replicas and available pods. */
struct kite_deployctl_rs {
    int64_t replicas, available;
};
/* ResolveFenceposts: maxSurge rounded up, maxUnavailable down, of desired (ints or "N%");
 * both 0 makes maxUnavailable 1. */
void kite_deployctl_fenceposts(json_object *max_surge, json_object *max_unavailable, int64_t desired, int64_t *ret_surge,
                        int64_t *ret_unavailable);
/* Sets the new ReplicaSet's replicas (reconcileNewReplicaSet) or, when it need not change,
 * the old ones' (reconcileOldReplicaSets: unhealthy first, then within maxUnavailable; old[]
 * oldest first). Returns 1 when the new one changed, 2 when old ones did, 0 when none did. */
int kite_deployctl_rolling_step(int64_t desired, int64_t surge, int64_t unavailable, struct kite_deployctl_rs *new_rs,
                         struct kite_deployctl_rs *old, size_t n_old);
/* Proportional scaling of a paused Deployment (upstream's scale()): the ReplicaSets rs[0..n)
 * (newest first) with pods get `allowed` replicas in all, each in proportion to its size;
 * what rounding leaves goes to the first of them that has pods. ReplicaSets without pods stay
 * at 0 unless none has any, when rs[0] gets them all. */
void kite_deployctl_proportional(int64_t allowed, struct kite_deployctl_rs *rs, size_t n);

struct kite_ctl_group;
/* Adds the controller to g (framework.h). */
int kite_deployctl_run(struct kite_ctl_group *g);
