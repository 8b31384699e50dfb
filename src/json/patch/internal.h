/* Helpers shared by the patch implementations (not part of the public API). */
#pragma once
#include <stdarg.h>

#include "base/buf.h"
#include "base/map.h"
#include "json/patch.h"

/* Strategic-merge-patch directive keys. */
#define SMP_DIRECTIVE "$patch"
#define SMP_RETAIN_KEYS "$retainKeys"
#define SMP_SET_ORDER_PREFIX "$setElementOrder/"
#define SMP_DELETE_PRIM_PREFIX "$deleteFromPrimitiveList/"

/* Stores a formatted message in *ret_err (if ret_err is non-NULL and still empty, so the
 * innermost, most specific message wins) and returns err. */
int kite_json_patch_fail(char **ret_err, int err, const char *fmt, ...) KITE_PRINTF(3, 4);

/* Deep copy; NULL (JSON null) stays NULL. */
json_object *kite_json_patch_clone(json_object *o);

/* Appends a canonical text form of a scalar (or any value) to b: equal values give equal
 * text, values of different JSON types never collide. Unlike json_object_to_json_string it
 * writes nothing into o, so borrowed inputs can be shared between threads. */
void kite_json_patch_canon(struct kite_buf *b, json_object *o);

/* Dotted schema path of the field being visited ("spec.containers"). */
struct patch_path {
    struct kite_buf buf;
};
/* Appends ".key"; returns the length to restore with kite_json_patch_path_pop(). */
size_t kite_json_patch_path_push(struct patch_path *p, const char *key);
void kite_json_patch_path_pop(struct patch_path *p, size_t len);
/* The rule for the current path, or NULL (atomic list, plain map). */
const struct kite_smp_rule *kite_json_patch_rule(const struct kite_smp_schema *schema, const struct patch_path *p);

/* A growable vector of borrowed json_object pointers with an int tag each. */
struct patch_vec {
    json_object **v;
    long *tag;
    size_t n, cap;
};
void kite_json_patch_vec_push(struct patch_vec *vec, json_object *o, long tag);
void kite_json_patch_vec_release(struct patch_vec *vec);

static inline bool patch_is_object(json_object *o) { return json_object_get_type(o) == json_type_object; }
static inline bool patch_is_array(json_object *o) { return json_object_get_type(o) == json_type_array; }
