/* The agent's log endpoint (the kubelet's `/containerLogs/...`): HTTPS on src/http, for the
 * API server's kubelet-client certificate alone (CN kube-apiserver-kubelet-client, signed by
 * the cluster CA): no credentials or a certificate the CA did not sign is 401, any other
 * identity (a node, an admin) 403, as a kubelet whose authorizer allows only the API server.
 *
 * A followed log is a chunked stream pulled by the HTTP layer: each pull renders what the file
 * holds beyond the last read. New lines are seen through inotify (one instance and one thread
 * for every follower; IN_MODIFY wakes the stream), and the stream ends when the attempt ends:
 * conmon closes the file when its container is gone (IN_CLOSE_WRITE), or the pods thread
 * reports the attempt no longer running, after which what conmon still flushes is read for
 * KITE_LOGS_DRAIN_NS (a timer of the HTTP layer, not a poll). */
#include "agent/logs/logs.h"
#include "base/gotime.h"

#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "agent/logs/resource.h"
#include "agent/pods/pods.h"
#include "agent/runtime/runtime.h"
#include "api/schema.h"
#include "base/clock.h"
#include "base/log.h"
#include "http/http.h"
#include "pki/pki.h"

#define LOGS_LOG "logs"
/* After the pods thread saw the attempt end, how long a follower still waits for conmon to
 * close the file (it flushes the container's last output first). */
#define KITE_LOGS_DRAIN_NS (2 * KITE_NS_PER_SEC)
/* Streams following a log at once; more are answered 429. */
#define KITE_LOGS_MAX_FOLLOWERS 256

struct follower {
    struct kite_logsrv *srv;
    struct kite_crilog log;
    char *ns, *pod, *ctr, *path;
    bool follow;
    int wd;                         /* inotify watch, -1 = none */
    /* under srv->lock */
    struct kite_http_stream *stream;
    bool writer_closed, attempt_ended;
    int64_t drain_until;            /* mono; with attempt_ended */
};

struct kite_logsrv {
    struct kite_http_server *http;
    struct kite_pods *pods;
    struct kite_runtime *runtime;
    size_t stream_buffer;
    char *node_name;
    long clk_tck;
    struct kite_clock *clock;
    int ino_fd, stop_fd;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    struct follower **f;
    size_t n_f;
};

static void reply_text(struct kite_http_req *r, int code, const char *fmt, ...) KITE_PRINTF(3, 4);
static void reply_text(struct kite_http_req *r, int code, const char *fmt, ...) {
    struct kite_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0) m = NULL;
    va_end(ap);
    kite_buf_puts(&b, m ? m : "");
    free(m);
    size_t len;
    char *body = kite_buf_detach(&b, &len);
    kite_http_respond(r, code, "text/plain; charset=utf-8", body, len);
}

/* ---- followers ---- */

static void follower_free(struct follower *f) {
    kite_crilog_close(&f->log);
    free(f->ns);
    free(f->pod);
    free(f->ctr);
    free(f->path);
    free(f);
}

/* The attempt of f no longer runs (or its file is not the current one any more): end after
 * the drain time. Under srv->lock. */
static void mark_ended(struct kite_logsrv *s, struct follower *f) {
    if (f->attempt_ended) return;
    f->attempt_ended = true;
    f->drain_until = kite_now_mono(s->clock) + KITE_LOGS_DRAIN_NS;
    if (f->stream) kite_http_stream_wake_at(f->stream, f->drain_until);
}

/* Checks f's attempt against the pods' index. Under srv->lock (which is taken before the pods
 * lock, never after). */
static void recheck(struct kite_logsrv *s, struct follower *f) {
    char *path = NULL;
    bool running = false;
    int r = s->pods ? kite_pods_log_lookup(s->pods, f->ns, f->pod, f->ctr, false, &path, &running) : -ENOENT;
    if (r < 0 || !running || strcmp(path, f->path) != 0) mark_ended(s, f);
    free(path);
}

/* pods thread: a container's state changed somewhere */
static void on_pods_change(void *ud) {
    struct kite_logsrv *s = ud;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_f; i++)
        if (s->f[i]->follow) recheck(s, s->f[i]);
    pthread_mutex_unlock(&s->lock);
}

static int pull(void *ud, struct kite_buf *out) {
    struct follower *f = ud;
    struct kite_logsrv *s = f->srv;
    int r = kite_crilog_read(&f->log, out);
    if (r < 0 || r == 2) return -1;
    if (r == 1 || out->len) return 1;
    if (!f->follow) return -1;
    pthread_mutex_lock(&s->lock);
    bool end = f->writer_closed || (f->attempt_ended && kite_now_mono(s->clock) >= f->drain_until);
    pthread_mutex_unlock(&s->lock);
    if (!end) return 0;
    /* the writer is gone: what it wrote last is in the file now */
    r = kite_crilog_read(&f->log, out);
    return r == 1 ? 1 : -1;
}

static void done(void *ud) {
    struct follower *f = ud;
    struct kite_logsrv *s = f->srv;
    pthread_mutex_lock(&s->lock);
    bool shared = false;
    for (size_t i = 0; i < s->n_f; i++) {
        if (s->f[i] == f) {
            s->f[i] = s->f[--s->n_f];
            i--;
        } else if (f->wd >= 0 && s->f[i]->wd == f->wd) {
            shared = true;
        }
    }
    if (f->wd >= 0 && !shared) inotify_rm_watch(s->ino_fd, f->wd);
    pthread_mutex_unlock(&s->lock);
    follower_free(f);
}

static void *inotify_thread(void *ud) {
    struct kite_logsrv *s = ud;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        struct pollfd p[2] = {{.fd = s->ino_fd, .events = POLLIN}, {.fd = s->stop_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents) break;
        ssize_t n = read(s->ino_fd, buf, sizeof buf);
        if (n <= 0) continue;
        pthread_mutex_lock(&s->lock);
        for (char *q = buf; q < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)q;
            for (size_t i = 0; i < s->n_f; i++) {
                struct follower *f = s->f[i];
                if (f->wd != ev->wd) continue;
                if (ev->mask & (IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) f->writer_closed = true;
                if (f->stream) kite_http_stream_wake(f->stream);
            }
            q += sizeof *ev + ev->len;
        }
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

/* ---- resource metrics ---- */

/* /metrics/resource and /stats/summary: measured now, for each running container of the pods
 * (a container that ended since the pods thread last published is left out). */
static void handle_resource(struct kite_logsrv *s, struct kite_http_req *r, bool summary) {
    struct kite_pods_ctr_ref *refs = NULL;
    size_t n = 0, k = 0;
    if (s->pods) kite_pods_running_containers(s->pods, &refs, &n);
    struct kite_ctr_sample *v = kite_calloc(n ? n : 1, sizeof *v);
    bool error = false;
    for (size_t i = 0; i < n; i++) {
        struct kite_ctr_sample *c = &v[k];
        int e = s->runtime && s->runtime->ops->container_stats
                    ? s->runtime->ops->container_stats(s->runtime, refs[i].id, &c->u)
                    : -EOPNOTSUPP;
        if (e < 0) {
            /* gone since the snapshot (-ENOENT) is no error; a runtime that cannot measure is */
            error |= e != -ENOENT;
            continue;
        }
        c->ns = refs[i].ns;
        c->pod = refs[i].pod;
        c->uid = refs[i].uid;
        c->name = refs[i].name;
        c->started_ns = refs[i].started_ns;
        c->ts_ns = kite_now_wall(s->clock);
        k++;
    }
    struct kite_usage node;
    int64_t node_ts = kite_now_wall(s->clock);
    bool have_node = kite_node_usage("", s->clk_tck, &node) == 0;
    struct kite_buf b = {0};
    if (summary) {
        struct timespec bt;
        int64_t boot = clock_gettime(CLOCK_BOOTTIME, &bt) == 0 ? node_ts - kite_sec_to_ns(bt.tv_sec) - bt.tv_nsec : 0;
        kite_stats_summary_render(s->node_name, boot, have_node ? &node : NULL, node_ts, v, k, &b);
    } else {
        kite_resource_metrics_render(have_node ? &node : NULL, node_ts, v, k, error, &b);
    }
    free(v);
    kite_pods_ctr_refs_free(refs, n);
    size_t len;
    char *body = kite_buf_detach(&b, &len);
    kite_http_respond(r, 200, summary ? "application/json" : "text/plain; version=0.0.4; charset=utf-8", body, len);
}

/* ---- the request ---- */

/* Parses an integer query parameter; false (and answered 400) when malformed. */
static bool int_param(struct kite_http_req *r, const char *name, int64_t min, int64_t *ret) {
    const char *v = kite_http_query(r, name);
    if (!v) return true;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < min) {
        reply_text(r, 400, "invalid %s: %s", name, v);
        return false;
    }
    *ret = x;
    return true;
}

static bool query_true(const char *v) { return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "True") == 0); }

static void handle(struct kite_http_req *r, void *ud) {
    struct kite_logsrv *s = ud;
    if (r->authn_failed || !r->user) {
        reply_text(r, 401, "Unauthorized");
        return;
    }
    if (strcmp(r->user->name, KITE_PKI_KUBELET_CLIENT_CN) != 0) {
        reply_text(r, 403, "Forbidden (user=%s, verb=get, resource=nodes, subresource=proxy)", r->user->name);
        return;
    }
    if (strcmp(r->path, "/metrics/resource") == 0 || strcmp(r->path, "/stats/summary") == 0) {
        if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
            reply_text(r, 405, "405: Method Not Allowed");
            return;
        }
        handle_resource(s, r, strcmp(r->path, "/stats/summary") == 0);
        return;
    }
    /* /containerLogs/{namespace}/{pod}/{container} */
    char seg[4][256];
    int n = 0;
    const char *p = r->path;
    while (*p == '/' && n < 4) {
        size_t k = strcspn(p + 1, "/");
        if (!k || k >= sizeof seg[0]) break;
        memcpy(seg[n], p + 1, k);
        seg[n++][k] = 0;
        p += 1 + k;
    }
    if (n == 3 && !*p && strcmp(seg[0], "portForward") == 0 && s->pods) {
        kite_logsrv_stream(r, s->pods, s->stream_buffer, false, seg[1], seg[2], NULL);
        return;
    }
    if (n == 4 && !*p && (strcmp(seg[0], "exec") == 0 || strcmp(seg[0], "attach") == 0)) {
        if (!s->pods) {
            reply_text(r, 404, "pod \"%s/%s\" does not exist\n", seg[1], seg[2]);
            return;
        }
        kite_logsrv_stream(r, s->pods, s->stream_buffer, seg[0][0] == 'a', seg[1], seg[2], seg[3]);
        return;
    }
    if (n != 4 || *p || strcmp(seg[0], "containerLogs") != 0) {
        reply_text(r, 404, "404 page not found");
        return;
    }
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
        reply_text(r, 405, "405: Method Not Allowed");
        return;
    }
    const char *ns = seg[1], *pod = seg[2], *ctr = seg[3];
    struct kite_crilog_options o = {.tail_lines = -1};
    int64_t since_s = 0;
    if (!int_param(r, "tailLines", 0, &o.tail_lines) || !int_param(r, "limitBytes", 1, &o.limit_bytes) ||
        !int_param(r, "sinceSeconds", 1, &since_s))
        return;
    const char *since_time = kite_http_query(r, "sinceTime");
    if (since_s) o.since_ns = kite_time_add(kite_now_wall(s->clock), -kite_sec_to_ns(since_s));
    if (since_time) {
        int64_t sec;
        int32_t nsec;
        if (kite_gotime_parse(since_time, false, &sec, &nsec, NULL) < 0) {
            reply_text(r, 400, "invalid sinceTime: %s", since_time);
            return;
        }
        o.since_ns = kite_time_add(kite_sec_to_ns(sec), nsec);
    }
    o.timestamps = query_true(kite_http_query(r, "timestamps"));
    bool previous = query_true(kite_http_query(r, "previous")), follow = query_true(kite_http_query(r, "follow"));

    char *path = NULL;
    bool running = false;
    int e = s->pods ? kite_pods_log_lookup(s->pods, ns, pod, ctr, previous, &path, &running) : -ENOENT;
    if (e == -ENOENT) {
        reply_text(r, 404, "pod \"%s/%s\" does not exist\n", ns, pod);
        return;
    }
    if (e == -ESRCH) {
        reply_text(r, 404, "container \"%s\" not found in pod \"%s/%s\"\n", ctr, ns, pod);
        return;
    }
    if (e == -ENODATA) {
        if (previous) reply_text(r, 400, "previous terminated container \"%s\" in pod \"%s\" not found", ctr, pod);
        else reply_text(r, 400, "container \"%s\" in pod \"%s\" is waiting to start: ContainerCreating", ctr, pod);
        return;
    }
    struct follower *f = kite_calloc(1, sizeof *f);
    f->srv = s;
    f->wd = -1;
    f->ns = kite_strdup(ns);
    f->pod = kite_strdup(pod);
    f->ctr = kite_strdup(ctr);
    f->path = path;
    f->follow = follow && running;
    if ((e = kite_crilog_open(&f->log, path, &o)) < 0) {
        /* the runtime has not written the file yet: the attempt is being created */
        if (e == -ENOENT) reply_text(r, 400, "container \"%s\" in pod \"%s\" is waiting to start: ContainerCreating", ctr, pod);
        else reply_text(r, 500, "reading the log of container \"%s\": %s", ctr, strerror(-e));
        follower_free(f);
        return;
    }
    pthread_mutex_lock(&s->lock);
    if (s->n_f >= KITE_LOGS_MAX_FOLLOWERS) {
        pthread_mutex_unlock(&s->lock);
        follower_free(f);
        reply_text(r, 429, "too many log streams (%u)", KITE_LOGS_MAX_FOLLOWERS);
        return;
    }
    if (f->follow) {
        f->wd = inotify_add_watch(s->ino_fd, path, IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF);
        if (f->wd < 0) {
            e = -errno;
            pthread_mutex_unlock(&s->lock);
            follower_free(f);
            reply_text(r, 500, "watching the log of container \"%s\": %s", ctr, strerror(-e));
            return;
        }
        /* the attempt may have ended between the lookup and the watch */
        recheck(s, f);
    }
    s->f = kite_realloc(s->f, (s->n_f + 1) * sizeof *s->f);
    s->f[s->n_f++] = f;
    pthread_mutex_unlock(&s->lock);
    struct kite_http_stream *st = NULL;
    if (kite_http_stream_begin(r, 200, "text/plain", pull, done, f, &st) < 0) {
        done(f);
        return;
    }
    pthread_mutex_lock(&s->lock);
    f->stream = st;
    if (f->attempt_ended) kite_http_stream_wake_at(st, f->drain_until);
    pthread_mutex_unlock(&s->lock);
}

/* ---- lifecycle ---- */

int kite_logsrv_start(const struct kite_logsrv_options *o, struct kite_logsrv **ret, char **ret_err) {
    struct kite_logsrv *s = kite_calloc(1, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->pods = o->pods;
    s->runtime = o->runtime;
    s->stream_buffer = o->stream_buffer ? o->stream_buffer : KITE_STREAM_BUFFER;
    s->node_name = kite_strdup(o->node_name ? o->node_name : "");
    s->clk_tck = sysconf(_SC_CLK_TCK);
    s->clock = kite_clock_real();
    s->stop_fd = eventfd(0, EFD_CLOEXEC);
    s->ino_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    _cleanup_free_ char *cert = NULL, *key = NULL;
    int r = 0;
    if (s->stop_fd < 0 || s->ino_fd < 0) {
        r = -errno;
        if (ret_err) *ret_err = kite_asprintf("log server: inotify: %s", strerror(-r));
    }
    if (r == 0 && !(o->cert_pem && o->key_pem)) {
        /* the kubelet's default: a self-signed serving certificate made at start */
        const char **sans = kite_calloc(o->n_sans + 2, sizeof *sans);
        size_t n = 0;
        sans[n++] = o->node_name ? o->node_name : "localhost";
        for (size_t i = 0; i < o->n_sans; i++) sans[n++] = o->sans[i];
        r = kite_pki_self_signed(o->node_name ? o->node_name : "localhost", sans, n, &cert, &key);
        free(sans);
        if (r < 0 && ret_err) *ret_err = kite_asprintf("log server: self-signed certificate: %s", strerror(-r));
    }
    if (r == 0) {
        struct kite_http_config hc = {.listen = o->listen,
                                      .cert_pem = cert ? cert : o->cert_pem,
                                      .key_pem = key ? key : o->key_pem,
                                      .client_ca_pem = o->client_ca_pem,
                                      .threads = 1,
                                      .handler = handle,
                                      .ud = s};
        r = kite_http_start(&hc, &s->http);
        if (r < 0 && ret_err) *ret_err = kite_asprintf("log server on %s: %s", o->listen, strerror(-r));
    }
    if (r == 0) {
        r = -pthread_create(&s->thread, NULL, inotify_thread, s);
        s->thread_started = r == 0;
        if (r < 0 && ret_err) *ret_err = kite_asprintf("log server: thread: %s", strerror(-r));
    }
    if (r < 0) {
        kite_logsrv_stop(s);
        return r;
    }
    if (s->pods) kite_pods_log_subscribe(s->pods, on_pods_change, s);
    *ret = s;
    return 0;
}

uint16_t kite_logsrv_port(struct kite_logsrv *s) { return kite_http_port(s->http); }

void kite_logsrv_stop(struct kite_logsrv *s) {
    if (!s) return;
    if (s->pods) kite_pods_log_subscribe(s->pods, NULL, NULL);
    /* ends the streams (done() for each) before the inotify thread goes */
    kite_http_stop(s->http);
    if (s->thread_started) {
        uint64_t one = 1;
        if (write(s->stop_fd, &one, sizeof one) < 0) log_warn(LOGS_LOG, "stopping the inotify thread: %s", strerror(errno));
        pthread_join(s->thread, NULL);
    }
    if (s->ino_fd >= 0) close(s->ino_fd);
    if (s->stop_fd >= 0) close(s->stop_fd);
    free(s->f);
    free(s->node_name);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
