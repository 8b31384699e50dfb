/* Regressions found by the libFuzzer targets in tests/fuzz. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

/* kite_buf_grow on an empty buffer allocated without writing the terminator, breaking the
 * invariant "p is NUL-terminated whenever p != NULL": a token built with grow() and detached
 * while still empty (the RFC 6901 pointer "/" in a JSON patch) was an unterminated string,
 * read past its end by strlen (fuzz_patch, ASan heap-buffer-overflow). */
Test(buf_fuzz, grow_on_empty_buffer_terminates) {
    /* dirty the chunk the allocator will hand back, so the test does not pass by luck */
    for (int i = 0; i < 4; i++) {
        char *junk = malloc(64);
        memset(junk, 'x', 64);
        free(junk);
    }
    struct kite_buf b = {0};
    kite_buf_grow(&b, 1);
    cr_assert_not_null(b.p);
    cr_assert_eq(b.p[0], 0);
    size_t len = 99;
    char *s = kite_buf_detach(&b, &len);
    cr_assert_eq(len, 0);
    cr_assert_str_eq(s, "");
    free(s);
}
