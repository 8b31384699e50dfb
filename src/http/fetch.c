/* kite http fetch: one streaming HTTPS GET from inside a server (the API server reading a node
 * agent's log endpoint), with a client certificate.
 *
 * Blocking by design: its caller is a thread of its own per proxied stream, so a slow agent
 * holds nothing but that thread. Connect, TLS handshake and the answer's head are bounded by
 * the timeout; the body may take as long as it takes (a followed log), and
 * kite_http_fetch_cancel() from another thread shuts the socket down to end a blocked read.
 * Bodies are decoded by http-parser (chunked, Content-Length or up to the close). */
#include "http/http-internal.h"

#include "base/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <http_parser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define FETCH_MAX_HEAD (64u * 1024)

struct kite_http_fetch {
    int fd;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
    http_parser hp;
    http_parser_settings hs;
    bool head_done, done;
    size_t head_bytes;
    struct kite_buf body; /* decoded body bytes not yet read, from body_off */
    size_t body_off;
    pthread_mutex_t lock; /* a cancel racing the close */
    bool closed;
    struct kite_buf hdrs;  /* the answer's headers: "name: value" NUL-terminated, one after the other */
    bool in_value;
};

static int on_field(http_parser *hp, const char *at, size_t n) {
    struct kite_http_fetch *f = hp->data;
    f->head_bytes += n;
    if (f->in_value) kite_buf_append(&f->hdrs, "", 1);
    f->in_value = false;
    kite_buf_append(&f->hdrs, at, n);
    return f->head_bytes > FETCH_MAX_HEAD ? -1 : 0;
}
static int on_value(http_parser *hp, const char *at, size_t n) {
    struct kite_http_fetch *f = hp->data;
    f->head_bytes += n;
    if (!f->in_value) kite_buf_puts(&f->hdrs, ": ");
    f->in_value = true;
    kite_buf_append(&f->hdrs, at, n);
    return f->head_bytes > FETCH_MAX_HEAD ? -1 : 0;
}
static int on_headers_complete(http_parser *hp) {
    struct kite_http_fetch *f = hp->data;
    if (f->in_value) kite_buf_append(&f->hdrs, "", 1);
    f->in_value = false;
    f->head_done = true;
    return 0;
}
static int on_body(http_parser *hp, const char *at, size_t n) {
    kite_buf_append(&((struct kite_http_fetch *)hp->data)->body, at, n);
    return 0;
}
static int on_message_complete(http_parser *hp) {
    ((struct kite_http_fetch *)hp->data)->done = true;
    return 0;
}

static void set_timeouts(int fd, int timeout_ms) {
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A connected blocking socket whose sends and receives time out after timeout_ms, or -errno. */
static int connect_to(const char *host, uint16_t port, int timeout_ms) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) return -EHOSTUNREACH;
    int err = -ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) continue;
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen), e = r == 0 ? 0 : errno;
        if (r < 0 && e == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            socklen_t sl = sizeof e;
            r = poll(&p, 1, timeout_ms);
            if (r == 0) e = ETIMEDOUT;
            else if (r < 0) e = errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0) e = errno;
        }
        if (e == 0) {
            int one = 1;
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            set_timeouts(fd, timeout_ms);
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            freeaddrinfo(res);
            return fd;
        }
        err = -e;
        close(fd);
    }
    freeaddrinfo(res);
    return err;
}

/* Receives and parses more of the answer. 0, or -errno (-ETIMEDOUT: nothing within the
 * socket's timeout; -ECONNRESET: closed before the answer was complete). */
static int pump(struct kite_http_fetch *f) {
    char buf[16384];
    ssize_t n;
    /* GNUTLS_E_AGAIN is a timeout only when the socket said so (SO_RCVTIMEO ran out): GnuTLS
     * also returns it after a TLS 1.3 post-handshake message with no data (the NewSessionTicket
     * that Go and OpenSSL servers send), and then the answer is still to come */
    for (;;) {
        errno = 0;
        n = gnutls_record_recv(f->tls, buf, sizeof buf);
        if (n == GNUTLS_E_INTERRUPTED || (n == GNUTLS_E_AGAIN && errno != EAGAIN && errno != EWOULDBLOCK)) continue;
        break;
    }
    if (n == GNUTLS_E_PREMATURE_TERMINATION) n = 0; /* a close without close_notify is an end too */
    if (n == GNUTLS_E_AGAIN) return -ETIMEDOUT;
    if (n < 0) return -ECONNRESET;
    size_t used = http_parser_execute(&f->hp, &f->hs, buf, (size_t)n); /* n == 0 tells the parser of the close */
    if (f->hp.upgrade) {
        /* 101: what follows the head is the upgraded protocol's (kite_http_fetch_tunnel) */
        if (used < (size_t)n) kite_buf_append(&f->body, buf + used, (size_t)n - used);
        f->done = true;
        return 0;
    }
    if (f->hp.http_errno != HPE_OK) return -EPROTO;
    if (n == 0 && !f->done) return -ECONNRESET;
    return 0;
}

int kite_http_fetch_open(const struct kite_http_fetch_options *o, struct kite_http_fetch **ret, int *ret_status) {
    int timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    struct kite_http_fetch *f = kite_calloc(1, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    f->fd = -1;
    http_parser_init(&f->hp, HTTP_RESPONSE);
    f->hp.data = f;
    f->hs.on_header_field = on_field;
    f->hs.on_header_value = on_value;
    f->hs.on_headers_complete = on_headers_complete;
    f->hs.on_body = on_body;
    f->hs.on_message_complete = on_message_complete;
    int r = gnutls_certificate_allocate_credentials(&f->cred) < 0 ? -ENOMEM : 0;
    if (r == 0 && o->ca_pem) {
        gnutls_datum_t ca = {(unsigned char *)o->ca_pem, (unsigned)strlen(o->ca_pem)};
        if (gnutls_certificate_set_x509_trust_mem(f->cred, &ca, GNUTLS_X509_FMT_PEM) <= 0) r = -EINVAL;
    }
    if (r == 0 && o->cert_pem && o->key_pem) {
        gnutls_datum_t cert = {(unsigned char *)o->cert_pem, (unsigned)strlen(o->cert_pem)},
                       key = {(unsigned char *)o->key_pem, (unsigned)strlen(o->key_pem)};
        if (gnutls_certificate_set_x509_key_mem(f->cred, &cert, &key, GNUTLS_X509_FMT_PEM) < 0) r = -EINVAL;
    }
    if (r == 0 && (f->fd = connect_to(o->host, o->port, timeout_ms)) < 0) r = f->fd;
    if (r == 0 && (gnutls_init(&f->tls, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL) < 0 ||
                   gnutls_set_default_priority(f->tls) < 0 ||
                   gnutls_credentials_set(f->tls, GNUTLS_CRD_CERTIFICATE, f->cred) < 0))
        r = -EPROTO;
    if (r == 0) {
        if (o->ca_pem) gnutls_session_set_verify_cert(f->tls, o->host, 0);
        gnutls_transport_set_int(f->tls, f->fd);
        int h;
        do h = gnutls_handshake(f->tls);
        while (h < 0 && !gnutls_error_is_fatal(h) && h != GNUTLS_E_AGAIN);
        if (h < 0) r = h == GNUTLS_E_AGAIN ? -ETIMEDOUT : -EPROTO;
    }
    if (r == 0) {
        struct kite_buf q = {0};
        bool v6 = strchr(o->host, ':');
        kite_buf_printf(&q, "GET %s HTTP/1.1\r\nHost: %s%s%s:%u\r\nUser-Agent: kite\r\nAccept: */*\r\nConnection: %s\r\n%s\r\n",
                        o->path, v6 ? "[" : "", o->host, v6 ? "]" : "", o->port, o->upgrade ? "Upgrade" : "close",
                        o->headers ? o->headers : "");
        for (size_t off = 0; r == 0 && off < q.len;) {
            ssize_t w = gnutls_record_send(f->tls, q.p + off, q.len - off);
            if (w == GNUTLS_E_INTERRUPTED) continue;
            if (w < 0) r = w == GNUTLS_E_AGAIN ? -ETIMEDOUT : -ECONNRESET;
            else off += (size_t)w;
        }
        kite_buf_release(&q);
    }
    while (r == 0 && !f->head_done) r = pump(f);
    if (r < 0) {
        kite_http_fetch_close(f);
        return r;
    }
    /* the head arrived in time: the body may take as long as it takes, unless bounded */
    set_timeouts(f->fd, o->body_timeout_ms > 0 ? o->body_timeout_ms : 0);
    *ret_status = f->hp.status_code;
    *ret = f;
    return 0;
}

const char *kite_http_fetch_header(struct kite_http_fetch *f, const char *name) {
    size_t nl = strlen(name);
    for (size_t off = 0; f->hdrs.p && off < f->hdrs.len;) {
        const char *p = f->hdrs.p + off;
        size_t len = strlen(p);
        if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ') v++;
            return v;
        }
        off += len + 1;
    }
    return NULL;
}

static bool fetch_pending(void *owner) { (void)owner; return false; }

static void fetch_release(void *owner) { kite_http_fetch_close(owner); }

struct kite_http_tunnel *kite_http_fetch_tunnel(struct kite_http_fetch *f) {
    if (f->hp.status_code != 101 || !f->hp.upgrade) return NULL;
    fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) | O_NONBLOCK);
    struct tunnel_owner o = {fetch_pending, NULL, fetch_release, f};
    struct kite_http_tunnel *t = kite_http_tunnel_new(f->fd, f->tls, f->body.p + f->body_off, f->body.len - f->body_off, &o);
    f->body.len = f->body_off = 0;
    return t;
}

ssize_t kite_http_fetch_read(struct kite_http_fetch *f, char *buf, size_t n) {
    while (f->body_off >= f->body.len) {
        f->body.len = f->body_off = 0;
        if (f->done) return 0;
        int r = pump(f);
        if (r < 0) return r;
    }
    size_t k = KITE_MIN(n, f->body.len - f->body_off);
    memcpy(buf, f->body.p + f->body_off, k);
    f->body_off += k;
    return (ssize_t)k;
}

void kite_http_fetch_cancel(struct kite_http_fetch *f) {
    pthread_mutex_lock(&f->lock);
    if (!f->closed && f->fd >= 0) shutdown(f->fd, SHUT_RDWR);
    f->closed = true;
    pthread_mutex_unlock(&f->lock);
}

void kite_http_fetch_close(struct kite_http_fetch *f) {
    if (!f) return;
    pthread_mutex_lock(&f->lock);
    if (f->tls) gnutls_deinit(f->tls);
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    f->closed = true;
    pthread_mutex_unlock(&f->lock);
    if (f->cred) gnutls_certificate_free_credentials(f->cred);
    kite_buf_release(&f->body);
    kite_buf_release(&f->hdrs);
    pthread_mutex_destroy(&f->lock);
    free(f);
}
