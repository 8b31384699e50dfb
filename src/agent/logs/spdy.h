/* SPDY/3.1 framing as Kubernetes port-forward speaks it (kubectl and client-go's spdystream;
 * the SPDY/3.1 draft): frames in, frames out, no I/O, unit-tested.
 *
 * A frame is 8 bytes of head and its payload. Control frames: bit 31 set, version 3 in bits
 * 16-30, the type in the low 16 bits; then flags (8 bits) and length (24 bits). Data frames:
 * bit 31 clear, the stream id in the other 31; then flags and length. Header blocks (SYN_STREAM,
 * SYN_REPLY, HEADERS) are a 32-bit count of pairs, each a 32-bit length and a name (lower case),
 * a 32-bit length and a value (several values joined by NUL), compressed with zlib with the
 * SPDY/3 dictionary: one zlib stream per direction for the connection's life, each block ended
 * by a sync flush. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

enum {
    KITE_SPDY_DATA = 0, /* not a control type: a data frame */
    KITE_SPDY_SYN_STREAM = 1,
    KITE_SPDY_SYN_REPLY = 2,
    KITE_SPDY_RST_STREAM = 3,
    KITE_SPDY_SETTINGS = 4,
    KITE_SPDY_PING = 6,
    KITE_SPDY_GOAWAY = 7,
    KITE_SPDY_HEADERS = 8,
    KITE_SPDY_WINDOW_UPDATE = 9,
};
#define KITE_SPDY_FLAG_FIN 0x01
#define KITE_SPDY_FLAG_UNIDIRECTIONAL 0x02
/* RST_STREAM status codes */
#define KITE_SPDY_PROTOCOL_ERROR 1
#define KITE_SPDY_INVALID_STREAM 2
#define KITE_SPDY_REFUSED_STREAM 3
#define KITE_SPDY_CANCEL 5
#define KITE_SPDY_INTERNAL_ERROR 6
#define KITE_SPDY_FRAME_TOO_LARGE 11

/* Limits of what is accepted from the peer: a frame's payload (the whole frame waits in memory
 * before it is handled: -EMSGSIZE), a header block once inflated, its pairs. */
#define KITE_SPDY_MAX_FRAME (1u << 20)
#define KITE_SPDY_MAX_HEADER_BLOCK (64u * 1024)
#define KITE_SPDY_MAX_HEADERS 64

struct kite_spdy_header {
    char *name, *value;
};

/* One frame as read. Data and headers stay valid until the next kite_spdy_next. */
struct kite_spdy_frame {
    int type;           /* KITE_SPDY_DATA or a control type */
    uint8_t flags;
    uint32_t stream;    /* data, SYN_STREAM, SYN_REPLY, RST_STREAM, HEADERS, WINDOW_UPDATE;
                           GOAWAY: the last good stream */
    uint32_t value;     /* RST_STREAM, GOAWAY: the status; PING: its id; WINDOW_UPDATE: the
                           delta; SETTINGS: the initial window size (0 when not set) */
    uint32_t associated;/* SYN_STREAM */
    const uint8_t *data;
    size_t len;
    struct kite_spdy_header *headers;
    size_t n_headers;
};

struct kite_spdy;
struct kite_spdy *kite_spdy_new(void);
void kite_spdy_free(struct kite_spdy *s);

/* Bytes from the peer, in any pieces (a frame may span many, one piece may hold many). */
void kite_spdy_feed(struct kite_spdy *s, const void *data, size_t len);
/* Bytes fed and not yet taken as frames. */
size_t kite_spdy_buffered(struct kite_spdy *s);
/* The next complete frame: 1 with *f, 0 when more bytes are needed, or -errno for a stream that
 * cannot go on: -EMSGSIZE (a frame past KITE_SPDY_MAX_FRAME, a header block past its limits),
 * -EPROTO (a version other than 3, a header block that does not inflate or parse). Unknown
 * control types come back as they are (type set, payload in data) for the caller to ignore. */
int kite_spdy_next(struct kite_spdy *s, struct kite_spdy_frame *f);
/* The value of header name (lower case) in f, or NULL. */
const char *kite_spdy_header(const struct kite_spdy_frame *f, const char *name);

/* Frames appended to out. Header blocks go through s's compressor (a connection's frames must
 * be written in the order they were made). */
void kite_spdy_syn_stream(struct kite_spdy *s, struct kite_buf *out, uint32_t stream, uint8_t flags,
                          const struct kite_spdy_header *h, size_t n);
void kite_spdy_syn_reply(struct kite_spdy *s, struct kite_buf *out, uint32_t stream, uint8_t flags,
                         const struct kite_spdy_header *h, size_t n);
void kite_spdy_data(struct kite_buf *out, uint32_t stream, uint8_t flags, const void *data, size_t len);
void kite_spdy_rst_stream(struct kite_buf *out, uint32_t stream, uint32_t status);
void kite_spdy_ping(struct kite_buf *out, uint32_t id);
void kite_spdy_goaway(struct kite_buf *out, uint32_t last_good, uint32_t status);
void kite_spdy_window_update(struct kite_buf *out, uint32_t stream, uint32_t delta);
/* SETTINGS with one entry: the initial window size. */
void kite_spdy_settings_window(struct kite_buf *out, uint32_t window);
