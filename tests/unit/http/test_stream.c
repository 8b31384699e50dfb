#include "harness.h"
#include "base/clock.h"

#include <criterion/criterion.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* One stream at a time per test: its state, shared by handler, pull and the test thread. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kite_http_stream *h;
    int produced, sent, pulls, n_done;
    bool finish, done, began;
    int64_t tick_at;          /* wake_at deadline (mono ns), 0 = none */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * KITE_NS_PER_SEC + ts.tv_nsec;
}

static int pull(void *ud, struct kite_buf *out) {
    pthread_mutex_lock(&st.lock);
    st.pulls++;
    int rc = 0;
    while (st.sent < st.produced) {
        kite_buf_printf(out, "ev%d\n", st.sent++);
        rc = 1;
    }
    if (st.tick_at && mono_ns() >= st.tick_at) {
        kite_buf_puts(out, "tick\n");
        st.finish = true;
    }
    if (st.finish)
        rc = -1;
    pthread_mutex_unlock(&st.lock);
    return rc;
}

static void done(void *ud) {
    pthread_mutex_lock(&st.lock);
    st.n_done++;
    st.done = true;
    st.h = NULL;
    pthread_cond_broadcast(&st.cond);
    pthread_mutex_unlock(&st.lock);
}

static void handler(struct kite_http_req *r, void *ud) {
    struct kite_http_stream *h;
    kite_http_add_header(r, "X-Stream", "1");
    cr_assert_eq(kite_http_stream_begin(r, 200, "application/json", pull, done, NULL, &h), 0);
    pthread_mutex_lock(&st.lock);
    st.h = h;
    st.began = true;
    if (kite_http_query(r, "tick"))
        st.tick_at = mono_ns() + 150 * KITE_NS_PER_MS;
    if (st.tick_at)
        kite_http_stream_wake_at(h, st.tick_at);
    pthread_cond_broadcast(&st.cond);
    pthread_mutex_unlock(&st.lock);
}

static void setup(void) {
    fx_certs();
    memset(&st.h, 0, sizeof(st) - offsetof(__typeof__(st), h));
    struct kite_http_config cfg = {.handler = handler};
    fx_start(&cfg);
}

/* A client reading the stream on its own thread. */
struct client {
    pthread_t th;
    CURL *c;
    char *url;
    struct kite_buf body;
    int abort_after;          /* >0: abort the transfer once this many bytes arrived */
    CURLcode rc;
    long code;
};

static size_t client_write(char *p, size_t sz, size_t n, void *ud) {
    struct client *cl = ud;
    pthread_mutex_lock(&st.lock);
    kite_buf_append(&cl->body, p, sz * n);
    pthread_cond_broadcast(&st.cond);
    bool abort_now = cl->abort_after && cl->body.len >= (size_t)cl->abort_after;
    pthread_mutex_unlock(&st.lock);
    return abort_now ? 0 : sz * n;
}

static void *client_main(void *arg) {
    struct client *cl = arg;
    cl->rc = curl_easy_perform(cl->c);
    curl_easy_getinfo(cl->c, CURLINFO_RESPONSE_CODE, &cl->code);
    return NULL;
}

static void client_start(struct client *cl, const char *path) {
    cl->c = fx_curl();
    cl->url = kite_asprintf("%s%s", fx.base, path);
    curl_easy_setopt(cl->c, CURLOPT_URL, cl->url);
    curl_easy_setopt(cl->c, CURLOPT_WRITEFUNCTION, client_write);
    curl_easy_setopt(cl->c, CURLOPT_WRITEDATA, cl);
    kite_buf_puts(&cl->body, "");
    pthread_create(&cl->th, NULL, client_main, cl);
}

static void client_join(struct client *cl) {
    pthread_join(cl->th, NULL);
    curl_easy_cleanup(cl->c);
    free(cl->url);
    kite_buf_release(&cl->body);
}

/* Waits (≤ 5 s) until cond() holds, st.lock held by the caller. */
#define WAIT_FOR(pred)                                                                  \
    do {                                                                                \
        struct timespec ts_;                                                            \
        clock_gettime(CLOCK_REALTIME, &ts_);                                            \
        ts_.tv_sec += 5;                                                                \
        const char *what_ = #pred;                                                      \
        while (!(pred)) {                                                               \
            int rc_ = pthread_cond_timedwait(&st.cond, &st.lock, &ts_);                 \
            cr_assert_eq(rc_, 0, "timeout waiting for %s", what_);                      \
        }                                                                               \
    } while (0)

TestSuite(stream, .init = setup, .fini = fx_cleanup, .timeout = 30);

Test(stream, events_arrive_per_wake_then_clean_finish) {
    struct client cl = {0};
    client_start(&cl, "/watch");
    pthread_mutex_lock(&st.lock);
    WAIT_FOR(st.began);
    for (int i = 0; i < 4; i++) {
        st.produced++;
        struct kite_http_stream *h = st.h;
        pthread_mutex_unlock(&st.lock);
        kite_http_stream_wake(h);
        kite_http_stream_wake(h); /* repeated wakes are harmless */
        pthread_mutex_lock(&st.lock);
        char want[16];
        snprintf(want, sizeof(want), "ev%d\n", i);
        /* Each event is flushed on its own: the client sees it before the next is produced. */
        WAIT_FOR(strstr(cl.body.p, want));
    }
    st.finish = true;
    struct kite_http_stream *h = st.h;
    pthread_mutex_unlock(&st.lock);
    kite_http_stream_wake(h);
    pthread_mutex_lock(&st.lock);
    WAIT_FOR(st.done);
    pthread_mutex_unlock(&st.lock);
    pthread_join(cl.th, NULL);
    cr_assert_eq(cl.rc, CURLE_OK);
    cr_assert_eq(cl.code, 200);
    cr_assert_str_eq(cl.body.p, "ev0\nev1\nev2\nev3\n");
    cr_assert_eq(st.n_done, 1);
    struct curl_header *xh;
    cr_assert_eq(curl_easy_header(cl.c, "Transfer-Encoding", 0, CURLH_HEADER, -1, &xh), CURLHE_OK);
    cr_assert_str_eq(xh->value, "chunked");
    cr_assert_eq(curl_easy_header(cl.c, "X-Stream", 0, CURLH_HEADER, -1, &xh), CURLHE_OK);
    /* The connection stays usable after a finished stream. */
    struct kite_buf out = {0};
    st.finish = true;
    cr_assert_eq(fx_req(cl.c, "GET", "/again", NULL, NULL, &out), 200);
    long nc = -1;
    curl_easy_getinfo(cl.c, CURLINFO_NUM_CONNECTS, &nc);
    cr_assert_eq(nc, 0);
    kite_buf_release(&out);
    client_join(&cl);
}

Test(stream, wake_at_fires_on_time) {
    struct client cl = {0};
    int64_t t0 = fx_mono_ms();
    client_start(&cl, "/watch?tick=1");
    pthread_mutex_lock(&st.lock);
    WAIT_FOR(st.done);
    pthread_mutex_unlock(&st.lock);
    int64_t elapsed = fx_mono_ms() - t0;
    pthread_join(cl.th, NULL);
    cr_assert_eq(cl.rc, CURLE_OK);
    cr_assert_str_eq(cl.body.p, "tick\n");
    cr_assert_geq(elapsed, 150);
    cr_assert_lt(elapsed, 5000); /* fired at all: a loaded machine (or ASan) delays it, not the timer */
    /* Pulled at the start and at the deadline, not in between. */
    cr_assert_leq(st.pulls, 3, "pulls: %d", st.pulls);
    client_join(&cl);
}

Test(stream, client_disconnect_calls_done) {
    struct client cl = {.abort_after = 4};
    client_start(&cl, "/watch");
    pthread_mutex_lock(&st.lock);
    WAIT_FOR(st.began);
    st.produced++;
    struct kite_http_stream *h = st.h;
    pthread_mutex_unlock(&st.lock);
    kite_http_stream_wake(h);
    pthread_join(cl.th, NULL);
    cr_assert_eq(cl.rc, CURLE_WRITE_ERROR);
    curl_easy_cleanup(cl.c);  /* closes the socket */
    cl.c = NULL;
    pthread_mutex_lock(&st.lock);
    WAIT_FOR(st.done);     /* noticed while suspended, without any wake from us */
    pthread_mutex_unlock(&st.lock);
    usleep(200 * 1000);
    cr_assert_eq(st.n_done, 1);
    free(cl.url);
    kite_buf_release(&cl.body);
}

Test(stream, idle_stream_costs_no_cpu) {
    struct client cl = {0};
    client_start(&cl, "/watch");
    pthread_mutex_lock(&st.lock);
    WAIT_FOR(st.began);
    pthread_mutex_unlock(&st.lock);
    usleep(100 * 1000);
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    int pulls0 = st.pulls;
    sleep(1);
    getrusage(RUSAGE_SELF, &b);
    long us = (b.ru_utime.tv_sec - a.ru_utime.tv_sec) * 1000000L + (b.ru_utime.tv_usec - a.ru_utime.tv_usec) +
              (b.ru_stime.tv_sec - a.ru_stime.tv_sec) * 1000000L + (b.ru_stime.tv_usec - a.ru_stime.tv_usec);
    cr_assert_lt(us, 50000, "idle stream used %ld us of CPU in 1 s", us);
    cr_assert_eq(st.pulls, pulls0, "pull called while idle");
    fx_stop(); /* ends the stream: done() runs and the client's transfer ends */
    cr_assert_eq(st.n_done, 1);
    pthread_join(cl.th, NULL);
    /* Stop closes connections; the final chunk may or may not make it out first. */
    cr_assert(cl.rc == CURLE_OK || cl.rc == CURLE_PARTIAL_FILE || cl.rc == CURLE_RECV_ERROR ||
              cl.rc == CURLE_GOT_NOTHING, "rc %d", cl.rc);
    client_join(&cl);
}

Test(stream, stop_with_many_open_streams) {
    /* Several concurrent streams (each its own connection), then stop. */
    enum { N = 5 };
    struct client cl[N];
    memset(cl, 0, sizeof(cl));
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&st.lock);
        st.began = false;
        pthread_mutex_unlock(&st.lock);
        client_start(&cl[i], "/watch");
        pthread_mutex_lock(&st.lock);
        WAIT_FOR(st.began);
        pthread_mutex_unlock(&st.lock);
    }
    /* st tracks only the last stream; stop must end all of them and return. */
    fx_stop();
    cr_assert_eq(st.n_done, N);
    for (int i = 0; i < N; i++) {
        pthread_join(cl[i].th, NULL);
        client_join(&cl[i]);
    }
}
