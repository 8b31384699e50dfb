/* A small gRPC client over one HTTP/2 connection (nghttp2), plain or TLS (GnuTLS), for the etcd
 * backend (etcd.c). One I/O thread per connection runs the HTTP/2 session; calls are started
 * and streamed to from any thread. A connection that fails (reset, a protocol error, no answer
 * to its keepalive PING within its timeout) is dead for good: every call still open on it ends
 * with a negative errno, and the owner opens another one (to another member). */
#pragma once
#include "base/base.h"

/* gRPC status codes etcd answers with (grpc/codes). */
enum {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_INVALID_ARGUMENT = 3,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_FAILED_PRECONDITION = 9,
    GRPC_OUT_OF_RANGE = 11,
    GRPC_UNAVAILABLE = 14,
};

struct grpc_tls {
    const char *cafile, *certfile, *keyfile; /* PEM files; NULL = none (no TLS without cafile) */
};

struct grpc_conn;

/* A response message (borrowed for the call). Runs on the connection's thread. */
typedef void (*grpc_msg_cb)(void *ud, const unsigned char *msg, size_t len);
/* The end of a call, exactly once: status >= 0 is the grpc-status the server sent (message its
 * grpc-message, or ""), < 0 a transport failure (-ECONNRESET: the connection went or the stream
 * was reset; whether the server acted on the request is unknown). Runs on the connection's
 * thread (or in grpc_conn_close); the call is freed right after it returns. */
typedef void (*grpc_done_cb)(void *ud, int status, const char *message);

/* Connects to host:port (https: TLS with the given files; the server's certificate is checked
 * against cafile and host), speaks HTTP/2 ("h2" by ALPN, or prior knowledge on plain TCP), and
 * starts the I/O thread. timeout_ms bounds the connect and handshake, and is how long the
 * connection may go without an answer to its PING before it counts as dead. */
int kite_store_grpc_conn_open(const char *host, const char *port, bool https, const struct grpc_tls *tls, int timeout_ms,
                   struct grpc_conn **ret, char **ret_error);
/* Stops the thread, ends every open call (-ECONNRESET), frees. NULL ok. Must not be called from
 * a callback of this connection. */
void kite_store_grpc_conn_close(struct grpc_conn *c);
/* The connection failed (it stays failed). */
bool kite_store_grpc_conn_dead(struct grpc_conn *c);
/* Starts a call of method path ("/etcdserverpb.KV/Range") with one request message. stream:
 * the request side stays open for grpc_call_send (a bidirectional stream such as Watch).
 * Returns the call's id (> 0), or -ENOTCONN on a dead connection (no callback then). */
int kite_store_grpc_call_start(struct grpc_conn *c, const char *path, const void *msg, size_t len, bool stream,
                    grpc_msg_cb on_msg, grpc_done_cb on_done, void *ud);
/* Sends one more request message on the stream call id. -ENOTCONN when it already ended. */
int kite_store_grpc_call_send(struct grpc_conn *c, int32_t id, const void *msg, size_t len);
