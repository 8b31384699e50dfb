/* What every kind file (src/api/kinds/<kind>.c) shares: the strategic-merge rules of
 * ObjectMeta, and the small readers and cell writers its Table printer is made of. Included
 * only by kind files and src/api/table.c. */
#pragma once
#include "api/registry.h"
#include "api/schema.h"
#include "api/selector.h"
#include "api/table.h"
#include "base/buf.h"
#include "base/clock.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>

/* patchStrategy/patchMergeKey tags of ObjectMeta, first in every kind's rules */
#define META_RULES                                                       \
    {"metadata.finalizers", NULL, KITE_SMP_MERGE_PRIMITIVES, NULL},            \
    {"metadata.ownerReferences", "uid", KITE_SMP_MERGE, NULL}
extern const struct kite_smp_schema kite_meta_smp_schema;

/* ---- typed schemas (schema.h), transcribed from the Go types of k8s.io/api and apimachinery:
 * every field whose type a client relies on, with its number in their generated.proto files
 * (F(number, "jsonName", schema); FK where a zero value read from protobuf is kept: Go's JSON has no
 * omitempty for the field, or the Go field is a pointer, whose presence is data). Parts kite does not interpret and that have many
 * shapes (a Node's configSource, a CRD's schema) are RAW: only their strings are checked, and
 * they cannot go through protobuf. Go struct names are the ones Go's decoder prints in its errors. */
#define S kite_schema_string
#define I32 kite_schema_int32
#define I64 kite_schema_int64
#define B kite_schema_bool
#define Q kite_schema_quantity
#define T kite_schema_time
#define MT kite_schema_microtime
#define RAW kite_schema_raw
#define SLIST kite_schema_string_list
#define SMAP kite_schema_string_map
#define RLIST kite_schema_resource_list
#define FV1 kite_schema_fields_v1
#define F(num, n, s) {n, &s, num, 0}
#define FK(num, n, s) {n, &s, num, KITE_SCHEMA_KEEP_ZERO}
/* a field OpenAPI lists as required (no omitempty, not a pointer: kept zero too) */
#define FR(num, n, s) {n, &s, num, KITE_SCHEMA_KEEP_ZERO | KITE_SCHEMA_REQUIRED}
/* an inline struct (KITE_SCHEMA_INLINE): n names it, no JSON key */
#define FI(num, n, s) {n, &s, num, KITE_SCHEMA_INLINE}

/* An object (struct) schema `name` with Go name `go` and the given fields: all of the Go
 * struct's (a field not listed is unknown, dropped from writes; else STRUCT_PARTIAL). */
#define STRUCT(name, go, ...)                                                         \
    static const struct kite_schema_field name##_fields[] = {__VA_ARGS__, {NULL, NULL, 0, 0}}; \
    static const struct kite_schema name = {.type = KITE_SCHEMA_OBJECT, .go_type = go, .fields = name##_fields}
/* A kind's root schema, named in schema.h. */
#define ROOT(name, go, ...)                                                        \
    static const struct kite_schema_field name##_fields[] = {__VA_ARGS__, {NULL, NULL, 0, 0}}; \
    const struct kite_schema name = {.type = KITE_SCHEMA_OBJECT, .go_type = go, .fields = name##_fields}
/* The same with OpenAPI's description of the kind (upstream's words). */
#define ROOT_DOC(name, go, doc, ...)                                                                   \
    static const struct kite_schema_field name##_fields[] = {__VA_ARGS__, {NULL, NULL, 0, 0}};         \
    const struct kite_schema name = {.type = KITE_SCHEMA_OBJECT, .go_type = go, .fields = name##_fields, \
                                     .description = doc}
/* A list schema `name` of elem, Go name go (NULL: "[]" + elem's). */
#define LIST(name, go, of) static const struct kite_schema name = {.type = KITE_SCHEMA_LIST, .go_type = go, .elem = &of}
/* A STRUCT that lists only some of its Go fields (KITE_SCHEMA_PARTIAL): the others are kept as
 * given, neither checked nor dropped as unknown. */
#define STRUCT_PARTIAL(name, go, ...)                                                 \
    static const struct kite_schema_field name##_fields[] = {__VA_ARGS__, {NULL, NULL, 0, 0}}; \
    static const struct kite_schema name = {.type = KITE_SCHEMA_OBJECT, .go_type = go, .fields = name##_fields, \
                                            .flags = KITE_SCHEMA_PARTIAL}
/* ObjectMeta and ObjectReference, shared by every kind (meta_schema.c) */
extern const struct kite_schema kite_schema_object_meta, kite_schema_object_ref;
#define TYPE_META F(0, "kind", S), F(0, "apiVersion", S), F(1, "metadata", kite_schema_object_meta)

#define NAME_DESC                                                                                              \
    "Name must be unique within a namespace. Is required when creating resources, although some resources " \
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily "  \
    "intended for creation idempotence and configuration definition. Cannot be updated. More info: "          \
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
#define AGE_DESC                                                                                                \
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "  \
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this "      \
    "value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for " \
    "lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"

#define COL_NAME {"Name", kite_table_cell_name, "string", "name", NAME_DESC, 0}
#define COL_AGE {"Age", kite_table_cell_age, "string", "", AGE_DESC, 0}

/* ---- small JSON readers: absent or mistyped fields read as empty ---- */

/* Follows NULL-terminated keys; NULL when any step is missing. */
static inline json_object *at(json_object *o, ...) {
    va_list ap;
    va_start(ap, o);
    for (const char *k; o && (k = va_arg(ap, const char *));) {
        json_object *n = NULL;
        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &n)) n = NULL;
        o = n;
    }
    va_end(ap);
    return o;
}
static inline const char *str_of(json_object *o) {
    return o && json_object_is_type(o, json_type_string) ? json_object_get_string(o) : "";
}
#define STR(o, ...) str_of(at(o, __VA_ARGS__, (const char *)NULL))
#define OBJ(o, ...) at(o, __VA_ARGS__, (const char *)NULL)
static inline size_t arr_len(json_object *a) {
    return a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}
static inline int64_t int_of(json_object *o) {
    return o && (json_object_is_type(o, json_type_int) || json_object_is_type(o, json_type_double)) ? json_object_get_int64(o) : 0;
}

/* A printer made of its column table, with optional .scratch_size, .prepare and .release. */
#define TABLE_PRINTER(cols, ...) {.columns = (cols), .n_columns = KITE_ARRAY_SIZE(cols), __VA_ARGS__}

/* A string cell; cell_or prints dflt for an empty s. */
static inline json_object *cell_str(const char *s) { return json_object_new_string(s); }
static inline json_object *cell_or(const char *s, const char *dflt) { return cell_str(*s ? s : dflt); }

/* HumanDuration(now - t); Go truncates the duration's seconds toward zero. */
static inline void since_ns(int64_t t_ns, int64_t now_s, char out[32]) {
    kite_human_duration((now_s * KITE_NS_PER_SEC - t_ns) / KITE_NS_PER_SEC, out);
}

/* translateTimestampSince: "<unknown>" for a missing/unparsable time. */
static inline void since(const char *ts, int64_t now_s, char out[32]) {
    int64_t ns;
    if (!*ts || kite_time_parse(ts, &ns) < 0) {
        strcpy(out, "<unknown>");
        return;
    }
    since_ns(ns, now_s, out);
}
