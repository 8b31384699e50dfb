/* Regressions found by the libFuzzer targets in tests/fuzz (fuzz_yaml). */
#include <criterion/criterion.h>
#include <string.h>

#include "client/kubeconfig.h"
#include "api/yaml.h"

/* A document whose root is null (an empty explicit document, "~", "null") used to give
 * success with *ret == NULL; callers walk the result as a tree. It is {} like an empty
 * input. */
Test(yaml_fuzz, null_root_is_empty_object) {
    const char *cases[] = {"---\n---\n: 2\n", "---\n", "~\n", "null", "--- ~\n", "# only a comment\n---\n"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_object *o = (json_object *)1;
        char *err = NULL;
        int r = kite_yaml_parse(cases[i], strlen(cases[i]), &o, &err);
        cr_assert_eq(r, 0, "case %zu: %s", i, err ? err : "");
        cr_assert_not_null(o, "case %zu", i);
        cr_assert(json_object_is_type(o, json_type_object), "case %zu", i);
        cr_assert_eq(json_object_object_length(o), 0, "case %zu", i);
        json_object_put(o);
    }
}
