/* Quantity and duration parsers (resource requests/limits in objects, agent config), with
 * the round trips that must hold: format(parse(s)) parses back to the same value, and the
 * canonical form is a fixed point of parse→format. */
#include "fuzz_common.h"
#include "api/quantity.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *s = fuzz_strndup(data, n);
    int64_t m = 0;
    int r = kite_quantity_parse_milli(s, &m);
    if (r == 0) {
        static const enum kite_qformat fmts[] = { KITE_Q_DECIMAL_SI, KITE_Q_BINARY_SI };
        for (size_t i = 0; i < 2; i++) {
            char out[32], out2[32];
            kite_quantity_format_milli(m, fmts[i], out);
            int64_t m2 = 0;
            int r2 = kite_quantity_parse_milli(out, &m2);
            if (r2 != 0 || m2 != m) {
                fprintf(stderr, "round trip: %s -> %lld -> %s -> r=%d %lld\n", s, (long long)m, out,
                        r2, (long long)m2);
                abort();
            }
            kite_quantity_format_milli(m2, fmts[i], out2);
            if (strcmp(out, out2) != 0) {
                fprintf(stderr, "not canonical: %s -> %s\n", out, out2);
                abort();
            }
        }
    } else if (r != -EINVAL && r != -ERANGE) {
        abort();
    }
    int64_t ns = 0;
    r = kite_duration_parse(s, &ns);
    if (r != 0 && r != -EINVAL && r != -ERANGE) abort();
    free(s);
    return 0;
}
