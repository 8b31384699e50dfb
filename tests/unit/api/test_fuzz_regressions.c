/* Regressions found by the libFuzzer targets in tests/fuzz and the hand-made pathological
 * inputs run through them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/selector.h"
#include "base/buf.h"

/* `a in (v1,...,vn)` deduplicated each value by a linear scan: quadratic, 0.23 s of CPU for
 * a 64 KiB query string and 8 s for 400 KiB (fuzz_label_selector timeout). 40,000 values took
 * ~4 s, so the 200,000 here would take ~100 s and hit the suite's timeout; sorting then
 * dropping neighbours takes well under a second even under the sanitizers. No clock is read:
 * the margin is two orders of magnitude. */
Test(selector_fuzz, many_set_values_parse_in_linear_time, .timeout = 30) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "a in (");
    for (int i = 0; i < 200000; i++) kite_buf_printf(&b, "%sx%d", i ? "," : "", i % 150000);
    kite_buf_puts(&b, ")");
    struct kite_label_selector *sel = NULL;
    char *err = NULL;
    int r = kite_label_selector_parse(b.p, &sel, &err);
    cr_assert_eq(r, 0, "%s", err ? err : "");
    json_object *l = json_object_new_object();
    json_object_object_add(l, "a", json_object_new_string("x149999"));
    cr_assert(kite_label_selector_matches(sel, l));
    json_object_object_add(l, "a", json_object_new_string("x150000"));
    cr_assert(!kite_label_selector_matches(sel, l));
    json_object_put(l);
    kite_label_selector_free(sel);
    kite_buf_release(&b);
}

/* Duplicates and the empty value still collapse to one set member each. */
Test(selector_fuzz, duplicate_values_collapse) {
    const char *sels[] = {"a in (x,x,,y,x,)", "a notin (,,x,x)"};
    const char *present[][3] = {{"x", "", "y"}, {"z", "zz", "w"}};
    for (size_t i = 0; i < 2; i++) {
        struct kite_label_selector *sel = NULL;
        cr_assert_eq(kite_label_selector_parse(sels[i], &sel, NULL), 0, "case %zu", i);
        for (size_t j = 0; j < 3; j++) {
            json_object *l = json_object_new_object();
            json_object_object_add(l, "a", json_object_new_string(present[i][j]));
            cr_assert(kite_label_selector_matches(sel, l), "case %zu value %s", i, present[i][j]);
            json_object_put(l);
        }
        kite_label_selector_free(sel);
    }
}
