/* The HTTP/1.1 transport against a scripted peer: a server thread on 127.0.0.1 (TLS with
 * certificates from pki, or plain) that reads each request and answers as the test says,
 * byte for byte, so keep-alive, stale connections, framing, limits, certificate checks and
 * watch streams are each exercised on the wire. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "client/client.h"
#include "client/kubeconfig.h"
#include "pki/pki.h"

struct peer;
struct pconn {
    int fd;
    gnutls_session_t tls;
};
/* Answers one request (head and body in req). Returns 0 to keep the connection, 1 to close it. */
typedef int (*peer_handler)(struct peer *p, struct pconn *c, const char *req, size_t len);

struct peer {
    int lfd;
    uint16_t port;
    bool tls;
    gnutls_certificate_credentials_t cred;
    peer_handler handle;
    pthread_t thread;
    bool threaded;            /* each connection served on a thread of its own (peer_start_threaded) */
    atomic_int accepts, requests, live; /* live: connection threads still running */
    atomic_int waiting;       /* for h_together: requests come */
    char received[16384];     /* every request's bytes, in order (the first 16 KiB) */
    size_t received_len;      /* all of them */
    char client_dn[256];      /* the client certificate's subject, if one was sent */
    int iarg;                 /* for handlers */
};

static char dir[64], *ca_pem, *cert_pem, *key_pem;

static void certs_setup(void) {
    strcpy(dir, "/tmp/kite-client-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(kite_pki_ensure(dir, NULL, 0), 0);
    char *p = kite_asprintf("%s/ca.crt", dir);
    cr_assert_eq(kite_pki_read_file(p, &ca_pem), 0);
    free(p);
    const char *orgs[] = {"system:nodes"};
    cr_assert_eq(kite_pki_issue_client(dir, "system:node:n1", orgs, 1, &cert_pem, &key_pem), 0);
}

static void certs_teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(ca_pem);
    free(cert_pem);
    free(key_pem);
}

TestSuite(transport, .init = certs_setup, .fini = certs_teardown, .timeout = 30);

static ssize_t pc_write(struct pconn *c, const void *p, size_t n) {
    const char *s = p;
    size_t off = 0;
    while (off < n) {
        ssize_t w = c->tls ? gnutls_record_send(c->tls, s + off, n - off) : send(c->fd, s + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && c->tls && (w == GNUTLS_E_AGAIN || w == GNUTLS_E_INTERRUPTED)) continue;
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return (ssize_t)n;
}
static void pc_puts(struct pconn *c, const char *s) { pc_write(c, s, strlen(s)); }

static void pc_chunk(struct pconn *c, const char *s) {
    char head[32];
    snprintf(head, sizeof(head), "%zx\r\n", strlen(s));
    pc_puts(c, head);
    pc_puts(c, s);
    pc_puts(c, "\r\n");
}

static ssize_t pc_read(struct pconn *c, char *buf, size_t n) {
    for (;;) {
        ssize_t r = c->tls ? gnutls_record_recv(c->tls, buf, n) : recv(c->fd, buf, n, 0);
        if (c->tls && (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)) continue;
        return r < 0 ? -1 : r;
    }
}

/* Reads one request (head + Content-Length body) into b. false on EOF/error. */
static bool read_request(struct pconn *c, struct kite_buf *b) {
    char buf[4096];
    for (;;) {
        char *end = b->p ? strstr(b->p, "\r\n\r\n") : NULL;
        if (end) {
            size_t head = (size_t)(end - b->p) + 4, body = 0;
            const char *cl = strcasestr(b->p, "\r\nContent-Length:");
            if (cl && cl < end) body = strtoul(cl + 17, NULL, 10);
            if (b->len >= head + body) return true;
        }
        ssize_t n = pc_read(c, buf, sizeof(buf));
        if (n <= 0) return false;
        kite_buf_append(b, buf, (size_t)n);
    }
}

/* Serves one accepted connection until it closes. */
static void serve(struct peer *p, int fd) {
    struct pconn c = {.fd = fd};
    if (p->tls) {
        gnutls_init(&c.tls, GNUTLS_SERVER | GNUTLS_NO_SIGNAL);
        gnutls_set_default_priority(c.tls);
        gnutls_credentials_set(c.tls, GNUTLS_CRD_CERTIFICATE, p->cred);
        gnutls_certificate_server_set_request(c.tls, GNUTLS_CERT_REQUEST);
        gnutls_transport_set_int(c.tls, fd);
        int r;
        do r = gnutls_handshake(c.tls);
        while (r < 0 && !gnutls_error_is_fatal(r));
        if (r < 0) goto next;
        unsigned n = 0;
        const gnutls_datum_t *chain = gnutls_certificate_get_peers(c.tls, &n);
        if (chain && n > 0) {
            gnutls_x509_crt_t crt;
            gnutls_x509_crt_init(&crt);
            gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER);
            size_t len = sizeof(p->client_dn);
            gnutls_x509_crt_get_dn(crt, p->client_dn, &len);
            gnutls_x509_crt_deinit(crt);
        }
    }
    for (;;) {
        struct kite_buf req = {0};
        if (!read_request(&c, &req)) {
            kite_buf_release(&req);
            break;
        }
        p->requests++;
        if (!p->threaded) {
            if (p->received_len + req.len < sizeof(p->received))
                memcpy(p->received + p->received_len, req.p, req.len);
            p->received_len += req.len;
        }
        int close_it = p->handle(p, &c, req.p, req.len);
        kite_buf_release(&req);
        if (close_it) break;
    }
next:
    if (c.tls) gnutls_deinit(c.tls);
    close(fd);
}

struct conn_arg {
    struct peer *p;
    int fd;
};

static void *conn_main(void *ud) {
    struct conn_arg *a = ud;
    serve(a->p, a->fd);
    a->p->live--;
    free(a);
    return NULL;
}

static void *peer_main(void *ud) {
    struct peer *p = ud;
    for (;;) {
        int fd = accept(p->lfd, NULL, NULL);
        if (fd < 0) return NULL; /* the listener was shut down */
        p->accepts++;
        if (!p->threaded) {
            serve(p, fd);
            continue;
        }
        struct conn_arg *a = kite_calloc(1, sizeof *a);
        *a = (struct conn_arg){p, fd};
        pthread_t t;
        p->live++;
        cr_assert_eq(pthread_create(&t, NULL, conn_main, a), 0);
        pthread_detach(t);
    }
}

static void peer_start_as(struct peer *p, bool tls, peer_handler h, bool threaded, int iarg) {
    memset(p, 0, sizeof(*p));
    p->threaded = threaded;
    p->iarg = iarg;
    p->tls = tls;
    p->handle = h;
    if (tls) {
        gnutls_certificate_allocate_credentials(&p->cred);
        char *crt = kite_asprintf("%s/server.crt", dir), *key = kite_asprintf("%s/server.key", dir);
        cr_assert_geq(gnutls_certificate_set_x509_key_file(p->cred, crt, key, GNUTLS_X509_FMT_PEM), 0);
        gnutls_datum_t ca = {(unsigned char *)ca_pem, (unsigned)strlen(ca_pem)};
        gnutls_certificate_set_x509_trust_mem(p->cred, &ca, GNUTLS_X509_FMT_PEM);
        free(crt);
        free(key);
    }
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(p->lfd, 16), 0);
    socklen_t len = sizeof(a);
    getsockname(p->lfd, (struct sockaddr *)&a, &len);
    p->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&p->thread, NULL, peer_main, p), 0);
}

static void peer_start(struct peer *p, bool tls, peer_handler h) { peer_start_as(p, tls, h, false, 0); }

static void peer_stop(struct peer *p) {
    shutdown(p->lfd, SHUT_RDWR);
    pthread_join(p->thread, NULL);
    while (p->live) usleep(1000); /* connection threads end when their clients hang up */
    close(p->lfd);
    if (p->cred) gnutls_certificate_free_credentials(p->cred);
}

static struct kite_client *client_for(struct peer *p, const char *host, const char *ca, const char *token,
                                      long timeout_ms) {
    char url[128];
    snprintf(url, sizeof(url), "%s://%s:%u", p->tls ? "https" : "http", host, p->port);
    struct kite_kubeconfig kc = {.server = url, .token = (char *)token};
    if (p->tls) {
        kc.ca_pem = (char *)ca;
        kc.ca_len = strlen(ca);
        kc.cert_pem = cert_pem;
        kc.cert_len = strlen(cert_pem);
        kc.key_pem = key_pem;
        kc.key_len = strlen(key_pem);
    }
    struct kite_client_options o = {.timeout_ms = timeout_ms};
    struct kite_client *c = NULL;
    cr_assert_eq(kite_client_new(&kc, &o, &c), 0);
    return c;
}

static int get(struct kite_client *c, const char *path, long *status, char **body) {
    struct kite_response r = {0};
    int e = kite_client_request(c, "GET", path, NULL, NULL, 0, &r);
    if (e == 0) {
        *status = r.status;
        *body = r.body;
    }
    return e;
}

/* One GET of /x from a fresh peer running h, stopped again before returning (its counters
 * stay in *p). Returns the transport's result; *body (may be NULL) gets the answer's body. */
static int one_get(struct peer *p, bool tls, peer_handler h, const char *host, long timeout_ms, char **body) {
    peer_start(p, tls, h);
    struct kite_client *c = client_for(p, host, ca_pem, NULL, timeout_ms);
    long st;
    char *b = NULL;
    int r = get(c, "/x", &st, &b);
    kite_client_free(c);
    peer_stop(p);
    if (body) *body = b;
    else free(b);
    return r;
}

/* ---- handlers ---- */

static int h_ok(struct peer *p, struct pconn *c, const char *req, size_t len) {
    char body[64];
    int n = snprintf(body, sizeof(body), "{\"n\":%d}", p->requests);
    char head[128];
    snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", n);
    pc_puts(c, head);
    pc_puts(c, body);
    return 0;
}

/* Answers, then closes without saying so (as a server's idle timeout does later). */
static int h_ok_then_drop(struct peer *p, struct pconn *c, const char *req, size_t len) {
    h_ok(p, c, req, len);
    return 1;
}

static int h_conn_close(struct peer *p, struct pconn *c, const char *req, size_t len) {
    pc_puts(c, "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}");
    return 1;
}

static int h_until_eof(struct peer *p, struct pconn *c, const char *req, size_t len) {
    pc_puts(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of ");
    pc_puts(c, "this is the body");
    return 1;
}

static int h_chunked(struct peer *p, struct pconn *c, const char *req, size_t len) {
    pc_puts(c, "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    pc_puts(c, "a\r\n0123456789\r\n0\r\n\r\n");
    return 0;
}

static int h_slow(struct peer *p, struct pconn *c, const char *req, size_t len) {
    usleep(600 * 1000);
    return h_ok(p, c, req, len);
}

static int h_garbage(struct peer *p, struct pconn *c, const char *req, size_t len) {
    pc_puts(c, "HTTP/1.1 2x0 What\r\n\r\n");
    return 1;
}

static int h_huge(struct peer *p, struct pconn *c, const char *req, size_t len) {
    char head[128];
    snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %u\r\n\r\n", KITE_CLIENT_MAX_BODY + 1);
    pc_puts(c, head);
    static char block[1 << 16];
    memset(block, 'x', sizeof(block));
    for (size_t sent = 0; sent <= KITE_CLIENT_MAX_BODY; sent += sizeof(block))
        if (pc_write(c, block, sizeof(block)) < 0) break; /* the client hung up */
    return 1;
}

/* ---- plain requests ---- */

Test(transport, keep_alive_serves_every_request_on_one_connection) {
    struct peer p;
    peer_start(&p, true, h_ok);
    struct kite_client *c = client_for(&p, "127.0.0.1", ca_pem, "tok", 0);
    for (int i = 1; i <= 3; i++) {
        long st = 0;
        char *body = NULL, want[32];
        cr_assert_eq(get(c, "/api/v1/nodes/n1", &st, &body), 0);
        cr_assert_eq(st, 200);
        snprintf(want, sizeof(want), "{\"n\":%d}", i);
        cr_assert_str_eq(body, want);
        free(body);
    }
    struct kite_response r = {0};
    cr_assert_eq(kite_client_request(c, "PATCH", "/api/v1/nodes/n1/status", "application/strategic-merge-patch+json",
                                     "{\"a\":1}", 7, &r), 0);
    kite_response_release(&r);
    uint64_t sent = kite_client_bytes_sent(c);
    kite_client_free(c);
    peer_stop(&p);
    cr_assert_eq(p.accepts, 1);
    cr_assert_eq(p.requests, 4);
    char *all = p.received, host[64];
    snprintf(host, sizeof(host), "\r\nHost: 127.0.0.1:%u\r\n", p.port);
    cr_assert(kite_startswith(all, "GET /api/v1/nodes/n1 HTTP/1.1\r\n"), "%s", all);
    cr_assert(strstr(all, host), "%s", all);
    cr_assert(strstr(all, "\r\nAuthorization: Bearer tok\r\n"));
    cr_assert(strstr(all, "PATCH /api/v1/nodes/n1/status HTTP/1.1\r\n"));
    cr_assert(strstr(all, "\r\nContent-Type: application/strategic-merge-patch+json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"));
    /* every byte the server got is counted as sent, and nothing else */
    cr_assert_eq(sent, p.received_len);
}

/* Answers once iarg requests have come (or after 2 s) with how many had: the first iarg
 * requests are answered only if they are all sent before any is answered. */
static int h_together(struct peer *p, struct pconn *c, const char *req, size_t len) {
    p->waiting++;
    for (int i = 0; i < 2000 && p->waiting < p->iarg; i++) usleep(1000);
    char head[128];
    snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d", KITE_MIN((int)p->waiting, 9));
    pc_puts(c, head);
    return 0;
}

struct getter {
    struct kite_client *c;
    int e;
    char *body;
};

static void *getter_main(void *ud) {
    struct getter *g = ud;
    long st;
    g->e = get(g->c, "/x", &st, &g->body);
    return NULL;
}

/* Two threads' requests at once: with two pooled connections both reach the server together
 * (each answer says 2 had come: want_sum 4); with one, the second is sent after the first is
 * answered (1 + 2). The pool keeps its connections for later requests. */
static void requests_at_once(unsigned max_connections, int want_sum, int want_accepts) {
    struct peer p;
    peer_start_as(&p, true, h_together, true, 2);
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%u", p.port);
    struct kite_kubeconfig kc = {.server = url, .ca_pem = ca_pem, .ca_len = strlen(ca_pem)};
    struct kite_client_options o = {.max_connections = max_connections};
    struct kite_client *c = NULL;
    cr_assert_eq(kite_client_new(&kc, &o, &c), 0);
    struct getter g[2] = {{.c = c}, {.c = c}};
    pthread_t t[2];
    int sum = 0;
    for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&t[i], NULL, getter_main, &g[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(g[i].e, 0);
        sum += atoi(g[i].body);
        free(g[i].body);
    }
    cr_assert_eq(sum, want_sum);
    g[0] = (struct getter){.c = c};
    getter_main(&g[0]); /* alone: on a kept connection */
    cr_assert_eq(g[0].e, 0);
    free(g[0].body);
    kite_client_free(c);
    peer_stop(&p);
    cr_assert_eq(p.accepts, want_accepts);
    cr_assert_eq(p.requests, 3);
}

Test(transport, pooled_connections_carry_requests_at_once) { requests_at_once(2, 4, 2); }

/* the default pool of one: the second request waits for the first's connection */
Test(transport, one_connection_carries_one_request_at_a_time) { requests_at_once(0, 3, 1); }

Test(transport, a_connection_the_server_dropped_is_replaced_once) {
    struct peer p;
    peer_start(&p, true, h_ok_then_drop);
    struct kite_client *c = client_for(&p, "127.0.0.1", ca_pem, NULL, 0);
    long st;
    char *body = NULL;
    cr_assert_eq(get(c, "/a", &st, &body), 0);
    free(body);
    usleep(50 * 1000); /* the close has reached the client's socket */
    cr_assert_eq(get(c, "/b", &st, &body), 0);
    cr_assert_eq(st, 200);
    free(body);
    kite_client_free(c);
    peer_stop(&p);
    cr_assert_eq(p.accepts, 2);
    cr_assert_eq(p.requests, 2);
}

Test(transport, connection_close_is_honoured) {
    struct peer p;
    peer_start(&p, false, h_conn_close);
    struct kite_client *c = client_for(&p, "127.0.0.1", NULL, NULL, 0);
    for (int i = 0; i < 2; i++) {
        long st;
        char *body;
        cr_assert_eq(get(c, "/x", &st, &body), 0);
        cr_assert_eq(st, 404);
        cr_assert_str_eq(body, "{}");
        free(body);
    }
    kite_client_free(c);
    peer_stop(&p);
    cr_assert_eq(p.accepts, 2);
}

Test(transport, body_until_end_of_connection_and_chunked) {
    struct peer p;
    char *body = NULL;
    cr_assert_eq(one_get(&p, true, h_until_eof, "localhost", 0, &body), 0); /* DNS name and SNI */
    cr_assert_str_eq(body, "all of this is the body");
    free(body);

    long st;
    peer_start(&p, true, h_chunked);
    struct kite_client *c = client_for(&p, "127.0.0.1", ca_pem, NULL, 0);
    cr_assert_eq(get(c, "/x", &st, &body), 0);
    cr_assert_eq(st, 201);
    cr_assert_str_eq(body, "abc0123456789");
    free(body);
    cr_assert_eq(get(c, "/y", &st, &body), 0); /* the chunked answer left the connection usable */
    free(body);
    kite_client_free(c);
    peer_stop(&p);
    cr_assert_eq(p.accepts, 1);
}

Test(transport, the_client_certificate_is_presented) {
    struct peer p;
    cr_assert_eq(one_get(&p, true, h_ok, "127.0.0.1", 0, NULL), 0);
    cr_assert(strstr(p.client_dn, "CN=system:node:n1"), "%s", p.client_dn);
    cr_assert(strstr(p.client_dn, "O=system:nodes"), "%s", p.client_dn);
}

Test(transport, a_server_signed_by_another_ca_is_refused) {
    char other[64];
    strcpy(other, "/tmp/kite-client-ca-XXXXXX");
    cr_assert_not_null(mkdtemp(other));
    cr_assert_eq(kite_pki_ensure(other, NULL, 0), 0);
    char *path = kite_asprintf("%s/ca.crt", other), *other_ca = NULL;
    cr_assert_eq(kite_pki_read_file(path, &other_ca), 0);
    struct peer p;
    peer_start(&p, true, h_ok);
    struct kite_client *c = client_for(&p, "127.0.0.1", other_ca, NULL, 0);
    long st;
    char *body = NULL;
    cr_assert_eq(get(c, "/x", &st, &body), -EPROTO);
    kite_client_free(c);
    /* insecure-skip-tls-verify accepts it */
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%u", p.port);
    struct kite_kubeconfig kc = {.server = url, .insecure = true};
    cr_assert_eq(kite_client_new(&kc, NULL, &c), 0);
    cr_assert_eq(get(c, "/x", &st, &body), 0);
    cr_assert_eq(st, 200);
    free(body);
    kite_client_free(c);
    peer_stop(&p);
    cr_assert_eq(p.requests, 1);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", other);
    cr_assert_eq(system(cmd), 0);
    free(path);
    free(other_ca);
}

Test(transport, a_slow_answer_times_out_without_a_retry) {
    struct peer p;
    cr_assert_eq(one_get(&p, true, h_slow, "127.0.0.1", 200, NULL), -ETIMEDOUT);
    cr_assert_eq(p.requests, 1);
}

Test(transport, malformed_and_oversized_answers_are_errors) {
    struct peer p;
    cr_assert_eq(one_get(&p, false, h_garbage, "127.0.0.1", 0, NULL), -EPROTO);
    cr_assert_eq(one_get(&p, false, h_huge, "127.0.0.1", 0, NULL), -EFBIG);
    cr_assert_eq(p.requests, 1);
}

Test(transport, bad_settings_are_refused_up_front) {
    struct kite_client *c = NULL;
    const char *urls[] = {"", "ftp://x", "https://", "https://[::1", "https://h:port", "https://h:123456", "https://h?x"};
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        struct kite_kubeconfig kc = {.server = (char *)urls[i]};
        cr_assert_eq(kite_client_new(&kc, NULL, &c), -EINVAL, "%s", urls[i]);
    }
    struct kite_kubeconfig kc = {.server = "https://127.0.0.1:1", .ca_pem = "x", .ca_len = 1};
    cr_assert_eq(kite_client_new(&kc, NULL, &c), -EINVAL);
    kc = (struct kite_kubeconfig){.server = "https://127.0.0.1:1", .ca_pem = ca_pem, .ca_len = strlen(ca_pem),
                                  .cert_pem = "y", .cert_len = 1, .key_pem = "z", .key_len = 1};
    cr_assert_eq(kite_client_new(&kc, NULL, &c), -EINVAL);
    /* a prefix path and an IPv6 literal are accepted */
    kc = (struct kite_kubeconfig){.server = "https://[::1]:1/k8s/"};
    cr_assert_eq(kite_client_new(&kc, NULL, &c), 0);
    cr_assert_eq(kite_client_json(c, "GET", "/", NULL, NULL, NULL, NULL), -ECONNREFUSED);
    kite_client_free(c);
}

/* ---- watches ---- */

static int h_watch(struct peer *p, struct pconn *c, const char *req, size_t len) {
    pc_puts(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    /* one event split over two chunks, then two events in one chunk */
    pc_chunk(c, "{\"type\":\"ADDED\",");
    pc_chunk(c, "\"object\":{\"metadata\":{}}}\n");
    pc_chunk(c, "{\"type\":\"MODIFIED\",\"object\":{}}\n{\"type\":\"DELETED\",\"object\":{}}\n");
    if (p->iarg == 0) {
        pc_puts(c, "0\r\n\r\n"); /* the server ends the stream (timeoutSeconds) */
        return 0;
    }
    char buf[64]; /* hold the stream open until the client goes away */
    while (pc_read(c, buf, sizeof(buf)) > 0) {}
    return 1;
}

static int h_watch_gone(struct peer *p, struct pconn *c, const char *req, size_t len) {
    const char *s = "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}";
    char head[128];
    snprintf(head, sizeof(head), "HTTP/1.1 410 Gone\r\nContent-Length: %zu\r\n\r\n", strlen(s));
    pc_puts(c, head);
    pc_puts(c, s);
    return 0;
}

struct seen {
    char types[8][16];
    int n;
    int stop_after; /* 0 = never */
    int stop_with;
    struct kite_cancel *cancel_after;
};

static int on_event(json_object *ev, void *ud) {
    struct seen *s = ud;
    snprintf(s->types[s->n % 8], 16, "%s", json_object_get_string(json_object_object_get(ev, "type")));
    s->n++;
    if (s->stop_after && s->n == s->stop_after) {
        if (s->cancel_after) kite_cancel_fire(s->cancel_after);
        else return s->stop_with;
    }
    return 0;
}

Test(transport, watch_events_across_chunks_until_the_server_ends) {
    struct peer p;
    peer_start(&p, true, h_watch);
    struct kite_client *c = client_for(&p, "127.0.0.1", ca_pem, NULL, 0);
    struct kite_cancel cancel;
    kite_cancel_init(&cancel);
    struct seen s = {0};
    cr_assert_eq(kite_client_watch(c, "/api/v1/nodes?watch=true", on_event, &s, &cancel), 0);
    cr_assert_eq(s.n, 3);
    cr_assert_str_eq(s.types[0], "ADDED");
    cr_assert_str_eq(s.types[1], "MODIFIED");
    cr_assert_str_eq(s.types[2], "DELETED");
    kite_cancel_release(&cancel);
    kite_client_free(c);
    peer_stop(&p);
    cr_assert(kite_startswith(p.received, "GET /api/v1/nodes?watch=true HTTP/1.1\r\n"));
}

Test(transport, watch_stopped_by_cancel_or_by_the_callback) {
    struct peer p;
    peer_start(&p, true, h_watch);
    p.iarg = 1; /* the stream stays open */
    struct kite_client *c = client_for(&p, "127.0.0.1", ca_pem, NULL, 0);
    struct kite_cancel cancel;
    kite_cancel_init(&cancel);
    struct seen s = {.stop_after = 2, .cancel_after = &cancel};
    cr_assert_eq(kite_client_watch(c, "/w", on_event, &s, &cancel), -ECANCELED);
    cr_assert_geq(s.n, 2);
    /* a fired token stops the next watch before it connects */
    cr_assert_eq(kite_client_watch(c, "/w", on_event, &s, &cancel), -ECANCELED);
    kite_cancel_release(&cancel);
    kite_cancel_init(&cancel);
    s = (struct seen){.stop_after = 1, .stop_with = -E2BIG};
    cr_assert_eq(kite_client_watch(c, "/w", on_event, &s, &cancel), -E2BIG);
    cr_assert_eq(s.n, 1);
    kite_cancel_release(&cancel);
    kite_client_free(c);
    peer_stop(&p);
    cr_assert_eq(p.accepts, 2);
}

Test(transport, watch_answered_with_an_error_status) {
    struct peer p;
    peer_start(&p, false, h_watch_gone);
    struct kite_client *c = client_for(&p, "127.0.0.1", NULL, NULL, 0);
    struct kite_cancel cancel;
    kite_cancel_init(&cancel);
    struct seen s = {0};
    cr_assert_eq(kite_client_watch(c, "/w", on_event, &s, &cancel), -ESTALE);
    cr_assert_eq(s.n, 0);
    kite_cancel_release(&cancel);
    kite_client_free(c);
    peer_stop(&p);
}
