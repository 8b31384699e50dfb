/* Request bodies: the media types a write accepts and the JSON decoding every write shares
 * (400/415 answered here, with Kubernetes' messages). */
#include "apiserver/internal.h"
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

/* ---- protobuf DeleteOptions --------------------------------------------------------------
 * kubectl sends DELETE bodies as protobuf: "k8s\0" and a runtime.Unknown {1: typeMeta,
 * 2: raw, ...} whose raw is a DeleteOptions {1: gracePeriodSeconds (varint), 2: preconditions
 * {1: uid, 2: resourceVersion}, 3: orphanDependents, 4: propagationPolicy, 5: dryRun}. Only the
 * fields kite acts on are read; the others are skipped by their wire type. */

struct pb { const unsigned char *p, *end; };

static bool pb_varint(struct pb *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        unsigned char c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* The next field: its number, wire type, and for wire type 2 its bytes (else its varint). */
static bool pb_field(struct pb *b, uint64_t *num, int *wt, struct pb *sub, uint64_t *v) {
    uint64_t key;
    if (!pb_varint(b, &key)) return false;
    *num = key >> 3;
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return pb_varint(b, v);
    case 1: if (b->end - b->p < 8) return false; b->p += 8; return true;
    case 5: if (b->end - b->p < 4) return false; b->p += 4; return true;
    case 2:
        if (!pb_varint(b, v) || *v > (uint64_t)(b->end - b->p)) return false;
        *sub = (struct pb){b->p, b->p + *v};
        b->p += *v;
        return true;
    default: return false;
    }
}

static json_object *pb_string(struct pb s) { return json_object_new_string_len((const char *)s.p, (int)(s.end - s.p)); }

/* The DeleteOptions in a protobuf body as the JSON one, or NULL when it does not decode. */
static json_object *pb_delete_options(const char *body, size_t len) {
    json_object *o = json_object_new_object();
    if (len == 0) return o;
    struct pb b = {(const unsigned char *)body, (const unsigned char *)body + len}, sub = {0}, raw = {0};
    if (len < 4 || memcmp(body, "k8s", 4) != 0) goto bad;
    b.p += 4;
    uint64_t num, v;
    int wt;
    bool have_raw = false;
    while (b.p < b.end) {
        if (!pb_field(&b, &num, &wt, &sub, &v)) goto bad;
        if (num == 2 && wt == 2) raw = sub, have_raw = true;
    }
    while (have_raw && raw.p < raw.end) {
        if (!pb_field(&raw, &num, &wt, &sub, &v)) goto bad;
        if (num == 1 && wt == 0) kite_obj_set(o, "gracePeriodSeconds", json_object_new_int64((int64_t)v));
        if (num == 2 && wt == 2) {
            json_object *pre = kite_obj_ensure(o, "preconditions");
            struct pb f;
            while (sub.p < sub.end) {
                if (!pb_field(&sub, &num, &wt, &f, &v)) goto bad;
                if (wt == 2 && (num == 1 || num == 2)) kite_obj_set(pre, num == 1 ? "uid" : "resourceVersion", pb_string(f));
            }
        }
    }
    return o;
bad:
    json_object_put(o);
    return NULL;
}

json_object *parse_body(struct req *rq, bool allow_protobuf) {
    const char *ct = kite_http_header(rq->http, "Content-Type");
    if (allow_protobuf && media_is(ct, "application/vnd.kubernetes.protobuf")) {
        json_object *o = pb_delete_options(rq->http->body, rq->http->body_len);
        if (!o) reply_error(rq, 400, "BadRequest", "the request body is not a valid protobuf DeleteOptions");
        return o;
    }
    if (ct && !media_is(ct, "application/json")) {
        reply_error(rq, 415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json");
        return NULL;
    }
    if (rq->http->body_len == 0) {
        if (allow_protobuf) return json_object_new_object();
        reply_error(rq, 400, "BadRequest", "the request body is empty");
        return NULL;
    }
    json_object *o = parse_json_text(rq, rq->http->body, rq->http->body_len);
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        reply_error(rq, 400, "BadRequest", "the request body must be a JSON object");
        return NULL;
    }
    return o;
}
