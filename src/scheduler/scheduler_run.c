/* The scheduler on the framework (scheduler.h, framework.h): nodes and pods feed its core from
 * the shared informers; its runner steps it when an observation leaves work or the earliest
 * back-off ends (no polling), once both caches have synced. */
#include "framework/framework.h"
#include "scheduler/scheduler.h"

KITE_CTL_FEED(kite_sched_node_upsert, struct kite_sched)
KITE_CTL_FEED(kite_sched_node_delete, struct kite_sched)
KITE_CTL_FEED(kite_sched_pod_upsert, struct kite_sched)
KITE_CTL_FEED(kite_sched_pod_delete, struct kite_sched)
KITE_CTL_CORE(kite_sched, struct kite_sched)

int kite_sched_run(struct kite_ctl_group *g, const struct kite_sched_options *o) {
    struct kite_sched_options so = *o;
    so.client = kite_ctl_group_client(g), so.clock = kite_ctl_group_clock(g);
    /* what scheduling reads of a Node (the controllers' cut and the images, for image locality) */
    static const char *const node_members[] = {"metadata.uid", "metadata.labels", "metadata.deletionTimestamp",
                                               "spec", "status.conditions", "status.allocatable", "status.capacity",
                                               "status.images", NULL};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/nodes", .upsert = kite_sched_node_upsert_feed, .del = kite_sched_node_delete_feed,
         .project = node_members, .transform = kite_sched_node_transform},
        {.path = "/api/v1/pods", .upsert = kite_sched_pod_upsert_feed, .del = kite_sched_pod_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "scheduler", .step = kite_sched_step_core, .pending = kite_sched_pending_core,
                                 .free = kite_sched_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_sched_new(&so));
}
