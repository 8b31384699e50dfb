/* JSON merge patch, JSON patch and strategic merge patch on untrusted PATCH bodies, and the
 * two-way SMP diff round trip the node agent relies on.
 * Input: a mode byte, then a document and a patch separated by the first NUL (or split in
 * half when there is none). Both are parsed as the API server parses request bodies. */
#include "fuzz_common.h"
#include "json/patch.h"

#include <stdio.h>

static const struct kite_smp_rule rules[] = {
    {"metadata.finalizers", NULL, KITE_SMP_MERGE_PRIMITIVES, NULL},
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
    {"status.addresses", "type", KITE_SMP_MERGE, NULL},
    {"spec.containers", "name", KITE_SMP_MERGE, NULL},
    {"spec.containers.ports", "containerPort", KITE_SMP_MERGE, NULL},
    {"spec.strategy", NULL, KITE_SMP_RETAIN_KEYS, NULL},
};
static const struct kite_smp_schema schema = {rules, sizeof rules / sizeof rules[0]};

/* $-directive keys are not representable in a two-way diff's documents, nor null values in
 * its target (null means "delete"). */
static bool representable(json_object *o, bool allow_null) {
    switch (json_object_get_type(o)) {
    case json_type_null:
        return allow_null;
    case json_type_object: {
        json_object_object_foreach(o, k, v) {
            if (k[0] == '$' || !representable(v, allow_null)) return false;
        }
        return true;
    }
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(o); i++)
            if (!representable(json_object_array_get_idx(o, i), allow_null)) return false;
        return true;
    default:
        return true;
    }
}

static const char *S(json_object *o) {
    return o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "(null)";
}

static void check_result(int r, json_object *ret, char *err, const char *what) {
    if (r == 0) {
        if (!ret) {
            fprintf(stderr, "%s: success without a result\n", what);
            abort();
        }
    } else {
        if (ret) {
            fprintf(stderr, "%s: error %d but a result\n", what, r);
            abort();
        }
        if (r != -EBADMSG && r != -EINVAL) {
            fprintf(stderr, "%s: unexpected error %d\n", what, r);
            abort();
        }
    }
    json_object_put(ret);
    free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    unsigned mode = data[0] % 4;
    data++, n--;
    const uint8_t *nul = memchr(data, 0, n);
    size_t dn = nul ? (size_t)(nul - data) : n / 2;
    size_t pn_off = nul ? dn + 1 : dn;
    json_object *doc = fuzz_json_parse(data, dn);
    json_object *patch = fuzz_json_parse(data + pn_off, n - pn_off);
    if (!doc || !patch) goto out;

    /* copies to check the inputs are not modified */
    json_object *doc0 = NULL, *patch0 = NULL;
    json_object_deep_copy(doc, &doc0, NULL);
    json_object_deep_copy(patch, &patch0, NULL);

    json_object *ret = NULL;
    char *err = NULL;
    int r;
    switch (mode) {
    case 0:
        r = kite_merge_patch(doc, patch, &ret, &err);
        check_result(r, ret, err, "merge");
        break;
    case 1:
        r = kite_json_patch(doc, patch, &ret, &err);
        check_result(r, ret, err, "jsonpatch");
        break;
    case 2:
        r = kite_smp_apply(doc, patch, &schema, &ret, &err);
        check_result(r, ret, err, "smp");
        break;
    case 3: {
        /* patch is the target document here */
        json_object *d = NULL;
        r = kite_smp_diff(doc, patch, &schema, &d);
        if (r == 0) {
            if (!d) abort();
            json_object *back = NULL;
            char *e2 = NULL;
            int r2 = kite_smp_apply(doc, d, &schema, &back, &e2);
            if (json_object_is_type(patch, json_type_object) && representable(patch, false) && representable(doc, true) &&
                (r2 != 0 || !kite_json_equal(back, patch))) {
                fprintf(stderr, "round trip failed: r=%d (%s)\nfrom %s\n", r2, e2 ? e2 : "", S(doc));
                fprintf(stderr, "to   %s\ndiff %s\n", S(patch), S(d));
                fprintf(stderr, "back %s\n", S(back));
                abort();
            }
            json_object_put(back);
            free(e2);
            json_object_put(d);
        } else if (r != -EINVAL || d) {
            abort();
        }
        break;
    }
    }
    if (!kite_json_equal(doc, doc0) || !kite_json_equal(patch, patch0)) {
        fprintf(stderr, "input modified\n");
        abort();
    }
    json_object_put(doc0);
    json_object_put(patch0);
out:
    json_object_put(doc);
    json_object_put(patch);
    return 0;
}
