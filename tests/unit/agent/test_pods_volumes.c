/* The files of configMap, secret, downwardAPI and projected volumes (apivolumes.c) against a
 * fake API: every key or the items, modes, binaryData, optional objects and keys, the kubelet's
 * messages, projected sources together, fsGroup and the byte limit. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "agent/pods/pods-int.h"
#include "base/base.h"

static const char *const objects[][2] = {
    {"/api/v1/namespaces/ns/configmaps/cm",
     "{\"metadata\":{\"name\":\"cm\"},\"data\":{\"a\":\"alpha\",\"b\":\"beta\"},\"binaryData\":{\"bin\":\"AAH+/w==\"}}"},
    {"/api/v1/namespaces/ns/secrets/sec", "{\"metadata\":{\"name\":\"sec\"},\"data\":{\"pw\":\"czNjcj10IQ==\"}}"},
};
static char *big_cm; /* a ConfigMap of 1,000,000 bytes */

static int handler(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                   struct kite_response *ret) {
    (void)ud, (void)ct, (void)body, (void)len;
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++)
        if (!strcmp(method, "GET") && !strcmp(path, objects[i][0])) {
            ret->status = 200;
            ret->body = kite_strdup(objects[i][1]);
            ret->len = strlen(ret->body);
            return 0;
        }
    if (!strncmp(path, "/api/v1/namespaces/ns/configmaps/big", 36) && big_cm) {
        ret->status = 200;
        ret->body = kite_strdup(big_cm);
        ret->len = strlen(ret->body);
        return 0;
    }
    ret->status = 404;
    ret->body = kite_strdup("{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404}");
    ret->len = strlen(ret->body);
    return 0;
}

static struct kite_pods P;
static struct pod pod;
static struct pod_ctr ctr;

static void setup(void) {
    memset(&P, 0, sizeof P);
    P.client = kite_client_fake_new(handler, NULL, NULL);
    P.alloc_cpu_m = 2000 * 1000;
    P.alloc_mem_m = 0;
    memset(&pod, 0, sizeof pod);
    pod.uid = "u1";
    pod.ns = "ns";
    pod.name = "p";
    pod.obj = json_tokener_parse(
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u1\",\"labels\":{\"b\":\"2\",\"a\":\"1\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"cpu\":\"250m\",\"memory\":\"64Mi\"}}}]}}");
    ctr = (struct pod_ctr){.name = "c", .spec = json_object_array_get_idx(kite_agent_pj(pod.obj, "spec.containers"), 0)};
    pod.c = &ctr;
    pod.nc = 1;
}

static void teardown(void) {
    json_object_put(pod.obj);
    kite_client_free(P.client);
    free(big_cm);
    big_cm = NULL;
}

TestSuite(pods_volumes, .init = setup, .fini = teardown);

static int payload(const char *vol, struct pods_payload *pl, char **err) {
    json_object *v = json_tokener_parse(vol);
    cr_assert_not_null(v, "%s", vol);
    *err = NULL;
    int r = kite_pods_api_volume_payload(&P, &pod, v, pl, err);
    json_object_put(v);
    return r;
}

static const struct pods_file *file(const struct pods_payload *pl, const char *path) {
    for (size_t i = 0; i < pl->n; i++)
        if (!strcmp(pl->f[i].path, path)) return &pl->f[i];
    return NULL;
}

static void fails(const char *vol, const char *msg) {
    struct pods_payload pl = {0};
    char *err = NULL;
    cr_assert_lt(payload(vol, &pl, &err), 0, "%s", vol);
    cr_assert_str_eq(err, msg);
    cr_assert_eq(pl.n, 0);
    free(err);
}

Test(pods_volumes, configmap_every_key_and_items) {
    struct pods_payload pl = {0};
    char *err = NULL;
    cr_assert_eq(payload("{\"name\":\"v\",\"configMap\":{\"name\":\"cm\"}}", &pl, &err), 0, "%s", err);
    cr_assert_eq(pl.n, 3);
    cr_assert_str_eq(file(&pl, "a")->data, "alpha");
    cr_assert_eq(file(&pl, "a")->mode, 0644);
    const struct pods_file *bin = file(&pl, "bin");
    cr_assert_eq(bin->len, 4);
    cr_assert_eq(memcmp(bin->data, "\x00\x01\xfe\xff", 4), 0);
    kite_pods_payload_release(&pl);

    cr_assert_eq(payload("{\"name\":\"v\",\"configMap\":{\"name\":\"cm\",\"defaultMode\":288,\"items\":["
                         "{\"key\":\"a\",\"path\":\"x/a.txt\",\"mode\":256},{\"key\":\"b\",\"path\":\"./b\"}]}}",
                         &pl, &err), 0, "%s", err);
    cr_assert_eq(pl.n, 2);
    cr_assert_eq(file(&pl, "x/a.txt")->mode, 0400);
    cr_assert_eq(file(&pl, "b")->mode, 0440); /* defaultMode 288 = 0440; the path cleaned */
    kite_pods_payload_release(&pl);
}

Test(pods_volumes, missing_objects_and_keys) {
    fails("{\"name\":\"v\",\"configMap\":{\"name\":\"nope\"}}", "configmap \"nope\" not found");
    fails("{\"name\":\"v\",\"secret\":{\"secretName\":\"nope\"}}", "secret \"nope\" not found");
    fails("{\"name\":\"v\",\"configMap\":{\"name\":\"cm\",\"items\":[{\"key\":\"zz\",\"path\":\"z\"}]}}",
          "configmap references non-existent config key: zz");
    fails("{\"name\":\"v\",\"secret\":{\"secretName\":\"sec\",\"items\":[{\"key\":\"zz\",\"path\":\"z\"}]}}",
          "references non-existent secret key: zz");
    /* optional: an empty volume, a missing key skipped */
    struct pods_payload pl = {0};
    char *err = NULL;
    cr_assert_eq(payload("{\"name\":\"v\",\"configMap\":{\"name\":\"nope\",\"optional\":true}}", &pl, &err), 0);
    cr_assert_eq(pl.n, 0);
    cr_assert_eq(payload("{\"name\":\"v\",\"secret\":{\"secretName\":\"sec\",\"optional\":true,\"items\":["
                         "{\"key\":\"zz\",\"path\":\"z\"},{\"key\":\"pw\",\"path\":\"p\"}]}}", &pl, &err), 0);
    cr_assert_eq(pl.n, 1);
    cr_assert_str_eq(file(&pl, "p")->data, "s3cr=t!");
    kite_pods_payload_release(&pl);
}

Test(pods_volumes, downward_api_files) {
    struct pods_payload pl = {0};
    char *err = NULL;
    cr_assert_eq(payload("{\"name\":\"v\",\"downwardAPI\":{\"items\":["
                         "{\"path\":\"labels\",\"fieldRef\":{\"fieldPath\":\"metadata.labels\"}},"
                         "{\"path\":\"a\",\"fieldRef\":{\"fieldPath\":\"metadata.labels['a']\"}},"
                         "{\"path\":\"uid\",\"fieldRef\":{\"fieldPath\":\"metadata.uid\"},\"mode\":256},"
                         "{\"path\":\"cpu\",\"resourceFieldRef\":{\"containerName\":\"c\",\"resource\":\"limits.cpu\","
                         "\"divisor\":\"1m\"}},"
                         "{\"path\":\"mem\",\"resourceFieldRef\":{\"containerName\":\"c\",\"resource\":\"limits.memory\","
                         "\"divisor\":\"1Mi\"}}]}}", &pl, &err), 0, "%s", err);
    cr_assert_str_eq(file(&pl, "labels")->data, "a=\"1\"\nb=\"2\"");
    cr_assert_str_eq(file(&pl, "a")->data, "1");
    cr_assert_str_eq(file(&pl, "uid")->data, "u1");
    cr_assert_eq(file(&pl, "uid")->mode, 0400);
    cr_assert_eq(file(&pl, "labels")->mode, 0644);
    cr_assert_str_eq(file(&pl, "cpu")->data, "250");
    cr_assert_str_eq(file(&pl, "mem")->data, "64");
    kite_pods_payload_release(&pl);
    fails("{\"name\":\"v\",\"downwardAPI\":{\"items\":[{\"path\":\"x\",\"resourceFieldRef\":{\"containerName\":\"no\","
          "\"resource\":\"limits.cpu\"}}]}}", "container no not found");
}

Test(pods_volumes, projected_sources_together) {
    struct pods_payload pl = {0};
    char *err = NULL;
    cr_assert_eq(payload("{\"name\":\"v\",\"projected\":{\"defaultMode\":416,\"sources\":["
                         "{\"configMap\":{\"name\":\"cm\",\"items\":[{\"key\":\"a\",\"path\":\"conf/a\"}]}},"
                         "{\"secret\":{\"name\":\"sec\"}},"
                         "{\"downwardAPI\":{\"items\":[{\"path\":\"name\",\"fieldRef\":{\"fieldPath\":\"metadata.name\"}}]}},"
                         "{\"configMap\":{\"name\":\"absent\",\"optional\":true}}]}}", &pl, &err), 0, "%s", err);
    cr_assert_eq(pl.n, 3);
    cr_assert_str_eq(file(&pl, "conf/a")->data, "alpha");
    cr_assert_str_eq(file(&pl, "pw")->data, "s3cr=t!");
    cr_assert_str_eq(file(&pl, "name")->data, "p");
    cr_assert_eq(file(&pl, "pw")->mode, 0640);
    kite_pods_payload_release(&pl);
    /* every failing source, as upstream's aggregate */
    fails("{\"name\":\"v\",\"projected\":{\"sources\":[{\"configMap\":{\"name\":\"x\"}},{\"secret\":{\"name\":\"y\"}}]}}",
          "[configmap \"x\" not found, secret \"y\" not found]");
    /* a source this node does not serve yet is a failure, never a silently missing file */
    fails("{\"name\":\"v\",\"projected\":{\"sources\":[{\"clusterTrustBundle\":{\"path\":\"b\",\"name\":\"x\"}}]}}",
          "projected source clusterTrustBundle is not supported by this node");
}

Test(pods_volumes, fs_group_and_byte_limit) {
    json_object_object_add(kite_agent_pj(pod.obj, "spec"), "securityContext", json_tokener_parse("{\"fsGroup\":2000}"));
    struct pods_payload pl = {0};
    char *err = NULL;
    cr_assert_eq(payload("{\"name\":\"v\",\"secret\":{\"secretName\":\"sec\",\"defaultMode\":256}}", &pl, &err), 0);
    cr_assert(pl.has_gid);
    cr_assert_eq(pl.gid, 2000);
    cr_assert_eq(file(&pl, "pw")->mode, 0440);
    kite_pods_payload_release(&pl);

    struct kite_buf b = {0};
    kite_buf_puts(&b, "{\"metadata\":{\"name\":\"big\"},\"data\":{\"k\":\"");
    for (int i = 0; i < 1000000; i++) kite_buf_putc(&b, 'x');
    kite_buf_puts(&b, "\"}}");
    big_cm = kite_buf_detach(&b, NULL);
    char vol[512];
    snprintf(vol, sizeof vol, "{\"name\":\"v\",\"projected\":{\"sources\":[");
    for (int i = 0; i < 5; i++)
        snprintf(vol + strlen(vol), sizeof vol - strlen(vol), "%s{\"configMap\":{\"name\":\"big%d\",\"items\":"
                 "[{\"key\":\"k\",\"path\":\"k%d\"}]}}", i ? "," : "", i, i);
    strcat(vol, "]}}");
    fails(vol, "the volume's files are 5000000 bytes, more than this node's limit of 4194304");
}
