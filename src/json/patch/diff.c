/* Two-way strategic merge patch (Kubernetes CreateTwoWayMergePatch with SetElementOrder).
 *
 * Map fields: added or changed values are emitted, removed ones become null. Merge lists of
 * maps: changed elements carry the merge key plus their own diff, new elements are emitted
 * whole, removed ones become {"$patch":"delete", key}, and "$setElementOrder/<field>" lists
 * every merge key of `to` whenever anything in the list changed or its order did. Merge lists
 * of scalars: additions, "$deleteFromPrimitiveList/<field>" and "$setElementOrder/<field>".
 * Atomic lists are emitted whole when they differ. */
#include "json/patch/internal.h"

struct diff {
    const struct kite_smp_schema *schema;
    struct patch_path path;
};

static int diff_objects(struct diff *d, json_object *from, json_object *to, bool retain, json_object **ret);

static const char *canon(struct kite_buf *b, json_object *o) {
    kite_buf_reset(b);
    kite_buf_grow(b, 1);
    kite_json_patch_canon(b, o);
    return b->p;
}

/* Sort text Kubernetes uses for scalars (fmt "%v"): strings raw, others as JSON. */
static char *sort_text(json_object *o) {
    if (json_object_is_type(o, json_type_string)) return kite_strdup(json_object_get_string(o));
    struct kite_buf b = {0};
    kite_buf_grow(&b, 1);
    kite_json_patch_canon(&b, o);
    return kite_buf_detach(&b, NULL);
}

struct sorted {
    char *text;
    json_object *o; /* owned */
};

static int cmp_sorted(const void *a, const void *b) {
    return strcmp(((const struct sorted *)a)->text, ((const struct sorted *)b)->text);
}

/* Moves the elements of vec (owned) into a new array sorted by their sort text of key(e). */
static json_object *sorted_array(struct sorted *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_sorted);
    json_object *out = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n; i++) {
        json_object_array_add(out, v[i].o);
        free(v[i].text);
    }
    free(v);
    return out;
}

static void add_directive_list(json_object *patch, const char *prefix, const char *field, json_object *list) {
    char *k = kite_asprintf("%s%s", prefix, field);
    json_object_object_add(patch, k, list);
    free(k);
}

/* Element kind of two lists: 0 empty, 1 scalars, 2 maps; -EINVAL for mixed or nested lists. */
static int kind_of(json_object *a, json_object *b) {
    int kind = 0;
    json_object *lists[2] = {a, b};
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < json_object_array_length(lists[l]); i++) {
            json_object *e = json_object_array_get_idx(lists[l], i);
            if (patch_is_array(e)) return -EINVAL;
            int k = patch_is_object(e) ? 2 : 1;
            if (kind && k != kind) return -EINVAL;
            kind = k;
        }
    return kind;
}

/* Indexes a list of maps by merge-key text (values are index + 1); duplicate or missing keys
 * cannot be expressed as a merge patch, so they are an error. */
static int index_by_key(json_object *list, const char *mk, struct kite_map *m, struct kite_buf *b) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *v;
        if (!json_object_object_get_ex(json_object_array_get_idx(list, i), mk, &v)) return -EINVAL;
        const char *k = canon(b, v);
        if (kite_map_get(m, k)) return -EINVAL;
        kite_map_put(m, k, (void *)(uintptr_t)(i + 1));
    }
    return 0;
}

/* v (borrowed) is about to be emitted whole at d->path (a new field, list or list element):
 * kite_smp_apply will merge it into nothing, so every merge list inside it must be one a
 * patch can express, as index_by_key and kind_of demand of lists diffed in place. Checking
 * here keeps the promise that a successful diff applies back to `to`. */
static int check_whole(struct diff *d, json_object *v) {
    if (patch_is_object(v)) {
        json_object_object_foreach(v, k, child) {
            size_t saved = kite_json_patch_path_push(&d->path, k);
            int r = check_whole(d, child);
            kite_json_patch_path_pop(&d->path, saved);
            if (r < 0) return r;
        }
        return 0;
    }
    if (!patch_is_array(v)) return 0;
    const struct kite_smp_rule *rule = kite_json_patch_rule(d->schema, &d->path);
    if (rule && (rule->flags & (KITE_SMP_MERGE | KITE_SMP_MERGE_PRIMITIVES))) {
        int kind = kind_of(v, v);
        if (kind < 0) return kind;
        struct kite_map seen = {0};
        struct kite_buf b = {0};
        int r = 0;
        if (kind == 2) {
            r = rule->merge_key ? index_by_key(v, rule->merge_key, &seen, &b) : -EINVAL;
        } else {
            /* a primitive merge list is a set: duplicates would collapse on apply */
            for (size_t i = 0; i < json_object_array_length(v) && r == 0; i++) {
                const char *k = canon(&b, json_object_array_get_idx(v, i));
                if (kite_map_get(&seen, k)) r = -EINVAL;
                else kite_map_put(&seen, k, (void *)1);
            }
        }
        kite_map_release(&seen);
        kite_buf_release(&b);
        if (r < 0) return r;
    }
    /* elements are transparent in paths: nested lists keep their rules */
    for (size_t i = 0; i < json_object_array_length(v); i++) {
        int r = check_whole(d, json_object_array_get_idx(v, i));
        if (r < 0) return r;
    }
    return 0;
}

static int diff_map_list(struct diff *d, json_object *from, json_object *to, const struct kite_smp_rule *rule,
                         const char *field, json_object *patch) {
    const char *mk = rule->merge_key;
    if (!mk) return -EINVAL;
    struct kite_map fi = {0}, ti = {0};
    struct kite_buf b = {0};
    json_object *list = NULL;
    int r = index_by_key(from, mk, &fi, &b);
    if (r >= 0) r = index_by_key(to, mk, &ti, &b);
    if (r < 0) goto out;

    size_t nf = json_object_array_length(from), nt = json_object_array_length(to);
    bool retain = rule->flags & KITE_SMP_RETAIN_KEYS;
    list = json_object_new_array();
    for (size_t i = 0; i < nt; i++) {
        json_object *te = json_object_array_get_idx(to, i), *kv;
        json_object_object_get_ex(te, mk, &kv);
        void *at = kite_map_get(&fi, canon(&b, kv));
        if (!at) {
            if ((r = check_whole(d, te)) < 0) goto out;
            json_object_array_add(list, kite_json_patch_clone(te));
            continue;
        }
        json_object *sub;
        if ((r = diff_objects(d, json_object_array_get_idx(from, (uintptr_t)at - 1), te, retain, &sub)) < 0) goto out;
        if (json_object_object_length(sub) == 0) {
            json_object_put(sub);
            continue;
        }
        /* the merge key first, then the changed fields */
        json_object *el = json_object_new_object();
        json_object_object_add(el, mk, kite_json_patch_clone(kv));
        json_object_object_foreach(sub, sk, sv) json_object_object_add(el, sk, json_object_get(sv));
        json_object_put(sub);
        json_object_array_add(list, el);
    }
    /* deletions go last, sorted by key like Kubernetes' sorted walk emits them */
    struct sorted *dels = kite_malloc((nf ? nf : 1) * sizeof *dels);
    size_t nd = 0;
    bool order_same = nf == nt;
    for (size_t i = 0; i < nf; i++) {
        json_object *fe = json_object_array_get_idx(from, i), *kv;
        json_object_object_get_ex(fe, mk, &kv);
        if (order_same) {
            json_object *tkv;
            json_object_object_get_ex(json_object_array_get_idx(to, i), mk, &tkv);
            order_same = kite_json_equal(kv, tkv);
        }
        if (kite_map_get(&ti, canon(&b, kv))) continue;
        json_object *del = json_object_new_object();
        json_object_object_add(del, SMP_DIRECTIVE, json_object_new_string("delete"));
        json_object_object_add(del, mk, kite_json_patch_clone(kv));
        dels[nd++] = (struct sorted){sort_text(kv), del};
    }
    json_object *sorted_dels = sorted_array(dels, nd);
    for (size_t i = 0; i < nd; i++)
        json_object_array_add(list, json_object_get(json_object_array_get_idx(sorted_dels, i)));
    json_object_put(sorted_dels);

    bool changed = json_object_array_length(list) > 0;
    if ((changed || !order_same) && nt > 0) {
        json_object *order = json_object_new_array_ext((int)nt);
        for (size_t i = 0; i < nt; i++) {
            json_object *kv, *o = json_object_new_object();
            json_object_object_get_ex(json_object_array_get_idx(to, i), mk, &kv);
            json_object_object_add(o, mk, kite_json_patch_clone(kv));
            json_object_array_add(order, o);
        }
        add_directive_list(patch, SMP_SET_ORDER_PREFIX, field, order);
    }
    if (changed) json_object_object_add(patch, field, TAKE_PTR(list));
out:
    json_object_put(list);
    kite_map_release(&fi);
    kite_map_release(&ti);
    kite_buf_release(&b);
    return r;
}

static void diff_scalar_list(json_object *from, json_object *to, const char *field, json_object *patch) {
    struct kite_map fs = {0}, ts = {0}, added = {0};
    struct kite_buf b = {0};
    size_t nf = json_object_array_length(from), nt = json_object_array_length(to);
    for (size_t i = 0; i < nf; i++) kite_map_put(&fs, canon(&b, json_object_array_get_idx(from, i)), (void *)1);
    for (size_t i = 0; i < nt; i++) kite_map_put(&ts, canon(&b, json_object_array_get_idx(to, i)), (void *)1);

    json_object *adds = json_object_new_array();
    for (size_t i = 0; i < nt; i++) {
        json_object *e = json_object_array_get_idx(to, i);
        const char *k = canon(&b, e);
        if (kite_map_get(&fs, k) || kite_map_get(&added, k)) continue;
        kite_map_put(&added, k, (void *)1);
        json_object_array_add(adds, kite_json_patch_clone(e));
    }
    struct sorted *dels = kite_malloc((nf ? nf : 1) * sizeof *dels);
    size_t nd = 0;
    for (size_t i = 0; i < nf; i++) {
        json_object *e = json_object_array_get_idx(from, i);
        const char *k = canon(&b, e);
        if (kite_map_get(&ts, k)) continue;
        kite_map_put(&ts, k, (void *)1); /* once per value */
        dels[nd++] = (struct sorted){sort_text(e), kite_json_patch_clone(e)};
    }
    json_object *del_list = sorted_array(dels, nd);
    if ((nd > 0 || !kite_json_equal(from, to)) && nt > 0)
        add_directive_list(patch, SMP_SET_ORDER_PREFIX, field, kite_json_patch_clone(to));
    if (json_object_array_length(adds) > 0) json_object_object_add(patch, field, TAKE_PTR(adds));
    if (nd > 0) add_directive_list(patch, SMP_DELETE_PRIM_PREFIX, field, TAKE_PTR(del_list));
    json_object_put(adds);
    json_object_put(del_list);
    kite_map_release(&fs);
    kite_map_release(&ts);
    kite_map_release(&added);
    kite_buf_release(&b);
}

/* Diffs two lists found under `field`; the path already names the field. */
static int diff_lists(struct diff *d, json_object *from, json_object *to, const char *field, json_object *patch) {
    const struct kite_smp_rule *rule = kite_json_patch_rule(d->schema, &d->path);
    if (!rule || !(rule->flags & (KITE_SMP_MERGE | KITE_SMP_MERGE_PRIMITIVES))) {
        if (kite_json_equal(from, to)) return 0;
        int r = check_whole(d, to);
        if (r < 0) return r;
        json_object_object_add(patch, field, kite_json_patch_clone(to));
        return 0;
    }
    if (json_object_array_length(from) == 0) {
        /* nothing to merge with: send the new list whole */
        if (json_object_array_length(to) == 0) return 0;
        int r = check_whole(d, to);
        if (r < 0) return r;
        json_object_object_add(patch, field, kite_json_patch_clone(to));
        return 0;
    }
    int kind = kind_of(from, to);
    if (kind < 0) return kind;
    if (kind == 2) return diff_map_list(d, from, to, rule, field, patch);
    /* `to` is a set: duplicates would collapse on apply (check_whole rejects them) */
    int r = check_whole(d, to);
    if (r < 0) return r;
    diff_scalar_list(from, to, field, patch);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int diff_objects(struct diff *d, json_object *from, json_object *to, bool retain, json_object **ret) {
    json_object *patch = json_object_new_object();
    int r = 0;
    json_object_object_foreach(to, k, tv) {
        json_object *fv;
        if (!json_object_object_get_ex(from, k, &fv) || json_object_get_type(fv) != json_object_get_type(tv)) {
            size_t saved = kite_json_patch_path_push(&d->path, k);
            r = check_whole(d, tv);
            kite_json_patch_path_pop(&d->path, saved);
            if (r < 0) {
                json_object_put(patch);
                return r;
            }
            json_object_object_add(patch, k, kite_json_patch_clone(tv));
            continue;
        }
        if (patch_is_object(tv) || patch_is_array(tv)) {
            size_t saved = kite_json_patch_path_push(&d->path, k);
            if (patch_is_array(tv)) {
                r = diff_lists(d, fv, tv, k, patch);
            } else {
                const struct kite_smp_rule *rule = kite_json_patch_rule(d->schema, &d->path);
                json_object *sub = NULL;
                r = diff_objects(d, fv, tv, rule && (rule->flags & KITE_SMP_RETAIN_KEYS), &sub);
                if (r >= 0 && json_object_object_length(sub) > 0) json_object_object_add(patch, k, TAKE_PTR(sub));
                json_object_put(sub);
            }
            kite_json_patch_path_pop(&d->path, saved);
            if (r < 0) {
                json_object_put(patch);
                return r;
            }
        } else if (!kite_json_equal(fv, tv)) {
            json_object_object_add(patch, k, kite_json_patch_clone(tv));
        }
    }
    json_object_object_foreach(from, fk, fv) {
        (void)fv;
        if (!json_object_object_get_ex(to, fk, NULL)) json_object_object_add(patch, fk, NULL);
    }
    if (retain && json_object_object_length(patch) > 0) {
        /* $retainKeys lists every non-null field of `to`, sorted, so the server clears the rest */
        size_t n = 0, cap = (size_t)json_object_object_length(to) + 1;
        const char **keys = kite_malloc(cap * sizeof *keys);
        json_object_object_foreach(to, rk, rv) if (rv) keys[n++] = rk;
        if (n > 0) {
            qsort(keys, n, sizeof *keys, cmp_str);
            json_object *list = json_object_new_array_ext((int)n);
            for (size_t i = 0; i < n; i++) json_object_array_add(list, json_object_new_string(keys[i]));
            json_object_object_add(patch, SMP_RETAIN_KEYS, list);
        }
        free(keys);
    }
    *ret = patch;
    return 0;
}

int kite_smp_diff(json_object *from, json_object *to, const struct kite_smp_schema *schema, json_object **ret) {
    if ((from && !patch_is_object(from)) || (to && !patch_is_object(to))) return -EINVAL;
    struct diff d = {.schema = schema};
    json_object *empty = json_object_new_object();
    int r = diff_objects(&d, from ? from : empty, to ? to : empty, false, ret);
    json_object_put(empty);
    kite_buf_release(&d.path.buf);
    return r;
}
