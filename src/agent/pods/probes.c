/* Container probes (liveness, readiness, startup) as the kubelet's prober workers run them:
 * exec through the runtime, httpGet and tcpSocket from the agent into the pod's network;
 * initialDelaySeconds, periodSeconds (10), timeoutSeconds (1), successThreshold (1),
 * failureThreshold (3). A probe's reported result changes only after `threshold` equal results
 * in a row; readiness starts at failure, liveness at success, startup unknown; the startup
 * probe holds the other two back until it succeeds; a liveness or startup failure puts the
 * probe on hold until the container is replaced (its id changes).
 *
 * Threads: the prober's thread (kite_pods_start) times the probes and runs each due one on a
 * thread of its own (an exec probe is a child process with its own deadline), so a probe
 * waiting for its timeout holds neither a pod worker nor any other probe back; without threads
 * (unit tests) kite_pods_step runs the due ones itself, one after another. The pods thread registers a container's probes when it runs and unregisters
 * them when it stops; results come back through a queue and wake the pods thread at once, so
 * the status manager sees a readiness flip without waiting for a resync. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "base/base.h"
#include "base/buf.h"
#include "base/log.h"

static const char *const KIND_NAME[] = {[PROBE_LIVENESS] = "Liveness", [PROBE_READINESS] = "Readiness",
                                        [PROBE_STARTUP] = "Startup"};
static const char *const KIND_FIELD[] = {[PROBE_LIVENESS] = "livenessProbe", [PROBE_READINESS] = "readinessProbe",
                                         [PROBE_STARTUP] = "startupProbe"};

const char *kite_pods_probe_kind_name(enum probe_kind k) { return KIND_NAME[k]; }
const char *kite_pods_probe_field(enum probe_kind k) { return KIND_FIELD[k]; }

enum handler { H_NONE, H_EXEC, H_HTTP, H_TCP };

struct probe {
    char *pod_uid, *ctr_name, *cid;
    enum probe_kind kind;
    json_object *spec;  /* the probe (private deep copy) */
    json_object *ports; /* the container's ports (private deep copy), for named ports */
    char *ip;           /* the pod's IP, or the host's for hostNetwork pods */
    int64_t start;      /* mono: the container started */
    int64_t next;       /* mono: next run */
    int result;         /* reported: -1 unknown, 0 failure, 1 success */
    int last, run;      /* last raw result and how many in a row */
    bool on_hold;
    bool running;       /* a run is under way on its own thread */
};

struct kite_prober {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct kite_clock *clock;
    struct kite_runtime *rt; /* exec probes; thread-safe (the locked runtime) */
    struct probe *v;
    size_t n;
    struct probe_result *res;
    size_t n_res;
    void (*wake)(void *ud);
    void *wake_ud;
    bool stopping, started;
    pthread_t thread;
    size_t n_running;   /* probe threads under way */
};

static int64_t field_int(json_object *spec, const char *key, int64_t def, int64_t min) {
    json_object *v = json_object_object_get(spec, key);
    int64_t x = v ? json_object_get_int64(v) : def;
    return x < min ? min : x;
}

static void probe_free(struct probe *pr) {
    free(pr->pod_uid);
    free(pr->ctr_name);
    free(pr->cid);
    free(pr->ip);
    json_object_put(pr->spec);
    json_object_put(pr->ports);
}

struct kite_prober *kite_pods_prober_new(struct kite_clock *clock, struct kite_runtime *rt, void (*wake)(void *), void *ud) {
    struct kite_prober *p = kite_calloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    p->clock = clock;
    p->rt = rt;
    p->wake = wake;
    p->wake_ud = ud;
    return p;
}

void kite_pods_prober_free(struct kite_prober *p) {
    if (!p) return;
    kite_pods_prober_stop(p);
    for (size_t i = 0; i < p->n; i++) probe_free(&p->v[i]);
    free(p->v);
    for (size_t i = 0; i < p->n_res; i++) kite_pods_probe_result_release(&p->res[i]);
    free(p->res);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void kite_pods_probe_result_release(struct probe_result *r) {
    free(r->pod_uid);
    free(r->ctr_name);
    free(r->cid);
    free(r->output);
}

static json_object *copy(json_object *o) {
    json_object *c = NULL;
    if (o) json_object_deep_copy(o, &c, NULL);
    return c;
}

void kite_pods_prober_add(struct kite_prober *p, const char *pod_uid, const char *ctr_name, const char *cid,
                     enum probe_kind kind, json_object *spec, json_object *ports, const char *ip, int64_t start) {
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].kind == kind && strcmp(p->v[i].cid, cid) == 0) {
            if (!kite_streq(p->v[i].ip, ip)) { /* the pod's IP arrived after the container started */
                free(p->v[i].ip);
                p->v[i].ip = kite_strdup(ip ? ip : "");
            }
            pthread_mutex_unlock(&p->lock);
            return;
        }
    p->v = kite_realloc(p->v, (p->n + 1) * sizeof(*p->v));
    int64_t delay = kite_sec_to_ns(field_int(spec, "initialDelaySeconds", 0, 0));
    p->v[p->n++] = (struct probe){.pod_uid = kite_strdup(pod_uid), .ctr_name = kite_strdup(ctr_name),
                                  .cid = kite_strdup(cid), .kind = kind, .spec = copy(spec), .ports = copy(ports),
                                  .ip = kite_strdup(ip ? ip : ""), .start = start, .next = start + delay,
                                  .result = kind == PROBE_READINESS ? 0 : kind == PROBE_LIVENESS ? 1 : -1,
                                  .last = -1};
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void kite_pods_prober_remove(struct kite_prober *p, const char *cid, const char *pod_uid) {
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->n;) {
        if ((cid && strcmp(p->v[i].cid, cid) == 0) || (pod_uid && strcmp(p->v[i].pod_uid, pod_uid) == 0)) {
            probe_free(&p->v[i]);
            p->v[i] = p->v[--p->n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&p->lock);
}

/* ---- handlers ---------------------------------------------------------------------------- */

static enum handler handler_of(json_object *spec) {
    if (json_object_object_get(spec, "exec")) return H_EXEC;
    if (json_object_object_get(spec, "httpGet")) return H_HTTP;
    if (json_object_object_get(spec, "tcpSocket")) return H_TCP;
    return H_NONE;
}

/* A port by number, or by the name of one of the container's ports. -1 when unknown. */
static int resolve_port(json_object *port, json_object *ports) {
    if (!port) return -1;
    if (json_object_is_type(port, json_type_int)) {
        int n = json_object_get_int(port);
        return n > 0 && n < 65536 ? n : -1;
    }
    const char *name = json_object_get_string(port);
    char *end;
    long n = strtol(name, &end, 10);
    if (*name && !*end) return n > 0 && n < 65536 ? (int)n : -1;
    for (size_t i = 0; ports && i < json_object_array_length(ports); i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        if (kite_streq(json_object_get_string(json_object_object_get(p, "name")), name))
            return json_object_get_int(json_object_object_get(p, "containerPort"));
    }
    return -1;
}

/* Connects within the deadline; the connected socket or -errno. */
static int dial(const char *host, int port, int64_t timeout_ns) {
    struct sockaddr_storage ss = {0};
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        len = sizeof(*a6);
    } else {
        return -EADDRNOTAVAIL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int r = poll(&pfd, 1, (int)(timeout_ns / KITE_NS_PER_MS));
    int err = 0;
    socklen_t el = sizeof(err);
    if (r == 0) err = ETIMEDOUT;
    else if (r < 0) err = errno;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
    if (err) {
        close(fd);
        return -err;
    }
    return fd;
}

/* Go's dial error text, which the kubelet's probe output carries. */
static char *dial_error(const char *host, int port, int e) {
    const char *what = e == ETIMEDOUT ? "i/o timeout" : e == ECONNREFUSED ? "connect: connection refused" : strerror(e);
    return kite_asprintf("dial tcp %s:%d: %s", host, port, what);
}

struct http_ctx {
    int status;
    bool done;
};

static int on_headers_complete(http_parser *hp) {
    struct http_ctx *c = hp->data;
    c->status = (int)hp->status_code;
    c->done = true;
    return 1; /* the status is all a probe needs */
}

/* GET with HTTP/1.1; success is a status in [200, 400), as the kubelet's. */
static bool http_probe(json_object *g, json_object *ports, const char *ip, int64_t timeout_ns, char **out) {
    const char *host = json_object_get_string(json_object_object_get(g, "host"));
    if (!host || !*host) host = ip;
    const char *path = json_object_get_string(json_object_object_get(g, "path"));
    const char *scheme = json_object_get_string(json_object_object_get(g, "scheme"));
    int port = resolve_port(json_object_object_get(g, "port"), ports);
    if (port < 0) {
        *out = kite_strdup("unknown port");
        return false;
    }
    if (!host || !*host) {
        *out = kite_strdup("the pod has no IP address yet");
        return false;
    }
    if (scheme && strcasecmp(scheme, "HTTPS") == 0) {
        /* kite's probes speak plain HTTP only; said rather than guessed */
        *out = kite_strdup("HTTPS probes are not supported by this node");
        return false;
    }
    _cleanup_free_ char *url = kite_asprintf("http://%s:%d%s%s", host, port, path && *path == '/' ? "" : "/",
                                             path ? path : "");
    int64_t deadline = kite_now_mono(kite_clock_real()) + timeout_ns;
    int fd = dial(host, port, timeout_ns);
    if (fd < 0) {
        _cleanup_free_ char *d = dial_error(host, port, -fd);
        *out = kite_asprintf("Get \"%s\": %s", url, d);
        return false;
    }
    struct kite_buf req = {0};
    kite_buf_printf(&req, "GET %s%s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: kube-probe/1.32\r\nAccept: */*\r\n",
                    path && *path == '/' ? "" : "/", path ? path : "", host, port);
    json_object *hs = json_object_object_get(g, "httpHeaders");
    for (size_t i = 0; hs && i < json_object_array_length(hs); i++) {
        json_object *h = json_object_array_get_idx(hs, i);
        const char *n = json_object_get_string(json_object_object_get(h, "name"));
        const char *v = json_object_get_string(json_object_object_get(h, "value"));
        /* header names and values come from a validated spec; CR/LF would split the request */
        if (n && v && !strpbrk(n, "\r\n:") && !strpbrk(v, "\r\n")) kite_buf_printf(&req, "%s: %s\r\n", n, v);
    }
    kite_buf_puts(&req, "Connection: close\r\n\r\n");
    bool ok = false;
    ssize_t w = send(fd, req.p, req.len, MSG_NOSIGNAL);
    kite_buf_release(&req);
    struct http_ctx ctx = {0};
    http_parser hp;
    http_parser_init(&hp, HTTP_RESPONSE);
    hp.data = &ctx;
    http_parser_settings st = {.on_headers_complete = on_headers_complete};
    char buf[4096];
    int e = w < 0 ? errno : 0;
    while (!e && !ctx.done) {
        int64_t left = deadline - kite_now_mono(kite_clock_real());
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = left > 0 ? poll(&pfd, 1, (int)(left / KITE_NS_PER_MS) + 1) : 0;
        if (r <= 0) {
            e = r == 0 ? ETIMEDOUT : errno;
            break;
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            e = n == 0 ? ECONNRESET : errno;
            break;
        }
        http_parser_execute(&hp, &st, buf, (size_t)n);
        if (!ctx.done && HTTP_PARSER_ERRNO(&hp) != HPE_OK) e = EPROTO;
    }
    close(fd);
    if (ctx.done) {
        ok = ctx.status >= 200 && ctx.status < 400;
        *out = ok ? NULL : kite_asprintf("HTTP probe failed with statuscode: %d", ctx.status);
    } else {
        *out = kite_asprintf("Get \"%s\": %s", url,
                             e == ETIMEDOUT ? "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                                            : strerror(e));
    }
    return ok;
}

static bool tcp_probe(json_object *t, json_object *ports, const char *ip, int64_t timeout_ns, char **out) {
    const char *host = json_object_get_string(json_object_object_get(t, "host"));
    if (!host || !*host) host = ip;
    int port = resolve_port(json_object_object_get(t, "port"), ports);
    if (port < 0 || !host || !*host) {
        *out = kite_strdup(port < 0 ? "unknown port" : "the pod has no IP address yet");
        return false;
    }
    int fd = dial(host, port, timeout_ns);
    if (fd < 0) {
        *out = dial_error(host, port, -fd);
        return false;
    }
    close(fd);
    return true;
}

static bool exec_probe(struct kite_runtime *rt, const char *cid, json_object *e, int64_t timeout_ns, char **out) {
    json_object *cmd = json_object_object_get(e, "command");
    size_t n = cmd ? json_object_array_length(cmd) : 0;
    if (!n) {
        *out = kite_strdup("exec probe has no command");
        return false;
    }
    const char **argv = kite_calloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) argv[i] = json_object_get_string(json_object_array_get_idx(cmd, i));
    struct kite_exec_result er = {0};
    int r = rt->ops->exec_sync(rt, cid, argv, n, timeout_ns, &er);
    bool ok = r == 0 && er.exit_code == 0;
    if (r == -ETIMEDOUT) {
        struct kite_buf b = {0};
        for (size_t i = 0; i < n; i++) kite_buf_printf(&b, "%s%s", i ? " " : "", argv[i]);
        *out = kite_asprintf("command \"%s\" timed out", b.p ? b.p : "");
        kite_buf_release(&b);
    } else if (r < 0) {
        *out = kite_asprintf("exec: %s", strerror(-r));
    } else if (!ok) {
        /* the kubelet reports the command's output; trailing newlines trimmed */
        size_t len = er.output ? strlen(er.output) : 0;
        while (len && (er.output[len - 1] == '\n' || er.output[len - 1] == '\r')) len--;
        *out = len ? kite_strndup(er.output, len) : kite_asprintf("command exited with %d", er.exit_code);
    }
    free(er.output);
    free(argv);
    return ok;
}

/* Runs one probe (no lock held: the probe's fields are this thread's own snapshot). */
static bool run_probe(struct kite_runtime *rt, const char *cid, json_object *spec, json_object *ports, const char *ip,
                      char **out) {
    int64_t timeout = kite_sec_to_ns(field_int(spec, "timeoutSeconds", 1, 1));
    switch (handler_of(spec)) {
    case H_EXEC: return exec_probe(rt, cid, json_object_object_get(spec, "exec"), timeout, out);
    case H_HTTP: return http_probe(json_object_object_get(spec, "httpGet"), ports, ip, timeout, out);
    case H_TCP: return tcp_probe(json_object_object_get(spec, "tcpSocket"), ports, ip, timeout, out);
    default: *out = kite_strdup("probe has no supported handler (exec, httpGet, tcpSocket)"); return false;
    }
}

/* ---- the loop ---------------------------------------------------------------------------- */

static struct probe *find(struct kite_prober *p, const char *cid, enum probe_kind kind) {
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].kind == kind && strcmp(p->v[i].cid, cid) == 0) return &p->v[i];
    return NULL;
}

/* A startup probe of this container that has not succeeded yet holds the others back. */
static bool held_by_startup(struct kite_prober *p, const struct probe *pr) {
    if (pr->kind == PROBE_STARTUP) return false;
    struct probe *s = find(p, pr->cid, PROBE_STARTUP);
    return s && s->result != 1;
}

/* A run's result (lock held): thresholds, the reported result, the queue. out is taken. */
static void record(struct kite_prober *p, const char *cid, enum probe_kind kind, bool ok, char *out) {
    struct probe *pr = find(p, cid, kind); /* it may have gone meanwhile */
    if (!pr) {
        free(out);
        return;
    }
    int raw = ok ? 1 : 0;
    pr->run = raw == pr->last ? pr->run + 1 : 1;
    pr->last = raw;
    int64_t threshold = ok ? field_int(pr->spec, "successThreshold", 1, 1) : field_int(pr->spec, "failureThreshold", 3, 1);
    bool report = pr->run >= threshold && pr->result != raw;
    if (report) pr->result = raw;
    if (report && !ok && kind != PROBE_READINESS) {
        pr->on_hold = true; /* the container is killed: nothing to probe until it is replaced */
        pr->run = 0;
    }
    if (!ok || report) {
        /* every failure becomes an Unhealthy event; a change also moves the container's state */
        p->res = kite_realloc(p->res, (p->n_res + 1) * sizeof(*p->res));
        p->res[p->n_res++] = (struct probe_result){
            .pod_uid = kite_strdup(pr->pod_uid), .ctr_name = kite_strdup(pr->ctr_name), .cid = kite_strdup(cid),
            .kind = kind, .success = ok, .changed = report, .output = out};
        out = NULL;
        if (p->wake) p->wake(p->wake_ud);
    }
    free(out);
}

/* One run's snapshot, owned by the thread that runs it. */
struct probe_job {
    struct kite_prober *p;
    char *cid, *ip;
    json_object *spec, *ports;
    enum probe_kind kind;
};

static void *probe_thread(void *ud) {
    struct probe_job *j = ud;
    struct kite_prober *p = j->p;
    char *out = NULL;
    bool ok = run_probe(p->rt, j->cid, j->spec, j->ports, j->ip, &out);
    pthread_mutex_lock(&p->lock);
    json_object_put(j->spec);
    json_object_put(j->ports);
    struct probe *pr = find(p, j->cid, j->kind);
    if (pr) pr->running = false;
    record(p, j->cid, j->kind, ok, out);
    p->n_running--;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    free(j->cid);
    free(j->ip);
    free(j);
    return NULL;
}

int64_t kite_pods_prober_step(struct kite_prober *p) {
    pthread_mutex_lock(&p->lock);
    for (;;) {
        int64_t now = kite_now_mono(p->clock);
        struct probe *due = NULL;
        for (size_t i = 0; i < p->n && !due; i++)
            if (!p->v[i].on_hold && !p->v[i].running && now >= p->v[i].next && !held_by_startup(p, &p->v[i]))
                due = &p->v[i];
        if (!due) break;
        int64_t period = kite_sec_to_ns(field_int(due->spec, "periodSeconds", 10, 1));
        due->next = now + period;
        /* run without the lock: a snapshot of what the probe needs */
        struct probe_job *j = kite_calloc(1, sizeof(*j));
        *j = (struct probe_job){.p = p, .cid = kite_strdup(due->cid), .ip = kite_strdup(due->ip),
                                .spec = json_object_get(due->spec), .ports = json_object_get(due->ports),
                                .kind = due->kind};
        if (p->started && !p->stopping) {
            due->running = true;
            p->n_running++;
            if (kite_pods_thread_spawn(probe_thread, j) == 0) continue;
            due->running = false;
            p->n_running--;
        }
        /* no threads (unit tests, or none to be had): here, one after another */
        char *out = NULL;
        pthread_mutex_unlock(&p->lock);
        bool ok = run_probe(p->rt, j->cid, j->spec, j->ports, j->ip, &out);
        pthread_mutex_lock(&p->lock);
        json_object_put(j->spec);
        json_object_put(j->ports);
        record(p, j->cid, j->kind, ok, out);
        free(j->cid);
        free(j->ip);
        free(j);
    }
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < p->n; i++)
        if (!p->v[i].on_hold && !p->v[i].running) next = KITE_MIN(next, p->v[i].next);
    pthread_mutex_unlock(&p->lock);
    return next;
}

void kite_pods_prober_take(struct kite_prober *p, struct probe_result **ret, size_t *ret_n) {
    pthread_mutex_lock(&p->lock);
    *ret = TAKE_PTR(p->res);
    *ret_n = p->n_res;
    p->n_res = 0;
    pthread_mutex_unlock(&p->lock);
}

static void *prober_thread(void *ud) {
    struct kite_prober *p = ud;
    for (;;) {
        int64_t next = kite_pods_prober_step(p);
        pthread_mutex_lock(&p->lock);
        if (p->stopping) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        /* until the next probe is due, or a probe is added; at most a second, so that the wait
         * follows the clock the probes are timed on even if it is not CLOCK_MONOTONIC */
        int64_t wait = next == INT64_MAX ? KITE_NS_PER_SEC : next - kite_now_mono(p->clock);
        if (wait > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t t = ts.tv_nsec + KITE_MIN(wait, KITE_NS_PER_SEC);
            ts.tv_sec += t / KITE_NS_PER_SEC;
            ts.tv_nsec = t % KITE_NS_PER_SEC;
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        }
        bool stop = p->stopping;
        pthread_mutex_unlock(&p->lock);
        if (stop) break;
    }
    return NULL;
}

int kite_pods_prober_start(struct kite_prober *p) {
    int r = -pthread_create(&p->thread, NULL, prober_thread, p);
    if (r == 0) p->started = true;
    return r;
}

void kite_pods_prober_stop(struct kite_prober *p) {
    if (!p->started) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    /* the runs under way end within their timeouts */
    pthread_mutex_lock(&p->lock);
    while (p->n_running) pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    p->started = false;
}
