/* SPDY/3.1 frames both ways and their header blocks (spdy.h). */
#include "agent/logs/spdy.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

#include "base/base.h"

struct kite_spdy {
    z_stream in, out;
    bool in_ok, out_ok;
    struct kite_buf buf; /* fed, from off on not yet taken */
    size_t off;
    struct kite_buf block; /* the last header block inflated */
    struct kite_spdy_header h[KITE_SPDY_MAX_HEADERS];
    size_t n_h;
};

/* The SPDY/3 header dictionary: these names, each after its 32-bit big-endian length, then the
 * tail text as it is. */
static const char *const dict_words[] = {
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie",
    "keep-alive", "origin",
};
static const char dict_tail[] =
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";

static void put32(struct kite_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    kite_buf_append(b, x, 4);
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void dictionary(struct kite_buf *d) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(dict_words); i++) {
        put32(d, (uint32_t)strlen(dict_words[i]));
        kite_buf_puts(d, dict_words[i]);
    }
    kite_buf_append(d, dict_tail, sizeof dict_tail - 1);
}

struct kite_spdy *kite_spdy_new(void) {
    struct kite_spdy *s = kite_calloc(1, sizeof *s);
    s->in_ok = inflateInit(&s->in) == Z_OK;
    s->out_ok = deflateInit(&s->out, Z_BEST_COMPRESSION) == Z_OK;
    if (s->out_ok) {
        struct kite_buf d = {0};
        dictionary(&d);
        s->out_ok = deflateSetDictionary(&s->out, (const Bytef *)d.p, (uInt)d.len) == Z_OK;
        kite_buf_release(&d);
    }
    return s;
}

void kite_spdy_free(struct kite_spdy *s) {
    if (!s) return;
    if (s->in_ok) inflateEnd(&s->in);
    if (s->out_ok) deflateEnd(&s->out);
    kite_buf_release(&s->buf);
    kite_buf_release(&s->block);
    free(s);
}

void kite_spdy_feed(struct kite_spdy *s, const void *data, size_t len) {
    if (s->off && s->off == s->buf.len) {
        kite_buf_reset(&s->buf);
        s->off = 0;
    } else if (s->off > 64 * 1024 && s->off * 2 > s->buf.len) {
        memmove(s->buf.p, s->buf.p + s->off, s->buf.len - s->off);
        s->buf.len -= s->off;
        s->off = 0;
    }
    kite_buf_append(&s->buf, data, len);
}

size_t kite_spdy_buffered(struct kite_spdy *s) { return s->buf.len - s->off; }

/* Inflates one header block (the sync-flushed piece of the connection's zlib stream) into
 * s->block. */
static int inflate_block(struct kite_spdy *s, const uint8_t *p, size_t len) {
    if (!s->in_ok) return -ENOMEM;
    kite_buf_reset(&s->block);
    s->in.next_in = (Bytef *)p;
    s->in.avail_in = (uInt)len;
    for (;;) {
        uint8_t chunk[4096];
        s->in.next_out = chunk;
        s->in.avail_out = sizeof chunk;
        int r = inflate(&s->in, Z_SYNC_FLUSH);
        if (r == Z_NEED_DICT) {
            struct kite_buf d = {0};
            dictionary(&d);
            r = inflateSetDictionary(&s->in, (const Bytef *)d.p, (uInt)d.len);
            kite_buf_release(&d);
            if (r != Z_OK) return -EPROTO;
            continue;
        }
        if (r != Z_OK && r != Z_BUF_ERROR) return -EPROTO;
        kite_buf_append(&s->block, chunk, sizeof chunk - s->in.avail_out);
        if (s->block.len > KITE_SPDY_MAX_HEADER_BLOCK) return -EMSGSIZE;
        if (r == Z_BUF_ERROR || (!s->in.avail_in && s->in.avail_out)) break;
    }
    return s->block.len > KITE_SPDY_MAX_HEADER_BLOCK ? -EMSGSIZE : 0;
}

/* Splits s->block into s->h (names and values NUL-terminated in place: the block is copied into
 * a buffer one byte per field longer). */
static int parse_block(struct kite_spdy *s) {
    s->n_h = 0;
    const uint8_t *p = (const uint8_t *)s->block.p, *end = p + s->block.len;
    if (end - p < 4) return -EPROTO;
    uint32_t n = get32(p);
    p += 4;
    if (n > KITE_SPDY_MAX_HEADERS) return -EMSGSIZE;
    /* room for the terminators: strings are laid out again after the block */
    struct kite_buf *b = &s->block;
    size_t base = b->len;
    kite_buf_grow(b, b->len + 2 * n + 1);
    p = (const uint8_t *)b->p + 4;
    end = (const uint8_t *)b->p + base;
    size_t offs[2 * KITE_SPDY_MAX_HEADERS];
    for (uint32_t i = 0; i < 2 * n; i++) {
        if (end - p < 4) return -EPROTO;
        uint32_t len = get32(p);
        p += 4;
        if ((size_t)(end - p) < len) return -EPROTO;
        size_t src = (size_t)(p - (const uint8_t *)b->p);
        offs[i] = b->len;
        kite_buf_append(b, b->p + src, len); /* grown in advance: b->p does not move */
        kite_buf_putc(b, 0);
        p = (const uint8_t *)b->p + src + len;
        end = (const uint8_t *)b->p + base;
    }
    for (uint32_t i = 0; i < n; i++) {
        s->h[i].name = b->p + offs[2 * i];
        s->h[i].value = b->p + offs[2 * i + 1];
    }
    s->n_h = n;
    return 0;
}

int kite_spdy_next(struct kite_spdy *s, struct kite_spdy_frame *f) {
    *f = (struct kite_spdy_frame){0};
    size_t avail = s->buf.len - s->off;
    if (avail < 8) return 0;
    const uint8_t *p = (const uint8_t *)s->buf.p + s->off;
    uint32_t w0 = get32(p), w1 = get32(p + 4);
    size_t len = w1 & 0xffffff;
    if (len > KITE_SPDY_MAX_FRAME) return -EMSGSIZE;
    if (avail < 8 + len) return 0;
    s->off += 8 + len;
    f->flags = (uint8_t)(w1 >> 24);
    f->data = p + 8;
    f->len = len;
    if (!(w0 & 0x80000000u)) {
        f->type = KITE_SPDY_DATA;
        f->stream = w0 & 0x7fffffff;
        return 1;
    }
    if (((w0 >> 16) & 0x7fff) != 3) return -EPROTO;
    f->type = (int)(w0 & 0xffff);
    const uint8_t *d = f->data;
    size_t hdr = 0; /* bytes before a header block */
    switch (f->type) {
    case KITE_SPDY_SYN_STREAM:
        if (len < 10) return -EPROTO;
        f->stream = get32(d) & 0x7fffffff;
        f->associated = get32(d + 4) & 0x7fffffff;
        hdr = 10;
        break;
    case KITE_SPDY_SYN_REPLY:
    case KITE_SPDY_HEADERS:
        if (len < 4) return -EPROTO;
        f->stream = get32(d) & 0x7fffffff;
        hdr = 4;
        break;
    case KITE_SPDY_RST_STREAM:
    case KITE_SPDY_GOAWAY:
    case KITE_SPDY_WINDOW_UPDATE:
        if (len < 8) return -EPROTO;
        f->stream = get32(d) & 0x7fffffff;
        f->value = get32(d + 4);
        if (f->type == KITE_SPDY_WINDOW_UPDATE) f->value &= 0x7fffffff;
        return 1;
    case KITE_SPDY_PING:
        if (len < 4) return -EPROTO;
        f->value = get32(d);
        return 1;
    case KITE_SPDY_SETTINGS: {
        if (len < 4) return -EPROTO;
        uint32_t n = get32(d);
        if (n > (len - 4) / 8) return -EPROTO;
        for (uint32_t i = 0; i < n; i++)
            if ((get32(d + 4 + 8 * i) & 0xffffff) == 7) f->value = get32(d + 8 + 8 * i); /* INITIAL_WINDOW_SIZE */
        return 1;
    }
    default:
        return 1;
    }
    int r = inflate_block(s, d + hdr, len - hdr);
    if (r == 0) r = parse_block(s);
    if (r < 0) return r;
    f->headers = s->h;
    f->n_headers = s->n_h;
    return 1;
}

const char *kite_spdy_header(const struct kite_spdy_frame *f, const char *name) {
    for (size_t i = 0; i < f->n_headers; i++)
        if (strcmp(f->headers[i].name, name) == 0) return f->headers[i].value;
    return NULL;
}

static void control_head(struct kite_buf *out, int type, uint8_t flags, size_t len) {
    put32(out, 0x80000000u | 3u << 16 | (uint32_t)type);
    put32(out, (uint32_t)flags << 24 | (uint32_t)(len & 0xffffff));
}

/* A header block through the connection's compressor, sync-flushed. */
static void deflate_block(struct kite_spdy *s, const struct kite_spdy_header *h, size_t n, struct kite_buf *z) {
    struct kite_buf raw = {0};
    put32(&raw, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(h[i].name);
        put32(&raw, (uint32_t)nl);
        for (size_t k = 0; k < nl; k++) {
            char c = h[i].name[k];
            kite_buf_putc(&raw, c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c);
        }
        put32(&raw, (uint32_t)strlen(h[i].value));
        kite_buf_puts(&raw, h[i].value);
    }
    if (!s->out_ok) abort(); /* the compressor could not be made: out of memory */
    s->out.next_in = (Bytef *)raw.p;
    s->out.avail_in = (uInt)raw.len;
    do {
        kite_buf_grow(z, raw.len + 64);
        s->out.next_out = (Bytef *)z->p + z->len;
        s->out.avail_out = (uInt)(z->cap - z->len - 1);
        deflate(&s->out, Z_SYNC_FLUSH);
        z->len = z->cap - 1 - s->out.avail_out;
        z->p[z->len] = 0;
    } while (s->out.avail_out == 0 || s->out.avail_in);
    kite_buf_release(&raw);
}

void kite_spdy_syn_stream(struct kite_spdy *s, struct kite_buf *out, uint32_t stream, uint8_t flags,
                          const struct kite_spdy_header *h, size_t n) {
    struct kite_buf z = {0};
    deflate_block(s, h, n, &z);
    control_head(out, KITE_SPDY_SYN_STREAM, flags, 10 + z.len);
    put32(out, stream & 0x7fffffff);
    put32(out, 0);
    kite_buf_putc(out, 0); /* priority */
    kite_buf_putc(out, 0); /* slot */
    kite_buf_append(out, z.p, z.len);
    kite_buf_release(&z);
}

void kite_spdy_syn_reply(struct kite_spdy *s, struct kite_buf *out, uint32_t stream, uint8_t flags,
                         const struct kite_spdy_header *h, size_t n) {
    struct kite_buf z = {0};
    deflate_block(s, h, n, &z);
    control_head(out, KITE_SPDY_SYN_REPLY, flags, 4 + z.len);
    put32(out, stream & 0x7fffffff);
    kite_buf_append(out, z.p, z.len);
    kite_buf_release(&z);
}

void kite_spdy_data(struct kite_buf *out, uint32_t stream, uint8_t flags, const void *data, size_t len) {
    put32(out, stream & 0x7fffffff);
    put32(out, (uint32_t)flags << 24 | (uint32_t)(len & 0xffffff));
    if (len) kite_buf_append(out, data, len);
}

void kite_spdy_rst_stream(struct kite_buf *out, uint32_t stream, uint32_t status) {
    control_head(out, KITE_SPDY_RST_STREAM, 0, 8);
    put32(out, stream & 0x7fffffff);
    put32(out, status);
}

void kite_spdy_ping(struct kite_buf *out, uint32_t id) {
    control_head(out, KITE_SPDY_PING, 0, 4);
    put32(out, id);
}

void kite_spdy_goaway(struct kite_buf *out, uint32_t last_good, uint32_t status) {
    control_head(out, KITE_SPDY_GOAWAY, 0, 8);
    put32(out, last_good & 0x7fffffff);
    put32(out, status);
}

void kite_spdy_window_update(struct kite_buf *out, uint32_t stream, uint32_t delta) {
    control_head(out, KITE_SPDY_WINDOW_UPDATE, 0, 8);
    put32(out, stream & 0x7fffffff);
    put32(out, delta & 0x7fffffff);
}

void kite_spdy_settings_window(struct kite_buf *out, uint32_t window) {
    control_head(out, KITE_SPDY_SETTINGS, 0, 12);
    put32(out, 1);
    put32(out, 7); /* no flags, INITIAL_WINDOW_SIZE */
    put32(out, window);
}
