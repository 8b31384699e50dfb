/* Agent lifecycle and its loop. kite_agent_step() is the whole state machine; the agent
 * thread only waits on a condition variable until the deadline step() returns (or until the
 * watch thread reports a deletion), so an idle agent costs two wakeups per 10 s. */
#include <ctype.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent-int.h"
#include "agent/logs/logs.h"
#include "pki/pki.h"
#include "base/version.h"

#include <sys/stat.h>
#include "agent/runtime/ipam.h"
#include "agent/runtime/net.h"
#include "agent/runtime/runtime.h"
#include "base/log.h"

#define REG_BACKOFF_MIN (100 * KITE_NS_PER_MS) /* registration: 100 ms doubling to 7 s */
#define REG_BACKOFF_MAX (7 * KITE_NS_PER_SEC)
#define WATCH_BACKOFF_MIN KITE_NS_PER_SEC
#define WATCH_BACKOFF_MAX (30 * KITE_NS_PER_SEC)

/* The runtime's Status before each node status: Ready names a real runtime failure
 * (kubelet's updateRuntimeUp message), never a slow or hung container. */
static void update_runtime_state(struct kite_agent *a) {
    _cleanup_free_ char *reason = NULL, *message = NULL;
    int r = kite_runtime_status(a->locked_rt, &reason, &message);
    free(a->runtime_error);
    a->runtime_error = r < 0 ? kite_asprintf("container runtime not ready: RuntimeReady=false reason:%s message:%s",
                                             reason ? reason : "", message ? message : "")
                             : NULL;
    a->src.runtime_ready = r == 0;
    a->src.runtime_error = a->runtime_error;
}

/* The machine's status source, in two steps (agent.h) */
static int machine_read(void *ud, void **ret, uint64_t *ret_digest) {
    struct kite_agent *a = ud;
    update_runtime_state(a);
    struct kite_ns_inputs *in = NULL;
    int r = kite_nodestatus_read(&a->ns, &a->src, &in);
    if (r < 0) return r;
    *ret_digest = kite_ns_inputs_digest(in);
    *ret = in;
    return 0;
}

static int machine_build(void *ud, void *in, json_object *prev, json_object **ret, struct kite_ns_events *ev) {
    struct kite_agent *a = ud;
    return kite_nodestatus_build(&a->ns, &a->src, in, prev, ret, ev);
}

static void machine_release(void *ud, void *in) { kite_ns_inputs_free(in); }

static const struct kite_agent_status_source machine_source = {machine_read, machine_build, machine_release};

char *kite_agent_default_node_name(void) {
    char host[256];
    if (gethostname(host, sizeof(host)) < 0) return NULL;
    host[sizeof(host) - 1] = 0;
    for (char *p = host; *p; p++) *p = (char)tolower((unsigned char)*p);
    return kite_strdup(host);
}

static int mkdir_p(const char *path) {
    _cleanup_free_ char *p = kite_strdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) < 0 && errno != EEXIST) return -errno;
        *s = '/';
    }
    if (mkdir(p, 0755) < 0 && errno != EEXIST) return -errno;
    return 0;
}

int kite_agent_new(const struct kite_agent_options *o, struct kite_agent **ret, char **ret_err) {
    const struct kite_agent_config *c = o->config;
    struct kite_agent *a = kite_calloc(1, sizeof(*a));
    a->bridge_fd = -1;
    a->cfg = c;
    a->clock = o->clock ? o->clock : kite_clock_real();
    pthread_mutex_init(&a->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->cond, &ca);
    pthread_condattr_destroy(&ca);
    kite_cancel_init(&a->watch_cancel);
    int r = 0;
    a->node_name = c->node_name ? kite_strdup(c->node_name) : kite_agent_default_node_name();
    if (!a->node_name || !*a->node_name) {
        if (ret_err) *ret_err = kite_strdup("cannot determine the node name (use --node-name)");
        r = -EINVAL;
        goto fail;
    }
    for (char *p = a->node_name; *p; p++) *p = (char)tolower((unsigned char)*p);
    a->kubelet_version = kite_strdup(o->kubelet_version ? o->kubelet_version : KITE_VERSION);
    /* "for backward compatibility" (kubelet defaults.go): an explicit update frequency with
     * no report frequency reports at the update frequency */
    a->report_freq_ns = c->update_freq_set && !c->report_freq_set ? c->status_update_freq_ns : c->status_report_freq_ns;
    a->ns = c->ns;
    a->ns.node_name = a->node_name;
    a->ns.node_ip = c->node_ip;
    a->ns.root_dir = c->root_dir;
    a->ns.kubelet_version = a->kubelet_version;
    if (o->client) {
        a->client = o->client;
    } else {
        struct kite_kubeconfig *kc = NULL;
        if (!o->kubeconfig) {
            if (ret_err) *ret_err = kite_strdup("no kubeconfig given (--kubeconfig)");
            r = -EINVAL;
            goto fail;
        }
        if ((r = kite_kubeconfig_load(o->kubeconfig, NULL, &kc, ret_err)) < 0) goto fail;
        /* heartbeat timeout = min(nodeStatusUpdateFrequency, leaseDuration), as the kubelet */
        int64_t t = KITE_MIN(c->status_update_freq_ns, (int64_t)c->lease_duration_s * KITE_NS_PER_SEC);
        struct kite_client_options co = {.timeout_ms = (long)KITE_MAX(t / KITE_NS_PER_MS, 1000), .user_agent = "kite-agent"};
        r = kite_client_new(kc, &co, &a->client);
        if (kc->ca_pem) a->kubeconfig_ca = kite_strdup(kc->ca_pem);
        kite_kubeconfig_free(kc);
        if (r < 0) {
            if (ret_err) *ret_err = kite_asprintf("creating API client: %s", strerror(-r));
            goto fail;
        }
        a->own_client = true;
    }
    if (o->status_fn || o->status_source) {
        a->status_fn = o->status_source ? NULL : o->status_fn;
        a->status_src = o->status_source;
        a->status_ud = o->status_ud;
    } else {
        a->status_src = &machine_source;
        a->status_ud = a;
        a->runtime = o->runtime;
        /* the root dir holds the agent's state and sizes ephemeral-storage: create it, as the
         * kubelet creates --root-dir */
        if ((r = mkdir_p(c->root_dir)) < 0) {
            if (ret_err) *ret_err = kite_asprintf("creating root dir %s: %s", c->root_dir, strerror(-r));
            goto fail;
        }
        if (!a->runtime) {
            _cleanup_free_ char *rerr = NULL;
            struct kite_runc_options ro = {.root_dir = c->root_dir, .pod_cidr = c->pod_cidr, .bridge = c->pod_bridge};
            if ((r = kite_runtime_runc_new(&ro, &a->runtime, &rerr)) < 0) {
                if (ret_err) *ret_err = kite_asprintf("starting the runc runtime: %s", rerr ? rerr : strerror(-r));
                goto fail;
            }
            a->own_runtime = true;
            if ((r = kite_net_bridge_claim(c->pod_bridge ? c->pod_bridge : KITE_NET_BRIDGE_DEFAULT, c->root_dir,
                                           &a->bridge_fd, &rerr)) < 0) {
                if (ret_err) *ret_err = kite_strdup(rerr ? rerr : strerror(-r));
                goto fail;
            }
        }
        if (c->serve_dns) {
            /* the node's DNS answers on the pod network's gateway, which every pod reaches
             * through its default route: pods name it when no --cluster-dns is given */
            struct kite_cidr cidr;
            if ((r = kite_cidr_parse(c->pod_cidr ? c->pod_cidr : KITE_NET_POD_CIDR_DEFAULT, &cidr, NULL)) < 0) goto fail;
            uint32_t gw = kite_cidr_gateway(&cidr);
            a->dns_addr = kite_asprintf("%u.%u.%u.%u", gw >> 24, (gw >> 16) & 255, (gw >> 8) & 255, gw & 255);
        }
        /* the pods thread and the node status both call the runtime: serialize them */
        a->locked_rt = kite_runtime_locked_new(a->runtime);
        struct kite_pods_options po = {.client = a->client, .runtime = a->locked_rt, .clock = a->clock,
                                       .node_name = a->node_name, .seed = o->seed, .root_dir = c->root_dir,
                                       .cluster_dns = c->cluster_dns ? c->cluster_dns : a->dns_addr,
                                       .cluster_domain = c->cluster_domain,
                                       .backoff_base_ns = c->backoff_base_ns,
                                       .allowed_unsafe_sysctls = c->allowed_unsafe_sysctls,
                                       .seccomp_default = c->seccomp_default};
        if ((r = kite_pods_new(&po, &a->pods)) < 0) {
            if (ret_err) *ret_err = kite_asprintf("starting the pod workers: %s", strerror(-r));
            goto fail;
        }
        a->src = (struct kite_ns_sources){.sysroot = o->sysroot ? o->sysroot : "", .clock = a->clock,
                                          .runtime = a->locked_rt, .runtime_ready = true, .pleg_healthy = true};
        /* machine facts re-read every 5 minutes; MemAvailable and the tasks on every status */
        a->src.cache = kite_ns_cache_new(a->src.sysroot, KITE_NS_FACTS_TTL_NS, 0);
    }
    int64_t now = kite_now_mono(a->clock);
    a->rng = o->seed ? o->seed : (uint64_t)kite_now_wall(a->clock) | 1;
    kite_backoff_init(&a->reg_backoff, REG_BACKOFF_MIN, REG_BACKOFF_MAX, 2.0, 0.0, a->rng);
    /* outage retries: 200 ms doubling, capped at one update period, jittered */
    kite_backoff_init(&a->status_backoff, 200 * KITE_NS_PER_MS, c->status_update_freq_ns, 2.0, 0.1, a->rng + 1);
    kite_backoff_init(&a->lease_backoff, 200 * KITE_NS_PER_MS, 7 * KITE_NS_PER_SEC, 2.0, 0.1, a->rng + 2);
    a->started = now;
    a->next_register = now;
    a->fast_period = KITE_AGENT_FAST_MIN_NS;
    *ret = a;
    return 0;
fail:
    kite_agent_free(a);
    return r;
}

void kite_agent_free(struct kite_agent *a) {
    if (!a) return;
    /* the pods thread calls the log endpoint back: it stops first; then the endpoint, before
     * the pods whose index its streams read */
    kite_pods_stop(a->pods);
    kite_logsrv_stop(a->logsrv);
    kite_pods_free(a->pods);
    kite_runtime_free(a->locked_rt);
    free(a->runtime_error);
    kite_ns_cache_free(a->src.cache);
    if (a->own_client) kite_client_free(a->client);
    if (a->own_runtime) kite_runtime_free(a->runtime);
    if (a->bridge_fd >= 0) close(a->bridge_fd);
    free(a->acked_status);
    free(a->lease);
    json_object_put(a->server_node);
    free(a->node_uid);
    free(a->deleted_uid);
    free(a->node_name);
    free(a->kubelet_version);
    free(a->kubeconfig_ca);
    free(a->dns_addr);
    kite_cancel_release(&a->watch_cancel);
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void kite_agent_node_event(struct kite_agent *a, json_object *event) {
    json_object *obj, *meta;
    const char *type = json_object_get_string(json_object_object_get(event, "type"));
    if (!json_object_object_get_ex(event, "object", &obj) || !json_object_object_get_ex(obj, "metadata", &meta)) return;
    if (!kite_streq(json_object_get_string(json_object_object_get(meta, "name")), a->node_name)) return;
    const char *uid = json_object_get_string(json_object_object_get(meta, "uid"));
    if (kite_streq(type, "ADDED") || kite_streq(type, "MODIFIED")) {
        /* the server's view of our Node, as the kubelet's informer: status diffs are taken
         * against it, so changes made by others (conditions set Unknown by the node
         * controller) are corrected. A private copy: json-c refcounts are not atomic. */
        json_object *copy = NULL;
        json_object_deep_copy(obj, &copy, NULL);
        pthread_mutex_lock(&a->lock);
        json_object_put(a->server_node);
        a->server_node = copy;
        pthread_mutex_unlock(&a->lock);
        return;
    }
    if (!kite_streq(type, "DELETED")) return;
    pthread_mutex_lock(&a->lock);
    free(a->deleted_uid);
    a->deleted_uid = kite_strdup(uid ? uid : "");
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
}

int64_t kite_agent_step(struct kite_agent *a) {
    int64_t now = kite_now_mono(a->clock);
    pthread_mutex_lock(&a->lock);
    char *deleted = TAKE_PTR(a->deleted_uid);
    json_object *server = TAKE_PTR(a->server_node);
    pthread_mutex_unlock(&a->lock);
    if (server && a->registered) {
        json_object *meta = json_object_object_get(server, "metadata"), *st = json_object_object_get(server, "status");
        if (kite_streq(json_object_get_string(json_object_object_get(meta, "uid")), a->node_uid) && st)
            kite_agent_set_acked_status(a, st);
    }
    json_object_put(server);
    /* a late DELETED for a Node we already replaced must not unregister the new one */
    if (deleted && a->registered && (!*deleted || kite_streq(deleted, a->node_uid)))
        kite_agent_node_gone(a, "node was deleted");
    free(deleted);

    if (!a->registered) {
        if (now < a->next_register) return a->next_register;
        bool again = a->ever_registered;
        int r = kite_agent_register(a);
        now = kite_now_mono(a->clock);
        if (r < 0) {
            if (!a->register_failing)
                log_warn(AGENT_LOG, "cannot %s node %s: %s; retrying", a->cfg->register_node ? "register" : "find",
                         a->node_name, strerror(-r));
            a->register_failing = true;
            a->next_register = now + kite_backoff_next(&a->reg_backoff);
            return a->next_register;
        }
        log_info(AGENT_LOG, "node %s %s (uid %s)", a->node_name,
                 !a->cfg->register_node ? "found" : again ? "registered again" : "registered", a->node_uid);
        a->register_failing = false;
        a->registered = a->ever_registered = true;
        a->stats.registrations++;
        kite_backoff_reset(&a->reg_backoff);
        a->last_report = now; /* the registration carried a full status */
        a->next_lease = now;  /* create or re-own the lease at once */
        a->next_status = now + a->fast_period;
        kite_agent_forget_lease(a);
        if (again && a->cfg->register_node) {
            _cleanup_free_ char *msg =
                kite_asprintf("Node %s was re-registered after its Node object was deleted (new uid %s)", a->node_name,
                              a->node_uid);
            kite_agent_post_event(a, "Normal", "NodeReregistered", msg);
        }
    }
    if (a->registered && now >= a->next_lease) kite_agent_sync_lease(a, now);
    if (a->registered && now >= a->next_status) kite_agent_sync_status(a, now);
    if (a->pods && a->acked_status && a->acked_gen != a->pods_fed_gen) {
        /* allocatable (admission) and the InternalIP (hostIP) for the pods */
        json_object *st = kite_agent_acked_status(a);
        if (st) kite_pods_node_status(a->pods, st);
        json_object_put(st);
        a->pods_fed_gen = a->acked_gen;
    }
    if (!a->registered) return a->next_register;
    return KITE_MIN(a->next_lease, a->next_status);
}

/* ---- threads ---- */

/* Waits until the agent clock reaches deadline, a wakeup or stop. Called with a->lock held. */
static void wait_until(struct kite_agent *a, int64_t deadline) {
    int64_t d = deadline - kite_now_mono(a->clock);
    if (d <= 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t t = (int64_t)ts.tv_sec * KITE_NS_PER_SEC + ts.tv_nsec + d;
    ts.tv_sec = (time_t)(t / KITE_NS_PER_SEC);
    ts.tv_nsec = (long)(t % KITE_NS_PER_SEC);
    pthread_cond_timedwait(&a->cond, &a->lock, &ts);
}

static void *agent_thread(void *ud) {
    struct kite_agent *a = ud;
    pthread_mutex_lock(&a->lock);
    while (!a->stopping) {
        pthread_mutex_unlock(&a->lock);
        int64_t next = kite_agent_step(a);
        pthread_mutex_lock(&a->lock);
        if (a->stopping || a->deleted_uid) continue;
        wait_until(a, next);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

static int on_watch_event(json_object *ev, void *ud) {
    kite_agent_node_event(ud, ev);
    return 0;
}

static void *watch_thread(void *ud) {
    struct kite_agent *a = ud;
    _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes?watch=true&fieldSelector=metadata.name%%3D%s", a->node_name);
    struct kite_backoff b;
    kite_backoff_init(&b, WATCH_BACKOFF_MIN, WATCH_BACKOFF_MAX, 2.0, 0.2, a->rng + 3);
    for (;;) {
        int64_t t0 = kite_now_mono(a->clock);
        int r = kite_client_watch(a->client, path, on_watch_event, a, &a->watch_cancel);
        if (r == -ECANCELED) break;
        /* a stream that lasted a while ended normally (server timeout): reconnect at once */
        if (r == 0 && kite_now_mono(a->clock) - t0 > WATCH_BACKOFF_MAX) kite_backoff_reset(&b);
        else if (r < 0) log_debug(AGENT_LOG, "node watch: %s", strerror(-r));
        int64_t deadline = kite_now_mono(a->clock) + kite_backoff_next(&b);
        pthread_mutex_lock(&a->lock);
        while (!a->stopping && kite_now_mono(a->clock) < deadline) wait_until(a, deadline);
        bool stop = a->stopping;
        pthread_mutex_unlock(&a->lock);
        if (stop) break;
    }
    return NULL;
}

/* The log endpoint, before the first status report so daemonEndpoints names its real port. */
static int start_logsrv(struct kite_agent *a, char **ret_err) {
    const struct kite_agent_config *c = a->cfg;
    _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
    int r = 0;
    if (c->client_ca_file && (r = kite_pki_read_file(c->client_ca_file, &ca)) < 0) {
        *ret_err = kite_asprintf("--client-ca-file %s: %s", c->client_ca_file, strerror(-r));
        return r;
    }
    if (!ca && a->kubeconfig_ca) ca = kite_strdup(a->kubeconfig_ca);
    if (!ca) {
        *ret_err = kite_strdup("the log endpoint needs a client CA (--client-ca-file or a kubeconfig with a CA)");
        return -EINVAL;
    }
    if (!c->tls_cert_file != !c->tls_key_file) {
        *ret_err = kite_strdup("--tls-cert-file and --tls-private-key-file go together");
        return -EINVAL;
    }
    if (c->tls_cert_file && ((r = kite_pki_read_file(c->tls_cert_file, &cert)) < 0 ||
                             (r = kite_pki_read_file(c->tls_key_file, &key)) < 0)) {
        *ret_err = kite_asprintf("reading the serving certificate: %s", strerror(-r));
        return r;
    }
    const char *addr = c->address && *c->address ? c->address : "0.0.0.0";
    _cleanup_free_ char *listen = kite_asprintf(strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, c->ns.daemon_port);
    const char *sans[] = {c->node_ip ? c->node_ip : "127.0.0.1"};
    struct kite_logsrv_options lo = {.listen = listen, .cert_pem = cert, .key_pem = key, .client_ca_pem = ca,
                                     .node_name = a->node_name, .sans = sans, .n_sans = 1, .pods = a->pods,
                                     .runtime = a->locked_rt, .stream_buffer = c->stream_buffer};
    if ((r = kite_logsrv_start(&lo, &a->logsrv, ret_err)) < 0) return r;
    a->ns.daemon_port = kite_logsrv_port(a->logsrv);
    log_info(AGENT_LOG, "log endpoint on %s port %d", addr, a->ns.daemon_port);
    return 0;
}

int kite_agent_start(const struct kite_agent_options *o, struct kite_agent **ret) {
    struct kite_agent *a = NULL;
    _cleanup_free_ char *err = NULL;
    int r = kite_agent_new(o, &a, &err);
    if (r < 0) {
        log_error(AGENT_LOG, "%s", err ? err : strerror(-r));
        return r;
    }
    /* a port another process holds is refused at start, as the kubelet refuses it: running on
     * without the endpoint would leave `kubectl logs` failing later, far from the cause */
    if (a->pods && (r = start_logsrv(a, &err)) < 0) {
        if (r == -EADDRINUSE)
            log_error(AGENT_LOG, "port %d is in use (another kite up, kite agent or kubelet?): choose another with "
                      "--port (0: any free port, published in the Node's daemonEndpoints)", a->cfg->ns.daemon_port);
        else
            log_error(AGENT_LOG, "no log endpoint: %s", err ? err : strerror(-r));
        if (r == -EADDRINUSE) {
            kite_agent_free(a);
            return r;
        }
        a->ns.daemon_port = 0;
    }
    if (a->cfg->proxy) {
        struct kite_proxy_options po = {.client = a->client,
                                        .rules = {.table = a->cfg->proxy_table, .node_name = a->node_name,
                                                  .pod_cidr = a->cfg->pod_cidr ? a->cfg->pod_cidr : KITE_NET_POD_CIDR_DEFAULT,
                                                  .masquerade_pod_traffic = a->cfg->masquerade_pod_traffic,
                                                  .local_dns = a->dns_addr}};
        if ((r = kite_proxy_start(&po, &a->proxy, &err)) < 0) {
            log_error(AGENT_LOG, "cannot start the Service proxy (--proxy-mode none runs without it): %s",
                      err ? err : strerror(-r));
            kite_agent_free(a);
            return r;
        }
    }
    if (a->dns_addr) {
        _cleanup_free_ char *derr = NULL;
        struct kite_dns_options dopt = {.client = a->client, .listen = a->dns_addr, .domain = a->cfg->cluster_domain,
                                        .upstream_conf = a->cfg->dns_upstream_conf};
        if ((r = kite_dns_start(&dopt, &a->dns, &derr)) < 0) {
            log_error(AGENT_LOG, "cannot start the cluster DNS (--serve-dns=false runs without it): %s",
                      derr ? derr : strerror(-r));
            kite_proxy_stop(a->proxy);
            kite_agent_free(a);
            return r;
        }
    }
    if ((r = -pthread_create(&a->thread, NULL, agent_thread, a)) < 0) {
        kite_dns_stop(a->dns);
        kite_proxy_stop(a->proxy);
        kite_agent_free(a);
        return r;
    }
    if ((r = -pthread_create(&a->watch_thread, NULL, watch_thread, a)) < 0) {
        pthread_mutex_lock(&a->lock);
        a->stopping = true;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->thread, NULL);
        kite_dns_stop(a->dns);
        kite_proxy_stop(a->proxy);
        kite_agent_free(a);
        return r;
    }
    if (a->pods && (r = kite_pods_start(a->pods)) < 0) {
        log_error(AGENT_LOG, "starting the pods threads: %s", strerror(-r));
        a->threads = true;
        kite_agent_stop(a);
        return r;
    }
    a->threads = true;
    *ret = a;
    return 0;
}

void kite_agent_stop(struct kite_agent *a) {
    if (!a) return;
    if (a->threads) {
        pthread_mutex_lock(&a->lock);
        a->stopping = true;
        pthread_cond_broadcast(&a->cond);
        pthread_mutex_unlock(&a->lock);
        kite_cancel_fire(&a->watch_cancel);
        pthread_join(a->watch_thread, NULL);
        pthread_join(a->thread, NULL);
    }
    kite_dns_stop(a->dns);
    a->dns = NULL;
    kite_proxy_stop(a->proxy); /* removes its table: a clean stop leaves no rules behind */
    a->proxy = NULL;
    kite_agent_free(a);
}

void kite_agent_get_stats(struct kite_agent *a, struct kite_agent_stats *ret) {
    *ret = a->stats; /* counters are written by the agent thread; a torn read is harmless */
    ret->bytes_sent = kite_client_bytes_sent(a->client);
    ret->requests = atomic_load(&a->client->requests);
}

uint64_t kite_agent_bytes_sent(struct kite_agent *a) { return kite_client_bytes_sent(a->client); }

struct kite_client *kite_agent_client(struct kite_agent *a) { return a->client; }
const char *kite_agent_node_name(struct kite_agent *a) { return a->node_name; }

bool kite_agent_reported_ready(struct kite_agent *a) { return a->registered && a->acked_ready; }
bool kite_agent_failing(struct kite_agent *a) {
    return a->register_failing || a->status_failing || a->lease_failing;
}
bool kite_agent_registered(struct kite_agent *a) { return a->registered; }
