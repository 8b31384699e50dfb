/* The store's value codec (store.h struct kite_store_codec): kube-apiserver's protobuf envelope
 * in etcd (--storage-media-type).
 *
 * kube-apiserver stores an object as JSON (--storage-media-type=application/json) or as "k8s\0"
 * and a runtime.Unknown {1: TypeMeta {1 apiVersion, 2 kind}, 2: raw (the object's message),
 * 3: contentEncoding, 4: contentType}, contentEncoding and contentType empty (its default,
 * application/vnd.kubernetes.protobuf) — the same bytes as a protobuf API answer (protobuf.h).
 * kite reads both, and writes the envelope when asked to, for the kinds whose schema is complete:
 *
 * - A kind's schema is complete when every object in its tree lists all of its Go struct's
 *   fields (none KITE_SCHEMA_PARTIAL but for an embedded struct's parent, which protobuf sees
 *   whole). A partial schema would drop, unseen, the fields it does not know when decoding
 *   kube-apiserver's bytes: such a kind's envelopes are left out, and it is written as JSON.
 * - Decoding: the envelope's apiVersion and kind must be those of a row stored under the key's
 *   folder (a Secret's envelope under configmaps/ is left out), then kite_pb_decode; the object
 *   comes back as JSON text in kite's stored form (kite_object_encode: kind and apiVersion set,
 *   the resourceVersion placeholder in place), so reads serve it as they serve kite's own JSON.
 * - Encoding: kite_pb_encode, which refuses an object holding what the schema cannot carry (a
 *   field it does not list or leaves untyped), then kite_pb_decode of the result, which must give
 *   the same object back (encode_checked): an object that fails either is stored as JSON, as are
 *   objects of kinds without a registry row (the allocators' RangeAllocations) or an incomplete
 *   schema. Each protobuf write so costs a parse, an encode and a decode more than a JSON one.
 * - An update that changes nothing is not written (write.c compares the stored bytes): an object
 *   read from an envelope has its fields in protobuf's order, not in the order of the JSON a
 *   write builds, so two objects whose bytes differ are also compared by their envelopes, as
 *   kube-apiserver compares the bytes it would store (kite_apiserver_codec_same_stored). */
#include "apiserver/internal.h"
#include "api/protobuf.h"
#include "json/parse.h"

struct kite_apiserver_codec {
    struct kite_store_codec codec;
    size_t rows;
    bool *complete; /* per kite_resources row */
};

#define COMPLETE_DEPTH 64

static bool schema_complete(const struct kite_schema *s, int depth) {
    if (!s) return false;
    if (depth > COMPLETE_DEPTH) return true; /* a recursive type: its levels were looked at above */
    switch (s->type) {
    case KITE_SCHEMA_MAP:
    case KITE_SCHEMA_LIST:
        return schema_complete(s->elem, depth + 1);
    case KITE_SCHEMA_OBJECT: {
        bool inline_field = false;
        for (const struct kite_schema_field *f = s->fields; f && f->name; f++) {
            if (f->flags & KITE_SCHEMA_INLINE) inline_field = true;
            if (f->number && !schema_complete(f->schema, depth + 1)) return false;
        }
        return !(s->flags & KITE_SCHEMA_PARTIAL) || inline_field;
    }
    default:
        return true;
    }
}

/* The row whose objects are stored under key's folder (the first stored row of that folder: where
 * several group versions share one, the storage-shaped one: not a row converted to_storage), if its
 * objects are apiVersion av and kind and its schema is complete; -1 otherwise. */
static ssize_t row_for(const struct kite_apiserver_codec *c, const char *key, const char *av, size_t av_len,
                       const char *kind, size_t kind_len) {
    if (!kite_startswith(key, "/registry/")) return -1;
    const char *folder = key + strlen("/registry/");
    for (size_t i = 0; i < c->rows; i++) {
        const struct kite_resource *r = kite_resources[i];
        const char *name = r->storage ? r->storage : r->plural;
        size_t nl = strlen(name);
        if (!kite_resource_stored(r) || r->to_storage || strncmp(folder, name, nl) != 0 || folder[nl] != '/') continue;
        const char *rav = kite_resource_api_version(r);
        bool same = strlen(rav) == av_len && memcmp(rav, av, av_len) == 0 && strlen(r->kind) == kind_len &&
                    memcmp(r->kind, kind, kind_len) == 0;
        return same && c->complete[i] ? (ssize_t)i : -1;
    }
    return -1;
}

/* ---- the envelope's TypeMeta, read before the object's schema is known ---- */

static bool varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        unsigned char b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* The next field of [*p, end): its number, wire type, and for wire type 2 its bytes. */
static int next_field(const unsigned char **p, const unsigned char *end, unsigned *field, unsigned *wire,
                      const unsigned char **data, size_t *len) {
    if (*p == end) return 0;
    uint64_t tag, v;
    if (!varint(p, end, &tag)) return -EINVAL;
    *field = (unsigned)(tag >> 3);
    *wire = (unsigned)(tag & 7);
    switch (*wire) {
    case 0: return varint(p, end, &v) ? 1 : -EINVAL;
    case 1: if (end - *p < 8) return -EINVAL; *p += 8; return 1;
    case 5: if (end - *p < 4) return -EINVAL; *p += 4; return 1;
    case 2:
        if (!varint(p, end, &v) || v > (uint64_t)(end - *p)) return -EINVAL;
        *data = *p;
        *len = (size_t)v;
        *p += v;
        return 1;
    default: return -EINVAL;
    }
}

/* apiVersion and kind of an envelope (pointers into it). */
static int type_meta(const void *value, size_t len, const char **av, size_t *av_len, const char **kind,
                     size_t *kind_len) {
    const unsigned char *p = (const unsigned char *)value + KITE_PB_MAGIC_LEN, *end = (const unsigned char *)value + len;
    unsigned field, wire;
    const unsigned char *data = NULL;
    size_t dl = 0;
    int r;
    *av = *kind = "";
    *av_len = *kind_len = 0;
    while ((r = next_field(&p, end, &field, &wire, &data, &dl)) > 0) {
        if (field != 1 || wire != 2) continue;
        const unsigned char *q = data, *qend = data + dl, *d = NULL;
        size_t l = 0;
        while ((r = next_field(&q, qend, &field, &wire, &d, &l)) > 0) {
            if (field == 1 && wire == 2) *av = (const char *)d, *av_len = l;
            else if (field == 2 && wire == 2) *kind = (const char *)d, *kind_len = l;
        }
        if (r < 0) return r;
    }
    return r;
}

static int codec_decode(void *ud, const char *key, const void *value, size_t len, char **ret, size_t *ret_len,
                        char **ret_error) {
    const struct kite_apiserver_codec *c = ud;
    const char *av, *kind;
    size_t av_len, kind_len;
    if (len < KITE_PB_MAGIC_LEN || memcmp(value, KITE_PB_MAGIC, KITE_PB_MAGIC_LEN) != 0 ||
        type_meta(value, len, &av, &av_len, &kind, &kind_len) < 0)
        return *ret_error = kite_strdup("a malformed envelope"), -EINVAL;
    ssize_t i = row_for(c, key, av, av_len, kind, kind_len);
    if (i < 0)
        return *ret_error = kite_asprintf("%.*s %.*s is not a kind kite reads from protobuf under this key", (int)av_len,
                                          av, (int)kind_len, kind),
               -ENOTSUP;
    json_object *o = NULL;
    int r = kite_pb_decode(kite_resources[i]->schema, value, len, KITE_JSON_MAX_DEPTH, &o, ret_error);
    if (r < 0) return r;
    /* kite's stored form (the resourceVersion placeholder in place): served without parsing */
    *ret = kite_object_encode(o, ret_len);
    json_object_put(o);
    return 0;
}

static void drop_resource_version(json_object *o) {
    json_object *meta = json_object_object_get(o, "metadata");
    if (json_object_is_type(meta, json_type_object)) json_object_object_del(meta, "resourceVersion");
}

/* The envelope of the stored JSON value[0..len) under key into *out; -ENOTSUP when it is not one
 * of a complete kind's objects, or protobuf cannot carry it, or would not give it back the same:
 * Go's decoder drops an empty list or map and a zero field its JSON omits, and kite's JSON may
 * hold one where it means something (an EndpointSlice's "endpoints": [] is not absent to a
 * client reading JSON). Such an object is stored as JSON, so what is read back is what was written. */
static int encode_checked(const struct kite_apiserver_codec *c, const char *key, const char *value, size_t len,
                          struct kite_buf *out) {
    enum json_tokener_error jerr;
    json_object *o = kite_json_parse_lenient(value, len, KITE_JSON_MAX_DEPTH, &jerr, NULL);
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return -ENOTSUP;
    }
    const char *av = json_object_get_string(json_object_object_get(o, "apiVersion"));
    const char *kind = json_object_get_string(json_object_object_get(o, "kind"));
    ssize_t i = av && kind ? row_for(c, key, av, strlen(av), kind, strlen(kind)) : -1;
    int r = i < 0 ? -ENOTSUP : kite_pb_encode(kite_resources[i]->schema, false, o, out);
    json_object *back = NULL;
    if (r == 0 && kite_pb_decode(kite_resources[i]->schema, out->p, out->len, KITE_JSON_MAX_DEPTH, &back, NULL) < 0)
        r = -ENOTSUP;
    if (r == 0) {
        drop_resource_version(o);
        drop_resource_version(back);
        if (!json_object_equal(o, back)) r = -ENOTSUP;
    }
    json_object_put(back);
    json_object_put(o);
    return r;
}

static int codec_encode(void *ud, const char *key, const char *value, size_t len, char **ret, size_t *ret_len) {
    struct kite_buf b = {0};
    int r = encode_checked(ud, key, value, len, &b);
    if (r < 0) {
        kite_buf_release(&b);
        return r;
    }
    *ret = kite_buf_detach(&b, ret_len);
    return 0;
}

bool kite_apiserver_codec_same_stored(const struct kite_apiserver_codec *c, const char *key, const char *a, size_t a_len,
                                      const char *b, size_t b_len) {
    if (!c || !c->codec.encode) return false;
    struct kite_buf ea = {0}, eb = {0};
    bool same = encode_checked(c, key, a, a_len, &ea) == 0 && encode_checked(c, key, b, b_len, &eb) == 0 &&
                ea.len == eb.len && memcmp(ea.p, eb.p, ea.len) == 0;
    kite_buf_release(&ea);
    kite_buf_release(&eb);
    return same;
}

struct kite_apiserver_codec *kite_apiserver_codec_new(bool write_protobuf) {
    struct kite_apiserver_codec *c = kite_calloc(1, sizeof *c);
    while (kite_resources[c->rows]) c->rows++;
    c->complete = kite_calloc(c->rows + 1, sizeof *c->complete);
    for (size_t i = 0; i < c->rows; i++)
        c->complete[i] = kite_resource_stored(kite_resources[i]) && schema_complete(kite_resources[i]->schema, 0);
    c->codec = (struct kite_store_codec){.decode = codec_decode, .encode = write_protobuf ? codec_encode : NULL, .ud = c};
    return c;
}

const struct kite_store_codec *kite_apiserver_codec_store(const struct kite_apiserver_codec *c) { return &c->codec; }

bool kite_apiserver_codec_complete(const struct kite_apiserver_codec *c, const struct kite_resource *r) {
    for (size_t i = 0; i < c->rows; i++)
        if (kite_resources[i] == r) return c->complete[i];
    return false;
}

void kite_apiserver_codec_free(struct kite_apiserver_codec *c) {
    if (!c) return;
    free(c->complete);
    free(c);
}
