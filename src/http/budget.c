/* kite http body budgets: the bytes of request bodies the server holds at once.
 *
 * A body is claimed before it is read: its declared length at the head (a chunked body, or an
 * HTTP/2 one without content-length, chunk by chunk as it arrives), against three budgets: the
 * body's own limit, its connection's (HTTP/2: the sum over its streams; HTTP/1.1 reads one body
 * at a time) and the server's, one counter shared by every connection. A claim is held until
 * the request is answered (the handler reads the body until then). Anonymous requests claim
 * from budgets of their own, much smaller, so unauthenticated clients cannot take the room
 * authenticated ones need; a request that will be answered 401 claims nothing and its body is
 * never read.
 *
 * Past the body's limit: 413. Past the connection's or the server's: 429 with Retry-After,
 * decided at the head when the length is declared (so before a byte of the body is read), and
 * the body's bytes so far are dropped. Not waiting (no reading, no WINDOW_UPDATE until room
 * frees): a half-read body that waits holds its share, so bodies waiting on each other can hold
 * the whole budget and none finish; a 429 holds nothing, and clients retry it after
 * Retry-After (client-go does, as for kube-apiserver's max-in-flight 429s). */
#include "http/http-internal.h"

static const size_t CONN_MAX[2] = {KITE_HTTP_CONN_BODY_MAX, KITE_HTTP_ANON_CONN_BODY_MAX};
static const size_t SERVER_MAX[2] = {KITE_HTTP_SERVER_BODY_MAX, KITE_HTTP_ANON_SERVER_BODY_MAX};

const struct refusal *kite_http_body_claim(struct kite_http_server *srv, struct req *r, size_t total, size_t *conn_held) {
    if (total <= r->claim) return NULL;
    size_t more = total - r->claim;
    int k = r->anon;
    if (conn_held && conn_held[k] + more > CONN_MAX[k]) return &KITE_HTTP_R_BODY_BUDGET;
    size_t cur = atomic_load(&srv->body_held[k]);
    do {
        if (cur + more > SERVER_MAX[k]) return &KITE_HTTP_R_BODY_BUDGET;
    } while (!atomic_compare_exchange_weak(&srv->body_held[k], &cur, cur + more));
    if (conn_held) conn_held[k] += more;
    r->claim = total;
    return NULL;
}

void kite_http_body_release(struct kite_http_server *srv, struct req *r, size_t *conn_held) {
    if (!r->claim) return;
    if (kite_http_tl_worker) kite_http_tl_worker->freed_bodies += r->claim; /* the next sweep gives the memory back */
    atomic_fetch_sub(&srv->body_held[r->anon], r->claim);
    if (conn_held) conn_held[r->anon] -= r->claim;
    r->claim = 0;
}

const struct refusal *kite_http_body_admit(struct conn *c, struct req *r, struct req_parser *p, uint64_t declared,
                                 size_t *conn_held) {
    struct kite_http_server *srv = c->w->srv;
    kite_http_auth_request(c, r);
    enum kite_http_admit v = srv->admit ? srv->admit(&r->pub, srv->ud) : KITE_HTTP_ADMIT_USER;
    if (v == KITE_HTTP_ADMIT_UNAUTHORIZED) return &KITE_HTTP_R_UNAUTHORIZED;
    r->anon = v == KITE_HTTP_ADMIT_ANONYMOUS;
    if (r->anon) p->max_body = KITE_MIN(p->max_body, KITE_HTTP_ANON_MAX_BODY);
    if (declared > p->max_body) return &KITE_HTTP_R_BODY_TOO_LARGE;
    const struct refusal *bad = kite_http_body_claim(srv, r, (size_t)declared, conn_held);
    if (!bad) p->allowed = (size_t)declared;
    return bad;
}
