/* The protobuf wire format and gRPC message framing for the etcd backend (etcd-pb.h). */
#include "store/etcd-pb.h"

void kite_store_pb_put_varint(struct kite_buf *b, uint64_t v) {
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    kite_buf_append(b, tmp, n);
}

void kite_store_pb_put_uint(struct kite_buf *b, unsigned field, uint64_t v) {
    if (!v) return;
    kite_store_pb_put_varint(b, (uint64_t)field << 3);
    kite_store_pb_put_varint(b, v);
}

void kite_store_pb_put_bytes(struct kite_buf *b, unsigned field, const void *data, size_t len) {
    kite_store_pb_put_varint(b, (uint64_t)field << 3 | 2);
    kite_store_pb_put_varint(b, len);
    if (len) kite_buf_append(b, data, len);
}

size_t kite_store_pb_begin(struct kite_buf *b, unsigned field) {
    kite_store_pb_put_varint(b, (uint64_t)field << 3 | 2);
    return b->len;
}

void kite_store_pb_end(struct kite_buf *b, size_t mark) {
    size_t len = b->len - mark;
    struct kite_buf v = {0};
    kite_store_pb_put_varint(&v, len);
    kite_buf_grow(b, v.len);
    memmove(b->p + mark + v.len, b->p + mark, len);
    memcpy(b->p + mark, v.p, v.len);
    b->len += v.len;
    kite_buf_release(&v);
}

static int get_varint(struct pb_reader *r, uint64_t *ret) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return -EBADMSG;
        unsigned char c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *ret = v;
            return 0;
        }
    }
    return -EBADMSG;
}

int kite_store_pb_next(struct pb_reader *r, struct pb_field *f) {
    if (r->p >= r->end) return 0;
    uint64_t tag;
    if (get_varint(r, &tag) < 0 || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX) return -EBADMSG;
    *f = (struct pb_field){.field = (unsigned)(tag >> 3), .wire = (unsigned)(tag & 7)};
    switch (f->wire) {
    case 0:
        return get_varint(r, &f->u) < 0 ? -EBADMSG : 1;
    case 1:
    case 5: {
        size_t n = f->wire == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n) return -EBADMSG;
        for (size_t i = 0; i < n; i++) f->u |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        return 1;
    }
    case 2: {
        uint64_t len;
        if (get_varint(r, &len) < 0 || len > (uint64_t)(r->end - r->p)) return -EBADMSG;
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return 1;
    }
    default:
        return -EBADMSG;
    }
}

void kite_store_grpc_frame(struct kite_buf *b, const void *msg, size_t len) {
    unsigned char h[GRPC_HEADER_LEN] = {0, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                                        (unsigned char)(len >> 8), (unsigned char)len};
    kite_buf_append(b, h, sizeof h);
    if (len) kite_buf_append(b, msg, len);
}

int kite_store_grpc_deframe(struct kite_buf *buf, int (*cb)(void *ud, const unsigned char *msg, size_t len), void *ud) {
    const unsigned char *p = (const unsigned char *)buf->p;
    size_t off = 0;
    int r = 0;
    while (buf->len - off >= GRPC_HEADER_LEN) {
        const unsigned char *h = p + off;
        uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
        if (h[0] != 0 || len > GRPC_MESSAGE_MAX) {
            r = -EBADMSG;
            break;
        }
        if (buf->len - off - GRPC_HEADER_LEN < len) break;
        r = cb(ud, h + GRPC_HEADER_LEN, len);
        off += GRPC_HEADER_LEN + len;
        if (r < 0) break;
    }
    if (off) {
        memmove(buf->p, buf->p + off, buf->len - off);
        buf->len -= off;
    }
    return r < 0 ? r : 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *kite_store_grpc_percent_decode(const char *s, size_t len) {
    char *out = kite_malloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < len && (hi = hexval(s[i + 1])) >= 0 &&
            (lo = hexval(s[i + 2])) >= 0) {
            out[n++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[n++] = s[i];
        }
    }
    out[n] = 0;
    return out;
}
