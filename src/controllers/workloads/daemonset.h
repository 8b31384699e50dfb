/* The DaemonSet controller (k8s.io/kubernetes pkg/controller/daemon): one pod of the template on
 * every node it should run on, as NodeShouldRunDaemonPod decides — the template's nodeSelector
 * and required node affinity match the node, and its tolerations (with those Kubernetes adds to
 * every daemon pod) tolerate the node's NoSchedule and NoExecute taints; a pod already there
 * stays while its NoExecute taints are tolerated. Each pod is pinned to its node by required
 * node affinity on the field metadata.name (a scheduler binds it). A template change rolls out
 * (RollingUpdate): old pods are deleted at most maxUnavailable at a time, counting the
 * unavailable ones, and recreated from the new template (label controller-revision-hash).
 * Status: desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, numberReady,
 * numberAvailable, numberUnavailable, updatedNumberScheduled, observedGeneration. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_DS_RETRY_NS KITE_NS_PER_SEC               /* a failed request: synced again after this, */
#define KITE_DS_RETRY_MAX_NS (10 * KITE_NS_PER_SEC)    /* doubling per failure to this */
#define KITE_DS_EXPECT_NS (300 * KITE_NS_PER_SEC)      /* a created pod not seen after this is forgotten */
#define KITE_DS_FAILED_BACKOFF_NS (10 * KITE_NS_PER_SEC) /* a failed daemon pod is replaced after this */

struct kite_dsctl_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_dsctl;
struct kite_dsctl *kite_dsctl_new(const struct kite_dsctl_options *o);
void kite_dsctl_free(struct kite_dsctl *c);

void kite_dsctl_ds_upsert(struct kite_dsctl *c, json_object *ds);
void kite_dsctl_ds_delete(struct kite_dsctl *c, json_object *ds);
void kite_dsctl_node_upsert(struct kite_dsctl *c, json_object *node);
void kite_dsctl_node_delete(struct kite_dsctl *c, json_object *node);
void kite_dsctl_pod_upsert(struct kite_dsctl *c, json_object *pod);
void kite_dsctl_pod_delete(struct kite_dsctl *c, json_object *pod);
int64_t kite_dsctl_step(struct kite_dsctl *c);
bool kite_dsctl_pending(struct kite_dsctl *c);

/* NodeShouldRunDaemonPod for a daemon pod (as the controller makes it: the template with the
 * daemon tolerations) on node: whether a new pod should be placed there, and whether one
 * already there should stay (*ret_continue; may be NULL). */
bool kite_ds_should_run(json_object *pod, json_object *node, bool *ret_continue);
/* The daemon pod the controller makes for node from ds's template (new object): daemon
 * tolerations added, pinned to node, owned by ds, labelled with hash. */
json_object *kite_ds_new_pod(json_object *ds, const char *node, const char *hash);
/* Whether pod's nodeSelector and required node affinity let it run on node
 * (kite_pod_node_affinity_matches, api/scheduling.h). */
bool kite_node_affinity_matches(json_object *pod, json_object *node);
/* The same knowing only the node's name: terms on labels are taken as met (is a pod pinned to
 * another node). */
bool kite_node_affinity_allows_name(json_object *pod, const char *node);

/* Adds the controller to g (framework.h). */
struct kite_ctl_group;
int kite_dsctl_run(struct kite_ctl_group *g);
