/* Field selector parser + matcher on untrusted ?fieldSelector= query strings. */
#include "fuzz_common.h"
#include "api/selector.h"

static json_object *obj;

static const char *get(const char *field, void *ud) {
    return kite_json_path_string(obj, field, ud);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!obj)
        obj = json_tokener_parse("{\"metadata\":{\"name\":\"n1\",\"namespace\":\"default\"},"
                                 "\"spec\":{\"nodeName\":\"node-a\",\"unschedulable\":true,\"replicas\":3},"
                                 "\"status\":{\"phase\":\"Running\"},"
                                 "\"involvedObject\":{\"kind\":\"Pod\",\"namespace\":\"\"}}");
    char *s = fuzz_strndup(data, n);
    struct kite_field_selector *sel = NULL;
    char *err = NULL;
    int r = kite_field_selector_parse(s, &sel, &err);
    if (r == 0) {
        struct kite_buf buf = {0};
        (void)kite_field_selector_matches(sel, get, &buf);
        size_t cnt = kite_field_selector_count(sel);
        for (size_t i = 0; i < cnt; i++) {
            const char *f = kite_field_selector_field(sel, i);
            if (!f) abort();
            (void)kite_field_selector_exact(sel, f);
            (void)kite_json_path_string(obj, f, &buf);
        }
        kite_buf_release(&buf);
        kite_field_selector_free(sel);
    } else if (r != -EINVAL || sel) {
        abort();
    }
    free(err);
    free(s);
    return 0;
}
