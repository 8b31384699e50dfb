/* A small gRPC client over one HTTP/2 connection (etcd-grpc.h).
 *
 * Everything nghttp2 does runs under the connection's mutex, which is recursive so that a
 * response callback may start or feed calls (nghttp2 allows submitting from its callbacks). The
 * I/O thread takes it to read and to flush, and releases it while it waits in poll(); any thread
 * starting a call takes it, submits and sends the request itself (no wake-up of the I/O thread,
 * which only reads: one send() per request instead of an eventfd write, a poll() return, an
 * eventfd read and a send() on another thread); a call started from inside nghttp2 (a callback)
 * is sent by the I/O thread, woken through an eventfd, as is one whose send failed. A stream that
 * sending closes (one the peer had closed already) runs its done callback on the sending thread,
 * under mu. Callers must not hold a lock of their own that a callback of this connection takes
 * while they call in here (the lock order is this mutex first). */
#include "store/etcd-grpc.h"

#include "base/buf.h"
#include "base/clock.h"
#include "store/etcd-pb.h"

#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct call {
    struct grpc_conn *c;
    int32_t id;
    struct call *prev, *next; /* in c->calls */
    struct kite_buf out;      /* request bytes not yet handed to nghttp2 (from out_off) */
    size_t out_off;
    bool stream, deferred;
    struct kite_buf in; /* response bytes not yet a whole message */
    int status;         /* -1 until a grpc-status header came */
    char *message;
    grpc_msg_cb on_msg;
    grpc_done_cb on_done;
    void *ud;
};

struct grpc_conn {
    int fd, efd;
    bool https;
    char *authority;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
    nghttp2_session *h2;
    pthread_mutex_t mu;
    pthread_t thread;
    bool started;
    bool in_h2; /* inside nghttp2_session_mem_send/recv (under mu): no flush from a callback */
    _Atomic bool dead, stopping;
    _Atomic bool ready; /* the server's SETTINGS came: it speaks HTTP/2 */
    struct call *calls;
    int64_t timeout_ns, last_recv_ns, ping_ns;
};

static int64_t now_ns(void) { return kite_now_mono(kite_clock_real()); }

static void wake(struct grpc_conn *c) {
    uint64_t one = 1;
    ssize_t w = write(c->efd, &one, sizeof one);
    (void)w;
}

/* ---- the socket ---- */

static ssize_t sock_send(struct grpc_conn *c, const void *p, size_t n) {
    if (c->tls) {
        ssize_t w = gnutls_record_send(c->tls, p, n);
        if (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED) return -EAGAIN;
        return w < 0 ? -ECONNRESET : w;
    }
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
    return w;
}

static ssize_t sock_recv(struct grpc_conn *c, void *p, size_t n) {
    if (c->tls) {
        ssize_t r = gnutls_record_recv(c->tls, p, n);
        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) return -EAGAIN;
        return r < 0 ? -ECONNRESET : r;
    }
    ssize_t r = recv(c->fd, p, n, 0);
    if (r < 0) return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
    return r;
}

/* Hands everything nghttp2 has to send to the socket, waiting (up to the timeout) while the
 * socket is full. Under mu. */
static int flush(struct grpc_conn *c) {
    for (;;) {
        const uint8_t *data;
        c->in_h2 = true;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        c->in_h2 = false;
        if (n < 0) return -EPROTO;
        if (n == 0) return 0;
        for (size_t off = 0; off < (size_t)n;) {
            ssize_t w = sock_send(c, data + off, (size_t)n - off);
            if (w == -EAGAIN) {
                struct pollfd p = {c->fd, POLLOUT, 0};
                if (poll(&p, 1, (int)(c->timeout_ns / 1000000)) <= 0) return -ETIMEDOUT;
                continue;
            }
            if (w < 0) return (int)w;
            off += (size_t)w;
        }
    }
}

/* ---- calls ---- */

static void call_end(struct call *k, int status, const char *message) {
    struct grpc_conn *c = k->c;
    if (k->prev) k->prev->next = k->next;
    else c->calls = k->next;
    if (k->next) k->next->prev = k->prev;
    if (k->id > 0 && c->h2) nghttp2_session_set_stream_user_data(c->h2, k->id, NULL);
    k->on_done(k->ud, status, message ? message : "");
    kite_buf_release(&k->out);
    kite_buf_release(&k->in);
    free(k->message);
    free(k);
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud) {
    (void)h2, (void)id, (void)ud;
    struct call *k = src->ptr;
    size_t n = KITE_MIN(len, k->out.len - k->out_off);
    if (n) memcpy(buf, k->out.p + k->out_off, n);
    k->out_off += n;
    if (k->out_off == k->out.len) {
        kite_buf_reset(&k->out);
        k->out_off = 0;
        if (!k->stream) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
        } else if (!n) {
            k->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
    }
    return (ssize_t)n;
}

static int deliver(void *ud, const unsigned char *msg, size_t len) {
    struct call *k = ud;
    k->on_msg(k->ud, msg, len);
    return 0;
}

static int on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
    (void)flags, (void)ud;
    struct call *k = nghttp2_session_get_stream_user_data(h2, id);
    if (!k) return 0;
    kite_buf_append(&k->in, data, len);
    if (kite_store_grpc_deframe(&k->in, deliver, k) < 0) nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, id, NGHTTP2_PROTOCOL_ERROR);
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    (void)flags, (void)ud;
    struct call *k = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (!k) return 0;
    if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        int st = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++) st = st * 10 + (value[i] - '0');
        k->status = st;
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        free(k->message);
        k->message = kite_store_grpc_percent_decode((const char *)value, valuelen);
    } else if (namelen == 7 && memcmp(name, ":status", 7) == 0 && !(valuelen == 3 && memcmp(value, "200", 3) == 0)) {
        free(k->message);
        k->message = kite_asprintf("HTTP status %.*s", (int)valuelen, value);
        k->status = GRPC_UNKNOWN;
    }
    return 0;
}

static int on_frame(nghttp2_session *h2, const nghttp2_frame *frame, void *ud) {
    (void)h2;
    struct grpc_conn *c = ud;
    if (frame->hd.type == NGHTTP2_SETTINGS) c->ready = true;
    return 0;
}

static int on_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *ud) {
    (void)ud;
    struct call *k = nghttp2_session_get_stream_user_data(h2, id);
    if (!k) return 0;
    if (k->status < 0 && error_code) call_end(k, -ECONNRESET, "stream reset");
    else call_end(k, k->status < 0 ? GRPC_UNKNOWN : k->status, k->message ? k->message : (k->status < 0 ? "no grpc-status" : ""));
    return 0;
}

/* Sends what was just submitted from the calling thread: true when it all went out. Not from
 * inside nghttp2 (a callback of this connection), nor before the I/O thread runs or once the
 * connection is dead: the I/O thread sends then (the caller wakes it). Under mu. */
static bool send_now(struct grpc_conn *c) {
    if (c->in_h2 || !c->started || c->dead || c->stopping) return false;
    return flush(c) == 0;
}

int kite_store_grpc_call_start(struct grpc_conn *c, const char *path, const void *msg, size_t len, bool stream,
                    grpc_msg_cb on_msg, grpc_done_cb on_done, void *ud) {
    struct call *k = kite_calloc(1, sizeof *k);
    *k = (struct call){.c = c, .stream = stream, .status = -1, .on_msg = on_msg, .on_done = on_done, .ud = ud};
    kite_store_grpc_frame(&k->out, msg, len);
    const char *scheme = c->https ? "https" : "http";
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv hdrs[] = {NV(":method", "POST"), NV(":scheme", scheme), NV(":path", path),
                         NV(":authority", c->authority), NV("content-type", "application/grpc"), NV("te", "trailers"),
                         NV("user-agent", "kite-etcd")};
#undef NV
    nghttp2_data_provider prd = {.source.ptr = k, .read_callback = read_body};
    pthread_mutex_lock(&c->mu);
    int32_t id = -ENOTCONN;
    if (!c->dead && !c->stopping) {
        id = nghttp2_submit_request(c->h2, NULL, hdrs, KITE_ARRAY_SIZE(hdrs), &prd, k);
        if (id < 0) id = -ENOTCONN;
    }
    bool sent = false;
    if (id > 0) {
        k->id = id;
        k->next = c->calls;
        if (c->calls) c->calls->prev = k;
        c->calls = k;
        sent = send_now(c);
    }
    pthread_mutex_unlock(&c->mu);
    if (id < 0) {
        kite_buf_release(&k->out);
        free(k);
        return id;
    }
    if (!sent) wake(c);
    return id;
}

int kite_store_grpc_call_send(struct grpc_conn *c, int32_t id, const void *msg, size_t len) {
    int r = -ENOTCONN;
    pthread_mutex_lock(&c->mu);
    struct call *k = c->dead ? NULL : nghttp2_session_get_stream_user_data(c->h2, id);
    if (k) {
        kite_store_grpc_frame(&k->out, msg, len);
        if (k->deferred) {
            k->deferred = false;
            nghttp2_session_resume_data(c->h2, id);
        }
        r = 0;
    }
    bool sent = r == 0 && send_now(c);
    pthread_mutex_unlock(&c->mu);
    if (r == 0 && !sent) wake(c);
    return r;
}

/* ---- the I/O thread ---- */

static void fail_all(struct grpc_conn *c) {
    pthread_mutex_lock(&c->mu);
    c->dead = true;
    while (c->calls) call_end(c->calls, -ECONNRESET, "connection lost");
    pthread_mutex_unlock(&c->mu);
}

static void *conn_main(void *arg) {
    struct grpc_conn *c = arg;
    unsigned char buf[16384];
    c->last_recv_ns = now_ns();
    while (!c->stopping) {
        pthread_mutex_lock(&c->mu);
        int r = flush(c);
        bool pending = c->tls && gnutls_record_check_pending(c->tls) > 0;
        bool open = nghttp2_session_want_read(c->h2) || nghttp2_session_want_write(c->h2);
        pthread_mutex_unlock(&c->mu);
        if (r < 0 || !open) break;
        struct pollfd p[2] = {{c->fd, POLLIN, 0}, {c->efd, POLLIN, 0}};
        int n = pending ? 1 : poll(p, 2, 200);
        if (n < 0 && errno != EINTR) break;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            ssize_t rd = read(c->efd, &v, sizeof v);
            (void)rd;
        }
        if (pending || (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            pthread_mutex_lock(&c->mu);
            for (;;) {
                ssize_t got = sock_recv(c, buf, sizeof buf);
                if (got == -EAGAIN) break;
                if (got <= 0) {
                    r = -ECONNRESET;
                    break;
                }
                c->in_h2 = true;
                ssize_t used = nghttp2_session_mem_recv(c->h2, buf, (size_t)got);
                c->in_h2 = false;
                if (used < 0) {
                    r = -ECONNRESET;
                    break;
                }
                c->last_recv_ns = now_ns();
                c->ping_ns = 0;
                if (c->tls && !gnutls_record_check_pending(c->tls)) break;
            }
            pthread_mutex_unlock(&c->mu);
            if (r < 0) break;
        }
        /* keepalive: a PING when the peer was quiet for a third of the timeout; no answer to it
         * within the timeout is a dead connection (a killed or partitioned member) */
        int64_t now = now_ns();
        if (c->ping_ns && now - c->ping_ns > c->timeout_ns) break;
        if (!c->ping_ns && now - c->last_recv_ns > c->timeout_ns / 3) {
            pthread_mutex_lock(&c->mu);
            nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL);
            pthread_mutex_unlock(&c->mu);
            c->ping_ns = now;
        }
    }
    fail_all(c);
    return NULL;
}

/* ---- open and close ---- */

static int connect_to(const char *host, const char *port, int timeout_ms) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0) return -EHOSTUNREACH;
    int r = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
            r = -errno;
            close(fd);
            continue;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t el = sizeof err;
        if (poll(&p, 1, timeout_ms) <= 0) err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
        if (err) {
            r = -err;
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        r = fd;
        break;
    }
    freeaddrinfo(ai);
    return r;
}

static int fail(char **ret_error, int r, const char *fmt, const char *a, const char *b) {
    if (ret_error && !*ret_error) *ret_error = kite_asprintf(fmt, a, b);
    return r;
}

static int tls_setup(struct grpc_conn *c, const char *host, const struct grpc_tls *tls, int timeout_ms,
                     char **ret_error) {
    int g;
    if (gnutls_certificate_allocate_credentials(&c->cred) < 0) return -ENOMEM;
    if (tls->cafile && gnutls_certificate_set_x509_trust_file(c->cred, tls->cafile, GNUTLS_X509_FMT_PEM) <= 0)
        return fail(ret_error, -EINVAL, "cannot read the CA file %s%s", tls->cafile, "");
    if (tls->certfile && tls->keyfile &&
        (g = gnutls_certificate_set_x509_key_file(c->cred, tls->certfile, tls->keyfile, GNUTLS_X509_FMT_PEM)) < 0)
        return fail(ret_error, -EINVAL, "cannot read the client certificate %s or key %s", tls->certfile, tls->keyfile);
    if (gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL | GNUTLS_NONBLOCK) < 0 ||
        gnutls_set_default_priority(c->tls) < 0 || gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred) < 0)
        return -EPROTO;
    if (tls->cafile) gnutls_session_set_verify_cert(c->tls, host, 0);
    gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
    gnutls_alpn_set_protocols(c->tls, &h2, 1, 0);
    gnutls_transport_set_int(c->tls, c->fd);
    int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
    do {
        g = gnutls_handshake(c->tls);
        if (g == GNUTLS_E_AGAIN || g == GNUTLS_E_INTERRUPTED) {
            struct pollfd p = {c->fd, gnutls_record_get_direction(c->tls) ? POLLOUT : POLLIN, 0};
            int left = (int)((deadline - now_ns()) / 1000000);
            if (left <= 0 || poll(&p, 1, left) <= 0)
                return fail(ret_error, -ETIMEDOUT, "TLS handshake with %s timed out%s", host, "");
        }
    } while (g < 0 && !gnutls_error_is_fatal(g));
    if (g < 0) return fail(ret_error, -EPROTO, "TLS handshake with %s: %s", host, gnutls_strerror(g));
    return 0;
}

int kite_store_grpc_conn_open(const char *host, const char *port, bool https, const struct grpc_tls *tls, int timeout_ms,
                   struct grpc_conn **ret, char **ret_error) {
    if (ret_error) *ret_error = NULL;
    struct grpc_conn *c = kite_calloc(1, sizeof *c);
    c->fd = c->efd = -1;
    c->https = https;
    c->timeout_ns = (int64_t)timeout_ms * 1000000;
    bool v6 = strchr(host, ':');
    c->authority = kite_asprintf("%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    int r = (c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ? -errno : 0;
    if (r == 0 && (c->fd = connect_to(host, port, timeout_ms)) < 0) {
        r = c->fd;
        fail(ret_error, r, "cannot connect to %s: %s", c->authority, strerror(-r));
    }
    if (r == 0 && https) r = tls_setup(c, host, tls, timeout_ms, ret_error);
    if (r == 0) {
        nghttp2_session_callbacks *cbs;
        nghttp2_session_callbacks_new(&cbs);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame);
        if (nghttp2_session_client_new(&c->h2, cbs, c) != 0) r = -ENOMEM;
        nghttp2_session_callbacks_del(cbs);
    }
    if (r == 0) {
        /* a large window: a Range of many objects comes back in one message */
        nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000},
                                       {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16 * 1024 * 1024}};
        nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, KITE_ARRAY_SIZE(iv));
        nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 64 * 1024 * 1024);
        c->started = true; /* before the thread runs: its callbacks read it (send_now) */
        if (pthread_create(&c->thread, NULL, conn_main, c) != 0) r = -EAGAIN, c->started = false;
    }
    /* a peer that accepts the connection but does not speak HTTP/2 (or nothing at all) is no member */
    for (int64_t deadline = now_ns() + c->timeout_ns; r == 0 && !c->ready;) {
        if (c->dead || now_ns() > deadline) r = c->dead ? -ECONNRESET : -ETIMEDOUT;
        else usleep(1000);
    }
    if (r < 0) {
        if (ret_error && !*ret_error) *ret_error = kite_asprintf("cannot talk to %s: %s", c->authority, strerror(-r));
        kite_store_grpc_conn_close(c);
        return r;
    }
    pthread_setname_np(c->thread, "etcd-conn");
    *ret = c;
    return 0;
}

bool kite_store_grpc_conn_dead(struct grpc_conn *c) { return c->dead; }

void kite_store_grpc_conn_close(struct grpc_conn *c) {
    if (!c) return;
    c->stopping = true;
    if (c->started) {
        wake(c);
        pthread_join(c->thread, NULL);
    }
    fail_all(c);
    if (c->h2) nghttp2_session_del(c->h2);
    if (c->tls) {
        gnutls_deinit(c->tls);
    }
    if (c->cred) gnutls_certificate_free_credentials(c->cred);
    if (c->fd >= 0) close(c->fd);
    if (c->efd >= 0) close(c->efd);
    pthread_mutex_destroy(&c->mu);
    free(c->authority);
    free(c);
}
