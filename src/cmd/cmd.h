/* Subcommands (git's shape): int cmd_<name>(int argc, char **argv). Only src/cmd parses argv. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/clock.h" /* KITE_NS_PER_SEC in APISERVER_FLAGS */

int cmd_apiserver(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_agent(int argc, char **argv);
/* kite agent's body, also kite-agent's main (agent_main.c): cmd names it in messages and the
 * help ("agent" or "kite-agent", flags_prog_prefix); argv[0] is not read. */
int kite_cmd_agent_main(const char *cmd, int argc, char **argv);
int cmd_kubeconfig(int argc, char **argv);
int cmd_certs(int argc, char **argv);
int cmd_nodes(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_images(int argc, char **argv);
int cmd_controller_manager(int argc, char **argv);
int cmd_token(int argc, char **argv);
int cmd_scheduler(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_store(int argc, char **argv);

/* A component that runs only while it holds the Lease kube-system/<lease_name> (elected.c):
 * the controller-manager and the scheduler. */
struct kite_client;
struct kite_leader;
struct elected {
    struct kite_client *client;    /* the component's (its writes gated on leadership) */
    struct kite_client *le_client; /* the election's own (NULL without) */
    struct kite_leader *leader;    /* NULL without leader election */
};
/* What its flags set: --kubeconfig and the election's. */
struct elected_args {
    const char *kubeconfig;
    bool leader_elect;
    int64_t le_duration_ns, le_renew_ns, le_retry_ns;
};
/* Who the component is, and what it does on gaining and losing the Lease. */
struct elected_component {
    const char *user_agent, *lease_name;
    const char *log; /* the component's name in the log */
    unsigned connections; /* its client's kept-alive connections (kite_client_options); 0 = 1 */
    void (*started)(void *ud), (*stopped)(void *ud); /* on the elector's thread */
};
/* The election's flags, kube-controller-manager's and kube-scheduler's (desc: what
 * --leader-elect does). */
#define LEADER_ELECT_FLAGS(desc, elect, duration_ns, renew_ns, retry_ns)                                            \
    FLAG_BOOLEAN("leader-elect", desc, elect, .def_note = "true"),                                                   \
    FLAG_DURATION("leader-elect-lease-duration", "how long a candidate waits after last seeing the lease change",     \
                  "15s", KITE_NS_PER_SEC, duration_ns),                                                             \
    FLAG_DURATION("leader-elect-renew-deadline", "how long the leader keeps trying to renew before it stops", "10s", \
                  KITE_NS_PER_MS, renew_ns),                                                                        \
    FLAG_DURATION("leader-elect-retry-period", "time between attempts to acquire or renew", "2s", KITE_NS_PER_MS,    \
                  retry_ns)
/* The durations' rule (client-go's): 0, or -EINVAL after a message on stderr naming cmd. */
int kite_cmd_elected_check(const char *cmd, const struct elected_args *a);
/* Makes the clients; without leader election calls started(ud) at once, else starts the
 * election. 0, or -errno with *ret_error (malloc'ed). */
int kite_cmd_elected_start(struct elected *e, const struct elected_args *a, const struct elected_component *c, void *ud,
                  char **ret_error);
/* Stops the election (stopped runs if leading) or calls stopped; frees the clients. */
void kite_cmd_elected_stop(struct elected *e, void (*stopped)(void *ud), void *ud);
/* The command of an elected component (kite controller-manager, kite scheduler), one start-up
 * for both: --kubeconfig, the election's flags (elect_desc: what --leader-elect does) and the
 * component's own (FLAG_END-terminated), the durations' check, start(ud), running until
 * SIGINT or SIGTERM, stop(ud). Returns the exit status. */
struct flag;
struct elected_cmd {
    const char *cmd, *summary, *elect_desc, *log;
    struct elected_args *args; /* the flags' targets (leader_elect defaults to true) */
    const struct flag *own;
    int (*start)(void *ud, char **ret_error); /* 0, or -errno with *ret_error (malloc'ed) */
    void (*stop)(void *ud);
    void *ud;
};
int kite_cmd_elected_main(const struct elected_cmd *c, int argc, char **argv);

/* The controllers, run by kite controller-manager and in-process by kite up (controller_manager.c). */
struct kite_ctl_group;
/* kite controller-manager's flags (kite up runs with the defaults, without leader election). */
struct flag_list;
struct controller_args {
    struct elected_args el;
    int64_t grace_ns, startup_grace_ns, period_ns, large_cluster;
    int64_t node_cleanup_ns; /* --node-cleanup-after; 0: off */
    double eviction_rate, secondary_rate, unhealthy_threshold;
    int64_t terminated_pod_gc_threshold, pod_gc_orphan_delay_ns;
    const char *signing_cert_file, *signing_key_file; /* the CSR signer's CA (NULL: approve only) */
    const char *root_ca_file;    /* what kube-root-ca.crt publishes (NULL: the kubeconfig's CA) */
    int64_t signing_duration_ns;
    struct flag_list *controllers; /* --controllers (NULL or empty: all) */
};
#define KITE_CSR_SIGNING_DURATION_S (365 * 24 * 3600) /* --cluster-signing-duration's default */
/* Pod GC's flags, kite controller-manager's and kite up's (tests shorten the orphan delay). */
#define POD_GC_FLAGS(a)                                                                                          \
    FLAG_INT("terminated-pod-gc-threshold", "terminated pods kept before the oldest are deleted (0: never)",     \
             "12500", 0, INT64_C(1) << 40, &(a)->terminated_pod_gc_threshold),                                    \
    FLAG_DURATION("pod-gc-orphan-delay", "how long a Node may be missing before its pods are deleted (advanced)", \
                  "40s", KITE_NS_PER_MS, &(a)->pod_gc_orphan_delay_ns)
/* Fills a with the defaults of the flags (for kite up). */
void kite_cmd_controller_args_defaults(struct controller_args *a);
struct kite_controllers {
    struct controller_args args;
    struct elected el;
    bool *on;                    /* on[i]: KITE_CONTROLLERS[i] runs (from --controllers) */
    struct kite_ctl_group *group; /* the controllers while leading (framework.h) */
    char *signing_cert, *signing_key; /* PEM read at start (the signer's CA) */
    char *root_ca;                /* the kubeconfig's CA or --root-ca-file (PEM): what kube-root-ca.crt publishes */
};
/* 0, or -errno with *ret_error a malloc'ed message. */
int kite_cmd_controllers_start(const struct controller_args *a, struct kite_controllers *ret, char **ret_error);
void kite_cmd_controllers_stop(struct kite_controllers *c);
/* The controllers' ClusterRoles for the apiserver's default policy (one per descriptor row). */
struct kite_apiserver_role;
const struct kite_apiserver_role *kite_cmd_controller_roles(size_t *n);

/* The scheduler, run by kite scheduler and in-process by kite up (scheduler.c). */
struct scheduler_args {
    struct elected_args el;
};
struct kite_scheduler_proc {
    struct scheduler_args args;
    struct elected el;
    struct kite_ctl_group *group; /* the scheduler while leading (framework.h) */
};
/* 0, or -errno with *ret_error a malloc'ed message. */
int kite_cmd_scheduler_start(const struct scheduler_args *a, struct kite_scheduler_proc *ret, char **ret_error);
void kite_cmd_scheduler_stop(struct kite_scheduler_proc *p);

/* Blocks SIGINT/SIGTERM in every thread and waits for one of them; returns the signal. */
int kite_wait_for_signal(void);
/* Call first in main: blocks SIGINT/SIGTERM/SIGPIPE so threads started later inherit it. */
void kite_block_signals(void);

/* The apiserver's flags, shared by kite apiserver and kite up (apiserver.c). */
#define MAX_CONNECTIONS 200000
struct kite_apiserver_options;
struct apiserver_args {
    const char *data_dir, *listen, *store, *tokens, *audit_path, *authz_mode, *service_cidr;
    const char *psa_default, *psa_exempt_users, *psa_exempt_namespaces, *psa_exempt_runtime_classes;
    const char *sa_issuer, *api_audiences;
    int64_t sa_max_exp_ns; /* 0 = none */
    bool sa_extend_exp;
    const char *etcd_servers, *etcd_prefix, *etcd_cafile, *etcd_certfile, *etcd_keyfile, *storage_media_type;
    int64_t etcd_timeout_ns, etcd_compaction_ns;
    int64_t threads, max_conns, event_ttl_ns; /* 0 = computed */
    int64_t audit_maxsize_mb, audit_maxbackup;
    bool force_recover;
    bool http2;
    int64_t node_stale_ns, node_grace_ns;
    int64_t watch_queue, watch_queue_bytes;
    int64_t metric_resolution_ns;
    int64_t max_inflight;
    const char *advertise_address, *endpoint_reconciler;
    int64_t endpoint_lease_ttl_ns;
};
#define APISERVER_FLAGS(a)                                                                                       \
    FLAG_STR("data-dir", "DIR", "directory for the store, certificates and kubeconfigs", NULL, &(a)->data_dir,   \
             .required = true),                                                                                  \
    FLAG_STR("listen", "HOST:PORT", "address to serve HTTPS on", "127.0.0.1:6443", &(a)->listen),                 \
    FLAG_STR("store", "URL", "store URL", NULL, &(a)->store, .def_note = "sqlite:DATA_DIR/kite.db"),              \
    FLAG_STR("etcd-servers", "URL,...", "etcd v3 members to store in instead of SQLite (http://HOST:PORT or "     \
             "https://HOST:PORT)", NULL, &(a)->etcd_servers),                                                     \
    FLAG_STR("etcd-prefix", "PREFIX", "the prefix of every key in etcd", "/registry", &(a)->etcd_prefix),         \
    FLAG_STR("etcd-cafile", "FILE", "CA certificates (PEM) that sign the etcd members'", NULL, &(a)->etcd_cafile),\
    FLAG_STR("etcd-certfile", "FILE", "client certificate (PEM) for etcd", NULL, &(a)->etcd_certfile),             \
    FLAG_STR("etcd-keyfile", "FILE", "client key (PEM) for etcd", NULL, &(a)->etcd_keyfile),                       \
    FLAG_DURATION("etcd-healthcheck-timeout", "how long an etcd member may leave a keepalive unanswered before the " \
                  "apiserver\nmoves to another", "2s", KITE_NS_PER_SEC / 1000, &(a)->etcd_timeout_ns),            \
    FLAG_STR("storage-media-type", "TYPE", "how objects are stored in etcd: application/json, or "                  \
             "application/vnd.kubernetes.protobuf\n(kube-apiserver's k8s\\0 envelope, for the kinds whose schema is " \
             "complete; the others JSON)", "application/json", &(a)->storage_media_type),                          \
    FLAG_DURATION("etcd-compaction-interval", "how often the store's history is compacted (on etcd, by one apiserver " \
                  "at a time)", "5m", KITE_NS_PER_SEC, &(a)->etcd_compaction_ns),                                 \
    FLAG_BOOLEAN("force-recover", "open a store found damaged (older than its acknowledged revision, failing its "  \
              "integrity check) anyway, accepting the loss", &(a)->force_recover),                                \
    FLAG_STR("token-auth-file", "FILE", "static bearer tokens: CSV token,user,uid,\"group1,group2\"", NULL,       \
             &(a)->tokens),                                                                                      \
    FLAG_INT("threads", "HTTP worker threads", NULL, 1, 256, &(a)->threads, .def_note = "the number of CPUs"),    \
    FLAG_DURATION("event-ttl", "how long events are kept after they last happened", "1h", KITE_NS_PER_SEC,         \
                  &(a)->event_ttl_ns),                                                                           \
    FLAG_DURATION("node-stale-after", "a node Unknown this long is reported StaleObject (kite nodes)", "1h",        \
                  KITE_NS_PER_SEC, &(a)->node_stale_ns),                                                         \
    FLAG_DURATION("metric-resolution", "how often the resource metrics API (metrics.k8s.io, kubectl top) scrapes "   \
                  "each Ready node's agent;\nCPU is the rate between the last two scrapes (at least 1s)", "15s",  \
                  KITE_NS_PER_SEC, &(a)->metric_resolution_ns),                                                  \
    FLAG_INT("watch-queue-events", "events a watcher may lag behind before it is dropped (410 Expired)", "10000", 1, \
             1000000, &(a)->watch_queue),                                                                         \
    FLAG_INT("watch-queue-bytes", "bytes of objects a watcher may lag behind before it is dropped", "16777216",    \
             65536, (int64_t)1 << 32, &(a)->watch_queue_bytes),                                                   \
    FLAG_DURATION("node-monitor-grace-period", "a node whose lease went unrenewed this long (or its duration, if " \
                  "longer) is\nreported LeaseExpired until a controller marks it (kite nodes); kite up's node "   \
                  "lifecycle\ncontroller uses it too", "50s", KITE_NS_PER_SEC, &(a)->node_grace_ns),              \
    FLAG_INT("max-requests-inflight", "seats of the requests in flight (a list of N objects takes N/100, at most "  \
             "10; watches none);\nthe nodes' requests (system:nodes) get the last quarter, past the rest "            \
             "others get 429", "600", 1, 1000000, &(a)->max_inflight),                                             \
    FLAG_INT("max-connections", "client connections served at once; more wait in the listen backlog", NULL, 1,    \
             MAX_CONNECTIONS, &(a)->max_conns,                                                                   \
             .def_note = "the open-file limit, raised to its hard limit, less 512"),                              \
    FLAG_STR("audit-log-path", "FILE", "write an audit.k8s.io/v1 Event per request (level Metadata) to FILE, one JSON " \
             "line each", NULL, &(a)->audit_path),                                                               \
    FLAG_INT("audit-log-maxsize", "rotate the audit log before it passes this many megabytes (0: never)", "0", 0,  \
             1024 * 1024, &(a)->audit_maxsize_mb),                                                               \
    FLAG_INT("audit-log-maxbackup", "rotated audit logs to keep (0: all)", "0", 0, 1000000, &(a)->audit_maxbackup), \
    FLAG_STR("authorization-mode", "MODES", "Node,RBAC (with system:masters allowed everything), or AlwaysAllow "  \
             "(every request; for benchmarks)", "Node,RBAC", &(a)->authz_mode),                                      \
    FLAG_BOOLEAN("http2", "offer HTTP/2 (ALPN h2); false serves every client HTTP/1.1", &(a)->http2, .def = "true"), \
    FLAG_STR("advertise-address", "IP", "the address the kubernetes Service's endpoints give for this apiserver", NULL, \
             &(a)->advertise_address, .def_note = "the --listen host; for 0.0.0.0 the host's first IPv4 address"),    \
    FLAG_STR("endpoint-reconciler-type", "TYPE", "lease: every apiserver keeps a master lease and the kubernetes "      \
             "Service lists\nthose alive; none: no endpoints", "lease", &(a)->endpoint_reconciler),                   \
    FLAG_DURATION("endpoint-lease-ttl", "an apiserver whose master lease went unrenewed this long leaves the "        \
                  "kubernetes\nService's endpoints (renewed every third of it)", "15s", KITE_NS_PER_SEC,              \
                  &(a)->endpoint_lease_ttl_ns),                                                                    \
    FLAG_STR("service-cluster-ip-range", "CIDR", "IPv4 range Services' cluster IPs are allocated from (prefix /12 to " \
             "/28); its\nfirst address is the kubernetes Service's", "10.96.0.0/12", &(a)->service_cidr),        \
    FLAG_STR("pod-security-default", "LEVEL[:VERSION]", "the Pod Security level (privileged, baseline, restricted; "  \
             "version latest or\nv1.N) enforced, audited and warned in namespaces without pod-security.kubernetes.io/ " \
             "labels", NULL, &(a)->psa_default, .def_note = "privileged; kite up: baseline"),                      \
    FLAG_STR("pod-security-exempt-usernames", "NAME,...", "users whose pods Pod Security admission does not check",    \
             NULL, &(a)->psa_exempt_users),                                                                      \
    FLAG_STR("pod-security-exempt-namespaces", "NS,...", "namespaces Pod Security admission does not check", NULL,    \
             &(a)->psa_exempt_namespaces),                                                                       \
    FLAG_STR("pod-security-exempt-runtime-classes", "NAME,...", "runtimeClassNames Pod Security admission does not " \
             "check", NULL, &(a)->psa_exempt_runtime_classes),                                                     \
    FLAG_STR("service-account-issuer", "URL", "the iss claim of the ServiceAccount tokens it issues, and the one it " \
             "accepts", "https://kubernetes.default.svc.cluster.local", &(a)->sa_issuer),                          \
    FLAG_STR("api-audiences", "AUD,...", "audiences a ServiceAccount token must name one of to authenticate, and " \
             "the default of a TokenRequest", NULL, &(a)->api_audiences, .def_note = "the issuer"),                    \
    FLAG_DURATION("service-account-max-token-expiration", "a TokenRequest asking longer gets a token of this "      \
                  "lifetime (at most 2^32s)", NULL, 3600 * KITE_NS_PER_SEC, &(a)->sa_max_exp_ns, .def_note = "none"), \
    FLAG_BOOLEAN("service-account-extend-token-expiration", "a pod's token asked for 3607 s with the server's "      \
                 "audiences (the kubelet's projected\nvolume) is valid one year, and its use after 3607 s logged as "  \
                 "stale (kube-apiserver's\ndefault; kite's agent refreshes its tokens in time)", &(a)->sa_extend_exp)
/* Fills o from the parsed flags (borrowing strings from a). 0, or 2 after printing why. */
int kite_cmd_apiserver_args_options(const struct apiserver_args *a, struct kite_apiserver_options *o);

/* The node agent's kubelet-style flags, shared by kite agent and kite up: handed to
 * kite_agent_config_set_flag() (src/agent/config.c), which checks them as it checks the
 * --config file, in command-line order after that file. */
#define AGENT_CONFIG_FLAGS(root_dir_default)                                                                     \
    FLAG_FORWARD("node-name", FLAG_STRING, "NAME", "name of the Node object", NULL,                              \
                 .def_note = "the lower-cased hostname"),                                                        \
    FLAG_FORWARD("hostname-override", FLAG_STRING, "NAME", "the kubelet's other name for --node-name", NULL),    \
    FLAG_FORWARD("node-ip", FLAG_STRING, "IP", "InternalIP address to report", NULL,                             \
                 .def_note = "address of the default-route interface"),                                          \
    FLAG_FORWARD("node-labels", FLAG_STRING, "K=V,...", "labels to add when registering the Node", NULL),          \
    FLAG_FORWARD("register-with-taints", FLAG_STRING, "K[=V]:EFFECT,...",                                       \
                 "taints to add when registering (effect NoSchedule,\nPreferNoSchedule or NoExecute)", NULL),    \
    FLAG_FORWARD("register-node", FLAG_BOOL, NULL,                                                               \
                 "create the Node object, and create it again if it is deleted", "true"),                        \
    FLAG_FORWARD("register-schedulable", FLAG_BOOL, NULL, "register as schedulable; false sets spec.unschedulable", \
                 "true"),                                                                                        \
    FLAG_FORWARD("node-status-update-frequency", FLAG_DURATION, NULL, "how often node status is computed", "10s"), \
    FLAG_FORWARD("node-status-report-frequency", FLAG_DURATION, NULL,                                           \
                 "longest time between status reports when nothing changes", NULL,                               \
                 .def_note = "5m, or the update frequency if only that is set"),                                \
    FLAG_FORWARD("node-lease-duration-seconds", FLAG_INT, NULL, "lease duration; renewed every quarter of it",    \
                 "40"),                                                                                          \
    FLAG_FORWARD("max-pods", FLAG_INT, NULL, "pods this node can run", "110"),                                   \
    FLAG_FORWARD("pod-cidr", FLAG_STRING, "CIDR",                                                                \
                 "IPv4 range of pod addresses (its first is the bridge's); when given (kite up\n"             \
                 "always gives it) also the Node's spec.podCIDR", NULL, .def_note = "10.88.0.0/16"),             \
    FLAG_FORWARD("cluster-dns", FLAG_STRING, "IPs", "comma-separated DNS servers of pods with dnsPolicy\n"           \
                 "ClusterFirst", NULL, .def_note = "none: such pods use the host's resolv.conf"),              \
    FLAG_FORWARD("cluster-domain", FLAG_STRING, "DOMAIN", "the cluster's DNS domain (pods' search list)",         \
                 "cluster.local"),                                                                             \
    FLAG_FORWARD("pod-bridge", FLAG_STRING, "NAME", "Linux bridge the pods' veths are plugged into", "kite0"),   \
    FLAG_FORWARD("proxy-mode", FLAG_STRING, "MODE", "route Services to their endpoints with nftables (\"nftables\") or\n" \
                 "not (\"none\")", NULL, .def_note = "none; nftables under kite up"),                     \
    FLAG_FORWARD("proxy-table", FLAG_STRING, "NAME", "the proxy's nftables table (family ip)", "kite-proxy"),    \
    FLAG_FORWARD("masquerade-pod-traffic", FLAG_BOOL, NULL, "masquerade pod traffic leaving the pod network\n"   \
                 "to the node's address", NULL, .def_note = "false; true under kite up"),                        \
    FLAG_FORWARD("serve-dns", FLAG_BOOL, NULL, "answer the cluster domain's names (Services, pods) on UDP and TCP\n"  \
                 "port 53 of the pod network's gateway address, forwarding other names;\n"                \
                 "pods' nameserver when --cluster-dns is not given", NULL,                                 \
                 .def_note = "false; true under kite up"),                                               \
    FLAG_FORWARD("dns-upstream-conf", FLAG_STRING, "FILE", "resolv.conf whose nameservers --serve-dns forwards\n" \
                 "names outside the cluster domain to", "/etc/resolv.conf"),                              \
    FLAG_FORWARD("allowed-unsafe-sysctls", FLAG_STRING, "NAMES",                                               \
                 "comma-separated sysctls (or NAME* prefixes), each namespaced (kernel.shm*,\n"              \
                 "kernel.msg*, kernel.sem, fs.mqueue.*, net.*), that pods may set beyond the safe set", NULL),  \
    FLAG_FORWARD("seccomp-default", FLAG_BOOL, NULL,                                                             \
                 "run containers whose securityContext names no seccomp profile under RuntimeDefault", "false"), \
    FLAG_FORWARD("restart-backoff-base", FLAG_DURATION, NULL,                                                    \
                 "first delay of the container restart (CrashLoopBackOff) and image pull back-offs,\n"        \
                 "doubling to 300s (at least 1s; shorter for tests)", "10s"),                                      \
    FLAG_FORWARD("stream-buffer", FLAG_INT, "BYTES",                                                            \
                 "bytes of an exec, attach or port-forward stream waiting for a slow reader\n"                  \
                 "each way before the other side is not read (4096 to 67108864)", "262144"),                    \
    FLAG_FORWARD("port", FLAG_INT, NULL, "HTTPS port of the log endpoint (0: any free port, reported in\n"          \
                 "the Node's daemonEndpoints)", "10250"),                                                        \
    FLAG_FORWARD("address", FLAG_STRING, "IP", "address the log endpoint listens on", "0.0.0.0"),                 \
    FLAG_FORWARD("tls-cert-file", FLAG_STRING, "FILE", "serving certificate of the log endpoint (PEM)", NULL,      \
                 .def_note = "a self-signed one made at start"),                                                 \
    FLAG_FORWARD("tls-private-key-file", FLAG_STRING, "FILE", "key of --tls-cert-file (PEM)", NULL),              \
    FLAG_FORWARD("client-ca-file", FLAG_STRING, "FILE", "CA whose API server client certificate may read logs",   \
                 NULL, .def_note = "the CA of the kubeconfig"),                                                  \
    FLAG_FORWARD("root-dir", FLAG_STRING, "DIR", "agent state directory; ephemeral storage is its filesystem",    \
                 NULL, .def_note = (root_dir_default))
/* The rows above as given (forward() records them), applied after the --config file: flags
 * win over the file, as the kubelet's do (agent.c). */
struct kite_agent_config;
struct agent_flag_args {
    const char *cmd;
    size_t n;
    const char **names, **values; /* borrowed from argv */
};
int kite_cmd_agent_flag_record(const char *name, const char *value, void *ud);
/* Loads config_path (may be NULL) into cfg, then applies the recorded flags. 0, or 2 after
 * printing why as "kite CMD: ...". */
int kite_cmd_agent_flags_apply(const struct agent_flag_args *a, const char *config_path, struct kite_agent_config *cfg);
void kite_cmd_agent_flag_args_release(struct agent_flag_args *a);
