/* Lightweight lease writers for `make bench` (bench/detect.py): NODES Node objects (registered as
 * a kubelet does, Ready=True) and their Leases in kube-node-lease, created over CONNS keep-alive
 * TLS connections (one thread each, HTTP/1.1, a static Bearer token), then each Lease renewed by
 * an unconditional PUT with a new spec.renewTime every INTERVAL_MS, the nodes' phases spread evenly
 * over the interval (kubelets are not synchronised).
 *
 *   node-leases PORT TOKEN NODES CONNS INTERVAL_MS STOP
 *
 * Commands on stdin, one a line: "mark" prints "mark MONO_NS RENEWALS" (renewals acknowledged so
 * far); "pause" holds every renewal until "resume" (NODE_LEASES_PAUSED=1 in the environment starts
 * paused: the objects are created, nothing more is written); "stop" makes STOP nodes spread evenly over the names stop renewing at once and prints
 * "stop-at MONO_NS"; "quit" (or EOF) ends the renewals. stdout, one line each as it happens:
 * "created SECONDS", "renew-start MONO_NS", the answers above, then at the end "stopped NAME
 * LAST_ACK_MONO_NS" per stopped node (the answer to its last renewal), "gap NAME MAX_GAP_MS" per
 * live node whose longest time between two acknowledged renewals (both after the first "mark":
 * the start-up is not steady) exceeded 1.5 intervals (the writer fell behind), and "summary: key=value ...". MONO_NS is CLOCK_MONOTONIC, the clock
 * Python's time.monotonic_ns reads. Only 127.0.0.1; the server's certificate is not verified
 * (the bench's own apiserver). Exit 1 on a failed creation. */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define MAX_LAT (1u << 22)
#define LEASES "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

static int port, n_nodes, n_conns, n_stop;
static int64_t interval_ns, t0, stop_at, gaps_from; /* stop_at, gaps_from, quit: set by main, read by the workers */
static int quit, paused;
static const char *token;
static gnutls_certificate_credentials_t creds;
static pthread_barrier_t created, go;

struct node {
    int64_t last_ack, max_gap;
    bool stopped;
};
static struct node *nodes;

struct cl {
    int idx, fd;
    gnutls_session_t tls;
    char in[65536];
    size_t have;
    uint64_t renewals, errors, late;
    int64_t max_lag;
    uint32_t *lat_us;
    size_t n_lat;
    int failed;
};

static int64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static void sleep_until(int64_t at) {
    struct timespec ts = {.tv_sec = at / NS, .tv_nsec = at % NS};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static void micro_now(char out[32]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%06ldZ", ts.tv_nsec / 1000);
}

static void name_of(int i, char out[32]) { snprintf(out, 32, "detect-%05d", i); }

static void cl_close(struct cl *c) {
    if (c->tls) {
        gnutls_deinit(c->tls);
        c->tls = NULL;
    }
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->have = 0;
}

static int cl_connect(struct cl *c) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) goto fail;
    gnutls_init(&c->tls, GNUTLS_CLIENT);
    gnutls_set_default_priority(c->tls);
    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, creds);
    gnutls_transport_set_int(c->tls, c->fd);
    int r;
    do r = gnutls_handshake(c->tls);
    while (r < 0 && !gnutls_error_is_fatal(r));
    if (r < 0) goto fail;
    return 0;
fail:
    cl_close(c);
    return -1;
}

/* Reads more of the answer into c->in (an answer's head must fit in it). */
static int fill(struct cl *c) {
    if (c->have == sizeof c->in) return -1;
    ssize_t k;
    do k = gnutls_record_recv(c->tls, c->in + c->have, sizeof c->in - c->have);
    while (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED);
    if (k <= 0) return -1;
    c->have += (size_t)k;
    return 0;
}

static void consume(struct cl *c, size_t n) {
    memmove(c->in, c->in + n, c->have - n);
    c->have -= n;
}

/* Skips a body of n bytes (possibly more than the buffer holds). */
static int skip(struct cl *c, size_t n) {
    while (n > 0) {
        if (c->have == 0 && fill(c) < 0) return -1;
        size_t k = c->have < n ? c->have : n;
        consume(c, k);
        n -= k;
    }
    return 0;
}

static char *find_crlf(struct cl *c) {
    for (;;) {
        char *e = memmem(c->in, c->have, "\r\n", 2);
        if (e) return e;
        if (fill(c) < 0) return NULL;
    }
}

/* One request on the kept-alive connection; the HTTP status, or -1 (connection lost). */
static int exchange(struct cl *c, const char *method, const char *path, const char *body) {
    char req[4096];
    size_t blen = strlen(body);
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nAccept: application/json\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, token, blen);
    if (n < 0 || (size_t)n >= sizeof req) return -1;
    if (gnutls_record_send(c->tls, req, (size_t)n) != n) return -1;
    for (size_t off = 0; off < blen;) {
        ssize_t k = gnutls_record_send(c->tls, body + off, blen - off);
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) continue;
        if (k <= 0) return -1;
        off += (size_t)k;
    }
    char *end;
    while (!(end = memmem(c->in, c->have, "\r\n\r\n", 4)))
        if (fill(c) < 0) return -1;
    *end = 0;
    int status = 0;
    if (sscanf(c->in, "HTTP/1.1 %d", &status) != 1) return -1;
    long len = -1;
    bool chunked = false;
    for (char *l = strstr(c->in, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, "content-length:", 15) == 0) len = strtol(l + 17, NULL, 10);
        if (strncasecmp(l + 2, "transfer-encoding:", 18) == 0 && strstr(l + 20, "chunked")) chunked = true;
    }
    consume(c, (size_t)(end + 4 - c->in));
    if (!chunked) return len >= 0 && skip(c, (size_t)len) < 0 ? -1 : status;
    for (;;) {
        char *e = find_crlf(c);
        if (!e) return -1;
        long sz = strtol(c->in, NULL, 16);
        consume(c, (size_t)(e + 2 - c->in));
        if (skip(c, (size_t)sz) < 0) return -1;
        if (!(e = find_crlf(c))) return -1;
        consume(c, (size_t)(e + 2 - c->in));
        if (sz == 0) return status;
    }
}

/* exchange(), reconnecting once when the connection was lost. */
static int request(struct cl *c, const char *method, const char *path, const char *body) {
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0 && cl_connect(c) < 0) continue;
        int s = exchange(c, method, path, body);
        if (s > 0) return s;
        cl_close(c);
    }
    return -1;
}

static void lease_body(const char *name, char *out, size_t size) {
    char now[32];
    micro_now(now);
    snprintf(out, size,
             "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"kube-node-lease\"},\"spec\":{\"holderIdentity\":\"%s\",\"leaseDurationSeconds\":40,"
             "\"renewTime\":\"%s\"}}",
             name, name, now);
}

static int create(struct cl *c, int i) {
    char name[32], now[32], body[3072];
    name_of(i, name);
    micro_now(now);
    now[19] = 'Z', now[20] = 0; /* conditions carry seconds */
    const char *cond = "{\"type\":\"%s\",\"status\":\"%s\",\"lastHeartbeatTime\":\"%s\",\"lastTransitionTime\":\"%s\","
                       "\"reason\":\"%s\",\"message\":\"%s\"}";
    char conds[4][400];
    const char *tab[4][4] = {
        {"MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
        {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
        {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
        {"Ready", "True", "KubeletReady", "kubelet is posting ready status"},
    };
    for (int k = 0; k < 4; k++) snprintf(conds[k], sizeof conds[k], cond, tab[k][0], tab[k][1], now, now, tab[k][2], tab[k][3]);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/hostname\":"
             "\"%s\"}},\"spec\":{},\"status\":{\"capacity\":{\"cpu\":\"4\",\"memory\":\"8167848Ki\",\"pods\":\"110\"},"
             "\"allocatable\":{\"cpu\":\"4\",\"memory\":\"8065448Ki\",\"pods\":\"110\"},\"conditions\":[%s,%s,%s,%s],"
             "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.9.%d.%d\"},{\"type\":\"Hostname\",\"address\":\"%s\"}],"
             "\"nodeInfo\":{\"machineID\":\"bench\",\"systemUUID\":\"bench\",\"bootID\":\"bench\",\"kernelVersion\":\"6.1.0\","
             "\"osImage\":\"bench\",\"containerRuntimeVersion\":\"fake://1.0.0\",\"kubeletVersion\":\"v1.32.4\","
             "\"kubeProxyVersion\":\"\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"}}}",
             name, name, conds[0], conds[1], conds[2], conds[3], i / 250, i % 250 + 1, name);
    int s = request(c, "POST", "/api/v1/nodes", body);
    if (s != 201 && s != 409) {
        fprintf(stderr, "node-leases: POST node %s -> %d\n", name, s);
        return -1;
    }
    lease_body(name, body, sizeof body);
    s = request(c, "POST", LEASES, body);
    if (s != 201 && s != 409) {
        fprintf(stderr, "node-leases: POST lease %s -> %d\n", name, s);
        return -1;
    }
    return 0;
}

static void *worker(void *ud) {
    struct cl *c = ud;
    for (int i = c->idx; i < n_nodes && !c->failed; i += n_conns)
        if (create(c, i) < 0) c->failed = 1;
    pthread_barrier_wait(&created);
    pthread_barrier_wait(&go); /* main sets t0 */
    char name[32], path[160], body[512];
    for (int64_t k = 0;; k++) {
        for (int i = c->idx; i < n_nodes; i += n_conns) {
            if (__atomic_load_n(&quit, __ATOMIC_ACQUIRE)) return NULL;
            if (__atomic_load_n(&paused, __ATOMIC_ACQUIRE)) {
                sleep_until(mono() + NS / 20);
                i -= n_conns;
                continue;
            }
            int64_t due = t0 + (int64_t)i * interval_ns / n_nodes + k * interval_ns;
            struct node *d = &nodes[i];
            int64_t now = mono(), stop = __atomic_load_n(&stop_at, __ATOMIC_ACQUIRE);
            /* a stopped node sends nothing once stopped, as a killed machine: not the renewals
             * it was due before the stop and that a writer behind its schedule still owes (at
             * 92,000 nodes the writers ran ~90 s late, and the stopped nodes renewed that long
             * after the stop the bench timed detection from) */
            if (d->stopped && stop) continue;
            if (now < due) {
                /* in steps of at most 100 ms, so that "quit" and "stop" take effect soon */
                if (due - now > NS / 10) {
                    sleep_until(now + NS / 10);
                    i -= n_conns;
                    continue;
                }
                sleep_until(due);
            } else if (now - due > c->max_lag) {
                c->max_lag = now - due;
            }
            if (now - due > interval_ns / 2) c->late++;
            name_of(i, name);
            snprintf(path, sizeof path, LEASES "/%s", name);
            lease_body(name, body, sizeof body);
            int64_t sent = mono();
            int s = request(c, "PUT", path, body);
            int64_t ack = mono();
            if (s != 200) {
                __atomic_add_fetch(&c->errors, 1, __ATOMIC_RELAXED);
                continue;
            }
            __atomic_add_fetch(&c->renewals, 1, __ATOMIC_RELAXED);
            if (c->n_lat < MAX_LAT) c->lat_us[c->n_lat++] = (uint32_t)((ack - sent) / 1000);
            int64_t from = __atomic_load_n(&gaps_from, __ATOMIC_ACQUIRE);
            if (from && d->last_ack >= from && ack - d->last_ack > d->max_gap) d->max_gap = ack - d->last_ack;
            __atomic_store_n(&d->last_ack, ack, __ATOMIC_RELEASE);
        }
    }
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t total(size_t field_offset, struct cl *cls) {
    uint64_t sum = 0;
    for (int i = 0; i < n_conns; i++) sum += __atomic_load_n((uint64_t *)((char *)&cls[i] + field_offset), __ATOMIC_RELAXED);
    return sum;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: node-leases PORT TOKEN NODES CONNS INTERVAL_MS STOP\n");
        return 2;
    }
    port = atoi(argv[1]), token = argv[2], n_nodes = atoi(argv[3]), n_conns = atoi(argv[4]);
    interval_ns = atoll(argv[5]) * 1000000LL, n_stop = atoi(argv[6]);
    if (n_nodes < 1 || n_conns < 1 || interval_ns <= 0 || n_stop < 0 || n_stop > n_nodes) {
        fprintf(stderr, "node-leases: bad arguments\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a connection the server closed (idle while paused) is reconnected */
    const char *p = getenv("NODE_LEASES_PAUSED");
    paused = p && strcmp(p, "1") == 0;
    gnutls_global_init();
    gnutls_certificate_allocate_credentials(&creds);
    nodes = calloc((size_t)n_nodes, sizeof *nodes);
    for (int s = 0; s < n_stop; s++) nodes[(int)((int64_t)s * n_nodes / n_stop)].stopped = true;
    struct cl *cls = calloc((size_t)n_conns, sizeof *cls);
    pthread_t *th = calloc((size_t)n_conns, sizeof *th);
    pthread_barrier_init(&created, NULL, (unsigned)n_conns + 1);
    pthread_barrier_init(&go, NULL, (unsigned)n_conns + 1);
    int64_t start = mono();
    for (int i = 0; i < n_conns; i++) {
        cls[i].idx = i, cls[i].fd = -1;
        cls[i].lat_us = malloc(MAX_LAT * sizeof(uint32_t));
        pthread_create(&th[i], NULL, worker, &cls[i]);
    }
    pthread_barrier_wait(&created);
    int failed = 0;
    for (int i = 0; i < n_conns; i++) failed |= cls[i].failed;
    printf("created %.3f\n", (double)(mono() - start) / NS);
    if (failed) {
        fflush(stdout);
        _exit(1);
    }
    t0 = mono();
    printf("renew-start %lld\n", (long long)t0);
    fflush(stdout);
    pthread_barrier_wait(&go);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "mark", 4) == 0) {
            if (!gaps_from) __atomic_store_n(&gaps_from, mono(), __ATOMIC_RELEASE);
            printf("mark %lld %llu\n", (long long)mono(), (unsigned long long)total(offsetof(struct cl, renewals), cls));
        } else if (strncmp(line, "stop", 4) == 0) {
            int64_t now = mono();
            __atomic_store_n(&stop_at, now, __ATOMIC_RELEASE);
            printf("stop-at %lld\n", (long long)now);
        } else if (strncmp(line, "pause", 5) == 0) {
            __atomic_store_n(&paused, 1, __ATOMIC_RELEASE);
            printf("paused %lld\n", (long long)mono());
        } else if (strncmp(line, "resume", 6) == 0) {
            __atomic_store_n(&paused, 0, __ATOMIC_RELEASE);
            printf("resumed %lld\n", (long long)mono());
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
        fflush(stdout);
    }
    __atomic_store_n(&quit, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < n_conns; i++) pthread_join(th[i], NULL);

    uint64_t renewals = 0, errors = 0, late = 0;
    int64_t max_lag = 0, live_gap = 0;
    size_t n_lat = 0;
    for (int i = 0; i < n_conns; i++) n_lat += cls[i].n_lat;
    uint32_t *lat = malloc((n_lat ? n_lat : 1) * sizeof *lat);
    n_lat = 0;
    for (int i = 0; i < n_conns; i++) {
        renewals += cls[i].renewals, errors += cls[i].errors, late += cls[i].late;
        if (cls[i].max_lag > max_lag) max_lag = cls[i].max_lag;
        memcpy(lat + n_lat, cls[i].lat_us, cls[i].n_lat * sizeof *lat);
        n_lat += cls[i].n_lat;
    }
    qsort(lat, n_lat, sizeof *lat, cmp_u32);
    char name[32];
    for (int i = 0; i < n_nodes; i++) {
        name_of(i, name);
        if (nodes[i].stopped) {
            printf("stopped %s %lld\n", name, (long long)nodes[i].last_ack);
            continue;
        }
        if (nodes[i].max_gap > live_gap) live_gap = nodes[i].max_gap;
        if (nodes[i].max_gap > interval_ns * 3 / 2) printf("gap %s %.1f\n", name, (double)nodes[i].max_gap / 1e6);
    }
    printf("summary: renewals=%llu errors=%llu put_p50_ms=%.2f put_p99_ms=%.2f late=%llu max_lag_ms=%.1f "
           "live_gap_max_ms=%.1f\n",
           (unsigned long long)renewals, (unsigned long long)errors, n_lat ? lat[n_lat / 2] / 1e3 : 0.0,
           n_lat ? lat[(size_t)((double)(n_lat - 1) * 0.99)] / 1e3 : 0.0, (unsigned long long)late,
           (double)max_lag / 1e6, (double)live_gap / 1e6);
    return 0;
}
