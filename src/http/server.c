/* kite http server: workers, connections, TLS, request parsing, responses.
 *
 * The per-request path is kept to the system calls a request needs: one recv (GnuTLS reads a
 * record as a 5-byte header and then its body; tls_pull serves both from one recv into the
 * connection's buffer), one sendmsg (the whole response is one TLS record), and no epoll
 * changes (the socket stays registered for input, level-triggered, for its whole life; output
 * interest is added only while a send would block). A request answered from another thread
 * reaches the worker through its mailbox: one eventfd write wakes it for however many answers
 * arrive before it looks.
 *
 * Keep-alive: one request at a time per connection (pipelined requests wait in the input
 * buffer). Closing after an error is a lingering close: shut the write side down, then read
 * and drop input for a while, so the client gets the answer instead of a reset. */
#include "http/http-internal.h"
#include "base/clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE"
#define RAW_CAP 4096u                  /* one recv's worth of TLS bytes per connection */
#define IN_CHUNK 16384u                /* decrypted input read per call */
#define BUF_KEEP (64u * 1024)          /* per-connection buffers above this are freed after use */
#define BIG_BODY (64u * 1024)          /* bodies above this are sent from their own buffer */
#define EVENTS_PER_WAIT 128
#define ACCEPTS_PER_WAKE 64
#define LINGER_NS (2 * KITE_NS_PER_SEC) /* how long a closing connection's input is drained */
#define LINGER_MAX_BYTES (1024u * 1024)

static char listener_tag;
static __thread struct worker *tl_worker;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * KITE_NS_PER_SEC + ts.tv_nsec;
}

/* ---- connection bookkeeping ---- */

struct conn_extra {
    char *raw;          /* bytes recv'd for GnuTLS, not yet handed to it */
    size_t raw_off, raw_len;
    bool tcp_eof;       /* recv saw the end of the client's stream */
};

static void conn_free(struct conn *c);

static void conn_reset_request(struct conn *c) {
    req_parser_next(&c->rp);
    c->req_start_ns = 0;
    c->continue_queued = false;
    if (c->req.hdrs.cap > BUF_KEEP) kite_buf_release(&c->req.hdrs);
    kite_buf_reset(&c->req.hdrs);
    c->req.pub.method = "";
    c->req.pub.path = "";
    c->req.pub.body = "";
    c->req.pub.body_len = 0;
    c->req.pub.user = NULL;
    c->req.pub.authn_failed = false;
}

/* ---- mailbox ---- */

static void worker_kick(struct worker *w) {
    if (atomic_exchange(&w->mb_kicked, true))
        return;
    uint64_t one = 1;
    ssize_t n = write(w->evfd, &one, sizeof(one));
    (void)n; /* EAGAIN: the counter is saturated, a wakeup is pending anyway */
}

void conn_kick(struct conn *c) {
    struct worker *w = c->w;
    pthread_mutex_lock(&w->mb_lock);
    bool queued = c->in_mb;
    if (!queued) {
        c->in_mb = true;
        c->mb_next = NULL;
        if (w->mb_tail) w->mb_tail->mb_next = c;
        else w->mb_head = c;
        w->mb_tail = c;
    }
    pthread_mutex_unlock(&w->mb_lock);
    if (!queued) worker_kick(w);
}

/* ---- request accessors ---- */

const char *kite_http_header(const struct kite_http_req *pub, const char *name) {
    return req_parser_header(&((const struct req *)pub)->conn->rp, name);
}

const char *kite_http_query(const struct kite_http_req *pub, const char *name) {
    return req_parser_query(&((const struct req *)pub)->conn->rp, name);
}

size_t kite_http_header_all(const struct kite_http_req *pub, const char *name, const char **out, size_t max) {
    return req_parser_header_all(&((const struct req *)pub)->conn->rp, name, out, max);
}

/* ---- responses ---- */

static const char *reason_phrase(int code) {
    switch (code) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return code < 300 ? "OK" : code < 500 ? "Client Error" : "Server Error";
    }
}

/* "Date: ...\r\n", formatted once per second per thread. */
static const char *date_header(void) {
    static __thread time_t last;
    static __thread char buf[48];
    time_t now = time(NULL);
    if (now != last) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(buf, sizeof buf, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        last = now;
    }
    return buf;
}

#define LEN_CHUNKED (-1)
#define LEN_NONE (-2) /* HTTP/1.0 stream: the body ends with the connection */

/* The head of a response: status line, headers, blank line. */
static void build_head(struct kite_buf *b, struct req *r, int code, const char *ctype, int64_t len, bool close) {
    kite_buf_printf(b, "HTTP/1.1 %d %s\r\n", code, reason_phrase(code));
    if (ctype) kite_buf_printf(b, "Content-Type: %s\r\n", ctype);
    if (r && r->hdrs.len) kite_buf_append(b, r->hdrs.p, r->hdrs.len);
    if (len == LEN_CHUNKED) kite_buf_puts(b, "Transfer-Encoding: chunked\r\n");
    else if (len >= 0 && code >= 200 && code != 204 && code != 304)
        kite_buf_printf(b, "Content-Length: %lld\r\n", (long long)len);
    kite_buf_puts(b, date_header());
    if (close) kite_buf_puts(b, "Connection: close\r\n");
    kite_buf_puts(b, "\r\n");
}

void kite_http_add_header(struct kite_http_req *pub, const char *name, const char *value) {
    struct req *r = (struct req *)pub;
    kite_buf_printf(&r->hdrs, "%s: %s\r\n", name, value);
}

static void pending_done(struct kite_http_server *srv) {
    if (atomic_fetch_sub(&srv->n_pending, 1) == 1 && atomic_load(&srv->stopping)) {
        pthread_mutex_lock(&srv->lock);
        pthread_cond_broadcast(&srv->cond);
        pthread_mutex_unlock(&srv->lock);
    }
}

/* True when the caller is the connection's worker, inside the handler or a defer callback for
 * it: the worker picks the answer up when that returns, no mailbox needed. */
static bool on_own_worker(struct conn *c) {
    return tl_worker == c->w && c->in_handler;
}

void kite_http_respond(struct kite_http_req *pub, int code, const char *content_type, char *body, size_t len) {
    struct req *r = (struct req *)pub;
    struct conn *c = r->conn;
    struct kite_http_server *srv = c->w->srv;
    bool close = !c->rp.keep_alive || atomic_load(&srv->stopping);
    struct kite_buf b = {0};
    kite_buf_grow(&b, 256 + r->hdrs.len + (len <= BIG_BODY ? len : 0));
    build_head(&b, r, code, content_type, (int64_t)len, close);
    char *big = NULL;
    if (c->rp.head_only || code == 204 || code == 304 || len == 0) {
        free(body);
    } else if (len <= BIG_BODY) {
        kite_buf_append(&b, body, len);
        free(body);
    } else {
        big = body;
    }
    pthread_mutex_lock(&c->lock);
    c->ans = b;
    c->ans_big = big;
    c->ans_big_len = big ? len : 0;
    c->ans_close = close;
    c->ans_ready = true;
    if (!on_own_worker(c)) conn_kick(c);
    pthread_mutex_unlock(&c->lock);
    pending_done(srv);
}

void kite_http_defer(struct kite_http_req *pub, void (*fn)(void *ud), void *ud) {
    struct conn *c = ((struct req *)pub)->conn;
    pthread_mutex_lock(&c->lock);
    c->defer_fn = fn;
    c->defer_ud = ud;
    if (!on_own_worker(c)) conn_kick(c);
    pthread_mutex_unlock(&c->lock);
}

int kite_http_stream_begin(struct kite_http_req *pub, int code, const char *content_type, kite_http_pull pull,
                           void (*done)(void *ud), void *ud, struct kite_http_stream **ret) {
    struct req *r = (struct req *)pub;
    struct conn *c = r->conn;
    struct kite_http_server *srv = c->w->srv;
    bool chunked = c->rp.hp.http_major == 1 && c->rp.hp.http_minor >= 1;
    bool close = !chunked || !c->rp.keep_alive;
    struct kite_buf b = {0};
    build_head(&b, r, code, content_type, chunked ? LEN_CHUNKED : LEN_NONE, close);
    struct kite_http_stream *s = stream_new(c, pull, done, ud);
    pthread_mutex_lock(&c->lock);
    c->ans = b;
    c->ans_stream = s;
    c->ans_close = close;
    if (!on_own_worker(c)) conn_kick(c);
    pthread_mutex_unlock(&c->lock);
    if (ret) *ret = s;
    pending_done(srv);
    return 0;
}

/* ---- TLS transport: one recv serves GnuTLS's header and body reads ---- */

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *buf, size_t len) {
    struct conn *c = ptr;
    struct conn_extra *x = (struct conn_extra *)(c + 1);
    if (x->raw_off < x->raw_len) {
        size_t n = KITE_MIN(len, x->raw_len - x->raw_off);
        memcpy(buf, x->raw + x->raw_off, n);
        x->raw_off += n;
        return (ssize_t)n;
    }
    ssize_t k;
    if (len >= RAW_CAP) {
        k = recv(c->fd, buf, len, 0);
        if (k != 0) return k;
    } else {
        if (!x->raw) x->raw = kite_malloc(RAW_CAP);
        k = recv(c->fd, x->raw, RAW_CAP, 0);
        if (k < 0) return k;
    }
    if (k == 0) {
        /* A TCP half-close without close_notify: given to GnuTLS it is a fatal error that
         * also ends sending, and the client still waits for its answer. "Nothing now"
         * keeps the session usable; read_some reports the EOF. */
        x->tcp_eof = true;
        gnutls_transport_set_errno(c->tls, EAGAIN);
        return -1;
    }
    x->raw_len = (size_t)k;
    size_t n = KITE_MIN(len, x->raw_len);
    memcpy(buf, x->raw, n);
    x->raw_off = n;
    return (ssize_t)n;
}

static int tls_pull_timeout(gnutls_transport_ptr_t ptr, unsigned ms) {
    struct conn *c = ptr;
    struct conn_extra *x = (struct conn_extra *)(c + 1);
    if (x->raw_off < x->raw_len) return 1;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    return poll(&p, 1, 0); /* non-blocking sessions never wait here */
}

static ssize_t tls_vec_push(gnutls_transport_ptr_t ptr, const giovec_t *iov, int iovcnt) {
    struct conn *c = ptr;
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    return sendmsg(c->fd, &mh, MSG_NOSIGNAL);
}

static bool raw_pending(struct conn *c) {
    struct conn_extra *x = (struct conn_extra *)(c + 1);
    return x->raw_off < x->raw_len;
}

static bool tcp_eof(struct conn *c) {
    return ((struct conn_extra *)(c + 1))->tcp_eof;
}

/* Frees the buffers of a connection between requests (they are reallocated on its next
 * request), so thousands of idle keep-alive connections (node agents) hold no buffers. */
static void conn_trim(struct conn *c) {
    struct conn_extra *x = (struct conn_extra *)(c + 1);
    if (x->raw && x->raw_off >= x->raw_len) {
        free(x->raw);
        x->raw = NULL;
        x->raw_off = x->raw_len = 0;
    }
    if (c->in_off == c->in.len) {
        kite_buf_release(&c->in);
        c->in_off = 0;
    }
    if (c->out_off == c->out.len && !c->big) {
        kite_buf_release(&c->out);
        c->out_off = 0;
    }
    req_parser_trim(&c->rp);
    kite_buf_release(&c->req.hdrs);
}

/* ---- epoll interest ---- */

void conn_want(struct conn *c, uint32_t events) {
    if (c->peer_eof) events &= ~(uint32_t)EPOLLIN; /* level-triggered, it would report the EOF again and again */
    else events |= EPOLLRDHUP;
    if (!events) events = EPOLLERR; /* registered for nothing: errors and hang-ups are reported anyway */
    if (c->ep_events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(c->w->ep, c->ep_events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev);
    c->ep_events = events;
}

/* ---- output ---- */

/* 1: all sent; 0: the socket is full (EPOLLOUT requested); -1: the connection is broken. */
static int flush_out(struct conn *c) {
    for (;;) {
        const char *p;
        size_t n;
        if (c->out_off < c->out.len) {
            p = c->out.p + c->out_off;
            n = c->out.len - c->out_off;
        } else if (c->big_off < c->big_len) {
            p = c->big + c->big_off;
            n = c->big_len - c->big_off;
        } else {
            break;
        }
        ssize_t k = gnutls_record_send(c->tls, p, n);
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
            conn_want(c, EPOLLIN | EPOLLOUT);
            return 0;
        }
        if (k < 0) return -1;
        c->last_active_ns = now_ns();
        if (c->out_off < c->out.len) c->out_off += (size_t)k;
        else c->big_off += (size_t)k;
    }
    if (c->out.cap > BUF_KEEP) kite_buf_release(&c->out);
    kite_buf_reset(&c->out);
    c->out_off = 0;
    free(c->big);
    c->big = NULL;
    c->big_len = c->big_off = 0;
    if (c->ep_events & EPOLLOUT) conn_want(c, EPOLLIN);
    return 1;
}

int conn_flush(struct conn *c) {
    return flush_out(c);
}

/* ---- the connection state machine ---- */

static const struct refusal R_STOPPING = {503, "ServiceUnavailable", "the server is shutting down"};

/* Answers a request the layer refuses itself (parse errors, limits) and closes afterwards. */
static void refuse(struct conn *c, const struct refusal *why) {
    struct kite_buf body = {0};
    kite_buf_printf(&body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                           "\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}", why->message, why->reason, why->code);
    build_head(&c->out, NULL, why->code, "application/json", (int64_t)body.len, true);
    kite_buf_append(&c->out, body.p, body.len);
    kite_buf_release(&body);
    c->close_after = true;
    c->state = C_RESPONDING;
}

/* Reads once. 1: got bytes; 0: nothing now; -1: EOF (peer_eof is set) or error. */
static int read_some(struct conn *c) {
    if (c->in_off == c->in.len) {
        kite_buf_reset(&c->in);
        c->in_off = 0;
    } else if (c->in_off > c->in.len / 2) {
        memmove(c->in.p, c->in.p + c->in_off, c->in.len - c->in_off);
        c->in.len -= c->in_off;
        c->in_off = 0;
    }
    kite_buf_grow(&c->in, IN_CHUNK);
    ssize_t k = gnutls_record_recv(c->tls, c->in.p + c->in.len, c->in.cap - c->in.len - 1);
    if (k > 0) {
        c->in.len += (size_t)k;
        c->in.p[c->in.len] = 0;
        c->last_active_ns = now_ns();
        return 1;
    }
    if ((k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) && !tcp_eof(c)) return 0;
    /* close_notify, or a TCP half-close without it (tls_pull): the client sent all it will */
    if (k == 0 || k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) c->peer_eof = true;
    return -1;
}

/* Bytes worth trying to read without being told by epoll. */
static bool tls_pending(struct conn *c) {
    return raw_pending(c) || gnutls_record_check_pending(c->tls) > 0;
}

static void dispatch(struct conn *c) {
    struct kite_http_server *srv = c->w->srv;
    c->req.pub.method = http_method_str((enum http_method)c->rp.hp.method);
    c->req.pub.path = c->rp.path;
    c->req.pub.body = c->rp.body.p ? c->rp.body.p : "";
    c->req.pub.body_len = c->rp.body.len;
    /* Count first, then check stopping (both seq_cst): either stop sees us pending and waits,
     * or we see stopping and never start a request it would have to wait for. */
    atomic_fetch_add(&srv->n_pending, 1);
    if (atomic_load(&srv->stopping)) {
        pending_done(srv);
        c->rp.keep_alive = false;
        refuse(c, &R_STOPPING);
        return;
    }
    auth_request(c, &c->req);
    c->state = C_DISPATCHED;
    c->in_handler = true;
    srv->handler(&c->req.pub, srv->ud);
    c->in_handler = false;
}

/* Takes what other threads handed over (answer, deferred callback, stream). Worker only.
 * Returns true once the dispatched request has its answer. */
static bool collect(struct conn *c) {
    for (;;) {
        pthread_mutex_lock(&c->lock);
        if (c->defer_fn) {
            void (*fn)(void *) = c->defer_fn;
            void *ud = c->defer_ud;
            c->defer_fn = NULL;
            pthread_mutex_unlock(&c->lock);
            c->in_handler = true;
            fn(ud);
            c->in_handler = false;
            continue;
        }
        bool got = false;
        if (c->ans_ready || c->ans_stream) {
            kite_buf_append(&c->out, c->ans.p, c->ans.len);
            kite_buf_release(&c->ans);
            c->close_after |= c->ans_close;
            if (c->ans_ready) {
                c->big = c->ans_big;
                c->big_len = c->ans_big_len;
                c->big_off = 0;
                c->ans_big = NULL;
                c->ans_ready = false;
                c->state = C_RESPONDING;
            } else {
                c->stream = c->ans_stream;
                c->ans_stream = NULL;
                c->state = C_STREAMING;
            }
            got = true;
        }
        pthread_mutex_unlock(&c->lock);
        return got;
    }
}

static void conn_close(struct conn *c);

/* Advances the connection as far as it can go without waiting. Worker only. The connection
 * may be freed: callers must not touch c afterwards. */
static void drive(struct conn *c, bool readable) {
    struct kite_http_server *srv = c->w->srv;
    for (;;) {
        switch (c->state) {
        case C_HANDSHAKE: {
            int r = gnutls_handshake(c->tls);
            if ((r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) && !tcp_eof(c)) {
                conn_want(c, gnutls_record_get_direction(c->tls) ? EPOLLIN | EPOLLOUT : EPOLLIN);
                return;
            }
            if (r < 0) {
                conn_close(c);
                return;
            }
            conn_want(c, EPOLLIN);
            c->last_active_ns = now_ns();
            c->state = C_READING;
            readable = tls_pending(c);
            continue;
        }
        case C_READING: {
            if (c->in_off < c->in.len) {
                size_t n = c->in.len - c->in_off;
                size_t used;
                enum req_status st = req_parser_feed(&c->rp, c->in.p + c->in_off, n, &used);
                c->in_off += used;
                if (c->rp.begun && !c->req_start_ns) c->req_start_ns = now_ns();
                if (c->rp.expect_continue && !c->continue_queued) {
                    kite_buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
                    c->continue_queued = true;
                }
                if (st == REQ_DONE) {
                    if (c->out.len && flush_out(c) < 0) { /* "100 Continue" still queued */
                        conn_close(c);
                        return;
                    }
                    dispatch(c);
                    if (c->state == C_DISPATCHED && !collect(c)) return; /* answered later */
                    continue;
                }
                if (st == REQ_ERROR) {
                    refuse(c, c->rp.err);
                    continue;
                }
                if (c->out.len && flush_out(c) < 0) { /* "100 Continue" */
                    conn_close(c);
                    return;
                }
            }
            if (c->peer_eof) { /* answered what it sent before its EOF */
                conn_close(c);
                return;
            }
            if (!readable && !tls_pending(c)) return;
            int r = read_some(c);
            if (r < 0) {
                conn_close(c);
                return;
            }
            if (r == 0) return;
            readable = tls_pending(c) || c->in.len == c->in.cap - 1;
            continue;
        }
        case C_DISPATCHED:
            /* Waiting for the handler. Input keeps arriving (pipelining, or EOF): buffer it,
             * within limits, so level-triggered epoll does not spin. */
            if (!c->peer_eof && (readable || tls_pending(c))) {
                int r = c->in.len - c->in_off > srv->max_head + srv->max_body ? -1 : read_some(c);
                if (r < 0 && c->peer_eof) {
                    /* A half-close after the request: the client waits for the answer. Input
                     * interest goes (the EOF would be reported level-triggered); hang-ups
                     * and errors are still reported, and close it. */
                    conn_want(c, 0);
                    return;
                }
                if (r < 0) {
                    conn_close(c); /* error, or more input than a request may have */
                    return;
                }
                if (r > 0) {
                    readable = tls_pending(c);
                    continue;
                }
            }
            return;
        case C_RESPONDING: {
            int f = flush_out(c);
            if (f < 0) {
                conn_close(c);
                return;
            }
            if (f == 1 && c->close_after) {
                /* A lingering close: closing with unread input would reset the connection
                 * and could destroy the answer before the client read it. */
                shutdown(c->fd, SHUT_WR);
                c->state = C_LINGER;
                c->last_active_ns = now_ns();
                readable = true;
                continue;
            }
            if (f == 0) return;
            /* Next request on this connection (maybe already buffered). */
            conn_reset_request(c);
            c->state = C_READING;
            conn_want(c, EPOLLIN);
            readable = readable || tls_pending(c);
            continue;
        }
        case C_LINGER: {
            if (!readable) return;
            char drop[16384];
            ssize_t k;
            while ((k = recv(c->fd, drop, sizeof drop, 0)) > 0) {
                c->linger_bytes += (size_t)k;
                if (c->linger_bytes > LINGER_MAX_BYTES) break;
            }
            if (k < 0 && (errno == EAGAIN || errno == EINTR)) return;
            conn_free(c); /* EOF, error, or enough dropped */
            return;
        }
        case C_STREAMING:
            if (!stream_run(c)) {
                conn_close(c);
                return;
            }
            if (c->state == C_STREAMING) {
                /* Input while streaming: keep it for after the stream, or notice EOF. */
                if (readable || tls_pending(c)) {
                    if (c->in.len - c->in_off > srv->max_head + srv->max_body) {
                        conn_close(c);
                        return;
                    }
                    int r = read_some(c);
                    if (r < 0) {
                        conn_close(c);
                        return;
                    }
                    if (r > 0) {
                        readable = tls_pending(c);
                        continue;
                    }
                }
                return;
            }
            continue; /* the stream finished: C_RESPONDING sends the rest */
        }
    }
}

/* ---- connections: open, close, free ---- */

static struct conn *conn_new(struct kite_http_server *srv, int fd) {
    struct conn *c = kite_calloc(1, sizeof(struct conn) + sizeof(struct conn_extra));
    c->fd = fd;
    c->req.conn = c;
    pthread_mutex_init(&c->lock, NULL);
    req_parser_init(&c->rp, srv->max_head, srv->max_body);
    conn_reset_request(c);
    c->state = C_HANDSHAKE;
    if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
    }
    gnutls_priority_set(c->tls, srv->prio);
    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, srv->cred);
    if (srv->client_ca) gnutls_certificate_server_set_request(c->tls, GNUTLS_CERT_REQUEST);
    /* ALPN: HTTP/1.1 only; never h2 (research/kubectl-wire.md §0) */
    gnutls_datum_t alpn = {(unsigned char *)"http/1.1", 8};
    gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_SERVER_PRECEDENCE);
    gnutls_transport_set_ptr(c->tls, c);
    gnutls_transport_set_pull_function(c->tls, tls_pull);
    gnutls_transport_set_pull_timeout_function(c->tls, tls_pull_timeout);
    gnutls_transport_set_vec_push_function(c->tls, tls_vec_push);
    c->last_active_ns = now_ns();
    return c;
}

static void conn_attach(struct worker *w, struct conn *c) {
    c->w = w;
    c->next = w->conns;
    if (c->next) c->next->prev = c;
    w->conns = c;
    w->n_conns++;
    conn_want(c, EPOLLIN);
    drive(c, true);
}

static void conn_free(struct conn *c) {
    struct worker *w = c->w;
    struct kite_http_server *srv = w->srv;
    if (!c->stream && c->ans_stream) { /* begun but never started: done() still runs */
        c->stream = c->ans_stream;
        c->ans_stream = NULL;
    }
    if (c->stream) stream_end(c);
    pthread_mutex_lock(&w->mb_lock);
    bool queued = c->in_mb;
    if (queued) c->is_new = false;
    pthread_mutex_unlock(&w->mb_lock);
    if (c->prev) c->prev->next = c->next;
    else if (w->conns == c) w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    if (c->fd >= 0) {
        close(c->fd); /* also leaves the epoll set */
        c->fd = -1;
        w->n_conns--;
        unsigned before = atomic_fetch_sub(&srv->n_conns, 1);
        if (before >= srv->max_conns && srv->n_workers) worker_kick(&srv->workers[0]);
    }
    if (queued) {
        /* freed when the mailbox reaches it */
        c->state = C_HANDSHAKE;
        c->peer_closed = true;
        return;
    }
    gnutls_deinit(c->tls);
    struct conn_extra *x = (struct conn_extra *)(c + 1);
    free(x->raw);
    kite_buf_release(&c->in);
    req_parser_release(&c->rp);
    kite_buf_release(&c->req.hdrs);
    kite_buf_release(&c->out);
    kite_buf_release(&c->ans);
    free(c->ans_big);
    free(c->big);
    auth_user_free(c->cert_user);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Ends a connection: at once, or (request still with the handler) once it is answered. */
static void conn_close(struct conn *c) {
    if (c->state == C_DISPATCHED) {
        c->peer_closed = true;
        epoll_ctl(c->w->ep, EPOLL_CTL_DEL, c->fd, NULL);
        c->ep_events = 0;
        return;
    }
    conn_free(c);
}

/* A mailbox entry: new connection, answer, defer, stream wake. */
static void conn_service(struct worker *w, struct conn *c, bool is_new) {
    if (is_new) {
        conn_attach(w, c);
        return;
    }
    if (c->fd < 0) { /* freed while queued */
        conn_free(c);
        return;
    }
    if (c->state == C_DISPATCHED) {
        if (!collect(c)) return;
        if (c->peer_closed) {
            conn_free(c);
            return;
        }
    } else if (c->state == C_STREAMING) {
        stream_sync_deadline(c);
    }
    drive(c, false);
}

/* ---- workers ---- */

static void accept_some(struct worker *w) {
    struct kite_http_server *srv = w->srv;
    for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
        if (atomic_load(&srv->n_conns) >= srv->max_conns || atomic_load(&srv->stopping)) {
            /* at the limit: new clients wait in the backlog until a connection closes */
            epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
            w->accepting = false;
            return;
        }
        int fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: pause; the sweep resumes accepting */
                epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
                w->accepting = false;
            }
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn *c = conn_new(srv, fd);
        if (!c) {
            close(fd);
            continue;
        }
        atomic_fetch_add(&srv->n_conns, 1);
        struct worker *to = &srv->workers[atomic_fetch_add(&srv->next_worker, 1) % srv->n_workers];
        if (to == w) {
            conn_attach(w, c);
        } else {
            c->w = to;
            pthread_mutex_lock(&to->mb_lock);
            c->is_new = true;
            c->in_mb = true;
            if (to->mb_tail) to->mb_tail->mb_next = c;
            else to->mb_head = c;
            to->mb_tail = c;
            pthread_mutex_unlock(&to->mb_lock);
            worker_kick(to);
        }
    }
}

static void maybe_resume_accept(struct worker *w) {
    struct kite_http_server *srv = w->srv;
    if (w->idx != 0 || w->accepting || atomic_load(&srv->stopping) || atomic_load(&srv->n_conns) >= srv->max_conns)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listener_tag};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, srv->lfd, &ev) == 0) w->accepting = true;
}

/* Idle and slow clients (not streams, not requests with the handler). */
static void sweep(struct worker *w, int64_t now) {
    struct kite_http_server *srv = w->srv;
    int64_t idle = (int64_t)srv->idle_timeout_s * KITE_NS_PER_SEC;
    int64_t head_max = (int64_t)srv->header_timeout_s * KITE_NS_PER_SEC;
    int64_t read_max = (int64_t)srv->read_timeout_s * KITE_NS_PER_SEC;
    bool stopping = atomic_load(&srv->stopping);
    for (struct conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == C_STREAMING || c->state == C_DISPATCHED) continue;
        if (c->state == C_LINGER) {
            if (now - c->last_active_ns > LINGER_NS || stopping) conn_free(c);
            continue;
        }
        bool between = c->state == C_READING && c->in_off == c->in.len && !c->rp.begun;
        bool slow = c->state == C_READING && c->req_start_ns &&
                    now - c->req_start_ns > (c->rp.head_done ? read_max : head_max);
        if (slow || now - c->last_active_ns > idle || (stopping && between)) conn_free(c);
        else if (between) conn_trim(c);
    }
}

/* On stop: streams end cleanly, idle connections close. */
static void worker_stop_streams(struct worker *w) {
    for (struct conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == C_STREAMING) {
            c->rp.keep_alive = false;
            c->close_after = true;
            drive(c, false); /* stream_run sees stopping and finishes */
        }
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct kite_http_server *srv = w->srv;
    tl_worker = w;
    struct epoll_event evs[EVENTS_PER_WAIT];
    int64_t last_sweep = now_ns();
    bool saw_stop = false;
    for (;;) {
        int64_t now = now_ns();
        int timeout = 1000 - (int)((now - last_sweep) / KITE_NS_PER_MS);
        if (timeout < 0) timeout = 0;
        int t = stream_timers(w, now);
        if (t >= 0 && t < timeout) timeout = t;
        int n = epoll_wait(w->ep, evs, EVENTS_PER_WAIT, timeout);
        bool mail = false;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == NULL) {
                uint64_t v;
                ssize_t k = read(w->evfd, &v, sizeof(v));
                (void)k;
                mail = true;
            } else if (p == &listener_tag) {
                accept_some(w);
            } else {
                struct conn *c = p;
                if (c->fd < 0) continue;
                if (c->peer_eof && (evs[i].events & (EPOLLERR | EPOLLHUP))) {
                    conn_close(c); /* half-closed, and now gone: nobody reads an answer */
                    continue;
                }
                drive(c, true);
            }
        }
        if (mail) {
            atomic_store(&w->mb_kicked, false);
            pthread_mutex_lock(&w->mb_lock);
            struct conn *list = w->mb_head;
            w->mb_head = w->mb_tail = NULL;
            bool quit = w->mb_quit;
            pthread_mutex_unlock(&w->mb_lock);
            while (list) {
                pthread_mutex_lock(&w->mb_lock);
                struct conn *c = list;
                list = c->mb_next;
                c->in_mb = false;
                bool is_new = c->is_new;
                c->is_new = false;
                pthread_mutex_unlock(&w->mb_lock);
                conn_service(w, c, is_new);
            }
            if (atomic_load(&srv->stopping) && !saw_stop) {
                saw_stop = true;
                if (w->idx == 0 && w->accepting) {
                    epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
                    w->accepting = false;
                }
                worker_stop_streams(w);
                sweep(w, now_ns());
            }
            if (quit) break;
            maybe_resume_accept(w);
        }
        now = now_ns();
        if (now - last_sweep >= KITE_NS_PER_SEC) {
            last_sweep = now;
            sweep(w, now);
            maybe_resume_accept(w);
        }
    }
    /* Quit: n_pending is 0, so no connection waits for an answer. */
    while (w->conns) conn_free(w->conns);
    pthread_mutex_lock(&w->mb_lock);
    struct conn *list = w->mb_head;
    w->mb_head = w->mb_tail = NULL;
    pthread_mutex_unlock(&w->mb_lock);
    while (list) {
        struct conn *c = list;
        list = c->mb_next;
        c->in_mb = false;
        if (c->is_new) {
            c->is_new = false;
            c->w = w;
            w->n_conns++; /* conn_free counts it out */
        }
        conn_free(c);
    }
    return NULL;
}

/* ---- daemon ---- */

static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, bool *dual) {
    memset(ss, 0, sizeof(*ss));
    *dual = false;
    const char *colon = strrchr(listen, ':');
    if (!colon) return -EINVAL;
    int64_t port;
    if (kite_parse_int64(colon + 1, &port) < 0 || port < 0 || port > 65535) return -EINVAL;
    _cleanup_free_ char *host = kite_strndup(listen, (size_t)(colon - listen));
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    if (host[0] == 0 || kite_streq(host, "::") || kite_streq(host, "*")) {
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_any;
        s6->sin6_port = htons((uint16_t)port);
        *sl = sizeof(*s6);
        *dual = true;
        return 0;
    }
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *sl = sizeof(*s4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *sl = sizeof(*s6);
        return 0;
    }
    return -EINVAL;
}

static int open_listener(const char *addr, uint16_t *port) {
    struct sockaddr_storage ss;
    socklen_t sl;
    bool dual;
    int rc = parse_listen(addr, &ss, &sl, &dual);
    if (rc < 0) return rc;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? &zero : &one, sizeof(int));
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    getsockname(fd, (struct sockaddr *)&bound, &bl);
    *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
    return fd;
}

static void free_server(struct kite_http_server *srv) {
    for (unsigned i = 0; i < srv->n_workers; i++) {
        struct worker *w = &srv->workers[i];
        if (w->ep >= 0) close(w->ep);
        if (w->evfd >= 0) close(w->evfd);
        pthread_mutex_destroy(&w->mb_lock);
        free(w->heap.a);
    }
    free(srv->workers);
    if (srv->lfd >= 0) close(srv->lfd);
    auth_free_tokens(srv);
    if (srv->prio) gnutls_priority_deinit(srv->prio);
    if (srv->cred) gnutls_certificate_free_credentials(srv->cred);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    free(srv);
}

static int setup_tls(struct kite_http_server *srv, const struct kite_http_config *cfg) {
    if (gnutls_certificate_allocate_credentials(&srv->cred) < 0) return -ENOMEM;
    gnutls_datum_t cert = {(unsigned char *)cfg->cert_pem, (unsigned)strlen(cfg->cert_pem)};
    gnutls_datum_t key = {(unsigned char *)cfg->key_pem, (unsigned)strlen(cfg->key_pem)};
    if (gnutls_certificate_set_x509_key_mem(srv->cred, &cert, &key, GNUTLS_X509_FMT_PEM) < 0) return -EINVAL;
    if (cfg->client_ca_pem) {
        gnutls_datum_t ca = {(unsigned char *)cfg->client_ca_pem, (unsigned)strlen(cfg->client_ca_pem)};
        if (gnutls_certificate_set_x509_trust_mem(srv->cred, &ca, GNUTLS_X509_FMT_PEM) <= 0) return -EINVAL;
        srv->client_ca = true;
    }
    if (gnutls_priority_init(&srv->prio, TLS_PRIORITIES, NULL) < 0) return -EINVAL;
    return 0;
}

int kite_http_start(const struct kite_http_config *cfg, struct kite_http_server **ret) {
    if (!cfg->handler || !cfg->cert_pem || !cfg->key_pem || !cfg->listen) return -EINVAL;
    struct kite_http_server *srv = kite_calloc(1, sizeof(*srv));
    srv->lfd = -1;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    srv->handler = cfg->handler;
    srv->ud = cfg->ud;
    srv->max_body = cfg->max_body ? cfg->max_body : KITE_HTTP_DEFAULT_MAX_BODY;
    srv->max_head = cfg->max_header_bytes ? cfg->max_header_bytes : KITE_HTTP_DEFAULT_MAX_HEADER_BYTES;
    srv->max_conns = cfg->max_connections ? cfg->max_connections : KITE_HTTP_DEFAULT_MAX_CONNECTIONS;
    srv->idle_timeout_s = cfg->idle_timeout_s ? cfg->idle_timeout_s : KITE_HTTP_DEFAULT_IDLE_TIMEOUT_S;
    srv->header_timeout_s = cfg->header_timeout_s ? cfg->header_timeout_s : KITE_HTTP_DEFAULT_HEADER_TIMEOUT_S;
    srv->read_timeout_s = cfg->read_timeout_s ? cfg->read_timeout_s : KITE_HTTP_DEFAULT_READ_TIMEOUT_S;
    int rc;
    if ((rc = setup_tls(srv, cfg)) < 0) goto fail;
    if (cfg->token_file && (rc = auth_load_tokens(srv, cfg->token_file)) < 0) goto fail;
    if ((rc = open_listener(cfg->listen, &srv->port)) < 0) goto fail;
    srv->lfd = rc;

    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    srv->n_workers = cfg->threads ? cfg->threads : (unsigned)(ncpu > 0 ? ncpu : 1);
    srv->workers = kite_calloc(srv->n_workers, sizeof(*srv->workers));
    for (unsigned i = 0; i < srv->n_workers; i++) {
        struct worker *w = &srv->workers[i];
        w->srv = srv;
        w->idx = i;
        pthread_mutex_init(&w->mb_lock, NULL);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->ep < 0 || w->evfd < 0) {
            rc = -errno;
            srv->n_workers = i + 1;
            goto fail;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(w->ep, EPOLL_CTL_ADD, w->evfd, &ev);
    }
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &listener_tag};
    epoll_ctl(srv->workers[0].ep, EPOLL_CTL_ADD, srv->lfd, &lev);
    srv->workers[0].accepting = true;
    for (unsigned i = 0; i < srv->n_workers; i++) {
        if ((rc = pthread_create(&srv->workers[i].thread, NULL, worker_main, &srv->workers[i])) != 0) {
            rc = -rc;
            atomic_store(&srv->stopping, true);
            for (unsigned j = 0; j < i; j++) {
                pthread_mutex_lock(&srv->workers[j].mb_lock);
                srv->workers[j].mb_quit = true;
                pthread_mutex_unlock(&srv->workers[j].mb_lock);
                worker_kick(&srv->workers[j]);
                pthread_join(srv->workers[j].thread, NULL);
            }
            goto fail;
        }
        pthread_setname_np(srv->workers[i].thread, "http-worker");
    }
    *ret = srv;
    return 0;
fail:
    if (srv->workers)
        for (unsigned i = 0; i < srv->n_workers; i++) {
            if (!srv->workers[i].ep) srv->workers[i].ep = -1;
            if (!srv->workers[i].evfd) srv->workers[i].evfd = -1;
        }
    free_server(srv);
    return rc;
}

uint16_t kite_http_port(struct kite_http_server *s) {
    return s->port;
}

void kite_http_stop(struct kite_http_server *srv) {
    if (!srv) return;
    /* Stop accepting and end streams (on their workers), then wait for deferred answers. */
    atomic_store(&srv->stopping, true);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        atomic_store(&srv->workers[i].mb_kicked, false);
        worker_kick(&srv->workers[i]);
    }
    pthread_mutex_lock(&srv->lock);
    while (atomic_load(&srv->n_pending) > 0) pthread_cond_wait(&srv->cond, &srv->lock);
    pthread_mutex_unlock(&srv->lock);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        struct worker *w = &srv->workers[i];
        pthread_mutex_lock(&w->mb_lock);
        w->mb_quit = true;
        pthread_mutex_unlock(&w->mb_lock);
        atomic_store(&w->mb_kicked, false);
        worker_kick(w);
    }
    for (unsigned i = 0; i < srv->n_workers; i++) pthread_join(srv->workers[i].thread, NULL);
    free_server(srv);
}
