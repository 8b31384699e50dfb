/* Label and field selectors, with Kubernetes' syntax and error messages
 * (research/kubectl-wire.md §2.3). Parsed selectors are immutable and may be shared
 * between threads. */
#pragma once
#include "base/base.h"
#include "base/buf.h"

#include <json-c/json.h>

struct kite_label_selector; /* opaque */

/* Parses the Kubernetes label selector syntax: a=b, a==b, a!=b, a in (x,y), a notin (x),
 * a, !a, a>N, a<N (integer compare), comma-separated (AND). Empty string (or NULL) = match
 * everything. On success *ret is a new selector (free with kite_label_selector_free).
 * -EINVAL with *ret_err (malloc'ed message, Kubernetes' exact text: `unable to parse
 * requirement: <nil>: Invalid value: "a:b": name part must ...`, `found ',', expected: ...`;
 * ret_err may be NULL) on bad syntax or invalid keys/values (label key/value rules). *ret
 * is untouched on failure. */
int kite_label_selector_parse(const char *s, struct kite_label_selector **ret, char **ret_err);
/* labels: a JSON object of string->string (borrowed), or NULL (= no labels). A NULL sel
 * matches everything. */
bool kite_label_selector_matches(const struct kite_label_selector *sel, json_object *labels);
/* True when the selector has no requirements (matches everything). */
bool kite_label_selector_empty(const struct kite_label_selector *sel);
/* Accepts NULL. */
void kite_label_selector_free(struct kite_label_selector *sel);

struct kite_field_selector; /* opaque; terms of field=value, field==value, field!=value, comma-AND */

/* Parses a field selector. Values may contain escaped `\,` `\=` `\\` and may be empty
 * (`involvedObject.namespace=`). Empty string (or NULL) = match everything. -EINVAL with
 * *ret_err (malloc'ed; ret_err may be NULL) on bad syntax. */
int kite_field_selector_parse(const char *s, struct kite_field_selector **ret, char **ret_err);
/* Number of terms and access to them, so the server can check each field is supported for
 * the kind. Returned strings are borrowed from sel. */
size_t kite_field_selector_count(const struct kite_field_selector *sel);
const char *kite_field_selector_field(const struct kite_field_selector *sel, size_t i);
/* If the selector requires field == exact value (e.g. metadata.name=x), returns that value
 * (unescaped, borrowed from sel), else NULL. */
const char *kite_field_selector_exact(const struct kite_field_selector *sel, const char *field);
/* get(field, ud) returns the object's value for that field as a string ("" when absent;
 * borrowed, valid until the next call of get). */
typedef const char *(*kite_field_getter)(const char *field, void *ud);
bool kite_field_selector_matches(const struct kite_field_selector *sel, kite_field_getter get, void *ud);
/* Accepts NULL. */
void kite_field_selector_free(struct kite_field_selector *sel);

/* Looks up a dotted path (e.g. "spec.nodeName", "involvedObject.kind") in obj (borrowed) and
 * renders scalars as Kubernetes does for field selectors (bool -> "true"/"false", numbers
 * decimal, missing/null/object/array -> ""). Writes into *buf (reset first) and returns buf->p
 * (never NULL). */
const char *kite_json_path_string(json_object *obj, const char *dotted, struct kite_buf *buf);
