/* RFC 7386 merge patch (cases from its Appendix A) and kite_json_equal. */
#include "helpers.h"

struct mp_case {
    const char *doc, *patch, *want;
};

/* RFC 7386 Appendix A, in order, plus the §3 example. */
static const struct mp_case mp_cases[] = {
    {"{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
    {"{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}"},
    {"{\"a\":\"b\"}", "{\"a\":null}", "{}"},
    {"{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}"},
    {"{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
    {"{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}"},
    {"{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}"},
    {"{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}"},
    {"[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]"},
    {"{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]"},
    {"{\"a\":\"foo\"}", "null", "null"},
    {"{\"a\":\"foo\"}", "\"bar\"", "\"bar\""},
    {"{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}"},
    {"[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}"},
    {"{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}"},
    {"{\"title\":\"Goodbye!\",\"author\":{\"givenName\":\"John\",\"familyName\":\"Doe\"},"
     "\"tags\":[\"example\",\"sample\"],\"content\":\"This will be unchanged\"}",
     "{\"title\":\"Hello!\",\"phoneNumber\":\"+01-123-456-7890\",\"author\":{\"familyName\":null},"
     "\"tags\":[\"example\"]}",
     "{\"title\":\"Hello!\",\"author\":{\"givenName\":\"John\"},\"tags\":[\"example\"],"
     "\"content\":\"This will be unchanged\",\"phoneNumber\":\"+01-123-456-7890\"}"},
    /* a null document is merged like any non-object */
    {"null", "{\"a\":{\"b\":null,\"c\":1}}", "{\"a\":{\"c\":1}}"},
};

Test(merge_patch, rfc7386_appendix) {
    for (size_t i = 0; i < sizeof mp_cases / sizeof mp_cases[0]; i++) {
        json_object *doc = J(mp_cases[i].doc), *patch = J(mp_cases[i].patch), *out = NULL;
        char *before = strdup(S(doc));
        cr_assert_eq(kite_merge_patch(doc, patch, &out, NULL), 0);
        assert_json(out, mp_cases[i].want, "case %zu", i);
        cr_assert_str_eq(S(doc), before, "case %zu: input modified", i);
        free(before);
        json_object_put(doc);
        json_object_put(patch);
        json_object_put(out);
    }
}

struct eq_case {
    const char *a, *b;
    bool equal;
};

static const struct eq_case eq_cases[] = {
    {"{\"a\":1,\"b\":[1,2]}", "{\"b\":[1,2],\"a\":1}", true},
    {"{\"a\":1}", "{\"a\":1,\"b\":null}", false},
    {"[1,2]", "[2,1]", false},
    {"1", "1.0", true},
    {"10", "\"10\"", false},
    {"null", "null", true},
    {"{\"a\":null}", "{\"b\":null}", false},
    {"\"a\\u0000b\"", "\"a\\u0000c\"", false},
    {"{\"x\":{\"y\":[true,{\"z\":\"w\"}]}}", "{\"x\":{\"y\":[true,{\"z\":\"w\"}]}}", true},
    {"{\"x\":{\"y\":[true,{\"z\":\"w\"}]}}", "{\"x\":{\"y\":[false,{\"z\":\"w\"}]}}", false},
};

Test(json_equal, table) {
    for (size_t i = 0; i < sizeof eq_cases / sizeof eq_cases[0]; i++) {
        json_object *a = J(eq_cases[i].a), *b = J(eq_cases[i].b);
        cr_assert_eq(kite_json_equal(a, b), eq_cases[i].equal, "case %zu", i);
        cr_assert_eq(kite_json_equal(b, a), eq_cases[i].equal, "case %zu reversed", i);
        json_object_put(a);
        json_object_put(b);
    }
}
