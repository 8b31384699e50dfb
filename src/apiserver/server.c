/* API server core: start/stop, routing, authentication, replies and errors.
 *
 * A request flows: http layer (TLS, authn result) -> dispatch() (route, effective user,
 * authz) -> one handler per verb (read.c, write.c, watch.c) -> reply_*(), which records
 * metrics and frees the request. Writes reply later from the store's writer thread. */
#include "apiserver/internal.h"
#include "apiserver/rbac.h"
#include "api/status.h"
#include "json/parse.h"
#include "base/clock.h"
#include "base/log.h"
#include "pki/pki.h"

#include <stdarg.h>
#include <stdio.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct kite_wcache *kite_apiserver_storage_cache(struct kite_apiserver *s, const struct kite_resource *r) {
    const char *name = r->storage ? r->storage : r->plural;
    for (size_t i = 0; i < s->n_storages; i++)
        if (strcmp(s->storages[i].name, name) == 0) return s->storages[i].cache;
    return NULL;
}

const char *kite_apiserver_req_resource_label(const struct req *rq) {
    static __thread char buf[128];
    if (!rq->res) return "";
    if (rq->sub) {
        snprintf(buf, sizeof buf, "%s/%s", rq->res->plural, rq->sub);
        return buf;
    }
    return rq->res->plural;
}

void kite_apiserver_req_free(struct req *rq) {
    if (!rq) return;
    kite_apiserver_inflight_release(rq);
    free(rq->group);
    free(rq->version);
    free(rq->ns);
    free(rq->name);
    free(rq->sub);
    free(rq->impersonation_mem);
    free(rq->authn_mem);
    free(rq->yaml_duplicates);
    free(rq->audit_head);
    free(rq->audit_annotations);
    free(rq);
}

/* kube-apiserver's JSON serializer ends every body it encodes with a newline (Go's
 * json.Encoder); clients compare error bodies byte for byte (the python client's
 * FailToCreateError text). Raw JSON documents (/version, /openapi) are written without. */
static void end_json(const struct req *rq, const char *content_type, char **body, size_t *len) {
    if (rq->raw_json || !*body || !*len || (*body)[*len - 1] == '\n' || !kite_apiserver_media_is(content_type, "application/json")) return;
    *body = kite_realloc(*body, *len + 1);
    (*body)[(*len)++] = '\n';
}

void kite_apiserver_reply(struct req *rq, int code, const char *content_type, char *body, size_t len) {
    kite_apiserver_negotiate_encode(rq, &content_type, &body, &len);
    end_json(rq, content_type, &body, &len);
    if (rq->srv->metrics)
        kite_apiserver_metrics_observe(rq->srv->metrics, rq->verb ? rq->verb : "", kite_apiserver_req_resource_label(rq), code,
                        kite_now_mono(rq->srv->clock) - rq->start_ns);
    kite_apiserver_audit(rq, KITE_AUDIT_RESPONSE_COMPLETE, code);
    kite_http_respond(rq->http, code, content_type, body, len);
    kite_apiserver_req_free(rq);
}

void kite_apiserver_reply_json_buf(struct req *rq, int code, struct kite_buf *body) {
    size_t len;
    char *p = kite_buf_detach(body, &len);
    kite_apiserver_reply(rq, code, "application/json", p, len);
}

/* The Status body's details: the request's own object unless the error is about another
 * (a missing namespace, an invalid object whose name is not on the URL). */
static struct status_details request_details(const struct req *rq) {
    /* Kubernetes names the kind in details as the resource ("nodes") and the group. */
    return (struct status_details){.name = rq->name,
                                   .group = rq->res && *rq->res->group ? rq->res->group : NULL,
                                   .kind = rq->res ? rq->res->plural : NULL};
}

static void reply_status(struct req *rq, int code, const char *reason, const char *msg,
                         const struct status_details *d, struct kite_causes *causes) {
    char *body = kite_status_failure(code, reason ? reason : kite_status_reason_for(code), msg, d->name, d->group,
                                     d->kind, causes);
    if (code == 429) kite_http_add_header(rq->http, "Retry-After", "1");
    kite_apiserver_reply(rq, code, "application/json", body, strlen(body));
}

static void reply_status_v(struct req *rq, int code, const char *reason, const struct status_details *d,
                           const char *fmt, va_list ap) {
    char *msg;
    if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
    reply_status(rq, code, reason, msg ? msg : "", d, NULL);
    free(msg);
}

void kite_apiserver_reply_error(struct req *rq, int code, const char *reason, const char *fmt, ...) {
    struct status_details d = request_details(rq);
    va_list ap;
    va_start(ap, fmt);
    reply_status_v(rq, code, reason, &d, fmt, ap);
    va_end(ap);
}

void kite_apiserver_reply_error_about(struct req *rq, int code, const char *reason, const struct status_details *d,
                       const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    reply_status_v(rq, code, reason, d, fmt, ap);
    va_end(ap);
}

void kite_apiserver_reply_invalid(struct req *rq, const char *name, struct kite_causes *causes) {
    /* details.name is the object's name even for creates (rq->name is unset there) */
    char *body = kite_status_invalid(rq->res ? rq->res->group : NULL, rq->res ? rq->res->kind : NULL, name, causes);
    kite_apiserver_reply(rq, 422, "application/json", body, strlen(body));
}

void kite_apiserver_reply_too_large_rv(struct req *rq, int64_t want, int64_t current) {
    char *body = kite_status_too_large_rv((long long)want, (long long)current);
    char retry[16];
    snprintf(retry, sizeof retry, "%d", KITE_TOO_LARGE_RV_RETRY_S);
    kite_http_add_header(rq->http, "Retry-After", retry);
    kite_apiserver_reply(rq, 504, "application/json", body, strlen(body));
}

void kite_apiserver_reply_add_warning(struct req *rq, const char *text) {
    /* as kube-apiserver's warning recorder: past KITE_WARNING_TOTAL_MAX bytes of warnings in
     * one answer, each further one is cut to KITE_WARNING_ITEM_MAX (at a character boundary) */
    size_t n = strlen(text);
    if (rq->warning_bytes + n > KITE_WARNING_TOTAL_MAX && n > KITE_WARNING_ITEM_MAX) {
        n = KITE_WARNING_ITEM_MAX;
        while (n && ((unsigned char)text[n] & 0xC0) == 0x80) n--;
    }
    rq->warning_bytes += n;
    struct kite_buf h = {0};
    kite_buf_puts(&h, "299 - \"");
    for (const char *p = text; p < text + n; p++) {
        if (*p == '"' || *p == '\\') kite_buf_putc(&h, '\\');
        kite_buf_putc(&h, (char)((unsigned char)*p < 0x20 ? ' ' : *p));
    }
    kite_buf_putc(&h, '"');
    kite_http_add_header(rq->http, "Warning", h.p);
    kite_buf_release(&h);
}

/* ---- routing ------------------------------------------------------------------------- */

static size_t split_path(char *path, char **segs, size_t max) {
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == max) return max + 1;
        segs[n++] = t;
    }
    return n;
}

/* strconv.ParseBool's true spellings (python clients send "True"). */
bool kite_apiserver_query_true(const char *v) {
    static const char *const yes[] = {"1", "t", "T", "true", "TRUE", "True"};
    for (size_t i = 0; v && i < KITE_ARRAY_SIZE(yes); i++)
        if (strcmp(v, yes[i]) == 0) return true;
    return false;
}

/* Fills rq's route from /api/v1/... or /apis/G/V/...; replies 404 itself when unknown. */
static bool route(struct req *rq) {
    _cleanup_free_ char *path = kite_strdup(rq->http->path);
    char *seg[12];
    size_t n = split_path(path, seg, KITE_ARRAY_SIZE(seg));
    size_t i;
    if (n >= 2 && strcmp(seg[0], "api") == 0) {
        rq->group = kite_strdup("");
        rq->version = kite_strdup(seg[1]);
        i = 2;
    } else if (n >= 3 && strcmp(seg[0], "apis") == 0) {
        rq->group = kite_strdup(seg[1]);
        rq->version = kite_strdup(seg[2]);
        i = 3;
    } else {
        goto notfound;
    }
    if (n > KITE_ARRAY_SIZE(seg)) goto notfound;
    if (i < n && strcmp(seg[i], "watch") == 0) { /* legacy /watch/ prefix */
        rq->is_watch = true;
        i++;
    }
    const char *plural;
    /* .../namespaces/NS/<resource>..., but not a namespace's own subresource .../namespaces/NS/status */
    const struct kite_resource *nsr = kite_registry_namespaces();
    if (i + 2 < n && strcmp(seg[i], nsr->plural) == 0 &&
        !(i + 3 == n && kite_resource_subresource(nsr, seg[i + 2]))) {
        rq->ns = kite_strdup(seg[i + 1]);
        i += 2;
    }
    if (i >= n) goto notfound;
    plural = seg[i++];
    rq->res = kite_registry_find(rq->group, rq->version, plural);
    if (!rq->res) goto notfound;
    if (i < n) rq->name = kite_strdup(seg[i++]);
    if (i < n) rq->sub = kite_strdup(seg[i++]);
    if (i < n) goto notfound;
    if (rq->ns && !rq->res->namespaced) goto notfound;
    if (rq->sub && !kite_resource_subresource(rq->res, rq->sub)) goto notfound;
    return true;
notfound:
    rq->res = NULL;
    kite_apiserver_reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
    return false;
}

static const char *verb_for(struct req *rq) {
    const char *m = rq->http->method;
    /* an action subresource (a pod's binding) is POSTed to, nothing else */
    const struct kite_subresource *sr = rq->sub ? kite_resource_subresource(rq->res, rq->sub) : NULL;
    if (kite_subresource_is_action(sr)) return strcmp(m, "POST") == 0 ? "create" : NULL;
    /* a connect subresource (a pod's log) is read, nothing else */
    if (sr && sr->connect && sr->upgrade) return strcmp(m, "GET") == 0 ? "get" : strcmp(m, "POST") == 0 ? "create" : NULL;
    if (sr && sr->connect) return strcmp(m, "GET") == 0 ? "get" : NULL;
    if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
        if (rq->is_watch || kite_apiserver_query_true(kite_http_query(rq->http, "watch"))) {
            rq->is_watch = true;
            return "watch";
        }
        return rq->name ? "get" : "list";
    }
    if (strcmp(m, "POST") == 0) return rq->name ? NULL : "create";
    if (strcmp(m, "PUT") == 0) return rq->name ? "update" : NULL;
    if (strcmp(m, "PATCH") == 0) return rq->name ? "patch" : NULL;
    if (strcmp(m, "DELETE") == 0) return rq->name ? "delete" : "deletecollection";
    return NULL;
}

/* ---- authentication and impersonation ----------------------------------------------- */

static bool user_in_group(const struct kite_user *u, const char *g) {
    for (size_t i = 0; i < u->n_groups; i++)
        if (strcmp(u->groups[i], g) == 0) return true;
    return false;
}

static void add_group(struct kite_user *u, const char *g) {
    if (u->n_groups < KITE_ARRAY_SIZE(u->groups) && !user_in_group(u, g)) u->groups[u->n_groups++] = g;
}

/* Sets rq->user; replies 401/403 itself and returns false when the request may not proceed.
 * No credentials: anonymous may get the public paths (system:public-info-viewer) and is
 * answered 401 elsewhere, as kube-apiserver 1.32 with anonymous authentication limited to
 * those paths (AuthenticationConfiguration anonymous.conditions); its default
 * --anonymous-auth=true would answer 403 there instead. */
static bool authenticate(struct req *rq) {
    const struct kite_http_user *hu = rq->http->user;
    /* the union authenticator's next member: a token the static file did not know */
    if (!hu && rq->http->authn_failed && (kite_apiserver_bootstrap_token(rq) || kite_apiserver_satoken_authenticate(rq))) {
        add_group(&rq->user, "system:authenticated");
        return kite_apiserver_impersonate(rq);
    }
    if (rq->http->authn_failed || (!hu && !kite_apiserver_is_public_path(rq->http->path))) {
        kite_apiserver_reply_error(rq, 401, "Unauthorized", "Unauthorized");
        return false;
    }
    if (!hu) {
        rq->user.name = "system:anonymous";
        add_group(&rq->user, "system:unauthenticated");
    } else {
        rq->user.name = hu->name;
        rq->user.uid = hu->uid;
        for (size_t i = 0; i < hu->n_groups; i++) add_group(&rq->user, hu->groups[i]);
        add_group(&rq->user, "system:authenticated");
    }
    return kite_apiserver_impersonate(rq);
}

/* The http layer asks at the head of a request with a body, before reading it: the same
 * decision as authenticate() (a bootstrap token is looked up too), so a body is never read for
 * a request that will be answered 401, and anonymous ones get the small budgets. */
static enum kite_http_admit admit_head(const struct kite_http_req *hr, void *ud) {
    if (hr->user) return KITE_HTTP_ADMIT_USER;
    if (hr->authn_failed) {
        struct req rq = {.srv = ud, .http = (struct kite_http_req *)hr};
        bool ok = kite_apiserver_bootstrap_token(&rq) || kite_apiserver_satoken_authenticate(&rq);
        free(rq.authn_mem);
        return ok ? KITE_HTTP_ADMIT_USER : KITE_HTTP_ADMIT_UNAUTHORIZED;
    }
    return kite_apiserver_is_public_path(hr->path) ? KITE_HTTP_ADMIT_ANONYMOUS : KITE_HTTP_ADMIT_UNAUTHORIZED;
}

bool kite_apiserver_authorize(struct req *rq) {
    struct kite_authz_attrs a = {.user = &rq->user, .verb = rq->verb, .view = rq->srv};
    struct kite_field_selector *fields = NULL;
    if (rq->res) {
        a.group = rq->res->group;
        a.resource = rq->res->plural;
        a.sub = rq->sub;
        a.ns = rq->ns;
        a.name = rq->name;
        if (!rq->name && rq->verb && (strcmp(rq->verb, "list") == 0 || strcmp(rq->verb, "watch") == 0 ||
                                      strcmp(rq->verb, "deletecollection") == 0)) {
            /* a selector that does not parse is answered 400 by the handler, once allowed */
            const char *f = kite_http_query(rq->http, "fieldSelector");
            if (f && *f && kite_field_selector_parse(f, &fields, NULL) == 0) {
                a.fields = fields;
                if (strcmp(rq->verb, "deletecollection") != 0) a.name = kite_field_selector_exact(fields, "metadata.name");
            }
            a.label_selector = kite_http_query(rq->http, "labelSelector");
        }
    } else {
        a.path = rq->http->path;
    }
    char *why = NULL;
    bool ok = kite_authorize(&a, &why) == KITE_AUTHZ_ALLOW;
    if (!ok) {
        /* details as apierrors.NewForbidden's: the name asked about, the group, the resource */
        _cleanup_free_ char *msg = kite_authz_forbidden_message(&a, why);
        struct status_details d = {.name = a.name && *a.name ? a.name : NULL,
                                   .group = a.group && *a.group ? a.group : NULL, .kind = a.resource};
        kite_apiserver_reply_error_about(rq, 403, "Forbidden", &d, "%s", msg);
    }
    free(why);
    kite_field_selector_free(fields);
    return ok;
}

/* ---- dispatch -------------------------------------------------------------------------- */

static void handle_plain(struct req *rq, int code, const char *ctype, const char *text) {
    kite_apiserver_reply(rq, code, ctype, kite_strdup(text), strlen(text));
}

/* /healthz, /livez, /readyz: "ok", or with ?verbose the checks one per line as
 * kube-apiserver prints them. Every check but "etcd" holds while the process serves; "etcd" is
 * the store's (kite_store_health: an etcd member with a leader is connected; SQLite: always). */
static void handle_health(struct req *rq) {
    static const char *const checks[] = {"ping", "log", "etcd", "informer-sync", "poststarthook/start-kite-watch-cache"};
    const char *p = rq->http->path, *name = strrchr(p, '/');
    bool single = name && name != p && strchr(p + 1, '/');
    _cleanup_free_ char *why = NULL;
    bool etcd_ok = kite_store_health(rq->srv->store, &why) == 0;
    if (single) {
        for (size_t i = 0; i < KITE_ARRAY_SIZE(checks); i++)
            if (strcmp(p + strcspn(p + 1, "/") + 2, checks[i]) == 0) {
                if (strcmp(checks[i], "etcd") == 0 && !etcd_ok)
                    handle_plain(rq, 500, "text/plain; charset=utf-8", "internal server error: etcd: not healthy");
                else
                    handle_plain(rq, 200, "text/plain; charset=utf-8", "ok");
                return;
            }
        kite_apiserver_reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
        return;
    }
    if (!kite_http_query(rq->http, "verbose")) {
        if (etcd_ok) handle_plain(rq, 200, "text/plain; charset=utf-8", "ok");
        else handle_plain(rq, 500, "text/plain; charset=utf-8", "[-]etcd failed: reason withheld\nhealthz check failed\n");
        return;
    }
    struct kite_buf b = {0};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(checks); i++) {
        if (strcmp(checks[i], "etcd") == 0 && !etcd_ok) kite_buf_printf(&b, "[-]etcd failed: %s\n", why ? why : "not healthy");
        else kite_buf_printf(&b, "[+]%s ok\n", checks[i]);
    }
    kite_buf_printf(&b, "%s check %s\n", p + 1, etcd_ok ? "passed" : "failed");
    size_t len;
    char *body = kite_buf_detach(&b, &len);
    kite_apiserver_reply(rq, etcd_ok ? 200 : 500, "text/plain; charset=utf-8", body, len);
}

static void run_verb(struct req *rq);

static void dispatch(struct kite_http_req *hr, void *ud) {
    struct kite_apiserver *s = ud;
    struct req *rq = kite_calloc(1, sizeof *rq);
    rq->srv = s;
    rq->http = hr;
    rq->start_ns = kite_now_mono(rq->srv->clock);
    rq->start_wall_ns = kite_now_wall(rq->srv->clock);
    const char *p = hr->path;
    if (!authenticate(rq)) return;
    if (hr->user) kite_apiserver_nodestate_seen(s, hr->user->name, hr->method, p);

    if (kite_apiserver_is_health_path(p)) {
        rq->verb = "get";
        handle_health(rq);
        return;
    }
    if (strcmp(p, "/metrics") == 0) {
        rq->verb = "get";
        if (!kite_apiserver_authorize(rq)) return;
        struct kite_buf b = {0};
        kite_apiserver_metrics_render(s->metrics, &b);
        struct kite_store_stats st;
        kite_store_stats(s->store, &st);
        kite_buf_printf(&b, "# HELP kite_store_commits_failed_total Store transactions that failed in storage (their writes got errors).\n"
                            "# TYPE kite_store_commits_failed_total counter\nkite_store_commits_failed_total %llu\n",
                        (unsigned long long)st.commits_failed);
        kite_buf_printf(&b, "# HELP kite_store_writes_total Writes the store applied.\n"
                            "# TYPE kite_store_writes_total counter\nkite_store_writes_total %llu\n"
                            "# HELP kite_store_batches_total Store transactions committed (one fsync each: writes/batches is the group commit's size).\n"
                            "# TYPE kite_store_batches_total counter\nkite_store_batches_total %llu\n",
                        (unsigned long long)st.writes, (unsigned long long)st.batches);
        kite_audit_metrics(s->audit, &b);
        kite_apiserver_nodestate_metrics(s, &b);
        kite_apiserver_inflight_metrics(s, &b);
        size_t len;
        char *body = kite_buf_detach(&b, &len);
        kite_apiserver_reply(rq, 200, "text/plain; version=0.0.4; charset=utf-8", body, len);
        return;
    }
    if (strcmp(p, "/debug/kite/nodes") == 0) {
        rq->verb = "get";
        if (!kite_apiserver_authorize(rq)) return;
        kite_apiserver_nodestate_reply(rq);
        return;
    }
    if (kite_apiserver_handle_discovery(rq) || kite_apiserver_handle_openapi(rq) || kite_apiserver_metrics_api_handle(rq)) return;
    if (!kite_startswith(p, "/api/") && !kite_startswith(p, "/apis/")) {
        rq->verb = "get";
        kite_apiserver_reply_error(rq, 404, "NotFound", "the server could not find the requested resource");
        return;
    }
    if (!route(rq)) return;
    rq->verb = verb_for(rq);
    /* a subresource served for PUT alone (a namespace's finalize) has no get, patch or watch */
    const struct kite_subresource *sr = rq->sub ? kite_resource_subresource(rq->res, rq->sub) : NULL;
    if (!rq->verb || (sr && sr->update_only && strcmp(rq->verb, "update") != 0) ||
        (!kite_resource_stored(rq->res) && strcmp(rq->verb, "create") != 0) ||
        (rq->res->read_only && strcmp(rq->verb, "get") != 0 && strcmp(rq->verb, "list") != 0 &&
         strcmp(rq->verb, "watch") != 0)) {
        kite_apiserver_reply_error(rq, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
        return;
    }
    if (!kite_apiserver_authorize(rq)) return;
    if (sr && sr->upgrade && strcmp(rq->verb, "get") == 0) {
        /* a WebSocket's GET starts what a POST creates: both verbs are needed (kube-apiserver
         * 1.35's AuthorizePodWebsocketUpgradeCreatePermission, on by default) */
        rq->verb = "create";
        if (!kite_apiserver_authorize(rq)) return;
        rq->verb = "get";
    }
    if (sr && sr->connect) { /* proxied to a node agent (logproxy.c) */
        kite_apiserver_handle_connect(rq, sr);
        return;
    }
    if (!kite_apiserver_negotiate(rq) || !kite_apiserver_inflight_admit(rq)) return;
    const char *inc = kite_http_query(hr, "includeObject");
    rq->table_full_object = inc && strcmp(inc, "Object") == 0;

    if (hr->body_len >= KITE_BULK_BODY_MIN && kite_apiserver_bulk_offer(rq, run_verb)) return;
    if (kite_apiserver_inflight_offer(rq, run_verb)) return;
    run_verb(rq);
}

/* The verb's handler: on the HTTP worker, or on a bulk thread for a large body (bulk.c). */
static void run_verb(struct req *rq) {
    const char *v = rq->verb;
    if (!kite_resource_stored(rq->res)) kite_apiserver_handle_review(rq);
    else if (strcmp(v, "get") == 0) kite_apiserver_handle_get(rq);
    else if (strcmp(v, "list") == 0) kite_apiserver_handle_list(rq);
    else if (strcmp(v, "watch") == 0) kite_apiserver_handle_watch(rq);
    else if (strcmp(v, "create") == 0) kite_apiserver_handle_create(rq);
    else if (strcmp(v, "update") == 0) kite_apiserver_handle_update(rq);
    else if (strcmp(v, "patch") == 0) kite_apiserver_handle_patch(rq);
    else if (strcmp(v, "delete") == 0) kite_apiserver_handle_delete(rq);
    else kite_apiserver_handle_deletecollection(rq);
}

/* ---- lifecycle ------------------------------------------------------------------------- */

/* The objects every cluster has (the rows' bootstrap names: the system namespaces). */
static int ensure_bootstrap(struct kite_apiserver *s) {
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *r = kite_resources[k];
        for (const char *const *name = r->bootstrap; name && *name; name++) {
            json_object *o = json_object_new_object();
            kite_obj_set(o, "kind", json_object_new_string(r->kind));
            kite_obj_set(o, "apiVersion", json_object_new_string(kite_resource_api_version(r)));
            kite_obj_set(kite_obj_ensure(o, "metadata"), "name", json_object_new_string(*name));
            int r2 = kite_apiserver_create_sync(s, r, o);
            json_object_put(o);
            if (r2 < 0 && r2 != -EEXIST) return r2;
        }
    }
    return 0;
}

json_object *kite_apiserver_lookup(struct kite_apiserver *s, const struct kite_resource *r, const char *ns, const char *name) {
    _cleanup_free_ char *key = kite_object_key(r, ns, name);
    struct kite_record *rec = kite_wcache_get(kite_apiserver_storage_cache(s, r), key);
    if (!rec) return NULL;
    json_object *o = kite_apiserver_record_parse(rec);
    kite_record_unref(rec);
    return o;
}

static char *listen_host_url(const char *listen, uint16_t port) {
    const char *colon = strrchr(listen, ':');
    size_t hl = colon ? (size_t)(colon - listen) : 0;
    _cleanup_free_ char *host = kite_strndup(listen, hl);
    if (!*host || strcmp(host, "0.0.0.0") == 0) {
        free(host);
        host = kite_strdup("127.0.0.1");
    } else if (strcmp(host, "[::]") == 0) {
        free(host);
        host = kite_strdup("[::1]");
    }
    return kite_asprintf("https://%s:%u", host, port);
}

/* Startup failures name the file or address and the cause: "Input/output error" alone does
 * not tell a full disk from a corrupt database. Returns r (negative errno). */
static int fail(char **ret_error, int r, const char *fmt, ...) KITE_PRINTF(3, 4);
static int fail(char **ret_error, int r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg;
    if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
    va_end(ap);
    *ret_error = kite_asprintf("%s: %s", msg ? msg : "", strerror(-r));
    free(msg);
    return r;
}

/* The key the encrypted kinds (secrets) are sealed with at rest: 32 random bytes in
 * DATA_DIR/pki/encryption.key (0600), made on first start. Losing it loses them, as losing
 * kube-apiserver's EncryptionConfiguration key does. */
static int load_encryption(struct kite_apiserver *s, const char *pki, char **ret_error) {
    _cleanup_free_ char *path = kite_asprintf("%s/encryption.key", pki), *key = NULL;
    size_t len = 0;
    int r = kite_read_file(path, 4096, &key, &len);
    if (r == -ENOENT) {
        unsigned char fresh[KITE_STORE_CRYPT_KEY_LEN];
        kite_random_bytes(fresh, sizeof fresh);
        if ((r = kite_write_file_atomic(path, fresh, sizeof fresh, 0600, false)) < 0)
            return fail(ret_error, r, "cannot write the encryption key %s", path);
        key = kite_malloc(sizeof fresh);
        memcpy(key, fresh, sizeof fresh);
        len = sizeof fresh;
    } else if (r < 0) {
        return fail(ret_error, r, "cannot read the encryption key %s", path);
    }
    if (len != KITE_STORE_CRYPT_KEY_LEN) {
        *ret_error = kite_asprintf("the encryption key %s holds %zu bytes, not %d", path, len, KITE_STORE_CRYPT_KEY_LEN);
        return -EINVAL;
    }
    const char *prefixes[64];
    char *owned[64];
    size_t n = 0;
    for (size_t k = 0; kite_resources[k] && n < KITE_ARRAY_SIZE(prefixes) - 1; k++)
        if (kite_resources[k]->encrypted) prefixes[n] = owned[n] = kite_object_prefix(kite_resources[k], NULL), n++;
    prefixes[n] = NULL;
    r = kite_store_crypt_new((const unsigned char *)key, prefixes, &s->crypt);
    explicit_bzero(key, len);
    for (size_t i = 0; i < n; i++) free(owned[i]);
    return r < 0 ? fail(ret_error, r, "cannot set up encryption with %s", path) : 0;
}

/* The data dir holds keys, the store and kubeconfigs: it and the files kite keeps there are
 * private to the server's user whatever they were before (a data dir made 0755 by hand, a
 * database created under a loose umask). Directories other than pki/ (the agent's, with
 * container root filesystems) are left alone. */
static void make_private(const char *dir, bool recurse_pki) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        _cleanup_free_ char *p = kite_asprintf("%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) < 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (recurse_pki && strcmp(e->d_name, "pki") == 0) {
                if ((st.st_mode & 077) && chmod(p, 0700) == 0)
                    log_warn("apiserver", "%s was readable by others (mode %03o): made 0700", p, st.st_mode & 0777);
                make_private(p, false);
            }
            continue;
        }
        if (S_ISREG(st.st_mode) && (st.st_mode & 077) && chmod(p, 0600) == 0)
            log_warn("apiserver", "%s was readable by others (mode %03o): made 0600", p, st.st_mode & 0777);
    }
    closedir(d);
}

/* One process per data dir: a second apiserver on the same store would serve stale reads,
 * fail every write and take over admin.kubeconfig. The lock is the kernel's (flock), so it
 * goes away with the process however it ends; the file holds the owner's pid for the message. */
static int lock_data_dir(struct kite_apiserver *s, const char *dir, char **ret_error) {
    _cleanup_free_ char *path = kite_asprintf("%s/kite.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return fail(ret_error, -errno, "cannot open the lock file %s", path);
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int r = -errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        close(fd);
        if (r != -EWOULDBLOCK) return fail(ret_error, r, "cannot lock %s", path);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        *ret_error = kite_asprintf("data dir %s is in use by another kite process (pid %s, lock %s)", dir,
                                   *pid ? pid : "unknown", path);
        return -EBUSY;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        int r = -errno;
        close(fd);
        return fail(ret_error, r, "cannot write %s", path);
    }
    s->lock_fd = fd;
    return 0;
}

static int start(struct kite_apiserver *s, const struct kite_apiserver_options *o, char **ret_error) {
    int r;
    if (mkdir(o->data_dir, 0700) < 0 && errno != EEXIST)
        return fail(ret_error, -errno, "cannot create the data dir %s", o->data_dir);
    struct stat dst;
    if (stat(o->data_dir, &dst) == 0 && (dst.st_mode & 077)) {
        if (chmod(o->data_dir, 0700) < 0) return fail(ret_error, -errno, "cannot make the data dir %s private", o->data_dir);
        log_warn("apiserver", "the data dir %s was open to others (mode %03o): made 0700", o->data_dir, dst.st_mode & 0777);
    }
    if ((r = kite_psa_config_new(o, &s->psa, ret_error)) < 0) return r;
    if ((r = lock_data_dir(s, o->data_dir, ret_error)) < 0) return r;
    make_private(o->data_dir, true);
    _cleanup_free_ char *pki = kite_asprintf("%s/pki", o->data_dir);
    if (mkdir(pki, 0700) < 0 && errno != EEXIST) return fail(ret_error, -errno, "cannot create %s", pki);
    if ((r = kite_pki_ensure(pki, NULL, 0)) < 0) return fail(ret_error, r, "cannot create the certificates in %s", pki);

    _cleanup_free_ char *url = o->store_url      ? kite_strdup(o->store_url)
                               : o->etcd_servers ? kite_asprintf("etcd:%s", o->etcd_servers)
                                                 : kite_asprintf("sqlite:%s/kite.db", o->data_dir);
    if ((r = load_encryption(s, pki, ret_error)) < 0) return r;
    if ((r = kite_apiserver_satoken_start(s, pki, o->service_account_issuer, o->api_audiences,
                                     o->service_account_max_token_expiration_s, ret_error)) < 0) return r;
    kite_apiserver_satoken_set_extend(s->satoken, o->service_account_extend_token_expiration);
    /* kinds with a TTL (Events): the store may expire them itself (etcd leases) */
    const char *ttl_prefixes[8] = {0};
    _cleanup_free_ char *ttl_buf = NULL;
    struct kite_buf tb = {0};
    size_t n_ttl = 0;
    for (size_t k = 0; kite_resources[k] && n_ttl < KITE_ARRAY_SIZE(ttl_prefixes) - 1; k++)
        if (kite_resources[k]->last_seen) {
            kite_buf_printf(&tb, "/registry/%s/", kite_resources[k]->storage ? kite_resources[k]->storage
                                                                            : kite_resources[k]->plural);
            kite_buf_putc(&tb, 0);
            n_ttl++;
        }
    ttl_buf = kite_buf_detach(&tb, NULL);
    for (size_t i = 0, off = 0; i < n_ttl; off += strlen(ttl_buf + off) + 1, i++) ttl_prefixes[i] = ttl_buf + off;
    s->codec = kite_apiserver_codec_new(o->storage_protobuf);
    struct kite_store_options so = {.force_recover = o->force_recover, .crypt = s->crypt,
                                    .codec = kite_apiserver_codec_store(s->codec),
                                    .ttl_prefixes = ttl_prefixes,
                                    .ttl_s = o->event_ttl_s > 0 ? o->event_ttl_s : KITE_EVENT_TTL_DEFAULT_S,
                                    .etcd_cafile = o->etcd_cafile, .etcd_certfile = o->etcd_certfile,
                                    .etcd_keyfile = o->etcd_keyfile, .etcd_prefix = o->etcd_prefix,
                                    .etcd_timeout_ms = o->etcd_timeout_ms};
    if ((r = kite_store_open(url, &so, &s->store, ret_error)) < 0)
        return *ret_error ? r : fail(ret_error, r, "cannot open the store %s", url);
    s->metrics = kite_apiserver_metrics_new();
    s->nodestate = kite_apiserver_nodestate_new(o->node_stale_ns, o->node_grace_ns);
    size_t rows = 0;
    while (kite_resources[rows]) rows++;
    s->storages = kite_calloc(rows, sizeof *s->storages); /* at most one folder per row */
    for (size_t k = 0; kite_resources[k]; k++) {
        const struct kite_resource *res = kite_resources[k];
        const char *name = res->storage ? res->storage : res->plural;
        if (!kite_resource_stored(res) || kite_apiserver_storage_cache(s, res)) continue;
        _cleanup_free_ char *prefix = kite_asprintf("/registry/%s/", name);
        struct kite_storage *st = &s->storages[s->n_storages];
        st->name = name;
        st->res = res;
        if ((r = kite_wcache_new(s->store, prefix, o->watch_ring, &st->cache)) < 0)
            return fail(ret_error, r, "cannot load %s from the store %s", prefix, url);
        s->n_storages++;
    }
    if ((r = kite_node_graph_start(s)) < 0) return fail(ret_error, r, "cannot build the node authorizer's pod graph");
    s->always_allow = o->always_allow;
    if ((r = kite_apiserver_pools_start(s, o->service_cidr ? o->service_cidr : KITE_SERVICE_CIDR_DEFAULT, ret_error)) < 0) return r;
    if (o->audit_log_path) {
        struct kite_audit_options ao = {.path = o->audit_log_path, .max_size_mb = o->audit_log_maxsize_mb,
                                        .max_backups = o->audit_log_maxbackup, .clock = s->clock};
        if ((r = kite_audit_open(&ao, &s->audit)) < 0) return fail(ret_error, r, "cannot open the audit log %s", o->audit_log_path);
    }
    if ((r = kite_apiserver_rbac_start(s)) < 0) return fail(ret_error, r, "cannot index the RBAC policy of %s", url);
    if ((r = ensure_bootstrap(s)) < 0) return fail(ret_error, r, "cannot create the system namespaces in %s", url);
    if ((r = kite_apiserver_rbac_bootstrap(s, o->controller_roles, o->n_controller_roles)) < 0) return fail(ret_error, r, "cannot create the default RBAC policy in %s", url);
    if ((r = kite_apiserver_retry_start(s)) < 0) return fail(ret_error, r, "cannot start the write-retry thread");
    if ((r = kite_apiserver_bulk_start(s, 0)) < 0) return fail(ret_error, r, "cannot start the bulk decoding threads");
    if ((r = kite_apiserver_inflight_start(s, o->max_requests_inflight)) < 0)
        return fail(ret_error, r, "cannot start the list threads");

    _cleanup_free_ char *cert = NULL, *key = NULL, *ca = NULL, *acert = NULL, *akey = NULL;
    _cleanup_free_ char *cp = kite_asprintf("%s/server.crt", pki), *kp = kite_asprintf("%s/server.key", pki);
    _cleanup_free_ char *cap = kite_asprintf("%s/ca.crt", pki), *acp = kite_asprintf("%s/admin.crt", pki);
    _cleanup_free_ char *akp = kite_asprintf("%s/admin.key", pki);
    struct { const char *path; char **out; } files[] = {{cp, &cert}, {kp, &key}, {cap, &ca}, {acp, &acert}, {akp, &akey}};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(files); i++)
        if ((r = kite_pki_read_file(files[i].path, files[i].out)) < 0)
            return fail(ret_error, r, "cannot read %s", files[i].path);
    struct kite_http_config hc = {
        .listen = o->listen, .cert_pem = cert, .key_pem = key, .client_ca_pem = ca,
        .token_file = o->token_file, .threads = o->threads, .max_connections = o->max_connections, .handler = dispatch, .admit = admit_head, .ud = s,
        /* Kubernetes clients send ~1 KiB of headers */
        .max_header_bytes = KITE_MAX_HEADER_BYTES,
        .disable_http2 = o->disable_http2,
    };
    if ((r = kite_http_start(&hc, &s->http)) < 0) {
        if (r == -EINVAL)
            return fail(ret_error, r, "cannot serve on \"%s\" (want HOST:PORT with a numeric address%s)", o->listen,
                        o->token_file ? ", and a readable --token-auth-file" : "");
        return fail(ret_error, r, "cannot serve on %s", o->listen);
    }
    s->url = listen_host_url(o->listen, kite_http_port(s->http));
    if ((r = kite_apiserver_pools_bootstrap_kubernetes(s, kite_http_port(s->http))) < 0)
        return fail(ret_error, r, "cannot create the kubernetes Service in %s", url);
    if (o->kube_dns_service && (r = kite_apiserver_pools_bootstrap_kube_dns(s)) < 0)
        return fail(ret_error, r, "cannot create the kube-dns Service in %s", url);
    if (!o->no_endpoint_reconciler) {
        _cleanup_free_ char *host = NULL;
        if (!o->advertise_address) { /* the --listen host, as kube-apiserver's --bind-address */
            const char *colon = strrchr(o->listen, ':');
            host = colon ? kite_strndup(o->listen, (size_t)(colon - o->listen)) : kite_strdup("");
        }
        if ((r = kite_apiserver_leases_start(s, o->advertise_address ? o->advertise_address : host, kite_http_port(s->http),
                                        o->endpoint_lease_ttl_s, &s->leases, ret_error)) < 0)
            return r;
    }

    /* admin.kubeconfig: the cluster admin (O=system:masters) */
    _cleanup_free_ char *kc = kite_pki_kubeconfig("kite", s->url, ca, acert, akey, NULL);
    _cleanup_free_ char *kcp = kite_asprintf("%s/admin.kubeconfig", o->data_dir);
    /* unchanged: a restart needs no free disk space */
    if ((r = kite_write_file_atomic(kcp, kc, strlen(kc), 0600, true)) < 0) return fail(ret_error, r, "cannot write %s", kcp);
    /* controller-manager.kubeconfig and scheduler.kubeconfig: the control plane's own identities
     * (system:kube-controller-manager, system:kube-scheduler) */
    static const char *const identities[] = {"controller-manager", "scheduler"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(identities); i++) {
        _cleanup_free_ char *ccp = kite_asprintf("%s/%s.crt", pki, identities[i]), *ckp = kite_asprintf("%s/%s.key", pki, identities[i]);
        _cleanup_free_ char *ccert = NULL, *ckey = NULL;
        if ((r = kite_pki_read_file(ccp, &ccert)) < 0 || (r = kite_pki_read_file(ckp, &ckey)) < 0)
            return fail(ret_error, r, "cannot read %s", ccert ? ckp : ccp);
        _cleanup_free_ char *ckc = kite_pki_kubeconfig("kite", s->url, ca, ccert, ckey, NULL);
        _cleanup_free_ char *ckcp = kite_asprintf("%s/%s.kubeconfig", o->data_dir, identities[i]);
        if ((r = kite_write_file_atomic(ckcp, ckc, strlen(ckc), 0600, true)) < 0) return fail(ret_error, r, "cannot write %s", ckcp);
    }
    if (pthread_create(&s->compactor, NULL, kite_apiserver_housekeeping_main, s) != 0)
        return fail(ret_error, -EAGAIN, "cannot start the housekeeping thread");
    pthread_setname_np(s->compactor, "housekeeping");
    s->compactor_started = true;
    if (o->metric_resolution_ns && o->metric_resolution_ns < KITE_NS_PER_SEC) {
        *ret_error = kite_strdup("--metric-resolution must be at least 1s");
        return -EINVAL;
    }
    if ((r = kite_apiserver_metrics_api_start(s, o->metric_resolution_ns)) < 0) return fail(ret_error, r, "cannot start the metrics scraper");
    return 0;
}

int kite_apiserver_start(const struct kite_apiserver_options *o, struct kite_apiserver **ret, char **ret_error) {
    struct kite_apiserver *s = kite_calloc(1, sizeof *s);
    s->lock_fd = -1;
    s->clock = o->clock ? o->clock : kite_clock_real();
    s->data_dir = kite_strdup(o->data_dir);
    s->compact_interval_s = o->compact_interval_s > 0 ? o->compact_interval_s : 300;
    s->watch_queue = o->watch_queue;
    s->watch_queue_bytes = o->watch_queue_bytes;
    s->event_ttl_s = o->event_ttl_s > 0 ? o->event_ttl_s : KITE_EVENT_TTL_DEFAULT_S;
    s->storage_log.interval_ns = KITE_NS_PER_SEC;
    pthread_mutex_init(&s->mu, NULL);
    kite_cond_init_mono(&s->cond); /* housekeeping's timed waits */
    kite_wgroup_init(&s->streams);
    char *err = NULL;
    int r = start(s, o, &err);
    if (r < 0) {
        kite_apiserver_stop(s);
        if (ret_error) *ret_error = err;
        else free(err);
        return r;
    }
    *ret = s;
    return 0;
}

uint16_t kite_apiserver_port(struct kite_apiserver *s) { return kite_http_port(s->http); }
const char *kite_apiserver_url(struct kite_apiserver *s) { return s->url; }

void kite_apiserver_stop(struct kite_apiserver *s) {
    if (!s) return;
    kite_apiserver_leases_stop(TAKE_PTR(s->leases)); /* the others drop this server from the endpoints at once */
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    if (s->compactor_started) pthread_join(s->compactor, NULL);
    kite_http_stop(s->http); /* waits for pending replies: retries still run meanwhile */
    /* their streams ended with the HTTP server's (tunnels closed, log fetches cancelled); what
     * is left of each thread (audit, freeing its request) uses the server */
    kite_wgroup_wait(&s->streams);
    kite_apiserver_metrics_api_stop(s);     /* its scrapes read the caches */
    kite_apiserver_bulk_stop(s);
    kite_apiserver_inflight_stop(s);
    kite_apiserver_retry_stop(s);
    kite_apiserver_rbac_stop(s);
    kite_node_graph_free(s->node_graph); /* its watcher, before the caches */
    kite_apiserver_nodestate_free(TAKE_PTR(s->nodestate)); /* its watchers too */
    kite_apiserver_expiry_free(s);
    kite_apiserver_pools_free(s->pools);
    kite_audit_close(s->audit); /* after the last request was answered */
    for (size_t i = 0; i < s->n_storages; i++) kite_wcache_free(s->storages[i].cache);
    free(s->storages);
    kite_store_close(s->store);
    kite_store_crypt_free(s->crypt);
    kite_apiserver_codec_free(s->codec);
    kite_apiserver_metrics_free(s->metrics);
    kite_psa_config_free(s->psa);
    kite_apiserver_satoken_free(s->satoken);
    if (s->lock_fd >= 0) close(s->lock_fd); /* releases the data dir */
    free(s->url);
    free(s->data_dir);
    free(s);
}
