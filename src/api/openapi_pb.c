/* The OpenAPI v2 document as protobuf, gnostic's openapi.v2.Document (openapiv2/OpenAPIv2.proto),
 * the form kube-apiserver serves for `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
 * and the only one client-go's OpenAPISchema reads (kubectl's client-side validation).
 * Transcoded from the JSON document kite_openapi_v2() builds: it covers the members that
 * document uses (paths, operations, parameters, responses, schemas, vendor extensions, the
 * bearer-token security definition); members it never holds are not transcoded. Vendor
 * extensions carry their value as YAML text, as gnostic does (JSON text is YAML). */
#include "api/openapi.h"
#include "base/buf.h"
#include "json/patch.h"

#include <errno.h>
#include <string.h>

enum { VARINT = 0, LEN = 2 };

static void varint(struct kite_buf *b, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        kite_buf_putc(b, (char)(c | (v ? 0x80 : 0)));
    } while (v);
}

static void tag(struct kite_buf *b, int field, int wire) { varint(b, (uint64_t)field << 3 | (unsigned)wire); }

static void bytes(struct kite_buf *b, int field, const char *p, size_t n) {
    tag(b, field, LEN);
    varint(b, n);
    kite_buf_append(b, p, n);
}

/* proto3: an empty string or false is not written */
static void str(struct kite_buf *b, int field, const char *s) {
    if (s && *s) bytes(b, field, s, strlen(s));
}

static void boolean(struct kite_buf *b, int field, bool v) {
    if (!v) return;
    tag(b, field, VARINT);
    varint(b, 1);
}

/* Writes m as a nested message `field` and releases it (written even when empty: a message
 * present, as a oneof member, counts). */
static void msg(struct kite_buf *b, int field, struct kite_buf *m) {
    bytes(b, field, m->p ? m->p : "", m->len);
    kite_buf_release(m);
}

static const char *s_of(json_object *o, const char *k) { return kite_obj_str(o, k); }

static void strings(struct kite_buf *b, int field, json_object *arr) {
    for (size_t i = 0; json_object_is_type(arr, json_type_array) && i < json_object_array_length(arr); i++)
        str(b, field, json_object_get_string(json_object_array_get_idx(arr, i)));
}

/* NamedAny {name 1, value 2: Any {yaml 2}} for each "x-" member of o. */
static void vendor_extensions(struct kite_buf *b, int field, json_object *o) {
    json_object_object_foreach(o, k, v) {
        if (strncmp(k, "x-", 2) != 0) continue;
        struct kite_buf named = {0}, any = {0};
        str(&named, 1, k);
        const char *yaml = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        str(&any, 2, yaml);
        msg(&named, 2, &any);
        msg(b, field, &named);
    }
}

static void schema(struct kite_buf *b, json_object *s);

static void schema_msg(struct kite_buf *b, int field, json_object *s) {
    struct kite_buf m = {0};
    schema(&m, s);
    msg(b, field, &m);
}

/* Schema: _ref 1, format 2, title 3, description 4, required 19, additional_properties 21,
 * type 22, items 23, properties 25, vendor_extension 31. */
static void schema(struct kite_buf *b, json_object *s) {
    str(b, 1, s_of(s, "$ref"));
    str(b, 2, s_of(s, "format"));
    str(b, 3, s_of(s, "title"));
    str(b, 4, s_of(s, "description"));
    strings(b, 19, kite_obj_get(s, "required"));
    json_object *ap = kite_obj_get(s, "additionalProperties");
    if (ap) {
        struct kite_buf item = {0};
        if (json_object_is_type(ap, json_type_boolean)) {
            tag(&item, 2, VARINT);
            varint(&item, json_object_get_boolean(ap) ? 1 : 0);
        } else {
            schema_msg(&item, 1, ap);
        }
        msg(b, 21, &item);
    }
    json_object *type = kite_obj_get(s, "type");
    if (type) {
        struct kite_buf t = {0};
        if (json_object_is_type(type, json_type_array)) strings(&t, 1, type);
        else str(&t, 1, json_object_get_string(type));
        msg(b, 22, &t);
    }
    json_object *items = kite_obj_get(s, "items");
    if (items) {
        struct kite_buf it = {0};
        if (json_object_is_type(items, json_type_array))
            for (size_t i = 0; i < json_object_array_length(items); i++) schema_msg(&it, 1, json_object_array_get_idx(items, i));
        else schema_msg(&it, 1, items);
        msg(b, 23, &it);
    }
    json_object *props = kite_obj_get(s, "properties");
    if (json_object_is_type(props, json_type_object)) {
        struct kite_buf ps = {0};
        json_object_object_foreach(props, name, ps_v) {
            struct kite_buf named = {0};
            str(&named, 1, name);
            schema_msg(&named, 2, ps_v);
            msg(&ps, 1, &named);
        }
        msg(b, 25, &ps);
    }
    vendor_extensions(b, 31, s);
}

/* ParametersItem: a JsonReference (2) or a Parameter (1): BodyParameter (1) or NonBodyParameter
 * (2), whose sub-schema is by `in`: header 1, formData 2, query 3, path 4. */
static void parameter(struct kite_buf *b, int field, json_object *p) {
    struct kite_buf item = {0};
    if (s_of(p, "$ref")) {
        struct kite_buf ref = {0};
        str(&ref, 1, s_of(p, "$ref"));
        str(&ref, 2, s_of(p, "description"));
        msg(&item, 2, &ref);
        msg(b, field, &item);
        return;
    }
    const char *in = s_of(p, "in");
    bool required = json_object_get_boolean(kite_obj_get(p, "required"));
    bool unique = json_object_get_boolean(kite_obj_get(p, "uniqueItems"));
    struct kite_buf param = {0}, sub = {0};
    if (kite_streq(in, "body")) {
        str(&sub, 1, s_of(p, "description"));
        str(&sub, 2, s_of(p, "name"));
        str(&sub, 3, in);
        boolean(&sub, 4, required);
        if (kite_obj_get(p, "schema")) schema_msg(&sub, 5, kite_obj_get(p, "schema"));
        vendor_extensions(&sub, 6, p);
        msg(&param, 1, &sub);
    } else {
        /* query and formData number their members alike (allowEmptyValue at 5 shifts the rest);
         * header and path share the other numbering */
        bool query = kite_streq(in, "query") || kite_streq(in, "formData");
        int which = kite_streq(in, "header") ? 1 : kite_streq(in, "formData") ? 2 : kite_streq(in, "query") ? 3 : 4;
        boolean(&sub, 1, required);
        str(&sub, 2, in);
        str(&sub, 3, s_of(p, "description"));
        str(&sub, 4, s_of(p, "name"));
        str(&sub, query ? 6 : 5, s_of(p, "type"));
        str(&sub, query ? 7 : 6, s_of(p, "format"));
        boolean(&sub, query ? 20 : 19, unique);
        vendor_extensions(&sub, query ? 23 : 22, p);
        struct kite_buf nb = {0};
        msg(&nb, which, &sub);
        msg(&param, 2, &nb);
    }
    msg(&item, 1, &param);
    msg(b, field, &item);
}

static void parameters(struct kite_buf *b, int field, json_object *arr) {
    for (size_t i = 0; json_object_is_type(arr, json_type_array) && i < json_object_array_length(arr); i++)
        parameter(b, field, json_object_array_get_idx(arr, i));
}

/* Operation: tags 1, summary 2, description 3, operation_id 5, produces 6, consumes 7,
 * parameters 8, responses 9, schemes 10, deprecated 11, vendor_extension 13. */
static void operation(struct kite_buf *b, int field, json_object *op) {
    if (!op) return;
    struct kite_buf m = {0};
    strings(&m, 1, kite_obj_get(op, "tags"));
    str(&m, 2, s_of(op, "summary"));
    str(&m, 3, s_of(op, "description"));
    str(&m, 5, s_of(op, "operationId"));
    strings(&m, 6, kite_obj_get(op, "produces"));
    strings(&m, 7, kite_obj_get(op, "consumes"));
    parameters(&m, 8, kite_obj_get(op, "parameters"));
    json_object *resps = kite_obj_get(op, "responses");
    if (json_object_is_type(resps, json_type_object)) {
        struct kite_buf rs = {0};
        json_object_object_foreach(resps, code, r) {
            /* NamedResponseValue {name, ResponseValue {response 1: Response {description 1, schema 2: SchemaItem {schema 1}}}} */
            struct kite_buf named = {0}, value = {0}, resp = {0};
            str(&named, 1, code);
            str(&resp, 1, s_of(r, "description"));
            if (kite_obj_get(r, "schema")) {
                struct kite_buf si = {0};
                schema_msg(&si, 1, kite_obj_get(r, "schema"));
                msg(&resp, 2, &si);
            }
            msg(&value, 1, &resp);
            msg(&named, 2, &value);
            msg(&rs, 1, &named);
        }
        msg(&m, 9, &rs);
    }
    strings(&m, 10, kite_obj_get(op, "schemes"));
    boolean(&m, 11, json_object_get_boolean(kite_obj_get(op, "deprecated")));
    vendor_extensions(&m, 13, op);
    msg(b, field, &m);
}

int kite_openapi_v2_protobuf(json_object *doc, struct kite_buf *out) {
    if (!json_object_is_type(doc, json_type_object)) return -EINVAL;
    str(out, 1, s_of(doc, "swagger"));
    json_object *info = kite_obj_get(doc, "info");
    if (info) {
        struct kite_buf m = {0};
        str(&m, 1, s_of(info, "title"));
        str(&m, 2, s_of(info, "version"));
        str(&m, 3, s_of(info, "description"));
        msg(out, 2, &m);
    }
    json_object *paths = kite_obj_get(doc, "paths");
    if (json_object_is_type(paths, json_type_object)) {
        /* Paths {path 2: NamedPathItem {name, PathItem {get 2, put 3, post 4, delete 5, options 6,
         * head 7, patch 8, parameters 9}}} */
        static const char *const ops[] = {"get", "put", "post", "delete", "options", "head", "patch"};
        struct kite_buf ps = {0};
        json_object_object_foreach(paths, path, item) {
            struct kite_buf named = {0}, pi = {0};
            str(&named, 1, path);
            for (size_t i = 0; i < KITE_ARRAY_SIZE(ops); i++) operation(&pi, (int)i + 2, kite_obj_get(item, ops[i]));
            parameters(&pi, 9, kite_obj_get(item, "parameters"));
            vendor_extensions(&pi, 10, item);
            msg(&named, 2, &pi);
            msg(&ps, 2, &named);
        }
        msg(out, 8, &ps);
    }
    json_object *defs = kite_obj_get(doc, "definitions");
    if (json_object_is_type(defs, json_type_object)) {
        struct kite_buf ds = {0};
        json_object_object_foreach(defs, name, s) {
            struct kite_buf named = {0};
            str(&named, 1, name);
            schema_msg(&named, 2, s);
            msg(&ds, 1, &named);
        }
        msg(out, 9, &ds);
    }
    json_object *sec = kite_obj_get(doc, "security");
    for (size_t i = 0; json_object_is_type(sec, json_type_array) && i < json_object_array_length(sec); i++) {
        /* SecurityRequirement {additional_properties 1: NamedStringArray {name, StringArray {value 1}}} */
        struct kite_buf req = {0};
        json_object_object_foreach(json_object_array_get_idx(sec, i), name, scopes) {
            struct kite_buf named = {0}, sa = {0};
            str(&named, 1, name);
            strings(&sa, 1, scopes);
            msg(&named, 2, &sa);
            msg(&req, 1, &named);
        }
        msg(out, 12, &req);
    }
    json_object *sdefs = kite_obj_get(doc, "securityDefinitions");
    if (json_object_is_type(sdefs, json_type_object)) {
        /* SecurityDefinitions {additional_properties 1: NamedSecurityDefinitionsItem {name,
         * SecurityDefinitionsItem {api_key_security 2: ApiKeySecurity {type 1, name 2, in 3, description 4}}}} */
        struct kite_buf ds = {0};
        json_object_object_foreach(sdefs, name, d) {
            if (!kite_streq(s_of(d, "type"), "apiKey")) continue;
            struct kite_buf named = {0}, item = {0}, key = {0};
            str(&named, 1, name);
            str(&key, 1, s_of(d, "type"));
            str(&key, 2, s_of(d, "name"));
            str(&key, 3, s_of(d, "in"));
            str(&key, 4, s_of(d, "description"));
            msg(&item, 2, &key);
            msg(&named, 2, &item);
            msg(&ds, 1, &named);
        }
        msg(out, 13, &ds);
    }
    vendor_extensions(out, 16, doc);
    return 0;
}
