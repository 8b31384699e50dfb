#include <criterion/criterion.h>
#include <stdio.h>

#include "api/validation.h"

#define SUBDOMAIN_MSG                                                                                           \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must " \
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "          \
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define LABEL_MSG                                                                                            \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start " \
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "  \
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"

static char *repeat(char c, size_t n) {
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = 0;
    return s;
}

Test(validation, dns1123_subdomain_and_label) {
    char *l63 = repeat('a', 63), *l64 = repeat('a', 64), *s253 = repeat('a', 253), *s254 = repeat('a', 254);
    /* 253 chars made of dotted 63-char labels */
    char dotted[254];
    memset(dotted, 'b', 253);
    dotted[253] = 0;
    dotted[63] = dotted[127] = dotted[191] = '.';
    const struct {
        const char *s;
        bool subdomain, label;
    } cases[] = {
        {"a", true, true},
        {"0", true, true},
        {"worker-node-3", true, true},
        {"example.com", true, false},
        {"a.b.c", true, false},
        {"", false, false},
        {"-a", false, false},
        {"a-", false, false},
        {"A", false, false},
        {"nodeA", false, false},
        {"a_b", false, false},
        {"a..b", false, false},
        {".a", false, false},
        {"a.", false, false},
        {"a.-b", false, false},
        {"a b", false, false},
        {"ä", false, false},
        {l63, true, true},
        {l64, true, false},
        {s253, true, false},
        {s254, false, false},
        {dotted, true, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(kite_is_dns1123_subdomain(cases[i].s), cases[i].subdomain, "subdomain %s", cases[i].s);
        cr_assert_eq(kite_is_dns1123_label(cases[i].s), cases[i].label, "label %s", cases[i].s);
    }
    cr_assert_not(kite_is_dns1123_label(NULL));

    const char *m[KITE_NAME_ERRS_MAX];
    cr_assert_eq(kite_dns1123_subdomain_errs("Foo", m), 1);
    cr_assert_str_eq(m[0], SUBDOMAIN_MSG);
    cr_assert_eq(kite_dns1123_subdomain_errs(s254, m), 1);
    cr_assert_str_eq(m[0], "must be no more than 253 characters");
    cr_assert_eq(kite_dns1123_label_errs("a.b", m), 1);
    cr_assert_str_eq(m[0], "must not contain dots");
    cr_assert_eq(kite_dns1123_label_errs("A", m), 1);
    cr_assert_str_eq(m[0], LABEL_MSG);
    cr_assert_eq(kite_dns1123_label_errs(l64, m), 1);
    cr_assert_str_eq(m[0], "must be no more than 63 characters");
    /* DNS-1035 (Services): a label that starts with a letter */
    cr_assert_eq(kite_dns1035_label_errs("web-1", m), 0);
    cr_assert_eq(kite_dns1035_label_errs("1web", m), 1);
    cr_assert(strstr(m[0], "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                           "alphabetic character"), "%s", m[0]);
    cr_assert_eq(kite_dns1035_label_errs("a.b", m), 1);
    cr_assert_eq(kite_dns1035_label_errs(l64, m), 1);
    cr_assert_str_eq(m[0], "must be no more than 63 characters");
    free(l63), free(l64), free(s253), free(s254);
}

Test(validation, qualified_names_and_label_values) {
    char *n63 = repeat('N', 63), *n64 = repeat('N', 64), *p254 = repeat('p', 254);
    char k63[80], k64[80], longprefix[300];
    snprintf(k63, sizeof k63, "example.com/%s", n63);
    snprintf(k64, sizeof k64, "example.com/%s", n64);
    snprintf(longprefix, sizeof longprefix, "%s/a", p254);
    const struct {
        const char *s;
        bool qname, value;
    } cases[] = {
        {"app", true, true},
        {"MyName", true, true},
        {"my.name", true, true},
        {"123-abc", true, true},
        {"a_b", true, true},
        {"kubernetes.io/hostname", true, false},
        {"node-role.kubernetes.io/control-plane", true, false},
        {"", false, true},
        {"-a", false, false},
        {"a-", false, false},
        {"a b", false, false},
        {"/a", false, false},
        {"a/", false, false},
        {"a/b/c", false, false},
        {"Example.com/a", false, false},
        {"example_com/a", false, false},
        {n63, true, true},
        {n64, false, false},
        {k63, true, false},
        {k64, false, false},
        {longprefix, false, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(kite_is_qualified_name(cases[i].s), cases[i].qname, "qname %s", cases[i].s);
        cr_assert_eq(kite_is_label_value(cases[i].s), cases[i].value, "value %s", cases[i].s);
    }
    const char *m[KITE_NAME_ERRS_MAX];
    cr_assert_eq(kite_qualified_name_errs("", m), 2);
    cr_assert_str_eq(m[0], "name part must be non-empty");
    cr_assert_eq(kite_qualified_name_errs("/", m), 3);
    cr_assert_str_eq(m[0], "prefix part must be non-empty");
    cr_assert_eq(kite_qualified_name_errs(longprefix, m), 1);
    cr_assert_str_eq(m[0], "prefix part must be no more than 253 characters");
    cr_assert_eq(kite_qualified_name_errs(k64, m), 1);
    cr_assert_str_eq(m[0], "name part must be no more than 63 characters");
    cr_assert_eq(kite_label_value_errs(n64, m), 1);
    cr_assert_str_eq(m[0], "must be no more than 63 characters");
    cr_assert_eq(kite_label_value_errs("-", m), 1);
    free(n63), free(n64), free(p254);
}

struct want {
    const char *reason, *field, *message;
};

static void check_meta(const char *json, bool namespaced, int rule, const struct want *want, size_t n) {
    json_object *meta = json_tokener_parse(json);
    cr_assert(meta || kite_streq(json, "null"), "bad test json %s", json);
    struct kite_causes c = {0};
    kite_validate_object_meta(meta, namespaced, rule, &c);
    cr_assert_eq(c.n, n, "%s: got %zu causes (first: %s)", json, c.n, c.n ? c.v[0].message : "");
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(c.v[i].reason, want[i].reason, "%s #%zu", json, i);
        cr_assert_str_eq(c.v[i].field, want[i].field, "%s #%zu", json, i);
        cr_assert_str_eq(c.v[i].message, want[i].message, "%s #%zu", json, i);
    }
    kite_causes_release(&c);
    cr_assert_eq(c.n, 0);
    json_object_put(meta);
}
#define CHECK(json, ns, rule, ...)                                                        \
    do {                                                                                  \
        static const struct want w_[] = {__VA_ARGS__};                                    \
        check_meta(json, ns, rule, w_, sizeof(w_) / sizeof(w_[0]) - 1);                   \
    } while (0)
#define END {NULL, NULL, NULL}

Test(validation, object_meta_ok) {
    CHECK("{\"name\":\"worker-1\",\"labels\":{\"kubernetes.io/hostname\":\"worker-1\",\"node-role.kubernetes.io/worker\":\"\"},"
          "\"annotations\":{\"Node.Alpha.Kubernetes.io/TTL\":\"0\"},\"finalizers\":[\"kubernetes\",\"example.com/x\"]}",
          false, 0, END);
    CHECK("{\"name\":\"web\",\"namespace\":\"default\"}", true, 0, END);
    CHECK("{\"generateName\":\"web-\",\"namespace\":\"default\"}", true, 1,
          {"FieldValueRequired", "metadata.name", "Required value: name or generateName is required"}, END);
}

Test(validation, object_meta_errors) {
    CHECK("{\"name\":\"Worker_1\"}", false, 0,
          {"FieldValueInvalid", "metadata.name", "Invalid value: \"Worker_1\": " SUBDOMAIN_MSG}, END);
    CHECK("{\"name\":\"a.b\"}", false, 1, {"FieldValueInvalid", "metadata.name", "Invalid value: \"a.b\": must not contain dots"},
          END);
    CHECK("{}", false, 0, {"FieldValueRequired", "metadata.name", "Required value: name or generateName is required"}, END);
    CHECK("null", false, 0, {"FieldValueRequired", "metadata.name", "Required value: name or generateName is required"}, END);
    CHECK("{\"name\":\"x\"}", true, 0, {"FieldValueRequired", "metadata.namespace", "Required value"}, END);
    CHECK("{\"name\":\"x\",\"namespace\":\"ns\"}", false, 0,
          {"FieldValueForbidden", "metadata.namespace", "Forbidden: not allowed on this type"}, END);
    CHECK("{\"name\":\"x\",\"namespace\":\"Bad.NS\"}", true, 0,
          {"FieldValueInvalid", "metadata.namespace", "Invalid value: \"Bad.NS\": " LABEL_MSG}, END);
    CHECK("{\"name\":\"x\",\"generateName\":\"X-\"}", false, 0,
          {"FieldValueInvalid", "metadata.generateName", "Invalid value: \"X-\": " SUBDOMAIN_MSG}, END);
    CHECK("{\"name\":\"x\",\"labels\":{\"a\":\"b c\"}}", false, 0,
          {"FieldValueInvalid", "metadata.labels",
           "Invalid value: \"b c\": a valid label must be an empty string or consist of alphanumeric characters, '-', "
           "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
           "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"},
          END);
    CHECK("{\"name\":\"x\",\"labels\":{\"-a\":\"ok\"}}", false, 0,
          {"FieldValueInvalid", "metadata.labels",
           "Invalid value: \"-a\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
           "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
           "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
          END);
    CHECK("{\"name\":\"x\",\"labels\":{\"a\":1}}", false, 0,
          {"FieldValueInvalid", "metadata.labels", "Invalid value: int: value of key \"a\" must be a string"}, END);
    CHECK("{\"name\":\"x\",\"labels\":[]}", false, 0,
          {"FieldValueInvalid", "metadata.labels", "Invalid value: array: must be a map of string keys to string values"}, END);
    CHECK("{\"name\":\"x\",\"annotations\":{\"a/b/c\":\"\"}}", false, 0,
          {"FieldValueInvalid", "metadata.annotations",
           "Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
           "must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
           "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
           "(e.g. 'example.com/MyName')"},
          END);
    CHECK("{\"name\":\"x\",\"finalizers\":[\"orphan\",\"foregroundDeletion\"]}", false, 0,
          {"FieldValueInvalid", "metadata.finalizers",
           "Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"},
          END);
    CHECK("{\"name\":\"x\",\"finalizers\":[\"a b\"]}", false, 0,
          {"FieldValueInvalid", "metadata.finalizers",
           "Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
           "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
           "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
          END);
    CHECK("{\"name\":\"x\",\"generation\":-1}", false, 0,
          {"FieldValueInvalid", "metadata.generation", "Invalid value: -1: must be greater than or equal to 0"}, END);
    CHECK("{\"name\":\"x\\\"y\"}", false, 0,
          {"FieldValueInvalid", "metadata.name", "Invalid value: \"x\\\"y\": " SUBDOMAIN_MSG}, END);
}

Test(validation, annotations_total_size) {
    /* exactly at the limit passes, one byte over fails */
    size_t limit = KITE_ANNOTATIONS_TOTAL_MAX;
    for (int over = 0; over <= 1; over++) {
        char *v = repeat('v', limit - 1 + (size_t)over);
        json_object *meta = json_object_new_object();
        json_object_object_add(meta, "name", json_object_new_string("x"));
        json_object *ann = json_object_new_object();
        json_object_object_add(ann, "k", json_object_new_string(v));
        json_object_object_add(meta, "annotations", ann);
        struct kite_causes c = {0};
        kite_validate_object_meta(meta, false, 0, &c);
        cr_assert_eq(c.n, (size_t)over);
        if (over) {
            cr_assert_str_eq(c.v[0].reason, "FieldValueTooLong");
            cr_assert_str_eq(c.v[0].field, "metadata.annotations");
            cr_assert_str_eq(c.v[0].message, "Too long: may not be more than 262144 bytes");
        }
        kite_causes_release(&c);
        json_object_put(meta);
        free(v);
    }
}

Test(validation, causes_summary) {
    struct kite_causes c = {0};
    char *s = kite_causes_summary(&c);
    cr_assert_str_eq(s, "");
    free(s);
    kite_causes_add(&c, "FieldValueRequired", "metadata.name", "Required value: %s", "name or generateName is required");
    s = kite_causes_summary(&c);
    cr_assert_str_eq(s, "metadata.name: Required value: name or generateName is required");
    free(s);
    const char *msgs[] = {"m1", "m2"};
    kite_causes_add_invalid(&c, "spec.x", "v\n", msgs, 2);
    cr_assert_eq(c.n, 3);
    s = kite_causes_summary(&c);
    cr_assert_str_eq(s, "[metadata.name: Required value: name or generateName is required, "
                        "spec.x: Invalid value: \"v\\n\": m1, spec.x: Invalid value: \"v\\n\": m2]");
    free(s);
    for (int i = 0; i < 20; i++) kite_causes_add(&c, "FieldValueInvalid", "f", "%d", i);
    cr_assert_eq(c.n, 23);
    cr_assert_str_eq(c.v[22].message, "19");
    kite_causes_release(&c);
    kite_causes_release(&c); /* idempotent */
}
