/* kite apiserver: a Kubernetes-compatible API server (HTTPS, JSON, watch) over a store. */
#pragma once
#include "base/base.h"

/* A ClusterRole of the default policy beyond the apiserver's own, bound (by a ClusterRoleBinding
 * of the same name) to one user: the controllers' roles, from their descriptor rows. */
struct kite_apiserver_role {
    const char *name;  /* "system:controller:job-controller" */
    const char *rules; /* JSON array of PolicyRules */
    const char *user;  /* "system:kube-controller-manager" */
};

struct kite_apiserver_options {
    const char *data_dir;      /* holds pki/, the SQLite store, admin.kubeconfig, controller-manager.kubeconfig */
    const char *listen;        /* "127.0.0.1:6443" */
    const char *store_url;     /* NULL = "sqlite:<data_dir>/kite.db" */
    const char *etcd_servers;  /* "URL,URL": the store is "etcd:<etcd_servers>" (store_url NULL) */
    /* the etcd backend's TLS files, key prefix and keepalive timeout (kite_store_options) */
    const char *etcd_cafile, *etcd_certfile, *etcd_keyfile, *etcd_prefix;
    int etcd_timeout_ms;
    /* --storage-media-type=application/vnd.kubernetes.protobuf: etcd values in kube-apiserver's
     * "k8s\0" protobuf envelope for the kinds whose schema is complete (else JSON); etcd only */
    bool storage_protobuf;
    const char *token_file;    /* --token-auth-file, optional */
    unsigned threads;          /* 0 = number of CPUs */
    unsigned max_connections;  /* open client connections at most; 0 = the http default */
    size_t watch_ring;         /* events kept per resource for watch resumption; 0 = default */
    int64_t compact_interval_s; /* 0 = default (300 s) */
    int64_t event_ttl_s;       /* events older than this are deleted; 0 = default (1 h) */
    struct kite_clock *clock;  /* NULL = the real clock (tests pass a fake one) */
    bool force_recover;        /* open a store found damaged anyway (kite_store_options) */
    const char *audit_log_path; /* --audit-log-path: audit.k8s.io/v1 Events, one JSON line each; NULL = off */
    int64_t audit_log_maxsize_mb; /* rotate past this many MB; 0 = never */
    int64_t audit_log_maxbackup;  /* rotated files kept; 0 = all */
    bool always_allow;         /* --authorization-mode=AlwaysAllow: every request is authorized (benchmarks) */
    bool disable_http2;        /* --http2=false: ALPN offers only http/1.1 */
    int64_t node_stale_ns;     /* a node Unknown this long is reported StaleObject; 0 = default (1 h) */
    int64_t node_grace_ns;     /* a lease unrenewed this long is reported LeaseExpired; 0 = default (50 s) */
    const char *service_cidr;     /* --service-cluster-ip-range; NULL = KITE_SERVICE_CIDR_DEFAULT */
    size_t watch_queue;        /* events a watcher may lag behind; 0 = KITE_WATCH_QUEUE (10,000) */
    size_t watch_queue_bytes;
    unsigned max_requests_inflight; /* seats of requests in flight (inflight.c); 0 = KITE_MAX_REQUESTS_INFLIGHT_DEFAULT */  /* bytes of objects it may lag behind; 0 = KITE_WATCH_QUEUE_BYTES (16 MiB) */
    const char *pod_security_default; /* --pod-security-default: "LEVEL[:VERSION]"; NULL = privileged:latest */
    const char *pod_security_exempt_usernames;      /* comma-separated, or NULL */
    const char *pod_security_exempt_namespaces;
    const char *pod_security_exempt_runtime_classes;
    const struct kite_apiserver_role *controller_roles; /* borrowed during start; reconciled as the defaults */
    size_t n_controller_roles;
    int64_t metric_resolution_ns; /* --metric-resolution: how often metrics.k8s.io scrapes the agents; 0 = 15 s */
    const char *service_account_issuer; /* --service-account-issuer; NULL = https://kubernetes.default.svc.cluster.local */
    const char *api_audiences;  /* --api-audiences, comma-separated; NULL = the issuer */
    const char *advertise_address; /* --advertise-address; NULL = the --listen host */
    int64_t endpoint_lease_ttl_s;   /* a master lease unrenewed this long is dropped; 0 = KITE_ENDPOINT_LEASE_TTL_S */
    bool no_endpoint_reconciler;    /* --endpoint-reconciler-type=none */
    bool kube_dns_service;      /* create kube-system/kube-dns at the range's KITE_KUBE_DNS_OFFSET-th address (kite up) */
    int64_t service_account_max_token_expiration_s; /* a TokenRequest asking longer gets this; 0 = none */
    bool service_account_extend_token_expiration;   /* a pod's 3607 s token is valid a year (warnafter) */
};
#define KITE_SERVICE_CIDR_DEFAULT "10.96.0.0/12"
/* kube-apiserver's master lease TTL: the kubernetes Service drops a server this long after its
 * last renewal (renewed every third of it) */
#define KITE_ENDPOINT_LEASE_TTL_S 15
#define KITE_SERVICE_CIDR_PREFIX_MIN 12 /* kube-apiserver refuses larger IPv4 service ranges */
#define KITE_SERVICE_CIDR_PREFIX_MAX 28
/* the cluster DNS Service's address: the range's 10th, as kubeadm picks it (10.96.0.10) */
#define KITE_KUBE_DNS_OFFSET 10
#define KITE_NODE_PORT_RANGE_FIRST 30000 /* kube-apiserver's --service-node-port-range default */
#define KITE_NODE_PORT_RANGE_LAST 32767

struct kite_apiserver;
/* Locks data_dir (one apiserver per data dir), opens the store, ensures certificates and
 * kubeconfigs in data_dir, creates the system namespaces and starts serving. On failure
 * *ret_error (if not NULL) is a malloc'ed one-line message naming the file or address and
 * the cause. */
int kite_apiserver_start(const struct kite_apiserver_options *o, struct kite_apiserver **ret, char **ret_error);
uint16_t kite_apiserver_port(struct kite_apiserver *s);
/* The https://host:port URL clients should use. Borrowed. */
const char *kite_apiserver_url(struct kite_apiserver *s);
void kite_apiserver_stop(struct kite_apiserver *s);
/* The ClusterIP of kube-system/kube-dns made or found at start (kube_dns_service), or NULL. */
const char *kite_apiserver_kube_dns_ip(struct kite_apiserver *s);

/* The store's value codec the API server opens its store with (storage_codec.c; store.h struct
 * kite_store_codec): kube-apiserver's "k8s\0" protobuf envelopes read back as JSON, and, when
 * write_protobuf, the objects of kinds whose schema is complete written in it. Also for
 * `kite store copy`, so a copy out of etcd holds JSON. */
struct kite_apiserver_codec;
struct kite_store_codec;
struct kite_apiserver_codec *kite_apiserver_codec_new(bool write_protobuf);
const struct kite_store_codec *kite_apiserver_codec_store(const struct kite_apiserver_codec *c);
void kite_apiserver_codec_free(struct kite_apiserver_codec *c);
