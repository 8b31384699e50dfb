/* Scheduling rules shared by the scheduler, the DaemonSet and the taint-eviction controllers, as
 * upstream's k8s.io/component-helpers/scheduling/corev1 and core/v1 Toleration.ToleratesTaint.
 * Every argument is borrowed JSON (a Toleration, a Taint, a NodeSelectorTerm...) and may be NULL. */
#pragma once
#include "base/base.h"

#include <json-c/json.h>

/* Toleration.ToleratesTaint: effect and key match when set on the toleration (an empty key
 * matches every key); operator "" or Equal compares values, Exists tolerates any value, any
 * other operator tolerates nothing. */
bool kite_toleration_tolerates(json_object *toleration, json_object *taint);
/* The first toleration of the array tolerating the taint, or NULL. */
json_object *kite_tolerations_find(json_object *tolerations, json_object *taint);
/* FindMatchingUntoleratedTaint: the first taint for which filter (NULL: every taint) holds and
 * no toleration tolerates it, or NULL. */
json_object *kite_find_untolerated_taint(json_object *taints, json_object *tolerations, bool (*filter)(json_object *taint));
/* TolerationsTolerateTaint for a taint of that key and effect and no value (the scheduler's
 * NodeUnschedulable filter asks it of node.kubernetes.io/unschedulable:NoSchedule). */
bool kite_tolerations_tolerate(json_object *tolerations, const char *key, const char *effect);
/* The DefaultTolerationSeconds admission plugin's own rule: some toleration's key is key or
 * empty and its effect is effect or empty, whatever its operator and value say. */
bool kite_tolerations_cover(json_object *tolerations, const char *key, const char *effect);

/* One NodeSelectorRequirement against a label's value (NULL: the label is absent): In, NotIn
 * (a non-empty values list), Exists, DoesNotExist (no values), Gt, Lt (exactly one value; the
 * value and the label both parse strictly as int64, "12abc" is no number). A requirement that
 * breaks those rules matches nothing, as upstream's term does on a parse error. */
bool kite_node_selector_requirement_matches(json_object *req, const char *value);
/* A NodeSelectorTerm: all its matchExpressions (node labels) and matchFields (metadata.name
 * only, In or NotIn with one value) hold; an empty term matches nothing. node NULL: only the
 * node's name is known, label expressions are not judged. */
bool kite_node_selector_term_matches(json_object *term, json_object *node, const char *name);
/* nodeSelectorTerms ORed (an empty list matches nothing). */
bool kite_node_selector_terms_match(json_object *terms, json_object *node, const char *name);
/* GetRequiredNodeAffinity(pod).Match(node), as the scheduler's NodeAffinity filter and the
 * DaemonSet controller judge a node: every spec.nodeSelector label present on the node with that
 * value, and the required node affinity's terms (no required affinity: every node; one without
 * terms: none). node NULL: only the node's name is known, spec.nodeSelector and label
 * expressions are not judged (matchFields alone). */
bool kite_pod_node_affinity_matches(json_object *pod, json_object *node, const char *name);
