/* Field sets and structured merge (fieldset.h). The walks follow the value and its schema
 * together; a list's kind (map, set, atomic) comes from the kind's strategic-merge rule for
 * its dotted path, list items being transparent in that path ("spec.containers.ports"). */
#include "api/fieldset.h"
#include "api/registry.h"
#include "base/buf.h"
#include "json/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FieldsV1 nesting read back from a stored object (as deep as the objects it describes) */
#define KITE_FIELDSET_MAX_DEPTH 128

enum shape { ATOM, STRUCT, MAP, LMAP, LSET };

struct ctx {
    const struct kite_fs_scope *sc;
    struct kite_buf path; /* dotted path of the value walked, for the list rules */
};

/* metadata the server sets: never managed (upstream's stripmeta) */
static const char *const SERVER_META[] = {"name", "namespace", "uid", "resourceVersion", "generation",
                                          "creationTimestamp", "selfLink", "managedFields", "clusterName"};

static bool in(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

/* Whether field k of the object at the walk's position is outside every set. */
static bool skipped(const struct ctx *c, const char *k) {
    if (c->path.len == 0) {
        if (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0) return true;
        if (c->sc->skip && strcmp(k, c->sc->skip) == 0) return true;
        if (c->sc->only && strcmp(k, c->sc->only) != 0 && strcmp(k, "metadata") != 0) return true;
        return false;
    }
    return c->path.len == 8 && memcmp(c->path.p, "metadata", 8) == 0 && in(k, SERVER_META, KITE_ARRAY_SIZE(SERVER_META));
}

static size_t push(struct ctx *c, const char *k) {
    size_t mark = c->path.len;
    if (mark) kite_buf_putc(&c->path, '.');
    kite_buf_puts(&c->path, k);
    return mark;
}

static void pop(struct ctx *c, size_t mark) {
    c->path.len = mark;
    if (c->path.p) c->path.p[mark] = 0;
}

static const struct kite_schema *field_schema(const struct kite_schema *s, const char *k) {
    if (!s) return NULL;
    if (s->type == KITE_SCHEMA_MAP) return s->elem;
    if (s->type != KITE_SCHEMA_OBJECT) return NULL;
    for (const struct kite_schema_field *f = s->fields; f && f->name; f++)
        if (strcmp(f->name, k) == 0) return f->schema;
    return NULL; /* a field the schema does not list: deduced from its value */
}

static const struct kite_smp_rule *rule_at(const struct ctx *c) {
    const struct kite_smp_schema *smp = c->sc->smp;
    for (size_t i = 0; smp && i < smp->n_rules; i++)
        if (c->path.p && strcmp(smp->rules[i].path, c->path.p) == 0) return &smp->rules[i];
    return NULL;
}

/* How v, of schema s (NULL: unknown, deduced as upstream: objects are maps, the rest atomic),
 * is walked; *key gets a map list's key field. */
static enum shape shape_of(const struct ctx *c, const struct kite_schema *s, json_object *v, const char **key) {
    bool is_obj = json_object_is_type(v, json_type_object), is_arr = json_object_is_type(v, json_type_array);
    if (!s) return is_obj ? MAP : ATOM;
    switch (s->type) {
    case KITE_SCHEMA_OBJECT: return is_obj ? STRUCT : ATOM;
    case KITE_SCHEMA_MAP: return is_obj ? MAP : ATOM;
    case KITE_SCHEMA_LIST: {
        const struct kite_smp_rule *r = rule_at(c);
        if (!is_arr || !r) return ATOM;
        if ((r->flags & KITE_SMP_MERGE) && r->merge_key) {
            *key = r->map_keys ? r->map_keys : r->merge_key;
            return LMAP;
        }
        return r->flags & KITE_SMP_MERGE_PRIMITIVES ? LSET : ATOM;
    }
    default: return ATOM;
    }
}

/* ---- path elements ------------------------------------------------------------------- */

static bool scalar_json(struct kite_buf *b, json_object *v) {
    switch (json_object_get_type(v)) {
    case json_type_string: kite_buf_json_str(b, json_object_get_string(v)); return true;
    case json_type_int: kite_buf_printf(b, "%lld", (long long)json_object_get_int64(v)); return true;
    case json_type_boolean: kite_buf_puts(b, json_object_get_boolean(v) ? "true" : "false"); return true;
    case json_type_double: kite_buf_printf(b, "%.17g", json_object_get_double(v)); return true;
    default: return false;
    }
}

/* The path elements of a list's items ("k:{...}" or "v:..."), malloc'ed; NULL when an item
 * has no key or a non-scalar one, or two items share one (the list is then atomic). */
/* An item's key as structured-merge-diff writes it: k:{"f1":v1,"f2":v2} (fields in name order;
 * a missing field takes its default from the key spec "f1,f2=default", else the item has no
 * key), or v:value for a set. */
static bool key_of(struct kite_buf *b, json_object *it, const char *spec) {
    if (!json_object_is_type(it, json_type_object)) return false;
    kite_buf_puts(b, "k:{");
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ","), nlen = strcspn(p, ",=");
        char name[64];
        if (nlen >= sizeof name) return false;
        memcpy(name, p, nlen);
        name[nlen] = 0;
        if (p != spec) kite_buf_putc(b, ',');
        kite_buf_json_str(b, name);
        kite_buf_putc(b, ':');
        json_object *kv = kite_obj_get(it, name);
        if (kv) {
            if (!scalar_json(b, kv)) return false;
        } else if (nlen < len) { /* its default */
            kite_buf_putc(b, '"');
            kite_buf_append(b, p + nlen + 1, len - nlen - 1);
            kite_buf_putc(b, '"');
        } else {
            return false;
        }
        p += len;
        if (*p == ',') p++;
    }
    kite_buf_putc(b, '}');
    return true;
}

static char **item_keys(json_object *list, const char *key, size_t *ret_n) {
    size_t n = json_object_array_length(list);
    char **keys = kite_calloc(n ? n : 1, sizeof *keys);
    struct kite_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        json_object *it = json_object_array_get_idx(list, i);
        kite_buf_reset(&b);
        bool ok;
        if (key) {
            ok = key_of(&b, it, key);
        } else {
            kite_buf_puts(&b, "v:");
            ok = scalar_json(&b, it);
        }
        for (size_t j = 0; ok && j < i; j++)
            if (strcmp(keys[j], b.p) == 0) ok = false;
        if (!ok) {
            for (size_t j = 0; j < i; j++) free(keys[j]);
            free(keys);
            kite_buf_release(&b);
            return NULL;
        }
        keys[i] = kite_strdup(b.p);
    }
    kite_buf_release(&b);
    *ret_n = n;
    return keys;
}

static void free_keys(char **keys, size_t n) {
    for (size_t i = 0; keys && i < n; i++) free(keys[i]);
    free(keys);
}

static ssize_t find_key(char **keys, size_t n, const char *k) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i], k) == 0) return (ssize_t)i;
    return -1;
}

/* ---- trie nodes ---------------------------------------------------------------------- */

json_object *kite_fieldset_new(void) { return json_object_new_object(); }

static bool member(json_object *node) { return node && json_object_object_get_ex(node, ".", NULL); }

static void mark(json_object *node) {
    if (!member(node)) json_object_object_add(node, ".", json_object_new_object());
}

static json_object *child(json_object *node, const char *k) {
    json_object *c;
    if (json_object_object_get_ex(node, k, &c)) return c;
    c = json_object_new_object();
    json_object_object_add(node, k, c);
    return c;
}

static json_object *field_child(json_object *node, const char *name) {
    char stack[128];
    size_t n = strlen(name);
    char *k = n + 3 <= sizeof stack ? stack : kite_malloc(n + 3);
    k[0] = 'f', k[1] = ':';
    memcpy(k + 2, name, n + 1);
    json_object *c = child(node, k);
    if (k != stack) free(k);
    return c;
}

static json_object *get_child(json_object *node, const char *k) {
    json_object *c = NULL;
    return node && json_object_object_get_ex(node, k, &c) ? c : NULL;
}

/* Drops node's children that hold nothing. */
static void drop_empty(json_object *node) {
    const char *dead[16];
    size_t n;
    do {
        n = 0;
        json_object_object_foreach(node, k, v) {
            if (strcmp(k, ".") != 0 && json_object_object_length(v) == 0 && n < KITE_ARRAY_SIZE(dead)) dead[n++] = k;
        }
        for (size_t i = 0; i < n; i++) json_object_object_del(node, dead[i]);
    } while (n == KITE_ARRAY_SIZE(dead));
}

bool kite_fieldset_empty(json_object *set) { return !set || json_object_object_length(set) == 0; }

/* ---- the set of a value -------------------------------------------------------------- */

static void fs_value(struct ctx *c, const struct kite_schema *s, json_object *v, json_object *node, bool is_member) {
    if (is_member || !v) mark(node);
    if (!v) return;
    const char *key = NULL;
    switch (shape_of(c, s, v, &key)) {
    case ATOM: mark(node); return;
    case STRUCT:
    case MAP: {
        bool map = s && s->type == KITE_SCHEMA_MAP;
        if (json_object_object_length(v) == 0) mark(node);
        json_object_object_foreach(v, k, cv) {
            if (skipped(c, k)) continue;
            size_t m = push(c, k);
            fs_value(c, field_schema(s, k), cv, field_child(node, k), map || !s || !field_schema(s, k));
            pop(c, m);
        }
        drop_empty(node);
        return;
    }
    case LMAP:
    case LSET: {
        size_t n;
        char **keys = item_keys(v, key, &n);
        if (!keys) {
            mark(node);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            json_object *it = child(node, keys[i]);
            mark(it);
            if (key) fs_value(c, s->elem, json_object_array_get_idx(v, i), it, true);
        }
        free_keys(keys, n);
        return;
    }
    }
}

json_object *kite_fieldset_of(const struct kite_fs_scope *sc, json_object *obj) {
    struct ctx c = {.sc = sc};
    kite_buf_puts(&c.path, "");
    json_object *set = kite_fieldset_new();
    if (obj) fs_value(&c, sc->schema, obj, set, false);
    json_object_object_del(set, "."); /* the root is no path */
    kite_buf_release(&c.path);
    return set;
}

/* ---- diff ---------------------------------------------------------------------------- */

/* The three result sets at the walk's position, made only when something lands in them: most
 * of an object is equal on both sides, and a trie node is a json-c object with its own hash
 * table. */
struct lz {
    struct lz *up;
    const char *key; /* in up */
    json_object *node;
};

static json_object *lz_get(struct lz *l) {
    if (!l->node) l->node = child(lz_get(l->up), l->key);
    return l->node;
}

struct tri { struct lz *a, *r, *m; };

static void lz_drop(struct lz *l) {
    if (l->node) drop_empty(l->node);
}

static void diff_value(struct ctx *c, const struct kite_schema *s, json_object *a, json_object *b, struct tri t);

/* Diff below the child k (a path element) of t's position. */
static void diff_child(struct ctx *c, const struct kite_schema *s, json_object *a, json_object *b, struct tri t,
                       const char *k) {
    struct lz la = {t.a, k, NULL}, lr = {t.r, k, NULL}, lm = {t.m, k, NULL};
    diff_value(c, s, a, b, (struct tri){&la, &lr, &lm});
}

static void diff_fields(struct ctx *c, const struct kite_schema *s, bool map, json_object *a, json_object *b, struct tri t) {
    struct kite_buf key = {0};
    json_object_object_foreach(b, k, bv) {
        json_object *av = NULL;
        bool had = json_object_object_get_ex(a, k, &av);
        /* skipped first: it is a few compares, while equality walks the value (managedFields) */
        if (skipped(c, k) || (had && kite_json_equal(av, bv))) continue;
        size_t m = push(c, k);
        const struct kite_schema *fs = field_schema(s, k);
        kite_buf_reset(&key);
        kite_buf_puts(&key, "f:");
        kite_buf_puts(&key, k);
        if (!had) fs_value(c, fs, bv, child(lz_get(t.a), key.p), map || !fs);
        else diff_child(c, fs, av, bv, t, key.p);
        pop(c, m);
    }
    json_object_object_foreach(a, ka, av2) {
        if (json_object_object_get_ex(b, ka, NULL) || skipped(c, ka)) continue;
        size_t m = push(c, ka);
        const struct kite_schema *fs = field_schema(s, ka);
        fs_value(c, fs, av2, field_child(lz_get(t.r), ka), map || !fs);
        pop(c, m);
    }
    kite_buf_release(&key);
    if (json_object_object_length(b) == 0 && json_object_object_length(a) != 0) mark(lz_get(t.a));
    if (json_object_object_length(a) == 0 && json_object_object_length(b) != 0) mark(lz_get(t.r));
    lz_drop(t.a), lz_drop(t.r), lz_drop(t.m);
}

static void diff_items(struct ctx *c, const struct kite_schema *s, const char *key, json_object *a, json_object *b,
                       struct tri t) {
    size_t na, nb;
    char **ka = item_keys(a, key, &na), **kb = ka ? item_keys(b, key, &nb) : NULL;
    if (!ka || !kb) {
        free_keys(ka, na);
        mark(lz_get(t.m));
        return;
    }
    for (size_t i = 0; i < nb; i++) {
        ssize_t j = find_key(ka, na, kb[i]);
        json_object *bi = json_object_array_get_idx(b, i);
        if (j < 0) {
            json_object *n = child(lz_get(t.a), kb[i]);
            mark(n);
            if (key) fs_value(c, s->elem, bi, n, true);
        } else if (key) {
            json_object *ai = json_object_array_get_idx(a, (size_t)j);
            if (!kite_json_equal(ai, bi)) diff_child(c, s->elem, ai, bi, t, kb[i]);
        }
    }
    for (size_t j = 0; j < na; j++) {
        if (find_key(kb, nb, ka[j]) >= 0) continue;
        json_object *n = child(lz_get(t.r), ka[j]);
        mark(n);
        if (key) fs_value(c, s->elem, json_object_array_get_idx(a, j), n, true);
    }
    free_keys(ka, na);
    free_keys(kb, nb);
    lz_drop(t.a), lz_drop(t.r), lz_drop(t.m);
}

static void diff_value(struct ctx *c, const struct kite_schema *s, json_object *a, json_object *b, struct tri t) {
    const char *ka = NULL, *kb = NULL;
    enum shape sa = shape_of(c, s, a, &ka), sb = shape_of(c, s, b, &kb);
    if (sa != sb || !a || !b) {
        /* a value that changed its type: a new leaf */
        mark(lz_get(t.m));
        return;
    }
    switch (sb) {
    case ATOM: mark(lz_get(t.m)); return;
    case STRUCT:
    case MAP: diff_fields(c, s, s && s->type == KITE_SCHEMA_MAP, a, b, t); return;
    case LMAP:
    case LSET: diff_items(c, s, kb, a, b, t); return;
    }
}

void kite_fieldset_diff(const struct kite_fs_scope *sc, json_object *old, json_object *new_obj, json_object **ret_added,
                        json_object **ret_removed, json_object **ret_modified) {
    struct ctx c = {.sc = sc};
    kite_buf_puts(&c.path, "");
    struct lz a = {.node = kite_fieldset_new()}, r = {.node = kite_fieldset_new()}, m = {.node = kite_fieldset_new()};
    json_object *empty = NULL;
    if (!old) old = empty = json_object_new_object();
    if (new_obj) diff_fields(&c, sc->schema, false, old, new_obj, (struct tri){&a, &r, &m});
    json_object_object_del(a.node, ".");
    json_object_object_del(r.node, ".");
    json_object_object_del(m.node, ".");
    json_object_put(empty);
    kite_buf_release(&c.path);
    *ret_added = a.node;
    *ret_removed = r.node;
    *ret_modified = m.node;
}

/* ---- merge --------------------------------------------------------------------------- */

static json_object *copy(json_object *v) {
    json_object *o = NULL;
    json_object_deep_copy(v, &o, NULL);
    return o;
}

static void merge_object(struct ctx *c, const struct kite_schema *s, json_object *live, json_object *cfg);

static void merge_items(struct ctx *c, const struct kite_schema *s, const char *key, json_object *live, json_object *cfg,
                        json_object *parent, const char *k) {
    size_t nl, nc;
    char **kl = item_keys(live, key, &nl), **kc = kl ? item_keys(cfg, key, &nc) : NULL;
    if (!kl || !kc) {
        free_keys(kl, nl);
        json_object_object_add(parent, k, copy(cfg));
        return;
    }
    for (size_t i = 0; i < nc; i++) {
        ssize_t j = find_key(kl, nl, kc[i]);
        json_object *ci = json_object_array_get_idx(cfg, i);
        if (j < 0) json_object_array_add(live, copy(ci));
        else if (key && json_object_is_type(json_object_array_get_idx(live, (size_t)j), json_type_object))
            merge_object(c, s->elem, json_object_array_get_idx(live, (size_t)j), ci);
    }
    free_keys(kl, nl);
    free_keys(kc, nc);
}

static void merge_field(struct ctx *c, const struct kite_schema *s, json_object *parent, const char *k, json_object *cv) {
    json_object *lv = NULL;
    if (!cv) {
        json_object_object_del(parent, k);
        return;
    }
    json_object_object_get_ex(parent, k, &lv);
    const char *kl = NULL, *kc = NULL;
    enum shape sl = lv ? shape_of(c, s, lv, &kl) : ATOM, sc = shape_of(c, s, cv, &kc);
    if (lv && sl == sc && (sc == STRUCT || sc == MAP)) merge_object(c, s, lv, cv);
    else if (lv && sl == sc && (sc == LMAP || sc == LSET)) merge_items(c, s, kc, lv, cv, parent, k);
    else json_object_object_add(parent, k, copy(cv));
}

static void merge_object(struct ctx *c, const struct kite_schema *s, json_object *live, json_object *cfg) {
    json_object_object_foreach(cfg, k, cv) {
        size_t m = push(c, k);
        merge_field(c, field_schema(s, k), live, k, cv);
        pop(c, m);
    }
}

void kite_fieldset_merge(const struct kite_fs_scope *sc, json_object *obj, json_object *cfg) {
    struct ctx c = {.sc = sc};
    kite_buf_puts(&c.path, "");
    merge_object(&c, sc->schema, obj, cfg);
    kite_buf_release(&c.path);
}

static json_object *parse_elem(const char *k) {
    enum json_tokener_error e;
    return kite_json_parse(k + 2, strlen(k + 2), 8, &e, NULL);
}

/* ---- pruning ------------------------------------------------------------------------- */

json_object *kite_fieldset_pruned(json_object *last, json_object *applied, json_object *others) {
    json_object *res = kite_fieldset_new();
    json_object_object_foreach(last, k, lc) {
        if (strcmp(k, ".") == 0) continue;
        json_object *ac = get_child(applied, k), *oc = get_child(others, k);
        if (member(lc) && !ac && !oc) {
            mark(child(res, k));
        } else {
            json_object *sub = kite_fieldset_pruned(lc, ac, oc);
            if (kite_fieldset_empty(sub)) json_object_put(sub);
            else json_object_object_add(res, k, sub);
        }
    }
    return res;
}

static ssize_t find_item(json_object *list, const char *k) {
    json_object *want = parse_elem(k);
    ssize_t found = -1;
    size_t n = json_object_array_length(list);
    for (size_t i = 0; want && found < 0 && i < n; i++) {
        json_object *it = json_object_array_get_idx(list, i);
        if (k[0] == 'v') {
            if (kite_json_equal(it, want)) found = (ssize_t)i;
            continue;
        }
        bool all = json_object_is_type(want, json_type_object);
        json_object_object_foreach(want, wk, wv) {
            json_object *iv = kite_obj_get(it, wk);
            if (!iv || !kite_json_equal(iv, wv)) all = false;
        }
        if (all) found = (ssize_t)i;
    }
    json_object_put(want);
    return found;
}

void kite_fieldset_remove_from(json_object *obj, json_object *set) {
    json_object_object_foreach(set, k, node) {
        if (strcmp(k, ".") == 0) continue;
        if (k[0] == 'f' && k[1] == ':' && json_object_is_type(obj, json_type_object)) {
            json_object *v = kite_obj_get(obj, k + 2);
            if (!v && !json_object_object_get_ex(obj, k + 2, NULL)) continue;
            if (member(node)) json_object_object_del(obj, k + 2);
            else kite_fieldset_remove_from(v, node);
        } else if ((k[0] == 'k' || k[0] == 'v') && k[1] == ':' && json_object_is_type(obj, json_type_array)) {
            ssize_t i = find_item(obj, k);
            if (i < 0) continue;
            if (member(node)) json_object_array_del_idx(obj, (size_t)i, 1);
            else kite_fieldset_remove_from(json_object_array_get_idx(obj, (size_t)i), node);
        }
    }
}

/* ---- algebra ------------------------------------------------------------------------- */

void kite_fieldset_union_into(json_object *dst, json_object *src) {
    json_object_object_foreach(src, k, sc) {
        if (strcmp(k, ".") == 0) mark(dst);
        else kite_fieldset_union_into(child(dst, k), sc);
    }
}

json_object *kite_fieldset_difference(json_object *a, json_object *b) {
    json_object *res = kite_fieldset_new();
    json_object_object_foreach(a, k, ac) {
        if (strcmp(k, ".") == 0) {
            if (!member(b)) mark(res);
            continue;
        }
        json_object *bc = get_child(b, k);
        json_object *sub = bc ? kite_fieldset_difference(ac, bc) : copy(ac);
        if (kite_fieldset_empty(sub)) json_object_put(sub);
        else json_object_object_add(res, k, sub);
    }
    return res;
}

json_object *kite_fieldset_intersection(json_object *a, json_object *b) {
    json_object *res = kite_fieldset_new();
    json_object_object_foreach(a, k, ac) {
        if (strcmp(k, ".") == 0) {
            if (member(b)) mark(res);
            continue;
        }
        json_object *bc = get_child(b, k);
        if (!bc) continue;
        json_object *sub = kite_fieldset_intersection(ac, bc);
        if (kite_fieldset_empty(sub)) json_object_put(sub);
        else json_object_object_add(res, k, sub);
    }
    return res;
}

/* ---- FieldsV1 and printing ----------------------------------------------------------- */

/* Upstream's order of path elements: fields, then keys, values, indexes; by text within. */
static int rank(const char *k) {
    switch (k[0]) {
    case '.': return 0;
    case 'f': return 1;
    case 'k': return 2;
    case 'v': return 3;
    default: return 4;
    }
}

static int elem_cmp(const void *x, const void *y) {
    const char *a = *(const char *const *)x, *b = *(const char *const *)y;
    int d = rank(a) - rank(b);
    return d ? d : strcmp(a, b);
}

/* node's keys in upstream's order (malloc'ed array of borrowed strings). */
static const char **sorted_keys(json_object *node, size_t *ret_n) { return kite_obj_sorted_keys(node, elem_cmp, ret_n); }

json_object *kite_fieldset_to_v1(json_object *set) {
    json_object *out = json_object_new_object();
    size_t n;
    const char **keys = sorted_keys(set, &n);
    bool kids = false;
    for (size_t i = 0; i < n; i++) kids |= strcmp(keys[i], ".") != 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(keys[i], ".") == 0) {
            if (kids) json_object_object_add(out, ".", json_object_new_object());
            continue;
        }
        json_object_object_add(out, keys[i], kite_fieldset_to_v1(get_child(set, keys[i])));
    }
    free(keys);
    return out;
}

static json_object *from_v1(json_object *v1, int depth) {
    if (!json_object_is_type(v1, json_type_object) || depth > KITE_FIELDSET_MAX_DEPTH) return NULL;
    json_object *out = json_object_new_object();
    if (json_object_object_length(v1) == 0) mark(out);
    json_object_object_foreach(v1, k, c) {
        if (strcmp(k, ".") == 0) {
            mark(out);
            continue;
        }
        bool known = strlen(k) >= 2 && k[1] == ':' && strchr("fkvi", k[0]);
        json_object *sub = known ? from_v1(c, depth + 1) : NULL;
        if (!sub) {
            json_object_put(out);
            return NULL;
        }
        json_object_object_add(out, k, sub);
    }
    return out;
}

json_object *kite_fieldset_from_v1(json_object *v1) {
    json_object *s = from_v1(v1, 0);
    if (s) json_object_object_del(s, ".");
    return s;
}

static bool v1_member(json_object *v1) {
    return json_object_object_length(v1) == 0 || json_object_object_get_ex(v1, ".", NULL);
}

bool kite_fieldset_v1_covers(json_object *v1, json_object *set) {
    if (!json_object_is_type(v1, json_type_object)) return false;
    json_object_object_foreach(set, k, sc) {
        if (strcmp(k, ".") == 0) {
            if (!v1_member(v1)) return false;
        } else if (!kite_fieldset_v1_covers(get_child(v1, k), sc)) {
            return false;
        }
    }
    return true;
}

bool kite_fieldset_v1_meets(json_object *v1, json_object *set) {
    if (!json_object_is_type(v1, json_type_object)) return false;
    json_object_object_foreach(set, k, sc) {
        if (strcmp(k, ".") == 0) {
            if (v1_member(v1)) return true;
        } else if (kite_fieldset_v1_meets(get_child(v1, k), sc)) {
            return true;
        }
    }
    return false;
}

static void print_elem(struct kite_buf *b, const char *k) {
    if (k[0] == 'f') {
        kite_buf_printf(b, ".%s", k + 2);
    } else if (k[0] == 'v') {
        kite_buf_printf(b, "[=%s]", k + 2);
    } else if (k[0] == 'i') {
        kite_buf_printf(b, "[%s]", k + 2);
    } else {
        json_object *o = parse_elem(k);
        kite_buf_putc(b, '[');
        bool first = true;
        json_object_object_foreach(o, ok, ov) {
            kite_buf_printf(b, "%s%s=", first ? "" : ",", ok);
            if (!scalar_json(b, ov)) kite_buf_puts(b, "?");
            first = false;
        }
        kite_buf_putc(b, ']');
        json_object_put(o);
    }
}

static void each(json_object *node, struct kite_buf *path, void (*fn)(void *, const char *), void *ud) {
    size_t n;
    const char **keys = sorted_keys(node, &n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(keys[i], ".") == 0) continue;
        size_t m = path->len;
        print_elem(path, keys[i]);
        json_object *c = get_child(node, keys[i]);
        if (member(c)) fn(ud, path->p);
        each(c, path, fn, ud);
        path->len = m;
        path->p[m] = 0;
    }
    free(keys);
}

void kite_fieldset_each(json_object *set, void (*fn)(void *ud, const char *path), void *ud) {
    struct kite_buf path = {0};
    kite_buf_puts(&path, "");
    each(set, &path, fn, ud);
    kite_buf_release(&path);
}
