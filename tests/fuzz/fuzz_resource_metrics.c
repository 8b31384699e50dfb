/* The metrics API's reader of a node agent's /metrics/resource answer (src/apiserver/
 * metrics_text.c), on the raw bytes exactly as they arrive: no NUL at the end, embedded NULs,
 * lines without a newline. Every container it keeps has its three names and the counts stay
 * within the limits. */
#include "fuzz_common.h"
#include "apiserver/internal.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    /* a copy of exactly n bytes, so reading past the end is caught */
    char *text = malloc(n ? n : 1);
    if (!text) abort();
    memcpy(text, data, n);
    struct mapi_batch b = {0};
    int r = kite_apiserver_mapi_parse(text, n, 1, &b);
    if (r < 0 && r != -EINVAL) abort();
    if (b.n > KITE_METRICS_MAX_CONTAINERS) abort();
    for (size_t i = 0; i < b.n; i++)
        if (!*b.c[i].ns || !*b.c[i].pod || !*b.c[i].name || strlen(b.c[i].name) > 255) abort();
    kite_apiserver_mapi_batch_release(&b);
    free(text);
    return 0;
}
