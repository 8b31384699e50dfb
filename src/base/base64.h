/* base64 as Go's encoding/base64 writes and reads it: StdEncoding (standard alphabet, padded)
 * for []byte fields, kubeconfig *-data and certificates; RawURLEncoding (URL alphabet, no
 * padding) for continue tokens and CSR names. The one codec of the tree. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

/* Appends data's encoding: StdEncoding, or with url RawURLEncoding. */
void kite_base64_append(struct kite_buf *b, const void *data, size_t len, bool url);
/* The same as a new NUL-terminated string. */
char *kite_base64_encode(const void *data, size_t len, bool url);

/* Go's StdEncoding.DecodeString: standard alphabet, padded, nothing else but the '\r' and '\n'
 * Go skips. Appends the bytes to
 * out (NULL: only checks). -EINVAL with *ret_bad (may be NULL) the offset Go's
 * CorruptInputError names ("illegal base64 data at input byte N"). */
int kite_base64_decode_std(const char *s, size_t n, struct kite_buf *out, size_t *ret_bad);
/* Go's RawURLEncoding.DecodeString (JWT parts): URL alphabet, no padding ('=' is a bad byte),
 * '\r' and '\n' skipped; otherwise as kite_base64_decode_std. */
int kite_base64_decode_rawurl(const char *s, size_t n, struct kite_buf *out, size_t *ret_bad);

/* Tolerant, for what people paste: either alphabet, padding optional, whitespace ignored
 * (kubeconfig data fields are often wrapped), into a new NUL-terminated buffer (*ret_len may be
 * NULL). -EINVAL on bad characters, data after padding, or bits that are not a whole number of
 * bytes. Its scratch copy is wiped (kubeconfig keys pass through here). */
int kite_base64_decode(const char *in, char **ret, size_t *ret_len);
