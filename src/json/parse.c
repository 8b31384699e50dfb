/* The fast path of kite_json_parse (parse.h): a recursive-descent parser for strict JSON that
 * builds the same json-c objects the tokener would, and gives up (returning to the tokener) on
 * anything outside the subset it handles. Giving up is always safe: the tokener then parses the
 * whole text from the start. */
#include "json/parse.h"
#include "base/buf.h"

#include <string.h>

/* Nesting the fast path takes; deeper documents go to the tokener, which enforces max_depth. */
#define FAST_DEPTH_MAX 24
/* Keys up to this length are copied to the stack to NUL-terminate them. */
#define KEY_STACK 256

struct fp {
    const char *p, *end;
    int depth;
    bool utf8;            /* strings must be well-formed UTF-8 */
    bool dup_key;         /* an object repeated a key (json-c kept the last value) */
    struct kite_buf sbuf; /* unescaped strings */
};

static void skip_ws(struct fp *f) {
    while (f->p < f->end && (*f->p == ' ' || *f->p == '\n' || *f->p == '\r' || *f->p == '\t')) f->p++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of the well-formed UTF-8 sequence (RFC 3629: shortest form, no surrogates, at most
 * U+10FFFF) starting at s, which holds n > 0 bytes and starts with a byte >= 0x80; 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t k;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0) lo = 0xa0;      /* overlong */
        else if (c == 0xed) hi = 0x9f; /* U+D800..U+DFFF */
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0) lo = 0x90;      /* overlong */
        else if (c == 0xf4) hi = 0x8f; /* beyond U+10FFFF */
    } else return 0;
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return k;
}

size_t kite_utf8_invalid_at(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(u + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

bool kite_json_has_nul_escape(const char *text, size_t len) {
    const char *p = text, *end = text + len;
    while ((p = memchr(p, '\\', (size_t)(end - p)))) {
        /* escapes are read pairwise, so the second backslash of \\ starts nothing */
        if (end - p >= 6 && memcmp(p + 1, "u0000", 5) == 0) return true;
        p += 2;
        if (p >= end) break;
    }
    return false;
}

/* A string starting after its opening quote. On success, s and n give its bytes: in the text
 * when it has no escapes, else in f->sbuf. Bytes that are not UTF-8 make the fast path give
 * up (the tokener reports them). */
static bool scan_string(struct fp *f, const char **s, size_t *n) {
    const char *start = f->p;
    while (f->p < f->end) {
        unsigned char c = (unsigned char)*f->p;
        if (c == '"') {
            *s = start;
            *n = (size_t)(f->p - start);
            f->p++;
            return true;
        }
        if (c == '\\') break;
        if (c < 0x20) return false;
        if (c >= 0x80) {
            size_t k = f->utf8 ? utf8_seq((const unsigned char *)f->p, (size_t)(f->end - f->p)) : 1;
            if (!k) return false;
            f->p += k;
            continue;
        }
        f->p++;
    }
    if (f->p >= f->end) return false;
    /* escapes: unescape into sbuf */
    kite_buf_reset(&f->sbuf);
    kite_buf_append(&f->sbuf, start, (size_t)(f->p - start));
    while (f->p < f->end) {
        unsigned char c = (unsigned char)*f->p;
        if (c == '"') {
            f->p++;
            *s = f->sbuf.p;
            *n = f->sbuf.len;
            return true;
        }
        if (c < 0x20) return false;
        if (c != '\\') {
            const char *run = f->p;
            while (f->p < f->end && *f->p != '"' && *f->p != '\\' && (unsigned char)*f->p >= 0x20) {
                size_t k = 1;
                if ((unsigned char)*f->p >= 0x80 && f->utf8 &&
                    !(k = utf8_seq((const unsigned char *)f->p, (size_t)(f->end - f->p))))
                    return false;
                f->p += k;
            }
            kite_buf_append(&f->sbuf, run, (size_t)(f->p - run));
            continue;
        }
        if (f->end - f->p < 2) return false;
        char e = f->p[1], out;
        f->p += 2;
        switch (e) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '/': out = '/'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case 'u': {
            if (f->end - f->p < 4) return false;
            int h[4];
            for (int i = 0; i < 4; i++)
                if ((h[i] = hexval(f->p[i])) < 0) return false;
            unsigned cp = (unsigned)(h[0] << 12 | h[1] << 8 | h[2] << 4 | h[3]);
            /* NUL and surrogates: the tokener's own rules apply */
            if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff)) return false;
            f->p += 4;
            char u[3];
            size_t k;
            if (cp < 0x80) {
                u[0] = (char)cp;
                k = 1;
            } else if (cp < 0x800) {
                u[0] = (char)(0xc0 | cp >> 6);
                u[1] = (char)(0x80 | (cp & 0x3f));
                k = 2;
            } else {
                u[0] = (char)(0xe0 | cp >> 12);
                u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                u[2] = (char)(0x80 | (cp & 0x3f));
                k = 3;
            }
            kite_buf_append(&f->sbuf, u, k);
            continue;
        }
        default: return false;
        }
        kite_buf_putc(&f->sbuf, out);
    }
    return false;
}

static bool delim(struct fp *f) {
    if (f->p >= f->end) return true;
    char c = *f->p;
    return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static bool parse_value(struct fp *f, json_object **out);

static bool parse_object(struct fp *f, json_object **out) {
    json_object *o = json_object_new_object();
    f->p++; /* '{' */
    skip_ws(f);
    if (f->p < f->end && *f->p == '}') {
        f->p++;
        *out = o;
        return true;
    }
    for (;;) {
        skip_ws(f);
        if (f->p >= f->end || *f->p != '"') goto fail;
        f->p++;
        const char *k;
        size_t kn;
        if (!scan_string(f, &k, &kn)) goto fail;
        char stack[KEY_STACK], *key = kn < KEY_STACK ? stack : kite_malloc(kn + 1);
        memcpy(key, k, kn);
        key[kn] = 0;
        skip_ws(f);
        json_object *v = NULL;
        bool ok = f->p < f->end && *f->p == ':';
        if (ok) {
            f->p++;
            skip_ws(f);
            ok = parse_value(f, &v);
        }
        if (ok) {
            int had = json_object_object_length(o);
            json_object_object_add(o, key, v); /* an existing key keeps its place, as in json-c */
            if (json_object_object_length(o) == had) f->dup_key = true;
        }
        if (key != stack) free(key);
        if (!ok) goto fail;
        skip_ws(f);
        if (f->p >= f->end) goto fail;
        if (*f->p == ',') {
            f->p++;
            continue;
        }
        if (*f->p != '}') goto fail;
        f->p++;
        *out = o;
        return true;
    }
fail:
    json_object_put(o);
    return false;
}

static bool parse_array(struct fp *f, json_object **out) {
    json_object *a = json_object_new_array();
    f->p++; /* '[' */
    skip_ws(f);
    if (f->p < f->end && *f->p == ']') {
        f->p++;
        *out = a;
        return true;
    }
    for (;;) {
        skip_ws(f);
        json_object *v = NULL;
        if (!parse_value(f, &v)) goto fail;
        json_object_array_add(a, v);
        skip_ws(f);
        if (f->p >= f->end) goto fail;
        if (*f->p == ',') {
            f->p++;
            continue;
        }
        if (*f->p != ']') goto fail;
        f->p++;
        *out = a;
        return true;
    }
fail:
    json_object_put(a);
    return false;
}

/* Integers of 1 to 18 digits (no leading zero, no "-0"): exact in int64, as the tokener's. */
static bool parse_int(struct fp *f, json_object **out) {
    bool neg = *f->p == '-';
    const char *d = f->p + neg, *q = d;
    int64_t v = 0;
    while (q < f->end && *q >= '0' && *q <= '9' && q - d < 18) v = v * 10 + (*q++ - '0');
    size_t n = (size_t)(q - d);
    if (n == 0 || (q < f->end && *q >= '0' && *q <= '9') || (*d == '0' && (n > 1 || neg))) return false;
    f->p = q;
    if (!delim(f)) return false; /* fractions, exponents, anything else */
    *out = json_object_new_int64(neg ? -v : v);
    return true;
}

static bool literal(struct fp *f, const char *word, size_t n) {
    if ((size_t)(f->end - f->p) < n || memcmp(f->p, word, n) != 0) return false;
    f->p += n;
    return delim(f);
}

static bool parse_value(struct fp *f, json_object **out) {
    if (f->p >= f->end) return false;
    switch (*f->p) {
    case '{':
    case '[': {
        if (++f->depth > FAST_DEPTH_MAX) return false;
        bool ok = *f->p == '{' ? parse_object(f, out) : parse_array(f, out);
        f->depth--;
        return ok;
    }
    case '"': {
        f->p++;
        const char *s;
        size_t n;
        if (!scan_string(f, &s, &n)) return false;
        *out = json_object_new_string_len(s, (int)n);
        return true;
    }
    case 't':
        if (!literal(f, "true", 4)) return false;
        *out = json_object_new_boolean(1);
        return true;
    case 'f':
        if (!literal(f, "false", 5)) return false;
        *out = json_object_new_boolean(0);
        return true;
    case 'n':
        if (!literal(f, "null", 4)) return false;
        *out = NULL;
        return true;
    default:
        if (*f->p == '-' || (*f->p >= '0' && *f->p <= '9')) return parse_int(f, out);
        return false;
    }
}

static json_object *tokener_parse(const char *text, size_t len, int max_depth, bool utf8,
                                  enum json_tokener_error *ret_err, size_t *ret_end) {
    json_tokener *tok = json_tokener_new_ex(max_depth);
    if (!tok) abort(); /* out of memory: base's policy */
    if (utf8) json_tokener_set_flags(tok, JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(tok, text, (int)len);
    *ret_err = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    /* json-c's check counts continuation bytes only: it takes overlong forms, encoded
     * surrogates and code points past U+10FFFF, which strict decoders (Python's) refuse */
    if (utf8 && *ret_err == json_tokener_success && kite_utf8_invalid_at(text, end) != end) {
        json_object_put(o);
        o = NULL;
        *ret_err = json_tokener_error_parse_utf8_string;
    }
    if (ret_end) *ret_end = end;
    return o;
}

static json_object *parse(const char *text, size_t len, int max_depth, bool utf8, enum json_tokener_error *ret_err,
                          size_t *ret_end, bool *ret_unique_keys) {
    if (ret_unique_keys) *ret_unique_keys = false;
    struct fp f = { .p = text, .end = text + len, .utf8 = utf8 };
    skip_ws(&f);
    json_object *o = NULL;
    if (len <= (size_t)INT32_MAX && max_depth > FAST_DEPTH_MAX && f.p < f.end && (*f.p == '{' || *f.p == '[') &&
        parse_value(&f, &o) && (skip_ws(&f), f.p >= f.end || (*f.p != '/' && !(utf8 && (unsigned char)*f.p >= 0x80)))) {
        /* the tokener also takes the whitespace after the value (and comments: those go to
         * it); with JSON_TOKENER_VALIDATE_UTF8 it also checks the byte after the value */
        kite_buf_release(&f.sbuf);
        *ret_err = json_tokener_success;
        if (ret_end) *ret_end = (size_t)(f.p - text);
        if (ret_unique_keys) *ret_unique_keys = !f.dup_key;
        return o;
    }
    json_object_put(o);
    kite_buf_release(&f.sbuf);
    return tokener_parse(text, len, max_depth, utf8, ret_err, ret_end);
}

json_object *kite_json_parse(const char *text, size_t len, int max_depth, enum json_tokener_error *ret_err,
                             size_t *ret_end) {
    return parse(text, len, max_depth, true, ret_err, ret_end, NULL);
}

json_object *kite_json_parse_keys(const char *text, size_t len, int max_depth, enum json_tokener_error *ret_err,
                                  size_t *ret_end, bool *ret_unique_keys) {
    return parse(text, len, max_depth, true, ret_err, ret_end, ret_unique_keys);
}

json_object *kite_json_parse_lenient(const char *text, size_t len, int max_depth, enum json_tokener_error *ret_err,
                                     size_t *ret_end) {
    return parse(text, len, max_depth, false, ret_err, ret_end, NULL);
}
