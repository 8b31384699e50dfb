/* Hollow nodes: many node agents in one process on one event loop (`kite sim`).
 *
 * Each simulated node is a real struct kite_agent (src/agent: registration, the status setters
 * fed by a synthetic machine, the change-only status reporter, the lease renewer and, with
 * pods_per_node, the pod manager on a fake runtime of its own) whose requests are the node's
 * (system:node:NAME, group system:nodes), so the API server's Node authorizer judges every
 * request. No thread per node: kite_agent_step() and kite_pods_step() run as a coroutine on one
 * of a few stacks ("lanes"); when its client would wait on a socket the coroutine parks
 * (kite_client_set_thread_waiter) and the loop runs other nodes, so up to `inflight` nodes have
 * requests outstanding at once. Two watch threads feed the loop: every pod (pods_per_node: each
 * bound pod's events go to its node's pod manager) and every simulated Node (a deletion or a
 * Ready condition other than True, written by someone else, goes to the node's agent, which
 * corrects it as the kubelet does); both use the kubeconfig's own credentials.
 *
 * Per node the simulator keeps its struct sim_node, a struct sim_client, the agent (its last
 * acknowledged status and Lease serialized) and, with a connection of its own, a TLS session
 * and credentials: ~8 KiB with shared connections, ~60 KiB without (BENCHMARKS.md).
 *
 * Machines: nodes take one of KITE_SIM_SHAPES synthetic machines in turn (cpu 2..128, memory
 * 4..512 GiB, disks, kernels, OS images, 3..24 container images plus KITE_SIM_COMMON_IMAGE), each a small sysroot written
 * under machines_dir, and each node its own InternalIP (10.64.0.1, ...) and zone label
 * (topology.kubernetes.io/zone = zone-K, K < zones).
 *
 * Connections: one per node with its own certificate (connections = 0; each node's TLS session
 * costs ~18 KiB), or `connections` shared ones that carry the kubeconfig's own
 * credentials and send each node's requests as the node (Impersonate-User system:node:NAME,
 * Impersonate-Group system:nodes): the API server authorizes the impersonation, then the Node
 * authorizer judges the request as the node's, as it would the node's own certificate. Shared
 * connections speak HTTP/2 (http2; h2c.c) as a kubelet's client-go does: the `inflight` lanes'
 * requests are streams of `connections` connections the loop itself reads and writes, each
 * round's frames leaving together; or HTTP/1.1, one connection per lane, the lane blocking in the
 * client transport.
 *
 * Control: a unix stream socket; one command line per connection, one answer line
 * (`ok N` or `error: WHY`):
 *   kill NAME...       the nodes stop (their agent and connection are dropped: a dead machine)
 *   revive NAME...     they start again as a restarted agent would (register, find the Node, report)
 *   flap SECONDS NAME... they die and come back every SECONDS (flap 0 NAME... stops it, alive)
 *   partition NAME...  the nodes lose the network: their agents run on, every request fails
 *                      without leaving the machine (-ENETUNREACH), their connections closed
 *   heal NAME...       their network is back
 *   slow MS NAME...    each of their requests waits MS ms before it is sent (slow 0: normal)
 *   stats              the progress counters as one JSON object
 *   reset              forgets the renewal latencies so far (a benchmark's window starts) */
#pragma once
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "client/kubeconfig.h"

#define KITE_SIM_SHAPES 8
#define KITE_SIM_MAX_NODES 1000000
#define KITE_SIM_MAX_ZONES 1000
#define KITE_SIM_MAX_INFLIGHT 1024
#define KITE_SIM_MAX_SLOW_MS 600000
#define KITE_SIM_COMMON_IMAGE "registry.example/web:1.0" /* on every machine (pods run it) */
#define KITE_SIM_MAX_PODS_PER_NODE 1024 /* KITE_PODS_MAX_PODS */
#define KITE_SIM_STACK_BYTES (256u << 10) /* one lane's coroutine stack */

/* Mints a node's client certificate and key (PEM, malloc'ed) for CN=system:node:NAME,
 * O=system:nodes. 0 or -errno. */
typedef int (*kite_sim_mint_fn)(void *ud, const char *node_name, char **ret_cert_pem, char **ret_key_pem);

struct kite_sim_options {
    const struct kite_kubeconfig *kc; /* server and CA (borrowed; its credentials are not used) */
    unsigned nodes;
    const char *prefix;       /* node names: PREFIX-00000 ... */
    unsigned zones;           /* 0 = no zone label */
    unsigned connections;     /* shared connections, one per lane (then the lanes, overriding
                                 inflight); 0 = one per node, with its own certificate */
    unsigned inflight;        /* nodes doing requests at once (lanes) */
    bool http2;               /* shared connections speak HTTP/2: each carries the requests of
                                 inflight / connections lanes as streams (the lanes no longer
                                 one per connection) */
    unsigned pods_per_node;   /* > 0: each node runs the pod manager on a fake runtime and
                                 admits this many pods (maxPods); 0 = pods bound stay Pending */
    int64_t lease_duration_s; /* 0 = 40 */
    unsigned ramp_per_s;      /* nodes started per second; 0 = all at once */
    kite_sim_mint_fn mint;
    void *mint_ud;
    const char *machines_dir; /* where the synthetic machines' sysroots are written */
    const char *control_path; /* NULL = no control socket */
    FILE *progress;           /* NULL = no progress lines */
    int64_t progress_every_ns;/* 0 = 2 s */
};

struct kite_sim;

/* Builds the simulator (machines written, control socket bound, no node started). *ret_err
 * (may be NULL) explains failures. */
int kite_sim_new(const struct kite_sim_options *o, struct kite_sim **ret, char **ret_err);
/* Runs the loop until *stop becomes non-zero (a signal handler sets it), then lets the nodes'
 * requests in flight finish (5 s at most). 0 or -errno. */
int kite_sim_run(struct kite_sim *s, volatile sig_atomic_t *stop);
void kite_sim_free(struct kite_sim *s);

/* Control commands (what the socket runs; exposed for tests): the answer line, malloc'ed. */
char *kite_sim_control(struct kite_sim *s, const char *line);

struct kite_sim_stats {
    unsigned nodes, started, registered, ready, failing, dead, partitioned, slow;
    uint64_t renewals, status_patches, registrations, requests;
    double renewal_p50_ms, renewal_p99_ms, renewal_max_ms; /* since the start */
};
void kite_sim_get_stats(struct kite_sim *s, struct kite_sim_stats *ret);
/* Node i's name into buf. */
void kite_sim_node_name(struct kite_sim *s, unsigned i, char *buf, size_t len);
