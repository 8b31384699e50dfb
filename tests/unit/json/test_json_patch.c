/* RFC 6902 JSON patch: the Appendix A examples and the error cases. */
#include "helpers.h"

struct jp_case {
    const char *name, *doc, *patch;
    int err;          /* 0, -EBADMSG or -EINVAL */
    const char *want; /* when err == 0 */
};

static const struct jp_case jp_cases[] = {
    {"A.1 add object member", "{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]", 0,
     "{\"baz\":\"qux\",\"foo\":\"bar\"}"},
    {"A.2 add array element", "{\"foo\":[\"bar\",\"baz\"]}", "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
     0, "{\"foo\":[\"bar\",\"qux\",\"baz\"]}"},
    {"A.3 remove object member", "{\"baz\":\"qux\",\"foo\":\"bar\"}", "[{\"op\":\"remove\",\"path\":\"/baz\"}]", 0,
     "{\"foo\":\"bar\"}"},
    {"A.4 remove array element", "{\"foo\":[\"bar\",\"qux\",\"baz\"]}", "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]", 0,
     "{\"foo\":[\"bar\",\"baz\"]}"},
    {"A.5 replace", "{\"baz\":\"qux\",\"foo\":\"bar\"}", "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]", 0,
     "{\"baz\":\"boo\",\"foo\":\"bar\"}"},
    {"A.6 move value", "{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
     "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]", 0,
     "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}"},
    {"A.7 move array element", "{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
     "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]", 0, "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}"},
    {"A.8 test success", "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
     "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]", 0,
     "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}"},
    {"A.9 test error", "{\"baz\":\"qux\"}", "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]", -EINVAL, NULL},
    {"A.10 add nested member object", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]", 0,
     "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}"},
    {"A.11 ignore unrecognized elements", "{\"foo\":\"bar\"}",
     "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]", 0, "{\"foo\":\"bar\",\"baz\":\"qux\"}"},
    {"A.12 add to nonexistent target", "{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]",
     -EINVAL, NULL},
    {"A.14 ~ escape ordering", "{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]", 0,
     "{\"/\":9,\"~1\":10}"},
    {"A.15 strings and numbers", "{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]",
     -EINVAL, NULL},
    {"A.16 add array value", "{\"foo\":[\"bar\"]}", "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
     0, "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}"},
    /* more success cases */
    {"~1 escape", "{\"a/b\":1}", "[{\"op\":\"replace\",\"path\":\"/a~1b\",\"value\":2}]", 0, "{\"a/b\":2}"},
    {"add replaces member", "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":2}]", 0, "{\"a\":2}"},
    {"add at end by index", "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/1\",\"value\":2}]", 0, "{\"a\":[1,2]}"},
    {"add at front", "{\"a\":[1,2,3]}", "[{\"op\":\"add\",\"path\":\"/a/0\",\"value\":0}]", 0, "{\"a\":[0,1,2,3]}"},
    {"add null value", "{}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":null}]", 0, "{\"a\":null}"},
    {"replace whole document", "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":[1]}]", 0, "[1]"},
    {"add whole document", "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"\",\"value\":{\"b\":2}}]", 0, "{\"b\":2}"},
    {"copy", "{\"a\":{\"b\":[1]}}", "[{\"op\":\"copy\",\"from\":\"/a/b\",\"path\":\"/c\"},"
     "{\"op\":\"add\",\"path\":\"/c/-\",\"value\":2}]", 0, "{\"a\":{\"b\":[1]},\"c\":[1,2]}"},
    {"move to same path", "{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]", 0, "{\"a\":1}"},
    {"test null member", "{\"a\":null}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":null}]", 0, "{\"a\":null}"},
    {"test object key order", "{\"a\":{\"x\":1,\"y\":2}}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"y\":2,\"x\":1}}]",
     0, "{\"a\":{\"x\":1,\"y\":2}}"},
    {"empty patch", "{\"a\":1}", "[]", 0, "{\"a\":1}"},
    {"ops are sequential", "{}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":{}},{\"op\":\"add\",\"path\":\"/a/b\",\"value\":1},"
     "{\"op\":\"remove\",\"path\":\"/a/b\"}]", 0, "{\"a\":{}}"},
    /* malformed patch documents: 400 */
    {"patch not an array", "{}", "{\"op\":\"add\",\"path\":\"/a\",\"value\":1}", -EBADMSG, NULL},
    {"op not an object", "{}", "[1]", -EBADMSG, NULL},
    {"missing op", "{}", "[{\"path\":\"/a\",\"value\":1}]", -EBADMSG, NULL},
    {"unknown op", "{}", "[{\"op\":\"frob\",\"path\":\"/a\"}]", -EBADMSG, NULL},
    {"missing path", "{}", "[{\"op\":\"add\",\"value\":1}]", -EBADMSG, NULL},
    {"non-string path", "{}", "[{\"op\":\"add\",\"path\":1,\"value\":1}]", -EBADMSG, NULL},
    {"missing value", "{}", "[{\"op\":\"add\",\"path\":\"/a\"}]", -EBADMSG, NULL},
    {"missing from", "{\"a\":1}", "[{\"op\":\"move\",\"path\":\"/b\"}]", -EBADMSG, NULL},
    {"pointer without slash", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"a\"}]", -EBADMSG, NULL},
    {"bad ~ escape", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/a~2\"}]", -EBADMSG, NULL},
    /* well-formed but inapplicable: 422 */
    {"remove missing member", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"/b\"}]", -EINVAL, NULL},
    {"replace missing member", "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/b\",\"value\":1}]", -EINVAL, NULL},
    {"index out of range", "{\"a\":[1]}", "[{\"op\":\"add\",\"path\":\"/a/2\",\"value\":1}]", -EINVAL, NULL},
    {"remove past end", "{\"a\":[1]}", "[{\"op\":\"remove\",\"path\":\"/a/1\"}]", -EINVAL, NULL},
    {"leading zero index", "{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/01\"}]", -EINVAL, NULL},
    {"non-numeric index", "{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/x\"}]", -EINVAL, NULL},
    {"dash only for add", "{\"a\":[1,2]}", "[{\"op\":\"replace\",\"path\":\"/a/-\",\"value\":1}]", -EINVAL, NULL},
    {"move into own child", "{\"a\":{\"b\":1}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/c\"}]", -EINVAL, NULL},
    {"move missing source", "{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/x\",\"path\":\"/b\"}]", -EINVAL, NULL},
    {"copy missing source", "{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/b\"}]", -EINVAL, NULL},
    {"remove root", "{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"\"}]", -EINVAL, NULL},
    {"descend into scalar", "{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":1}]", -EINVAL, NULL},
    {"test missing path", "{}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":null}]", -EINVAL, NULL},
    {"later op fails: all or nothing", "{\"a\":1}",
     "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2},{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]", -EINVAL, NULL},
};

Test(json_patch, table) {
    for (size_t i = 0; i < sizeof jp_cases / sizeof jp_cases[0]; i++) {
        const struct jp_case *c = &jp_cases[i];
        json_object *doc = J(c->doc), *patch = J(c->patch), *out = NULL;
        char *before = strdup(S(doc)), *err = NULL;
        int r = kite_json_patch(doc, patch, &out, &err);
        cr_assert_eq(r, c->err, "%s: got %d (%s)", c->name, r, err ? err : "");
        if (r == 0) {
            cr_assert_null(err, "%s", c->name);
            assert_json(out, c->want, "%s", c->name);
            json_object_put(out);
        } else {
            cr_assert_not_null(err, "%s: no message", c->name);
        }
        cr_assert_str_eq(S(doc), before, "%s: input modified", c->name);
        free(before);
        free(err);
        json_object_put(doc);
        json_object_put(patch);
    }
}

Test(json_patch, too_many_operations) {
    json_object *patch = json_object_new_array();
    for (int i = 0; i < 10001; i++) json_object_array_add(patch, J("{\"op\":\"test\",\"path\":\"\",\"value\":{}}"));
    json_object *doc = J("{}"), *out = NULL;
    cr_assert_eq(kite_json_patch(doc, patch, &out, NULL), -EBADMSG);
    json_object_array_del_idx(patch, 0, 1);
    cr_assert_eq(kite_json_patch(doc, patch, &out, NULL), 0);
    json_object_put(out);
    json_object_put(doc);
    json_object_put(patch);
}
