/* Shared helpers for the json module tests. */
#pragma once
#include <criterion/criterion.h>
#include <json-c/json.h>

#include "json/patch.h"

/* Parses a JSON literal; "null" gives NULL. Aborts the test on a syntax error. */
static inline json_object *J(const char *s) {
    enum json_tokener_error e;
    json_object *o = json_tokener_parse_verbose(s, &e);
    cr_assert_eq(e, json_tokener_success, "bad test JSON: %s", s);
    return o;
}

static inline const char *S(json_object *o) {
    return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Asserts got equals the JSON literal want (key order ignored). */
#define assert_json(got, want, ...)                                                                     \
    do {                                                                                                \
        json_object *_w = J(want);                                                                      \
        bool _eq = kite_json_equal((got), _w);                                                          \
        if (!_eq) cr_log_error("got  %s\nwant %s", S(got), want);                                      \
        json_object_put(_w);                                                                            \
        cr_assert(_eq, __VA_ARGS__);                                                                    \
    } while (0)
