/* PodDisruptionBudget arithmetic, shared by the eviction subresource (the pod kind's guard,
 * run in the API server) and the disruption controller, so both count as upstream's
 * disruption controller and eviction REST do:
 *
 *   maxUnavailable set:          expected = pods, desired = max(0, expected - scaled(maxUnavailable))
 *   minAvailable an integer:     expected = pods, desired = minAvailable
 *   minAvailable a percentage:   expected = pods, desired = scaled(minAvailable)
 *   allowed = current - desired, 0 when negative or when no pod is expected
 *
 * scaled() rounds a percentage up (intstr.GetScaledValueFromIntOrPercent(v, total, true)).
 * Upstream's expected count for a percentage or maxUnavailable is the sum of the scale of the
 * pods' controllers; kite counts the matching pods (the same number at steady state, and kite
 * serves no scalable controllers yet). */
#pragma once
#include "api/registry.h"
#include "base/base.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

/* A pod named in status.disruptedPods counts as going away for this long after its eviction
 * (upstream's DeletionTimeout); after it, the controller drops it from the map. */
#define KITE_PDB_DELETION_TIMEOUT_NS (120LL * 1000000000LL)
/* status.disruptedPods entries past which evictions are refused (upstream's MaxDisruptedPodSize). */
#define KITE_PDB_MAX_DISRUPTED 2000

/* An IntOrString (an integer, or "N%") scaled against total, rounding up or down. 0, or
 * -EINVAL for a string that is not a percentage (as upstream: "invalid value for
 * IntOrString: invalid type: string is not a percentage"). */
int kite_pdb_scaled(json_object *v, int32_t total, bool round_up, int32_t *ret);
/* expectedPods and desiredHealthy of pdb for npods matching pods. 0 or -EINVAL. */
int kite_pdb_expected(json_object *pdb, int32_t npods, int32_t *ret_expected, int32_t *ret_desired);
/* disruptionsAllowed from the counts. */
int32_t kite_pdb_allowed(int32_t current, int32_t desired, int32_t expected);
/* pdb's spec.selector selects pod (same namespace; a null selector selects nothing, an empty
 * one every pod, as policy/v1). */
bool kite_pdb_selects(json_object *pdb, json_object *pod);
/* The pod's Ready condition is True (upstream's IsPodReady: what "healthy" means here). */
bool kite_pdb_pod_ready(json_object *pod);
/* Sets the DisruptionAllowed condition of status (True SufficientPods when
 * disruptionsAllowed > 0, else False InsufficientPods), its lastTransitionTime changed only
 * when its status changes (meta.SetStatusCondition). */
void kite_pdb_set_condition(json_object *status, int64_t now_ns);

/* Decides the eviction of pod given its namespace's budgets pdbs[0..n) (borrowed), as
 * upstream's EvictionREST.Create: terminal, pending and terminating pods go at once; a pod no
 * budget selects goes; two budgets: 500; an unready pod goes when its budget's
 * unhealthyPodEvictionPolicy is AlwaysAllow or the budget is met without it; else a budget
 * not yet observed at its generation or with no disruption allowed refuses (429, the
 * DisruptionBudget cause), and one that allows it is written back first with
 * disruptionsAllowed - 1 and the pod in disruptedPods (not for a dry run). now_ns is the
 * server's wall time. Fills *ret (registry.h; release with kite_guard_verdict_release). */
void kite_pdb_evict(json_object *pod, json_object *const *pdbs, size_t n, int64_t now_ns, bool dry_run,
                    struct kite_guard_verdict *ret);
