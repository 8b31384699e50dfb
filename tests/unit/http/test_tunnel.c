/* Upgrades: a handler's thread answers 101 and owns the connection as a tunnel
 * (kite_http_upgrade), the client side of kite_http_fetch becomes one after a 101
 * (kite_http_fetch_tunnel), bytes pass both ways (more than any buffer holds), bytes the
 * client sent right behind its request are not lost, and stopping the server ends an open
 * tunnel instead of waiting for it forever. */
#include "harness.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static char *cert, *key;
static atomic_int tunnels_closed;

/* The server side: echoes everything back until the client's end. */
static void *echo_thread(void *ud) {
    struct kite_http_req *r = ud;
    kite_http_add_header(r, "Upgrade", "echo");
    kite_http_add_header(r, "Connection", "Upgrade");
    struct kite_http_tunnel *t = NULL;
    if (kite_http_upgrade(r, &t) < 0) return NULL;
    char buf[8192];
    for (;;) {
        ssize_t n = kite_http_tunnel_read(t, buf, sizeof buf);
        if (n == -EAGAIN) {
            struct pollfd p = {.fd = kite_http_tunnel_fd(t), .events = POLLIN};
            if (!kite_http_tunnel_pending(t)) poll(&p, 1, 1000);
            continue;
        }
        if (n <= 0) break;
        if (kite_http_tunnel_write_all(t, buf, (size_t)n, 5000) < 0) break;
    }
    /* counted before the close: stop returns once the close is done, and the test reads the
     * count right after */
    atomic_fetch_add(&tunnels_closed, 1);
    kite_http_tunnel_close(t);
    return NULL;
}

static void handler(struct kite_http_req *r, void *ud) {
    if (strcmp(r->path, "/echo") == 0) {
        cr_assert_eq(kite_http_upgrade(r, NULL), -EDEADLK); /* never on a worker */
        pthread_t t;
        pthread_create(&t, NULL, echo_thread, r);
        pthread_detach(t);
    } else {
        kite_http_respond(r, 404, "text/plain", strdup("no"), 2);
    }
}

static void setup(void) {
    fx_certs();
    const char *orgs[] = {"system:masters"};
    cr_assert_eq(kite_pki_issue_client(fx.dir, KITE_PKI_KUBELET_CLIENT_CN, orgs, 1, &cert, &key), 0);
    struct kite_http_config cfg = {.handler = handler};
    fx_start(&cfg);
    atomic_store(&tunnels_closed, 0);
}

static void teardown(void) {
    fx_cleanup();
    free(cert);
    free(key);
}

TestSuite(tunnel, .init = setup, .fini = teardown, .timeout = 30);

static struct kite_http_tunnel *open_echo(void) {
    struct kite_http_fetch_options o = {.host = "127.0.0.1", .port = kite_http_port(fx.srv), .path = "/echo",
                                        .cert_pem = cert, .key_pem = key, .ca_pem = fx.ca_pem, .timeout_ms = 5000,
                                        .upgrade = true, .headers = "Upgrade: echo\r\n"};
    struct kite_http_fetch *f = NULL;
    int code = 0;
    cr_assert_eq(kite_http_fetch_open(&o, &f, &code), 0);
    cr_assert_eq(code, 101);
    cr_assert_str_eq(kite_http_fetch_header(f, "upgrade"), "echo");
    cr_assert_str_eq(kite_http_fetch_header(f, "Connection"), "Upgrade");
    struct kite_http_tunnel *t = kite_http_fetch_tunnel(f);
    cr_assert_not_null(t);
    return t;
}

/* Reads exactly n bytes (polling). */
static void read_n(struct kite_http_tunnel *t, char *out, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = kite_http_tunnel_read(t, out + got, n - got);
        if (k == -EAGAIN) {
            struct pollfd p = {.fd = kite_http_tunnel_fd(t), .events = POLLIN};
            if (!kite_http_tunnel_pending(t)) cr_assert_gt(poll(&p, 1, 5000), 0);
            continue;
        }
        cr_assert_gt(k, 0);
        got += (size_t)k;
    }
}

Test(tunnel, bytes_pass_both_ways) {
    struct kite_http_tunnel *t = open_echo();
    cr_assert_eq(kite_http_tunnel_write_all(t, "ping", 4, 5000), 0);
    char b[4];
    read_n(t, b, 4);
    cr_assert(memcmp(b, "ping", 4) == 0);
    /* far more than the socket buffers: written and read in turns, as a real peer does */
    size_t total = 4u << 20, sent = 0, got = 0;
    char *src = malloc(total), *dst = malloc(total);
    for (size_t i = 0; i < total; i++) src[i] = (char)(i * 7 + 3);
    while (got < total) {
        if (sent < total) {
            ssize_t k = kite_http_tunnel_write(t, src + sent, KITE_MIN(total - sent, (size_t)65536));
            if (k > 0) sent += (size_t)k;
            else cr_assert_eq(k, -EAGAIN);
        }
        ssize_t k = kite_http_tunnel_read(t, dst + got, total - got);
        if (k > 0) got += (size_t)k;
        else cr_assert_eq(k, -EAGAIN);
        if (k == -EAGAIN && !kite_http_tunnel_pending(t)) {
            struct pollfd p = {.fd = kite_http_tunnel_fd(t), .events = POLLIN | (sent < total ? POLLOUT : 0)};
            poll(&p, 1, 1000);
        }
    }
    cr_assert(memcmp(src, dst, total) == 0);
    free(src);
    free(dst);
    kite_http_tunnel_close(t);
    while (atomic_load(&tunnels_closed) < 1) usleep(1000);
}

Test(tunnel, bytes_behind_the_request_are_kept) {
    /* a client that does not wait for the 101 before sending */
    struct kite_buf out = {0};
    const char req[] = "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nearly-bytes";
    long n = fx_raw_tls(req, sizeof req - 1, &out, 1500, NULL, 0, NULL, 0);
    cr_assert_gt(n, 0);
    cr_assert(strstr(out.p, "HTTP/1.1 101 Switching Protocols\r\n") == out.p, "%s", out.p);
    cr_assert_not_null(strstr(out.p, "\r\n\r\nearly-bytes"), "%s", out.p);
    kite_buf_release(&out);
}

Test(tunnel, stop_ends_an_open_tunnel) {
    struct kite_http_tunnel *t = open_echo();
    cr_assert_eq(kite_http_tunnel_write_all(t, "x", 1, 5000), 0);
    char b[1];
    read_n(t, b, 1);
    fx_stop(); /* returns: the tunnel's socket is shut down, its owner closes it */
    cr_assert_eq(atomic_load(&tunnels_closed), 1);
    char c[16];
    ssize_t k;
    struct pollfd p = {.fd = kite_http_tunnel_fd(t), .events = POLLIN};
    do {
        poll(&p, 1, 2000);
        k = kite_http_tunnel_read(t, c, sizeof c);
    } while (k == -EAGAIN);
    cr_assert_leq(k, 0);
    kite_http_tunnel_close(t);
}

/* Bytes written with more = true (a WebSocket frame's header) go in the record of the next
 * write: the peer reads header and payload as one record (one read), and a stream of such
 * frames, far more than the socket buffers hold (writes that would block included), arrives
 * whole and in order. */
Test(tunnel, held_bytes_go_with_the_next_write) {
    struct kite_http_tunnel *t = open_echo();
    cr_assert_eq(kite_http_tunnel_write_more(t, "HDR!", 4, true), 4);
    cr_assert_eq(kite_http_tunnel_write_more(t, "payload", 7, false), 7);
    char b[64];
    ssize_t k;
    while ((k = kite_http_tunnel_read(t, b, sizeof b)) == -EAGAIN) {
        struct pollfd p = {.fd = kite_http_tunnel_fd(t), .events = POLLIN};
        if (!kite_http_tunnel_pending(t)) cr_assert_gt(poll(&p, 1, 5000), 0);
    }
    cr_assert_eq(k, 11, "one record of 11 bytes, read %zd", k); /* the echo's one read, one write */
    cr_assert(memcmp(b, "HDR!payload", 11) == 0);
    /* 4 MiB of 2-byte headers each followed by 1022 bytes */
    size_t frames = 4096, total = frames * 1024, got = 0, f = 0, part = 0;
    char *want = malloc(total), *dst = malloc(total);
    for (size_t i = 0; i < total; i++) want[i] = (char)(i * 13 + 5);
    while (got < total) {
        if (f < frames) {
            const char *p = want + f * 1024;
            ssize_t w = part == 0 ? kite_http_tunnel_write_more(t, p, 2, true)
                                  : kite_http_tunnel_write_more(t, p + part, 1024 - part, false);
            if (w > 0) {
                part += (size_t)w;
                if (part == 1024) {
                    part = 0;
                    f++;
                }
            } else {
                cr_assert_eq(w, -EAGAIN);
            }
        }
        k = kite_http_tunnel_read(t, dst + got, total - got);
        if (k > 0) got += (size_t)k;
        else cr_assert_eq(k, -EAGAIN);
        if (k == -EAGAIN && !kite_http_tunnel_pending(t)) {
            struct pollfd p = {.fd = kite_http_tunnel_fd(t), .events = POLLIN | (f < frames ? POLLOUT : 0)};
            poll(&p, 1, 1000);
        }
    }
    cr_assert(memcmp(want, dst, total) == 0);
    free(want);
    free(dst);
    kite_http_tunnel_close(t);
    while (atomic_load(&tunnels_closed) < 1) usleep(1000);
}
