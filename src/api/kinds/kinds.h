/* The rows of the resource table, one per kind file in this folder. */
#pragma once
#include "api/registry.h"

extern const struct kite_resource kite_kind_namespace;
extern const struct kite_resource kite_kind_node;
extern const struct kite_resource kite_kind_pod;
extern const struct kite_resource kite_kind_event;    /* core/v1 */
extern const struct kite_resource kite_kind_event_v1; /* events.k8s.io/v1, stored as core/v1 */
extern const struct kite_resource kite_kind_lease;
extern const struct kite_resource kite_kind_configmap;
extern const struct kite_resource kite_kind_secret;
extern const struct kite_resource kite_kind_serviceaccount;
extern const struct kite_resource kite_kind_csr;
/* Printers of kinds not served yet */
extern const struct kite_table_printer kite_endpointslice_printer;
