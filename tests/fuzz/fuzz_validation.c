/* ObjectMeta validation on untrusted request bodies: the input is an object (or its
 * metadata) as a client would send it. */
#include "fuzz_common.h"
#include "api/validation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    unsigned mode = data[0];
    json_object *o = fuzz_json_parse(data + 1, n - 1);
    if (!o) return 0;
    json_object *meta = o;
    json_object *m;
    if (json_object_object_get_ex(o, "metadata", &m)) meta = m;
    struct kite_causes c = {0};
    kite_validate_object_meta(meta, mode & 1, (mode >> 1) & 1, &c);
    char *sum = kite_causes_summary(&c);
    if (!sum || (c.n == 0) != (sum[0] == 0)) abort();
    for (size_t i = 0; i < c.n; i++)
        if (!c.v[i].reason || !c.v[i].message || !c.v[i].field) abort();
    free(sum);
    kite_causes_release(&c);
    json_object_put(o);
    return 0;
}
