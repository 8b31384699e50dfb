/* The etcd backend's keys (kube-apiserver's layout) and Txn messages (src/store/etcd-msg.c). */
#include <criterion/criterion.h>

#include "store/etcd-int.h"


static char *key_in(struct etcd_store *s, const char *k) { return kite_store_etcd_key_in(s, (const unsigned char *)k, strlen(k)); }

Test(etcd_keys, kube_apiserver_layout_both_ways) {
    struct etcd_store s = {.prefix = "/registry"};
    static const struct {
        const char *kite, *etcd;
    } cases[] = {
        {"/registry/nodes/n1", "/registry/minions/n1"},
        {"/registry/services/default/kubernetes", "/registry/services/specs/default/kubernetes"},
        {"/registry/endpoints/default/kubernetes", "/registry/services/endpoints/default/kubernetes"},
        {"/registry/pods/default/p", "/registry/pods/default/p"},
        {"/registry/leases/kube-node-lease/n1", "/registry/leases/kube-node-lease/n1"},
        /* a namespace named like a mapped folder still maps back to itself */
        {"/registry/services/specs/x", "/registry/services/specs/specs/x"},
        {"/registry/nodes/", "/registry/minions/"}, /* prefixes map as keys do */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *e = kite_store_etcd_key_out(&s, cases[i].kite);
        cr_assert_str_eq(e, cases[i].etcd);
        char *k = key_in(&s, e);
        cr_assert_str_eq(k, cases[i].kite);
        free(e);
        free(k);
    }
    /* another prefix (--etcd-prefix /kite) */
    struct etcd_store t = {.prefix = "/kite"};
    char *e = kite_store_etcd_key_out(&t, "/registry/nodes/n1");
    cr_assert_str_eq(e, "/kite/minions/n1");
    free(e);
    /* keys outside the prefix, or with a NUL, are not the store's */
    cr_assert_null(key_in(&t, "/registry/minions/n1"));
    cr_assert_null(key_in(&t, "/kitex/pods/a"));
    cr_assert_null(key_in(&t, "/kite"));
    cr_assert_null(kite_store_etcd_key_in(&t, (const unsigned char *)"/kite/a\0b", 9));
}

Test(etcd_keys, a_txn_compares_and_writes_as_kube_apiserver) {
    /* UPDATE at mod_revision 42: compare{EQUAL, MOD, key, mod_revision=42}, success put with
     * prev_kv, failure range of the key */
    struct kite_buf b = {0};
    kite_store_etcd_encode_txn(&b, KITE_WRITE_UPDATE, "/registry/pods/a/b", "{}", 2, 42, 0);
    struct pb_reader r = pb_reader(b.p, b.len);
    struct pb_field f, g;
    int seen = 0;
    while (kite_store_pb_next(&r, &f) > 0) {
        struct pb_reader in = pb_sub(&f);
        if (f.field == 1) { /* Compare */
            int64_t mod = 0, target = -1;
            while (kite_store_pb_next(&in, &g) > 0) {
                if (g.field == 2) target = (int64_t)g.u;
                if (g.field == 6) mod = (int64_t)g.u;
            }
            cr_assert_eq(target, 2);
            cr_assert_eq(mod, 42);
            seen |= 1;
        } else if (f.field == 2) { /* success: RequestOp.request_put */
            cr_assert_eq(kite_store_pb_next(&in, &g), 1);
            cr_assert_eq(g.field, 2);
            seen |= 2;
        } else if (f.field == 3) { /* failure: RequestOp.request_range */
            cr_assert_eq(kite_store_pb_next(&in, &g), 1);
            cr_assert_eq(g.field, 1);
            seen |= 4;
        }
    }
    cr_assert_eq(seen, 7);
    kite_buf_release(&b);
    /* CREATE: the create_revision member of the oneof is present although 0 */
    kite_store_etcd_encode_txn(&b, KITE_WRITE_CREATE, "k", "v", 1, 0, 0);
    static const unsigned char compare[] = {0x0a, 0x07, 0x10, 0x01, 0x1a, 0x01, 'k', 0x28, 0x00};
    cr_assert(memcmp(b.p, compare, sizeof compare) == 0);
    kite_buf_release(&b);
}

/* A codec as the API server's: an envelope "k8s\0" + TEXT decodes to {"v":"TEXT"}; "k8s\0bad" does
 * not decode. */
static int fake_decode(void *ud, const char *key, const void *value, size_t len, char **ret, size_t *ret_len,
                       char **ret_error) {
    (*(int *)ud)++;
    cr_assert_str_eq(key, "/registry/configmaps/default/a", "the codec gets kite's key");
    if (len == 7 && memcmp((const char *)value + 4, "bad", 3) == 0) {
        *ret_error = kite_strdup("does not decode");
        return -EINVAL;
    }
    *ret = kite_asprintf("{\"v\":\"%.*s\"}", (int)(len - 4), (const char *)value + 4);
    *ret_len = strlen(*ret);
    return 0;
}

static struct kv kv_of(const char *key, const char *value, size_t len) {
    return (struct kv){.key = (const unsigned char *)key, .key_len = strlen(key), .value = (const unsigned char *)value,
                       .value_len = len, .create_rev = 3, .mod_rev = 5, .version = 2, .present = true};
}

Test(etcd_values, envelopes_go_through_the_codec_and_json_does_not) {
    int calls = 0;
    struct etcd_store s = {.prefix = "/registry", .codec = {.decode = fake_decode, .ud = &calls}};
    enum kv_skip why = 0;
    char *err = NULL;
    /* JSON: as stored, the codec not called */
    struct kv kv = kv_of("/registry/configmaps/default/a", "{\"x\":1}", 7);
    struct kite_record *r = kite_store_etcd_kv_record_why(&s, &kv, &why, &err);
    cr_assert_not_null(r);
    cr_assert_str_eq(r->value, "{\"x\":1}");
    cr_assert_eq(calls, 0);
    kite_record_unref(r);
    /* an envelope: the codec's JSON, with etcd's revisions */
    kv = kv_of("/registry/configmaps/default/a", "k8s\0abc", 7);
    r = kite_store_etcd_kv_record_why(&s, &kv, &why, &err);
    cr_assert_not_null(r);
    cr_assert_str_eq(r->value, "{\"v\":\"abc\"}");
    cr_assert_eq(r->len, strlen("{\"v\":\"abc\"}"));
    cr_assert_eq(r->create_rev, 3);
    cr_assert_eq(r->mod_rev, 5);
    cr_assert_eq(r->version, 2);
    cr_assert_str_eq(r->key, "/registry/configmaps/default/a");
    cr_assert_eq(calls, 1);
    kite_record_unref(r);
    /* one that does not decode: left out, saying why */
    kv = kv_of("/registry/configmaps/default/a", "k8s\0bad", 7);
    cr_assert_null(kite_store_etcd_kv_record_why(&s, &kv, &why, &err));
    cr_assert_eq(why, KV_ENVELOPE);
    cr_assert_str_eq(err, "does not decode");
    free(err);
    err = NULL;
    /* without a codec every envelope is left out */
    struct etcd_store none = {.prefix = "/registry"};
    kv = kv_of("/registry/configmaps/default/a", "k8s\0abc", 7);
    cr_assert_null(kite_store_etcd_kv_record_why(&none, &kv, &why, &err));
    cr_assert_eq(why, KV_ENVELOPE);
    cr_assert_not_null(err);
    free(err);
    /* a key outside the prefix */
    kv = kv_of("/other/configmaps/default/a", "{}", 2);
    cr_assert_null(kite_store_etcd_kv_record_why(&s, &kv, &why, NULL));
    cr_assert_eq(why, KV_FOREIGN_KEY);
}
