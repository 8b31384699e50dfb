#include <criterion/criterion.h>

#include "api/quantity.h"

Test(quantity, parse) {
    static const struct {
        const char *s;
        int rc;
        int64_t milli;
    } cases[] = {
        {"0", 0, 0},
        {"1", 0, 1000},
        {"100m", 0, 100},
        {"1500m", 0, 1500},
        {"2", 0, 2000},
        {"0.5", 0, 500},
        {"1.5", 0, 1500},
        {".5", 0, 500},
        {"1.", 0, 1000},
        {"+3", 0, 3000},
        {"-3", 0, -3000},
        {"-100m", 0, -100},
        {"1Ki", 0, 1024000},
        {"1Mi", 0, INT64_C(1048576000)},
        {"500Mi", 0, INT64_C(524288000000)},
        {"1Gi", 0, INT64_C(1073741824000)},
        {"1.5Gi", 0, INT64_C(1610612736000)},
        {"16179316Ki", 0, INT64_C(16567619584000)},
        {"1Ti", 0, INT64_C(1099511627776000)},
        {"1Pi", 0, INT64_C(1125899906842624000)},
        {"1k", 0, 1000000},
        {"1M", 0, INT64_C(1000000000)},
        {"1G", 0, INT64_C(1000000000000)},
        {"1T", 0, INT64_C(1000000000000000)},
        {"1P", 0, INT64_C(1000000000000000000)},
        {"1e3", 0, 1000000},
        {"1E3", 0, 1000000},
        {"1e+3", 0, 1000000},
        {"1e-3", 0, 1},
        {"15e-1", 0, 1500},
        {"1E", 0, INT64_MAX}, /* 1e18 units = 1e21 milli-units: saturated, never 0 */
        {"110", 0, 110000},
        {"1n", 0, 1},        /* rounded up to a whole milli-unit */
        {"1u", 0, 1},
        {"1500u", 0, 2},
        {"1000u", 0, 1},
        {"0.0001", 0, 1},
        {"0.0005Ki", 0, 512}, /* 0.512 units exactly: a doubling ending in 0 must not round up */
        {"0.0001Ki", 0, 103}, /* 0.1024 units -> 102.4 milli, rounded up */
        {"000100m", 0, 100},
        {"0.000", 0, 0},
        {"9223372036854775807m", 0, INT64_MAX},
        {"9223372036854775808m", 0, INT64_MAX},
        {"9223372036854775807", 0, INT64_MAX},
        {"8Ei", 0, INT64_MAX},
        {"10Pi", 0, INT64_MAX}, /* memory past int64 milli-units: huge, as upstream's inf.Dec */
        {"-10Pi", 0, -INT64_MAX},
        {"100000000000000", 0, INT64_C(100000000000000000)}, /* a cpu limit of 1e14 still fits */
        {"1e100", 0, INT64_MAX},
        {"1e999999999999", 0, INT64_MAX},
        {"1e-100", 0, 1},
        {"", -EINVAL, 0},
        {"10%", -EINVAL, 0},
        {"1 Gi", -EINVAL, 0},
        {" 1", -EINVAL, 0},
        {"1Gb", -EINVAL, 0},
        {"1KI", -EINVAL, 0},
        {"1ki", -EINVAL, 0},
        {"1mi", -EINVAL, 0},
        {"1e", -EINVAL, 0},
        {"1e1.5", -EINVAL, 0},
        {"abc", -EINVAL, 0},
        {"1m3", -EINVAL, 0},
        {"--1", -EINVAL, 0},
        {"0x10", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = 12345;
        int rc = kite_quantity_parse_milli(cases[i].s, &v);
        cr_assert_eq(rc, cases[i].rc, "%s: rc %d", cases[i].s, rc);
        if (rc == 0)
            cr_assert_eq(v, cases[i].milli, "%s: %lld", cases[i].s, (long long)v);
        else
            cr_assert_eq(v, 12345, "%s: untouched on error", cases[i].s);
    }
    int64_t v;
    cr_assert_eq(kite_quantity_parse_milli(NULL, &v), -EINVAL);
    char big[200];
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cr_assert_eq(kite_quantity_parse_milli(big, &v), -EINVAL); /* over the length limit */
}

Test(quantity, format) {
    static const struct {
        int64_t milli;
        enum kite_qformat fmt;
        const char *want;
    } cases[] = {
        {0, KITE_Q_DECIMAL_SI, "0"},
        {0, KITE_Q_BINARY_SI, "0"},
        {100, KITE_Q_DECIMAL_SI, "100m"},
        {1500, KITE_Q_DECIMAL_SI, "1500m"},
        {2000, KITE_Q_DECIMAL_SI, "2"},
        {110000, KITE_Q_DECIMAL_SI, "110"},
        {1000000, KITE_Q_DECIMAL_SI, "1k"},
        {1500000, KITE_Q_DECIMAL_SI, "1500"},
        {INT64_C(1000000000), KITE_Q_DECIMAL_SI, "1M"},
        {INT64_C(16000000000), KITE_Q_DECIMAL_SI, "16M"},
        {1, KITE_Q_DECIMAL_SI, "1m"},
        {10, KITE_Q_DECIMAL_SI, "10m"},
        {-1500, KITE_Q_DECIMAL_SI, "-1500m"},
        {-2000, KITE_Q_DECIMAL_SI, "-2"},
        {INT64_MAX, KITE_Q_DECIMAL_SI, "9223372036854775807m"},
        {INT64_C(1073741824000), KITE_Q_BINARY_SI, "1Gi"},
        {INT64_C(16567619584000), KITE_Q_BINARY_SI, "16179316Ki"},
        {INT64_C(524288000000), KITE_Q_BINARY_SI, "500Mi"},
        {INT64_C(1048576000), KITE_Q_BINARY_SI, "1Mi"},
        {1024000, KITE_Q_BINARY_SI, "1Ki"},
        {2048000, KITE_Q_BINARY_SI, "2Ki"},
        {1500000, KITE_Q_BINARY_SI, "1500"},     /* not a multiple of 1024 */
        {2000000, KITE_Q_BINARY_SI, "2000"},     /* binary keeps plain units */
        {1000000, KITE_Q_BINARY_SI, "1k"},       /* < 1024 -> decimal-SI */
        {110000, KITE_Q_BINARY_SI, "110"},
        {1500, KITE_Q_BINARY_SI, "1500m"},
        {1024500, KITE_Q_BINARY_SI, "1024500m"}, /* fraction -> decimal-SI */
        {-INT64_C(1073741824000), KITE_Q_BINARY_SI, "-1Gi"},
        {INT64_C(1125899906842624000), KITE_Q_BINARY_SI, "1Pi"},
        {INT64_C(2251799813685248000), KITE_Q_BINARY_SI, "2Pi"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[32];
        kite_quantity_format_milli(cases[i].milli, cases[i].fmt, out);
        cr_assert_str_eq(out, cases[i].want, "%lld", (long long)cases[i].milli);
    }
}

Test(quantity, round_trip) {
    static const struct {
        const char *s;
        enum kite_qformat fmt;
    } cases[] = {
        {"100m", KITE_Q_DECIMAL_SI}, {"2", KITE_Q_DECIMAL_SI},     {"1500m", KITE_Q_DECIMAL_SI},
        {"110", KITE_Q_DECIMAL_SI},  {"1k", KITE_Q_DECIMAL_SI},    {"4M", KITE_Q_DECIMAL_SI},
        {"1Gi", KITE_Q_BINARY_SI},   {"16179316Ki", KITE_Q_BINARY_SI}, {"500Mi", KITE_Q_BINARY_SI},
        {"3Ti", KITE_Q_BINARY_SI},   {"1023", KITE_Q_BINARY_SI},   {"1025", KITE_Q_BINARY_SI},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v;
        char out[32];
        cr_assert_eq(kite_quantity_parse_milli(cases[i].s, &v), 0);
        kite_quantity_format_milli(v, cases[i].fmt, out);
        cr_assert_str_eq(out, cases[i].s);
    }
    /* non-canonical inputs canonicalize */
    static const char *const canon[][2] = {{"0.1", "100m"}, {"1000m", "1"}, {"1e3", "1k"}, {"2048Ki", "2Mi"}, {"1.5Gi", "1536Mi"}};
    for (size_t i = 0; i < sizeof(canon) / sizeof(canon[0]); i++) {
        int64_t v;
        char out[32];
        cr_assert_eq(kite_quantity_parse_milli(canon[i][0], &v), 0);
        kite_quantity_format_milli(v, strchr(canon[i][0], 'i') ? KITE_Q_BINARY_SI : KITE_Q_DECIMAL_SI, out);
        cr_assert_str_eq(out, canon[i][1], "%s", canon[i][0]);
    }
}

Test(quantity, durations) {
    static const struct {
        const char *s;
        int rc;
        int64_t ns;
    } cases[] = {
        {"0", 0, 0},
        {"-0", 0, 0},
        {"10s", 0, INT64_C(10000000000)},
        {"5m", 0, INT64_C(300000000000)},
        {"1h30m", 0, INT64_C(5400000000000)},
        {"300ms", 0, INT64_C(300000000)},
        {"1.5s", 0, INT64_C(1500000000)},
        {".5s", 0, INT64_C(500000000)},
        {"1.s", 0, INT64_C(1000000000)},
        {"-1s", 0, -INT64_C(1000000000)},
        {"+2h", 0, INT64_C(7200000000000)},
        {"1us", 0, 1000},
        {"1\xc2\xb5s", 0, 1000},
        {"1\xce\xbcs", 0, 1000},
        {"7ns", 0, 7},
        {"1h1m1s1ms1us1ns", 0, INT64_C(3661001001001)},
        {"2562047h47m16.854775807s", 0, INT64_MAX},
        {"-2562047h47m16.854775808s", 0, INT64_MIN},
        {"2562047h47m16.854775808s", -ERANGE, 0},
        {"9999999999999999999h", -ERANGE, 0},
        {"", -EINVAL, 0},
        {"1", -EINVAL, 0},
        {"s", -EINVAL, 0},
        {".s", -EINVAL, 0},
        {"1d", -EINVAL, 0},
        {"1 s", -EINVAL, 0},
        {"1s ", -EINVAL, 0},
        {"--1s", -EINVAL, 0},
        {"1S", -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = 42;
        int rc = kite_duration_parse(cases[i].s, &v);
        cr_assert_eq(rc, cases[i].rc, "%s: rc %d", cases[i].s, rc);
        cr_assert_eq(v, rc == 0 ? cases[i].ns : 42, "%s: %lld", cases[i].s, (long long)v);
    }
    int64_t v;
    cr_assert_eq(kite_duration_parse(NULL, &v), -EINVAL);
}
