/* Label selector parser + matcher on untrusted ?labelSelector= query strings. */
#include "fuzz_common.h"
#include "api/selector.h"

static json_object *labels;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!labels)
        labels = json_tokener_parse("{\"app\":\"web\",\"tier\":\"frontend\",\"env\":\"prod\","
                                    "\"example.com/role\":\"db\",\"replicas\":\"3\",\"empty\":\"\"}");
    char *s = fuzz_strndup(data, n);
    struct kite_label_selector *sel = NULL;
    char *err = NULL;
    int r = kite_label_selector_parse(s, &sel, &err);
    if (r == 0) {
        if (err) abort(); /* no message on success */
        (void)kite_label_selector_matches(sel, labels);
        (void)kite_label_selector_matches(sel, NULL);
        bool empty = kite_label_selector_empty(sel);
        if (empty && !kite_label_selector_matches(sel, NULL)) abort();
        kite_label_selector_free(sel);
    } else {
        if (r != -EINVAL || sel) abort();
    }
    free(err);
    free(s);
    return 0;
}
