/* Content negotiation as kube-apiserver's (k8s.io/apiserver endpoints/handlers/negotiation):
 * the Accept header's media ranges, most preferred first (q, then the more specific type, then
 * the order given), each checked against what the endpoint serves: JSON, YAML (not for watch
 * streams, which have no YAML framing) and Kubernetes' protobuf, optionally transformed with
 * as=Table (JSON and YAML only) or as=PartialObjectMetadata(List) in meta.k8s.io v1 or v1beta1.
 * The first range served wins; none is 406 naming exactly the media types served. Answers are
 * built as JSON and re-encoded here once chosen. */
#include "apiserver/internal.h"
#include "api/protobuf.h"
#include "api/yaml.h"
#include "json/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* Media ranges of one Accept header looked at; later ones are ignored (clients send 1-4). */
#define KITE_ACCEPT_MAX_RANGES 32

enum format { FMT_NONE, FMT_JSON, FMT_YAML, FMT_PB };
enum as_kind { AS_NONE, AS_TABLE, AS_PARTIAL, AS_PARTIAL_LIST };

struct range {
    char type[64], sub[96], as[48], g[48], v[16], stream[16];
    double q;
    size_t pos;
};

static void copy_trimmed(char *dst, size_t size, const char *s, size_t n) {
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    snprintf(dst, size, "%.*s", (int)n, s);
}

/* One media range "type/sub;k=v;..." of n bytes. */
static void parse_range(const char *s, size_t n, size_t pos, struct range *r) {
    *r = (struct range){.q = 1, .pos = pos};
    size_t tn = 0;
    while (tn < n && s[tn] != ';') tn++;
    char full[160];
    copy_trimmed(full, sizeof full, s, tn);
    char *slash = strchr(full, '/');
    if (slash) {
        *slash = 0;
        snprintf(r->sub, sizeof r->sub, "%.*s", (int)sizeof r->sub - 1, slash + 1);
    } else if (strcmp(full, "*") == 0) {
        snprintf(r->sub, sizeof r->sub, "*");
    }
    snprintf(r->type, sizeof r->type, "%.*s", (int)sizeof r->type - 1, full);
    for (size_t i = tn; i < n;) {
        size_t j = i + 1;
        while (j < n && s[j] != ';') j++;
        const char *p = s + i + 1, *eq = memchr(p, '=', (size_t)(s + j - p));
        if (eq) {
            char key[16], val[64];
            copy_trimmed(key, sizeof key, p, (size_t)(eq - p));
            copy_trimmed(val, sizeof val, eq + 1, (size_t)(s + j - eq - 1));
            struct { const char *name; char *dst; size_t size; } params[] = {
                {"as", r->as, sizeof r->as}, {"g", r->g, sizeof r->g}, {"v", r->v, sizeof r->v},
                {"stream", r->stream, sizeof r->stream}};
            if (strcasecmp(key, "q") == 0) r->q = strtod(val, NULL);
            for (size_t k = 0; k < KITE_ARRAY_SIZE(params); k++)
                if (strcmp(key, params[k].name) == 0) snprintf(params[k].dst, params[k].size, "%.*s", (int)params[k].size - 1, val);
        }
        i = j;
    }
}

static int specificity(const struct range *r) { return (strcmp(r->type, "*") != 0) + (strcmp(r->sub, "*") != 0); }

static int range_cmp(const void *a, const void *b) {
    const struct range *x = a, *y = b;
    if (x->q != y->q) return x->q > y->q ? -1 : 1;
    if (specificity(x) != specificity(y)) return specificity(y) - specificity(x);
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static enum format format_of(const struct range *r, bool watch) {
    if (strcmp(r->type, "*") == 0) return strcmp(r->sub, "*") == 0 ? FMT_JSON : FMT_NONE;
    if (strcasecmp(r->type, "application") != 0) return FMT_NONE;
    if (strcmp(r->sub, "*") == 0 || strcasecmp(r->sub, "json") == 0) return FMT_JSON;
    if (strcasecmp(r->sub, "yaml") == 0) return watch ? FMT_NONE : FMT_YAML;
    if (strcasecmp(r->sub, "vnd.kubernetes.protobuf") == 0) return FMT_PB;
    return FMT_NONE;
}

/* The transformation a range asks for, or -1 when the server does not serve it. */
static int as_of(const struct range *r, enum format f) {
    static const struct { const char *name; enum as_kind as; bool pb; } kinds[] = {
        {"Table", AS_TABLE, false}, /* tables are JSON or YAML only, as upstream */
        {"PartialObjectMetadata", AS_PARTIAL, true},
        {"PartialObjectMetadataList", AS_PARTIAL_LIST, true},
    };
    if (!*r->as) return AS_NONE;
    if (strcmp(r->g, "meta.k8s.io") != 0 || (strcmp(r->v, "v1") != 0 && strcmp(r->v, "v1beta1") != 0)) return -1;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++)
        if (strcmp(r->as, kinds[i].name) == 0) return f == FMT_PB && !kinds[i].pb ? -1 : (int)kinds[i].as;
    return -1;
}

/* Go's %T of the internal object kube-apiserver transforms, for its 406 messages:
 * "*core.Node", "*coordination.LeaseList". */
static void internal_type(const struct kite_resource *r, bool list, char out[160]) {
    size_t gl = strcspn(r->group, ".");
    if (!*r->group) snprintf(out, 160, "*core.%s", list ? r->list_kind : r->kind);
    else snprintf(out, 160, "*%.*s.%s", (int)gl, r->group, list ? r->list_kind : r->kind);
}

bool kite_apiserver_negotiate(struct req *rq) {
    const char *acc = kite_http_header(rq->http, "Accept");
    if (!acc || !*acc) return true;
    bool watch = rq->is_watch;
    struct range ranges[KITE_ACCEPT_MAX_RANGES];
    size_t n = 0;
    for (const char *p = acc; *p && n < KITE_ACCEPT_MAX_RANGES;) {
        size_t len = strcspn(p, ",");
        if (len) parse_range(p, len, n, &ranges[n]), n++;
        p += len;
        if (*p == ',') p++;
    }
    qsort(ranges, n, sizeof *ranges, range_cmp);
    for (size_t i = 0; i < n; i++) {
        const struct range *r = &ranges[i];
        enum format f = format_of(r, watch);
        int as = f == FMT_NONE || r->q <= 0 ? -1 : as_of(r, f);
        if (as < 0 || (*r->stream && strcmp(r->stream, "watch") != 0)) continue;
        rq->protobuf = f == FMT_PB;
        rq->yaml = f == FMT_YAML;
        rq->table = as == AS_TABLE;
        rq->partial = as == AS_PARTIAL || as == AS_PARTIAL_LIST;
        rq->as_version = as == AS_NONE ? NULL : strcmp(r->v, "v1") == 0 ? "v1" : "v1beta1";
        /* a list is transformed as a whole, a get's object and a watch's events one by one */
        bool list = strcmp(rq->verb, "list") == 0;
        if ((as == AS_PARTIAL && list) || (as == AS_PARTIAL_LIST && strcmp(rq->verb, "get") == 0)) {
            char t[160];
            internal_type(rq->res, list, t);
            rq->protobuf = rq->yaml = false;
            kite_apiserver_reply_error(rq, 406, "NotAcceptable", "you requested %s, but the requested object is %s (%s)", r->as,
                        list ? "a list" : "not a list", t);
            return false;
        }
        return true;
    }
    kite_apiserver_reply_error(rq, 406, "NotAcceptable", "only the following media types are accepted: " KITE_MEDIA_TYPES);
    return false;
}

const char *kite_apiserver_negotiated_meta_api_version(const struct req *rq) {
    return rq->as_version && strcmp(rq->as_version, "v1beta1") == 0 ? "meta.k8s.io/v1beta1" : "meta.k8s.io/v1";
}

/* A JSON answer as protobuf; JSON stays when protobuf cannot carry the object through kite's
 * schemas (an unknown field kept from a JSON write). */
static void to_protobuf(json_object *o, const char **content_type, char **body, size_t *len) {
    struct kite_buf b = {0};
    if (kite_pb_encode_any(o, &b) == 0) {
        free(*body);
        *body = kite_buf_detach(&b, len);
        *content_type = KITE_PB_MEDIA_TYPE;
    }
    kite_buf_release(&b);
}

static void to_yaml(json_object *o, const char **content_type, char **body, size_t *len) {
    struct kite_buf b = {0};
    if (kite_yaml_emit(o, &b) == 0) {
        free(*body);
        *body = kite_buf_detach(&b, len);
        *content_type = "application/yaml";
    }
    kite_buf_release(&b);
}

void kite_apiserver_negotiate_encode(struct req *rq, const char **content_type, char **body, size_t *len) {
    if ((!rq->protobuf || rq->table) && !rq->yaml) return;
    if (strcmp(*content_type, "application/json") != 0) return;
    enum json_tokener_error e;
    size_t used;
    json_object *o = kite_json_parse(*body, *len, KITE_JSON_MAX_DEPTH, &e, &used);
    if (o && rq->yaml) to_yaml(o, content_type, body, len);
    else if (o) to_protobuf(o, content_type, body, len);
    json_object_put(o);
}
