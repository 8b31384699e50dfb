/* The taint eviction controller (Kubernetes' TaintEvictionController, formerly the taint
 * manager): a pod on a node with NoExecute taints it does not tolerate is deleted at once; one
 * that tolerates them all for a while (tolerationSeconds; the DefaultTolerationSeconds
 * admission plugin gives every pod 300 s for not-ready and unreachable) is deleted when the
 * shortest of those runs out, counted from when the controller first saw it due. Before the
 * delete, a DisruptionTarget condition (reason DeletionByTaintManager) is patched into the
 * pod's status. A pending deletion is cancelled when the taints go, the node goes, or the
 * pod's tolerations come to cover them for good. Each pending deletion is a timer in a
 * min-heap. Like the node lifecycle core, it is driven by observations and kite_tec_step, and
 * locks on every call. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_TEC_RETRIES 5                     /* a failed deletion is tried this often... */
#define KITE_TEC_RETRY_NS KITE_NS_PER_SEC       /* ...this far apart */
#define KITE_TEC_IDLE_NS (60 * KITE_NS_PER_SEC) /* longest step interval with nothing due */

struct kite_tec_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_tec;
struct kite_tec *kite_tec_new(const struct kite_tec_options *o);
void kite_tec_free(struct kite_tec *t);

void kite_tec_node_upsert(struct kite_tec *t, json_object *node);
void kite_tec_node_delete(struct kite_tec *t, json_object *node);
void kite_tec_pod_upsert(struct kite_tec *t, json_object *pod);
void kite_tec_pod_delete(struct kite_tec *t, json_object *pod);
/* Evicts the pods due now; returns ns until the next is due. */
int64_t kite_tec_step(struct kite_tec *t);
bool kite_tec_pending(struct kite_tec *t);
/* ns until pod ns/name is evicted, or -1 when none is scheduled (tests). */
int64_t kite_tec_scheduled(struct kite_tec *t, const char *ns, const char *name);

/* Whether tolerations (a pod's spec.tolerations; borrowed, may be NULL) tolerate every taint
 * of taints (an array of NoExecute taints): -EPERM when one is not tolerated, else 0 with
 * *ret_s the shortest tolerationSeconds of the tolerations used (first match per taint, as
 * Kubernetes' GetMatchingTolerations), 0 when one is <= 0, -1 when none has a limit. */
int kite_tec_toleration_seconds(json_object *taints, json_object *tolerations, int64_t *ret_s);

struct kite_ctl_group;
/* Adds the controller to g (framework.h). */
int kite_tec_run(struct kite_ctl_group *g);
