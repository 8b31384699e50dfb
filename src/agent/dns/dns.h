/* Cluster DNS in the node agent, as CoreDNS's kubernetes plugin answers (kubeadm's Corefile:
 * `kubernetes cluster.local in-addr.arpa { pods insecure; fallthrough in-addr.arpa; ttl 30 }`
 * and `forward . /etc/resolv.conf`), from the Services and EndpointSlices of two informers:
 *   SVC.NS.svc.D          A: the ClusterIP; a headless Service: its ready endpoints' addresses;
 *                         an ExternalName Service: a CNAME to its externalName
 *   HOST.SVC.NS.svc.D     A: the endpoint of a headless Service with that hostname (a pod with
 *                         hostname + subdomain, as a StatefulSet's) or that dashed address
 *   _PORT._PROTO.SVC.NS.svc.D  SRV for a named port (a headless Service: one per endpoint)
 *   A-B-C-D.NS.pod.D      A: A.B.C.D (CoreDNS's `pods insecure`)
 *   D.C.B.A.in-addr.arpa  PTR of a ClusterIP or a headless endpoint; other addresses forwarded
 * Other names in D are NXDOMAIN (empty answers NODATA), both with D's SOA; names outside D are
 * forwarded to the host's resolvers. Packets are parsed and built with ldns (libldns), loaded
 * with dlopen on first use (ldns.h): the functions below that parse packets return -ENOENT
 * (kite_dns_cache_put: nothing) when it cannot be loaded; kite_dns_start fails naming it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "client/client.h"

#define KITE_DNS_TTL 30            /* kubeadm's Corefile `ttl 30` (the plugin's own default is 5) */
#define KITE_DNS_PORT 53
#define KITE_DNS_UDP_MAX 512       /* an answer to a query without EDNS: larger ones are truncated (TC) */
#define KITE_DNS_EDNS_MAX 1232     /* the EDNS payload size advertised and honoured at most */
#define KITE_DNS_PENDING_MAX 256   /* forwarded queries awaiting their upstream answer */
#define KITE_DNS_FORWARD_TIMEOUT_MS 2000 /* per upstream tried, in order */
#define KITE_DNS_UPSTREAMS_MAX 3   /* nameservers read from the upstream resolv.conf */
#define KITE_DNS_UPSTREAM_CONF "/etc/resolv.conf"
#define KITE_DNS_CACHE_MAX 10000   /* forwarded answers kept (CoreDNS's cache holds 9,984 per kind) */
#define KITE_DNS_CACHE_TTL_MAX 30  /* seconds a forwarded answer is kept at most: kubeadm's `cache 30` */

struct kite_dns_zone {
    const char *domain;     /* the cluster domain, no trailing dot ("cluster.local") */
    json_object *services;  /* key -> Service (borrowed) */
    json_object *slices;    /* key -> EndpointSlice (borrowed) */
};

enum kite_dns_result {
    KITE_DNS_ANSWERED = 0, /* *ret_reply holds the answer */
    KITE_DNS_FORWARD = 1,  /* not the cluster's: send the query upstream as it is */
};

/* Answers one query (wire format). KITE_DNS_ANSWERED with *ret_reply (malloc'ed) and
 * *ret_len; KITE_DNS_FORWARD; or -EBADMSG for a packet that is no query (nothing to answer).
 * max_udp: the transport's size bound (KITE_DNS_UDP_MAX for UDP, 65535 for TCP); a larger
 * answer is sent truncated (TC set, no records), as a server does. */
int kite_dns_answer(const struct kite_dns_zone *z, const uint8_t *query, size_t len, size_t max_udp,
                    uint8_t **ret_reply, size_t *ret_len);
/* A SERVFAIL answer to query (e.g. no upstream answered); -EBADMSG if it is no query. */
int kite_dns_servfail(const uint8_t *query, size_t len, uint8_t **ret_reply, size_t *ret_len);

/* The cache of forwarded answers (cache.c): an answer (wire format, at most KITE_DNS_UDP_MAX
 * bytes) is kept for the smallest TTL of its answer records, a negative one (NXDOMAIN, NODATA)
 * for its SOA's negative TTL, both capped at KITE_DNS_CACHE_TTL_MAX; errors, truncated answers
 * and negative ones without an SOA are not kept. At most max entries (0 = KITE_DNS_CACHE_MAX):
 * when full, the expired ones go, or one other. Not thread-safe. */
struct kite_dns_cache;
struct kite_dns_cache *kite_dns_cache_new(size_t max);
void kite_dns_cache_free(struct kite_dns_cache *c);
void kite_dns_cache_put(struct kite_dns_cache *c, const uint8_t *answer, size_t len, int64_t now_ms);
/* The kept answer to query, with the query's id, flags RD/CD and question and the TTLs counted
 * down (*ret malloc'ed), or -ENOENT (none, or expired), -EBADMSG for no query. */
int kite_dns_cache_get(struct kite_dns_cache *c, const uint8_t *query, size_t qlen, int64_t now_ms, uint8_t **ret,
                       size_t *ret_len);
size_t kite_dns_cache_len(struct kite_dns_cache *c);

/* The nameservers of a resolv.conf's text (IPv4 and IPv6 addresses as written), at most
 * KITE_DNS_UPSTREAMS_MAX, skipping `skip` (the responder's own address; may be NULL).
 * Returns how many were stored in out (each malloc'ed). */
size_t kite_dns_upstreams(const char *resolv_conf, const char *skip, char **out);

struct kite_dns_options {
    struct kite_client *client; /* borrowed: must outlive the responder */
    const char *listen;         /* IPv4 address (bound with IP_FREEBIND: the pod bridge may not exist yet) */
    int port;                   /* 0 = KITE_DNS_PORT */
    const char *domain;         /* NULL = cluster.local */
    const char *upstream_conf;  /* NULL = KITE_DNS_UPSTREAM_CONF */
};
struct kite_dns;
/* Binds UDP and TCP on listen:port, starts the informers and the serving thread. */
int kite_dns_start(const struct kite_dns_options *o, struct kite_dns **ret, char **ret_err);
/* Stops the thread and the informers and closes the sockets. NULL is a no-op. */
void kite_dns_stop(struct kite_dns *d);
