/* kite_json_parse_lenient against json-c's tokener on arbitrary bytes: the same error, the same
 * parse end and the same tree (types, key order, string bytes, numbers), at the API server's
 * depth limit and at a small one; kite_json_parse against the tokener with
 * JSON_TOKENER_VALIDATE_UTF8, plus an UTF-8 error where a reference decoder finds the parsed
 * text not well-formed (json-c's check is looser: overlong forms, surrogates, > U+10FFFF). */
#include "fuzz_common.h"
#include "json/parse.h"

#include <stdio.h>

/* Appends a dump that shows what JSON text hides: each value's json-c type, strings as hex. */
static void dump(json_object *o, FILE *f) {
    if (!o) {
        fputc('N', f);
        return;
    }
    switch (json_object_get_type(o)) {
    case json_type_object:
        fputc('{', f);
        json_object_object_foreach(o, k, v) {
            fprintf(f, "K%zu:", strlen(k));
            for (const char *p = k; *p; p++) fprintf(f, "%02x", (unsigned char)*p);
            fputc('=', f);
            dump(v, f);
            fputc(',', f);
        }
        fputc('}', f);
        break;
    case json_type_array:
        fputc('[', f);
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            dump(json_object_array_get_idx(o, i), f);
            fputc(',', f);
        }
        fputc(']', f);
        break;
    case json_type_string: {
        const char *s = json_object_get_string(o);
        size_t len = (size_t)json_object_get_string_len(o);
        fprintf(f, "S%zu:", len);
        for (size_t i = 0; i < len; i++) fprintf(f, "%02x", (unsigned char)s[i]);
        break;
    }
    case json_type_int:
        fprintf(f, "I%lld", (long long)json_object_get_int64(o));
        break;
    case json_type_double:
        fprintf(f, "D%s", json_object_to_json_string(o));
        break;
    case json_type_boolean:
        fputc(json_object_get_boolean(o) ? 'T' : 'F', f);
        break;
    default:
        fputc('?', f);
    }
}

static char *dump_str(json_object *o) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) abort();
    dump(o, f);
    fclose(f);
    return s;
}

/* Decodes each sequence, then tests the code point (written apart from parse.c's check). */
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

static void check(const char *text, size_t len, int depth, bool strict) {
    json_tokener *tok = json_tokener_new_ex(depth);
    if (!tok) abort();
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
    size_t end = 0;
    json_object *got = strict ? kite_json_parse(text, len, depth, &err, &end)
                              : kite_json_parse_lenient(text, len, depth, &err, &end);
    if (err != want_err) {
        fprintf(stderr, "depth %d: error %d, json-c %d\n", depth, err, want_err);
        abort();
    }
    if (err == json_tokener_success && end != want_end) {
        fprintf(stderr, "depth %d: parse end %zu, json-c %zu\n", depth, end, want_end);
        abort();
    }
    char *a = dump_str(want), *b = dump_str(got);
    if (strcmp(a, b) != 0) {
        fprintf(stderr, "depth %d: tree differs\n kite:   %s\n json-c: %s\n", depth, b, a);
        abort();
    }
    free(a);
    free(b);
    json_object_put(want);
    json_object_put(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n > 1 << 16) return 0;
    char *s = fuzz_strndup(data, n); /* the tokener may look at text[len] */
    for (int strict = 0; strict < 2; strict++) {
        check(s, n, FUZZ_JSON_MAX_DEPTH, strict);
        check(s, n, 4, strict);
    }
    free(s);
    return 0;
}
