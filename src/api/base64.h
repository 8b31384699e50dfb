/* base64 for the API's text fields (kubeconfig *-data, continue tokens), on GnuTLS's codec. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Standard base64 as Go's StdEncoding, or with url the unpadded URL alphabet of
 * RawURLEncoding (continue tokens). A new NUL-terminated string. */
char *kite_base64_encode(const void *data, size_t len, bool url);
/* Either alphabet, padding optional, whitespace ignored (kubeconfig data fields are often
 * wrapped), into a new NUL-terminated buffer (*ret_len may be NULL). -EINVAL on bad characters,
 * data after padding, or bits that are not a whole number of bytes. */
int kite_base64_decode(const char *in, char **ret, size_t *ret_len);
