/* kite http server: the MHD daemon, per-connection state, request dispatch and responses.
 *
 * MHD calls the access handler several times per request. We return MHD_YES on the first call
 * and queue the response only on a later one: queueing on the first call makes MHD 0.9.75 send
 * "Connection: close" on every response (research/deps.md §1). Each connection owns one
 * struct req, reused for every keep-alive request, so a steady stream of requests does not
 * allocate request state. A handler that does not answer before returning gets its connection
 * suspended; the later kite_http_respond resumes it and MHD calls us again to queue. */
#include "http/http-internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE"
#define REQ_BUF_KEEP (64u * 1024)   /* per-connection buffers above this are freed after use */

static const char too_large_json[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"the request body is too large\",\"reason\":\"RequestEntityTooLarge\",\"code\":413}";

/* ---- request accessors ---- */

const char *kite_http_header(const struct kite_http_req *pub, const char *name) {
    const struct req *r = (const struct req *)pub;
    return MHD_lookup_connection_value(r->mc, MHD_HEADER_KIND, name);
}

const char *kite_http_query(const struct kite_http_req *pub, const char *name) {
    const struct req *r = (const struct req *)pub;
    const char *v = NULL;
    size_t vlen = 0;
    if (MHD_lookup_connection_value_n(r->mc, MHD_GET_ARGUMENT_KIND, name, strlen(name), &v, &vlen) != MHD_YES)
        return NULL;
    return v ? v : ""; /* "?watch" counts as present and empty, as in Go's url.ParseQuery */
}

struct header_iter {
    const char *name;
    const char **out;
    size_t max, n;
};

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    struct header_iter *it = cls;
    if (key && value && strcasecmp(key, it->name) == 0) {
        if (it->n < it->max)
            it->out[it->n] = value;
        it->n++;
    }
    return MHD_YES;
}

size_t kite_http_header_all(const struct kite_http_req *pub, const char *name, const char **out, size_t max) {
    const struct req *r = (const struct req *)pub;
    struct header_iter it = {name, out, max, 0};
    MHD_get_connection_values(r->mc, MHD_HEADER_KIND, collect_header, &it);
    return it.n;
}

/* ---- responses ---- */

void kite_http_add_header(struct kite_http_req *pub, const char *name, const char *value) {
    struct req *r = (struct req *)pub;
    kite_buf_append(&r->hdrs, name, strlen(name) + 1);
    kite_buf_append(&r->hdrs, value, strlen(value) + 1);
    r->n_hdrs++;
}

static void apply_headers(struct req *r, struct MHD_Response *resp, const char *content_type) {
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    const char *p = r->hdrs.p;
    for (size_t i = 0; i < r->n_hdrs; i++) {
        const char *name = p, *value = p + strlen(p) + 1;
        MHD_add_response_header(resp, name, value);
        p = value + strlen(value) + 1;
    }
}

/* n_pending counts requests handed to the handler and not answered yet; stop waits for 0. */
static void pending_done(struct kite_http_server *srv) {
    if (atomic_fetch_sub(&srv->n_pending, 1) == 1 && atomic_load(&srv->stopping)) {
        pthread_mutex_lock(&srv->lock);
        pthread_cond_broadcast(&srv->cond);
        pthread_mutex_unlock(&srv->lock);
    }
}

/* Hands a ready response to the connection: directly when the handler is still running on
 * the MHD thread, else by resuming the suspended connection. */
static void deliver(struct req *r, struct MHD_Response *resp, unsigned code, bool is_stream) {
    struct kite_http_server *srv = r->conn->srv;
    pthread_mutex_lock(&r->lock);
    r->resp = resp;
    r->code = code;
    r->resp_is_stream = is_stream;
    bool resume = r->suspended;
    r->suspended = false;
    pthread_mutex_unlock(&r->lock);
    if (!resume)
        return;
    MHD_resume_connection(r->mc);
    pending_done(srv);
}

void kite_http_respond(struct kite_http_req *pub, int code, const char *content_type, char *body, size_t len) {
    struct req *r = (struct req *)pub;
    struct MHD_Response *resp;
    if (body && len)
        resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    else {
        free(body);
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!resp)
        abort(); /* MHD fails only on OOM here; base's policy is to abort on OOM */
    apply_headers(r, resp, content_type);
    deliver(r, resp, (unsigned)code, false);
}

void kite_http_defer(struct kite_http_req *pub, void (*fn)(void *ud), void *ud) {
    struct req *r = (struct req *)pub;
    pthread_mutex_lock(&r->lock);
    r->defer_fn = fn;
    r->defer_ud = ud;
    bool resume = r->suspended;
    r->suspended = false;
    pthread_mutex_unlock(&r->lock);
    if (resume)
        MHD_resume_connection(r->mc); /* the request stays pending until fn ran */
}

/* Runs a kite_http_defer answer on this MHD thread (it sets r->resp through deliver). */
static void run_deferred(struct req *r) {
    pthread_mutex_lock(&r->lock);
    void (*fn)(void *) = r->defer_fn;
    void *ud = r->defer_ud;
    r->defer_fn = NULL;
    pthread_mutex_unlock(&r->lock);
    if (!fn)
        return;
    fn(ud);
    pending_done(r->conn->srv);
}

int kite_http_stream_begin(struct kite_http_req *pub, int code, const char *content_type, kite_http_pull pull,
                           void (*done)(void *ud), void *ud, struct kite_http_stream **ret) {
    struct req *r = (struct req *)pub;
    struct MHD_Response *resp = stream_response(r->conn->srv, r->mc, pull, done, ud, ret);
    if (!resp) {
        kite_http_respond(pub, 500, NULL, NULL, 0);
        return -ENOMEM;
    }
    apply_headers(r, resp, content_type);
    deliver(r, resp, (unsigned)code, true);
    return 0;
}

/* ---- the access handler ---- */

static void req_reset(struct req *r) {
    if (r->body.cap > REQ_BUF_KEEP)
        kite_buf_release(&r->body);
    if (r->hdrs.cap > REQ_BUF_KEEP)
        kite_buf_release(&r->hdrs);
    kite_buf_reset(&r->body);
    kite_buf_reset(&r->hdrs);
    r->n_hdrs = 0;
    r->state = REQ_READING;
    r->suspended = false;
    r->resp = NULL;
    r->defer_fn = NULL;
    r->resp_is_stream = false;
    r->pub.body = "";
    r->pub.body_len = 0;
    r->pub.user = NULL;
    r->pub.authn_failed = false;
}

static enum MHD_Result queue_status(struct MHD_Connection *mc, unsigned code, const char *json, size_t len) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)json, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(mc, code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result queue_ready(struct req *r) {
    struct MHD_Response *resp = r->resp;
    r->resp = NULL;
    if (r->resp_is_stream) {
        /* A watch may be silent for minutes: the idle timeout is for idle clients, not streams. */
        MHD_set_connection_option(r->mc, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        r->conn->timeout_off = true;
    }
    enum MHD_Result ret = MHD_queue_response(r->mc, r->code, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    struct kite_http_server *srv = cls;
    struct req *r = *con_cls;

    if (!r) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct conn *c = ci ? ci->socket_context : NULL;
        if (!c)
            return MHD_NO;
        r = &c->req;
        req_reset(r);
        r->mc = mc;
        r->pub.method = method;
        r->pub.path = url;
        if (c->timeout_off) {
            MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT, srv->idle_timeout_s);
            c->timeout_off = false;
        }
        *con_cls = r;
        /* Refuse a declared oversize body before reading it. Answering now closes the
         * connection afterwards, which is what we want with a body still in flight. */
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        int64_t n;
        if (cl && kite_parse_int64(cl, &n) == 0 && n > 0 && (uint64_t)n > srv->max_body) {
            r->state = REQ_TOO_LARGE;
            return queue_status(mc, MHD_HTTP_CONTENT_TOO_LARGE, too_large_json, sizeof(too_large_json) - 1);
        }
        return MHD_YES;
    }

    if (*upload_data_size) {
        /* Chunked bodies have no declared size: count as they arrive and drop the excess. */
        if (r->state == REQ_READING && r->body.len + *upload_data_size > srv->max_body) {
            r->state = REQ_TOO_LARGE;
            kite_buf_release(&r->body);
        }
        if (r->state == REQ_READING)
            kite_buf_append(&r->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }

    switch (r->state) {
    case REQ_TOO_LARGE:
        return queue_status(mc, MHD_HTTP_CONTENT_TOO_LARGE, too_large_json, sizeof(too_large_json) - 1);
    case REQ_DISPATCHED: {
        /* Resumed after a deferred answer. */
        run_deferred(r);
        pthread_mutex_lock(&r->lock);
        bool ready = r->resp != NULL;
        pthread_mutex_unlock(&r->lock);
        return ready ? queue_ready(r) : MHD_NO;
    }
    case REQ_READING:
        break;
    }

    if (r->body.p) {
        r->pub.body = r->body.p;
        r->pub.body_len = r->body.len;
    }
    /* Count first, then check stopping (both seq_cst): either stop sees us pending and waits,
     * or we see stopping and never start a request it would have to wait for. */
    atomic_fetch_add(&srv->n_pending, 1);
    if (atomic_load(&srv->stopping)) {
        pending_done(srv);
        return MHD_NO;
    }
    auth_request(r->conn, r);
    r->state = REQ_DISPATCHED;
    srv->handler(&r->pub, srv->ud);

    pthread_mutex_lock(&r->lock);
    if (r->resp) {
        pthread_mutex_unlock(&r->lock);
        pending_done(srv);
        return queue_ready(r);
    }
    if (r->defer_fn) {
        pthread_mutex_unlock(&r->lock);
        run_deferred(r);
        return r->resp ? queue_ready(r) : MHD_NO;
    }
    r->suspended = true;
    MHD_suspend_connection(mc);
    pthread_mutex_unlock(&r->lock);
    return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    struct kite_http_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn *c = kite_calloc(1, sizeof(*c));
        c->srv = srv;
        c->req.conn = c;
        c->req.mc = mc;
        pthread_mutex_init(&c->req.lock, NULL);
        *socket_context = c;
        return;
    }
    struct conn *c = *socket_context;
    if (!c)
        return;
    /* Closed between a deferred answer and its queueing: run it (so what it holds is released)
     * and drop the response. */
    run_deferred(&c->req);
    if (c->req.resp)
        MHD_destroy_response(c->req.resp);
    kite_buf_release(&c->req.body);
    kite_buf_release(&c->req.hdrs);
    pthread_mutex_destroy(&c->req.lock);
    auth_user_free(c->cert_user);
    free(c);
    *socket_context = NULL;
}

/* ---- daemon ---- */

static int parse_listen(const char *listen, struct sockaddr_storage *ss, bool *dual) {
    memset(ss, 0, sizeof(*ss));
    *dual = false;
    const char *colon = strrchr(listen, ':');
    if (!colon)
        return -EINVAL;
    int64_t port;
    if (kite_parse_int64(colon + 1, &port) < 0 || port < 0 || port > 65535)
        return -EINVAL;
    _cleanup_free_ char *host = kite_strndup(listen, (size_t)(colon - listen));
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    if (host[0] == 0 || kite_streq(host, "::") || kite_streq(host, "*")) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_any;
        s6->sin6_port = htons((uint16_t)port);
        *dual = true;
        return 0;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        return 0;
    }
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        return 0;
    }
    return -EINVAL;
}

static void free_server(struct kite_http_server *srv) {
    if (srv->mon)
        monitor_stop(srv->mon);
    auth_free_tokens(srv);
    free(srv->cert_pem);
    free(srv->key_pem);
    free(srv->ca_pem);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    free(srv);
}

int kite_http_start(const struct kite_http_config *cfg, struct kite_http_server **ret) {
    if (!cfg->handler || !cfg->cert_pem || !cfg->key_pem || !cfg->listen)
        return -EINVAL;
    struct sockaddr_storage ss;
    bool dual;
    int rc = parse_listen(cfg->listen, &ss, &dual);
    if (rc < 0)
        return rc;

    struct kite_http_server *srv = kite_calloc(1, sizeof(*srv));
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    srv->handler = cfg->handler;
    srv->ud = cfg->ud;
    srv->max_body = cfg->max_body ? cfg->max_body : KITE_HTTP_DEFAULT_MAX_BODY;
    srv->idle_timeout_s = cfg->idle_timeout_s ? cfg->idle_timeout_s : KITE_HTTP_DEFAULT_IDLE_TIMEOUT_S;
    srv->cert_pem = kite_strdup(cfg->cert_pem);
    srv->key_pem = kite_strdup(cfg->key_pem);
    srv->ca_pem = cfg->client_ca_pem ? kite_strdup(cfg->client_ca_pem) : NULL;
    if (cfg->token_file && (rc = auth_load_tokens(srv, cfg->token_file)) < 0) {
        free_server(srv);
        return rc;
    }
    if ((rc = monitor_start(&srv->mon)) < 0) {
        free_server(srv);
        return rc;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = cfg->threads ? cfg->threads : (unsigned)(ncpu > 0 ? ncpu : 1);
    size_t header_mem = cfg->max_header_bytes ? cfg->max_header_bytes : KITE_HTTP_DEFAULT_MAX_HEADER_BYTES;
    unsigned max_conn = cfg->max_connections ? cfg->max_connections : KITE_HTTP_DEFAULT_MAX_CONNECTIONS;

    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TLS | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC;
    if (dual)
        flags |= MHD_USE_DUAL_STACK;
    else if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &ss},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, srv->cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->key_pem},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)header_mem, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)max_conn, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)srv->idle_timeout_s, NULL},
        {MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, srv},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
        /* client CA last: optional */
        {srv->ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, srv->ca_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    srv->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!srv->d) {
        free_server(srv);
        return errno ? -errno : -EINVAL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = di ? di->port : 0;
    *ret = srv;
    return 0;
}

uint16_t kite_http_port(struct kite_http_server *s) {
    return s->port;
}

void kite_http_stop(struct kite_http_server *srv) {
    if (!srv)
        return;
    /* Stop accepting first so no new connection starts a request we would have to wait for. */
    MHD_socket lfd = MHD_quiesce_daemon(srv->d);
    atomic_store(&srv->stopping, true);
    streams_stop_all(srv);
    /* MHD_stop_daemon aborts on still-suspended connections: wait for deferred answers. */
    pthread_mutex_lock(&srv->lock);
    while (atomic_load(&srv->n_pending) > 0)
        pthread_cond_wait(&srv->cond, &srv->lock);
    pthread_mutex_unlock(&srv->lock);
    MHD_stop_daemon(srv->d);
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    free_server(srv);
}
