#include <criterion/criterion.h>
#include <errno.h>

#include "base/base64.h"

Test(base64, encode_standard_and_url) {
    const unsigned char bin[] = {0xfb, 0xff, 0xfe};
    char *s = kite_base64_encode(bin, 3, false);
    cr_assert_str_eq(s, "+//+");
    free(s);
    s = kite_base64_encode(bin, 3, true);
    cr_assert_str_eq(s, "-__-");
    free(s);
    s = kite_base64_encode("ab", 2, false);
    cr_assert_str_eq(s, "YWI=");
    free(s);
    s = kite_base64_encode("ab", 2, true);
    cr_assert_str_eq(s, "YWI", "RawURLEncoding has no padding");
    free(s);
    s = kite_base64_encode("", 0, false);
    cr_assert_str_eq(s, "");
    free(s);
    /* a continue token as kube-apiserver writes it */
    const char *tok = "{\"v\":\"meta.k8s.io/v1\",\"rv\":5,\"start\":\"a?>\"}";
    s = kite_base64_encode(tok, strlen(tok), true);
    cr_assert_str_eq(s, "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NSwic3RhcnQiOiJhPz4ifQ");
    free(s);
}

Test(base64, decode_tolerates_what_kubeconfigs_hold) {
    struct { const char *in, *out; int r; } cases[] = {
        {"aGVsbG8=", "hello", 0},       {"aGVsbG8", "hello", 0},        {"aGVs\nbG8=", "hello", 0},
        {" aGVs\tbG8=\r\n", "hello", 0}, {"aGVsbG8==", "hello", 0},     {"", "", 0},
        {"-__-", "\xfb\xff\xfe", 0},     {"+//+", "\xfb\xff\xfe", 0},   {"YWI", "ab", 0},
        {"a$==", NULL, -EINVAL},         {"aGVsbG8=x", NULL, -EINVAL},  {"aGVsb", NULL, -EINVAL},
        {"aGVs*bG8=", NULL, -EINVAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *o = NULL;
        size_t n = 99;
        int r = kite_base64_decode(cases[i].in, &o, &n);
        cr_assert_eq(r, cases[i].r, "case %zu", i);
        if (!r) {
            cr_assert_str_eq(o, cases[i].out, "case %zu", i);
            cr_assert_eq(n, strlen(cases[i].out), "case %zu", i);
        }
        free(o);
    }
}

Test(base64, round_trip_binary) {
    unsigned char bin[256];
    for (int i = 0; i < 256; i++) bin[i] = (unsigned char)(255 - i);
    for (size_t len = 0; len <= sizeof bin; len += 37) {
        for (int url = 0; url < 2; url++) {
            char *s = kite_base64_encode(bin, len, url), *d = NULL;
            size_t n = 0;
            cr_assert_eq(kite_base64_decode(s, &d, &n), 0);
            cr_assert_eq(n, len);
            cr_assert(len == 0 || memcmp(d, bin, len) == 0);
            free(s);
            free(d);
        }
    }
}

/* StdEncoding alone, with the offset Go's CorruptInputError names (the schema checker's
 * "illegal base64 data at input byte N" for []byte fields). */
Test(base64, decode_std_is_go_strict) {
    struct { const char *in, *out; size_t bad; } cases[] = {
        {"aGVsbG8=", "hello", 0}, {"YWJj", "abc", 0}, {"", "", 0},          {"+//+", "\xfb\xff\xfe", 0},
        {"aGVsbG8", NULL, 4},     {"-__-", NULL, 0},  {"YW\nJj", "abc", 0}, {"YW\r\nJ$", NULL, 5},  {"YWJj$A==", NULL, 4},
        {"Y===", NULL, 1},        {"YQ==YQ==", NULL, 2}, {"aGVsbG8=\n", "hello", 0}, {"YW J", NULL, 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_buf b = {0};
        size_t bad = 999;
        int r = kite_base64_decode_std(cases[i].in, strlen(cases[i].in), &b, &bad);
        if (cases[i].out) {
            cr_assert_eq(r, 0, "case %zu", i);
            cr_assert_eq(b.len, strlen(cases[i].out), "case %zu", i);
            cr_assert(b.len == 0 || memcmp(b.p, cases[i].out, b.len) == 0, "case %zu", i);
        } else {
            cr_assert_eq(r, -EINVAL, "case %zu", i);
            cr_assert_eq(bad, cases[i].bad, "case %zu: %zu", i, bad);
        }
        kite_buf_release(&b);
    }
}

/* Go's RawURLEncoding.DecodeString, as JWT parts are read: no padding, the URL alphabet, the
 * offset of CorruptInputError as Go reports it. */
Test(base64, decode_rawurl_is_go_strict) {
    struct { const char *in, *out; size_t bad; } cases[] = {
        {"YWI", "ab", 0},      {"YQ", "a", 0},       {"YWJj", "abc", 0},   {"-__-", "\xfb\xff\xfe", 0}, {"", "", 0},
        {"YW\nI", "ab", 0},    {"YWI=", NULL, 3},    {"Y", NULL, 0},       {"YWJjZ", NULL, 4},          {"+//+", NULL, 0},
        {"YQ==", NULL, 2},     {"YW\r\nJ$", NULL, 5},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_buf b = {0};
        size_t bad = 999;
        int r = kite_base64_decode_rawurl(cases[i].in, strlen(cases[i].in), &b, &bad);
        if (cases[i].out) {
            cr_assert_eq(r, 0, "case %zu", i);
            cr_assert_eq(b.len, strlen(cases[i].out), "case %zu", i);
            cr_assert(b.len == 0 || memcmp(b.p, cases[i].out, b.len) == 0, "case %zu", i);
        } else {
            cr_assert_eq(r, -EINVAL, "case %zu", i);
            cr_assert_eq(bad, cases[i].bad, "case %zu: %zu", i, bad);
        }
        kite_buf_release(&b);
    }
}
