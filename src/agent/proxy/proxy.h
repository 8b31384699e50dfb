/* Service routing on the node, as kube-proxy's nftables mode: Services and EndpointSlices
 * (watched through two informers) become one nftables table of the agent's own, replaced in
 * one transaction per sync through libnftables. ClusterIPs and NodePorts are DNATed to a
 * random ready endpoint (numgen random with a vmap), with ClientIP session affinity in
 * per-endpoint timeout sets; a Service without endpoints rejects; hairpin traffic (a pod
 * reaching itself through its Service) and traffic from outside the pod network are
 * masqueraded; optionally pod traffic leaving the pod network is masqueraded to the node's
 * address. No other table is touched. */
#pragma once
#include <stdbool.h>
#include <json-c/json.h>

#include "client/client.h"

#define KITE_PROXY_TABLE_DEFAULT "kite-proxy"
#define KITE_PROXY_MASQ_MARK 0x4000 /* kube-proxy's masquerade bit */
/* a Service's sessionAffinityConfig.clientIP.timeoutSeconds when not given (upstream's) */
#define KITE_PROXY_AFFINITY_TIMEOUT_DEFAULT 10800

struct kite_proxy_ruleset_options {
    const char *table;     /* table name (in family ip) */
    const char *node_name; /* endpoints on this node are "local" (traffic policies) */
    const char *pod_cidr;  /* the pod network (CIDR) */
    bool masquerade_pod_traffic; /* masquerade pod traffic leaving the pod network */
    /* this node's DNS responder (IPv4, port 53; NULL = none): the Service kube-system/kube-dns
     * goes there while it has no endpoints of its own (no DNS pods), as NodeLocal DNSCache */
    const char *local_dns;
};

/* The pure part: services and slices (json objects keyed by anything, values the API
 * objects; borrowed) -> an nftables script (malloc'ed) that replaces the table atomically
 * when run as one buffer: it creates the table if missing, deletes it, and declares it again.
 * state (NULL: not kept) is emptied and filled with what each Service (by its key in
 * services) owns in the table: its chains, sets and map elements. */
char *kite_proxy_ruleset(const struct kite_proxy_ruleset_options *o, json_object *services, json_object *slices,
                         json_object *state);
/* A partial sync: only the Services under the keys of changed ("namespace/name" -> anything;
 * a key not in services is a deleted Service) are rewritten, from what state says they owned,
 * in one script meant to run as one transaction: their map elements that left or changed are
 * deleted, their chains flushed, the chains and sets they no longer have deleted, their
 * chains declared again and their new elements added. state is updated as if the script ran;
 * a script that fails leaves the table behind state (the caller then runs a full sync).
 * NULL when there is nothing to write. */
char *kite_proxy_ruleset_partial(const struct kite_proxy_ruleset_options *o, json_object *services,
                                 json_object *slices, json_object *changed, json_object *state);

/* The script that removes the table (and succeeds when it is absent). */
char *kite_proxy_cleanup_script(const char *table);
/* Runs a script through libnftables in one transaction (dry_run: checked by the kernel, not
 * committed). 0, or -EIO with *ret_err (may be NULL) = libnftables' error output, or -ENOENT
 * when libnftables cannot be loaded (it is loaded with dlopen on first use: proxy.c). */
int kite_proxy_nft_run(const char *script, bool dry_run, char **ret_err);
/* A libnftables context for kite_proxy_nft_exec (free with kite_proxy_nft_free), or NULL. Kept
 * across runs by the sync thread: a fresh context per transaction costs more at thousands of
 * chains. */
struct nft_ctx;
struct nft_ctx *kite_proxy_nft_new(void);
void kite_proxy_nft_free(struct nft_ctx *nft); /* NULL is a no-op */
/* Runs a script in one transaction on a context of kite_proxy_nft_new; as kite_proxy_nft_run. */
int kite_proxy_nft_exec(struct nft_ctx *nft, const char *script, char **ret_err);

struct kite_proxy_options {
    struct kite_client *client; /* borrowed: must outlive the proxy */
    struct kite_proxy_ruleset_options rules; /* strings copied */
};
struct kite_proxy;
/* Prepares the host (net.ipv4.ip_forward=1, bridge-nf-call-iptables=1 where br_netfilter is
 * loaded), starts the informers and the sync thread. */
int kite_proxy_start(const struct kite_proxy_options *o, struct kite_proxy **ret, char **ret_err);
/* Stops the threads and removes the table. NULL is a no-op. */
void kite_proxy_stop(struct kite_proxy *p);
/* Syncs that wrote to the kernel so far, and (ret_full, may be NULL) how many of them wrote
 * the whole table (benchmarks, tests). */
unsigned long kite_proxy_syncs(struct kite_proxy *p, unsigned long *ret_full);
