/* JSON patch formats used by the Kubernetes API server and the node agent: RFC 7386 merge
 * patch, RFC 6902 JSON patch, strategic merge patch (apply) and its two-way diff.
 * All functions are pure: inputs are borrowed, never modified, and results are new objects. */
#pragma once
#include <json-c/json.h>
#include "base/base.h"

/* Strategic-merge-patch schema: how lists at given paths merge. path is the dotted path of the
 * list field from the object root, with list elements transparent, e.g. "spec.taints",
 * "status.conditions", "spec.containers.ports" (the ports list inside each container).
 * Lists with no rule are atomic: replaced whole (as Kubernetes does for lists without a
 * patchStrategy). */
enum { KITE_SMP_MERGE = 1,            /* list of objects merged by merge_key */
       KITE_SMP_MERGE_PRIMITIVES = 2, /* list of scalars merged as a set (e.g. metadata.finalizers) */
       KITE_SMP_RETAIN_KEYS = 4 };    /* object field honours $retainKeys */
/* map_keys: server-side apply's list-map keys when they are more than the merge key (upstream's
 * x-kubernetes-list-map-keys), comma-separated in name order, a key's default after '='
 * (e.g. "containerPort,protocol=TCP"); NULL: the merge key alone. Strategic merge uses
 * merge_key only, as upstream. */
struct kite_smp_rule { const char *path; const char *merge_key; unsigned flags; const char *map_keys; };
struct kite_smp_schema { const struct kite_smp_rule *rules; size_t n_rules; };

/* Errors: -EBADMSG = the patch document itself is malformed (HTTP 400 BadRequest);
 * -EINVAL = a well-formed patch that cannot be applied (failed "test", missing path, bad
 * index, $patch directive misuse...) (HTTP 422). *ret_err (may be NULL) gets a malloc'ed
 * human message on error. Inputs are borrowed and never modified; *ret is a new object the
 * caller owns (json_object_put). */

/* RFC 7386 JSON merge patch of doc by patch. */
int kite_merge_patch(json_object *doc, json_object *patch, json_object **ret, char **ret_err);  /* RFC 7386 */
/* RFC 6902 JSON patch: patch must be an array of operation objects (at most 10000, as
 * Kubernetes allows; more is -EBADMSG). Malformed operations and pointers are -EBADMSG;
 * failed tests, missing paths and bad indexes are -EINVAL, and so are "copy" operations
 * duplicating more than 3 MiB in total (copying the root into itself doubles it). All or
 * nothing. */
int kite_json_patch(json_object *doc, json_object *patch, json_object **ret, char **ret_err);   /* RFC 6902 */
/* Strategic merge patch of doc by patch; schema (may be NULL: every list atomic) says which
 * lists merge and how. doc may be NULL (taken as {}); a non-object doc is -EINVAL. Items a
 * patch adds to a merge list without $setElementOrder come first, as in Kubernetes. */
int kite_smp_apply(json_object *doc, json_object *patch, const struct kite_smp_schema *schema,
                   json_object **ret, char **ret_err);
/* Two-way strategic merge patch from `from` to `to` (Kubernetes CreateTwoWayMergePatch):
 * the smallest patch P with kite_smp_apply(from, P) equal to `to`. Fields removed become
 * null; merged lists emit only changed/added elements (keyed by merge key) plus
 * {"$patch":"delete", key:...} for removed ones, and a "$setElementOrder/<field>" list when
 * order matters as Kubernetes does; atomic lists are emitted whole when they differ. Equal
 * inputs give an empty object {}. Returns -EINVAL (and no patch) when from/to are not
 * objects (NULL is {}) or a merge list cannot be expressed as a patch (duplicate or missing
 * merge keys, mixed element types). As in Kubernetes, null values inside `to` are not
 * representable (null means "delete"). */
int kite_smp_diff(json_object *from, json_object *to, const struct kite_smp_schema *schema,
                  json_object **ret);
/* Deep equality ignoring object key order; numbers compare by value (1 == 1.0). */
bool kite_json_equal(json_object *a, json_object *b);
