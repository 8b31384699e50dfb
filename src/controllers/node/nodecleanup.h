/* Stale Node cleanup, opt-in (--node-cleanup-after): a Node whose Ready condition has been
 * Unknown that long (since its lastTransitionTime, which the node lifecycle controller set on
 * its own clock) is deleted, with the uid it was judged by as a precondition, so a node that
 * re-registered meanwhile is left alone. What cloud controllers and autoscalers do for
 * machines that are gone; off by default, as in Kubernetes. A Normal DeletingNode event says
 * why. Driven like the node cores: observations and kite_ncc_step. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_NCC_IDLE_NS (60 * KITE_NS_PER_SEC)
#define KITE_NCC_RETRY_NS (5 * KITE_NS_PER_SEC) /* a failed delete is tried again this much later */

struct kite_ncc_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
    int64_t after_ns;           /* > 0 */
};
struct kite_ncc;
struct kite_ncc *kite_ncc_new(const struct kite_ncc_options *o);
void kite_ncc_free(struct kite_ncc *c);
void kite_ncc_node_upsert(struct kite_ncc *c, json_object *node);
void kite_ncc_node_delete(struct kite_ncc *c, json_object *node);
/* Deletes the nodes due; returns ns until the next is due. */
int64_t kite_ncc_step(struct kite_ncc *c);
bool kite_ncc_pending(struct kite_ncc *c);

struct kite_ctl_group;
/* Adds the controller to g (framework.h); o's client and clock are g's. */
int kite_ncc_run(struct kite_ctl_group *g, const struct kite_ncc_options *o);
