/* core/v1 Endpoints helpers shared by the kind's strategy (endpoints.c) and the endpoints
 * controller: upstream's RepackSubsets (pkg/api/v1/endpoints). */
#pragma once
#include <json-c/json.h>

/* subsets (a JSON array of EndpointSubset, borrowed) regrouped as RepackSubsets does: every
 * address (by ip and targetRef.uid) once per port set, an address not ready for a port in
 * notReadyAddresses for it (not ready wins over ready), the ports offered by exactly the same
 * addresses in one subset; a subset without ports keeps its addresses (headless Services).
 * Addresses sorted by ip then uid; ports by name, port, protocol; subsets by their ports, then
 * addresses (upstream sorts the last two by a hash of their Go values: the grouping is the same,
 * the order may differ). A new array. */
json_object *kite_endpoints_repack(json_object *subsets);
