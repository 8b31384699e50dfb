/* The pod garbage collector (kube-controller-manager's PodGCController), driven by what the
 * informers show rather than a 20 s sweep:
 *   - orphaned pods: a pod bound to a Node that does not exist is deleted once the node has been
 *     missing for the orphan delay (upstream's 40 s quarantine) and a GET confirms it is gone,
 *     after a status patch to phase Failed with a DisruptionTarget condition (reason
 *     DeletionByPodGC, "PodGC: node no longer exists");
 *   - terminating pods on a node that is not Ready and has the node.kubernetes.io/out-of-service
 *     taint (non-graceful node shutdown) are marked Failed and force-deleted (grace 0);
 *   - terminating pods no node was ever given are force-deleted;
 *   - terminated pods (Succeeded, Failed) beyond the threshold are deleted, evicted ones first,
 *     then oldest first (upstream's byEvictionAndCreationTimestamp).
 * Each missing node's quarantine is a timer in a min-heap; pods are indexed by node. Driven by
 * observations and kite_podgc_step; locks on every call. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_PODGC_ORPHAN_DELAY_DEFAULT "40s"
#define KITE_PODGC_THRESHOLD_DEFAULT "12500"
#define KITE_PODGC_RETRY_NS (5 * KITE_NS_PER_SEC)  /* a failed node check or deletion is retried */
#define KITE_PODGC_IDLE_NS (60 * KITE_NS_PER_SEC)
#define KITE_PODGC_OUT_OF_SERVICE "node.kubernetes.io/out-of-service"

struct kite_podgc_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
    int64_t terminated_threshold; /* <= 0: terminated pods are never collected (as upstream) */
    int64_t orphan_delay_ns;      /* 0 = 40 s */
};
struct kite_podgc;
struct kite_podgc *kite_podgc_new(const struct kite_podgc_options *o);
void kite_podgc_free(struct kite_podgc *g);

void kite_podgc_node_upsert(struct kite_podgc *g, json_object *node);
void kite_podgc_node_delete(struct kite_podgc *g, json_object *node);
void kite_podgc_pod_upsert(struct kite_podgc *g, json_object *pod);
void kite_podgc_pod_delete(struct kite_podgc *g, json_object *pod);
/* Collects what is due now; returns ns until the next quarantine ends. */
int64_t kite_podgc_step(struct kite_podgc *g);
bool kite_podgc_pending(struct kite_podgc *g);

struct kite_ctl_group;
/* Adds the controller to g (framework.h); o's client and clock are g's. */
int kite_podgc_run(struct kite_ctl_group *g, const struct kite_podgc_options *o);
