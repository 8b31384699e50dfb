/* /openapi/v2 and /openapi/v3: the documents src/api/openapi.c generates from the kinds'
 * schemas, rendered once (the first request builds them; they never change while the server
 * runs) and served as kube-apiserver does, so clients cache them:
 * - /openapi/v3 lists each group version's document as serverRelativeURL
 *   "/openapi/v3/api/v1?hash=<SHA-512>"; a request with that hash is answered
 *   `Cache-Control: public, immutable`, one with a stale hash is redirected to the current one;
 * - every document has ETag "<its hash>", and If-None-Match with it is answered 304.
 * kubectl 1.32 reads v3 (explain; and create/apply learn there whether the server validates
 * fields itself: the fieldValidation parameter of each kind's PATCH). v2 is served as JSON
 * only: a client that accepts only its protobuf form (client-go's OpenAPISchema) gets 406 and
 * falls back as it does on servers without it. */
#include "apiserver/internal.h"
#include "api/openapi.h"

#include <gnutls/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>

#define OPENAPI_MAX_GROUP_VERSIONS 32 /* documents kept; kite serves far fewer group versions */
#define V2_PB_MEDIA "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

struct doc {
    char gv[160];   /* "api/v1", "apis/coordination.k8s.io/v1"; "" for v2 and the v3 index */
    char *body;
    size_t len;
    char hash[129]; /* SHA-512, upper-case hex, as upstream */
};

static struct {
    pthread_once_t once;
    struct doc v2, v3_index;
    struct doc v3[OPENAPI_MAX_GROUP_VERSIONS];
    size_t n_v3;
} cache = {.once = PTHREAD_ONCE_INIT};

static void seal(struct doc *d, json_object *o) {
    size_t len;
    const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    d->body = kite_malloc(len);
    memcpy(d->body, s, len);
    d->len = len;
    unsigned char dig[64];
    gnutls_hash_fast(GNUTLS_DIG_SHA512, d->body, d->len, dig);
    for (size_t i = 0; i < sizeof dig; i++) snprintf(d->hash + 2 * i, 3, "%02X", dig[i]);
    json_object_put(o);
}

static void build(void) {
    seal(&cache.v2, kite_openapi_v2());
    json_object *index = json_object_new_object(), *paths = json_object_new_object();
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        char gv[160];
        snprintf(gv, sizeof gv, "%s/%s", *r->group ? "apis" : "api", r->api_version);
        bool seen = false;
        for (size_t i = 0; i < cache.n_v3; i++) seen |= strcmp(cache.v3[i].gv, gv) == 0;
        if (seen || cache.n_v3 == KITE_ARRAY_SIZE(cache.v3)) continue;
        json_object *doc = kite_openapi_v3(r->group, r->version);
        if (!doc) continue;
        struct doc *d = &cache.v3[cache.n_v3++];
        snprintf(d->gv, sizeof d->gv, "%s", gv);
        seal(d, doc);
        char url[400];
        snprintf(url, sizeof url, "/openapi/v3/%s?hash=%s", gv, d->hash);
        json_object *e = json_object_new_object();
        json_object_object_add(e, "serverRelativeURL", json_object_new_string(url));
        json_object_object_add(paths, gv, e);
    }
    json_object_object_add(index, "paths", paths);
    seal(&cache.v3_index, index);
}

/* The Accept header allows JSON (or says nothing). */
static bool accepts_json(const char *accept) {
    if (!accept || !*accept) return true;
    for (const char *p = accept; *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",;");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        static const char *const ok[] = {"application/json", "application/*", "*/*"};
        bool match = false;
        for (size_t i = 0; i < KITE_ARRAY_SIZE(ok); i++) match |= n == strlen(ok[i]) && strncasecmp(p, ok[i], n) == 0;
        const char *end = p + strcspn(p, ",");
        /* q=0 refuses */
        const char *q = strstr(p, ";q=");
        if (!q || q > end) q = strstr(p, "; q=");
        bool zero = q && q < end && strtod(strchr(q, '=') + 1, NULL) == 0;
        if (match && !zero) return true;
        p = end;
    }
    return false;
}

static bool etag_matches(const char *inm, const char *hash) {
    if (!inm) return false;
    if (strcmp(inm, "*") == 0) return true;
    char want[140];
    snprintf(want, sizeof want, "\"%s\"", hash);
    return strstr(inm, want) != NULL; /* one of a list of entity tags, possibly weak (W/"...") */
}

static void serve(struct req *rq, const struct doc *d, bool immutable) {
    char etag[140];
    snprintf(etag, sizeof etag, "\"%s\"", d->hash);
    kite_http_add_header(rq->http, "ETag", etag);
    kite_http_add_header(rq->http, "Vary", "Accept");
    kite_http_add_header(rq->http, "Cache-Control", immutable ? "public, immutable" : "no-cache, private");
    if (etag_matches(kite_http_header(rq->http, "If-None-Match"), d->hash)) {
        reply(rq, 304, NULL, NULL, 0);
        return;
    }
    char *body = kite_malloc(d->len);
    memcpy(body, d->body, d->len);
    rq->raw_json = true;
    reply(rq, 200, "application/json", body, d->len);
}

bool handle_openapi(struct req *rq) {
    const char *p = rq->http->path;
    if (!kite_startswith(p, "/openapi/")) return false;
    rq->verb = "get";
    if (strcmp(rq->http->method, "GET") != 0 && strcmp(rq->http->method, "HEAD") != 0) {
        reply_error(rq, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        return true;
    }
    pthread_once(&cache.once, build);
    const char *accept = kite_http_header(rq->http, "Accept");
    if (strcmp(p, "/openapi/v2") == 0 || strcmp(p, "/openapi/v2/") == 0) {
        if (!accepts_json(accept)) {
            reply_error(rq, 406, "NotAcceptable", "only the following media types are accepted: application/json (not " V2_PB_MEDIA ")");
            return true;
        }
        serve(rq, &cache.v2, false);
        return true;
    }
    if (strcmp(p, "/openapi/v3") == 0 || strcmp(p, "/openapi/v3/") == 0) {
        serve(rq, &cache.v3_index, false);
        return true;
    }
    if (kite_startswith(p, "/openapi/v3/")) {
        const char *gv = p + strlen("/openapi/v3/");
        for (size_t i = 0; i < cache.n_v3; i++) {
            const struct doc *d = &cache.v3[i];
            if (strcmp(gv, d->gv) != 0) continue;
            if (!accepts_json(accept)) {
                reply_error(rq, 406, "NotAcceptable", "only the following media types are accepted: application/json");
                return true;
            }
            const char *hash = kite_http_query(rq->http, "hash");
            if (hash && *hash && strcmp(hash, d->hash) != 0) {
                /* an old hash: where the current document is, as upstream */
                char loc[400];
                snprintf(loc, sizeof loc, "/openapi/v3/%s?hash=%s", d->gv, d->hash);
                kite_http_add_header(rq->http, "Location", loc);
                kite_http_add_header(rq->http, "Cache-Control", "no-cache, private");
                reply(rq, 301, NULL, NULL, 0);
                return true;
            }
            serve(rq, d, hash && *hash);
            return true;
        }
    }
    reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
    return true;
}
