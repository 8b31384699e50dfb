/* Reading a few members out of JSON text without parsing the whole of it: a watch event's type,
 * an object's labels, a Lease's renewTime. The scan follows strings, escapes and nesting, so a
 * member is found only where the parser would find it; where it cannot tell (text that is not an
 * object, malformed text, a member name written with an escape, which could spell the name
 * asked for), it says so and the caller parses the whole text instead. */
#pragma once
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* The value of member `name` of the JSON object s[0..n) (its last occurrence, as the parser
 * keeps it): 1 with its span (whitespace around it excluded), 0 when there is none, -1 when
 * the scan cannot tell. */
int kite_json_member(const char *s, size_t n, const char *name, const char **ret, size_t *ret_len);

/* kite_json_member for count names in one walk over the object: 0 with each ret[k] and
 * ret_len[k] set (ret[k] NULL when there is none), -1 when the scan cannot tell. */
int kite_json_members(const char *s, size_t n, size_t count, const char *const *names, const char **ret,
                      size_t *ret_len);

/* One past the end of the JSON value at s[i] (after whitespace), or SIZE_MAX when it is not well
 * formed as far as the scan can tell (strings closed, brackets balanced). */
size_t kite_json_value_end(const char *s, size_t n, size_t i);

/* Steps through the members of the object (object) or the elements of the array in s[0..n),
 * *i starting just past its opening bracket: 1 with the next one's name (as written, quotes
 * off; NULL for an array) and value span, *i past it; 0 at the closing bracket, *i past that;
 * -1 when the text is not well formed as far as the scan can tell. */
int kite_json_next(const char *s, size_t n, size_t *i, bool object, const char **name, size_t *name_len, const char **val,
                   size_t *val_len);

/* The one element of the JSON array s[0..n): 1 with its span, 0 when the array has none or
 * more than one, -1 when the scan cannot tell (not an array, malformed). */
int kite_json_array_only(const char *s, size_t n, const char **ret, size_t *ret_len);

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
