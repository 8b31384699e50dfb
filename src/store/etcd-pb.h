/* The protobuf wire format and gRPC message framing, as much of them as etcd's v3 API needs
 * (etcd.c). Messages are written and read field by field after etcd's published
 * api/etcdserverpb/rpc.proto and api/mvccpb/kv.proto; the field numbers used are named where
 * they are written (ETCD_* below). Only varint (0) and length-delimited (2) fields are written;
 * the reader also skips 64-bit (1) and 32-bit (5) fields. */
#pragma once
#include "base/base.h"
#include "base/buf.h"

/* ---- writing ---- */
void kite_store_pb_put_varint(struct kite_buf *b, uint64_t v);
/* A varint field; nothing is written for 0 (proto3 default). */
void kite_store_pb_put_uint(struct kite_buf *b, unsigned field, uint64_t v);
/* A length-delimited field (bytes, string, or an encoded sub-message); written even when empty. */
void kite_store_pb_put_bytes(struct kite_buf *b, unsigned field, const void *data, size_t len);
/* Sub-messages: pb_begin reserves room for the length and returns a mark, pb_end fills it in. */
size_t kite_store_pb_begin(struct kite_buf *b, unsigned field);
void kite_store_pb_end(struct kite_buf *b, size_t mark);

/* ---- reading ---- */
struct pb_reader {
    const unsigned char *p, *end;
};
struct pb_field {
    unsigned field, wire;
    uint64_t u;              /* varint, fixed64, fixed32 */
    const unsigned char *data; /* length-delimited */
    size_t len;
};
static inline struct pb_reader pb_reader(const void *data, size_t len) {
    return (struct pb_reader){data, (const unsigned char *)data + len};
}
/* The next field: 1, 0 at the end, -EBADMSG on malformed input (truncation, a bad varint, a
 * group or unknown wire type). */
int kite_store_pb_next(struct pb_reader *r, struct pb_field *f);
/* A length-delimited field's contents as a sub-reader. */
static inline struct pb_reader pb_sub(const struct pb_field *f) { return pb_reader(f->data, f->len); }

/* ---- gRPC length-prefixed messages (gRPC over HTTP/2, "Length-Prefixed-Message") ---- */
#define GRPC_HEADER_LEN 5
/* Largest message accepted from the server (etcd's default --max-request-bytes is 1.5 MiB; a
 * Range of many objects is larger: kube-apiserver's client accepts up to 2 GiB). */
#define GRPC_MESSAGE_MAX (256u * 1024 * 1024)
/* Appends the 5-byte prefix (uncompressed, big-endian length) and the message. */
void kite_store_grpc_frame(struct kite_buf *b, const void *msg, size_t len);
/* Splits complete messages off the front of buf (bytes received so far on a stream): calls
 * cb(ud, msg, len) for each, then keeps the incomplete rest in buf. 0, or -EBADMSG for a
 * compressed message (none was asked for) or one over GRPC_MESSAGE_MAX, or what cb returned
 * when it returned < 0 (it stops there). */
int kite_store_grpc_deframe(struct kite_buf *buf, int (*cb)(void *ud, const unsigned char *msg, size_t len), void *ud);
/* The grpc-message header's percent-decoding (gRPC's "Percent-Encoded"). Caller frees. */
char *kite_store_grpc_percent_decode(const char *s, size_t len);
