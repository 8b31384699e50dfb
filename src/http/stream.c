/* kite http streams: chunked responses pulled on the connection's worker.
 *
 * A stream is pulled only when its connection has sent everything queued, so a client that
 * reads slowly is never buffered for beyond one pull. An idle stream costs nothing: its socket
 * stays in the worker's epoll set (which also tells when the client goes away) and nothing
 * else runs for it until kite_http_stream_wake (from any thread, through the worker's
 * mailbox) or its wake_at deadline (a binary heap per worker bounds the epoll_wait timeout).
 *
 * Lifetime: the stream belongs to its connection's worker, which calls done() exactly once
 * (stream finished, client gone, server stopping) and frees the stream after it returns.
 * Calls from other threads check `ended` under the stream lock, so they become no-ops once
 * done() is under way; the caller guarantees none starts after done() returned. */
#include "http/http-internal.h"

#include "base/clock.h"

#include <sys/socket.h>
#include <time.h>

#define STREAM_BUF_KEEP (256u * 1024) /* pull buffers above this are freed after use */
#define STREAM_BUDGET (256u * 1024)   /* bytes per turn before other connections get theirs */
#define HEAP_NONE SIZE_MAX

struct kite_http_stream {
    pthread_mutex_t lock;
    struct conn *c;
    struct h2s *h2;       /* the HTTP/2 stream it answers, NULL on HTTP/1.1 */
    kite_http_pull pull;
    void (*done)(void *ud);
    void *ud;
    /* under lock */
    bool ended, woken, aborted, in_pull, deadline_set;
    int64_t deadline_req;
    /* worker only */
    bool chunked, finishing;
    int64_t deadline;
    size_t heap_idx;
    struct kite_buf buf;
};

struct kite_http_stream *kite_http_stream_new(struct conn *c, kite_http_pull pull, void (*done)(void *ud), void *ud) {
    struct kite_http_stream *s = kite_calloc(1, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    s->c = c;
    s->pull = pull;
    s->done = done;
    s->ud = ud;
    s->woken = true; /* the first pull comes unasked */
    s->chunked = c->rp.hp.http_major == 1 && c->rp.hp.http_minor >= 1;
    s->heap_idx = HEAP_NONE;
    return s;
}

struct kite_http_stream *kite_http_stream_new_h2(struct conn *c, struct h2s *h, kite_http_pull pull, void (*done)(void *ud),
                                       void *ud) {
    struct kite_http_stream *s = kite_calloc(1, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    s->c = c;
    s->h2 = h;
    s->pull = pull;
    s->done = done;
    s->ud = ud;
    s->woken = true;
    s->heap_idx = HEAP_NONE;
    return s;
}

/* Has the worker look at s (stream.lock held): an HTTP/2 stream is one of many on its
 * connection, so it says which. */
static void stream_kick(struct kite_http_stream *s) {
    if (s->h2) kite_http_h2_kick(s->h2);
    else kite_http_conn_kick(s->c);
}

void kite_http_stream_free(struct kite_http_stream *s) {
    kite_buf_release(&s->buf);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* ---- deadline heap (worker only) ---- */

static void heap_set(struct stream_heap *h, size_t i, struct kite_http_stream *s) {
    h->a[i] = s;
    s->heap_idx = i;
}

static void heap_up(struct stream_heap *h, size_t i) {
    struct kite_http_stream *s = h->a[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->a[p]->deadline <= s->deadline) break;
        heap_set(h, i, h->a[p]);
        i = p;
    }
    heap_set(h, i, s);
}

static void heap_down(struct stream_heap *h, size_t i) {
    struct kite_http_stream *s = h->a[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->a[c + 1]->deadline < h->a[c]->deadline) c++;
        if (s->deadline <= h->a[c]->deadline) break;
        heap_set(h, i, h->a[c]);
        i = c;
    }
    heap_set(h, i, s);
}

static void heap_remove(struct stream_heap *h, struct kite_http_stream *s) {
    size_t i = s->heap_idx;
    if (i == HEAP_NONE) return;
    s->heap_idx = HEAP_NONE;
    struct kite_http_stream *last = h->a[--h->n];
    if (i == h->n) return;
    heap_set(h, i, last);
    heap_up(h, i);
    heap_down(h, last->heap_idx);
}

static void heap_push(struct stream_heap *h, struct kite_http_stream *s) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 16;
        h->a = kite_realloc(h->a, h->cap * sizeof(*h->a));
    }
    heap_set(h, h->n++, s);
    heap_up(h, s->heap_idx);
}

void kite_http_stream_sync_deadline(struct conn *c) {
    if (c->stream) kite_http_stream_sync_s(c->w, c->stream);
}

void kite_http_stream_sync_s(struct worker *w, struct kite_http_stream *s) {
    pthread_mutex_lock(&s->lock);
    bool set = s->deadline_set;
    int64_t d = s->deadline_req;
    s->deadline_set = false;
    pthread_mutex_unlock(&s->lock);
    if (!set) return;
    heap_remove(&w->heap, s);
    s->deadline = d;
    heap_push(&w->heap, s);
}

int kite_http_stream_timers(struct worker *w, int64_t now_ns) {
    struct stream_heap *h = &w->heap;
    while (h->n && h->a[0]->deadline <= now_ns) {
        struct kite_http_stream *s = h->a[0];
        heap_remove(h, s);
        pthread_mutex_lock(&s->lock);
        s->woken = true;
        stream_kick(s); /* runs it from the mailbox, like any wake */
        pthread_mutex_unlock(&s->lock);
    }
    if (!h->n) return -1;
    int64_t d = h->a[0]->deadline - now_ns;
    return (int)KITE_MIN((d + KITE_NS_PER_MS - 1) / KITE_NS_PER_MS, INT64_C(3600000));
}

/* ---- the public calls (any thread) ---- */

void kite_http_stream_wake(struct kite_http_stream *s) {
    pthread_mutex_lock(&s->lock);
    if (!s->ended) {
        s->woken = true;
        if (!s->in_pull) stream_kick(s); /* during pull the worker looks at woken afterwards */
    }
    pthread_mutex_unlock(&s->lock);
}

void kite_http_stream_abort(struct kite_http_stream *s) {
    pthread_mutex_lock(&s->lock);
    if (!s->ended) {
        /* Shutting the socket down is what reaches a client that stopped reading: its stream
         * would never be pulled again while the send buffer stays full. */
        s->aborted = true;
        /* HTTP/2: the stream alone is reset (h2.c), and done() follows at once, whether or
         * not the client reads */
        if (!s->h2) shutdown(s->c->fd, SHUT_RDWR);
        if (!s->in_pull) stream_kick(s);
    }
    pthread_mutex_unlock(&s->lock);
}

void kite_http_stream_wake_at(struct kite_http_stream *s, int64_t mono_ns) {
    pthread_mutex_lock(&s->lock);
    if (!s->ended) {
        s->deadline_req = mono_ns;
        s->deadline_set = true;
        if (!s->in_pull) stream_kick(s);
    }
    pthread_mutex_unlock(&s->lock);
}

/* ---- the worker side ---- */

void kite_http_stream_end(struct conn *c) {
    struct kite_http_stream *s = c->stream;
    c->stream = NULL;
    kite_http_stream_end_s(c->w, s);
}

void kite_http_stream_end_s(struct worker *w, struct kite_http_stream *s) {
    pthread_mutex_lock(&s->lock);
    s->ended = true;
    pthread_mutex_unlock(&s->lock);
    heap_remove(&w->heap, s);
    s->done(s->ud);
    kite_http_stream_free(s);
}

bool kite_http_stream_check_h2(struct kite_http_stream *s) {
    kite_http_stream_sync_s(s->c->w, s);
    pthread_mutex_lock(&s->lock);
    bool aborted = s->aborted;
    pthread_mutex_unlock(&s->lock);
    return aborted;
}

int kite_http_stream_pull_h2(struct kite_http_stream *s, struct kite_buf *out) {
    struct worker *w = s->c->w;
    bool stopping = atomic_load(&w->srv->stopping);
    pthread_mutex_lock(&s->lock);
    bool aborted = s->aborted, woken = s->woken;
    s->woken = false;
    s->in_pull = woken && !aborted && !stopping;
    pthread_mutex_unlock(&s->lock);
    kite_http_stream_sync_s(w, s);
    if (aborted) return -2;
    if (stopping) return -1;
    if (!woken) return 0;
    int rc = s->pull(s->ud, out);
    pthread_mutex_lock(&s->lock);
    s->in_pull = false;
    if (rc > 0) s->woken = true; /* "call again when you can send" */
    bool again = s->woken;        /* or woken during the pull */
    /* aborted during the pull: the abort skipped its kick (in_pull), and with bytes queued
     * that a client is not reading nothing else would bring the stream back to its reset */
    if (s->aborted) stream_kick(s);
    pthread_mutex_unlock(&s->lock);
    kite_http_stream_sync_s(w, s);
    return rc < 0 ? -1 : again ? 1 : 0;
}

static void finish(struct kite_http_stream *s, struct conn *c) {
    s->finishing = true;
    if (s->chunked) kite_buf_puts(&c->out, "0\r\n\r\n");
}

bool kite_http_stream_run(struct conn *c) {
    struct kite_http_stream *s = c->stream;
    struct kite_http_server *srv = c->w->srv;
    size_t sent = 0;
    for (;;) {
        int f = kite_http_conn_flush(c);
        if (f < 0) return false;
        if (f == 0) return true; /* called again once the socket drains */
        if (s->finishing) {
            bool chunked = s->chunked;
            kite_http_stream_end(c);
            if (!chunked) c->close_after = true;
            c->state = C_RESPONDING; /* nothing left to send: on to the next request */
            return true;
        }
        bool stopping = atomic_load(&srv->stopping);
        pthread_mutex_lock(&s->lock);
        bool aborted = s->aborted, woken = s->woken;
        s->woken = false;
        s->in_pull = woken && !aborted && !stopping && sent < STREAM_BUDGET;
        pthread_mutex_unlock(&s->lock);
        if (aborted) return false;
        if (stopping) {
            finish(s, c);
            continue;
        }
        if (!woken) return true; /* idle until woken */
        if (sent >= STREAM_BUDGET) {
            /* let the worker's other connections have a turn, then go on */
            kite_http_stream_wake(s);
            return true;
        }
        kite_buf_reset(&s->buf);
        int rc = s->pull(s->ud, &s->buf);
        pthread_mutex_lock(&s->lock);
        s->in_pull = false;
        if (rc > 0) s->woken = true; /* "call again when you can send" */
        pthread_mutex_unlock(&s->lock);
        kite_http_stream_sync_deadline(c);
        if (s->buf.len) {
            if (s->chunked) kite_buf_printf(&c->out, "%zx\r\n", s->buf.len);
            kite_buf_append(&c->out, s->buf.p, s->buf.len);
            if (s->chunked) kite_buf_puts(&c->out, "\r\n");
            sent += s->buf.len;
        }
        if (s->buf.cap > STREAM_BUF_KEEP) kite_buf_release(&s->buf);
        if (rc < 0) finish(s, c);
    }
}
