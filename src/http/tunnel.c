/* kite http tunnels: a connection after "101 Switching Protocols" as a byte stream owned by
 * one thread (kite_http_upgrade on the server side, kite_http_fetch_tunnel on the client
 * side), and the copy between two of them (the API server between a client and a node agent).
 *
 * The tunnel reads and writes the TLS session without blocking; its owner polls. A TLS write
 * that would block has queued its record inside GnuTLS: the next write completes it (GnuTLS
 * is called with NULL, 0 as it asks) and reports the bytes of the first call. */
#include "http/http-internal.h"

#include <poll.h>
#include <sys/socket.h>

#define TUNNEL_RECORD (16u * 1024) /* bytes per TLS record written */

struct kite_http_tunnel {
    int fd;
    gnutls_session_t tls;
    char *pre;                /* input read before the hand-over, from pre_off */
    size_t pre_len, pre_off;
    size_t send_pending;      /* bytes of a write that returned -EAGAIN */
    uint8_t stage[32];        /* bytes held for the next write's record (kite_http_tunnel_write_more) */
    size_t stage_len;
    char *combo;              /* that record: stage + the front of the next write */
    size_t combo_len;
    struct tunnel_owner o;
};

struct kite_http_tunnel *kite_http_tunnel_new(int fd, gnutls_session_t tls, const char *pre, size_t pre_len,
                                    const struct tunnel_owner *o) {
    struct kite_http_tunnel *t = kite_calloc(1, sizeof *t);
    t->fd = fd;
    t->tls = tls;
    t->o = *o;
    if (pre_len) {
        t->pre = kite_malloc(pre_len);
        memcpy(t->pre, pre, pre_len);
        t->pre_len = pre_len;
    }
    return t;
}

int kite_http_tunnel_fd(struct kite_http_tunnel *t) { return t->fd; }

bool kite_http_tunnel_pending(struct kite_http_tunnel *t) {
    return t->pre_off < t->pre_len || gnutls_record_check_pending(t->tls) > 0 || (t->o.pending && t->o.pending(t->o.owner));
}

ssize_t kite_http_tunnel_read(struct kite_http_tunnel *t, void *buf, size_t n) {
    if (t->pre_off < t->pre_len) {
        size_t k = KITE_MIN(n, t->pre_len - t->pre_off);
        memcpy(buf, t->pre + t->pre_off, k);
        t->pre_off += k;
        if (t->pre_off == t->pre_len) {
            free(t->pre);
            t->pre = NULL;
            t->pre_len = t->pre_off = 0;
        }
        return (ssize_t)k;
    }
    ssize_t k;
    do k = gnutls_record_recv(t->tls, buf, n);
    while (k == GNUTLS_E_INTERRUPTED);
    if (k >= 0) return k;
    if (k == GNUTLS_E_AGAIN) return t->o.eof && t->o.eof(t->o.owner) ? 0 : -EAGAIN;
    if (k == GNUTLS_E_PREMATURE_TERMINATION) return 0; /* a close without close_notify ends it too */
    return -ECONNRESET;
}

ssize_t kite_http_tunnel_write(struct kite_http_tunnel *t, const void *buf, size_t n) {
    ssize_t k;
    if (t->send_pending) {
        do k = gnutls_record_send(t->tls, NULL, 0);
        while (k == GNUTLS_E_INTERRUPTED);
    } else {
        if (n > TUNNEL_RECORD) n = TUNNEL_RECORD;
        if (!n) return 0;
        do k = gnutls_record_send(t->tls, buf, n);
        while (k == GNUTLS_E_INTERRUPTED);
        if (k == GNUTLS_E_AGAIN) t->send_pending = n;
    }
    if (k == GNUTLS_E_AGAIN) return -EAGAIN;
    t->send_pending = 0;
    if (k < 0) return -ECONNRESET;
    return k;
}

ssize_t kite_http_tunnel_write_more(struct kite_http_tunnel *t, const void *buf, size_t n, bool more) {
    if (!t->send_pending && more && t->stage_len + n <= sizeof t->stage) {
        memcpy(t->stage + t->stage_len, buf, n);
        t->stage_len += n;
        return (ssize_t)n;
    }
    if (!t->stage_len) return kite_http_tunnel_write(t, buf, n);
    if (!t->send_pending) { /* (a repeat after -EAGAIN completes the record made before) */
        if (!t->combo) t->combo = kite_malloc(TUNNEL_RECORD);
        size_t take = KITE_MIN(n, TUNNEL_RECORD - t->stage_len);
        memcpy(t->combo, t->stage, t->stage_len);
        memcpy(t->combo + t->stage_len, buf, take);
        t->combo_len = t->stage_len + take;
    }
    ssize_t k = kite_http_tunnel_write(t, t->combo, t->combo_len);
    if (k < 0) return k;
    /* a record is written whole: the held bytes went, and k - stage_len of buf's */
    ssize_t own = k - (ssize_t)t->stage_len;
    t->stage_len = 0;
    return own;
}

int kite_http_tunnel_write_all(struct kite_http_tunnel *t, const void *buf, size_t n, int timeout_ms) {
    const char *p = buf;
    int64_t deadline = http_now_ns() + (int64_t)timeout_ms * KITE_NS_PER_MS;
    while (n || t->send_pending) {
        ssize_t k = kite_http_tunnel_write(t, p, n);
        if (k == -EAGAIN) {
            int64_t left = (deadline - http_now_ns()) / KITE_NS_PER_MS;
            if (left <= 0) return -ETIMEDOUT;
            struct pollfd pf = {.fd = t->fd, .events = POLLOUT};
            if (poll(&pf, 1, (int)left) < 0 && errno != EINTR) return -errno;
            continue;
        }
        if (k < 0) return (int)k;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

void kite_http_tunnel_shutdown(struct kite_http_tunnel *t) { shutdown(t->fd, SHUT_RDWR); }

void kite_http_tunnel_close(struct kite_http_tunnel *t) {
    if (!t) return;
    free(t->pre);
    free(t->combo);
    t->o.release(t->o.owner);
    free(t);
}

/* ---- splice ---- */

struct dir {
    struct kite_http_tunnel *from, *to;
    char *buf;
    size_t cap, off, len;
    bool eof;
    uint64_t moved;
};

/* Reads from d->from into the free room of d's buffer. 1 moved bytes, 0 nothing now, -1 the
 * end (eof set) or an error. */
static int dir_read(struct dir *d) {
    if (d->eof) return 0;
    if (d->off == d->len) d->off = d->len = 0;
    if (d->len == d->cap) return 0;
    ssize_t k = kite_http_tunnel_read(d->from, d->buf + d->len, d->cap - d->len);
    if (k == -EAGAIN) return 0;
    if (k <= 0) {
        d->eof = true;
        return -1;
    }
    d->len += (size_t)k;
    return 1;
}

/* Writes what d holds. 1 moved bytes, 0 nothing now, -1 error. The bytes of a write that
 * would block stay at d->off, where the repeat finds them. */
static int dir_write(struct dir *d) {
    if (d->off == d->len && !d->to->send_pending) return 0;
    ssize_t k = kite_http_tunnel_write(d->to, d->buf + d->off, d->len - d->off);
    if (k == -EAGAIN) return 0;
    if (k < 0) return -1;
    d->off += (size_t)k;
    d->moved += (uint64_t)k;
    if (d->off == d->len && !d->to->send_pending) d->off = d->len = 0;
    return k > 0;
}

int kite_http_tunnel_splice(struct kite_http_tunnel *a, struct kite_http_tunnel *b, int idle_ms, size_t buf_bytes,
                            uint64_t *a_to_b, uint64_t *b_to_a) {
    struct dir d[2] = {{.from = a, .to = b, .cap = buf_bytes}, {.from = b, .to = a, .cap = buf_bytes}};
    d[0].buf = kite_malloc(buf_bytes);
    d[1].buf = kite_malloc(buf_bytes);
    int64_t last = http_now_ns();
    int rc = 0;
    for (;;) {
        bool moved = false, broken = false;
        for (int i = 0; i < 2; i++) {
            int r;
            while ((r = dir_write(&d[i])) > 0) moved = true;
            if (r < 0) broken = true;
            while ((r = dir_read(&d[i])) > 0) {
                moved = true;
                if (dir_write(&d[i]) < 0) broken = true;
            }
        }
        if (broken) {
            rc = 0;
            break;
        }
        /* one side ended: what it sent before is delivered, then the tunnel ends */
        bool ended = false;
        for (int i = 0; i < 2; i++)
            if (d[i].eof && d[i].off == d[i].len && !d[i].to->send_pending) ended = true;
        if (ended) break;
        int64_t now = http_now_ns();
        if (moved) last = now;
        if (moved) continue;
        int timeout = -1;
        if (idle_ms > 0) {
            int64_t left = (last + (int64_t)idle_ms * KITE_NS_PER_MS - now) / KITE_NS_PER_MS;
            if (left <= 0) {
                rc = -ETIMEDOUT;
                break;
            }
            timeout = (int)KITE_MIN(left, INT64_C(1000) * 3600);
        }
        struct pollfd p[2];
        for (int i = 0; i < 2; i++) {
            /* side i is read by d[i] and written by d[1-i] */
            struct dir *rd = &d[i], *wr = &d[1 - i];
            p[i].fd = rd->from->fd;
            p[i].events = 0;
            if (!rd->eof && rd->len < rd->cap) p[i].events |= POLLIN;
            if (wr->off < wr->len || wr->to->send_pending) p[i].events |= POLLOUT;
            p[i].revents = 0;
        }
        int n = poll(p, 2, timeout);
        if (n < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        for (int i = 0; i < 2; i++)
            if ((p[i].revents & (POLLERR | POLLNVAL)) || ((p[i].revents & POLLHUP) && !(p[i].events & POLLIN)))
                broken = true;
        if (broken) break;
    }
    if (a_to_b) *a_to_b += d[0].moved;
    if (b_to_a) *b_to_a += d[1].moved;
    free(d[0].buf);
    free(d[1].buf);
    return rc;
}
