/* Stored-object helpers: canonical encoding with the resourceVersion placeholder, rendering
 * with the revision spliced in, storage keys, and small JSON accessors. */
#include "api/registry.h"

#include <stdarg.h>
#include <string.h>
#include "json/parse.h"
#include "base/buf.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static const char PLACEHOLDER[] = "\"resourceVersion\":\"\"";

/* Canonical key order: what kubectl users see first, and what makes the placeholder findable. */
static const char *const TOP_ORDER[] = {"kind", "apiVersion", "metadata", "spec", "status"};
static const char *const META_ORDER[] = {"name", "generateName", "namespace", "uid", "resourceVersion",
                                         "generation", "creationTimestamp", "deletionTimestamp",
                                         "deletionGracePeriodSeconds", "labels", "annotations",
                                         "ownerReferences", "finalizers", "managedFields"};

static bool in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, list[i]) == 0) return true;
    return false;
}

/* A JSON writer over json-c trees straight into a kite_buf: no intermediate objects or print
 * buffers (this runs on every write; json-c's own serializer allocates per node). */
static void write_value(struct kite_buf *b, json_object *v);

static void write_member(struct kite_buf *b, bool *first, const char *k, json_object *v) {
    if (!*first) kite_buf_putc(b, ',');
    *first = false;
    kite_buf_json_str(b, k);
    kite_buf_putc(b, ':');
    write_value(b, v);
}

/* Writes the members named in order first (those present), then the rest in their order. */
static void write_ordered(struct kite_buf *b, json_object *o, const char *const *order, size_t n,
                          void (*special)(struct kite_buf *, bool *, const char *, json_object *)) {
    bool first = true;
    kite_buf_putc(b, '{');
    for (size_t i = 0; i < n; i++) {
        json_object *v;
        if (json_object_object_get_ex(o, order[i], &v)) special(b, &first, order[i], v);
    }
    json_object_object_foreach(o, k, v) {
        if (!in_list(k, order, n)) write_member(b, &first, k, v);
    }
    kite_buf_putc(b, '}');
}

static void write_value(struct kite_buf *b, json_object *v) {
    switch (json_object_get_type(v)) {
    case json_type_null: kite_buf_puts(b, "null"); break;
    case json_type_boolean: kite_buf_puts(b, json_object_get_boolean(v) ? "true" : "false"); break;
    case json_type_int:
        if (json_object_get_int64(v) == INT64_MAX && json_object_get_uint64(v) > INT64_MAX)
            kite_buf_printf(b, "%llu", (unsigned long long)json_object_get_uint64(v));
        else
            kite_buf_printf(b, "%lld", (long long)json_object_get_int64(v));
        break;
    case json_type_double: /* keeps the client's spelling; the object is the writer's own */
        kite_buf_puts(b, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        break;
    case json_type_string: kite_buf_json_str(b, json_object_get_string(v)); break;
    case json_type_array: {
        size_t n = json_object_array_length(v);
        kite_buf_putc(b, '[');
        for (size_t i = 0; i < n; i++) {
            if (i) kite_buf_putc(b, ',');
            write_value(b, json_object_array_get_idx(v, i));
        }
        kite_buf_putc(b, ']');
        break;
    }
    case json_type_object: {
        bool first = true;
        kite_buf_putc(b, '{');
        json_object_object_foreach(v, k, m) write_member(b, &first, k, m);
        kite_buf_putc(b, '}');
        break;
    }
    }
}

static void meta_member(struct kite_buf *b, bool *first, const char *k, json_object *v) {
    if (strcmp(k, "resourceVersion") == 0) return; /* written as the placeholder */
    write_member(b, first, k, v);
}

static void write_meta(struct kite_buf *b, json_object *meta) {
    /* name, generateName, namespace, uid, then the placeholder, then the rest */
    static const char *const head[] = {"name", "generateName", "namespace", "uid"};
    bool first = true;
    kite_buf_putc(b, '{');
    for (size_t i = 0; i < KITE_ARRAY_SIZE(head); i++) {
        json_object *v;
        if (json_object_object_get_ex(meta, head[i], &v)) write_member(b, &first, head[i], v);
    }
    if (!first) kite_buf_putc(b, ',');
    first = false;
    kite_buf_puts(b, PLACEHOLDER);
    for (size_t i = KITE_ARRAY_SIZE(head) + 1; i < KITE_ARRAY_SIZE(META_ORDER); i++) {
        json_object *v;
        if (json_object_object_get_ex(meta, META_ORDER[i], &v)) write_member(b, &first, META_ORDER[i], v);
    }
    json_object_object_foreach(meta, k, v) {
        if (!in_list(k, META_ORDER, KITE_ARRAY_SIZE(META_ORDER))) meta_member(b, &first, k, v);
    }
    kite_buf_putc(b, '}');
}

static void top_member(struct kite_buf *b, bool *first, const char *k, json_object *v) {
    if (strcmp(k, "metadata") == 0 && json_object_is_type(v, json_type_object)) {
        if (!*first) kite_buf_putc(b, ',');
        *first = false;
        kite_buf_puts(b, "\"metadata\":");
        write_meta(b, v);
        return;
    }
    write_member(b, first, k, v);
}

char *kite_object_encode(json_object *obj, size_t *ret_len) {
    struct kite_buf b = {0};
    kite_buf_grow(&b, 1024);
    write_ordered(&b, obj, TOP_ORDER, KITE_ARRAY_SIZE(TOP_ORDER), top_member);
    return kite_buf_detach(&b, ret_len);
}

void kite_object_render(const char *data, size_t len, int64_t rev, struct kite_buf *out) {
    const char *p = memmem(data, len, PLACEHOLDER, sizeof PLACEHOLDER - 1);
    if (!p) {
        /* written by another writer of the store (kube-apiserver leaves resourceVersion out of
         * what it stores in etcd): decoded, given its resourceVersion, encoded again */
        json_object *o = kite_object_decode(data, len, rev);
        if (o && kite_obj_get(o, "metadata")) {
            size_t n;
            char *enc = kite_object_encode(o, &n);
            json_object_put(o);
            kite_object_render(enc, n, rev, out);
            free(enc);
            return;
        }
        if (o) json_object_put(o);
        kite_buf_append(out, data, len);
        return;
    }
    size_t head = (size_t)(p - data) + sizeof PLACEHOLDER - 2; /* up to the opening quote of the value */
    /* sized once: the revision's digits, and a byte for the newline a JSON reply ends with */
    kite_buf_reserve(out, len + 21);
    kite_buf_append(out, data, head);
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)rev);
    kite_buf_append(out, digits, (size_t)n);
    kite_buf_append(out, data + head, len - head);
}

json_object *kite_object_decode(const char *data, size_t len, int64_t rev) {
    enum json_tokener_error e;
    json_object *obj = kite_json_parse_lenient(data, len, JSON_TOKENER_DEFAULT_DEPTH, &e, NULL);
    if (!obj) return NULL;
    json_object *meta = kite_obj_get(obj, "metadata");
    if (meta) {
        char s[24];
        snprintf(s, sizeof s, "%lld", (long long)rev);
        json_object_object_add(meta, "resourceVersion", json_object_new_string(s));
    }
    return obj;
}

static const char *storage_of(const struct kite_resource *r) { return r->storage ? r->storage : r->plural; }

char *kite_object_key(const struct kite_resource *r, const char *ns, const char *name) {
    if (r->namespaced) return kite_asprintf("/registry/%s/%s/%s", storage_of(r), ns ? ns : "", name);
    return kite_asprintf("/registry/%s/%s", storage_of(r), name);
}

char *kite_object_prefix(const struct kite_resource *r, const char *ns) {
    if (r->namespaced && ns && *ns) return kite_asprintf("/registry/%s/%s/", storage_of(r), ns);
    return kite_asprintf("/registry/%s/", storage_of(r));
}

void kite_uuid4(char out[37]) {
    unsigned char b[16];
    kite_random_bytes(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
