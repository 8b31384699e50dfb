/* The EndpointSlice controller, as kube-controller-manager's: every Service with a selector
 * gets EndpointSlices (discovery.k8s.io/v1) listing the addresses of the pods it selects, with
 * their readiness, node, zone and ports, at most KITE_EPS_MAX_PER_SLICE endpoints a slice.
 *
 * The reconcile is a pure function of a Service, the pods of its namespace and the slices the
 * controller manages for it (endpointslice.c); the controller around it (endpointslice_ctl.c)
 * keeps those from informers on services, pods, endpointslices and nodes and reconciles a
 * Service whenever one of them changes. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_EPS_MAX_PER_SLICE 100       /* upstream's --max-endpoints-per-slice default */
#define KITE_EPS_RETRY_MAX_S 30          /* a failed write is retried after 1 s doubling to this */
#define KITE_EPS_MANAGED_BY "endpointslice-controller.k8s.io"
#define KITE_EPS_LABEL_MANAGED_BY "endpointslice.kubernetes.io/managed-by"
#define KITE_EPS_LABEL_SERVICE_NAME "kubernetes.io/service-name"
#define KITE_EPS_LABEL_HEADLESS "service.kubernetes.io/headless"
#define KITE_EPS_LABEL_ZONE "topology.kubernetes.io/zone"

/* ---- what an endpoint says (staging/src/k8s.io/endpointslice/utils.go podToEndpoint) ---- */

struct kite_eps_conditions {
    bool ready, serving, terminating;
};
/* ShouldPodBeInEndpoints with terminating pods included: an address, and not in a phase its
 * restart policy makes final. */
bool kite_eps_pod_included(json_object *pod);
/* serving = the pod's Ready condition is True; terminating = it is being deleted; ready =
 * publishNotReadyAddresses, or serving and not terminating. */
struct kite_eps_conditions kite_eps_conditions(json_object *pod, bool publish_not_ready);
/* The endpoint of pod for svc (zone: of the pod's node, NULL when unknown): a new object. */
json_object *kite_eps_endpoint(json_object *svc, json_object *pod, const char *zone);
/* The ports pod serves for svc's ports (named target ports resolved from its containers'
 * ports with the same protocol; a port the pod does not have is left out): a new array. */
json_object *kite_eps_ports(json_object *svc, json_object *pod);
/* A Service's selector as EndpointSlices follow it (a non-empty map), or NULL. */
json_object *kite_eps_selector(json_object *svc);
/* The pod's IPv4 address: status.podIP, else the first of status.podIPs ("" when none). */
const char *kite_eps_pod_ip(json_object *pod);
/* The Service's spec.publishNotReadyAddresses. */
bool kite_eps_publish_not_ready(json_object *svc);
/* Every key=value of selector is among labels. */
bool kite_eps_selects(json_object *selector, json_object *labels);

/* ---- the reconcile --------------------------------------------------------------------------- */

/* What the reconcile of one Service asks for: slices to create (POST, generateName), to update
 * (PUT of the whole slice, carrying its resourceVersion) and to delete (names). */
struct kite_eps_plan {
    json_object **create;
    size_t n_create;
    json_object **update;
    size_t n_update;
    char **del;
    size_t n_del;
};
void kite_eps_plan_release(struct kite_eps_plan *p);

/* Reconciles svc against the pods of its namespace (all of them; the selector is applied here)
 * and the slices the controller manages for it (borrowed), as upstream's reconciler does with
 * least churn: an endpoint stays in its slice and is changed in place, new endpoints fill the
 * slices being written anyway first, then those with room, then new slices; slices whose port
 * set no longer exists, or that end empty, are deleted; a Service with no endpoints keeps one
 * empty placeholder slice. zone(ud, node) gives a node's zone (NULL: none). max: endpoints a
 * slice holds at most. svc NULL (deleted) or without a selector: every slice is deleted. */
void kite_eps_reconcile(json_object *svc, json_object *const *pods, size_t n_pods, json_object *const *slices,
                        size_t n_slices, const char *(*zone)(void *ud, const char *node), void *ud, size_t max,
                        struct kite_eps_plan *out);

/* Makes the plan's writes in namespace ns: creates, updates, then deletes. written(ud, slice)
 * hears each slice as the server answered a write of it, deleted(ud, ns, name) each slice gone
 * (either may be NULL). Returns 0, or the first failure (-EEXIST: a conflict). */
int kite_eps_apply(struct kite_client *client, const char *ns, const struct kite_eps_plan *p,
                   void (*written)(void *ud, json_object *slice), void (*deleted)(void *ud, const char *ns, const char *name),
                   void *ud);

/* ---- the controller -------------------------------------------------------------------------- */

struct kite_epsctl;
struct kite_epsctl_options {
    struct kite_client *client; /* borrowed: must outlive the controller */
    struct kite_clock *clock;   /* NULL = real */
    size_t max_per_slice;       /* 0 = KITE_EPS_MAX_PER_SLICE */
};
/* Adds the controller to g (framework.h); o may be NULL, its client and clock are g's. */
struct kite_ctl_group;
int kite_epsctl_run(struct kite_ctl_group *g, const struct kite_epsctl_options *o);
