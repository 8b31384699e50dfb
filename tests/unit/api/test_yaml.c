#include <criterion/criterion.h>

#include "api/yaml.h"

/* What kite answers to Accept: application/yaml reads back as the same tree, with keys sorted
 * and strings that look like other types quoted (a reader must not turn "true" into a bool). */
Test(yaml, emit_round_trips_and_quotes) {
    const char *json = "{\"metadata\":{\"name\":\"n\",\"labels\":{\"b\":\"true\",\"a\":\"123\",\"c\":\"\",\"d\":\"yes\","
                       "\"e\":\"1.5\",\"f\":\"null\",\"g\":\"x: y\",\"h\":\"two\\nlines\",\"i\":\"0x1F\",\"j\":\"é\",\"k\":\"2026-12-05T05:12:08Z\"}},"
                       "\"spec\":{\"unschedulable\":true,\"n\":-42,\"f\":2.5,\"z\":null,\"empty\":{},\"list\":[],"
                       "\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]}}";
    json_object *o = json_tokener_parse(json);
    struct kite_buf b = {0};
    cr_assert_eq(kite_yaml_emit(o, &b), 0);
    kite_buf_putc(&b, 0);
    cr_assert(strstr(b.p, "metadata:\n") == b.p, "%s", b.p); /* sorted: metadata before spec */
    cr_assert(strstr(b.p, "a: \"123\"") && strstr(b.p, "b: \"true\"") && strstr(b.p, "d: \"yes\""), "%s", b.p);
    cr_assert(strstr(b.p, "unschedulable: true"), "%s", b.p);
    cr_assert(strstr(b.p, "k: \"2026-12-05T05:12:08Z\""), "%s", b.p); /* times quoted, as kubectl shows them */
    json_object *back = NULL;
    char *err = NULL;
    cr_assert_eq(kite_yaml_parse(b.p, b.len - 1, &back, &err), 0, "%s", err);
    /* the parser reads floats as strings (it serves config files); compare the rest */
    json_object_object_del(json_object_object_get(o, "spec"), "f");
    json_object_object_del(json_object_object_get(back, "spec"), "f");
    cr_assert(json_object_equal(o, back), "%s\n%s", b.p, json_object_to_json_string(back));
    json_object_put(o);
    json_object_put(back);
    kite_buf_release(&b);
}

/* ---- hostile documents: each stops at its budget while libyaml reads, the counters show the
 * work stopped early (the timings are in BENCHMARKS.md, "Hostile YAML") ------------------------ */

static int parse(const char *s, size_t n, json_object **o, char **err, struct kite_yaml_info *info) {
    *o = NULL;
    *err = NULL;
    return kite_yaml_parse_ex(s, n, o, err, info);
}

/* one 8 KiB scalar reached through 99^3 aliases (~8 GB expanded): refused after about
 * KITE_YAML_EXPANSION_MIN bytes of copies, not after the node budget */
Test(yaml, alias_bomb_stops_at_expansion_budget) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "kind: SelfSubjectAccessReview\nspec:\n  a: &a \"");
    for (int i = 0; i < 8192; i++) kite_buf_putc(&b, 'x');
    kite_buf_puts(&b, "\"\n");
    for (char c = 'b'; c <= 'd'; c++) {
        kite_buf_printf(&b, "  %c: &%c [", c, c);
        for (int i = 0; i < 99; i++) kite_buf_printf(&b, "%s*%c", i ? "," : "", c - 1);
        kite_buf_puts(&b, "]\n");
    }
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), -EFBIG);
    cr_assert(err && strstr(err, "aliases expand the document by more than 1048576 bytes"), "%s", err);
    cr_assert_null(o);
    cr_assert_leq(info.expanded, KITE_YAML_EXPANSION_MIN + 8192 * 99 + 1000);
    cr_assert_lt(info.nodes, 1000, "%zu", info.nodes); /* the copies stopped long before the node budget */
    free(err);
    kite_buf_release(&b);
}

/* the expansion budget grows with the document: a large document may repeat its own size */
Test(yaml, aliases_within_budget_expand) {
    const char *s = "a: &a {x: \"0123456789\", y: [1, 2]}\nb: [*a, *a, *a]\nc: *a\n";
    json_object *o;
    char *err;
    cr_assert_eq(parse(s, strlen(s), &o, &err, NULL), 0, "%s", err);
    json_object *b = json_object_object_get(o, "b");
    cr_assert_eq(json_object_array_length(b), 3);
    cr_assert(json_object_equal(json_object_array_get_idx(b, 2), json_object_object_get(o, "a")));
    /* copies, not shared nodes: callers edit the tree */
    cr_assert_neq(json_object_array_get_idx(b, 0), json_object_object_get(o, "c"));
    json_object_put(o);
}

/* 200k-deep [ (400 KB): refused at level 65, with libyaml's look-ahead the only work past it */
Test(yaml, deep_nesting_stops_at_the_limit) {
    size_t n = 200000;
    char *s = kite_malloc(2 * n);
    memset(s, '[', n);
    memset(s + n, ']', n);
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(s, 2 * n, &o, &err, &info), -EINVAL);
    cr_assert(err && strstr(err, "nested deeper than 64 levels"), "%s", err);
    cr_assert_leq(info.events, KITE_YAML_MAX_DEPTH + 3, "%zu events", info.events);
    free(err);
    /* the same for mappings, and 64 levels still parse */
    struct kite_buf b = {0};
    for (int i = 0; i < 70; i++) kite_buf_puts(&b, "{a: ");
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), -EINVAL);
    cr_assert_leq(info.events, 2 * KITE_YAML_MAX_DEPTH + 3); /* a start and a key per level */
    free(err);
    b.len = 0;
    for (int i = 0; i < KITE_YAML_MAX_DEPTH; i++) kite_buf_putc(&b, '[');
    for (int i = 0; i < KITE_YAML_MAX_DEPTH; i++) kite_buf_putc(&b, ']');
    cr_assert_eq(parse(b.p, b.len, &o, &err, NULL), 0, "%s", err);
    json_object_put(o);
    /* an alias may not carry a nested anchor past the limit either */
    b.len = 0;
    kite_buf_puts(&b, "a: &a ");
    for (int i = 0; i < 40; i++) kite_buf_putc(&b, '[');
    for (int i = 0; i < 40; i++) kite_buf_putc(&b, ']');
    kite_buf_puts(&b, "\nb: ");
    for (int i = 0; i < 30; i++) kite_buf_putc(&b, '[');
    kite_buf_puts(&b, "*a");
    for (int i = 0; i < 30; i++) kite_buf_putc(&b, ']');
    cr_assert_eq(parse(b.p, b.len, &o, &err, NULL), -EINVAL);
    cr_assert(err && strstr(err, "nested deeper than 64 levels"), "%s", err);
    free(err);
    kite_buf_release(&b);
    free(s);
}

/* 100k anchors: refused at the anchor budget, the rest never read */
Test(yaml, anchors_stop_at_the_budget) {
    struct kite_buf b = {0};
    for (int i = 0; i < 100000; i++) kite_buf_printf(&b, "k%d: &a%d v\n", i, i);
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), -EFBIG);
    cr_assert(err && strstr(err, "more than 10000 anchors"), "%s", err);
    cr_assert_eq(info.anchors, KITE_YAML_MAX_ANCHORS + 1);
    cr_assert_lt(info.events, 2 * KITE_YAML_MAX_ANCHORS + 10, "%zu", info.events);
    free(err);
    /* one anchor redefined any number of times is one anchor */
    b.len = 0;
    for (int i = 0; i < 20000; i++) kite_buf_printf(&b, "k%d: &a v%d\n", i, i);
    kite_buf_puts(&b, "last: *a\n");
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), 0, "%s", err);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(o, "last")), "v19999");
    json_object_put(o);
    kite_buf_release(&b);
}

/* aliases of a small node to the byte limit: stopped once they add the document's size */
Test(yaml, aliases_of_small_nodes_stop_at_budget) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "a: &a [1, 2, 3, 4, 5, 6, 7]\nl: [");
    while (b.len < (3u << 20)) kite_buf_puts(&b, "*a,");
    kite_buf_puts(&b, "*a]\n");
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), -EFBIG);
    cr_assert(err && strstr(err, "aliases expand the document by more than"), "%s", err);
    cr_assert_leq(info.expanded, b.len + 64);
    cr_assert_lt(info.events, b.len / 3 / 5, "%zu", info.events); /* most of the aliases never read */
    free(err);
    kite_buf_release(&b);
}

/* nodes without aliases: the node budget */
Test(yaml, nodes_stop_at_budget) {
    struct kite_buf b = {0};
    kite_buf_putc(&b, '[');
    while (b.len < (3u << 20)) kite_buf_puts(&b, "1,");
    kite_buf_puts(&b, "1]");
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), -EFBIG);
    cr_assert(err && strstr(err, "larger than 1000000 nodes"), "%s", err);
    cr_assert_eq(info.nodes, KITE_YAML_MAX_NODES + 1);
    free(err);
    kite_buf_release(&b);
}

/* %TAG directives cost libyaml quadratic time before the first event: counted first */
Test(yaml, directives_bounded) {
    struct kite_buf b = {0};
    for (int i = 0; i < 100000; i++) kite_buf_printf(&b, "%%TAG !t%d! tag:x,%d:\n", i, i);
    kite_buf_puts(&b, "---\na: 1\n");
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), -EINVAL);
    cr_assert(err && strstr(err, "more than 64 directives"), "%s", err);
    cr_assert_eq(info.events, 0);
    free(err);
    const char *ok = "%YAML 1.1\n%TAG !e! tag:example.com,2000:\n---\na: !e!x 1\n";
    cr_assert_eq(parse(ok, strlen(ok), &o, &err, NULL), 0, "%s", err);
    json_object_put(o);
    kite_buf_release(&b);
}

/* "team\0-evil" would be stored as "team" (C strings): refused, in keys and in values */
Test(yaml, nul_in_strings_refused) {
    const char *cases[] = {"metadata:\n  labels:\n    \"team\\0-evil\": x\n", "a: \"x\\0y\"\n", "a: [\"\\0\"]\n",
                           "\"\\x00\": 1\n"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *o;
        char *err;
        cr_assert_eq(parse(cases[i], strlen(cases[i]), &o, &err, NULL), -EINVAL, "%s", cases[i]);
        cr_assert(err && strstr(err, "NUL character"), "%s", err);
        free(err);
    }
}

/* a repeated key: the last value wins; the repetition is reported in yaml.v2's strict words */
Test(yaml, duplicate_keys_reported) {
    /* the line is the repeated key's, also when its value spans lines */
    const char *s = "a: 1\nm:\n  x: 1\n  y: 2\n  x: 3\na:\n  - 2\nl: [{k: 1, k: 2}]\n";
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(s, strlen(s), &o, &err, &info), 0, "%s", err);
    cr_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                     "{\"a\":[2],\"m\":{\"x\":3,\"y\":2},\"l\":[{\"k\":2}]}");
    cr_assert_str_eq(info.duplicates, "yaml: unmarshal errors:\n  line 5: key \"x\" already set in map\n"
                                      "  line 6: key \"a\" already set in map\n  line 8: key \"k\" already set in map");
    free(info.duplicates);
    json_object_put(o);
    cr_assert_eq(parse("a: 1\nb: 1\n", 10, &o, &err, &info), 0);
    cr_assert_null(info.duplicates);
    json_object_put(o);
}

/* the shapes a body is made of in normal use read in one pass, each event once */
Test(yaml, work_is_linear) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "items: [");
    for (int i = 0; i < 20000; i++) kite_buf_printf(&b, "{k: %d, v: x},", i);
    kite_buf_puts(&b, "{}]\n---\nnext: 1\n");
    json_object *o;
    char *err;
    struct kite_yaml_info info;
    cr_assert_eq(parse(b.p, b.len, &o, &err, &info), 0, "%s", err);
    cr_assert_eq(json_object_array_length(json_object_object_get(o, "items")), 20001);
    cr_assert_null(json_object_object_get(o, "next")); /* the first document only */
    /* stream, document, mapping, key, sequence; 6 per item; {}; the three ends */
    cr_assert_eq(info.events, 5 + 20000 * 6 + 2 + 3, "%zu", info.events);
    json_object_put(o);
    kite_buf_release(&b);
}
