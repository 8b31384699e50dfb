/* Request bodies: the media types a write accepts (JSON, YAML, and Kubernetes' protobuf, which
 * the typed clients of client-go send) and the decoding every write shares (400/415 answered
 * here, with Kubernetes' messages). All give the same json-c tree. */
#include "apiserver/internal.h"
#include "api/protobuf.h"
#include "api/yaml.h"
#include "json/parse.h"

#include <stdio.h>
#include <strings.h>

bool kite_apiserver_media_is(const char *ct, const char *want) {
    size_t n = strlen(want);
    return ct && strncasecmp(ct, want, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

json_object *kite_apiserver_parse_json_text(struct req *rq, const char *body, size_t len) {
    enum json_tokener_error e;
    size_t used;
    bool unique = false;
    json_object *o = kite_json_parse_keys(body, len, KITE_JSON_MAX_DEPTH, &e, &used, &unique);
    while (o && used < len && (body[used] == ' ' || body[used] == '\n' || body[used] == '\r' || body[used] == '\t')) used++;
    if (!o || e != json_tokener_success || used != len) {
        json_object_put(o);
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the request body is not valid JSON: %s",
                    e == json_tokener_success ? "unexpected data after the JSON value"
                    : e == json_tokener_continue ? "unexpected end of JSON input"
                                                 : json_tokener_error_desc(e));
        return NULL;
    }
    if (kite_json_has_nul_escape(body, used)) {
        json_object_put(o);
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the request body cannot be stored: a string holds the NUL character (\\u0000), which this server does not support");
        return NULL;
    }
    /* the body itself (not some other text): fieldValidation's scan for repeated keys of it can
     * find none when its parse saw none (a key repeated in the text is repeated once unescaped) */
    if (body == rq->http->body && len == rq->http->body_len) rq->body_unique_keys = unique;
    return o;
}

/* A protobuf body as an object of schema s (the request's kind, or DeleteOptions). */
static json_object *parse_protobuf(struct req *rq, const struct kite_schema *s, bool kite_apiserver_delete_options) {
    if (!s) {
        kite_apiserver_reply_error(rq, 415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json");
        return NULL;
    }
    if (rq->http->body_len == 0 && kite_apiserver_delete_options) return json_object_new_object();
    json_object *o = NULL;
    _cleanup_free_ char *err = NULL;
    int r = kite_pb_decode(s, rq->http->body, rq->http->body_len, KITE_JSON_MAX_DEPTH, &o, &err);
    if (r == -ENOTSUP) {
        kite_apiserver_reply_error(rq, 415, "UnsupportedMediaType", "the body of the request cannot be decoded: %s", err);
        return NULL;
    }
    if (r < 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the request body is not valid protobuf: %s", err);
        return NULL;
    }
    return o;
}

/* A YAML body, read as sigs.k8s.io/yaml does before decoding it as JSON; its repeated keys
 * are kept for fieldValidation. Past the YAML budgets (yaml.h), and for a string holding NUL
 * (refused as in JSON bodies), 400. */
static json_object *parse_yaml(struct req *rq) {
    json_object *o = NULL;
    _cleanup_free_ char *err = NULL;
    struct kite_yaml_info info;
    if (kite_yaml_parse_ex(rq->http->body, rq->http->body_len, &o, &err, &info) < 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "error converting YAML to JSON: yaml: %s", err ? err : "invalid YAML");
        return NULL;
    }
    free(rq->yaml_duplicates);
    rq->yaml_duplicates = info.duplicates;
    return o;
}

json_object *kite_apiserver_parse_body(struct req *rq, bool kite_apiserver_delete_options) {
    const char *ct = kite_http_header(rq->http, "Content-Type");
    if (kite_apiserver_media_is(ct, KITE_PB_MEDIA_TYPE)) {
        const struct kite_subresource *sr = rq->sub ? kite_resource_subresource(rq->res, rq->sub) : NULL;
        const struct kite_schema *s = sr && sr->body_schema ? sr->body_schema : rq->res->schema;
        return parse_protobuf(rq, kite_apiserver_delete_options ? &kite_schema_delete_options : s, kite_apiserver_delete_options);
    }
    bool yaml = kite_apiserver_media_is(ct, "application/yaml");
    if (ct && !yaml && !kite_apiserver_media_is(ct, "application/json")) {
        kite_apiserver_reply_error(rq, 415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: " KITE_MEDIA_TYPES);
        return NULL;
    }
    if (rq->http->body_len == 0) {
        if (kite_apiserver_delete_options) return json_object_new_object();
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the request body is empty");
        return NULL;
    }
    json_object *o = yaml ? parse_yaml(rq) : kite_apiserver_parse_json_text(rq, rq->http->body, rq->http->body_len);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the request body must be a JSON object");
        return NULL;
    }
    return o;
}

/* A server-side apply's configuration: YAML (JSON being YAML too), an object whose unknown
 * fields go as fieldValidation says, without managedFields (upstream refuses them). */
json_object *kite_apiserver_parse_apply_body(struct req *rq) {
    if (rq->http->body_len == 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the request body is empty");
        return NULL;
    }
    json_object *o = parse_yaml(rq);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        kite_apiserver_reply_error(rq, 400, "BadRequest", "the request body must be a JSON object");
        return NULL;
    }
    if (!o) return NULL;
    json_object *mf = kite_obj_get(kite_obj_meta(o), "managedFields");
    if (mf) {
        json_object_put(o);
        kite_apiserver_reply_error(rq, 400, "BadRequest", "metadata.managedFields must be nil");
        return NULL;
    }
    if (!kite_apiserver_check_field_validation(rq, o)) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* ---- fieldValidation --------------------------------------------------------------------- */

enum field_validation { FV_IGNORE, FV_WARN, FV_STRICT };

struct unknown_report {
    struct req *rq;
    bool strict;
    size_t n;
    struct kite_buf msg; /* Strict: the error's list */
};

/* One strict-decoding error: a part of the Strict 400's message, or a Warning header (RFC 7234
 * warn-text: a quoted string, its quotes and backslashes escaped; line breaks become spaces, as
 * Go's HTTP server writes them). */
static void report_text(struct unknown_report *u, const char *text) {
    if (u->n++ >= KITE_MAX_FIELD_WARNINGS) return;
    if (u->strict) {
        kite_buf_printf(&u->msg, "%s%s", u->msg.len ? ", " : "", text);
        return;
    }
    struct kite_buf h = {0};
    kite_buf_puts(&h, "299 - \"");
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\') kite_buf_putc(&h, '\\');
        kite_buf_putc(&h, (char)((unsigned char)*p < 0x20 ? ' ' : *p));
    }
    kite_buf_putc(&h, '"');
    kite_http_add_header(u->rq->http, "Warning", h.p);
    kite_buf_release(&h);
}

static void report(struct unknown_report *u, const char *what, const char *path) {
    _cleanup_free_ char *t = kite_asprintf("%s field \"%s\"", what, path);
    report_text(u, t);
}

static void unknown_found(void *ud, const char *path) { report(ud, "unknown", path); }

/* ---- duplicate fields: json-c keeps the last of them, as Go's decoder; strict decoding names
 * them. A scan of the body's text (valid JSON: parsed before), with the path of each key. */

struct key { const char *p; size_t n; };
struct frame { bool object; size_t path_len, index, first_key; };

static int key_cmp(const void *a, const void *b) {
    const struct key *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* The keys of the object that ends, sorted: equal neighbours are duplicates. */
static void object_end(struct unknown_report *u, struct kite_buf *path, const struct frame *f, struct key *keys,
                       size_t n_keys) {
    size_t n = n_keys - f->first_key;
    if (n < 2) return;
    struct key *k = keys + f->first_key;
    qsort(k, n, sizeof *k, key_cmp);
    for (size_t i = 1; i < n; i++) {
        if (key_cmp(&k[i - 1], &k[i]) != 0 || (i > 1 && key_cmp(&k[i - 2], &k[i]) == 0)) continue;
        path->len = f->path_len;
        kite_buf_printf(path, "%s%.*s", f->path_len ? "." : "", (int)k[i].n, k[i].p);
        report(u, "duplicate", path->p);
    }
}

static void duplicate_fields(struct unknown_report *u, const char *s, size_t len) {
    struct frame stack[KITE_JSON_MAX_DEPTH + 1];
    size_t depth = 0, n_keys = 0, cap = 0;
    struct key *keys = NULL;
    struct kite_buf path = {0};
    kite_buf_puts(&path, "");
    bool want_key = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        struct frame *top = depth ? &stack[depth - 1] : NULL;
        if (c == '{' || c == '[') {
            if (depth == KITE_ARRAY_SIZE(stack)) break; /* deeper than the parser takes */
            stack[depth++] = (struct frame){.object = c == '{', .path_len = path.len, .first_key = n_keys};
            want_key = c == '{';
            if (c == '[') kite_buf_puts(&path, "[0]");
        } else if (c == '}' || c == ']') {
            if (!top) break;
            if (top->object) object_end(u, &path, top, keys, n_keys);
            n_keys = top->first_key;
            path.len = top->path_len;
            path.p[path.len] = 0;
            depth--;
            want_key = false;
        } else if (c == ',' && top) {
            want_key = top->object;
            if (!top->object) {
                path.len = top->path_len;
                char num[24];
                int k = snprintf(num, sizeof num, "[%zu]", ++top->index);
                kite_buf_append(&path, num, (size_t)k);
            }
        } else if (c == '"') {
            size_t start = ++i;
            while (i < len && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
            if (want_key && top && top->object) {
                if (n_keys == cap) keys = kite_realloc(keys, (cap = cap ? cap * 2 : 16) * sizeof *keys);
                keys[n_keys++] = (struct key){s + start, i - start};
                /* every key moves the path: appended, not printed (this runs on every write) */
                path.len = top->path_len;
                if (top->path_len) kite_buf_putc(&path, '.');
                kite_buf_append(&path, s + start, i - start);
                want_key = false;
            }
        }
    }
    free(keys);
    kite_buf_release(&path);
}

bool kite_apiserver_check_field_validation(struct req *rq, json_object *obj) {
    const char *v = kite_http_query(rq->http, "fieldValidation");
    enum field_validation fv;
    if (!v || !*v || strcmp(v, "Warn") == 0) fv = FV_WARN;
    else if (strcmp(v, "Ignore") == 0) fv = FV_IGNORE;
    else if (strcmp(v, "Strict") == 0) fv = FV_STRICT;
    else {
        const char *opts = kite_streq(rq->verb, "create") ? "CreateOptions" : kite_streq(rq->verb, "update") ? "UpdateOptions" : "PatchOptions";
        kite_apiserver_reply_error(rq, 422, "Invalid", "%s.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"%s\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                    opts, v);
        return false;
    }
    /* Go's decoder keeps nothing of a field its struct lacks, whatever the directive */
    struct unknown_report u = {.rq = rq, .strict = fv == FV_STRICT};
    bool report = fv == FV_STRICT || (fv == FV_WARN && !rq->field_warnings_sent);
    /* a YAML body's repeated keys first, as upstream's decoder reports them before the rest */
    if (report && rq->yaml_duplicates) report_text(&u, rq->yaml_duplicates);
    kite_schema_unknown_fields(rq->res->schema, obj, true, report ? unknown_found : NULL, &u);
    /* the body as sent (a patch: the patch), when it is JSON an object's keys may repeat in */
    const char *ct = kite_http_header(rq->http, "Content-Type");
    bool json_text = !ct || kite_apiserver_media_is(ct, "application/json") || kite_apiserver_media_is(ct, "application/merge-patch+json") ||
                     kite_apiserver_media_is(ct, "application/strategic-merge-patch+json");
    if (report && json_text && rq->http->body_len && !rq->body_unique_keys) duplicate_fields(&u, rq->http->body, rq->http->body_len);
    if (fv == FV_WARN) rq->field_warnings_sent = true;
    if (fv == FV_STRICT && u.n) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "%s in version \"%s\" cannot be handled as a %s: strict decoding error: %s%s",
                    rq->res->kind, rq->res->version, rq->res->kind, u.msg.p, u.n > KITE_MAX_FIELD_WARNINGS ? ", ..." : "");
        kite_buf_release(&u.msg);
        return false;
    }
    kite_buf_release(&u.msg);
    return true;
}
