/* /openapi/v2 and /openapi/v3: the documents src/api/openapi.c generates from the kinds'
 * schemas, rendered once (the first request builds them; they never change while the server
 * runs) and served as kube-apiserver does, so clients cache them:
 * - /openapi/v3 lists each group version's document as serverRelativeURL
 *   "/openapi/v3/api/v1?hash=<SHA-512>"; a request with that hash is answered
 *   `Cache-Control: public, immutable`, one with a stale hash is redirected to the current one;
 * - every document has ETag "<its hash>", and If-None-Match with it is answered 304.
 * kubectl 1.32 reads v3 (explain; and create/apply learn there whether the server validates
 * fields itself: the fieldValidation parameter of each kind's PATCH). v2 is served as JSON and
 * as gnostic's protobuf (src/api/openapi_pb.c), the form client-go's OpenAPISchema asks for:
 * kubectl validates on the client with it where a kind's PATCH does not take fieldValidation
 * (the never-stored reviews, which have no PATCH). */
#include "apiserver/internal.h"
#include "api/openapi.h"

#include <gnutls/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>

#define OPENAPI_MAX_GROUP_VERSIONS 32 /* documents kept; kite serves far fewer group versions */
#define V2_PB_MEDIA "application/com.github.proto-openapi.spec.v2@v1.0+protobuf" /* what clients ask for */
#define V2_PB_TYPE "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"  /* what is answered (a valid MIME token) */

struct doc {
    char gv[160];   /* "api/v1", "apis/coordination.k8s.io/v1"; "" for v2 and the v3 index */
    char *body;
    size_t len;
    char hash[129]; /* SHA-512, upper-case hex, as upstream */
};

static struct {
    pthread_once_t once;
    struct doc v2, v2_pb, v3_index;
    struct doc v3[OPENAPI_MAX_GROUP_VERSIONS];
    size_t n_v3;
} cache = {.once = PTHREAD_ONCE_INIT};

static void seal_bytes(struct doc *d, const void *body, size_t len) {
    d->body = kite_malloc(len ? len : 1);
    memcpy(d->body, body, len);
    d->len = len;
    unsigned char dig[64];
    gnutls_hash_fast(GNUTLS_DIG_SHA512, d->body, d->len, dig);
    for (size_t i = 0; i < sizeof dig; i++) snprintf(d->hash + 2 * i, 3, "%02X", dig[i]);
}

static void seal(struct doc *d, json_object *o) {
    size_t len;
    const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    seal_bytes(d, s, len);
    json_object_put(o);
}

static void build(void) {
    json_object *v2 = kite_openapi_v2();
    struct kite_buf pb = {0};
    kite_openapi_v2_protobuf(v2, &pb);
    seal_bytes(&cache.v2_pb, pb.p ? pb.p : "", pb.len);
    kite_buf_release(&pb);
    seal(&cache.v2, v2);
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

enum media { MEDIA_NONE, MEDIA_JSON, MEDIA_PB };

/* The first media range of the Accept header that names a form served (pb_ok: the v2
 * protobuf too, under either of its names); no header is JSON. */
static enum media accepted(const char *accept, bool pb_ok) {
    if (!accept || !*accept) return MEDIA_JSON;
    for (const char *p = accept; *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",;");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        static const char *const json[] = {"application/json", "application/*", "*/*"};
        static const char *const pb[] = {V2_PB_MEDIA, V2_PB_TYPE};
        enum media m = MEDIA_NONE;
        for (size_t i = 0; i < KITE_ARRAY_SIZE(json); i++)
            if (n == strlen(json[i]) && strncasecmp(p, json[i], n) == 0) m = MEDIA_JSON;
        for (size_t i = 0; pb_ok && i < KITE_ARRAY_SIZE(pb); i++)
            if (n == strlen(pb[i]) && strncasecmp(p, pb[i], n) == 0) m = MEDIA_PB;
        const char *end = p + strcspn(p, ",");
        /* q=0 refuses */
        const char *q = strstr(p, ";q=");
        if (!q || q > end) q = strstr(p, "; q=");
        bool zero = q && q < end && strtod(strchr(q, '=') + 1, NULL) == 0;
        if (m != MEDIA_NONE && !zero) return m;
        p = end;
    }
    return MEDIA_NONE;
}

static bool etag_matches(const char *inm, const char *hash) {
    if (!inm) return false;
    if (strcmp(inm, "*") == 0) return true;
    char want[140];
    snprintf(want, sizeof want, "\"%s\"", hash);
    return strstr(inm, want) != NULL; /* one of a list of entity tags, possibly weak (W/"...") */
}

static void serve(struct req *rq, const struct doc *d, bool immutable, const char *ctype) {
    char etag[140];
    snprintf(etag, sizeof etag, "\"%s\"", d->hash);
    kite_http_add_header(rq->http, "ETag", etag);
    kite_http_add_header(rq->http, "Vary", "Accept");
    kite_http_add_header(rq->http, "Cache-Control", immutable ? "public, immutable" : "no-cache, private");
    if (etag_matches(kite_http_header(rq->http, "If-None-Match"), d->hash)) {
        kite_apiserver_reply(rq, 304, NULL, NULL, 0);
        return;
    }
    char *body = kite_malloc(d->len);
    memcpy(body, d->body, d->len);
    rq->raw_json = true;
    kite_apiserver_reply(rq, 200, ctype, body, d->len);
}

bool kite_apiserver_handle_openapi(struct req *rq) {
    const char *p = rq->http->path;
    if (!kite_startswith(p, "/openapi/")) return false;
    rq->verb = "get";
    if (strcmp(rq->http->method, "GET") != 0 && strcmp(rq->http->method, "HEAD") != 0) {
        kite_apiserver_reply_error(rq, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        return true;
    }
    pthread_once(&cache.once, build);
    const char *accept = kite_http_header(rq->http, "Accept");
    if (strcmp(p, "/openapi/v2") == 0 || strcmp(p, "/openapi/v2/") == 0) {
        enum media m = accepted(accept, true);
        if (m == MEDIA_NONE) {
            kite_apiserver_reply_error(rq, 406, "NotAcceptable", "only the following media types are accepted: application/json, " V2_PB_TYPE);
            return true;
        }
        if (m == MEDIA_PB) serve(rq, &cache.v2_pb, false, V2_PB_TYPE);
        else serve(rq, &cache.v2, false, "application/json");
        return true;
    }
    if (strcmp(p, "/openapi/v3") == 0 || strcmp(p, "/openapi/v3/") == 0) {
        serve(rq, &cache.v3_index, false, "application/json");
        return true;
    }
    if (kite_startswith(p, "/openapi/v3/")) {
        const char *gv = p + strlen("/openapi/v3/");
        for (size_t i = 0; i < cache.n_v3; i++) {
            const struct doc *d = &cache.v3[i];
            if (strcmp(gv, d->gv) != 0) continue;
            if (accepted(accept, false) != MEDIA_JSON) {
                kite_apiserver_reply_error(rq, 406, "NotAcceptable", "only the following media types are accepted: application/json");
                return true;
            }
            const char *hash = kite_http_query(rq->http, "hash");
            if (hash && *hash && strcmp(hash, d->hash) != 0) {
                /* an old hash: where the current document is, as upstream */
                char loc[400];
                snprintf(loc, sizeof loc, "/openapi/v3/%s?hash=%s", d->gv, d->hash);
                kite_http_add_header(rq->http, "Location", loc);
                kite_http_add_header(rq->http, "Cache-Control", "no-cache, private");
                kite_apiserver_reply(rq, 301, NULL, NULL, 0);
                return true;
            }
            serve(rq, d, hash && *hash, "application/json");
            return true;
        }
    }
    kite_apiserver_reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
    return true;
}
