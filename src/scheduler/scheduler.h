/* The scheduler (kube-scheduler's default profile, the parts kite implements): every pod for
 * this scheduler that no node runs yet is placed on a node that passes every filter and scores
 * best, and bound there with a POST to its pods/binding subresource.
 *
 * Filters, in upstream's plugin order; a node fails at the first that rejects it, with that
 * filter's reasons:
 *   NodeUnschedulable  spec.unschedulable (unless the pod tolerates node.kubernetes.io/unschedulable)
 *   TaintToleration    a NoSchedule or NoExecute taint the pod does not tolerate
 *   NodeReady          kite's: the Ready condition is not True (unless the pod tolerates the
 *                      not-ready or unreachable taint the node lifecycle controller would add)
 *   NodeAffinity       spec.nodeSelector and required node affinity
 *   NodeResourcesFit   allocatable minus the requests of the node's pods: pods, cpu, memory
 * Scores: NodeResourcesFit's LeastAllocated (cpu and memory, non-zero requests) and
 * ImageLocality (status.images sizes, scaled by how many nodes have the image), weight 1 each;
 * ties are broken at random. A pod no node fits gets the FailedScheduling event and the
 * PodScheduled=False condition (reason Unschedulable) with upstream's message, e.g.
 *   0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint
 *   {node.kubernetes.io/not-ready: }. preemption: 0/3 nodes are available: 3 Preemption is not
 *   helpful for scheduling.
 * and waits: it is tried again when a node or an assigned pod changes in a way that can make
 * room, after its back-off (KITE_SCHED_BACKOFF_INITIAL_NS doubling to ..._MAX_NS, upstream's
 * podInitialBackoff/podMaxBackoff), and at the latest after KITE_SCHED_UNSCHED_MAX_NS (upstream's
 * podMaxInUnschedulablePodsDuration). No polling: a timer heap holds the back-offs.
 *
 * Like the other controller cores it is driven by observations (the informers' handlers) and
 * kite_sched_step, and locks on every call. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_SCHED_DEFAULT_NAME "default-scheduler"
#define KITE_SCHED_BACKOFF_INITIAL_NS (1 * KITE_NS_PER_SEC)
#define KITE_SCHED_BACKOFF_MAX_NS (10 * KITE_NS_PER_SEC)
#define KITE_SCHED_UNSCHED_MAX_NS (300 * KITE_NS_PER_SEC)
#define KITE_SCHED_IDLE_NS (60 * KITE_NS_PER_SEC) /* longest step interval with nothing due */
/* The largest request or allocatable the scheduler counts, in millicores or whole units
 * (2^52: 4 PiB of memory, 4.5e9 cores); a larger one ("10Pi", past int64 milli-units too)
 * counts as this, which no node's allocatable exceeds. */
#define KITE_SCHED_QUANTITY_MAX (INT64_C(1) << 52)
/* Reasons a filter gives for one node (NodeResourcesFit gives up to three). */
#define KITE_SCHED_MAX_REASONS 4
/* Longest message kept in an event or condition (upstream truncates notes at 1 KiB). */
#define KITE_SCHED_MAX_MESSAGE 1024

struct kite_sched_options {
    struct kite_client *client;  /* borrowed */
    struct kite_clock *clock;    /* NULL = real */
    const char *scheduler_name;  /* pods whose spec.schedulerName is this; NULL = default-scheduler */
    uint64_t seed;               /* tie-break randomness; 0 = from the clock */
};
struct kite_sched;
struct kite_sched *kite_sched_new(const struct kite_sched_options *o);
void kite_sched_free(struct kite_sched *s);

/* The scheduler's form of a Node (its informer's transform; a new reference): the same object
 * but for status.images, which becomes status.imageSizes, one string of "SIZE NAME\n" lines. A
 * Node's ~50 images are ~150 json-c objects (~60 KB a Node: 3 GB held at 50,000 Nodes, and most
 * of a restarted scheduler's time faulting that memory in); the string is a few KB, and what
 * image locality reads of it is the size of each name. */
json_object *kite_sched_node_transform(json_object *node);
/* node: in the form above, or as the server sends it (transformed here). */
void kite_sched_node_upsert(struct kite_sched *s, json_object *node);
void kite_sched_node_delete(struct kite_sched *s, json_object *node);
void kite_sched_pod_upsert(struct kite_sched *s, json_object *pod);
void kite_sched_pod_delete(struct kite_sched *s, json_object *pod);
/* Schedules every pod due now (binding, events, conditions); returns ns until the next back-off ends. */
int64_t kite_sched_step(struct kite_sched *s);
bool kite_sched_pending(struct kite_sched *s);
/* Where pod ns/name waits (tests): "active", "backoff", "unschedulable", "assumed", "bound" or NULL. */
const char *kite_sched_pod_state(struct kite_sched *s, const char *ns, const char *name);

/* ---- the algorithm, without state (scheduler_algo.c; unit tests drive it directly) ---- */

/* A pod's requests as upstream's resource.PodRequests: containers summed, init containers by
 * the max rule (restartable ones, sidecars, add up), overhead added. cpu in milli-cores,
 * memory in bytes. nonzero: containers without a cpu/memory request count 100m / 200Mi (the
 * scheduler's non-zero defaults, used for scoring). */
struct kite_sched_req {
    int64_t cpu, mem;
};
void kite_sched_pod_requests(json_object *pod, bool nonzero, struct kite_sched_req *ret);

/* What the filters and scores see of a node. */
struct kite_sched_nodeinfo {
    json_object *node;                        /* borrowed */
    int64_t alloc_cpu, alloc_mem, alloc_pods; /* status.allocatable (capacity when absent) */
    struct kite_sched_req requested, nonzero; /* sums over the node's pods */
    int64_t npods;
};
void kite_sched_nodeinfo_init(struct kite_sched_nodeinfo *ni, json_object *node);

/* One node's verdict: 0 passes; otherwise the failing filter's reasons (owned). */
struct kite_sched_verdict {
    const char *filter; /* NULL = passes */
    bool unresolvable;  /* UnschedulableAndUnresolvable: preemption cannot help */
    char *reasons[KITE_SCHED_MAX_REASONS];
    size_t n;
};
void kite_sched_verdict_release(struct kite_sched_verdict *v);
/* Runs the filters for pod on ni; req is the pod's requests (kite_sched_pod_requests, not non-zero). */
void kite_sched_filter(json_object *pod, const struct kite_sched_req *req, const struct kite_sched_nodeinfo *ni,
                       struct kite_sched_verdict *ret);
/* NodeResourcesFit alone (the preemption dry run re-runs it without the lower-priority pods). */
void kite_sched_fit(const struct kite_sched_req *req, const struct kite_sched_nodeinfo *ni, struct kite_sched_verdict *ret);

/* Scores (0..100 each). */
int64_t kite_sched_score_least_allocated(const struct kite_sched_req *pod_nonzero, const struct kite_sched_nodeinfo *ni);
/* sum_image_size: sum over the pod's containers of size x (nodes with the image / all nodes),
 * as upstream's sumImageScores; n_containers counts init and regular containers. */
int64_t kite_sched_score_image_locality(int64_t sum_image_size, size_t n_containers);
/* "busybox" -> "busybox:latest"; a name with a tag or digest is kept (malloc'ed). */
char *kite_sched_normalized_image(const char *name);

/* The FitError message: "0/N nodes are available: <histogram>." with the reasons counted over
 * the nodes, "%d %s" strings sorted as strings, then " preemption: ..." when post (may be NULL)
 * is given. Malloc'ed. */
char *kite_sched_fit_message(size_t n_nodes, const struct kite_sched_verdict *v, size_t n, const char *post);

/* Feasible nodes a pod's search looks for before it scores them (upstream's
 * numFeasibleNodesToFind, percentageOfNodesToScore unset): every node of fewer than
 * KITE_SCHED_MIN_FEASIBLE; else 50% less 1% per 125 nodes, at least 5% and
 * KITE_SCHED_MIN_FEASIBLE. Each search starts where the last one stopped, so that the nodes
 * take turns; a pod no node fits has every node filtered, so its message counts them all. */
#define KITE_SCHED_MIN_FEASIBLE 100
#define KITE_SCHED_MIN_FEASIBLE_PERCENT 5
size_t kite_sched_feasible_to_find(size_t n_nodes);

/* ---- the scheduler as it runs (scheduler_run.c): informers on nodes and pods feeding the
 * core, and a thread that steps it when there is work or a back-off ends ---- */
/* Adds the scheduler to g (framework.h); o's client and clock are g's. */
struct kite_ctl_group;
int kite_sched_run(struct kite_ctl_group *g, const struct kite_sched_options *o);
