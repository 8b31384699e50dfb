/* The agent's resource metrics: `GET /metrics/resource`, the kubelet's endpoint of the same name
 * (Prometheus text format 0.0.4, the stable series metrics-server scrapes), and `GET
 * /stats/summary`, the kubelet's Summary API (its node, pods, containers' cpu and memory), served on
 * the agent's HTTPS endpoint beside the logs. */
#pragma once
#include <stdint.h>

#include "agent/runtime/cgstats.h"
#include "base/buf.h"

/* One running container's usage as measured at ts_ns (wall clock). Strings borrowed. */
struct kite_ctr_sample {
    const char *ns, *pod, *uid, *name;
    int64_t started_ns;   /* wall clock */
    int64_t ts_ns;
    struct kite_usage u;
};

/* The Prometheus text of /metrics/resource: node_cpu_usage_seconds_total,
 * node_memory_working_set_bytes, container_* and pod_* (a pod's values: the sum of its running
 * containers'), container_start_time_seconds and resource_scrape_error, each sample with its
 * timestamp in milliseconds, as the kubelet writes them. node may be NULL (not measured). */
void kite_resource_metrics_render(const struct kite_usage *node, int64_t node_ts_ns, const struct kite_ctr_sample *c,
                                  size_t n, bool scrape_error, struct kite_buf *out);
/* The Summary API's JSON (stats/v1alpha1 Summary): node (nodeName, startTime, cpu, memory), pods
 * (podRef, startTime, containers, cpu, memory). usageNanoCores is left out: the kubelet gets it
 * from cAdvisor's history, which the agent does not keep. */
void kite_stats_summary_render(const char *node_name, int64_t boot_ns, const struct kite_usage *node, int64_t node_ts_ns,
                               const struct kite_ctr_sample *c, size_t n, struct kite_buf *out);
