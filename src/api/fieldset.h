/* Field sets and structured merge, as sigs.k8s.io/structured-merge-diff does them for
 * server-side apply and managedFields.
 *
 * A field set names paths of an object: struct fields ("f:name"), map entries ("f:key"),
 * items of lists that are maps ("k:{"name":"c"}": matched by their key fields) and of lists
 * that are sets ("v:"value""). It is a trie of json-c objects, one per path element; a path
 * that is itself in the set (a member) has the key "." among its children. metadata's
 * managedFields carry the same trie in FieldsV1 form, where a member with no children is {}
 * (kite_fieldset_to_v1 / _from_v1 convert).
 *
 * How a list merges and which of its items are paths comes from the kind's strategic-merge
 * rules (struct kite_smp_schema, the same rules the OpenAPI documents publish as
 * x-kubernetes-list-type/-map-keys): a list with a merge key is a map keyed by it, a list of
 * primitives merged as a set is a set, any other list is atomic (a single value, as upstream
 * treats a list without a list type). A value whose schema is RAW, and a field an object's
 * schema does not list, is atomic too. Maps and structs are granular.
 *
 * Never part of a set: apiVersion, kind, and the metadata the server sets (name, namespace,
 * uid, resourceVersion, generation, creationTimestamp, selfLink, managedFields), as upstream.
 * A scope further limits the top-level fields considered (a status write sees status and
 * metadata; a main write does not see status).
 *
 * Objects passed in are borrowed and never modified unless a function says so; they may be
 * shared read-only between threads (no reference count is touched). Sets returned are new. */
#pragma once
#include "api/schema.h"
#include "json/patch.h"

struct kite_fs_scope {
    const struct kite_schema *schema;   /* the kind's root schema (NULL: every value atomic) */
    const struct kite_smp_schema *smp;  /* its list rules (NULL: every list atomic) */
    const char *only;                   /* if set: the one top-level field considered besides metadata */
    const char *skip;                   /* if set: a top-level field never considered */
};

/* The set of paths obj sets (structured-merge-diff's ToFieldSet): every scalar and atomic
 * value, every map entry, every item of a map or set list; a struct field only when it is
 * null or an empty object. */
json_object *kite_fieldset_of(const struct kite_fs_scope *sc, json_object *obj);

/* What changed from old (NULL: nothing) to new: paths only new has (*ret_added), only old
 * has (*ret_removed), and leaves both have with different values (*ret_modified). */
void kite_fieldset_diff(const struct kite_fs_scope *sc, json_object *old, json_object *new_obj, json_object **ret_added,
                        json_object **ret_removed, json_object **ret_modified);

/* Merges the applied configuration cfg into obj (modified in place): structs and maps field
 * by field, map lists item by item (new items appended), sets by value, anything else
 * replaced. A null in cfg removes the field. */
void kite_fieldset_merge(const struct kite_fs_scope *sc, json_object *obj, json_object *cfg);

/* The paths of last an applier no longer applies (absent from applied) that no one else
 * sets (absent, with everything below them, from others; NULL: no one): what its apply
 * removes from the object. */
json_object *kite_fieldset_pruned(json_object *last, json_object *applied, json_object *others);
/* Removes from obj (modified in place) the value at every member path of set. */
void kite_fieldset_remove_from(json_object *obj, json_object *set);

/* Set algebra. union_into adds src to dst (modified); the others return new sets. */
void kite_fieldset_union_into(json_object *dst, json_object *src);
json_object *kite_fieldset_difference(json_object *a, json_object *b);
json_object *kite_fieldset_intersection(json_object *a, json_object *b);
bool kite_fieldset_empty(json_object *set);
json_object *kite_fieldset_new(void);

/* FieldsV1 form (managedFields' fieldsV1) and back. from_v1 returns NULL for a value that
 * is not a FieldsV1 trie. */
json_object *kite_fieldset_to_v1(json_object *set);
json_object *kite_fieldset_from_v1(json_object *v1);

/* Questions asked of a set in FieldsV1 form (a stored managedFields entry) without reading it
 * into a set: whether v1 holds every member of set, and whether they share a member. */
bool kite_fieldset_v1_covers(json_object *v1, json_object *set);
bool kite_fieldset_v1_meets(json_object *v1, json_object *set);

/* Calls fn(ud, path) for every member of set, in order, path as upstream prints a
 * fieldpath.Path: ".spec.containers[name=\"c\"].image", ".metadata.finalizers[=\"f\"]". */
void kite_fieldset_each(json_object *set, void (*fn)(void *ud, const char *path), void *ud);
