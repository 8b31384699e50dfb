/* kite http/2: an nghttp2 server session on each connection whose TLS handshake selected "h2".
 *
 * Each stream carries one request to the handler interface HTTP/1.1 uses (a struct req embedded
 * in the stream, with its own parsed fields), so handlers cannot tell the two apart: they answer
 * at once or later from any thread, or stream a watch. Everything nghttp2 does runs on the
 * connection's worker: input read through conn.c's TLS transport goes to
 * nghttp2_session_mem_recv, frames come out of nghttp2_session_mem_send into c->out and leave
 * through conn_flush. Other threads (answers from the store's writer, watch wakes, deadlines)
 * hand their news over as on HTTP/1.1: under conn.lock the stream goes on the connection's
 * ready list and the connection into its worker's mailbox.
 *
 * Backpressure: a body is handed to nghttp2 as its flow-control windows allow; a watch is
 * pulled only once what it produced before was taken, so a client that stops reading one
 * stream stalls that stream alone (its watcher's queue then does what it does for a slow HTTP/1.1
 * client); c->out holds at most H2_OUT_MAX before the socket must take it, and no input is
 * read while it cannot, so a client that reads nothing at all gets nothing more produced.
 *
 * Lifetime: a stream whose request is with the handler ("held") outlives a reset or a closed
 * connection until it is answered (the answer is then dropped), as conn.c does; a watch stream
 * ends (done()) as soon as the client resets it or the connection goes. nghttp2 calls back only
 * from inside mem_recv and mem_send, so the stream list is changed only there and by this
 * file's own frees. */
#include "http/http-internal.h"

#include <ctype.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <strings.h>
#include <sys/epoll.h>

#define H2_OUT_MAX (64u * 1024)     /* frames queued in c->out before the socket must take them */
#define H2_PULLS_PER_TURN 16        /* pulls of one watch that produce nothing before others run */
#define H2_TURNS 64                 /* read/dispatch/send rounds of one connection before others run */

struct h2s {
    struct req req;                 /* pub first: the handler's request */
    struct req_parser rp;           /* its fields (no http-parser: nghttp2 did the framing) */
    struct conn *c;
    int32_t id;
    struct h2s *prev, *next;        /* the connection's streams */
    int64_t start_ns;
    size_t head_bytes;              /* header list size as HTTP/2 counts it (name + value + 32) */
    uint64_t declared;              /* its content-length (0: none) */
    char *method;
    const struct refusal *refused;  /* answered by the layer itself */
    bool complete;                  /* the request is whole (or refused): dispatch it */
    bool dispatched;                /* given to the handler or refused */
    bool held;                      /* with the handler, unanswered */
    bool closed;                    /* nghttp2 closed the stream (sent, reset, connection gone) */
    bool head_only;
    /* the answer being sent (worker) */
    bool streaming;
    char *body;
    size_t body_len, body_off;
    struct kite_http_stream *ks;    /* the watch, until it ended */
    struct kite_buf sbuf;           /* pulled, not yet taken by nghttp2, from soff */
    size_t soff;
    bool s_eof, s_reset, deferred;
    /* handed over by other threads, under conn.lock */
    bool ans_ready, in_ready;
    int ans_code;
    char *ans_ctype, *ans_body;
    size_t ans_len;
    struct kite_http_stream *ans_stream;
    void (*defer_fn)(void *ud);
    void *defer_ud;
    struct h2s *ready_next;
};

struct h2conn {
    nghttp2_session *ng;
    struct h2s *streams;
    size_t n_live;                  /* streams not closed */
    size_t n_held;                  /* streams with the handler */
    size_t n_complete;              /* streams waiting for dispatch */
    size_t held[2];                 /* body bytes its streams claimed (budget.c) */
    bool goaway;
    bool driving;                   /* h2_drive runs: it takes the ready list before it returns */
    struct h2s *ready;              /* under conn.lock */
};

/* ---- streams ---- */

static struct h2s *stream_get(struct conn *c, int32_t id) {
    return nghttp2_session_get_stream_user_data(c->h2->ng, id);
}

static void h2s_free(struct conn *c, struct h2s *h) {
    struct h2conn *x = c->h2;
    if (h->ks) kite_http_stream_end_s(c->w, h->ks);
    h->ks = NULL;
    if (h->ans_stream) kite_http_stream_end_s(c->w, h->ans_stream); /* begun, never started: done() still runs */
    pthread_mutex_lock(&c->lock);
    if (h->in_ready) {
        struct h2s **pp = &x->ready;
        while (*pp != h) pp = &(*pp)->ready_next;
        *pp = h->ready_next;
    }
    pthread_mutex_unlock(&c->lock);
    if (h->prev) h->prev->next = h->next;
    else x->streams = h->next;
    if (h->next) h->next->prev = h->prev;
    if (!h->closed) x->n_live--;
    if (h->complete && !h->dispatched) x->n_complete--;
    kite_http_body_release(c->w->srv, &h->req, x->held);
    kite_http_req_parser_release(&h->rp);
    kite_buf_release(&h->req.hdrs);
    kite_buf_release(&h->sbuf);
    free(h->method);
    free(h->body);
    free(h->ans_ctype);
    free(h->ans_body);
    free(h);
}

/* nghttp2 is done with the stream: free it, or keep it for its handler's answer. */
static void stream_closed(struct conn *c, struct h2s *h) {
    if (h->closed) return;
    h->closed = true;
    c->h2->n_live--;
    if (h->ks) kite_http_stream_end_s(c->w, h->ks); /* the client cancelled the watch (or it finished) */
    h->ks = NULL;
    if (!h->held) h2s_free(c, h);
}

/* ---- answers (worker) ---- */

static bool hop_by_hop(const char *name, size_t n) {
    static const char *const names[] = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(names); i++)
        if (strlen(names[i]) == n && strncasecmp(name, names[i], n) == 0) return true;
    return false;
}

static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *ud) {
    struct h2s *h = src->ptr;
    if (!h->streaming) {
        size_t n = KITE_MIN(length, h->body_len - h->body_off);
        memcpy(buf, h->body + h->body_off, n);
        h->body_off += n;
        if (h->body_off == h->body_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    size_t avail = h->sbuf.len - h->soff;
    if (avail) {
        size_t n = KITE_MIN(length, avail);
        memcpy(buf, h->sbuf.p + h->soff, n);
        h->soff += n;
        if (h->soff == h->sbuf.len) {
            kite_buf_reset(&h->sbuf);
            h->soff = 0;
            if (h->s_eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
        }
        return (ssize_t)n;
    }
    if (h->s_reset) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (h->s_eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
    }
    h->deferred = true; /* pump() resumes it once the watch has bytes */
    kite_http_h2_kick(h);
    return NGHTTP2_ERR_DEFERRED;
}

/* Pulls a watch when what it produced before was taken, and has nghttp2 send it. */
/* Aborted (kite_http_stream_abort): the stream alone is reset, and the watch ends now, whether
 * or not the client ever reads what was queued for it. */
static void reset_watch(struct conn *c, struct h2s *h) {
    kite_http_stream_end_s(c->w, h->ks);
    h->ks = NULL;
    h->s_reset = true;
    kite_buf_reset(&h->sbuf);
    h->soff = 0;
    nghttp2_submit_rst_stream(c->h2->ng, NGHTTP2_FLAG_NONE, h->id, NGHTTP2_CANCEL);
}

static void pump(struct conn *c, struct h2s *h) {
    if (!h->ks || h->closed) return;
    if (h->sbuf.len > h->soff) { /* nghttp2 takes it as the windows allow */
        if (kite_http_stream_check_h2(h->ks)) reset_watch(c, h);
        return;
    }
    for (int i = 0; i < H2_PULLS_PER_TURN; i++) {
        int rc = kite_http_stream_pull_h2(h->ks, &h->sbuf);
        if (rc == -2) {
            reset_watch(c, h);
            return;
        }
        if (rc == -1) {
            kite_http_stream_end_s(c->w, h->ks);
            h->ks = NULL;
            h->s_eof = true;
            break;
        }
        if (h->sbuf.len || rc == 0) break;
        if (i == H2_PULLS_PER_TURN - 1) { /* nothing yet, asked to go on: after the others */
            kite_http_h2_kick(h);
            kite_http_conn_kick(c);
        }
    }
    if (h->deferred && (h->sbuf.len || h->s_eof)) {
        h->deferred = false;
        nghttp2_session_resume_data(c->h2->ng, h->id);
    }
}

static void submit(struct conn *c, struct h2s *h, int code, const char *ctype, char *body, size_t len,
                   struct kite_http_stream *ks) {
    /* nghttp2 copies the fields: they are built in one buffer, lower-cased as HTTP/2 wants,
     * and pointed at once it no longer grows */
    struct kite_buf b = {0};
    size_t offs[64][4], n = 0;
    char status[8];
    snprintf(status, sizeof status, "%d", code);
    bool has_body = !ks && !h->head_only && code != 204 && code != 304 && len > 0;
#define FIELD(name, nlen, value, vlen)                                                                      \
    do {                                                                                                    \
        if (n < KITE_ARRAY_SIZE(offs)) {                                                                    \
            offs[n][0] = b.len, offs[n][1] = (nlen);                                                         \
            for (size_t k_ = 0; k_ < (nlen); k_++) kite_buf_putc(&b, (char)tolower((unsigned char)(name)[k_])); \
            offs[n][2] = b.len, offs[n][3] = (vlen);                                                         \
            kite_buf_append(&b, (value), (vlen));                                                            \
            n++;                                                                                            \
        }                                                                                                   \
    } while (0)
    FIELD(":status", 7, status, strlen(status));
    if (ctype) FIELD("content-type", 12, ctype, strlen(ctype));
    const char *p = h->req.hdrs.p, *end = p ? p + h->req.hdrs.len : NULL;
    while (p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon && !hop_by_hop(p, (size_t)(colon - p))) {
            const char *v = colon + 1, *ve = line_end;
            while (v < ve && *v == ' ') v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ')) ve--;
            FIELD(p, (size_t)(colon - p), v, (size_t)(ve - v));
        }
        p = line_end + 1;
    }
    char clen[24];
    if (!ks && code != 204 && code != 304) {
        snprintf(clen, sizeof clen, "%zu", len);
        FIELD("content-length", 14, clen, strlen(clen));
    }
#undef FIELD
    nghttp2_nv nv[KITE_ARRAY_SIZE(offs)];
    for (size_t i = 0; i < n; i++)
        nv[i] = (nghttp2_nv){(uint8_t *)b.p + offs[i][0], (uint8_t *)b.p + offs[i][2], offs[i][1], offs[i][3],
                             NGHTTP2_NV_FLAG_NONE};
    nghttp2_data_provider prd = {.source.ptr = h, .read_callback = read_body};
    if (has_body) {
        h->body = body;
        h->body_len = len;
        body = NULL;
    }
    h->streaming = ks != NULL;
    h->ks = ks;
    free(body);
    int rc = nghttp2_submit_response(c->h2->ng, h->id, nv, n, has_body || ks ? &prd : NULL);
    kite_buf_release(&b);
    if (rc != 0) { /* the stream is gone: a watch still ends once */
        if (h->ks) kite_http_stream_end_s(c->w, h->ks);
        h->ks = NULL;
        return;
    }
    if (ks) pump(c, h);
}

static void refuse(struct conn *c, struct h2s *h, const struct refusal *why) {
    struct kite_buf body = {0};
    if (why->retry) kite_http_add_header(&h->req.pub, "Retry-After", "1");
    kite_buf_printf(&body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                           "\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}\n", why->message, why->reason, why->code);
    size_t len;
    char *p = kite_buf_detach(&body, &len);
    submit(c, h, why->code, "application/json", p, len, NULL);
}

/* Takes what other threads handed over: answers, deferred callbacks, wakes. */
static void take_ready(struct conn *c) {
    struct h2conn *x = c->h2;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        struct h2s *h = x->ready;
        if (!h) {
            pthread_mutex_unlock(&c->lock);
            return;
        }
        x->ready = h->ready_next;
        h->in_ready = false;
        void (*fn)(void *) = h->defer_fn;
        void *fn_ud = h->defer_ud;
        h->defer_fn = NULL;
        bool answered = !fn && (h->ans_ready || h->ans_stream);
        int code = h->ans_code;
        char *ctype = h->ans_ctype, *body = h->ans_body;
        size_t len = h->ans_len;
        struct kite_http_stream *ks = h->ans_stream;
        if (answered) {
            h->ans_ready = false;
            h->ans_ctype = h->ans_body = NULL;
            h->ans_stream = NULL;
        }
        pthread_mutex_unlock(&c->lock);
        if (fn) { /* it answers: the stream comes back on the list */
            c->in_handler = true;
            fn(fn_ud);
            c->in_handler = false;
            continue;
        }
        if (answered) {
            h->held = false;
            x->n_held--;
            if (h->closed) { /* reset or connection gone meanwhile: the answer is dropped */
                free(body);
                free(ctype);
                if (ks) kite_http_stream_end_s(c->w, ks);
                h2s_free(c, h);
                continue;
            }
            submit(c, h, code, ctype, body, len, ks);
            free(ctype);
            continue;
        }
        pump(c, h); /* a wake, a deadline, an abort */
    }
}

/* ---- the handler's calls (any thread) ---- */

static void hand_over(struct conn *c, struct h2s *h) {
    if (!h->in_ready) {
        h->in_ready = true;
        h->ready_next = c->h2->ready;
        c->h2->ready = h;
    }
    if (!kite_http_conn_on_own_worker(c)) kite_http_conn_kick(c);
}

void kite_http_h2_respond(struct req *r, int code, const char *content_type, char *body, size_t len) {
    struct h2s *h = r->h2;
    struct conn *c = r->conn;
    struct kite_http_server *srv = c->w->srv;
    pthread_mutex_lock(&c->lock);
    h->ans_code = code;
    h->ans_ctype = content_type ? kite_strdup(content_type) : NULL;
    h->ans_body = body;
    h->ans_len = len;
    h->ans_ready = true;
    hand_over(c, h);
    pthread_mutex_unlock(&c->lock);
    kite_http_pending_done(srv);
}

void kite_http_h2_defer(struct req *r, void (*fn)(void *ud), void *ud) {
    struct conn *c = r->conn;
    pthread_mutex_lock(&c->lock);
    r->h2->defer_fn = fn;
    r->h2->defer_ud = ud;
    hand_over(c, r->h2);
    pthread_mutex_unlock(&c->lock);
}

int kite_http_h2_stream_begin(struct req *r, int code, const char *content_type, kite_http_pull pull, void (*done)(void *ud),
                    void *ud, struct kite_http_stream **ret) {
    struct h2s *h = r->h2;
    struct conn *c = r->conn;
    struct kite_http_server *srv = c->w->srv;
    struct kite_http_stream *s = kite_http_stream_new_h2(c, h, pull, done, ud);
    pthread_mutex_lock(&c->lock);
    h->ans_code = code;
    h->ans_ctype = content_type ? kite_strdup(content_type) : NULL;
    h->ans_stream = s;
    hand_over(c, h);
    pthread_mutex_unlock(&c->lock);
    if (ret) *ret = s;
    kite_http_pending_done(srv);
    return 0;
}

void kite_http_h2_kick(struct h2s *h) {
    struct conn *c = h->c;
    pthread_mutex_lock(&c->lock);
    if (!h->in_ready) {
        h->in_ready = true;
        h->ready_next = c->h2->ready;
        c->h2->ready = h;
    }
    /* short-circuit: only c's worker reads `driving` */
    bool taken = kite_http_tl_worker == c->w && c->h2->driving;
    pthread_mutex_unlock(&c->lock);
    if (!taken) kite_http_conn_kick(c);
}

static bool ready_pending(struct conn *c) {
    pthread_mutex_lock(&c->lock);
    bool r = c->h2->ready != NULL;
    pthread_mutex_unlock(&c->lock);
    return r;
}

/* ---- requests ---- */

static void dispatch(struct conn *c, struct h2s *h) {
    struct kite_http_server *srv = c->w->srv;
    h->dispatched = true;
    c->h2->n_complete--;
    if (h->refused) {
        refuse(c, h, h->refused);
        return;
    }
    h->req.pub.method = h->method;
    h->req.pub.path = h->rp.path;
    h->req.pub.body = h->rp.body.p ? h->rp.body.p : "";
    h->req.pub.body_len = h->rp.body.len;
    atomic_fetch_add(&srv->n_pending, 1); /* as conn.c: stop either waits for it or it is refused */
    if (atomic_load(&srv->stopping)) {
        kite_http_pending_done(srv);
        static const struct refusal stopping = {503, "ServiceUnavailable", "the server is shutting down", false};
        refuse(c, h, &stopping);
        return;
    }
    kite_http_auth_request(c, &h->req);
    h->held = true;
    c->h2->n_held++;
    c->in_handler = true;
    srv->handler(&h->req.pub, srv->ud);
    c->in_handler = false;
}

static void run_dispatch(struct conn *c) {
    struct h2conn *x = c->h2;
    for (struct h2s *h = x->streams; h && x->n_complete; h = h->next)
        if (h->complete && !h->dispatched) dispatch(c, h);
}

static void complete(struct conn *c, struct h2s *h, const struct refusal *why) {
    if (h->complete) return;
    h->complete = true;
    c->h2->n_complete++;
    if (!h->refused) h->refused = why;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
    struct conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    struct h2s *h = kite_calloc(1, sizeof(*h));
    h->c = c;
    h->id = frame->hd.stream_id;
    h->req.conn = c;
    h->req.rp = &h->rp;
    h->req.h2 = h;
    h->req.pub.method = h->req.pub.path = h->req.pub.body = "";
    kite_http_req_parser_init(&h->rp, c->w->srv->max_head, c->w->srv->max_body);
    h->start_ns = http_now_ns();
    h->next = c->h2->streams;
    if (h->next) h->next->prev = h;
    c->h2->streams = h;
    c->h2->n_live++;
    nghttp2_session_set_stream_user_data(ng, h->id, h);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    struct conn *c = ud;
    struct h2s *h = stream_get(c, frame->hd.stream_id);
    if (!h || h->complete) return 0;
    const char *n = (const char *)name, *v = (const char *)value;
    h->head_bytes += namelen + valuelen + 32;
    if (h->head_bytes > c->w->srv->max_head) {
        bool path = namelen == 5 && memcmp(n, ":path", 5) == 0;
        complete(c, h, path ? &KITE_HTTP_R_URL_TOO_LONG : &KITE_HTTP_R_HEADERS_TOO_LARGE);
        return 0;
    }
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers: counted, not kept */
    if (n[0] == ':') {
        if (namelen == 7 && memcmp(n, ":method", 7) == 0) h->method = kite_strndup(v, valuelen);
        else if (namelen == 5 && memcmp(n, ":path", 5) == 0) kite_buf_append(&h->rp.url, v, valuelen);
        else if (namelen == 10 && memcmp(n, ":authority", 10) == 0) n = "host", namelen = 4;
        else return 0;
        if (n[0] == ':') return 0;
    }
    /* nghttp2 has refused NUL, CR and LF in names and values: they are C strings here */
    kite_buf_append(&h->rp.hdr, n, namelen);
    kite_buf_append(&h->rp.hdr, "", 1);
    kite_buf_append(&h->rp.hdr, v, valuelen);
    kite_buf_append(&h->rp.hdr, "", 1);
    h->rp.n_hdr++;
    return 0;
}

/* The head is complete: the target decoded; a body that follows is admitted (authenticated,
 * claimed from the budgets) or the stream is refused now, before any of its DATA is kept. */
static void head_done(struct conn *c, struct h2s *h, bool end_stream) {
    if (h->complete || h->rp.head_done) return;
    if (!h->method || !h->rp.url.len) {
        complete(c, h, &KITE_HTTP_R_MALFORMED);
        return;
    }
    h->head_only = strcmp(h->method, "HEAD") == 0;
    const struct refusal *bad = kite_http_req_parser_set_target(&h->rp);
    if (bad) {
        complete(c, h, bad);
        return;
    }
    if (end_stream) return;
    const char *cl = kite_http_req_parser_header(&h->rp, "content-length");
    int64_t len;
    if (cl && kite_parse_int64(cl, &len) == 0 && len > 0) h->declared = (uint64_t)len;
    h->req.pub.method = h->method;
    h->req.pub.path = h->rp.path;
    bad = kite_http_body_admit(c, &h->req, &h->rp, h->declared, c->h2->held);
    if (bad) complete(c, h, bad);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
    struct conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    struct h2s *h = stream_get(c, frame->hd.stream_id);
    if (!h) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        head_done(c, h, frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) complete(c, h, NULL);
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
    struct conn *c = ud;
    struct h2s *h = stream_get(c, id);
    if (!h || h->complete) return 0; /* a refused request's body is dropped (flow control is still credited) */
    if (len > h->rp.max_body - h->rp.body.len) {
        complete(c, h, &KITE_HTTP_R_BODY_TOO_LARGE);
        kite_http_req_body_free(&h->rp.body);
        kite_http_body_release(c->w->srv, &h->req, c->h2->held);
        return 0;
    }
    size_t total = h->rp.body.len + len;
    if (total > h->rp.allowed) {
        const struct refusal *bad = kite_http_body_claim(c->w->srv, &h->req, total, c->h2->held);
        if (bad) {
            complete(c, h, bad);
            kite_http_req_body_free(&h->rp.body); /* dropped, and so its claim */
            kite_http_body_release(c->w->srv, &h->req, c->h2->held);
            return 0;
        }
        h->rp.allowed = total;
    }
    if (!h->rp.body.len && h->declared && h->declared <= h->rp.max_body) /* allocated once, not doubled into */
        kite_http_req_body_reserve(&h->rp.body, (size_t)h->declared);
    kite_http_req_body_append(&h->rp.body, data, len);
    return 0;
}

/* A refused request whose client is still sending: once the answer is out, RST_STREAM
 * NO_ERROR asks it to stop (RFC 9113 8.1) instead of crediting DATA no one reads. */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
    struct conn *c = ud;
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA))
        return 0;
    struct h2s *h = stream_get(c, frame->hd.stream_id);
    if (h && h->refused && !nghttp2_session_get_stream_remote_close(ng, h->id))
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, h->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud) {
    struct conn *c = ud;
    struct h2s *h = stream_get(c, id);
    if (h) stream_closed(c, h);
    return 0;
}

/* ---- the connection ---- */

int kite_http_h2_start(struct conn *c) {
    struct kite_http_server *srv = c->w->srv;
    char ip[64];
    kite_http_peer_ip(&c->req.pub, ip); /* filled now: read-only while requests run on other threads */
    struct h2conn *x = kite_calloc(1, sizeof(*x));
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        free(x);
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    int rc = nghttp2_session_server_new(&x->ng, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        free(x);
        return -ENOMEM;
    }
    c->h2 = x;
    /* As kube-apiserver (k8s.io/apiserver secure_serving.go): 100 streams, 256 KiB per stream
     * window, the connection's window that times the streams; the header list within the
     * server's request-head limit. */
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, KITE_HTTP2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, KITE_HTTP2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)srv->max_head},
    };
    if (nghttp2_submit_settings(x->ng, NGHTTP2_FLAG_NONE, iv, KITE_ARRAY_SIZE(iv)) != 0 ||
        nghttp2_session_set_local_window_size(x->ng, NGHTTP2_FLAG_NONE, 0,
                                              KITE_HTTP2_STREAM_WINDOW * KITE_HTTP2_MAX_STREAMS) != 0)
        return -ENOMEM; /* conn_free frees x */
    return 0;
}

/* Queues frames into c->out up to H2_OUT_MAX and sends. 1: all sent; 0: the socket is full;
 * -1: broken. */
static int h2_send(struct conn *c) {
    for (;;) {
        while (c->out.len - c->out_off < H2_OUT_MAX) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->h2->ng, &data);
            if (n < 0) return -1;
            if (n == 0) break;
            kite_buf_append(&c->out, data, (size_t)n);
        }
        if (c->out.len == c->out_off) return 1;
        int f = kite_http_conn_flush(c);
        if (f <= 0) return f;
    }
}

/* Ends the connection now, or (requests with the handler) once they are answered. */
void kite_http_h2_close(struct conn *c) {
    struct h2conn *x = c->h2;
    if (!x || !x->n_held) {
        kite_http_conn_free(c);
        return;
    }
    for (struct h2s *h = x->streams, *next; h; h = next) {
        next = h->next;
        stream_closed(c, h);
    }
    c->peer_closed = true;
    if (c->ep_events) epoll_ctl(c->w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    c->ep_events = 0;
}

void kite_http_h2_free(struct conn *c) {
    struct h2conn *x = c->h2;
    if (!x) return;
    while (x->streams) {
        struct h2s *h = x->streams;
        h->held = false; /* only when the server quits, with nothing pending */
        h2s_free(c, h);
    }
    nghttp2_session_del(x->ng);
    free(x);
    c->h2 = NULL;
}

/* Done with the connection (both sides said so): close it gracefully. */
static void finish_conn(struct conn *c) {
    if (c->h2->n_held) {
        kite_http_h2_close(c);
        return;
    }
    kite_http_conn_linger(c);
    kite_http_conn_drive(c, true);
}

void kite_http_h2_drive(struct conn *c, bool readable) {
    struct h2conn *x = c->h2;
    x->driving = true;
    for (int turn = 0;; turn++) {
        if (turn == H2_TURNS) { /* the worker's other connections get a turn */
            kite_http_conn_kick(c);
            break;
        }
        run_dispatch(c);
        take_ready(c);
        int f = h2_send(c);
        if (f < 0) {
            x->driving = false;
            kite_http_h2_close(c);
            return;
        }
        if (f == 1 && !nghttp2_session_want_read(x->ng) && !nghttp2_session_want_write(x->ng)) {
            x->driving = false;
            finish_conn(c);
            return;
        }
        if (f == 0) break; /* the socket is full: no more input until it drains (EPOLLOUT) */
        if (ready_pending(c)) continue;
        if (!readable && !kite_http_conn_tls_pending(c)) break;
        int r = kite_http_conn_read_some(c);
        if (r < 0) {
            x->driving = false;
            kite_http_h2_close(c);
            return;
        }
        if (r == 0) break;
        ssize_t k = nghttp2_session_mem_recv(x->ng, (const uint8_t *)c->in.p + c->in_off, c->in.len - c->in_off);
        c->in_off = c->in.len;
        if (k < 0) { /* a protocol error: GOAWAY, then close */
            nghttp2_session_terminate_session(x->ng, NGHTTP2_PROTOCOL_ERROR);
            x->driving = false;
            if (h2_send(c) < 0) kite_http_h2_close(c);
            else finish_conn(c);
            return;
        }
        readable = kite_http_conn_tls_pending(c) || c->in.len == c->in.cap - 1;
    }
    x->driving = false;
}

void kite_http_h2_service(struct conn *c) {
    if (c->peer_closed) {
        take_ready(c); /* answers to dropped streams free them */
        if (!c->h2->n_held) kite_http_conn_free(c);
        return;
    }
    kite_http_h2_drive(c, false);
}

void kite_http_h2_sweep(struct conn *c, int64_t now, bool stopping) {
    struct h2conn *x = c->h2;
    struct kite_http_server *srv = c->w->srv;
    if (c->peer_closed) return;
    int64_t idle = (int64_t)srv->idle_timeout_s * KITE_NS_PER_SEC;
    int64_t read_max = (int64_t)srv->read_timeout_s * KITE_NS_PER_SEC;
    bool sent = false;
    for (struct h2s *h = x->streams; h; h = h->next)
        if (!h->closed && !h->complete && now - h->start_ns > read_max) { /* a request trickling in */
            nghttp2_submit_rst_stream(x->ng, NGHTTP2_FLAG_NONE, h->id, NGHTTP2_CANCEL);
            sent = true;
        }
    if (!x->n_live && !x->n_held && (stopping || now - c->last_active_ns > idle)) {
        nghttp2_submit_goaway(x->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(x->ng),
                              NGHTTP2_NO_ERROR, NULL, 0);
        x->goaway = true;
        if (h2_send(c) < 0) {
            kite_http_conn_free(c);
            return;
        }
        kite_http_conn_linger(c);
        return;
    }
    if (sent) kite_http_h2_drive(c, false);
}

void kite_http_h2_stop(struct conn *c) {
    struct h2conn *x = c->h2;
    if (c->peer_closed || x->goaway) return;
    x->goaway = true;
    nghttp2_submit_goaway(x->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(x->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    for (struct h2s *h = x->streams; h; h = h->next) pump(c, h); /* watches see stopping and finish */
    kite_http_h2_drive(c, false);
}
