/* The store's value codec (src/apiserver/storage_codec.c): kube-apiserver's "k8s\0" protobuf
 * envelope in etcd, read back as JSON and written for the kinds whose schema is complete. The
 * envelopes here are built by hand from upstream's generated.proto numbers, every field written as
 * Go's generated marshaller writes it (empty strings and zero integers of non-pointer fields
 * included), so they are the bytes kube-apiserver puts in etcd. */
#include "apiserver/internal.h"
#include "api/protobuf.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

static void varint(struct kite_buf *b, uint64_t v) {
    while (v >= 0x80) {
        kite_buf_putc(b, (char)(v | 0x80));
        v >>= 7;
    }
    kite_buf_putc(b, (char)v);
}
static void tag(struct kite_buf *b, unsigned field, unsigned wire) { varint(b, (uint64_t)field << 3 | wire); }
static void put_bytes(struct kite_buf *b, unsigned field, const void *p, size_t n) {
    tag(b, field, 2);
    varint(b, n);
    kite_buf_append(b, p, n);
}
static void put_str(struct kite_buf *b, unsigned field, const char *s) { put_bytes(b, field, s, strlen(s)); }
static void put_msg(struct kite_buf *b, unsigned field, struct kite_buf *m) {
    put_bytes(b, field, m->p ? m->p : "", m->len);
    kite_buf_release(m);
}
static void put_uint(struct kite_buf *b, unsigned field, uint64_t v) {
    tag(b, field, 0);
    varint(b, v);
}

/* k8s.io/apimachinery meta/v1 ObjectMeta as Go marshals it: every non-pointer field. */
static void object_meta(struct kite_buf *b, const char *name, const char *ns, const char *uid, int64_t created) {
    struct kite_buf m = {0}, t = {0};
    put_str(&m, 1, name);
    put_str(&m, 2, "");  /* generateName */
    put_str(&m, 3, ns);
    put_str(&m, 4, "");  /* selfLink */
    put_str(&m, 5, uid);
    put_str(&m, 6, "");  /* resourceVersion: kube-apiserver stores none */
    put_uint(&m, 7, 0);  /* generation */
    put_uint(&t, 1, (uint64_t)created);
    put_uint(&t, 2, 0);
    put_msg(&m, 8, &t); /* creationTimestamp {1 seconds, 2 nanos} */
    put_msg(b, 1, &m);
}

/* runtime.Unknown {1 TypeMeta {1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType}
 * after the magic. */
static void envelope(struct kite_buf *out, const char *av, const char *kind, struct kite_buf *raw, const char *enc) {
    struct kite_buf tm = {0};
    kite_buf_append(out, "k8s\0", 4);
    put_str(&tm, 1, av);
    put_str(&tm, 2, kind);
    put_msg(out, 1, &tm);
    put_msg(out, 2, raw);
    put_str(out, 3, enc);
    put_str(out, 4, "");
}

/* A ConfigMap as kube-apiserver stores it: {1 metadata, 2 data (map entries {1 key, 2 value}),
 * 4 immutable}. */
static void configmap_envelope(struct kite_buf *out, const char *kind) {
    struct kite_buf cm = {0}, e = {0};
    object_meta(&cm, "cm1", "default", "6c9b7d1e-0000-4000-8000-000000000001", 1767225600); /* 2026-01-01T00:00:00Z */
    put_str(&e, 1, "k");
    put_str(&e, 2, "v");
    put_msg(&cm, 2, &e);
    put_str(&e, 1, "a");
    put_str(&e, 2, "b");
    put_msg(&cm, 2, &e);
    envelope(out, "v1", kind, &cm, "");
}

static json_object *decode(const struct kite_store_codec *sc, const char *key, const struct kite_buf *b, int *ret) {
    char *text = NULL, *err = NULL;
    size_t n = 0;
    *ret = sc->decode(sc->ud, key, b->p, b->len, &text, &n, &err);
    if (*ret < 0) {
        cr_assert_not_null(err, "a refusal says why");
        free(err);
        cr_assert_null(text);
        return NULL;
    }
    cr_assert_eq(strlen(text), n);
    json_object *o = json_tokener_parse(text);
    cr_assert_not_null(o, "%s", text);
    free(text);
    free(err);
    return o;
}

static const char *str_at(json_object *o, const char *a, const char *b) {
    json_object *v = json_object_object_get(o, a);
    if (b) v = json_object_object_get(v, b);
    return json_object_get_string(v);
}

Test(storage_codec, kube_apiserver_configmap_is_read_as_json) {
    struct kite_apiserver_codec *c = kite_apiserver_codec_new(false);
    const struct kite_store_codec *sc = kite_apiserver_codec_store(c);
    cr_assert_null(sc->encode, "application/json: values are written as given");
    struct kite_buf b = {0};
    configmap_envelope(&b, "ConfigMap");
    int r;
    json_object *o = decode(sc, "/registry/configmaps/default/cm1", &b, &r);
    cr_assert_eq(r, 0);
    cr_assert_str_eq(str_at(o, "kind", NULL), "ConfigMap");
    cr_assert_str_eq(str_at(o, "apiVersion", NULL), "v1");
    cr_assert_str_eq(str_at(o, "metadata", "name"), "cm1");
    cr_assert_str_eq(str_at(o, "metadata", "namespace"), "default");
    cr_assert_str_eq(str_at(o, "metadata", "uid"), "6c9b7d1e-0000-4000-8000-000000000001");
    cr_assert_str_eq(str_at(o, "metadata", "creationTimestamp"), "2026-01-01T00:00:00Z");
    cr_assert_str_eq(str_at(o, "data", "k"), "v");
    cr_assert_str_eq(str_at(o, "data", "a"), "b");
    /* kite's stored form: the resourceVersion placeholder reads splice the revision into */
    json_object *meta = json_object_object_get(o, "metadata");
    cr_assert_str_eq(str_at(o, "metadata", "resourceVersion"), "");
    /* Go's zero fields are dropped as its JSON omits them */
    cr_assert_null(json_object_object_get(meta, "generation"));
    cr_assert_null(json_object_object_get(meta, "selfLink"));
    json_object_put(o);
    kite_buf_release(&b);
    kite_apiserver_codec_free(c);
}

Test(storage_codec, kube_apiserver_lease_is_read_as_json) {
    /* coordination.k8s.io/v1 Lease {1 metadata, 2 spec {1 holderIdentity, 2 leaseDurationSeconds,
     * 3 acquireTime, 4 renewTime (MicroTime {1 seconds, 2 nanos}), 5 leaseTransitions}} */
    struct kite_apiserver_codec *c = kite_apiserver_codec_new(false);
    const struct kite_store_codec *sc = kite_apiserver_codec_store(c);
    struct kite_buf l = {0}, spec = {0}, t = {0}, b = {0};
    object_meta(&l, "n1", "kube-node-lease", "6c9b7d1e-0000-4000-8000-000000000002", 1767225600);
    put_str(&spec, 1, "n1");
    put_uint(&spec, 2, 40);
    put_uint(&t, 1, 1767225610);
    put_uint(&t, 2, 123456000);
    put_msg(&spec, 4, &t);
    put_msg(&l, 2, &spec);
    envelope(&b, "coordination.k8s.io/v1", "Lease", &l, "");
    int r;
    json_object *o = decode(sc, "/registry/leases/kube-node-lease/n1", &b, &r);
    cr_assert_eq(r, 0);
    cr_assert_str_eq(str_at(o, "kind", NULL), "Lease");
    cr_assert_str_eq(str_at(o, "spec", "holderIdentity"), "n1");
    cr_assert_eq(json_object_get_int(json_object_object_get(json_object_object_get(o, "spec"), "leaseDurationSeconds")), 40);
    cr_assert_str_eq(str_at(o, "spec", "renewTime"), "2026-01-01T00:00:10.123456Z");
    json_object_put(o);
    kite_buf_release(&b);
    kite_apiserver_codec_free(c);
}

Test(storage_codec, envelopes_kite_cannot_read_are_refused) {
    struct kite_apiserver_codec *c = kite_apiserver_codec_new(false);
    const struct kite_store_codec *sc = kite_apiserver_codec_store(c);
    struct kite_buf b = {0};
    int r;
    /* a Secret's envelope under configmaps/: not the kind stored there */
    configmap_envelope(&b, "Secret");
    cr_assert_null(decode(sc, "/registry/configmaps/default/cm1", &b, &r));
    cr_assert_eq(r, -ENOTSUP);
    kite_buf_release(&b);
    /* a ConfigMap under a key no kind is stored at */
    configmap_envelope(&b, "ConfigMap");
    cr_assert_null(decode(sc, "/registry/ranges/serviceips", &b, &r));
    cr_assert_eq(r, -ENOTSUP);
    /* truncated: the object's message cut short */
    struct kite_buf cut = {0};
    kite_buf_append(&cut, b.p, b.len - 12);
    cr_assert_null(decode(sc, "/registry/configmaps/default/cm1", &cut, &r));
    cr_assert_eq(r, -EINVAL);
    kite_buf_release(&cut);
    kite_buf_release(&b);
    /* a compressed envelope (contentEncoding set) */
    struct kite_buf cm = {0};
    object_meta(&cm, "cm1", "default", "u", 1767225600);
    envelope(&b, "v1", "ConfigMap", &cm, "gzip");
    cr_assert_null(decode(sc, "/registry/configmaps/default/cm1", &b, &r));
    cr_assert_lt(r, 0);
    kite_buf_release(&b);
    /* where two group versions share a folder, only the stored one's envelope is read: an
     * autoscaling/v1 HorizontalPodAutoscaler is converted to the stored autoscaling/v2 by kite's
     * API, never stored as it is */
    object_meta(&cm, "h", "default", "u", 1767225600);
    envelope(&b, "autoscaling/v1", "HorizontalPodAutoscaler", &cm, "");
    cr_assert_null(decode(sc, "/registry/horizontalpodautoscalers/default/h", &b, &r));
    cr_assert_eq(r, -ENOTSUP);
    kite_buf_release(&b);
    object_meta(&cm, "h", "default", "u", 1767225600);
    envelope(&b, "autoscaling/v2", "HorizontalPodAutoscaler", &cm, "");
    json_object *h = decode(sc, "/registry/horizontalpodautoscalers/default/h", &b, &r);
    cr_assert_eq(r, 0);
    cr_assert_str_eq(str_at(h, "apiVersion", NULL), "autoscaling/v2");
    json_object_put(h);
    kite_buf_release(&b);
    /* a broken TypeMeta */
    kite_buf_append(&b, "k8s\0\x0a\x7f\x0a", 7);
    cr_assert_null(decode(sc, "/registry/configmaps/default/cm1", &b, &r));
    cr_assert_eq(r, -EINVAL);
    kite_buf_release(&b);
    kite_apiserver_codec_free(c);
}

static int encode(const struct kite_store_codec *sc, const char *key, const char *json, struct kite_buf *out) {
    char *bytes = NULL;
    size_t n = 0;
    int r = sc->encode(sc->ud, key, json, strlen(json), &bytes, &n);
    if (r == 0) kite_buf_append(out, bytes, n);
    free(bytes);
    return r;
}

Test(storage_codec, protobuf_writes_round_trip_in_kube_apiservers_envelope) {
    struct kite_apiserver_codec *c = kite_apiserver_codec_new(true);
    const struct kite_store_codec *sc = kite_apiserver_codec_store(c);
    cr_assert_not_null(sc->encode);
    const char *cm = "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"cm1\",\"namespace\":\"default\","
                     "\"uid\":\"6c9b7d1e-0000-4000-8000-000000000001\",\"resourceVersion\":\"\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
                     "\"labels\":{\"app\":\"x\"}},\"data\":{\"a\":\"b\",\"k\":\"v\"}}";
    struct kite_buf b = {0};
    cr_assert_eq(encode(sc, "/registry/configmaps/default/cm1", cm, &b), 0);
    /* the envelope: magic, TypeMeta {v1, ConfigMap}, raw, and contentEncoding and contentType empty */
    static const char head[] = "k8s\0\x0a\x0f\x0a\x02v1\x12\x09" "ConfigMap\x12";
    cr_assert_geq(b.len, sizeof head - 1);
    cr_assert_eq(memcmp(b.p, head, sizeof head - 1), 0);
    cr_assert_eq(memcmp(b.p + b.len - 4, "\x1a\x00\x22\x00", 4), 0);
    int r;
    json_object *back = decode(sc, "/registry/configmaps/default/cm1", &b, &r), *want = json_tokener_parse(cm);
    cr_assert_eq(r, 0);
    cr_assert(json_object_equal(back, want), "%s", json_object_to_json_string(back));
    json_object_put(back);
    json_object_put(want);
    kite_buf_release(&b);

    /* a pod: the kind whose every field kite's schema has */
    const char *pod = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"resourceVersion\":\"\"},"
                      "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"command\":[\"sleep\",\"9\"],"
                      "\"resources\":{\"limits\":{\"cpu\":\"100m\"}}}],\"restartPolicy\":\"Always\"},"
                      "\"status\":{\"phase\":\"Pending\"}}";
    cr_assert_eq(encode(sc, "/registry/pods/default/p", pod, &b), 0);
    back = decode(sc, "/registry/pods/default/p", &b, &r);
    want = json_tokener_parse(pod);
    cr_assert(json_object_equal(back, want), "%s", json_object_to_json_string(back));
    json_object_put(back);
    json_object_put(want);
    kite_buf_release(&b);
    kite_apiserver_codec_free(c);
}

Test(storage_codec, what_protobuf_cannot_carry_stays_json) {
    struct kite_apiserver_codec *c = kite_apiserver_codec_new(true);
    const struct kite_store_codec *sc = kite_apiserver_codec_store(c);
    struct kite_buf b = {0};
    /* a field the schema does not list */
    cr_assert_eq(encode(sc, "/registry/configmaps/default/x",
                        "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"},\"bogus\":1}", &b),
                 -ENOTSUP);
    /* no kind stored under the key (the allocators' RangeAllocations) */
    cr_assert_lt(encode(sc, "/registry/ranges/serviceips",
                        "{\"kind\":\"RangeAllocation\",\"apiVersion\":\"v1\",\"range\":\"10.96.0.0/12\"}", &b), 0);
    /* another kind than the folder's, and text that is not a JSON object */
    cr_assert_lt(encode(sc, "/registry/secrets/default/x",
                        "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"}}", &b), 0);
    cr_assert_lt(encode(sc, "/registry/configmaps/default/x", "[1,2]", &b), 0);
    cr_assert_lt(encode(sc, "/registry/configmaps/default/x", "{bad", &b), 0);
    /* what protobuf would not give back: an EndpointSlice's "endpoints": [] (Go's JSON writes it,
     * an empty repeated field is absent from protobuf) */
    cr_assert_eq(encode(sc, "/registry/endpointslices/default/s",
                        "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\"metadata\":"
                        "{\"name\":\"s\",\"namespace\":\"default\"},\"addressType\":\"IPv4\",\"endpoints\":[]}", &b),
                 -ENOTSUP);
    cr_assert_eq(b.len, 0);
    /* and with endpoints, it is protobuf */
    cr_assert_eq(encode(sc, "/registry/endpointslices/default/s",
                        "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\"metadata\":"
                        "{\"name\":\"s\",\"namespace\":\"default\"},\"addressType\":\"IPv4\",\"endpoints\":"
                        "[{\"addresses\":[\"10.0.0.1\"]}]}", &b),
                 0);
    kite_buf_release(&b);
    kite_apiserver_codec_free(c);
}

Test(storage_codec, partial_schemas_are_not_complete) {
    struct kite_apiserver_codec *c = kite_apiserver_codec_new(true);
    const struct kite_resource *cms = kite_registry_find("", "v1", "configmaps"),
                               *pods = kite_registry_find("", "v1", "pods"),
                               *leases = kite_registry_find("coordination.k8s.io", "v1", "leases");
    cr_assert(cms && pods && leases);
    cr_assert(kite_apiserver_codec_complete(c, cms));
    cr_assert(kite_apiserver_codec_complete(c, pods), "a parent of embedded structs is complete");
    cr_assert(kite_apiserver_codec_complete(c, leases));
    for (size_t i = 0; kite_resources[i]; i++) {
        const struct kite_schema *s = kite_resources[i]->schema;
        bool partial = s && s->type == KITE_SCHEMA_OBJECT && (s->flags & KITE_SCHEMA_PARTIAL);
        bool inl = false;
        for (const struct kite_schema_field *f = s && s->type == KITE_SCHEMA_OBJECT ? s->fields : NULL; f && f->name; f++)
            inl = inl || (f->flags & KITE_SCHEMA_INLINE);
        if (!s || (partial && !inl)) {
            cr_assert_not(kite_apiserver_codec_complete(c, kite_resources[i]), "%s", kite_resources[i]->plural);
        }
    }
    kite_apiserver_codec_free(c);
}

Test(storage_codec, updates_are_compared_by_what_would_be_stored) {
    struct kite_apiserver_codec *pb = kite_apiserver_codec_new(true), *js = kite_apiserver_codec_new(false);
    const char *key = "/registry/configmaps/default/cm1";
    const char *a = "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"cm1\",\"resourceVersion\":\"\","
                    "\"labels\":{\"x\":\"1\",\"y\":\"2\"}},\"data\":{\"a\":\"b\",\"k\":\"v\"}}";
    /* the same object, its members in another order (as read back from an envelope) */
    const char *b = "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"cm1\",\"resourceVersion\":\"\","
                    "\"labels\":{\"y\":\"2\",\"x\":\"1\"}},\"data\":{\"k\":\"v\",\"a\":\"b\"}}";
    const char *c = "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"cm1\",\"resourceVersion\":\"\","
                    "\"labels\":{\"y\":\"2\",\"x\":\"1\"}},\"data\":{\"k\":\"v2\",\"a\":\"b\"}}";
    cr_assert(kite_apiserver_codec_same_stored(pb, key, a, strlen(a), b, strlen(b)));
    cr_assert_not(kite_apiserver_codec_same_stored(pb, key, a, strlen(a), c, strlen(c)));
    /* JSON storage compares bytes alone */
    cr_assert_not(kite_apiserver_codec_same_stored(js, key, a, strlen(a), b, strlen(b)));
    cr_assert_not(kite_apiserver_codec_same_stored(NULL, key, a, strlen(a), b, strlen(b)));
    kite_apiserver_codec_free(pb);
    kite_apiserver_codec_free(js);
}

Test(storage_codec, every_cut_and_flipped_byte_of_an_envelope_is_answered) {
    /* etcd's bytes are input: each prefix of an envelope and each single-byte change of it decodes
     * or is refused with a reason, never read past its end (the ASan build checks) */
    struct kite_apiserver_codec *c = kite_apiserver_codec_new(true);
    const struct kite_store_codec *sc = kite_apiserver_codec_store(c);
    struct kite_buf b = {0};
    configmap_envelope(&b, "ConfigMap");
    size_t ok = 0;
    for (size_t n = 0; n <= b.len; n++) {
        char *cut = kite_malloc(n ? n : 1); /* exactly n bytes: a read past them is caught */
        memcpy(cut, b.p, n);
        struct kite_buf one = {.p = cut, .len = n};
        int r;
        json_object *o = decode(sc, "/registry/configmaps/default/cm1", &one, &r);
        ok += r == 0;
        json_object_put(o);
        free(cut);
    }
    cr_assert_geq(ok, 1, "the whole envelope decodes");
    for (size_t i = 0; i < b.len; i++)
        for (unsigned v = 0; v < 256; v += 37) {
            char *m = kite_malloc(b.len);
            memcpy(m, b.p, b.len);
            m[i] = (char)v;
            struct kite_buf one = {.p = m, .len = b.len};
            int r;
            json_object_put(decode(sc, "/registry/configmaps/default/cm1", &one, &r));
            free(m);
        }
    kite_buf_release(&b);
    kite_apiserver_codec_free(c);
}
