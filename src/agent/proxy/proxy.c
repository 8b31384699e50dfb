/* The proxy's informers and sync thread: handlers keep the Services and EndpointSlices in
 * two maps, note which Services changed (a slice names its Service by label) and wake the
 * thread. The first sync, once both informers have listed, writes the whole table; later ones
 * rewrite only the changed Services' chains and elements, each in one transaction. A partial
 * sync that fails is followed by a full one. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/proxy/proxy.h"
#include "base/log.h"
#include "client/informer.h"

#define PROXY_LOG "proxy"

struct kite_proxy {
    struct kite_proxy_ruleset_options rules;
    char *table, *node, *cidr, *dns;
    struct kite_informer *svc_inf, *slice_inf;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    json_object *services, *slices; /* key -> object, under lock */
    json_object *changed;           /* Service keys changed since the last sync, under lock */
    json_object *state;             /* what each Service owns in the table (sync thread only) */
    bool dirty, stopping, full;     /* full: the next sync writes the whole table */
    bool svc_synced, slices_synced; /* each informer delivered its first list */
    unsigned long syncs, full_syncs;
    pthread_t thread;
};

/* libnftables is loaded with dlopen on first use rather than linked: with libnftnl, libxtables
 * and libjansson it is ~0.4 MB of touched pages in every agent process, and only an agent with
 * --proxy-mode nftables (`kite up`'s) or `--cleanup` writes a table. As libarchive.h: the types
 * come from the library's header, the calls through this table of the few functions used. */
#define NFT_SONAME "libnftables.so.1"
#define NFT_FUNCTIONS(X)                                                                                          \
    X(nft_ctx_new) X(nft_ctx_free) X(nft_ctx_buffer_output) X(nft_ctx_buffer_error) X(nft_ctx_get_output_buffer) \
    X(nft_ctx_get_error_buffer) X(nft_ctx_set_dry_run) X(nft_run_cmd_from_buffer)
static struct {
#define NFT_SLOT(name) __typeof__(name) *name;
    NFT_FUNCTIONS(NFT_SLOT)
#undef NFT_SLOT
} nft_lib;
static char *nft_load_error;
static pthread_once_t nft_once = PTHREAD_ONCE_INIT;

static void nft_load(void) {
    void *h = dlopen(NFT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        nft_load_error = kite_asprintf("loading %s (Debian package libnftables1): %s", NFT_SONAME, e ? e : "not found");
        return;
    }
#define NFT_LOOKUP(name)                                                              \
    if (!(*(void **)&nft_lib.name = dlsym(h, #name))) {                               \
        nft_load_error = kite_asprintf("%s has no %s", NFT_SONAME, #name);            \
        dlclose(h);                                                                   \
        return;                                                                       \
    }
    NFT_FUNCTIONS(NFT_LOOKUP)
#undef NFT_LOOKUP
}

/* 0, or -ENOENT with *ret_err (may be NULL) naming what is missing */
static int nft_loaded(char **ret_err) {
    pthread_once(&nft_once, nft_load);
    if (!nft_load_error) return 0;
    if (ret_err) *ret_err = kite_strdup(nft_load_error);
    return -ENOENT;
}

struct nft_ctx *kite_proxy_nft_new(void) {
    if (nft_loaded(NULL) < 0) return NULL;
    struct nft_ctx *nft = nft_lib.nft_ctx_new(NFT_CTX_DEFAULT);
    if (!nft) return NULL;
    nft_lib.nft_ctx_buffer_output(nft);
    nft_lib.nft_ctx_buffer_error(nft);
    return nft;
}

void kite_proxy_nft_free(struct nft_ctx *nft) {
    if (nft) nft_lib.nft_ctx_free(nft);
}

int kite_proxy_nft_exec(struct nft_ctx *nft, const char *script, char **ret_err) {
    int r = nft_lib.nft_run_cmd_from_buffer(nft, script) == 0 ? 0 : -EIO;
    const char *e = nft_lib.nft_ctx_get_error_buffer(nft); /* read: the buffers start empty next time */
    (void)nft_lib.nft_ctx_get_output_buffer(nft);
    if (r < 0 && ret_err) *ret_err = kite_strdup(e ? e : "");
    return r;
}

int kite_proxy_nft_run(const char *script, bool dry_run, char **ret_err) {
    int r = nft_loaded(ret_err);
    if (r < 0) return r;
    struct nft_ctx *nft = kite_proxy_nft_new();
    if (!nft) return -ENOMEM;
    nft_lib.nft_ctx_set_dry_run(nft, dry_run);
    r = kite_proxy_nft_exec(nft, script, ret_err);
    kite_proxy_nft_free(nft);
    return r;
}

/* the key of the Service a slice belongs to (its kubernetes.io/service-name label), or NULL */
static char *slice_service(json_object *sl) {
    json_object *md = NULL, *labels = NULL, *name = NULL, *ns = NULL;
    if (!sl || !json_object_object_get_ex(sl, "metadata", &md) || !json_object_object_get_ex(md, "namespace", &ns) ||
        !json_object_object_get_ex(md, "labels", &labels) ||
        !json_object_object_get_ex(labels, "kubernetes.io/service-name", &name))
        return NULL;
    return kite_asprintf("%s/%s", json_object_get_string(ns), json_object_get_string(name));
}

/* obj stored under its key in map (or removed); the Service keys in touched[] marked changed */
static void changed(struct kite_proxy *p, json_object *map, json_object *obj, bool del, char *touched[2]) {
    _cleanup_free_ char *key = kite_informer_key(obj);
    if (!key) return;
    pthread_mutex_lock(&p->lock);
    if (del) json_object_object_del(map, key);
    else json_object_object_add(map, key, json_object_get(obj));
    for (int i = 0; i < 2; i++)
        if (touched[i]) json_object_object_add(p->changed, touched[i], NULL);
    p->dirty = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void svc_change(struct kite_proxy *p, json_object *o, bool del) {
    _cleanup_free_ char *key = kite_informer_key(o);
    changed(p, p->services, o, del, (char *[2]){key, NULL});
}
static void sl_change(struct kite_proxy *p, json_object *old, json_object *o, bool del) {
    _cleanup_free_ char *a = slice_service(old), *b = slice_service(o); /* a slice may change owner */
    changed(p, p->slices, o, del, (char *[2]){a, b});
}
static void svc_add(void *ud, json_object *o) { svc_change(ud, o, false); }
static void svc_upd(void *ud, json_object *old, json_object *o) { svc_change(ud, o, false); }
static void svc_del(void *ud, json_object *o) { svc_change(ud, o, true); }
static void sl_add(void *ud, json_object *o) { sl_change(ud, NULL, o, false); }
static void sl_upd(void *ud, json_object *old, json_object *o) { sl_change(ud, old, o, false); }
static void sl_del(void *ud, json_object *o) { sl_change(ud, NULL, o, true); }
static void on_synced(struct kite_proxy *p, bool *flag) {
    pthread_mutex_lock(&p->lock);
    *flag = true; /* a flag per informer: one that lists again does not count twice */
    p->dirty = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}
static void svc_synced(void *ud) { on_synced(ud, &((struct kite_proxy *)ud)->svc_synced); }
static void sl_synced(void *ud) { on_synced(ud, &((struct kite_proxy *)ud)->slices_synced); }

static void *sync_thread(void *ud) {
    struct kite_proxy *p = ud;
    /* one libnftables context for every sync: less to set up per transaction */
    struct nft_ctx *nft = kite_proxy_nft_new();
    if (!nft) abort();
    pthread_mutex_lock(&p->lock);
    for (;;) {
        /* the first sync waits for both lists: a ruleset from half the objects would reject
         * Services whose slices are not read yet */
        while (!p->stopping && (!p->dirty || !p->svc_synced || !p->slices_synced))
            pthread_cond_wait(&p->cond, &p->lock);
        if (p->stopping) break;
        p->dirty = false;
        bool full = p->full;
        _cleanup_free_ char *script = full ? kite_proxy_ruleset(&p->rules, p->services, p->slices, p->state)
                                           : kite_proxy_ruleset_partial(&p->rules, p->services, p->slices,
                                                                        p->changed, p->state);
        json_object_put(p->changed);
        p->changed = json_object_new_object();
        p->full = false;
        pthread_mutex_unlock(&p->lock);
        _cleanup_free_ char *err = NULL;
        int r = script ? kite_proxy_nft_exec(nft, script, &err) : 0;
        pthread_mutex_lock(&p->lock);
        if (r < 0) {
            log_error(PROXY_LOG, "nftables (%s sync): %s", full ? "full" : "partial", err ? err : "failed");
            /* the table is behind the state now: the next sync (a retry soon) writes it whole */
            p->full = p->dirty = true;
            pthread_mutex_unlock(&p->lock);
            usleep(full ? 1000000 : 0);
            pthread_mutex_lock(&p->lock);
        }
        if (script) p->syncs++;
        if (script && full) p->full_syncs++;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
    kite_proxy_nft_free(nft);
    return NULL;
}

/* A sysctl set to 1 when it exists; what could not be set is logged. */
static void sysctl_on(const char *path) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) log_error(PROXY_LOG, "cannot open %s: %s", path, strerror(errno));
        return;
    }
    if (write(fd, "1", 1) != 1) log_error(PROXY_LOG, "cannot set %s: %s", path, strerror(errno));
    close(fd);
}

int kite_proxy_start(const struct kite_proxy_options *o, struct kite_proxy **ret, char **ret_err) {
    struct kite_proxy *p = kite_calloc(1, sizeof *p);
    p->table = kite_strdup(o->rules.table ? o->rules.table : KITE_PROXY_TABLE_DEFAULT);
    p->node = o->rules.node_name ? kite_strdup(o->rules.node_name) : NULL;
    p->cidr = o->rules.pod_cidr ? kite_strdup(o->rules.pod_cidr) : NULL;
    p->dns = o->rules.local_dns ? kite_strdup(o->rules.local_dns) : NULL;
    p->rules = (struct kite_proxy_ruleset_options){.table = p->table, .node_name = p->node, .pod_cidr = p->cidr,
                                                    .masquerade_pod_traffic = o->rules.masquerade_pod_traffic,
                                                    .local_dns = p->dns};
    p->services = json_object_new_object();
    p->slices = json_object_new_object();
    p->changed = json_object_new_object();
    p->state = json_object_new_object();
    p->full = true;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    /* the host routes pod and service traffic; bridged replies pass the ip hooks (conntrack
     * undoes the DNAT of a same-bridge endpoint) where br_netfilter is loaded */
    sysctl_on("/proc/sys/net/ipv4/ip_forward");
    sysctl_on("/proc/sys/net/bridge/bridge-nf-call-iptables");
    /* a table left by an agent that did not stop cleanly is replaced by the first sync; an
     * nftables that cannot run at all is refused at start */
    _cleanup_free_ char *probe = kite_proxy_cleanup_script(p->table);
    int r = kite_proxy_nft_run(probe, false, ret_err);
    if (r < 0) goto fail;
    if ((r = -pthread_create(&p->thread, NULL, sync_thread, p)) < 0) goto fail;
    struct kite_informer_options io = {.client = o->client, .path = "/api/v1/services", .name = "proxy-svc",
                                       .n_handlers = 1};
    io.handlers[0] = (struct kite_informer_handlers){.add = svc_add, .update = svc_upd, .del = svc_del,
                                                     .synced = svc_synced, .ud = p};
    if ((r = kite_informer_start(&io, &p->svc_inf)) < 0) goto fail_thread;
    io.path = "/apis/discovery.k8s.io/v1/endpointslices";
    io.name = "proxy-slices";
    io.handlers[0] = (struct kite_informer_handlers){.add = sl_add, .update = sl_upd, .del = sl_del,
                                                     .synced = sl_synced, .ud = p};
    if ((r = kite_informer_start(&io, &p->slice_inf)) < 0) goto fail_thread;
    *ret = p;
    return 0;
fail_thread:
    if (ret_err && !*ret_err) *ret_err = kite_asprintf("cannot start the informers: %s", strerror(-r));
    kite_proxy_stop(p);
    return r;
fail:
    if (ret_err && !*ret_err) *ret_err = kite_strdup(strerror(-r));
    p->thread = 0;
    kite_proxy_stop(p);
    return r;
}

void kite_proxy_stop(struct kite_proxy *p) {
    if (!p) return;
    kite_informer_stop(p->svc_inf);
    kite_informer_stop(p->slice_inf);
    if (p->thread) {
        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
    }
    _cleanup_free_ char *script = kite_proxy_cleanup_script(p->table), *err = NULL;
    if (kite_proxy_nft_run(script, false, &err) < 0) log_error(PROXY_LOG, "removing table %s: %s", p->table, err ? err : "");
    json_object_put(p->services);
    json_object_put(p->slices);
    json_object_put(p->changed);
    json_object_put(p->state);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->table);
    free(p->node);
    free(p->cidr);
    free(p->dns);
    free(p);
}

unsigned long kite_proxy_syncs(struct kite_proxy *p, unsigned long *ret_full) {
    pthread_mutex_lock(&p->lock);
    unsigned long n = p->syncs;
    if (ret_full) *ret_full = p->full_syncs;
    pthread_mutex_unlock(&p->lock);
    return n;
}
