/* Parsing JSON text into json-c objects, faster than json-c's tokener for the documents the API
 * server parses on every write (request bodies, stored objects).
 *
 * The result is exactly what json_tokener_parse_ex (default flags) gives for the same text: the
 * fast path takes only strict JSON made of objects, arrays, strings, integers of up to 18 digits,
 * true, false and null, and hands anything else (floats, big numbers, surrogate and \u0000
 * escapes, control characters, json-c's lenient extensions, invalid text, deep nesting) to the
 * tokener, so numbers, duplicate keys (the last value wins, in the first one's place) and error
 * codes stay json-c's. The gain: no tokener or locale set up per call (json-c 0.16 switches the
 * thread's locale on every parse), no intermediate buffer per string. */
#pragma once
#include <json-c/json.h>
#include <stddef.h>

/* Parses the first JSON value in text[0..len). Returns a new object (NULL for the JSON literal
 * null, and on error). *ret_err gets json_tokener_success or json-c's error;
 * *ret_end (optional) how many bytes the value took (trailing data is the caller's business,
 * as with json_tokener_get_parse_end). max_depth: json-c's nesting limit (json_tokener_new_ex). */
json_object *kite_json_parse(const char *text, size_t len, int max_depth, enum json_tokener_error *ret_err,
                             size_t *ret_end);
