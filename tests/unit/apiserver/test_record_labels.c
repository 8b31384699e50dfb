/* record_labels / record_matches: a label selector judged on a stored object's labels alone,
 * without parsing (or caching) the whole object, and the same answers as the full parse. */
#include "apiserver/internal.h"
#include "api/selector.h"

#include <criterion/criterion.h>

static struct kite_record *rec(const char *json) {
    return kite_record_new("/registry/minions/n1", json, strlen(json), 1, 1, 1);
}

static struct kite_label_selector *sel(const char *s) {
    struct kite_label_selector *ls = NULL;
    char *err = NULL;
    cr_assert_eq(kite_label_selector_parse(s, &ls, &err), 0, "%s", err ? err : "");
    return ls;
}

/* record_matches answers as object_matches on the full parse, and leaves no parse behind */
static void same(const char *json, const char *selector, bool want) {
    const struct kite_resource *nodes = kite_registry_find("", "v1", "nodes");
    struct kite_label_selector *ls = sel(selector);
    struct kite_record *r = rec(json);
    cr_assert_eq(kite_apiserver_record_matches(nodes, r, ls, NULL), want, "%s ~ %s", json, selector);
    json_object *full = kite_apiserver_record_parse(r);
    cr_assert_eq(kite_apiserver_object_matches(nodes, full, ls, NULL), want, "full parse: %s ~ %s", json, selector);
    json_object_put(full);
    kite_record_unref(r);
    kite_label_selector_free(ls);
}

Test(kite_apiserver_record_labels, finds_the_labels_among_other_members) {
    json_object *l = NULL;
    struct kite_record *r = rec("{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n1\","
                                "\"annotations\":{\"a\":\"{\\\"labels\\\":{}}\"},\"labels\":{\"kite.dev/simulated\":\"true\","
                                "\"zone\":\"z1\"},\"uid\":\"u\"},\"status\":{\"images\":[{\"names\":[\"x\"]}]}}");
    cr_assert_eq(kite_apiserver_record_labels(r, &l), 0);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(l, "zone")), "z1");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(l, "kite.dev/simulated")), "true");
    cr_assert_null(kite_record_cache(r), "the object was not parsed whole");
    json_object_put(l);
    kite_record_unref(r);
}

Test(kite_apiserver_record_labels, none_and_the_last_of_duplicates) {
    json_object *l = (json_object *)1;
    struct kite_record *r = rec("{\"metadata\":{\"name\":\"n1\"},\"spec\":{}}");
    cr_assert_eq(kite_apiserver_record_labels(r, &l), 0);
    cr_assert_null(l);
    kite_record_unref(r);
    r = rec("{\"metadata\":{\"labels\":{\"a\":\"1\"},\"labels\":{\"a\":\"2\"}}}");
    cr_assert_eq(kite_apiserver_record_labels(r, &l), 0);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(l, "a")), "2");
    json_object_put(l);
    kite_record_unref(r);
}

Test(kite_apiserver_record_labels, refuses_what_a_scan_cannot_judge) {
    json_object *l = NULL;
    /* an escaped member name could spell "labels": the caller parses the whole object */
    struct kite_record *r = rec("{\"metadata\":{\"lab\\u0065ls\":{\"a\":\"1\"}}}");
    cr_assert_eq(kite_apiserver_record_labels(r, &l), -EINVAL);
    kite_record_unref(r);
    r = rec("{\"metadata\":{\"labels\":{\"a\":\"1\"");
    cr_assert_eq(kite_apiserver_record_labels(r, &l), -EINVAL);
    kite_record_unref(r);
    r = rec("[1,2]");
    cr_assert_eq(kite_apiserver_record_labels(r, &l), -EINVAL);
    kite_record_unref(r);
}

Test(kite_apiserver_record_labels, matches_as_the_full_parse) {
    const char *node = "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"kite.dev/simulated\":\"true\",\"zone\":\"z1\"}},"
                       "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
    same(node, "kite.dev/simulated=true", true);
    same(node, "kite.dev/simulated=true,zone!=z1", false);
    same(node, "zone in (z1,z2)", true);
    same(node, "!zone", false);
    same("{\"metadata\":{\"name\":\"n1\"}}", "!zone", true);
    same("{\"metadata\":{\"name\":\"n1\",\"labels\":null}}", "zone", false);
    /* an escaped name falls back to the full parse: the same answer */
    same("{\"metadata\":{\"name\":\"n1\",\"lab\\u0065ls\":{\"zone\":\"z1\"}}}", "zone=z1", true);
}

static struct kite_field_selector *fsel(const char *s) {
    struct kite_field_selector *fs = NULL;
    char *err = NULL;
    cr_assert_eq(kite_field_selector_parse(s, &fs, &err), 0, "%s", err ? err : "");
    return fs;
}

/* a field selector (an agent's spec.nodeName watch) is judged on the members it reads, cut out
 * of the text: the same answer as the full parse, and no tree left with the record */
static void same_fields(const char *json, const char *labels, const char *fields, bool want) {
    const struct kite_resource *pods = kite_registry_find("", "v1", "pods");
    struct kite_label_selector *ls = labels ? sel(labels) : NULL;
    struct kite_field_selector *fs = fsel(fields);
    struct kite_record *r = kite_record_new("/registry/pods/ns1/p1", json, strlen(json), 1, 1, 1);
    cr_assert_eq(kite_apiserver_record_matches(pods, r, ls, fs), want, "%s ~ %s", json, fields);
    cr_assert_null(kite_record_cache(r), "the pod was parsed whole and kept: %s ~ %s", json, fields);
    json_object *full = kite_apiserver_record_parse(r);
    cr_assert_eq(kite_apiserver_object_matches(pods, full, ls, fs), want, "full parse: %s ~ %s", json, fields);
    json_object_put(full);
    kite_record_unref(r);
    kite_label_selector_free(ls);
    kite_field_selector_free(fs);
}

Test(kite_apiserver_record_labels, field_selectors_match_as_the_full_parse) {
    const char *pod = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns1\","
                      "\"labels\":{\"app\":\"web\"}},\"spec\":{\"nodeName\":\"n1\",\"restartPolicy\":\"Always\","
                      "\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]},\"status\":{\"phase\":\"Running\"}}";
    same_fields(pod, NULL, "spec.nodeName=n1", true);
    same_fields(pod, NULL, "spec.nodeName=n2", false);
    same_fields(pod, NULL, "spec.host=n1", true); /* the old name of spec.nodeName */
    same_fields(pod, NULL, "spec.nodeName=n1,status.phase!=Running", false);
    same_fields(pod, NULL, "metadata.name=p1,metadata.namespace=ns1", true);
    same_fields(pod, "app=web", "spec.nodeName=n1", true);
    same_fields(pod, "app=db", "spec.nodeName=n1", false);
    same_fields(pod, NULL, "spec.nodeName=n1,spec.nodeName!=n2", true);
    /* absent: the empty value */
    same_fields("{\"metadata\":{\"name\":\"p2\",\"namespace\":\"ns1\"},\"spec\":{}}", NULL, "spec.nodeName=", true);
    same_fields("{\"metadata\":{\"name\":\"p2\",\"namespace\":\"ns1\"},\"spec\":{}}", NULL, "spec.nodeName!=", false);
}

/* a member name the scan cannot follow (an escape could spell it): the whole object is parsed,
 * and the answer is the same */
Test(kite_apiserver_record_labels, field_selectors_fall_back_to_the_full_parse) {
    const struct kite_resource *pods = kite_registry_find("", "v1", "pods");
    const char *pod = "{\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns1\"},\"spec\":{\"node\\u004eame\":\"n1\"}}";
    for (int i = 0; i < 100; i++) {
        struct kite_field_selector *fs = fsel(i % 2 ? "spec.nodeName=n1" : "spec.nodeName=n2");
        struct kite_record *r = kite_record_new("/registry/pods/ns1/p1", pod, strlen(pod), 1, 1, 1);
        cr_assert_eq(kite_apiserver_record_matches(pods, r, NULL, fs), i % 2 == 1);
        kite_record_unref(r);
        kite_field_selector_free(fs);
    }
}
