/* Secret (core/v1): base64 data, write-only stringData, a type with its required keys, and
 * immutable once marked so. Stored encrypted (the store's encryption at rest covers
 * /registry/secrets/, see apiserver_options.encryption_key). */
#include "api/kinds/data.h"

#include <gnutls/gnutls.h>

ROOT_DOC(kite_schema_secret, "Secret",
    "Secret holds secret data of a certain type. The total bytes of the values in the Data field must be less than MaxSecretSize bytes.", TYPE_META, FK(5, "immutable", B), F(2, "data", kite_schema_bytes_map),
     F(4, "stringData", SMAP), F(3, "type", S));

static const char *const fields[] = {"type", NULL};

/* stringData is write-only: merged into data (base64), as the conversion to the internal type
 * does; a key in both takes stringData's value. type defaults to Opaque. */
static void defaults(json_object *obj) {
    if (!kite_obj_str(obj, "type") || !*kite_obj_str(obj, "type")) kite_obj_set(obj, "type", json_object_new_string("Opaque"));
    json_object *sd = kite_obj_get(obj, "stringData");
    if (!sd || !json_object_is_type(sd, json_type_object)) {
        json_object_object_del(obj, "stringData");
        return;
    }
    json_object *data = kite_obj_ensure(obj, "data");
    json_object_object_foreach(sd, k, v) {
        const char *s = v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        gnutls_datum_t in = {(unsigned char *)s, (unsigned)strlen(s)}, out = {0};
        if (gnutls_base64_encode2(&in, &out) == 0) {
            kite_obj_set(data, k, json_object_new_string_len((const char *)out.data, (int)out.size));
            gnutls_free(out.data);
        } else if (!*s) {
            kite_obj_set(data, k, json_object_new_string(""));
        }
    }
    json_object_object_del(obj, "stringData");
}

/* The keys (or annotation) a Secret's type requires (ValidateSecret). */
static const struct {
    const char *type, *key, *annotation;
} REQUIRED[] = {
    {"kubernetes.io/service-account-token", NULL, "kubernetes.io/service-account.name"},
    {"kubernetes.io/dockercfg", ".dockercfg", NULL},
    {"kubernetes.io/dockerconfigjson", ".dockerconfigjson", NULL},
    {"kubernetes.io/basic-auth", NULL, NULL},
    {"kubernetes.io/ssh-auth", "ssh-privatekey", NULL},
    {"kubernetes.io/tls", "tls.crt", NULL},
    {"kubernetes.io/tls", "tls.key", NULL},
};

static void validate(json_object *obj, json_object *old, struct kite_causes *c) {
    size_t total = 0;
    kite_data_keys_validate(obj, "data", true, &total, c);
    if (total > KITE_MAX_DATA_BYTES)
        kite_causes_add(c, "FieldValueTooLong", "data", "Too long: must have at most %d bytes", KITE_MAX_DATA_BYTES);
    const char *type = kite_obj_str(obj, "type");
    json_object *data = kite_obj_get(obj, "data");
    for (size_t i = 0; type && i < KITE_ARRAY_SIZE(REQUIRED); i++) {
        if (strcmp(REQUIRED[i].type, type) != 0) continue;
        if (REQUIRED[i].key && !kite_obj_get(data, REQUIRED[i].key)) {
            char f[64];
            snprintf(f, sizeof f, "data[%s]", REQUIRED[i].key);
            kite_causes_add(c, "FieldValueRequired", f, "Required value");
        }
        if (REQUIRED[i].annotation && !kite_obj_get(kite_obj_get(kite_obj_meta(obj), "annotations"), REQUIRED[i].annotation)) {
            char f[96];
            snprintf(f, sizeof f, "metadata.annotations[%s]", REQUIRED[i].annotation);
            kite_causes_add(c, "FieldValueRequired", f, "Required value");
        }
    }
    if (type && kite_streq(type, "kubernetes.io/basic-auth") && !kite_obj_get(data, "username") &&
        !kite_obj_get(data, "password"))
        kite_causes_add(c, "FieldValueRequired", "data[username]", "Required value");
    if (old && !kite_streq(kite_obj_str(old, "type"), type))
        kite_causes_add(c, "FieldValueInvalid", "type", "Invalid value: \"%s\": field is immutable", type ? type : "");
    static const char *const frozen[] = {"data", NULL};
    kite_data_immutable_validate(obj, old, frozen, c);
}

/* printSecret: its type and the keys of data */
static json_object *secret_type(const struct kite_table_row *r) { return cell_str(STR(r->obj, "type")); }
static json_object *secret_data(const struct kite_table_row *r) {
    json_object *d = OBJ(r->obj, "data");
    return json_object_new_int64(d && json_object_is_type(d, json_type_object) ? json_object_object_length(d) : 0);
}
static const struct kite_table_column secret_cols[] = {
    COL_NAME,
    {"Type", secret_type, "string", "",
     "Used to facilitate programmatic handling of secret data. More info: "
     "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
     0},
    {"Data", secret_data, "string", "",
     "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The "
     "serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly "
     "non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
     0},
    COL_AGE,
};
static const struct kite_table_printer printer = TABLE_PRINTER(secret_cols);

const struct kite_resource kite_kind_secret = {
    .schema = &kite_schema_secret,
    KITE_CORE_V1, .kind = "Secret", .list_kind = "SecretList", .plural = "secrets", .singular = "secret",
    .namespaced = true, .unconditional_update = true, .encrypted = true, .smp = &kite_meta_smp_schema,
    .fields = fields, .defaults = defaults, .validate = validate, .table = &printer,
};
