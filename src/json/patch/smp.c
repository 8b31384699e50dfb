/* Strategic merge patch (Kubernetes' StrategicMergePatch), applied to a private deep copy
 * of the document.
 *
 * Invariants: the document copy is ours to edit in place; every value taken from the patch
 * is copied ("materialized": merged into nothing) so directive keys and nulls never reach
 * the result and the borrowed patch is never referenced from it. Merge-key and scalar
 * lookups go through hash maps of kite_json_patch_canon() text, so merging lists is linear. */
#include <limits.h>

#include "json/patch/internal.h"

/* merge_object() result meaning "this map carried $patch: delete". */
#define SMP_DELETED 1

struct smp {
    const struct kite_smp_schema *schema;
    struct patch_path path;
    char **ret_err;
};

static int merge_object(struct smp *s, json_object **target, json_object *patch);
static int merge_list(struct smp *s, json_object *cur, json_object *patch, json_object **ret);

/* The dotted path for error messages ("" at the root). */
static const char *where(const struct smp *s) { return s->path.buf.len ? s->path.buf.p : "(root)"; }

/* Canonical text of o into a reusable buffer. */
static const char *canon(struct kite_buf *b, json_object *o) {
    kite_buf_reset(b);
    kite_buf_grow(b, 1);
    kite_json_patch_canon(b, o);
    return b->p;
}

/* Merge-key text of element e, or NULL if e is not an object carrying the key. */
static const char *key_of(struct kite_buf *b, json_object *e, const char *mk) {
    json_object *v;
    if (!patch_is_object(e) || !json_object_object_get_ex(e, mk, &v)) return NULL;
    return canon(b, v);
}

/* A new value equal to the patch value applied to nothing. Returns SMP_DELETED (and
 * *ret = NULL) for a map that deletes itself. */
static int materialize(struct smp *s, json_object *v, json_object **ret) {
    *ret = NULL;
    if (patch_is_object(v)) {
        json_object *o = json_object_new_object();
        int r = merge_object(s, &o, v);
        if (r != 0) {
            json_object_put(o);
            return r;
        }
        *ret = o;
        return 0;
    }
    if (patch_is_array(v)) return merge_list(s, NULL, v, ret);
    *ret = kite_json_patch_clone(v);
    return 0;
}

/* ---- ordering (Kubernetes normalizeElementOrder / mergeSortedSlice) ---- */

/* Position of each element's key in the server list; -1 when absent. */
static long server_index(struct kite_map *order, struct kite_buf *b, json_object *e, const char *mk) {
    const char *k = mk ? key_of(b, e, mk) : canon(b, e);
    void *v = k ? kite_map_get(order, k) : NULL;
    return v ? (long)(uintptr_t)v - 1 : -1;
}

/* Indexes list elements by key text (first occurrence wins); values are index + 1. */
static void index_list(struct kite_map *m, struct kite_buf *b, json_object *list, const char *mk) {
    size_t n = patch_is_array(list) ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(list, i);
        const char *k = mk ? key_of(b, e, mk) : canon(b, e);
        if (k && !kite_map_get(m, k)) kite_map_put(m, k, (void *)(uintptr_t)(i + 1));
    }
}

static int cmp_tag(const void *a, const void *b) {
    const long *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]) ?: (x[1] > y[1]) - (x[1] < y[1]);
}

/* Stable-sorts vec by tag (elements with tag -1 go last, keeping their order). */
static void sort_by_tag(struct patch_vec *vec) {
    long (*pairs)[3] = kite_malloc((vec->n ? vec->n : 1) * sizeof *pairs);
    for (size_t i = 0; i < vec->n; i++) {
        pairs[i][0] = vec->tag[i] < 0 ? LONG_MAX : vec->tag[i];
        pairs[i][1] = (long)i;
        pairs[i][2] = vec->tag[i];
    }
    qsort(pairs, vec->n, sizeof *pairs, cmp_tag);
    json_object **v = kite_malloc((vec->n ? vec->n : 1) * sizeof *v);
    for (size_t i = 0; i < vec->n; i++) v[i] = vec->v[pairs[i][1]];
    for (size_t i = 0; i < vec->n; i++) {
        vec->v[i] = v[i];
        vec->tag[i] = pairs[i][2];
    }
    free(v);
    free(pairs);
}

/* Builds the final list from merged elements (borrowed, in merged order): those whose key is
 * in `wanted` (the patch or $setElementOrder list) ordered as there, interleaved with the
 * rest ("server-only") by their positions in the server list: a server-only element goes
 * before a patch element only when both are known to the server and it came first there. */
static json_object *order_list(json_object *merged, struct kite_map *want, struct kite_map *srv, const char *mk) {
    struct kite_buf b = {0};
    struct patch_vec pitems = {0}, sonly = {0};
    size_t n = json_object_array_length(merged);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(merged, i);
        long w = server_index(want, &b, e, mk);
        if (w >= 0) kite_json_patch_vec_push(&pitems, e, w);
        else kite_json_patch_vec_push(&sonly, e, server_index(srv, &b, e, mk));
    }
    sort_by_tag(&pitems);
    sort_by_tag(&sonly);
    for (size_t i = 0; i < pitems.n; i++) pitems.tag[i] = server_index(srv, &b, pitems.v[i], mk);

    json_object *out = json_object_new_array_ext((int)n);
    size_t i = 0, j = 0;
    while (i < sonly.n || j < pitems.n) {
        bool left;
        if (i >= sonly.n) left = false;
        else if (j >= pitems.n) left = true;
        else left = sonly.tag[i] >= 0 && pitems.tag[j] >= 0 && sonly.tag[i] < pitems.tag[j];
        json_object_array_add(out, json_object_get(left ? sonly.v[i++] : pitems.v[j++]));
    }
    kite_json_patch_vec_release(&pitems);
    kite_json_patch_vec_release(&sonly);
    kite_buf_release(&b);
    return out;
}

/* ---- lists ---- */

enum kind { KIND_NONE, KIND_SCALAR, KIND_OBJECT };

static int list_kind(struct smp *s, json_object *a, json_object *b, enum kind *ret) {
    enum kind k = KIND_NONE;
    json_object *lists[2] = {a, b};
    for (size_t l = 0; l < 2; l++) {
        size_t n = patch_is_array(lists[l]) ? json_object_array_length(lists[l]) : 0;
        for (size_t i = 0; i < n; i++) {
            json_object *e = json_object_array_get_idx(lists[l], i);
            if (patch_is_array(e))
                return kite_json_patch_fail(s->ret_err, -EINVAL, "%s: lists of lists cannot be merged", where(s));
            enum kind ek = patch_is_object(e) ? KIND_OBJECT : KIND_SCALAR;
            if (k != KIND_NONE && ek != k)
                return kite_json_patch_fail(s->ret_err, -EINVAL, "%s: list element types differ", where(s));
            k = ek;
        }
    }
    *ret = k;
    return 0;
}

/* Set union of scalar lists, ordered as Kubernetes does. */
static json_object *merge_scalars(json_object *cur, json_object *patch) {
    struct kite_map seen = {0};
    struct kite_buf b = {0};
    json_object *merged = json_object_new_array();
    json_object *lists[2] = {cur, patch};
    for (size_t l = 0; l < 2; l++) {
        size_t n = lists[l] ? json_object_array_length(lists[l]) : 0;
        for (size_t i = 0; i < n; i++) {
            json_object *e = json_object_array_get_idx(lists[l], i);
            const char *k = canon(&b, e);
            if (kite_map_get(&seen, k)) continue;
            kite_map_put(&seen, k, (void *)1);
            json_object_array_add(merged, l == 0 ? json_object_get(e) : kite_json_patch_clone(e));
        }
    }
    struct kite_map want = {0}, srv = {0};
    index_list(&want, &b, patch, NULL);
    index_list(&srv, &b, cur, NULL);
    json_object *out = order_list(merged, &want, &srv, NULL);
    json_object_put(merged);
    kite_map_release(&want);
    kite_map_release(&srv);
    kite_map_release(&seen);
    kite_buf_release(&b);
    return out;
}

/* Merges a list of maps by merge key mk. cur is borrowed from our document copy. */
static int merge_maps(struct smp *s, json_object *cur, json_object *patch, const char *mk, json_object **ret) {
    struct kite_buf b = {0};
    struct kite_map dels = {0}, pos = {0}, want = {0}, srv = {0};
    struct patch_vec items = {0};
    json_object *merged = NULL, *server = NULL;
    bool replace = false;
    int r = 0;

    /* Special elements first: {"$patch": "delete", mk: v} and {"$patch": "replace"}. */
    size_t np = json_object_array_length(patch);
    for (size_t i = 0; i < np; i++) {
        json_object *e = json_object_array_get_idx(patch, i), *d;
        if (!json_object_object_get_ex(e, SMP_DIRECTIVE, &d)) {
            kite_json_patch_vec_push(&items, e, 0);
            continue;
        }
        const char *dir = json_object_is_type(d, json_type_string) ? json_object_get_string(d) : "";
        if (kite_streq(dir, "replace")) {
            replace = true;
        } else if (kite_streq(dir, "delete")) {
            const char *k = key_of(&b, e, mk);
            if (!k) {
                r = kite_json_patch_fail(s->ret_err, -EINVAL, "%s: $patch: delete element has no merge key \"%s\"",
                               where(s), mk);
                goto out;
            }
            kite_map_put(&dels, k, (void *)1);
        } else {
            r = kite_json_patch_fail(s->ret_err, -EINVAL, "%s: unsupported $patch directive in list", where(s));
            goto out;
        }
    }

    /* server = cur minus deleted elements: the order reference and the merge base. */
    server = json_object_new_array();
    size_t nc = (cur && !replace) ? json_object_array_length(cur) : 0;
    for (size_t i = 0; i < nc; i++) {
        json_object *e = json_object_array_get_idx(cur, i);
        const char *k = key_of(&b, e, mk);
        if (k && kite_map_get(&dels, k)) continue;
        json_object_array_add(server, json_object_get(e));
    }
    merged = json_object_new_array();
    for (size_t i = 0; i < json_object_array_length(server); i++)
        json_object_array_add(merged, json_object_get(json_object_array_get_idx(server, i)));
    index_list(&pos, &b, merged, mk);
    index_list(&srv, &b, server, mk);

    for (size_t i = 0; i < items.n; i++) {
        json_object *e = items.v[i];
        const char *k = key_of(&b, e, mk);
        if (!k) {
            r = kite_json_patch_fail(s->ret_err, -EINVAL, "%s: list element has no merge key \"%s\"", where(s), mk);
            goto out;
        }
        if (!kite_map_get(&want, k)) kite_map_put(&want, k, (void *)(uintptr_t)(i + 1));
        void *at = kite_map_get(&pos, k);
        if (at) {
            size_t idx = (uintptr_t)at - 1;
            json_object *el = json_object_get(json_object_array_get_idx(merged, idx));
            r = merge_object(s, &el, e);
            if (r < 0) {
                json_object_put(el);
                goto out;
            }
            json_object_array_put_idx(merged, idx, el);
        } else {
            json_object *m;
            r = materialize(s, e, &m);
            if (r < 0) goto out;
            kite_map_put(&pos, k, (void *)(uintptr_t)(json_object_array_length(merged) + 1));
            json_object_array_add(merged, m);
        }
    }
    r = 0;
    *ret = order_list(merged, &want, &srv, mk);
out:
    json_object_put(merged);
    json_object_put(server);
    kite_map_release(&want);
    kite_map_release(&srv);
    kite_json_patch_vec_release(&items);
    kite_map_release(&dels);
    kite_map_release(&pos);
    kite_buf_release(&b);
    return r;
}

/* Merges patch list (borrowed) into cur (borrowed from our copy; NULL = absent). */
static int merge_list(struct smp *s, json_object *cur, json_object *patch, json_object **ret) {
    const struct kite_smp_rule *rule = kite_json_patch_rule(s->schema, &s->path);
    bool mergeable = rule && (rule->flags & (KITE_SMP_MERGE | KITE_SMP_MERGE_PRIMITIVES));
    if (!mergeable) {
        /* Atomic: the patch list replaces the old one, minus directives. */
        size_t n = json_object_array_length(patch);
        json_object *out = json_object_new_array_ext((int)n);
        for (size_t i = 0; i < n; i++) {
            json_object *m;
            int r = materialize(s, json_object_array_get_idx(patch, i), &m);
            if (r < 0) {
                json_object_put(out);
                return r;
            }
            if (r == 0) json_object_array_add(out, m);
        }
        *ret = out;
        return 0;
    }
    enum kind k;
    int r = list_kind(s, cur, patch, &k);
    if (r < 0) return r;
    if (k == KIND_NONE) {
        *ret = json_object_new_array();
        return 0;
    }
    if (k == KIND_SCALAR) {
        *ret = merge_scalars(cur, patch);
        return 0;
    }
    if (!rule->merge_key)
        return kite_json_patch_fail(s->ret_err, -EINVAL, "%s: list of maps has no merge key", where(s));
    return merge_maps(s, cur, patch, rule->merge_key, ret);
}

/* ---- maps ---- */

static bool is_directive_key(const char *k) {
    return kite_streq(k, SMP_DIRECTIVE) || kite_streq(k, SMP_RETAIN_KEYS) ||
           kite_startswith(k, SMP_SET_ORDER_PREFIX) || kite_startswith(k, SMP_DELETE_PRIM_PREFIX);
}

/* $retainKeys: drop every key of target not listed; every non-null patch field must be listed. */
static int retain_keys(struct smp *s, json_object *target, json_object *patch, json_object *list) {
    if (!patch_is_array(list))
        return kite_json_patch_fail(s->ret_err, -EBADMSG, "%s: $retainKeys must be a list", where(s));
    struct kite_map keep = {0};
    char **drop = NULL;
    size_t ndrop = 0;
    int r = 0;
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *e = json_object_array_get_idx(list, i);
        if (json_object_is_type(e, json_type_string)) kite_map_put(&keep, json_object_get_string(e), (void *)1);
    }
    json_object_object_foreach(patch, pk, pv) {
        if (!pv || is_directive_key(pk) || kite_map_get(&keep, pk)) continue;
        r = kite_json_patch_fail(s->ret_err, -EINVAL, "%s: field \"%s\" is not in $retainKeys", where(s), pk);
        goto out;
    }
    json_object_object_foreach(target, tk, tv) {
        (void)tv;
        if (kite_map_get(&keep, tk)) continue;
        drop = kite_realloc(drop, (ndrop + 1) * sizeof *drop);
        drop[ndrop++] = kite_strdup(tk);
    }
    /* delete after iterating: json-c iteration does not survive removal */
    for (size_t i = 0; i < ndrop; i++) {
        json_object_object_del(target, drop[i]);
        free(drop[i]);
    }
out:
    free(drop);
    kite_map_release(&keep);
    return r;
}

/* Checks the patch list's elements appear in the $setElementOrder list in the same relative
 * order (Kubernetes validatePatchWithSetOrderList). */
static int check_order(struct smp *s, json_object *plist, json_object *order, const char *mk) {
    struct kite_buf a = {0}, b = {0};
    size_t np = plist ? json_object_array_length(plist) : 0, no = json_object_array_length(order);
    size_t i = 0, j = 0;
    int r = 0;
    while (i < np && j < no) {
        json_object *e = json_object_array_get_idx(plist, i);
        if (patch_is_object(e) && json_object_object_get_ex(e, SMP_DIRECTIVE, NULL)) {
            i++;
            continue;
        }
        const char *ka = mk ? key_of(&a, e, mk) : canon(&a, e);
        const char *kb = mk ? key_of(&b, json_object_array_get_idx(order, j), mk)
                            : canon(&b, json_object_array_get_idx(order, j));
        if (!ka || !kb) {
            r = kite_json_patch_fail(s->ret_err, -EINVAL, "%s: element lacks merge key \"%s\"", where(s), mk);
            goto out;
        }
        if (strcmp(ka, kb) == 0) i++;
        j++;
    }
    for (; i < np; i++) { /* only directive elements may remain */
        json_object *e = json_object_array_get_idx(plist, i);
        if (!(patch_is_object(e) && json_object_object_get_ex(e, SMP_DIRECTIVE, NULL))) {
            r = kite_json_patch_fail(s->ret_err, -EINVAL, "%s: list order does not match $setElementOrder", where(s));
            break;
        }
    }
out:
    kite_buf_release(&a);
    kite_buf_release(&b);
    return r;
}

/* $setElementOrder/<field>: merges the field's patch list (if any) and reorders the result. */
static int set_order(struct smp *s, json_object *target, json_object *patch, const char *field, json_object *order) {
    if (!patch_is_array(order))
        return kite_json_patch_fail(s->ret_err, -EBADMSG, "%s: $setElementOrder/%s must be a list", where(s), field);
    json_object *cur = NULL, *pv = NULL;
    bool has_cur = json_object_object_get_ex(target, field, &cur);
    bool has_patch = json_object_object_get_ex(patch, field, &pv);
    if (has_cur && !patch_is_array(cur)) has_cur = false; /* a type change: the patch list wins */
    if (has_patch && !patch_is_array(pv))
        return kite_json_patch_fail(s->ret_err, -EBADMSG, "%s: \"%s\" must be a list when ordered", where(s), field);
    if (!has_cur && !has_patch) return 0;

    size_t saved = kite_json_patch_path_push(&s->path, field);
    const struct kite_smp_rule *rule = kite_json_patch_rule(s->schema, &s->path);
    const char *mk = rule && (rule->flags & KITE_SMP_MERGE) ? rule->merge_key : NULL;
    enum kind k = KIND_NONE;
    json_object *merged = NULL;
    int r = list_kind(s, cur, order, &k);
    if (r < 0) goto out;
    if (k != KIND_OBJECT) mk = NULL; /* a scalar list is ordered by value */
    if (has_patch && (r = check_order(s, pv, order, mk)) < 0) goto out;
    if (has_patch) {
        r = merge_list(s, has_cur ? cur : NULL, pv, &merged);
        if (r < 0) goto out;
    } else {
        merged = json_object_get(cur);
    }
    struct kite_map want = {0}, srv = {0};
    struct kite_buf b = {0};
    index_list(&want, &b, order, mk);
    index_list(&srv, &b, has_cur ? cur : NULL, mk);
    json_object *out = order_list(merged, &want, &srv, mk);
    kite_map_release(&want);
    kite_map_release(&srv);
    kite_buf_release(&b);
    json_object_object_add(target, field, out);
out:
    json_object_put(merged);
    kite_json_patch_path_pop(&s->path, saved);
    return r;
}

/* $deleteFromPrimitiveList/<field>: removes every listed scalar from target's field. */
static int delete_primitives(struct smp *s, json_object *target, const char *field, json_object *del) {
    if (!patch_is_array(del))
        return kite_json_patch_fail(s->ret_err, -EBADMSG, "%s: $deleteFromPrimitiveList/%s must be a list",
                          where(s), field);
    json_object *cur;
    if (!json_object_object_get_ex(target, field, &cur) || !patch_is_array(cur)) return 0;
    struct kite_map gone = {0};
    struct kite_buf b = {0};
    index_list(&gone, &b, del, NULL);
    json_object *out = json_object_new_array();
    for (size_t i = 0; i < json_object_array_length(cur); i++) {
        json_object *e = json_object_array_get_idx(cur, i);
        if (!kite_map_get(&gone, canon(&b, e))) json_object_array_add(out, json_object_get(e));
    }
    json_object_object_add(target, field, out);
    kite_map_release(&gone);
    kite_buf_release(&b);
    return 0;
}

/* Merges patch (borrowed object) into *target (owned object, edited in place or replaced).
 * Returns 0, SMP_DELETED when the patch deletes this map, or -errno. */
static int merge_object(struct smp *s, json_object **target, json_object *patch) {
    json_object *d;
    if (json_object_object_get_ex(patch, SMP_DIRECTIVE, &d)) {
        const char *dir = json_object_is_type(d, json_type_string) ? json_object_get_string(d) : "";
        if (kite_streq(dir, "delete")) return SMP_DELETED;
        if (!kite_streq(dir, "replace"))
            return kite_json_patch_fail(s->ret_err, -EINVAL, "%s: unknown $patch directive", where(s));
        /* replace: the rest of this patch applied to an empty map */
        json_object_put(*target);
        *target = json_object_new_object();
    }
    int r;
    json_object *rk;
    if (json_object_object_get_ex(patch, SMP_RETAIN_KEYS, &rk) && (r = retain_keys(s, *target, patch, rk)) < 0)
        return r;
    json_object_object_foreach(patch, ok, ov) {
        if (kite_startswith(ok, SMP_SET_ORDER_PREFIX)) {
            const char *field = ok + strlen(SMP_SET_ORDER_PREFIX);
            if (!*field) return kite_json_patch_fail(s->ret_err, -EBADMSG, "empty $setElementOrder field name");
            if ((r = set_order(s, *target, patch, field, ov)) < 0) return r;
        }
    }
    struct kite_buf ordered = {0};
    json_object_object_foreach(patch, k, v) {
        if (kite_streq(k, SMP_DIRECTIVE) || kite_streq(k, SMP_RETAIN_KEYS) || kite_startswith(k, SMP_SET_ORDER_PREFIX))
            continue;
        if (kite_startswith(k, SMP_DELETE_PRIM_PREFIX)) {
            const char *field = k + strlen(SMP_DELETE_PRIM_PREFIX);
            if (!*field) r = kite_json_patch_fail(s->ret_err, -EBADMSG, "empty $deleteFromPrimitiveList field name");
            else r = delete_primitives(s, *target, field, v);
            if (r < 0) {
                kite_buf_release(&ordered);
                return r;
            }
            continue;
        }
        if (!v) {
            json_object_object_del(*target, k);
            continue;
        }
        kite_buf_reset(&ordered);
        kite_buf_puts(&ordered, SMP_SET_ORDER_PREFIX);
        kite_buf_puts(&ordered, k);
        if (json_object_object_get_ex(patch, ordered.p, NULL)) continue; /* merged by set_order() */

        json_object *cur = NULL, *out = NULL;
        bool has = json_object_object_get_ex(*target, k, &cur);
        size_t saved = kite_json_patch_path_push(&s->path, k);
        if (has && patch_is_object(cur) && patch_is_object(v)) {
            out = json_object_get(cur);
            r = merge_object(s, &out, v);
        } else if (has && patch_is_array(cur) && patch_is_array(v)) {
            r = merge_list(s, cur, v, &out);
        } else {
            r = materialize(s, v, &out); /* absent, type change or scalar */
        }
        kite_json_patch_path_pop(&s->path, saved);
        if (r < 0) {
            json_object_put(out);
            kite_buf_release(&ordered);
            return r;
        }
        if (r == SMP_DELETED) {
            json_object_put(out);
            json_object_object_del(*target, k);
        } else {
            json_object_object_add(*target, k, out);
        }
    }
    kite_buf_release(&ordered);
    return 0;
}

int kite_smp_apply(json_object *doc, json_object *patch, const struct kite_smp_schema *schema,
                   json_object **ret, char **ret_err) {
    if (!patch_is_object(patch)) return kite_json_patch_fail(ret_err, -EBADMSG, "strategic merge patch must be a JSON object");
    if (doc && !patch_is_object(doc)) return kite_json_patch_fail(ret_err, -EINVAL, "document is not a JSON object");
    struct smp s = {.schema = schema, .ret_err = ret_err};
    json_object *out = doc ? kite_json_patch_clone(doc) : json_object_new_object();
    int r = merge_object(&s, &out, patch);
    kite_buf_release(&s.path.buf);
    if (r < 0) {
        json_object_put(out);
        return r;
    }
    if (r == SMP_DELETED) { /* a top-level $patch: delete empties the object */
        json_object_put(out);
        out = json_object_new_object();
    }
    *ret = out;
    return 0;
}
