/* YAML <-> json-c: documents (kubeconfigs, config files, request bodies) read through
 * libyaml's document API, objects written through its emitter. Reading: YAML -> json-c. Aliases are expanded (libyaml shares the
 * node), so the walk counts every node it emits and stops at KITE_YAML_MAX_NODES: a few
 * nested aliases could otherwise expand exponentially ("billion laughs"). */
#include "api/yaml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define KITE_YAML_MAX_NODES 1000000

struct walk {
    yaml_document_t *doc;
    size_t emitted;
};

static bool all_digits(const char *s) {
    if (*s == '-' || *s == '+') s++;
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

static json_object *scalar(const yaml_node_t *n) {
    const char *v = (const char *)n->data.scalar.value;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        int64_t i;
        if (all_digits(v) && kite_parse_int64(v, &i) == 0) return json_object_new_int64(i);
        if (kite_streq(v, "true") || kite_streq(v, "True") || kite_streq(v, "TRUE")) return json_object_new_boolean(1);
        if (kite_streq(v, "false") || kite_streq(v, "False") || kite_streq(v, "FALSE")) return json_object_new_boolean(0);
        if (!*v || kite_streq(v, "~") || kite_streq(v, "null") || kite_streq(v, "Null") || kite_streq(v, "NULL"))
            return NULL;
    }
    return json_object_new_string_len(v, (int)n->data.scalar.length);
}

static int walk(struct walk *w, yaml_node_t *n, int depth, json_object **ret) {
    if (!n) return -EINVAL;
    if (depth > KITE_YAML_MAX_DEPTH || ++w->emitted > KITE_YAML_MAX_NODES) return -EINVAL;
    switch (n->type) {
    case YAML_SCALAR_NODE:
        *ret = scalar(n);
        return 0;
    case YAML_SEQUENCE_NODE: {
        json_object *a = json_object_new_array();
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            json_object *v = NULL;
            int r = walk(w, yaml_document_get_node(w->doc, *it), depth + 1, &v);
            if (r < 0) {
                json_object_put(a);
                return r;
            }
            json_object_array_add(a, v);
        }
        *ret = a;
        return 0;
    }
    case YAML_MAPPING_NODE: {
        json_object *o = json_object_new_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) {
                json_object_put(o);
                return -EINVAL; /* complex keys have no JSON form */
            }
            json_object *v = NULL;
            int r = walk(w, yaml_document_get_node(w->doc, p->value), depth + 1, &v);
            if (r < 0) {
                json_object_put(o);
                return r;
            }
            json_object_object_add(o, (const char *)k->data.scalar.value, v);
        }
        *ret = o;
        return 0;
    }
    default:
        return -EINVAL;
    }
}

int kite_yaml_parse(const char *data, size_t len, json_object **ret, char **ret_err) {
    if (len > KITE_YAML_MAX_BYTES) {
        if (ret_err) *ret_err = kite_asprintf("document larger than %u bytes", KITE_YAML_MAX_BYTES);
        return -EFBIG;
    }
    yaml_parser_t p;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&p)) return -ENOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
    if (!yaml_parser_load(&p, &doc)) {
        if (ret_err)
            *ret_err = kite_asprintf("line %zu: %s", p.problem_mark.line + 1,
                                     p.problem ? p.problem : "invalid YAML");
        yaml_parser_delete(&p);
        return -EINVAL;
    }
    int r = 0;
    json_object *out = NULL;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        out = json_object_new_object();
    } else {
        struct walk w = {&doc, 0};
        r = walk(&w, root, 0, &out);
        /* a null root ("---" alone, "~") reads as an empty document: callers walk a tree */
        if (r == 0 && !out) out = json_object_new_object();
        if (r < 0 && ret_err) *ret_err = kite_strdup("document too deep, too large or with non-scalar keys");
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    if (r < 0) return r;
    *ret = out;
    return 0;
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

static int key_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

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
        size_t n = (size_t)json_object_object_length(o), i = 0;
        const char **keys = kite_calloc(n ? n : 1, sizeof *keys);
        json_object_object_foreach(o, k, v) {
            (void)v;
            keys[i++] = k;
        }
        qsort(keys, n, sizeof *keys, key_cmp);
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
