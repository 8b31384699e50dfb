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

size_t kite_json_value_end(const char *s, size_t n, size_t i) { return skip_value(s, n, i); }

int kite_json_next(const char *s, size_t n, size_t *i, bool object, const char **name, size_t *name_len, const char **val,
                   size_t *val_len) {
    if (*i == 0 || *i > n) return -1;
    bool first = s[*i - 1] == '{' || s[*i - 1] == '['; /* no value ends with an opening bracket */
    size_t k = skip_ws(s, n, *i);
    if (k >= n) return -1;
    if (s[k] == (object ? '}' : ']')) {
        *i = k + 1;
        return 0;
    }
    if (!first) {
        if (s[k] != ',') return -1;
        k = skip_ws(s, n, k + 1);
    }
    if (name) *name = NULL, *name_len = 0;
    if (object) {
        if (k >= n || s[k] != '"') return -1;
        size_t e = skip_string(s, n, k);
        if (e == SIZE_MAX) return -1;
        if (name) *name = s + k + 1, *name_len = e - k - 2;
        k = skip_ws(s, n, e);
        if (k >= n || s[k] != ':') return -1;
        k = skip_ws(s, n, k + 1);
    }
    size_t e = skip_value(s, n, k);
    if (e == SIZE_MAX) return -1;
    *val = s + k;
    *val_len = e - k;
    *i = e;
    return 1;
}

int kite_json_array_only(const char *s, size_t n, const char **ret, size_t *ret_len) {
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '[') return -1;
    size_t v = skip_ws(s, n, i + 1);
    if (v < n && s[v] == ']') return skip_ws(s, n, v + 1) == n ? 0 : -1;
    size_t e = skip_value(s, n, v);
    if (e == SIZE_MAX) return -1;
    size_t j = skip_ws(s, n, e);
    if (j < n && s[j] == ',') return 0;
    if (j >= n || s[j] != ']' || skip_ws(s, n, j + 1) != n) return -1;
    *ret = s + v;
    *ret_len = e - v;
    return 1;
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

/* A path of kite_json_project on its way down: the segment looked up at this level (up to the
 * next dot), and where it ended (found: the value's span). */
struct path_walk {
    const char *at, *v;
    size_t vn;
    bool found;
};

/* A path as one level sees it. */
struct level {
    const char *seg, *rest; /* rest: after the dot, NULL at the last segment */
    size_t len;
};

/* A member some paths go through: its paths q[a..b), where its last occurrence's value is, and
 * whether that occurrence was walked into already. */
struct through {
    const char *name;
    size_t len, a, b;
    const char *v;
    size_t vn;
    bool present, walked;
};

/* Longest segment of a path (a longer one: the scan cannot tell). */
#define SEGMENT_MAX 127
/* Paths a level keeps its bookkeeping for on the stack; more are allocated. */
#define PROJECT_STACK 16

/* skip_value for a member's value, noting (*clean = false) a number or literal holding a byte
 * that skip_value would take for a string or a bracket if it were skipping the whole object:
 * a walk over the object's members then ends elsewhere than a skip over it. */
static size_t skip_member_value(const char *s, size_t n, size_t v, bool *clean) {
    if (v < n && s[v] != '"' && s[v] != '{' && s[v] != '[') {
        size_t i = v;
        while (i < n && !SCALAR_END[(unsigned char)s[i]]) {
            if (NESTING[(unsigned char)s[i]]) *clean = false;
            i++;
        }
        return i > v ? i : SIZE_MAX;
    }
    return skip_value(s, n, v);
}

static int project_level(const char *s, size_t n, struct path_walk **p, size_t np, size_t *ret_end, bool *ret_clean);

/* project_level one segment further for the paths q[0..nq) (lv: their view from here). */
static int descend(const char *s, size_t n, struct path_walk **q, const struct level *lv, size_t nq, size_t *ret_end,
                   bool *ret_clean) {
    for (size_t k = 0; k < nq; k++) q[k]->at = lv[k].rest;
    int r = project_level(s, n, q, nq, ret_end, ret_clean);
    for (size_t k = 0; k < nq; k++) q[k]->at = lv[k].seg;
    return r;
}

/* Follows the paths p[0..np) one level down into the object s[0..n): one walk over its members
 * for all of them, where the walk path by path went over it once per path through it. A member
 * some paths go through is walked into where it is met, which ends it too: the object is gone
 * over once, not skipped and then walked. That is what the path-by-path walk, which skipped the
 * member (skip_value) and then walked its span, finds only when the walk ends where the skip
 * would (*ret_clean: the object's members hold no number or literal with a quote or an opening
 * bracket); otherwise, and where the walk fails (the path-by-path walk failed only when it
 * reached that member's last occurrence), the member is skipped and, if it was the last
 * occurrence, walked after, the old way. What is found, absent or "cannot tell" is the same (a
 * failure anywhere fails the whole cut: the order of the walks does not matter). *ret_end: one
 * past the closing brace. */
static int project_level(const char *s, size_t n, struct path_walk **p, size_t np, size_t *ret_end, bool *ret_clean) {
    struct level lvp_s[PROJECT_STACK], lvq_s[PROJECT_STACK];
    struct path_walk *q_s[PROJECT_STACK];
    struct through t_s[PROJECT_STACK];
    size_t g_s[PROJECT_STACK];
    bool heap = np > PROJECT_STACK;
    struct level *lvp = heap ? kite_calloc(np, sizeof *lvp) : lvp_s, *lvq = heap ? kite_calloc(np, sizeof *lvq) : lvq_s;
    struct path_walk **q = heap ? kite_calloc(np, sizeof *q) : q_s;
    struct through *t = heap ? kite_calloc(np, sizeof *t) : t_s;
    size_t *g = heap ? kite_calloc(np, sizeof *g) : g_s, nt = 0, nd = 0;
    int r = -1;
    for (size_t k = 0; k < np; k++) {
        const char *dot = strchr(p[k]->at, '.');
        lvp[k] = (struct level){p[k]->at, dot ? dot + 1 : NULL, dot ? (size_t)(dot - p[k]->at) : strlen(p[k]->at)};
        if (lvp[k].len > SEGMENT_MAX) goto out;
        p[k]->found = false;
        g[k] = SIZE_MAX;
        if (!dot) continue;
        for (g[k] = 0; g[k] < nt; g[k]++)
            if (t[g[k]].len == lvp[k].len && memcmp(t[g[k]].name, lvp[k].seg, lvp[k].len) == 0) break;
        if (g[k] == nt) t[nt++] = (struct through){.name = lvp[k].seg, .len = lvp[k].len};
        t[g[k]].b++, nd++;
    }
    /* q: the paths going further down, those through one member together, then the last segments */
    for (size_t j = 0, at = 0; j < nt; j++) t[j].a = at, at += t[j].b, t[j].b = t[j].a;
    for (size_t k = 0, f = nd; k < np; k++) {
        size_t at = g[k] == SIZE_MAX ? f++ : t[g[k]].b++;
        q[at] = p[k], lvq[at] = lvp[k];
    }
    bool clean = true;
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') goto out;
    i = skip_ws(s, n, i + 1);
    if (!(i < n && s[i] == '}'))
        for (;;) {
            if (i >= n || s[i] != '"') goto out;
            size_t k = skip_string(s, n, i);
            if (k == SIZE_MAX) goto out;
            const char *name = s + i + 1;
            size_t nl = k - i - 2;
            if (memchr(name, '\\', nl)) goto out;
            i = skip_ws(s, n, k);
            if (i >= n || s[i] != ':') goto out;
            size_t v = skip_ws(s, n, i + 1), e = SIZE_MAX;
            struct through *x = NULL;
            for (size_t j = 0; j < nt && !x; j++)
                if (t[j].len == nl && memcmp(t[j].name, name, nl) == 0) x = &t[j];
            if (x) {
                x->walked = false;
                size_t ce;
                bool cc;
                if (v < n && s[v] == '{' && descend(s + v, n - v, q + x->a, lvq + x->a, x->b - x->a, &ce, &cc) == 0 && cc)
                    e = v + ce, x->walked = true;
            }
            if (e == SIZE_MAX && (e = skip_member_value(s, n, v, &clean)) == SIZE_MAX) goto out;
            if (x) x->present = true, x->v = s + v, x->vn = e - v;
            for (size_t j = nd; j < np; j++)
                if (lvq[j].len == nl && memcmp(lvq[j].seg, name, nl) == 0) q[j]->found = true, q[j]->v = s + v, q[j]->vn = e - v;
            i = skip_ws(s, n, e);
            if (i < n && s[i] == '}') break;
            if (i >= n || s[i] != ',') goto out;
            i = skip_ws(s, n, i + 1);
        }
    *ret_end = i + 1, *ret_clean = clean;
    for (size_t j = 0; j < nt; j++) {
        struct through *x = &t[j];
        if (!x->present || x->walked) continue;
        if (x->vn == 4 && memcmp(x->v, "null", 4) == 0) { /* (a null on the way: absent) */
            for (size_t k = x->a; k < x->b; k++) q[k]->found = false;
            continue;
        }
        size_t ce;
        bool cc;
        if (descend(x->v, x->vn, q + x->a, lvq + x->a, x->b - x->a, &ce, &cc) < 0) goto out;
    }
    r = 0;
out:
    if (heap) free(lvp), free(lvq), free(q), free(t), free(g);
    return r;
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

json_object *kite_json_project(const char *s, size_t n, const char *const *paths) {
    size_t np = 0;
    while (paths[np]) np++;
    json_object *out = json_object_new_object();
    if (!np) return out;
    struct path_walk walk_s[PROJECT_STACK], *pp_s[PROJECT_STACK];
    bool heap = np > PROJECT_STACK, clean;
    struct path_walk *walk = heap ? kite_calloc(np, sizeof *walk) : walk_s, **pp = heap ? kite_calloc(np, sizeof *pp) : pp_s;
    for (size_t k = 0; k < np; k++) walk[k] = (struct path_walk){.at = paths[k]}, pp[k] = &walk[k];
    size_t end;
    bool ok = project_level(s, n, pp, np, &end, &clean) == 0;
    for (size_t k = 0; k < np && ok; k++) {
        if (!walk[k].found) continue;
        json_object *val = parse_span(walk[k].v, walk[k].vn, &ok);
        if (val) put_path(out, paths[k], val); /* (null: absent, as kite_obj_project has it) */
    }
    if (heap) free(walk), free(pp);
    if (!ok) {
        json_object_put(out);
        return NULL;
    }
    return out;
}

static json_object *project(json_object *obj, const char *const *paths, bool copy) {
    json_object *out = json_object_new_object();
    for (size_t p = 0; paths[p]; p++) {
        json_object *v = kite_obj_path(obj, paths[p]), *c = NULL;
        if (v && copy && json_object_deep_copy(v, &c, NULL) == 0) put_path(out, paths[p], c);
        else if (v && !copy) put_path(out, paths[p], json_object_get(v));
    }
    return out;
}

json_object *kite_obj_project(json_object *obj, const char *const *paths) { return project(obj, paths, false); }

json_object *kite_obj_project_copy(json_object *obj, const char *const *paths) { return project(obj, paths, true); }
