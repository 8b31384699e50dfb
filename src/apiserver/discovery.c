/* Discovery: /version, aggregated discovery on /api and /apis (kubectl 1.32 asks for it
 * first and needs the exact media type back), and the legacy documents (/api/v1 is fetched on
 * every drain and can-i). All generated from the resource table. */
#include "apiserver/internal.h"
#include "base/version.h"

#include <stdio.h>
#include <stdlib.h>

#define AGG_CT "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
#define KITE_VERSION_JSON \
    "{\"major\":\"1\",\"minor\":\"32\",\"gitVersion\":\"" KITE_VERSION "\",\"gitCommit\":\"0000000000000000000000000000000000000000\"," \
    "\"gitTreeState\":\"clean\",\"buildDate\":\"2026-12-02T00:00:00Z\",\"goVersion\":\"go1.23.6\",\"compiler\":\"gc\",\"platform\":\"linux/amd64\"}"

static const char *const VERBS_ALL[] = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};

static void verbs_json(struct kite_buf *b, const struct kite_resource *r) {
    if (!kite_resource_stored(r)) { /* a question, answered and forgotten */
        kite_buf_puts(b, "[\"create\"]");
        return;
    }
    if (r->read_only) {
        kite_buf_puts(b, "[\"get\",\"list\",\"watch\"]");
        return;
    }
    kite_buf_puts(b, "[");
    bool first = true;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(VERBS_ALL); i++) {
        if (r->no_deletecollection && kite_streq(VERBS_ALL[i], "deletecollection")) continue;
        kite_buf_printf(b, "%s\"%s\"", first ? "" : ",", VERBS_ALL[i]);
        first = false;
    }
    kite_buf_puts(b, "]");
}

static void subresource_verbs_json(struct kite_buf *b, const struct kite_subresource *sr) {
    kite_buf_puts(b, kite_subresource_is_action(sr) ? "[\"create\"]"
                     : sr->upgrade              ? "[\"create\",\"get\"]"
                     : sr->connect              ? "[\"get\"]"
                     : sr->update_only          ? "[\"update\"]"
                                                : "[\"get\",\"patch\",\"update\"]");
}

/* Calls fn for the status subresource (when the row has one) and each other one. */
static void each_subresource(const struct kite_resource *r, void (*fn)(struct kite_buf *, const struct kite_resource *,
                                                                        const struct kite_subresource *, bool),
                             struct kite_buf *b) {
    bool first = true;
    if (r->has_status) {
        fn(b, r, kite_resource_subresource(r, "status"), first);
        first = false;
    }
    for (const struct kite_subresource *sr = r->subresources; sr && sr->name; sr++, first = false) fn(b, r, sr, first);
}

static void agg_subresource(struct kite_buf *b, const struct kite_resource *r, const struct kite_subresource *sr,
                            bool first) {
    /* answers about its body's kind (Binding, Eviction, Scale; an upgrade's options kind) */
    bool act = kite_subresource_is_action(sr) || sr->view || (sr->upgrade && sr->body_kind);
    kite_buf_printf(b, "%s{\"subresource\":\"%s\",\"responseKind\":{\"group\":\"%s\",\"version\":\"%s\",\"kind\":\"%s\"},\"verbs\":",
                    first ? "" : ",", sr->name, act ? sr->body_group : r->group, act ? sr->body_version : r->version,
                    act ? sr->body_kind : r->kind);
    subresource_verbs_json(b, sr);
    kite_buf_putc(b, '}');
}

static void legacy_subresource(struct kite_buf *b, const struct kite_resource *r, const struct kite_subresource *sr,
                               bool first) {
    bool act = kite_subresource_is_action(sr) || sr->view || (sr->upgrade && sr->body_kind),
         other_group = act && strcmp(sr->body_group, r->group) != 0;
    kite_buf_printf(b, ",{\"name\":\"%s/%s\",\"singularName\":\"\",\"namespaced\":%s,", r->plural, sr->name,
                    r->namespaced ? "true" : "false");
    if (other_group) kite_buf_printf(b, "\"group\":\"%s\",\"version\":\"%s\",", sr->body_group, sr->body_version);
    kite_buf_printf(b, "\"kind\":\"%s\",\"verbs\":", act ? sr->body_kind : r->kind);
    subresource_verbs_json(b, sr);
    kite_buf_putc(b, '}');
}

static void names_json(struct kite_buf *b, const char *key, const char *const *names, size_t max) {
    if (!names[0]) return;
    kite_buf_printf(b, ",\"%s\":[", key);
    for (size_t i = 0; i < max && names[i]; i++) kite_buf_printf(b, "%s\"%s\"", i ? "," : "", names[i]);
    kite_buf_puts(b, "]");
}

/* Groups in the order they are listed: "" first, then by first appearance. */
static size_t groups(const char **out, size_t max) {
    size_t n = 0;
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        bool seen = false;
        for (size_t i = 0; i < n; i++) seen |= strcmp(out[i], r->group) == 0;
        if (!seen && n < max) out[n++] = r->group;
    }
    return n;
}

/* The resources of one version of a group, as aggregated discovery lists them. */
static void agg_version(struct kite_buf *b, const char *group, const char *version) {
    bool first = true;
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        if (strcmp(r->group, group) != 0 || strcmp(r->version, version) != 0) continue;
        kite_buf_printf(b, "%s{\"resource\":\"%s\",\"responseKind\":{\"group\":\"%s\",\"version\":\"%s\",\"kind\":\"%s\"},"
                           "\"scope\":\"%s\",\"singularResource\":\"%s\",\"verbs\":",
                        first ? "" : ",", r->plural, r->group, r->version, r->kind, r->namespaced ? "Namespaced" : "Cluster",
                        r->singular);
        verbs_json(b, r);
        names_json(b, "shortNames", r->short_names, KITE_ARRAY_SIZE(r->short_names));
        names_json(b, "categories", r->categories, KITE_ARRAY_SIZE(r->categories));
        if (r->has_status || r->subresources) {
            kite_buf_puts(b, ",\"subresources\":[");
            each_subresource(r, agg_subresource, b);
            kite_buf_putc(b, ']');
        }
        kite_buf_puts(b, "}");
        first = false;
    }
}

/* A group's versions, the preferred first (kube's version priority among GA versions: the
 * highest number first, so autoscaling/v2 before autoscaling/v1). */
static size_t versions(const char *group, const char **out, size_t max) {
    size_t n = 0;
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        if (strcmp(r->group, group) != 0) continue;
        bool seen = false;
        for (size_t i = 0; i < n; i++) seen |= strcmp(out[i], r->version) == 0;
        if (seen || n == max) continue;
        size_t at = n++;
        while (at > 0 && atoi(out[at - 1] + 1) < atoi(r->version + 1)) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = r->version;
    }
    return n;
}

static void agg_group(struct kite_buf *b, const char *group) {
    kite_buf_printf(b, "{\"metadata\":{\"name\":\"%s\",\"creationTimestamp\":null},\"versions\":[", group);
    const char *vs[4];
    size_t nv = versions(group, vs, KITE_ARRAY_SIZE(vs));
    for (size_t i = 0; i < nv; i++) {
        kite_buf_printf(b, "%s{\"version\":\"%s\",\"resources\":[", i ? "," : "", vs[i]);
        agg_version(b, group, vs[i]);
        kite_buf_puts(b, "],\"freshness\":\"Current\"}");
    }
    kite_buf_puts(b, "]}");
}

static void agg_list(struct kite_buf *b, bool core) {
    kite_buf_puts(b, "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":\"apidiscovery.k8s.io/v2\",\"metadata\":{},\"items\":[");
    const char *g[16];
    size_t n = groups(g, KITE_ARRAY_SIZE(g));
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if ((*g[i] == 0) != core) continue;
        if (!first) kite_buf_putc(b, ',');
        agg_group(b, g[i]);
        first = false;
    }
    if (!core) { /* served in-process beside the registry (metrics_api.c) */
        if (!first) kite_buf_putc(b, ',');
        kite_apiserver_metrics_api_discovery_agg(b);
    }
    kite_buf_puts(b, "]}");
}

static void resource_list(struct kite_buf *b, const char *group, const char *version) {
    const char *gv = *group ? kite_asprintf("%s/%s", group, version) : kite_strdup(version);
    kite_buf_printf(b, "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"%s\",\"resources\":[", gv);
    free((char *)gv);
    bool first = true;
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        if (strcmp(r->group, group) != 0 || strcmp(r->version, version) != 0) continue;
        kite_buf_printf(b, "%s{\"name\":\"%s\",\"singularName\":\"%s\",\"namespaced\":%s,\"kind\":\"%s\",\"verbs\":",
                        first ? "" : ",", r->plural, r->singular, r->namespaced ? "true" : "false", r->kind);
        verbs_json(b, r);
        names_json(b, "shortNames", r->short_names, KITE_ARRAY_SIZE(r->short_names));
        names_json(b, "categories", r->categories, KITE_ARRAY_SIZE(r->categories));
        kite_buf_puts(b, "}");
        each_subresource(r, legacy_subresource, b);
        first = false;
    }
    kite_buf_puts(b, "]}");
}

static void group_json(struct kite_buf *b, const char *g) {
    const char *vs[4];
    size_t nv = versions(g, vs, KITE_ARRAY_SIZE(vs));
    kite_buf_printf(b, "{\"name\":\"%s\",\"versions\":[", g);
    for (size_t i = 0; i < nv; i++)
        kite_buf_printf(b, "%s{\"groupVersion\":\"%s/%s\",\"version\":\"%s\"}", i ? "," : "", g, vs[i], vs[i]);
    kite_buf_printf(b, "],\"preferredVersion\":{\"groupVersion\":\"%s/%s\",\"version\":\"%s\"}}", g, vs[0], vs[0]);
}

static void send(struct req *rq, const char *ctype, struct kite_buf *b) {
    size_t len;
    char *p = kite_buf_detach(b, &len);
    kite_apiserver_reply(rq, 200, ctype, p, len);
}

bool kite_apiserver_handle_discovery(struct req *rq) {
    const char *p = rq->http->path;
    struct kite_buf b = {0};
    const char *acc = kite_http_header(rq->http, "Accept");
    bool agg = acc && strstr(acc, "as=APIGroupDiscoveryList");
    rq->verb = "get";
    if (strcmp(p, "/version") == 0 || strcmp(p, "/version/") == 0) {
        rq->raw_json = true; /* kube-apiserver writes it raw, with no trailing newline */
        kite_buf_puts(&b, KITE_VERSION_JSON);
        send(rq, "application/json", &b);
        return true;
    }
    if (strcmp(p, "/api") == 0 || strcmp(p, "/api/") == 0) {
        if (agg) {
            agg_list(&b, true);
            send(rq, AGG_CT, &b);
        } else {
            kite_buf_puts(&b, "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],\"serverAddressByClientCIDRs\":[{\"clientCIDR\":\"0.0.0.0/0\",\"serverAddress\":\"\"}]}");
            send(rq, "application/json", &b);
        }
        return true;
    }
    if (strcmp(p, "/apis") == 0 || strcmp(p, "/apis/") == 0) {
        if (agg) {
            agg_list(&b, false);
            send(rq, AGG_CT, &b);
            return true;
        }
        kite_buf_puts(&b, "{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":[");
        const char *g[16];
        size_t n = groups(g, KITE_ARRAY_SIZE(g));
        bool first = true;
        for (size_t i = 0; i < n; i++) {
            if (!*g[i]) continue;
            if (!first) kite_buf_putc(&b, ',');
            group_json(&b, g[i]);
            first = false;
        }
        if (!first) kite_buf_putc(&b, ',');
        kite_apiserver_metrics_api_discovery_group(&b);
        kite_buf_puts(&b, "]}");
        send(rq, "application/json", &b);
        return true;
    }
    if (strcmp(p, "/api/v1") == 0 || strcmp(p, "/api/v1/") == 0) {
        resource_list(&b, "", "v1");
        send(rq, "application/json", &b);
        return true;
    }
    /* /apis/GROUP and /apis/GROUP/VERSION only: resource paths (every write) have more segments */
    if (kite_startswith(p, "/apis/") && strchr(p + 6, '/') == strrchr(p + 6, '/')) {
        const char *g[16];
        size_t n = groups(g, KITE_ARRAY_SIZE(g));
        for (size_t i = 0; i < n; i++) {
            if (!*g[i]) continue;
            char a[128];
            snprintf(a, sizeof a, "/apis/%s", g[i]);
            if (strcmp(p, a) == 0) {
                kite_buf_puts(&b, "{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",");
                struct kite_buf gj = {0};
                group_json(&gj, g[i]);
                kite_buf_puts(&b, gj.p + 1);
                kite_buf_release(&gj);
                send(rq, "application/json", &b);
                return true;
            }
            const char *vs[4];
            size_t nv = versions(g[i], vs, KITE_ARRAY_SIZE(vs));
            for (size_t j = 0; j < nv; j++) {
                char v[160];
                snprintf(v, sizeof v, "/apis/%s/%s", g[i], vs[j]);
                if (strcmp(p, v) == 0) {
                    resource_list(&b, g[i], vs[j]);
                    send(rq, "application/json", &b);
                    return true;
                }
            }
        }
    }
    if (kite_apiserver_metrics_api_discovery(rq)) return true;
    rq->verb = NULL;
    return false;
}
