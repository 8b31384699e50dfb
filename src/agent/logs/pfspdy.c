/* Port-forward over SPDY/3.1 (pfspdy.h), the kubelet's httpstream port-forward: per forwarded
 * connection the client opens two streams sharing a requestID header, `streamType: error` and
 * `streamType: data`, both with `port: N`. Every stream is answered with an empty SYN_REPLY; once
 * both streams of a pair are there the agent connects to 127.0.0.1:N in the pod's network
 * namespace and copies bytes between it and the data stream. The pod's end of the connection
 * ends the data stream and the error stream (FIN); a connection that fails puts its error text
 * on the error stream first. The client's FIN on the data stream shuts the connection's write
 * side; its RST_STREAM drops the pair. PINGs are echoed; GOAWAY ends the session once its pairs
 * ended.
 *
 * Flow control: the agent sends WINDOW_UPDATE (stream and session) for what it took, so a peer
 * that keeps SPDY/3.1 windows never stalls; it does not wait on the client's windows (client-go's
 * spdystream keeps none and sends no WINDOW_UPDATE). Memory stays bounded by reading neither
 * side while the other has the stream buffer's bytes (--stream-buffer) waiting.
 *
 * One thread per session (exec.c's), polling the tunnel and every connection. */
#include "agent/logs/pfspdy.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "agent/logs/logs.h"
#include "agent/logs/spdy.h"
#include "agent/logs/wstunnel.h"
#include "base/base.h"
#include "base/clock.h"
#include "http/http.h"

#define CHUNK (32u * 1024)
#define WINDOW_STEP (32u * 1024) /* bytes taken before a WINDOW_UPDATE is sent */

struct pair {
    char *req;               /* the requestID */
    uint32_t data_sid, err_sid;
    uint16_t port;
    int fd;
    bool connecting, open, client_fin, shut_wr;
    struct kite_buf out;     /* from the client, not yet written to the pod */
    size_t out_off;
    size_t taken;            /* data bytes taken since the last WINDOW_UPDATE */
    int64_t since;           /* when the first stream came */
    uint64_t gen;            /* when it was made, in pairs */
};

struct pfs {
    struct kite_http_tunnel *t;
    bool ws_mode;
    wslay_event_context_ptr ws;
    struct kite_spdy *sp;
    struct kite_buf out; /* raw mode: bytes for the tunnel */
    size_t out_off;
    struct pair **p;
    size_t n;
    pid_t pid;
    const char *ns, *pod;
    size_t buffer; /* bytes waiting each way before that side is not read (--stream-buffer) */
    bool gone, goaway, fatal;
    uint32_t last_sid;
    uint64_t gen;
    size_t taken; /* session-wide data bytes since the last WINDOW_UPDATE */
    int64_t last_active;
};

static int64_t now(void) { return kite_now_mono(kite_clock_real()); }

/* ---- the tunnel ---- */

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud) {
    struct pfs *s = ud;
    return kite_ws_tunnel_io(ctx, s->t, buf, NULL, len, false, &s->last_active, &s->gone);
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *ud) {
    struct pfs *s = ud;
    return kite_ws_tunnel_io(ctx, s->t, NULL, data, len, flags & WSLAY_MSG_MORE, &s->last_active, &s->gone);
}

static void ws_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *ud) {
    struct pfs *s = ud;
    if (arg->opcode == WSLAY_BINARY_FRAME) kite_spdy_feed(s->sp, arg->msg, arg->msg_length);
    else if (arg->opcode == WSLAY_TEXT_FRAME) s->fatal = true; /* the tunnel carries binary messages alone */
}

/* Frames for the client (one WebSocket message, or bytes on the connection). */
static void emit(struct pfs *s, struct kite_buf *frames) {
    if (!frames->len) return;
    if (s->ws_mode) {
        struct wslay_event_msg m = {.opcode = WSLAY_BINARY_FRAME, .msg = (const uint8_t *)frames->p, .msg_length = frames->len};
        wslay_event_queue_msg(s->ws, &m); /* copies */
    } else {
        kite_buf_append(&s->out, frames->p, frames->len);
    }
    kite_buf_reset(frames);
}

static size_t queued(struct pfs *s) {
    return s->ws_mode ? wslay_event_get_queued_msg_length(s->ws) : s->out.len - s->out_off;
}

static bool want_write(struct pfs *s) { return s->ws_mode ? wslay_event_want_write(s->ws) : s->out_off < s->out.len; }

/* Whether the client is read: SPDY frames not yet parsed fit one frame and no pair has
 * the stream buffer's bytes waiting for its connection. */
static bool take_room(struct pfs *s) {
    if (kite_spdy_buffered(s->sp) > KITE_SPDY_MAX_FRAME) return false;
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i]->out.len - s->p[i]->out_off >= s->buffer) return false;
    return true;
}

static bool want_read(struct pfs *s) { return s->ws_mode ? wslay_event_want_read(s->ws) : true; }

/* Sends what it can now. */
static void flush(struct pfs *s) {
    if (s->gone) return;
    if (s->ws_mode) {
        if (wslay_event_want_write(s->ws) && wslay_event_send(s->ws) != 0) s->gone = true;
        return;
    }
    while (s->out_off < s->out.len) {
        ssize_t k = kite_http_tunnel_write(s->t, s->out.p + s->out_off, s->out.len - s->out_off);
        if (k == -EAGAIN) return;
        if (k <= 0) {
            s->gone = true;
            return;
        }
        s->last_active = now();
        s->out_off += (size_t)k;
    }
    kite_buf_reset(&s->out);
    s->out_off = 0;
}

/* Reads what the tunnel has into the SPDY parser. */
static void take(struct pfs *s) {
    if (s->gone) return;
    if (s->ws_mode) {
        if (wslay_event_recv(s->ws) != 0) s->gone = true;
        return;
    }
    char buf[CHUNK];
    for (int i = 0; i < 8; i++) {
        ssize_t k = kite_http_tunnel_read(s->t, buf, sizeof buf);
        if (k == -EAGAIN) return;
        if (k <= 0) {
            s->gone = true;
            return;
        }
        s->last_active = now();
        kite_spdy_feed(s->sp, buf, (size_t)k);
        if (kite_spdy_buffered(s->sp) > KITE_SPDY_MAX_FRAME) return;
    }
}

/* ---- pairs ---- */

static struct pair *find_sid(struct pfs *s, uint32_t sid, bool *is_data) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->p[i]->data_sid == sid) {
            *is_data = true;
            return s->p[i];
        }
        if (s->p[i]->err_sid == sid) {
            *is_data = false;
            return s->p[i];
        }
    }
    return NULL;
}

static void drop(struct pfs *s, struct pair *p) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i] == p) {
            s->p[i] = s->p[--s->n];
            break;
        }
    if (p->fd >= 0) close(p->fd);
    kite_buf_release(&p->out);
    free(p->req);
    free(p);
}

/* The pair's end from the agent's side: text (may be NULL) on the error stream, then FIN on both. */
static void finish(struct pfs *s, struct pair *p, const char *text) {
    struct kite_buf f = {0};
    if (p->data_sid) kite_spdy_data(&f, p->data_sid, KITE_SPDY_FLAG_FIN, NULL, 0);
    if (p->err_sid) {
        if (text) kite_spdy_data(&f, p->err_sid, 0, text, strlen(text));
        kite_spdy_data(&f, p->err_sid, KITE_SPDY_FLAG_FIN, NULL, 0);
    }
    emit(s, &f);
    kite_buf_release(&f);
    drop(s, p);
}

static void fail(struct pfs *s, struct pair *p, int err) {
    char *msg = kite_asprintf("error forwarding port %u to pod %s/%s: dial tcp4 127.0.0.1:%u: connect: %s", p->port, s->ns,
                              s->pod, p->port, strerror(err));
    finish(s, p, msg);
    free(msg);
}

static void reset(struct pfs *s, uint32_t sid, uint32_t status) {
    struct kite_buf f = {0};
    kite_spdy_rst_stream(&f, sid, status);
    emit(s, &f);
    kite_buf_release(&f);
}

/* A new stream from the client. */
static void syn_stream(struct pfs *s, const struct kite_spdy_frame *f) {
    uint32_t sid = f->stream;
    if (!sid || sid % 2 == 0 || sid <= s->last_sid) {
        reset(s, sid ? sid : 1, KITE_SPDY_PROTOCOL_ERROR);
        return;
    }
    s->last_sid = sid;
    if (s->goaway) {
        reset(s, sid, KITE_SPDY_REFUSED_STREAM);
        return;
    }
    const char *type = kite_spdy_header(f, "streamtype"), *port_s = kite_spdy_header(f, "port"),
               *req = kite_spdy_header(f, "requestid");
    bool data = type && strcmp(type, "data") == 0, err = type && strcmp(type, "error") == 0;
    char *end = NULL;
    long port = port_s ? strtol(port_s, &end, 10) : 0;
    if ((!data && !err) || !port_s || !*port_s || *end || port < 1 || port > 65535) {
        reset(s, sid, KITE_SPDY_PROTOCOL_ERROR);
        return;
    }
    /* a client without requestID (before Kubernetes 1.6): the pair's streams are consecutive,
     * the error stream first, as the kubelet guesses */
    char fallback[16];
    if (!req || !*req) {
        snprintf(fallback, sizeof fallback, "%u", data ? sid - 2 : sid);
        req = fallback;
    }
    struct pair *p = NULL;
    for (size_t i = 0; i < s->n && !p; i++)
        if (strcmp(s->p[i]->req, req) == 0) p = s->p[i];
    if (p && (data ? p->data_sid : p->err_sid)) {
        reset(s, sid, KITE_SPDY_PROTOCOL_ERROR); /* that stream of the pair is there already */
        return;
    }
    if (!p && s->n >= KITE_PF_SPDY_MAX_PAIRS) {
        reset(s, sid, KITE_SPDY_REFUSED_STREAM);
        return;
    }
    struct kite_buf out = {0};
    kite_spdy_syn_reply(s->sp, &out, sid, 0, NULL, 0);
    emit(s, &out);
    kite_buf_release(&out);
    if (!p) {
        p = kite_calloc(1, sizeof *p);
        p->req = kite_strdup(req);
        p->fd = -1;
        p->since = now();
        p->gen = ++s->gen;
        s->p = kite_realloc(s->p, (s->n + 1) * sizeof *s->p);
        s->p[s->n++] = p;
    }
    if (data) {
        p->data_sid = sid;
        p->port = (uint16_t)port; /* the data stream's port is the one forwarded, as the kubelet's */
    } else {
        p->err_sid = sid;
        if (!p->port) p->port = (uint16_t)port;
    }
    if (f->flags & KITE_SPDY_FLAG_FIN && data) p->client_fin = true;
    if (p->data_sid && p->err_sid) {
        int fd = kite_pf_dial(s->pid, p->port);
        if (fd < 0) {
            fail(s, p, -fd);
            return;
        }
        p->fd = fd;
        p->connecting = true;
    }
}

static void data_frame(struct pfs *s, const struct kite_spdy_frame *f) {
    bool is_data;
    struct pair *p = find_sid(s, f->stream, &is_data);
    if (!p) return; /* a stream that ended already: what was in flight is dropped */
    if (is_data) {
        if (f->len && !p->client_fin) kite_buf_append(&p->out, f->data, f->len);
        if (f->flags & KITE_SPDY_FLAG_FIN) p->client_fin = true;
    }
    /* generous windows: what arrived is credited back at once, in steps */
    p->taken += f->len;
    s->taken += f->len;
    struct kite_buf w = {0};
    if (p->taken >= WINDOW_STEP) {
        kite_spdy_window_update(&w, f->stream, (uint32_t)p->taken);
        p->taken = 0;
    }
    if (s->taken >= WINDOW_STEP) {
        kite_spdy_window_update(&w, 0, (uint32_t)s->taken);
        s->taken = 0;
    }
    emit(s, &w);
    kite_buf_release(&w);
}

/* Every complete frame fed so far. */
static void frames(struct pfs *s) {
    struct kite_spdy_frame f;
    int r;
    while (!s->fatal && (r = kite_spdy_next(s->sp, &f)) != 0) {
        if (r < 0) {
            s->fatal = true;
            break;
        }
        bool is_data;
        struct pair *p;
        switch (f.type) {
        case KITE_SPDY_DATA: data_frame(s, &f); break;
        case KITE_SPDY_SYN_STREAM: syn_stream(s, &f); break;
        case KITE_SPDY_RST_STREAM:
            if ((p = find_sid(s, f.stream, &is_data))) drop(s, p);
            break;
        case KITE_SPDY_PING:
            if (f.value % 2) { /* the client's (odd ids): echoed; even ones would answer the agent's */
                struct kite_buf b = {0};
                kite_spdy_ping(&b, f.value);
                emit(s, &b);
                kite_buf_release(&b);
            }
            break;
        case KITE_SPDY_GOAWAY: s->goaway = true; break;
        default: break; /* SETTINGS, WINDOW_UPDATE, HEADERS, SYN_REPLY: nothing to do */
        }
    }
}

/* The client's bytes for p, written as far as the connection takes them; its FIN once all are. */
static bool pair_flush(struct pair *p) {
    if (!kite_pf_flush(p->fd, &p->out, &p->out_off)) return false;
    if (p->out.len == 0 && p->client_fin && !p->shut_wr) {
        shutdown(p->fd, SHUT_WR);
        p->shut_wr = true;
    }
    return true;
}

/* Sends what waits, for a few seconds at most. */
static void drain(struct pfs *s) {
    int64_t deadline = now() + 5 * KITE_NS_PER_SEC;
    while (!s->gone && want_write(s)) {
        flush(s);
        if (!want_write(s)) break;
        int64_t ms = (deadline - now()) / KITE_NS_PER_MS;
        if (ms <= 0) break;
        struct pollfd p = {.fd = kite_http_tunnel_fd(s->t), .events = POLLOUT};
        poll(&p, 1, (int)ms);
    }
}

void kite_pf_spdy_run(struct kite_http_tunnel *t, bool ws, pid_t pid, const char *ns, const char *pod, size_t buffer) {
    struct pfs s = {.t = t, .ws_mode = ws, .pid = pid, .ns = ns, .pod = pod, .last_active = now(), .buffer = buffer};
    s.sp = kite_spdy_new();
    if (ws) {
        struct wslay_event_callbacks cb = {.recv_callback = ws_recv, .send_callback = ws_send, .on_msg_recv_callback = ws_msg};
        if (wslay_event_context_server_init(&s.ws, &cb, &s) != 0) {
            kite_spdy_free(s.sp);
            return;
        }
        wslay_event_config_set_max_recv_msg_length(s.ws, KITE_STREAM_MAX_MESSAGE);
    }
    struct pollfd *pf = NULL;
    size_t pf_cap = 0;
    bool idle = false;
    for (;;) {
        if (take_room(&s) && want_read(&s) && kite_http_tunnel_pending(t)) take(&s);
        frames(&s);
        for (size_t i = 0; i < s.n;) {
            struct pair *p = s.p[i];
            if (p->open && !pair_flush(p)) {
                finish(&s, p, NULL); /* the pod's side broke: the pair ends */
                continue;
            }
            i++;
        }
        flush(&s);
        if (s.gone || s.fatal) break;
        if (s.ws_mode && !wslay_event_want_read(s.ws) && !wslay_event_want_write(s.ws)) break; /* closed */
        if (s.goaway && !s.n) break;
        int64_t t_now = now();
        /* pairs whose second stream did not come */
        for (size_t i = 0; i < s.n;) {
            struct pair *p = s.p[i];
            if (!(p->data_sid && p->err_sid) && t_now - p->since > (int64_t)KITE_PF_SPDY_PAIR_TIMEOUT_S * KITE_NS_PER_SEC) {
                finish(&s, p, "timed out waiting for the other stream of the pair");
                continue;
            }
            i++;
        }
        int64_t left = (s.last_active + (int64_t)KITE_STREAM_IDLE_S * KITE_NS_PER_SEC - t_now) / KITE_NS_PER_MS;
        if (left <= 0) {
            idle = true;
            break;
        }
        /* what poll waits for is decided on the state the steps above left (a buffer written
         * out whole since the top of the loop opens the tunnel to reading again) */
        bool room = queued(&s) < s.buffer, take_in = take_room(&s);
        if (take_in && want_read(&s) && kite_http_tunnel_pending(t)) continue; /* TLS holds bytes */
        if (pf_cap < s.n + 1) {
            pf_cap = s.n + 1;
            pf = kite_realloc(pf, pf_cap * sizeof *pf);
        }
        pf[0] = (struct pollfd){.fd = kite_http_tunnel_fd(t),
                                .events = (short)((take_in && want_read(&s) ? POLLIN : 0) | (want_write(&s) ? POLLOUT : 0))};
        int64_t wait_ms = KITE_MIN(left, INT64_C(60000));
        for (size_t i = 0; i < s.n; i++) {
            struct pair *p = s.p[i];
            pf[i + 1] = (struct pollfd){.fd = p->fd};
            if (p->connecting) pf[i + 1].events = POLLOUT;
            else if (p->open) pf[i + 1].events = (short)((room ? POLLIN : 0) | (p->out_off < p->out.len ? POLLOUT : 0));
            if (!(p->data_sid && p->err_sid)) wait_ms = KITE_MIN(wait_ms, INT64_C(1000));
        }
        size_t np = s.n;
        uint64_t gen = s.gen;
        int n = poll(pf, np + 1, (int)wait_ms);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) take(&s);
        frames(&s);
        /* pairs may have gone while frames were handled: match poll entries by descriptor */
        for (size_t k = 0; k < np; k++) {
            short ev = pf[k + 1].revents;
            if (!ev || pf[k + 1].fd < 0) continue;
            struct pair *p = NULL;
            for (size_t i = 0; i < s.n && !p; i++)
                if (s.p[i]->fd == pf[k + 1].fd && s.p[i]->gen <= gen) p = s.p[i];
            if (!p) continue; /* (a pair made since has no events yet, even on a reused descriptor) */
            if (p->connecting) {
                int err = 0;
                socklen_t sl = sizeof err;
                getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
                if (err) {
                    fail(&s, p, err);
                } else {
                    p->connecting = false;
                    p->open = true;
                    s.last_active = now();
                }
                continue;
            }
            if (ev & (POLLIN | POLLHUP | POLLERR)) {
                char buf[CHUNK];
                ssize_t k2 = recv(p->fd, buf, sizeof buf, MSG_DONTWAIT);
                if (k2 > 0) {
                    s.last_active = now();
                    struct kite_buf b = {0};
                    kite_spdy_data(&b, p->data_sid, 0, buf, (size_t)k2);
                    emit(&s, &b);
                    kite_buf_release(&b);
                } else if (k2 == 0 || (errno != EAGAIN && errno != EINTR)) {
                    finish(&s, p, NULL); /* the pod's side ended: so do the pair's streams */
                }
            }
        }
    }
    free(pf);
    if (!s.gone && (idle || s.fatal || s.goaway)) {
        /* the agent ends the session: say so, and send what waits, for a few seconds at most */
        struct kite_buf b = {0};
        kite_spdy_goaway(&b, s.last_sid, s.fatal ? 1 : 0);
        emit(&s, &b);
        kite_buf_release(&b);
        drain(&s);
        /* (libwslay sends control frames before queued messages: the close goes after them) */
        if (s.ws_mode) {
            wslay_event_queue_close(s.ws, s.fatal ? 1002 : 1000, NULL, 0);
            drain(&s);
        }
    }
    while (s.n) drop(&s, s.p[0]);
    free(s.p);
    kite_buf_release(&s.out);
    if (s.ws) wslay_event_context_free(s.ws);
    kite_spdy_free(s.sp);
}
