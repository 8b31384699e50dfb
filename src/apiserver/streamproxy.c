/* Upgraded connect subresources (pods/exec, pods/attach): the API server asks the node's agent
 * for the same upgrade with its kubelet-client certificate and, once the agent answered 101,
 * answers the client with the agent's 101 and copies bytes both ways (kube-apiserver's
 * UpgradeAwareHandler). The WebSocket and its channels are the agent's business: this side
 * never parses a frame, so every subprotocol the agent speaks passes, and so does a plain
 * SPDY/3.1 upgrade (port-forward's: the agent refuses it for exec and attach).
 *
 * One thread per stream, which copies (kite_http_tunnel_splice: at most
 * KITE_STREAM_PROXY_BUFFER bytes per direction wait for a slow reader). Limits:
 * KITE_STREAM_PROXY_MAX streams at once (429), KITE_STREAM_PROXY_IDLE_S without a byte
 * either way ends a stream (kubelet's streamingConnectionIdleTimeout). An agent that answers
 * something else than 101 has its answer relayed as a Status with its code and text. HTTP/2
 * cannot upgrade: clients (kubectl, client-go, the python client) connect over HTTP/1.1 for
 * it, and a request that arrives over HTTP/2 is answered 400. */
#include "apiserver/internal.h"

#include "pki/pki.h"

#include <stdatomic.h>
#include <strings.h>

#define KITE_STREAM_PROXY_MAX 1024                 /* streams at once (-> 429) */
#define KITE_STREAM_PROXY_IDLE_S (4 * 3600)        /* no byte moved: ended */
#define KITE_STREAM_PROXY_BUFFER (64u * 1024)      /* bytes per direction waiting for a slow reader */
#define KITE_STREAM_PROXY_CONNECT_MS 10000         /* connect + TLS + the agent's answer head */
#define KITE_STREAM_PROXY_ERROR_BODY 50000         /* an agent's error text kept */

static atomic_int streams;

struct sproxy {
    struct req *rq;
    char *host, *path, *headers;
    uint16_t port;
};

static void sproxy_free(struct sproxy *p) {
    kite_apiserver_req_free(p->rq);
    free(p->host);
    free(p->path);
    free(p->headers);
    free(p);
    atomic_fetch_sub(&streams, 1);
}

static void stream_run(struct sproxy *p) {
    const char *data_dir = p->rq->srv->data_dir;
    _cleanup_free_ char *cp = NULL, *cert = NULL, *key = NULL;
    int r = kite_apiserver_kubelet_client(data_dir, &cert, &key, &cp);
    if (r < 0) {
        kite_apiserver_reply_error(TAKE_PTR(p->rq), 500, "InternalError", "reading the kubelet client certificate %s: %s", cp, strerror(-r));
        sproxy_free(p);
        return;
    }
    struct kite_http_fetch_options fo = {.host = p->host, .port = p->port, .path = p->path, .cert_pem = cert,
                                         .key_pem = key, .timeout_ms = KITE_STREAM_PROXY_CONNECT_MS,
                                         .upgrade = true, .headers = p->headers};
    struct kite_http_fetch *f = NULL;
    int code = 0;
    r = kite_http_fetch_open(&fo, &f, &code);
    if (r < 0) {
        bool v6 = strchr(p->host, ':');
        kite_apiserver_reply_error(TAKE_PTR(p->rq), 500, "InternalError", "error dialing backend: dial tcp %s%s%s:%u: %s", v6 ? "[" : "",
                    p->host, v6 ? "]" : "", p->port,
                    r == -ECONNREFUSED ? "connect: connection refused"
                    : r == -ETIMEDOUT  ? "i/o timeout"
                    : r == -EPROTO     ? "TLS handshake with the node agent failed"
                                       : strerror(-r));
        sproxy_free(p);
        return;
    }
    if (code != 101) {
        struct kite_buf b = {0};
        char chunk[4096];
        ssize_t n;
        while (b.len < KITE_STREAM_PROXY_ERROR_BODY && (n = kite_http_fetch_read(f, chunk, sizeof chunk)) > 0)
            kite_buf_append(&b, chunk, (size_t)KITE_MIN((size_t)n, KITE_STREAM_PROXY_ERROR_BODY - b.len));
        while (b.len && (b.p[b.len - 1] == '\n' || b.p[b.len - 1] == ' ')) b.p[--b.len] = 0;
        kite_http_fetch_close(f);
        kite_apiserver_reply_error(TAKE_PTR(p->rq), code >= 400 && code < 600 ? code : 500, kite_apiserver_agent_reason(code), "%s", b.p ? b.p : "");
        kite_buf_release(&b);
        sproxy_free(p);
        return;
    }
    static const char *const pass[] = {"Upgrade", "Connection", "Sec-WebSocket-Accept", "Sec-WebSocket-Protocol",
                                       "X-Stream-Protocol-Version"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(pass); i++) {
        const char *v = kite_http_fetch_header(f, pass[i]);
        if (v) kite_http_add_header(p->rq->http, pass[i], v);
    }
    struct kite_http_tunnel *agent = kite_http_fetch_tunnel(f), *client = NULL;
    if (!agent) {
        kite_http_fetch_close(f);
        kite_apiserver_reply_error(TAKE_PTR(p->rq), 500, "InternalError", "the node agent answered 101 without an upgrade");
        sproxy_free(p);
        return;
    }
    kite_apiserver_audit(p->rq, KITE_AUDIT_RESPONSE_STARTED, 101);
    r = kite_http_upgrade(p->rq->http, &client);
    if (r == 0) {
        kite_http_tunnel_splice(client, agent, KITE_STREAM_PROXY_IDLE_S * 1000, KITE_STREAM_PROXY_BUFFER, NULL, NULL);
        kite_http_tunnel_close(client);
    }
    kite_http_tunnel_close(agent);
    kite_apiserver_audit(p->rq, KITE_AUDIT_RESPONSE_COMPLETE, 101);
    sproxy_free(p);
}

/* The thread's last act is leaving the server's count of them, so its stop waits for it. */
static void *stream_thread(void *ud) {
    struct sproxy *p = ud;
    struct kite_apiserver *s = p->rq->srv;
    stream_run(p);
    kite_wgroup_done(&s->streams);
    return NULL;
}

void kite_apiserver_stream_proxy_start(struct req *rq, const char *host, uint16_t port, char *path) {
    const char *up = kite_http_header(rq->http, "Upgrade");
    bool spdy = up && strcasecmp(up, "SPDY/3.1") == 0; /* the agent serves it for port-forward alone */
    if (!up || (strcasecmp(up, "websocket") != 0 && !spdy)) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "Upgrade request required");
        free(path);
        return;
    }
    if (!kite_http_can_upgrade(rq->http)) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "an upgrade (WebSocket, SPDY/3.1) needs HTTP/1.1");
        free(path);
        return;
    }
    if (atomic_fetch_add(&streams, 1) >= KITE_STREAM_PROXY_MAX) {
        atomic_fetch_sub(&streams, 1);
        kite_apiserver_reply_error(rq, 429, "TooManyRequests", "too many exec and attach streams (%d)", KITE_STREAM_PROXY_MAX);
        free(path);
        return;
    }
    struct sproxy *p = kite_calloc(1, sizeof *p);
    p->rq = rq;
    p->host = kite_strdup(host);
    p->port = port;
    const char *target = kite_http_target(rq->http), *q = strchr(target, '?');
    p->path = q ? kite_asprintf("%s%s", path, q) : kite_strdup(path);
    free(path);
    /* the client's WebSocket handshake, for the agent to answer */
    struct kite_buf h = {0};
    kite_buf_puts(&h, spdy ? "Upgrade: SPDY/3.1\r\n" : "Upgrade: websocket\r\n");
    const char *vers[16];
    size_t nv = kite_http_header_all(rq->http, "X-Stream-Protocol-Version", vers, KITE_ARRAY_SIZE(vers));
    for (size_t i = 0; i < KITE_MIN(nv, KITE_ARRAY_SIZE(vers)); i++)
        if (!strpbrk(vers[i], "\r\n")) kite_buf_printf(&h, "X-Stream-Protocol-Version: %s\r\n", vers[i]);
    static const char *const fwd[] = {"Sec-WebSocket-Key", "Sec-WebSocket-Version"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(fwd); i++) {
        const char *v = kite_http_header(rq->http, fwd[i]);
        if (v && !strpbrk(v, "\r\n")) kite_buf_printf(&h, "%s: %s\r\n", fwd[i], v);
    }
    const char *protos[16];
    size_t n = kite_http_header_all(rq->http, "Sec-WebSocket-Protocol", protos, KITE_ARRAY_SIZE(protos));
    for (size_t i = 0; i < KITE_MIN(n, KITE_ARRAY_SIZE(protos)); i++)
        if (!strpbrk(protos[i], "\r\n")) kite_buf_printf(&h, "Sec-WebSocket-Protocol: %s\r\n", protos[i]);
    p->headers = kite_buf_detach(&h, NULL);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 512 * 1024);
    kite_wgroup_add(&rq->srv->streams);
    int r = pthread_create(&t, &at, stream_thread, p);
    pthread_attr_destroy(&at);
    if (r != 0) {
        kite_wgroup_done(&rq->srv->streams);
        p->rq = NULL;
        sproxy_free(p);
        kite_apiserver_reply_error(rq, 500, "InternalError", "starting the stream: %s", strerror(r));
    }
}
