/* kite_http_fetch: a streaming HTTPS GET with a client certificate against the module's own
 * server: a plain answer, a chunked stream read as it comes, an error answer, a cancel from
 * another thread ending a blocked read, and a refused connection. */
#include "harness.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

static struct {
    pthread_mutex_t lock;
    struct kite_http_stream *h;
    int sent, produced;
    bool finish, done;
    char user[128];
} s = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int pull(void *ud, struct kite_buf *out) {
    pthread_mutex_lock(&s.lock);
    int rc = 0;
    while (s.sent < s.produced) {
        kite_buf_printf(out, "line %d\n", s.sent++);
        rc = 1;
    }
    if (s.finish) rc = -1;
    pthread_mutex_unlock(&s.lock);
    return rc;
}

static void done(void *ud) {
    pthread_mutex_lock(&s.lock);
    s.done = true;
    s.h = NULL;
    pthread_mutex_unlock(&s.lock);
}

static void handler(struct kite_http_req *r, void *ud) {
    pthread_mutex_lock(&s.lock);
    snprintf(s.user, sizeof s.user, "%s", r->user ? r->user->name : "-");
    pthread_mutex_unlock(&s.lock);
    if (strcmp(r->path, "/plain") == 0) {
        kite_http_respond(r, 200, "text/plain", strdup("hello"), 5);
    } else if (strcmp(r->path, "/bad") == 0) {
        kite_http_respond(r, 400, "text/plain", strdup("container \"c\" is waiting\n"), 26);
    } else {
        struct kite_http_stream *h = NULL;
        cr_assert_eq(kite_http_stream_begin(r, 200, "text/plain", pull, done, NULL, &h), 0);
        pthread_mutex_lock(&s.lock);
        s.h = h;
        pthread_mutex_unlock(&s.lock);
    }
}

static char *cert, *key;

static void setup(void) {
    fx_certs();
    const char *orgs[] = {"system:masters"};
    cr_assert_eq(kite_pki_issue_client(fx.dir, KITE_PKI_KUBELET_CLIENT_CN, orgs, 1, &cert, &key), 0);
    struct kite_http_config cfg = {.handler = handler};
    fx_start(&cfg);
    s.sent = s.produced = 0;
    s.finish = s.done = false;
}

static void teardown(void) {
    fx_cleanup();
    free(cert);
    free(key);
}

TestSuite(fetch, .init = setup, .fini = teardown, .timeout = 30);

static struct kite_http_fetch *open_path(const char *path, int *code) {
    struct kite_http_fetch_options o = {.host = "127.0.0.1", .port = kite_http_port(fx.srv), .path = path,
                                        .cert_pem = cert, .key_pem = key, .ca_pem = fx.ca_pem, .timeout_ms = 5000};
    struct kite_http_fetch *f = NULL;
    cr_assert_eq(kite_http_fetch_open(&o, &f, code), 0);
    return f;
}

static void read_all(struct kite_http_fetch *f, struct kite_buf *out) {
    char b[100];
    ssize_t n;
    while ((n = kite_http_fetch_read(f, b, sizeof b)) > 0) kite_buf_append(out, b, (size_t)n);
    cr_assert_eq(n, 0);
}

Test(fetch, plain_answer_with_the_client_identity) {
    int code = 0;
    struct kite_http_fetch *f = open_path("/plain", &code);
    cr_assert_eq(code, 200);
    struct kite_buf b = {0};
    read_all(f, &b);
    cr_assert_str_eq(b.p, "hello");
    kite_http_fetch_close(f);
    kite_buf_release(&b);
    cr_assert_str_eq(s.user, KITE_PKI_KUBELET_CLIENT_CN);
}

Test(fetch, error_answer_keeps_code_and_text) {
    int code = 0;
    struct kite_http_fetch *f = open_path("/bad", &code);
    cr_assert_eq(code, 400);
    struct kite_buf b = {0};
    read_all(f, &b);
    cr_assert_str_eq(b.p, "container \"c\" is waiting\n");
    kite_http_fetch_close(f);
    kite_buf_release(&b);
}

Test(fetch, stream_read_as_it_comes_until_its_end) {
    pthread_mutex_lock(&s.lock);
    s.produced = 2;
    pthread_mutex_unlock(&s.lock);
    int code = 0;
    struct kite_http_fetch *f = open_path("/stream", &code);
    cr_assert_eq(code, 200);
    struct kite_buf b = {0};
    char buf[100];
    while (b.len < 14) {
        ssize_t n = kite_http_fetch_read(f, buf, sizeof buf);
        cr_assert_gt(n, 0);
        kite_buf_append(&b, buf, (size_t)n);
    }
    cr_assert_str_eq(b.p, "line 0\nline 1\n");
    pthread_mutex_lock(&s.lock);
    s.produced = 3;
    s.finish = true;
    kite_http_stream_wake(s.h);
    pthread_mutex_unlock(&s.lock);
    read_all(f, &b);
    cr_assert_str_eq(b.p, "line 0\nline 1\nline 2\n");
    kite_http_fetch_close(f);
    kite_buf_release(&b);
}

static void *cancel_later(void *f) {
    usleep(100 * 1000);
    kite_http_fetch_cancel(f);
    return NULL;
}

Test(fetch, cancel_ends_a_blocked_read) {
    int code = 0;
    struct kite_http_fetch *f = open_path("/stream", &code); /* a stream that never sends */
    pthread_t t;
    pthread_create(&t, NULL, cancel_later, f);
    char buf[16];
    ssize_t n = kite_http_fetch_read(f, buf, sizeof buf);
    cr_assert_leq(n, 0);
    pthread_join(t, NULL);
    kite_http_fetch_close(f);
}

Test(fetch, refused_connection) {
    uint16_t port = kite_http_port(fx.srv);
    fx_stop();
    struct kite_http_fetch_options o = {.host = "127.0.0.1", .port = port, .path = "/", .timeout_ms = 2000};
    struct kite_http_fetch *f = NULL;
    int code = 0;
    cr_assert_eq(kite_http_fetch_open(&o, &f, &code), -ECONNREFUSED);
}
