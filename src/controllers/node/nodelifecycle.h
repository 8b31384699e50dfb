/* The node lifecycle controller, as kube-controller-manager's (research §2), on the
 * controller's own clock:
 * - a node is alive while its Lease's spec.renewTime or its Ready condition's
 *   lastHeartbeatTime changes; each change observed sets the node's probe time to now, and the
 *   node's deadline (probe + grace, or startup grace from creation while it has no Ready
 *   condition) sits in a min-heap, so a renewal costs O(log nodes) and a node is marked when its
 *   deadline passes, not at the next sweep;
 * - a node past its deadline gets Ready, MemoryPressure, DiskPressure and PIDPressure Unknown
 *   (NodeStatusUnknown "Kubelet stopped posting node status.", or NodeStatusNeverUpdated "Kubelet
 *   never posted node status." for a condition it never posted), and when Ready leaves True
 *   its pods get Ready=False and a NodeNotReady event;
 * - NoSchedule taints mirror the conditions and spec.unschedulable at once; the NoExecute
 *   taints not-ready / unreachable go on through a rate-limited queue per zone whose rate
 *   follows the zone's state (Normal, PartialDisruption, FullDisruption), stop when every zone
 *   is fully disrupted (and are then taken off), and come off when the node is Ready again.
 * The core (kite_nlc_*) is driven by observations and kite_nlc_step, with no thread of its
 * own: kite_nlc_run puts it on the framework (framework.h), fed by shared informers. Thread-safe: every
 * call locks. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

/* kube-controller-manager's defaults (1.32+) */
#define KITE_NLC_GRACE_DEFAULT "50s"
#define KITE_NLC_STARTUP_GRACE_DEFAULT "60s"
#define KITE_NLC_PERIOD_DEFAULT "5s"
#define KITE_NLC_EVICTION_RATE 0.1
#define KITE_NLC_SECONDARY_RATE 0.01
#define KITE_NLC_UNHEALTHY_THRESHOLD 0.55
#define KITE_NLC_LARGE_CLUSTER 50
#define KITE_NLC_RETRY_NS KITE_NS_PER_SEC /* a failed write is tried again this much later */

#define KITE_NLC_ZONE_LABEL "topology.kubernetes.io/zone"
#define KITE_NLC_REGION_LABEL "topology.kubernetes.io/region"
#define KITE_NLC_EXCLUDE_LABEL "node.kubernetes.io/exclude-disruption"

enum kite_zone_state { KITE_ZONE_INITIAL, KITE_ZONE_NORMAL, KITE_ZONE_PARTIAL, KITE_ZONE_FULL };
extern const char *const kite_zone_state_names[];

struct kite_nlc_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
    int64_t grace_ns, startup_grace_ns, period_ns;
    double eviction_rate, secondary_rate, unhealthy_threshold;
    int64_t large_cluster;
};

struct kite_nlc;
struct kite_nlc *kite_nlc_new(const struct kite_nlc_options *o);
void kite_nlc_free(struct kite_nlc *n);

/* Observations (objects borrowed). */
void kite_nlc_node_upsert(struct kite_nlc *n, json_object *node);
void kite_nlc_node_delete(struct kite_nlc *n, json_object *node);
void kite_nlc_lease_upsert(struct kite_nlc *n, json_object *lease);
/* A pod that shows Ready=True on a node that is not Ready gets Ready=False too (a pod bound
 * or reported after the node went silent). */
void kite_nlc_pod_upsert(struct kite_nlc *n, json_object *pod);

/* Does what is due on the clock now (marks, taints, pods, events: requests through the
 * client, made without the lock) and returns ns until something is due next (at most the
 * monitor period). */
int64_t kite_nlc_step(struct kite_nlc *n);
/* True when an observation left work to do now (the runner's wake-up test). */
bool kite_nlc_pending(struct kite_nlc *n);

/* For tests and the divergence report: a zone's state ("" for nodes without zone labels,
 * else region + ":\0:" + zone as Kubernetes keys zones, here written "region:zone"), and its
 * NoExecute queue's rate. -ENOENT when no such zone. */
int kite_nlc_zone(struct kite_nlc *n, const char *zone, enum kite_zone_state *ret_state, double *ret_rate,
                  size_t *ret_queued);

struct kite_ctl_group;
#define KITE_NODE_LEASES_PATH "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
/* Adds the controller to g (framework.h); o's client and clock are g's. */
int kite_nlc_run(struct kite_ctl_group *g, const struct kite_nlc_options *o);
