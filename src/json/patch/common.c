/* Shared helpers for the patch formats, and deep equality. */
#include <inttypes.h>
#include <stdio.h>

#include "json/patch/internal.h"

int kite_json_patch_fail(char **ret_err, int err, const char *fmt, ...) {
    if (ret_err && !*ret_err) {
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0) abort(); /* OOM policy: base.h aborts too */
        va_end(ap);
        *ret_err = s;
    }
    return err;
}

json_object *kite_json_patch_clone(json_object *o) {
    if (!o) return NULL;
    json_object *copy = NULL;
    if (json_object_deep_copy(o, &copy, NULL) < 0) abort(); /* only fails on OOM */
    return copy;
}

void kite_json_patch_canon(struct kite_buf *b, json_object *o) {
    switch (json_object_get_type(o)) {
    case json_type_null: kite_buf_puts(b, "null"); break;
    case json_type_boolean: kite_buf_puts(b, json_object_get_boolean(o) ? "true" : "false"); break;
    case json_type_int:
        /* json-c keeps values above INT64_MAX as uint64 */
        if (json_object_get_int64(o) == INT64_MAX && json_object_get_uint64(o) > (uint64_t)INT64_MAX)
            kite_buf_printf(b, "%" PRIu64, json_object_get_uint64(o));
        else
            kite_buf_printf(b, "%" PRId64, json_object_get_int64(o));
        break;
    case json_type_double: kite_buf_printf(b, "d%.17g", json_object_get_double(o)); break;
    case json_type_string:
        kite_buf_putc(b, 's');
        kite_buf_append(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
        break;
    case json_type_array: {
        kite_buf_putc(b, '[');
        size_t n = json_object_array_length(o);
        for (size_t i = 0; i < n; i++) {
            kite_json_patch_canon(b, json_object_array_get_idx(o, i));
            kite_buf_putc(b, ',');
        }
        kite_buf_putc(b, ']');
        break;
    }
    case json_type_object: {
        /* Only used for scalars in practice; key order kept as-is. */
        kite_buf_putc(b, '{');
        json_object_object_foreach(o, k, v) {
            kite_buf_json_str(b, k);
            kite_buf_putc(b, ':');
            kite_json_patch_canon(b, v);
            kite_buf_putc(b, ',');
        }
        kite_buf_putc(b, '}');
        break;
    }
    }
}

size_t kite_json_patch_path_push(struct patch_path *p, const char *key) {
    size_t len = p->buf.len;
    if (len) kite_buf_putc(&p->buf, '.');
    kite_buf_puts(&p->buf, key);
    return len;
}

void kite_json_patch_path_pop(struct patch_path *p, size_t len) {
    p->buf.len = len;
    if (p->buf.p) p->buf.p[len] = '\0';
}

const struct kite_smp_rule *kite_json_patch_rule(const struct kite_smp_schema *schema, const struct patch_path *p) {
    if (!schema) return NULL;
    const char *path = p->buf.p ? p->buf.p : "";
    /* Schemas hold a handful of rules per kind: a scan beats building a map per request. */
    for (size_t i = 0; i < schema->n_rules; i++)
        if (kite_streq(schema->rules[i].path, path)) return &schema->rules[i];
    return NULL;
}

void kite_json_patch_vec_push(struct patch_vec *vec, json_object *o, long tag) {
    if (vec->n == vec->cap) {
        vec->cap = vec->cap ? vec->cap * 2 : 8;
        vec->v = kite_realloc(vec->v, vec->cap * sizeof *vec->v);
        vec->tag = kite_realloc(vec->tag, vec->cap * sizeof *vec->tag);
    }
    vec->v[vec->n] = o;
    vec->tag[vec->n++] = tag;
}

void kite_json_patch_vec_release(struct patch_vec *vec) {
    free(vec->v);
    free(vec->tag);
    *vec = (struct patch_vec){0};
}

static bool numbers_equal(json_object *a, json_object *b) {
    json_type ta = json_object_get_type(a), tb = json_object_get_type(b);
    if (ta == json_type_int && tb == json_type_int)
        return json_object_get_int64(a) == json_object_get_int64(b) &&
               json_object_get_uint64(a) == json_object_get_uint64(b);
    return json_object_get_double(a) == json_object_get_double(b);
}

bool kite_json_equal(json_object *a, json_object *b) {
    json_type ta = json_object_get_type(a), tb = json_object_get_type(b);
    bool na = ta == json_type_int || ta == json_type_double;
    bool nb = tb == json_type_int || tb == json_type_double;
    if (na && nb) return numbers_equal(a, b); /* RFC 6902 4.6: numbers compare by value */
    if (ta != tb) return false;
    switch (ta) {
    case json_type_null: return true;
    case json_type_boolean: return json_object_get_boolean(a) == json_object_get_boolean(b);
    case json_type_string: {
        int la = json_object_get_string_len(a), lb = json_object_get_string_len(b);
        return la == lb && memcmp(json_object_get_string(a), json_object_get_string(b), (size_t)la) == 0;
    }
    case json_type_array: {
        size_t n = json_object_array_length(a);
        if (n != json_object_array_length(b)) return false;
        for (size_t i = 0; i < n; i++)
            if (!kite_json_equal(json_object_array_get_idx(a, i), json_object_array_get_idx(b, i))) return false;
        return true;
    }
    case json_type_object: {
        if (json_object_object_length(a) != json_object_object_length(b)) return false;
        json_object_object_foreach(a, k, va) {
            json_object *vb;
            if (!json_object_object_get_ex(b, k, &vb)) return false;
            if (!kite_json_equal(va, vb)) return false;
        }
        return true;
    }
    default: return false;
    }
}
