/* The ReplicaSet controller (k8s.io/kubernetes pkg/controller/replicaset): keeps spec.replicas
 * active pods (not terminal, not being deleted) that the ReplicaSet controls, by its selector:
 * it creates them from the template (generateName "<rs>-", a controller ownerReference), adopts
 * orphan pods its selector matches and releases pods it no longer matches, and deletes the
 * surplus, worst first (getPodsToDelete's ranking: unscheduled, then pending, then not ready,
 * then most crowded node, most recently ready, most restarted, newest). Its status counts
 * replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (ready minReadySeconds) and
 * observedGeneration. Expectations, as upstream's: once it asked for creates or deletes, a
 * ReplicaSet is not scaled again until it has seen them (or KITE_RSC_EXPECTATIONS_TTL_S went
 * by), so a watch that lags never makes it create twice. A ReplicaSet whose pass failed is
 * synced again after its own back-off (the work queue's AddRateLimited: 5 ms doubling, reset by
 * a pass that succeeds), capped at KITE_RSC_RETRY_MAX_NS: a status write that lost to a newer
 * ReplicaSet (409) is a failure here, where upstream retries it inside the pass.
 * Driven like the taint eviction core: observations, then kite_rsc_step. Locks on every call. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_RSC_BURST 500                /* pods created or deleted per ReplicaSet per pass (burstReplicas) */
#define KITE_RSC_RETRY_MAX_NS (1 * KITE_NS_PER_SEC) /* longest back-off of a failed pass */
#define KITE_RSC_EXPECTATIONS_TTL_S 300   /* unmet expectations are given up after this */

/* The kind one instance keeps pods for: apps/v1 ReplicaSet, or v1 ReplicationController, whose
 * spec.selector is a map of labels (upstream runs the ReplicaSet controller over a conversion
 * for it, pkg/controller/replication; here the selector is read as matchLabels). */
struct kite_rsc_kind {
    const char *api_version, *kind; /* of the owner references it writes and follows */
    const char *prefix, *plural;    /* its collection: PREFIX/namespaces/NS/PLURAL */
    const char *component;          /* the events' source */
    bool map_selector;
};
extern const struct kite_rsc_kind KITE_RSC_REPLICASET, KITE_RSC_REPLICATIONCONTROLLER;

struct kite_rsc_options {
    struct kite_client *client;       /* borrowed */
    struct kite_clock *clock;         /* NULL = real */
    const struct kite_rsc_kind *kind; /* NULL = KITE_RSC_REPLICASET */
};
struct kite_rsc;
struct kite_rsc *kite_rsc_new(const struct kite_rsc_options *o);
void kite_rsc_free(struct kite_rsc *c);

void kite_rsc_pod_upsert(struct kite_rsc *c, json_object *pod);
void kite_rsc_pod_delete(struct kite_rsc *c, json_object *pod);
void kite_rsc_rs_upsert(struct kite_rsc *c, json_object *rs);
void kite_rsc_rs_delete(struct kite_rsc *c, json_object *rs);
/* Syncs the ReplicaSets due now; returns ns until the next is due (-1: none). */
int64_t kite_rsc_step(struct kite_rsc *c);
bool kite_rsc_pending(struct kite_rsc *c);

/* Orders pods (borrowed) so those to delete first come first (ActivePodsWithRanks). */
void kite_rsc_rank(json_object **pods, size_t n);

struct kite_ctl_group;
/* Adds the controller of kind (KITE_RSC_REPLICASET or KITE_RSC_REPLICATIONCONTROLLER) to g
 * (framework.h). */
int kite_rsc_run(struct kite_ctl_group *g, const struct kite_rsc_kind *kind);
