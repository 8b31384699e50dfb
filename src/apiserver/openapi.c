/* A minimal OpenAPI v3 index, generated from the resource table. kubectl create/apply (1.32)
 * fetch /openapi/v3 to learn whether the server validates fields itself (the fieldValidation
 * query parameter on each kind's PATCH operation); without an answer they refuse to run
 * unless --validate=false. kite declares support, and kubectl then leaves validation to the
 * server. Schemas are not published (kubectl falls back to its built-in types for apply). */
#include "apiserver/internal.h"

#include <stdio.h>

static void gv_path(char *out, size_t n, const struct kite_resource *r) {
    snprintf(out, n, "%s/%s", *r->group ? "apis" : "api", kite_resource_api_version(r));
}

static void index_doc(struct kite_buf *b) {
    kite_buf_puts(b, "{\"paths\":{");
    const char *seen[16];
    size_t n = 0;
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        bool dup = false;
        for (size_t i = 0; i < n; i++) dup |= strcmp(seen[i], r->group) == 0;
        if (dup || n == KITE_ARRAY_SIZE(seen)) continue;
        seen[n++] = r->group;
        char gv[128];
        gv_path(gv, sizeof gv, r);
        kite_buf_printf(b, "%s\"%s\":{\"serverRelativeURL\":\"/openapi/v3/%s?hash=kite-1\"}", n > 1 ? "," : "", gv, gv);
    }
    kite_buf_puts(b, "}}");
}

static const char PARAMS[] =
    "[{\"name\":\"dryRun\",\"in\":\"query\",\"schema\":{\"type\":\"string\"}},"
    "{\"name\":\"fieldManager\",\"in\":\"query\",\"schema\":{\"type\":\"string\"}},"
    "{\"name\":\"fieldValidation\",\"in\":\"query\",\"schema\":{\"type\":\"string\"}}]";

static void gv_doc(struct kite_buf *b, const char *group) {
    kite_buf_puts(b, "{\"openapi\":\"3.0.0\",\"info\":{\"title\":\"Kubernetes\",\"version\":\"v1.32.0-kite.1\"},\"paths\":{");
    bool first = true;
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        if (strcmp(r->group, group) != 0 || !kite_resource_stored(r)) continue; /* no PATCH */
        char gv[128];
        gv_path(gv, sizeof gv, r);
        for (int sub = 0; sub <= (r->has_status ? 1 : 0); sub++) {
            kite_buf_printf(b, "%s\"/%s/%s%s/{name}%s\":{\"parameters\":%s,\"patch\":{\"parameters\":%s,"
                               "\"x-kubernetes-action\":\"patch\",\"x-kubernetes-group-version-kind\":{\"group\":\"%s\",\"version\":\"%s\",\"kind\":\"%s\"}}}",
                            first ? "" : ",", gv, r->namespaced ? "namespaces/{namespace}/" : "", r->plural,
                            sub ? "/status" : "", PARAMS, PARAMS, r->group, r->version, r->kind);
            first = false;
        }
    }
    kite_buf_puts(b, "}}");
}

bool handle_openapi(struct req *rq) {
    const char *p = rq->http->path;
    if (!kite_startswith(p, "/openapi/")) return false;
    rq->verb = "get";
    struct kite_buf b = {0};
    if (strcmp(p, "/openapi/v3") == 0 || strcmp(p, "/openapi/v3/") == 0) {
        index_doc(&b);
    } else if (kite_startswith(p, "/openapi/v3/")) {
        const char *gv = p + strlen("/openapi/v3/");
        for (size_t k = 0; kite_resources[k] && !b.len; k++) {
            const struct kite_resource *r = kite_resources[k];
            char want[128];
            gv_path(want, sizeof want, r);
            if (strcmp(gv, want) == 0) gv_doc(&b, r->group);
        }
    }
    if (!b.len) {
        reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
        return true;
    }
    reply_json_buf(rq, 200, &b);
    return true;
}
