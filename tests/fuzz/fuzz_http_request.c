/* The HTTP request parser (src/http/request.c) on a connection's raw bytes: request line,
 * headers, body framing, path and query decoding, limits, pipelined requests.
 *
 * The first input byte picks the limits and how the bytes are split into reads (the parser
 * must give the same answers however its input is cut); the rest is what a client sent. Each
 * complete request is checked for the invariants the layer relies on, then the parser goes on
 * to the next one, as a keep-alive connection does. */
#include "fuzz_common.h"
#include "http/request.h"

#include <stdio.h>

static const size_t heads[4] = {64, 512, 16 * 1024, 64 * 1024};
static const size_t bodies[4] = {0, 16, 1024, 3u * 1024 * 1024};

static size_t count_nuls(const struct kite_buf *b) {
    size_t n = 0;
    for (size_t i = 0; i < b->len; i++)
        if (b->p[i] == 0) n++;
    return n;
}

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);       \
            abort();                                                         \
        }                                                                    \
    } while (0)

static void check_request(const struct req_parser *p) {
    CHECK(p->begun && p->head_done && p->message_done && !p->err);
    CHECK(p->path);
    CHECK(strlen(p->path) <= p->url.len + 1); /* "" target: "/"; decoding never lengthens */
    CHECK(p->url.len <= p->max_head && p->head_bytes <= p->max_head);
    CHECK(p->body.len <= p->max_body);
    if (p->body.len) CHECK(p->body.p[p->body.len] == 0);
    /* "name\0value\0" pairs: exactly two NULs per header, an even number in the query (a NUL
     * inside a decoded name or value would be refused) */
    CHECK(count_nuls(&p->hdr) == 2 * p->n_hdr);
    CHECK(count_nuls(&p->query) % 2 == 0);
    if (p->hdr.len) CHECK(p->hdr.p[p->hdr.len - 1] == 0);
    if (p->query.len) CHECK(p->query.p[p->query.len - 1] == 0);
    const char *s = p->hdr.p;
    for (size_t i = 0; i < p->n_hdr; i++) {
        const char *v = s + strlen(s) + 1;
        const char *first = kite_http_req_parser_header(p, s), *all[2];
        CHECK(first);
        CHECK(kite_http_req_parser_header_all(p, s, all, 2) >= 1 && all[0] == first);
        s = v + strlen(v) + 1;
    }
    if (p->n_hdr) CHECK(s == p->hdr.p + p->hdr.len);
    const char *q = p->query.p, *qend = p->query.len ? p->query.p + p->query.len : NULL;
    while (qend && q < qend) {
        const char *v = q + strlen(q) + 1;
        CHECK(v < qend);
        CHECK(kite_http_req_parser_query(p, q));
        q = v + strlen(v) + 1;
    }
    (void)kite_http_req_parser_query(p, "watch");
    (void)kite_http_req_parser_header(p, "Authorization");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    uint8_t mode = data[0];
    size_t max_head = heads[mode & 3], max_body = bodies[(mode >> 2) & 3];
    unsigned k = (mode >> 4) & 7;
    size_t step = k ? (size_t)1 << (k - 1) : 0; /* 0: everything at once */
    /* a copy of exactly the input, so reads past it are caught */
    char *in = malloc(n - 1 ? n - 1 : 1);
    if (!in) abort();
    memcpy(in, data + 1, n - 1);
    size_t len = n - 1, off = 0, chunk_end = 0;

    struct req_parser p;
    kite_http_req_parser_init(&p, max_head, max_body);
    while (off < len) {
        if (off >= chunk_end) chunk_end = step ? off + step : len;
        if (chunk_end > len) chunk_end = len;
        size_t used = 0;
        enum req_status st = kite_http_req_parser_feed(&p, in + off, chunk_end - off, &used);
        CHECK(used <= chunk_end - off);
        off += used;
        if (st == REQ_ERROR) {
            CHECK(p.err);
            int c = p.err->code;
            CHECK(c == 400 || c == 413 || c == 414 || c == 431);
            CHECK(p.err->reason && p.err->message);
            break;
        }
        if (st == REQ_DONE) {
            check_request(&p);
            kite_http_req_parser_next(&p);
            CHECK(!p.begun && !p.head_done && !p.message_done && p.n_hdr == 0 && !p.path);
            continue;
        }
        CHECK(off == chunk_end); /* wanting more, it took everything */
    }
    kite_http_req_parser_release(&p);
    free(in);
    return 0;
}
