/* `kite sim`'s HTTP/2 client connections (h2c.h).
 *
 * Why: with shared connections the API server's cost per renewal was a third system calls and
 * loopback softirq, one send and one receive per request per connection on HTTP/1.1; over
 * HTTP/2 the answers of many streams leave together in few TLS records (BENCHMARKS.md "HTTP/2
 * vs HTTP/1.1": 2.09x the renewal rate), and real kubelets (client-go) multiplex every request
 * over one HTTP/2 connection, which is what the simulated nodes should look like to the server.
 *
 * Why nghttp2 rather than framing by hand: HPACK (with its dynamic table and Huffman codes),
 * flow control on both levels, SETTINGS and their acknowledgements, stream states, concurrency
 * limits and GOAWAY are most of HTTP/2 and easy to get subtly wrong; the server side already
 * uses libnghttp2 (src/http/h2.c), so the simulator links nothing new.
 *
 * The loop owns the socket: nghttp2 runs in its memory mode (mem_recv fed with what
 * gnutls_record_recv read, mem_send collected into c->out and written by gnutls_record_send,
 * 16 KiB at a time, so a round's frames of every stream go in one TLS record when they fit).
 *
 * A request in flight has a slot (the stream's user data); kite_sim_h2c_cancel() empties the slot, so
 * callbacks for a stream given up find no request and its body is not read any more. */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/base.h"
#include "base/clock.h"
#include "base/log.h"
#include "sim/h2c.h"

#define H2C_LOG "sim-h2"
#define H2C_RECORD 16384            /* plaintext bytes per TLS record written */
#define H2C_OUT_MAX (256u << 10)    /* frames collected before they must be written */
#define H2C_WINDOW (1 << 20)        /* our stream and connection receive windows */

struct h2c_slot {
    struct h2c_req *req; /* NULL: given up */
    int32_t id;
    struct h2c_slot *prev, *next;
};

struct h2c {
    struct h2c_options o;
    char *auth;      /* "Bearer TOKEN" or NULL */
    char *user_agent;
    int fd;          /* -1: closed */
    gnutls_session_t tls;
    nghttp2_session *ng;
    bool opening, dirty, pollout, lost;
    struct kite_buf out;
    size_t out_off;
    size_t pending;  /* a record gnutls_record_send answered EAGAIN for: sent again as it was */
    struct h2c_slot *slots;
    struct h2c_stats st;
};

static void slot_unlink(struct h2c *c, struct h2c_slot *s) {
    if (s->prev) s->prev->next = s->next;
    else c->slots = s->next;
    if (s->next) s->next->prev = s->prev;
}

static void req_finish(struct h2c *c, struct h2c_req *q, int result) {
    q->slot = NULL;
    if (result < 0 && q->result == 0) q->result = result;
    if (q->result == 0 && !q->status) q->result = -EPROTO;
    q->done = true;
    c->o.done(q, c->o.ud);
}

/* ---- nghttp2 callbacks ---- */

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    (void)flags, (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || namelen != 7 || memcmp(name, ":status", 7)) return 0;
    struct h2c_slot *s = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!s || !s->req) return 0;
    long v = 0;
    for (size_t i = 0; i < valuelen && value[i] >= '0' && value[i] <= '9'; i++) v = v * 10 + (value[i] - '0');
    /* an interim 1xx answer is followed by the real one */
    if (v >= 200) s->req->status = v;
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
    (void)flags, (void)ud;
    struct h2c_slot *s = nghttp2_session_get_stream_user_data(ng, id);
    if (!s || !s->req) return 0;
    struct h2c_req *q = s->req;
    if (q->resp.len + len > KITE_CLIENT_MAX_BODY) {
        q->result = -EFBIG;
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        return 0;
    }
    kite_buf_append(&q->resp, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud) {
    struct h2c *c = ud;
    struct h2c_slot *s = nghttp2_session_get_stream_user_data(ng, id);
    if (!s) return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    slot_unlink(c, s);
    struct h2c_req *q = s->req;
    free(s);
    if (!q) return 0;
    if (!error_code && q->status) c->st.streams++;
    req_finish(c, q, error_code ? -ECONNRESET : 0);
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud) {
    (void)ng;
    struct h2c *c = ud;
    /* the server is going away (a restart): the connection is dropped with what it carries, and
     * the next request opens another */
    if (f->hd.type == NGHTTP2_GOAWAY) c->lost = true;
    return 0;
}

static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *data_flags,
                         nghttp2_data_source *src, void *ud) {
    (void)src, (void)ud;
    struct h2c_slot *s = nghttp2_session_get_stream_user_data(ng, id);
    if (!s || !s->req) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* given up: the stream is reset */
    struct h2c_req *q = s->req;
    size_t n = KITE_MIN(length, q->body_len - q->body_off);
    memcpy(buf, q->body + q->body_off, n);
    q->body_off += n;
    if (q->body_off == q->body_len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- the connection ---- */

struct h2c *kite_sim_h2c_new(const struct h2c_options *o) {
    struct h2c *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    c->o.token = NULL;
    c->o.user_agent = NULL;
    c->auth = o->token ? kite_asprintf("Bearer %s", o->token) : NULL;
    c->user_agent = kite_strdup(o->user_agent ? o->user_agent : "kite-sim");
    c->fd = -1;
    return c;
}

bool kite_sim_h2c_is_open(const struct h2c *c) { return c->ng != NULL; }
bool kite_sim_h2c_is_opening(const struct h2c *c) { return c->opening; }
bool kite_sim_h2c_dirty(const struct h2c *c) { return c->ng && (c->dirty || c->lost); }

void kite_sim_h2c_get_stats(const struct h2c *c, struct h2c_stats *ret) { *ret = c->st; }

void kite_sim_h2c_close(struct h2c *c) {
    if (!c->ng && c->fd < 0) return;
    if (c->ng) nghttp2_session_del(c->ng);
    c->ng = NULL;
    if (c->fd >= 0) {
        epoll_ctl(c->o.epfd, EPOLL_CTL_DEL, c->fd, NULL);
        if (c->tls) gnutls_deinit(c->tls);
        close(c->fd);
    }
    c->tls = NULL;
    c->fd = -1;
    c->dirty = c->pollout = c->lost = false;
    kite_buf_reset(&c->out);
    c->out_off = c->pending = 0;
    /* the requests in flight fail; their lanes retry as after any lost connection */
    struct h2c_slot *s = c->slots;
    c->slots = NULL;
    while (s) {
        struct h2c_slot *next = s->next;
        if (s->req) req_finish(c, s->req, -ECONNRESET);
        free(s);
        s = next;
    }
}

static void lose(struct h2c *c, const char *why) {
    c->st.lost++;
    log_debug(H2C_LOG, "connection lost: %s", why);
    kite_sim_h2c_close(c);
}

void kite_sim_h2c_free(struct h2c *c) {
    if (!c) return;
    kite_sim_h2c_close(c);
    kite_buf_release(&c->out);
    free(c->auth);
    free(c->user_agent);
    free(c);
}

int kite_sim_h2c_open(struct h2c *c, int64_t deadline_ms) {
    if (c->ng) return 0;
    if (c->opening) return -EALREADY;
    c->opening = true;
    int fd = -1;
    gnutls_session_t tls = NULL;
    int r = kite_client_dial_tls(c->o.dialer, "h2", deadline_ms, &fd, &tls);
    c->opening = false;
    if (r < 0) return r;
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        gnutls_deinit(tls);
        close(fd);
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    r = nghttp2_session_client_new(&c->ng, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (r != 0) {
        c->ng = NULL;
        gnutls_deinit(tls);
        close(fd);
        return -ENOMEM;
    }
    c->fd = fd;
    c->tls = tls;
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2C_WINDOW}};
    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, KITE_ARRAY_SIZE(iv));
    nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, 16 * H2C_WINDOW);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c->o.ep_ptr};
    if (epoll_ctl(c->o.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        r = -errno;
        kite_sim_h2c_close(c);
        return r;
    }
    c->dirty = true; /* the preface and our SETTINGS */
    c->st.opens++;
    /* what the handshake's last reads brought besides (the server's SETTINGS) */
    kite_sim_h2c_event(c, EPOLLIN);
    return c->ng ? 0 : -ECONNRESET;
}

int kite_sim_h2c_submit(struct h2c *c, struct h2c_req *q, const char *method, const char *path, const char *content_type,
               const struct h2c_header *extra, size_t n_extra) {
    if (!c->ng) return -ENOTCONN;
    const char *prefix = kite_client_path_prefix(c->o.dialer), *authority = kite_client_authority(c->o.dialer);
    size_t pl = prefix ? strlen(prefix) : 0, tl = strlen(path);
    _cleanup_free_ char *full = kite_malloc(pl + tl + 1);
    if (pl) memcpy(full, prefix, pl);
    memcpy(full + pl, path, tl + 1);
    nghttp2_nv nv[16 + 8];
    size_t n = 0;
#define NV(k, v)                                                                                                       \
    nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), NGHTTP2_NV_FLAG_NONE}
    NV(":method", method);
    NV(":scheme", "https");
    NV(":authority", authority ? authority : "");
    NV(":path", full);
    NV("user-agent", c->user_agent);
    NV("accept", "application/json");
    if (c->auth) NV("authorization", c->auth);
    char len[32];
    if (q->body) {
        if (content_type) NV("content-type", content_type);
        snprintf(len, sizeof len, "%zu", q->body_len);
        NV("content-length", len);
    }
    for (size_t i = 0; i < n_extra && n < KITE_ARRAY_SIZE(nv); i++) NV(extra[i].name, extra[i].value);
#undef NV
    struct h2c_slot *s = kite_calloc(1, sizeof *s);
    s->req = q;
    q->status = 0;
    q->result = 0;
    q->done = false;
    q->body_off = 0;
    nghttp2_data_provider dp = {.read_callback = read_body};
    int32_t id = nghttp2_submit_request(c->ng, NULL, nv, n, q->body ? &dp : NULL, s);
    if (id < 0) {
        free(s);
        return id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE ? -EAGAIN : -EPROTO;
    }
    q->slot = s;
    s->id = id;
    s->next = c->slots;
    if (c->slots) c->slots->prev = s;
    c->slots = s;
    c->dirty = true;
    return 0;
}

void kite_sim_h2c_cancel(struct h2c *c, struct h2c_req *q) {
    struct h2c_slot *s = q->slot;
    if (!s) return;
    q->slot = NULL;
    s->req = NULL; /* callbacks find no request; the slot goes when the stream closes */
    /* a stream still held back (the server's concurrency limit) is dropped before it opens */
    if (c->ng && nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL) == 0) c->dirty = true;
}

static void set_pollout(struct h2c *c, bool on) {
    if (c->pollout == on || c->fd < 0) return;
    c->pollout = on;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c->o.ep_ptr};
    epoll_ctl(c->o.epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Writes c->out from out_off: 0, -EAGAIN (EPOLLOUT armed), or the connection was lost (-ECONNRESET). */
static int write_out(struct h2c *c) {
    while (c->out_off < c->out.len) {
        size_t chunk = c->pending ? c->pending : KITE_MIN((size_t)H2C_RECORD, c->out.len - c->out_off);
        ssize_t w = gnutls_record_send(c->tls, c->out.p + c->out_off, chunk);
        if (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED) {
            c->pending = chunk;
            set_pollout(c, true);
            return -EAGAIN;
        }
        if (w < 0) {
            lose(c, gnutls_strerror((int)w));
            return -ECONNRESET;
        }
        c->pending = 0;
        c->out_off += (size_t)w;
        c->st.records++;
        c->st.bytes_out += (uint64_t)w;
    }
    kite_buf_reset(&c->out);
    c->out_off = 0;
    set_pollout(c, false);
    return 0;
}

void kite_sim_h2c_flush(struct h2c *c) {
    if (c->lost) {
        lose(c, "GOAWAY");
        return;
    }
    if (!c->ng) return;
    c->dirty = false;
    if (c->out_off < c->out.len) return; /* EPOLLOUT finishes the earlier write first */
    for (;;) {
        while (c->out.len < H2C_OUT_MAX) {
            const uint8_t *p;
            ssize_t n = nghttp2_session_mem_send(c->ng, &p);
            if (n < 0) {
                lose(c, nghttp2_strerror((int)n));
                return;
            }
            if (n == 0) break;
            kite_buf_append(&c->out, p, (size_t)n);
        }
        if (!c->out.len) break;
        if (write_out(c) < 0) return;
        if (!nghttp2_session_want_write(c->ng)) break;
    }
    if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng)) lose(c, "session ended");
}

void kite_sim_h2c_event(struct h2c *c, uint32_t events) {
    if (!c->ng) return;
    if ((events & EPOLLOUT) && c->out_off < c->out.len) {
        if (write_out(c) == -ECONNRESET) return;
        if (c->out_off == c->out.len) c->dirty = true; /* what waited behind it */
    }
    if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
    uint8_t buf[16384];
    for (;;) {
        ssize_t r = gnutls_record_recv(c->tls, buf, sizeof buf);
        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) break;
        if (r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION) {
            lose(c, "closed by the server");
            return;
        }
        if (r < 0) {
            if (!gnutls_error_is_fatal((int)r)) continue; /* a TLS 1.3 ticket, a warning */
            lose(c, gnutls_strerror((int)r));
            return;
        }
        ssize_t used = nghttp2_session_mem_recv(c->ng, buf, (size_t)r);
        if (used < 0) {
            lose(c, nghttp2_strerror((int)used));
            return;
        }
        if (c->lost) break;
    }
    if (c->lost) {
        lose(c, "GOAWAY");
        return;
    }
    if (nghttp2_session_want_write(c->ng)) c->dirty = true;
}
