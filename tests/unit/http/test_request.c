/* The request parser alone (src/http/request.c): no sockets, bytes in, requests or refusals out. */
#include "http/request.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HEAD 256
#define MAX_BODY 64

/* Feeds in[0..n) in pieces of `step` bytes (0: all at once) until a request is complete or
 * refused; returns the status and leaves *taken at the bytes the parser took. */
static enum req_status feed(struct req_parser *p, const char *in, size_t n, size_t step, size_t *taken) {
    size_t off = 0;
    enum req_status st = REQ_MORE;
    while (st == REQ_MORE && off < n) {
        size_t k = step ? (n - off < step ? n - off : step) : n - off, used;
        st = kite_http_req_parser_feed(p, in + off, k, &used);
        cr_assert_leq(used, k);
        off += used;
        if (st == REQ_MORE) cr_assert_eq(used, k, "a parser wanting more took only %zu of %zu", used, k);
    }
    *taken = off;
    return st;
}

static const size_t steps[] = {0, 1, 3};

struct refusal_case {
    const char *in;
    const struct refusal *want;
};

Test(request, refusals) {
    const struct refusal_case cases[] = {
        {"GET /victim%00anything HTTP/1.1\r\nHost: x\r\n\r\n", &KITE_HTTP_R_NUL_PATH},
        {"GET /a?q=x%00 HTTP/1.1\r\nHost: x\r\n\r\n", &KITE_HTTP_R_NUL_QUERY},
        {"GET /a?%00=1 HTTP/1.1\r\nHost: x\r\n\r\n", &KITE_HTTP_R_NUL_QUERY},
        {"GET /a?ok=1&watch%00 HTTP/1.1\r\nHost: x\r\n\r\n", &KITE_HTTP_R_NUL_QUERY},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\n", &KITE_HTTP_R_BODY_TOO_LARGE},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n", &KITE_HTTP_R_BODY_TOO_LARGE},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
         "20\r\n01234567890123456789012345678901\r\n21\r\n", &KITE_HTTP_R_BODY_TOO_LARGE},
        {"POST /a HTTP/1.1\r\nContent-Length: 65\r\n\r\n", &KITE_HTTP_R_BODY_TOO_LARGE},
        {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", &KITE_HTTP_R_MALFORMED},
        {"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", &KITE_HTTP_R_MALFORMED},
        {"GET / HTTP/1.1\r\nBad Header\r\n\r\n", &KITE_HTTP_R_MALFORMED},
        {"GET /a HTTP/1.1\r\nX: a\0b\r\n\r\n", &KITE_HTTP_R_MALFORMED},
        /* http-parser does not check a value's first byte: a NUL there shifted every later
         * "name\0value\0" pair, forging "Impersonate-User: admin" out of the bytes below */
        {"GET /a HTTP/1.1\r\nX:\0Impersonate-User\r\nadmin: y\r\n\r\n", &KITE_HTTP_R_NUL_HEADER},
        {"GET /a HTTP/1.1\r\nX: \0\r\n\r\n", &KITE_HTTP_R_NUL_HEADER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            struct req_parser p;
            kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
            size_t n = strlen(cases[i].in), taken;
            if (i >= 11) n += strlen(cases[i].in + n + 1) + 1; /* the embedded NUL and what follows */
            cr_assert_eq(feed(&p, cases[i].in, n, steps[s], &taken), REQ_ERROR, "case %zu step %zu", i, steps[s]);
            cr_assert_eq(p.err, cases[i].want, "case %zu step %zu: %d %s", i, steps[s], p.err->code, p.err->message);
            kite_http_req_parser_release(&p);
        }
}

Test(request, head_and_url_limits) {
    char big[MAX_HEAD + 64];
    struct req_parser p;
    size_t taken;
    /* URL past the limit: 414 */
    int n = snprintf(big, sizeof big, "GET /%0*d HTTP/1.1\r\n\r\n", MAX_HEAD, 0);
    kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
    cr_assert_eq(feed(&p, big, (size_t)n, 7, &taken), REQ_ERROR);
    cr_assert_eq(p.err, &KITE_HTTP_R_URL_TOO_LONG);
    kite_http_req_parser_release(&p);
    /* headers past it: 431 */
    n = snprintf(big, sizeof big, "GET / HTTP/1.1\r\nX: %0*d\r\n\r\n", MAX_HEAD, 0);
    kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
    cr_assert_eq(feed(&p, big, (size_t)n, 0, &taken), REQ_ERROR);
    cr_assert_eq(p.err, &KITE_HTTP_R_HEADERS_TOO_LARGE);
    kite_http_req_parser_release(&p);
}

/* Two pipelined requests: each parsed alone, the second after req_parser_next. */
Test(request, pipelined_requests_decoded) {
    const char in[] = "GET /first%20one?q=a+b%2Fc&watch&x=1&x=2#frag HTTP/1.1\r\n"
                      "Host: x\r\nImpersonate-Group: g1\r\nimpersonate-group: g2 \r\nExpect: 100-continue\r\n\r\n"
                      "PUT /a%2500 HTTP/1.1\r\nHost: y\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        struct req_parser p;
        kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
        size_t taken, off = 0;
        cr_assert_eq(feed(&p, in, sizeof in - 1, steps[s], &taken), REQ_DONE);
        off += taken;
        cr_assert(p.begun && p.head_done && p.message_done && p.keep_alive && p.expect_continue);
        cr_assert_str_eq(p.path, "/first one");
        cr_assert_str_eq(kite_http_req_parser_query(&p, "q"), "a b/c");
        cr_assert_str_eq(kite_http_req_parser_query(&p, "watch"), "");
        cr_assert_str_eq(kite_http_req_parser_query(&p, "x"), "1");
        cr_assert_null(kite_http_req_parser_query(&p, "frag"));
        cr_assert_str_eq(kite_http_req_parser_header(&p, "HOST"), "x");
        const char *g[4];
        cr_assert_eq(kite_http_req_parser_header_all(&p, "Impersonate-Group", g, 4), 2);
        cr_assert_str_eq(g[0], "g1");
        cr_assert_str_eq(g[1], "g2");
        cr_assert_eq(p.body.len, 0);
        kite_http_req_parser_next(&p);
        cr_assert(!p.begun && !p.head_done && !p.expect_continue);
        cr_assert_eq(feed(&p, in + off, sizeof in - 1 - off, steps[s], &taken), REQ_DONE);
        off += taken;
        cr_assert_eq(off, sizeof in - 1);
        cr_assert_str_eq(p.path, "/a%00");
        cr_assert_eq(p.hp.method, HTTP_PUT);
        cr_assert(!p.keep_alive);
        cr_assert_eq(p.body.len, 5);
        cr_assert_str_eq(p.body.p, "abcde");
        cr_assert_null(kite_http_req_parser_header(&p, "Impersonate-Group"));
        kite_http_req_parser_release(&p);
    }
}

/* A body of exactly the limit is fine, by Content-Length and by chunks. */
Test(request, body_at_the_limit) {
    char in[512];
    char body[MAX_BODY + 1];
    memset(body, 'b', MAX_BODY);
    body[MAX_BODY] = 0;
    const char *fmts[] = {"PUT / HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s",
                          "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"};
    for (size_t f = 0; f < 2; f++) {
        int n = snprintf(in, sizeof in, fmts[f], MAX_BODY, body);
        struct req_parser p;
        kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
        size_t taken;
        cr_assert_eq(feed(&p, in, (size_t)n, 1, &taken), REQ_DONE, "%s", in);
        cr_assert_eq(p.body.len, MAX_BODY);
        kite_http_req_parser_release(&p);
    }
}

/* Trailers after a chunked body are not headers (Go keeps them apart too): a client must not
 * add "Impersonate-User" after the body, past whatever looked at its headers. */
Test(request, chunked_trailers_are_not_headers) {
    const char in[] = "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "2\r\nab\r\n0\r\nImpersonate-User: admin\r\nX-Trailer: y\r\nZ: z\r\n\r\n";
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        struct req_parser p;
        kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
        size_t taken;
        cr_assert_eq(feed(&p, in, sizeof in - 1, steps[s], &taken), REQ_DONE);
        cr_assert_eq(taken, sizeof in - 1);
        cr_assert_eq(p.n_hdr, 2);
        cr_assert_null(kite_http_req_parser_header(&p, "Impersonate-User"));
        cr_assert_null(kite_http_req_parser_header(&p, "X-Trailer"));
        cr_assert_str_eq(kite_http_req_parser_header(&p, "Transfer-Encoding"), "chunked");
        cr_assert_str_eq(p.body.p, "ab");
        kite_http_req_parser_release(&p);
    }
    /* they still count against the head limit */
    char big[MAX_HEAD * 2];
    int n = snprintf(big, sizeof big, "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: %0*d\r\n\r\n",
                     MAX_HEAD, 0);
    struct req_parser p;
    kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
    size_t taken;
    cr_assert_eq(feed(&p, big, (size_t)n, 0, &taken), REQ_ERROR);
    cr_assert_eq(p.err, &KITE_HTTP_R_HEADERS_TOO_LARGE);
    kite_http_req_parser_release(&p);
}

/* ---- the head and grow hooks (the connection's authentication and body budgets) ---- */

struct hook_log {
    int heads;
    uint64_t declared;
    size_t body_at_head;    /* body bytes the parser had taken when the head hook ran */
    const struct refusal *head_answer;
    size_t grow_limit;      /* grow refuses past this */
    size_t last_grow;
};

static const struct refusal *log_head(struct req_parser *p, uint64_t declared, void *ud) {
    struct hook_log *l = ud;
    l->heads++;
    l->declared = declared;
    l->body_at_head = p->body.len;
    if (!l->head_answer) p->allowed = (size_t)declared;
    return l->head_answer;
}

static const struct refusal *log_grow(struct req_parser *p, size_t total, void *ud) {
    struct hook_log *l = ud;
    l->last_grow = total;
    if (total > l->grow_limit) return &KITE_HTTP_R_BODY_BUDGET;
    p->allowed = total;
    return NULL;
}

Test(request, head_hook_refuses_before_the_body) {
    const char *in = "POST /a HTTP/1.1\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n0123456789";
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        struct hook_log l = {.head_answer = &KITE_HTTP_R_UNAUTHORIZED};
        struct req_parser p;
        kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
        p.hooks = (struct req_hooks){log_head, log_grow, &l};
        size_t taken;
        cr_assert_eq(feed(&p, in, strlen(in), steps[s], &taken), REQ_ERROR);
        cr_assert_eq(p.err, &KITE_HTTP_R_UNAUTHORIZED);
        cr_assert_eq(l.heads, 1);
        cr_assert_eq(l.declared, 10);
        cr_assert_eq(l.body_at_head, 0);
        cr_assert_eq(p.body.len, 0, "no body byte kept");
        cr_assert(!p.expect_continue, "a refused head asks for no body");
        kite_http_req_parser_release(&p);
    }
}

Test(request, head_hook_not_asked_without_a_body) {
    const char *in = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    struct hook_log l = {.head_answer = &KITE_HTTP_R_UNAUTHORIZED};
    struct req_parser p;
    kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
    p.hooks = (struct req_hooks){log_head, log_grow, &l};
    size_t taken;
    cr_assert_eq(feed(&p, in, strlen(in), 0, &taken), REQ_DONE);
    cr_assert_eq(l.heads, 0);
    kite_http_req_parser_release(&p);
}

Test(request, head_hook_lowers_the_body_limit) {
    /* an anonymous request's smaller limit, set by the hook: the declared length is then too large */
    const char *in = "POST /a HTTP/1.1\r\nContent-Length: 40\r\n\r\n";
    struct hook_log l = {0};
    struct req_parser p;
    kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
    p.hooks = (struct req_hooks){log_head, log_grow, &l};
    p.max_body = 16; /* as if the hook had lowered it; it runs before the length check */
    size_t taken;
    cr_assert_eq(feed(&p, in, strlen(in), 0, &taken), REQ_ERROR);
    cr_assert_eq(p.err, &KITE_HTTP_R_BODY_TOO_LARGE);
    cr_assert_eq(l.heads, 1, "the hook is asked before the length is checked");
    kite_http_req_parser_next(&p);
    cr_assert_eq(p.max_body, MAX_BODY, "the next request has the connection's limit again");
    kite_http_req_parser_release(&p);
}

Test(request, grow_hook_claims_a_chunked_body_chunk_by_chunk) {
    const char *in = "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "8\r\n01234567\r\n8\r\n89abcdef\r\n8\r\nghijklmn\r\n0\r\n\r\n";
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        struct hook_log l = {.grow_limit = 16};
        struct req_parser p;
        kite_http_req_parser_init(&p, MAX_HEAD, MAX_BODY);
        p.hooks = (struct req_hooks){log_head, log_grow, &l};
        size_t taken;
        cr_assert_eq(feed(&p, in, strlen(in), steps[s], &taken), REQ_ERROR, "step %zu", steps[s]);
        cr_assert_eq(l.declared, 0, "chunked: no length at the head");
        cr_assert_eq(p.err, &KITE_HTTP_R_BODY_BUDGET);
        cr_assert_eq(l.last_grow, 24);
        cr_assert_eq(p.body.len, 16, "the third chunk was refused from its size, before its bytes");
        kite_http_req_parser_release(&p);
    }
}

static long resident_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    cr_assert(f && fscanf(f, "%ld %ld", &size, &res) == 2);
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

Test(request, a_large_body_goes_back_to_the_kernel_when_freed) {
    /* a declared 48 MiB body: pages of its own, not the allocator's, so releasing the parser
     * lowers the resident set at once (an allocator may keep freed spans resident) */
    const size_t n = 48u << 20;
    char head[128];
    int hn = snprintf(head, sizeof head, "PUT /a HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", n);
    char *chunk = malloc(1 << 20);
    memset(chunk, 'b', 1 << 20);
    struct req_parser p;
    kite_http_req_parser_init(&p, MAX_HEAD, n);
    size_t used;
    cr_assert_eq(kite_http_req_parser_feed(&p, head, (size_t)hn, &used), REQ_MORE);
    enum req_status st = REQ_MORE;
    for (size_t off = 0; off < n; off += 1 << 20) st = kite_http_req_parser_feed(&p, chunk, 1 << 20, &used);
    cr_assert_eq(st, REQ_DONE);
    cr_assert_eq(p.body.len, n);
    cr_assert(p.body.mapped);
    cr_assert_eq(p.body.p[0], 'b');
    cr_assert_eq(p.body.p[n - 1], 'b');
    cr_assert_eq(p.body.p[n], 0, "NUL-terminated");
    long held = resident_kib();
    kite_http_req_parser_release(&p);
    long after = resident_kib();
    cr_assert_geq(held - after, 44 * 1024, "resident %ld KiB with the body, %ld KiB after", held, after);
    free(chunk);
}

Test(request, a_chunked_body_grows_into_its_own_pages) {
    /* 300 chunks of 1,000 bytes: from the allocator, then past KITE_HTTP_BODY_MAP_MIN moved into
     * a mapping and grown there; every byte in order */
    struct kite_buf in = {0};
    kite_buf_puts(&in, "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    char data[1000];
    for (int i = 0; i < 300; i++) {
        for (size_t j = 0; j < sizeof data; j++) data[j] = (char)('a' + (i + (int)j) % 26);
        kite_buf_puts(&in, "3e8\r\n");
        kite_buf_append(&in, data, sizeof data);
        kite_buf_puts(&in, "\r\n");
    }
    kite_buf_puts(&in, "0\r\n\r\n");
    struct req_parser p;
    kite_http_req_parser_init(&p, MAX_HEAD, 1 << 20);
    size_t taken;
    cr_assert_eq(feed(&p, in.p, in.len, 4096, &taken), REQ_DONE);
    cr_assert_eq(p.body.len, 300000);
    cr_assert(p.body.mapped);
    for (size_t k = 0; k < p.body.len; k++)
        cr_assert_eq(p.body.p[k], (char)('a' + (k / 1000 + k % 1000) % 26), "byte %zu", k);
    cr_assert_eq(p.body.p[p.body.len], 0);
    /* the next request starts from an empty, unmapped body */
    kite_http_req_parser_next(&p);
    cr_assert_eq(p.body.len, 0);
    cr_assert_not(p.body.mapped);
    kite_http_req_parser_release(&p);
    kite_buf_release(&in);
}
