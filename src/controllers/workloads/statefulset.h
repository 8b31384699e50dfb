/* The StatefulSet controller (k8s.io/kubernetes pkg/controller/statefulset): pods NAME-0 ..
 * NAME-(replicas-1), each with its ordinal's stable name, hostname and the Service's subdomain
 * (spec.serviceName), so a headless Service gives every pod its own DNS name.
 *   OrderedReady: pods are created one at a time in ordinal order, each once the one before is
 *   Running and Ready; removed one at a time from the highest ordinal, once all are Ready.
 *   Parallel: created and removed all at once.
 *   RollingUpdate: once every pod is Running and Ready, the pod of the highest ordinal >=
 *   spec.updateStrategy.rollingUpdate.partition whose revision is not the template's is
 *   deleted, and recreated from the new template; one at a time. OnDelete: pods are replaced
 *   from the new template only when deleted.
 * A pod that failed (or succeeded) is deleted and made again. Revisions are ControllerRevisions
 * (apps/v1) the set controls, named SET-HASH (the pods' controller-revision-hash label,
 * status.currentRevision/updateRevision), holding the template as the strategic merge patch
 * kubectl rollout undo sends back and numbered in order; a template equal to an older revision's
 * renumbers that one as the newest. A name taken by a revision of other data raises
 * status.collisionCount (published) and the name is hashed again. A pod made again below the
 * partition gets the current revision's template. Revisions neither current, updated nor any
 * pod's beyond revisionHistoryLimit are deleted, the oldest first; orphaned revisions it selects
 * are adopted. Pods without a controller that are members by name (SET-N) and match the selector
 * are adopted (their ownerReferences patched, with the pod's uid as precondition, as ClaimPods
 * with isMemberOf); pods the set controls are counted, other pods are left alone (no release).
 * Runs on the framework (framework.h): StatefulSets, pods and ControllerRevisions feed it. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_STS_RETRY_MAX_NS (1 * KITE_NS_PER_SEC) /* longest back-off of a failed pass */

struct kite_stsctl_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_ctl_group;
/* Adds the controller to g (framework.h): 0, or -errno. */
int kite_stsctl_run(struct kite_ctl_group *g);

/* The core kite_stsctl_run feeds from the shared informers (and tests directly): caches of
 * sets, pods and revisions under its lock; a step syncs the sets due. */
struct kite_statefulsets;
struct kite_statefulsets *kite_stsctl_new(const struct kite_stsctl_options *o);
void kite_stsctl_free(struct kite_statefulsets *c);
void kite_stsctl_set_upsert(struct kite_statefulsets *c, json_object *set);
void kite_stsctl_pod_upsert(struct kite_statefulsets *c, json_object *pod);
void kite_stsctl_rev_upsert(struct kite_statefulsets *c, json_object *rev);
/* ns until the next set is due (0: now), -1 when none is queued. */
int64_t kite_stsctl_step(struct kite_statefulsets *c);
