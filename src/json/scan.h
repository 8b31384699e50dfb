/* Reading a few members out of JSON text without parsing the whole of it: a watch event's type,
 * an object's labels, a Lease's renewTime. The scan follows strings, escapes and nesting, so a
 * member is found only where the parser would find it; where it cannot tell (text that is not an
 * object, malformed text, a member name written with an escape, which could spell the name
 * asked for), it says so and the caller parses the whole text instead. */
#pragma once
#include <json-c/json.h>
#include <stddef.h>

/* The value of member `name` of the JSON object s[0..n) (its last occurrence, as the parser
 * keeps it): 1 with its span (whitespace around it excluded), 0 when there is none, -1 when
 * the scan cannot tell. */
int kite_json_member(const char *s, size_t n, const char *name, const char **ret, size_t *ret_len);

/* kite_json_member for count names in one walk over the object: 0 with each ret[k] and
 * ret_len[k] set (ret[k] NULL when there is none), -1 when the scan cannot tell. */
int kite_json_members(const char *s, size_t n, size_t count, const char *const *names, const char **ret,
                      size_t *ret_len);

/* The object s[0..n) cut down to the members at the given dotted paths ("metadata.name",
 * "spec.renewTime"; a NULL-terminated list): a new object holding those that exist and are not
 * null, each value
 * parsed alone, objects on the way created as needed (client-go's informer transform, done
 * before the parse rather than after). NULL when the scan cannot tell, or a value does not
 * parse: the caller parses the whole text then. Each object on the paths is walked once for
 * all of them. */
json_object *kite_json_project(const char *s, size_t n, const char *const *paths);

/* The same cut of an object already parsed: the values are shared (referenced), not copied. */
json_object *kite_obj_project(json_object *obj, const char *const *paths);
/* kite_obj_project with copies of the values, sharing nothing with obj (whose reference counts
 * another thread may be moving: json-c's are not atomic). */
json_object *kite_obj_project_copy(json_object *obj, const char *const *paths);
