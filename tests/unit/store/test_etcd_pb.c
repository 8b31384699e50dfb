/* The etcd backend's protobuf wire format and gRPC framing (src/store/etcd-pb.c), checked against
 * bytes protoc writes for etcd's messages. */
#include <criterion/criterion.h>

#include "store/etcd-pb.h"

Test(etcd_pb, varints_as_protobuf_writes_them) {
    struct kite_buf b = {0};
    kite_store_pb_put_varint(&b, 0);
    kite_store_pb_put_varint(&b, 1);
    kite_store_pb_put_varint(&b, 300);
    kite_store_pb_put_varint(&b, UINT64_MAX);
    static const unsigned char want[] = {0x00, 0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0x01};
    cr_assert_eq(b.len, sizeof want);
    cr_assert(memcmp(b.p, want, sizeof want) == 0);
    kite_buf_release(&b);
}

Test(etcd_pb, a_range_request_matches_protoc) {
    /* etcdserverpb.RangeRequest{key: "/registry/pods/", range_end: "/registry/pods0", limit: 500,
     * revision: 1234}, as `protoc --encode` writes it */
    struct kite_buf b = {0};
    kite_store_pb_put_bytes(&b, 1, "/registry/pods/", 15);
    kite_store_pb_put_bytes(&b, 2, "/registry/pods0", 15);
    kite_store_pb_put_uint(&b, 3, 500);
    kite_store_pb_put_uint(&b, 4, 1234);
    kite_store_pb_put_uint(&b, 7, 0); /* a zero field is left out, as proto3 does */
    static const unsigned char want[] = "\x0a\x0f/registry/pods/\x12\x0f/registry/pods0\x18\xf4\x03\x20\xd2\x09";
    cr_assert_eq(b.len, sizeof want - 1);
    cr_assert(memcmp(b.p, want, b.len) == 0);
    kite_buf_release(&b);
}

Test(etcd_pb, nested_messages_get_their_length_after_the_fact) {
    struct kite_buf b = {0};
    size_t m = kite_store_pb_begin(&b, 2);
    size_t n = kite_store_pb_begin(&b, 2); /* RequestOp.request_put */
    char big[200];
    memset(big, 'v', sizeof big);
    kite_store_pb_put_bytes(&b, 1, "k", 1);
    kite_store_pb_put_bytes(&b, 2, big, sizeof big); /* pushes the outer lengths past one byte */
    kite_store_pb_end(&b, n);
    kite_store_pb_end(&b, m);
    struct pb_reader r = pb_reader(b.p, b.len);
    struct pb_field f;
    cr_assert_eq(kite_store_pb_next(&r, &f), 1);
    cr_assert_eq(f.field, 2);
    cr_assert_eq(f.wire, 2);
    /* inner tag + 2-byte length (206), key (3), value tag + 2-byte length + 200 */
    cr_assert_eq(f.len, 3 + 3 + 3 + 200, "%zu", f.len);
    struct pb_reader in = pb_sub(&f);
    cr_assert_eq(kite_store_pb_next(&in, &f), 1);
    cr_assert_eq(f.field, 2);
    struct pb_reader put = pb_sub(&f);
    cr_assert_eq(kite_store_pb_next(&put, &f), 1);
    cr_assert_eq(f.len, 1);
    cr_assert_eq(f.data[0], 'k');
    cr_assert_eq(kite_store_pb_next(&put, &f), 1);
    cr_assert_eq(f.len, 200);
    cr_assert_eq(kite_store_pb_next(&put, &f), 0);
    cr_assert_eq(kite_store_pb_next(&r, &f), 0);
    kite_buf_release(&b);
}

Test(etcd_pb, reads_fixed_fields_and_refuses_damage) {
    /* a fixed64 (wire 1) and a fixed32 (wire 5) are skipped over with their values */
    static const unsigned char ok[] = {0x09, 1, 0, 0, 0, 0, 0, 0, 0, 0x15, 2, 0, 0, 0, 0x18, 7};
    struct pb_reader r = pb_reader(ok, sizeof ok);
    struct pb_field f;
    cr_assert_eq(kite_store_pb_next(&r, &f), 1);
    cr_assert_eq(f.u, 1);
    cr_assert_eq(kite_store_pb_next(&r, &f), 1);
    cr_assert_eq(f.u, 2);
    cr_assert_eq(kite_store_pb_next(&r, &f), 1);
    cr_assert_eq(f.field, 3);
    cr_assert_eq(f.u, 7);
    cr_assert_eq(kite_store_pb_next(&r, &f), 0);
    /* a length past the end, a truncated varint, field 0, a group */
    static const unsigned char past[] = {0x0a, 0x05, 'a'}, trunc[] = {0x08, 0x80}, zero[] = {0x00, 0x01},
                               group[] = {0x0b};
    r = pb_reader(past, sizeof past);
    cr_assert_eq(kite_store_pb_next(&r, &f), -EBADMSG);
    r = pb_reader(trunc, sizeof trunc);
    cr_assert_eq(kite_store_pb_next(&r, &f), -EBADMSG);
    r = pb_reader(zero, sizeof zero);
    cr_assert_eq(kite_store_pb_next(&r, &f), -EBADMSG);
    r = pb_reader(group, sizeof group);
    cr_assert_eq(kite_store_pb_next(&r, &f), -EBADMSG);
}

struct got {
    int n;
    size_t lens[8];
    char first[16];
};

static int collect(void *ud, const unsigned char *msg, size_t len) {
    struct got *g = ud;
    if (g->n == 0 && len < sizeof g->first) memcpy(g->first, msg, len);
    g->lens[g->n++] = len;
    return 0;
}

Test(etcd_pb, grpc_messages_split_across_data_frames) {
    struct kite_buf wire = {0};
    kite_store_grpc_frame(&wire, "hello", 5);
    kite_store_grpc_frame(&wire, "", 0);
    kite_store_grpc_frame(&wire, "world!", 6);
    static const unsigned char head[] = {0, 0, 0, 0, 5, 'h'};
    cr_assert(memcmp(wire.p, head, sizeof head) == 0);
    /* fed one byte at a time, as HTTP/2 DATA frames may cut them */
    struct kite_buf in = {0};
    struct got g = {0};
    for (size_t i = 0; i < wire.len; i++) {
        kite_buf_append(&in, wire.p + i, 1);
        cr_assert_eq(kite_store_grpc_deframe(&in, collect, &g), 0);
    }
    cr_assert_eq(g.n, 3);
    cr_assert_eq(g.lens[0], 5);
    cr_assert_eq(g.lens[1], 0);
    cr_assert_eq(g.lens[2], 6);
    cr_assert_str_eq(g.first, "hello");
    cr_assert_eq(in.len, 0);
    /* a compressed message (flag 1) was never asked for; a length over the limit is refused */
    static const unsigned char comp[] = {1, 0, 0, 0, 1, 'x'}, huge[] = {0, 0x7f, 0xff, 0xff, 0xff};
    kite_buf_append(&in, comp, sizeof comp);
    cr_assert_eq(kite_store_grpc_deframe(&in, collect, &g), -EBADMSG);
    kite_buf_reset(&in);
    kite_buf_append(&in, huge, sizeof huge);
    cr_assert_eq(kite_store_grpc_deframe(&in, collect, &g), -EBADMSG);
    kite_buf_release(&in);
    kite_buf_release(&wire);
}

Test(etcd_pb, grpc_message_percent_decoding) {
    char *s = kite_store_grpc_percent_decode("etcdserver: mvcc: required revision has been compacted%21%zz%", 61);
    cr_assert_str_eq(s, "etcdserver: mvcc: required revision has been compacted!%zz%");
    free(s);
}
