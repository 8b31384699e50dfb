/* The HTTP/1.1 transport: GnuTLS for TLS, http-parser for reading answers, non-blocking
 * sockets with deadlines for everything else.
 *
 * Why not libcurl: Debian's libcurl brings ~20 libraries with it (Kerberos, LDAP, SSH and
 * through it OpenSSL's libcrypto, RTMP, HTTP/2...), ~5 MB of resident pages in a node agent
 * whose whole budget is 8 MB, for features a Kubernetes client never uses. What the agent
 * needs is small: one kept-alive connection for its requests and one per watch, which
 * another thread can cancel.
 *
 * Plain requests take a kept-alive connection from a small pool (one by default; a client shared
 * by several threads asks for more: kite_client_options.max_connections), so heartbeats reuse one
 * TLS session instead of handshaking every 10 s, and a controller-manager's workers do not queue
 * behind one another's requests. A request that fails on a reused connection
 * before any byte of an answer came back (the server closed it while idle) is sent once more
 * on a new connection, as browsers and libcurl do. Each watch has its own connection and
 * waits on its socket and on an eventfd that kite_cancel_fire() writes to. */
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <http_parser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "json/parse.h"
#include "client/client.h"

/* The largest error body kept from a watch answered with something other than 200. */
#define WATCH_MAX_ERROR_BODY 65536

struct conn {
    int fd;               /* -1 = closed */
    gnutls_session_t tls; /* NULL on plain http */
};

/* A pooled connection: busy while one request uses it; opened in generation gen (a reset closes
 * those of older generations when they come back). */
struct pooled {
    struct conn conn;
    bool busy;
    unsigned gen;
};

struct tls_client {
    struct kite_client base;
    pthread_mutex_t lock; /* guards pool, gen, extra_headers */
    pthread_cond_t idle;  /* a pooled connection came back */
    struct pooled *pool;
    size_t npool;
    unsigned gen;
    bool https, host_is_ip, insecure;
    char *host, *port; /* for getaddrinfo; host without IPv6 brackets */
    char *authority;   /* Host header: as written in the server URL */
    char *prefix;      /* path of the server URL, "" or "/x" (no trailing slash) */
    char *auth_header; /* "Authorization: Bearer ...\r\n" or NULL */
    char *user_agent;
    char *extra_headers; /* kite_client_set_extra_headers's, or NULL */
    /* Credentials of new connections; replaced by kite_client_set_certificate (a rotated
     * client certificate), the old ones kept in retired until the client is freed because
     * open watch connections still use them. */
    pthread_mutex_t cred_lock;
    gnutls_certificate_credentials_t cred;
    gnutls_certificate_credentials_t *retired;
    size_t n_retired;
    char *ca_pem; /* trust for credentials made later (NULL: the system's) */
    size_t ca_len;
    long timeout_ms, connect_timeout_ms;
};

static int64_t now_ms(void) { return kite_now_mono(kite_clock_real()) / KITE_NS_PER_MS; }

static __thread kite_client_waiter thread_waiter;
static __thread void *thread_waiter_ud;

void kite_client_set_thread_waiter(kite_client_waiter fn, void *ud) {
    thread_waiter = fn;
    thread_waiter_ud = ud;
}

/* Waits until fd is ready for events, the deadline (ms, monotonic; < 0 = none) passes
 * (-ETIMEDOUT) or cancel_fd (-1 = none) becomes readable (-ECANCELED). Errors and hang-ups
 * count as ready: the next read or write reports them. */
static int wait_fd(int fd, short events, int64_t deadline, int cancel_fd) {
    if (thread_waiter && cancel_fd < 0) return thread_waiter(fd, events, deadline, thread_waiter_ud);
    struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = cancel_fd, .events = POLLIN}};
    for (;;) {
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            if (left <= 0) return -ETIMEDOUT;
            timeout = left > INT32_MAX ? INT32_MAX : (int)left;
        }
        int n = poll(p, cancel_fd >= 0 ? 2 : 1, timeout);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return -ETIMEDOUT;
        if (cancel_fd >= 0 && p[1].revents) return -ECANCELED;
        return 0;
    }
}

/* GnuTLS error -> -errno: the peer going away is -ECONNRESET, everything about certificates
 * and the handshake -EPROTO. */
static int tls_errno(int r) {
    switch (r) {
    case GNUTLS_E_PUSH_ERROR:
    case GNUTLS_E_PULL_ERROR:
    case GNUTLS_E_PREMATURE_TERMINATION:
        return -ECONNRESET;
    case GNUTLS_E_MEMORY_ERROR:
        return -ENOMEM;
    default:
        return -EPROTO;
    }
}

static void conn_close(struct conn *k) {
    if (k->tls) gnutls_deinit(k->tls);
    if (k->fd >= 0) close(k->fd);
    k->tls = NULL;
    k->fd = -1;
}

static int tcp_connect(struct tls_client *c, int64_t deadline, int cancel_fd) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(c->host, c->port, &hints, &res);
    if (g) return g == EAI_SYSTEM && errno ? -errno : g == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
    int r = -ECONNREFUSED, fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            r = -errno;
            continue;
        }
        r = connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS ? -errno : 0;
        if (r == 0 && (r = wait_fd(fd, POLLOUT, deadline, cancel_fd)) == 0) {
            int err = 0;
            socklen_t len = sizeof(err);
            r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 ? -errno : -err;
        }
        if (r == 0) break;
        close(fd);
        fd = -1;
        if (r == -ETIMEDOUT || r == -ECANCELED) break; /* the budget is spent: no next address */
    }
    freeaddrinfo(res);
    if (fd < 0) return r;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    return fd;
}

static int set_cred(struct tls_client *c, gnutls_session_t tls) {
    pthread_mutex_lock(&c->cred_lock);
    int r = gnutls_credentials_set(tls, GNUTLS_CRD_CERTIFICATE, c->cred);
    pthread_mutex_unlock(&c->cred_lock);
    return r;
}

/* Connects and, for https, handshakes and verifies the server against the configured CA and
 * the host name (or IP address) of the server URL. */
static int conn_open_alpn(struct tls_client *c, struct conn *k, const char *proto, int64_t deadline, int cancel_fd) {
    int fd = tcp_connect(c, deadline, cancel_fd);
    if (fd < 0) return fd;
    k->fd = fd;
    if (!c->https) return 0;
    int r = gnutls_init(&k->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
    if (r < 0) {
        k->tls = NULL;
        conn_close(k);
        return -ENOMEM;
    }
    const gnutls_datum_t alpn = {(unsigned char *)proto, (unsigned)strlen(proto)};
    if ((r = gnutls_set_default_priority(k->tls)) < 0 ||
        (r = set_cred(c, k->tls)) < 0 ||
        (r = gnutls_alpn_set_protocols(k->tls, &alpn, 1, 0)) < 0 ||
        (!c->host_is_ip && (r = gnutls_server_name_set(k->tls, GNUTLS_NAME_DNS, c->host, strlen(c->host))) < 0))
        goto fail;
    /* an IP address is checked against the certificate's IP SANs */
    if (!c->insecure) gnutls_session_set_verify_cert(k->tls, c->host, 0);
    gnutls_transport_set_int(k->tls, fd);
    for (;;) {
        r = gnutls_handshake(k->tls);
        if (r == 0) return 0;
        if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED && gnutls_error_is_fatal(r)) goto fail;
        int w = wait_fd(fd, gnutls_record_get_direction(k->tls) ? POLLOUT : POLLIN, deadline, cancel_fd);
        if (w < 0) {
            conn_close(k);
            return w;
        }
    }
fail:
    conn_close(k);
    return tls_errno(r);
}

static int conn_open(struct tls_client *c, struct conn *k, int64_t deadline, int cancel_fd) {
    return conn_open_alpn(c, k, "http/1.1", deadline, cancel_fd);
}

static int conn_send(struct conn *k, const char *p, size_t n, int64_t deadline, int cancel_fd) {
    while (n > 0) {
        ssize_t w = k->tls ? gnutls_record_send(k->tls, p, n) : send(k->fd, p, n, MSG_NOSIGNAL);
        if (w >= 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        bool again = k->tls ? w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED
                            : errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        if (!again) return k->tls ? tls_errno((int)w) : -errno;
        int r = wait_fd(k->fd, POLLOUT, deadline, cancel_fd);
        if (r < 0) return r;
    }
    return 0;
}

/* Reads what is there (waiting for something). 0 = the peer closed the connection. */
static ssize_t conn_recv(struct conn *k, char *buf, size_t n, int64_t deadline, int cancel_fd) {
    for (;;) {
        ssize_t r;
        short dir = POLLIN;
        if (k->tls) {
            r = gnutls_record_recv(k->tls, buf, n);
            if (r >= 0) return r;
            /* servers often close without close_notify; http-parser tells whether the answer
             * was complete */
            if (r == GNUTLS_E_PREMATURE_TERMINATION) return 0;
            if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) return tls_errno((int)r);
            if (gnutls_record_get_direction(k->tls)) dir = POLLOUT;
        } else {
            r = recv(k->fd, buf, n, 0);
            if (r >= 0) return r;
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -errno;
        }
        int w = wait_fd(k->fd, dir, deadline, cancel_fd);
        if (w < 0) return w;
    }
}

/* ---- one exchange: request out, answer in ---- */

struct exchange {
    http_parser parser;
    long status;
    bool done;
    size_t received;       /* raw bytes of the answer read so far */
    struct kite_buf *body; /* plain requests: the whole body */
    size_t body_max;
    int (*on_data)(struct exchange *x, const char *p, size_t n); /* watches: each piece */
    int stop;              /* why a callback stopped the parser */
    void *ud;
};

static int on_headers_complete(http_parser *p) {
    struct exchange *x = p->data;
    x->status = p->status_code;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
    struct exchange *x = p->data;
    if (x->on_data) {
        int r = x->on_data(x, at, n);
        if (r < 0) x->stop = r;
        return r < 0;
    }
    if (x->body->len + n > x->body_max) {
        x->stop = -EFBIG;
        return 1;
    }
    kite_buf_append(x->body, at, n);
    return 0;
}

static int on_message_complete(http_parser *p) {
    ((struct exchange *)p->data)->done = true;
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void exchange_init(struct exchange *x) {
    http_parser_init(&x->parser, HTTP_RESPONSE);
    x->parser.data = x;
}

/* Reads and parses until the answer is complete (0), or an error. *keep_alive says whether
 * the connection may serve another request. */
static int exchange_read(struct conn *k, struct exchange *x, int64_t deadline, int cancel_fd, bool *keep_alive) {
    char buf[16384];
    while (!x->done) {
        ssize_t n = conn_recv(k, buf, sizeof(buf), deadline, cancel_fd);
        if (n < 0) return (int)n;
        x->received += (size_t)n;
        /* n == 0 tells the parser the stream ended: that completes an answer delimited by
         * the end of the connection, and is an error anywhere else */
        size_t used = http_parser_execute(&x->parser, &parser_settings, buf, (size_t)n);
        if (x->stop) return x->stop;
        if (x->done) break;
        if (n == 0) return -ECONNRESET;
        if (HTTP_PARSER_ERRNO(&x->parser) != HPE_OK || used != (size_t)n) return -EPROTO;
    }
    *keep_alive = http_should_keep_alive(&x->parser);
    return 0;
}

/* The request head (and body, so a small request is one TLS record). */
static void build_request(struct tls_client *c, struct kite_buf *b, const char *method, const char *path,
                          const char *content_type, const char *body, size_t body_len) {
    kite_buf_printf(b, "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n", method, c->prefix, path,
                    c->authority, c->user_agent);
    if (c->auth_header) kite_buf_puts(b, c->auth_header);
    if (c->extra_headers) kite_buf_puts(b, c->extra_headers);
    if (body) {
        if (content_type) kite_buf_printf(b, "Content-Type: %s\r\n", content_type);
        kite_buf_printf(b, "Content-Length: %zu\r\n", body_len);
    }
    kite_buf_puts(b, "\r\n");
    if (body) kite_buf_append(b, body, body_len);
}

/* A pooled connection for one request: an idle open one first, else an idle closed one (which
 * the request opens), else the first to come back before deadline (NULL after it). */
static struct pooled *pool_take(struct tls_client *c, int64_t deadline) {
    struct pooled *p = NULL;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        for (size_t i = 0; i < c->npool; i++) {
            struct pooled *q = &c->pool[i];
            if (q->busy) continue;
            if (q->conn.fd >= 0) {
                p = q;
                break;
            }
            if (!p) p = q;
        }
        if (p) break;
        struct timespec ts = {.tv_sec = deadline / 1000, .tv_nsec = (deadline % 1000) * 1000000};
        if (pthread_cond_timedwait(&c->idle, &c->lock, &ts) == ETIMEDOUT) break;
    }
    if (p) {
        p->busy = true;
        if (p->gen != c->gen) conn_close(&p->conn); /* opened before a reset */
        p->gen = c->gen;
    }
    pthread_mutex_unlock(&c->lock);
    return p;
}

static void pool_give(struct tls_client *c, struct pooled *p) {
    pthread_mutex_lock(&c->lock);
    p->busy = false;
    if (p->gen != c->gen) conn_close(&p->conn);
    pthread_cond_signal(&c->idle);
    pthread_mutex_unlock(&c->lock);
}

static int tls_request(struct kite_client *base, const char *method, const char *path, const char *content_type,
                       const char *body, size_t body_len, struct kite_response *ret) {
    struct tls_client *c = (struct tls_client *)base;
    struct kite_buf req = {0}, out = {0};
    build_request(c, &req, method, path, content_type, body, body_len);
    int64_t deadline = now_ms() + c->timeout_ms;
    int r = -ETIMEDOUT;
    long status = 0;
    struct pooled *p = pool_take(c, deadline);
    for (int attempt = 0; p && attempt < 2; attempt++) {
        struct conn *k = &p->conn;
        bool reused = k->fd >= 0;
        if (!reused) {
            int64_t connect_deadline = KITE_MIN(deadline, now_ms() + c->connect_timeout_ms);
            if ((r = conn_open(c, k, connect_deadline, -1)) < 0) break;
        }
        struct exchange x = {.body = &out, .body_max = KITE_CLIENT_MAX_BODY};
        exchange_init(&x);
        bool keep_alive = false;
        if (!kite_client_may_send(base, method)) {
            r = KITE_CLIENT_NOT_LEADING;
            break;
        }
        r = conn_send(k, req.p, req.len, deadline, -1);
        if (r == 0) atomic_fetch_add(&base->bytes_sent, req.len);
        if (r == 0) r = exchange_read(k, &x, deadline, -1, &keep_alive);
        if (r == 0) {
            status = x.status;
            if (!keep_alive) conn_close(k);
            break;
        }
        conn_close(k);
        kite_buf_reset(&out);
        /* a kept-alive connection the server had closed: nothing of an answer came back */
        if (!reused || x.received > 0 || r == -ETIMEDOUT || r == -EFBIG) break;
    }
    if (p) pool_give(c, p);
    kite_buf_release(&req);
    atomic_fetch_add(&base->requests, 1);
    if (r < 0) {
        kite_buf_release(&out);
        return r;
    }
    ret->status = status;
    ret->body = kite_buf_detach(&out, &ret->len);
    return 0;
}

/* Closes the idle connections now and the busy ones when their requests are done. */
static void tls_reset(struct kite_client *base) {
    struct tls_client *c = (struct tls_client *)base;
    pthread_mutex_lock(&c->lock);
    c->gen++;
    for (size_t i = 0; i < c->npool; i++)
        if (!c->pool[i].busy) conn_close(&c->pool[i].conn);
    pthread_mutex_unlock(&c->lock);
}

/* ---- watch ---- */

struct watch_state {
    kite_watch_fn fn;
    kite_watch_line_fn line_fn; /* (instead of fn) */
    void *ud;
    struct kite_lines lines;
    struct kite_buf err_body; /* body of a non-200 answer, bounded */
};

static int watch_line(char *line, size_t len, void *ud) {
    struct watch_state *w = ud;
    if (w->line_fn) {
        int r = w->line_fn(line, len, w->ud);
        return r < 0 ? r : 0;
    }
    enum json_tokener_error e;
    json_object *ev = kite_json_parse(line, len, JSON_TOKENER_DEFAULT_DEPTH, &e, NULL);
    if (!ev || e != json_tokener_success) {
        json_object_put(ev);
        return -EBADMSG;
    }
    int r = w->fn(ev, w->ud);
    json_object_put(ev);
    return r < 0 ? r : 0;
}

static int watch_data(struct exchange *x, const char *p, size_t n) {
    struct watch_state *w = x->ud;
    if (x->status != 200) {
        kite_buf_append(&w->err_body, p, KITE_MIN(n, WATCH_MAX_ERROR_BODY - w->err_body.len));
        return 0;
    }
    return kite_lines_feed(&w->lines, p, n, watch_line, w);
}

static void eventfd_wake(void *ud) {
    uint64_t one = 1;
    ssize_t n = write(*(int *)ud, &one, sizeof(one));
    (void)n; /* a full counter is still readable: the wake-up is not lost */
}

static int tls_watch_any(struct kite_client *base, const char *path, kite_watch_fn fn, kite_watch_line_fn line_fn,
                         void *ud, struct kite_cancel *cancel) {
    struct tls_client *c = (struct tls_client *)base;
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) return -errno;
    if (!kite_cancel_set_wake(cancel, eventfd_wake, &efd)) {
        close(efd);
        return -ECANCELED;
    }
    struct watch_state w = {.fn = fn, .line_fn = line_fn, .ud = ud};
    kite_lines_init(&w.lines, KITE_WATCH_MAX_LINE);
    struct kite_buf req = {0};
    build_request(c, &req, "GET", path, NULL, NULL, 0);
    struct conn k = {.fd = -1};
    int r = conn_open(c, &k, now_ms() + c->connect_timeout_ms, efd);
    if (r == 0) r = conn_send(&k, req.p, req.len, now_ms() + c->timeout_ms, efd);
    if (r == 0) {
        atomic_fetch_add(&base->bytes_sent, req.len);
        struct exchange x = {.on_data = watch_data, .ud = &w};
        exchange_init(&x);
        bool keep_alive;
        /* no deadline: the server ends the stream (timeoutSeconds), or cancel does */
        r = exchange_read(&k, &x, -1, efd, &keep_alive);
        if (r == 0 && x.status != 200) r = kite_http_status_errno(x.status);
    }
    kite_cancel_set_wake(cancel, NULL, NULL);
    conn_close(&k);
    close(efd);
    atomic_fetch_add(&base->requests, 1);
    kite_buf_release(&req);
    kite_lines_release(&w.lines);
    kite_buf_release(&w.err_body);
    return r;
}

static int tls_watch(struct kite_client *base, const char *path, kite_watch_fn fn, void *ud,
                     struct kite_cancel *cancel) {
    return tls_watch_any(base, path, fn, NULL, ud, cancel);
}

static int tls_watch_lines(struct kite_client *base, const char *path, kite_watch_line_fn fn, void *ud,
                           struct kite_cancel *cancel) {
    return tls_watch_any(base, path, NULL, fn, ud, cancel);
}

static void tls_free(struct kite_client *base) {
    struct tls_client *c = (struct tls_client *)base;
    for (size_t i = 0; i < c->npool; i++) conn_close(&c->pool[i].conn);
    free(c->pool);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->lock);
    if (c->cred) gnutls_certificate_free_credentials(c->cred);
    for (size_t i = 0; i < c->n_retired; i++) gnutls_certificate_free_credentials(c->retired[i]);
    free(c->retired);
    pthread_mutex_destroy(&c->cred_lock);
    free(c->ca_pem);
    free(c->host);
    free(c->port);
    free(c->authority);
    free(c->prefix);
    if (c->auth_header) {
        explicit_bzero(c->auth_header, strlen(c->auth_header));
        free(c->auth_header);
    }
    free(c->user_agent);
    free(c->extra_headers);
    free(c);
}

static const struct kite_client_ops tls_ops = {tls_request, tls_watch, tls_reset, tls_free, tls_watch_lines};

/* "https://host:port/prefix" -> parts. IPv6 literals are bracketed ("https://[::1]:6443"). */
static int parse_server(struct tls_client *c, const char *url) {
    const char *p;
    if (kite_startswith(url, "https://")) {
        c->https = true;
        p = url + 8;
    } else if (kite_startswith(url, "http://")) {
        p = url + 7;
    } else {
        return -EINVAL;
    }
    size_t alen = strcspn(p, "/?#");
    if (alen == 0 || p[alen] == '?' || p[alen] == '#') return -EINVAL;
    c->authority = kite_strndup(p, alen);
    const char *a = c->authority, *port = NULL;
    if (a[0] == '[') {
        const char *end = strchr(a, ']');
        if (!end || (end[1] && end[1] != ':')) return -EINVAL;
        c->host = kite_strndup(a + 1, (size_t)(end - a - 1));
        if (end[1] == ':') port = end + 2;
    } else {
        const char *colon = strchr(a, ':');
        c->host = kite_strndup(a, colon ? (size_t)(colon - a) : strlen(a));
        if (colon) port = colon + 1;
    }
    if (port && (!*port || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5)) return -EINVAL;
    c->port = kite_strdup(port ? port : c->https ? "443" : "80");
    const char *path = p + alen;
    size_t plen = strlen(path);
    while (plen > 0 && path[plen - 1] == '/') plen--;
    c->prefix = kite_strndup(path, plen);
    unsigned char addr[16];
    c->host_is_ip = inet_pton(AF_INET, c->host, addr) == 1 || inet_pton(AF_INET6, c->host, addr) == 1;
    return *c->host ? 0 : -EINVAL;
}

/* Trust (the kubeconfig's CA, else the system's) and the client certificate, if any. */
static int make_cred(struct tls_client *c, const char *cert_pem, size_t cert_len, const char *key_pem, size_t key_len,
                     gnutls_certificate_credentials_t *ret) {
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0) return -ENOMEM;
    int r = 0;
    if (c->ca_pem) {
        gnutls_datum_t ca = {(unsigned char *)c->ca_pem, (unsigned)c->ca_len};
        if (gnutls_certificate_set_x509_trust_mem(cred, &ca, GNUTLS_X509_FMT_PEM) <= 0) r = -EINVAL;
    } else if (!c->insecure) {
        gnutls_certificate_set_x509_system_trust(cred); /* none found: every server is refused */
    }
    if (r == 0 && cert_pem && key_pem) {
        gnutls_datum_t cert = {(unsigned char *)cert_pem, (unsigned)cert_len};
        gnutls_datum_t key = {(unsigned char *)key_pem, (unsigned)key_len};
        if (gnutls_certificate_set_x509_key_mem(cred, &cert, &key, GNUTLS_X509_FMT_PEM) < 0) r = -EINVAL;
    }
    if (r < 0) {
        gnutls_certificate_free_credentials(cred);
        return r;
    }
    *ret = cred;
    return 0;
}

int kite_client_set_certificate(struct kite_client *base, const char *cert_pem, const char *key_pem) {
    if (base->ops != &tls_ops) return -ENOTSUP;
    struct tls_client *c = (struct tls_client *)base;
    if (!c->https) return -ENOTSUP;
    gnutls_certificate_credentials_t cred;
    int r = make_cred(c, cert_pem, strlen(cert_pem), key_pem, strlen(key_pem), &cred);
    if (r < 0) return r;
    pthread_mutex_lock(&c->cred_lock);
    c->retired = kite_realloc(c->retired, (c->n_retired + 1) * sizeof *c->retired);
    c->retired[c->n_retired++] = c->cred;
    c->cred = cred;
    pthread_mutex_unlock(&c->cred_lock);
    tls_reset(base); /* the next request handshakes with the new certificate */
    return 0;
}

int kite_client_set_extra_headers(struct kite_client *base, const char *headers) {
    if (base->ops != &tls_ops) return -ENOTSUP;
    struct tls_client *c = (struct tls_client *)base;
    char *copy = headers && *headers ? kite_strdup(headers) : NULL;
    pthread_mutex_lock(&c->lock);
    free(c->extra_headers);
    c->extra_headers = copy;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int kite_client_dial_tls(struct kite_client *base, const char *alpn, int64_t deadline_ms, int *ret_fd,
                        gnutls_session_t *ret_tls) {
    if (base->ops != &tls_ops) return -ENOTSUP;
    struct tls_client *c = (struct tls_client *)base;
    if (!c->https) return -ENOTSUP;
    struct conn k = {.fd = -1};
    int r = conn_open_alpn(c, &k, alpn, KITE_MIN(deadline_ms, now_ms() + c->connect_timeout_ms), -1);
    if (r < 0) return r;
    gnutls_datum_t got = {0};
    if (gnutls_alpn_get_selected_protocol(k.tls, &got) < 0 || got.size != strlen(alpn) ||
        memcmp(got.data, alpn, got.size)) {
        conn_close(&k);
        return -EPROTONOSUPPORT;
    }
    *ret_fd = k.fd;
    *ret_tls = k.tls;
    return 0;
}

const char *kite_client_authority(struct kite_client *base) {
    return base->ops == &tls_ops ? ((struct tls_client *)base)->authority : NULL;
}

const char *kite_client_path_prefix(struct kite_client *base) {
    return base->ops == &tls_ops ? ((struct tls_client *)base)->prefix : NULL;
}

int kite_client_new(const struct kite_kubeconfig *kc, const struct kite_client_options *o, struct kite_client **ret) {
    struct tls_client *c = kite_calloc(1, sizeof(*c));
    c->base.ops = &tls_ops;
    pthread_mutex_init(&c->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* pool_take's deadline is now_ms()'s */
    pthread_cond_init(&c->idle, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->cred_lock, NULL);
    c->npool = o && o->max_connections > 0 ? o->max_connections : 1;
    c->pool = kite_calloc(c->npool, sizeof *c->pool);
    for (size_t i = 0; i < c->npool; i++) c->pool[i].conn.fd = -1;
    c->insecure = kc->insecure;
    c->timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : 10000;
    c->connect_timeout_ms = o && o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000;
    c->user_agent = kite_strdup(o && o->user_agent ? o->user_agent : "kite");
    if (kc->token) c->auth_header = kite_asprintf("Authorization: Bearer %s\r\n", kc->token);
    int r = parse_server(c, kc->server ? kc->server : "");
    if (r < 0 || !c->https) goto out;
    if (kc->ca_pem) {
        c->ca_pem = kite_strndup(kc->ca_pem, kc->ca_len);
        c->ca_len = kc->ca_len;
    }
    r = make_cred(c, kc->cert_pem, kc->cert_len, kc->key_pem, kc->key_len, &c->cred);
out:
    if (r < 0) {
        tls_free(&c->base);
        return r;
    }
    *ret = &c->base;
    return 0;
}
