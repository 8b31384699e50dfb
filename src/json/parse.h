/* Parsing JSON text into json-c objects, faster than json-c's tokener for the documents the API
 * server parses on every write (request bodies, stored objects).
 *
 * The result is exactly what json_tokener_parse_ex (default flags) gives for the same text: the
 * fast path takes only strict JSON made of objects, arrays, strings, integers of up to 18 digits,
 * true, false and null, and hands anything else (floats, big numbers, surrogate and \u0000
 * escapes, control characters, json-c's lenient extensions, invalid text, deep nesting) to the
 * tokener, so numbers, duplicate keys (the last value wins, in the first one's place) and error
 * codes stay json-c's. The gain: no tokener or locale set up per call (json-c 0.16 switches the
 * thread's locale on every parse), no intermediate buffer per string.
 *
 * kite_json_parse also refuses text that is not well-formed UTF-8 (RFC 8259 8.1, RFC 3629:
 * overlong forms, encoded surrogates and code points past U+10FFFF included) with
 * json_tokener_error_parse_utf8_string, as json_tokener_parse_ex does with
 * JSON_TOKENER_VALIDATE_UTF8 where its looser check sees the fault: such bytes, stored and
 * served, make every later list unreadable to strict decoders (Python's). Escapes cannot
 * produce them: json-c (as Go) turns an unpaired surrogate escape such as \ud800 into U+FFFD.
 * kite_json_parse_lenient is the same without the UTF-8 check (json-c's default flags), for
 * stored objects: one written before the check existed stays readable, so it can be fixed. */
#pragma once
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* Parses the first JSON value in text[0..len). Returns a new object (NULL for the JSON literal
 * null, and on error). *ret_err gets json_tokener_success or json-c's error;
 * *ret_end (optional) how many bytes the value took (trailing data is the caller's business,
 * as with json_tokener_get_parse_end). max_depth: json-c's nesting limit (json_tokener_new_ex). */
json_object *kite_json_parse(const char *text, size_t len, int max_depth, enum json_tokener_error *ret_err,
                             size_t *ret_end);
/* kite_json_parse that also tells whether every object of the value has distinct keys (after
 * unescaping them): *ret_unique_keys true when so, false when one repeats a key, or when the
 * tokener parsed the text (it does not tell). Lets a caller skip scanning the text for
 * repeated keys (the fieldValidation check of every write) when there cannot be any. */
json_object *kite_json_parse_keys(const char *text, size_t len, int max_depth, enum json_tokener_error *ret_err,
                                  size_t *ret_end, bool *ret_unique_keys);
json_object *kite_json_parse_lenient(const char *text, size_t len, int max_depth, enum json_tokener_error *ret_err,
                                     size_t *ret_end);

/* Offset of the first byte of s[0..n) that does not begin a well-formed UTF-8 sequence
 * (as above), n when all are well-formed. */
size_t kite_utf8_invalid_at(const char *s, size_t n);
/* Whether JSON text holds a \u0000 escape. json-c keeps a NUL in a string value (with its
 * length) but cuts an object key at it, and the rest of kite reads strings as C strings:
 * the API refuses such text rather than store a silently shortened name or key. */
bool kite_json_has_nul_escape(const char *text, size_t len);
