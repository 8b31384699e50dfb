/* Stored-object helpers: canonical encoding with the resourceVersion placeholder, rendering
 * with the revision spliced in, storage keys, and small JSON accessors. */
#include "api/registry.h"
#include "base/buf.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static const char PLACEHOLDER[] = "\"resourceVersion\":\"\"";

json_object *kite_obj_get(json_object *obj, const char *k) {
    json_object *v = NULL;
    if (obj && json_object_is_type(obj, json_type_object)) json_object_object_get_ex(obj, k, &v);
    return v;
}

json_object *kite_obj_meta(json_object *obj) { return kite_obj_get(obj, "metadata"); }

const char *kite_obj_str(json_object *obj, const char *k) {
    json_object *v = kite_obj_get(obj, k);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

const char *kite_meta_str(json_object *obj, const char *k) { return kite_obj_str(kite_obj_meta(obj), k); }

void kite_obj_set(json_object *obj, const char *k, json_object *v) { json_object_object_add(obj, k, v); }

json_object *kite_obj_ensure(json_object *obj, const char *k) {
    json_object *v = kite_obj_get(obj, k);
    if (!v || !json_object_is_type(v, json_type_object)) {
        v = json_object_new_object();
        json_object_object_add(obj, k, v);
    }
    return v;
}

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

static json_object *ordered(json_object *src, const char *const *order, size_t n) {
    json_object *dst = json_object_new_object();
    for (size_t i = 0; i < n; i++) {
        json_object *v;
        if (json_object_object_get_ex(src, order[i], &v)) json_object_object_add(dst, order[i], json_object_get(v));
    }
    json_object_object_foreach(src, k, v) {
        if (!in_list(k, order, n)) json_object_object_add(dst, k, json_object_get(v));
    }
    return dst;
}

char *kite_object_encode(json_object *obj, size_t *ret_len) {
    json_object *top = ordered(obj, TOP_ORDER, KITE_ARRAY_SIZE(TOP_ORDER));
    json_object *meta = kite_obj_get(obj, "metadata");
    if (meta && json_object_is_type(meta, json_type_object)) {
        json_object *m = json_object_new_object();
        json_object_object_foreach(meta, k, v) json_object_object_add(m, k, json_object_get(v));
        json_object_object_add(m, "resourceVersion", json_object_new_string(""));
        json_object_object_add(top, "metadata", ordered(m, META_ORDER, KITE_ARRAY_SIZE(META_ORDER)));
        json_object_put(m);
    }
    size_t len;
    const char *s = json_object_to_json_string_length(top, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    char *out = kite_strndup(s, len);
    json_object_put(top);
    if (ret_len) *ret_len = len;
    return out;
}

void kite_object_render(const char *data, size_t len, int64_t rev, struct kite_buf *out) {
    const char *p = memmem(data, len, PLACEHOLDER, sizeof PLACEHOLDER - 1);
    if (!p) {
        kite_buf_append(out, data, len);
        return;
    }
    size_t head = (size_t)(p - data) + sizeof PLACEHOLDER - 2; /* up to the opening quote of the value */
    kite_buf_append(out, data, head);
    kite_buf_printf(out, "%lld", (long long)rev);
    kite_buf_append(out, data + head, len - head);
}

json_object *kite_object_decode(const char *data, size_t len, int64_t rev) {
    json_tokener *tok = json_tokener_new();
    json_object *obj = json_tokener_parse_ex(tok, data, (int)len);
    json_tokener_free(tok);
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
