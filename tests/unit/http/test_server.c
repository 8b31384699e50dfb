#include "harness.h"
#include "pki/pki.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- handlers ---- */

static void echo(struct kite_http_req *r, void *ud) {
    struct kite_buf b = {0};
    const char *imp[8];
    size_t n = kite_http_header_all(r, "impersonate-group", imp, 8);
    kite_buf_printf(&b, "method=%s\npath=%s\nbody=%s\nlen=%zu\n", r->method, r->path, r->body, r->body_len);
    const char *q = kite_http_query(r, "q"), *w = kite_http_query(r, "watch"), *x = kite_http_header(r, "x-test");
    kite_buf_printf(&b, "q=%s\nwatch=%s\nx=%s\nimp=", q ? q : "(null)", w ? w : "(null)", x ? x : "(null)");
    for (size_t i = 0; i < n; i++)
        kite_buf_printf(&b, "%s%s", i ? "|" : "", imp[i]);
    kite_buf_printf(&b, "\nuser=%s\nuid=%s\ngroups=", r->user ? r->user->name : "(anon)", r->user ? r->user->uid : "");
    for (size_t i = 0; r->user && i < r->user->n_groups; i++)
        kite_buf_printf(&b, "%s%s", i ? "," : "", r->user->groups[i]);
    kite_buf_printf(&b, "\nauthn_failed=%d\n", r->authn_failed);
    kite_http_add_header(r, "X-Reply", "yes");
    size_t len;
    char *body = kite_buf_detach(&b, &len);
    kite_http_respond(r, 200, "text/plain", body, len);
}

/* Deferred: a responder thread answers every request 50 ms after it arrived. */
struct pending {
    struct kite_http_req *r;
    int64_t due_ms;
    struct pending *next;
};
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct pending *head, *tail;
    bool quit;
    pthread_t th;
    int handled;
} dq = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* kite_http_defer's callback: answers on an HTTP thread, never on the thread that deferred. */
static void answer_later(void *ud) {
    struct kite_http_req *r = ud;
    bool on_responder = pthread_equal(pthread_self(), dq.th);
    char *body = kite_asprintf("later %s %s", r->path, on_responder ? "responder-thread" : "http-thread");
    kite_http_add_header(r, "X-Later", "1");
    kite_http_respond(r, 202, "text/plain", body, strlen(body));
}

static void *responder(void *arg) {
    pthread_mutex_lock(&dq.lock);
    for (;;) {
        while (!dq.head && !dq.quit)
            pthread_cond_wait(&dq.cond, &dq.lock);
        if (!dq.head && dq.quit)
            break;
        struct pending *p = dq.head;
        int64_t now = fx_mono_ms();
        if (p->due_ms > now) {
            pthread_mutex_unlock(&dq.lock);
            usleep((useconds_t)(p->due_ms - now) * 1000); /* test code: simulates a slow commit */
            pthread_mutex_lock(&dq.lock);
            continue;
        }
        dq.head = p->next;
        if (!dq.head)
            dq.tail = NULL;
        pthread_mutex_unlock(&dq.lock);
        if (kite_startswith(p->r->path, "/later")) {
            kite_http_defer(p->r, answer_later, p->r);
        } else {
            char *body = kite_asprintf("deferred %s", p->r->path);
            kite_http_respond(p->r, 201, "text/plain", body, strlen(body));
        }
        free(p);
        pthread_mutex_lock(&dq.lock);
    }
    pthread_mutex_unlock(&dq.lock);
    return NULL;
}

static void handler(struct kite_http_req *r, void *ud) {
    if (kite_startswith(r->path, "/inline-later")) {
        kite_http_defer(r, answer_later, r); /* deferred before the handler returns */
        return;
    }
    if (kite_startswith(r->path, "/defer") || kite_startswith(r->path, "/later")) {
        struct pending *p = kite_calloc(1, sizeof(*p));
        p->r = r;
        p->due_ms = fx_mono_ms() + 50;
        pthread_mutex_lock(&dq.lock);
        if (dq.tail)
            dq.tail->next = p;
        else
            dq.head = p;
        dq.tail = p;
        dq.handled++;
        pthread_cond_signal(&dq.cond);
        pthread_mutex_unlock(&dq.lock);
        return;
    }
    echo(r, ud);
}

static void start_default(void) {
    fx_certs();
    struct kite_http_config cfg = {.handler = handler};
    fx_start(&cfg);
    dq.quit = false;
    pthread_create(&dq.th, NULL, responder, NULL);
}

static void stop_all(void) {
    fx_stop();
    pthread_mutex_lock(&dq.lock);
    dq.quit = true;
    pthread_cond_signal(&dq.cond);
    pthread_mutex_unlock(&dq.lock);
    pthread_join(dq.th, NULL);
    fx_cleanup();
}

TestSuite(http, .init = start_default, .fini = stop_all, .timeout = 30);

Test(http, get_with_query_headers_and_repeated_headers) {
    CURL *c = fx_curl();
    struct kite_buf out = {0};
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "X-Test: hello world");
    h = curl_slist_append(h, "Impersonate-Group: system:nodes");
    h = curl_slist_append(h, "Impersonate-Group: system:authenticated");
    long code = fx_req(c, "GET", "/api/v1/name%20space/x?q=a%2Fb%3Dc&watch", NULL, h, &out);
    cr_assert_eq(code, 200, "%ld", code);
    cr_assert(strstr(out.p, "method=GET\n"), "%s", out.p);
    cr_assert(strstr(out.p, "path=/api/v1/name space/x\n"), "%s", out.p);
    cr_assert(strstr(out.p, "q=a/b=c\n"), "%s", out.p);
    cr_assert(strstr(out.p, "watch=\n"), "%s", out.p);
    cr_assert(strstr(out.p, "x=hello world\n"), "%s", out.p);
    cr_assert(strstr(out.p, "imp=system:nodes|system:authenticated\n"), "%s", out.p);
    cr_assert(strstr(out.p, "user=(anon)\n"), "%s", out.p);
    cr_assert(strstr(out.p, "authn_failed=0\n"), "%s", out.p);
    struct curl_header *xh;
    cr_assert_eq(curl_easy_header(c, "X-Reply", 0, CURLH_HEADER, -1, &xh), CURLHE_OK);
    cr_assert_str_eq(xh->value, "yes");
    cr_assert_eq(curl_easy_header(c, "Content-Type", 0, CURLH_HEADER, -1, &xh), CURLHE_OK);
    cr_assert_str_eq(xh->value, "text/plain");
    curl_slist_free_all(h);
    kite_buf_release(&out);
    curl_easy_cleanup(c);
}

Test(http, put_body_and_keepalive) {
    CURL *c = fx_curl();
    struct kite_buf out = {0};
    long code = fx_req(c, "PUT", "/obj", "{\"a\":1}", NULL, &out);
    cr_assert_eq(code, 200);
    cr_assert(strstr(out.p, "method=PUT\n"), "%s", out.p);
    cr_assert(strstr(out.p, "body={\"a\":1}\nlen=7\n"), "%s", out.p);
    for (int i = 0; i < 5; i++) {
        code = fx_req(c, i % 2 ? "GET" : "POST", "/again", i % 2 ? NULL : "xyz", NULL, &out);
        cr_assert_eq(code, 200);
        long connects = -1;
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        cr_assert_eq(connects, 0, "request %d opened a new connection: keep-alive lost", i);
    }
    kite_buf_release(&out);
    curl_easy_cleanup(c);
}

static char *write_tmp(const char *name, const char *data) {
    char *p = fx_path(name);
    FILE *f = fopen(p, "w");
    fputs(data, f);
    fclose(f);
    return p;
}

Test(http, client_cert_gives_user_and_groups) {
    const char *orgs[] = {"system:masters", "dev-team"};
    char *cert, *key;
    cr_assert_eq(kite_pki_issue_client(fx.dir, "alice", orgs, 2, &cert, &key), 0);
    char *cp = write_tmp("alice.crt", cert), *kp = write_tmp("alice.key", key);
    CURL *c = fx_curl();
    curl_easy_setopt(c, CURLOPT_SSLCERT, cp);
    curl_easy_setopt(c, CURLOPT_SSLKEY, kp);
    struct kite_buf out = {0};
    cr_assert_eq(fx_req(c, "GET", "/me", NULL, NULL, &out), 200);
    cr_assert(strstr(out.p, "user=alice\nuid=\ngroups=system:masters,dev-team\nauthn_failed=0\n"), "%s", out.p);
    /* Cached per connection, still right on the next request. */
    cr_assert_eq(fx_req(c, "GET", "/me", NULL, NULL, &out), 200);
    cr_assert(strstr(out.p, "user=alice\n"), "%s", out.p);
    kite_buf_release(&out);
    curl_easy_cleanup(c);
    free(cert); free(key); free(cp); free(kp);
}

Test(http, untrusted_client_cert_fails_but_token_wins) {
    /* A cert from another CA. */
    char other[64];
    strcpy(other, "/tmp/kite-http-other-XXXXXX");
    cr_assert_not_null(mkdtemp(other));
    cr_assert_eq(kite_pki_ensure(other, NULL, 0), 0);
    const char *orgs[] = {"system:masters"};
    char *cert, *key;
    cr_assert_eq(kite_pki_issue_client(other, "mallory", orgs, 1, &cert, &key), 0);
    char *cp = write_tmp("m.crt", cert), *kp = write_tmp("m.key", key);
    CURL *c = fx_curl();
    curl_easy_setopt(c, CURLOPT_SSLCERT, cp);
    curl_easy_setopt(c, CURLOPT_SSLKEY, kp);
    struct kite_buf out = {0};
    cr_assert_eq(fx_req(c, "GET", "/me", NULL, NULL, &out), 200);
    cr_assert(strstr(out.p, "user=(anon)\n"), "%s", out.p);
    cr_assert(strstr(out.p, "authn_failed=1\n"), "%s", out.p);
    struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer tok-carol");
    cr_assert_eq(fx_req(c, "GET", "/me", NULL, h, &out), 200);
    cr_assert(strstr(out.p, "user=carol\nuid=uid-carol\ngroups=\nauthn_failed=0\n"), "%s", out.p);
    curl_slist_free_all(h);
    kite_buf_release(&out);
    curl_easy_cleanup(c);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", other);
    cr_assert_eq(system(cmd), 0);
    free(cert); free(key); free(cp); free(kp);
}

Test(http, bearer_tokens) {
    static const struct {
        const char *auth, *want;
    } cases[] = {
        {"Authorization: Bearer tok-bob", "user=bob\nuid=uid-bob\ngroups=g1,g2\nauthn_failed=0\n"},
        {"Authorization: bearer tok-carol", "user=carol\nuid=uid-carol\ngroups=\nauthn_failed=0\n"},
        {"Authorization: Bearer nope", "user=(anon)\nuid=\ngroups=\nauthn_failed=1\n"},
        /* header values lose their surrounding whitespace (RFC 9110 5.5, as Go's textproto);
         * kube-apiserver's bearer authenticator then sees no token: anonymous, not a failure */
        {"Authorization: Bearer ", "user=(anon)\nuid=\ngroups=\nauthn_failed=0\n"},
        {"Authorization: Bearer  ", "user=(anon)\nuid=\ngroups=\nauthn_failed=0\n"},
        {"X-Other: 1", "user=(anon)\nuid=\ngroups=\nauthn_failed=0\n"},
    };
    CURL *c = fx_curl();
    struct kite_buf out = {0};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct curl_slist *h = curl_slist_append(NULL, cases[i].auth);
        cr_assert_eq(fx_req(c, "GET", "/me", NULL, h, &out), 200);
        cr_assert(strstr(out.p, cases[i].want), "case %zu: %s", i, out.p);
        curl_slist_free_all(h);
    }
    kite_buf_release(&out);
    curl_easy_cleanup(c);
}

Test(http, deferred_responses_concurrent_with_keepalive) {
    enum { N = 200, CONNS = 8 };
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)CONNS);
    CURL *e[N];
    struct kite_buf out[N];
    memset(out, 0, sizeof(out));
    char *urls[N];
    int64_t t0 = fx_mono_ms();
    for (int i = 0; i < N; i++) {
        e[i] = fx_curl();
        urls[i] = kite_asprintf("%s/defer/%d", fx.base, i);
        curl_easy_setopt(e[i], CURLOPT_URL, urls[i]);
        curl_easy_setopt(e[i], CURLOPT_WRITEDATA, &out[i]);
        curl_easy_setopt(e[i], CURLOPT_TIMEOUT, 20L);
        curl_multi_add_handle(m, e[i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(m, &running);
        if (running)
            curl_multi_poll(m, NULL, 0, 1000, NULL);
    }
    int64_t elapsed = fx_mono_ms() - t0;
    long total_connects = 0;
    for (int i = 0; i < N; i++) {
        long code = 0, nc = 0;
        curl_easy_getinfo(e[i], CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(e[i], CURLINFO_NUM_CONNECTS, &nc);
        total_connects += nc;
        cr_assert_eq(code, 201, "request %d: %ld", i, code);
        char want[32];
        snprintf(want, sizeof(want), "deferred /defer/%d", i);
        cr_assert_str_eq(out[i].p, want);
        curl_multi_remove_handle(m, e[i]);
        curl_easy_cleanup(e[i]);
        kite_buf_release(&out[i]);
        free(urls[i]);
    }
    curl_multi_cleanup(m);
    cr_assert_leq(total_connects, CONNS, "keep-alive lost: %ld connections for %d requests", total_connects, N);
    /* 200 requests over 8 connections, each answered 50 ms later: ≥ 25 rounds of 50 ms. */
    cr_assert_geq(elapsed, 50 * (N / CONNS) - 50);
}

/* kite_http_defer, from another thread and from inside the handler: the callback answers on an
 * HTTP thread, keep-alive holds. */
Test(http, defer_answers_on_an_http_thread) {
    CURL *c = fx_curl();
    struct kite_buf out = {0};
    for (int i = 0; i < 6; i++) {
        char path[32], want[64];
        const char *kind = i % 2 ? "/inline-later" : "/later";
        snprintf(path, sizeof path, "%s/%d", kind, i);
        snprintf(want, sizeof want, "later %s http-thread", path);
        kite_buf_reset(&out);
        cr_assert_eq(fx_req(c, "GET", path, NULL, NULL, &out), 202, "%s", path);
        cr_assert_str_eq(out.p, want);
    }
    long nc = 0;
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &nc);
    cr_assert_eq(nc, 0, "the last request reused the connection");
    curl_easy_cleanup(c);
    kite_buf_release(&out);
}

Test(http, alpn_selects_h2_when_offered_else_http11) {
    struct kite_buf out = {0};
    char sel[32];
    const char *offer[] = {"h2", "http/1.1"};
    cr_assert_geq(fx_raw_tls(NULL, 0, &out, 10, offer, 2, sel, sizeof(sel)), 0);
    cr_assert_str_eq(sel, "h2");
    const char *h1[] = {"http/1.1"};
    cr_assert_geq(fx_raw_tls(NULL, 0, &out, 10, h1, 1, sel, sizeof(sel)), 0);
    cr_assert_str_eq(sel, "http/1.1");
    kite_buf_release(&out);
}

Test(http, malformed_requests_do_not_wedge_the_server) {
    static const char *garbage[] = {
        "\r\n\r\n",
        "GET\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n",
        "\x01\x02\x03\xff\xfe binary \0 junk\r\n\r\n",
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(garbage); i++) {
        struct kite_buf out = {0};
        fx_raw_tls(garbage[i], strlen(garbage[i]) + (i == 7 ? 5 : 0), &out, 500, NULL, 0, NULL, 0);
        if (out.len)
            cr_assert(kite_startswith(out.p, "HTTP/1."), "case %zu: %s", i, out.p);
        kite_buf_release(&out);
    }
    /* Plain-text HTTP on the TLS port. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(kite_http_port(fx.srv))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_gt(write(fd, "GET / HTTP/1.1\r\n\r\n", 18), 0);
    close(fd);
    /* Still serving. */
    CURL *c = fx_curl();
    struct kite_buf out = {0};
    cr_assert_eq(fx_req(c, "GET", "/alive", NULL, NULL, &out), 200);
    kite_buf_release(&out);
    curl_easy_cleanup(c);
}

Test(http, raw_request_pipelined_keepalive_format) {
    struct kite_buf out = {0};
    const char *req = "GET /a?q=1 HTTP/1.1\r\nHost: x\r\n\r\n";
    fx_raw_tls(req, strlen(req), &out, 300, NULL, 0, NULL, 0);
    cr_assert(kite_startswith(out.p, "HTTP/1.1 200 OK\r\n"), "%s", out.p);
    cr_assert_null(strcasestr(out.p, "Connection: close"), "%s", out.p);
    cr_assert(strstr(out.p, "q=1\n"), "%s", out.p);
    kite_buf_release(&out);
}

/* Two requests in one write: both answered, in order, on the same connection. */
Test(http, pipelined_requests_answered_in_order) {
    struct kite_buf out = {0};
    const char *reqs = "GET /first?q=a+b%2Fc HTTP/1.1\r\nHost: x\r\n\r\n"
                       "PUT /second%20path HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    fx_raw_tls(reqs, strlen(reqs), &out, 300, NULL, 0, NULL, 0);
    const char *a = strstr(out.p, "path=/first\n"), *b = strstr(out.p, "path=/second path\n");
    cr_assert(a && b && a < b, "%s", out.p);
    cr_assert(strstr(out.p, "q=a b/c\n"), "query decoding ('+' and %%XX): %s", out.p);
    cr_assert(strstr(b, "body=hello\nlen=5\n"), "%s", out.p);
    kite_buf_release(&out);
}

/* HTTP/1.0 without keep-alive: answered and closed; HEAD: the length without the body. */
Test(http, http10_closes_and_head_has_no_body) {
    struct kite_buf out = {0};
    const char *req = "GET /old HTTP/1.0\r\n\r\n";
    int64_t t0 = fx_mono_ms();
    fx_raw_tls(req, strlen(req), &out, 3000, NULL, 0, NULL, 0);
    cr_assert_lt(fx_mono_ms() - t0, 2500, "the server did not close the HTTP/1.0 connection");
    cr_assert(kite_startswith(out.p, "HTTP/1.1 200 OK\r\n"), "%s", out.p);
    cr_assert(strcasestr(out.p, "Connection: close\r\n"), "%s", out.p);
    kite_buf_release(&out);
    req = "HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    fx_raw_tls(req, strlen(req), &out, 3000, NULL, 0, NULL, 0);
    cr_assert(kite_startswith(out.p, "HTTP/1.1 200 OK\r\n"), "%s", out.p);
    const char *cl = strcasestr(out.p, "Content-Length: ");
    cr_assert(cl && atoi(cl + 16) > 0, "%s", out.p);
    cr_assert(out.len >= 4 && strcmp(out.p + out.len - 4, "\r\n\r\n") == 0, "a HEAD answer carries no body: %s", out.p);
    kite_buf_release(&out);
}

/* A client that keeps sending after a request the server refused still reads the answer: the
 * server drains input before closing instead of resetting the connection. */
Test(http, refused_request_answer_survives_unread_input) {
    struct kite_buf out = {0};
    size_t n = 200000;
    char *junk = kite_malloc(n + 1);
    memcpy(junk, "GET /", 5);
    memset(junk + 5, 'u', n - 5);
    junk[n] = 0;
    fx_raw_pause_at = 100000; /* the server has refused and closed before the rest is sent */
    fx_raw_tls(junk, n, &out, 3000, NULL, 0, NULL, 0);
    fx_raw_pause_at = SIZE_MAX;
    cr_assert(kite_startswith(out.p, "HTTP/1.1 414 "), "%.200s", out.p ? out.p : "(nothing)");
    cr_assert_eq(fx_raw_sent, n, "the connection was reset while the client was sending");
    free(junk);
    kite_buf_release(&out);
}

/* A percent-encoded NUL in the path or the query is refused before the handler: the handler
 * sees C strings, and "/leases/victim%00x" would otherwise act on "/leases/victim". */
Test(http, nul_in_path_or_query_is_refused) {
    static const char *bad[] = {
        "DELETE /api/v1/namespaces/default/leases/victim%00anything HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a%00 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a?q=x%00y HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a?q%00z=1 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a?watch%00 HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(bad); i++) {
        struct kite_buf out = {0};
        fx_raw_tls(bad[i], strlen(bad[i]), &out, 2000, NULL, 0, NULL, 0);
        cr_assert(out.p && kite_startswith(out.p, "HTTP/1.1 400 Bad Request\r\n"), "case %zu: %s", i, out.p);
        cr_assert(strstr(out.p, "\r\n\r\n{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                                "\"message\":\""),
                  "case %zu: %s", i, out.p);
        cr_assert(strstr(out.p, "\"reason\":\"BadRequest\",\"code\":400}"), "case %zu: %s", i, out.p);
        cr_assert_null(strstr(out.p, "path="), "case %zu reached the handler: %s", i, out.p);
        kite_buf_release(&out);
    }
    /* An encoded '%' followed by "00" is text, not a NUL. */
    struct kite_buf out = {0};
    const char *ok = "GET /a%2500?q=%2500 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    fx_raw_tls(ok, strlen(ok), &out, 2000, NULL, 0, NULL, 0);
    cr_assert(out.p && strstr(out.p, "path=/a%00\n") && strstr(out.p, "q=%00\n"), "%s", out.p);
    kite_buf_release(&out);
}

/* A client that sends its request and then closes its sending side (TLS close_notify, or a
 * bare TCP half-close) still gets the answer, also one that comes later from another thread;
 * then the server closes. */
Test(http, half_closed_client_gets_its_answer) {
    static const struct {
        enum fx_half_close how;
        const char *req, *want;
    } cases[] = {
        {FX_HALF_CLOSE_TLS, "GET /now HTTP/1.1\r\nHost: x\r\n\r\n", "path=/now\n"},
        {FX_HALF_CLOSE_TCP, "GET /now HTTP/1.1\r\nHost: x\r\n\r\n", "path=/now\n"},
        {FX_HALF_CLOSE_TLS, "DELETE /defer/a HTTP/1.1\r\nHost: x\r\n\r\n", "deferred /defer/a"},
        {FX_HALF_CLOSE_TCP, "DELETE /defer/b HTTP/1.1\r\nHost: x\r\n\r\n", "deferred /defer/b"},
        {FX_HALF_CLOSE_TCP, "GET /later/c HTTP/1.1\r\nHost: x\r\n\r\n", "later /later/c http-thread"},
        /* pipelined: both answered, in order */
        {FX_HALF_CLOSE_TLS, "GET /defer/d HTTP/1.1\r\nHost: x\r\n\r\nGET /e HTTP/1.1\r\nHost: x\r\n\r\n",
         "deferred /defer/d"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct kite_buf out = {0};
        fx_raw_half_close = cases[i].how;
        int64_t t0 = fx_mono_ms();
        fx_raw_tls(cases[i].req, strlen(cases[i].req), &out, 3000, NULL, 0, NULL, 0);
        long ms = (long)(fx_mono_ms() - t0);
        fx_raw_half_close = FX_KEEP_OPEN;
        cr_assert(out.p && kite_startswith(out.p, "HTTP/1.1 20"), "case %zu: %s", i, out.p ? out.p : "(nothing)");
        cr_assert(strstr(out.p, cases[i].want), "case %zu: %s", i, out.p);
        if (i == 5)
            cr_assert(strstr(out.p, "path=/e\n") > strstr(out.p, "deferred /defer/d"), "case %zu: %s", i, out.p);
        cr_assert_lt(ms, 2000, "case %zu: the connection stayed open %ld ms after the answer", i, ms);
        kite_buf_release(&out);
    }
}

/* A connection closed by the server while a forked child still holds a copy of its socket (the
 * agent spawning runc and conmon in `kite up`): the epoll registration must go with it. Before,
 * close() left the registration in place (the open file lived on in the child) and the next
 * bytes from the client were reported with the freed connection's pointer: a use after free
 * (ASan), or another worker's connection driven from the wrong thread (TSan). */
Test(http, closed_connection_leaves_epoll_though_a_child_holds_its_socket) {
    int port = atoi(strrchr(fx.base, ':') + 1);
    for (int round = 0; round < 5; round++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof a), 0);
        usleep(50 * 1000); /* accepted and registered by a worker */
        pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) { /* holds every descriptor of the server, as a spawned child does */
            usleep(500 * 1000);
            _exit(0);
        }
        /* not TLS: the server ends the connection */
        const char junk[] = "GET / HTTP/1.1\r\n\r\n";
        cr_assert_eq(send(s, junk, sizeof junk - 1, MSG_NOSIGNAL), (ssize_t)(sizeof junk - 1));
        usleep(100 * 1000);
        /* more bytes on the socket the server closed but the child keeps open */
        for (int i = 0; i < 3; i++) {
            (void)send(s, junk, sizeof junk - 1, MSG_NOSIGNAL);
            usleep(20 * 1000);
        }
        close(s);
        int st = 0;
        cr_assert_eq(waitpid(child, &st, 0), child);
    }
    /* the server still answers */
    CURL *c = fx_curl();
    struct kite_buf out = {0};
    cr_assert_eq(fx_req(c, "GET", "/alive", NULL, NULL, &out), 200);
    kite_buf_release(&out);
    curl_easy_cleanup(c);
}
