/* Members out of JSON text without a full parse (scan.h). */
#include "json/scan.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "json/obj.h"
#include "json/parse.h"

/* Bytes that matter while skipping a nested value (the rest are stepped over without a look at
 * what they mean), and the bytes that end a number or literal. */
enum { B_OTHER, B_QUOTE, B_OPEN, B_CLOSE };
static const unsigned char NESTING[256] = {['"'] = B_QUOTE, ['{'] = B_OPEN, ['['] = B_OPEN, ['}'] = B_CLOSE,
                                           [']'] = B_CLOSE};
static const bool SCALAR_END[256] = {[','] = true, ['}'] = true, [']'] = true, [' '] = true,
                                     ['\n'] = true, ['\t'] = true, ['\r'] = true};

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* Where the string starting at s[i] ('"') ends (one past its closing quote), or SIZE_MAX. The
 * closing quote is the first one after an even run of backslashes (each backslash escapes the
 * byte after it): memchr finds the quotes, the run before each is counted back. */
static size_t skip_string(const char *s, size_t n, size_t i) {
    size_t from = i + 1;
    for (size_t j = from; j < n;) {
        const char *q = memchr(s + j, '"', n - j);
        if (!q) return SIZE_MAX;
        size_t k = (size_t)(q - s), b = k;
        while (b > from && s[b - 1] == '\\') b--;
        if (((k - b) & 1) == 0) return k + 1;
        j = k + 1;
    }
    return SIZE_MAX;
}

/* Where the value starting at s[i] (after whitespace) ends, or SIZE_MAX when it is not well
 * formed as far as this scan can tell: strings must be closed and brackets balanced (of either
 * kind: what is inside is the parser's business, if the value is ever parsed). */
static size_t skip_value(const char *s, size_t n, size_t i) {
    i = skip_ws(s, n, i);
    if (i >= n) return SIZE_MAX;
    if (s[i] == '"') return skip_string(s, n, i);
    if (s[i] != '{' && s[i] != '[') {
        size_t b = i;
        while (i < n && !SCALAR_END[(unsigned char)s[i]]) i++;
        return i > b ? i : SIZE_MAX;
    }
    size_t depth = 0;
    while (i < n) {
        switch (NESTING[(unsigned char)s[i]]) {
        case B_OTHER:
            i++;
            break;
        case B_QUOTE:
            if ((i = skip_string(s, n, i)) == SIZE_MAX) return SIZE_MAX;
            break;
        case B_OPEN:
            depth++, i++;
            break;
        default:
            if (--depth == 0) return i + 1;
            i++;
        }
    }
    return SIZE_MAX;
}

/* A member name looked for, and the span of its value's last occurrence (v NULL: none). */
struct wanted {
    const char *name;
    size_t len;
    const char *v;
    size_t vn;
};

/* One walk over the members of the object s[0..n), filling in each of w[0..nw). -1 when the
 * scan cannot tell (see scan.h), whichever names are asked for. */
static int scan_members(const char *s, size_t n, struct wanted *const *w, size_t nw) {
    for (size_t k = 0; k < nw; k++) w[k]->v = NULL;
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') return -1;
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}') return 0;
    for (;;) {
        if (i >= n || s[i] != '"') return -1;
        size_t k = skip_string(s, n, i);
        if (k == SIZE_MAX) return -1;
        const char *name = s + i + 1;
        size_t nl = k - i - 2;
        if (memchr(name, '\\', nl)) return -1;
        i = skip_ws(s, n, k);
        if (i >= n || s[i] != ':') return -1;
        size_t v = skip_ws(s, n, i + 1), e = skip_value(s, n, v);
        if (e == SIZE_MAX) return -1;
        for (size_t j = 0; j < nw; j++)
            if (w[j]->len == nl && memcmp(w[j]->name, name, nl) == 0) w[j]->v = s + v, w[j]->vn = e - v;
        i = skip_ws(s, n, e);
        if (i < n && s[i] == '}') return 0;
        if (i >= n || s[i] != ',') return -1;
        i = skip_ws(s, n, i + 1);
    }
}

int kite_json_member(const char *s, size_t n, const char *name, const char **ret, size_t *ret_len) {
    struct wanted w = {.name = name, .len = strlen(name)}, *wp = &w;
    if (scan_members(s, n, &wp, 1) < 0) return -1;
    if (!w.v) return 0;
    *ret = w.v;
    *ret_len = w.vn;
    return 1;
}

int kite_json_members(const char *s, size_t n, size_t count, const char *const *names, const char **ret,
                      size_t *ret_len) {
    struct wanted one[4] = {0}, *one_p[4] = {0};
    bool heap = count > KITE_ARRAY_SIZE(one);
    struct wanted *all = heap ? kite_calloc(count, sizeof *all) : one, **w = heap ? kite_calloc(count, sizeof *w) : one_p;
    for (size_t k = 0; k < count; k++) all[k] = (struct wanted){.name = names[k], .len = strlen(names[k])}, w[k] = &all[k];
    int r = scan_members(s, n, w, count);
    for (size_t k = 0; k < count && r == 0; k++) ret[k] = all[k].v, ret_len[k] = all[k].vn;
    if (heap) free(all), free(w);
    return r;
}

/* Puts v at the dotted path under out, making the objects on the way (v is taken). */
static void put_path(json_object *out, const char *path, json_object *v) {
    const char *dot;
    json_object *at = out;
    while ((dot = strchr(path, '.'))) {
        char seg[128];
        size_t sl = KITE_MIN((size_t)(dot - path), sizeof seg - 1); /* (longer: cut, as snprintf would) */
        memcpy(seg, path, sl);
        seg[sl] = 0;
        at = kite_obj_ensure(at, seg);
        path = dot + 1;
    }
    json_object_object_add(at, path, v);
}

/* A path of kite_json_project on its way down: the segment looked up at this level (m.name),
 * the rest after it (NULL at the last), and where it ended (found: the value's span). */
struct path_walk {
    struct wanted m;
    const char *rest, *v;
    size_t vn;
    bool found;
};

/* Longest segment of a path (a longer one: the scan cannot tell). */
#define SEGMENT_MAX 127

/* Follows the paths p[0..np) one level down into the object s[0..n): one walk over its members
 * for all of them, then one level further for each member some of them go through. Each
 * object is walked once, where the walk path by path did it once per path through it; what is
 * found, absent or "cannot tell" is the same (a failure anywhere fails the whole cut, so the
 * order of the walks does not matter). w is scratch as long as p. */
static int project_level(const char *s, size_t n, struct path_walk **p, struct wanted **w, size_t np) {
    for (size_t k = 0; k < np; k++) {
        const char *dot = strchr(p[k]->m.name, '.');
        p[k]->m.len = dot ? (size_t)(dot - p[k]->m.name) : strlen(p[k]->m.name);
        if (p[k]->m.len > SEGMENT_MAX) return -1;
        p[k]->rest = dot ? dot + 1 : NULL;
        w[k] = &p[k]->m;
    }
    if (scan_members(s, n, w, np) < 0) return -1;
    size_t nd = 0; /* the paths going further down, moved to the front */
    for (size_t k = 0; k < np; k++) {
        struct path_walk *x = p[k];
        if (!x->m.v) continue;
        if (!x->rest) {
            x->found = true, x->v = x->m.v, x->vn = x->m.vn;
        } else if (!(x->m.vn == 4 && memcmp(x->m.v, "null", 4) == 0)) { /* (a null on the way: absent) */
            p[nd++] = x;
        }
    }
    for (size_t a = 0; a < nd;) { /* the paths through one member together */
        const char *v = p[a]->m.v;
        size_t vn = p[a]->m.vn, b = a + 1;
        for (size_t k = b; k < nd; k++)
            if (p[k]->m.v == v) {
                struct path_walk *t = p[b];
                p[b++] = p[k], p[k] = t;
            }
        for (size_t k = a; k < b; k++) p[k]->m.name = p[k]->rest;
        if (project_level(v, vn, p + a, w + a, b - a) < 0) return -1;
        a = b;
    }
    return 0;
}

/* A value's span parsed alone; *ok false when it does not parse (exactly). */
static json_object *parse_span(const char *v, size_t vn, bool *ok) {
    enum json_tokener_error e;
    size_t end = 0;
    json_object *val;
    *ok = false;
    if (*v == '"' && vn >= 2 && vn - 2 < INT32_MAX) { /* printable ASCII, no escapes: the string as it is */
        size_t k = 1;
        while (k < vn - 1 && v[k] >= 0x20 && v[k] < 0x7f && v[k] != '\\') k++;
        if (k == vn - 1) {
            *ok = true;
            return json_object_new_string_len(v + 1, (int)(vn - 2));
        }
    }
    if (*v == '"' || *v == '{' || *v == '[') {
        val = kite_json_parse(v, vn, JSON_TOKENER_DEFAULT_DEPTH, &e, &end);
    } else { /* a number or literal: the parser sees its end only at a byte after it */
        char lit[64];
        if (vn >= sizeof lit) return NULL;
        memcpy(lit, v, vn);
        lit[vn] = ' ';
        val = kite_json_parse(lit, vn + 1, JSON_TOKENER_DEFAULT_DEPTH, &e, &end);
        if (end == vn + 1) end = vn;
    }
    if (e != json_tokener_success || end != vn) {
        json_object_put(val);
        return NULL;
    }
    *ok = true;
    return val;
}

/* Paths held on the stack; more are allocated. */
#define PROJECT_STACK 16

json_object *kite_json_project(const char *s, size_t n, const char *const *paths) {
    size_t np = 0;
    while (paths[np]) np++;
    json_object *out = json_object_new_object();
    if (!np) return out;
    struct path_walk walk_stack[PROJECT_STACK], *pp_stack[PROJECT_STACK];
    struct wanted *w_stack[PROJECT_STACK];
    bool heap = np > PROJECT_STACK;
    struct path_walk *walk = heap ? kite_calloc(np, sizeof *walk) : walk_stack, **pp = heap ? kite_calloc(np, sizeof *pp) : pp_stack;
    struct wanted **w = heap ? kite_calloc(np, sizeof *w) : w_stack;
    for (size_t k = 0; k < np; k++) walk[k] = (struct path_walk){.m.name = paths[k]}, pp[k] = &walk[k];
    bool ok = project_level(s, n, pp, w, np) == 0;
    for (size_t k = 0; k < np && ok; k++) {
        if (!walk[k].found) continue;
        json_object *val = parse_span(walk[k].v, walk[k].vn, &ok);
        if (val) put_path(out, paths[k], val); /* (null: absent, as kite_obj_project has it) */
    }
    if (heap) free(walk), free(pp), free(w);
    if (!ok) {
        json_object_put(out);
        return NULL;
    }
    return out;
}

json_object *kite_obj_project(json_object *obj, const char *const *paths) {
    json_object *out = json_object_new_object();
    for (size_t p = 0; paths[p]; p++) {
        json_object *v = kite_obj_path(obj, paths[p]);
        if (v) put_path(out, paths[p], json_object_get(v));
    }
    return out;
}
