/* HTTP/2 client connections for `kite sim`'s loop (h2c.c): many requests at once as streams of
 * one TLS connection, the connection's socket in the loop's own epoll set.
 *
 * The loop drives everything from one thread: kite_sim_h2c_submit() queues a request's frames (a lane
 * then parks), kite_sim_h2c_event() reads what the socket has and completes requests (their done
 * callback runs from inside it), kite_sim_h2c_flush() writes what was queued since. A request is the
 * caller's struct h2c_req, which must stay put until done is called or kite_sim_h2c_cancel(). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "client/client.h"

struct h2c;
struct h2c_slot;

struct h2c_req {
    /* the answer */
    long status;
    struct kite_buf resp;
    int result; /* 0, or -ECONNRESET (stream reset, connection lost), -EFBIG, -EPROTO */
    bool done;
    /* the request's body (borrowed until done or cancelled) */
    const char *body;
    size_t body_len, body_off;
    struct h2c_slot *slot; /* in flight */
};

struct h2c_header {
    const char *name, *value; /* lower-case name */
};

typedef void (*h2c_done_fn)(struct h2c_req *req, void *ud);

struct h2c_options {
    struct kite_client *dialer; /* kite_client_new's: server, CA, client certificate (borrowed) */
    const char *token;          /* Authorization: Bearer TOKEN; NULL: none (copied) */
    const char *user_agent;     /* copied */
    int epfd;                   /* the socket goes there, EPOLLIN (EPOLLOUT while a write waits) */
    void *ep_ptr;               /* its epoll_event.data.ptr */
    h2c_done_fn done;
    void *ud;
};

struct h2c *kite_sim_h2c_new(const struct h2c_options *o);
/* Fails the requests in flight (-ECONNRESET, done called). Accepts NULL. */
void kite_sim_h2c_free(struct h2c *c);

bool kite_sim_h2c_is_open(const struct h2c *c);
bool kite_sim_h2c_is_opening(const struct h2c *c);
/* Connects and handshakes (ALPN "h2"), blocking through the thread's client waiter (a lane
 * parks): 0 or -errno (-EPROTONOSUPPORT: the server does not speak HTTP/2). */
int kite_sim_h2c_open(struct h2c *c, int64_t deadline_ms);
/* Queues a request (the connection must be open): headers are copied, the body is read as the
 * flow-control windows allow. Beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS, nghttp2
 * holds the request back until a stream closes. 0 or -errno. */
int kite_sim_h2c_submit(struct h2c *c, struct h2c_req *req, const char *method, const char *path, const char *content_type,
               const struct h2c_header *extra, size_t n_extra);
/* Gives a request up (its deadline passed): the stream is reset, done is not called. */
void kite_sim_h2c_cancel(struct h2c *c, struct h2c_req *req);
/* The socket is ready (epoll events). */
void kite_sim_h2c_event(struct h2c *c, uint32_t events);
/* Frames queued since the last flush: kite_sim_h2c_flush() has something to write. */
bool kite_sim_h2c_dirty(const struct h2c *c);
/* Writes the queued frames: as few TLS records (and system calls) as their size allows. */
void kite_sim_h2c_flush(struct h2c *c);
/* Closes the connection (requests in flight fail with -ECONNRESET); the next h2c_open reopens. */
void kite_sim_h2c_close(struct h2c *c);

struct h2c_stats {
    uint64_t streams;  /* requests answered over HTTP/2 */
    uint64_t opens;    /* connections opened (handshakes that selected h2) */
    uint64_t lost;     /* connections lost (GOAWAY, EOF, TLS or protocol error) */
    uint64_t records;  /* TLS records written */
    uint64_t bytes_out;/* bytes of frames written */
};
void kite_sim_h2c_get_stats(const struct h2c *c, struct h2c_stats *ret);
