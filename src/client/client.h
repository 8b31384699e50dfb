/* kite's Kubernetes API client: a small transport vtable (an HTTP/1.1 implementation over
 * GnuTLS with keep-alive and in-memory TLS material, and a fake for tests), JSON helpers on top, and
 * streaming watches that another thread can cancel.
 *
 * Errors: transport failures are -errno (-ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH,
 * -ECONNRESET, -EPROTO for TLS...); an HTTP answer, whatever its code, is a success of the
 * transport (0) with the code and body in struct kite_response. The JSON helpers turn HTTP
 * errors into -errno too (kite_http_status_errno) and keep the code for callers that care. */
#pragma once
#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include "base/base.h"
#include "base/buf.h"
#include "client/kubeconfig.h"

/* Largest response body kept (a full node or pod list of a big cluster is far less). */
#define KITE_CLIENT_MAX_BODY (64u << 20)
/* Longest single watch event line. */
#define KITE_WATCH_MAX_LINE (16u << 20)

struct kite_response {
    long status;   /* HTTP status code */
    char *body;    /* NUL-terminated, never NULL after a successful request */
    size_t len;
};
/* Frees the body; the struct can be reused. */
void kite_response_release(struct kite_response *r);

/* A one-shot cancellation token shared between a blocking call and the thread stopping it. */
struct kite_cancel {
    pthread_mutex_t lock;
    bool fired;
    void (*wake)(void *ud); /* set by the transport while it blocks */
    void *wake_ud;
};
void kite_cancel_init(struct kite_cancel *c);
void kite_cancel_release(struct kite_cancel *c);
/* Marks the token fired and wakes the blocked call, if any. Safe from any thread. */
void kite_cancel_fire(struct kite_cancel *c);
bool kite_cancel_fired(struct kite_cancel *c);
/* For transports: installs (wake != NULL) or removes the waker. Returns false, installing
 * nothing, when the token has already fired. */
bool kite_cancel_set_wake(struct kite_cancel *c, void (*wake)(void *), void *ud);
/* Waits ns (monotonic) or until c fires, whichever comes first: a controller's back-off. */
void kite_cancel_wait(struct kite_cancel *c, int64_t ns);

/* Called once per watch event ({"type":"ADDED","object":{...}}; borrowed). A negative return
 * stops the watch, which then returns that value. */
typedef int (*kite_watch_fn)(json_object *event, void *ud);
/* The same, with the event's JSON text (one line, without its newline; borrowed): for a reader
 * that takes a few members out of it rather than parse it all (json/scan.h). */
typedef int (*kite_watch_line_fn)(const char *line, size_t len, void *ud);

struct kite_client;
struct kite_client_ops {
    /* One request. path starts with "/" (query included). body may be NULL. On 0, *ret holds
     * the answer (caller releases). */
    int (*request)(struct kite_client *c, const char *method, const char *path, const char *content_type,
                   const char *body, size_t body_len, struct kite_response *ret);
    /* A streaming GET (path should carry watch=true). Blocks until the server ends the
     * stream (0), cancel fires (-ECANCELED), fn stops it (its value) or an error. A non-200
     * answer gives kite_http_status_errno() of its code. */
    int (*watch)(struct kite_client *c, const char *path, kite_watch_fn fn, void *ud, struct kite_cancel *cancel);
    /* Closes every pooled connection so the next request reconnects (used after repeated
     * heartbeat failures, as the kubelet's onRepeatedHeartbeatFailure). */
    void (*reset_connections)(struct kite_client *c);
    void (*free)(struct kite_client *c);
    /* watch, handing each event's text unparsed (NULL: kite_client_watch_lines writes the
     * parsed events back to text) */
    int (*watch_lines)(struct kite_client *c, const char *path, kite_watch_line_fn fn, void *ud,
                       struct kite_cancel *cancel);
};
struct kite_client {
    const struct kite_client_ops *ops;
    _Atomic uint64_t bytes_sent; /* request bytes written (headers + body), for benchmarks */
    _Atomic uint64_t requests;
    /* kite_client_set_write_gate's; set before the client is shared */
    bool (*may_write)(void *ud);
    void *may_write_ud;
};

/* What a write refused by the write gate returns: the controller retries it later, as any
 * failed request, and by then it runs no more (its leader stopped it) or leads again. */
#define KITE_CLIENT_NOT_LEADING (-ENOLCK)

/* Every request but GET and HEAD asks may_write(ud) first and, on false, is not sent
 * (KITE_CLIENT_NOT_LEADING): the controllers' client of a leader-elected process, so that a
 * process that lost its lease (or cannot tell, having been paused past its renew deadline)
 * writes nothing before it notices. Set before other threads use the client. */
void kite_client_set_write_gate(struct kite_client *c, bool (*may_write)(void *ud), void *ud);

struct kite_client_options {
    long timeout_ms;        /* per request; 0 = 10000 */
    long connect_timeout_ms;/* 0 = 5000 */
    const char *user_agent; /* NULL = "kite" */
    unsigned max_connections; /* kept-alive connections for requests made at once; 0 = 1 */
};

/* The HTTP/1.1 client for kc (borrowed: everything needed is copied; TLS material stays in
 * memory). -EINVAL when the server URL, the CA or the client certificate and key cannot be
 * used. */
int kite_client_new(const struct kite_kubeconfig *kc, const struct kite_client_options *o, struct kite_client **ret);

/* Replaces the client certificate and key (PEM, copied) of a client made by kite_client_new:
 * connections opened from now on present them, and the kept-alive one is closed so the next
 * request does; watches already open keep the old ones until they end (a rotated client
 * certificate, as client-go's transport with a certificate callback). -EINVAL when the PEM
 * cannot be used, -ENOTSUP for another transport or plain http. */
int kite_client_set_certificate(struct kite_client *c, const char *cert_pem, const char *key_pem);

/* Headers sent with every later request of a client made by kite_client_new (and watch), after
 * its own: complete lines, each ending in "\r\n" (copied; NULL or "" = none). `kite sim`'s
 * shared connections send Impersonate-User/-Group with it, one node at a time per connection.
 * -ENOTSUP for another transport. */
int kite_client_set_extra_headers(struct kite_client *c, const char *headers);

/* For a client made by kite_client_new on https: a connection to its server set up as its
 * requests' are (its CA, client certificate and server name checked), offering the one ALPN
 * protocol alpn ("h2"), waiting through the thread waiter if one is set, until deadline_ms
 * (monotonic ms; the connect timeout bounds it too). On 0, *ret_fd (non-blocking) and *ret_tls
 * are the caller's (gnutls_deinit, close): `kite sim`'s HTTP/2 connections. -EPROTONOSUPPORT when
 * the server did not select alpn, -ENOTSUP for plain http or another transport. */
struct gnutls_session_int;
int kite_client_dial_tls(struct kite_client *c, const char *alpn, int64_t deadline_ms, int *ret_fd,
                        struct gnutls_session_int **ret_tls);
/* The server URL's authority (Host, :authority) and path prefix ("" or "/x") of a client made
 * by kite_client_new; NULL for another transport. */
const char *kite_client_authority(struct kite_client *c);
const char *kite_client_path_prefix(struct kite_client *c);

/* A fake transport for tests: each request goes to handler (which fills ret->status and
 * ret->body with malloc'ed bytes, or returns -errno to simulate a transport error); watch
 * calls watch_handler (NULL = -EOPNOTSUPP). Counts bytes as method + path + body. */
typedef int (*kite_fake_handler)(void *ud, const char *method, const char *path, const char *content_type,
                                 const char *body, size_t body_len, struct kite_response *ret);
typedef int (*kite_fake_watch_handler)(void *ud, const char *path, kite_watch_fn fn, void *fn_ud,
                                       struct kite_cancel *cancel);
struct kite_client *kite_client_fake_new(kite_fake_handler handler, kite_fake_watch_handler watch_handler, void *ud);
/* How many times reset_connections was called on a fake client. */
unsigned kite_client_fake_resets(struct kite_client *c);

/* The write gate's answer for a request of method (true for reads and without a gate). The
 * transport asks again right before the request's bytes leave, after waiting for its
 * connection: a process frozen in between sends nothing when it thaws. */
static inline bool kite_client_may_send(struct kite_client *c, const char *method) {
    return !c->may_write || !strcmp(method, "GET") || !strcmp(method, "HEAD") || c->may_write(c->may_write_ud);
}

/* How a thread waits on a socket, when not with poll(2): `kite sim` runs many nodes' requests as
 * coroutines on one event loop, and its waiter parks the coroutine until fd is ready for events
 * (POLLIN/POLLOUT: 0) or deadline_ms (monotonic ms, < 0 = none) passes (-ETIMEDOUT). Once set
 * on a thread, the plain requests (not watches) of every client made by kite_client_new wait
 * through it on that thread; NULL restores poll(2). */
typedef int (*kite_client_waiter)(int fd, short events, int64_t deadline_ms, void *ud);
void kite_client_set_thread_waiter(kite_client_waiter fn, void *ud);

static inline int kite_client_request(struct kite_client *c, const char *method, const char *path,
                                      const char *content_type, const char *body, size_t body_len,
                                      struct kite_response *ret) {
    if (!kite_client_may_send(c, method)) return KITE_CLIENT_NOT_LEADING;
    return c->ops->request(c, method, path, content_type, body, body_len, ret);
}
static inline int kite_client_watch(struct kite_client *c, const char *path, kite_watch_fn fn, void *ud,
                                    struct kite_cancel *cancel) {
    return c->ops->watch(c, path, fn, ud, cancel);
}
/* kite_client_watch with each event's text. */
int kite_client_watch_lines(struct kite_client *c, const char *path, kite_watch_line_fn fn, void *ud,
                            struct kite_cancel *cancel);
static inline void kite_client_reset_connections(struct kite_client *c) { c->ops->reset_connections(c); }
static inline uint64_t kite_client_bytes_sent(struct kite_client *c) { return atomic_load(&c->bytes_sent); }
/* Accepts NULL. */
void kite_client_free(struct kite_client *c);

/* JSON request: body (borrowed, may be NULL) is serialized, the answer parsed. Returns 0 on
 * 2xx with *ret_obj (may be NULL to discard; NULL result if the body is not JSON); on an HTTP
 * error returns kite_http_status_errno() and, if ret_obj, the parsed Status. *ret_status (may
 * be NULL) gets the HTTP code, or 0 on a transport error. */
int kite_client_json(struct kite_client *c, const char *method, const char *path, const char *content_type,
                     json_object *body, long *ret_status, json_object **ret_obj);

/* HTTP code -> -errno: 404 -ENOENT, 409 -EEXIST, 401 -EACCES, 403 -EPERM, 400/422 -EINVAL,
 * 408/504 -ETIMEDOUT, 429/503 -EAGAIN, 410 -ESTALE, 413 -EFBIG, other 4xx -EPROTO, 5xx -EIO;
 * 2xx 0. */
int kite_http_status_errno(long status);

/* Splits a byte stream into '\n'-terminated lines (the watch wire format). Lines longer than
 * max are an error (-EMSGSIZE). Empty lines are skipped. */
struct kite_lines {
    struct kite_buf buf; /* partial line carried between feeds */
    size_t max;
};
void kite_lines_init(struct kite_lines *l, size_t max);
void kite_lines_release(struct kite_lines *l);
/* Calls fn for each complete line (line is NUL-terminated, without '\n'; borrowed). Stops at
 * fn's first negative return and returns it. */
int kite_lines_feed(struct kite_lines *l, const char *data, size_t n, int (*fn)(char *line, size_t len, void *ud),
                    void *ud);
