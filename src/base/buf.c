#include "base/buf.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void kite_buf_grow(struct kite_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    bool fresh = !b->p;
    b->p = kite_realloc(b->p, cap);
    b->cap = cap;
    /* keep the invariant (p terminated when non-NULL) for a buffer grown before any append */
    if (fresh) b->p[b->len] = 0;
}

void kite_buf_reserve(struct kite_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    bool fresh = !b->p;
    b->p = kite_realloc(b->p, b->len + extra + 1);
    b->cap = b->len + extra + 1;
    if (fresh) b->p[b->len] = 0;
}

void kite_buf_append(struct kite_buf *b, const void *data, size_t n) {
    kite_buf_grow(b, n);
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

void kite_buf_puts(struct kite_buf *b, const char *s) { kite_buf_append(b, s, strlen(s)); }

void kite_buf_putc(struct kite_buf *b, char c) { kite_buf_append(b, &c, 1); }

/* One pass when the text fits the room left (the usual case), a second only after growing. */
void kite_buf_printf(struct kite_buf *b, const char *fmt, ...) {
    va_list ap;
    kite_buf_grow(b, 63);
    size_t room = b->cap - b->len;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->p[b->len] = 0;
        return;
    }
    if ((size_t)n >= room) {
        kite_buf_grow(b, (size_t)n);
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void kite_buf_query_value(struct kite_buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || strchr("-._:~", c)) kite_buf_putc(b, (char)c);
        else kite_buf_printf(b, "%%%02X", c);
    }
}

void kite_buf_json_str(struct kite_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    kite_buf_putc(b, '"');
    const unsigned char *p = (const unsigned char *)s, *run = p;
    for (;; p++) {
        unsigned char c = *p;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        /* copy the run of characters that need no escaping in one go */
        if (p > run) kite_buf_append(b, run, (size_t)(p - run));
        run = p + 1;
        if (c == 0) break;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            kite_buf_append(b, e, 2);
        } else if (c == '\n') {
            kite_buf_append(b, "\\n", 2);
        } else if (c == '\t') {
            kite_buf_append(b, "\\t", 2);
        } else if (c == '\r') {
            kite_buf_append(b, "\\r", 2);
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            kite_buf_append(b, e, 6);
        }
    }
    kite_buf_putc(b, '"');
}

void kite_buf_reset(struct kite_buf *b) {
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

void kite_buf_release(struct kite_buf *b) {
    free(b->p);
    *b = (struct kite_buf){0};
}

char *kite_buf_detach(struct kite_buf *b, size_t *ret_len) {
    if (!b->p) kite_buf_grow(b, 0), b->p[0] = 0;
    char *p = b->p;
    if (ret_len) *ret_len = b->len;
    *b = (struct kite_buf){0};
    return p;
}
