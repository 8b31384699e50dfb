/* YAML <-> json-c: documents (kubeconfigs, config files, request bodies) read event by event
 * through libyaml's parser, objects written through its emitter.
 *
 * Reading runs on untrusted bodies, so every cost is bounded while libyaml reads, never after:
 * nesting past KITE_YAML_MAX_DEPTH stops at the event that opens the level too many (libyaml
 * only looks ahead a bounded stretch of text), anchors are looked up in a hash map (libyaml's
 * document loader scans a list per anchor and per alias: quadratic), and an alias is paid for
 * before it is copied: its anchor's node count and decoded size, recorded when the anchor's node
 * ended, go against KITE_YAML_MAX_NODES and the expansion budget, so a few nested aliases
 * ("billion laughs", or one large scalar reached through 99^3 aliases) stop at the budget
 * instead of filling memory. Each event then costs O(1) but for an alias's copy, which the
 * budgets bound. Only the first document is read. */
#include "api/yaml.h"
#include "base/map.h"
#include "json/obj.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

static bool all_digits(const char *s) {
    if (*s == '-' || *s == '+') s++;
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

static bool is_bool(const char *v, bool *ret) {
    if (kite_streq(v, "true") || kite_streq(v, "True") || kite_streq(v, "TRUE")) return *ret = true, true;
    if (kite_streq(v, "false") || kite_streq(v, "False") || kite_streq(v, "FALSE")) return *ret = false, true;
    return false;
}

static json_object *scalar(const char *v, size_t len, bool plain) {
    if (plain) {
        int64_t i;
        bool b;
        if (all_digits(v) && kite_parse_int64(v, &i) == 0) return json_object_new_int64(i);
        if (is_bool(v, &b)) return json_object_new_boolean(b);
        if (!*v || kite_streq(v, "~") || kite_streq(v, "null") || kite_streq(v, "Null") || kite_streq(v, "NULL"))
            return NULL;
    }
    return json_object_new_string_len(v, (int)len);
}

/* What an anchored node costs each alias that repeats it. */
struct anchor {
    json_object *node; /* a reference (NULL for null) */
    size_t nodes, bytes;
    size_t height;     /* levels of collections in it: a copy must fit under KITE_YAML_MAX_DEPTH */
};

struct frame {
    json_object *o;      /* the array or object being filled */
    bool mapping;
    char *key;           /* mapping: the key whose value comes next (NULL: a key comes next) */
    size_t key_line;     /* its line, 1-based */
    char *anchor;        /* registered when the collection ends */
    size_t nodes0, bytes0, height;
};

struct load {
    struct frame stack[KITE_YAML_MAX_DEPTH];
    size_t depth;
    struct kite_map anchors; /* name -> struct anchor */
    size_t nodes, bytes, expanded, expand_max, events, n_anchors;
    size_t n_dups;
    struct kite_buf dups;
    json_object *root;
    bool done;
    char *err;
};

/* Each scalar and key counts as the bytes JSON would spell it with (quotes, separators); a
 * mapping or sequence as KITE_YAML_COLLECTION_BYTES, about what json-c allocates for an empty
 * one, so aliases of small collections are bounded by the memory they cost. */
static size_t cost(size_t len) { return len + 3; }

static int fail(struct load *l, int r, const yaml_event_t *ev, const char *fmt, ...) KITE_PRINTF(4, 5);
static int fail(struct load *l, int r, const yaml_event_t *ev, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0) m = NULL;
    va_end(ap);
    free(l->err);
    l->err = kite_asprintf("line %zu: %s", ev->start_mark.line + 1, m ? m : "invalid YAML");
    free(m);
    return r;
}

static int charge(struct load *l, const yaml_event_t *ev, size_t nodes, size_t bytes, size_t expanded) {
    l->nodes += nodes;
    l->bytes += bytes;
    l->expanded += expanded;
    if (l->nodes > KITE_YAML_MAX_NODES)
        return fail(l, -EFBIG, ev, "document larger than %u nodes (aliases counted as expanded)", KITE_YAML_MAX_NODES);
    if (l->expanded > l->expand_max)
        return fail(l, -EFBIG, ev, "aliases expand the document by more than %zu bytes", l->expand_max);
    return 0;
}

static int define_anchor(struct load *l, const yaml_event_t *ev, const char *name, json_object *node, size_t nodes,
                         size_t bytes, size_t height) {
    struct anchor *a = kite_map_get(&l->anchors, name);
    if (!a) {
        if (++l->n_anchors > KITE_YAML_MAX_ANCHORS)
            return fail(l, -EFBIG, ev, "document defines more than %u anchors", KITE_YAML_MAX_ANCHORS);
        a = kite_calloc(1, sizeof *a);
        kite_map_put(&l->anchors, name, a);
    }
    json_object_put(a->node); /* YAML lets a later anchor of the same name take over */
    *a = (struct anchor){json_object_get(node), nodes, bytes, height};
    return 0;
}

/* yaml.v2's strict decoding names each repeated key: line 3: key "x" already set in map */
static void duplicate(struct load *l, size_t line, const char *key) {
    if (l->n_dups++ >= KITE_YAML_MAX_DUPLICATES) return;
    kite_buf_printf(&l->dups, "%sline %zu: key \"", l->dups.len ? "\n  " : "", line);
    for (const char *p = key; *p; p++) {
        if (*p == '"' || *p == '\\') kite_buf_putc(&l->dups, '\\');
        kite_buf_putc(&l->dups, *p);
    }
    kite_buf_puts(&l->dups, "\" already set in map");
}

/* Hands v (owned; height levels of collections) to the open collection, or makes it the
 * document's root. */
static void add(struct load *l, json_object *v, size_t height) {
    if (l->depth == 0) {
        l->root = v;
        return;
    }
    struct frame *f = &l->stack[l->depth - 1];
    if (f->height < height + 1) f->height = height + 1;
    if (!f->mapping) {
        json_object_array_add(f->o, v);
        return;
    }
    if (json_object_object_get_ex(f->o, f->key, NULL)) duplicate(l, f->key_line, f->key);
    json_object_object_add(f->o, f->key, v); /* a repeated key: the last value wins, as Go's decoders */
    free(f->key);
    f->key = NULL;
}

static bool wants_key(const struct load *l) {
    return l->depth && l->stack[l->depth - 1].mapping && !l->stack[l->depth - 1].key;
}

static int on_scalar(struct load *l, const yaml_event_t *ev) {
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *anchor = (const char *)ev->data.scalar.anchor;
    if (memchr(v, 0, len))
        return fail(l, -EINVAL, ev, "a string holds the NUL character (\\0), which this server does not support");
    int r = charge(l, ev, 1, cost(len), 0);
    if (r < 0) return r;
    if (wants_key(l)) {
        l->stack[l->depth - 1].key = kite_strndup(v, len);
        l->stack[l->depth - 1].key_line = ev->start_mark.line + 1;
        if (anchor) {
            json_object *k = json_object_new_string_len(v, (int)len);
            r = define_anchor(l, ev, anchor, k, 1, cost(len), 0);
            json_object_put(k);
        }
        return r;
    }
    json_object *o = scalar(v, len, ev->data.scalar.plain_implicit && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE);
    if (anchor && (r = define_anchor(l, ev, anchor, o, 1, cost(len), 0)) < 0) {
        json_object_put(o);
        return r;
    }
    add(l, o, 0);
    return 0;
}

static int on_alias(struct load *l, const yaml_event_t *ev) {
    const char *name = (const char *)ev->data.alias.anchor;
    struct anchor *a = kite_map_get(&l->anchors, name);
    if (!a) return fail(l, -EINVAL, ev, "unknown anchor '%s' referenced", name);
    if (l->depth + a->height > KITE_YAML_MAX_DEPTH)
        return fail(l, -EINVAL, ev, "document nested deeper than %d levels", KITE_YAML_MAX_DEPTH);
    int r = charge(l, ev, a->nodes, a->bytes, a->bytes);
    if (r < 0) return r;
    if (wants_key(l)) {
        if (!json_object_is_type(a->node, json_type_string))
            return fail(l, -EINVAL, ev, "a mapping key must be a scalar (complex keys have no JSON form)");
        l->stack[l->depth - 1].key = kite_strdup(json_object_get_string(a->node));
        l->stack[l->depth - 1].key_line = ev->start_mark.line + 1;
        return 0;
    }
    json_object *copy = NULL;
    if (a->node && json_object_deep_copy(a->node, &copy, NULL) < 0) return -ENOMEM;
    add(l, copy, a->height);
    return 0;
}

static int on_start(struct load *l, const yaml_event_t *ev, bool mapping) {
    if (wants_key(l)) return fail(l, -EINVAL, ev, "a mapping key must be a scalar (complex keys have no JSON form)");
    if (l->depth >= KITE_YAML_MAX_DEPTH)
        return fail(l, -EINVAL, ev, "document nested deeper than %d levels", KITE_YAML_MAX_DEPTH);
    size_t nodes0 = l->nodes, bytes0 = l->bytes;
    int r = charge(l, ev, 1, KITE_YAML_COLLECTION_BYTES, 0);
    if (r < 0) return r;
    const yaml_char_t *anchor = mapping ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
    l->stack[l->depth++] = (struct frame){
        .o = mapping ? json_object_new_object() : json_object_new_array(),
        .mapping = mapping,
        .anchor = anchor ? kite_strdup((const char *)anchor) : NULL,
        .nodes0 = nodes0,
        .bytes0 = bytes0,
        .height = 1,
    };
    return 0;
}

static int on_end(struct load *l, const yaml_event_t *ev) {
    struct frame f = l->stack[--l->depth];
    int r = 0;
    if (f.anchor) r = define_anchor(l, ev, f.anchor, f.o, l->nodes - f.nodes0, l->bytes - f.bytes0, f.height);
    free(f.anchor);
    free(f.key);
    if (r < 0) {
        json_object_put(f.o);
        return r;
    }
    add(l, f.o, f.height);
    return 0;
}

static int on_event(struct load *l, const yaml_event_t *ev) {
    switch (ev->type) {
    case YAML_SCALAR_EVENT: return on_scalar(l, ev);
    case YAML_ALIAS_EVENT: return on_alias(l, ev);
    case YAML_SEQUENCE_START_EVENT: return on_start(l, ev, false);
    case YAML_MAPPING_START_EVENT: return on_start(l, ev, true);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: return on_end(l, ev);
    case YAML_DOCUMENT_END_EVENT:
    case YAML_STREAM_END_EVENT: l->done = true; return 0;
    default: return 0; /* stream and document start */
    }
}

/* libyaml checks each %TAG directive against all before it, and each tag against all of them:
 * quadratic in their number, before the first event. Counted in the text before the first
 * document's start (directives come there alone). */
static size_t count_directives(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (s[i] == '%') n++;
        else if (len - i >= 3 && memcmp(s + i, "---", 3) == 0) break;
        const char *nl = memchr(s + i, '\n', len - i);
        if (!nl) break;
        i = (size_t)(nl - s) + 1;
    }
    return n;
}

int kite_yaml_parse_ex(const char *data, size_t len, json_object **ret, char **ret_err, struct kite_yaml_info *info) {
    if (info) *info = (struct kite_yaml_info){0};
    if (len > KITE_YAML_MAX_BYTES) {
        if (ret_err) *ret_err = kite_asprintf("document larger than %u bytes", KITE_YAML_MAX_BYTES);
        return -EFBIG;
    }
    if (count_directives(data, len) > KITE_YAML_MAX_DIRECTIVES) {
        if (ret_err) *ret_err = kite_asprintf("more than %u directives", KITE_YAML_MAX_DIRECTIVES);
        return -EINVAL;
    }
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return -ENOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
    struct load l = {.expand_max = (size_t)KITE_YAML_EXPANSION_RATIO * len};
    if (l.expand_max < KITE_YAML_EXPANSION_MIN) l.expand_max = KITE_YAML_EXPANSION_MIN;
    int r = 0;
    while (!l.done && r == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            l.err = kite_asprintf("line %zu: %s", p.problem_mark.line + 1, p.problem ? p.problem : "invalid YAML");
            r = -EINVAL;
            break;
        }
        l.events++;
        r = on_event(&l, &ev);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    while (l.depth) {
        struct frame *f = &l.stack[--l.depth];
        json_object_put(f->o);
        free(f->key);
        free(f->anchor);
    }
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&l.anchors, &i, &k, &v);) {
        json_object_put(((struct anchor *)v)->node);
        free(v);
    }
    kite_map_release(&l.anchors);
    if (info)
        *info = (struct kite_yaml_info){.events = l.events, .nodes = l.nodes, .anchors = l.n_anchors, .expanded = l.expanded};
    if (r < 0) {
        json_object_put(l.root);
        kite_buf_release(&l.dups);
        if (ret_err) *ret_err = TAKE_PTR(l.err);
        free(l.err);
        return r;
    }
    /* a null or absent root ("---" alone, "~", no document) reads as an empty document: callers walk a tree */
    *ret = l.root ? l.root : json_object_new_object();
    if (info && l.dups.len)
        info->duplicates = kite_asprintf("yaml: unmarshal errors:\n  %s%s", l.dups.p, l.n_dups > KITE_YAML_MAX_DUPLICATES ? "\n  ..." : "");
    kite_buf_release(&l.dups);
    return 0;
}

int kite_yaml_parse(const char *data, size_t len, json_object **ret, char **ret_err) {
    return kite_yaml_parse_ex(data, len, ret, ret_err, NULL);
}

int kite_yaml_load_file(const char *path, json_object **ret, char **ret_err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if ((uint64_t)st.st_size > KITE_YAML_MAX_BYTES) {
        close(fd);
        if (ret_err) *ret_err = kite_asprintf("%s: larger than %u bytes", path, KITE_YAML_MAX_BYTES);
        return -EFBIG;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    _cleanup_free_ char *buf = kite_malloc(cap);
    for (;;) {
        if (len == cap) {
            close(fd);
            return -EFBIG; /* grew while reading */
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if (n == 0) break;
        len += (size_t)n;
    }
    close(fd);
    return kite_yaml_parse(buf, len, ret, ret_err);
}

/* ---- json-c -> YAML ----------------------------------------------------------------------- */

static int write_out(void *ud, unsigned char *p, size_t n) {
    kite_buf_append(ud, (const char *)p, n);
    return 1;
}

/* A string that a YAML reader would take for another type (YAML 1.1 as Go's yaml.v2 resolves
 * plain scalars: null, booleans including yes/no/on/off, numbers, timestamps) must be quoted. */
static bool resolves_to_non_string(const char *s) {
    static const char *const words[] = {"", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N",
                                        "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
                                        "on", "On", "ON", "off", "Off", "OFF", ".inf", ".Inf", ".INF", "-.inf",
                                        "-.Inf", "-.INF", "+.inf", ".nan", ".NaN", ".NAN", "<<"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(words); i++)
        if (strcmp(s, words[i]) == 0) return true;
    char *end;
    errno = 0;
    (void)strtod(s, &end);
    if (end != s && !*end) return true; /* 12, 1.5, 1e3, 0x1F */
    (void)strtoll(s, &end, 0);
    if (end != s && !*end) return true; /* 0o17-style octals and the like */
    if (s[0] == '0' && (s[1] == 'b' || s[1] == 'o')) return true; /* 0b101, 0o17 */
    /* a timestamp (yyyy-m-d, optionally followed by a time): kubectl shows times quoted */
    size_t i = 0, parts = 0;
    while (parts < 3) {
        size_t d = strspn(s + i, "0123456789");
        if (d == 0 || d > (parts ? 2u : 4u) || (parts == 0 && d != 4)) return false;
        i += d;
        parts++;
        if (parts < 3 && s[i++] != '-') return false;
    }
    return true;
}

static int emit_scalar(yaml_emitter_t *e, const char *s, size_t n, bool string) {
    yaml_event_t ev;
    bool plain = !string || !resolves_to_non_string(s);
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, plain, !plain,
                                      plain ? YAML_ANY_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE))
        return -ENOMEM;
    return yaml_emitter_emit(e, &ev) ? 0 : -EINVAL;
}

static int emit_node(yaml_emitter_t *e, json_object *o, int depth) {
    yaml_event_t ev;
    char num[64];
    if (depth > KITE_YAML_MAX_DEPTH) return -EINVAL;
    switch (json_object_get_type(o)) {
    case json_type_null: return emit_scalar(e, "null", 4, false);
    case json_type_boolean: return json_object_get_boolean(o) ? emit_scalar(e, "true", 4, false) : emit_scalar(e, "false", 5, false);
    case json_type_int:
        snprintf(num, sizeof num, "%lld", (long long)json_object_get_int64(o));
        return emit_scalar(e, num, strlen(num), false);
    case json_type_double:
        snprintf(num, sizeof num, "%.17g", json_object_get_double(o));
        return emit_scalar(e, num, strlen(num), false);
    case json_type_string:
        return emit_scalar(e, json_object_get_string(o), (size_t)json_object_get_string_len(o), true);
    case json_type_array: {
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            return -EINVAL;
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            int r = emit_node(e, json_object_array_get_idx(o, i), depth + 1);
            if (r < 0) return r;
        }
        yaml_sequence_end_event_initialize(&ev);
        return yaml_emitter_emit(e, &ev) ? 0 : -EINVAL;
    }
    case json_type_object: {
        /* keys sorted, as Kubernetes' YAML serializer (JSON through yaml.v2) writes them */
        size_t n, i;
        const char **keys = kite_obj_sorted_keys(o, NULL, &n);
        int r = 0;
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            r = -EINVAL;
        for (i = 0; r == 0 && i < n; i++) {
            r = emit_scalar(e, keys[i], strlen(keys[i]), true);
            if (r == 0) r = emit_node(e, json_object_object_get(o, keys[i]), depth + 1);
        }
        free(keys);
        if (r < 0) return r;
        yaml_mapping_end_event_initialize(&ev);
        return yaml_emitter_emit(e, &ev) ? 0 : -EINVAL;
    }
    }
    return -EINVAL;
}

int kite_yaml_emit(json_object *o, struct kite_buf *out) {
    yaml_emitter_t e;
    yaml_event_t ev;
    if (!yaml_emitter_initialize(&e)) return -ENOMEM;
    struct kite_buf b = {0};
    yaml_emitter_set_output(&e, write_out, &b);
    yaml_emitter_set_unicode(&e, 1);
    yaml_emitter_set_width(&e, -1); /* no folding of long lines */
    int r = -EINVAL;
    if (yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && yaml_emitter_emit(&e, &ev) &&
        yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && yaml_emitter_emit(&e, &ev)) {
        r = emit_node(&e, o, 0);
        if (r == 0)
            r = yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&e, &ev) &&
                        yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&e, &ev) && yaml_emitter_flush(&e)
                    ? 0
                    : -EINVAL;
    }
    yaml_emitter_delete(&e);
    if (r == 0) kite_buf_append(out, b.p ? b.p : "", b.len);
    kite_buf_release(&b);
    return r;
}
