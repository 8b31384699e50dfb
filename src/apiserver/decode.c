/* Request bodies: the media types a write accepts (JSON, YAML, and Kubernetes' protobuf, which
 * the typed clients of client-go send) and the decoding every write shares (400/415 answered
 * here, with Kubernetes' messages). All give the same json-c tree. */
#include "apiserver/internal.h"
#include "api/protobuf.h"
#include "api/yaml.h"
#include "json/parse.h"

#include <strings.h>

bool media_is(const char *ct, const char *want) {
    size_t n = strlen(want);
    return ct && strncasecmp(ct, want, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

json_object *parse_json_text(struct req *rq, const char *body, size_t len) {
    enum json_tokener_error e;
    size_t used;
    json_object *o = kite_json_parse(body, len, KITE_JSON_MAX_DEPTH, &e, &used);
    while (o && used < len && (body[used] == ' ' || body[used] == '\n' || body[used] == '\r' || body[used] == '\t')) used++;
    if (!o || e != json_tokener_success || used != len) {
        json_object_put(o);
        reply_error(rq, 400, "BadRequest", "the request body is not valid JSON: %s",
                    e == json_tokener_success ? "unexpected data after the JSON value"
                    : e == json_tokener_continue ? "unexpected end of JSON input"
                                                 : json_tokener_error_desc(e));
        return NULL;
    }
    if (kite_json_has_nul_escape(body, used)) {
        json_object_put(o);
        reply_error(rq, 400, "BadRequest", "the request body cannot be stored: a string holds the NUL character (\\u0000), which this server does not support");
        return NULL;
    }
    return o;
}

/* A protobuf body as an object of schema s (the request's kind, or DeleteOptions). */
static json_object *parse_protobuf(struct req *rq, const struct kite_schema *s, bool delete_options) {
    if (!s) {
        reply_error(rq, 415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json");
        return NULL;
    }
    if (rq->http->body_len == 0 && delete_options) return json_object_new_object();
    json_object *o = NULL;
    _cleanup_free_ char *err = NULL;
    int r = kite_pb_decode(s, rq->http->body, rq->http->body_len, KITE_JSON_MAX_DEPTH, &o, &err);
    if (r == -ENOTSUP) {
        reply_error(rq, 415, "UnsupportedMediaType", "the body of the request cannot be decoded: %s", err);
        return NULL;
    }
    if (r < 0) {
        reply_error(rq, 400, "BadRequest", "the request body is not valid protobuf: %s", err);
        return NULL;
    }
    return o;
}

/* A YAML body, read as sigs.k8s.io/yaml does before decoding it as JSON. */
static json_object *parse_yaml(struct req *rq) {
    json_object *o = NULL;
    _cleanup_free_ char *err = NULL;
    if (kite_yaml_parse(rq->http->body, rq->http->body_len, &o, &err) < 0) {
        reply_error(rq, 400, "BadRequest", "error converting YAML to JSON: yaml: %s", err ? err : "invalid YAML");
        return NULL;
    }
    return o;
}

json_object *parse_body(struct req *rq, bool delete_options) {
    const char *ct = kite_http_header(rq->http, "Content-Type");
    if (media_is(ct, KITE_PB_MEDIA_TYPE))
        return parse_protobuf(rq, delete_options ? &kite_schema_delete_options : rq->res->schema, delete_options);
    bool yaml = media_is(ct, "application/yaml");
    if (ct && !yaml && !media_is(ct, "application/json")) {
        reply_error(rq, 415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: " KITE_MEDIA_TYPES);
        return NULL;
    }
    if (rq->http->body_len == 0) {
        if (delete_options) return json_object_new_object();
        reply_error(rq, 400, "BadRequest", "the request body is empty");
        return NULL;
    }
    json_object *o = yaml ? parse_yaml(rq) : parse_json_text(rq, rq->http->body, rq->http->body_len);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        reply_error(rq, 400, "BadRequest", "the request body must be a JSON object");
        return NULL;
    }
    return o;
}
