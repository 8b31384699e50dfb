/* kite apiserver, and the pieces kite up shares with it. */
#include "api/quantity.h"
#include "apiserver/apiserver.h"
#include "base/clock.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

#include <stdio.h>
#include <sys/resource.h>

#define FD_RESERVE 512          /* descriptors kept for the store, certificates, logs */

/* Raises the soft open-file limit to the hard one (a server with tens of thousands of node
 * agents needs a descriptor per connection) and returns the connections it allows. */
static unsigned default_max_connections(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return 1024 - FD_RESERVE;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl.rlim_cur = rl.rlim_max;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > MAX_CONNECTIONS + FD_RESERVE) return MAX_CONNECTIONS;
    return rl.rlim_cur > 2 * FD_RESERVE ? (unsigned)(rl.rlim_cur - FD_RESERVE) : (unsigned)(rl.rlim_cur / 2);
}

int kite_cmd_apiserver_args_options(const struct apiserver_args *a, struct kite_apiserver_options *o) {
    *o = (struct kite_apiserver_options){.data_dir = a->data_dir, .listen = a->listen, .store_url = a->store,
                                         .token_file = a->tokens, .threads = (unsigned)a->threads,
                                         .max_connections = a->max_conns ? (unsigned)a->max_conns
                                                                         : default_max_connections(),
                                         .event_ttl_s = a->event_ttl_ns / KITE_NS_PER_SEC,
                                         .force_recover = a->force_recover, .audit_log_path = a->audit_path,
                                         .audit_log_maxsize_mb = a->audit_maxsize_mb,
                                         .audit_log_maxbackup = a->audit_maxbackup,
                                         .disable_http2 = !a->http2,
                                         .node_stale_ns = a->node_stale_ns,
                                         .metric_resolution_ns = a->metric_resolution_ns,
                                         .watch_queue = (size_t)a->watch_queue,
                                         .watch_queue_bytes = (size_t)a->watch_queue_bytes,
                                         .max_requests_inflight = (unsigned)a->max_inflight,
                                         .node_grace_ns = a->node_grace_ns,
                                         .service_cidr = a->service_cidr,
                                         .pod_security_default = a->psa_default,
                                         .pod_security_exempt_usernames = a->psa_exempt_users,
                                         .pod_security_exempt_namespaces = a->psa_exempt_namespaces,
                                         .pod_security_exempt_runtime_classes = a->psa_exempt_runtime_classes,
                                         .service_account_issuer = a->sa_issuer,
                                         .api_audiences = a->api_audiences,
                                         .service_account_max_token_expiration_s = a->sa_max_exp_ns / KITE_NS_PER_SEC,
                                         .service_account_extend_token_expiration = a->sa_extend_exp};
    if (a->sa_max_exp_ns / KITE_NS_PER_SEC > (INT64_C(1) << 32)) {
        fprintf(stderr, "kite: --service-account-max-token-expiration: must be between 1 hour and 2^32 seconds\n");
        return 2;
    }
    if (a->etcd_servers) {
        if (a->store) {
            fprintf(stderr, "kite: --etcd-servers and --store name two stores: give one\n");
            return 2;
        }
        o->etcd_servers = a->etcd_servers;
    }
    o->advertise_address = a->advertise_address;
    o->endpoint_lease_ttl_s = a->endpoint_lease_ttl_ns / KITE_NS_PER_SEC;
    const char *ert = a->endpoint_reconciler ? a->endpoint_reconciler : "lease";
    if (strcmp(ert, "none") == 0) {
        o->no_endpoint_reconciler = true;
    } else if (strcmp(ert, "lease") != 0) {
        fprintf(stderr, "kite: --endpoint-reconciler-type: \"%s\": kite has lease or none\n", ert);
        return 2;
    }
    const char *smt = a->storage_media_type ? a->storage_media_type : "application/json";
    if (strcmp(smt, "application/vnd.kubernetes.protobuf") == 0) {
        if (!a->etcd_servers) {
            fprintf(stderr, "kite: --storage-media-type %s: only with --etcd-servers (the SQLite store keeps JSON)\n", smt);
            return 2;
        }
        o->storage_protobuf = true;
    } else if (strcmp(smt, "application/json") != 0) {
        fprintf(stderr, "kite: --storage-media-type: \"%s\": kite stores application/json or "
                        "application/vnd.kubernetes.protobuf\n", smt);
        return 2;
    }
    o->etcd_cafile = a->etcd_cafile;
    o->etcd_certfile = a->etcd_certfile;
    o->etcd_keyfile = a->etcd_keyfile;
    o->etcd_prefix = a->etcd_prefix;
    o->etcd_timeout_ms = (int)(a->etcd_timeout_ns / 1000000);
    o->compact_interval_s = a->etcd_compaction_ns / KITE_NS_PER_SEC;
    o->controller_roles = kite_cmd_controller_roles(&o->n_controller_roles);
    const char *mode = a->authz_mode ? a->authz_mode : "Node,RBAC";
    if (strcmp(mode, "AlwaysAllow") == 0) {
        o->always_allow = true;
    } else if (strcmp(mode, "Node,RBAC") != 0) {
        fprintf(stderr, "kite: --authorization-mode: \"%s\": kite serves Node,RBAC or AlwaysAllow\n", mode);
        return 2;
    }
    return 0;
}

int cmd_apiserver(int argc, char **argv) {
    struct apiserver_args args = {0};
    const struct flag flags[] = {APISERVER_FLAGS(&args), FLAG_END};
    int r = kite_cmd_flags_parse("apiserver", "Runs the Kubernetes-compatible API server on an embedded durable store.", flags,
                        argc, argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    struct kite_apiserver_options o;
    if (kite_cmd_apiserver_args_options(&args, &o) != 0) return 2;
    struct kite_apiserver *s;
    _cleanup_free_ char *start_err = NULL;
    if ((r = kite_apiserver_start(&o, &s, &start_err)) < 0) {
        log_error("apiserver", "cannot start: %s", start_err ? start_err : strerror(-r));
        return 1;
    }
    log_info("apiserver", "serving on %s (data dir %s)", kite_apiserver_url(s), o.data_dir);
    kite_wait_for_signal();
    log_info("apiserver", "shutting down");
    kite_apiserver_stop(s);
    return 0;
}
