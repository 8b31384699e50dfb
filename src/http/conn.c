/* kite http connections: TLS transport, reading, the state machine, open and close.
 *
 * The per-request path is kept to the system calls a request needs: one recv (GnuTLS reads a
 * record as a 5-byte header and then its body; tls_pull serves both from one recv into the
 * connection's buffer), one sendmsg (the whole response is one TLS record), and no epoll
 * changes (the socket stays registered for input, level-triggered, for its whole life; output
 * interest is added only while a send would block).
 *
 * Keep-alive: one request at a time per connection (pipelined requests wait in the input
 * buffer). Closing after an error is a lingering close: shut the write side down, then read
 * and drop input for a while, so the client gets the answer instead of a reset. */
#include "http/http-internal.h"

#include <arpa/inet.h>
#include <poll.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RAW_CAP 4096u                  /* one recv's worth of TLS bytes per connection */
#define IN_CHUNK 16384u                /* decrypted input read per call */
#define BUF_KEEP (64u * 1024)          /* per-connection buffers above this are freed after use */
/* dropped while lingering before the connection is freed: a whole refused body (a 401 or 429
 * at its head) is drained, without being kept, so a client that writes its body before reading
 * (Python's http.client) reads the answer instead of a reset */
#define LINGER_MAX_BYTES (4u * 1024 * 1024)

/* ---- connection bookkeeping ---- */

struct conn_extra {
    char *raw;          /* bytes recv'd for GnuTLS, not yet handed to it */
    size_t raw_off, raw_len;
    bool tcp_eof;       /* recv saw the end of the client's stream */
};

static void conn_reset_request(struct conn *c) {
    if (c->w) kite_http_body_release(c->w->srv, &c->req, NULL);
    kite_http_req_parser_next(&c->rp);
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

void kite_http_conn_kick(struct conn *c) {
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
    if (!queued) kite_http_worker_kick(w);
}

/* ---- request accessors ---- */

const char *kite_http_header(const struct kite_http_req *pub, const char *name) {
    return kite_http_req_parser_header(((const struct req *)pub)->rp, name);
}

const char *kite_http_query(const struct kite_http_req *pub, const char *name) {
    return kite_http_req_parser_query(((const struct req *)pub)->rp, name);
}

size_t kite_http_header_all(const struct kite_http_req *pub, const char *name, const char **out, size_t max) {
    return kite_http_req_parser_header_all(((const struct req *)pub)->rp, name, out, max);
}

size_t kite_http_header_prefixed(const struct kite_http_req *pub, const char *prefix, const char **names,
                                 const char **values, size_t max) {
    const struct req_parser *p = ((const struct req *)pub)->rp;
    const char *s = p->hdr.p;
    size_t n = 0, plen = strlen(prefix);
    for (size_t i = 0; i < p->n_hdr; i++) {
        const char *k = s, *v = s + strlen(s) + 1;
        if (strncasecmp(k, prefix, plen) == 0) {
            if (n < max) names[n] = k, values[n] = v;
            n++;
        }
        s = v + strlen(v) + 1;
    }
    return n;
}

const char *kite_http_target(const struct kite_http_req *pub) {
    const struct req_parser *p = ((const struct req *)pub)->rp;
    return p->url.p ? p->url.p : "/";
}

/* Asked once per connection (a system call per request showed in the audit log's cost); an
 * HTTP/1.1 connection serves one request at a time, so its cache has one user at a time; an
 * HTTP/2 connection fills it before its first request (h2_start), and it is read-only after. */
void kite_http_peer_ip(const struct kite_http_req *pub, char out[64]) {
    struct conn *c = ((const struct req *)pub)->conn;
    if (!c->peer_ip[0]) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->peer_ip, sizeof c->peer_ip);
            else if (ss.ss_family == AF_INET6) inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->peer_ip, sizeof c->peer_ip);
        }
    }
    memcpy(out, c->peer_ip, sizeof c->peer_ip);
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

/* ---- a hijacked connection's tunnel (tunnel.c) ---- */

bool kite_http_conn_raw_pending(struct conn *c) { return raw_pending(c); }
bool kite_http_conn_tcp_eof(struct conn *c) { return tcp_eof(c); }

static bool tun_pending(void *owner) { return raw_pending(owner); }
static bool tun_eof(void *owner) { return tcp_eof(owner); }

/* The owner is done: the worker frees the connection; the request is answered at last. */
static void tun_release(void *owner) {
    struct conn *c = owner;
    struct kite_http_server *srv = c->w->srv;
    pthread_mutex_lock(&c->lock);
    c->tunnel_closed = true;
    kite_http_conn_kick(c);
    pthread_mutex_unlock(&c->lock);
    kite_http_pending_done(srv);
}

const struct tunnel_owner kite_http_conn_tunnel_owner = {tun_pending, tun_eof, tun_release, NULL};

/* Frees the buffers of a connection between requests (they are reallocated on its next
 * request), so thousands of idle keep-alive connections (node agents) hold no buffers. */
void kite_http_conn_trim(struct conn *c) {
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
    kite_http_req_parser_trim(&c->rp);
    kite_buf_release(&c->req.hdrs);
}

/* ---- epoll interest ---- */

void kite_http_conn_want(struct conn *c, uint32_t events) {
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
int kite_http_conn_flush(struct conn *c) {
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
            kite_http_conn_want(c, EPOLLIN | EPOLLOUT);
            return 0;
        }
        if (k < 0) return -1;
        c->last_active_ns = http_now_ns();
        if (c->out_off < c->out.len) c->out_off += (size_t)k;
        else c->big_off += (size_t)k;
    }
    if (c->out.cap > BUF_KEEP) kite_buf_release(&c->out);
    kite_buf_reset(&c->out);
    c->out_off = 0;
    free(c->big);
    c->big = NULL;
    c->big_len = c->big_off = 0;
    if (c->ep_events & EPOLLOUT) kite_http_conn_want(c, EPOLLIN);
    return 1;
}

/* ---- the connection state machine ---- */

static const struct refusal R_STOPPING = {503, "ServiceUnavailable", "the server is shutting down", false};

/* Reads once. 1: got bytes; 0: nothing now; -1: EOF (peer_eof is set) or error. */
int kite_http_conn_read_some(struct conn *c) {
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
        c->last_active_ns = http_now_ns();
        return 1;
    }
    if ((k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) && !tcp_eof(c)) return 0;
    /* close_notify, or a TCP half-close without it (tls_pull): the client sent all it will */
    if (k == 0 || k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) c->peer_eof = true;
    return -1;
}

/* Bytes worth trying to read without being told by epoll. */
bool kite_http_conn_tls_pending(struct conn *c) {
    return raw_pending(c) || gnutls_record_check_pending(c->tls) > 0;
}

/* The head of a request with a body: authenticated and claimed before the body is read, so
 * an anonymous client gets its 401 instead of "100 Continue" and a body no one will read is
 * never buffered (the connection then closes: the body may still be on its way). */
static const struct refusal *h1_head(struct req_parser *p, uint64_t declared, void *ud) {
    struct conn *c = ud;
    c->req.pub.method = http_method_str((enum http_method)p->hp.method);
    c->req.pub.path = p->path;
    return kite_http_body_admit(c, &c->req, p, declared, NULL);
}

static const struct refusal *h1_grow(struct req_parser *p, size_t total, void *ud) {
    struct conn *c = ud;
    const struct refusal *bad = kite_http_body_claim(c->w->srv, &c->req, total, NULL);
    if (!bad) p->allowed = total;
    return bad;
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
        kite_http_pending_done(srv);
        c->rp.keep_alive = false;
        kite_http_conn_refuse(c, &R_STOPPING);
        return;
    }
    kite_http_auth_request(c, &c->req);
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
        if (c->upg) {
            /* kite_http_upgrade: the connection leaves the worker's epoll set for its tunnel */
            struct upgrade_wait *uw = c->upg;
            c->upg = NULL;
            int res = 1;
            if (c->peer_closed) {
                res = -ECONNRESET;
                c->state = C_RESPONDING; /* nothing to send: conn_service frees it */
            } else {
                epoll_ctl(c->w->ep, EPOLL_CTL_DEL, c->fd, NULL);
                c->ep_events = 0;
                c->state = C_TUNNEL;
            }
            pthread_mutex_unlock(&c->lock);
            if (res < 0) kite_http_pending_done(c->w->srv);
            pthread_mutex_lock(&uw->mu);
            uw->result = res;
            pthread_cond_signal(&uw->cond);
            pthread_mutex_unlock(&uw->mu);
            return true;
        }
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

/* Advances the connection as far as it can go without waiting. Worker only. The connection
 * may be freed: callers must not touch c afterwards. */
void kite_http_conn_drive(struct conn *c, bool readable) {
    struct kite_http_server *srv = c->w->srv;
    for (;;) {
        switch (c->state) {
        case C_HANDSHAKE: {
            int r = gnutls_handshake(c->tls);
            if ((r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) && !tcp_eof(c)) {
                kite_http_conn_want(c, gnutls_record_get_direction(c->tls) ? EPOLLIN | EPOLLOUT : EPOLLIN);
                return;
            }
            if (r < 0) {
                kite_http_conn_close(c);
                return;
            }
            kite_http_conn_want(c, EPOLLIN);
            c->last_active_ns = http_now_ns();
            c->state = C_READING;
            readable = kite_http_conn_tls_pending(c);
            gnutls_datum_t proto;
            if (srv->http2 && gnutls_alpn_get_selected_protocol(c->tls, &proto) == 0 && proto.size == 2 &&
                memcmp(proto.data, "h2", 2) == 0) {
                if (kite_http_h2_start(c) < 0) {
                    kite_http_conn_close(c);
                    return;
                }
                c->state = C_H2;
                readable = true;
            }
            continue;
        }
        case C_H2:
            kite_http_h2_drive(c, readable);
            return;
        case C_TUNNEL:
            return;
        case C_READING: {
            if (c->in_off < c->in.len) {
                size_t n = c->in.len - c->in_off;
                size_t used;
                enum req_status st = kite_http_req_parser_feed(&c->rp, c->in.p + c->in_off, n, &used);
                c->in_off += used;
                if (c->rp.begun && !c->req_start_ns) c->req_start_ns = http_now_ns();
                if (st == REQ_ERROR) { /* before "100 Continue": a refused body is never asked for */
                    kite_http_conn_refuse(c, c->rp.err);
                    continue;
                }
                if (c->rp.expect_continue && !c->continue_queued) {
                    kite_buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
                    c->continue_queued = true;
                }
                if (st == REQ_DONE) {
                    if (c->out.len && kite_http_conn_flush(c) < 0) { /* "100 Continue" still queued */
                        kite_http_conn_close(c);
                        return;
                    }
                    dispatch(c);
                    if (c->state == C_DISPATCHED && !collect(c)) return; /* answered later */
                    continue;
                }
                if (c->out.len && kite_http_conn_flush(c) < 0) { /* "100 Continue" */
                    kite_http_conn_close(c);
                    return;
                }
            }
            if (c->peer_eof) { /* answered what it sent before its EOF */
                kite_http_conn_close(c);
                return;
            }
            if (!readable && !kite_http_conn_tls_pending(c)) return;
            int r = kite_http_conn_read_some(c);
            if (r < 0) {
                kite_http_conn_close(c);
                return;
            }
            if (r == 0) return;
            readable = kite_http_conn_tls_pending(c) || c->in.len == c->in.cap - 1;
            continue;
        }
        case C_DISPATCHED:
            /* Waiting for the handler. Input keeps arriving (pipelining, or EOF): buffer it,
             * within limits, so level-triggered epoll does not spin. */
            if (!c->peer_eof && (readable || kite_http_conn_tls_pending(c))) {
                int r = c->in.len - c->in_off > srv->max_head + srv->max_body ? -1 : kite_http_conn_read_some(c);
                if (r < 0 && c->peer_eof) {
                    /* A half-close after the request: the client waits for the answer. Input
                     * interest goes (the EOF would be reported level-triggered); hang-ups
                     * and errors are still reported, and close it. */
                    kite_http_conn_want(c, 0);
                    return;
                }
                if (r < 0) {
                    kite_http_conn_close(c); /* error, or more input than a request may have */
                    return;
                }
                if (r > 0) {
                    readable = kite_http_conn_tls_pending(c);
                    continue;
                }
            }
            return;
        case C_RESPONDING: {
            int f = kite_http_conn_flush(c);
            if (f < 0) {
                kite_http_conn_close(c);
                return;
            }
            if (f == 1 && c->close_after) {
                /* A lingering close: closing with unread input would reset the connection
                 * and could destroy the answer before the client read it. */
                kite_http_conn_linger(c);
                readable = true;
                continue;
            }
            if (f == 0) return;
            /* Next request on this connection (maybe already buffered). */
            conn_reset_request(c);
            c->state = C_READING;
            kite_http_conn_want(c, EPOLLIN);
            readable = readable || kite_http_conn_tls_pending(c);
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
            kite_http_conn_free(c); /* EOF, error, or enough dropped */
            return;
        }
        case C_STREAMING:
            if (!kite_http_stream_run(c)) {
                kite_http_conn_close(c);
                return;
            }
            if (c->state == C_STREAMING) {
                /* Input while streaming: keep it for after the stream, or notice EOF. */
                if (readable || kite_http_conn_tls_pending(c)) {
                    if (c->in.len - c->in_off > srv->max_head + srv->max_body) {
                        kite_http_conn_close(c);
                        return;
                    }
                    int r = kite_http_conn_read_some(c);
                    if (r < 0) {
                        kite_http_conn_close(c);
                        return;
                    }
                    if (r > 0) {
                        readable = kite_http_conn_tls_pending(c);
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

void kite_http_conn_linger(struct conn *c) {
    shutdown(c->fd, SHUT_WR);
    c->state = C_LINGER;
    c->last_active_ns = http_now_ns();
}

struct conn *kite_http_conn_new(struct kite_http_server *srv, int fd) {
    struct conn *c = kite_calloc(1, sizeof(struct conn) + sizeof(struct conn_extra));
    c->fd = fd;
    c->req.conn = c;
    c->req.rp = &c->rp;
    pthread_mutex_init(&c->lock, NULL);
    kite_http_req_parser_init(&c->rp, srv->max_head, srv->max_body);
    c->rp.hooks = (struct req_hooks){h1_head, h1_grow, c};
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
    /* ALPN: "h2" when the client offers it (every Kubernetes client does), else HTTP/1.1. With
     * HTTP/2 switched off, never "h2": a Go client that gets it speaks HTTP/2 regardless
     * (research/kubectl-wire.md §0.4). */
    gnutls_datum_t alpn[2] = {{(unsigned char *)"h2", 2}, {(unsigned char *)"http/1.1", 8}};
    if (srv->http2) gnutls_alpn_set_protocols(c->tls, alpn, 2, GNUTLS_ALPN_SERVER_PRECEDENCE);
    else gnutls_alpn_set_protocols(c->tls, &alpn[1], 1, GNUTLS_ALPN_SERVER_PRECEDENCE);
    gnutls_transport_set_ptr(c->tls, c);
    gnutls_transport_set_pull_function(c->tls, tls_pull);
    gnutls_transport_set_pull_timeout_function(c->tls, tls_pull_timeout);
    gnutls_transport_set_vec_push_function(c->tls, tls_vec_push);
    c->last_active_ns = http_now_ns();
    return c;
}

void kite_http_conn_attach(struct worker *w, struct conn *c) {
    c->w = w;
    c->next = w->conns;
    if (c->next) c->next->prev = c;
    w->conns = c;
    w->n_conns++;
    kite_http_conn_want(c, EPOLLIN);
    kite_http_conn_drive(c, true);
}

void kite_http_conn_free(struct conn *c) {
    struct worker *w = c->w;
    struct kite_http_server *srv = w->srv;
    if (!c->stream && c->ans_stream) { /* begun but never started: done() still runs */
        c->stream = c->ans_stream;
        c->ans_stream = NULL;
    }
    if (c->stream) kite_http_stream_end(c);
    if (c->h2) kite_http_h2_free(c);
    pthread_mutex_lock(&w->mb_lock);
    bool queued = c->in_mb;
    if (queued) c->is_new = false;
    pthread_mutex_unlock(&w->mb_lock);
    if (c->prev) c->prev->next = c->next;
    else if (w->conns == c) w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    if (c->fd >= 0) {
        /* Leave the epoll set before closing: close() removes a registration only when no
         * other descriptor shares the socket's open file, and a child forked by this process
         * (the agent spawning runc and conmon in `kite up`) holds copies until it execs. A
         * registration left behind reports events with this freed connection's pointer. */
        epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
        w->n_conns--;
        unsigned before = atomic_fetch_sub(&srv->n_conns, 1);
        if (before >= srv->max_conns && srv->n_workers) kite_http_worker_kick(&srv->workers[0]);
    }
    if (queued) {
        /* freed when the mailbox reaches it */
        c->state = C_HANDSHAKE;
        c->peer_closed = true;
        return;
    }
    kite_http_body_release(srv, &c->req, NULL);
    gnutls_deinit(c->tls);
    struct conn_extra *x = (struct conn_extra *)(c + 1);
    free(x->raw);
    kite_buf_release(&c->in);
    kite_http_req_parser_release(&c->rp);
    kite_buf_release(&c->req.hdrs);
    kite_buf_release(&c->out);
    kite_buf_release(&c->ans);
    free(c->ans_big);
    free(c->big);
    kite_http_auth_user_free(c->cert_user);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Ends a connection: at once, or (request still with the handler) once it is answered. */
void kite_http_conn_close(struct conn *c) {
    if (c->state == C_H2) {
        kite_http_h2_close(c);
        return;
    }
    if (c->state == C_DISPATCHED) {
        c->peer_closed = true;
        epoll_ctl(c->w->ep, EPOLL_CTL_DEL, c->fd, NULL);
        c->ep_events = 0;
        return;
    }
    kite_http_conn_free(c);
}

/* A mailbox entry: new connection, answer, defer, stream wake. */
void kite_http_conn_service(struct worker *w, struct conn *c, bool is_new) {
    if (is_new) {
        kite_http_conn_attach(w, c);
        return;
    }
    if (c->fd < 0) { /* freed while queued */
        kite_http_conn_free(c);
        return;
    }
    if (c->state == C_H2) {
        kite_http_h2_service(c);
        return;
    }
    if (c->state == C_TUNNEL) {
        pthread_mutex_lock(&c->lock);
        bool closed = c->tunnel_closed;
        pthread_mutex_unlock(&c->lock);
        if (closed) kite_http_conn_free(c);
        return;
    }
    if (c->state == C_DISPATCHED) {
        if (!collect(c)) return;
        if (c->peer_closed) {
            kite_http_conn_free(c);
            return;
        }
    } else if (c->state == C_STREAMING) {
        kite_http_stream_sync_deadline(c);
    }
    kite_http_conn_drive(c, false);
}

