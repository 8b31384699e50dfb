/* The divergence report: each way a machine and its Node object drift apart is one state,
 * named with its evidence (`kite nodes`, /metrics kite_node_state, events on the Node). A
 * node is in exactly one state; the first that applies, in the order of the enum, wins (the
 * most pressing first). The facts come from the API objects (Node, its Lease, its pods) and
 * from what the API server saw of the node's identity (system:node:NAME): only the API
 * server sees a credential calling while its Node does not exist. */
#pragma once
#include "base/buf.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

enum kite_node_state {
    KITE_NODE_ORPHAN_MACHINE, /* no Node, but its identity calls the API server */
    KITE_NODE_STALE_OBJECT,   /* Ready Unknown longer than the stale threshold: decommissioned, still present */
    KITE_NODE_NEVER_REPORTED, /* no Ready condition, or marked NodeStatusNeverUpdated */
    KITE_NODE_UNREACHABLE,    /* Ready Unknown: lease and status stale, the machine may still run */
    KITE_NODE_LEASE_EXPIRED,  /* its lease expired past the grace period, and no controller marked it Unknown */
    KITE_NODE_NOT_READY,      /* Ready False: the agent says so, with its reason */
    KITE_NODE_REREGISTERED,   /* deleted, and created again by the agent that kept running */
    KITE_NODE_DRAINING,       /* cordoned with pods going away */
    KITE_NODE_CORDONED,       /* spec.unschedulable */
    KITE_NODE_HEALTHY,        /* Ready True, schedulable */
    KITE_NODE_STATES,
    KITE_NODE_NONE = -1       /* nothing to report (no Node and no recent call) */
};

/* The state's name as reported ("OrphanMachine"). */
const char *kite_node_state_name(enum kite_node_state s);

struct kite_node_facts {
    json_object *node;       /* borrowed; NULL when there is no Node object */
    json_object *lease;      /* its Lease in kube-node-lease (borrowed) or NULL */
    int64_t seen_first_ns;   /* wall: the identity's first request to this server; 0: never seen */
    int64_t seen_last_ns;    /* wall: its latest request */
    const char *seen_what;   /* "PATCH /apis/coordination.k8s.io/..." of the latest; may be NULL */
    size_t pods, terminating; /* pods bound to it, and those of them being deleted */
    int64_t recreated_ns;    /* wall: when the server saw its uid change while the identity kept
                                calling (0: not seen) */
    int64_t renewed_ns;      /* wall, on the server's clock: when it saw the lease's current
                                renewTime first (0: no lease, or not judged) */
    int64_t refused_ns;      /* wall: the latest refused eviction of one of its pods (0: none) */
    const char *refused_pod; /* "default/web-1"; may be NULL */
    const char *refused_why; /* "429: Cannot evict pod as it would violate ..."; may be NULL */
};

struct kite_node_thresholds {
    int64_t stale_ns;         /* Unknown this long: StaleObject */
    int64_t orphan_window_ns; /* a call this recent, with no Node: OrphanMachine */
    int64_t rereg_window_ns;  /* a re-registration is reported this long */
    int64_t rereg_slack_ns;   /* a Node created this long after the identity's first call was re-created */
    int64_t grace_ns;         /* a lease unrenewed this long past its renewal (or its duration, if
                                 longer) has expired: the node lifecycle controller's grace period */
    int64_t drain_window_ns;  /* a cordoned node whose pod's eviction was refused this recently drains */
};
#define KITE_NODE_STALE_DEFAULT_NS (3600LL * 1000000000LL)
#define KITE_NODE_ORPHAN_WINDOW_NS (60LL * 1000000000LL)
#define KITE_NODE_REREG_WINDOW_NS (600LL * 1000000000LL)
#define KITE_NODE_REREG_SLACK_NS (10LL * 1000000000LL)
#define KITE_NODE_GRACE_DEFAULT_NS (50LL * 1000000000LL) /* --node-monitor-grace-period, kube-controller-manager's default */
#define KITE_NODE_DRAIN_WINDOW_NS (30LL * 1000000000LL) /* kubectl drain retries a refused eviction every 5 s */

/* The state of one node at wall time now_ns, and its evidence appended to evidence (one line
 * of text, may be NULL). */
enum kite_node_state kite_node_classify(const struct kite_node_facts *f, int64_t now_ns,
                                        const struct kite_node_thresholds *t, struct kite_buf *evidence);
/* The earliest wall time after now_ns at which kite_node_classify could answer differently for
 * the same facts (a threshold of t crossed by time alone), or 0 when none can: a node's state is
 * judged again then, not at every pass. */
int64_t kite_node_next_change(const struct kite_node_facts *f, int64_t now_ns, const struct kite_node_thresholds *t);
