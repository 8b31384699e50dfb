/* The etcd backend's protobuf reader and gRPC deframer (src/store/etcd-pb.c) on what an etcd
 * member (or anything answering on its port) sends: every field read stays inside the input,
 * sub-messages are read recursively as the backend does, and a message re-framed and deframed
 * comes back whole. */
#include "fuzz_common.h"
#include "store/etcd-pb.h"

static size_t walk(struct pb_reader r, int depth) {
    struct pb_field f;
    size_t n = 0;
    int k;
    while ((k = kite_store_pb_next(&r, &f)) > 0) {
        n++;
        if (f.wire == 2) {
            if (f.data < r.p - f.len || f.data + f.len != r.p) abort(); /* the field lies where it was read */
            if (depth < 8) n += walk(pb_sub(&f), depth + 1);
        }
    }
    return n;
}

static int count(void *ud, const unsigned char *msg, size_t len) {
    size_t *n = ud;
    (*n)++;
    walk(pb_reader(msg, len), 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    walk(pb_reader(data, n), 0);
    /* as a stream of gRPC messages, fed in two pieces */
    struct kite_buf in = {0};
    size_t got = 0, half = n / 2;
    kite_buf_append(&in, data, half);
    int r = kite_store_grpc_deframe(&in, count, &got);
    if (r == 0) {
        kite_buf_append(&in, data + half, n - half);
        kite_store_grpc_deframe(&in, count, &got);
    }
    kite_buf_release(&in);
    /* framing round trip */
    struct kite_buf b = {0};
    kite_store_grpc_frame(&b, data, n);
    size_t one = 0;
    if (kite_store_grpc_deframe(&b, count, &one) < 0 && n <= GRPC_MESSAGE_MAX) abort();
    if (n <= GRPC_MESSAGE_MAX && (one != 1 || b.len != 0)) abort();
    kite_buf_release(&b);
    char *s = kite_store_grpc_percent_decode((const char *)data, n);
    if (strlen(s) > n) abort();
    free(s);
    return 0;
}
