/* The API server's own leases and the `kubernetes` Service's endpoints, as kube-apiserver's
 * identity leases and lease endpoint reconciler keep them, so that several API servers on one
 * store (etcd) each announce themselves and the Service lists those alive.
 *
 * Every lease_ttl/3 (at least a second) each server, on a thread of its own:
 * - writes its master lease, /registry/masterleases/<ip>:<port> (kube-apiserver's key is by IP
 *   alone; two servers of one host differ by port here), an Endpoints object naming its address,
 *   with its renewal time and duration in annotations (kube-apiserver gives the key an etcd TTL
 *   instead; SQLite has none, so the time is written and judged by the readers);
 * - renews its identity Lease kube-system/apiserver-<id> (label apiserver.kubernetes.io/identity=
 *   kube-apiserver, holderIdentity apiserver-<id>_<uuid of this start>, leaseDurationSeconds 3600);
 * - reads every master lease, deletes those whose time is over (compare-and-swap: one server
 *   does it) and writes default/kubernetes's EndpointSlices (and its v1 Endpoints, when the
 *   registry serves that kind) to list exactly the live ones, when they differ (compare-and-swap;
 *   a conflict waits for the next pass).
 * A server stopped cleanly deletes its master lease and passes once more, so the Service drops
 * it at once; one killed drops out within lease_ttl plus a pass. */
#include "apiserver/internal.h"
#include "base/clock.h"
#include "base/gotime.h"
#include "base/log.h"
#include "json/patch.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#define MASTER_PREFIX "/registry/masterleases/"
#define IDENTITY_LABEL "apiserver.kubernetes.io/identity"
#define IDENTITY_LEASE_S 3600
#define ANN_RENEW "kite.io/renew-time"
#define ANN_TTL "kite.io/lease-duration-seconds"
#define ANN_ID "kite.io/apiserver-identity"
/* live servers listed at most (the rest are left out, logged) */
#define SERVERS_MAX 64

struct apiserver_leases {
    struct kite_apiserver *s;
    char id[64];      /* apiserver-<hash of host and address> */
    char holder[128]; /* id_<uuid> */
    char ip[INET_ADDRSTRLEN];
    unsigned port;
    char *master_key;
    int64_t ttl_s;
    const struct kite_resource *leases, *endpoints, *slices;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop;
};

struct server {
    char ip[INET_ADDRSTRLEN];
    unsigned port;
};

/* The first non-loopback IPv4 address of an interface that is up, or 127.0.0.1. */
static void host_address(char out[INET_ADDRSTRLEN]) {
    snprintf(out, INET_ADDRSTRLEN, "127.0.0.1");
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0) return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, INET_ADDRSTRLEN);
            break;
        }
    freeifaddrs(ifs);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void now_ts(struct kite_apiserver *s, char out[40]) { kite_microtime_format(kite_now_wall(s->clock), out); }

static json_object *first(json_object *arr) {
    return arr && json_object_is_type(arr, json_type_array) && json_object_array_length(arr)
               ? json_object_array_get_idx(arr, 0)
               : NULL;
}

/* Makes the object at key (of r) carry want's values at the given top-level fields: creates it
 * from want, or updates the current one on its mod_revision when one differs. want borrowed. */
static int converge(struct apiserver_leases *l, const struct kite_resource *r, const char *ns, const char *name,
                    json_object *want, const char *const *fields) {
    struct kite_apiserver *s = l->s;
    _cleanup_free_ char *key = kite_object_key(r, ns, name);
    struct kite_record *cur = NULL;
    if (kite_store_get(s->store, key, &cur) < 0) {
        int e = kite_apiserver_create_sync(s, r, want);
        return e == -EEXIST ? 0 : e;
    }
    json_object *obj = kite_apiserver_record_parse(cur);
    bool same = true;
    for (size_t i = 0; fields[i]; i++)
        if (!kite_json_equal(kite_obj_get(obj, fields[i]), kite_obj_get(want, fields[i]))) {
            same = false;
            json_object *v = kite_obj_get(want, fields[i]);
            if (v) kite_obj_set(obj, fields[i], json_object_get(v));
            else json_object_object_del(obj, fields[i]);
        }
    int e = 0;
    if (!same) {
        size_t len;
        _cleanup_free_ char *bytes = kite_object_encode(obj, &len);
        struct kite_write w = {.type = KITE_WRITE_UPDATE, .key = key, .value = bytes, .len = len, .expect_mod_rev = cur->mod_rev};
        e = kite_store_write(s->store, &w, NULL, NULL);
    }
    json_object_put(obj);
    kite_record_unref(cur);
    return e == -ESTALE || e == -ENOENT ? 0 : e; /* another server's pass won: the next one sees it */
}

static json_object *parse(const char *fmt, ...) KITE_PRINTF(1, 2);
static json_object *parse(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0) abort();
    va_end(ap);
    json_object *o = json_tokener_parse(text);
    free(text);
    return o;
}

static int renew_master(struct apiserver_leases *l) {
    char ts[40];
    now_ts(l->s, ts);
    _cleanup_free_ char *v = kite_asprintf(
        "{\"kind\":\"Endpoints\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\",\"annotations\":{\"" ANN_ID "\":\"%s\",\""
        ANN_RENEW "\":\"%s\",\"" ANN_TTL "\":\"%lld\"}},\"subsets\":[{\"addresses\":[{\"ip\":\"%s\"}],\"ports\":[{\"name\":"
        "\"https\",\"port\":%u,\"protocol\":\"TCP\"}]}]}",
        l->ip, l->id, ts, (long long)l->ttl_s, l->ip, l->port);
    struct kite_record *cur = NULL;
    bool exists = kite_store_get(l->s->store, l->master_key, &cur) == 0;
    struct kite_write w = {.type = exists ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE, .key = l->master_key, .value = v,
                           .len = strlen(v)};
    kite_record_unref(cur);
    int e = kite_store_write(l->s->store, &w, NULL, NULL);
    return e == -EEXIST || e == -ENOENT ? 0 : e;
}

static int renew_identity(struct apiserver_leases *l) {
    char ts[40], host[256] = "";
    now_ts(l->s, ts);
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    json_object *want = parse(
        "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"kube-system\","
        "\"labels\":{\"" IDENTITY_LABEL "\":\"kube-apiserver\",\"kubernetes.io/hostname\":\"%s\"}},\"spec\":{\"holderIdentity\":"
        "\"%s\",\"leaseDurationSeconds\":%d,\"renewTime\":\"%s\"}}",
        l->id, host, l->holder, IDENTITY_LEASE_S, ts);
    static const char *const fields[] = {"spec", NULL};
    int e = want ? converge(l, l->leases, "kube-system", l->id, want, fields) : -EINVAL;
    json_object_put(want);
    return e;
}

static int cmp_server(const void *a, const void *b) {
    const struct server *x = a, *y = b;
    int c = strcmp(x->ip, y->ip);
    return c ? c : (x->port > y->port) - (x->port < y->port);
}

static int cmp_port(const void *a, const void *b) {
    const struct server *x = a, *y = b;
    return x->port != y->port ? (x->port > y->port) - (x->port < y->port) : strcmp(x->ip, y->ip);
}

/* The servers whose master lease is live (sorted by port, then address); expired leases deleted. */
static size_t live_servers(struct apiserver_leases *l, struct server *out) {
    struct kite_record **recs = NULL;
    size_t n = 0, k = 0;
    if (kite_store_range(l->s->store, MASTER_PREFIX, 0, NULL, 0, &recs, &n, NULL) < 0) return 0;
    int64_t now = kite_now_wall(l->s->clock);
    for (size_t i = 0; i < n; i++) {
        json_object *o = kite_apiserver_record_parse(recs[i]);
        json_object *ann = kite_obj_get(kite_obj_meta(o), "annotations");
        const char *renew = kite_obj_str(ann, ANN_RENEW), *ttl = kite_obj_str(ann, ANN_TTL);
        int64_t t = 0;
        bool live = renew && ttl && kite_time_parse(renew, &t) == 0 && t + atoll(ttl) * KITE_NS_PER_SEC > now;
        json_object *sub = first(kite_obj_get(o, "subsets"));
        const char *ip = kite_obj_str(first(kite_obj_get(sub, "addresses")), "ip");
        json_object *pv = kite_obj_get(first(kite_obj_get(sub, "ports")), "port");
        int64_t port = pv ? json_object_get_int64(pv) : 0;
        if (!live) {
            struct kite_write w = {.type = KITE_WRITE_DELETE, .key = recs[i]->key, .expect_mod_rev = recs[i]->mod_rev};
            if (kite_store_write(l->s->store, &w, NULL, NULL) == 0)
                log_info("apiserver", "the master lease %s expired: the kubernetes Service drops it", recs[i]->key);
        } else if (ip && port > 0 && port < 65536 && k < SERVERS_MAX && strlen(ip) < INET_ADDRSTRLEN) {
            snprintf(out[k].ip, sizeof out[k].ip, "%s", ip);
            out[k++].port = (unsigned)port;
        }
        json_object_put(o);
        kite_record_unref(recs[i]);
    }
    free(recs);
    qsort(out, k, sizeof *out, cmp_port);
    return k;
}

/* default/kubernetes's Endpoints (a subset per port) and EndpointSlices (one per port: the first
 * named kubernetes, as kube-apiserver's, the others kubernetes-<port>) listing servers. */
static int reconcile(struct apiserver_leases *l) {
    struct server sv[SERVERS_MAX];
    size_t n = live_servers(l, sv);
    if (!n) return 0;
    struct kite_buf subsets = {0};
    kite_buf_putc(&subsets, '[');
    size_t nslices = 0;
    int ret = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && sv[j].port == sv[i].port) j++;
        qsort(sv + i, j - i, sizeof *sv, cmp_server);
        struct kite_buf addrs = {0}, eps = {0};
        for (size_t k = i; k < j; k++) {
            kite_buf_printf(&addrs, "%s{\"ip\":\"%s\"}", k > i ? "," : "", sv[k].ip);
            kite_buf_printf(&eps, "%s{\"addresses\":[\"%s\"],\"conditions\":{\"ready\":true}}", k > i ? "," : "", sv[k].ip);
        }
        kite_buf_printf(&subsets, "%s{\"addresses\":[%s],\"ports\":[{\"name\":\"https\",\"port\":%u,\"protocol\":\"TCP\"}]}",
                        i ? "," : "", addrs.p, sv[i].port);
        char name[32];
        if (nslices) snprintf(name, sizeof name, "kubernetes-%u", sv[i].port);
        else snprintf(name, sizeof name, "kubernetes");
        json_object *slice = parse(
            "{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1\",\"metadata\":{\"name\":\"%s\",\"namespace\":"
            "\"default\",\"labels\":{\"kubernetes.io/service-name\":\"kubernetes\"}},\"addressType\":\"IPv4\",\"endpoints\":[%s],"
            "\"ports\":[{\"name\":\"https\",\"port\":%u,\"protocol\":\"TCP\"}]}",
            name, eps.p, sv[i].port);
        static const char *const fields[] = {"addressType", "endpoints", "ports", NULL};
        int e = slice ? converge(l, l->slices, "default", name, slice, fields) : -EINVAL;
        if (e < 0) ret = e;
        json_object_put(slice);
        kite_buf_release(&addrs);
        kite_buf_release(&eps);
        nslices++;
        i = j;
    }
    kite_buf_putc(&subsets, ']');
    json_object *ep = parse("{\"kind\":\"Endpoints\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"kubernetes\",\"namespace\":"
                            "\"default\",\"labels\":{\"endpointslice.kubernetes.io/skip-mirror\":\"true\"}},\"subsets\":%s}",
                            subsets.p);
    kite_buf_release(&subsets);
    static const char *const fields[] = {"subsets", NULL};
    /* the registry may not serve v1 Endpoints (then the slices alone list the servers) */
    int e = !l->endpoints ? 0 : ep ? converge(l, l->endpoints, "default", "kubernetes", ep, fields) : -EINVAL;
    if (e < 0) ret = e;
    json_object_put(ep);
    /* slices of ports no live server has any more */
    _cleanup_free_ char *prefix = kite_object_key(l->slices, "default", "kubernetes-");
    struct kite_record **recs = NULL;
    size_t nr = 0;
    if (kite_store_range(l->s->store, prefix, 0, NULL, 0, &recs, &nr, NULL) == 0) {
        for (size_t i = 0; i < nr; i++) {
            json_object *o = kite_apiserver_record_object(recs[i]);
            const char *nm = kite_meta_str(o, "name");
            unsigned port = nm ? (unsigned)atoi(nm + strlen("kubernetes-")) : 0;
            bool wanted = false;
            for (size_t k = 1; k < n; k++)
                if (sv[k].port == port && sv[k].port != sv[0].port) wanted = true;
            if (!wanted && nm && strncmp(nm, "kubernetes-", 11) == 0) {
                struct kite_write w = {.type = KITE_WRITE_DELETE, .key = recs[i]->key, .expect_mod_rev = recs[i]->mod_rev};
                kite_store_write(l->s->store, &w, NULL, NULL);
            }
            kite_record_unref(recs[i]);
        }
        free(recs);
    }
    return ret;
}

static void pass(struct apiserver_leases *l) {
    int e;
    if ((e = renew_master(l)) < 0) log_warn("apiserver", "cannot renew the master lease %s: %s", l->master_key, strerror(-e));
    if ((e = renew_identity(l)) < 0) log_warn("apiserver", "cannot renew the lease kube-system/%s: %s", l->id, strerror(-e));
    if ((e = reconcile(l)) < 0) log_warn("apiserver", "cannot write the kubernetes Service's endpoints: %s", strerror(-e));
}

static void *leases_main(void *ud) {
    struct apiserver_leases *l = ud;
    int64_t period = KITE_MAX(1, l->ttl_s / 3) * KITE_NS_PER_SEC;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        pthread_mutex_unlock(&l->mu);
        pass(l);
        pthread_mutex_lock(&l->mu);
        struct timespec ts;
        kite_cond_deadline(&ts, period);
        while (!l->stop && pthread_cond_timedwait(&l->cond, &l->mu, &ts) == 0) {}
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int kite_apiserver_leases_start(struct kite_apiserver *s, const char *advertise, unsigned port, int64_t ttl_s,
                           struct apiserver_leases **ret, char **ret_error) {
    struct apiserver_leases *l = kite_calloc(1, sizeof *l);
    l->s = s;
    l->port = port;
    l->ttl_s = ttl_s > 0 ? ttl_s : KITE_ENDPOINT_LEASE_TTL_S;
    struct in_addr a;
    if (advertise && *advertise && strcmp(advertise, "0.0.0.0") != 0) {
        if (inet_pton(AF_INET, advertise, &a) != 1) {
            *ret_error = kite_asprintf("--advertise-address %s: want an IPv4 address", advertise);
            free(l);
            return -EINVAL;
        }
        snprintf(l->ip, sizeof l->ip, "%s", advertise);
    } else {
        host_address(l->ip);
    }
    char host[256] = "", uid[37];
    gethostname(host, sizeof host - 1);
    _cleanup_free_ char *who = kite_asprintf("%s/%s:%u", host, l->ip, port);
    snprintf(l->id, sizeof l->id, "apiserver-%016llx", (unsigned long long)fnv1a(who));
    kite_uuid4(uid);
    snprintf(l->holder, sizeof l->holder, "%s_%s", l->id, uid);
    l->master_key = kite_asprintf(MASTER_PREFIX "%s:%u", l->ip, port);
    l->leases = kite_registry_find("coordination.k8s.io", "v1", "leases");
    l->endpoints = kite_registry_find("", "v1", "endpoints");
    l->slices = kite_registry_find("discovery.k8s.io", "v1", "endpointslices");
    if (!l->leases || !l->slices) {
        free(l->master_key);
        free(l);
        *ret = NULL;
        return 0; /* a registry without them (unit tests' subsets): nothing to keep */
    }
    pthread_mutex_init(&l->mu, NULL);
    kite_cond_init_mono(&l->cond);
    pass(l); /* listed before the server says it is ready */
    if (pthread_create(&l->thread, NULL, leases_main, l) != 0) {
        *ret_error = kite_strdup("cannot start the apiserver lease thread");
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cond);
        free(l->master_key);
        free(l);
        return -EAGAIN;
    }
    pthread_setname_np(l->thread, "apiserver-lease");
    *ret = l;
    return 0;
}

void kite_apiserver_leases_stop(struct apiserver_leases *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    /* gone at once rather than after the lease's time: the others' next pass drops it, and so
     * does this last one */
    struct kite_write w = {.type = KITE_WRITE_DELETE, .key = l->master_key};
    kite_store_write(l->s->store, &w, NULL, NULL);
    reconcile(l);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cond);
    free(l->master_key);
    free(l);
}
