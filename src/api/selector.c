/* Label and field selectors: k8s.io/apimachinery/pkg/labels/selector.go (lexer + recursive
 * descent parser) and pkg/fields/selector.go, transcribed so that the accepted syntax and the
 * error texts are Kubernetes'. A parsed selector is immutable. */
#include "api/selector.h"
#include "api/internal.h"
#include "api/validation.h"

#include <json-c/json.h>

/* ================= label selectors ================= */

enum op { OP_EXISTS, OP_NOT_EXISTS, OP_EQ, OP_NEQ, OP_IN, OP_NOTIN, OP_GT, OP_LT };

struct req {
    char *key;
    enum op op;
    char **vals; /* sorted, unique (Kubernetes keeps a string set) */
    size_t n_vals;
    int64_t num; /* OP_GT / OP_LT */
};

struct kite_label_selector {
    struct req *reqs;
    size_t n;
};

enum tok {
    T_ERROR,
    T_END,
    T_IDENT,
    T_CLOSE,
    T_COMMA,
    T_NOT,
    T_DEQ,
    T_EQ,
    T_GT,
    T_IN,
    T_LT,
    T_NEQ,
    T_NOTIN,
    T_OPEN,
};

struct item {
    enum tok tok;
    char *lit;
};

struct lexer {
    const char *s;
    size_t pos;
};

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static bool is_special(char c) {
    return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

static enum tok keyword(const char *s, size_t n) {
    static const struct { const char *s; enum tok t; } table[] = {
        {")", T_CLOSE}, {",", T_COMMA}, {"!", T_NOT}, {"==", T_DEQ}, {"=", T_EQ},    {">", T_GT},
        {"in", T_IN},   {"<", T_LT},    {"!=", T_NEQ}, {"notin", T_NOTIN}, {"(", T_OPEN},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(table); i++)
        if (strlen(table[i].s) == n && memcmp(table[i].s, s, n) == 0) return table[i].t;
    return T_ERROR;
}

static struct item lex(struct lexer *l) {
    while (is_ws(l->s[l->pos])) l->pos++;
    const char *start = l->s + l->pos;
    if (!*start) return (struct item){T_END, kite_strdup("")};
    if (is_special(*start)) {
        /* Longest run of special characters that still forms a token ("!=" over "!"). */
        size_t best = 0;
        enum tok bt = T_ERROR;
        for (size_t n = 1; is_special(start[n - 1]); n++) {
            enum tok t = keyword(start, n);
            if (t != T_ERROR) {
                best = n;
                bt = t;
            } else if (bt != T_ERROR) {
                break;
            }
        }
        if (bt == T_ERROR) {
            size_t n = 0;
            while (is_special(start[n])) n++;
            l->pos += n;
            return (struct item){T_ERROR, kite_strndup(start, n)};
        }
        l->pos += best;
        return (struct item){bt, kite_strndup(start, best)};
    }
    size_t n = 0;
    while (start[n] && !is_ws(start[n]) && !is_special(start[n])) n++;
    l->pos += n;
    enum tok t = keyword(start, n);
    return (struct item){t == T_IN || t == T_NOTIN ? t : T_IDENT, kite_strndup(start, n)};
}

struct parser {
    struct item *items;
    size_t n, pos;
    struct kite_buf err;
};

/* Kubernetes reads `in`/`notin` as identifiers wherever a value or key may appear. */
static enum tok look(struct parser *p) {
    enum tok t = p->items[p->pos].tok;
    return t == T_IN || t == T_NOTIN ? T_IDENT : t;
}
static const char *look_lit(struct parser *p) { return p->items[p->pos].lit; }
static enum tok consume_values(struct parser *p, const char **lit) {
    enum tok t = look(p);
    *lit = p->items[p->pos].lit;
    if (p->pos + 1 < p->n) p->pos++;
    return t;
}
static enum tok consume_op(struct parser *p, const char **lit) {
    enum tok t = p->items[p->pos].tok;
    *lit = p->items[p->pos].lit;
    if (p->pos + 1 < p->n) p->pos++;
    return t;
}

static int fail(struct parser *p, const char *fmt, const char *lit) {
    kite_buf_reset(&p->err);
    kite_buf_printf(&p->err, fmt, lit);
    return -EINVAL;
}

static void req_free(struct req *r) {
    free(r->key);
    for (size_t i = 0; i < r->n_vals; i++) free(r->vals[i]);
    free(r->vals);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends v; duplicates are dropped by sort_values() once the list is complete (a scan per
 * value here made a long `in (...)` list quadratic). */
static void add_value(struct req *r, const char *v) {
    /* capacity doubles at each power of two */
    if (r->n_vals == 0 || (r->n_vals & (r->n_vals - 1)) == 0)
        r->vals = kite_realloc(r->vals, (r->n_vals ? r->n_vals * 2 : 1) * sizeof(*r->vals));
    r->vals[r->n_vals++] = kite_strdup(v);
}

/* Sorts the values and drops repeats: the set Kubernetes keeps. */
static void sort_values(struct req *r) {
    if (r->n_vals < 2) return;
    qsort(r->vals, r->n_vals, sizeof(*r->vals), cmp_str);
    size_t o = 1;
    for (size_t i = 1; i < r->n_vals; i++) {
        if (strcmp(r->vals[i], r->vals[o - 1]) == 0) free(r->vals[i]);
        else r->vals[o++] = r->vals[i];
    }
    r->n_vals = o;
}

/* field.Invalid(<nil>, key, msgs joined by "; ") */
static int check_key(struct parser *p, const char *path, const char *key) {
    const char *msgs[KITE_NAME_ERRS_MAX];
    size_t n = kite_qualified_name_errs(key, msgs);
    if (!n) return 0;
    kite_buf_reset(&p->err);
    kite_buf_printf(&p->err, "%s: Invalid value: ", path);
    kite_api_go_quote(&p->err, key);
    kite_buf_puts(&p->err, ": ");
    for (size_t i = 0; i < n; i++) kite_buf_printf(&p->err, "%s%s", i ? "; " : "", msgs[i]);
    return -EINVAL;
}

/* NewRequirement's checks of the values: one field error per bad value, aggregated as
 * Kubernetes' utilerrors.Aggregate prints them ("[a, b]" when several). */
static int check_values(struct parser *p, struct req *r) {
    struct kite_buf errs = {0};
    size_t n_errs = 0;
    if ((r->op == OP_IN || r->op == OP_NOTIN) && r->n_vals == 0) {
        kite_buf_puts(&errs, "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty");
        n_errs++;
    }
    if (r->op == OP_GT || r->op == OP_LT) {
        if (kite_parse_int64(r->vals[0], &r->num) < 0) {
            kite_buf_puts(&errs, "values[0]: Invalid value: ");
            kite_api_go_quote(&errs, r->vals[0]);
            kite_buf_puts(&errs, ": for 'Gt', 'Lt' operators, the value must be an integer");
            n_errs++;
        }
    }
    for (size_t i = 0; i < r->n_vals; i++) {
        const char *msgs[KITE_NAME_ERRS_MAX];
        size_t n = kite_label_value_errs(r->vals[i], msgs);
        if (!n) continue;
        if (n_errs++) kite_buf_puts(&errs, ", ");
        kite_buf_printf(&errs, "values[%zu][%s]: Invalid value: ", i, r->key);
        kite_api_go_quote(&errs, r->vals[i]);
        kite_buf_puts(&errs, ": ");
        for (size_t j = 0; j < n; j++) kite_buf_printf(&errs, "%s%s", j ? "; " : "", msgs[j]);
    }
    if (!n_errs) return 0;
    kite_buf_reset(&p->err);
    kite_buf_printf(&p->err, n_errs > 1 ? "[%s]" : "%s", errs.p);
    kite_buf_release(&errs);
    return -EINVAL;
}

static int parse_values(struct parser *p, struct req *r) {
    const char *lit;
    if (consume_values(p, &lit) != T_OPEN) return fail(p, "found '%s' expected: '('", lit);
    enum tok t = look(p);
    lit = look_lit(p);
    if (t == T_CLOSE) { /* "()" is the set {""} */
        consume_values(p, &lit);
        add_value(r, "");
        return 0;
    }
    if (t != T_IDENT && t != T_COMMA) return fail(p, "found '%s', expected: ',', ')' or identifier", lit);
    const char *open_lit = lit;
    for (;;) {
        const char *l2;
        enum tok t2 = consume_values(p, &l2);
        if (t2 == T_IDENT) {
            add_value(r, l2);
            enum tok t3 = look(p);
            if (t3 == T_COMMA) continue;
            if (t3 == T_CLOSE) break;
            return fail(p, "found '%s', expected: ',' or ')'", look_lit(p));
        } else if (t2 == T_COMMA) {
            /* "(," ",," and ",)" all denote the empty value. */
            if (r->n_vals == 0) add_value(r, "");
            enum tok t3 = look(p);
            if (t3 == T_CLOSE) {
                add_value(r, "");
                break;
            }
            if (t3 == T_COMMA) {
                consume_values(p, &l2);
                add_value(r, "");
            }
        } else {
            return fail(p, "found '%s', expected: ',', or identifier", l2);
        }
    }
    if (consume_values(p, &lit) != T_CLOSE) return fail(p, "found '%s', expected: ')'", open_lit);
    return 0;
}

static int parse_requirement(struct parser *p, struct req *r) {
    const char *lit;
    enum tok t = consume_values(p, &lit);
    bool not_exists = false;
    if (t == T_NOT) {
        not_exists = true;
        t = consume_values(p, &lit);
    }
    if (t != T_IDENT) return fail(p, "found '%s', expected: identifier", lit);
    int rc = check_key(p, "<nil>", lit);
    if (rc < 0) return rc;
    r->key = kite_strdup(lit);
    enum tok next = look(p);
    if (not_exists) {
        r->op = OP_NOT_EXISTS;
        return 0;
    }
    if (next == T_END || next == T_COMMA) {
        r->op = OP_EXISTS;
        return 0;
    }
    switch (consume_op(p, &lit)) {
    case T_IN: r->op = OP_IN; break;
    case T_NOTIN: r->op = OP_NOTIN; break;
    case T_EQ:
    case T_DEQ: r->op = OP_EQ; break;
    case T_NEQ: r->op = OP_NEQ; break;
    case T_GT: r->op = OP_GT; break;
    case T_LT: r->op = OP_LT; break;
    default: return fail(p, "found '%s', expected: in, notin, =, ==, !=, gt, lt", lit);
    }
    if (r->op == OP_IN || r->op == OP_NOTIN) {
        rc = parse_values(p, r);
    } else {
        enum tok vt = look(p);
        if (vt == T_END || vt == T_COMMA) {
            add_value(r, "");
        } else {
            vt = consume_values(p, &lit);
            if (vt != T_IDENT) return fail(p, "found '%s', expected: identifier", lit);
            add_value(r, lit);
        }
    }
    if (rc < 0) return rc;
    sort_values(r);
    return check_values(p, r);
}

static int cmp_req(const void *a, const void *b) {
    return strcmp(((const struct req *)a)->key, ((const struct req *)b)->key);
}

static int parse_all(struct parser *p, struct kite_label_selector *sel) {
    for (;;) {
        enum tok t = look(p);
        if (t == T_END) return 0;
        if (t != T_IDENT && t != T_NOT) return fail(p, "found '%s', expected: !, identifier, or 'end of string'", look_lit(p));
        struct req r = {0};
        int rc = parse_requirement(p, &r);
        if (rc < 0) {
            req_free(&r);
            _cleanup_free_ char *inner = kite_buf_detach(&p->err, NULL);
            kite_buf_printf(&p->err, "unable to parse requirement: %s", inner);
            return rc;
        }
        sel->reqs = kite_realloc(sel->reqs, (sel->n + 1) * sizeof(*sel->reqs));
        sel->reqs[sel->n++] = r;
        const char *lit;
        t = consume_values(p, &lit);
        if (t == T_END) return 0;
        if (t != T_COMMA) return fail(p, "found '%s', expected: ',' or 'end of string'", lit);
        t = look(p);
        if (t != T_IDENT && t != T_NOT) return fail(p, "found '%s', expected: identifier after ','", look_lit(p));
    }
}

int kite_label_selector_parse(const char *s, struct kite_label_selector **ret, char **ret_err) {
    if (!s) s = "";
    struct parser p = {0};
    struct lexer l = {s, 0};
    for (;;) {
        /* capacity doubles (16, 32, 64...): growing by a constant was quadratic in copies */
        if (p.n == 0 || (p.n >= 16 && (p.n & (p.n - 1)) == 0))
            p.items = kite_realloc(p.items, (p.n ? p.n * 2 : 16) * sizeof(*p.items));
        p.items[p.n++] = lex(&l);
        if (p.items[p.n - 1].tok == T_END) break;
    }
    struct kite_label_selector *sel = kite_calloc(1, sizeof(*sel));
    int rc = parse_all(&p, sel);
    for (size_t i = 0; i < p.n; i++) free(p.items[i].lit);
    free(p.items);
    if (rc < 0) {
        kite_label_selector_free(sel);
        if (ret_err)
            *ret_err = kite_buf_detach(&p.err, NULL);
        else
            kite_buf_release(&p.err);
        return rc;
    }
    kite_buf_release(&p.err);
    if (sel->n > 1) qsort(sel->reqs, sel->n, sizeof(*sel->reqs), cmp_req);
    *ret = sel;
    return 0;
}

static bool has_value(const struct req *r, const char *v) {
    return r->n_vals > 0 && bsearch(&v, r->vals, r->n_vals, sizeof(*r->vals), cmp_str) != NULL;
}

static bool req_matches(const struct req *r, json_object *labels) {
    json_object *jv = NULL;
    bool has = labels && json_object_is_type(labels, json_type_object) &&
               json_object_object_get_ex(labels, r->key, &jv) && json_object_is_type(jv, json_type_string);
    const char *v = has ? json_object_get_string(jv) : NULL;
    switch (r->op) {
    case OP_EXISTS: return has;
    case OP_NOT_EXISTS: return !has;
    case OP_EQ:
    case OP_IN: return has && has_value(r, v);
    case OP_NEQ:
    case OP_NOTIN: return !has || !has_value(r, v);
    case OP_GT:
    case OP_LT: {
        int64_t n;
        if (!has || kite_parse_int64(v, &n) < 0) return false;
        return r->op == OP_GT ? n > r->num : n < r->num;
    }
    }
    return false;
}

bool kite_label_selector_matches(const struct kite_label_selector *sel, json_object *labels) {
    for (size_t i = 0; sel && i < sel->n; i++)
        if (!req_matches(&sel->reqs[i], labels)) return false;
    return true;
}

bool kite_label_selector_empty(const struct kite_label_selector *sel) { return !sel || sel->n == 0; }

void kite_label_selector_free(struct kite_label_selector *sel) {
    if (!sel) return;
    for (size_t i = 0; i < sel->n; i++) req_free(&sel->reqs[i]);
    free(sel->reqs);
    free(sel);
}

/* ================= field selectors ================= */

struct term {
    char *field;
    char *value; /* unescaped */
    bool neq;
};

struct kite_field_selector {
    struct term *terms;
    size_t n;
};

/* fields.UnescapeValue: only \\ \, \= are escapes; a bare , or = is an error. */
static int unescape(const char *s, size_t n, char **ret, char **ret_err) {
    struct kite_buf b = {0};
    kite_buf_append(&b, "", 0); /* an empty value is "", never NULL */
    bool in_slash = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_slash) {
            if (c != '\\' && c != ',' && c != '=') {
                kite_buf_release(&b);
                if (ret_err) *ret_err = kite_asprintf("invalid field selector: invalid escape sequence: \\%c", c);
                return -EINVAL;
            }
            kite_buf_putc(&b, c);
            in_slash = false;
        } else if (c == '\\') {
            in_slash = true;
        } else if (c == ',' || c == '=') {
            kite_buf_release(&b);
            /* Go prints the rune with %v, i.e. as its code point number. */
            if (ret_err) *ret_err = kite_asprintf("invalid field selector: unescaped character in value: %d", c);
            return -EINVAL;
        } else {
            kite_buf_putc(&b, c);
        }
    }
    if (in_slash) {
        kite_buf_release(&b);
        if (ret_err) *ret_err = kite_strdup("invalid field selector: invalid escape sequence: \\");
        return -EINVAL;
    }
    *ret = kite_buf_detach(&b, NULL);
    return 0;
}

static int cmp_term(const void *a, const void *b) {
    const struct term *x = a, *y = b;
    int c = strcmp(x->field, y->field);
    return c ? c : (int)x->neq - (int)y->neq;
}

int kite_field_selector_parse(const char *s, struct kite_field_selector **ret, char **ret_err) {
    if (!s) s = "";
    struct kite_field_selector *sel = kite_calloc(1, sizeof(*sel));
    size_t len = strlen(s), start = 0;
    bool in_slash = false;
    for (size_t i = 0; i <= len && len > 0; i++) {
        if (i < len) {
            if (in_slash) {
                in_slash = false;
                continue;
            }
            if (s[i] == '\\') {
                in_slash = true;
                continue;
            }
            if (s[i] != ',') continue;
        }
        const char *part = s + start;
        size_t plen = i - start;
        start = i + 1;
        if (plen == 0) continue;
        /* The first operator occurrence splits the term; "!=" and "==" beat "=" at the same spot. */
        size_t j, oplen = 0;
        bool neq = false;
        for (j = 0; j < plen; j++) {
            if (part[j] == '!' && j + 1 < plen && part[j + 1] == '=') {
                oplen = 2, neq = true;
                break;
            }
            if (part[j] == '=') {
                oplen = (j + 1 < plen && part[j + 1] == '=') ? 2 : 1;
                break;
            }
        }
        if (!oplen) {
            if (ret_err) *ret_err = kite_asprintf("invalid selector: '%s'; can't understand '%.*s'", s, (int)plen, part);
            kite_field_selector_free(sel);
            return -EINVAL;
        }
        char *value;
        int rc = unescape(part + j + oplen, plen - j - oplen, &value, ret_err);
        if (rc < 0) {
            kite_field_selector_free(sel);
            return rc;
        }
        sel->terms = kite_realloc(sel->terms, (sel->n + 1) * sizeof(*sel->terms));
        sel->terms[sel->n++] = (struct term){kite_strndup(part, j), value, neq};
    }
    if (sel->n > 1) qsort(sel->terms, sel->n, sizeof(*sel->terms), cmp_term);
    *ret = sel;
    return 0;
}

size_t kite_field_selector_count(const struct kite_field_selector *sel) { return sel ? sel->n : 0; }

const char *kite_field_selector_field(const struct kite_field_selector *sel, size_t i) {
    return sel && i < sel->n ? sel->terms[i].field : NULL;
}

const char *kite_field_selector_exact(const struct kite_field_selector *sel, const char *field) {
    for (size_t i = 0; sel && i < sel->n; i++)
        if (!sel->terms[i].neq && strcmp(sel->terms[i].field, field) == 0) return sel->terms[i].value;
    return NULL;
}

bool kite_field_selector_matches(const struct kite_field_selector *sel, kite_field_getter get, void *ud) {
    for (size_t i = 0; sel && i < sel->n; i++) {
        const char *v = get(sel->terms[i].field, ud);
        bool eq = strcmp(v ? v : "", sel->terms[i].value) == 0;
        if (eq == sel->terms[i].neq) return false;
    }
    return true;
}

void kite_field_selector_free(struct kite_field_selector *sel) {
    if (!sel) return;
    for (size_t i = 0; i < sel->n; i++) {
        free(sel->terms[i].field);
        free(sel->terms[i].value);
    }
    free(sel->terms);
    free(sel);
}

const char *kite_json_path_string(json_object *obj, const char *dotted, struct kite_buf *buf) {
    kite_buf_reset(buf);
    kite_buf_grow(buf, 0);
    buf->p[0] = 0;
    json_object *cur = obj;
    const char *p = dotted;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        _cleanup_free_ char *key = kite_strndup(p, n);
        json_object *next = NULL;
        if (!json_object_is_type(cur, json_type_object) || !json_object_object_get_ex(cur, key, &next)) return buf->p;
        cur = next;
        p = dot ? dot + 1 : p + n;
    }
    if (!cur) return buf->p;
    switch (json_object_get_type(cur)) {
    case json_type_string: kite_buf_append(buf, json_object_get_string(cur), (size_t)json_object_get_string_len(cur)); break;
    case json_type_boolean: kite_buf_puts(buf, json_object_get_boolean(cur) ? "true" : "false"); break;
    case json_type_int: kite_buf_printf(buf, "%lld", (long long)json_object_get_int64(cur)); break;
    /* not json_object_get_string: for a double it caches a rendering inside the object, and
     * objects cached on store records are read by many threads at once */
    case json_type_double: kite_buf_printf(buf, "%.17g", json_object_get_double(cur)); break;
    default: break;
    }
    return buf->p;
}
