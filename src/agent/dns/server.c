/* The responder: informers keep the Services and EndpointSlices in two maps; one thread polls
 * the UDP socket, the TCP listener and the forwarded queries awaiting their upstream answer.
 * A forwarded query goes out on a socket of its own (the upstream's answer comes back on it, so
 * ids never collide), to the upstreams in order, each given KITE_DNS_FORWARD_TIMEOUT_MS. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/dns/dns.h"
#include "agent/dns/ldns.h"
#include "base/base.h"
#include "base/log.h"
#include "client/informer.h"

#define DNS_LOG "dns"
#define MSG_MAX 65535
#define TCP_TIMEOUT_MS 2000 /* one TCP client's read or write, and a TCP forward */
#define TCP_QUERIES_MAX 8   /* queries served on one TCP connection before it is closed */

struct pending {
    int fd, up;
    struct sockaddr_storage client;
    socklen_t clen;
    uint8_t *query;
    size_t qlen;
    int64_t deadline_ms;
};

struct kite_dns {
    struct kite_dns_zone zone;
    char *domain;
    struct kite_informer *svc_inf, *slice_inf;
    pthread_mutex_t lock;
    json_object *services, *slices; /* under lock */
    bool svc_synced, slices_synced; /* each informer delivered its first list, under lock */
    int udp, tcp, wake;
    char *up[KITE_DNS_UPSTREAMS_MAX];
    struct sockaddr_storage upaddr[KITE_DNS_UPSTREAMS_MAX];
    socklen_t uplen[KITE_DNS_UPSTREAMS_MAX];
    size_t nup;
    struct pending pend[KITE_DNS_PENDING_MAX];
    int npend;
    struct kite_dns_cache *cache; /* forwarded answers (the serving thread's) */
    bool stopping;
    pthread_t thread;
};

static void *memdup(const void *p, size_t n) {
    void *c = kite_malloc(n);
    memcpy(c, p, n);
    return c;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void changed(struct kite_dns *d, json_object *map, json_object *obj, bool del) {
    _cleanup_free_ char *key = kite_informer_key(obj);
    if (!key) return;
    pthread_mutex_lock(&d->lock);
    if (del) json_object_object_del(map, key);
    else json_object_object_add(map, key, json_object_get(obj));
    pthread_mutex_unlock(&d->lock);
}
static void svc_add(void *ud, json_object *o) { changed(ud, ((struct kite_dns *)ud)->services, o, false); }
static void svc_upd(void *ud, json_object *old, json_object *o) { svc_add(ud, o); }
static void svc_del(void *ud, json_object *o) { changed(ud, ((struct kite_dns *)ud)->services, o, true); }
static void sl_add(void *ud, json_object *o) { changed(ud, ((struct kite_dns *)ud)->slices, o, false); }
static void sl_upd(void *ud, json_object *old, json_object *o) { sl_add(ud, o); }
static void sl_del(void *ud, json_object *o) { changed(ud, ((struct kite_dns *)ud)->slices, o, true); }
static void on_synced(struct kite_dns *d, bool *flag) {
    pthread_mutex_lock(&d->lock);
    *flag = true; /* a flag per informer: one that lists again does not count twice */
    pthread_mutex_unlock(&d->lock);
}
static void svc_synced(void *ud) { on_synced(ud, &((struct kite_dns *)ud)->svc_synced); }
static void sl_synced(void *ud) { on_synced(ud, &((struct kite_dns *)ud)->slices_synced); }

/* The zone's answer (KITE_DNS_ANSWERED), KITE_DNS_FORWARD, or -EBADMSG. Before both informers
 * delivered their first list a cluster name gets SERVFAIL (the client retries), not an
 * NXDOMAIN it would cache. */
static int local_answer(struct kite_dns *d, const uint8_t *q, size_t n, size_t max, uint8_t **ret, size_t *ret_len) {
    pthread_mutex_lock(&d->lock);
    int r = kite_dns_answer(&d->zone, q, n, max, ret, ret_len);
    bool synced = d->svc_synced && d->slices_synced;
    pthread_mutex_unlock(&d->lock);
    if (r == KITE_DNS_ANSWERED && !synced) {
        free(*ret);
        r = kite_dns_servfail(q, n, ret, ret_len) == 0 ? KITE_DNS_ANSWERED : -EBADMSG;
    }
    return r;
}

static void reply_udp(struct kite_dns *d, const struct sockaddr_storage *to, socklen_t tolen, const uint8_t *m, size_t n) {
    if (sendto(d->udp, m, n, MSG_DONTWAIT, (const struct sockaddr *)to, tolen) < 0)
        log_debug(DNS_LOG, "answer not sent: %s", strerror(errno));
}

static void servfail_udp(struct kite_dns *d, const struct sockaddr_storage *to, socklen_t tolen, const uint8_t *q, size_t n) {
    uint8_t *a = NULL;
    size_t an = 0;
    if (kite_dns_servfail(q, n, &a, &an) == 0) reply_udp(d, to, tolen, a, an);
    free(a);
}

/* sends p's query to upstream p->up on a fresh socket; false if no upstream could be tried */
static bool forward_next(struct kite_dns *d, struct pending *p) {
    for (; (size_t)p->up < d->nup; p->up++) {
        if (p->fd >= 0) close(p->fd);
        p->fd = socket(d->upaddr[p->up].ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->fd < 0) continue;
        if (connect(p->fd, (struct sockaddr *)&d->upaddr[p->up], d->uplen[p->up]) == 0 &&
            send(p->fd, p->query, p->qlen, 0) == (ssize_t)p->qlen) {
            p->deadline_ms = now_ms() + KITE_DNS_FORWARD_TIMEOUT_MS;
            return true;
        }
    }
    return false;
}

static void pending_drop(struct kite_dns *d, int i) {
    struct pending *p = &d->pend[i];
    if (p->fd >= 0) close(p->fd);
    free(p->query);
    d->pend[i] = d->pend[--d->npend];
}

static void forward_udp(struct kite_dns *d, const struct sockaddr_storage *from, socklen_t flen, const uint8_t *q, size_t n) {
    if (d->npend == KITE_DNS_PENDING_MAX || n < 12) {
        servfail_udp(d, from, flen, q, n);
        return;
    }
    struct pending *p = &d->pend[d->npend];
    *p = (struct pending){.fd = -1, .client = *from, .clen = flen, .query = memdup(q, n), .qlen = n};
    d->npend++;
    if (!forward_next(d, p)) {
        servfail_udp(d, from, flen, q, n);
        pending_drop(d, d->npend - 1);
    }
}

static void on_udp(struct kite_dns *d, uint8_t *buf) {
    struct sockaddr_storage from;
    socklen_t flen = sizeof from;
    ssize_t n = recvfrom(d->udp, buf, MSG_MAX, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
    if (n <= 0) return;
    uint8_t *a = NULL;
    size_t an = 0;
    int r = local_answer(d, buf, (size_t)n, KITE_DNS_UDP_MAX, &a, &an);
    if (r == KITE_DNS_FORWARD && kite_dns_cache_get(d->cache, buf, (size_t)n, now_ms(), &a, &an) == 0)
        r = KITE_DNS_ANSWERED;
    if (r == KITE_DNS_ANSWERED) reply_udp(d, &from, flen, a, an);
    else if (r == KITE_DNS_FORWARD) forward_udp(d, &from, flen, buf, (size_t)n);
    free(a);
}

static void on_upstream(struct kite_dns *d, int i, uint8_t *buf) {
    struct pending *p = &d->pend[i];
    ssize_t n = recv(p->fd, buf, MSG_MAX, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    /* an answer whose id is not the query's is no answer to it (a stray or spoofed packet) */
    if (n >= 12 && memcmp(buf, p->query, 2) == 0) {
        reply_udp(d, &p->client, p->clen, buf, (size_t)n);
        kite_dns_cache_put(d->cache, buf, (size_t)n, now_ms());
        pending_drop(d, i);
        return;
    }
    if (n >= 0) return; /* keep waiting for the real answer */
    p->up++; /* refused (ICMP): the next upstream */
    if (!forward_next(d, p)) {
        servfail_udp(d, &p->client, p->clen, p->query, p->qlen);
        pending_drop(d, i);
    }
}

static bool io_all(int fd, void *buf, size_t n, bool wr) {
    for (size_t done = 0; done < n;) {
        ssize_t k = wr ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL) : recv(fd, (char *)buf + done, n - done, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        done += (size_t)k;
    }
    return true;
}

static void set_timeouts(int fd) {
    struct timeval tv = {.tv_sec = TCP_TIMEOUT_MS / 1000, .tv_usec = (TCP_TIMEOUT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* a query outside the zone over TCP: relayed over TCP to the first upstream that answers */
static bool forward_tcp(struct kite_dns *d, const uint8_t *q, size_t n, uint8_t *buf, size_t *ret_len) {
    for (size_t i = 0; i < d->nup; i++) {
        int fd = socket(d->upaddr[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        set_timeouts(fd);
        uint8_t len[2] = {(uint8_t)(n >> 8), (uint8_t)n};
        bool ok = connect(fd, (struct sockaddr *)&d->upaddr[i], d->uplen[i]) == 0 && io_all(fd, len, 2, true) &&
                  io_all(fd, (void *)q, n, true) && io_all(fd, len, 2, false);
        size_t an = ok ? (size_t)len[0] << 8 | len[1] : 0;
        ok = ok && an >= 12 && io_all(fd, buf, an, false);
        close(fd);
        if (ok) {
            *ret_len = an;
            return true;
        }
    }
    return false;
}

/* One TCP client, served on this thread with TCP_TIMEOUT_MS per read and write (dns.h). */
static void on_tcp(struct kite_dns *d, uint8_t *buf) {
    int fd = accept4(d->tcp, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    set_timeouts(fd);
    _cleanup_free_ uint8_t *up = kite_malloc(MSG_MAX);
    for (int k = 0; k < TCP_QUERIES_MAX; k++) {
        uint8_t len[2];
        if (!io_all(fd, len, 2, false)) break;
        size_t n = (size_t)len[0] << 8 | len[1];
        if (n < 12 || !io_all(fd, buf, n, false)) break;
        uint8_t *a = NULL;
        size_t an = 0;
        int r = local_answer(d, buf, n, MSG_MAX, &a, &an);
        if (r == KITE_DNS_FORWARD && kite_dns_cache_get(d->cache, buf, n, now_ms(), &a, &an) == 0) r = KITE_DNS_ANSWERED;
        if (r == KITE_DNS_FORWARD) {
            if (forward_tcp(d, buf, n, up, &an)) {
                a = memdup(up, an);
                kite_dns_cache_put(d->cache, a, an, now_ms());
                r = KITE_DNS_ANSWERED;
            } else {
                r = kite_dns_servfail(buf, n, &a, &an) == 0 ? KITE_DNS_ANSWERED : -EBADMSG;
            }
        }
        if (r != KITE_DNS_ANSWERED) break;
        uint8_t ol[2] = {(uint8_t)(an >> 8), (uint8_t)an};
        bool ok = io_all(fd, ol, 2, true) && io_all(fd, a, an, true);
        free(a);
        if (!ok) break;
    }
    close(fd);
}

static void *serve(void *ud) {
    struct kite_dns *d = ud;
    _cleanup_free_ uint8_t *buf = kite_malloc(MSG_MAX);
    struct pollfd fds[3 + KITE_DNS_PENDING_MAX];
    for (;;) {
        fds[0] = (struct pollfd){.fd = d->wake, .events = POLLIN};
        fds[1] = (struct pollfd){.fd = d->udp, .events = POLLIN};
        fds[2] = (struct pollfd){.fd = d->tcp, .events = POLLIN};
        int64_t now = now_ms(), timeout = -1;
        for (int i = 0; i < d->npend; i++) {
            fds[3 + i] = (struct pollfd){.fd = d->pend[i].fd, .events = POLLIN};
            int64_t left = d->pend[i].deadline_ms - now;
            if (timeout < 0 || left < timeout) timeout = left < 0 ? 0 : left;
        }
        int npend = d->npend;
        if (poll(fds, 3 + (nfds_t)npend, (int)timeout) < 0 && errno != EINTR) break;
        if (fds[0].revents) break;
        /* answers first (they free places), newest first (a drop moves the last into i) */
        for (int i = npend - 1; i >= 0; i--)
            if (fds[3 + i].revents) on_upstream(d, i, buf);
        now = now_ms();
        for (int i = d->npend - 1; i >= 0; i--) {
            struct pending *p = &d->pend[i];
            if (p->deadline_ms > now) continue;
            p->up++;
            if (!forward_next(d, p)) {
                servfail_udp(d, &p->client, p->clen, p->query, p->qlen);
                pending_drop(d, i);
            }
        }
        if (fds[1].revents) on_udp(d, buf);
        if (fds[2].revents) on_tcp(d, buf);
    }
    return NULL;
}

static int bind_socket(int type, const struct sockaddr_in *sa, int *ret) {
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | (type == SOCK_STREAM ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 || (type == SOCK_STREAM && listen(fd, 64) < 0)) {
        int r = -errno;
        close(fd);
        return r;
    }
    *ret = fd;
    return 0;
}

static void read_upstreams(struct kite_dns *d, const char *path, const char *self) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (kite_read_file(path, 1 << 20, &text, &len) < 0) {
        log_error(DNS_LOG, "cannot read %s: names outside the cluster will not resolve", path);
        return;
    }
    d->nup = kite_dns_upstreams(text, self, d->up);
    for (size_t i = 0; i < d->nup; i++) {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&d->upaddr[i];
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&d->upaddr[i];
        if (inet_pton(AF_INET, d->up[i], &a4->sin_addr) == 1) {
            a4->sin_family = AF_INET;
            a4->sin_port = htons(KITE_DNS_PORT);
            d->uplen[i] = sizeof *a4;
        } else if (inet_pton(AF_INET6, d->up[i], &a6->sin6_addr) == 1) {
            a6->sin6_family = AF_INET6;
            a6->sin6_port = htons(KITE_DNS_PORT);
            d->uplen[i] = sizeof *a6;
        }
    }
}

int kite_dns_start(const struct kite_dns_options *o, struct kite_dns **ret, char **ret_err) {
    /* libldns is loaded here, not at the agent's start (ldns.h): one that is missing fails the
     * start with its name */
    int lr = kite_ldns_load(ret_err);
    if (lr < 0) return lr;
    struct kite_dns *d = kite_calloc(1, sizeof *d);
    d->udp = d->tcp = d->wake = -1;
    d->domain = kite_strdup(o->domain && *o->domain ? o->domain : "cluster.local");
    size_t dl = strlen(d->domain);
    if (dl > 1 && d->domain[dl - 1] == '.') d->domain[dl - 1] = 0;
    for (char *c = d->domain; *c; c++) *c = (char)tolower((unsigned char)*c);
    d->services = json_object_new_object();
    d->slices = json_object_new_object();
    d->zone = (struct kite_dns_zone){.domain = d->domain, .services = d->services, .slices = d->slices};
    pthread_mutex_init(&d->lock, NULL);
    d->cache = kite_dns_cache_new(0);
    int r;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(o->port ? o->port : KITE_DNS_PORT)};
    if (!o->listen || inet_pton(AF_INET, o->listen, &sa.sin_addr) != 1) {
        r = -EINVAL;
        if (ret_err) *ret_err = kite_asprintf("invalid listen address \"%s\"", o->listen ? o->listen : "");
        goto fail;
    }
    if ((r = bind_socket(SOCK_DGRAM, &sa, &d->udp)) < 0 || (r = bind_socket(SOCK_STREAM, &sa, &d->tcp)) < 0) {
        if (ret_err) *ret_err = kite_asprintf("cannot listen on %s:%d: %s", o->listen, ntohs(sa.sin_port), strerror(-r));
        goto fail;
    }
    if ((d->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        r = -errno;
        goto fail;
    }
    read_upstreams(d, o->upstream_conf ? o->upstream_conf : KITE_DNS_UPSTREAM_CONF, o->listen);
    struct kite_informer_options io = {.client = o->client, .path = "/api/v1/services", .name = "dns-svc", .n_handlers = 1};
    io.handlers[0] = (struct kite_informer_handlers){.add = svc_add, .update = svc_upd, .del = svc_del,
                                                     .synced = svc_synced, .ud = d};
    if ((r = kite_informer_start(&io, &d->svc_inf)) < 0) goto fail;
    io.path = "/apis/discovery.k8s.io/v1/endpointslices";
    io.name = "dns-slices";
    io.handlers[0] = (struct kite_informer_handlers){.add = sl_add, .update = sl_upd, .del = sl_del,
                                                     .synced = sl_synced, .ud = d};
    if ((r = kite_informer_start(&io, &d->slice_inf)) < 0) goto fail;
    if ((r = -pthread_create(&d->thread, NULL, serve, d)) < 0) goto fail;
    log_info(DNS_LOG, "answering %s on %s:%d (UDP and TCP), forwarding other names to %zu upstream(s)", d->domain,
             o->listen, ntohs(sa.sin_port), d->nup);
    *ret = d;
    return 0;
fail:
    if (ret_err && !*ret_err) *ret_err = kite_strdup(strerror(-r));
    d->thread = 0;
    kite_dns_stop(d);
    return r;
}

void kite_dns_stop(struct kite_dns *d) {
    if (!d) return;
    if (d->thread) {
        uint64_t one = 1;
        if (write(d->wake, &one, sizeof one) < 0) log_error(DNS_LOG, "cannot wake the responder: %s", strerror(errno));
        pthread_join(d->thread, NULL);
    }
    kite_informer_stop(d->svc_inf);
    kite_informer_stop(d->slice_inf);
    while (d->npend) pending_drop(d, d->npend - 1);
    if (d->udp >= 0) close(d->udp);
    if (d->tcp >= 0) close(d->tcp);
    if (d->wake >= 0) close(d->wake);
    for (size_t i = 0; i < d->nup; i++) free(d->up[i]);
    json_object_put(d->services);
    json_object_put(d->slices);
    kite_dns_cache_free(d->cache);
    pthread_mutex_destroy(&d->lock);
    free(d->domain);
    free(d);
}
