/* The replication controller (upstream's replicationcontroller-controller): v1
 * ReplicationControllers kept by the ReplicaSet controller's core (replicaset.h) run for that
 * kind, on informers of its own for pods and ReplicationControllers and a runner (loop.h). */
#pragma once
#include "client/client.h"

struct kite_replication_options {
    struct kite_client *client; /* borrowed */
};
struct kite_replication;
int kite_replication_start(const struct kite_replication_options *o, struct kite_replication **ret);
/* Stops the runner and the informers. NULL is a no-op. */
void kite_replication_stop(struct kite_replication *r);
