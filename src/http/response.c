/* kite http responses: heads, answers from any thread, deferred answers, stream starts, and
 * the layer's own refusals.
 *
 * An answer built on another thread reaches the connection's worker through its mailbox: one
 * eventfd write wakes it for however many answers arrive before it looks. */
#include "http/http-internal.h"

#include <stdio.h>
#include <time.h>

#define BIG_BODY (64u * 1024)          /* bodies above this are sent from their own buffer */

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

/* The last answer may let kite_http_stop go on and free srv: that one is counted under the
 * lock stop waits with, and nothing of srv is touched after it unlocks. The others leave one
 * of at least two, so stop still waits, and they touch nothing after. */
void kite_http_pending_done(struct kite_http_server *srv) {
    long n = atomic_load(&srv->n_pending);
    while (n > 1)
        if (atomic_compare_exchange_weak(&srv->n_pending, &n, n - 1)) return;
    pthread_mutex_lock(&srv->lock);
    if (atomic_fetch_sub(&srv->n_pending, 1) == 1) pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
}

/* True when the caller is the connection's worker, inside the handler or a defer callback for
 * it: the worker picks the answer up when that returns, no mailbox needed. */
bool kite_http_conn_on_own_worker(struct conn *c) {
    return kite_http_tl_worker == c->w && c->in_handler;
}

void kite_http_respond(struct kite_http_req *pub, int code, const char *content_type, char *body, size_t len) {
    struct req *r = (struct req *)pub;
    if (r->h2) {
        kite_http_h2_respond(r, code, content_type, body, len);
        return;
    }
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
    if (!kite_http_conn_on_own_worker(c)) kite_http_conn_kick(c);
    pthread_mutex_unlock(&c->lock);
    kite_http_pending_done(srv);
}

void kite_http_defer(struct kite_http_req *pub, void (*fn)(void *ud), void *ud) {
    if (((struct req *)pub)->h2) {
        kite_http_h2_defer((struct req *)pub, fn, ud);
        return;
    }
    struct conn *c = ((struct req *)pub)->conn;
    pthread_mutex_lock(&c->lock);
    c->defer_fn = fn;
    c->defer_ud = ud;
    if (!kite_http_conn_on_own_worker(c)) kite_http_conn_kick(c);
    pthread_mutex_unlock(&c->lock);
}

int kite_http_stream_begin(struct kite_http_req *pub, int code, const char *content_type, kite_http_pull pull,
                           void (*done)(void *ud), void *ud, struct kite_http_stream **ret) {
    struct req *r = (struct req *)pub;
    if (r->h2) return kite_http_h2_stream_begin(r, code, content_type, pull, done, ud, ret);
    struct conn *c = r->conn;
    struct kite_http_server *srv = c->w->srv;
    bool chunked = c->rp.hp.http_major == 1 && c->rp.hp.http_minor >= 1;
    bool close = !chunked || !c->rp.keep_alive;
    struct kite_buf b = {0};
    build_head(&b, r, code, content_type, chunked ? LEN_CHUNKED : LEN_NONE, close);
    struct kite_http_stream *s = kite_http_stream_new(c, pull, done, ud);
    pthread_mutex_lock(&c->lock);
    c->ans = b;
    c->ans_stream = s;
    c->ans_close = close;
    if (!kite_http_conn_on_own_worker(c)) kite_http_conn_kick(c);
    pthread_mutex_unlock(&c->lock);
    if (ret) *ret = s;
    kite_http_pending_done(srv);
    return 0;
}

bool kite_http_can_upgrade(const struct kite_http_req *pub) {
    const struct req *r = (const struct req *)pub;
    return !r->h2 && r->rp->hp.http_major == 1 && r->rp->hp.http_minor >= 1;
}

int kite_http_upgrade(struct kite_http_req *pub, struct kite_http_tunnel **ret) {
    struct req *r = (struct req *)pub;
    if (!kite_http_can_upgrade(pub)) return -EPROTO;
    struct conn *c = r->conn;
    if (kite_http_tl_worker) return -EDEADLK;
    struct kite_http_server *srv = c->w->srv;
    if (atomic_load(&srv->stopping)) {
        kite_http_respond(pub, 503, NULL, NULL, 0);
        return -ESHUTDOWN;
    }
    struct upgrade_wait uw = {.result = 0};
    pthread_mutex_init(&uw.mu, NULL);
    pthread_cond_init(&uw.cond, NULL);
    pthread_mutex_lock(&c->lock);
    c->upg = &uw;
    kite_http_conn_kick(c);
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_lock(&uw.mu);
    while (!uw.result) pthread_cond_wait(&uw.cond, &uw.mu);
    pthread_mutex_unlock(&uw.mu);
    pthread_mutex_destroy(&uw.mu);
    pthread_cond_destroy(&uw.cond);
    if (uw.result < 0) return uw.result;
    /* the worker let go: this thread owns the connection now */
    struct tunnel_owner o = kite_http_conn_tunnel_owner;
    o.owner = c;
    struct kite_http_tunnel *t = kite_http_tunnel_new(c->fd, c->tls, c->in.p + c->in_off, c->in.len - c->in_off, &o);
    struct kite_buf head = {0};
    kite_buf_puts(&head, "HTTP/1.1 101 Switching Protocols\r\n");
    if (r->hdrs.len) kite_buf_append(&head, r->hdrs.p, r->hdrs.len);
    kite_buf_puts(&head, "\r\n");
    int e = kite_http_tunnel_write_all(t, head.p, head.len, 10000);
    kite_buf_release(&head);
    if (e < 0) {
        kite_http_tunnel_close(t);
        return -ECONNRESET;
    }
    *ret = t;
    return 0;
}

/* Answers a request the layer refuses itself (parse errors, limits) and closes afterwards. */
void kite_http_conn_refuse(struct conn *c, const struct refusal *why) {
    struct kite_buf body = {0};
    kite_buf_printf(&body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                           "\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}\n", why->message, why->reason, why->code);
    kite_buf_reset(&c->req.hdrs);
    if (why->retry) kite_http_add_header(&c->req.pub, "Retry-After", "1");
    build_head(&c->out, &c->req, why->code, "application/json", (int64_t)body.len, true);
    kite_buf_append(&c->out, body.p, body.len);
    kite_buf_release(&body);
    c->close_after = true;
    c->state = C_RESPONDING;
}

