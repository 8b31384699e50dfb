/* A pod's effective cpu and memory requests, as upstream's k8s.io/component-helpers/resource
 * PodRequests: the scheduler's fit and the node agent's admission judge a pod by the same sum. */
#pragma once
#include "base/base.h"

#include <json-c/json.h>

/* cpu in millicores, memory in milli-bytes (the Quantity's exact value; round up for bytes) */
struct kite_pod_requests {
    int64_t cpu_m, mem_m;
};

/* The sum of the containers' requests; a sidecar (an init container with restartPolicy Always)
 * adds to that sum and runs beside every init container after it; the result is the larger of
 * that sum and the largest init-time need, plus spec.overhead. nonzero: a container that
 * requests no cpu (memory) counts 100m (200Mi), as the scheduler's scoring does (pods NULL, or
 * without a spec, request nothing). Requests only: the API defaults them from limits. Sums
 * saturate at INT64_MAX (a huge request fills any node). */
void kite_pod_requests(json_object *pod, bool nonzero, struct kite_pod_requests *ret);
