/* The endpoints controller, as kube-controller-manager's `endpoint` controller
 * (pkg/controller/endpoint): every Service with a selector gets a core/v1 Endpoints of its
 * name listing the pods it selects, the ready ones in addresses and the others in
 * notReadyAddresses (all in addresses with publishNotReadyAddresses), each with the ports its
 * Service's target ports resolve to on that pod, regrouped by RepackSubsets
 * (api/kinds/endpoints.h). It carries the Service's labels (and service.kubernetes.io/headless
 * for a Service without a cluster IP) and the endpoints.kubernetes.io/last-change-trigger-time
 * annotation; it is deleted when its Service is. A Service without a selector (or of type
 * ExternalName) is left alone: its Endpoints are the user's.
 *
 * The reconcile is a pure function of a Service, the pods of its namespace and the current
 * Endpoints (endpoints.c); the controller around it (endpoints_ctl.c) keeps those from
 * informers on services, pods and endpoints. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_EPC_RETRY_MAX_S 30 /* a failed write is retried after 1 s doubling to this */
#define KITE_EPC_ANN_TRIGGER "endpoints.kubernetes.io/last-change-trigger-time"
#define KITE_EPC_LABEL_HEADLESS "service.kubernetes.io/headless"
#define KITE_EPC_ANN_OVER_CAPACITY "endpoints.kubernetes.io/over-capacity"
#define KITE_EPC_MAX_CAPACITY 1000 /* addresses an Endpoints holds (upstream's maxCapacity) */

/* The subsets svc's pods give (pods: all of its namespace, borrowed; the selector is applied
 * here): ShouldPodBeInEndpoints (an IP, not in a final phase, not terminating unless
 * publishNotReadyAddresses), repacked. A new array. */
json_object *kite_epc_subsets(json_object *svc, json_object *const *pods, size_t n_pods);

/* The trigger-time tracker (upstream's TriggerTimeTracker): *state (owned by the caller, NULL
 * at first) remembers the Ready condition's lastTransitionTime of each pod svc selected and the
 * Service's creationTimestamp at the last call; the answer is the earliest of those that
 * changed since (all of them on the first call), or "" when none did. out holds 40 bytes. */
void kite_epc_trigger_time(json_object **state, json_object *svc, json_object *const *pods, size_t n_pods, char out[40]);

/* truncateEndpoints: past KITE_EPC_MAX_CAPACITY addresses, cuts subsets (in place) to that
 * many, not-ready addresses first, each subset in proportion. True when it cut. */
bool kite_epc_truncate(json_object *subsets);

enum kite_epc_op { KITE_EPC_NONE, KITE_EPC_CREATE, KITE_EPC_UPDATE, KITE_EPC_DELETE };

/* What svc's Endpoints need: svc NULL (gone) with cur present and svc_gone (the Service was
 * seen deleted, or cur is a leftover the controller wrote): DELETE; a Service without a
 * selector or of type ExternalName: NONE; otherwise CREATE or UPDATE with *ret (a new object:
 * cur's copy, or a new one, with the subsets, the labels and trigger as the annotation, ""
 * removing it; endpoints.kubernetes.io/over-capacity: truncated when kite_epc_truncate cut
 * them) when the subsets, labels or that mark differ, else NONE. cur, svc and pods borrowed. */
enum kite_epc_op kite_epc_reconcile(json_object *svc, json_object *const *pods, size_t n_pods, json_object *cur,
                                    bool svc_gone, const char *trigger, json_object **ret);

/* Adds the controller to g (framework.h); its client and clock are g's. */
struct kite_ctl_group;
int kite_epc_run(struct kite_ctl_group *g);
