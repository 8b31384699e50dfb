/* Keys and immutability of ConfigMaps and Secrets (data.h). */
#include "api/kinds/data.h"

/* IsConfigMapKey: [-._a-zA-Z0-9]+, at most 253 bytes, not "." or "..". */
static const char *bad_key(const char *k) {
    size_t n = strlen(k);
    if (n == 0 || n > 253) return "must be no more than 253 characters";
    if (strcmp(k, ".") == 0) return "must not be '.'";
    if (strcmp(k, "..") == 0) return "must not be '..'";
    if (strncmp(k, "..", 2) == 0) return "must not start with '..'";
    for (const char *p = k; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.'))
            return "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
                   "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    return NULL;
}

void kite_data_keys_validate(json_object *obj, const char *field, bool decoded, size_t *total, struct kite_causes *c) {
    json_object *m = kite_obj_get(obj, field);
    if (!m || !json_object_is_type(m, json_type_object)) return;
    json_object_object_foreach(m, k, v) {
        const char *why = bad_key(k);
        if (why) {
            char f[300];
            snprintf(f, sizeof f, "%s[%s]", field, k);
            kite_causes_add(c, "FieldValueInvalid", f, "Invalid value: \"%s\": %s", k, why);
        }
        size_t len = v && json_object_is_type(v, json_type_string) ? (size_t)json_object_get_string_len(v) : 0;
        *total += decoded ? len / 4 * 3 : len;
    }
}

void kite_data_immutable_validate(json_object *obj, json_object *old, const char *const *fields, struct kite_causes *c) {
    json_object *was = kite_obj_get(old, "immutable");
    if (!old || !was || !json_object_get_boolean(was)) return;
    json_object *is = kite_obj_get(obj, "immutable");
    if (!is || !json_object_get_boolean(is))
        kite_causes_add(c, "FieldValueForbidden", "immutable", "Forbidden: field is immutable when `immutable` is set");
    for (const char *const *f = fields; *f; f++)
        if (!kite_json_equal(kite_obj_get(obj, *f), kite_obj_get(old, *f)))
            kite_causes_add(c, "FieldValueForbidden", *f, "Forbidden: field is immutable when `immutable` is set");
}
