/* The schema checker (schema.h): one walk over the object that checks each value against its
 * descriptor, words errors as Go's encoding/json and apimachinery's UnmarshalJSON methods do,
 * rewrites time fields in their canonical form, and checks every string's bytes. */
#include "api/schema.h"
#include "api/quantity.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/gotime.h"
#include "json/parse.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

const struct kite_schema kite_schema_raw = {.type = KITE_SCHEMA_RAW};
const struct kite_schema kite_schema_string = {.type = KITE_SCHEMA_STRING};
const struct kite_schema kite_schema_int32 = {.type = KITE_SCHEMA_INT32};
const struct kite_schema kite_schema_int64 = {.type = KITE_SCHEMA_INT64};
const struct kite_schema kite_schema_bool = {.type = KITE_SCHEMA_BOOL};
const struct kite_schema kite_schema_float = {.type = KITE_SCHEMA_FLOAT};
const struct kite_schema kite_schema_quantity = {.type = KITE_SCHEMA_QUANTITY};
const struct kite_schema kite_schema_time = {.type = KITE_SCHEMA_TIME};
const struct kite_schema kite_schema_microtime = {.type = KITE_SCHEMA_MICROTIME};
const struct kite_schema kite_schema_int_or_string = {.type = KITE_SCHEMA_INT_OR_STRING};
const struct kite_schema kite_schema_bytes = {.type = KITE_SCHEMA_BYTES};
const struct kite_schema kite_schema_fields_v1 = {.type = KITE_SCHEMA_RAW, .go_type = "FieldsV1"};
const struct kite_schema kite_schema_raw_extension = {.type = KITE_SCHEMA_RAW, .go_type = "RawExtension"};
const struct kite_schema kite_schema_bytes_map = {.type = KITE_SCHEMA_MAP, .elem = &kite_schema_bytes};
const struct kite_schema kite_schema_string_list = {.type = KITE_SCHEMA_LIST, .elem = &kite_schema_string};
const struct kite_schema kite_schema_string_map = {.type = KITE_SCHEMA_MAP, .elem = &kite_schema_string};
const struct kite_schema kite_schema_resource_list = {.type = KITE_SCHEMA_MAP, .go_type = "v1.ResourceList", .elem = &kite_schema_quantity};

#define QUANTITY_ERR "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

struct walk {
    struct kite_buf path;   /* precise: spec.taints[0].key, metadata.labels[app] */
    struct kite_buf gopath; /* as Go's decoder reports it: struct fields only, spec.taints.key */
    const char *go_struct;  /* the innermost struct being decoded */
    json_object *replace;   /* set by a value to be replaced in its parent (a quantity number) */
    char *error;
    bool unstructured;      /* words errors as the unstructured converter (kite_schema_check_unstructured) */
};

/* ---- messages ------------------------------------------------------------------------- */

static void go_type_name(const struct kite_schema *s, struct kite_buf *b) {
    switch (s->type) {
    case KITE_SCHEMA_RAW: kite_buf_puts(b, "runtime.RawExtension"); return;
    case KITE_SCHEMA_STRING: kite_buf_puts(b, "string"); return;
    case KITE_SCHEMA_INT32: kite_buf_puts(b, "int32"); return;
    case KITE_SCHEMA_INT64: kite_buf_puts(b, "int64"); return;
    case KITE_SCHEMA_BOOL: kite_buf_puts(b, "bool"); return;
    case KITE_SCHEMA_FLOAT: kite_buf_puts(b, "float64"); return;
    case KITE_SCHEMA_QUANTITY: kite_buf_puts(b, "resource.Quantity"); return;
    case KITE_SCHEMA_TIME: kite_buf_puts(b, "v1.Time"); return;
    case KITE_SCHEMA_MICROTIME: kite_buf_puts(b, "v1.MicroTime"); return;
    case KITE_SCHEMA_INT_OR_STRING: kite_buf_puts(b, "intstr.IntOrString"); return;
    case KITE_SCHEMA_BYTES: kite_buf_puts(b, "[]uint8"); return;
    case KITE_SCHEMA_OBJECT: kite_buf_printf(b, "v1.%s", s->go_type ? s->go_type : "Object"); return;
    case KITE_SCHEMA_MAP:
    case KITE_SCHEMA_LIST:
        if (s->go_type) {
            kite_buf_puts(b, s->go_type);
            return;
        }
        kite_buf_puts(b, s->type == KITE_SCHEMA_MAP ? "map[string]" : "[]");
        go_type_name(s->elem, b);
        return;
    }
}

static const char *json_kind(json_object *o) {
    switch (json_object_get_type(o)) {
    case json_type_object: return "object";
    case json_type_array: return "array";
    case json_type_string: return "string";
    case json_type_boolean: return "bool";
    default: return "number";
    }
}

/* Go's UnmarshalTypeError: value is "string", "number 1.5", ... */
static int type_error(struct walk *w, const struct kite_schema *s, const char *value) {
    struct kite_buf t = {0};
    go_type_name(s, &t);
    if (w->gopath.len && w->go_struct)
        w->error = kite_asprintf("json: cannot unmarshal %s into Go struct field %s.%s of type %s", value, w->go_struct,
                                 w->gopath.p, t.p);
    else
        w->error = kite_asprintf("json: cannot unmarshal %s into Go value of type %s", value, t.p);
    kite_buf_release(&t);
    return -EINVAL;
}

/* The unstructured converter's words (runtime.DefaultUnstructuredConverter.FromUnstructured,
 * which decodes a strategic merge patch's result): the value's Go kind as json decoding into
 * interface{} makes it (integers int64, other numbers float64), and for a scalar field Go's
 * conversion rules: an integer converts to a string and a float to an integer, but the
 * converter then refuses the result; other pairs are not convertible at all. */
static int conv_error(struct walk *w, const struct kite_schema *s, json_object *o) {
    static const char *const kinds[] = {[json_type_null] = "invalid", [json_type_boolean] = "bool",
                                        [json_type_double] = "float64", [json_type_int] = "int64",
                                        [json_type_object] = "map", [json_type_array] = "slice",
                                        [json_type_string] = "string"};
    const char *k = kinds[json_object_get_type(o)];
    struct kite_buf t = {0};
    switch (s->type) {
    case KITE_SCHEMA_OBJECT: w->error = kite_asprintf("cannot restore struct from: %s", k); break;
    case KITE_SCHEMA_MAP: w->error = kite_asprintf("cannot restore map from %s", k); break;
    case KITE_SCHEMA_LIST: w->error = kite_asprintf("cannot restore slice from %s", k); break;
    default: {
        go_type_name(s, &t);
        bool convertible = (json_object_is_type(o, json_type_int) && s->type == KITE_SCHEMA_STRING) ||
                           (json_object_is_type(o, json_type_double) &&
                            (s->type == KITE_SCHEMA_INT32 || s->type == KITE_SCHEMA_INT64));
        w->error = convertible ? kite_asprintf("cannot convert %s to %s", k, t.p) : kite_asprintf("unrecognized type: %s", t.p);
    }
    }
    kite_buf_release(&t);
    return -EINVAL;
}

/* ---- the walk -------------------------------------------------------------------------- */

static int check_string_bytes(struct walk *w, const char *s, size_t n, bool key) {
    size_t bad = kite_utf8_invalid_at(s, n);
    if (bad != n) {
        w->error = kite_asprintf("the %s at %s is not valid UTF-8", key ? "key" : "string", w->path.len ? w->path.p : ".");
        return -EINVAL;
    }
    if (memchr(s, 0, n)) {
        w->error = kite_asprintf("the %s at %s contains the NUL character (\\u0000), which is not supported",
                                 key ? "key" : "string", w->path.len ? w->path.p : ".");
        return -EINVAL;
    }
    return 0;
}

static void push_field(struct walk *w, const char *name, size_t *saved, size_t *gsaved, bool go) {
    *saved = w->path.len;
    *gsaved = w->gopath.len;
    if (w->path.len) kite_buf_putc(&w->path, '.');
    kite_buf_puts(&w->path, name);
    if (go) {
        if (w->gopath.len) kite_buf_putc(&w->gopath, '.');
        kite_buf_puts(&w->gopath, name);
    }
}

/* "[i]" without printf: the walk pushes one per list element of every write. */
static void push_index(struct kite_buf *b, size_t i) {
    char d[24];
    size_t n = 0;
    do d[n++] = (char)('0' + i % 10); while ((i /= 10) > 0);
    kite_buf_putc(b, '[');
    while (n) kite_buf_putc(b, d[--n]);
    kite_buf_putc(b, ']');
}

static void pop(struct walk *w, size_t saved, size_t gsaved) {
    w->path.len = saved;
    if (w->path.p) w->path.p[saved] = 0;
    w->gopath.len = gsaved;
    if (w->gopath.p) w->gopath.p[gsaved] = 0;
}

static int walk_value(struct walk *w, const struct kite_schema *s, json_object *o);

static int mismatch(struct walk *w, const struct kite_schema *s, json_object *o) {
    return w->unstructured ? conv_error(w, s, o) : type_error(w, s, json_kind(o));
}

static int check_int(struct walk *w, const struct kite_schema *s, json_object *o, int64_t lo, int64_t hi) {
    char value[64];
    if (w->unstructured && !json_object_is_type(o, json_type_int)) {
        /* the converter takes a float with no fraction */
        if (json_object_is_type(o, json_type_double) && json_object_get_double(o) == (double)(int64_t)json_object_get_double(o))
            return 0;
        return conv_error(w, s, o);
    }
    if (json_object_is_type(o, json_type_double)) {
        /* json-c keeps a number's text for doubles: "-0" is an integer to Go, "1.5" and "1e3" not */
        const char *t = json_object_to_json_string(o);
        if (strspn(t + (*t == '-'), "0123456789") != strlen(t + (*t == '-'))) {
            snprintf(value, sizeof value, "number %.40s", t);
            return type_error(w, s, value);
        }
        return 0;
    }
    if (!json_object_is_type(o, json_type_int)) return type_error(w, s, json_kind(o));
    int64_t v = json_object_get_int64(o);
    uint64_t u = v == INT64_MAX ? json_object_get_uint64(o) : 0;
    if (v >= lo && v <= hi && u <= (uint64_t)INT64_MAX) return 0;
    /* json-c saturates integers past the int64/uint64 range: their digits are lost */
    if (u == UINT64_MAX || v == INT64_MIN) return type_error(w, s, "number");
    if (u > (uint64_t)INT64_MAX) snprintf(value, sizeof value, "number %llu", (unsigned long long)u);
    else snprintf(value, sizeof value, "number %lld", (long long)v);
    return type_error(w, s, value);
}

static int check_time(struct walk *w, const struct kite_schema *s, json_object *o) {
    bool micro = s->type == KITE_SCHEMA_MICROTIME;
    if (!json_object_is_type(o, json_type_string)) {
        /* Time.UnmarshalJSON decodes a string first */
        w->error = kite_asprintf("json: cannot unmarshal %s into Go value of type string", json_kind(o));
        return -EINVAL;
    }
    const char *str = json_object_get_string(o);
    int64_t secs;
    int32_t nsec;
    if (kite_gotime_parse(str, micro, &secs, &nsec, &w->error) < 0) return -EINVAL;
    /* A valid time of exactly the canonical layout's shape (UTC, 0 or 6 fraction digits) is
     * canonical already: no formatting on the write path of every lease renewal. */
    size_t len = (size_t)json_object_get_string_len(o);
    if (len == (micro ? 27u : 20u) && str[len - 1] == 'Z' && (!micro || str[19] == '.')) return 0;
    char canon[32];
    kite_gotime_format(secs, nsec, micro, canon);
    if (strcmp(canon, str) != 0) json_object_set_string(o, canon);
    return 0;
}

/* []byte decodes from standard base64 with padding, as Go's encoding/json; its error names the
 * first offending byte. */
static int check_bytes(struct walk *w, json_object *o) {
    if (!json_object_is_type(o, json_type_string)) {
        w->error = kite_asprintf("json: cannot unmarshal %s into Go value of type []uint8", json_kind(o));
        return -EINVAL;
    }
    size_t bad = 0;
    if (kite_base64_decode_std(json_object_get_string(o), (size_t)json_object_get_string_len(o), NULL, &bad) < 0) {
        w->error = kite_asprintf("illegal base64 data at input byte %zu", bad);
        return -EINVAL;
    }
    return 0;
}

static int check_quantity(struct walk *w, json_object *o) {
    int64_t milli;
    if (json_object_is_type(o, json_type_string)) {
        const char *str = json_object_get_string(o);
        /* Quantity.UnmarshalJSON trims spaces, then ParseQuantity; kite keeps the text */
        if (kite_quantity_parse_milli(str, &milli) == -EINVAL) goto bad;
        return 0;
    }
    if (json_object_is_type(o, json_type_int) || json_object_is_type(o, json_type_double)) {
        /* a bare number is a quantity too; stored as the string Kubernetes serializes */
        const char *t = json_object_to_json_string(o);
        if (kite_quantity_parse_milli(t, &milli) == -EINVAL) goto bad;
        w->replace = json_object_new_string(t);
        return 0;
    }
bad:
    w->error = kite_strdup(QUANTITY_ERR);
    return -EINVAL;
}

static int walk_object(struct walk *w, const struct kite_schema *s, json_object *o) {
    const char *saved_struct = w->go_struct;
    if (s->go_type) w->go_struct = s->go_type;
    int r = 0;
    json_object_object_foreach(o, k, v) {
        const struct kite_schema *fs = &kite_schema_raw;
        bool known = false;
        for (const struct kite_schema_field *f = s->fields; f && f->name; f++)
            if (strcmp(f->name, k) == 0) {
                fs = f->schema;
                known = true;
                break;
            }
        size_t saved, gsaved;
        push_field(w, k, &saved, &gsaved, known);
        if ((r = check_string_bytes(w, k, strlen(k), true)) == 0) r = walk_value(w, fs, v);
        if (w->replace) json_object_object_add(o, k, TAKE_PTR(w->replace)); /* in place: the walk goes on */
        pop(w, saved, gsaved);
        if (r < 0) break;
    }
    w->go_struct = saved_struct;
    return r;
}

static int walk_value(struct walk *w, const struct kite_schema *s, json_object *o) {
    if (!o) return 0; /* null: the zero value */
    if (json_object_is_type(o, json_type_string)) {
        int r = check_string_bytes(w, json_object_get_string(o), (size_t)json_object_get_string_len(o), false);
        if (r < 0) return r;
    }
    switch (s->type) {
    case KITE_SCHEMA_RAW:
        if (json_object_is_type(o, json_type_object)) {
            static const struct kite_schema open = {.type = KITE_SCHEMA_OBJECT};
            return walk_object(w, &open, o);
        }
        if (json_object_is_type(o, json_type_array)) {
            static const struct kite_schema any_list = {.type = KITE_SCHEMA_LIST, .elem = &kite_schema_raw};
            return walk_value(w, &any_list, o);
        }
        return 0;
    case KITE_SCHEMA_STRING:
        return json_object_is_type(o, json_type_string) ? 0 : mismatch(w, s, o);
    case KITE_SCHEMA_BOOL:
        return json_object_is_type(o, json_type_boolean) ? 0 : mismatch(w, s, o);
    case KITE_SCHEMA_FLOAT:
        return json_object_is_type(o, json_type_int) || json_object_is_type(o, json_type_double)
                   ? 0 : mismatch(w, s, o);
    case KITE_SCHEMA_INT32: return check_int(w, s, o, INT32_MIN, INT32_MAX);
    case KITE_SCHEMA_INT64: return check_int(w, s, o, INT64_MIN, INT64_MAX);
    case KITE_SCHEMA_INT_OR_STRING:
        return json_object_is_type(o, json_type_string) ? 0 : check_int(w, &kite_schema_int32, o, INT32_MIN, INT32_MAX);
    case KITE_SCHEMA_QUANTITY: return check_quantity(w, o);
    case KITE_SCHEMA_BYTES: return check_bytes(w, o);
    case KITE_SCHEMA_TIME:
    case KITE_SCHEMA_MICROTIME: return check_time(w, s, o);
    case KITE_SCHEMA_OBJECT:
        if (!json_object_is_type(o, json_type_object)) return mismatch(w, s, o);
        return walk_object(w, s, o);
    case KITE_SCHEMA_MAP: {
        if (!json_object_is_type(o, json_type_object)) return mismatch(w, s, o);
        json_object_object_foreach(o, k, v) {
            size_t saved = w->path.len;
            kite_buf_putc(&w->path, '[');
            kite_buf_puts(&w->path, k);
            kite_buf_putc(&w->path, ']');
            int r = check_string_bytes(w, k, strlen(k), true);
            if (r == 0) r = walk_value(w, s->elem, v);
            if (w->replace) json_object_object_add(o, k, TAKE_PTR(w->replace));
            pop(w, saved, w->gopath.len);
            if (r < 0) return r;
        }
        return 0;
    }
    case KITE_SCHEMA_LIST: {
        if (!json_object_is_type(o, json_type_array)) return mismatch(w, s, o);
        size_t n = json_object_array_length(o);
        for (size_t i = 0; i < n; i++) {
            size_t saved = w->path.len;
            push_index(&w->path, i);
            int r = walk_value(w, s->elem, json_object_array_get_idx(o, i));
            if (w->replace) json_object_array_put_idx(o, i, TAKE_PTR(w->replace));
            pop(w, saved, w->gopath.len);
            if (r < 0) return r;
        }
        return 0;
    }
    }
    return 0;
}

static int check(const struct kite_schema *s, json_object *obj, bool unstructured, char **ret_error) {
    struct walk w = {.unstructured = unstructured};
    kite_buf_puts(&w.path, "");
    kite_buf_puts(&w.gopath, "");
    int r = walk_value(&w, s ? s : &kite_schema_raw, obj);
    kite_buf_release(&w.path);
    kite_buf_release(&w.gopath);
    json_object_put(w.replace); /* a root cannot be a quantity */
    if (r < 0) {
        if (ret_error) *ret_error = w.error;
        else free(w.error);
        return -EINVAL;
    }
    return 0;
}

int kite_schema_check(const struct kite_schema *s, json_object *obj, char **ret_error) {
    return check(s, obj, false, ret_error);
}

int kite_schema_check_unstructured(const struct kite_schema *s, json_object *obj, char **ret_error) {
    return check(s, obj, true, ret_error);
}

/* ---- unknown fields -------------------------------------------------------------------- */

struct unknown {
    struct kite_buf path; /* "spec.containers[0]" */
    bool drop;
    size_t n;
    void (*found)(void *ud, const char *path);
    void *ud;
};

static void unknown_value(struct unknown *u, const struct kite_schema *s, json_object *o, int depth);

static const struct kite_schema_field *field_of(const struct kite_schema *s, const char *k) {
    for (const struct kite_schema_field *f = s->fields; f && f->name; f++)
        if (strcmp(f->name, k) == 0) return f;
    return NULL;
}

static void unknown_object(struct unknown *u, const struct kite_schema *s, json_object *o, int depth) {
    /* json_object_object_foreach cannot survive deleting the entry it stands on: the keys to
     * drop are collected first, then deleted */
    const char **drop = NULL;
    size_t n_drop = 0, cap = 0;
    json_object_object_foreach(o, k, v) {
        size_t saved = u->path.len;
        if (u->path.len) kite_buf_putc(&u->path, '.');
        kite_buf_puts(&u->path, k);
        const struct kite_schema_field *f = field_of(s, k);
        if (f) {
            unknown_value(u, f->schema, v, depth + 1);
        } else {
            u->n++;
            if (u->found) u->found(u->ud, u->path.p);
            if (u->drop) {
                if (n_drop == cap) drop = kite_realloc(drop, (cap = cap ? cap * 2 : 8) * sizeof *drop);
                drop[n_drop++] = k;
            }
        }
        u->path.len = saved;
        u->path.p[saved] = 0;
    }
    for (size_t i = 0; i < n_drop; i++) json_object_object_del(o, drop[i]);
    free(drop);
}

static void unknown_value(struct unknown *u, const struct kite_schema *s, json_object *o, int depth) {
    if (!o || depth > 256) return; /* request bodies are shallower (KITE_JSON_MAX_DEPTH) */
    switch (s->type) {
    case KITE_SCHEMA_OBJECT:
        if (json_object_is_type(o, json_type_object) && !(s->flags & KITE_SCHEMA_PARTIAL)) unknown_object(u, s, o, depth);
        return;
    case KITE_SCHEMA_MAP:
        if (!json_object_is_type(o, json_type_object)) return;
        json_object_object_foreach(o, k, v) {
            size_t saved = u->path.len;
            kite_buf_putc(&u->path, '[');
            kite_buf_puts(&u->path, k);
            kite_buf_putc(&u->path, ']');
            unknown_value(u, s->elem, v, depth + 1);
            u->path.len = saved;
            u->path.p[saved] = 0;
        }
        return;
    case KITE_SCHEMA_LIST:
        if (!json_object_is_type(o, json_type_array)) return;
        for (size_t i = 0, n = json_object_array_length(o); i < n; i++) {
            size_t saved = u->path.len;
            push_index(&u->path, i);
            unknown_value(u, s->elem, json_object_array_get_idx(o, i), depth + 1);
            u->path.len = saved;
            u->path.p[saved] = 0;
        }
        return;
    default:
        return; /* leaves and RAW: anything goes */
    }
}

size_t kite_schema_unknown_fields(const struct kite_schema *s, json_object *obj, bool drop,
                                  void (*found)(void *ud, const char *path), void *ud) {
    struct unknown u = {.drop = drop, .found = found, .ud = ud};
    kite_buf_puts(&u.path, "");
    if (s) unknown_value(&u, s, obj, 0);
    kite_buf_release(&u.path);
    return u.n;
}
