/* The rows of the resource table, one per kind file in this folder. */
#pragma once
#include "api/registry.h"

extern const struct kite_resource kite_kind_namespace;
extern const struct kite_resource kite_kind_node;
extern const struct kite_resource kite_kind_pod;
extern const struct kite_resource kite_kind_event;    /* core/v1 */
extern const struct kite_resource kite_kind_event_v1; /* events.k8s.io/v1, stored as core/v1 */
extern const struct kite_resource kite_kind_lease;
extern const struct kite_resource kite_kind_crd;
extern const struct kite_resource kite_kind_configmap;
extern const struct kite_resource kite_kind_secret;
extern const struct kite_resource kite_kind_serviceaccount;
extern const struct kite_resource kite_kind_csr;
/* never stored: access reviews (authorization.k8s.io/v1) and SelfSubjectReview (authentication.k8s.io/v1) */
extern const struct kite_resource kite_kind_selfsubjectaccessreview;
extern const struct kite_resource kite_kind_subjectaccessreview;
extern const struct kite_resource kite_kind_localsubjectaccessreview;
extern const struct kite_resource kite_kind_selfsubjectrulesreview;
extern const struct kite_resource kite_kind_selfsubjectreview;
extern const struct kite_resource kite_kind_role;               /* rbac.authorization.k8s.io/v1 */
extern const struct kite_resource kite_kind_clusterrole;
extern const struct kite_resource kite_kind_rolebinding;
extern const struct kite_resource kite_kind_clusterrolebinding;
extern const struct kite_resource kite_kind_pdb;                /* policy/v1 */
extern const struct kite_resource kite_kind_replicaset; /* apps/v1 */
extern const struct kite_resource kite_kind_replicationcontroller; /* v1 */
extern const struct kite_resource kite_kind_statefulset; /* apps/v1 */
extern const struct kite_resource kite_kind_controllerrevision; /* apps/v1 */
extern const struct kite_resource kite_kind_hpa, kite_kind_hpa_v1; /* autoscaling/v2, v1 */
extern const struct kite_resource kite_kind_cronjob; /* batch/v1 */
extern const struct kite_resource kite_kind_deployment;
extern const struct kite_resource kite_kind_job;       /* batch/v1 */
extern const struct kite_resource kite_kind_daemonset; /* apps/v1 */
extern const struct kite_resource kite_kind_service;       /* core/v1 */
extern const struct kite_resource kite_kind_endpoints;     /* core/v1 */
extern const struct kite_resource kite_kind_endpointslice; /* discovery.k8s.io/v1 */
