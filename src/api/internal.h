/* Helpers shared by the api module's own files; not for use outside src/api. */
#pragma once
#include "base/buf.h"

/* Appends s quoted as Go's %q (strconv.Quote) does for ASCII: Kubernetes error messages
 * embed offending values this way, and clients compare those messages verbatim. Bytes
 * >= 0x80 are copied as they are (valid UTF-8 is printed unescaped by Go too). */
void kite_api_go_quote(struct kite_buf *b, const char *s);
