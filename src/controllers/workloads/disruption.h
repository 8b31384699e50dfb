/* The disruption controller (kube-controller-manager's): keeps every PodDisruptionBudget's
 * status current from the pods its selector matches (api/disruption.h has the arithmetic):
 * currentHealthy (Ready pods not being deleted and not recently evicted), desiredHealthy,
 * expectedPods, disruptionsAllowed, the DisruptionAllowed condition and observedGeneration,
 * and disruptedPods pruned of pods that are gone or being deleted, or whose eviction is older
 * than KITE_PDB_DELETION_TIMEOUT_NS (a Warning NotDeleted event on such a pod). A budget is
 * recomputed when it or a pod of its namespace changes, and when an entry of its
 * disruptedPods times out; its status is written (PUT .../status) only when it differs.
 * Driven like the node cores: observations and kite_dc_step, locking on every call. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_DC_IDLE_NS (60 * KITE_NS_PER_SEC) /* longest step interval with nothing due */

struct kite_dc_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_dc;
struct kite_dc *kite_dc_new(const struct kite_dc_options *o);
void kite_dc_free(struct kite_dc *d);

void kite_dc_pod_upsert(struct kite_dc *d, json_object *pod);
void kite_dc_pod_delete(struct kite_dc *d, json_object *pod);
void kite_dc_pdb_upsert(struct kite_dc *d, json_object *pdb);
void kite_dc_pdb_delete(struct kite_dc *d, json_object *pdb);
/* Writes the statuses that changed; returns ns until the next disruptedPods entry times out. */
int64_t kite_dc_step(struct kite_dc *d);
bool kite_dc_pending(struct kite_dc *d);

/* The status pdb (borrowed) should have given pods[0..n) (borrowed; any namespace, those its
 * selector matches are counted) at wall time now_ns: a new object. *ret_recheck_ns (may be
 * NULL) is the wall time an entry of its disruptedPods times out, or 0. NULL when its
 * minAvailable/maxUnavailable cannot be read. */
json_object *kite_dc_status(json_object *pdb, json_object *const *pods, size_t n, int64_t now_ns, int64_t *ret_recheck_ns);

struct kite_ctl_group;
/* Adds the controller to g (framework.h). */
int kite_dc_run(struct kite_ctl_group *g);
