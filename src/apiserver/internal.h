/* Internals shared by the API server's files. One struct req per HTTP request carries the
 * parsed route, the effective user and the timing used for metrics; it is freed by reply_*(). */
#pragma once
#include "base/wgroup.h"
#include "api/registry.h"
#include "api/selector.h"
#include "apiserver/apiserver.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "http/http.h"
#include "store/store.h"
#include "store/wcache.h"

#include <pthread.h>

/* Limits (explicit, as every limit must be). */
#define KITE_MAX_HEADER_BYTES (16 * 1024) /* URL + headers of one request (-> 431/414) */
#define KITE_JSON_MAX_DEPTH 64            /* nesting depth of request bodies */
#define KITE_MAX_FIELD_WARNINGS 32        /* unknown fields named per write (Warning headers, or a Strict error) */
#define KITE_WATCH_MIN_TIMEOUT_S 1800     /* default watch lifetime: [1x, 2x) this, as kube-apiserver */
#define KITE_WATCH_BOOKMARK_S 60          /* bookmark period when allowWatchBookmarks=true */
#define KITE_UPDATE_RETRIES 1000          /* optimistic-concurrency retries of PATCH/unconditional PUT
                                            (kube-apiserver retries without bound) */
#define KITE_WRITE_WAITERS_MAX 1024       /* writes of one object waiting for the one in flight (-> 429) */
#define KITE_WARNING_TOTAL_MAX 4096       /* bytes of Warning text in one answer before each further one is cut */
#define KITE_WARNING_ITEM_MAX 256         /* ... to this many bytes (kube-apiserver's 4k and 256 runes) */

struct kite_metrics;
struct keyq;
struct rbac_index;

/* Work for the write engine's own thread (retries, the next write of a key, the next batch of
 * a deletecollection): never the store's writer thread, never an HTTP thread's time. */
struct apiserver_work {
    void (*run)(struct apiserver_work *w);
    struct apiserver_work *next;
};
void kite_apiserver_work_push(struct kite_apiserver *s, struct apiserver_work *w);

struct kite_storage {           /* one per storage folder (events shares one between versions) */
    const char *name;           /* "nodes" */
    const struct kite_resource *res; /* the first row stored here (its storage-shaped row) */
    struct kite_wcache *cache;
};

struct kite_apiserver {
    struct kite_wgroup streams; /* the exec/attach and log proxies' threads (streamproxy.c, logproxy.c) */
    bool always_allow;          /* --authorization-mode=AlwaysAllow */
    char kube_dns_ip[16];       /* kube-system/kube-dns's ClusterIP once made or found; "" = none */
    struct kite_clock *clock;   /* every timestamp and timer (a fake one in unit tests) */
    struct kite_store *store;
    struct kite_store_crypt *crypt; /* encryption at rest of the encrypted kinds */
    struct kite_apiserver_codec *codec; /* how values are kept in etcd (storage_codec.c) */
    struct kite_storage *storages; /* one per storage folder of the registry's rows */
    size_t n_storages;
    struct kite_http_server *http;
    struct apiserver_bulk *bulk; /* large bodies' decoding, off the HTTP workers (bulk.c) */
    struct apiserver_inflight *inflight; /* the bound on requests in flight (inflight.c) */
    struct kite_metrics *metrics;
    char *url;
    char *data_dir;
    pthread_t compactor;
    bool compactor_started;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stopping;
    int64_t compact_interval_s;
    struct apiserver_expiry *expiry; /* per storage (housekeeping.c) */
    uint64_t expiry_scans;           /* folders listed by expiry */
    int64_t event_ttl_s;
    size_t watch_queue, watch_queue_bytes; /* a watcher's bounds (watch.c); 0 = the defaults */
    /* write retries (write.c) */
    pthread_t retry_thread;
    bool retry_started, retry_stop;
    pthread_mutex_t retry_mu;
    pthread_cond_t retry_cond;
    struct apiserver_work *retry_head, **retry_tail;
    struct keyq *writing;       /* keys of the updates, patches and deletes in progress */
    struct kite_log_ratelimit storage_log; /* storage errors: one line a second */
    int lock_fd;                /* flock'ed DATA_DIR/kite.lock while running; -1 */
    struct kite_node_graph *node_graph; /* the Node authorizer's pods graph (node_graph.c) */
    struct kite_audit *audit;   /* --audit-log-path; NULL when off */
    struct rbac_index *rbac;    /* the RBAC authorizer's index (authz_rbac.c) */
    struct kite_nodestate *nodestate; /* node identities seen and the divergence report (nodestate.c) */
    struct kite_pools_state *pools; /* cluster IPs and node ports in use (pools.c); NULL when no kind allocates */
    struct apiserver_leases *leases; /* this server's leases and the kubernetes endpoints (leases.c); NULL when off */
    struct kite_psa_config *psa; /* PodSecurity's default policy and exemptions (admission_podsecurity.c) */
    struct kite_metrics_api *metrics_api; /* metrics.k8s.io: the agents' scraper and its samples (metrics_api.c) */
    struct kite_satoken *satoken; /* the service-account token signer and its audiences (satoken.c) */
};

#define KITE_IMPERSONATE_GROUPS_MAX 32    /* Impersonate-Group headers of one request (-> 400) */
#define KITE_IMPERSONATE_EXTRA_MAX 32     /* Impersonate-Extra-* values of one request (-> 400) */

struct kite_user {
    const char *name;
    const char *uid;                      /* NULL or "" when unknown (client certificates) */
    const char *groups[KITE_IMPERSONATE_GROUPS_MAX + 2];
    size_t n_groups;
    const char *extra[2 * KITE_IMPERSONATE_EXTRA_MAX]; /* (key, value) pairs: extra[2i], extra[2i+1] */
    size_t n_extra;
};

struct req {
    struct kite_apiserver *srv;
    struct kite_http_req *http;
    int64_t start_ns;
    /* route */
    const struct kite_resource *res;
    char *group, *version, *ns, *name, *sub;
    const char *verb;          /* Kubernetes verb, for authz and metrics */
    unsigned seats;            /* held in the in-flight bound until answered (inflight.c) */
    int inflight_class;        /* enum inflight_class */
    bool is_watch;
    /* who */
    struct kite_user user;
    struct kite_user impersonator; /* who authenticated, when impersonating (name NULL otherwise) */
    char *impersonation_mem;   /* owns the impersonated extras' keys (impersonate.c) */
    char *authn_mem;           /* owns a bootstrap token user's name and groups (bootstrap_token.c) */
    /* audit (audit.c) */
    int64_t start_wall_ns;     /* requestReceivedTimestamp */
    char *audit_head;          /* the event's fields that every stage repeats, made at the first one */
    /* output */
    bool table;                /* Accept asked for a meta.k8s.io Table */
    bool table_full_object;    /* includeObject=Object */
    bool protobuf;             /* Accept prefers Kubernetes' protobuf: objects and Status answer in it */
    bool yaml;                 /* Accept prefers YAML (never for watches) */
    bool partial;              /* Accept asked for PartialObjectMetadata(List): metadata only */
    const char *as_version;    /* the meta.k8s.io version asked for with as= ("v1", "v1beta1") */
    bool raw_json;             /* JSON written as is (/version, /openapi), not by the object encoder */
    bool replied;
    bool body_unique_keys;     /* the JSON body was parsed, and no object of it repeats a key */
    bool field_warnings_sent;  /* fieldValidation=Warn warned once (a recomputed write does not again) */
    bool admission_warned;     /* the admission chain's warnings sent (likewise) */
    size_t warning_bytes;      /* text of the Warning headers added (reply_add_warning) */
    char *audit_annotations;   /* the audit event's annotations: `"key":"value",...` (admission), or NULL */
    char *yaml_duplicates;     /* a YAML body's repeated keys, as yaml.v2's strict decoding words them (NULL: none) */
};

/* streamproxy.c: an upgraded connect subresource (exec, attach) handed to the node's agent at
 * host:port, path (taken) with the request's query. Answers rq (or hands its connection over). */
void kite_apiserver_stream_proxy_start(struct req *rq, const char *host, uint16_t port, char *path);
/* The reason of a Status relaying a node agent's error answer of that code (logproxy.c). */
const char *kite_apiserver_agent_reason(int code);

/* server.c */
struct kite_wcache *kite_apiserver_storage_cache(struct kite_apiserver *s, const struct kite_resource *r);
void kite_apiserver_reply(struct req *rq, int code, const char *content_type, char *body, size_t len);
void kite_apiserver_reply_json_buf(struct req *rq, int code, struct kite_buf *body);
/* Every error leaves through here: a Status object with the code's reason (or the one given). */
void kite_apiserver_reply_error(struct req *rq, int code, const char *reason, const char *fmt, ...) KITE_PRINTF(4, 5);
/* The same about another object than the request's: details are given, never taken from a
 * request field changed for the occasion (the request is freed by the reply). */
struct status_details { const char *name, *group, *kind; };
void kite_apiserver_reply_error_about(struct req *rq, int code, const char *reason, const struct status_details *d,
                       const char *fmt, ...) KITE_PRINTF(5, 6);
void kite_apiserver_reply_invalid(struct req *rq, const char *name, struct kite_causes *causes);
/* 504 Timeout "Too large resource version" with Retry-After (a read past the newest revision). */
void kite_apiserver_reply_too_large_rv(struct req *rq, int64_t want, int64_t current);
/* Adds a `Warning: 299 - "<text>"` header to the answer (RFC 7234 warn-text, as kube-apiserver). */
void kite_apiserver_reply_add_warning(struct req *rq, const char *text);
void kite_apiserver_req_free(struct req *rq);
bool kite_apiserver_query_true(const char *v);
const char *kite_apiserver_req_resource_label(const struct req *rq); /* "nodes" or "nodes/status" */

/* negotiate.c: content negotiation as kube-apiserver's. */
#define KITE_MEDIA_TYPES "application/json, application/yaml, application/vnd.kubernetes.protobuf"
/* Picks the answer's media type and as= variant from Accept (sets table, protobuf, yaml,
 * partial, as_version); replies 406 itself and returns false when nothing acceptable is served. */
bool kite_apiserver_negotiate(struct req *rq);
/* Re-encodes a JSON answer (object, list, Table, Status) as the negotiated media type. */
void kite_apiserver_negotiate_encode(struct req *rq, const char **content_type, char **body, size_t *len);
/* "meta.k8s.io/v1": the apiVersion of the Table or PartialObjectMetadata asked for. */
const char *kite_apiserver_negotiated_meta_api_version(const struct req *rq);

/* read.c */
void kite_apiserver_handle_get(struct req *rq);
void kite_apiserver_handle_list(struct req *rq);
/* ListOptions of a list or watch as ValidateListOptions checks them; replies 422 itself. */
bool kite_apiserver_list_options_ok(struct req *rq);
/* Renders a stored record as the client's group version (rendered JSON or Table row object). */
void kite_apiserver_render_record(struct req *rq, struct kite_record *rec, struct kite_buf *out);
/* Parsed form of a record, cached on it (read-only: deep-copy before changing). */
json_object *kite_apiserver_record_object(struct kite_record *rec);
/* A parse of the record the caller owns (an empty object if the bytes do not parse). */
json_object *kite_apiserver_record_parse(const struct kite_record *rec);
/* metadata.labels of a stored object, parsed alone (*ret NULL when it has none); -EINVAL when a
 * quick scan cannot find them reliably (the caller parses the whole object). */
int kite_apiserver_record_labels(const struct kite_record *rec, json_object **ret);
/* object_matches on a record, parsing only its labels when a label selector is all there is. */
bool kite_apiserver_record_matches(const struct kite_resource *r, struct kite_record *rec, const struct kite_label_selector *ls,
                    const struct kite_field_selector *fs);
bool kite_apiserver_parse_selectors(struct req *rq, struct kite_label_selector **ls, struct kite_field_selector **fs);
bool kite_apiserver_object_matches(const struct kite_resource *r, json_object *obj, const struct kite_label_selector *ls,
                    const struct kite_field_selector *fs);
/* remaining: the list's remainingItemCount, -1 for none */
void kite_apiserver_table_begin(struct req *rq, struct kite_buf *out, int64_t rev, const char *cont, int64_t remaining, bool columns);
void kite_apiserver_table_row(struct req *rq, struct kite_buf *out, struct kite_record *rec, bool first);
void kite_apiserver_table_end(struct kite_buf *out);
/* A PartialObjectMetadata of the record (its metadata, as the client's group version). */
void kite_apiserver_render_partial(struct req *rq, struct kite_record *rec, struct kite_buf *out);

/* write.c */
/* logproxy.c: the API server's kubelet-client certificate and key (DATA_DIR/pki/kubelet-client.*,
 * PEM, malloc'ed), with which it reaches agents: 0, or -errno and *ret_path (may be NULL) the
 * file that could not be read (malloc'ed). */
int kite_apiserver_kubelet_client(const char *data_dir, char **ret_cert, char **ret_key, char **ret_path);
/* logproxy.c: GET of a connect subresource (a pod's log), proxied to the node's agent. */
void kite_apiserver_handle_connect(struct req *rq, const struct kite_subresource *sr);
/* The node's address as kube-apiserver picks it (InternalIP, Hostname, InternalDNS, ExternalDNS,
 * ExternalIP) and its agent's port (0 when it reports none). Borrowed from node. */
const char *kite_apiserver_node_address(json_object *node, int *ret_port);

/* server.c: authorizes rq's route (rq->res, ns, name, verb) or path; replies 403 itself. */
bool kite_apiserver_authorize(struct req *rq);

/* metrics_api.c: metrics.k8s.io/v1beta1 served in-process (a built-in metrics-server). */
#define KITE_METRICS_RESOLUTION_NS (15 * KITE_NS_PER_SEC) /* scrape period (--metric-resolution) */
#define KITE_METRICS_SCRAPE_TIMEOUT_MS 10000              /* one agent's answer, at most (and 0.9 x resolution) */
#define KITE_METRICS_SCRAPE_PARALLEL 16                   /* agents scraped at once */
#define KITE_METRICS_SCRAPE_MAX_BYTES (16u << 20)         /* an agent's /metrics/resource answer (-> scrape failed) */
#define KITE_METRICS_MAX_CONTAINERS 16384                 /* containers kept from one agent's answer */
struct mapi_ctr {
    char *ns, *pod, *name;
    bool has_cpu, has_mem;
    uint64_t cpu_ns, mem;
    int64_t cpu_ts, mem_ts, start_ns; /* wall clock ns */
};
/* What one scrape of /metrics/resource says. */
struct mapi_batch {
    bool node_has_cpu, node_has_mem;
    uint64_t node_cpu_ns, node_mem;
    int64_t node_cpu_ts, node_mem_ts;
    struct mapi_ctr *c;
    size_t n, cap;
};
/* Parses the kubelet's resource metrics text (the series metrics-server reads; a sample without
 * a timestamp is taken at now_ns) into b (zeroed first by the caller). Returns the samples used,
 * or -EINVAL on a malformed line. */
int kite_apiserver_mapi_parse(const char *text, size_t len, int64_t now_ns, struct mapi_batch *b);
void kite_apiserver_mapi_batch_release(struct mapi_batch *b);
void kite_apiserver_mapi_format_duration(int64_t ns, char out[64]);
void kite_apiserver_mapi_format_cpu(uint64_t nanocores, char out[32]);
void kite_apiserver_mapi_format_memory(uint64_t bytes, char out[32]);
int kite_apiserver_metrics_api_start(struct kite_apiserver *s, int64_t resolution_ns);
void kite_apiserver_metrics_api_stop(struct kite_apiserver *s);
/* Serves /apis/metrics.k8s.io/v1beta1/...: true when the path is the group's (answered). */
bool kite_apiserver_metrics_api_handle(struct req *rq);
/* Discovery of the group: its aggregated entry, its APIGroup, and /apis/metrics.k8s.io[/v1beta1]. */
void kite_apiserver_metrics_api_discovery_agg(struct kite_buf *b);
void kite_apiserver_metrics_api_discovery_group(struct kite_buf *b);
bool kite_apiserver_metrics_api_discovery(struct req *rq);

void kite_apiserver_handle_create(struct req *rq);
void kite_apiserver_handle_update(struct req *rq);
void kite_apiserver_handle_patch(struct req *rq);
void kite_apiserver_handle_delete(struct req *rq);
void kite_apiserver_handle_deletecollection(struct req *rq);

/* decode.c */
/* Parses a request body, JSON or protobuf, as a JSON object: the request's kind, or DeleteOptions
 * (which may be absent). Replies 400/415 itself and returns NULL on error. */
json_object *kite_apiserver_parse_body(struct req *rq, bool kite_apiserver_delete_options);
/* The fieldValidation directive of a create, update or patch (Ignore, Warn: the default, or
 * Strict) applied to obj, the object to store: fields its schema does not know are dropped,
 * and reported as Warning headers (Warn) or refused 400 (Strict); replies itself and returns
 * false when the write must stop. */
bool kite_apiserver_check_field_validation(struct req *rq, json_object *obj);
/* Parses body as one JSON value (replies 400 itself and returns NULL on error). */
json_object *kite_apiserver_parse_json_text(struct req *rq, const char *body, size_t len);
/* An apply patch's body (YAML or JSON) as an object; NULL after replying 400. */
json_object *kite_apiserver_parse_apply_body(struct req *rq);
/* Content-Type ct is the media type want (parameters ignored). */
bool kite_apiserver_media_is(const char *ct, const char *want);
/* The thread that recomputes writes that lost an optimistic-concurrency race. */
/* bulk.c: requests whose body is at least KITE_BULK_BODY_MIN bytes run their verb on the bulk
 * threads; offer returns false when there are none (then the caller runs it), true when the
 * request was queued or answered 429 (the queue is full). */
#define KITE_BULK_BODY_MIN (256u * 1024)
#define KITE_BULK_QUEUE_MAX 64u
#define KITE_BULK_THREADS_MAX 4u
int kite_apiserver_bulk_start(struct kite_apiserver *s, unsigned threads); /* 0: one per CPU */
bool kite_apiserver_bulk_offer(struct req *rq, void (*fn)(struct req *));
void kite_apiserver_bulk_stop(struct kite_apiserver *s); /* after the HTTP server stopped */
/* inflight.c: the bound on requests in flight, nodes ahead of the rest. */
#define KITE_MAX_REQUESTS_INFLIGHT_DEFAULT 600 /* kube-apiserver's total: --max-requests-inflight 400 + --max-mutating-requests-inflight 200 */
enum inflight_class { INFLIGHT_EXEMPT, INFLIGHT_SYSTEM, INFLIGHT_WORKLOAD, INFLIGHT_CLASSES };
int kite_apiserver_inflight_start(struct kite_apiserver *s, unsigned max);
void kite_apiserver_inflight_stop(struct kite_apiserver *s); /* after the HTTP server stopped */
/* Takes the routed request's seats; false once it was answered 429. */
bool kite_apiserver_inflight_admit(struct req *rq);
void kite_apiserver_inflight_release(struct req *rq); /* req_free's */
/* Runs fn(rq) on the list threads when rq is a workload list (true), else false. */
bool kite_apiserver_inflight_offer(struct req *rq, void (*fn)(struct req *));
void kite_apiserver_inflight_metrics(struct kite_apiserver *s, struct kite_buf *b);
int kite_apiserver_retry_start(struct kite_apiserver *s);
void kite_apiserver_retry_stop(struct kite_apiserver *s); /* after the HTTP server stopped */
/* Creates an object directly (bootstrap). */
int kite_apiserver_create_sync(struct kite_apiserver *s, const struct kite_resource *r, json_object *obj);
/* The same without waiting: cb as kite_store_submit's (-EAGAIN when the store's queue is full,
 * -EEXIST when the object exists, and cb is then not called). */
int kite_apiserver_create_submit(struct kite_apiserver *s, const struct kite_resource *r, json_object *obj, kite_write_cb cb,
                            void *ud);

/* pools.c: the values the server hands out (registry.h, kite_pools). */
struct kite_pools_state;
struct kite_pools_op;
/* Builds what is in use from the stored objects and follows their changes. 0, or -errno with
 * *ret_error (malloc'ed). */
int kite_apiserver_pools_start(struct kite_apiserver *s, const char *service_cidr, char **ret_error);
void kite_apiserver_pools_free(struct kite_pools_state *st);
/* Seconds between repair passes over the shared bitmaps (kube-apiserver's repair interval). */
#define KITE_POOLS_REPAIR_S 180
/* A write's reservations (NULL when nothing allocates); pools_op_end releases them. A dry run
 * reads the shared bitmaps and writes nothing. */
struct kite_pools_op *kite_apiserver_pools_op_new(struct kite_apiserver *s, bool dry_run);
struct kite_pools *kite_apiserver_pools_op_iface(struct kite_pools_op *op);
/* The write replaces old (borrowed) with obj (NULL: deletes it): what old holds and obj does not
 * is released once the write is stored. Again on each recompute. */
void kite_apiserver_pools_op_replaced(struct kite_pools_op *op, json_object *old, json_object *obj);
/* The write was stored as rec: its values are the object's, what it let go is released (blocks
 * on the store: not on its writer thread). */
void kite_apiserver_pools_op_commit(struct kite_pools_op *op, struct kite_record *rec);
void kite_apiserver_pools_op_end(struct kite_pools_op *op);
/* rec (an object of r) was deleted by this server outside a write op (deletecollection): its
 * values are released soon (any thread). */
void kite_apiserver_pools_release_record(struct kite_apiserver *s, const struct kite_resource *r, struct kite_record *rec);
/* Creates default/kubernetes (the range's first address, port 443 to the server's port) when missing. */
int kite_apiserver_pools_bootstrap_kubernetes(struct kite_apiserver *s, uint16_t port);
/* The Service kube-system/kube-dns at the range's KITE_KUBE_DNS_OFFSET-th address, unless one
 * exists (kube_dns_service, on under kite up); its ClusterIP (made, or the existing one's IPv4
 * address) in s->kube_dns_ip. */
int kite_apiserver_pools_bootstrap_kube_dns(struct kite_apiserver *s);

/* leases.c: this server's master and identity leases, and default/kubernetes's Endpoints and
 * EndpointSlices listing every server whose master lease is live. advertise: the address to list
 * (NULL or a wildcard: the host's first non-loopback IPv4 address). */
struct apiserver_leases;
int kite_apiserver_leases_start(struct kite_apiserver *s, const char *advertise, unsigned port, int64_t ttl_s,
                           struct apiserver_leases **ret, char **ret_error);
/* Deletes the master lease and lists the others once more. NULL ok. */
void kite_apiserver_leases_stop(struct apiserver_leases *l);

/* admission.c: the admission chain (mutating plugins, then validating ones). */
#define KITE_NOT_READY_TOLERATION_S 300   /* DefaultTolerationSeconds, as kube-apiserver's defaults */
#define KITE_UNREACHABLE_TOLERATION_S 300
enum kite_admission_op { KITE_ADMIT_CREATE, KITE_ADMIT_UPDATE, KITE_ADMIT_DELETE };
struct kite_admission_attrs {
    struct kite_apiserver *srv;     /* read-only view of objects: kite_apiserver_lookup() */
    const struct kite_user *user;
    enum kite_admission_op op;
    const struct kite_resource *res;
    const char *sub, *ns, *name;    /* sub: the subresource written, or NULL */
    json_object *obj;               /* the new object (mutating plugins may change it); NULL on delete */
    json_object *old;               /* the current object; NULL on create. Read-only */
    bool dry_run;
    struct kite_admission_notes *notes; /* what plugins tell beyond their decision; may be NULL */
};
/* Warnings (Warning headers of the answer) and audit annotations the plugins add. */
#define KITE_ADMISSION_WARNINGS_MAX 64
struct kite_admission_notes {
    char *warnings[KITE_ADMISSION_WARNINGS_MAX]; /* malloc'ed; further ones are dropped */
    size_t n_warnings;
    struct kite_buf annotations; /* `"key":"value"` pairs, comma-separated */
};
void kite_admission_notes_release(struct kite_admission_notes *n);
/* A warning for the client (kubectl prints "Warning: <text>"); nothing when a->notes is NULL. */
void kite_admission_warn(const struct kite_admission_attrs *a, const char *fmt, ...) KITE_PRINTF(2, 3);
/* An annotation of the request's audit event; nothing when a->notes is NULL. */
void kite_admission_annotate(const struct kite_admission_attrs *a, const char *key, const char *value);
/* A refusal: the HTTP code, reason and message of its Status (message malloc'ed), and details
 * when the Status is about another object than the request's. */
struct kite_admission_denial {
    int code;
    const char *reason;
    char *message;
    struct status_details details;
    struct kite_causes causes;      /* a 422 Invalid's causes (its message is made from them) */
};
struct kite_admission_plugin {
    const char *name;
    int (*mutate)(const struct kite_admission_attrs *a, struct kite_admission_denial *ret);
    int (*validate)(const struct kite_admission_attrs *a, struct kite_admission_denial *ret);
};
/* The chain, in order (for tests and /metrics). */
const struct kite_admission_plugin *kite_admission_plugins(size_t *ret_n);
/* 0 = admitted; -EPERM with *d filled = refused. */
int kite_admission_mutate(const struct kite_admission_attrs *a, struct kite_admission_denial *d);
int kite_admission_validate(const struct kite_admission_attrs *a, struct kite_admission_denial *d);
/* Hands the plugins' warnings (once per request) and audit annotations (the last admission's)
 * to the request, and releases notes. */
void kite_admission_notes_apply(struct req *rq, struct kite_admission_notes *notes);
/* Answers the refusal (and frees its message). */
void kite_admission_reply(struct req *rq, struct kite_admission_denial *d);
/* A plugin's refusal as admission.NewForbidden renders it: 403 `<group resource> "<name>" is
 * forbidden: <why>`, the name being the request's, else the object's name or generateName,
 * else "Unknown". Fills *d and returns -EPERM. */
int kite_admission_forbid(const struct kite_admission_attrs *a, struct kite_admission_denial *d, const char *fmt, ...)
    KITE_PRINTF(3, 4);

/* The current object of r at ns/name from the watch cache, as a new parse the caller owns
 * (json_object_put), or NULL. The read-only view authorizers and admission plugins get. */
json_object *kite_apiserver_lookup(struct kite_apiserver *s, const struct kite_resource *r, const char *ns, const char *name);

/* watch.c */
void kite_apiserver_handle_watch(struct req *rq);

/* review.c: POST of a kind that is never stored (access reviews): its row's evaluate hook,
 * asking the authorizer chain. */
void kite_apiserver_handle_review(struct req *rq);

/* impersonate.c: the Impersonate-* headers. rq->user is the authenticated user; when the
 * request impersonates, each part is authorized (verb impersonate) and rq->user becomes the
 * impersonated identity, rq->impersonator the original. false after replying 400/403. */
bool kite_apiserver_impersonate(struct req *rq);

/* bootstrap_token.c: bootstrap tokens `<id>.<secret>` (Secrets kube-system/bootstrap-token-<id>
 * of type bootstrap.kubernetes.io/token), as kube-apiserver's --enable-bootstrap-token-auth. */
#define KITE_BOOTSTRAP_ID_LEN 6
#define KITE_BOOTSTRAP_SECRET_LEN 16
#define KITE_BOOTSTRAP_SECRET_TYPE "bootstrap.kubernetes.io/token"
#define KITE_BOOTSTRAP_SECRET_PREFIX "bootstrap-token-"
#define KITE_BOOTSTRAP_USER_PREFIX "system:bootstrap:"
#define KITE_BOOTSTRAP_GROUP "system:bootstrappers"
/* tok has the bootstrap token shape [a-z0-9]{6}.[a-z0-9]{16}: its parts are copied out. */
bool kite_bootstrap_token_split(const char *tok, char id[KITE_BOOTSTRAP_ID_LEN + 1],
                                char secret[KITE_BOOTSTRAP_SECRET_LEN + 1]);
/* Whether secret (borrowed; NULL = none) authenticates id.secret at now: 0 with the groups
 * (system:bootstrappers, then auth-extra-groups) appended to ret_groups NUL-separated;
 * -ENOENT missing or being deleted, -EINVAL wrong type or an extra group outside
 * system:bootstrappers:*, -EACCES wrong id or secret, -ETIME expired, -EPERM not marked for
 * authentication. */
int kite_bootstrap_token_check(json_object *secret, const char *id, const char *secret_text, int64_t now_wall_ns,
                               struct kite_buf *ret_groups);
/* A bearer token of the bootstrap shape that a Secret accepts: sets rq->user (name and
 * groups, owned by rq->authn_mem) and returns true; false otherwise (the caller answers 401). */
bool kite_apiserver_bootstrap_token(struct req *rq);

/* satoken.c: ServiceAccount tokens (the TokenRequest API and their authentication). */
#define KITE_SATOKEN_ISSUER_DEFAULT "https://kubernetes.default.svc.cluster.local" /* kubeadm's --service-account-issuer */
#define KITE_SATOKEN_DEFAULT_EXPIRATION_S 3600       /* SetDefaults_TokenRequestSpec */
#define KITE_SATOKEN_MIN_EXPIRATION_S 600            /* ValidateTokenRequest: at least 10 minutes */
#define KITE_SATOKEN_MAX_EXPIRATION_S (1LL << 32)    /* ... and at most 2^32 seconds */
#define KITE_SATOKEN_MAX_BYTES (16 * 1024)           /* a longer bearer token is not tried as a JWT */
struct kite_pki_signer;
struct kite_satoken;
/* kube-apiserver's --service-account-extend-token-expiration: a token bound to a pod, asked for
 * KITE_SATOKEN_WARN_ONLY_S with only the server's audiences, is valid KITE_SATOKEN_EXTENDED_S
 * and carries kubernetes.io.warnafter (its use after that is logged as stale). */
#define KITE_SATOKEN_WARN_ONLY_S 3607
#define KITE_SATOKEN_EXTENDED_S (365LL * 24 * 3600)
void kite_apiserver_satoken_set_extend(struct kite_satoken *t, bool on);
/* Whom a token names (all borrowed; NULL or "" when absent). */
struct kite_satoken_subject {
    const char *ns, *name, *uid;               /* the ServiceAccount */
    const char *pod_name, *pod_uid, *secret_name, *secret_uid, *node_name, *node_uid;
    const char *jti;
};
/* A compact JWS of claims: header {alg, kid} of k, base64url parts. Malloc'ed; NULL when signing failed. */
char *kite_jwt_sign(const struct kite_pki_signer *k, json_object *claims);
/* Checks tok's shape (three base64url parts, at most KITE_SATOKEN_MAX_BYTES), that its header's
 * alg is k's and its signature k's: 0 with the claims (a new object); -EINVAL malformed,
 * -EBADMSG another algorithm or a signature that does not verify. */
int kite_jwt_verify(const struct kite_pki_signer *k, const char *tok, json_object **ret_claims);
/* Upstream's claims for sub (token.Claims plus jti and the node): a new object. audiences borrowed. */
json_object *kite_satoken_claims(const struct kite_satoken_subject *sub, const char *issuer, json_object *audiences,
                                 int64_t now_s, int64_t expiration_s);
/* Judges claims at now_s (go-jose's leeway of 60 s on exp, nbf and iat): 0 with *ret borrowing
 * from c; -ENOENT another issuer, -ETIME expired, -EAGAIN not valid yet, -EACCES no audience of
 * the server's, -EINVAL the kubernetes.io claim or the subject malformed. */
int kite_satoken_check_claims(json_object *c, const char *issuer, const char *const *audiences, size_t n_aud,
                              int64_t now_s, struct kite_satoken_subject *ret);
/* Loads (or makes) PKI_DIR/sa.key; issuer and audiences (comma-separated) NULL for the defaults. */
int kite_apiserver_satoken_start(struct kite_apiserver *s, const char *pki_dir, const char *issuer, const char *audiences,
                            int64_t max_expiration_s, char **ret_error);
void kite_apiserver_satoken_free(struct kite_satoken *t); /* NULL is a no-op */
/* A bearer JWT this server issued that still holds: sets rq->user (owned by rq->authn_mem) and
 * returns true; false otherwise. */
bool kite_apiserver_satoken_authenticate(struct req *rq);
/* POST serviceaccounts/NAME/token: answers the TokenRequest body (taken) with its status. */
void kite_apiserver_satoken_issue(struct req *rq, json_object *body);

/* audit.c: the audit log (audit.k8s.io/v1 Events at level Metadata, one JSON line each),
 * written by its own thread; a request only appends to a buffer. */
#define KITE_AUDIT_BUFFER_MAX (16u * 1024 * 1024) /* events waiting for the disk; past it dropped (counted) */
struct kite_audit;
struct kite_audit_options {
    const char *path;
    int64_t max_size_mb;    /* rotate past this size; 0: never */
    int64_t max_backups;    /* rotated files kept; 0: all */
    struct kite_clock *clock;
};
int kite_audit_open(const struct kite_audit_options *o, struct kite_audit **ret);
void kite_audit_close(struct kite_audit *a); /* writes what is buffered; NULL is a no-op */
enum kite_audit_stage { KITE_AUDIT_RESPONSE_STARTED, KITE_AUDIT_RESPONSE_COMPLETE };
/* Records rq's event at stage with the response code (no-op when audit is off). */
void kite_apiserver_audit(struct req *rq, enum kite_audit_stage stage, int code);
void kite_audit_metrics(struct kite_audit *a, struct kite_buf *out);
/* Queues one line (ending in '\n') for the writer; dropped and counted past the buffer's limit. */
void kite_audit_append(struct kite_audit *a, const char *line, size_t len);
/* Waits until every event recorded so far is written (tests). */
void kite_audit_flush(struct kite_audit *a);

/* discovery.c, openapi.c */
bool kite_apiserver_handle_discovery(struct req *rq);
bool kite_apiserver_handle_openapi(struct req *rq);

/* housekeeping.c: compaction and event expiry, on one thread */
#define KITE_EVENT_TTL_DEFAULT_S 3600       /* kube-apiserver's --event-ttl */
#define KITE_HOUSEKEEPING_PERIOD_S 10       /* how often history size and event ages are checked */
#define KITE_HISTORY_MAX 1000000            /* revisions kept before compacting ahead of schedule */
#define KITE_HISTORY_SLACK 20000            /* revisions past it before a pass compacts back to it */
/* The revision the history bound compacts to, given the store's revision and its compacted
 * one: 0 while at most KITE_HISTORY_MAX + KITE_HISTORY_SLACK revisions are kept, else the one
 * that keeps KITE_HISTORY_MAX (housekeeping.c). */
int64_t kite_apiserver_history_target(int64_t rev, int64_t compacted);
void *kite_apiserver_housekeeping_main(void *ud);
/* The expiry part of a pass, now, on the caller's thread: for tests, whose fake clock does not
 * move the thread's real-time wake-ups. Safe while the thread runs (both delete conditionally). */
void kite_apiserver_housekeeping_once(struct kite_apiserver *s);
void kite_apiserver_expiry_free(struct kite_apiserver *s);

/* nodestate.c: the divergence report (`kite nodes`) */
#define KITE_NODE_STATE_PERIOD_S 2 /* how often node states are computed for /metrics and events */
struct kite_nodestate *kite_apiserver_nodestate_new(int64_t stale_ns, int64_t grace_ns);
void kite_apiserver_nodestate_free(struct kite_nodestate *n);
/* An authenticated request of user (a node identity, system:node:NAME, is remembered). */
void kite_apiserver_nodestate_seen(struct kite_apiserver *s, const char *user, const char *method, const char *path);
/* Computes every node's state; records an event for each change (housekeeping thread). */
void kite_apiserver_nodestate_pass(struct kite_apiserver *s);
/* Classifications the passes made so far (a quiet cluster's pass makes none). */
uint64_t kite_apiserver_nodestate_classified(struct kite_apiserver *s);
/* An eviction of pod (borrowed) refused with code and message: its node drains (Draining)
 * while kubectl drain retries. */
void kite_apiserver_nodestate_eviction_refused(struct kite_apiserver *s, json_object *pod, int code, const char *message);
/* Appends the last pass's kite_node_state lines. */
void kite_apiserver_nodestate_metrics(struct kite_apiserver *s, struct kite_buf *b);
/* Answers GET /debug/kite/nodes. */
void kite_apiserver_nodestate_reply(struct req *rq);

/* renewal.c: a Lease renewal's new stored text when the body b is the stored text s but for
 * metadata.resourceVersion (exactly "rev") and a new spec.renewTime in canonical form, and s's
 * only managedFields entry is manager's Update of api_version owning spec.renewTime: s with
 * that renewTime and the entry's time (now) put in, appended to out; 0, or -1 when the write
 * takes the full update (nothing appended). */
int kite_apiserver_renewal_splice(const char *s, size_t sn, const char *b, size_t bn, int64_t rev, const char *manager,
                                  const char *api_version, int64_t now_wall_ns, struct kite_buf *out);

/* metrics.c */
struct kite_metrics *kite_apiserver_metrics_new(void);
void kite_apiserver_metrics_free(struct kite_metrics *m);
void kite_apiserver_metrics_observe(struct kite_metrics *m, const char *verb, const char *resource, int code, int64_t ns);
void kite_apiserver_metrics_watch_delta(struct kite_metrics *m, const char *resource, int delta);
void kite_apiserver_metrics_store_commit(struct kite_metrics *m, int64_t ns);
void kite_apiserver_metrics_write_retry(struct kite_metrics *m);
void kite_apiserver_metrics_write_queued(struct kite_metrics *m);
void kite_apiserver_metrics_renewal_spliced(struct kite_metrics *m);
void kite_apiserver_metrics_store_error(struct kite_metrics *m);
void kite_apiserver_metrics_render(struct kite_metrics *m, struct kite_buf *out);

/* authz.c: the authorizer chain (Node authorizer and RBAC slot in here). Each authorizer gets
 * the request's attributes and a read-only view of the objects it may need (the Node
 * authorizer: which pods are bound to the node), and answers allow, deny or no opinion with a
 * reason; the first decision wins, no opinion from all denies. */
enum kite_authz_decision { KITE_AUTHZ_NO_OPINION, KITE_AUTHZ_ALLOW, KITE_AUTHZ_DENY };
struct kite_authz_attrs {
    const struct kite_user *user;
    const char *verb, *group, *resource, *sub, *ns, *name;
    const char *path; /* non-resource requests */
    struct kite_apiserver *view; /* objects, read-only through kite_apiserver_lookup(); may be NULL */
    /* list, watch and deletecollection: the request's selectors (NULL: none). As
     * kube-apiserver's request info, a list or watch whose field selector requires
     * metadata.name=X has name X. */
    const struct kite_field_selector *fields;
    const char *label_selector;
};
/* What an authorizer lists a user may do (SelfSubjectRulesReview's status): arrays of
 * ResourceRule {verbs, apiGroups, resources, resourceNames} and NonResourceRule {verbs,
 * nonResourceURLs} objects; incomplete when some authorizer could not list its rules. */
struct kite_authz_rules {
    json_object *resource_rules, *non_resource_rules;
    bool incomplete;
};
/* Append one rule; the lists are NULL-terminated (names may be NULL: every name). */
void kite_authz_rule_add(struct kite_authz_rules *r, const char *const *verbs, const char *const *groups,
                         const char *const *resources, const char *const *names);
void kite_authz_rule_add_paths(struct kite_authz_rules *r, const char *const *verbs, const char *const *urls);
struct kite_authorizer {
    const char *name;
    /* *ret_reason (malloc'ed, optional) explains the decision. */
    enum kite_authz_decision (*authorize)(const struct kite_authz_attrs *a, char **ret_reason);
    /* Optional: appends the rules it grants u in namespace ns; an authorizer that cannot
     * list them sets out->incomplete. Without it the review is marked incomplete. */
    void (*rules)(struct kite_apiserver *s, const struct kite_user *u, const char *ns, struct kite_authz_rules *out);
};
/* The chain, in order. */
const struct kite_authorizer *kite_authorizers(size_t *ret_n);
enum kite_authz_decision kite_authorize(const struct kite_authz_attrs *a, char **ret_reason);
/* authz_node.c: the Node authorizer (kube-apiserver's --authorization-mode=Node, with
 * AuthorizeNodeWithSelectors). A node is a user in group system:nodes named system:node:NAME;
 * *ret_name is NAME, or "" for a user of the group whose name does not have that form (an
 * unidentifiable node, refused). false: not a node at all. */
bool kite_node_identity(const struct kite_user *u, const char **ret_name);
enum kite_authz_decision kite_authz_node(const struct kite_authz_attrs *a, char **ret_reason);
/* The 403 message of a refused request, as kube-apiserver's responsewriters.Forbidden:
 * `<resource> "<name>" is forbidden: User "<u>" cannot <verb> resource "<r>[/<sub>]" in API
 * group "<g>" (in the namespace "<ns>"|at the cluster scope)[: <reason>]`, or for a path
 * `forbidden: User "<u>" cannot <verb> path "<p>"`. Malloc'ed. */
char *kite_authz_forbidden_message(const struct kite_authz_attrs *a, const char *reason);

/* node_graph.c: which node each pod is bound to and what the pods of each node reference,
 * kept from the pods' watch cache as changes are applied (see the file). */
enum kite_node_ref { KITE_NODE_REF_SECRET, KITE_NODE_REF_CONFIGMAP, KITE_NODE_REF_PVC, KITE_NODE_REF_SERVICEACCOUNT };
enum kite_node_pod { KITE_NODE_POD_UNKNOWN, KITE_NODE_POD_OWN, KITE_NODE_POD_OTHER };
struct kite_node_graph;
/* Builds s->node_graph from the pods' cache and follows it (after the caches exist). */
int kite_node_graph_start(struct kite_apiserver *s);
void kite_node_graph_free(struct kite_node_graph *g); /* before the caches are freed; NULL ok */
/* The pod ns/name: bound to node, bound to another, or unknown/unbound. g may be NULL. */
enum kite_node_pod kite_node_graph_pod(struct kite_node_graph *g, const char *ns, const char *name, const char *node);
/* A pod bound to node references the object t ns/name. */
bool kite_node_graph_has(struct kite_node_graph *g, enum kite_node_ref t, const char *ns, const char *name,
                         const char *node);
/* Calls fn for every object a pod references: its service account, image pull secrets,
 * Secrets and ConfigMaps of env, envFrom and volumes (projected sources included), claims. */
typedef void (*kite_node_ref_fn)(enum kite_node_ref t, const char *name, void *ud);
void kite_node_graph_pod_refs(json_object *pod, kite_node_ref_fn fn, void *ud);

/* admission_node.c: the NodeRestriction admission plugin (validating). */
int kite_admission_node_restriction(const struct kite_admission_attrs *a, struct kite_admission_denial *d);
/* admission_csr.c: CertificateApproval, CertificateSigning, CertificateSubjectRestriction (validating). */
int kite_admission_csr_approval(const struct kite_admission_attrs *a, struct kite_admission_denial *d);
int kite_admission_csr_signing(const struct kite_admission_attrs *a, struct kite_admission_denial *d);
int kite_admission_csr_subject_restriction(const struct kite_admission_attrs *a, struct kite_admission_denial *d);
/* admission_serviceaccount.c: ServiceAccount (mutating). */
int kite_admission_service_account(const struct kite_admission_attrs *a, struct kite_admission_denial *d);
/* admission_podsecurity.c: PodSecurity (validating), its configuration from the options. */
struct kite_psa_config;
int kite_psa_config_new(const struct kite_apiserver_options *o, struct kite_psa_config **ret, char **ret_error);
void kite_psa_config_free(struct kite_psa_config *c);
int kite_admission_pod_security(const struct kite_admission_attrs *a, struct kite_admission_denial *d);

/* The one list of health paths: /healthz, /livez, /readyz and their checks below them. */
bool kite_apiserver_is_health_path(const char *path);
/* Paths anyone may get, anonymous included (kube-apiserver's system:public-info-viewer):
 * the health paths and /version. */
bool kite_apiserver_is_public_path(const char *path);

/* Whether r's schema lists every field of its Go type, so protobuf carries its objects whole
 * (storage_codec.c; the codec itself is in apiserver.h). */
bool kite_apiserver_codec_complete(const struct kite_apiserver_codec *c, const struct kite_resource *r);
/* Whether the stored JSON values a and b (of key) have the same envelope: the same object once
 * stored as protobuf. false when the codec writes JSON or either is no complete kind's. */
bool kite_apiserver_codec_same_stored(const struct kite_apiserver_codec *c, const char *key, const char *a, size_t a_len,
                                      const char *b, size_t b_len);
