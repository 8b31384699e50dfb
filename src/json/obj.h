/* Small accessors over json-c objects, for every module: borrowed results, NULL (0) when a
 * member is absent or of another type; a NULL object has no members. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* obj[k], or NULL (obj is no object, or has no such member). */
json_object *kite_obj_get(json_object *obj, const char *k);
/* The member at a path of keys (kite_obj_at(o, "spec", "nodeName"): the keys up to the first
 * NULL), or NULL when a step is missing or not an object; _str: a string member, or NULL. */
#define kite_obj_at(o, ...) kite_obj_at_(o, __VA_ARGS__, (const char *)NULL)
#define kite_obj_str_at(o, ...) kite_obj_str_at_(o, __VA_ARGS__, (const char *)NULL)
json_object *kite_obj_at_(json_object *obj, ...);
const char *kite_obj_str_at_(json_object *obj, ...);
/* The same with a dotted path ("spec.nodeName"; keys without dots, 127 bytes at most). */
json_object *kite_obj_path(json_object *obj, const char *dotted);
const char *kite_obj_path_str(json_object *obj, const char *dotted);
json_object *kite_obj_meta(json_object *obj);
const char *kite_obj_str(json_object *obj, const char *k);
const char *kite_meta_str(json_object *obj, const char *k);
/* Sets obj[k] = v (takes ownership of v); creates the object member. */
void kite_obj_set(json_object *obj, const char *k, json_object *v);
/* A new object {k: v} holding a reference of its own to v (a status wrapped for a patch diff). */
json_object *kite_obj_wrap(const char *k, json_object *v);
json_object *kite_obj_ensure(json_object *obj, const char *k);
/* obj[k] as an int64 (json-c's conversion of whatever is there), 0 when absent. */
int64_t kite_obj_int(json_object *obj, const char *k);
/* obj's member names sorted by cmp (a qsort comparator of const char * elements; NULL: bytewise,
 * as Go's encoding/json and yaml write a map): a malloc'ed array of *ret_n borrowed names (valid
 * while obj is unchanged; free the array only); NULL with *ret_n 0 when obj is no object. */
const char **kite_obj_sorted_keys(json_object *obj, int (*cmp)(const void *, const void *), size_t *ret_n);
/* The length of an array; 0 for NULL or another type. */
size_t kite_array_len(json_object *a);
