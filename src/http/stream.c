/* kite http streams: chunked responses pulled by MHD, suspended while idle, and the monitor
 * thread that wakes them.
 *
 * A stream's connection is suspended whenever pull has nothing to send, so an idle watch costs
 * no CPU. Three things resume it: kite_http_stream_wake (new data), its wake_at deadline, and
 * the client going away. MHD does not watch suspended sockets, so the monitor thread keeps a
 * private dup of each suspended stream's socket in its own epoll set (EPOLLRDHUP, one-shot)
 * to notice disconnects; deadlines live in a binary heap whose top bounds the epoll_wait
 * timeout. One monitor thread per server; no polling.
 *
 * Lifetime: a stream is reference counted. The MHD response holds one reference (dropped in
 * its free callback, after done()), the epoll registration another (dropped by the monitor
 * thread itself, so an event already returned by epoll_wait never points at freed memory),
 * and the monitor holds a temporary one while it wakes a stream outside its lock. */
#include "http/http-internal.h"

#include <sys/socket.h>
#include "base/clock.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define STREAM_BLOCK (16u * 1024)      /* MHD's buffer per reader call */
#define STREAM_BUF_KEEP (256u * 1024)  /* pending-output buffers above this are freed when drained */
#define MONITOR_BATCH 64
#define HEAP_NONE SIZE_MAX

struct kite_http_stream {
    atomic_int refs;
    pthread_mutex_t lock;
    struct kite_http_server *srv;
    struct MHD_Connection *mc;
    kite_http_pull pull;
    void (*done)(void *ud);
    void *ud;
    struct kite_buf out;      /* MHD thread only */
    size_t out_off;
    bool finishing;           /* pull returned -1: send what is left, then end */
    /* under lock */
    bool suspended, woken, ended, peer_gone, registered;
    int fd;                   /* our dup of the socket, -1 until first suspend */
    /* under monitor lock */
    bool dead;
    size_t heap_idx;
    int64_t deadline;
    struct kite_http_stream *grave_next;
    /* under srv->lock */
    struct kite_http_stream *prev, *next;
};

struct monitor {
    pthread_t thread;
    int ep, evfd;
    pthread_mutex_t lock;
    bool quit;
    struct kite_http_stream **heap;
    size_t n_heap, cap_heap;
    struct kite_http_stream *grave;
};

static void stream_unref(struct kite_http_stream *s) {
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    if (s->fd >= 0)
        close(s->fd);
    kite_buf_release(&s->out);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int64_t mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * KITE_NS_PER_SEC + ts.tv_nsec;
}

static void kick(struct monitor *m) {
    uint64_t one = 1;
    ssize_t n = write(m->evfd, &one, sizeof(one));
    (void)n; /* EAGAIN means a wakeup is already pending: fine */
}

/* ---- deadline heap (monitor lock held) ---- */

static void heap_set(struct monitor *m, size_t i, struct kite_http_stream *s) {
    m->heap[i] = s;
    s->heap_idx = i;
}

static void heap_up(struct monitor *m, size_t i) {
    struct kite_http_stream *s = m->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (m->heap[p]->deadline <= s->deadline)
            break;
        heap_set(m, i, m->heap[p]);
        i = p;
    }
    heap_set(m, i, s);
}

static void heap_down(struct monitor *m, size_t i) {
    struct kite_http_stream *s = m->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->n_heap)
            break;
        if (c + 1 < m->n_heap && m->heap[c + 1]->deadline < m->heap[c]->deadline)
            c++;
        if (s->deadline <= m->heap[c]->deadline)
            break;
        heap_set(m, i, m->heap[c]);
        i = c;
    }
    heap_set(m, i, s);
}

static void heap_remove(struct monitor *m, struct kite_http_stream *s) {
    size_t i = s->heap_idx;
    if (i == HEAP_NONE)
        return;
    s->heap_idx = HEAP_NONE;
    struct kite_http_stream *last = m->heap[--m->n_heap];
    if (i == m->n_heap)
        return;
    heap_set(m, i, last);
    heap_up(m, i);
    heap_down(m, last->heap_idx);
}

/* ---- waking ---- */

void kite_http_stream_wake(struct kite_http_stream *s) {
    /* The resume happens under the stream lock so that kite_http_stop, which wakes every
     * stream before stopping MHD, never races a half-done resume from another thread. */
    pthread_mutex_lock(&s->lock);
    if (!s->ended) {
        s->woken = true;
        if (s->suspended) {
            s->suspended = false;
            MHD_resume_connection(s->mc);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void kite_http_stream_abort(struct kite_http_stream *s) {
    pthread_mutex_lock(&s->lock);
    if (!s->ended) {
        /* Shutting the socket down is what reaches a client that stopped reading: MHD would
         * never call pull again for a connection whose send buffer stays full. */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(s->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
        s->woken = true;
        if (s->suspended) {
            s->suspended = false;
            MHD_resume_connection(s->mc);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

void kite_http_stream_wake_at(struct kite_http_stream *s, int64_t mono_ns) {
    struct monitor *m = s->srv->mon;
    pthread_mutex_lock(&m->lock);
    if (!s->dead) {
        s->deadline = mono_ns;
        if (s->heap_idx == HEAP_NONE) {
            if (m->n_heap == m->cap_heap) {
                m->cap_heap = m->cap_heap ? 2 * m->cap_heap : 16;
                m->heap = kite_realloc(m->heap, m->cap_heap * sizeof(*m->heap));
            }
            heap_set(m, m->n_heap++, s);
        }
        heap_up(m, s->heap_idx);
        heap_down(m, s->heap_idx);
        if (s->heap_idx == 0)
            kick(m);
    }
    pthread_mutex_unlock(&m->lock);
}

static void peer_gone(struct kite_http_stream *s) {
    pthread_mutex_lock(&s->lock);
    s->peer_gone = true;
    pthread_mutex_unlock(&s->lock);
    kite_http_stream_wake(s);
}

/* ---- the monitor thread ---- */

struct due {
    struct kite_http_stream *s;
    bool hup;
};

static void *monitor_main(void *arg) {
    struct monitor *m = arg;
    struct epoll_event evs[MONITOR_BATCH];
    struct due *due = NULL;
    size_t n_due = 0, cap_due = 0;
    pthread_mutex_lock(&m->lock);
    while (!m->quit) {
        /* Registrations removed before this epoll_wait cannot show up in it. */
        while (m->grave) {
            struct kite_http_stream *s = m->grave;
            m->grave = s->grave_next;
            stream_unref(s);
        }
        int timeout = -1;
        if (m->n_heap) {
            int64_t d = m->heap[0]->deadline - mono_now();
            timeout = d <= 0 ? 0 : (int)KITE_MIN((d + KITE_NS_PER_MS - 1) / KITE_NS_PER_MS, INT64_C(3600000));
        }
        pthread_mutex_unlock(&m->lock);
        int n = epoll_wait(m->ep, evs, MONITOR_BATCH, timeout);
        pthread_mutex_lock(&m->lock);
        n_due = 0;
        for (int i = 0; i < n; i++) {
            struct kite_http_stream *s = evs[i].data.ptr;
            if (!s) {
                uint64_t v;
                ssize_t r = read(m->evfd, &v, sizeof(v));
                (void)r;
                continue;
            }
            if (s->dead)
                continue;
            if (n_due == cap_due) {
                cap_due = cap_due ? 2 * cap_due : 64;
                due = kite_realloc(due, cap_due * sizeof(*due));
            }
            atomic_fetch_add(&s->refs, 1);
            due[n_due++] = (struct due){s, true};
        }
        int64_t now = mono_now();
        while (m->n_heap && m->heap[0]->deadline <= now) {
            struct kite_http_stream *s = m->heap[0];
            heap_remove(m, s);
            if (n_due == cap_due) {
                cap_due = cap_due ? 2 * cap_due : 64;
                due = kite_realloc(due, cap_due * sizeof(*due));
            }
            atomic_fetch_add(&s->refs, 1);
            due[n_due++] = (struct due){s, false};
        }
        pthread_mutex_unlock(&m->lock);
        for (size_t i = 0; i < n_due; i++) {
            if (due[i].hup)
                peer_gone(due[i].s);
            else
                kite_http_stream_wake(due[i].s);
            stream_unref(due[i].s);
        }
        pthread_mutex_lock(&m->lock);
    }
    while (m->grave) {
        struct kite_http_stream *s = m->grave;
        m->grave = s->grave_next;
        stream_unref(s);
    }
    pthread_mutex_unlock(&m->lock);
    free(due);
    return NULL;
}

int monitor_start(struct monitor **ret) {
    struct monitor *m = kite_calloc(1, sizeof(*m));
    m->ep = epoll_create1(EPOLL_CLOEXEC);
    m->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->ep < 0 || m->evfd < 0) {
        int e = -errno;
        if (m->ep >= 0) close(m->ep);
        if (m->evfd >= 0) close(m->evfd);
        free(m);
        return e;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(m->ep, EPOLL_CTL_ADD, m->evfd, &ev);
    pthread_mutex_init(&m->lock, NULL);
    int rc = pthread_create(&m->thread, NULL, monitor_main, m);
    if (rc != 0) {
        close(m->ep);
        close(m->evfd);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return -rc;
    }
    pthread_setname_np(m->thread, "http-monitor");
    *ret = m;
    return 0;
}

void monitor_stop(struct monitor *m) {
    pthread_mutex_lock(&m->lock);
    m->quit = true;
    kick(m);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    close(m->ep);
    close(m->evfd);
    free(m->heap);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* Watches the (suspended) stream's socket for the peer closing. Stream lock held. */
static void watch_peer(struct kite_http_stream *s) {
    struct monitor *m = s->srv->mon;
    struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.ptr = s};
    if (s->registered) {
        epoll_ctl(m->ep, EPOLL_CTL_MOD, s->fd, &ev);
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(s->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    /* A private dup: the registration then never outlives or confuses a reused fd number. */
    s->fd = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0);
    if (s->fd < 0)
        return; /* out of fds: we lose early disconnect detection, not correctness */
    atomic_fetch_add(&s->refs, 1);
    if (epoll_ctl(m->ep, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
        atomic_fetch_sub(&s->refs, 1);
        return;
    }
    s->registered = true;
}

/* ---- MHD callbacks ---- */

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
    struct kite_http_stream *s = cls;
    struct kite_http_server *srv = s->srv;
    for (;;) {
        if (s->out_off < s->out.len) {
            size_t n = KITE_MIN(max, s->out.len - s->out_off);
            memcpy(buf, s->out.p + s->out_off, n);
            s->out_off += n;
            if (s->out_off == s->out.len) {
                if (s->out.cap > STREAM_BUF_KEEP)
                    kite_buf_release(&s->out);
                kite_buf_reset(&s->out);
                s->out_off = 0;
            }
            return (ssize_t)n;
        }
        if (s->finishing)
            return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&s->lock);
        bool gone = s->peer_gone, stopping = atomic_load(&srv->stopping);
        s->woken = false;
        pthread_mutex_unlock(&s->lock);
        if (gone)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (stopping)
            return MHD_CONTENT_READER_END_OF_STREAM;

        int rc = s->pull(s->ud, &s->out);
        if (rc < 0)
            s->finishing = true;
        if (rc < 0 || s->out_off < s->out.len)
            continue;

        /* Nothing to send: suspend unless a wake arrived while pull ran. */
        pthread_mutex_lock(&s->lock);
        if (s->woken || s->peer_gone || atomic_load(&srv->stopping)) {
            pthread_mutex_unlock(&s->lock);
            continue;
        }
        s->suspended = true;
        watch_peer(s);
        MHD_suspend_connection(s->mc);
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
}

static void stream_free_cb(void *cls) {
    struct kite_http_stream *s = cls;
    struct kite_http_server *srv = s->srv;
    struct monitor *m = srv->mon;
    pthread_mutex_lock(&s->lock);
    s->ended = true;
    s->suspended = false;
    bool registered = s->registered;
    pthread_mutex_unlock(&s->lock);

    pthread_mutex_lock(&m->lock);
    s->dead = true;
    heap_remove(m, s);
    if (registered) {
        epoll_ctl(m->ep, EPOLL_CTL_DEL, s->fd, NULL);
        s->grave_next = m->grave;
        m->grave = s;
        kick(m);
    }
    pthread_mutex_unlock(&m->lock);

    pthread_mutex_lock(&srv->lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        srv->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&srv->lock);

    s->done(s->ud);
    stream_unref(s);
}

struct MHD_Response *stream_response(struct kite_http_server *srv, struct MHD_Connection *mc, kite_http_pull pull,
                                     void (*done)(void *ud), void *ud, struct kite_http_stream **ret) {
    struct kite_http_stream *s = kite_calloc(1, sizeof(*s));
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->lock, NULL);
    s->srv = srv;
    s->mc = mc;
    s->pull = pull;
    s->done = done;
    s->ud = ud;
    s->fd = -1;
    s->heap_idx = HEAP_NONE;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, reader, s, stream_free_cb);
    if (!resp) {
        stream_unref(s);
        return NULL;
    }
    pthread_mutex_lock(&srv->lock);
    s->next = srv->streams;
    if (s->next)
        s->next->prev = s;
    srv->streams = s;
    pthread_mutex_unlock(&srv->lock);
    if (ret)
        *ret = s;
    return resp;
}

void streams_stop_all(struct kite_http_server *srv) {
    pthread_mutex_lock(&srv->lock);
    size_t n = 0;
    for (struct kite_http_stream *s = srv->streams; s; s = s->next)
        n++;
    struct kite_http_stream **all = kite_calloc(n ? n : 1, sizeof(*all));
    n = 0;
    for (struct kite_http_stream *s = srv->streams; s; s = s->next) {
        atomic_fetch_add(&s->refs, 1);
        all[n++] = s;
    }
    pthread_mutex_unlock(&srv->lock);
    for (size_t i = 0; i < n; i++) {
        kite_http_stream_wake(all[i]);
        stream_unref(all[i]);
    }
    free(all);
}
