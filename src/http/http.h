/* kite http: the HTTPS server layer under the API server (GnuTLS, http-parser, epoll).
 *
 * Model: a few worker threads, each with its own epoll set and connections. One handler call
 * per request, after the whole body arrived; before a body is read, the request is
 * authenticated and its body claimed from the budgets (kite_http_admit_fn, budget.c), so a
 * request that will be refused never has its body read. A response may be produced synchronously or later
 * from any thread (the connection just waits meanwhile, costing no thread and no CPU).
 * Watch-style output is a chunked stream pulled by the layer whenever it can send; an idle
 * stream costs nothing until kite_http_stream_wake / kite_http_stream_wake_at.
 *
 * Transport facts (research/kubectl-wire.md §0): TLS 1.2 and 1.3; ALPN selects "h2" when the
 * client offers it (h2.c: one request per stream, the same handler interface, requests and
 * watches multiplexed on one connection), else HTTP/1.1; repeated headers (Impersonate-Group)
 * are kept one value per line.
 *
 * Authentication done here (the API server only decides what to do with the result):
 *   - client certificate verified against client_ca_pem: user = CN, groups = every O;
 *   - else "Authorization: Bearer X" looked up in the static token file;
 *   - a credential that was presented but is invalid sets authn_failed (-> 401 upstream);
 *   - nothing presented: user == NULL and authn_failed == false (anonymous).
 * Kubernetes' union semantics: the first valid credential wins, errors only matter when no
 * credential succeeded. Groups are exactly what the cert/token says: adding
 * "system:authenticated" is the API server's job. */
#pragma once
#include "base/base.h"

#include <sys/types.h>

struct kite_buf;
struct kite_http_server;
struct kite_http_stream;

/* An authenticated identity. Owned by the layer; valid while the request is. */
struct kite_http_user {
    char *name;
    char *uid;      /* "" when unknown (client certs have none) */
    char **groups;
    size_t n_groups;
};

struct kite_http_req {
    const char *method;                 /* "GET", "PUT", ... */
    const char *path;                   /* percent-decoded URL path, without the query */
    const char *body;                   /* whole request body, NUL-terminated ("" when none) */
    size_t body_len;
    const struct kite_http_user *user;  /* authenticated identity or NULL (anonymous) */
    bool authn_failed;                  /* credentials presented but invalid */
    /* private fields follow (the struct is allocated by the layer) */
};

/* Decoded value of query parameter `name` ("a=b&c=d"), or NULL. Borrowed, valid with r. */
const char *kite_http_query(const struct kite_http_req *r, const char *name);
/* First value of request header `name` (case-insensitive), or NULL. Borrowed. */
const char *kite_http_header(const struct kite_http_req *r, const char *name);
/* All values of a repeated header (e.g. Impersonate-Group), in arrival order. Stores at most
 * max pointers (borrowed) in out and returns the total number of values found (may be > max). */
size_t kite_http_header_all(const struct kite_http_req *r, const char *name, const char **out,
                            size_t max);

/* Headers whose name starts with prefix (case-insensitive; Impersonate-Extra-*), in arrival
 * order: stores at most max names and values (borrowed) and returns the total found. */
size_t kite_http_header_prefixed(const struct kite_http_req *r, const char *prefix, const char **names,
                                 const char **values, size_t max);
/* The request target as received ("/api/v1/pods?watch=1"). Borrowed, valid with r. */
const char *kite_http_target(const struct kite_http_req *r);
/* The client's IP address ("127.0.0.1", "::1"); "" when unknown. */
void kite_http_peer_ip(const struct kite_http_req *r, char out[64]);

/* Called once per request, on an HTTP worker thread, after the whole body arrived (bodies above
 * max_body are answered 413 by the layer itself and never reach the handler). The handler must
 * eventually call exactly one of kite_http_respond / kite_http_stream_begin — either before
 * returning or later from any thread (the connection waits meanwhile). The req stays valid until the response is fully sent. kite_http_stop() waits for such
 * outstanding deferred responses, so whoever holds a req must answer it before/while stopping. */
typedef void (*kite_http_handler)(struct kite_http_req *r, void *ud);

/* Adds a response header (copied). Call before kite_http_respond / kite_http_stream_begin. */
void kite_http_add_header(struct kite_http_req *r, const char *name, const char *value);
/* Sends a complete response. Takes ownership of body (malloc'ed; may be NULL when len == 0).
 * content_type may be NULL (no Content-Type header). Callable from any thread, once. */
void kite_http_respond(struct kite_http_req *r, int code, const char *content_type, char *body,
                       size_t len);

/* Wakes the request's connection and has fn(ud) answer it on an HTTP thread: fn must call
 * kite_http_respond or kite_http_stream_begin before returning. Callable from any thread, once
 * per request instead of answering directly; fn is never called from inside this call. Lets a
 * thread that must stay short (the store's writer) leave building the reply to the HTTP
 * threads. If the connection closes first, fn still runs (its answer is dropped), so whatever
 * fn releases is released. */
void kite_http_defer(struct kite_http_req *r, void (*fn)(void *ud), void *ud);

/* Streaming (watch): a chunked response. pull(ud, out) is called on the connection's HTTP thread whenever the
 * layer can send: append bytes to out and return 1; return 0 for "nothing now" (the connection
 * is suspended until kite_http_stream_wake / the wake_at time); return -1 to finish the stream
 * cleanly (bytes appended in that call are still sent). pull is never called concurrently with
 * itself for one stream. done(ud) is called exactly once when the stream ends for any reason
 * (finished, client gone, server stop); after it returns no callback runs again for this
 * stream and the stream handle must not be used any more.
 * The idle timeout does not apply to a connection while it streams. */
typedef int (*kite_http_pull)(void *ud, struct kite_buf *out);
/* Starts the stream. *ret (optional) receives the handle for wake calls; it is valid until
 * done() returned. Callable from any thread, once per request instead of kite_http_respond.
 * Returns 0; on -errno done() is NOT called and the request was answered 500. */
int kite_http_stream_begin(struct kite_http_req *r, int code, const char *content_type,
                           kite_http_pull pull, void (*done)(void *ud), void *ud,
                           struct kite_http_stream **ret);
/* Makes the layer call pull soon. Thread-safe and cheap; callable any number of times, also
 * after the stream ended but before done() returned (then a no-op). Never calls pull inline. */
void kite_http_stream_wake(struct kite_http_stream *s);
/* Ends the stream at once, dropping what is buffered: shuts the connection down, which also
 * cuts off a client that stopped reading (whose stream pull would never be called again).
 * done() follows on the HTTP thread. Thread-safe, cheap; a no-op once the stream ended. */
void kite_http_stream_abort(struct kite_http_stream *s);
/* Wakes the stream at a CLOCK_MONOTONIC time in ns (watch timeoutSeconds, periodic bookmarks).
 * One timer thread serves all streams. A later call replaces the earlier time; a time in the
 * past wakes at once. */
void kite_http_stream_wake_at(struct kite_http_stream *s, int64_t mono_ns);

/* Upgrades (101 Switching Protocols, HTTP/1.1 alone; RFC 9110 §7.8): the connection becomes
 * a tunnel, a byte stream in both directions owned by one thread, which speaks the upgraded
 * protocol itself (WebSocket). Reads and writes never block: poll the fd (and check pending
 * first: TLS may hold decrypted bytes poll does not show). A write that returns -EAGAIN must
 * be repeated with the same bytes at its front once the fd is writable. */
struct kite_http_tunnel;
/* Whether r can be upgraded: an HTTP/1.1 request (HTTP/2 has no Upgrade; clients fall back to
 * HTTP/1.1 for it, as they do with kube-apiserver). */
bool kite_http_can_upgrade(const struct kite_http_req *r);
/* Answers r with "101 Switching Protocols" and the headers added with kite_http_add_header
 * (Upgrade, Connection, Sec-WebSocket-Accept ...) and hands its connection over: 0 and *ret,
 * or -EPROTO (HTTP/2: r is not answered, answer it), -ECONNRESET (the client left: r needs
 * no answer), -ESHUTDOWN (the server stops: r was answered 503). Blocks until the
 * connection's worker let go of it: call it from a thread of your own, never from an HTTP
 * worker (-EDEADLK, r not answered). The request counts as outstanding until the tunnel is
 * closed, so kite_http_stop shuts every tunnel's socket down and waits for their closes. */
int kite_http_upgrade(struct kite_http_req *r, struct kite_http_tunnel **ret);
/* The socket, for poll. */
int kite_http_tunnel_fd(struct kite_http_tunnel *t);
/* Input that can be read now without poll saying so. */
bool kite_http_tunnel_pending(struct kite_http_tunnel *t);
/* > 0 bytes read, 0 the peer's stream ended, -EAGAIN nothing now, -ECONNRESET broken. */
ssize_t kite_http_tunnel_read(struct kite_http_tunnel *t, void *buf, size_t n);
/* > 0 bytes sent (of the front of buf), -EAGAIN (repeat with the same front bytes once
 * writable), -ECONNRESET / -EPIPE broken. */
ssize_t kite_http_tunnel_write(struct kite_http_tunnel *t, const void *buf, size_t n);
/* The same, where more says bytes follow at once (a WebSocket frame's header before its
 * payload, libwslay's WSLAY_MSG_MORE): up to 32 such bytes are held and go in the TLS record of
 * the next write, not in a record (and a send) of their own. Their count is returned at once;
 * the next write's return counts its own bytes only. */
ssize_t kite_http_tunnel_write_more(struct kite_http_tunnel *t, const void *buf, size_t n, bool more);
/* Writes all of buf, waiting (poll) at most timeout_ms for the socket: 0, -ETIMEDOUT or -errno. */
int kite_http_tunnel_write_all(struct kite_http_tunnel *t, const void *buf, size_t n, int timeout_ms);
/* Shuts the socket down (both ways) from any thread: the owner's poll and reads see the end. */
void kite_http_tunnel_shutdown(struct kite_http_tunnel *t);
/* Closes and frees; accepts NULL. */
void kite_http_tunnel_close(struct kite_http_tunnel *t);
/* Copies bytes both ways between a and b until either ends, bytes stop moving for idle_ms
 * (0 = no limit), or stop (may be NULL) turns true. At most buf_bytes per direction wait for
 * a slow reader: a side that does not read stops the other's reads (flow control, no
 * unbounded buffer). Returns 0 when a side ended, -ETIMEDOUT when idle, or -errno. Bytes
 * moved each way are added to *a_to_b and *b_to_a (may be NULL). */
int kite_http_tunnel_splice(struct kite_http_tunnel *a, struct kite_http_tunnel *b, int idle_ms, size_t buf_bytes,
                            uint64_t *a_to_b, uint64_t *b_to_a);

/* A streaming HTTPS GET made from inside a server (fetch.c): the API server reading a node
 * agent's endpoint. Blocking; run it on a thread of its own. */
struct kite_http_fetch;
struct kite_http_fetch_options {
    const char *host;               /* IP literal or name */
    uint16_t port;
    const char *path;               /* with its query, already encoded */
    const char *cert_pem, *key_pem; /* the client certificate (NULL: none) */
    const char *ca_pem;             /* trust for the server's cert; NULL: not verified (as
                                       kube-apiserver towards kubelets without
                                       --kubelet-certificate-authority) */
    int timeout_ms;                 /* connect, handshake and the answer's head; 0 = 10 s */
    int body_timeout_ms;            /* each later read of the body; 0 = none (a followed log) */
    /* an upgrade (kite_http_fetch_tunnel): "Connection: Upgrade" instead of "close", and
     * headers: extra request header lines, each ending in CRLF ("Upgrade: websocket\r\n...") */
    bool upgrade;
    const char *headers;
};
/* Connects, sends the GET and reads the answer's head: 0 with *ret and *ret_status (any HTTP
 * code), or -errno (-ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -EPROTO for TLS or HTTP errors,
 * -ECONNRESET). */
int kite_http_fetch_open(const struct kite_http_fetch_options *o, struct kite_http_fetch **ret, int *ret_status);
/* A header of the answer (the first of that name, case-insensitive), or NULL. Borrowed. */
const char *kite_http_fetch_header(struct kite_http_fetch *f, const char *name);
/* After an answer 101 to an upgrade: the connection as a tunnel (f is freed). NULL when the
 * answer was not 101 (f stays). */
struct kite_http_tunnel *kite_http_fetch_tunnel(struct kite_http_fetch *f);
/* Reads decoded body bytes: > 0, 0 at the end of the body, or -errno. Blocks until bytes come. */
ssize_t kite_http_fetch_read(struct kite_http_fetch *f, char *buf, size_t n);
/* Ends a blocked or later read (it returns 0 or an error). Thread-safe; until close. */
void kite_http_fetch_cancel(struct kite_http_fetch *f);
/* Closes and frees; accepts NULL. */
void kite_http_fetch_close(struct kite_http_fetch *f);

/* What the server decides at the head of a request with a body, before the body is read. */
enum kite_http_admit {
    KITE_HTTP_ADMIT_USER,         /* authenticated: the full body budgets */
    KITE_HTTP_ADMIT_ANONYMOUS,    /* served without credentials: the anonymous budgets */
    KITE_HTTP_ADMIT_UNAUTHORIZED, /* answered 401 by the layer without reading the body */
};
/* Called on an HTTP worker once the head of a request that announces a body is parsed
 * (HTTP/1.1: before "100 Continue"; HTTP/2: at its HEADERS), with method, path, headers, user
 * and authn_failed set and no body yet. Must not answer the request. Requests without a body
 * go straight to the handler. */
typedef enum kite_http_admit (*kite_http_admit_fn)(const struct kite_http_req *r, void *ud);

/* Named limits and their defaults (0 in the config selects the default). */
#define KITE_HTTP_DEFAULT_MAX_BODY (3u * 1024 * 1024)
/* Request bodies held at once (budget.c): claimed at the head for a declared length, else as
 * the bytes arrive, and held until the request is answered. Authenticated requests: a body
 * within max_body (413 past it); an HTTP/2 connection's bodies together within
 * KITE_HTTP_CONN_BODY_MAX; every connection's together within KITE_HTTP_SERVER_BODY_MAX (429
 * with Retry-After past either). Anonymous requests (KITE_HTTP_ADMIT_ANONYMOUS) have budgets of
 * their own, much smaller, so they cannot take the room of authenticated ones. */
#define KITE_HTTP_CONN_BODY_MAX (16u * 1024 * 1024)
#define KITE_HTTP_SERVER_BODY_MAX (128u * 1024 * 1024)
#define KITE_HTTP_ANON_MAX_BODY (64u * 1024)
#define KITE_HTTP_ANON_CONN_BODY_MAX (256u * 1024)
#define KITE_HTTP_ANON_SERVER_BODY_MAX (4u * 1024 * 1024)
#define KITE_HTTP_DEFAULT_MAX_HEADER_BYTES (64u * 1024)
#define KITE_HTTP_DEFAULT_MAX_CONNECTIONS 10000u
#define KITE_HTTP_DEFAULT_IDLE_TIMEOUT_S 60u
#define KITE_HTTP_DEFAULT_HEADER_TIMEOUT_S 32u
#define KITE_HTTP_DEFAULT_READ_TIMEOUT_S 60u
/* HTTP/2, as kube-apiserver sets it (k8s.io/apiserver secure_serving.go): 100 concurrent streams
 * per connection (more are refused with RST_STREAM REFUSED_STREAM), a 256 KiB flow-control window
 * per stream (its "99th percentile of object sizes") and 100 times that for the connection. The
 * header list is capped by max_header_bytes (SETTINGS_MAX_HEADER_LIST_SIZE; past it 431). */
#define KITE_HTTP2_MAX_STREAMS 100u
#define KITE_HTTP2_STREAM_WINDOW (256u * 1024)

struct kite_http_config {
    const char *listen;                 /* "127.0.0.1:6443", "[::1]:6443", ":6443"; port 0 = ephemeral */
    const char *cert_pem, *key_pem;     /* serving cert/key (PEM text), required */
    const char *client_ca_pem;          /* trust for client certs (NULL: client certs ignored) */
    const char *token_file;             /* optional static tokens: CSV token,user,uid,"g1,g2" */
    size_t max_body;                    /* default 3 MiB (-> 413) */
    size_t max_header_bytes;            /* per-connection memory for URL + headers; default 64 KiB (-> 431/414) */
    unsigned max_connections;           /* default 10000 */
    unsigned threads;                   /* worker threads; default = number of CPUs */
    unsigned idle_timeout_s;            /* no byte moved for this long: closed; default 60 s */
    /* A client that trickles a request defeats the idle timeout; these bound a request from its
     * first byte: the request line and headers within header_timeout_s (default 32 s, as
     * kube-apiserver's ReadHeaderTimeout), the whole request, body included, within
     * read_timeout_s (default 60 s). Past either the connection is closed. */
    unsigned header_timeout_s;
    unsigned read_timeout_s;
    bool disable_http2;                 /* ALPN offers only http/1.1 (a kill switch for a misbehaving client) */
    /* optional: who may send a body (NULL: every request has the authenticated budgets) */
    kite_http_admit_fn admit;
    kite_http_handler handler;
    void *ud;
};

/* Starts listening and serving. Returns 0 and *ret, or -errno (-EINVAL bad listen address or
 * PEM, -ENOENT/-EINVAL token file, -EADDRINUSE, ...). */
int kite_http_start(const struct kite_http_config *cfg, struct kite_http_server **ret);
/* The actual bound port (useful with port 0). */
uint16_t kite_http_port(struct kite_http_server *s);
/* Stops accepting, ends open streams (done() is called for each), waits for outstanding
 * deferred responses, closes connections, joins threads and frees s. NULL is a no-op. */
void kite_http_stop(struct kite_http_server *s);
