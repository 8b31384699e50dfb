/* The audit log (kube-apiserver's --audit-log-path with the default level, Metadata): one
 * audit.k8s.io/v1 Event per request and stage as a JSON line: who (user, impersonatedUser,
 * sourceIPs, userAgent), what (verb, requestURI, objectRef), the answer's code and when.
 * Watches get a ResponseStarted event when their stream begins and ResponseComplete when it
 * ends; every other request one ResponseComplete.
 *
 * A request only formats its line and appends it to a buffer under a mutex; one thread writes
 * the buffer out, so no request ever waits for the disk. The writer wakes for a batch: when
 * KITE_AUDIT_BATCH_BYTES are waiting or KITE_AUDIT_BATCH_NS after the first of them (a wake-up
 * and a write(2) per event cost more CPU than the rest of a lease renewal), so a crash loses at
 * most that much of the log. Past KITE_AUDIT_BUFFER_MAX bytes
 * waiting (a stalled disk) events are dropped and counted, not queued without bound. The file
 * rotates before it would pass --audit-log-maxsize MB, to NAME-<UTC time>.EXT as
 * kube-apiserver's (lumberjack's) backups are named, keeping --audit-log-maxbackup of them.
 * Write errors are counted in /metrics and logged at most once a second. */
#include "apiserver/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define KITE_AUDIT_BATCH_BYTES (64u * 1024)
#define KITE_AUDIT_BATCH_NS (50 * KITE_NS_PER_MS)

struct kite_audit {
    char *path, *dir, *base, *ext; /* path = dir/base+ext */
    int fd;
    int64_t size, max_bytes, max_backups;
    struct kite_clock *clock;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake, written;
    struct kite_buf pending;       /* lines waiting for the writer */
    bool stopping, flushing;
    uint64_t appended, done;       /* events appended and written (or lost) so far */
    uint64_t events, dropped, write_errors, rotations; /* under mu */
    struct kite_log_ratelimit log;
};

/* ---- the writer -------------------------------------------------------------------------- */

/* "audit-2026-12-05T05-30-00.123.log" for audit.log, as lumberjack names backups. */
static char *backup_name(struct kite_audit *a, int64_t wall_ns) {
    time_t sec = (time_t)(wall_ns / KITE_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char ts[40];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H-%M-%S", &tm);
    return kite_asprintf("%s/%s-%s.%03d%s", a->dir, a->base, ts, (int)(wall_ns / 1000000 % 1000), a->ext);
}

static int cmp_names(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* Removes the oldest backups beyond max_backups (their names sort by time). */
static void prune(struct kite_audit *a) {
    if (a->max_backups <= 0) return;
    DIR *d = opendir(a->dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, blen = strlen(a->base), elen = strlen(a->ext);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        /* base + "-" + "2006-01-02T15-04-05.000" + ext */
        if (len != blen + 1 + 23 + elen || strncmp(e->d_name, a->base, blen) != 0 || e->d_name[blen] != '-' ||
            strcmp(e->d_name + len - elen, a->ext) != 0)
            continue;
        names = kite_realloc(names, (n + 1) * sizeof *names);
        names[n++] = kite_strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        if ((int64_t)(n - i) > a->max_backups) {
            _cleanup_free_ char *p = kite_asprintf("%s/%s", a->dir, names[i]);
            unlink(p);
        }
        free(names[i]);
    }
    free(names);
}

static int open_log(struct kite_audit *a) {
    int fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    struct stat st;
    a->size = fstat(fd, &st) == 0 ? st.st_size : 0;
    a->fd = fd;
    return 0;
}

static int rotate(struct kite_audit *a) {
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    int64_t now = kite_now_wall(a->clock);
    for (int i = 0; i < 1000; i++, now += 1000000) { /* two rotations in one millisecond */
        _cleanup_free_ char *to = backup_name(a, now);
        if (access(to, F_OK) == 0) continue;
        if (rename(a->path, to) < 0 && errno != ENOENT) return -errno;
        break;
    }
    a->rotations++;
    prune(a);
    return open_log(a);
}

static void count_error(struct kite_audit *a, int r) {
    pthread_mutex_lock(&a->mu);
    a->write_errors++;
    pthread_mutex_unlock(&a->mu);
    uint64_t held;
    if (kite_log_ratelimit_allow(&a->log, kite_now_mono(a->clock), &held))
        log_warn("audit", "cannot write the audit log %s: %s (%llu more errors not logged)", a->path, strerror(-r),
                 (unsigned long long)held);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -errno;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Writes whole lines, rotating first when the next ones would take the file past its size. */
static void write_batch(struct kite_audit *a, const char *p, size_t n) {
    while (n) {
        int r = 0;
        if (a->fd < 0 && (r = open_log(a)) < 0) {
            count_error(a, r);
            return;
        }
        size_t take = n;
        if (a->max_bytes > 0 && a->size + (int64_t)n > a->max_bytes) {
            /* the longest run of lines that still fits; at least one line in an empty file */
            size_t room = a->size < a->max_bytes ? (size_t)(a->max_bytes - a->size) : 0;
            take = 0;
            for (size_t i = 0; i < n && i < room; i++)
                if (p[i] == '\n') take = i + 1;
            if (!take && a->size > 0) {
                if ((r = rotate(a)) < 0) {
                    count_error(a, r);
                    return;
                }
                continue;
            }
            if (!take) take = (size_t)((const char *)memchr(p, '\n', n) - p) + 1;
        }
        if ((r = write_all(a->fd, p, take)) < 0) {
            count_error(a, r);
            return;
        }
        a->size += (int64_t)take;
        p += take;
        n -= take;
    }
}

static void *writer_main(void *ud) {
    struct kite_audit *a = ud;
    struct kite_buf batch = {0};
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->pending.len && !a->stopping) pthread_cond_wait(&a->wake, &a->mu);
        if (!a->pending.len) break;
        /* a batch: until enough is waiting, its time is up, or someone waits for it */
        struct timespec until;
        kite_cond_deadline(&until, KITE_AUDIT_BATCH_NS);
        while (a->pending.len < KITE_AUDIT_BATCH_BYTES && !a->stopping && !a->flushing &&
               pthread_cond_timedwait(&a->wake, &a->mu, &until) != ETIMEDOUT) {
        }
        a->flushing = false;
        struct kite_buf t = batch;
        batch = a->pending;
        a->pending = t;
        kite_buf_reset(&a->pending);
        uint64_t upto = a->appended;
        pthread_mutex_unlock(&a->mu);
        write_batch(a, batch.p, batch.len);
        pthread_mutex_lock(&a->mu);
        a->done = upto;
        pthread_cond_broadcast(&a->written);
    }
    pthread_mutex_unlock(&a->mu);
    kite_buf_release(&batch);
    return NULL;
}

int kite_audit_open(const struct kite_audit_options *o, struct kite_audit **ret) {
    struct kite_audit *a = kite_calloc(1, sizeof *a);
    a->path = kite_strdup(o->path);
    const char *slash = strrchr(o->path, '/');
    a->dir = slash ? kite_strndup(o->path, (size_t)(slash - o->path)) : kite_strdup(".");
    if (!*a->dir) {
        free(a->dir);
        a->dir = kite_strdup("/");
    }
    const char *file = slash ? slash + 1 : o->path, *dot = strrchr(file, '.');
    if (!dot || dot == file) dot = file + strlen(file);
    a->base = kite_strndup(file, (size_t)(dot - file));
    a->ext = kite_strdup(dot);
    a->fd = -1;
    a->max_bytes = o->max_size_mb > 0 ? o->max_size_mb * 1024 * 1024 : 0;
    a->max_backups = o->max_backups;
    a->clock = o->clock ? o->clock : kite_clock_real();
    a->log.interval_ns = KITE_NS_PER_SEC;
    pthread_mutex_init(&a->mu, NULL);
    kite_cond_init_mono(&a->wake); /* the batch's timed wait */
    pthread_cond_init(&a->written, NULL);
    int r = kite_mkdir_p(a->dir, 0700);
    if (r == 0) r = open_log(a);
    if (r == 0 && pthread_create(&a->thread, NULL, writer_main, a) != 0) r = -EAGAIN;
    if (r < 0) {
        if (a->fd >= 0) close(a->fd);
        a->thread = 0;
        a->stopping = true;
        kite_audit_close(a);
        return r;
    }
    pthread_setname_np(a->thread, "audit");
    *ret = a;
    return 0;
}

void kite_audit_close(struct kite_audit *a) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    bool started = !a->stopping;
    a->stopping = true;
    pthread_cond_broadcast(&a->wake);
    pthread_mutex_unlock(&a->mu);
    if (started) pthread_join(a->thread, NULL);
    if (started && a->fd >= 0) close(a->fd);
    kite_buf_release(&a->pending);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->wake);
    pthread_cond_destroy(&a->written);
    free(a->path);
    free(a->dir);
    free(a->base);
    free(a->ext);
    free(a);
}

void kite_audit_flush(struct kite_audit *a) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    uint64_t want = a->appended;
    if (a->done < want) {
        a->flushing = true;
        pthread_cond_signal(&a->wake);
    }
    while (a->done < want) pthread_cond_wait(&a->written, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

void kite_audit_metrics(struct kite_audit *a, struct kite_buf *out) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    uint64_t ev = a->events, lost = a->dropped, werr = a->write_errors, rot = a->rotations;
    pthread_mutex_unlock(&a->mu);
    kite_buf_printf(out,
                    "# HELP apiserver_audit_event_total Audit events generated and sent to the audit log.\n"
                    "# TYPE apiserver_audit_event_total counter\napiserver_audit_event_total %llu\n"
                    "# HELP apiserver_audit_error_total Audit events dropped because the audit log could not keep up.\n"
                    "# TYPE apiserver_audit_error_total counter\napiserver_audit_error_total{plugin=\"log\"} %llu\n"
                    "# HELP kite_audit_write_errors_total Writes of the audit log that failed.\n"
                    "# TYPE kite_audit_write_errors_total counter\nkite_audit_write_errors_total %llu\n"
                    "# HELP kite_audit_rotations_total Times the audit log was rotated.\n"
                    "# TYPE kite_audit_rotations_total counter\nkite_audit_rotations_total %llu\n",
                    (unsigned long long)ev, (unsigned long long)lost, (unsigned long long)werr, (unsigned long long)rot);
}

void kite_audit_append(struct kite_audit *a, const char *line, size_t len) {
    pthread_mutex_lock(&a->mu);
    a->events++;
    if (a->pending.len + len > KITE_AUDIT_BUFFER_MAX) {
        a->dropped++;
    } else {
        kite_buf_append(&a->pending, line, len);
        a->appended++;
        /* the first line starts a batch, a full batch ends it: the writer sleeps in between */
        if (a->pending.len == len || (a->pending.len >= KITE_AUDIT_BATCH_BYTES && a->pending.len - len < KITE_AUDIT_BATCH_BYTES))
            pthread_cond_signal(&a->wake);
    }
    pthread_mutex_unlock(&a->mu);
}

/* ---- events ------------------------------------------------------------------------------ */

/* A version-4 UUID from a per-thread generator (splitmix64) seeded once from getrandom(2): an
 * audit ID must be unique, not secret, and a system call per request was a visible cost. */
static void audit_id(char out[37]) {
    static __thread uint64_t state;
    static __thread bool seeded;
    if (!seeded) {
        kite_random_bytes(&state, sizeof state);
        seeded = true;
    }
    unsigned char b[16];
    for (int half = 0; half < 2; half++) {
        uint64_t z = (state += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        z ^= z >> 31;
        memcpy(b + 8 * half, &z, 8);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    char *o = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *o++ = '-';
        *o++ = hex[b[i] >> 4];
        *o++ = hex[b[i] & 15];
    }
    *o = 0;
}

static void user_json(struct kite_buf *b, const struct kite_user *u) {
    kite_buf_puts(b, "{\"username\":");
    kite_buf_json_str(b, u->name ? u->name : "");
    if (u->uid && *u->uid) {
        kite_buf_puts(b, ",\"uid\":");
        kite_buf_json_str(b, u->uid);
    }
    kite_buf_puts(b, ",\"groups\":[");
    for (size_t i = 0; i < u->n_groups; i++) {
        if (i) kite_buf_putc(b, ',');
        kite_buf_json_str(b, u->groups[i]);
    }
    kite_buf_putc(b, ']');
    if (u->n_extra) {
        /* map[string][]string: the values of one key together, keys in first-seen order */
        kite_buf_puts(b, ",\"extra\":{");
        bool first_key = true;
        for (size_t i = 0; i < u->n_extra; i++) {
            bool seen = false;
            for (size_t j = 0; j < i; j++) seen |= strcmp(u->extra[2 * j], u->extra[2 * i]) == 0;
            if (seen) continue;
            if (!first_key) kite_buf_putc(b, ',');
            first_key = false;
            kite_buf_json_str(b, u->extra[2 * i]);
            kite_buf_puts(b, ":[");
            bool first = true;
            for (size_t j = i; j < u->n_extra; j++) {
                if (strcmp(u->extra[2 * j], u->extra[2 * i]) != 0) continue;
                if (!first) kite_buf_putc(b, ',');
                first = false;
                kite_buf_json_str(b, u->extra[2 * j + 1]);
            }
            kite_buf_putc(b, ']');
        }
        kite_buf_putc(b, '}');
    }
    kite_buf_putc(b, '}');
}

static void str_field(struct kite_buf *b, const char *name, const char *v) {
    kite_buf_puts(b, ",\"");
    kite_buf_puts(b, name);
    kite_buf_puts(b, "\":");
    kite_buf_json_str(b, v);
}

/* kite_microtime_format without strftime and gmtime on every call: the second's part is kept
 * per thread (an event formats two times, mostly within the same second). */
static void audit_time(int64_t wall_ns, char out[28]) {
    static __thread int64_t sec = -1;
    static __thread char prefix[28];
    int64_t s = wall_ns / KITE_NS_PER_SEC;
    if (s != sec) {
        kite_microtime_format(wall_ns, prefix);
        sec = s;
    }
    memcpy(out, prefix, 28);
    char *us = strchr(out, '.') + 1; /* "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" */
    unsigned v = (unsigned)((wall_ns % KITE_NS_PER_SEC) / 1000) % 1000000u;
    for (int i = 5; i >= 0; i--, v /= 10) us[i] = (char)('0' + v % 10);
}

/* The fields every stage of rq's event repeats (built while its HTTP request is readable). */
static char *event_head(struct req *rq, const char *id) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "\"auditID\":");
    kite_buf_json_str(&b, id);
    str_field(&b, "requestURI", kite_http_target(rq->http));
    char verb[32];
    if (rq->verb) {
        snprintf(verb, sizeof verb, "%s", rq->verb);
    } else { /* refused before routing: the HTTP method, as for non-resource requests */
        snprintf(verb, sizeof verb, "%s", rq->http->method);
        for (char *c = verb; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    }
    str_field(&b, "verb", verb);
    /* who authenticated; who the request ran as when impersonating */
    kite_buf_puts(&b, ",\"user\":");
    const struct kite_user *who = rq->impersonator.name ? &rq->impersonator : &rq->user;
    if (who->name) {
        user_json(&b, who);
    } else { /* refused before it was authenticated */
        kite_buf_puts(&b, "{}");
    }
    if (rq->impersonator.name) {
        kite_buf_puts(&b, ",\"impersonatedUser\":");
        user_json(&b, &rq->user);
    }
    char ip[64];
    kite_http_peer_ip(rq->http, ip);
    kite_buf_puts(&b, ",\"sourceIPs\":[");
    if (*ip) kite_buf_json_str(&b, ip);
    kite_buf_putc(&b, ']');
    const char *ua = kite_http_header(rq->http, "User-Agent");
    if (ua) str_field(&b, "userAgent", ua);
    if (rq->res) {
        kite_buf_puts(&b, ",\"objectRef\":{\"resource\":");
        kite_buf_json_str(&b, rq->res->plural);
        if (rq->ns) str_field(&b, "namespace", rq->ns);
        if (rq->name) str_field(&b, "name", rq->name);
        if (*rq->res->group) str_field(&b, "apiGroup", rq->res->group);
        str_field(&b, "apiVersion", rq->res->version);
        if (rq->sub) str_field(&b, "subresource", rq->sub);
        kite_buf_putc(&b, '}');
    }
    return kite_buf_detach(&b, NULL);
}

void kite_apiserver_audit(struct req *rq, enum kite_audit_stage stage, int code) {
    struct kite_audit *a = rq->srv->audit;
    if (!a) return;
    if (!rq->audit_head) {
        /* the client's Audit-ID when it is a plain token, else a new one; answered as kube-apiserver does */
        char id[65];
        const char *given = kite_http_header(rq->http, "Audit-ID");
        size_t n = given ? strlen(given) : 0;
        if (n && n < sizeof id && strspn(given, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n)
            memcpy(id, given, n + 1);
        else
            audit_id(id);
        rq->audit_head = event_head(rq, id);
        kite_http_add_header(rq->http, "Audit-Id", id);
    }
    char received[28], now[28], num[16];
    audit_time(rq->start_wall_ns, received);
    audit_time(kite_now_wall(rq->srv->clock), now);
    snprintf(num, sizeof num, "%d", code);
    /* one line a request stage, built with copies, not printf */
    struct kite_buf b = {0};
    kite_buf_grow(&b, 320 + strlen(rq->audit_head));
    kite_buf_puts(&b, "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"Metadata\",\"stage\":\"");
    kite_buf_puts(&b, stage == KITE_AUDIT_RESPONSE_STARTED ? "ResponseStarted" : "ResponseComplete");
    kite_buf_puts(&b, "\",");
    kite_buf_puts(&b, rq->audit_head);
    kite_buf_puts(&b, ",\"responseStatus\":{\"metadata\":{},\"code\":");
    kite_buf_puts(&b, num);
    kite_buf_puts(&b, "},\"requestReceivedTimestamp\":\"");
    kite_buf_puts(&b, received);
    kite_buf_puts(&b, "\",\"stageTimestamp\":\"");
    kite_buf_puts(&b, now);
    kite_buf_putc(&b, '"');
    if (rq->audit_annotations) { /* what admission plugins noted (PodSecurity's policy and violations) */
        kite_buf_puts(&b, ",\"annotations\":{");
        kite_buf_puts(&b, rq->audit_annotations);
        kite_buf_putc(&b, '}');
    }
    kite_buf_puts(&b, "}\n");
    kite_audit_append(a, b.p, b.len);
    kite_buf_release(&b);
}
