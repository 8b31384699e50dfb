/* Kubernetes' protobuf wire format through the typed schemas (protobuf.h): a decoder that walks
 * a message with its schema and builds the json-c tree, and an encoder that walks the tree. */
#include "api/protobuf.h"
#include "base/gotime.h"
#include "base/base64.h"
#include "json/obj.h"
#include "json/parse.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

/* []byte fields: base64 as Go's encoding/json writes them (StdEncoding) */
static json_object *b64_string(const uint8_t *p, size_t n) {
    struct kite_buf b = {0};
    kite_base64_append(&b, p, n, false);
    json_object *o = json_object_new_string_len(b.p ? b.p : "", (int)b.len);
    kite_buf_release(&b);
    return o;
}

/* ---- decoding ------------------------------------------------------------------------- */

struct rd {
    const uint8_t *p, *end;
};

struct dec {
    int max_depth;
    char *err;
    int code; /* -EINVAL or -ENOTSUP */
};

KITE_PRINTF(3, 4) static int fail(struct dec *d, int code, const char *fmt, ...) {
    if (!d->err) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&d->err, fmt, ap) < 0) d->err = NULL;
        va_end(ap);
        d->code = code;
    }
    return code;
}

/* A varint of at most 10 bytes whose 10th carries only the 64th bit (as Go's decoder). */
static int read_varint(struct dec *d, struct rd *r, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned shift = 0, i = 0;; shift += 7, i++) {
        if (r->p >= r->end) return fail(d, -EINVAL, "unexpected EOF");
        uint8_t b = *r->p++;
        if (i == 9 && b > 1) return fail(d, -EINVAL, "proto: integer overflow");
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    *v = x;
    return 0;
}

static int read_len(struct dec *d, struct rd *r, struct rd *sub) {
    uint64_t n;
    int e = read_varint(d, r, &n);
    if (e < 0) return e;
    if (n > (uint64_t)(r->end - r->p)) return fail(d, -EINVAL, "unexpected EOF");
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return 0;
}

static int skip_field(struct dec *d, struct rd *r, unsigned wt) {
    uint64_t v;
    struct rd sub;
    switch (wt) {
    case WT_VARINT: return read_varint(d, r, &v);
    case WT_LEN: return read_len(d, r, &sub);
    case WT_FIXED64:
    case WT_FIXED32: {
        size_t n = wt == WT_FIXED64 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n) return fail(d, -EINVAL, "unexpected EOF");
        r->p += n;
        return 0;
    }
    default: return fail(d, -EINVAL, "proto: illegal wireType %u", wt);
    }
}

static int read_tag(struct dec *d, struct rd *r, uint64_t *num, unsigned *wt) {
    uint64_t t;
    int e = read_varint(d, r, &t);
    if (e < 0) return e;
    *num = t >> 3;
    *wt = (unsigned)(t & 7);
    if (*num == 0 || *num > 0x1fffffff) return fail(d, -EINVAL, "proto: illegal tag %llu", (unsigned long long)*num);
    return 0;
}

static int decode_message(struct dec *d, const struct kite_schema *s, struct rd r, int depth, json_object *into);

/* {1 seconds, 2 nanos}; an empty message is the zero time (NULL). Time keeps seconds alone,
 * as Go's Time.Unmarshal. */
static int decode_time(struct dec *d, const struct kite_schema *s, struct rd r, json_object **ret) {
    *ret = NULL;
    if (r.p == r.end) return 0;
    int64_t sec = 0;
    int32_t nsec = 0;
    while (r.p < r.end) {
        uint64_t num, v;
        unsigned wt;
        if (read_tag(d, &r, &num, &wt) < 0) return d->code;
        if (num > 2) {
            if (skip_field(d, &r, wt) < 0) return d->code;
            continue;
        }
        if (wt != WT_VARINT) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %s", wt, num == 1 ? "Seconds" : "Nanos");
        if (read_varint(d, &r, &v) < 0) return d->code;
        if (num == 1) sec = (int64_t)v;
        else nsec = (int32_t)v;
    }
    bool micro = s->type == KITE_SCHEMA_MICROTIME;
    char out[32];
    if (kite_gotime_format(sec, micro ? nsec : 0, micro, out) < 0)
        return fail(d, -EINVAL, "time out of range: %lld seconds, %d nanoseconds", (long long)sec, (int)nsec);
    *ret = json_object_new_string(out);
    return 0;
}

/* A message of one string field (Quantity {1 string}, FieldsV1 {1 raw}): its bytes. */
static int decode_wrapped_bytes(struct dec *d, struct rd r, const char *field, struct rd *ret) {
    ret->p = ret->end = NULL;
    while (r.p < r.end) {
        uint64_t num;
        unsigned wt;
        if (read_tag(d, &r, &num, &wt) < 0) return d->code;
        if (num != 1) {
            if (skip_field(d, &r, wt) < 0) return d->code;
            continue;
        }
        if (wt != WT_LEN) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %s", wt, field);
        if (read_len(d, &r, ret) < 0) return d->code;
    }
    return 0;
}

static int decode_int_or_string(struct dec *d, struct rd r, json_object **ret) {
    uint64_t type = 0, ival = 0;
    struct rd str = {NULL, NULL};
    while (r.p < r.end) {
        uint64_t num;
        unsigned wt;
        if (read_tag(d, &r, &num, &wt) < 0) return d->code;
        if (num == 1 || num == 2) {
            if (wt != WT_VARINT) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %s", wt, num == 1 ? "Type" : "IntVal");
            if (read_varint(d, &r, num == 1 ? &type : &ival) < 0) return d->code;
        } else if (num == 3) {
            if (wt != WT_LEN) return fail(d, -EINVAL, "proto: wrong wireType = %u for field StrVal", wt);
            if (read_len(d, &r, &str) < 0) return d->code;
        } else if (skip_field(d, &r, wt) < 0) {
            return d->code;
        }
    }
    *ret = type == 1 ? json_object_new_string_len(str.p ? (const char *)str.p : "", (int)(str.end - str.p))
                     : json_object_new_int((int32_t)ival);
    return 0;
}

/* One value of schema s read with wire type wt; *ret NULL when it is the zero value. */
static int decode_value(struct dec *d, const struct kite_schema *s, const char *name, struct rd *r, unsigned wt,
                        int depth, json_object **ret) {
    *ret = NULL;
    bool varint = s->type == KITE_SCHEMA_INT32 || s->type == KITE_SCHEMA_INT64 || s->type == KITE_SCHEMA_BOOL;
    unsigned want = varint ? WT_VARINT : s->type == KITE_SCHEMA_FLOAT ? WT_FIXED64 : WT_LEN;
    if (s->type == KITE_SCHEMA_RAW && s != &kite_schema_fields_v1 && s != &kite_schema_raw_extension)
        return fail(d, -ENOTSUP, "the field %s cannot be read from protobuf by this server; send the object as application/json", name);
    if (wt != want) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %s", wt, name);
    uint64_t v;
    struct rd sub;
    if (varint) {
        if (read_varint(d, r, &v) < 0) return d->code;
    } else if (want == WT_FIXED64) {
        if (r->end - r->p < 8) return fail(d, -EINVAL, "unexpected EOF");
        memcpy(&v, r->p, 8); /* little-endian hosts only, as the rest of kite */
        r->p += 8;
        double f;
        memcpy(&f, &v, 8);
        /* JSON has no NaN nor infinities (Go's encoder refuses them too) */
        if (!isfinite(f)) return fail(d, -EINVAL, "the field %s holds an unsupported value: %g", name, f);
        *ret = json_object_new_double(f);
        return 0;
    } else if (read_len(d, r, &sub) < 0) {
        return d->code;
    }
    switch (s->type) {
    case KITE_SCHEMA_STRING:
        *ret = json_object_new_string_len((const char *)sub.p, (int)(sub.end - sub.p));
        return 0;
    case KITE_SCHEMA_BYTES: *ret = b64_string(sub.p, (size_t)(sub.end - sub.p)); return 0;
    case KITE_SCHEMA_INT32: *ret = json_object_new_int((int32_t)v); return 0;
    case KITE_SCHEMA_INT64: *ret = json_object_new_int64((int64_t)v); return 0;
    case KITE_SCHEMA_BOOL: *ret = json_object_new_boolean(v != 0); return 0;
    case KITE_SCHEMA_TIME:
    case KITE_SCHEMA_MICROTIME: return decode_time(d, s, sub, ret);
    case KITE_SCHEMA_QUANTITY: {
        struct rd q;
        if (decode_wrapped_bytes(d, sub, "String_", &q) < 0) return d->code;
        *ret = q.p && q.p < q.end ? json_object_new_string_len((const char *)q.p, (int)(q.end - q.p)) : json_object_new_string("0");
        return 0;
    }
    case KITE_SCHEMA_INT_OR_STRING: return decode_int_or_string(d, sub, ret);
    case KITE_SCHEMA_RAW: { /* FieldsV1, RawExtension: the JSON text */
        struct rd raw;
        if (decode_wrapped_bytes(d, sub, "Raw", &raw) < 0) return d->code;
        if (!raw.p || raw.p == raw.end) return 0;
        enum json_tokener_error e;
        size_t used;
        size_t n = (size_t)(raw.end - raw.p);
        json_object *o = kite_json_parse((const char *)raw.p, n, d->max_depth - depth > 1 ? d->max_depth - depth : 1, &e, &used);
        if (!o || e != json_tokener_success || used != n) {
            json_object_put(o);
            return fail(d, -EINVAL, "the field %s does not hold valid JSON", name);
        }
        *ret = o;
        return 0;
    }
    case KITE_SCHEMA_OBJECT: {
        json_object *o = json_object_new_object();
        if (decode_message(d, s, sub, depth + 1, o) < 0) {
            json_object_put(o);
            return d->code;
        }
        *ret = o;
        return 0;
    }
    default: return fail(d, -ENOTSUP, "the field %s cannot be read from protobuf by this server", name);
    }
}

static bool is_zero(json_object *o) {
    switch (json_object_get_type(o)) {
    case json_type_null: return true;
    case json_type_string: return json_object_get_string_len(o) == 0;
    case json_type_int: return json_object_get_int64(o) == 0;
    case json_type_boolean: return !json_object_get_boolean(o);
    case json_type_double: return json_object_get_double(o) == 0;
    default: return false;
    }
}

/* A map entry {1 key, 2 value} into m. */
static int decode_map_entry(struct dec *d, const struct kite_schema *s, const char *name, struct rd r, int depth,
                            json_object *m) {
    struct rd key = {NULL, NULL};
    json_object *val = NULL;
    while (r.p < r.end) {
        uint64_t num;
        unsigned wt;
        if (read_tag(d, &r, &num, &wt) < 0) goto err;
        if (num == 1) {
            if (wt != WT_LEN) {
                fail(d, -EINVAL, "proto: wrong wireType = %u for field %s key", wt, name);
                goto err;
            }
            if (read_len(d, &r, &key) < 0) goto err;
        } else if (num == 2) {
            json_object_put(val);
            if (decode_value(d, s->elem, name, &r, wt, depth, &val) < 0) goto err;
        } else if (skip_field(d, &r, wt) < 0) {
            goto err;
        }
    }
    if (!val) { /* the zero value of the element */
        if (s->elem->type == KITE_SCHEMA_QUANTITY) val = json_object_new_string("0");
        else if (s->elem->type == KITE_SCHEMA_OBJECT) val = json_object_new_object();
        else if (s->elem->type == KITE_SCHEMA_STRING || s->elem->type == KITE_SCHEMA_BYTES) val = json_object_new_string("");
    }
    size_t kn = (size_t)(key.end - key.p);
    if (key.p && memchr(key.p, 0, kn)) {
        fail(d, -EINVAL, "a key of the field %s contains the NUL character", name);
        goto err;
    }
    char *k = kite_strndup(key.p ? (const char *)key.p : "", kn);
    json_object_object_add(m, k, val);
    free(k);
    return 0;
err:
    json_object_put(val);
    return d->code;
}

static int decode_message(struct dec *d, const struct kite_schema *s, struct rd r, int depth, json_object *into) {
    if (depth > d->max_depth) return fail(d, -EINVAL, "the message nests deeper than %d levels", d->max_depth);
    while (r.p < r.end) {
        uint64_t num;
        unsigned wt;
        if (read_tag(d, &r, &num, &wt) < 0) return d->code;
        const struct kite_schema_field *f = NULL;
        for (const struct kite_schema_field *g = s->fields; g && g->name; g++)
            if (g->number == num) {
                f = g;
                break;
            }
        if (!f) {
            if (skip_field(d, &r, wt) < 0) return d->code;
            continue;
        }
        const struct kite_schema *fs = f->schema;
        json_object *v = NULL;
        if (f->flags & KITE_SCHEMA_INLINE) { /* an embedded struct: its fields are into's */
            struct rd sub;
            if (wt != WT_LEN) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %s", wt, f->name);
            if (read_len(d, &r, &sub) < 0 || decode_message(d, fs, sub, depth + 1, into) < 0) return d->code;
            continue;
        }
        if (fs->type == KITE_SCHEMA_MAP || fs->type == KITE_SCHEMA_LIST) {
            json_object *c = NULL;
            bool map = fs->type == KITE_SCHEMA_MAP;
            if (!json_object_object_get_ex(into, f->name, &c) ||
                !json_object_is_type(c, map ? json_type_object : json_type_array)) {
                c = map ? json_object_new_object() : json_object_new_array();
                json_object_object_add(into, f->name, c);
            }
            if (map) {
                struct rd sub;
                if (wt != WT_LEN) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %s", wt, f->name);
                if (read_len(d, &r, &sub) < 0 || decode_map_entry(d, fs, f->name, sub, depth + 1, c) < 0) return d->code;
            } else {
                if (fs->elem->type == KITE_SCHEMA_LIST || fs->elem->type == KITE_SCHEMA_MAP)
                    return fail(d, -ENOTSUP, "the field %s cannot be read from protobuf by this server", f->name);
                if (decode_value(d, fs->elem, f->name, &r, wt, depth, &v) < 0) return d->code;
                /* an element keeps its zero value: a list's length is data */
                if (!v && fs->elem->type == KITE_SCHEMA_OBJECT) v = json_object_new_object();
                json_object_array_add(c, v);
            }
            continue;
        }
        if (fs->type == KITE_SCHEMA_OBJECT) {
            /* a message given twice merges, as protobuf's */
            json_object *c = NULL;
            struct rd sub;
            if (wt != WT_LEN) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %s", wt, f->name);
            if (read_len(d, &r, &sub) < 0) return d->code;
            if (!json_object_object_get_ex(into, f->name, &c) || !json_object_is_type(c, json_type_object)) {
                c = json_object_new_object();
                json_object_object_add(into, f->name, c);
            }
            if (decode_message(d, fs, sub, depth + 1, c) < 0) return d->code;
            continue;
        }
        if (decode_value(d, fs, f->name, &r, wt, depth, &v) < 0) return d->code;
        if (v && (!is_zero(v) || (f->flags & KITE_SCHEMA_KEEP_ZERO))) {
            json_object_object_add(into, f->name, v);
        } else {
            json_object_put(v);
            json_object_object_del(into, f->name); /* the last value wins, a zero one too */
        }
    }
    return 0;
}

struct envelope {
    struct rd api_version, kind, raw, encoding;
};

static int decode_envelope(struct dec *d, const void *data, size_t len, struct envelope *env) {
    memset(env, 0, sizeof *env);
    if (len < KITE_PB_MAGIC_LEN || memcmp(data, KITE_PB_MAGIC, KITE_PB_MAGIC_LEN) != 0)
        return fail(d, -EINVAL, "the body does not start with the protobuf prefix \"k8s\\x00\"");
    struct rd r = {(const uint8_t *)data + KITE_PB_MAGIC_LEN, (const uint8_t *)data + len};
    while (r.p < r.end) {
        uint64_t num;
        unsigned wt;
        if (read_tag(d, &r, &num, &wt) < 0) return d->code;
        if (num < 1 || num > 4) {
            if (skip_field(d, &r, wt) < 0) return d->code;
            continue;
        }
        if (wt != WT_LEN) return fail(d, -EINVAL, "proto: wrong wireType = %u for field %llu of runtime.Unknown", wt, (unsigned long long)num);
        struct rd sub;
        if (read_len(d, &r, &sub) < 0) return d->code;
        if (num == 2) env->raw = sub;
        else if (num == 3) env->encoding = sub;
        else if (num == 1) {
            while (sub.p < sub.end) { /* TypeMeta {1 apiVersion, 2 kind} */
                uint64_t n2;
                unsigned wt2;
                if (read_tag(d, &sub, &n2, &wt2) < 0) return d->code;
                if (n2 != 1 && n2 != 2) {
                    if (skip_field(d, &sub, wt2) < 0) return d->code;
                    continue;
                }
                if (wt2 != WT_LEN) return fail(d, -EINVAL, "proto: wrong wireType = %u for field of TypeMeta", wt2);
                if (read_len(d, &sub, n2 == 1 ? &env->api_version : &env->kind) < 0) return d->code;
            }
        }
    }
    if (env->encoding.p != env->encoding.end)
        return fail(d, -ENOTSUP, "the protobuf body's content encoding \"%.*s\" is not supported",
                    (int)(env->encoding.end - env->encoding.p), (const char *)env->encoding.p);
    return 0;
}

static void set_rd_string(json_object *o, const char *key, struct rd v) {
    if (v.p == v.end) return;
    json_object_object_add(o, key, json_object_new_string_len((const char *)v.p, (int)(v.end - v.p)));
}

int kite_pb_decode(const struct kite_schema *s, const void *data, size_t len, int max_depth, json_object **ret,
                   char **ret_err) {
    struct dec d = {.max_depth = max_depth};
    struct envelope env;
    json_object *o = NULL;
    *ret = NULL;
    if (decode_envelope(&d, data, len, &env) == 0) {
        o = json_object_new_object();
        /* a root that names them (every kind, Status, DeleteOptions) */
        for (const struct kite_schema_field *f = s->fields; f && f->name; f++) {
            if (strcmp(f->name, "kind") == 0) set_rd_string(o, "kind", env.kind);
            if (strcmp(f->name, "apiVersion") == 0) set_rd_string(o, "apiVersion", env.api_version);
        }
        if (env.raw.p && decode_message(&d, s, env.raw, 1, o) == 0) {
            *ret = o;
            return 0;
        }
        if (!env.raw.p) {
            *ret = o;
            return 0;
        }
    }
    json_object_put(o);
    if (ret_err) *ret_err = d.err ? d.err : kite_strdup("cannot decode");
    else free(d.err);
    return d.code ? d.code : -EINVAL;
}

/* ---- encoding ------------------------------------------------------------------------- */

static void put_varint(struct kite_buf *b, uint64_t v) {
    char t[10];
    size_t n = 0;
    do {
        t[n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    kite_buf_append(b, t, n);
}

static void put_tag(struct kite_buf *b, unsigned num, unsigned wt) { put_varint(b, (uint64_t)num << 3 | wt); }

static void put_bytes(struct kite_buf *b, unsigned num, const void *p, size_t n) {
    put_tag(b, num, WT_LEN);
    put_varint(b, n);
    kite_buf_append(b, p, n);
}

static void put_string(struct kite_buf *b, unsigned num, json_object *s) {
    put_bytes(b, num, json_object_get_string(s), (size_t)json_object_get_string_len(s));
}

static int encode_message(const struct kite_schema *s, json_object *obj, struct kite_buf *b, int depth);

/* A JSON integer (json-c keeps integral doubles such as -0 as doubles) into *v. */
static int json_int(json_object *o, int64_t *v) {
    if (json_object_is_type(o, json_type_int)) {
        *v = json_object_get_int64(o);
        return 0;
    }
    return -ENOTSUP;
}

static int encode_value(const struct kite_schema *s, unsigned num, json_object *v, struct kite_buf *b, int depth) {
    int64_t i;
    struct kite_buf sub = {0};
    int r = 0;
    switch (s->type) {
    case KITE_SCHEMA_STRING:
        if (!json_object_is_type(v, json_type_string)) return -ENOTSUP;
        put_string(b, num, v);
        return 0;
    case KITE_SCHEMA_INT32:
    case KITE_SCHEMA_INT64:
        if (json_int(v, &i) < 0) return -ENOTSUP;
        if (s->type == KITE_SCHEMA_INT32 && (i < INT32_MIN || i > INT32_MAX)) return -ENOTSUP;
        put_tag(b, num, WT_VARINT);
        put_varint(b, (uint64_t)i);
        return 0;
    case KITE_SCHEMA_BOOL:
        if (!json_object_is_type(v, json_type_boolean)) return -ENOTSUP;
        put_tag(b, num, WT_VARINT);
        put_varint(b, json_object_get_boolean(v) ? 1 : 0);
        return 0;
    case KITE_SCHEMA_FLOAT: {
        if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) return -ENOTSUP;
        double f = json_object_get_double(v);
        put_tag(b, num, WT_FIXED64);
        kite_buf_append(b, &f, 8);
        return 0;
    }
    case KITE_SCHEMA_BYTES:
        if (!json_object_is_type(v, json_type_string)) return -ENOTSUP;
        r = kite_base64_decode_std(json_object_get_string(v), (size_t)json_object_get_string_len(v), &sub, NULL) < 0 ? -ENOTSUP : 0;
        if (r == 0) put_bytes(b, num, sub.p ? sub.p : "", sub.len);
        break;
    case KITE_SCHEMA_QUANTITY:
        if (json_object_is_type(v, json_type_string)) put_string(&sub, 1, v);
        else if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) {
            const char *t = json_object_to_json_string(v);
            put_bytes(&sub, 1, t, strlen(t));
        } else return -ENOTSUP;
        put_bytes(b, num, sub.p, sub.len);
        break;
    case KITE_SCHEMA_TIME:
    case KITE_SCHEMA_MICROTIME: {
        int64_t sec;
        int32_t nsec;
        if (!json_object_is_type(v, json_type_string) || kite_gotime_parse(json_object_get_string(v), false, &sec, &nsec, NULL) < 0)
            return -ENOTSUP;
        if (s->type == KITE_SCHEMA_TIME) nsec = 0;
        else nsec -= nsec % 1000;
        put_tag(&sub, 1, WT_VARINT);
        put_varint(&sub, (uint64_t)sec);
        put_tag(&sub, 2, WT_VARINT);
        put_varint(&sub, (uint64_t)(int64_t)nsec);
        put_bytes(b, num, sub.p, sub.len);
        break;
    }
    case KITE_SCHEMA_INT_OR_STRING:
        if (json_object_is_type(v, json_type_string)) {
            put_tag(&sub, 1, WT_VARINT);
            put_varint(&sub, 1);
            put_tag(&sub, 2, WT_VARINT);
            put_varint(&sub, 0);
            put_string(&sub, 3, v);
        } else if (json_int(v, &i) == 0 && i >= INT32_MIN && i <= INT32_MAX) {
            put_tag(&sub, 1, WT_VARINT);
            put_varint(&sub, 0);
            put_tag(&sub, 2, WT_VARINT);
            put_varint(&sub, (uint64_t)i);
            put_bytes(&sub, 3, "", 0);
        } else return -ENOTSUP;
        put_bytes(b, num, sub.p, sub.len);
        break;
    case KITE_SCHEMA_RAW: {
        if (s != &kite_schema_fields_v1 && s != &kite_schema_raw_extension) return -ENOTSUP;
        const char *t = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        put_bytes(&sub, 1, t, strlen(t));
        put_bytes(b, num, sub.p, sub.len);
        break;
    }
    case KITE_SCHEMA_OBJECT:
        if (!json_object_is_type(v, json_type_object)) return -ENOTSUP;
        r = encode_message(s, v, &sub, depth + 1);
        if (r == 0) put_bytes(b, num, sub.p ? sub.p : "", sub.len);
        break;
    case KITE_SCHEMA_MAP: {
        if (!json_object_is_type(v, json_type_object)) return -ENOTSUP;
        /* Go writes map entries in key order */
        size_t n, k;
        const char **keys = kite_obj_sorted_keys(v, NULL, &n);
        for (k = 0; k < n && r == 0; k++) {
            json_object *ev = json_object_object_get(v, keys[k]);
            if (!ev) {
                r = -ENOTSUP;
                break;
            }
            kite_buf_reset(&sub);
            put_bytes(&sub, 1, keys[k], strlen(keys[k]));
            r = encode_value(s->elem, 2, ev, &sub, depth + 1);
            if (r == 0) put_bytes(b, num, sub.p, sub.len);
        }
        free(keys);
        break;
    }
    case KITE_SCHEMA_LIST: {
        if (!json_object_is_type(v, json_type_array)) return -ENOTSUP;
        if (s->elem->type == KITE_SCHEMA_LIST || s->elem->type == KITE_SCHEMA_MAP) return -ENOTSUP;
        size_t n = json_object_array_length(v);
        for (size_t k = 0; k < n && r == 0; k++) {
            json_object *e = json_object_array_get_idx(v, k);
            r = e ? encode_value(s->elem, num, e, b, depth) : -ENOTSUP;
        }
        break;
    }
    }
    kite_buf_release(&sub);
    return r;
}

struct numbered {
    unsigned number;
    const struct kite_schema *schema;
    json_object *value;
    bool inl; /* an inline struct: value is the parent object */
};

/* k is a field of one of s's inline structs. */
static bool inline_field(const struct kite_schema *s, const char *k) {
    for (const struct kite_schema_field *g = s->fields; g && g->name; g++) {
        if (!(g->flags & KITE_SCHEMA_INLINE)) continue;
        for (const struct kite_schema_field *h = g->schema->fields; h && h->name; h++)
            if (strcmp(h->name, k) == 0) return true;
    }
    return false;
}

static int encode_fields(const struct kite_schema *s, json_object *obj, struct kite_buf *b, int depth, bool lenient);

static int by_number(const void *a, const void *b) {
    unsigned x = ((const struct numbered *)a)->number, y = ((const struct numbered *)b)->number;
    return x < y ? -1 : x > y;
}

static int encode_message(const struct kite_schema *s, json_object *obj, struct kite_buf *b, int depth) {
    return encode_fields(s, obj, b, depth, false);
}

/* obj's fields s lists (lenient: obj's others are another struct's, its parent's, else a field
 * s does not know fails); an inline struct of s takes its fields from obj too. */
static int encode_fields(const struct kite_schema *s, json_object *obj, struct kite_buf *b, int depth, bool lenient) {
    /* the schemas are trees without cycles (RAW is never walked): depth is theirs, bounded */
    size_t n = (size_t)json_object_object_length(obj), k = 0, n_inl = 0;
    for (const struct kite_schema_field *g = s->fields; g && g->name; g++) n_inl += (g->flags & KITE_SCHEMA_INLINE) != 0;
    struct numbered *f = kite_calloc(n + n_inl + 1, sizeof *f);
    int r = 0;
    json_object_object_foreach(obj, key, val) {
        const struct kite_schema_field *g = s->fields;
        while (g && g->name && (strcmp(g->name, key) != 0 || (g->flags & KITE_SCHEMA_INLINE))) g++;
        if (!g || !g->name) {
            if (lenient || inline_field(s, key)) continue;
            r = -ENOTSUP; /* a field kite's schema does not know: JSON carries it, protobuf cannot */
            break;
        }
        if (!g->number || !val) continue;
        f[k++] = (struct numbered){g->number, g->schema, val, false};
    }
    /* an embedded struct is written even empty, as Go's generated code does */
    for (const struct kite_schema_field *g = s->fields; r == 0 && g && g->name; g++)
        if (g->flags & KITE_SCHEMA_INLINE) f[k++] = (struct numbered){g->number, g->schema, obj, true};
    if (r == 0) qsort(f, k, sizeof *f, by_number);
    for (size_t i = 0; i < k && r == 0; i++) {
        if (!f[i].inl) {
            r = encode_value(f[i].schema, f[i].number, f[i].value, b, depth);
            continue;
        }
        struct kite_buf sub = {0};
        r = encode_fields(f[i].schema, obj, &sub, depth + 1, true);
        if (r == 0) put_bytes(b, f[i].number, sub.p ? sub.p : "", sub.len);
        kite_buf_release(&sub);
    }
    free(f);
    return r;
}

int kite_pb_encode(const struct kite_schema *s, bool list, json_object *obj, struct kite_buf *out) {
    if (!s || !json_object_is_type(obj, json_type_object)) return -ENOTSUP;
    json_object *kind = json_object_object_get(obj, "kind"), *av = json_object_object_get(obj, "apiVersion");
    /* {1: ListMeta, 2: repeated item} with the kind's numbers for the items */
    const struct kite_schema items = {.type = KITE_SCHEMA_LIST, .elem = s};
    const struct kite_schema_field list_fields[] = {
        {"kind", &kite_schema_string, 0, 0}, {"apiVersion", &kite_schema_string, 0, 0},
        {"metadata", &kite_schema_list_meta, 1, 0}, {"items", &items, 2, 0}, {NULL, NULL, 0, 0}};
    const struct kite_schema list_schema = {.type = KITE_SCHEMA_OBJECT, .go_type = "List", .fields = list_fields};
    struct kite_buf msg = {0}, meta = {0};
    int r = encode_message(list ? &list_schema : s, obj, &msg, 1);
    if (r == 0) {
        if (av && json_object_is_type(av, json_type_string)) put_string(&meta, 1, av);
        if (kind && json_object_is_type(kind, json_type_string)) put_string(&meta, 2, kind);
        kite_buf_append(out, KITE_PB_MAGIC, KITE_PB_MAGIC_LEN);
        put_bytes(out, 1, meta.p ? meta.p : "", meta.len);
        put_bytes(out, 2, msg.p ? msg.p : "", msg.len);
        put_bytes(out, 3, "", 0);
        put_bytes(out, 4, "", 0);
    }
    kite_buf_release(&msg);
    kite_buf_release(&meta);
    return r;
}

void kite_pb_watch_frame(const char *type, const void *raw, size_t raw_len, struct kite_buf *out) {
    struct kite_buf ev = {0}, ext = {0};
    put_bytes(&ext, 1, raw, raw_len);
    put_bytes(&ev, 1, type, strlen(type));
    put_bytes(&ev, 2, ext.p ? ext.p : "", ext.len);
    unsigned char len[4] = {(unsigned char)(ev.len >> 24), (unsigned char)(ev.len >> 16), (unsigned char)(ev.len >> 8),
                            (unsigned char)ev.len};
    kite_buf_append(out, (const char *)len, sizeof len);
    kite_buf_append(out, ev.p ? ev.p : "", ev.len);
    kite_buf_release(&ev);
    kite_buf_release(&ext);
}
