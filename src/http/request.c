/* kite http requests: http-parser callbacks, body limits, path and query decoding.
 *
 * http-parser does the framing (request line, headers, Content-Length, chunks); the callbacks
 * collect the pieces and apply kite's limits as the bytes arrive, so a refusal never waits for
 * input the limit already rules out. The parser pauses at the end of each request: pipelined
 * requests wait, unparsed, until the connection answered the one before. */
#include "http/request.h"

#include <limits.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define REQ_BUF_KEEP (64u * 1024) /* buffers above this are freed after their request */

const struct refusal KITE_HTTP_R_MALFORMED = {400, "BadRequest", "malformed HTTP request", false},
                     KITE_HTTP_R_NUL_PATH = {400, "BadRequest", "the request path contains a NUL byte", false},
                     KITE_HTTP_R_NUL_QUERY = {400, "BadRequest", "a query parameter contains a NUL byte", false},
                     KITE_HTTP_R_NUL_HEADER = {400, "BadRequest", "a request header contains a NUL byte", false},
                     KITE_HTTP_R_BODY_TOO_LARGE = {413, "RequestEntityTooLarge", "the request body is too large", false},
                     KITE_HTTP_R_URL_TOO_LONG = {414, "RequestURITooLong", "the request URL is too long", false},
                     KITE_HTTP_R_HEADERS_TOO_LARGE = {431, "RequestHeaderFieldsTooLarge", "the request headers are too large", false},
                     KITE_HTTP_R_UNAUTHORIZED = {401, "Unauthorized", "Unauthorized", false},
                     KITE_HTTP_R_BODY_BUDGET = {429, "TooManyRequests",
                                      "too many request bodies in flight, please try again later", true};

/* ---- the body's bytes (request.h) ---- */

/* To cap bytes (cap > len): from the allocator below KITE_HTTP_BODY_MAP_MIN, else mapped
 * (grown by mremap, which moves pages instead of copying them). A failed mapping falls back
 * to the allocator. */
static void body_resize(struct req_body *b, size_t cap) {
    void *p = MAP_FAILED;
    if (cap >= KITE_HTTP_BODY_MAP_MIN || b->mapped) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        cap = (cap + page - 1) / page * page;
        p = b->mapped ? mremap(b->p, b->cap, cap, MREMAP_MAYMOVE)
                      : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (p != MAP_FAILED) {
        if (!b->mapped && b->p) {
            memcpy(p, b->p, b->len + 1);
            free(b->p);
        }
        b->p = p;
        b->mapped = true;
    } else if (b->mapped) { /* the old mapping is still whole: into the allocator instead */
        char *q = kite_malloc(cap);
        memcpy(q, b->p, b->len + 1);
        munmap(b->p, b->cap);
        b->p = q;
        b->mapped = false;
    } else {
        b->p = kite_realloc(b->p, cap);
    }
    if (!b->len) b->p[0] = 0;
    b->cap = cap;
}

void kite_http_req_body_reserve(struct req_body *b, size_t n) {
    if (b->len + n + 1 > b->cap) body_resize(b, b->len + n + 1);
}

void kite_http_req_body_append(struct req_body *b, const void *data, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        body_resize(b, cap);
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

void kite_http_req_body_free(struct req_body *b) {
    if (b->mapped) munmap(b->p, b->cap);
    else free(b->p);
    *b = (struct req_body){0};
}

#define PARSER(h) ((struct req_parser *)((char *)(h) - offsetof(struct req_parser, hp)))

static int fail(struct req_parser *p, const struct refusal *why) {
    p->err = why;
    return -1; /* http-parser stops with a callback error */
}

static bool head_grow(struct req_parser *p, size_t n) {
    p->head_bytes += n;
    return p->head_bytes <= p->max_head;
}

static int on_message_begin(http_parser *h) {
    PARSER(h)->begun = true;
    return 0;
}

static int on_url(http_parser *h, const char *at, size_t n) {
    struct req_parser *p = PARSER(h);
    if (!head_grow(p, n)) return fail(p, &KITE_HTTP_R_URL_TOO_LONG);
    if (memchr(at, 0, n)) return fail(p, &KITE_HTTP_R_MALFORMED); /* http-parser refuses it; `url` is a C string */
    kite_buf_append(&p->url, at, n);
    return 0;
}

static void end_value(struct req_parser *p) {
    while (p->hdr.len && (p->hdr.p[p->hdr.len - 1] == ' ' || p->hdr.p[p->hdr.len - 1] == '\t'))
        p->hdr.len--;
    kite_buf_append(&p->hdr, "", 1);
    p->n_hdr++;
}

static int on_header_field(http_parser *h, const char *at, size_t n) {
    struct req_parser *p = PARSER(h);
    if (!head_grow(p, n)) return fail(p, &KITE_HTTP_R_HEADERS_TOO_LARGE);
    if (memchr(at, 0, n)) return fail(p, &KITE_HTTP_R_NUL_HEADER);
    if (p->head_done) return 0; /* a trailer (after a chunked body): counted, not kept */
    if (p->hdr_in_value) {
        end_value(p);
        p->hdr_in_value = false;
    }
    kite_buf_append(&p->hdr, at, n);
    return 0;
}

static int on_header_value(http_parser *h, const char *at, size_t n) {
    struct req_parser *p = PARSER(h);
    if (!head_grow(p, n)) return fail(p, &KITE_HTTP_R_HEADERS_TOO_LARGE);
    /* http-parser does not check the first byte of a value: a NUL there would end the value
     * early and shift every later "name\0value\0" pair (a value could then forge headers) */
    if (memchr(at, 0, n)) return fail(p, &KITE_HTTP_R_NUL_HEADER);
    if (p->head_done) return 0;
    if (!p->hdr_in_value) {
        kite_buf_append(&p->hdr, "", 1); /* ends the name */
        p->hdr_in_value = true;
    }
    kite_buf_append(&p->hdr, at, n);
    return 0;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) into b (and '+' into ' ' when plus), NUL-terminated. False when the
 * decoded text holds a NUL ("%00"): everything after the request line treats path, names and
 * values as C strings, so "/leases/victim%00x" would act on "/leases/victim". */
static bool unescape(struct kite_buf *b, const char *s, size_t n, bool plus) {
    kite_buf_grow(b, n + 1);
    bool nul = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int hi, lo;
        if (ch == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
            ch = (char)(hi * 16 + lo);
            i += 2;
        } else if (plus && ch == '+') {
            ch = ' ';
        }
        nul |= ch == 0;
        kite_buf_putc(b, ch);
    }
    kite_buf_append(b, "", 1);
    return !nul;
}

/* Splits and decodes the request target into path and query. NULL, or why it is refused. */
static const struct refusal *parse_target(struct req_parser *p) {
    const char *u = p->url.p ? p->url.p : "/";
    size_t n = p->url.len;
    const char *q = memchr(u, '?', n);
    size_t plen = q ? (size_t)(q - u) : n;
    const char *frag = memchr(u, '#', n);
    if (frag && (!q || frag < q)) plen = (size_t)(frag - u);
    struct kite_buf pb = {0};
    bool ok = unescape(&pb, u, plen, false);
    p->path = kite_buf_detach(&pb, NULL);
    if (!ok) return &KITE_HTTP_R_NUL_PATH;
    if (!q) return NULL;
    const char *s = q + 1, *end = u + n;
    const char *hash = memchr(s, '#', (size_t)(end - s));
    if (hash) end = hash;
    while (s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        const char *e = amp ? amp : end;
        if (e > s) {
            const char *eq = memchr(s, '=', (size_t)(e - s));
            if (!unescape(&p->query, s, (size_t)((eq ? eq : e) - s), true)) return &KITE_HTTP_R_NUL_QUERY;
            if (eq) {
                if (!unescape(&p->query, eq + 1, (size_t)(e - eq - 1), true)) return &KITE_HTTP_R_NUL_QUERY;
            } else {
                kite_buf_append(&p->query, "", 1);
            }
        }
        s = e + 1;
    }
    return NULL;
}

const struct refusal *kite_http_req_parser_set_target(struct req_parser *p) {
    const struct refusal *bad = parse_target(p);
    p->head_done = !bad;
    return bad;
}

static int on_headers_complete(http_parser *h) {
    struct req_parser *p = PARSER(h);
    if (p->hdr_in_value) {
        end_value(p);
        p->hdr_in_value = false;
    }
    const struct refusal *bad = parse_target(p);
    if (bad) return fail(p, bad);
    p->head_done = true;
    p->head_only = h->method == HTTP_HEAD;
    /* a body follows: the connection decides, before a byte of it is read, whether it is
     * read at all (authentication, budgets) */
    bool chunked = h->flags & F_CHUNKED; /* else content_length: ULLONG_MAX when absent */
    if ((chunked || (h->content_length > 0 && h->content_length != ULLONG_MAX)) && p->hooks.head) {
        bad = p->hooks.head(p, chunked ? 0 : h->content_length, p->hooks.ud);
        if (bad) return fail(p, bad);
    }
    const char *cl = kite_http_req_parser_header(p, "Content-Length");
    int64_t n;
    if (cl && kite_parse_int64(cl, &n) == 0 && n > 0 && (uint64_t)n > p->max_body) return fail(p, &KITE_HTTP_R_BODY_TOO_LARGE);
    const char *expect = kite_http_req_parser_header(p, "Expect");
    p->expect_continue = expect && strcasecmp(expect, "100-continue") == 0 && h->http_major == 1 && h->http_minor >= 1;
    return 0;
}

/* A chunk's size is known before its bytes: refused at once when it would take the body past
 * the limit, instead of waiting for bytes that may never come (a size of 7fffffffffffffff). */
static int on_chunk_header(http_parser *h) {
    struct req_parser *p = PARSER(h);
    if (h->content_length > p->max_body - p->body.len) return fail(p, &KITE_HTTP_R_BODY_TOO_LARGE);
    size_t total = p->body.len + (size_t)h->content_length;
    if (total > p->allowed && p->hooks.grow) {
        const struct refusal *bad = p->hooks.grow(p, total, p->hooks.ud);
        if (bad) return fail(p, bad);
    }
    return 0;
}

static int on_body(http_parser *h, const char *at, size_t n) {
    struct req_parser *p = PARSER(h);
    /* Content-Length and chunk sizes were checked already; this keeps the limit whatever
     * framing the parser allows. */
    if (n > p->max_body - p->body.len) return fail(p, &KITE_HTTP_R_BODY_TOO_LARGE);
    if (p->body.len + n > p->allowed && p->hooks.grow) {
        const struct refusal *bad = p->hooks.grow(p, p->body.len + n, p->hooks.ud);
        if (bad) return fail(p, bad);
    }
    /* a declared length is allocated once, not doubled into (a 3 MB body in a 4 MiB buffer) */
    if (!p->body.len && h->content_length != ULLONG_MAX && !(h->flags & F_CHUNKED))
        kite_http_req_body_reserve(&p->body, n + (size_t)h->content_length);
    kite_http_req_body_append(&p->body, at, n);
    return 0;
}

static int on_message_complete(http_parser *h) {
    struct req_parser *p = PARSER(h);
    p->message_done = true;
    p->keep_alive = http_should_keep_alive(h) != 0;
    http_parser_pause(h, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_chunk_header = on_chunk_header,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void kite_http_req_parser_init(struct req_parser *p, size_t max_head, size_t max_body) {
    memset(p, 0, sizeof(*p));
    p->max_head = max_head;
    p->max_body = p->max_body_cfg = max_body;
    p->allowed = SIZE_MAX;
    http_parser_init(&p->hp, HTTP_REQUEST);
}

void kite_http_req_parser_release(struct req_parser *p) {
    kite_buf_release(&p->url);
    kite_buf_release(&p->hdr);
    kite_http_req_body_free(&p->body);
    kite_buf_release(&p->query);
    free(p->path);
    p->path = NULL;
}

enum req_status kite_http_req_parser_feed(struct req_parser *p, const char *data, size_t n, size_t *used) {
    *used = http_parser_execute(&p->hp, &settings, data, n);
    if (p->message_done) {
        http_parser_pause(&p->hp, 0);
        return REQ_DONE;
    }
    if (HTTP_PARSER_ERRNO(&p->hp) != HPE_OK) {
        if (!p->err) p->err = &KITE_HTTP_R_MALFORMED;
        return REQ_ERROR;
    }
    return REQ_MORE;
}

void kite_http_req_parser_next(struct req_parser *p) {
    kite_buf_reset(&p->url);
    if (p->hdr.cap > REQ_BUF_KEEP) kite_buf_release(&p->hdr);
    kite_buf_reset(&p->hdr);
    if (p->body.cap > REQ_BUF_KEEP) kite_http_req_body_free(&p->body);
    p->body.len = 0;
    if (p->body.p) p->body.p[0] = 0;
    kite_buf_reset(&p->query);
    free(p->path);
    p->path = NULL;
    p->n_hdr = 0;
    p->hdr_in_value = false;
    p->head_bytes = 0;
    p->begun = p->head_done = p->expect_continue = p->message_done = p->head_only = false;
    p->err = NULL;
    p->max_body = p->max_body_cfg;
    p->allowed = SIZE_MAX;
    http_parser_init(&p->hp, HTTP_REQUEST);
}

void kite_http_req_parser_trim(struct req_parser *p) {
    kite_buf_release(&p->url);
    kite_buf_release(&p->hdr);
    kite_http_req_body_free(&p->body);
    kite_buf_release(&p->query);
}

/* ---- lookups ---- */

static const char *scan_pairs(const struct kite_buf *b, size_t n, const char *name, bool icase) {
    const char *s = b->p;
    for (size_t i = 0; i < n; i++) {
        const char *k = s, *v = s + strlen(s) + 1;
        if (icase ? strcasecmp(k, name) == 0 : strcmp(k, name) == 0) return v;
        s = v + strlen(v) + 1;
    }
    return NULL;
}

static size_t count_pairs(const struct kite_buf *b) {
    size_t n = 0;
    for (size_t i = 0; i < b->len; i++)
        if (b->p[i] == 0) n++;
    return n / 2;
}

const char *kite_http_req_parser_header(const struct req_parser *p, const char *name) {
    return scan_pairs(&p->hdr, p->n_hdr, name, true);
}

size_t kite_http_req_parser_header_all(const struct req_parser *p, const char *name, const char **out, size_t max) {
    const char *s = p->hdr.p;
    size_t n = 0;
    for (size_t i = 0; i < p->n_hdr; i++) {
        const char *k = s, *v = s + strlen(s) + 1;
        if (strcasecmp(k, name) == 0) {
            if (n < max) out[n] = v;
            n++;
        }
        s = v + strlen(v) + 1;
    }
    return n;
}

const char *kite_http_req_parser_query(const struct req_parser *p, const char *name) {
    /* "?watch" counts as present and empty, as in Go's url.ParseQuery */
    return scan_pairs(&p->query, count_pairs(&p->query), name, false);
}
