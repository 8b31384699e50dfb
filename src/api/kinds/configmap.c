/* ConfigMap (core/v1): string data and binary data, immutable once marked so. */
#include "api/kinds/data.h"

ROOT_DOC(kite_schema_configmap, "ConfigMap",
    "ConfigMap holds configuration data for pods to consume.", TYPE_META, FK(4, "immutable", B), F(2, "data", SMAP),
     F(3, "binaryData", kite_schema_bytes_map));

static void validate(json_object *obj, json_object *old, struct kite_causes *c) {
    size_t total = 0;
    kite_data_keys_validate(obj, "data", false, &total, c);
    kite_data_keys_validate(obj, "binaryData", true, &total, c);
    json_object *data = kite_obj_get(obj, "data"), *bin = kite_obj_get(obj, "binaryData");
    if (data && bin && json_object_is_type(bin, json_type_object)) {
        json_object_object_foreach(bin, k, v) {
            (void)v;
            if (kite_obj_get(data, k)) {
                char f[300];
                snprintf(f, sizeof f, "data[%s]", k);
                kite_causes_add(c, "FieldValueInvalid", f, "Invalid value: \"%s\": duplicate of key present in binaryData", k);
            }
        }
    }
    if (total > KITE_MAX_DATA_BYTES)
        kite_causes_add(c, "FieldValueTooLong", "", "Too long: must have at most %d bytes", KITE_MAX_DATA_BYTES);
    static const char *const frozen[] = {"data", "binaryData", NULL};
    kite_data_immutable_validate(obj, old, frozen, c);
}

static size_t keys(json_object *o) { return o && json_object_is_type(o, json_type_object) ? (size_t)json_object_object_length(o) : 0; }
/* printConfigMap: the keys of data and binaryData */
static json_object *cm_data(const struct kite_table_row *r) {
    return json_object_new_int64((int64_t)(keys(OBJ(r->obj, "data")) + keys(OBJ(r->obj, "binaryData"))));
}
static const struct kite_table_column cm_cols[] = {
    COL_NAME,
    {"Data", cm_data, "string", "",
     "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values "
     "with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the "
     "keys in the BinaryData field, this is enforced during validation process.",
     0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(cm_cols);

const struct kite_resource kite_kind_configmap = {
    .schema = &kite_schema_configmap,
    KITE_CORE_V1, .kind = "ConfigMap", .list_kind = "ConfigMapList", .plural = "configmaps", .singular = "configmap",
    .short_names = {"cm"}, .namespaced = true, .unconditional_update = true, .smp = &kite_meta_smp_schema,
    .validate = validate, .table = &printer,
};
