/* Growable byte buffer (git's strbuf). Invariant: p is NUL-terminated whenever p != NULL,
 * and len excludes the terminator. A zeroed struct kite_buf is a valid empty buffer. */
#pragma once
#include "base/base.h"

struct kite_buf {
    char *p;
    size_t len, cap;
};

void kite_buf_grow(struct kite_buf *b, size_t extra);
/* Like kite_buf_grow, but to exactly the room asked (no doubling): for a size known in advance. */
void kite_buf_reserve(struct kite_buf *b, size_t extra);
void kite_buf_append(struct kite_buf *b, const void *data, size_t n);
void kite_buf_puts(struct kite_buf *b, const char *s);
void kite_buf_putc(struct kite_buf *b, char c);
void kite_buf_printf(struct kite_buf *b, const char *fmt, ...) KITE_PRINTF(2, 3);
/* Appends s as a JSON string literal, quotes included. */
void kite_buf_json_str(struct kite_buf *b, const char *s);
/* Appends s as a URL query value: letters, digits and "-._:~" as they are, every other byte
 * percent-encoded. */
void kite_buf_query_value(struct kite_buf *b, const char *s);
void kite_buf_reset(struct kite_buf *b);
void kite_buf_release(struct kite_buf *b);
/* Hands the bytes to the caller (never NULL) and leaves b empty. */
char *kite_buf_detach(struct kite_buf *b, size_t *ret_len);
