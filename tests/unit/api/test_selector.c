#include <criterion/criterion.h>

#include "api/selector.h"

#define QNAME_MSG                                                                                       \
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an " \
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "  \
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define LVALUE_MSG                                                                                            \
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must " \
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "  \
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

static const char *LABELS = "{\"app\":\"web\",\"tier\":\"front\",\"env\":\"\",\"n\":\"5\","
                            "\"node-role.kubernetes.io/worker\":\"\"}";

Test(selector, label_parse_and_match) {
    static const struct {
        const char *sel;
        bool match;
    } cases[] = {
        {"", true},
        {"app=web", true},
        {"app==web", true},
        {"app=db", false},
        {"app!=db", true},
        {"app!=web", false},
        {"missing!=x", true},
        {"app", true},
        {"missing", false},
        {"!missing", true},
        {"!app", false},
        {"app in (web,db)", true},
        {"app in (db, cache)", false},
        {"app notin (db)", true},
        {"app notin (web,db)", false},
        {"missing notin (x)", true},
        {"missing in (x)", false},
        {"env=", true},
        {"env in ()", true},
        {"env in (,a)", true},
        {"app=web,tier=front", true},
        {"app=web, tier=back", false},
        {"  app = web ,  tier  ", true},
        {"node-role.kubernetes.io/worker", true},
        {"n>3", true},
        {"n<3", false},
        {"n>7", false},
        {"app>3", false},
        {"in=x", false},  /* `in` is an ordinary key where a key is expected */
        {"app in (web),!missing,env", true},
    };
    json_object *labels = json_tokener_parse(LABELS);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_label_selector *sel = NULL;
        char *err = NULL;
        int rc = kite_label_selector_parse(cases[i].sel, &sel, &err);
        cr_assert_eq(rc, 0, "parse %s: %s", cases[i].sel, err ? err : "");
        cr_assert_eq(kite_label_selector_matches(sel, labels), cases[i].match, "match %s", cases[i].sel);
        kite_label_selector_free(sel);
    }
    json_object_put(labels);
}

Test(selector, label_null_labels_and_empty) {
    struct kite_label_selector *sel = NULL;
    cr_assert_eq(kite_label_selector_parse("", &sel, NULL), 0);
    cr_assert(kite_label_selector_empty(sel));
    cr_assert(kite_label_selector_matches(sel, NULL));
    kite_label_selector_free(sel);
    cr_assert_eq(kite_label_selector_parse(NULL, &sel, NULL), 0);
    cr_assert(kite_label_selector_empty(sel));
    kite_label_selector_free(sel);
    cr_assert_eq(kite_label_selector_parse("a!=b,!c", &sel, NULL), 0);
    cr_assert_not(kite_label_selector_empty(sel));
    cr_assert(kite_label_selector_matches(sel, NULL));
    kite_label_selector_free(sel);
    cr_assert_eq(kite_label_selector_parse("a", &sel, NULL), 0);
    cr_assert_not(kite_label_selector_matches(sel, NULL));
    kite_label_selector_free(sel);
    kite_label_selector_free(NULL);
}

Test(selector, label_errors) {
    static const struct {
        const char *sel, *err;
    } cases[] = {
        {"app:monolith", "unable to parse requirement: <nil>: Invalid value: \"app:monolith\": " QNAME_MSG},
        {"a/b/c ?=? def",
         "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric "
         "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
         "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an "
         "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"},
        {",", "found ',', expected: !, identifier, or 'end of string'"},
        {"a=b,", "found '', expected: identifier after ','"},
        {"a=b c", "found 'c', expected: ',' or 'end of string'"},
        {"a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"},
        {"a in b", "unable to parse requirement: found 'b' expected: '('"},
        {"a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"},
        {"a in (b", "unable to parse requirement: found '', expected: ',' or ')'"},
        {"a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"},
        {"a=(", "unable to parse requirement: found '(', expected: identifier"},
        {"!", "unable to parse requirement: found '', expected: identifier"},
        {"!a=b", "found '=', expected: ',' or 'end of string'"},
        {"a=b/c", "unable to parse requirement: values[0][a]: Invalid value: \"b/c\": " LVALUE_MSG},
        {"a>b", "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"},
        {"a in (-x,-y)",
         "unable to parse requirement: [values[0][a]: Invalid value: \"-x\": " LVALUE_MSG
         ", values[1][a]: Invalid value: \"-y\": " LVALUE_MSG "]"},
        {"a=0123456789012345678901234567890123456789012345678901234567890123",
         "unable to parse requirement: values[0][a]: Invalid value: "
         "\"0123456789012345678901234567890123456789012345678901234567890123\": must be no more than 63 characters"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_label_selector *sel = (void *)1;
        char *err = NULL;
        cr_assert_eq(kite_label_selector_parse(cases[i].sel, &sel, &err), -EINVAL, "%s", cases[i].sel);
        cr_assert_eq(sel, (void *)1, "ret untouched on failure");
        cr_assert_str_eq(err, cases[i].err, "%s", cases[i].sel);
        free(err);
        /* ret_err is optional */
        cr_assert_eq(kite_label_selector_parse(cases[i].sel, &sel, NULL), -EINVAL);
    }
}

struct fields {
    const char *const *kv; /* field, value, ..., NULL */
};
static const char *get_field(const char *field, void *ud) {
    struct fields *f = ud;
    for (size_t i = 0; f->kv[i]; i += 2)
        if (strcmp(f->kv[i], field) == 0) return f->kv[i + 1];
    return "";
}

Test(selector, field_parse_and_match) {
    static const char *const kv[] = {"spec.nodeName", "n1", "status.phase", "Running", "metadata.name", "a,b=c\\d",
                                     "involvedObject.namespace", "", NULL};
    struct fields f = {kv};
    static const struct {
        const char *sel;
        bool match;
        size_t n;
    } cases[] = {
        {"", true, 0},
        {"spec.nodeName=n1", true, 1},
        {"spec.nodeName==n1", true, 1},
        {"spec.nodeName=n2", false, 1},
        {"spec.nodeName!=n2", true, 1},
        {"spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed", true, 3},
        {"spec.nodeName=n1,status.phase!=Running", false, 2},
        {"involvedObject.namespace=", true, 1},
        {"involvedObject.namespace!=", false, 1},
        {"other=", true, 1},
        {"metadata.name=a\\,b\\=c\\\\d", true, 1},
        {"metadata.name=a\\,b", false, 1},
        {",spec.nodeName=n1,,", true, 1},
        {"spec.nodeName=n1", true, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_field_selector *sel = NULL;
        char *err = NULL;
        cr_assert_eq(kite_field_selector_parse(cases[i].sel, &sel, &err), 0, "%s: %s", cases[i].sel, err ? err : "");
        cr_assert_eq(kite_field_selector_count(sel), cases[i].n, "%s", cases[i].sel);
        cr_assert_eq(kite_field_selector_matches(sel, get_field, &f), cases[i].match, "%s", cases[i].sel);
        kite_field_selector_free(sel);
    }
}

Test(selector, field_accessors) {
    struct kite_field_selector *sel = NULL;
    cr_assert_eq(kite_field_selector_parse("status.phase!=Failed,metadata.name=x\\,y,spec.nodeName==n", &sel, NULL), 0);
    cr_assert_eq(kite_field_selector_count(sel), 3);
    /* terms are sorted by field */
    cr_assert_str_eq(kite_field_selector_field(sel, 0), "metadata.name");
    cr_assert_str_eq(kite_field_selector_field(sel, 1), "spec.nodeName");
    cr_assert_str_eq(kite_field_selector_field(sel, 2), "status.phase");
    cr_assert_null(kite_field_selector_field(sel, 3));
    cr_assert_str_eq(kite_field_selector_exact(sel, "metadata.name"), "x,y");
    cr_assert_str_eq(kite_field_selector_exact(sel, "spec.nodeName"), "n");
    cr_assert_null(kite_field_selector_exact(sel, "status.phase"));
    cr_assert_null(kite_field_selector_exact(sel, "other"));
    kite_field_selector_free(sel);
    kite_field_selector_free(NULL);
}

Test(selector, field_errors) {
    static const struct {
        const char *sel, *err;
    } cases[] = {
        {"foo", "invalid selector: 'foo'; can't understand 'foo'"},
        {"a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"},
        {"a!b", "invalid selector: 'a!b'; can't understand 'a!b'"},
        {"a=b=c", "invalid field selector: unescaped character in value: 61"},
        {"a=b\\x", "invalid field selector: invalid escape sequence: \\x"},
        {"a=b\\", "invalid field selector: invalid escape sequence: \\"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_field_selector *sel = NULL;
        char *err = NULL;
        cr_assert_eq(kite_field_selector_parse(cases[i].sel, &sel, &err), -EINVAL, "%s", cases[i].sel);
        cr_assert_str_eq(err, cases[i].err);
        free(err);
    }
}

Test(selector, json_path_string) {
    json_object *o = json_tokener_parse(
        "{\"spec\":{\"nodeName\":\"n1\",\"unschedulable\":true,\"replicas\":3,\"x\":null,\"o\":{}},"
        "\"involvedObject\":{\"kind\":\"Node\"},\"f\":false,\"d\":1.5}");
    static const char *const cases[][2] = {
        {"spec.nodeName", "n1"}, {"spec.unschedulable", "true"}, {"f", "false"}, {"spec.replicas", "3"},
        {"involvedObject.kind", "Node"}, {"spec.missing", ""}, {"spec.nodeName.deeper", ""}, {"spec.x", ""},
        {"spec.o", ""}, {"nope.nope", ""}, {"d", "1.5"},
    };
    struct kite_buf b = {0};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_assert_str_eq(kite_json_path_string(o, cases[i][0], &b), cases[i][1], "%s", cases[i][0]);
    kite_buf_puts(&b, "junk");
    cr_assert_str_eq(kite_json_path_string(NULL, "a", &b), "");
    kite_buf_release(&b);
    json_object_put(o);
}
