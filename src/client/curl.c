/* The libcurl transport. One easy handle serves every plain request (under a lock): libcurl
 * keeps its connection open between requests, so heartbeats reuse one TLS session instead
 * of handshaking every 10 s. Each watch gets its own easy handle inside its own multi handle
 * so curl_multi_poll() blocks on the socket and curl_multi_wakeup() cancels it promptly.
 *
 * TLS material: libcurl's GnuTLS backend ignores CURLOPT_SSLCERT_BLOB/SSLKEY_BLOB and refuses
 * CAINFO_BLOB, so the PEM bytes go into memfds and libcurl reads /proc/self/fd/N. If memfds
 * are unavailable, a 0600 file in $TMPDIR is used and removed when the client is freed. */
#include <curl/curl.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/buf.h"
#include "client/client.h"

struct pem_file {
    int fd;
    char *path;
    bool unlink_on_free;
};

struct curl_client {
    struct kite_client base;
    pthread_mutex_t lock; /* guards easy */
    CURL *easy;
    char *server;
    char *auth_header;
    char *user_agent;
    struct pem_file ca, cert, key;
    bool insecure;
    long timeout_ms, connect_timeout_ms;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static int pem_file_write(struct pem_file *f, const char *data, size_t len) {
    f->fd = memfd_create("kite-tls", MFD_CLOEXEC);
    if (f->fd >= 0) {
        f->path = kite_asprintf("/proc/self/fd/%d", f->fd);
        if (access(f->path, R_OK) < 0) { /* no /proc: fall back to a file */
            close(f->fd);
            free(f->path);
            f->path = NULL;
            f->fd = -1;
        }
    }
    if (f->fd < 0) {
        const char *tmp = getenv("TMPDIR");
        f->path = kite_asprintf("%s/kite-tls-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        f->fd = mkostemp(f->path, O_CLOEXEC); /* mode 0600 */
        if (f->fd < 0) {
            int e = -errno;
            free(f->path);
            f->path = NULL;
            return e;
        }
        f->unlink_on_free = true;
    }
    for (size_t off = 0; off < len;) {
        ssize_t n = write(f->fd, data + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        off += (size_t)n;
    }
    return 0;
}

static void pem_file_release(struct pem_file *f) {
    if (f->unlink_on_free && f->path) unlink(f->path);
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    f->path = NULL;
    f->fd = -1;
}

static size_t body_cb(char *data, size_t size, size_t n, void *ud) {
    struct kite_buf *b = ud;
    if (b->len + n > KITE_CLIENT_MAX_BODY) return 0; /* aborts with CURLE_WRITE_ERROR */
    kite_buf_append(b, data, n);
    return n;
}

static void common_setopts(struct curl_client *c, CURL *e) {
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->ca.path) {
        /* Trust only the kubeconfig's CA. Without clearing CAPATH, libcurl-gnutls also parses
         * the whole system trust directory per handle: ~7 MB of heap per thread. */
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca.path);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
    if (c->cert.path) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert.path);
        curl_easy_setopt(e, CURLOPT_SSLKEY, c->key.path);
    }
    if (c->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

static struct curl_slist *headers_for(struct curl_client *c, const char *content_type, const char *accept) {
    struct curl_slist *h = NULL;
    char line[256];
    /* JSON is every API server's default: say nothing (the agent's requests are counted bytes) */
    snprintf(line, sizeof(line), "Accept:%s%s", accept && strcmp(accept, "application/json") ? " " : "",
             accept && strcmp(accept, "application/json") ? accept : "");
    h = curl_slist_append(h, line);
    if (content_type) {
        _cleanup_free_ char *ct = kite_asprintf("Content-Type: %s", content_type);
        h = curl_slist_append(h, ct);
    }
    h = curl_slist_append(h, "Expect:");
    if (c->auth_header) h = curl_slist_append(h, c->auth_header);
    return h;
}

static int curl_request(struct kite_client *base, const char *method, const char *path, const char *content_type,
                        const char *body, size_t body_len, struct kite_response *ret) {
    struct curl_client *c = (struct curl_client *)base;
    _cleanup_free_ char *url = kite_asprintf("%s%s", c->server, path);
    struct curl_slist *h = headers_for(c, body ? content_type : NULL, "application/json");
    struct kite_buf out = {0};
    pthread_mutex_lock(&c->lock);
    if (!c->easy) {
        c->easy = curl_easy_init();
        if (!c->easy) {
            pthread_mutex_unlock(&c->lock);
            curl_slist_free_all(h);
            return -ENOMEM;
        }
        common_setopts(c, c->easy);
        curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, c->timeout_ms);
        curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, body_cb);
    }
    CURL *e = c->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &out);
    if (body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, kite_streq(method, "GET") ? NULL : method);
    }
    CURLcode cc = curl_easy_perform(e);
    long code = 0, os_errno = 0, hdr_bytes = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_errno);
    curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &hdr_bytes);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, NULL);
    pthread_mutex_unlock(&c->lock);
    curl_slist_free_all(h);
    atomic_fetch_add(&base->requests, 1);
    atomic_fetch_add(&base->bytes_sent, (uint64_t)hdr_bytes + (cc == CURLE_OK ? body_len : 0));
    if (cc != CURLE_OK) {
        kite_buf_release(&out);
        return cc == CURLE_WRITE_ERROR ? -EFBIG : kite_curl_errno(cc, os_errno);
    }
    ret->status = code;
    ret->body = kite_buf_detach(&out, &ret->len);
    return 0;
}

static void curl_reset(struct kite_client *base) {
    struct curl_client *c = (struct curl_client *)base;
    pthread_mutex_lock(&c->lock);
    /* the easy handle owns the connection cache: dropping it closes the sockets */
    if (c->easy) curl_easy_cleanup(c->easy);
    c->easy = NULL;
    pthread_mutex_unlock(&c->lock);
}

/* ---- watch ---- */

struct watch_state {
    CURL *easy;
    kite_watch_fn fn;
    void *ud;
    struct kite_lines lines;
    struct kite_buf err_body; /* body of a non-200 answer, bounded */
    int stop;                 /* fn's negative return, or parse errors */
};

static int watch_line(char *line, size_t len, void *ud) {
    struct watch_state *w = ud;
    json_tokener *tok = json_tokener_new();
    json_object *ev = json_tokener_parse_ex(tok, line, (int)len);
    bool ok = ev && json_tokener_get_error(tok) == json_tokener_success;
    json_tokener_free(tok);
    if (!ok) {
        json_object_put(ev);
        return -EBADMSG;
    }
    int r = w->fn(ev, w->ud);
    json_object_put(ev);
    return r < 0 ? r : 0;
}

static size_t watch_cb(char *data, size_t size, size_t n, void *ud) {
    struct watch_state *w = ud;
    long code = 0;
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
        if (w->err_body.len < 65536) kite_buf_append(&w->err_body, data, KITE_MIN(n, 65536 - w->err_body.len));
        return n;
    }
    int r = kite_lines_feed(&w->lines, data, n, watch_line, w);
    if (r < 0) {
        w->stop = r;
        return 0;
    }
    return n;
}

static void multi_wake(void *ud) { curl_multi_wakeup(ud); }

static int curl_watch(struct kite_client *base, const char *path, kite_watch_fn fn, void *ud,
                      struct kite_cancel *cancel) {
    struct curl_client *c = (struct curl_client *)base;
    _cleanup_free_ char *url = kite_asprintf("%s%s", c->server, path);
    struct watch_state w = {.fn = fn, .ud = ud};
    kite_lines_init(&w.lines, KITE_WATCH_MAX_LINE);
    CURLM *m = curl_multi_init();
    w.easy = curl_easy_init();
    if (!m || !w.easy) {
        if (w.easy) curl_easy_cleanup(w.easy);
        if (m) curl_multi_cleanup(m);
        return -ENOMEM;
    }
    struct curl_slist *h = headers_for(c, NULL, "application/json");
    common_setopts(c, w.easy);
    curl_easy_setopt(w.easy, CURLOPT_URL, url);
    curl_easy_setopt(w.easy, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(w.easy, CURLOPT_WRITEFUNCTION, watch_cb);
    curl_easy_setopt(w.easy, CURLOPT_WRITEDATA, &w);
    curl_multi_add_handle(m, w.easy);
    int r = 0;
    if (!kite_cancel_set_wake(cancel, multi_wake, m)) {
        r = -ECANCELED;
    } else {
        for (;;) {
            int running = 0;
            CURLMcode mc = curl_multi_perform(m, &running);
            if (mc != CURLM_OK) {
                r = -EIO;
                break;
            }
            if (kite_cancel_fired(cancel)) {
                r = -ECANCELED;
                break;
            }
            if (!running) {
                int left;
                CURLMsg *msg = curl_multi_info_read(m, &left);
                CURLcode cc = msg && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_OK;
                long code = 0, os_errno = 0;
                curl_easy_getinfo(w.easy, CURLINFO_RESPONSE_CODE, &code);
                curl_easy_getinfo(w.easy, CURLINFO_OS_ERRNO, &os_errno);
                if (w.stop) r = w.stop;
                else if (cc != CURLE_OK) r = kite_curl_errno(cc, os_errno);
                else if (code != 200) r = kite_http_status_errno(code);
                break;
            }
            /* blocks on the socket; kite_cancel_fire() interrupts it via curl_multi_wakeup */
            if (curl_multi_poll(m, NULL, 0, 60000, NULL) != CURLM_OK) {
                r = -EIO;
                break;
            }
        }
        kite_cancel_set_wake(cancel, NULL, NULL);
    }
    long hdr_bytes = 0;
    curl_easy_getinfo(w.easy, CURLINFO_REQUEST_SIZE, &hdr_bytes);
    atomic_fetch_add(&base->bytes_sent, (uint64_t)hdr_bytes);
    atomic_fetch_add(&base->requests, 1);
    curl_multi_remove_handle(m, w.easy);
    curl_easy_cleanup(w.easy);
    curl_multi_cleanup(m);
    curl_slist_free_all(h);
    kite_lines_release(&w.lines);
    kite_buf_release(&w.err_body);
    return r;
}

static void curl_free_client(struct kite_client *base) {
    struct curl_client *c = (struct curl_client *)base;
    if (c->easy) curl_easy_cleanup(c->easy);
    pthread_mutex_destroy(&c->lock);
    pem_file_release(&c->ca);
    pem_file_release(&c->cert);
    pem_file_release(&c->key);
    free(c->server);
    if (c->auth_header) {
        explicit_bzero(c->auth_header, strlen(c->auth_header));
        free(c->auth_header);
    }
    free(c->user_agent);
    free(c);
}

static const struct kite_client_ops curl_ops = {curl_request, curl_watch, curl_reset, curl_free_client};

int kite_client_new(const struct kite_kubeconfig *kc, const struct kite_client_options *o, struct kite_client **ret) {
    pthread_once(&global_once, global_init);
    struct curl_client *c = kite_calloc(1, sizeof(*c));
    c->base.ops = &curl_ops;
    pthread_mutex_init(&c->lock, NULL);
    c->ca.fd = c->cert.fd = c->key.fd = -1;
    c->server = kite_strdup(kc->server);
    c->insecure = kc->insecure;
    c->timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : 10000;
    c->connect_timeout_ms = o && o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000;
    c->user_agent = kite_strdup(o && o->user_agent ? o->user_agent : "kite");
    if (kc->token) c->auth_header = kite_asprintf("Authorization: Bearer %s", kc->token);
    int r = 0;
    if (kc->ca_pem && (r = pem_file_write(&c->ca, kc->ca_pem, kc->ca_len)) < 0) goto fail;
    if (kc->cert_pem && kc->key_pem) {
        if ((r = pem_file_write(&c->cert, kc->cert_pem, kc->cert_len)) < 0) goto fail;
        if ((r = pem_file_write(&c->key, kc->key_pem, kc->key_len)) < 0) goto fail;
    }
    *ret = &c->base;
    return 0;
fail:
    curl_free_client(&c->base);
    return r;
}
