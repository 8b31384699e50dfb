/* JSON accessors (obj.h). */
#include "json/obj.h"
#include "base/base.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

json_object *kite_obj_get(json_object *obj, const char *k) {
    json_object *v = NULL;
    if (obj && json_object_is_type(obj, json_type_object)) json_object_object_get_ex(obj, k, &v);
    return v;
}

json_object *kite_obj_meta(json_object *obj) { return kite_obj_get(obj, "metadata"); }

static json_object *at(json_object *o, va_list ap) {
    for (const char *k; o && (k = va_arg(ap, const char *));) o = kite_obj_get(o, k);
    return o;
}

static const char *str_of(json_object *o) {
    return o && json_object_is_type(o, json_type_string) ? json_object_get_string(o) : NULL;
}

json_object *kite_obj_at_(json_object *obj, ...) {
    va_list ap;
    va_start(ap, obj);
    json_object *o = at(obj, ap);
    va_end(ap);
    return o;
}

const char *kite_obj_str_at_(json_object *obj, ...) {
    va_list ap;
    va_start(ap, obj);
    json_object *o = at(obj, ap);
    va_end(ap);
    return str_of(o);
}

json_object *kite_obj_path(json_object *o, const char *path) {
    char key[128];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        o = kite_obj_get(o, key);
        path += n + (path[n] == '.');
    }
    return o;
}

const char *kite_obj_path_str(json_object *o, const char *path) { return str_of(kite_obj_path(o, path)); }

const char *kite_obj_str(json_object *obj, const char *k) {
    json_object *v = kite_obj_get(obj, k);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

const char *kite_meta_str(json_object *obj, const char *k) { return kite_obj_str(kite_obj_meta(obj), k); }

void kite_obj_set(json_object *obj, const char *k, json_object *v) { json_object_object_add(obj, k, v); }

json_object *kite_obj_wrap(const char *k, json_object *v) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, k, json_object_get(v));
    return o;
}

json_object *kite_obj_ensure(json_object *obj, const char *k) {
    json_object *v = kite_obj_get(obj, k);
    if (!v || !json_object_is_type(v, json_type_object)) {
        v = json_object_new_object();
        json_object_object_add(obj, k, v);
    }
    return v;
}

int64_t kite_obj_int(json_object *obj, const char *k) {
    json_object *v = kite_obj_get(obj, k);
    return v ? json_object_get_int64(v) : 0;
}

static int key_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

const char **kite_obj_sorted_keys(json_object *obj, int (*cmp)(const void *, const void *), size_t *ret_n) {
    *ret_n = 0;
    if (!obj || !json_object_is_type(obj, json_type_object)) return NULL;
    size_t n = (size_t)json_object_object_length(obj), i = 0;
    const char **keys = kite_calloc(n ? n : 1, sizeof *keys);
    json_object_object_foreach(obj, k, v) {
        (void)v;
        keys[i++] = k;
    }
    qsort(keys, n, sizeof *keys, cmp ? cmp : key_cmp);
    *ret_n = n;
    return keys;
}

size_t kite_array_len(json_object *a) { return a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0; }
