/* Members out of JSON text without a full parse (json/scan.h): the text cut gives what a full
 * parse followed by the same cut gives, and says "cannot tell" (NULL, -1) where the text could
 * hide a member behind an escape or is not well formed. */
#include "helpers.h"

#include <string.h>

#include "base/buf.h"
#include "json/scan.h"

static const char *const LEASE[] = {"metadata.name", "metadata.namespace", "metadata.resourceVersion", "spec.renewTime",
                                    NULL};

/* kite_json_project(text) == kite_obj_project(parse(text)) */
static void same_cut(const char *text, const char *const *paths, const char *want) {
    json_object *cut = kite_json_project(text, strlen(text), paths);
    cr_assert_not_null(cut, "the scan could not follow %s", text);
    assert_json(cut, want, "text cut of %s", text);
    json_object *whole = J(text), *tree_cut = kite_obj_project(whole, paths);
    assert_json(tree_cut, want, "tree cut of %s", text);
    json_object_put(whole);
    json_object_put(tree_cut);
    json_object_put(cut);
}

Test(json_scan, a_lease_cut_to_what_the_lifecycle_controller_reads) {
    same_cut("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"n1\","
             "\"namespace\":\"kube-node-lease\",\"uid\":\"u\",\"resourceVersion\":\"42\",\"ownerReferences\":[{\"kind\":"
             "\"Node\",\"name\":\"n1\"}],\"managedFields\":[{\"fieldsV1\":{\"f:spec\":{\"f:renewTime\":{}}}}]},\"spec\":"
             "{\"holderIdentity\":\"n1\",\"leaseDurationSeconds\":40,\"renewTime\":\"2026-12-06T16:36:54.138224Z\"}}",
             LEASE,
             "{\"metadata\":{\"name\":\"n1\",\"namespace\":\"kube-node-lease\",\"resourceVersion\":\"42\"},"
             "\"spec\":{\"renewTime\":\"2026-12-06T16:36:54.138224Z\"}}");
}

Test(json_scan, whitespace_nesting_strings_with_braces_and_duplicates) {
    /* a "}" and an escaped quote inside strings do not end anything; the last of two equal
     * members wins, as with the parser; a member the path goes through that is null or absent
     * leaves the path out; numbers, objects and arrays are kept whole */
    same_cut(" { \"metadata\" : { \"name\" : \"a}\\\"b\" , \"labels\":{\"x\":\"{[\"} } ,\n"
             "\"spec\":{\"renewTime\":\"t1\",\"renewTime\":\"t2\",\"n\":-12.5e3,\"list\":[1,{\"a\":[]},\"]\"]},"
             "\"status\":null }",
             (const char *const[]){"metadata.name", "metadata.labels", "spec.renewTime", "spec.n", "spec.list",
                                   "status.phase", "metadata.uid", NULL},
             "{\"metadata\":{\"name\":\"a}\\\"b\",\"labels\":{\"x\":\"{[\"}},\"spec\":{\"renewTime\":\"t2\","
             "\"n\":-12.5e3,\"list\":[1,{\"a\":[]},\"]\"]}}");
    same_cut("{}", LEASE, "{}");
    same_cut("{\"metadata\":null,\"spec\":{\"renewTime\":null}}", LEASE, "{}");
}

Test(json_scan, what_the_scan_cannot_follow_is_left_to_the_parser) {
    const char *hidden[] = {
        "{\"metadata\":{\"n\\u0061me\":\"a\"}}",    /* a member name with an escape could be "name" */
        "{\"metadata\":{\"name\":\"a\"}",           /* cut short */
        "[{\"metadata\":{}}]",                      /* not an object */
        "{\"metadata\":{\"name\":\"a\",}}",         /* a trailing comma */
        "{\"metadata\" {\"name\":\"a\"}}",          /* no colon */
        "{\"metadata\":{\"name\":tru}}",            /* a value that does not parse */
    };
    for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++)
        cr_assert_null(kite_json_project(hidden[i], strlen(hidden[i]), LEASE), "%s", hidden[i]);
    const char *v;
    size_t n;
    cr_assert_eq(kite_json_member("{\"a\":1,\"b\":\"x\"}", 15, "b", &v, &n), 1);
    cr_assert_eq(n, 3);
    cr_assert_eq(memcmp(v, "\"x\"", 3), 0);
    cr_assert_eq(kite_json_member("{\"a\":1}", 7, "b", &v, &n), 0);
    cr_assert_eq(kite_json_member("{\"\\u0062\":1}", 12, "b", &v, &n), -1);
}

Test(json_scan, an_escaped_value_is_unescaped_as_the_parser_does) {
    same_cut("{\"metadata\":{\"name\":\"a\\u00e9\\n\"}}", LEASE, "{\"metadata\":{\"name\":\"a\\u00e9\\n\"}}");
}

Test(json_scan, several_members_in_one_walk_answer_as_one_by_one) {
    const char *text = "{\"type\":\"MODIFIED\",\"object\":{\"a\":\"}\\\\\"},\"type\":\"ADDED\"}", *ret[3];
    size_t len[3];
    cr_assert_eq(kite_json_members(text, strlen(text), 3, (const char *const[]){"type", "object", "none"}, ret, len), 0);
    cr_assert_eq(len[0], 7); /* the last "type" */
    cr_assert_eq(memcmp(ret[0], "\"ADDED\"", 7), 0);
    cr_assert_eq(len[1], 11);
    cr_assert_eq(memcmp(ret[1], "{\"a\":\"}\\\\\"}", 11), 0);
    cr_assert_null(ret[2]);
    cr_assert_eq(kite_json_members("{\"ty\\u0070e\":1}", 15, 1, (const char *const[]){"type"}, ret, len), -1);
    cr_assert_eq(kite_json_members("{\"type\":1", 9, 1, (const char *const[]){"type"}, ret, len), -1);
}

Test(json_scan, backslash_runs_before_a_quote) {
    /* an even run of backslashes before a quote ends the string, an odd one escapes it */
    same_cut("{\"metadata\":{\"uid\":\"\\\\\",\"name\":\"x\\\\\\\"}\\\\\\\\\"}}", LEASE,
             "{\"metadata\":{\"name\":\"x\\\\\\\"}\\\\\\\\\"}}");
    cr_assert_null(kite_json_project("{\"metadata\":{\"name\":\"x\\\"}}", 26, LEASE)); /* never closed */
}

Test(json_scan, what_the_walk_reaches_decides) {
    /* a member the path goes through that is not an object: cannot tell; a segment too long:
     * cannot tell once reached; no paths: nothing read */
    cr_assert_null(kite_json_project("{\"metadata\":\"x\"}", 16, LEASE));
    cr_assert_null(kite_json_project("{\"metadata\":[{}]}", 17, LEASE));
    char path[200];
    memset(path, 'a', 150);
    strcpy(path + 150, ".b");
    const char *const long_first[] = {path, NULL}, *const long_second[] = {"m", path, NULL};
    cr_assert_null(kite_json_project("{}", 2, long_first));
    json_object *o = kite_json_project("{}", 2, (const char *const[]){"m.x", NULL});
    assert_json(o, "{}", "absent");
    json_object_put(o);
    cr_assert_null(kite_json_project("{}", 2, long_second));
    o = kite_json_project("not json", 8, (const char *const[]){NULL});
    assert_json(o, "{}", "no paths");
    json_object_put(o);
    /* the last of two equal members is the one walked into, the first is only skipped */
    const char *first_broken = "{\"metadata\":{\"name\" 1},\"metadata\":{\"name\":\"b\"}}",
               *last_broken = "{\"metadata\":{\"name\":\"b\"},\"metadata\":{\"name\" 1}}";
    o = kite_json_project(first_broken, strlen(first_broken), LEASE);
    assert_json(o, "{\"metadata\":{\"name\":\"b\"}}", "last wins");
    json_object_put(o);
    cr_assert_null(kite_json_project(last_broken, strlen(last_broken), LEASE));
}

/* ---- the one-walk scan against the path-by-path one it replaced (scan_reference.h) ---- */
#include "scan_reference.h"

struct rng {
    uint64_t s;
};
static uint32_t rnd(struct rng *r, uint32_t n) {
    r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
    return (uint32_t)((r->s >> 11) % n);
}

static const char *const NAMES[] = {"metadata", "name", "spec", "renewTime", "a", "b", "", "n\\u0061me", "x\\\"y"};
static const char *const PATH_NAMES[] = {"metadata", "name", "spec", "renewTime", "a", "b", "", "x\"y", "c"};

static void gen_string(struct rng *r, struct kite_buf *b) {
    static const char *const bits[] = {"a", "}", "{", "]", "[", ",", ":", "\\\"", "\\\\", "\\n", "\\u00e9",
                                       "\xc3\xa9", "t", "2026-12-06T16:36:54Z", " ", "\\/", "\\ud800"};
    kite_buf_putc(b, '"');
    for (uint32_t k = rnd(r, 5); k > 0; k--) kite_buf_puts(b, bits[rnd(r, KITE_ARRAY_SIZE(bits))]);
    kite_buf_putc(b, '"');
}

static void ws(struct rng *r, struct kite_buf *b) {
    static const char *const spaces[] = {"", "", "", " ", "\n", " \t\r\n "};
    kite_buf_puts(b, spaces[rnd(r, KITE_ARRAY_SIZE(spaces))]);
}

static void gen_value(struct rng *r, struct kite_buf *b, int depth) {
    static const char *const scalars[] = {"null", "true", "false", "0", "-12.5e3", "42", "1e400", "123456789012345678901",
                                          "nul", "0x1"};
    uint32_t kind = rnd(r, depth > 3 ? 3 : 6);
    if (kind == 0) {
        kite_buf_puts(b, scalars[rnd(r, KITE_ARRAY_SIZE(scalars))]);
    } else if (kind <= 2) {
        gen_string(r, b);
    } else if (kind == 3) {
        kite_buf_putc(b, '[');
        for (uint32_t k = rnd(r, 4), i = 0; i < k; i++) {
            if (i) kite_buf_putc(b, ',');
            ws(r, b);
            gen_value(r, b, depth + 1);
            ws(r, b);
        }
        kite_buf_putc(b, ']');
    } else {
        kite_buf_putc(b, '{');
        for (uint32_t k = rnd(r, 5), i = 0; i < k; i++) {
            if (i) kite_buf_putc(b, ',');
            ws(r, b);
            kite_buf_printf(b, "\"%s\"", NAMES[rnd(r, KITE_ARRAY_SIZE(NAMES))]);
            ws(r, b);
            kite_buf_putc(b, ':');
            ws(r, b);
            gen_value(r, b, depth + 1);
            ws(r, b);
        }
        kite_buf_putc(b, '}');
    }
}

/* Breaks the text the ways a scan must notice (or must not be fooled by): cut short, a byte
 * that nests, quotes, escapes or separates put in, taken out or swapped for another. */
static void mutate(struct rng *r, struct kite_buf *b) {
    static const char bytes[] = "{}[]\",:\\ n1";
    switch (rnd(r, 4)) {
    case 0:
        b->len = rnd(r, (uint32_t)b->len + 1);
        break;
    case 1:
        if (b->len) b->p[rnd(r, (uint32_t)b->len)] = bytes[rnd(r, sizeof bytes - 1)];
        break;
    case 2:
        if (b->len) {
            size_t at = rnd(r, (uint32_t)b->len);
            memmove(b->p + at, b->p + at + 1, b->len - at - 1);
            b->len--;
        }
        break;
    default: {
        kite_buf_putc(b, 0);
        b->len--;
        size_t at = rnd(r, (uint32_t)b->len + 1);
        memmove(b->p + at + 1, b->p + at, b->len - at);
        b->p[at] = bytes[rnd(r, sizeof bytes - 1)];
        b->len++;
    }
    }
}

static char *gen_path(struct rng *r) {
    struct kite_buf p = {0};
    for (uint32_t k = 1 + rnd(r, 3), i = 0; i < k; i++) {
        if (i) kite_buf_putc(&p, '.');
        if (rnd(r, 200) == 0) {
            for (int j = 0; j < 130; j++) kite_buf_putc(&p, 'a');
        } else {
            kite_buf_puts(&p, PATH_NAMES[rnd(r, KITE_ARRAY_SIZE(PATH_NAMES))]);
        }
    }
    return kite_buf_detach(&p, NULL);
}

static const char *plain(json_object *o) { return o ? S(o) : "(cannot tell)"; }

Test(json_scan, the_one_walk_scan_answers_as_the_path_by_path_one, .timeout = 120) {
    struct rng r = {0x9e3779b97f4a7c15ull};
    size_t told = 0, cannot = 0;
    for (int round = 0; round < 30000; round++) {
        struct kite_buf b = {0};
        ws(&r, &b);
        if (rnd(&r, 20) == 0) gen_value(&r, &b, 0);
        else {
            kite_buf_putc(&b, '{'); /* an object whose members the paths find often */
            for (uint32_t k = rnd(&r, 6), i = 0; i < k; i++) {
                if (i) kite_buf_putc(&b, ',');
                kite_buf_printf(&b, "\"%s\":", NAMES[rnd(&r, 5)]);
                ws(&r, &b);
                gen_value(&r, &b, 1);
            }
            kite_buf_putc(&b, '}');
        }
        ws(&r, &b);
        for (uint32_t m = rnd(&r, 4) == 0 ? 1 + rnd(&r, 3) : 0; m > 0; m--) mutate(&r, &b);
        char *paths[6] = {0};
        uint32_t np = rnd(&r, 6);
        for (uint32_t k = 0; k < np; k++) paths[k] = gen_path(&r);
        /* a copy with nothing after it, so a read past the end shows under ASan */
        char *text = kite_malloc(b.len ? b.len : 1);
        memcpy(text, b.p, b.len);
        json_object *want = ref_json_project(text, b.len, (const char *const *)paths),
                    *got = kite_json_project(text, b.len, (const char *const *)paths);
        char *want_s = kite_strdup(plain(want));
        cr_assert_str_eq(plain(got), want_s, "text %.*s", (int)b.len, text);
        want ? told++ : cannot++;
        for (int k = 0; k < 3; k++) {
            const char *name = PATH_NAMES[rnd(&r, KITE_ARRAY_SIZE(PATH_NAMES))], *v1 = NULL, *v2 = NULL;
            size_t n1 = 0, n2 = 0;
            int r1 = ref_json_member(text, b.len, name, &v1, &n1), r2 = kite_json_member(text, b.len, name, &v2, &n2);
            cr_assert_eq(r2, r1, "member %s of %.*s", name, (int)b.len, text);
            if (r1 == 1) cr_assert(v1 == v2 && n1 == n2, "member %s of %.*s", name, (int)b.len, text);
            const char *ret[1];
            size_t len[1];
            int r3 = kite_json_members(text, b.len, 1, &name, ret, len);
            cr_assert_eq(r3, r1 < 0 ? -1 : 0);
            if (r1 >= 0) cr_assert(r1 ? ret[0] == v1 && len[0] == n1 : !ret[0]);
        }
        json_object_put(want);
        json_object_put(got);
        free(want_s);
        free(text);
        for (uint32_t k = 0; k < np; k++) free(paths[k]);
        kite_buf_release(&b);
    }
    /* the generator reaches both answers often */
    cr_assert_gt(told, 5000);
    cr_assert_gt(cannot, 5000);
}

/* Cases where walking into a member as it is met would end it elsewhere than skipping it did:
 * a number or literal holding a bracket or a quote. The cut follows the skip, as before. */
Test(json_scan, a_member_walked_into_ends_where_a_skip_would_end_it) {
    const char *texts[] = {
        "{\"metadata\":{\"uid\":1{,\"name\":\"a\"}}",     /* the skip eats the outer brace: cannot tell */
        "{\"metadata\":{\"uid\":1{,\"name\":\"a\"}}}",    /* the skip ends at the second brace */
        "{\"metadata\":{\"uid\":1\",\"name\":\"a\"}\"}}", /* a quote in a literal opens a string for the skip */
        "{\"metadata\":{\"uid\":t[,\"name\":\"a\"}]}",
        "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"renewTime\":\"t\",\"x\":[}}", /* brackets of either kind */
    };
    for (size_t k = 0; k < KITE_ARRAY_SIZE(texts); k++) {
        json_object *want = ref_json_project(texts[k], strlen(texts[k]), LEASE),
                    *got = kite_json_project(texts[k], strlen(texts[k]), LEASE);
        char *want_s = kite_strdup(plain(want));
        cr_assert_str_eq(plain(got), want_s, "%s", texts[k]);
        free(want_s);
        json_object_put(want);
        json_object_put(got);
    }
    cr_assert_null(kite_json_project(texts[0], strlen(texts[0]), LEASE));
    json_object *o = kite_json_project(texts[1], strlen(texts[1]), LEASE);
    assert_json(o, "{\"metadata\":{\"name\":\"a\"}}", "%s", texts[1]);
    json_object_put(o);
}

/* the copying cut: the same members as kite_obj_project, and nothing shared with the object
 * (the workload controllers keep it while the informer frees or changes the original) */
Test(json_scan, a_copying_cut_shares_nothing) {
    json_object *pod = J("{\"metadata\":{\"name\":\"p\",\"labels\":{\"app\":\"web\"},\"managedFields\":[{\"manager\":\"m\"}]},"
                         "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]},"
                         "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    static const char *const paths[] = {"metadata.name", "metadata.labels", "spec.nodeName", "status", "spec.hostname",
                                        NULL};
    json_object *cut = kite_obj_project_copy(pod, paths), *shared = kite_obj_project(pod, paths);
    const char *want = "{\"metadata\":{\"name\":\"p\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"nodeName\":\"n1\"},"
                       "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
    assert_json(cut, want, "copying cut");
    assert_json(shared, want, "sharing cut");
    cr_assert_neq(kite_obj_get(cut, "status"), kite_obj_get(pod, "status"));
    /* the original changed and dropped: the copy is as it was */
    json_object_object_add(kite_obj_get(kite_obj_get(pod, "metadata"), "labels"), "app", json_object_new_string("db"));
    json_object_object_add(kite_obj_get(pod, "status"), "phase", json_object_new_string("Failed"));
    json_object_put(pod);
    assert_json(cut, want, "copying cut after the original changed");
    json_object_put(shared);
    json_object_put(cut);
}

/* kite_json_next walks members and elements in order, as written; what is not well formed
 * (a comma too many or missing, no colon, cut short) stops it with -1. */
Test(json_scan, next_walks_members_and_elements_in_order) {
    const char *o = "{ \"a\" : 1 , \"b\":{\"c\":[1,2]},\"a\":\"x}\" }";
    size_t i = 1, kn, vn;
    const char *k, *v;
    cr_assert_eq(kite_json_next(o, strlen(o), &i, true, &k, &kn, &v, &vn), 1);
    cr_assert(kn == 1 && *k == 'a' && vn == 1 && *v == '1');
    cr_assert_eq(kite_json_next(o, strlen(o), &i, true, &k, &kn, &v, &vn), 1);
    cr_assert(kn == 1 && *k == 'b' && vn == 11 && memcmp(v, "{\"c\":[1,2]}", vn) == 0, "%.*s", (int)vn, v);
    cr_assert_eq(kite_json_next(o, strlen(o), &i, true, &k, &kn, &v, &vn), 1);
    cr_assert(kn == 1 && *k == 'a' && vn == 4 && memcmp(v, "\"x}\"", 4) == 0);
    cr_assert_eq(kite_json_next(o, strlen(o), &i, true, &k, &kn, &v, &vn), 0);
    cr_assert_eq(i, strlen(o));
    const char *a = "[ ]";
    i = 1;
    cr_assert_eq(kite_json_next(a, strlen(a), &i, false, NULL, NULL, &v, &vn), 0);
    a = "[1,\"2\"]";
    i = 1;
    cr_assert_eq(kite_json_next(a, strlen(a), &i, false, &k, &kn, &v, &vn), 1);
    cr_assert(k == NULL && vn == 1);
    cr_assert_eq(kite_json_next(a, strlen(a), &i, false, &k, &kn, &v, &vn), 1);
    cr_assert(vn == 3);
    cr_assert_eq(kite_json_next(a, strlen(a), &i, false, &k, &kn, &v, &vn), 0);
    static const char *const bad[] = {"{,\"a\":1}", "{\"a\":1,}", "{\"a\":1 \"b\":2}", "{\"a\" 1}", "{\"a\":1"};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        int r;
        i = 1;
        while ((r = kite_json_next(bad[b], strlen(bad[b]), &i, true, &k, &kn, &v, &vn)) == 1) {}
        cr_assert_eq(r, -1, "%s", bad[b]);
    }
}

Test(json_scan, array_only_finds_the_one_element) {
    const char *v;
    size_t vn;
    cr_assert_eq(kite_json_array_only(" [ {\"a\":[1]} ] ", 15, &v, &vn), 1);
    cr_assert(vn == 9 && memcmp(v, "{\"a\":[1]}", 9) == 0);
    cr_assert_eq(kite_json_array_only("[]", 2, &v, &vn), 0);
    cr_assert_eq(kite_json_array_only("[1,2]", 5, &v, &vn), 0);
    cr_assert_eq(kite_json_array_only("{}", 2, &v, &vn), -1);
    cr_assert_eq(kite_json_array_only("[1", 2, &v, &vn), -1);
    cr_assert_eq(kite_json_array_only("[1]x", 4, &v, &vn), -1);
}
