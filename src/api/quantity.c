/* Quantities and durations.
 *
 * Parsing follows resource.ParseQuantity's grammar (parseQuantityString + the suffixer):
 *   [+-] digits [. digits] [suffix], suffix one of n u m "" k M G T P E Ki Mi Gi Ti Pi Ei
 *   or e/E followed by a signed integer exponent.
 * The value is computed exactly with decimal-digit arithmetic (a quantity string is at most
 * KITE_QUANTITY_MAX_LEN bytes) and rounded up to whole milli-units as Quantity.MilliValue()
 * does. Formatting reproduces Quantity.String()'s canonical form (CanonicalizeBytes). */
#include "api/quantity.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>

/* Longer strings are refused: no real quantity comes close, and it bounds the digit buffer. */
#define KITE_QUANTITY_MAX_LEN 128
/* An int64 has at most 19 digits; beyond this many integer digits the value cannot fit. */
#define MAX_INT_DIGITS 19

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Interprets the suffix: *exp10 and *exp2 are set (one of them is used). */
static int interpret_suffix(const char *s, int64_t *exp10, int *exp2) {
    static const struct { const char *s; int e10, e2; } table[] = {
        {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
        {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
        {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(table); i++) {
        if (strcmp(s, table[i].s) == 0) {
            *exp10 = table[i].e10;
            *exp2 = table[i].e2;
            return 0;
        }
    }
    if (s[0] != 'e' && s[0] != 'E') return -EINVAL;
    const char *p = s + 1;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    if (!*p) return -EINVAL;
    int64_t e = 0;
    for (; *p; p++) {
        if (!is_digit(*p)) return -EINVAL;
        /* Clamp: anything this large over- or underflows the result anyway. */
        if (e < 1000000) e = e * 10 + (*p - '0');
    }
    *exp10 = neg ? -e : e;
    *exp2 = 0;
    return 0;
}

/* digits *= 2, in place, as a decimal string with room to grow. */
static void double_digits(char *d, size_t *n) {
    int carry = 0;
    for (size_t i = *n; i-- > 0;) {
        int v = (d[i] - '0') * 2 + carry;
        d[i] = (char)('0' + v % 10);
        carry = v / 10;
    }
    if (carry) {
        memmove(d + 1, d, *n);
        d[0] = (char)('0' + carry);
        (*n)++;
    }
}

/* Past int64 milli-units a quantity is still valid (upstream keeps it as inf.Dec) and must
 * compare as huge, never as nothing: it sticks at +-KITE_QUANTITY_MAX_MILLI. */
static int saturate(bool neg, int64_t *ret_milli) {
    *ret_milli = neg ? -KITE_QUANTITY_MAX_MILLI : KITE_QUANTITY_MAX_MILLI;
    return 0;
}

int kite_quantity_parse_milli(const char *s, int64_t *ret_milli) {
    if (!s || !*s) return -EINVAL;
    size_t len = strlen(s);
    if (len > KITE_QUANTITY_MAX_LEN) return -EINVAL;
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    const char *num = p;
    while (is_digit(*p)) p++;
    size_t num_len = (size_t)(p - num);
    const char *frac = p;
    size_t frac_len = 0;
    if (*p == '.') {
        frac = ++p;
        while (is_digit(*p)) p++;
        frac_len = (size_t)(p - frac);
    }
    /* The suffix: letters from the SI set, then an optional signed exponent. */
    const char *suffix = p;
    while (*p && strchr("eEinumkKMGTP", *p)) p++;
    if (*p == '+' || *p == '-') p++;
    while (is_digit(*p)) p++;
    if (*p) return -EINVAL;
    int64_t exp10;
    int exp2;
    if (interpret_suffix(suffix, &exp10, &exp2) < 0) return -EINVAL;

    /* digits = num ++ frac, value = digits * 10^(exp10 + 3 - frac_len) * 2^exp2 milli-units. */
    char d[KITE_QUANTITY_MAX_LEN * 2 + 64];
    size_t n = 0;
    for (size_t i = 0; i < num_len; i++)
        if (n || num[i] != '0') d[n++] = num[i];
    for (size_t i = 0; i < frac_len; i++)
        if (n || frac[i] != '0') d[n++] = frac[i];
    if (n == 0) {
        *ret_milli = 0;
        return 0;
    }
    int64_t e = exp10 + 3 - (int64_t)frac_len;
    while (n > 1 && d[n - 1] == '0') n--, e++;
    if (e > 0) {
        if ((int64_t)n + e > MAX_INT_DIGITS + 1) return saturate(neg, ret_milli);
        for (; e > 0; e--) d[n++] = '0';
    }
    for (int i = 0; i < exp2; i++) double_digits(d, &n);
    /* Split at the decimal point: integer part d[0..ip), fraction d[ip..n). */
    int64_t q = -e;
    size_t ip = q >= (int64_t)n ? 0 : n - (size_t)q;
    bool round_up = false;
    for (size_t i = ip; i < n; i++) round_up |= d[i] != '0';
    if (ip > MAX_INT_DIGITS) return saturate(neg, ret_milli);
    uint64_t v = 0;
    for (size_t i = 0; i < ip; i++) v = v * 10 + (uint64_t)(d[i] - '0');
    if (round_up) v++;
    if (v > (uint64_t)INT64_MAX) return saturate(neg, ret_milli);
    *ret_milli = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

void kite_quantity_format_milli(int64_t milli, enum kite_qformat fmt, char out[32]) {
    if (milli == 0) {
        strcpy(out, "0");
        return;
    }
    /* Binary-SI only for whole units of magnitude ≥ 1024; Kubernetes falls back to decimal-SI
     * otherwise rather than lose precision or print "0.5Ki". */
    if (fmt == KITE_Q_BINARY_SI && milli % 1000 == 0 && (milli <= -1024000 || milli >= 1024000)) {
        int64_t v = milli / 1000;
        int e = 0;
        while (v % 1024 == 0 && e < 6) v /= 1024, e++;
        static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
        snprintf(out, 32, "%lld%s", (long long)v, bin[e]);
        return;
    }
    /* Decimal: mantissa * 10^exp with exp a multiple of 3 (AsCanonicalBytes). */
    int64_t v = milli;
    int e = -3;
    while (v % 10 == 0) v /= 10, e++;
    int r = ((e % 3) + 3) % 3;
    for (int i = 0; i < r; i++) v *= 10;
    e -= r;
    const char *suffix = "";
    switch (e) {
    case -3: suffix = "m"; break;
    case 0: suffix = ""; break;
    case 3: suffix = "k"; break;
    case 6: suffix = "M"; break;
    case 9: suffix = "G"; break;
    case 12: suffix = "T"; break;
    case 15: suffix = "P"; break;
    case 18: suffix = "E"; break;
    default: break; /* unreachable: |milli| < 2^63 bounds e to [-3, 15] */
    }
    snprintf(out, 32, "%lld%s", (long long)v, suffix);
}

/* ---- durations (Go time.ParseDuration) ---- */

static int64_t unit_ns(const char *u, size_t n) {
    static const struct { const char *s; int64_t ns; } units[] = {
        {"ns", 1},
        {"us", 1000},
        {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
        {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
        {"ms", 1000000},
        {"s", INT64_C(1000000000)},
        {"m", INT64_C(60000000000)},
        {"h", INT64_C(3600000000000)},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(units); i++)
        if (strlen(units[i].s) == n && memcmp(units[i].s, u, n) == 0) return units[i].ns;
    return 0;
}

int kite_duration_parse(const char *s, int64_t *ret_ns) {
    if (!s) return -EINVAL;
    const char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+') neg = *p++ == '-';
    if (strcmp(p, "0") == 0) {
        *ret_ns = 0;
        return 0;
    }
    if (!*p) return -EINVAL;
    uint64_t total = 0;
    while (*p) {
        if (!is_digit(*p) && *p != '.') return -EINVAL;
        uint64_t v = 0;
        const char *start = p;
        bool overflow = false;
        for (; is_digit(*p); p++) {
            if (v > (UINT64_C(1) << 63) / 10) overflow = true;
            v = v * 10 + (uint64_t)(*p - '0');
            if (v > (UINT64_C(1) << 63)) overflow = true;
        }
        if (overflow) return -ERANGE;
        bool pre = p != start;
        uint64_t f = 0;
        double scale = 1;
        bool post = false;
        if (*p == '.') {
            p++;
            const char *fs = p;
            for (; is_digit(*p); p++) {
                /* Like Go: digits beyond what fits are dropped, not rounded. */
                if (f <= (UINT64_MAX - 9) / 10 && scale < 1e18) {
                    f = f * 10 + (uint64_t)(*p - '0');
                    scale *= 10;
                }
            }
            post = p != fs;
        }
        if (!pre && !post) return -EINVAL;
        const char *u = p;
        while (*p && *p != '.' && !is_digit(*p)) p++;
        if (u == p) return -EINVAL; /* missing unit */
        int64_t unit = unit_ns(u, (size_t)(p - u));
        if (!unit) return -EINVAL;
        if (v > (UINT64_C(1) << 63) / (uint64_t)unit) return -ERANGE;
        v *= (uint64_t)unit;
        if (f > 0) {
            v += (uint64_t)((double)f * ((double)unit / scale));
            if (v > (UINT64_C(1) << 63)) return -ERANGE;
        }
        total += v;
        if (total > (UINT64_C(1) << 63)) return -ERANGE;
    }
    if (!neg && total > (uint64_t)INT64_MAX) return -ERANGE;
    *ret_ns = neg ? (int64_t)(0 - total) : (int64_t)total;
    return 0;
}
