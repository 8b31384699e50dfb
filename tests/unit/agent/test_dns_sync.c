/* The cluster DNS responder (agent/dns/server.c) against a fake API: names in the cluster
 * domain get SERVFAIL until both informers have listed, even when one of them lists again and
 * again meanwhile (an NXDOMAIN for a Service whose slices are not read yet would be cached by
 * the client). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ldns/ldns.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/dns/dns.h"
#include "base/base.h"
#include "base/clock.h"

TestSuite(dns_sync, .timeout = 30);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool hold = true;
static int services_lists;

static const char SVCS[] =
    "{\"kind\":\"ServiceList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":{\"namespace\":"
    "\"default\",\"name\":\"web\",\"resourceVersion\":\"5\"},\"spec\":{\"clusterIP\":\"10.96.0.20\",\"ports\":"
    "[{\"port\":80,\"protocol\":\"TCP\"}]}}]}";
static const char SLICES[] = "{\"kind\":\"EndpointSliceList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}";

static int handle(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                  struct kite_response *ret) {
    ret->status = 200;
    pthread_mutex_lock(&mu);
    if (strstr(path, "/services")) services_lists++;
    else
        while (hold) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    ret->body = kite_strdup(strstr(path, "/services") ? SVCS : SLICES);
    return 0;
}

static int watch(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    kite_cancel_wait(cancel, KITE_NS_PER_SEC / 50);
    if (kite_cancel_fired(cancel)) return -ECANCELED;
    if (strstr(path, "/services")) { /* an ERROR event: list again */
        json_object *ev = json_tokener_parse("{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}");
        int r = fn(ev, fn_ud);
        json_object_put(ev);
        return r < 0 ? r : -ESTALE;
    }
    while (!kite_cancel_fired(cancel)) kite_cancel_wait(cancel, KITE_NS_PER_SEC / 10);
    return -ECANCELED;
}

/* the rcode of the responder's answer to web.default.svc.cluster.local A */
static int rcode(int port) {
    ldns_pkt *q = NULL;
    cr_assert_eq(ldns_pkt_query_new_frm_str(&q, "web.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN,
                                            LDNS_RD), LDNS_STATUS_OK);
    ldns_pkt_set_id(q, 77);
    uint8_t *w = NULL;
    size_t n = 0;
    cr_assert_eq(ldns_pkt2wire(&w, q, &n), LDNS_STATUS_OK);
    ldns_pkt_free(q);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(sendto(fd, w, n, 0, (struct sockaddr *)&sa, sizeof sa), (ssize_t)n);
    free(w);
    uint8_t buf[512];
    ssize_t k = recv(fd, buf, sizeof buf, 0);
    close(fd);
    cr_assert_gt(k, 12, "no answer");
    return buf[3] & 0xf;
}

Test(dns_sync, servfail_until_both_informers_listed) {
    struct kite_client *c = kite_client_fake_new(handle, watch, NULL);
    int port = 20000 + (int)(getpid() % 20000);
    _cleanup_free_ char *conf = kite_asprintf("/tmp/kite-dns-sync-%d.conf", (int)getpid());
    FILE *f = fopen(conf, "w");
    fclose(f); /* no upstream */
    struct kite_dns_options o = {.client = c, .listen = "127.0.0.1", .port = port, .upstream_conf = conf};
    struct kite_dns *d = NULL;
    char *err = NULL;
    cr_assert_eq(kite_dns_start(&o, &d, &err), 0, "%s", err ? err : "");
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
    cr_assert_eq(rcode(port), LDNS_RCODE_SERVFAIL, "answered before the slices were listed");
    pthread_mutex_lock(&mu);
    hold = false;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    int rc = -1;
    for (int i = 0; i < 100 && (rc = rcode(port)) == LDNS_RCODE_SERVFAIL; i++) usleep(20000);
    cr_assert_eq(rc, LDNS_RCODE_NOERROR);
    kite_dns_stop(d);
    kite_client_free(c);
    unlink(conf);
}
