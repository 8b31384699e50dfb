/* RFC 6902 JSON patch over RFC 6901 JSON pointers.
 *
 * The document is deep-copied once, then every operation edits the copy in place; values
 * taken from the patch are copied as they are inserted, so the patch is never shared. Any
 * failing operation aborts the whole patch (RFC 6902 §5) and the copy is dropped. */
#include "json/patch/internal.h"

/* Kubernetes rejects JSON patches with more operations than this (maxJSONPatchOperations). */
#define KITE_JSON_PATCH_MAX_OPS 10000
/* Total size of the values all "copy" operations of one patch may duplicate (estimated as
 * JSON text bytes). Copying the root into itself doubles the document per operation, so
 * without a bound a 2 KiB patch asks for terabytes; Kubernetes' json-patch has the same
 * guard (AccumulatedCopySizeLimit). 3 MiB is the API server's request body limit: no
 * legitimate copy is larger than the object it copies within. */
#define KITE_JSON_PATCH_MAX_COPY_BYTES (3u << 20)

struct pointer {
    char **tok; /* unescaped reference tokens */
    size_t n;
};

static void pointer_release(struct pointer *p) {
    for (size_t i = 0; i < p->n; i++) free(p->tok[i]);
    free(p->tok);
    *p = (struct pointer){0};
}

/* Parses an RFC 6901 pointer: "" or "/"-separated tokens with ~1 = '/', ~0 = '~'. */
static int pointer_parse(const char *s, struct pointer *ret, char **ret_err) {
    *ret = (struct pointer){0};
    if (!*s) return 0;
    if (*s != '/') return kite_json_patch_fail(ret_err, -EBADMSG, "JSON pointer \"%s\" does not start with '/'", s);
    size_t cap = 0;
    const char *p = s;
    while (*p == '/') {
        p++;
        struct kite_buf tok = {0};
        kite_buf_grow(&tok, 1);
        for (; *p && *p != '/'; p++) {
            if (*p != '~') {
                kite_buf_putc(&tok, *p);
                continue;
            }
            if (p[1] != '0' && p[1] != '1') {
                kite_buf_release(&tok);
                pointer_release(ret);
                return kite_json_patch_fail(ret_err, -EBADMSG, "JSON pointer \"%s\" has a bad ~ escape", s);
            }
            kite_buf_putc(&tok, p[1] == '0' ? '~' : '/');
            p++;
        }
        if (ret->n == cap) {
            cap = cap ? cap * 2 : 4;
            ret->tok = kite_realloc(ret->tok, cap * sizeof *ret->tok);
        }
        ret->tok[ret->n++] = kite_buf_detach(&tok, NULL);
    }
    return 0;
}

/* Array index per RFC 6901 §4: decimal digits without leading zeros. -1 if not an index. */
static long parse_index(const char *t) {
    if (!*t || (t[0] == '0' && t[1]) || strlen(t) > 18) return -1;
    long v = 0;
    for (; *t; t++) {
        if (*t < '0' || *t > '9') return -1;
        v = v * 10 + (*t - '0');
    }
    return v;
}

/* Finds the container holding the last token of p (p must have at least one token). */
static int resolve_parent(json_object *root, const struct pointer *p, const char *path, json_object **ret,
                          char **ret_err) {
    json_object *cur = root;
    for (size_t i = 0; i + 1 < p->n; i++) {
        json_object *next = NULL;
        if (patch_is_object(cur)) {
            if (!json_object_object_get_ex(cur, p->tok[i], &next))
                return kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\": member \"%s\" not found", path, p->tok[i]);
        } else if (patch_is_array(cur)) {
            long idx = parse_index(p->tok[i]);
            if (idx < 0 || (size_t)idx >= json_object_array_length(cur))
                return kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\": bad array index \"%s\"", path, p->tok[i]);
            next = json_object_array_get_idx(cur, (size_t)idx);
        } else {
            return kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\": \"%s\" is not a container", path, p->tok[i]);
        }
        cur = next;
    }
    if (!patch_is_object(cur) && !patch_is_array(cur))
        return kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\": parent is not a container", path);
    *ret = cur;
    return 0;
}

/* Looks up the value at path; *ret is borrowed from the document (NULL is JSON null). */
static int get_value(json_object *root, const char *path, json_object **ret, char **ret_err) {
    struct pointer p;
    int r = pointer_parse(path, &p, ret_err);
    if (r < 0) return r;
    if (p.n == 0) {
        *ret = root;
        return 0;
    }
    json_object *parent;
    r = resolve_parent(root, &p, path, &parent, ret_err);
    if (r >= 0) {
        const char *last = p.tok[p.n - 1];
        if (patch_is_object(parent)) {
            if (!json_object_object_get_ex(parent, last, ret))
                r = kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\" not found", path);
        } else {
            long idx = parse_index(last);
            if (idx < 0 || (size_t)idx >= json_object_array_length(parent))
                r = kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\": bad array index", path);
            else
                *ret = json_object_array_get_idx(parent, (size_t)idx);
        }
    }
    pointer_release(&p);
    return r;
}

/* Inserts value (owned; freed on error) at idx, shifting later elements right. */
static void array_insert(json_object *arr, size_t idx, json_object *value) {
    size_t n = json_object_array_length(arr);
    if (idx == n) {
        json_object_array_add(arr, value);
        return;
    }
    /* json-c 0.16 has no insert: move each element up one slot, last first. The extra
     * reference keeps an element alive while it briefly sits in two slots. */
    json_object_array_add(arr, json_object_get(json_object_array_get_idx(arr, n - 1)));
    for (size_t i = n - 1; i > idx; i--)
        json_object_array_put_idx(arr, i, json_object_get(json_object_array_get_idx(arr, i - 1)));
    json_object_array_put_idx(arr, idx, value);
}

enum edit { EDIT_ADD, EDIT_REPLACE, EDIT_REMOVE };

/* Adds, replaces or removes at path. value is owned (consumed on success and error). */
static int edit(json_object **root, const char *path, enum edit how, json_object *value, char **ret_err) {
    struct pointer p;
    int r = pointer_parse(path, &p, ret_err);
    if (r < 0) {
        json_object_put(value);
        return r;
    }
    if (p.n == 0) {
        if (how == EDIT_REMOVE) {
            r = kite_json_patch_fail(ret_err, -EINVAL, "cannot remove the whole document");
        } else {
            json_object_put(*root);
            *root = TAKE_PTR(value);
        }
        goto out;
    }
    json_object *parent;
    r = resolve_parent(*root, &p, path, &parent, ret_err);
    if (r < 0) goto out;
    const char *last = p.tok[p.n - 1];
    if (patch_is_object(parent)) {
        bool exists = json_object_object_get_ex(parent, last, NULL);
        if (how != EDIT_ADD && !exists) {
            r = kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\" not found", path);
        } else if (how == EDIT_REMOVE) {
            json_object_object_del(parent, last);
        } else {
            json_object_object_add(parent, last, TAKE_PTR(value));
        }
        goto out;
    }
    size_t n = json_object_array_length(parent);
    long idx = (how == EDIT_ADD && kite_streq(last, "-")) ? (long)n : parse_index(last);
    if (idx < 0 || (size_t)idx > n || (how != EDIT_ADD && (size_t)idx == n)) {
        r = kite_json_patch_fail(ret_err, -EINVAL, "path \"%s\": array index out of range", path);
    } else if (how == EDIT_ADD) {
        array_insert(parent, (size_t)idx, TAKE_PTR(value));
    } else if (how == EDIT_REPLACE) {
        json_object_array_put_idx(parent, (size_t)idx, TAKE_PTR(value));
    } else {
        json_object_array_del_idx(parent, (size_t)idx, 1);
    }
out:
    json_object_put(value);
    pointer_release(&p);
    return r;
}

/* Reads a required string member of an operation. */
static int op_string(json_object *op, const char *name, size_t i, const char **ret, char **ret_err) {
    json_object *v;
    if (!json_object_object_get_ex(op, name, &v) || !json_object_is_type(v, json_type_string))
        return kite_json_patch_fail(ret_err, -EBADMSG, "operation %zu: missing or non-string \"%s\"", i, name);
    *ret = json_object_get_string(v);
    return 0;
}

/* Estimated JSON text size of o, counting no further than limit (so the walk itself stays
 * bounded): returns a value > limit once the limit is passed. */
static size_t json_size(json_object *o, size_t limit) {
    switch (json_object_get_type(o)) {
    case json_type_string:
        return (size_t)json_object_get_string_len(o) + 2;
    case json_type_object: {
        size_t n = 2;
        json_object_object_foreach(o, k, v) {
            n += strlen(k) + 4;
            if (n > limit) return n;
            n += json_size(v, limit - n);
            if (n > limit) return n;
        }
        return n;
    }
    case json_type_array: {
        size_t n = 2, len = json_object_array_length(o);
        for (size_t i = 0; i < len && n <= limit; i++) n += 1 + json_size(json_object_array_get_idx(o, i), limit - n);
        return n;
    }
    default:
        return 8; /* null, booleans and numbers */
    }
}

static int apply_op(json_object **root, json_object *op, size_t i, size_t *copied, char **ret_err) {
    if (!patch_is_object(op)) return kite_json_patch_fail(ret_err, -EBADMSG, "operation %zu is not an object", i);
    const char *name, *path, *from = NULL;
    json_object *value = NULL;
    int r = op_string(op, "op", i, &name, ret_err);
    if (r < 0) return r;
    r = op_string(op, "path", i, &path, ret_err);
    if (r < 0) return r;

    bool needs_value = kite_streq(name, "add") || kite_streq(name, "replace") || kite_streq(name, "test");
    bool needs_from = kite_streq(name, "move") || kite_streq(name, "copy");
    if (!needs_value && !needs_from && !kite_streq(name, "remove"))
        return kite_json_patch_fail(ret_err, -EBADMSG, "operation %zu: unknown op \"%s\"", i, name);
    /* "value": null is a real value, so presence is checked separately from NULL. */
    if (needs_value && !json_object_object_get_ex(op, "value", &value))
        return kite_json_patch_fail(ret_err, -EBADMSG, "operation %zu (%s): missing \"value\"", i, name);
    if (needs_from && (r = op_string(op, "from", i, &from, ret_err)) < 0) return r;
    /* Validate pointer syntax up front so a malformed pointer is always a 400. */
    struct pointer check;
    if ((r = pointer_parse(path, &check, ret_err)) < 0) return r;
    pointer_release(&check);
    if (from) {
        if ((r = pointer_parse(from, &check, ret_err)) < 0) return r;
        pointer_release(&check);
    }

    if (kite_streq(name, "add")) return edit(root, path, EDIT_ADD, kite_json_patch_clone(value), ret_err);
    if (kite_streq(name, "replace")) return edit(root, path, EDIT_REPLACE, kite_json_patch_clone(value), ret_err);
    if (kite_streq(name, "remove")) return edit(root, path, EDIT_REMOVE, NULL, ret_err);
    if (kite_streq(name, "test")) {
        json_object *cur;
        if ((r = get_value(*root, path, &cur, ret_err)) < 0) return r;
        if (!kite_json_equal(cur, value)) return kite_json_patch_fail(ret_err, -EINVAL, "test failed at \"%s\"", path);
        return 0;
    }
    json_object *src;
    if ((r = get_value(*root, from, &src, ret_err)) < 0) return r;
    if (kite_streq(name, "copy")) {
        size_t left = KITE_JSON_PATCH_MAX_COPY_BYTES - *copied;
        size_t sz = json_size(src, left);
        if (sz > left)
            return kite_json_patch_fail(ret_err, -EINVAL, "operation %zu: copies exceed %u bytes in total", i,
                              KITE_JSON_PATCH_MAX_COPY_BYTES);
        *copied += sz;
        return edit(root, path, EDIT_ADD, kite_json_patch_clone(src), ret_err);
    }
    /* move */
    if (kite_streq(from, path)) return 0;
    size_t fl = strlen(from);
    if (strncmp(path, from, fl) == 0 && path[fl] == '/')
        return kite_json_patch_fail(ret_err, -EINVAL, "cannot move \"%s\" into its own child \"%s\"", from, path);
    json_object_get(src); /* survive the remove */
    if ((r = edit(root, from, EDIT_REMOVE, NULL, ret_err)) < 0) {
        json_object_put(src);
        return r;
    }
    return edit(root, path, EDIT_ADD, src, ret_err);
}

int kite_json_patch(json_object *doc, json_object *patch, json_object **ret, char **ret_err) {
    if (!patch_is_array(patch)) return kite_json_patch_fail(ret_err, -EBADMSG, "JSON patch must be an array of operations");
    size_t n = json_object_array_length(patch);
    if (n > KITE_JSON_PATCH_MAX_OPS)
        return kite_json_patch_fail(ret_err, -EBADMSG, "JSON patch has %zu operations, more than %d", n,
                          KITE_JSON_PATCH_MAX_OPS);
    json_object *root = kite_json_patch_clone(doc);
    size_t copied = 0;
    for (size_t i = 0; i < n; i++) {
        int r = apply_op(&root, json_object_array_get_idx(patch, i), i, &copied, ret_err);
        if (r < 0) {
            json_object_put(root);
            return r;
        }
    }
    *ret = root;
    return 0;
}
