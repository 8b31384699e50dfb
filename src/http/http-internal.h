/* Private to src/http: shared between server.c (daemon, requests), stream.c (chunked streams and
 * the monitor thread) and auth.c (client certs, tokens).
 *
 * Lock order: req.lock / stream.lock may be taken while MHD holds its own locks (we are called
 * from MHD), so we never call MHD_resume_connection while holding one of ours: the side that
 * flips `suspended` from true to false owns the resume and performs it after unlocking (the
 * connection cannot go away while it is suspended). The monitor lock is never held while
 * calling into MHD or into a stream's lock-taking code. */
#pragma once
#include "http/http.h"
#include "base/buf.h"
#include "base/map.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>


struct monitor;

enum req_state { REQ_READING, REQ_TOO_LARGE, REQ_DISPATCHED };

struct req {
    struct kite_http_req pub; /* first: the handler sees &pub */
    struct conn *conn;
    struct MHD_Connection *mc;
    pthread_mutex_t lock;
    enum req_state state;
    bool suspended;               /* waiting for a deferred respond/stream_begin */
    struct MHD_Response *resp;    /* ready response, handed over under lock */
    void (*defer_fn)(void *ud);   /* kite_http_defer: answers on the MHD thread (under lock) */
    void *defer_ud;
    unsigned code;
    bool resp_is_stream;
    struct kite_buf body;         /* reused across the connection's requests */
    struct kite_buf hdrs;         /* pending response headers: "name\0value\0"... */
    size_t n_hdrs;
};

struct conn {
    struct kite_http_server *srv;
    struct req req;               /* one request at a time per HTTP/1.1 connection */
    bool tls_checked;
    bool cert_failed;             /* a client cert was presented but did not verify */
    struct kite_http_user *cert_user;
    bool timeout_off;             /* idle timeout disabled for a stream; restore on next request */
};

struct kite_http_server {
    struct MHD_Daemon *d;
    kite_http_handler handler;
    void *ud;
    size_t max_body;
    unsigned idle_timeout_s;
    uint16_t port;
    char *cert_pem, *key_pem, *ca_pem;   /* MHD keeps pointers: must outlive the daemon */
    struct kite_map tokens;              /* token -> struct kite_http_user*; read-only after start */
    struct monitor *mon;

    pthread_mutex_t lock;                /* guards streams list, stop waits */
    pthread_cond_t cond;
    atomic_bool stopping;
    atomic_long n_pending;               /* requests given to the handler, not answered yet */
    struct kite_http_stream *streams;    /* live streams (for stop) */
};

/* auth.c */
int auth_load_tokens(struct kite_http_server *srv, const char *path);
void auth_free_tokens(struct kite_http_server *srv);
void auth_request(struct conn *c, struct req *r);
void auth_user_free(struct kite_http_user *u);

/* stream.c */
int monitor_start(struct monitor **ret);
void monitor_stop(struct monitor *m);
/* Ends every live stream (stop path); they finish on their MHD thread. */
void streams_stop_all(struct kite_http_server *srv);
struct MHD_Response *stream_response(struct kite_http_server *srv, struct MHD_Connection *mc,
                                     kite_http_pull pull, void (*done)(void *ud), void *ud,
                                     struct kite_http_stream **ret);
