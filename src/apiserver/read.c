/* Reads: get and list, served from the watch cache (continue pages at an older revision from
 * the store), as JSON or as a meta.k8s.io Table. */
#include "apiserver/internal.h"
#include "base/base64.h"
#include "api/selector.h"
#include "api/status.h"
#include "api/validation.h"
#include "base/clock.h"
#include "json/parse.h"
#include "json/scan.h"

#include <stdio.h>

/* Limits on list requests. */
#define KITE_LIST_MAX_LIMIT 100000
#define KITE_CONTINUE_MAX 4096

static void record_cache_free(void *p) { json_object_put(p); }

json_object *kite_apiserver_record_parse(const struct kite_record *rec) {
    json_object *o = kite_object_decode(rec->value, rec->len, rec->mod_rev);
    return o ? o : json_object_new_object();
}

json_object *kite_apiserver_record_object(struct kite_record *rec) {
    json_object *o = kite_record_cache(rec);
    return o ? o : kite_record_set_cache(rec, kite_apiserver_record_parse(rec), record_cache_free);
}

static void render_converted(struct req *rq, json_object *obj, struct kite_buf *out) {
    json_object *copy = NULL;
    json_object_deep_copy(obj, &copy, NULL);
    rq->res->from_storage(copy);
    size_t len;
    const char *s = json_object_to_json_string_length(copy, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    kite_buf_append(out, s, len);
    json_object_put(copy);
}

void kite_apiserver_render_record(struct req *rq, struct kite_record *rec, struct kite_buf *out) {
    const struct kite_subresource *sr = rq->sub ? kite_resource_subresource(rq->res, rq->sub) : NULL;
    if (sr && sr->view) { /* a workload's scale: the object seen as the subresource's kind */
        json_object *v = sr->view(kite_apiserver_record_object(rec));
        kite_buf_puts(out, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(v);
        return;
    }
    if (rq->res->from_storage) render_converted(rq, kite_apiserver_record_object(rec), out);
    else kite_object_render(rec->value, rec->len, rec->mod_rev, out);
}

/* ---- selectors ------------------------------------------------------------------------- */

int kite_apiserver_record_labels(const struct kite_record *rec, json_object **ret) {
    *ret = NULL;
    const char *m, *l;
    size_t mn, ln;
    int r = kite_json_member(rec->value, rec->len, "metadata", &m, &mn);
    if (r <= 0) return r < 0 ? -EINVAL : 0;
    if ((r = kite_json_member(m, mn, "labels", &l, &ln)) <= 0) return r < 0 ? -EINVAL : 0;
    enum json_tokener_error e;
    json_object *o = kite_json_parse_lenient(l, ln, JSON_TOKENER_DEFAULT_DEPTH, &e, NULL);
    if (!o && !(ln == 4 && memcmp(l, "null", 4) == 0)) return -EINVAL;
    *ret = o;
    return 0;
}

/* The record cut to what the selectors read (NULL: the scan cannot tell; parse it whole). */
static json_object *project_fields(const struct kite_resource *r, const struct kite_record *rec,
                                   const struct kite_label_selector *ls, const struct kite_field_selector *fs) {
    size_t nf = kite_field_selector_count(fs);
    if (nf > 16) return NULL;
    const char *paths[16 + 4];
    size_t n = 0;
    paths[n++] = "metadata.name";
    paths[n++] = "metadata.namespace";
    if (ls) paths[n++] = "metadata.labels";
    for (size_t i = 0; i < nf; i++) {
        const char *f = kite_field_selector_field(fs, i);
        if (!kite_resource_field_supported(r, f)) return NULL;
        if (strcmp(f, "source") == 0) return NULL; /* read from two members */
        if (strcmp(f, "spec.host") == 0) f = "spec.nodeName"; /* a Pod's alias */
        bool have = false;
        for (size_t k = 0; k < n && !have; k++) have = strcmp(paths[k], f) == 0;
        if (!have) paths[n++] = f;
    }
    paths[n] = NULL;
    return kite_json_project(rec->value, rec->len, paths);
}

bool kite_apiserver_record_matches(const struct kite_resource *r, struct kite_record *rec, const struct kite_label_selector *ls,
                    const struct kite_field_selector *fs) {
    if (!ls && !fs) return true;
    json_object *labels = NULL;
    /* a label selector alone, on an object no one parsed yet: its labels alone are parsed (a
     * selector watch of Nodes otherwise parsed every Node status report on the store's writer
     * thread and kept the tree with the record) */
    if (ls && !fs && !kite_record_cache(rec) && kite_apiserver_record_labels(rec, &labels) == 0) {
        bool ok = kite_label_selector_matches(ls, labels);
        json_object_put(labels);
        return ok;
    }
    /* a field selector on an object no one parsed yet: the members it reads are cut out and
     * parsed alone (every agent's pod watch selects spec.nodeName: judging each pod write by its
     * whole tree left that tree with every pod's latest record, tens of KB per pod) */
    json_object *cut = fs && !r->from_storage && !kite_record_cache(rec) ? project_fields(r, rec, ls, fs) : NULL;
    if (cut) {
        bool ok = kite_apiserver_object_matches(r, cut, ls, fs);
        json_object_put(cut);
        return ok;
    }
    return kite_apiserver_object_matches(r, kite_apiserver_record_object(rec), ls, fs);
}

bool kite_apiserver_parse_selectors(struct req *rq, struct kite_label_selector **ls, struct kite_field_selector **fs) {
    char *err = NULL;
    const char *l = kite_http_query(rq->http, "labelSelector");
    const char *f = kite_http_query(rq->http, "fieldSelector");
    *ls = NULL;
    *fs = NULL;
    if (l && kite_label_selector_parse(l, ls, &err) < 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "%s", err ? err : "invalid label selector");
        free(err);
        return false;
    }
    if (f && kite_field_selector_parse(f, fs, &err) < 0) {
        kite_label_selector_free(*ls);
        *ls = NULL;
        kite_apiserver_reply_error(rq, 400, "BadRequest", "%s", err ? err : "invalid field selector");
        free(err);
        return false;
    }
    for (size_t i = 0; *fs && i < kite_field_selector_count(*fs); i++) {
        const char *field = kite_field_selector_field(*fs, i);
        if (!kite_resource_field_supported(rq->res, field)) {
            kite_apiserver_reply_error(rq, 400, "BadRequest", "field label not supported: %s", field);
            kite_label_selector_free(*ls);
            kite_field_selector_free(*fs);
            *ls = NULL;
            *fs = NULL;
            return false;
        }
    }
    return true;
}

struct field_ctx {
    const struct kite_resource *res;
    json_object *obj;
    struct kite_buf buf;
};

static const char *get_field(const char *field, void *ud) {
    struct field_ctx *c = ud;
    /* events.k8s.io/v1 names its fields differently from the stored core/v1 shape */
    char mapped[256];
    if (c->res->from_storage && kite_startswith(field, "regarding.")) {
        snprintf(mapped, sizeof mapped, "involvedObject.%s", field + strlen("regarding."));
        field = mapped;
    } else if (c->res->from_storage && strcmp(field, "reportingController") == 0) {
        field = "reportingComponent";
    }
    return kite_resource_field(c->res, c->obj, field, &c->buf);
}

bool kite_apiserver_object_matches(const struct kite_resource *r, json_object *obj, const struct kite_label_selector *ls,
                    const struct kite_field_selector *fs) {
    if (ls && !kite_label_selector_matches(ls, kite_obj_get(kite_obj_meta(obj), "labels"))) return false;
    if (!fs) return true;
    struct field_ctx c = {.res = r, .obj = obj};
    bool ok = kite_field_selector_matches(fs, get_field, &c);
    kite_buf_release(&c.buf);
    return ok;
}

struct list_filter {
    const struct kite_resource *res;
    struct kite_label_selector *ls;
    struct kite_field_selector *fs;
};

static bool filter_record(struct kite_record *rec, void *ud) {
    struct list_filter *f = ud;
    return kite_apiserver_record_matches(f->res, rec, f->ls, f->fs);
}

/* ---- tables ---------------------------------------------------------------------------- */

static const struct kite_table_printer *printer_for(struct req *rq) {
    return rq->res->table ? rq->res->table : kite_table_printer_default();
}

/* A list's metadata members after its resourceVersion: continue, then remainingItemCount
 * (-1: unset), in ListMeta's order. */
static void list_meta_rest(struct kite_buf *out, const char *cont, int64_t remaining) {
    if (cont) {
        kite_buf_puts(out, ",\"continue\":");
        kite_buf_json_str(out, cont);
    }
    if (remaining >= 0) kite_buf_printf(out, ",\"remainingItemCount\":%lld", (long long)remaining);
}

void kite_apiserver_table_begin(struct req *rq, struct kite_buf *out, int64_t rev, const char *cont, int64_t remaining, bool columns) {
    kite_buf_puts(out, "{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{");
    if (rev) kite_buf_printf(out, "\"resourceVersion\":\"%lld\"", (long long)rev);
    list_meta_rest(out, cont, remaining);
    kite_buf_puts(out, "},\"columnDefinitions\":");
    if (columns) kite_table_columns_json(printer_for(rq), out);
    else kite_buf_puts(out, "[]");
    kite_buf_puts(out, ",\"rows\":[");
}

static json_object *deep_copy_meta(json_object *obj) {
    json_object *c = NULL, *meta = kite_obj_meta(obj);
    if (meta) json_object_deep_copy(meta, &c, NULL);
    return c;
}

void kite_apiserver_table_row(struct req *rq, struct kite_buf *out, struct kite_record *rec, bool first) {
    json_object *obj = kite_apiserver_record_object(rec);
    json_object *conv = NULL;
    if (rq->res->from_storage) {
        json_object_deep_copy(obj, &conv, NULL);
        rq->res->from_storage(conv);
        obj = conv;
    }
    json_object *cells = json_object_new_array();
    kite_table_cells(printer_for(rq), obj, kite_now_wall(rq->srv->clock) / KITE_NS_PER_SEC, cells);
    if (!first) kite_buf_putc(out, ',');
    kite_buf_puts(out, "{\"cells\":");
    kite_buf_puts(out, json_object_to_json_string_ext(cells, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    kite_buf_puts(out, ",\"object\":");
    if (rq->table_full_object) {
        kite_apiserver_render_record(rq, rec, out);
    } else {
        kite_buf_puts(out, "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":");
        /* serializing caches a buffer inside the object: never do it on the shared cached one */
        json_object *meta = conv ? kite_obj_meta(obj) : deep_copy_meta(obj);
        kite_buf_puts(out, meta ? json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "{}");
        if (!conv) json_object_put(meta);
        kite_buf_putc(out, '}');
    }
    kite_buf_putc(out, '}');
    json_object_put(cells);
    json_object_put(conv);
}

void kite_apiserver_table_end(struct kite_buf *out) { kite_buf_puts(out, "]}"); }

/* ---- metadata only --------------------------------------------------------------------- */

void kite_apiserver_render_partial(struct req *rq, struct kite_record *rec, struct kite_buf *out) {
    kite_buf_printf(out, "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"%s\",\"metadata\":",
                    kite_apiserver_negotiated_meta_api_version(rq));
    /* serializing caches a buffer inside the object: never do it on the shared cached one */
    json_object *meta = deep_copy_meta(kite_apiserver_record_object(rec));
    kite_buf_puts(out, meta ? json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "{}");
    json_object_put(meta);
    kite_buf_putc(out, '}');
}

/* ---- get ------------------------------------------------------------------------------- */

void kite_apiserver_handle_get(struct req *rq) {
    _cleanup_free_ char *key = kite_object_key(rq->res, rq->ns, rq->name);
    struct kite_record *rec = kite_wcache_get(kite_apiserver_storage_cache(rq->srv, rq->res), key);
    if (!rec) {
        char gr[128];
        kite_resource_gr(rq->res, gr);
        kite_apiserver_reply_error(rq, 404, "NotFound", "%s \"%s\" not found", gr, rq->name);
        return;
    }
    struct kite_buf out = {0};
    if (rq->table) {
        kite_apiserver_table_begin(rq, &out, rec->mod_rev, NULL, -1, true);
        kite_apiserver_table_row(rq, &out, rec, true);
        kite_apiserver_table_end(&out);
    } else if (rq->partial) {
        kite_apiserver_render_partial(rq, rec, &out);
    } else {
        kite_apiserver_render_record(rq, rec, &out);
    }
    kite_record_unref(rec);
    kite_apiserver_reply_json_buf(rq, 200, &out);
}

/* ---- list ------------------------------------------------------------------------------ */

/* Continue tokens: base64 of {"v":"meta.k8s.io/v1","rv":R,"start":"<key>"} as kube-apiserver. */
static char *encode_continue(int64_t rev, const char *last_key) {
    struct kite_buf j = {0};
    kite_buf_printf(&j, "{\"v\":\"meta.k8s.io/v1\",\"rv\":%lld,\"start\":", (long long)rev);
    kite_buf_json_str(&j, last_key);
    kite_buf_putc(&j, '}');
    char *tok = kite_base64_encode(j.p, j.len, true);
    kite_buf_release(&j);
    return tok;
}

static int decode_continue(const char *tok, int64_t *ret_rev, char **ret_key) {
    if (strlen(tok) > KITE_CONTINUE_MAX) return -EINVAL;
    _cleanup_free_ char *j = NULL;
    if (kite_base64_decode(tok, &j, NULL) < 0) return -EINVAL;
    json_object *o = json_tokener_parse(j);
    json_object *rv = kite_obj_get(o, "rv");
    const char *start = kite_obj_str(o, "start");
    int r = -EINVAL;
    if (rv && start && json_object_is_type(rv, json_type_int) && json_object_get_int64(rv) > 0) {
        *ret_rev = json_object_get_int64(rv);
        *ret_key = kite_strdup(start);
        r = 0;
    }
    json_object_put(o);
    return r;
}

/* remainingItemCount, as kube-apiserver's storage counts it: the keys after a truncated page,
 * only for lists without selectors (with one, how many would match is unknown). A page from
 * the cache counts in the same snapshot: the first `limit` records are taken, the rest only
 * counted. */
struct page_count {
    size_t limit, taken;
    int64_t rest;
};

static bool count_page(struct kite_record *rec, void *ud) {
    struct page_count *c = ud;
    if (c->taken < c->limit) {
        c->taken++;
        return true;
    }
    c->rest++;
    return false;
}

static bool count_rest(struct kite_record *rec, void *ud) {
    ((struct page_count *)ud)->rest++;
    return false;
}

/* A page from the store's history: the keys after it in the cache now, an estimate (the API
 * says clients must not rely on the count being exact). */
static int64_t remaining_after(struct kite_wcache *cache, const char *prefix, const char *last_key) {
    struct page_count c = {0};
    struct kite_record **none = NULL;
    size_t n = 0;
    kite_wcache_list(cache, prefix, last_key, 0, count_rest, &c, &none, &n, NULL, NULL);
    free(none);
    return c.rest;
}

/* ListOptions as apimachinery's ValidateListOptions checks them (with the WatchList feature
 * on, as in 1.32+), answered as kube-apiserver does: 422 Invalid about ListOptions.meta.k8s.io,
 * every error listed. sendInitialEvents given ("false" too) counts as set. */
bool kite_apiserver_list_options_ok(struct req *rq) {
    struct kite_http_req *h = rq->http;
    const char *rv = kite_http_query(h, "resourceVersion"), *match = kite_http_query(h, "resourceVersionMatch");
    const char *cont = kite_http_query(h, "continue"), *sie = kite_http_query(h, "sendInitialEvents");
    bool has_match = match && *match, has_cont = cont && *cont;
    struct kite_causes c = {0};
    if (!rq->is_watch) {
        if (has_match) {
            if (!rv || !*rv)
                kite_causes_add(&c, "FieldValueForbidden", "resourceVersionMatch",
                                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
            if (has_cont)
                kite_causes_add(&c, "FieldValueForbidden", "resourceVersionMatch",
                                "Forbidden: resourceVersionMatch is forbidden when continue is provided");
            if (strcmp(match, "Exact") != 0 && strcmp(match, "NotOlderThan") != 0)
                kite_causes_add(&c, "FieldValueNotSupported", "resourceVersionMatch",
                                "Unsupported value: \"%s\": supported values: \"Exact\", \"NotOlderThan\", \"\"", match);
            if (strcmp(match, "Exact") == 0 && kite_streq(rv, "0"))
                kite_causes_add(&c, "FieldValueForbidden", "resourceVersionMatch",
                                "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
        }
        if (sie)
            kite_causes_add(&c, "FieldValueForbidden", "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list");
    } else {
        if (sie && !kite_streq(match, "NotOlderThan"))
            kite_causes_add(&c, "FieldValueForbidden", "resourceVersionMatch",
                            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
        if (has_match) {
            if (!sie)
                kite_causes_add(&c, "FieldValueForbidden", "resourceVersionMatch",
                                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
            if (strcmp(match, "NotOlderThan") != 0)
                kite_causes_add(&c, "FieldValueNotSupported", "resourceVersionMatch",
                                "Unsupported value: \"%s\": supported values: \"NotOlderThan\"", match);
            if (has_cont)
                kite_causes_add(&c, "FieldValueForbidden", "resourceVersionMatch",
                                "Forbidden: resourceVersionMatch is forbidden when continue is provided");
        }
    }
    if (!c.n) return true;
    char *body = kite_status_invalid("meta.k8s.io", "ListOptions", "", &c);
    kite_causes_release(&c);
    kite_apiserver_reply(rq, 422, "application/json", body, strlen(body));
    return false;
}

/* Parses ?resourceVersion (and friends); replies itself on error. */
static bool parse_rv(struct req *rq, const char *s, int64_t *ret) {
    *ret = 0;
    if (!s || !*s) return true;
    if (kite_parse_int64(s, ret) < 0 || *ret < 0) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "invalid resource version \"%s\"", s);
        return false;
    }
    return true;
}

void kite_apiserver_handle_list(struct req *rq) {
    struct kite_http_req *h = rq->http;
    struct list_filter f = {.res = rq->res};
    struct kite_record **recs = NULL;
    size_t n = 0;
    bool more = false;
    int64_t rev = 0, want_rv = 0, limit = 0;
    _cleanup_free_ char *start = NULL, *prefix = kite_object_prefix(rq->res, rq->ns);
    struct kite_wcache *cache = kite_apiserver_storage_cache(rq->srv, rq->res);

    if (!kite_apiserver_list_options_ok(rq)) return;
    if (!parse_rv(rq, kite_http_query(h, "resourceVersion"), &want_rv)) return;
    const char *lim = kite_http_query(h, "limit");
    if (lim && *lim && (kite_parse_int64(lim, &limit) < 0 || limit < 0)) {
        kite_apiserver_reply_error(rq, 400, "BadRequest", "invalid limit \"%s\"", lim);
        return;
    }
    if (limit > KITE_LIST_MAX_LIMIT) limit = KITE_LIST_MAX_LIMIT;
    const char *match = kite_http_query(h, "resourceVersionMatch");
    const char *cont = kite_http_query(h, "continue");
    int64_t at_rev = 0;
    if (cont && *cont) {
        if (decode_continue(cont, &at_rev, &start) < 0) {
            kite_apiserver_reply_error(rq, 400, "BadRequest", "continue key is not valid: invalid continue token");
            return;
        }
    } else if (match && strcmp(match, "Exact") == 0) {
        at_rev = want_rv;
    }
    /* a revision not reached yet, asked for (or forged into a continue token): the store has
     * no such state to read; kube-apiserver answers 504 and the client retries */
    if ((!at_rev && want_rv > kite_wcache_rev(cache)) || at_rev > kite_store_rev(rq->srv->store)) {
        kite_apiserver_reply_too_large_rv(rq, at_rev ? at_rev : want_rv, at_rev ? kite_store_rev(rq->srv->store) : kite_wcache_rev(cache));
        return;
    }
    if (!kite_apiserver_parse_selectors(rq, &f.ls, &f.fs)) return;

    int r;
    int64_t remaining = -1;
    bool counted = limit && !f.ls && !f.fs;
    if (at_rev && at_rev != kite_wcache_rev(cache)) {
        /* a consistent page at an older revision: from the store's history (kube-apiserver
         * serves continue pages from etcd at the first page's revision the same way) */
        struct kite_record **all = NULL;
        size_t na = 0;
        r = kite_store_range(rq->srv->store, prefix, at_rev, start, (size_t)limit, &all, &na, &more);
        if (r == 0) {
            /* the next page starts after the last key read, matching or not: taken before the
             * records the selector drops are released */
            if (more && na) {
                free(start);
                start = kite_strdup(all[na - 1]->key);
            }
            recs = kite_calloc(na, sizeof *recs);
            for (size_t i = 0; i < na; i++) {
                if (filter_record(all[i], &f)) recs[n++] = all[i];
                else kite_record_unref(all[i]);
            }
            free(all);
            rev = at_rev;
            if (more && counted) remaining = remaining_after(cache, prefix, start);
        }
    } else if (counted) {
        struct page_count c = {.limit = (size_t)limit};
        r = kite_wcache_list(cache, prefix, start, 0, count_page, &c, &recs, &n, &rev, NULL);
        more = c.rest > 0;
        if (more) remaining = c.rest;
        if (more && n) {
            free(start);
            start = kite_strdup(recs[n - 1]->key);
        }
    } else {
        r = kite_wcache_list(cache, prefix, start, (size_t)limit, filter_record, &f, &recs, &n, &rev, &more);
        if (more && n) {
            free(start);
            start = kite_strdup(recs[n - 1]->key);
        }
    }
    kite_label_selector_free(f.ls);
    kite_field_selector_free(f.fs);
    if (r == -ENODATA) {
        kite_apiserver_reply_error(rq, 410, "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.");
        return;
    }
    if (r < 0) {
        kite_apiserver_reply_error(rq, 500, "InternalError", "list failed: %s", strerror(-r));
        return;
    }
    _cleanup_free_ char *next = more ? encode_continue(rev, start) : NULL;
    struct kite_buf out = {0};
    if (rq->table) {
        kite_apiserver_table_begin(rq, &out, rev, next, remaining, true);
        for (size_t i = 0; i < n; i++) kite_apiserver_table_row(rq, &out, recs[i], i == 0);
        kite_apiserver_table_end(&out);
    } else {
        kite_buf_printf(&out, "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%lld\"",
                        rq->partial ? "PartialObjectMetadataList" : rq->res->list_kind,
                        rq->partial ? kite_apiserver_negotiated_meta_api_version(rq) : kite_resource_api_version(rq->res), (long long)rev);
        list_meta_rest(&out, next, remaining);
        kite_buf_puts(&out, "},\"items\":[");
        for (size_t i = 0; i < n; i++) {
            if (i) kite_buf_putc(&out, ',');
            if (rq->partial) kite_apiserver_render_partial(rq, recs[i], &out);
            else kite_apiserver_render_record(rq, recs[i], &out);
        }
        kite_buf_puts(&out, "]}");
    }
    for (size_t i = 0; i < n; i++) kite_record_unref(recs[i]);
    free(recs);
    kite_apiserver_reply_json_buf(rq, 200, &out);
}
