/* HTTP/2 load for `make bench`: lease renewals (unconditional PUTs of pre-created leases
 * bench-0..N-1, as bench/lease-put.lua sends them over HTTP/1.1) or GETs of one lease, with
 * CONNS TLS connections (one thread each) keeping STREAMS requests in flight on each, for SECS
 * seconds. Prints "rps p50_ms p99_ms non2xx errors" (wrk_summary's format in bench/run).
 *
 *   h2-leases PORT TOKEN put|get CONNS STREAMS SECS LEASES
 *
 * Only 127.0.0.1. The server's certificate is not verified (the bench's own apiserver). */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_LAT (4u * 1024 * 1024)

static int port, n_streams, secs, n_leases;
static const char *token;
static bool put;
static int64_t deadline_ns;

struct req {
    int64_t start;
    int status;
    char body[512];
    size_t len, off;
    char path[128];
};

struct cl {
    int idx;
    int fd;
    gnutls_session_t tls;
    nghttp2_session *ng;
    uint64_t seq, done, non2xx, errors;
    int in_flight;
    uint32_t *lat_us;
    size_t n_lat;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *ud) {
    struct cl *c = ud;
    ssize_t k = gnutls_record_send(c->tls, data, len);
    if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) return NGHTTP2_ERR_WOULDBLOCK;
    return k < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : k;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    struct req *r = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (r && namelen == 7 && memcmp(name, ":status", 7) == 0) r->status = atoi((const char *)value);
    return 0;
}

static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *ud) {
    struct req *r = src->ptr;
    size_t n = r->len - r->off < length ? r->len - r->off : length;
    memcpy(buf, r->body + r->off, n);
    r->off += n;
    if (r->off == r->len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void submit(struct cl *c) {
    struct req *r = calloc(1, sizeof(*r));
    uint64_t i = c->seq++;
    char auth[256];
    snprintf(auth, sizeof auth, "Bearer %s", token);
    int lease = (int)((i + (uint64_t)c->idx * 7919) % (uint64_t)n_leases);
    if (put) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        char ts[32];
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        r->len = (size_t)snprintf(r->body, sizeof r->body,
                                  "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
                                  "\"bench-%d\",\"namespace\":\"default\"},\"spec\":{\"holderIdentity\":\"bench-%d\","
                                  "\"leaseDurationSeconds\":40,\"renewTime\":\"%s.%06uZ\"}}",
                                  lease, lease, ts, (unsigned)((i * 37) % 1000000));
        snprintf(r->path, sizeof r->path, "/apis/coordination.k8s.io/v1/namespaces/default/leases/bench-%d", lease);
    } else {
        snprintf(r->path, sizeof r->path, "/apis/coordination.k8s.io/v1/namespaces/default/leases/bench-0");
    }
#define NV(k, v) {(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv nv[] = {NV(":method", put ? "PUT" : "GET"), NV(":scheme", "https"), NV(":authority", "127.0.0.1"),
                       NV(":path", r->path), NV("authorization", auth), NV("accept", "application/json"),
                       NV("content-type", "application/json")};
#undef NV
    nghttp2_data_provider prd = {.source.ptr = r, .read_callback = read_body};
    r->start = now_ns();
    if (nghttp2_submit_request(c->ng, NULL, nv, put ? 7 : 6, put ? &prd : NULL, r) < 0) {
        free(r);
        c->errors++;
        return;
    }
    c->in_flight++;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud) {
    struct cl *c = ud;
    struct req *r = nghttp2_session_get_stream_user_data(ng, id);
    if (!r) return 0;
    c->in_flight--;
    if (error_code) c->errors++;
    else if (r->status < 200 || r->status >= 300) c->non2xx++;
    int64_t t = now_ns();
    if (t <= deadline_ns) {
        c->done++;
        if (c->n_lat < MAX_LAT) c->lat_us[c->n_lat++] = (uint32_t)((t - r->start) / 1000);
        submit(c);
    }
    free(r);
    return 0;
}

static void *run(void *arg) {
    struct cl *c = arg;
    c->lat_us = malloc(MAX_LAT * sizeof(uint32_t));
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("connect");
        exit(1);
    }
    gnutls_certificate_credentials_t cred;
    gnutls_certificate_allocate_credentials(&cred);
    gnutls_init(&c->tls, GNUTLS_CLIENT);
    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, cred);
    gnutls_set_default_priority(c->tls);
    gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
    gnutls_alpn_set_protocols(c->tls, &h2, 1, 0);
    gnutls_transport_set_int(c->tls, c->fd);
    if (gnutls_handshake(c->tls) < 0) {
        fprintf(stderr, "h2-leases: TLS handshake failed\n");
        exit(1);
    }
    gnutls_datum_t sel;
    if (gnutls_alpn_get_selected_protocol(c->tls, &sel) != 0 || sel.size != 2) {
        fprintf(stderr, "h2-leases: the server did not select h2\n");
        exit(1);
    }
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_client_new(&c->ng, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, NULL, 0);
    for (int i = 0; i < n_streams; i++) submit(c);
    char buf[65536];
    while (now_ns() < deadline_ns || c->in_flight > 0) {
        if (nghttp2_session_send(c->ng) != 0) break;
        if (gnutls_record_check_pending(c->tls) == 0) {
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            if (poll(&p, 1, 1000) <= 0) {
                if (now_ns() > deadline_ns + 5000000000LL) break;
                continue;
            }
        }
        ssize_t k = gnutls_record_recv(c->tls, buf, sizeof buf);
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) continue;
        if (k <= 0) {
            c->errors++;
            break;
        }
        if (nghttp2_session_mem_recv(c->ng, (uint8_t *)buf, (size_t)k) < 0) {
            c->errors++;
            break;
        }
    }
    nghttp2_session_del(c->ng);
    gnutls_deinit(c->tls);
    gnutls_certificate_free_credentials(cred);
    close(c->fd);
    return NULL;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: h2-leases PORT TOKEN put|get CONNS STREAMS SECS LEASES\n");
        return 2;
    }
    port = atoi(argv[1]);
    token = argv[2];
    put = strcmp(argv[3], "put") == 0;
    int conns = atoi(argv[4]);
    n_streams = atoi(argv[5]);
    secs = atoi(argv[6]);
    n_leases = atoi(argv[7]);
    if (conns < 1 || conns > 64 || n_streams < 1 || n_streams > 100 || secs < 1 || n_leases < 1) return 2;
    gnutls_global_init();
    struct cl *cls = calloc((size_t)conns, sizeof(*cls));
    pthread_t th[64];
    int64_t start = now_ns();
    deadline_ns = start + (int64_t)secs * 1000000000;
    for (int i = 0; i < conns; i++) {
        cls[i].idx = i;
        pthread_create(&th[i], NULL, run, &cls[i]);
    }
    uint64_t done = 0, non2xx = 0, errors = 0;
    size_t n = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(th[i], NULL);
        done += cls[i].done;
        non2xx += cls[i].non2xx;
        errors += cls[i].errors;
        n += cls[i].n_lat;
    }
    uint32_t *all = malloc((n ? n : 1) * sizeof(uint32_t));
    size_t k = 0;
    for (int i = 0; i < conns; i++) {
        memcpy(all + k, cls[i].lat_us, cls[i].n_lat * sizeof(uint32_t));
        k += cls[i].n_lat;
        free(cls[i].lat_us);
    }
    qsort(all, n, sizeof(uint32_t), cmp_u32);
    double p50 = n ? all[n / 2] / 1000.0 : 0, p99 = n ? all[(n * 99) / 100] / 1000.0 : 0;
    printf("%.2f %.3f %.3f %llu %llu\n", (double)done / secs, p50, p99, (unsigned long long)non2xx,
           (unsigned long long)errors);
    free(all);
    free(cls);
    return 0;
}
