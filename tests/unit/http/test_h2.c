/* HTTP/2 (src/http/h2.c) driven by an nghttp2 client session over TLS: the same handler
 * interface as HTTP/1.1, many streams on one connection, answers from other threads, watch
 * streams, a reset ending one watch alone, the limits, GOAWAY on stop, the kill switch. */
#include "h2client.h"
#include "harness.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#define N_WATCH 4

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kite_http_stream *w[N_WATCH];
    int produced[N_WATCH], sent[N_WATCH];
    bool finish[N_WATCH], ended[N_WATCH];
    int n_done;
    struct kite_http_req *held;
} ws = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int pull(void *ud, struct kite_buf *out) {
    int i = (int)(intptr_t)ud;
    pthread_mutex_lock(&ws.lock);
    while (ws.sent[i] < ws.produced[i]) kite_buf_printf(out, "ev%d\n", ws.sent[i]++);
    int rc = ws.finish[i] ? -1 : 0;
    pthread_mutex_unlock(&ws.lock);
    return rc;
}

static void done(void *ud) {
    int i = (int)(intptr_t)ud;
    pthread_mutex_lock(&ws.lock);
    ws.n_done++;
    ws.ended[i] = true;
    ws.w[i] = NULL;
    pthread_cond_broadcast(&ws.cond);
    pthread_mutex_unlock(&ws.lock);
}

static void *answer_later(void *arg) {
    struct kite_http_req *r = arg;
    char *body = kite_asprintf("later %s", kite_http_target(r));
    kite_http_respond(r, 200, "text/plain", body, strlen(body));
    return NULL;
}

static void deferred(void *ud) {
    struct kite_http_req *r = ud;
    char *body = kite_strdup("deferred");
    kite_http_respond(r, 201, "text/plain", body, strlen(body));
}

static void *defer_later(void *arg) {
    kite_http_defer(arg, deferred, arg);
    return NULL;
}

static void handler(struct kite_http_req *r, void *ud) {
    const char *p = r->path;
    pthread_t t;
    if (strcmp(p, "/echo") == 0) {
        const char *a = kite_http_query(r, "a"), *x = kite_http_header(r, "X-Test"), *host = kite_http_header(r, "Host");
        char *body = kite_asprintf("%s %s a=%s x=%s host=%s len=%zu user=%s", r->method, p, a ? a : "-", x ? x : "-",
                                   host ? host : "-", r->body_len, r->user ? r->user->name : "-");
        kite_http_add_header(r, "X-Kite", "yes");
        kite_http_add_header(r, "Connection", "close"); /* HTTP/1.1 only: never sent on HTTP/2 */
        kite_http_respond(r, 200, "text/plain", body, strlen(body));
    } else if (strncmp(p, "/later/", 7) == 0) {
        cr_assert_eq(pthread_create(&t, NULL, answer_later, r), 0);
        pthread_detach(t);
    } else if (strcmp(p, "/defer") == 0) {
        cr_assert_eq(pthread_create(&t, NULL, defer_later, r), 0);
        pthread_detach(t);
    } else if (strcmp(p, "/big") == 0) {
        size_t n = 1024 * 1024 + 7;
        char *b = kite_malloc(n);
        for (size_t i = 0; i < n; i++) b[i] = (char)('a' + i % 23);
        kite_http_respond(r, 200, "application/octet-stream", b, n);
    } else if (strcmp(p, "/hold") == 0) {
        pthread_mutex_lock(&ws.lock);
        ws.held = r;
        pthread_cond_broadcast(&ws.cond);
        pthread_mutex_unlock(&ws.lock);
    } else if (strcmp(p, "/watch") == 0) {
        int i = atoi(kite_http_query(r, "i"));
        struct kite_http_stream *s;
        pthread_mutex_lock(&ws.lock);
        cr_assert_eq(kite_http_stream_begin(r, 200, "application/json", pull, done, (void *)(intptr_t)i, &s), 0);
        ws.w[i] = s;
        pthread_cond_broadcast(&ws.cond);
        pthread_mutex_unlock(&ws.lock);
    } else {
        kite_http_respond(r, 404, NULL, NULL, 0);
    }
}

static void setup_with_server(size_t max_head, size_t max_body, bool disable) {
    struct kite_http_config cfg = {.handler = handler, .max_header_bytes = max_head, .max_body = max_body,
                                   .disable_http2 = disable};
    fx_start(&cfg);
}

static void setup(void) {
    fx_certs();
    memset(ws.w, 0, sizeof ws.w);
    memset(ws.produced, 0, sizeof ws.produced);
    memset(ws.sent, 0, sizeof ws.sent);
    memset(ws.finish, 0, sizeof ws.finish);
    memset(ws.ended, 0, sizeof ws.ended);
    ws.n_done = 0;
    ws.held = NULL;
    setup_with_server(4096, 64 * 1024, false);
}

TestSuite(h2, .init = setup, .fini = fx_cleanup, .timeout = 60);

/* Produces n events on watch i and wakes it (from the test thread: any thread may). */
static void produce(int i, int n, bool finish) {
    pthread_mutex_lock(&ws.lock);
    ws.produced[i] += n;
    ws.finish[i] |= finish;
    struct kite_http_stream *s = ws.w[i];
    if (s) kite_http_stream_wake(s);
    pthread_mutex_unlock(&ws.lock);
}

/* Runs the client until watch i began on the server. */
static void await_watch(struct h2c *h, int i) {
    for (int k = 0; k < 250; k++) {
        pthread_mutex_lock(&ws.lock);
        bool up = ws.w[i] != NULL;
        pthread_mutex_unlock(&ws.lock);
        if (up) return;
        h2c_run(h, NULL, 0, 20);
    }
    cr_assert_fail("watch %d never began", i);
}

static int n_done(void) {
    pthread_mutex_lock(&ws.lock);
    int n = ws.n_done;
    pthread_mutex_unlock(&ws.lock);
    return n;
}

Test(h2, alpn_selects_h2_and_a_request_reaches_the_handler) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h, "ALPN selected h2");
    const char *extra[] = {"x-test", "v1", "authorization", "Bearer tok-bob"};
    int32_t id = h2c_request(h, "GET", "/echo?a=b%20c", NULL, 0, extra, 2);
    cr_assert(h2c_run(h, &id, 1, 5000));
    struct h2c_stream *s = h2c_stream(h, id);
    cr_assert_eq(s->status, 200);
    cr_assert_str_eq(s->body.p, "GET /echo a=b c x=v1 host=127.0.0.1 len=0 user=bob");
    cr_assert_not_null(strstr(s->headers.p, "x-kite: yes\n"), "%s", s->headers.p);
    cr_assert_not_null(strstr(s->headers.p, "content-type: text/plain\n"), "%s", s->headers.p);
    cr_assert_null(strstr(s->headers.p, "connection"), "hop-by-hop header sent: %s", s->headers.p);
    h2c_close(h);
}

Test(h2, many_streams_answered_from_other_threads_on_one_connection) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h);
    /* more than the 100 concurrent streams the server allows: the client queues the rest */
    enum { N = 300 };
    int32_t ids[N + 1];
    char path[N][24];
    for (int i = 0; i < N; i++) {
        snprintf(path[i], sizeof path[i], "/later/%d", i);
        ids[i] = h2c_request(h, "GET", path[i], NULL, 0, NULL, 0);
    }
    ids[N] = h2c_request(h, "POST", "/defer", NULL, 0, NULL, 0);
    cr_assert(h2c_run(h, ids, N + 1, 20000), "all streams answered");
    for (int i = 0; i < N; i++) {
        struct h2c_stream *s = h2c_stream(h, ids[i]);
        cr_assert_eq(s->status, 200);
        char want[64];
        snprintf(want, sizeof want, "later %.23s", path[i]);
        cr_assert_str_eq(s->body.p, want);
    }
    cr_assert_eq(h2c_stream(h, ids[N])->status, 201);
    cr_assert_str_eq(h2c_stream(h, ids[N])->body.p, "deferred");
    cr_assert_not(h->eof);
    h2c_close(h);
}

Test(h2, watch_streams_and_a_reset_ends_one_watch_alone) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h);
    int32_t w0 = h2c_request(h, "GET", "/watch?i=0", NULL, 0, NULL, 0);
    int32_t w1 = h2c_request(h, "GET", "/watch?i=1", NULL, 0, NULL, 0);
    await_watch(h, 0);
    await_watch(h, 1);
    produce(0, 2, false);
    produce(1, 1, false);
    cr_assert(h2c_run_body(h, w0, 8, 5000));
    cr_assert(h2c_run_body(h, w1, 4, 5000));
    cr_assert_str_eq(h2c_stream(h, w0)->body.p, "ev0\nev1\n");
    cr_assert_eq(h2c_stream(h, w0)->status, 200);

    h2c_reset(h, w0); /* the client cancels one watch: its done() runs, the other goes on */
    for (int k = 0; k < 250 && n_done() < 1; k++) h2c_run(h, NULL, 0, 20);
    cr_assert_eq(n_done(), 1);
    cr_assert(ws.ended[0]);
    produce(1, 2, false);
    cr_assert(h2c_run_body(h, w1, 12, 5000));
    cr_assert_str_eq(h2c_stream(h, w1)->body.p, "ev0\nev1\nev2\n");

    int32_t g = h2c_request(h, "GET", "/echo", NULL, 0, NULL, 0); /* the connection still serves */
    cr_assert(h2c_run(h, &g, 1, 5000));
    cr_assert_eq(h2c_stream(h, g)->status, 200);

    produce(1, 1, true); /* finishes cleanly: END_STREAM, no reset */
    cr_assert(h2c_run(h, &w1, 1, 5000));
    cr_assert_eq(h2c_stream(h, w1)->error_code, 0);
    cr_assert_str_eq(h2c_stream(h, w1)->body.p, "ev0\nev1\nev2\nev3\n");
    for (int k = 0; k < 250 && n_done() < 2; k++) h2c_run(h, NULL, 0, 20);
    cr_assert_eq(n_done(), 2);
    h2c_close(h);
}

Test(h2, oversize_headers_and_bodies_are_refused_per_stream) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h);
    char *big = kite_malloc(8192);
    memset(big, 'v', 8191);
    big[8191] = 0;
    const char *extra[] = {"x-big", big};
    int32_t a = h2c_request(h, "GET", "/echo", NULL, 0, extra, 1);
    cr_assert(h2c_run(h, &a, 1, 5000));
    cr_assert_eq(h2c_stream(h, a)->status, 431);
    cr_assert_not_null(strstr(h2c_stream(h, a)->body.p, "RequestHeaderFieldsTooLarge"));

    size_t n = 100 * 1024;
    char *body = kite_malloc(n);
    memset(body, 'b', n);
    int32_t b = h2c_request(h, "POST", "/echo", body, n, NULL, 0);
    cr_assert(h2c_run(h, &b, 1, 5000));
    cr_assert_eq(h2c_stream(h, b)->status, 413);

    const char *cl[] = {"content-length", "100000"};
    int32_t c = h2c_request(h, "POST", "/echo", body, 100000, cl, 1);
    cr_assert(h2c_run(h, &c, 1, 5000));
    cr_assert_eq(h2c_stream(h, c)->status, 413);

    int32_t d = h2c_request(h, "PUT", "/echo", body, 1024, NULL, 0);
    cr_assert(h2c_run(h, &d, 1, 5000));
    cr_assert_eq(h2c_stream(h, d)->status, 200);
    cr_assert_str_eq(h2c_stream(h, d)->body.p, "PUT /echo a=- x=- host=127.0.0.1 len=1024 user=-");
    cr_assert_not(h->eof, "refusals end streams, not the connection");
    free(big);
    free(body);
    h2c_close(h);
}

Test(h2, large_response_flows_through_the_windows) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h);
    int32_t a = h2c_request(h, "GET", "/big", NULL, 0, NULL, 0);
    int32_t b = h2c_request(h, "GET", "/big", NULL, 0, NULL, 0);
    int32_t ids[] = {a, b};
    cr_assert(h2c_run(h, ids, 2, 10000));
    for (int k = 0; k < 2; k++) {
        struct h2c_stream *s = h2c_stream(h, ids[k]);
        cr_assert_eq(s->body.len, 1024 * 1024 + 7);
        for (size_t i = 0; i < s->body.len; i += 4093) cr_assert_eq(s->body.p[i], (char)('a' + i % 23));
    }
    h2c_close(h);
}

static void *stop_server(void *arg) {
    fx_stop();
    return NULL;
}

Test(h2, stop_sends_goaway_and_finishes_watches) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h);
    int32_t w = h2c_request(h, "GET", "/watch?i=2", NULL, 0, NULL, 0);
    await_watch(h, 2);
    produce(2, 1, false);
    cr_assert(h2c_run_body(h, w, 4, 5000));
    pthread_t t;
    pthread_create(&t, NULL, stop_server, NULL);
    cr_assert(h2c_run(h, &w, 1, 10000), "the watch ends on stop");
    cr_assert_eq(h2c_stream(h, w)->error_code, 0);
    for (int k = 0; k < 100 && !h->goaway && !h->eof; k++) h2c_run(h, NULL, 0, 20);
    cr_assert(h->goaway, "GOAWAY sent");
    pthread_join(t, NULL);
    cr_assert_eq(n_done(), 1);
    h2c_close(h);
}

Test(h2, a_closed_connection_ends_watches_and_drops_late_answers) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h);
    h2c_request(h, "GET", "/watch?i=3", NULL, 0, NULL, 0);
    h2c_request(h, "GET", "/hold", NULL, 0, NULL, 0);
    await_watch(h, 3);
    for (int k = 0; k < 250; k++) {
        pthread_mutex_lock(&ws.lock);
        bool held = ws.held != NULL;
        pthread_mutex_unlock(&ws.lock);
        if (held) break;
        h2c_run(h, NULL, 0, 20);
    }
    cr_assert_not_null(ws.held);
    h2c_close(h);
    pthread_mutex_lock(&ws.lock);
    while (!ws.ended[3]) pthread_cond_wait(&ws.cond, &ws.lock);
    pthread_mutex_unlock(&ws.lock);
    char *late = kite_strdup("late");
    kite_http_respond(ws.held, 200, "text/plain", late, 4); /* dropped; freed with the stream */
    fx_stop();
}

Test(h2, kill_switch_offers_only_http11) {
    fx_stop();
    setup_with_server(4096, 64 * 1024, true);
    struct h2c *h = h2c_open();
    cr_assert_null(h, "h2 not selected with disable_http2");
}

Test(h2, abort_resets_that_stream_alone_even_with_bytes_queued) {
    struct h2c *h = h2c_open();
    cr_assert_not_null(h);
    int32_t w0 = h2c_request(h, "GET", "/watch?i=0", NULL, 0, NULL, 0);
    int32_t w1 = h2c_request(h, "GET", "/watch?i=1", NULL, 0, NULL, 0);
    await_watch(h, 0);
    await_watch(h, 1);
    /* more than the stream's 256 KiB window: bytes stay queued on the server */
    produce(0, 80000, false);
    h2c_run(h, NULL, 0, 100);
    pthread_mutex_lock(&ws.lock);
    kite_http_stream_abort(ws.w[0]);
    while (!ws.ended[0]) pthread_cond_wait(&ws.cond, &ws.lock); /* done() without the client reading */
    pthread_mutex_unlock(&ws.lock);
    cr_assert(h2c_run(h, &w0, 1, 5000));
    cr_assert_eq(h2c_stream(h, w0)->error_code, NGHTTP2_CANCEL);
    produce(1, 1, true);
    cr_assert(h2c_run(h, &w1, 1, 5000));
    cr_assert_eq(h2c_stream(h, w1)->error_code, 0);
    cr_assert_str_eq(h2c_stream(h, w1)->body.p, "ev0\n");
    h2c_close(h);
}
