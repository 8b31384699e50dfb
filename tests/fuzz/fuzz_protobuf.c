/* The protobuf decoder (api/protobuf.h) on arbitrary bytes, against the schema the first byte
 * picks, with the round trip that must hold: whatever it decodes encodes again, and that
 * encoding decodes to the same tree. The schemas: the meta/v1 ones (ObjectMeta, Status,
 * DeleteOptions: the kinds' schemas live with their strategies, which need the registry) and
 * one here with a field of every schema type. */
#include "fuzz_common.h"
#include "api/protobuf.h"
#include "json/patch.h"

#include <errno.h>
#include <stdio.h>

/* ObjectMeta (src/api/kinds/meta_schema.c, declared for the kind files) */
extern const struct kite_schema kite_schema_object_meta;

static const struct kite_schema quantity_map = {.type = KITE_SCHEMA_MAP, .elem = &kite_schema_quantity};
static const struct kite_schema raw_list = {.type = KITE_SCHEMA_LIST, .elem = &kite_schema_raw};
static const struct kite_schema_field inner_fields[] = {
    {"s", &kite_schema_string, 1, 0}, {"i", &kite_schema_int32, 2, KITE_SCHEMA_KEEP_ZERO}, {NULL, NULL, 0, 0}};
static const struct kite_schema inner = {.type = KITE_SCHEMA_OBJECT, .go_type = "Inner", .fields = inner_fields};
static const struct kite_schema inner_list = {.type = KITE_SCHEMA_LIST, .elem = &inner};
static const struct kite_schema_field every_fields[] = {
    {"kind", &kite_schema_string, 0, 0}, {"apiVersion", &kite_schema_string, 0, 0},
    {"metadata", &kite_schema_object_meta, 1, 0}, {"s", &kite_schema_string, 2, 0},
    {"i32", &kite_schema_int32, 3, 0}, {"i64", &kite_schema_int64, 4, KITE_SCHEMA_KEEP_ZERO},
    {"b", &kite_schema_bool, 5, 0}, {"f", &kite_schema_float, 6, 0}, {"q", &kite_schema_quantity, 7, 0},
    {"t", &kite_schema_time, 8, 0}, {"mt", &kite_schema_microtime, 9, 0},
    {"ios", &kite_schema_int_or_string, 10, 0}, {"bytes", &kite_schema_bytes, 11, 0},
    {"smap", &kite_schema_string_map, 12, 0}, {"bmap", &kite_schema_bytes_map, 13, 0},
    {"qmap", &quantity_map, 14, 0}, {"slist", &kite_schema_string_list, 15, 0}, {"objs", &inner_list, 16, 0},
    {"obj", &inner, 17, 0}, {"raw", &raw_list, 18, 0}, {NULL, NULL, 0, 0}};
static const struct kite_schema every = {.type = KITE_SCHEMA_OBJECT, .go_type = "Every", .fields = every_fields};

static const struct kite_schema *const schemas[] = {
    &every, &kite_schema_object_meta, &kite_schema_delete_options, &kite_schema_status,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    const struct kite_schema *s = schemas[data[0] % (sizeof schemas / sizeof *schemas)];
    json_object *o = NULL;
    char *err = NULL;
    int r = kite_pb_decode(s, data + 1, n - 1, FUZZ_JSON_MAX_DEPTH, &o, &err);
    if (r != 0) {
        if ((r != -EINVAL && r != -ENOTSUP) || o || !err) abort();
        free(err);
        return 0;
    }
    struct kite_buf b = {0};
    if (kite_pb_encode(s, false, o, &b) != 0) {
        fprintf(stderr, "decoded but does not encode: %s\n", json_object_to_json_string(o));
        abort();
    }
    json_object *o2 = NULL;
    if (kite_pb_decode(s, b.p, b.len, FUZZ_JSON_MAX_DEPTH, &o2, &err) != 0) {
        fprintf(stderr, "re-decode: %s\n", err);
        abort();
    }
    if (!kite_json_equal(o, o2)) {
        fprintf(stderr, "round trip changed:\n%s\n%s\n", json_object_to_json_string(o), json_object_to_json_string(o2));
        abort();
    }
    json_object_put(o);
    json_object_put(o2);
    kite_buf_release(&b);
    return 0;
}
