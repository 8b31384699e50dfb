/* The workload controllers as kube-controller-manager runs them: shared informers for pods,
 * ReplicaSets and Deployments feed the ReplicaSet controller, the deployment controller and
 * the garbage collector, each stepped by its own runner thread when an observation leaves work
 * or its next deadline comes (no polling). */
#pragma once
#include "controllers/controllers.h"
#include "base/clock.h"
#include "client/client.h"

struct kite_workloads_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
    unsigned off;               /* KITE_CTL_* bits of controllers not to run (--controllers) */
};
struct kite_workloads;
int kite_workloads_start(const struct kite_workloads_options *o, struct kite_workloads **ret);
/* Stops the informers, then the runners. NULL is a no-op. */
void kite_workloads_stop(struct kite_workloads *w);
