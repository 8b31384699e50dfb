/* Private to src/http: shared between server.c (workers, listener, start/stop), conn.c
 * (connections: TLS, reading, the state machine), response.c (answers, refusals), request.c
 * (parsing, see request.h), stream.c (chunked streams) and auth.c (client certs, tokens).
 *
 * Threads: N workers, each with its own epoll set, owning the connections assigned to it; worker
 * 0 also accepts and hands new connections out round-robin. Everything about a connection
 * happens on its worker, except what other threads hand it through the worker's mailbox: an
 * answer (kite_http_respond / kite_http_defer from another thread), a stream wake, a new
 * connection. A mailbox entry is the connection itself ("look at it"); what to look at is in
 * the connection's locked fields.
 *
 * Lock order: stream.lock -> conn.lock -> worker.mb_lock. A connection is freed only by its
 * worker, never while it is in the mailbox or while a request it dispatched is unanswered. */
#pragma once
#include "http/http.h"
#include "http/request.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/map.h"

#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

struct worker;
struct conn;
struct h2s;
struct h2conn;

/* The request as the handler sees it (pub first): embedded in its connection (HTTP/1.1) or in
 * its HTTP/2 stream (h2.c). */
struct req {
    struct kite_http_req pub;
    struct conn *conn;
    struct req_parser *rp;        /* the parsed request: &conn->rp, or the h2 stream's */
    struct h2s *h2;               /* the HTTP/2 stream, NULL on HTTP/1.1 */
    struct kite_buf hdrs;         /* response headers added by the handler: "Name: value\r\n"... */
    size_t claim;                 /* body bytes claimed from the budgets (budget.c) */
    bool anon;                    /* ... from the anonymous ones */
};

enum conn_state {
    C_HANDSHAKE,   /* TLS handshake in progress */
    C_READING,     /* reading (between requests or inside one) */
    C_DISPATCHED,  /* the handler has the request; no answer yet */
    C_RESPONDING,  /* sending a complete response */
    C_STREAMING,   /* a chunked stream (watch) */
    C_LINGER,      /* answered and closing: write side shut, input drained and dropped */
    C_H2,          /* HTTP/2 (ALPN "h2"): h2.c drives the connection */
    C_TUNNEL,      /* upgraded (101): a tunnel's thread owns the socket; the worker only frees it */
};

/* A thread waiting in kite_http_upgrade for the worker to hand the connection over (on the
 * waiting thread's stack: the worker touches it only under mu, before it signals). */
struct upgrade_wait {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int result;                   /* 0 waiting; 1 handed over; -errno refused */
};

struct conn {
    struct worker *w;
    int fd;
    gnutls_session_t tls;
    enum conn_state state;
    uint32_t ep_events;           /* what the epoll registration asks for now */
    int64_t last_active_ns;       /* for the idle timeout */
    int64_t req_start_ns;         /* first byte of the request being read (0: none yet) */
    struct conn *prev, *next;     /* the worker's list */

    /* request parsing */
    struct req_parser rp;
    struct kite_buf in;           /* received, not yet parsed bytes start at in_off */
    size_t in_off;
    bool continue_queued;         /* "100 Continue" for this request is in `out` */
    struct req req;

    /* output (worker only) */
    struct kite_buf out;          /* bytes to send start at out_off */
    size_t out_off;
    char *big;                    /* a large response body sent after `out` (owned) */
    size_t big_len, big_off;
    bool close_after;             /* close once `out` is sent */
    bool peer_closed;             /* EOF/error while a request was dispatched: free on its answer */
    char peer_ip[48];             /* kite_http_peer_ip's answer, asked once ("" until then) */
    bool peer_eof;                /* the client closed its sending side: answer what came, then close */
    size_t linger_bytes;          /* dropped while lingering */

    /* the stream, while C_STREAMING */
    struct kite_http_stream *stream;

    /* HTTP/2 (C_H2): the nghttp2 session and the streams (h2.c) */
    struct h2conn *h2;

    /* tls client identity (auth.c), computed once per connection */
    bool tls_checked, cert_failed;
    struct kite_http_user *cert_user;

    /* handed over by other threads, under lock */
    pthread_mutex_t lock;
    struct kite_buf ans;          /* a complete response (head, maybe body) built by kite_http_respond */
    char *ans_big;
    size_t ans_big_len;
    bool ans_ready, ans_close;
    struct kite_http_stream *ans_stream; /* kite_http_stream_begin's stream, to start */
    void (*defer_fn)(void *ud);
    void *defer_ud;
    bool in_handler;              /* the worker is inside the handler / a defer fn for this conn */
    struct upgrade_wait *upg;     /* kite_http_upgrade asks for the hand-over */
    bool tunnel_closed;           /* C_TUNNEL: the tunnel's owner is done with it */
    /* mailbox link, under the worker's mb_lock */
    bool in_mb, is_new;
    struct conn *mb_next;
};

struct stream_heap {
    struct kite_http_stream **a;
    size_t n, cap;
};

struct worker {
    struct kite_http_server *srv;
    unsigned idx;
    pthread_t thread;
    int ep, evfd;
    struct conn *conns;           /* every connection of this worker */
    size_t n_conns;
    struct stream_heap heap;      /* stream deadlines (kite_http_stream_wake_at) */
    bool accepting;               /* worker 0: the listener is in its epoll set */
    pthread_mutex_t mb_lock;
    struct conn *mb_head, *mb_tail;
    bool mb_quit;                 /* under mb_lock: leave the loop */
    atomic_bool mb_kicked;        /* an eventfd write is pending: others need not write again */
    size_t freed_bodies;          /* body bytes released since the last trim (budget.c) */
};

struct kite_http_server {
    kite_http_handler handler;
    kite_http_admit_fn admit;
    void *ud;
    bool http2;                          /* ALPN offers "h2" */
    size_t max_body, max_head;
    unsigned max_conns;
    unsigned idle_timeout_s, header_timeout_s, read_timeout_s;
    uint16_t port;
    int lfd;
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    bool client_ca;
    struct kite_map tokens;              /* token -> struct kite_http_user*; read-only after start */

    struct worker *workers;
    unsigned n_workers;
    atomic_uint next_worker;
    atomic_uint n_conns;

    pthread_mutex_t lock;                /* stop waits */
    pthread_cond_t cond;
    atomic_bool stopping;
    atomic_long n_pending;               /* requests given to the handler, not answered yet */
    atomic_size_t body_held[2];          /* body bytes claimed: [0] authenticated, [1] anonymous */
};

static inline int64_t http_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * KITE_NS_PER_SEC + ts.tv_nsec;
}

/* server.c */
/* The worker running on this thread (NULL on other threads). */
extern __thread struct worker *kite_http_tl_worker;
/* Wakes w to look at its mailbox (any thread). */
void kite_http_worker_kick(struct worker *w);

/* conn.c (worker only, unless said otherwise) */
/* A connection on accepted socket fd, TLS set up, not yet on a worker (any thread); NULL on failure. */
struct conn *kite_http_conn_new(struct kite_http_server *srv, int fd);
/* Puts c on w's list and epoll set and starts its handshake. */
void kite_http_conn_attach(struct worker *w, struct conn *c);
/* Advances c as far as it can go without waiting; readable: epoll reported input. c may be
 * freed: callers must not touch it afterwards. */
void kite_http_conn_drive(struct conn *c, bool readable);
/* A mailbox entry: a new connection, an answer, a deferred callback, a stream wake. */
void kite_http_conn_service(struct worker *w, struct conn *c, bool is_new);
/* Ends c: at once, or (request still with the handler) once it is answered. */
void kite_http_conn_close(struct conn *c);
/* Frees c now (or, still in a mailbox, when the mailbox reaches it). */
void kite_http_conn_free(struct conn *c);
/* Frees the buffers of a connection between requests. */
void kite_http_conn_trim(struct conn *c);
/* Queues c on its worker's mailbox (any thread; conn.lock may be held). */
void kite_http_conn_kick(struct conn *c);
/* Sends what is pending. 1: all sent; 0: the socket is full (output interest is on); -1: the
 * connection is broken. */
int kite_http_conn_flush(struct conn *c);
/* The worker's epoll interest for c (EPOLLIN / EPOLLOUT). */
void kite_http_conn_want(struct conn *c, uint32_t events);
/* Reads decrypted bytes into c->in once. 1: got bytes; 0: nothing now; -1: EOF (peer_eof set)
 * or error. */
int kite_http_conn_read_some(struct conn *c);
/* Decrypted or raw bytes are waiting that epoll will not report. */
bool kite_http_conn_tls_pending(struct conn *c);
/* Closes gracefully: shuts the write side down and drains input for a while (C_LINGER). */
void kite_http_conn_linger(struct conn *c);

/* tunnel.c */
/* A tunnel over a TLS session on fd whose first pre_len input bytes were already read (pre,
 * copied). pending: more decrypted or raw input is buffered than poll shows; eof: a read
 * that would block is the end of the peer's stream; release: the owner lets go of fd and tls
 * (the tunnel never closes or frees them itself). */
struct tunnel_owner {
    bool (*pending)(void *owner);
    bool (*eof)(void *owner);
    void (*release)(void *owner);
    void *owner;
};
struct kite_http_tunnel *kite_http_tunnel_new(int fd, gnutls_session_t tls, const char *pre, size_t pre_len,
                                    const struct tunnel_owner *o);
/* conn.c: the owner hooks of a hijacked server connection */
extern const struct tunnel_owner kite_http_conn_tunnel_owner;
bool kite_http_conn_raw_pending(struct conn *c);
bool kite_http_conn_tcp_eof(struct conn *c);

/* response.c */
/* Queues the answer to a request the layer refuses itself; the connection closes after it. */
void kite_http_conn_refuse(struct conn *c, const struct refusal *why);
/* A request given to the handler got its answer (any thread): kite_http_stop may be waiting. */
void kite_http_pending_done(struct kite_http_server *srv);

/* auth.c */
int kite_http_auth_load_tokens(struct kite_http_server *srv, const char *path);
void kite_http_auth_free_tokens(struct kite_http_server *srv);
void kite_http_auth_request(struct conn *c, struct req *r);
void kite_http_auth_user_free(struct kite_http_user *u);

/* budget.c (worker only) */
/* At the head of r, a request with a body (declared: its length, 0 unknown): authenticates it
 * (auth_request), asks the server who may send it, sets p's body limit and claims the declared
 * length. conn_held: the connection's claims ([0], [1] as body_held) on HTTP/2, NULL on
 * HTTP/1.1 (one body at a time). NULL, or why it is refused (401, 413, 429). */
const struct refusal *kite_http_body_admit(struct conn *c, struct req *r, struct req_parser *p, uint64_t declared,
                                 size_t *conn_held);
/* Claims up to total bytes for r's body (a chunked body, or an HTTP/2 one without length). */
const struct refusal *kite_http_body_claim(struct kite_http_server *srv, struct req *r, size_t total, size_t *conn_held);
/* Gives r's claim back (the request was answered, or its connection is gone). */
void kite_http_body_release(struct kite_http_server *srv, struct req *r, size_t *conn_held);

/* stream.c */
struct kite_http_stream *kite_http_stream_new(struct conn *c, kite_http_pull pull, void (*done)(void *ud), void *ud);
/* A stream on HTTP/2 stream h of connection c: no chunk framing, wakes go to h. */
struct kite_http_stream *kite_http_stream_new_h2(struct conn *c, struct h2s *h, kite_http_pull pull, void (*done)(void *ud),
                                       void *ud);
/* Worker, HTTP/2: pulls once into out if the stream was woken (out may get bytes whatever it
 * returns but -2). 1: call again once they are sent; 0: idle until woken (h2_kick); -1: finished cleanly (bytes appended
 * are the last), also when the server stops; -2: aborted (kite_http_stream_abort). */
int kite_http_stream_pull_h2(struct kite_http_stream *s, struct kite_buf *out);
/* Worker, HTTP/2, while earlier bytes wait to be sent: applies a new deadline; true when the
 * stream was aborted (it must end now, sent or not). */
bool kite_http_stream_check_h2(struct kite_http_stream *s);
/* Worker: ends stream s of c's worker (done() is called) and frees it. */
void kite_http_stream_end_s(struct worker *w, struct kite_http_stream *s);
/* Worker: applies a deadline set by kite_http_stream_wake_at from another thread to s. */
void kite_http_stream_sync_s(struct worker *w, struct kite_http_stream *s);
/* Worker: the stream's connection is writable (or it was woken): pull and send. When the
 * stream finished, the connection is C_RESPONDING with the last bytes queued. Returns false
 * when the connection must close. */
bool kite_http_stream_run(struct conn *c);
/* Worker: ends the stream (done() is called); the connection stays as it is. */
void kite_http_stream_end(struct conn *c);
/* Worker: due deadlines wake their streams; returns the ms until the next one (or -1). */
int kite_http_stream_timers(struct worker *w, int64_t now_ns);
/* Worker: applies a deadline set by kite_http_stream_wake_at from another thread. */
void kite_http_stream_sync_deadline(struct conn *c);
/* Worker: frees a stream whose done() ran. */
void kite_http_stream_free(struct kite_http_stream *s);

/* h2.c (worker only, unless said otherwise) */
/* Starts HTTP/2 on c after a handshake that selected "h2": the server's SETTINGS are queued. */
int kite_http_h2_start(struct conn *c);
/* Reads, dispatches, sends, as far as it can go without waiting. c may be freed. */
void kite_http_h2_drive(struct conn *c, bool readable);
/* A mailbox visit: answers, deferred callbacks, stream wakes handed over by other threads. c
 * may be freed. */
void kite_http_h2_service(struct conn *c);
/* The connection is gone: closes it now, or once the handlers answered what they hold. */
void kite_http_h2_close(struct conn *c);
/* Frees the session and the streams (open watch streams get done()). */
void kite_http_h2_free(struct conn *c);
/* Once a second: idle connection, requests too slow to arrive, stopping. c may be freed. */
void kite_http_h2_sweep(struct conn *c, int64_t now_ns, bool stopping);
/* Server stop: GOAWAY, watch streams finish cleanly. c may be freed. */
void kite_http_h2_stop(struct conn *c);
/* Answers from any thread (response.c's calls for a request on an HTTP/2 stream). */
void kite_http_h2_respond(struct req *r, int code, const char *content_type, char *body, size_t len);
void kite_http_h2_defer(struct req *r, void (*fn)(void *ud), void *ud);
int kite_http_h2_stream_begin(struct req *r, int code, const char *content_type, kite_http_pull pull, void (*done)(void *ud),
                    void *ud, struct kite_http_stream **ret);
/* Any thread (stream.lock may be held): stream h has news (a wake, an abort, a deadline). */
void kite_http_h2_kick(struct h2s *h);
/* Whether the caller is c's worker inside a handler or defer callback (the answer is picked
 * up when it returns). */
bool kite_http_conn_on_own_worker(struct conn *c);
