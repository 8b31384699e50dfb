/* nodeStatusHasChanged without copies: two NodeStatus compared with conditions matched by type
 * and their lastHeartbeatTime skipped, as a tree against a tree or a tree against the serialized
 * acknowledged status (read in place: no parse, no allocation). Every other member compares as
 * kite_json_equal does. The text walk says "cannot tell" (-1) where it would need more than a
 * plain scan (a \u escape, a number that is not a plain integer, a condition without a string
 * type, more than STATUSCMP_MAX_CONDS conditions): the caller parses and compares trees then. */
#include "agent/agent-int.h"
#include "json/scan.h"

#include <stdio.h>

#define STATUSCMP_MAX_CONDS 64
#define STATUSCMP_MAX_KEY 256
#define HB "lastHeartbeatTime"

/* ---- tree against tree ---- */

static const char *cond_type(json_object *c) {
    json_object *t;
    if (!json_object_is_type(c, json_type_object) || !json_object_object_get_ex(c, "type", &t) ||
        !json_object_is_type(t, json_type_string))
        return NULL;
    return json_object_get_string(t);
}

/* Two conditions equal but for lastHeartbeatTime. */
static bool cond_equal(json_object *a, json_object *b) {
    size_t na = (size_t)json_object_object_length(a), nb = (size_t)json_object_object_length(b);
    if (json_object_object_get_ex(a, HB, NULL)) na--;
    if (json_object_object_get_ex(b, HB, NULL)) nb--;
    if (na != nb) return false;
    json_object_object_foreach(a, k, va) {
        if (strcmp(k, HB) == 0) continue;
        json_object *vb;
        if (!json_object_object_get_ex(b, k, &vb) || !kite_json_equal(va, vb)) return false;
    }
    return true;
}

/* The k-th (from 0) element of conds whose type is t, or -1. */
static int nth_of_type(json_object *conds, const char *t, size_t tl, int k) {
    size_t n = json_object_array_length(conds);
    for (size_t i = 0; i < n; i++) {
        const char *ti = cond_type(json_object_array_get_idx(conds, i));
        if (ti && strlen(ti) == tl && memcmp(ti, t, tl) == 0 && k-- == 0) return (int)i;
    }
    return -1;
}

/* Occurrences of type t among the first i conditions of conds. */
static int rank_of_type(json_object *conds, size_t i, const char *t) {
    int k = 0;
    for (size_t j = 0; j < i; j++)
        if (kite_streq(cond_type(json_object_array_get_idx(conds, j)), t)) k++;
    return k;
}

/* 1 equal, 0 not, -1 a condition without a string type (the caller compares the old way). */
static int conds_equal(json_object *a, json_object *b) {
    size_t n = json_object_array_length(a);
    if (n != json_object_array_length(b)) return 0;
    for (size_t i = 0; i < n; i++)
        if (!cond_type(json_object_array_get_idx(a, i)) || !cond_type(json_object_array_get_idx(b, i))) return -1;
    for (size_t i = 0; i < n; i++) {
        json_object *ca = json_object_array_get_idx(a, i);
        const char *t = cond_type(ca);
        int j = nth_of_type(b, t, strlen(t), rank_of_type(a, i, t));
        if (j < 0 || !cond_equal(ca, json_object_array_get_idx(b, (size_t)j))) return 0;
    }
    return 1;
}

int kite_agent_status_cmp(json_object *a, json_object *b) {
    if (!json_object_is_type(a, json_type_object) || !json_object_is_type(b, json_type_object)) return -1;
    if (json_object_object_length(a) != json_object_object_length(b)) return 0;
    json_object_object_foreach(a, k, va) {
        json_object *vb;
        if (!json_object_object_get_ex(b, k, &vb)) return 0;
        if (strcmp(k, "conditions") == 0 && json_object_is_type(va, json_type_array) &&
            json_object_is_type(vb, json_type_array)) {
            int r = conds_equal(va, vb);
            if (r <= 0) return r;
        } else if (!kite_json_equal(va, vb)) {
            return 0;
        }
    }
    return 1;
}

/* ---- tree against text ---- */

struct span {
    const char *p;
    size_t n;
};

static size_t ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static int next_item(const char *s, size_t n, size_t *i, bool object, struct span *key, struct span *val) {
    const char *k, *v;
    size_t kn, vn;
    int r = kite_json_next(s, n, i, object, &k, &kn, &v, &vn);
    if (r == 1) {
        if (key) *key = (struct span){k, kn};
        *val = (struct span){v, vn};
    }
    return r;
}

static bool span_is(struct span x, const char *lit) { return x.n == strlen(lit) && memcmp(x.p, lit, x.n) == 0; }

/* The text string v (quotes included) against s: 1, 0, or -1 (a \u escape). */
static int str_cmp(struct span v, const char *s, size_t sl) {
    size_t j = 0;
    for (size_t i = 1; i + 1 < v.n; i++) {
        char c = v.p[i];
        if (c == '\\') {
            switch (v.p[++i]) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: return -1;
            }
        }
        if (j >= sl || s[j] != c) return 0;
        j++;
    }
    return j == sl;
}

static int text_equal(json_object *o, struct span v, bool skip_hb);

/* A key as a C string (no escapes in it), for the tree's lookup. */
static int key_cstr(struct span key, char buf[STATUSCMP_MAX_KEY]) {
    if (key.n >= STATUSCMP_MAX_KEY || memchr(key.p, '\\', key.n)) return -1;
    memcpy(buf, key.p, key.n);
    buf[key.n] = 0;
    return 0;
}

static int object_text_equal(json_object *o, struct span v, bool skip_hb) {
    size_t i = 1, count = 0;
    struct span key, val;
    int r;
    while ((r = next_item(v.p, v.n, &i, true, &key, &val)) == 1) {
        if (skip_hb && span_is(key, HB)) continue;
        char k[STATUSCMP_MAX_KEY];
        if (key_cstr(key, k) < 0) return -1;
        json_object *ov;
        if (!json_object_object_get_ex(o, k, &ov)) return 0;
        if ((r = text_equal(ov, val, false)) != 1) return r;
        count++;
    }
    if (r < 0) return -1;
    size_t want = (size_t)json_object_object_length(o);
    if (skip_hb && json_object_object_get_ex(o, HB, NULL)) want--;
    return count == want;
}

static int text_equal(json_object *o, struct span v, bool skip_hb) {
    json_type t = json_object_get_type(o);
    switch (v.p[0]) {
    case '"':
        if (t != json_type_string) return 0;
        return str_cmp(v, json_object_get_string(o), (size_t)json_object_get_string_len(o));
    case '{':
        if (t != json_type_object) return 0;
        return object_text_equal(o, v, skip_hb);
    case '[': {
        if (t != json_type_array) return 0;
        size_t i = 1, idx = 0, n = json_object_array_length(o);
        struct span val;
        int r;
        while ((r = next_item(v.p, v.n, &i, false, NULL, &val)) == 1) {
            if (idx >= n) return 0;
            if ((r = text_equal(json_object_array_get_idx(o, idx++), val, false)) != 1) return r;
        }
        return r < 0 ? -1 : idx == n;
    }
    case 't': case 'f':
        if (t != json_type_boolean) return 0;
        return span_is(v, json_object_get_boolean(o) ? "true" : "false");
    case 'n':
        return t == json_type_null && span_is(v, "null");
    default: {
        if (t != json_type_int && t != json_type_double) return 0;
        if (t != json_type_int || v.n > 20) return -1;
        char num[24];
        memcpy(num, v.p, v.n);
        num[v.n] = 0;
        int64_t x;
        if (kite_parse_int64(num, &x) < 0) return -1;
        return x == json_object_get_int64(o);
    }
    }
}

/* The top-level conditions: each text condition matched to the tree's condition of the same
 * type (the k-th of a type to the k-th), lastHeartbeatTime skipped. */
static int conds_text_equal(json_object *conds, struct span v) {
    struct span el[STATUSCMP_MAX_CONDS], ty[STATUSCMP_MAX_CONDS];
    size_t n = 0, i = 1;
    int r;
    while ((r = next_item(v.p, v.n, &i, false, NULL, &el[n])) == 1) {
        if (n + 1 >= STATUSCMP_MAX_CONDS || el[n].p[0] != '{') return -1;
        /* its type */
        size_t j = 1;
        struct span key, val;
        bool found = false;
        while ((r = next_item(el[n].p, el[n].n, &j, true, &key, &val)) == 1) {
            if (memchr(key.p, '\\', key.n)) return -1;
            if (span_is(key, "type")) {
                if (found || val.p[0] != '"' || memchr(val.p, '\\', val.n)) return -1;
                ty[n] = (struct span){val.p + 1, val.n - 2};
                found = true;
            }
        }
        if (r < 0 || !found) return -1;
        n++;
    }
    if (r < 0) return -1;
    size_t on = json_object_array_length(conds);
    for (size_t k = 0; k < on; k++)
        if (!cond_type(json_object_array_get_idx(conds, k))) return -1;
    if (n != on) return 0;
    for (size_t k = 0; k < n; k++) {
        int rank = 0;
        for (size_t j = 0; j < k; j++)
            if (ty[j].n == ty[k].n && memcmp(ty[j].p, ty[k].p, ty[k].n) == 0) rank++;
        int m = nth_of_type(conds, ty[k].p, ty[k].n, rank);
        if (m < 0) return 0;
        if ((r = text_equal(json_object_array_get_idx(conds, (size_t)m), el[k], true)) != 1) return r;
    }
    return 1;
}

int kite_agent_status_cmp_text(const char *text, size_t len, json_object *st) {
    if (!json_object_is_type(st, json_type_object)) return -1;
    size_t b = ws(text, len, 0);
    if (b >= len || text[b] != '{') return -1;
    size_t e = kite_json_value_end(text, len, b);
    if (e == SIZE_MAX || ws(text, len, e) != len) return -1;
    struct span v = {text + b, e - b};
    size_t i = 1, count = 0;
    struct span key, val;
    int r;
    while ((r = next_item(v.p, v.n, &i, true, &key, &val)) == 1) {
        char k[STATUSCMP_MAX_KEY];
        if (key_cstr(key, k) < 0) return -1;
        json_object *ov;
        if (!json_object_object_get_ex(st, k, &ov)) return 0;
        if (strcmp(k, "conditions") == 0 && val.p[0] == '[' && json_object_is_type(ov, json_type_array))
            r = conds_text_equal(ov, val);
        else
            r = text_equal(ov, val, false);
        if (r != 1) return r;
        count++;
    }
    if (r < 0) return -1;
    return count == (size_t)json_object_object_length(st);
}
