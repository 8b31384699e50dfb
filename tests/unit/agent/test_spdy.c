/* SPDY/3.1 framing (spdy.h): every frame type the port-forward session writes read back by the
 * reader, header blocks through one zlib stream per direction across frames, frames fed a byte
 * at a time, the dictionary's id, and what the reader refuses. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "agent/logs/spdy.h"

/* Feeds all of b to r and takes the one frame it holds. */
static void one(struct kite_spdy *r, struct kite_buf *b, struct kite_spdy_frame *f) {
    kite_spdy_feed(r, b->p, b->len);
    cr_assert_eq(kite_spdy_next(r, f), 1);
    cr_assert_eq(kite_spdy_buffered(r), 0);
}

Test(spdy, header_blocks_round_trip_across_frames) {
    struct kite_spdy *w = kite_spdy_new(), *r = kite_spdy_new();
    struct kite_buf b = {0};
    struct kite_spdy_frame f;
    /* what kubectl sends for one forwarded connection, names in any case (written lower) */
    for (int req = 0; req < 3; req++) {
        char id[16];
        snprintf(id, sizeof id, "%d", req);
        struct kite_spdy_header h[] = {{"StreamType", "error"}, {"Port", "8080"}, {"RequestID", id}};
        kite_spdy_syn_stream(w, &b, (uint32_t)(4 * req + 1), 0, h, 3);
        one(r, &b, &f);
        kite_buf_reset(&b);
        cr_assert_eq(f.type, KITE_SPDY_SYN_STREAM);
        cr_assert_eq(f.stream, (uint32_t)(4 * req + 1));
        cr_assert_eq(f.n_headers, 3);
        cr_assert_str_eq(kite_spdy_header(&f, "streamtype"), "error");
        cr_assert_str_eq(kite_spdy_header(&f, "port"), "8080");
        cr_assert_str_eq(kite_spdy_header(&f, "requestid"), id);
        cr_assert_null(kite_spdy_header(&f, "StreamType"));
        struct kite_spdy_header d[] = {{"streamtype", "data"}, {"port", "8080"}, {"requestid", id}};
        kite_spdy_syn_stream(w, &b, (uint32_t)(4 * req + 3), KITE_SPDY_FLAG_FIN, d, 3);
        one(r, &b, &f);
        kite_buf_reset(&b);
        cr_assert_eq(f.flags, KITE_SPDY_FLAG_FIN);
        cr_assert_str_eq(kite_spdy_header(&f, "streamtype"), "data");
    }
    /* an empty block (the agent's SYN_REPLY) */
    kite_spdy_syn_reply(w, &b, 7, 0, NULL, 0);
    one(r, &b, &f);
    cr_assert_eq(f.type, KITE_SPDY_SYN_REPLY);
    cr_assert_eq(f.stream, 7);
    cr_assert_eq(f.n_headers, 0);
    kite_buf_release(&b);
    kite_spdy_free(w);
    kite_spdy_free(r);
}

Test(spdy, dictionary_is_spdy3s) {
    /* the zlib header of the first block names the dictionary by its Adler-32: SPDY/3's */
    struct kite_spdy *w = kite_spdy_new();
    struct kite_buf b = {0};
    kite_spdy_syn_reply(w, &b, 1, 0, NULL, 0);
    const uint8_t *z = (const uint8_t *)b.p + 12;
    cr_assert(z[1] & 0x20, "FDICT set");
    uint32_t id = (uint32_t)z[2] << 24 | (uint32_t)z[3] << 16 | (uint32_t)z[4] << 8 | z[5];
    cr_assert_eq(id, 0xe3c6a7c2u);
    kite_buf_release(&b);
    kite_spdy_free(w);
}

Test(spdy, control_and_data_frames_round_trip) {
    struct kite_spdy *r = kite_spdy_new();
    struct kite_buf b = {0};
    kite_spdy_data(&b, 3, 0, "hello", 5);
    kite_spdy_data(&b, 3, KITE_SPDY_FLAG_FIN, NULL, 0);
    kite_spdy_rst_stream(&b, 5, KITE_SPDY_CANCEL);
    kite_spdy_ping(&b, 9);
    kite_spdy_goaway(&b, 11, 0);
    kite_spdy_window_update(&b, 0, 65536);
    kite_spdy_settings_window(&b, 1 << 20);
    /* on the wire: a data frame is the stream id, flags and length, then the bytes */
    cr_assert_eq(memcmp(b.p, "\0\0\0\x03\0\0\0\x05hello", 13), 0);
    /* a control frame: 0x8003, its type, flags and length */
    cr_assert_eq(memcmp(b.p + 21, "\x80\x03\0\x03\0\0\0\x08\0\0\0\x05\0\0\0\x05", 16), 0);
    /* byte by byte: nothing until each frame is whole */
    struct kite_spdy_frame f;
    int got = 0;
    struct kite_spdy_frame seen[8];
    uint8_t keep[8][8];
    for (size_t i = 0; i < b.len; i++) {
        kite_spdy_feed(r, b.p + i, 1);
        int k;
        while ((k = kite_spdy_next(r, &f)) == 1) {
            cr_assert_lt(got, 8);
            seen[got] = f;
            memcpy(keep[got], f.data, f.len < 8 ? f.len : 8);
            got++;
        }
        cr_assert_eq(k, 0);
    }
    cr_assert_eq(got, 7);
    cr_assert_eq(seen[0].type, KITE_SPDY_DATA);
    cr_assert_eq(seen[0].stream, 3);
    cr_assert_eq(seen[0].len, 5);
    cr_assert_eq(memcmp(keep[0], "hello", 5), 0);
    cr_assert_eq(seen[1].flags, KITE_SPDY_FLAG_FIN);
    cr_assert_eq(seen[1].len, 0);
    cr_assert_eq(seen[2].type, KITE_SPDY_RST_STREAM);
    cr_assert_eq(seen[2].stream, 5);
    cr_assert_eq(seen[2].value, KITE_SPDY_CANCEL);
    cr_assert_eq(seen[3].type, KITE_SPDY_PING);
    cr_assert_eq(seen[3].value, 9);
    cr_assert_eq(seen[4].type, KITE_SPDY_GOAWAY);
    cr_assert_eq(seen[4].stream, 11);
    cr_assert_eq(seen[5].type, KITE_SPDY_WINDOW_UPDATE);
    cr_assert_eq(seen[5].stream, 0);
    cr_assert_eq(seen[5].value, 65536);
    cr_assert_eq(seen[6].type, KITE_SPDY_SETTINGS);
    cr_assert_eq(seen[6].value, 1u << 20);
    kite_buf_release(&b);
    kite_spdy_free(r);
}

Test(spdy, header_block_split_over_many_feeds) {
    /* kubectl's framer writes a frame in several writes, each its own WebSocket message */
    struct kite_spdy *w = kite_spdy_new(), *r = kite_spdy_new();
    struct kite_buf b = {0};
    struct kite_spdy_header h[] = {{"streamtype", "data"}, {"port", "65535"}, {"requestid", "12"}};
    kite_spdy_syn_stream(w, &b, 1, 0, h, 3);
    kite_spdy_data(&b, 1, 0, "x", 1);
    struct kite_spdy_frame f;
    kite_spdy_feed(r, b.p, 4);
    cr_assert_eq(kite_spdy_next(r, &f), 0);
    kite_spdy_feed(r, b.p + 4, 4);
    cr_assert_eq(kite_spdy_next(r, &f), 0);
    kite_spdy_feed(r, b.p + 8, b.len - 8);
    cr_assert_eq(kite_spdy_next(r, &f), 1);
    cr_assert_str_eq(kite_spdy_header(&f, "port"), "65535");
    cr_assert_eq(kite_spdy_next(r, &f), 1);
    cr_assert_eq(f.type, KITE_SPDY_DATA);
    cr_assert_eq(kite_spdy_next(r, &f), 0);
    kite_buf_release(&b);
    kite_spdy_free(w);
    kite_spdy_free(r);
}

Test(spdy, refuses_what_cannot_go_on) {
    struct kite_spdy_frame f;
    /* a frame past KITE_SPDY_MAX_FRAME: refused from its head, before its bytes */
    struct kite_spdy *r = kite_spdy_new();
    kite_spdy_feed(r, "\0\0\0\x01\0\x20\0\0", 8);
    cr_assert_eq(kite_spdy_next(r, &f), -EMSGSIZE);
    kite_spdy_free(r);
    /* SPDY/2 */
    r = kite_spdy_new();
    kite_spdy_feed(r, "\x80\x02\0\x06\0\0\0\x04\0\0\0\x01", 12);
    cr_assert_eq(kite_spdy_next(r, &f), -EPROTO);
    kite_spdy_free(r);
    /* a header block that is not zlib */
    r = kite_spdy_new();
    kite_spdy_feed(r, "\x80\x03\0\x02\0\0\0\x08\0\0\0\x01garb", 16);
    cr_assert_eq(kite_spdy_next(r, &f), -EPROTO);
    kite_spdy_free(r);
    /* a header block that inflates past its limit (zeros compress well) */
    struct kite_spdy *w = kite_spdy_new();
    r = kite_spdy_new();
    char *big = calloc(1, KITE_SPDY_MAX_HEADER_BLOCK + 1);
    memset(big, 'a', KITE_SPDY_MAX_HEADER_BLOCK);
    struct kite_spdy_header h[] = {{"x", big}};
    struct kite_buf b = {0};
    kite_spdy_syn_stream(w, &b, 1, 0, h, 1);
    kite_spdy_feed(r, b.p, b.len);
    cr_assert_eq(kite_spdy_next(r, &f), -EMSGSIZE);
    free(big);
    kite_buf_release(&b);
    kite_spdy_free(w);
    kite_spdy_free(r);
    /* a count of pairs the block does not hold */
    w = kite_spdy_new();
    r = kite_spdy_new();
    struct kite_spdy_header one_h[] = {{"a", "b"}};
    kite_spdy_syn_reply(w, &b, 1, 0, one_h, 1);
    /* re-make it by hand: a block claiming 2 pairs with 1 inside */
    kite_buf_reset(&b);
    z_stream z = {0};
    deflateInit(&z, 9);
    uint8_t raw[] = {0, 0, 0, 2, 0, 0, 0, 1, 'a', 0, 0, 0, 1, 'b'};
    uint8_t out[256];
    z.next_in = raw;
    z.avail_in = sizeof raw;
    z.next_out = out;
    z.avail_out = sizeof out;
    deflate(&z, Z_SYNC_FLUSH);
    size_t zl = sizeof out - z.avail_out;
    deflateEnd(&z);
    uint8_t head[12] = {0x80, 3, 0, 2, 0, 0, 0, (uint8_t)(4 + zl), 0, 0, 0, 1};
    kite_spdy_feed(r, head, 12);
    kite_spdy_feed(r, out, zl);
    cr_assert_lt(kite_spdy_next(r, &f), 0); /* (no dictionary, or short: refused either way) */
    kite_buf_release(&b);
    kite_spdy_free(w);
    kite_spdy_free(r);
}
