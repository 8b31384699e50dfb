/* The node controllers (and the disruption controller, which shares their pod informer) as
 * kube-controller-manager runs them: one shared informer per
 * resource (nodes feed both the node lifecycle and the taint eviction controllers, node
 * Leases the first, pods the second) and a runner thread per controller that steps its core
 * when an observation leaves work or its next deadline comes, and otherwise sleeps on a
 * condition variable (no polling). */
#pragma once
#include "controllers/controllers.h"
#include "controllers/disruption.h"
#include "controllers/nodecleanup.h"
#include "controllers/nodelifecycle.h"
#include "controllers/podgc.h"
#include "controllers/tainteviction.h"

struct kite_ctlmgr_options {
    struct kite_client *client;   /* borrowed */
    struct kite_nlc_options nlc;  /* client and clock are taken from here */
    struct kite_podgc_options podgc; /* its threshold and orphan delay */
    int64_t node_cleanup_after_ns; /* > 0: delete Nodes Unknown this long (nodecleanup.h) */
    unsigned off;                  /* KITE_CTL_* bits of controllers not to run (--controllers) */
};
struct kite_ctlmgr;
int kite_ctlmgr_start(const struct kite_ctlmgr_options *o, struct kite_ctlmgr **ret);
/* Stops the informers, then the runners. NULL is a no-op. */
void kite_ctlmgr_stop(struct kite_ctlmgr *m);
