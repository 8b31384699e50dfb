/* The Kubernetes channel protocols over WebSocket (k8s.io/apimachinery wsstream, the kubelet's
 * remotecommand server): every message is one channel's bytes, the channel's number in the
 * first byte (binary protocols) or as an ASCII digit before base64 text (base64.channel.k8s.io).
 * Channels: 0 stdin, 1 stdout, 2 stderr, 3 error (v4+: a Status JSON with the exit code), 4
 * resize ({"Width":W,"Height":H}); v5 adds channel 255, whose message [c] closes channel c
 * (stdin's end of file). The framing itself (RFC 6455) is libwslay's; this file is the glue
 * that has no I/O, unit-tested. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

enum kite_wsch_proto {
    KITE_WSCH_NONE,
    KITE_WSCH_V1,     /* channel.k8s.io: errors as text */
    KITE_WSCH_BASE64, /* base64.channel.k8s.io: text frames */
    KITE_WSCH_V2,     /* v2.channel.k8s.io */
    KITE_WSCH_V3,     /* v3.channel.k8s.io: + resize */
    KITE_WSCH_V4,     /* v4.channel.k8s.io: errors as Status JSON with the exit code */
    KITE_WSCH_V5,     /* v5.channel.k8s.io: + the close signal */
};

#define KITE_WSCH_STDIN 0
#define KITE_WSCH_STDOUT 1
#define KITE_WSCH_STDERR 2
#define KITE_WSCH_ERROR 3
#define KITE_WSCH_RESIZE 4
#define KITE_WSCH_CLOSE 255

/* The protocol the server picks from a Sec-WebSocket-Protocol header (the client's offers,
 * comma-separated, maybe repeated headers joined): the newest it knows. KITE_WSCH_NONE when
 * none is known (a header that is absent selects channel.k8s.io, as wsstream does). */
enum kite_wsch_proto kite_wsch_select(const char *const *offers, size_t n);
/* The protocol's name as the answer's Sec-WebSocket-Protocol ("" for none). */
const char *kite_wsch_name(enum kite_wsch_proto p);
/* Whether messages are base64 text frames. */
bool kite_wsch_is_text(enum kite_wsch_proto p);
/* Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 §4.2.2): base64(SHA-1(key + GUID)). */
void kite_ws_accept(const char *key, char out[29]);

/* Appends the message carrying data on channel ch to out. */
void kite_wsch_encode(enum kite_wsch_proto p, uint8_t ch, const void *data, size_t len, struct kite_buf *out);
/* Splits a received message into its channel and data (decoded into out for base64): 0, or
 * -EINVAL (empty, or base64 that does not decode). */
int kite_wsch_decode(enum kite_wsch_proto p, const uint8_t *msg, size_t len, uint8_t *ret_ch, struct kite_buf *out);
/* A resize message: 0 with width and height, or -EINVAL. */
int kite_wsch_parse_resize(const char *data, size_t len, uint16_t *ret_w, uint16_t *ret_h);
/* What the error channel says when a command ended with code (V4+: a Status; earlier: text,
 * nothing at all for success). argv names the command in the message. */
void kite_wsch_exit_status(enum kite_wsch_proto p, int code, const char *const *argv, size_t argc, struct kite_buf *out);
/* What the error channel says when the stream failed for another reason (message). */
void kite_wsch_error_status(enum kite_wsch_proto p, const char *message, struct kite_buf *out);
