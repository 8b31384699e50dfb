/* Connect subresources (a pod's log): the row's connect() names the node and the agent's path;
 * this file finds the node's address and agent port (status.addresses, InternalIP first, and
 * status.daemonEndpoints.kubeletEndpoint.Port, as kube-apiserver's node connection info), and
 * proxies the agent's answer back, streamed.
 *
 * One thread per proxied request: it connects (blocking, bounded by KITE_PROXY_CONNECT_MS),
 * with the API server's kubelet-client certificate (DATA_DIR/pki/kubelet-client.*), and copies
 * the body into a buffer that the HTTP layer's stream pulls from. The copy stops while
 * KITE_PROXY_BUFFER bytes wait for a slow client; a client that goes away shuts the agent's
 * socket down, which ends the thread's read. An error answer of the agent (a container still
 * waiting, an unknown pod) becomes a Status with its code and text, as kube-apiserver's
 * GenericHttpResponseChecker makes it. */
#include "apiserver/internal.h"
#include "api/status.h"

#include "pki/pki.h"

#include <stdatomic.h>
#include <stdio.h>

#define KITE_PROXY_CONNECT_MS 10000       /* connect + TLS + the agent's answer head */
#define KITE_PROXY_BUFFER (1024u * 1024)  /* bytes buffered for a slow client */
#define KITE_PROXY_MAX 256                /* proxied streams at once (-> 429) */
#define KITE_PROXY_ERROR_BODY 50000       /* an agent's error text kept (maxReadLength upstream) */

static atomic_int proxies;

struct proxy {
    struct req *rq;
    char *host, *path;
    uint16_t port;
    struct kite_http_fetch *f;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int refs;
    /* under mu */
    struct kite_buf buf;
    bool eof, gone;
    struct kite_http_stream *stream;
};

static void unref(struct proxy *p) {
    pthread_mutex_lock(&p->mu);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (!last) return;
    kite_http_fetch_close(p->f);
    kite_buf_release(&p->buf);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p->host);
    free(p->path);
    kite_apiserver_req_free(p->rq);
    free(p);
    atomic_fetch_sub(&proxies, 1);
}

static int pull(void *ud, struct kite_buf *out) {
    struct proxy *p = ud;
    pthread_mutex_lock(&p->mu);
    bool had = p->buf.len > 0;
    if (had) {
        kite_buf_append(out, p->buf.p, p->buf.len);
        kite_buf_reset(&p->buf);
        pthread_cond_signal(&p->cond);
    }
    bool end = p->eof;
    pthread_mutex_unlock(&p->mu);
    return end ? -1 : had ? 1 : 0;
}

static void done(void *ud) {
    struct proxy *p = ud;
    pthread_mutex_lock(&p->mu);
    p->gone = true;
    p->stream = NULL;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mu);
    kite_http_fetch_cancel(p->f);
    unref(p);
}

const char *kite_apiserver_agent_reason(int code) {
    if (code == 501) return "NotImplemented";
    const char *r = kite_status_reason_for(code);
    return *r && code != 500 ? r : "InternalError";
}

/* The agent's error answer as a Status: its code, its text as the message. */
static void relay_error(struct proxy *p, int code) {
    struct kite_buf b = {0};
    char chunk[4096];
    ssize_t n;
    while (b.len < KITE_PROXY_ERROR_BODY && (n = kite_http_fetch_read(p->f, chunk, sizeof chunk)) > 0)
        kite_buf_append(&b, chunk, (size_t)KITE_MIN((size_t)n, KITE_PROXY_ERROR_BODY - b.len));
    while (b.len && (b.p[b.len - 1] == '\n' || b.p[b.len - 1] == ' ')) b.p[--b.len] = 0;
    struct req *rq = TAKE_PTR(p->rq);
    kite_apiserver_reply_error(rq, code >= 400 && code < 600 ? code : 500, kite_apiserver_agent_reason(code), "%s", b.p ? b.p : "");
    kite_buf_release(&b);
}

int kite_apiserver_kubelet_client(const char *data_dir, char **ret_cert, char **ret_key, char **ret_path) {
    static const char *const files[] = {"%s/pki/kubelet-client.crt", "%s/pki/kubelet-client.key"};
    char *pem[2] = {NULL, NULL};
    for (size_t i = 0; i < 2; i++) {
        char *path = kite_asprintf(files[i], data_dir);
        int r = kite_pki_read_file(path, &pem[i]);
        if (r < 0) {
            free(pem[0]);
            if (ret_path) *ret_path = path;
            else free(path);
            return r;
        }
        free(path);
    }
    *ret_cert = pem[0];
    *ret_key = pem[1];
    return 0;
}

static void proxy_run(struct proxy *p) {
    const char *data_dir = p->rq->srv->data_dir;
    _cleanup_free_ char *cp = NULL, *cert = NULL, *key = NULL;
    int r = kite_apiserver_kubelet_client(data_dir, &cert, &key, &cp);
    if (r < 0) {
        struct req *rq = TAKE_PTR(p->rq);
        kite_apiserver_reply_error(rq, 500, "InternalError", "reading the kubelet client certificate %s: %s", cp, strerror(-r));
        unref(p);
        unref(p);
        return;
    }
    struct kite_http_fetch_options fo = {.host = p->host, .port = p->port, .path = p->path, .cert_pem = cert,
                                         .key_pem = key, .timeout_ms = KITE_PROXY_CONNECT_MS};
    int code = 0;
    r = kite_http_fetch_open(&fo, &p->f, &code);
    if (r < 0) {
        struct req *rq = TAKE_PTR(p->rq);
        bool v6 = strchr(p->host, ':');
        kite_apiserver_reply_error(rq, 500, "InternalError", "Get \"https://%s%s%s:%u%s\": dial tcp %s%s%s:%u: %s", v6 ? "[" : "",
                    p->host, v6 ? "]" : "", p->port, p->path, v6 ? "[" : "", p->host, v6 ? "]" : "", p->port,
                    r == -ECONNREFUSED ? "connect: connection refused"
                    : r == -ETIMEDOUT  ? "i/o timeout"
                    : r == -EPROTO     ? "TLS handshake with the node agent failed"
                                       : strerror(-r));
        unref(p);
        unref(p);
        return;
    }
    if (code != 200) {
        relay_error(p, code);
        unref(p);
        unref(p);
        return;
    }
    struct kite_http_stream *st = NULL;
    if (kite_http_stream_begin(p->rq->http, 200, "text/plain", pull, done, p, &st) < 0) {
        /* answered 500 by the layer; done() will not come */
        unref(p);
        unref(p);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (!p->gone) p->stream = st;
    pthread_mutex_unlock(&p->mu);
    char chunk[16384];
    for (;;) {
        ssize_t n = kite_http_fetch_read(p->f, chunk, sizeof chunk);
        pthread_mutex_lock(&p->mu);
        if (n > 0) kite_buf_append(&p->buf, chunk, (size_t)n);
        else p->eof = true;
        if (p->stream) kite_http_stream_wake(p->stream);
        while (!p->gone && !p->eof && p->buf.len >= KITE_PROXY_BUFFER) pthread_cond_wait(&p->cond, &p->mu);
        bool stop = p->gone || p->eof;
        pthread_mutex_unlock(&p->mu);
        if (stop) break;
    }
    unref(p);
}

/* The thread's last act is leaving the server's count of them, so its stop waits for it. */
static void *proxy_thread(void *ud) {
    struct proxy *p = ud;
    struct kite_apiserver *s = p->rq->srv;
    proxy_run(p);
    kite_wgroup_done(&s->streams);
    return NULL;
}

static const char *query_of(void *ud, const char *name) { return kite_http_query(((struct req *)ud)->http, name); }

const char *kite_apiserver_node_address(json_object *node, int *ret_port) {
    static const char *const pref[] = {"InternalIP", "Hostname", "InternalDNS", "ExternalDNS", "ExternalIP"};
    json_object *st = kite_obj_get(node, "status"), *addrs = kite_obj_get(st, "addresses");
    json_object *port = kite_obj_get(kite_obj_get(kite_obj_get(st, "daemonEndpoints"), "kubeletEndpoint"), "Port");
    *ret_port = port && json_object_get_int(port) > 0 && json_object_get_int(port) < 65536 ? json_object_get_int(port) : 0;
    for (size_t k = 0; k < KITE_ARRAY_SIZE(pref); k++)
        for (size_t i = 0; addrs && json_object_is_type(addrs, json_type_array) && i < json_object_array_length(addrs); i++) {
            json_object *a = json_object_array_get_idx(addrs, i);
            const char *t = json_object_get_string(kite_obj_get(a, "type")), *v = json_object_get_string(kite_obj_get(a, "address"));
            if (t && v && *v && strcmp(t, pref[k]) == 0) return v;
        }
    return NULL;
}

void kite_apiserver_handle_connect(struct req *rq, const struct kite_subresource *sr) {
    struct kite_apiserver *s = rq->srv;
    char gr[128];
    kite_resource_gr(rq->res, gr);
    json_object *obj = kite_apiserver_lookup(s, rq->res, rq->ns, rq->name);
    if (!obj) {
        kite_apiserver_reply_error(rq, 404, "NotFound", "%s \"%s\" not found", gr, rq->name);
        return;
    }
    char *node_name = NULL, *path = NULL, *msg = NULL;
    int code = sr->connect(obj, query_of, rq, &node_name, &path, &msg);
    json_object_put(obj);
    if (code) {
        kite_apiserver_reply_error(rq, code, code == 422 ? "Invalid" : "BadRequest", "%s", msg ? msg : "");
        free(msg);
        return;
    }
    const struct kite_resource *nodes = kite_registry_find("", "v1", "nodes");
    json_object *node = nodes ? kite_apiserver_lookup(s, nodes, NULL, node_name) : NULL;
    int port = 0;
    const char *addr = node ? kite_apiserver_node_address(node, &port) : NULL;
    if (!addr || !port) {
        struct status_details d = {.name = node_name, .kind = "nodes"};
        if (!node) kite_apiserver_reply_error_about(rq, 404, "NotFound", &d, "nodes \"%s\" not found", node_name);
        else if (!addr) kite_apiserver_reply_error(rq, 500, "InternalError", "node %s reports no address to reach its agent", node_name);
        else kite_apiserver_reply_error(rq, 500, "InternalError", "node %s reports no agent port (status.daemonEndpoints): its log endpoint is not running", node_name);
        json_object_put(node);
        free(node_name);
        free(path);
        return;
    }
    if (sr->upgrade) { /* exec, attach: an upgraded stream (streamproxy.c) */
        kite_apiserver_stream_proxy_start(rq, addr, (uint16_t)port, path);
        json_object_put(node);
        free(node_name);
        return;
    }
    if (atomic_fetch_add(&proxies, 1) >= KITE_PROXY_MAX) {
        atomic_fetch_sub(&proxies, 1);
        kite_apiserver_reply_error(rq, 429, "TooManyRequests", "too many proxied streams (%d)", KITE_PROXY_MAX);
        json_object_put(node);
        free(node_name);
        free(path);
        return;
    }
    struct proxy *p = kite_calloc(1, sizeof *p);
    p->rq = rq;
    p->host = kite_strdup(addr);
    p->port = (uint16_t)port;
    p->path = path;
    p->refs = 2; /* the thread's and the stream's (done) */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    json_object_put(node);
    free(node_name);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    kite_wgroup_add(&s->streams);
    int r = pthread_create(&t, &at, proxy_thread, p);
    pthread_attr_destroy(&at);
    if (r != 0) {
        kite_wgroup_done(&s->streams);
        p->rq = NULL;
        unref(p);
        unref(p);
        kite_apiserver_reply_error(rq, 500, "InternalError", "starting the proxy: %s", strerror(r));
    }
}
