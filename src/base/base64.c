/* Written here rather than over GnuTLS's codec: base uses no library, and Go's exact error
 * offsets (which the schema checker reports) need the decoder's own loop anyway. */
#include "base/base64.h"

#include <errno.h>
#include <string.h>

#include "base/base.h"

static const char STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void kite_base64_append(struct kite_buf *b, const void *data, size_t len, bool url) {
    const unsigned char *p = data;
    const char *a = url ? URL : STD;
    kite_buf_grow(b, (len + 2) / 3 * 4 + 1);
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
        char q[4] = {a[v >> 18 & 63], a[v >> 12 & 63], i + 1 < len ? a[v >> 6 & 63] : '=', i + 2 < len ? a[v & 63] : '='};
        size_t k = 4;
        if (url) k = i + 2 < len ? 4 : i + 1 < len ? 3 : 2;
        kite_buf_append(b, q, k);
    }
}

char *kite_base64_encode(const void *data, size_t len, bool url) {
    struct kite_buf b = {0};
    kite_base64_append(&b, data, len, url);
    kite_buf_putc(&b, 0);
    return b.p;
}

static int value(char c, bool url) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (url) return c == '-' ? 62 : c == '_' ? 63 : -1;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Checks and decodes s without '\r' and '\n' (Go's decoder skips them), StdEncoding or (url)
 * RawURLEncoding; at[k] is the offset in the input of the k-th byte kept, for the error. */
static int decode_go(const char *s, const size_t *at, size_t n, bool url, struct kite_buf *out, size_t *ret_bad) {
    size_t bad = n;
    bool pad = false;
    for (size_t i = 0; i < n && bad == n; i++) {
        if (s[i] == '=' && !url) {
            /* padding: only the last one or two bytes of the last quantum */
            if (i % 4 < 2 || (n - i) > 2 || n % 4) bad = i;
            pad = true;
        } else if (value(s[i], url) < 0 || pad) {
            bad = i; /* RawURLEncoding has no padding: '=' is a bad byte */
        }
    }
    /* a quantum cut short: padded input has none, unpadded input none of one byte */
    if (bad == n && n % 4 && (!url || n % 4 == 1)) bad = n - n % 4;
    if (bad < n) {
        if (ret_bad) *ret_bad = at ? at[bad] : bad;
        return -EINVAL;
    }
    for (size_t i = 0; out && i < n; i += 4) {
        int v[4];
        size_t npad = 0;
        for (size_t j = 0; j < 4; j++) v[j] = i + j >= n || s[i + j] == '=' ? (npad++, 0) : value(s[i + j], url);
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        char d[3] = {(char)(w >> 16), (char)(w >> 8 & 255), (char)(w & 255)};
        kite_buf_append(out, d, 3 - npad);
    }
    return 0;
}

static int decode_skipping_newlines(const char *s, size_t n, bool url, struct kite_buf *out, size_t *ret_bad) {
    if (!memchr(s, '\n', n) && !memchr(s, '\r', n)) return decode_go(s, NULL, n, url, out, ret_bad);
    char *kept = kite_malloc(n + 1);
    size_t *at = kite_malloc((n + 1) * sizeof *at), k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != '\n' && s[i] != '\r') {
            at[k] = i;
            kept[k++] = s[i];
        }
    at[k] = n;
    int r = decode_go(kept, at, k, url, out, ret_bad);
    free(kept);
    free(at);
    return r;
}

int kite_base64_decode_std(const char *s, size_t n, struct kite_buf *out, size_t *ret_bad) {
    return decode_skipping_newlines(s, n, false, out, ret_bad);
}

int kite_base64_decode_rawurl(const char *s, size_t n, struct kite_buf *out, size_t *ret_bad) {
    return decode_skipping_newlines(s, n, true, out, ret_bad);
}

int kite_base64_decode(const char *in, char **ret, size_t *ret_len) {
    size_t n = strlen(in);
    char *canon = kite_malloc(n + 4);
    size_t o = 0;
    bool pad = false;
    int r = 0;
    for (const char *p = in; *p && r == 0; p++) {
        char c = *p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad = true;
            continue;
        }
        if (pad) r = -EINVAL; /* data after padding */
        canon[o++] = c == '-' ? '+' : c == '_' ? '/' : c;
    }
    if (o % 4 == 1) r = -EINVAL; /* a lone trailing sextet encodes no byte */
    while (r == 0 && o % 4) canon[o++] = '=';
    struct kite_buf b = {0};
    kite_buf_grow(&b, o / 4 * 3 + 1); /* all of it at once: no reallocation leaves a copy behind */
    if (r == 0) r = decode_go(canon, NULL, o, false, &b, NULL);
    explicit_bzero(canon, n + 4);
    free(canon);
    if (r < 0) {
        if (b.p) explicit_bzero(b.p, b.len);
        kite_buf_release(&b);
        return r;
    }
    size_t len = b.len;
    kite_buf_putc(&b, 0);
    *ret = b.p;
    if (ret_len) *ret_len = len;
    return 0;
}
