/* The values the server hands out (registry.h, kite_pools): Services' cluster IPs from
 * --service-cluster-ip-range and their node ports from 30000-32767, as kube-apiserver's
 * allocators, and the `kubernetes` Service that holds the range's first address.
 *
 * What is in use is derived from the stored objects, never stored apart from them: at start
 * the kinds' watch caches are listed, then a watcher drained on the store's writer thread
 * follows every change (as the Node authorizer's graph does), so a value an object holds is
 * marked before the write that stored it is acknowledged, and freed when the object is deleted
 * or lets it go, however that happens (DELETE, a namespace's deletion, an update to
 * ExternalName). A write that allocates reserves its values for its own lifetime: a write that
 * fails (validation, a conflict, a name already taken) or is a dry run leaves nothing behind,
 * and one that succeeds hands its values over to the stored object before its reservation
 * ends. A write recomputed after a conflict may take again what it reserved. */
#include "apiserver/internal.h"
#include "base/map.h"

#include <arpa/inet.h>
#include <stdio.h>

/* KEP-3070: dynamic allocation prefers the range above this band, so addresses picked by hand
 * from its start rarely collide: min(max(16, size / 16), 256). */
#define BAND_MIN 16
#define BAND_MAX 256
#define BAND_STEP 16

struct pool {
    uint32_t base, size;  /* values base .. base + size - 1 */
    uint32_t lo, hi;      /* offsets a value may take: [lo, hi) */
    uint32_t band;        /* offsets below it are picked last */
    uint8_t *stored;      /* per offset: objects holding it (saturating) */
    uint8_t *reserved;    /* per offset: writes in flight holding it */
    char range[48];
};

struct held {
    size_t n;
    struct kite_pool_value v[];
};

struct kite_pools_state {
    pthread_mutex_t mu;
    struct pool pools[KITE_POOL_COUNT];
    struct kite_map held;      /* stored key -> struct held */
    const struct kite_resource *res;
    struct kite_wcache *cache;
    struct kite_watcher *w;
    bool broken;
};

/* A write's view of the pools: what it reserved (released by pools_op_end). */
struct kite_pools_op {
    struct kite_pools iface;
    struct kite_pools_state *st;
    size_t n;
    struct kite_pool_value taken[KITE_POOL_VALUES_MAX];
};

static int parse_cidr(const char *s, uint32_t *ret_base, unsigned *ret_prefix) {
    char ip[INET_ADDRSTRLEN];
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || (size_t)(slash - s) >= sizeof ip) return -EINVAL;
    memcpy(ip, s, (size_t)(slash - s));
    ip[slash - s] = 0;
    char *end;
    unsigned long prefix = strtoul(slash + 1, &end, 10);
    struct in_addr a;
    if (*end || end == slash + 1 || prefix > 32 || inet_pton(AF_INET, ip, &a) != 1) return -EINVAL;
    uint32_t base = ntohl(a.s_addr);
    uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
    if (base & ~mask) return -EINVAL; /* host bits set: say the network */
    *ret_base = base;
    *ret_prefix = (unsigned)prefix;
    return 0;
}

static void pool_init(struct pool *p, uint32_t base, uint32_t size, uint32_t lo, uint32_t hi, uint32_t band) {
    p->base = base;
    p->size = size;
    p->lo = lo;
    p->hi = hi;
    p->band = band;
    p->stored = kite_calloc(size, 1);
    p->reserved = kite_calloc(size, 1);
}

static bool in_use(const struct pool *p, uint32_t off) { return p->stored[off] || p->reserved[off]; }

/* ---- the stored objects' values (the watcher) -------------------------------------------- */

static void mark(struct kite_pools_state *st, const struct kite_pool_value *v, size_t n, int delta) {
    for (size_t i = 0; i < n; i++) {
        struct pool *p = &st->pools[v[i].pool];
        if (v[i].v < p->base || v[i].v - p->base >= p->size) continue; /* outside today's range */
        uint8_t *c = &p->stored[v[i].v - p->base];
        if (delta > 0 && *c < UINT8_MAX) (*c)++;
        else if (delta < 0 && *c > 0) (*c)--;
    }
}

static void apply(struct kite_pools_state *st, struct kite_record *rec, bool deleted) {
    struct held *old = kite_map_del(&st->held, rec->key);
    if (old) {
        mark(st, old->v, old->n, -1);
        free(old);
    }
    if (deleted) return;
    struct kite_pool_value v[KITE_POOL_VALUES_MAX];
    size_t n = st->res->held(record_object(rec), v, KITE_POOL_VALUES_MAX);
    if (!n) return;
    struct held *h = kite_malloc(sizeof *h + n * sizeof *v);
    h->n = n;
    memcpy(h->v, v, n * sizeof *v);
    mark(st, v, n, +1);
    kite_map_put(&st->held, rec->key, h);
}

static void drain(struct kite_pools_state *st) {
    struct kite_watch_event evs[16];
    pthread_mutex_lock(&st->mu);
    int n;
    while ((n = kite_watcher_next(st->w, evs, KITE_ARRAY_SIZE(evs))) > 0)
        for (int i = 0; i < n; i++) {
            apply(st, evs[i].rec, evs[i].type == KITE_EV_DELETED);
            kite_record_unref(evs[i].rec);
            kite_record_unref(evs[i].prev);
        }
    if (n == -EPIPE && !st->broken) {
        /* cannot happen while every notify drains the queue; should it, allocate nothing
         * rather than hand out an address that may be in use */
        st->broken = true;
        log_error("apiserver", "the allocator of service IPs and node ports fell behind the services: allocation refused");
    }
    pthread_mutex_unlock(&st->mu);
}

static void on_change(void *ud) { drain(ud); }

/* ---- a write's allocations ------------------------------------------------------------------- */

static bool op_holds(struct kite_pools_op *op, enum kite_pool pool, uint32_t v) {
    for (size_t i = 0; i < op->n; i++)
        if (op->taken[i].pool == pool && op->taken[i].v == v) return true;
    return false;
}

static int op_reserve(struct kite_pools_op *op, struct pool *p, enum kite_pool pool, uint32_t off) {
    if (op->n == KITE_POOL_VALUES_MAX) return -ENOSPC;
    p->reserved[off] = 1;
    op->taken[op->n++] = (struct kite_pool_value){pool, p->base + off};
    return 0;
}

static int take(struct kite_pools *ps, enum kite_pool pool, uint32_t v) {
    struct kite_pools_op *op = ps->ud;
    struct kite_pools_state *st = op->st;
    struct pool *p = &st->pools[pool];
    if (v < p->base || v - p->base < p->lo || v - p->base >= p->hi) return -ERANGE;
    if (op_holds(op, pool, v)) return 0;
    pthread_mutex_lock(&st->mu);
    uint32_t off = v - p->base;
    int r = st->broken ? -EAGAIN : in_use(p, off) ? -EEXIST : op_reserve(op, p, pool, off);
    pthread_mutex_unlock(&st->mu);
    return r;
}

/* The first free offset in [from, to), scanning from start (wrapping), or -1. */
static int64_t scan(const struct pool *p, uint32_t from, uint32_t to, uint32_t start) {
    if (from >= to) return -1;
    uint32_t n = to - from;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off = from + (start - from + i) % n;
        if (!in_use(p, off)) return off;
    }
    return -1;
}

static int pick(struct kite_pools *ps, enum kite_pool pool, uint32_t *ret) {
    struct kite_pools_op *op = ps->ud;
    struct kite_pools_state *st = op->st;
    struct pool *p = &st->pools[pool];
    uint32_t rnd;
    kite_random_bytes(&rnd, sizeof rnd);
    uint32_t band = p->band > p->lo ? p->band : p->lo;
    pthread_mutex_lock(&st->mu);
    int64_t off = -1;
    if (!st->broken) {
        off = scan(p, band, p->hi, band + (p->hi > band ? rnd % (p->hi - band) : 0));
        if (off < 0) off = scan(p, p->lo, band, p->lo + (band > p->lo ? rnd % (band - p->lo) : 0));
    }
    int r = off < 0 ? -ENOSPC : op_reserve(op, p, pool, (uint32_t)off);
    pthread_mutex_unlock(&st->mu);
    if (r == 0) *ret = p->base + (uint32_t)off;
    return r;
}

static const char *range(struct kite_pools *ps, enum kite_pool pool) {
    struct kite_pools_op *op = ps->ud;
    return op->st->pools[pool].range;
}

static uint32_t first(struct kite_pools *ps, enum kite_pool pool) {
    struct kite_pools_op *op = ps->ud;
    return op->st->pools[pool].base + op->st->pools[pool].lo;
}

struct kite_pools_op *pools_op_new(struct kite_apiserver *s) {
    if (!s->pools) return NULL;
    struct kite_pools_op *op = kite_calloc(1, sizeof *op);
    op->st = s->pools;
    op->iface = (struct kite_pools){.take = take, .pick = pick, .range = range, .first = first, .ud = op};
    return op;
}

struct kite_pools *pools_op_iface(struct kite_pools_op *op) { return &op->iface; }

void pools_op_end(struct kite_pools_op *op) {
    if (!op) return;
    struct kite_pools_state *st = op->st;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < op->n; i++) {
        struct pool *p = &st->pools[op->taken[i].pool];
        p->reserved[op->taken[i].v - p->base] = 0;
    }
    pthread_mutex_unlock(&st->mu);
    free(op);
}

/* ---- start --------------------------------------------------------------------------------- */

int pools_start(struct kite_apiserver *s, const char *cidr, char **ret_error) {
    const struct kite_resource *res = NULL;
    for (size_t k = 0; kite_resources[k] && !res; k++)
        if (kite_resources[k]->held) res = kite_resources[k];
    if (!res) return 0;
    uint32_t base;
    unsigned prefix;
    if (parse_cidr(cidr, &base, &prefix) < 0 || prefix < KITE_SERVICE_CIDR_PREFIX_MIN || prefix > KITE_SERVICE_CIDR_PREFIX_MAX) {
        *ret_error = kite_asprintf("--service-cluster-ip-range %s: want an IPv4 network address with a prefix from /%d to /%d "
                                   "(e.g. %s)", cidr, KITE_SERVICE_CIDR_PREFIX_MIN, KITE_SERVICE_CIDR_PREFIX_MAX,
                                   KITE_SERVICE_CIDR_DEFAULT);
        return -EINVAL;
    }
    struct kite_pools_state *st = kite_calloc(1, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    uint32_t size = 1u << (32 - prefix);
    uint32_t band = size / BAND_STEP < BAND_MIN ? BAND_MIN : size / BAND_STEP > BAND_MAX ? BAND_MAX : size / BAND_STEP;
    /* neither the network nor the broadcast address */
    pool_init(&st->pools[KITE_POOL_SERVICE_IP], base, size, 1, size - 1, band);
    snprintf(st->pools[KITE_POOL_SERVICE_IP].range, sizeof st->pools[0].range, "%s", cidr);
    uint32_t ports = KITE_NODE_PORT_RANGE_LAST - KITE_NODE_PORT_RANGE_FIRST + 1;
    pool_init(&st->pools[KITE_POOL_NODE_PORT], KITE_NODE_PORT_RANGE_FIRST, ports, 0, ports, 0);
    snprintf(st->pools[KITE_POOL_NODE_PORT].range, sizeof st->pools[0].range, "%d-%d", KITE_NODE_PORT_RANGE_FIRST,
             KITE_NODE_PORT_RANGE_LAST);
    st->res = res;
    st->cache = storage_cache(s, res);
    s->pools = st;
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev = 0;
    int r = kite_wcache_list(st->cache, NULL, NULL, 0, NULL, NULL, &recs, &n, &rev, NULL);
    if (r < 0) {
        *ret_error = kite_asprintf("cannot list %s to find the cluster IPs in use: %s", res->plural, strerror(-r));
        return r;
    }
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < n; i++) {
        apply(st, recs[i], false);
        kite_record_unref(recs[i]);
    }
    pthread_mutex_unlock(&st->mu);
    free(recs);
    r = kite_wcache_watch(st->cache, NULL, rev, KITE_WATCHER_QUEUE_MAX, SIZE_MAX, NULL, on_change, st, &st->w);
    if (r < 0) {
        *ret_error = kite_asprintf("cannot watch %s: %s", res->plural, strerror(-r));
        return r;
    }
    drain(st);
    return 0;
}

void pools_free(struct kite_pools_state *st) {
    if (!st) return;
    kite_watcher_close(st->w);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&st->held, &i, &k, &v);) free(v);
    kite_map_release(&st->held);
    for (size_t i = 0; i < KITE_POOL_COUNT; i++) {
        free(st->pools[i].stored);
        free(st->pools[i].reserved);
    }
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* ---- the kubernetes Service ------------------------------------------------------------------ */

int pools_bootstrap_kubernetes(struct kite_apiserver *s, uint16_t port) {
    struct kite_pools_state *st = s->pools;
    const struct kite_resource *r = st ? st->res : NULL;
    if (!r || strcmp(r->plural, "services") != 0) return 0;
    _cleanup_free_ char *key = kite_object_key(r, "default", "kubernetes");
    struct kite_record *cur = kite_wcache_get(st->cache, key);
    if (cur) {
        kite_record_unref(cur);
        return 0;
    }
    struct pool *p = &st->pools[KITE_POOL_SERVICE_IP];
    pthread_mutex_lock(&st->mu);
    bool taken = in_use(p, p->lo);
    pthread_mutex_unlock(&st->mu);
    char ip[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = htonl(p->base + p->lo)};
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    if (taken) {
        log_warn("apiserver", "cannot create the kubernetes Service: its address %s is held by another Service", ip);
        return 0;
    }
    json_object *o = NULL;
    _cleanup_free_ char *text = kite_asprintf(
        "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"kubernetes\",\"namespace\":\"default\","
        "\"labels\":{\"component\":\"apiserver\",\"provider\":\"kubernetes\"}},\"spec\":{\"clusterIP\":\"%s\","
        "\"ports\":[{\"name\":\"https\",\"port\":443,\"protocol\":\"TCP\",\"targetPort\":%u}],\"type\":\"ClusterIP\","
        "\"sessionAffinity\":\"None\"}}",
        ip, (unsigned)port);
    o = json_tokener_parse(text);
    int e = apiserver_create_sync(s, r, o);
    json_object_put(o);
    return e == -EEXIST ? 0 : e;
}

/* ---- the kube-dns Service -------------------------------------------------------------------- */

int pools_bootstrap_kube_dns(struct kite_apiserver *s) {
    struct kite_pools_state *st = s->pools;
    const struct kite_resource *r = st ? st->res : NULL;
    if (!r || strcmp(r->plural, "services") != 0) return 0;
    _cleanup_free_ char *key = kite_object_key(r, "kube-system", "kube-dns");
    struct kite_record *cur = kite_wcache_get(st->cache, key);
    if (cur) { /* made before, or by the cluster's user: kept as it is */
        const char *cip = kite_obj_path_str(record_object(cur), "spec.clusterIP"); /* borrowed */
        struct in_addr a;
        if (cip && inet_pton(AF_INET, cip, &a) == 1) snprintf(s->kube_dns_ip, sizeof s->kube_dns_ip, "%s", cip);
        kite_record_unref(cur);
        return 0;
    }
    struct pool *p = &st->pools[KITE_POOL_SERVICE_IP];
    pthread_mutex_lock(&st->mu);
    bool taken = in_use(p, KITE_KUBE_DNS_OFFSET);
    pthread_mutex_unlock(&st->mu);
    char ip[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = htonl(p->base + KITE_KUBE_DNS_OFFSET)};
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    if (taken) {
        log_warn("apiserver", "cannot create the kube-dns Service: its address %s is held by another Service", ip);
        return 0;
    }
    /* as kubeadm's CoreDNS addon has it (less the metrics port: nothing serves it here) */
    _cleanup_free_ char *text = kite_asprintf(
        "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"kube-dns\",\"namespace\":\"kube-system\","
        "\"labels\":{\"k8s-app\":\"kube-dns\",\"kubernetes.io/cluster-service\":\"true\",\"kubernetes.io/name\":\"CoreDNS\"}},"
        "\"spec\":{\"clusterIP\":\"%s\",\"selector\":{\"k8s-app\":\"kube-dns\"},\"ports\":[{\"name\":\"dns\",\"port\":53,"
        "\"protocol\":\"UDP\",\"targetPort\":53},{\"name\":\"dns-tcp\",\"port\":53,\"protocol\":\"TCP\",\"targetPort\":53}],"
        "\"type\":\"ClusterIP\",\"sessionAffinity\":\"None\"}}",
        ip);
    json_object *o = json_tokener_parse(text);
    int e = apiserver_create_sync(s, r, o);
    json_object_put(o);
    if (e == 0) snprintf(s->kube_dns_ip, sizeof s->kube_dns_ip, "%s", ip);
    return e == -EEXIST ? 0 : e;
}

const char *kite_apiserver_kube_dns_ip(struct kite_apiserver *s) { return s->kube_dns_ip[0] ? s->kube_dns_ip : NULL; }
