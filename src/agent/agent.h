/* kite's node agent core: registers the Node, keeps its Lease renewed, reports status
 * changes with strategic merge patches, and recovers from outages and from its Node being
 * deleted (re-registers, unlike the kubelet: kubernetes#71398).
 *
 * Two ways to run it:
 *  - kite_agent_start(): an agent thread driven by timers on a struct kite_clock plus a
 *    thread watching the agent's own Node; kite_agent_stop() ends both.
 *  - kite_agent_new() + kite_agent_step(): no threads; the caller runs the timers (unit
 *    tests with a fake clock, `kite sim` with many agents on one loop). */
#pragma once
#include <json-c/json.h>
#include "agent/nodestatus/nodestatus.h"
#include "base/clock.h"
#include "client/client.h"

#define KITE_AGENT_PROXY_TABLE_MAX 64 /* --proxy-table's length */

/* KubeletConfiguration's fields that kite reads, plus the kubelet flags kite supports. */
struct kite_agent_config {
    char *node_name;                  /* NULL = lower-cased hostname */
    int64_t status_update_freq_ns;    /* nodeStatusUpdateFrequency, 10s */
    int64_t status_report_freq_ns;    /* nodeStatusReportFrequency, 5m (= update frequency
                                         when only that was set, as the kubelet) */
    bool update_freq_set, report_freq_set;
    int32_t lease_duration_s;         /* nodeLeaseDurationSeconds, 40 */
    bool register_node;               /* registerNode, true */
    bool register_schedulable;        /* --register-schedulable, true */
    json_object *taints;              /* registerWithTaints: array of {key,value,effect} (owned) */
    json_object *labels;              /* --node-labels: object of string values (owned) */
    char *node_ip;                    /* --node-ip; NULL = default-route interface */
    char *address;                    /* address: where the log endpoint listens; NULL = 0.0.0.0 */
    char *tls_cert_file, *tls_key_file; /* tlsCertFile, tlsPrivateKeyFile; NULL = self-signed */
    char *client_ca_file;             /* authentication.x509.clientCAFile; NULL = the kubeconfig's CA */
    char *root_dir;                   /* --root-dir, /var/lib/kite-agent */
    char *pod_cidr;                   /* --pod-cidr / podCIDR: the pod network's addresses, also
                                         the Node's spec.podCIDR; NULL = 10.88.0.0/16, not
                                         written to the Node */
    char *pod_bridge;                 /* --pod-bridge: the pod network's bridge; NULL = kite0 */
    char *cluster_dns;                /* --cluster-dns / clusterDNS: comma-separated; NULL = none */
    char *cluster_domain;             /* --cluster-domain / clusterDomain; NULL = cluster.local */
    bool proxy;                       /* --proxy-mode nftables: route Services (src/agent/proxy) */
    char *proxy_table;                /* --proxy-table; NULL = KITE_PROXY_TABLE_DEFAULT */
    bool masquerade_pod_traffic;      /* --masquerade-pod-traffic */
    bool serve_dns;                   /* --serve-dns: cluster DNS on the pod gateway (src/agent/dns);
                                         pods' nameserver when --cluster-dns is not given */
    char *dns_upstream_conf;          /* --dns-upstream-conf: resolv.conf naming the resolvers other
                                         names are forwarded to; NULL = /etc/resolv.conf */
    char *allowed_unsafe_sysctls;     /* --allowed-unsafe-sysctls / allowedUnsafeSysctls: comma-separated
                                         names and NAME* patterns, each namespaced; NULL = none */
    bool seccomp_default;             /* --seccomp-default / seccompDefault: RuntimeDefault for
                                         containers whose securityContext names no profile */
    int64_t backoff_base_ns;          /* --restart-backoff-base: the container restart and image
                                         pull back-offs' first delay; 10 s as the kubelet's */
    size_t stream_buffer;             /* --stream-buffer: exec/attach/port-forward bytes waiting
                                         each way (KITE_STREAM_BUFFER) */
    struct kite_ns_config ns;         /* maxPods, nodeStatusMaxImages, port (0 = any free one:
                                         daemonEndpoints reports the real one), reservations,
                                         evictionHard; string pointers are filled by the agent */
};

/* Defaults as the kubelet's (k8s-behaviour §1.1). */
void kite_agent_config_init(struct kite_agent_config *c);
void kite_agent_config_release(struct kite_agent_config *c);
/* Applies a KubeletConfiguration YAML file over c. Unknown fields are ignored (the kubelet
 * has many kite does not implement). On a bad value returns -EINVAL and *ret_err (may be
 * NULL) = e.g. `config: nodeStatusUpdateFrequency: invalid duration "abc"`. */
int kite_agent_config_load_file(struct kite_agent_config *c, const char *path, char **ret_err);
/* Same from an already parsed tree (borrowed). */
int kite_agent_config_apply(struct kite_agent_config *c, json_object *root, char **ret_err);
/* Applies one command-line flag (name without "--"; value as given). Flags are applied after
 * the file so they override it. -ENOENT for an unknown flag name, -EINVAL for a bad value
 * (message `flag --max-pods: invalid integer "x"`). */
int kite_agent_config_set_flag(struct kite_agent_config *c, const char *name, const char *value, char **ret_err);

/* The node's status source: returns a complete NodeStatus given the last acknowledged one
 * (borrowed, may be NULL; only its conditions, allocatable and addresses, the members a source
 * reads), appending transition events. The default is the machine's in two steps
 * (kite_agent_status_source below: kite_nodestatus_read, kite_nodestatus_build). */
typedef int (*kite_agent_status_fn)(void *ud, json_object *prev_status, json_object **ret_status,
                                    struct kite_ns_events *events);

/* A status source in two steps, which lets the agent skip most of a sync whose inputs did not
 * change: read reads everything the status depends on besides the acknowledged status and the
 * clock (*ret_inputs, given back to build and release) with a 64-bit digest of it; build makes
 * the status from those inputs as status_fn does. Two reads with the same digest must build
 * the same status from the same acknowledged status, except for times taken from the clock
 * (lastHeartbeatTime, the lastTransitionTime of a condition that flips): then, while the
 * digest and the acknowledged status are those of a sync that found nothing to report and no
 * full report is due, the agent neither builds nor compares (heartbeat.c).
 * kite_nodestatus_read / kite_nodestatus_build are the machine's. */
struct kite_agent_status_source {
    int (*read)(void *ud, void **ret_inputs, uint64_t *ret_digest);
    int (*build)(void *ud, void *inputs, json_object *prev_status, json_object **ret_status,
                 struct kite_ns_events *events);
    void (*release)(void *ud, void *inputs); /* NULL-safe inputs */
};

struct kite_agent_options {
    const struct kite_agent_config *config; /* borrowed: must outlive the agent */
    struct kite_client *client;   /* borrowed; NULL = built from kubeconfig */
    const char *kubeconfig;       /* used when client is NULL */
    struct kite_clock *clock;     /* NULL = real clock */
    kite_agent_status_fn status_fn; /* NULL = kite_nodestatus_compute */
    const struct kite_agent_status_source *status_source; /* instead of status_fn (borrowed) */
    void *status_ud;                /* status_fn's or status_source's */
    struct kite_runtime *runtime; /* borrowed; NULL = the runc runtime on root_dir */
    const char *sysroot;          /* for the default status source; NULL = "" */
    uint64_t seed;                /* jitter PRNG seed; 0 = from the clock */
    const char *kubelet_version;  /* NULL = KITE_VERSION (base/version.h) */
};

struct kite_agent;

/* Builds an agent without threads. *ret_err (may be NULL) explains failures. */
int kite_agent_new(const struct kite_agent_options *o, struct kite_agent **ret, char **ret_err);
/* Does every piece of work that is due on the agent's clock (register, renew lease, sync
 * status, handle a deletion seen by the watch) and returns the monotonic time (ns, on the
 * agent's clock) when it next has work. Never blocks except on API requests. */
int64_t kite_agent_step(struct kite_agent *a);
/* Tells the agent a watch event concerning its Node (borrowed): a DELETED event for the
 * Node it registered makes it register again. Thread-safe (the watch thread calls it). */
void kite_agent_node_event(struct kite_agent *a, json_object *event);
/* Accepts NULL. Must not be running threads (use kite_agent_stop for started agents). */
void kite_agent_free(struct kite_agent *a);

/* kite_agent_new + the agent thread and node watch thread. */
int kite_agent_start(const struct kite_agent_options *o, struct kite_agent **ret);
/* Stops the threads, joins them and frees the agent. Accepts NULL. */
void kite_agent_stop(struct kite_agent *a);

struct kite_agent_stats {
    uint64_t bytes_sent;        /* request bytes sent by the agent's client */
    uint64_t requests;
    uint64_t status_patches;    /* PATCH nodes/status sent */
    uint64_t lease_renewals;    /* successful lease PUTs */
    uint64_t registrations;     /* successful registrations (first + re-registrations) */
};
void kite_agent_get_stats(struct kite_agent *a, struct kite_agent_stats *ret);
/* Request bytes sent so far (benchmarks). */
uint64_t kite_agent_bytes_sent(struct kite_agent *a);
/* Loop-thread views for `kite sim`'s progress line: registered; the last status the server
 * acknowledged says Ready=True; a registration, status report or lease renewal is failing. */
bool kite_agent_registered(struct kite_agent *a);
bool kite_agent_reported_ready(struct kite_agent *a);
bool kite_agent_failing(struct kite_agent *a);
/* The node name the agent uses (borrowed). */
const char *kite_agent_node_name(struct kite_agent *a);
/* The agent's API client (borrowed; valid until kite_agent_stop): the certificate manager
 * swaps its client certificate when it rotates. */
struct kite_client *kite_agent_client(struct kite_agent *a);
/* The node name when none is configured: the lower-cased hostname (malloc'ed; NULL when the
 * hostname cannot be read). */
char *kite_agent_default_node_name(void);

/* `kite agent` subcommand (src/cmd/agent.c). */
int cmd_agent(int argc, char **argv);
