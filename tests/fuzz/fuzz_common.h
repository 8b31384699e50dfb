/* Shared helpers of the libFuzzer targets: inputs arrive as raw bytes, the parsers take
 * NUL-terminated strings or json-c trees. */
#pragma once
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Depth limit the API server gives json_tokener (KITE_JSON_MAX_DEPTH in src/apiserver). */
#define FUZZ_JSON_MAX_DEPTH 64

/* A NUL-terminated copy of data[0..n); embedded NULs end the string early, as they would
 * for any C caller. */
static inline char *fuzz_strndup(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}

/* Parses data[0..n) as one JSON document the way the API server does (depth limit,
 * trailing whitespace only); NULL when invalid. */
static inline json_object *fuzz_json_parse(const uint8_t *data, size_t n) {
    json_tokener *tok = json_tokener_new_ex(FUZZ_JSON_MAX_DEPTH);
    if (!tok) abort();
    const char *body = (const char *)data;
    json_object *o = json_tokener_parse_ex(tok, body, (int)n);
    enum json_tokener_error e = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    while (o && used < n && (body[used] == ' ' || body[used] == '\n' || body[used] == '\r' || body[used] == '\t')) used++;
    if (!o || e != json_tokener_success || used != n) {
        json_object_put(o);
        return NULL;
    }
    return o;
}
