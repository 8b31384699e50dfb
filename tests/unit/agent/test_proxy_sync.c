/* The Service proxy's sync thread (agent/proxy/proxy.c) against a fake API: it writes nothing
 * until both informers have listed, even when one of them lists again and again meanwhile
 * (a Service written before its slices are read would be rejected for a moment). As root:
 * it programs the kernel. */
#include <criterion/criterion.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/proxy/proxy.h"
#include "base/base.h"
#include "base/clock.h"

TestSuite(proxy_sync, .timeout = 30);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool hold = true;      /* the slices list is held */
static int services_lists;    /* how many times the Services were listed */

static const char SVCS[] =
    "{\"kind\":\"ServiceList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":{\"namespace\":"
    "\"default\",\"name\":\"web\",\"resourceVersion\":\"5\"},\"spec\":{\"clusterIP\":\"10.96.0.20\",\"ports\":"
    "[{\"port\":80,\"protocol\":\"TCP\"}]}}]}";
static const char SLICES[] =
    "{\"kind\":\"EndpointSliceList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":{\"namespace\":"
    "\"default\",\"name\":\"web-x\",\"resourceVersion\":\"5\",\"labels\":{\"kubernetes.io/service-name\":\"web\"}},"
    "\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"\",\"port\":8080,\"protocol\":\"TCP\"}],\"endpoints\":"
    "[{\"addresses\":[\"10.88.0.5\"],\"conditions\":{\"ready\":true}}]}]}";

static int handle(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                  struct kite_response *ret) {
    ret->status = 200;
    if (strstr(path, "/services")) {
        pthread_mutex_lock(&mu);
        services_lists++;
        pthread_mutex_unlock(&mu);
        ret->body = kite_strdup(SVCS);
    } else {
        pthread_mutex_lock(&mu);
        while (hold) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        ret->body = kite_strdup(SLICES);
    }
    return 0;
}

/* the Services' watch fails at once (an ERROR event: list again); the slices' one idles */
static int watch(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    kite_cancel_wait(cancel, KITE_NS_PER_SEC / 50);
    if (kite_cancel_fired(cancel)) return -ECANCELED;
    if (strstr(path, "/services")) {
        json_object *ev = json_tokener_parse("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}");
        int r = fn(ev, fn_ud);
        json_object_put(ev);
        return r < 0 ? r : -ESTALE;
    }
    while (!kite_cancel_fired(cancel)) kite_cancel_wait(cancel, KITE_NS_PER_SEC / 10);
    return -ECANCELED;
}

/* `nft list table` output, or NULL when the table does not exist */
static char *list_table(const char *table) {
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    nft_ctx_buffer_output(nft);
    nft_ctx_buffer_error(nft);
    _cleanup_free_ char *cmd = kite_asprintf("list table ip %s", table);
    char *out = nft_run_cmd_from_buffer(nft, cmd) == 0 ? kite_strdup(nft_ctx_get_output_buffer(nft)) : NULL;
    nft_ctx_free(nft);
    return out;
}

Test(proxy_sync, first_write_waits_for_both_informers) {
    if (geteuid() != 0) cr_skip_test("needs root (nftables)");
    struct kite_client *c = kite_client_fake_new(handle, watch, NULL);
    _cleanup_free_ char *table = kite_asprintf("kite-proxy-sync-%d", (int)getpid());
    struct kite_proxy_options o = {.client = c, .rules = {.table = table, .node_name = "n1", .pod_cidr = "10.88.0.0/16"}};
    struct kite_proxy *p = NULL;
    char *err = NULL;
    cr_assert_eq(kite_proxy_start(&o, &p, &err), 0, "%s", err ? err : "");
    /* the Services listed several times over while the slices' list is held: no write */
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&mu);
        int n = services_lists;
        pthread_mutex_unlock(&mu);
        if (n >= 3) break;
        usleep(10000);
    }
    pthread_mutex_lock(&mu);
    cr_assert_geq(services_lists, 3, "the Services' informer did not list again");
    pthread_mutex_unlock(&mu);
    usleep(100000);
    cr_assert_eq(kite_proxy_syncs(p, NULL), 0, "a sync ran before the slices were listed");
    _cleanup_free_ char *before = list_table(table);
    cr_assert_null(before, "the table was written before the slices were listed:\n%s", before);
    /* the slices arrive: one full sync, the Service routed to its endpoint (not rejected) */
    pthread_mutex_lock(&mu);
    hold = false;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    unsigned long full = 0;
    for (int i = 0; i < 500 && kite_proxy_syncs(p, &full) == 0; i++) usleep(10000);
    cr_assert_geq(kite_proxy_syncs(p, &full), 1);
    cr_assert_eq(full, 1, "the first sync writes the whole table");
    _cleanup_free_ char *after = list_table(table);
    cr_assert_not_null(after);
    cr_assert(strstr(after, "10.96.0.20 . tcp . 80 : goto svc-"), "%s", after);
    cr_assert(strstr(after, "dnat to 10.88.0.5:8080"), "%s", after);
    cr_assert(strstr(after, "set no-ep {\n\t\ttype ipv4_addr . inet_proto . inet_service\n\t}"),
              "the Service is not rejected:\n%s", after);
    kite_proxy_stop(p);
    _cleanup_free_ char *gone = list_table(table);
    cr_assert_null(gone, "the table is removed at stop");
    kite_client_free(c);
}
