/* YAML -> json-c through libyaml's document API. Aliases are expanded (libyaml shares the
 * node), so the walk counts every node it emits and stops at KITE_YAML_MAX_NODES: a few
 * nested aliases could otherwise expand exponentially ("billion laughs"). */
#include "client/yaml.h"

#include <fcntl.h>
#include <stdio.h>
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
