/* A test peer for the server's HTTP/2: an nghttp2 client session over a GnuTLS connection
 * offering ALPN "h2", driven from the test thread. Streams are kept by id, with their status,
 * body and how they ended. */
#pragma once
#include "base/buf.h"

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdint.h>

#define H2C_MAX_STREAMS 1024

struct h2c_stream {
    int status;
    struct kite_buf body;
    struct kite_buf headers;     /* "name: value\n"... as received */
    bool closed;
    uint32_t error_code;         /* RST_STREAM's, 0 when it ended cleanly */
};

struct h2c {
    int fd;
    void *tls;                   /* gnutls_session_t */
    void *cred;                  /* gnutls_certificate_credentials_t */
    nghttp2_session *ng;
    struct h2c_stream streams[H2C_MAX_STREAMS]; /* by (id - 1) / 2 */
    const char *upload;          /* the request body being sent */
    size_t upload_len, upload_off;
    bool goaway;                 /* the server sent GOAWAY */
    bool eof;                    /* the server closed the connection */
    char alpn[16];
};

/* Connects to the fixture's server; NULL if ALPN did not select h2. */
struct h2c *h2c_open(void);
/* Submits a request (body may be NULL; one body at a time); returns the stream id. extra are
 * more header fields, "name", "value" pairs. */
int32_t h2c_request(struct h2c *h, const char *method, const char *path, const char *body, size_t len,
                    const char *const *extra, size_t n_extra);
struct h2c_stream *h2c_stream(struct h2c *h, int32_t id);
/* Sends and receives until every stream in ids is closed (n == 0: until idle for 100 ms), or
 * timeout_ms passed. Returns true when they all closed. */
bool h2c_run(struct h2c *h, const int32_t *ids, size_t n, int timeout_ms);
/* Runs until stream id has at least min_bytes of body, or the timeout. */
bool h2c_run_body(struct h2c *h, int32_t id, size_t min_bytes, int timeout_ms);
void h2c_reset(struct h2c *h, int32_t id);
void h2c_close(struct h2c *h);
