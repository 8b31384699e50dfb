/* The codec is GnuTLS's (strict: standard alphabet, padded); this file only maps the
 * tolerated spellings onto it and its buffers onto ours. */
#include "api/base64.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <limits.h>
#include <string.h>

#include "base/base.h"

char *kite_base64_encode(const void *data, size_t len, bool url) {
    if (len > UINT_MAX / 2) abort(); /* no API field comes near; gnutls_datum_t sizes are unsigned */
    gnutls_datum_t in = {(unsigned char *)data, (unsigned)len}, out = {0};
    if (gnutls_base64_encode2(&in, &out) < 0) abort(); /* it fails only to allocate */
    char *s = kite_malloc((size_t)out.size + 1);
    size_t n = 0;
    for (unsigned i = 0; i < out.size; i++) {
        char c = (char)out.data[i];
        if (url && c == '=') break;
        s[n++] = !url ? c : c == '+' ? '-' : c == '/' ? '_' : c;
    }
    s[n] = 0;
    gnutls_free(out.data);
    return s;
}

int kite_base64_decode(const char *in, char **ret, size_t *ret_len) {
    size_t n = strlen(in);
    if (n > UINT_MAX / 2) return -EINVAL;
    _cleanup_free_ char *canon = kite_malloc(n + 4);
    size_t o = 0;
    bool pad = false;
    for (const char *p = in; *p; p++) {
        char c = *p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad = true;
            continue;
        }
        if (pad) return -EINVAL; /* data after padding */
        canon[o++] = c == '-' ? '+' : c == '_' ? '/' : c;
    }
    if (o % 4 == 1) return -EINVAL; /* a lone trailing sextet encodes no byte */
    while (o % 4) canon[o++] = '=';
    gnutls_datum_t b64 = {(unsigned char *)canon, (unsigned)o}, out = {0};
    int r = gnutls_base64_decode2(&b64, &out);
    explicit_bzero(canon, o); /* kubeconfig keys pass through here */
    if (r < 0) return -EINVAL;
    char *res = kite_malloc((size_t)out.size + 1);
    if (out.size) memcpy(res, out.data, out.size);
    res[out.size] = 0;
    if (out.data) {
        explicit_bzero(out.data, out.size);
        gnutls_free(out.data);
    }
    *ret = res;
    if (ret_len) *ret_len = out.size;
    return 0;
}
