/* kite http server: worker threads, the listener, timeouts, start and stop.
 *
 * Each worker has its own epoll set and the connections assigned to it; worker 0 also accepts
 * and hands new connections out round-robin. A worker sleeps in epoll_wait until a socket, its
 * mailbox (eventfd) or the next stream deadline needs it, and sweeps idle and slow connections
 * once a second. */
#include "http/http-internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE"
#define EVENTS_PER_WAIT 128
#define ACCEPTS_PER_WAKE 64
#define LINGER_NS (2 * KITE_NS_PER_SEC) /* how long a closing connection's input is drained */
#define TRIM_AFTER_BYTES (4u * 1024 * 1024) /* body bytes freed by a worker before it trims (sweep) */

static char listener_tag;
__thread struct worker *kite_http_tl_worker;

/* ---- mailbox ---- */

void kite_http_worker_kick(struct worker *w) {
    if (atomic_exchange(&w->mb_kicked, true))
        return;
    uint64_t one = 1;
    ssize_t n = write(w->evfd, &one, sizeof(one));
    (void)n; /* EAGAIN: the counter is saturated, a wakeup is pending anyway */
}

/* ---- workers ---- */

static void accept_some(struct worker *w) {
    struct kite_http_server *srv = w->srv;
    for (int i = 0; i < ACCEPTS_PER_WAKE; i++) {
        if (atomic_load(&srv->n_conns) >= srv->max_conns || atomic_load(&srv->stopping)) {
            /* at the limit: new clients wait in the backlog until a connection closes */
            epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
            w->accepting = false;
            return;
        }
        int fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: pause; the sweep resumes accepting */
                epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
                w->accepting = false;
            }
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn *c = kite_http_conn_new(srv, fd);
        if (!c) {
            close(fd);
            continue;
        }
        atomic_fetch_add(&srv->n_conns, 1);
        struct worker *to = &srv->workers[atomic_fetch_add(&srv->next_worker, 1) % srv->n_workers];
        if (to == w) {
            kite_http_conn_attach(w, c);
        } else {
            c->w = to;
            pthread_mutex_lock(&to->mb_lock);
            c->is_new = true;
            c->in_mb = true;
            if (to->mb_tail) to->mb_tail->mb_next = c;
            else to->mb_head = c;
            to->mb_tail = c;
            pthread_mutex_unlock(&to->mb_lock);
            kite_http_worker_kick(to);
        }
    }
}

static void maybe_resume_accept(struct worker *w) {
    struct kite_http_server *srv = w->srv;
    if (w->idx != 0 || w->accepting || atomic_load(&srv->stopping) || atomic_load(&srv->n_conns) >= srv->max_conns)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listener_tag};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, srv->lfd, &ev) == 0) w->accepting = true;
}

/* Idle and slow clients (not streams, not requests with the handler). */
static void sweep(struct worker *w, int64_t now) {
    struct kite_http_server *srv = w->srv;
    /* Large bodies were freed on this thread: without this the allocator keeps their pages
     * (hundreds of MB after a burst of uploads) until the thread allocates a lot again. */
    if (w->freed_bodies >= TRIM_AFTER_BYTES) {
        kite_mem_trim();
        w->freed_bodies = 0;
    }
    int64_t idle = (int64_t)srv->idle_timeout_s * KITE_NS_PER_SEC;
    int64_t head_max = (int64_t)srv->header_timeout_s * KITE_NS_PER_SEC;
    int64_t read_max = (int64_t)srv->read_timeout_s * KITE_NS_PER_SEC;
    bool stopping = atomic_load(&srv->stopping);
    for (struct conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == C_STREAMING || c->state == C_DISPATCHED || c->state == C_TUNNEL) continue;
        if (c->state == C_H2) {
            kite_http_h2_sweep(c, now, stopping);
            continue;
        }
        if (c->state == C_LINGER) {
            if (now - c->last_active_ns > LINGER_NS || stopping) kite_http_conn_free(c);
            continue;
        }
        bool between = c->state == C_READING && c->in_off == c->in.len && !c->rp.begun;
        bool slow = c->state == C_READING && c->req_start_ns &&
                    now - c->req_start_ns > (c->rp.head_done ? read_max : head_max);
        if (slow || now - c->last_active_ns > idle || (stopping && between)) kite_http_conn_free(c);
        else if (between) kite_http_conn_trim(c);
    }
}

/* On stop: streams end cleanly, idle connections close. */
static void worker_stop_streams(struct worker *w) {
    for (struct conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == C_H2) {
            kite_http_h2_stop(c);
        } else if (c->state == C_TUNNEL) {
            shutdown(c->fd, SHUT_RDWR); /* the owner sees the end and closes its tunnel */
        } else if (c->state == C_STREAMING) {
            c->rp.keep_alive = false;
            c->close_after = true;
            kite_http_conn_drive(c, false); /* stream_run sees stopping and finishes */
        }
    }
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct kite_http_server *srv = w->srv;
    kite_http_tl_worker = w;
    struct epoll_event evs[EVENTS_PER_WAIT];
    int64_t last_sweep = http_now_ns();
    bool saw_stop = false;
    for (;;) {
        int64_t now = http_now_ns();
        int timeout = 1000 - (int)((now - last_sweep) / KITE_NS_PER_MS);
        if (timeout < 0) timeout = 0;
        int t = kite_http_stream_timers(w, now);
        if (t >= 0 && t < timeout) timeout = t;
        int n = epoll_wait(w->ep, evs, EVENTS_PER_WAIT, timeout);
        bool mail = false;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == NULL) {
                uint64_t v;
                ssize_t k = read(w->evfd, &v, sizeof(v));
                (void)k;
                mail = true;
            } else if (p == &listener_tag) {
                accept_some(w);
            } else {
                struct conn *c = p;
                if (c->fd < 0) continue;
                if (c->peer_eof && (evs[i].events & (EPOLLERR | EPOLLHUP))) {
                    kite_http_conn_close(c); /* half-closed, and now gone: nobody reads an answer */
                    continue;
                }
                kite_http_conn_drive(c, true);
            }
        }
        if (mail) {
            atomic_store(&w->mb_kicked, false);
            pthread_mutex_lock(&w->mb_lock);
            struct conn *list = w->mb_head;
            w->mb_head = w->mb_tail = NULL;
            bool quit = w->mb_quit;
            pthread_mutex_unlock(&w->mb_lock);
            while (list) {
                pthread_mutex_lock(&w->mb_lock);
                struct conn *c = list;
                list = c->mb_next;
                c->in_mb = false;
                bool is_new = c->is_new;
                c->is_new = false;
                pthread_mutex_unlock(&w->mb_lock);
                kite_http_conn_service(w, c, is_new);
            }
            if (atomic_load(&srv->stopping) && !saw_stop) {
                saw_stop = true;
                if (w->idx == 0 && w->accepting) {
                    epoll_ctl(w->ep, EPOLL_CTL_DEL, srv->lfd, NULL);
                    w->accepting = false;
                }
                worker_stop_streams(w);
                sweep(w, http_now_ns());
            }
            if (quit) break;
            maybe_resume_accept(w);
        }
        now = http_now_ns();
        if (now - last_sweep >= KITE_NS_PER_SEC) {
            last_sweep = now;
            sweep(w, now);
            maybe_resume_accept(w);
        }
    }
    /* Quit: n_pending is 0, so no connection waits for an answer. */
    while (w->conns) kite_http_conn_free(w->conns);
    pthread_mutex_lock(&w->mb_lock);
    struct conn *list = w->mb_head;
    w->mb_head = w->mb_tail = NULL;
    pthread_mutex_unlock(&w->mb_lock);
    while (list) {
        struct conn *c = list;
        list = c->mb_next;
        c->in_mb = false;
        if (c->is_new) {
            c->is_new = false;
            c->w = w;
            w->n_conns++; /* conn_free counts it out */
        }
        kite_http_conn_free(c);
    }
    return NULL;
}

/* ---- daemon ---- */

static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, bool *dual) {
    memset(ss, 0, sizeof(*ss));
    *dual = false;
    const char *colon = strrchr(listen, ':');
    if (!colon) return -EINVAL;
    int64_t port;
    if (kite_parse_int64(colon + 1, &port) < 0 || port < 0 || port > 65535) return -EINVAL;
    _cleanup_free_ char *host = kite_strndup(listen, (size_t)(colon - listen));
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    if (host[0] == 0 || kite_streq(host, "::") || kite_streq(host, "*")) {
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_any;
        s6->sin6_port = htons((uint16_t)port);
        *sl = sizeof(*s6);
        *dual = true;
        return 0;
    }
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *sl = sizeof(*s4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *sl = sizeof(*s6);
        return 0;
    }
    return -EINVAL;
}

static int open_listener(const char *addr, uint16_t *port) {
    struct sockaddr_storage ss;
    socklen_t sl;
    bool dual;
    int rc = parse_listen(addr, &ss, &sl, &dual);
    if (rc < 0) return rc;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? &zero : &one, sizeof(int));
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    getsockname(fd, (struct sockaddr *)&bound, &bl);
    *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
    return fd;
}

static void free_server(struct kite_http_server *srv) {
    for (unsigned i = 0; i < srv->n_workers; i++) {
        struct worker *w = &srv->workers[i];
        if (w->ep >= 0) close(w->ep);
        if (w->evfd >= 0) close(w->evfd);
        pthread_mutex_destroy(&w->mb_lock);
        free(w->heap.a);
    }
    free(srv->workers);
    if (srv->lfd >= 0) close(srv->lfd);
    kite_http_auth_free_tokens(srv);
    if (srv->prio) gnutls_priority_deinit(srv->prio);
    if (srv->cred) gnutls_certificate_free_credentials(srv->cred);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    free(srv);
}

static int setup_tls(struct kite_http_server *srv, const struct kite_http_config *cfg) {
    if (gnutls_certificate_allocate_credentials(&srv->cred) < 0) return -ENOMEM;
    gnutls_datum_t cert = {(unsigned char *)cfg->cert_pem, (unsigned)strlen(cfg->cert_pem)};
    gnutls_datum_t key = {(unsigned char *)cfg->key_pem, (unsigned)strlen(cfg->key_pem)};
    if (gnutls_certificate_set_x509_key_mem(srv->cred, &cert, &key, GNUTLS_X509_FMT_PEM) < 0) return -EINVAL;
    if (cfg->client_ca_pem) {
        gnutls_datum_t ca = {(unsigned char *)cfg->client_ca_pem, (unsigned)strlen(cfg->client_ca_pem)};
        if (gnutls_certificate_set_x509_trust_mem(srv->cred, &ca, GNUTLS_X509_FMT_PEM) <= 0) return -EINVAL;
        srv->client_ca = true;
    }
    if (gnutls_priority_init(&srv->prio, TLS_PRIORITIES, NULL) < 0) return -EINVAL;
    return 0;
}

int kite_http_start(const struct kite_http_config *cfg, struct kite_http_server **ret) {
    if (!cfg->handler || !cfg->cert_pem || !cfg->key_pem || !cfg->listen) return -EINVAL;
    struct kite_http_server *srv = kite_calloc(1, sizeof(*srv));
    srv->lfd = -1;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    srv->handler = cfg->handler;
    srv->admit = cfg->admit;
    srv->ud = cfg->ud;
    srv->http2 = !cfg->disable_http2;
    srv->max_body = cfg->max_body ? cfg->max_body : KITE_HTTP_DEFAULT_MAX_BODY;
    srv->max_head = cfg->max_header_bytes ? cfg->max_header_bytes : KITE_HTTP_DEFAULT_MAX_HEADER_BYTES;
    srv->max_conns = cfg->max_connections ? cfg->max_connections : KITE_HTTP_DEFAULT_MAX_CONNECTIONS;
    srv->idle_timeout_s = cfg->idle_timeout_s ? cfg->idle_timeout_s : KITE_HTTP_DEFAULT_IDLE_TIMEOUT_S;
    srv->header_timeout_s = cfg->header_timeout_s ? cfg->header_timeout_s : KITE_HTTP_DEFAULT_HEADER_TIMEOUT_S;
    srv->read_timeout_s = cfg->read_timeout_s ? cfg->read_timeout_s : KITE_HTTP_DEFAULT_READ_TIMEOUT_S;
    int rc;
    if ((rc = setup_tls(srv, cfg)) < 0) goto fail;
    if (cfg->token_file && (rc = kite_http_auth_load_tokens(srv, cfg->token_file)) < 0) goto fail;
    if ((rc = open_listener(cfg->listen, &srv->port)) < 0) goto fail;
    srv->lfd = rc;

    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    srv->n_workers = cfg->threads ? cfg->threads : (unsigned)(ncpu > 0 ? ncpu : 1);
    srv->workers = kite_calloc(srv->n_workers, sizeof(*srv->workers));
    for (unsigned i = 0; i < srv->n_workers; i++) {
        struct worker *w = &srv->workers[i];
        w->srv = srv;
        w->idx = i;
        pthread_mutex_init(&w->mb_lock, NULL);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->ep < 0 || w->evfd < 0) {
            rc = -errno;
            srv->n_workers = i + 1;
            goto fail;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(w->ep, EPOLL_CTL_ADD, w->evfd, &ev);
    }
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &listener_tag};
    epoll_ctl(srv->workers[0].ep, EPOLL_CTL_ADD, srv->lfd, &lev);
    srv->workers[0].accepting = true;
    for (unsigned i = 0; i < srv->n_workers; i++) {
        if ((rc = pthread_create(&srv->workers[i].thread, NULL, worker_main, &srv->workers[i])) != 0) {
            rc = -rc;
            atomic_store(&srv->stopping, true);
            for (unsigned j = 0; j < i; j++) {
                pthread_mutex_lock(&srv->workers[j].mb_lock);
                srv->workers[j].mb_quit = true;
                pthread_mutex_unlock(&srv->workers[j].mb_lock);
                kite_http_worker_kick(&srv->workers[j]);
                pthread_join(srv->workers[j].thread, NULL);
            }
            goto fail;
        }
        pthread_setname_np(srv->workers[i].thread, "http-worker");
    }
    *ret = srv;
    return 0;
fail:
    if (srv->workers)
        for (unsigned i = 0; i < srv->n_workers; i++) {
            if (!srv->workers[i].ep) srv->workers[i].ep = -1;
            if (!srv->workers[i].evfd) srv->workers[i].evfd = -1;
        }
    free_server(srv);
    return rc;
}

uint16_t kite_http_port(struct kite_http_server *s) {
    return s->port;
}

void kite_http_stop(struct kite_http_server *srv) {
    if (!srv) return;
    /* Stop accepting and end streams (on their workers), then wait for deferred answers. */
    atomic_store(&srv->stopping, true);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        atomic_store(&srv->workers[i].mb_kicked, false);
        kite_http_worker_kick(&srv->workers[i]);
    }
    pthread_mutex_lock(&srv->lock);
    while (atomic_load(&srv->n_pending) > 0) pthread_cond_wait(&srv->cond, &srv->lock);
    pthread_mutex_unlock(&srv->lock);
    for (unsigned i = 0; i < srv->n_workers; i++) {
        struct worker *w = &srv->workers[i];
        pthread_mutex_lock(&w->mb_lock);
        w->mb_quit = true;
        pthread_mutex_unlock(&w->mb_lock);
        atomic_store(&w->mb_kicked, false);
        kite_http_worker_kick(w);
    }
    for (unsigned i = 0; i < srv->n_workers; i++) pthread_join(srv->workers[i].thread, NULL);
    free_server(srv);
}
