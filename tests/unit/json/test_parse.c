/* kite_json_parse_lenient gives exactly what json-c's tokener gives: same objects (types, key
 * order, string bytes, integers), same error codes, same parse end; kite_json_parse what the
 * tokener gives with JSON_TOKENER_VALIDATE_UTF8, and an UTF-8 error also where a reference
 * decoder finds text that is not well-formed UTF-8 (json-c's check is looser). Table cases,
 * then a randomized differential run over generated and mutated documents. */
#include "helpers.h"
#include "json/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A dump that shows what JSON text hides: each value's json-c type, strings byte for byte. */
static void dump(json_object *o, char *out, size_t cap) {
    size_t n = strlen(out);
    if (n + 64 > cap) return;
    if (!o) {
        strcat(out, "N");
        return;
    }
    switch (json_object_get_type(o)) {
    case json_type_object:
        strcat(out, "{");
        json_object_object_foreach(o, k, v) {
            size_t m = strlen(out);
            snprintf(out + m, cap - m, "K%zu:%s=", strlen(k), k);
            dump(v, out, cap);
            strcat(out, ",");
        }
        strcat(out, "}");
        break;
    case json_type_array:
        strcat(out, "[");
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            dump(json_object_array_get_idx(o, i), out, cap);
            strcat(out, ",");
        }
        strcat(out, "]");
        break;
    case json_type_string: {
        const char *s = json_object_get_string(o);
        size_t len = (size_t)json_object_get_string_len(o);
        snprintf(out + n, cap - n, "S%zu:", len);
        for (size_t i = 0; i < len && strlen(out) + 4 < cap; i++) {
            size_t m = strlen(out);
            snprintf(out + m, cap - m, "%02x", (unsigned char)s[i]);
        }
        break;
    }
    case json_type_int:
        snprintf(out + n, cap - n, "I%lld", (long long)json_object_get_int64(o));
        break;
    case json_type_double:
        snprintf(out + n, cap - n, "D%s", json_object_to_json_string(o));
        break;
    case json_type_boolean:
        strcat(out, json_object_get_boolean(o) ? "T" : "F");
        break;
    default:
        strcat(out, "?");
    }
}

/* A reference check, written apart from parse.c's: decode each sequence, then test the code
 * point against the shortest form, the surrogates and U+10FFFF. */
static bool ref_utf8_ok(const char *t, size_t n) {
    static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
    const unsigned char *s = (const unsigned char *)t;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], cp, k;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) k = 2, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0) k = 3, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0) k = 4, cp = c & 0x07;
        else return false;
        if (i + k > n) return false;
        for (unsigned j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += k;
    }
    return true;
}

static void expect_same_mode(const char *text, size_t len, int depth, bool strict) {
    json_tokener *tok = json_tokener_new_ex(depth);
    if (strict) json_tokener_set_flags(tok, JSON_TOKENER_VALIDATE_UTF8);
    json_object *want = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error want_err = json_tokener_get_error(tok);
    size_t want_end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (strict && want_err == json_tokener_success && !ref_utf8_ok(text, want_end)) {
        json_object_put(want);
        want = NULL;
        want_err = json_tokener_error_parse_utf8_string;
    }
    enum json_tokener_error err;
    size_t end;
    json_object *got = strict ? kite_json_parse(text, len, depth, &err, &end)
                              : kite_json_parse_lenient(text, len, depth, &err, &end);
    cr_assert_eq(err, want_err, "error for %.*s (strict %d): %d, json-c %d", (int)len, text, strict, err, want_err);
    if (want_err == json_tokener_success)
        cr_assert_eq(end, want_end, "end for %.*s: %zu, json-c %zu", (int)len, text, end, want_end);
    static char a[16384], b[16384];
    a[0] = b[0] = 0;
    dump(want, a, sizeof a);
    dump(got, b, sizeof b);
    cr_assert_str_eq(b, a, "parse of %.*s", (int)len, text);
    json_object_put(want);
    json_object_put(got);
}

static void expect_same(const char *text, size_t len, int depth) {
    expect_same_mode(text, len, depth, false);
    expect_same_mode(text, len, depth, true);
}

static void same(const char *text) { expect_same(text, strlen(text), 64); }

Test(parse, table) {
    static const char *const cases[] = {
        "{}", "[]", " \n\t{ } ", "{\"a\":1}", "{\"a\":-12,\"b\":0,\"c\":123456789012345678}",
        "{\"big\":1234567890123456789}", "{\"huge\":99999999999999999999999}", "{\"neg\":-9223372036854775808}",
        "{\"f\":1.5,\"e\":1e3,\"E\":2E-2,\"z\":-0,\"lz\":01}", "[1,2,3,-4]", "[true,false,null]",
        "{\"a\":null,\"b\":[null],\"c\":{}}", "{\"a\":1,\"a\":2,\"b\":3,\"a\":4}",
        "{\"s\":\"plain\",\"e\":\"q\\\"b\\\\s\\/n\\nr\\rt\\tb\\bf\\f\"}", "{\"u\":\"\\u00e9\\u4e2d\\u0041\"}",
        "{\"nul\":\"a\\u0000b\"}", "{\"k\\u0000x\":1}", "{\"sur\":\"\\ud83d\\ude00\"}", "{\"lone\":\"\\ud83d\"}",
        "{\"bad\":\"\\x\"}", "{\"ctl\":\"a\tb\"}", "{\"utf8\":\"h\xc3\xa9llo \xff\xfe raw\"}",
        "{\"e\\u00e9\":\"key escape\"}", "{\"a\":[1,[2,[3,[4]]]],\"b\":{\"c\":{\"d\":{}}}}",
        "{\"a\":1,}", "[1,2,]", "{\"a\" 1}", "{a:1}", "{'a':1}", "{\"a\":True}", "{\"a\":NaN}",
        "{\"a\":Infinity}", "{\"a\":-Infinity}", "/* c */ {}", "{\"a\":1 /* c */}", "{\"a\":1} trailing",
        "{\"a\":1}{\"b\":2}", "{\"a\":1", "{\"a\":\"unterminated", "[", "]", "", "   ", "null", "true", "12",
        "\"str\"", "{\"a\":tru}", "{\"a\":nul}", "{\"a\":falsey}", "{\"a\":-}", "{\"a\":--1}", "{\"a\":+1}",
        "{\"a\":1.}", "{\"a\":.5}", "{\"a\":0x10}", "\xef\xbb\xbf{}", "\f{}", "{\"a\":\f1}",
        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"bench-1\","
        "\"namespace\":\"default\"},\"spec\":{\"holderIdentity\":\"bench-1\",\"leaseDurationSeconds\":40,"
        "\"renewTime\":\"2026-12-03T08:00:00.000037Z\"}}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) same(cases[i]);
    /* embedded NUL bytes, and a length shorter than the text */
    expect_same("{\"a\":\"x\0y\"}", 11, 64);
    expect_same("{\"a\":1}", 5, 64);
    expect_same("[1,2]", 3, 64);
    /* json-c with JSON_TOKENER_VALIDATE_UTF8 also checks the byte after the value (fuzz find) */
    expect_same("{\"k\":\"v\"}\xd6\xff", 11, 64);
    expect_same("{\"k\":\"v\"} \xc3\xa9", 12, 64);
}

Test(parse, depth) {
    char deep[512];
    for (int d = 1; d <= 80; d += 7) {
        size_t n = 0;
        for (int i = 0; i < d; i++) deep[n++] = '[';
        for (int i = 0; i < d; i++) deep[n++] = ']';
        expect_same(deep, n, 64);
        expect_same(deep, n, 16);
    }
}

/* ---- randomized differential run ---- */

static uint64_t rng = 88172645463325252ull;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* The first N_PLAIN atoms are what the fast path takes itself; the rest go to the tokener. */
#define N_PLAIN 14
static bool plain_only;

static void gen(char *b, size_t *n, size_t cap, int depth) {
    static const char *const atoms[] = {
        "0", "7", "-3", "42", "123456789012345678", "true", "false", "null", "\"\"", "\"abc\"", "\"a\\nb\"",
        "\"\\u00e9\"", "\"x\\\"y\"", "\"h\xc3\xa9\xf0\x9f\x98\x80\"",
        "1234567890123456789", "\"\xed\xa0\x80\"", "\"\xc0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"",
        "\"x\xff\xfey\"", "\"\\ud800\"", "1.25", "-0", "1e2", "\"\\ud83d\\ude00\"", "\"\\u0000\"",
    };
    if (*n + 64 > cap) return;
    unsigned k = depth > 6 ? 2 + rnd(3) : rnd(5);
    if (k == 0 || k == 1) {
        bool obj = k == 0;
        b[(*n)++] = obj ? '{' : '[';
        unsigned m = rnd(4);
        for (unsigned i = 0; i < m && *n + 64 < cap; i++) {
            if (i) b[(*n)++] = ',';
            if (rnd(4) == 0) b[(*n)++] = ' ';
            if (obj) {
                static const char *const keys[] = {"\"a\"", "\"b\"", "\"a\"", "\"k\\u00e9\"", "\"\"", "\"long_key_name\""};
                const char *key = keys[rnd(6)];
                memcpy(b + *n, key, strlen(key));
                *n += strlen(key);
                b[(*n)++] = ':';
            }
            gen(b, n, cap, depth + 1);
        }
        b[(*n)++] = obj ? '}' : ']';
    } else {
        const char *a = atoms[rnd(plain_only ? N_PLAIN : sizeof atoms / sizeof atoms[0])];
        memcpy(b + *n, a, strlen(a));
        *n += strlen(a);
    }
}

Test(parse, differential) {
    char doc[4096];
    for (int i = 0; i < 20000; i++) {
        plain_only = i % 2;
        size_t n = 0;
        doc[n++] = rnd(2) ? '{' : '[';
        bool obj = doc[0] == '{';
        unsigned m = rnd(5);
        for (unsigned j = 0; j < m; j++) {
            if (j) doc[n++] = ',';
            if (obj) {
                memcpy(doc + n, "\"f\":", 4);
                n += 4;
            }
            gen(doc, &n, sizeof doc - 8, 1);
        }
        doc[n++] = obj ? '}' : ']';
        /* mutate some: flip, drop or insert a byte */
        if (rnd(3) == 0) {
            unsigned at = rnd((unsigned)n);
            switch (rnd(3)) {
            case 0: doc[at] = "{}[],:\"\\ 0a-.eE\x01\xff"[rnd(18)]; break;
            case 1: memmove(doc + at, doc + at + 1, n - at - 1); n--; break;
            default: memmove(doc + at + 1, doc + at, n - at); doc[at] = "{}[],:\"\\ 0"[rnd(11)]; n++; break;
            }
        }
        expect_same(doc, n, 64);
    }
}

/* The strict parse refuses each way text can fail to be UTF-8, on both paths (the second
 * document of each pair has a float, which sends it to the tokener). */
Test(parse, refuses_invalid_utf8) {
    static const char *const bad[] = {
        "x\xff\xfey",         /* bytes that never occur in UTF-8 */
        "\xed\xa0\x80",       /* an encoded surrogate (json-c's own check takes it) */
        "\xc0\x80",           /* overlong NUL (json-c takes it) */
        "\xf4\x90\x80\x80",   /* past U+10FFFF (json-c takes it) */
        "\xe2\x82",           /* truncated */
        "\x80",               /* lone continuation byte */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int slow = 0; slow < 2; slow++) {
            char doc[128];
            int n = snprintf(doc, sizeof doc, "{\"a\":\"%s\"%s}", bad[i], slow ? ",\"f\":1.5" : "");
            enum json_tokener_error e;
            json_object *o = kite_json_parse(doc, (size_t)n, 64, &e, NULL);
            cr_assert_null(o, "case %zu slow %d", i, slow);
            cr_assert_eq(e, json_tokener_error_parse_utf8_string, "case %zu slow %d: %d", i, slow, e);
            /* the lenient parse (stored objects) still takes it, as json-c does */
            o = kite_json_parse_lenient(doc, (size_t)n, 64, &e, NULL);
            cr_assert_not_null(o, "lenient case %zu", i);
            json_object_put(o);
        }
    }
    /* well-formed text, raw and escaped; an unpaired surrogate escape becomes U+FFFD */
    static const char ok[] = "{\"a\":\"h\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\",\"b\":\"\\ud800\",\"c\":1.5}";
    enum json_tokener_error e;
    json_object *o = kite_json_parse(ok, sizeof ok - 1, 64, &e, NULL);
    cr_assert_not_null(o);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(o, "b")), "\xef\xbf\xbd");
    json_object_put(o);
}

Test(parse, nul_escape) {
    cr_assert(kite_json_has_nul_escape("{\"a\":\"x\\u0000y\"}", 16));
    cr_assert(kite_json_has_nul_escape("{\"a\\u0000b\":1}", 14));
    cr_assert(kite_json_has_nul_escape("\"\\\\\\u0000\"", 10)); /* "\\" then \u0000 */
    cr_assert_not(kite_json_has_nul_escape("{\"a\":\"\\\\u0000\"}", 15)); /* an escaped backslash, then text */
    cr_assert_not(kite_json_has_nul_escape("{\"a\":\"\\u0001\\u00000\"}", 12)); /* cut before the second */
    cr_assert_not(kite_json_has_nul_escape("{\"a\":\"\\u1000\"}", 14));
    cr_assert_not(kite_json_has_nul_escape("\\", 1));
    cr_assert_not(kite_json_has_nul_escape("\\u000", 5));
}

/* ---- kite_json_parse_keys: the same parse, and whether an object repeats a key ---- */

/* A reference written apart from parse.c's: walks valid JSON text, unescapes each key with the
 * tokener and compares it with the object's earlier keys. Sets *dup when some object repeats one. */
static const char *ref_skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char *ref_string_end(const char *p) { /* p at the opening quote; returns past the closing one */
    for (p++; *p != '"'; p += *p == '\\' ? 2 : 1) {}
    return p + 1;
}

static const char *ref_value(const char *p, bool *dup) {
    p = ref_skip_ws(p);
    if (*p == '"') return ref_string_end(p);
    if (*p != '{' && *p != '[') {
        while (*p && !strchr(",]} \n\r\t", *p)) p++;
        return p;
    }
    bool obj = *p == '{';
    char close = obj ? '}' : ']';
    json_object *seen = json_object_new_array();
    p = ref_skip_ws(p + 1);
    while (*p != close) {
        if (obj) {
            const char *e = ref_string_end(p);
            char *lit = strndup(p, (size_t)(e - p));
            json_object *k = json_tokener_parse(lit);
            free(lit);
            for (size_t i = 0; i < json_object_array_length(seen); i++)
                if (strcmp(json_object_get_string(json_object_array_get_idx(seen, i)), json_object_get_string(k)) == 0)
                    *dup = true;
            json_object_array_add(seen, k);
            p = ref_skip_ws(e) + 1; /* ':' */
        }
        p = ref_skip_ws(ref_value(p, dup));
        if (*p == ',') p = ref_skip_ws(p + 1);
    }
    json_object_put(seen);
    return p + 1;
}

static void expect_keys(const char *text, size_t len, bool fast_path) {
    enum json_tokener_error e1, e2;
    size_t end1, end2;
    bool unique = true;
    json_object *a = kite_json_parse(text, len, 64, &e1, &end1);
    json_object *b = kite_json_parse_keys(text, len, 64, &e2, &end2, &unique);
    static char da[16384], db[16384];
    da[0] = db[0] = 0;
    dump(a, da, sizeof da);
    dump(b, db, sizeof db);
    cr_assert_eq(e2, e1);
    cr_assert_str_eq(db, da, "parse of %.*s", (int)len, text);
    if (e1 == json_tokener_success) {
        cr_assert_eq(end2, end1);
        char *copy = strndup(text, end1);
        bool dup = false;
        ref_value(copy, &dup);
        free(copy);
        /* unique only when truly so; on the fast path, exactly when so */
        if (unique) cr_assert(!dup, "unique keys claimed for %.*s", (int)len, text);
        if (fast_path) cr_assert_eq(unique, !dup, "keys of %.*s: unique %d, reference dup %d", (int)len, text, unique, dup);
    } else {
        cr_assert(!unique, "unique keys claimed for text that does not parse: %.*s", (int)len, text);
    }
    json_object_put(a);
    json_object_put(b);
}

static void keys(const char *text, bool fast_path) { expect_keys(text, strlen(text), fast_path); }

Test(parse, unique_keys_table) {
    keys("{}", true);
    keys("[]", true);
    keys("{\"a\":1,\"b\":{\"a\":1}}", true);
    keys("{\"a\":1,\"a\":2}", true);
    keys("{\"a\":null,\"a\":null}", true);
    keys("{\"x\":[{\"a\":1},{\"a\":1,\"b\":2,\"a\":3}]}", true);
    keys("{\"spec\":{\"holderIdentity\":\"n\",\"holderIdentity\":\"m\"}}", true);
    keys("{\"a\":1,\"\\u0061\":2}", true);   /* the same key once unescaped */
    keys("{\"a\\\"\":1,\"a\\u0022\":2}", true);
    keys("{\"k\":1.5,\"k\":2}", false);      /* a float: the tokener parses it, and cannot tell */
    keys("{\"k\":1.5,\"j\":2}", false);
    keys("{\"a\":1,", false);                /* no value at all */
    bool unique = true;
    enum json_tokener_error e;
    json_object *o = kite_json_parse_keys("{\"k\":1.5}", 9, 64, &e, NULL, &unique);
    cr_assert(o && !unique); /* the tokener's parse: not known */
    json_object_put(o);
    o = kite_json_parse_keys("{\"k\":1}", 7, 64, &e, NULL, &unique);
    cr_assert(o && unique);
    json_object_put(o);
}

Test(parse, unique_keys_differential) {
    char doc[4096];
    for (int i = 0; i < 20000; i++) {
        plain_only = i % 2;
        size_t n = 0;
        doc[n++] = '{';
        unsigned m = rnd(5);
        for (unsigned j = 0; j < m; j++) {
            if (j) doc[n++] = ',';
            const char *k = rnd(2) ? "\"f\":" : "\"g\":";
            memcpy(doc + n, k, 4);
            n += 4;
            gen(doc, &n, sizeof doc - 8, 1);
        }
        doc[n++] = '}';
        bool mutated = rnd(4) == 0;
        if (mutated) {
            unsigned at = rnd((unsigned)n);
            doc[at] = "{}[],:\"\\ 0a"[rnd(11)];
        }
        /* documents of plain atoms, unmutated and shallow, are the fast path's */
        expect_keys(doc, n, plain_only && !mutated);
    }
}
