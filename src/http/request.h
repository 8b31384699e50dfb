/* Private to src/http: parsing one connection's requests. Bytes in; out come complete requests
 * (method, decoded path and query, headers, body) or the refusal that ends the connection.
 * No sockets, TLS or clock here, so the parser is driven alone by its tests and the fuzzer.
 *
 * Limits: the URL and headers together within max_head bytes (past it 414 for the URL, 431 for
 * headers), the body within max_body (413: a Content-Length or chunk size that would pass it is
 * refused when it arrives, before the bytes it announces). A percent-encoded NUL in the path or a
 * query name or value, or a NUL in a header, is refused 400: everything downstream takes them
 * as C strings. Trailers after a chunked body count against max_head but are dropped: they are
 * not headers. */
#pragma once
#include "base/buf.h"

#include <http_parser.h>

/* Why a request is refused by the layer itself: its status and the Status body's reason and
 * message. */
struct refusal {
    int code;
    const char *reason, *message;
    bool retry;                   /* answered with "Retry-After: 1" (429: clients retry) */
};

extern const struct refusal KITE_HTTP_R_MALFORMED, KITE_HTTP_R_NUL_PATH, KITE_HTTP_R_NUL_QUERY, KITE_HTTP_R_NUL_HEADER, KITE_HTTP_R_BODY_TOO_LARGE,
    KITE_HTTP_R_URL_TOO_LONG, KITE_HTTP_R_HEADERS_TOO_LARGE, KITE_HTTP_R_UNAUTHORIZED, KITE_HTTP_R_BODY_BUDGET;

/* A request body's bytes, NUL-terminated when not empty. From KITE_HTTP_BODY_MAP_MIN bytes on
 * they are pages of their own (mmap), unmapped when the body is freed: the memory of a burst of
 * large bodies goes back to the kernel at once. Freed to an allocator it may not: mimalloc
 * gives back a freed span of a segment only when that segment is touched again, so an idle
 * worker kept ~100 MB after the connections holding it closed. */
#define KITE_HTTP_BODY_MAP_MIN (128u * 1024)
struct req_body {
    char *p;
    size_t len, cap;              /* cap: bytes at p, the terminator's included */
    bool mapped;                  /* p is a mapping of cap bytes */
};
/* Room for exactly n more bytes (a declared length: allocated once, not doubled into). */
void kite_http_req_body_reserve(struct req_body *b, size_t n);
void kite_http_req_body_append(struct req_body *b, const void *data, size_t n);
void kite_http_req_body_free(struct req_body *b);

struct req_parser;
/* What the connection decides about a body (set by it; both optional). head: the head is
 * complete and a body follows (declared: its Content-Length, 0 when chunked); NULL to read it
 * (the hook may lower max_body first), or why the request is refused before a byte of its
 * body is read. grow: the body is about to hold `total` bytes, more than the hooks allowed so
 * far (a chunked body); NULL when it may. */
struct req_hooks {
    const struct refusal *(*head)(struct req_parser *p, uint64_t declared, void *ud);
    const struct refusal *(*grow)(struct req_parser *p, size_t total, void *ud);
    void *ud;
};

struct req_parser {
    http_parser hp;
    size_t max_head, max_body;    /* max_body: this request's (a head hook may lower it) */
    size_t max_body_cfg;          /* the connection's, restored for each request */
    struct kite_buf url;          /* the request target as received */
    struct kite_buf hdr;          /* "name\0value\0"... */
    size_t n_hdr;
    bool hdr_in_value;            /* the last header callback was a value */
    size_t head_bytes;            /* URL + headers so far */
    struct req_body body;
    char *path;                   /* decoded path (owned); set with head_done */
    struct kite_buf query;        /* "name\0value\0"...; "?watch" has value "" */
    bool begun;                   /* a byte of a request was parsed */
    bool head_done;               /* request line and headers complete, path and query decoded */
    bool expect_continue;         /* the head asks for "100 Continue" */
    bool message_done;            /* the whole request is here (req_parser_feed returned REQ_DONE) */
    bool keep_alive;              /* the client allows another request after this one */
    bool head_only;               /* HEAD: no body in the answer */
    const struct refusal *err;    /* set with REQ_ERROR */
    struct req_hooks hooks;
    size_t allowed;               /* body bytes the hooks allowed so far (grow is asked past it) */
};

enum req_status {
    REQ_MORE,   /* all bytes taken, the request is not complete yet */
    REQ_DONE,   /* a request is complete; bytes after it were not taken */
    REQ_ERROR,  /* refused: err says why; the connection cannot go on */
};

void kite_http_req_parser_init(struct req_parser *p, size_t max_head, size_t max_body);
void kite_http_req_parser_release(struct req_parser *p);
/* Parses data[0..n), setting *used to the bytes taken. After REQ_DONE the request's fields stay
 * valid until req_parser_next; after REQ_ERROR only req_parser_release may follow. */
enum req_status kite_http_req_parser_feed(struct req_parser *p, const char *data, size_t n, size_t *used);
/* Forgets the request, ready for the connection's next one. */
void kite_http_req_parser_next(struct req_parser *p);
/* Frees the buffers (between requests, so idle connections hold none). */
void kite_http_req_parser_trim(struct req_parser *p);

/* HTTP/2: a request arrives as fields, not text. With the :path in p->url, decodes path and
 * query as req_parser_feed does and marks the head done. NULL, or why it is refused. */
const struct refusal *kite_http_req_parser_set_target(struct req_parser *p);

/* Lookups on a parsed request; borrowed, valid until req_parser_next. */
const char *kite_http_req_parser_header(const struct req_parser *p, const char *name);
size_t kite_http_req_parser_header_all(const struct req_parser *p, const char *name, const char **out, size_t max);
const char *kite_http_req_parser_query(const struct req_parser *p, const char *name);
