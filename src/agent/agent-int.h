/* Agent internals shared by agent.c, register.c, heartbeat.c. Loop state is touched only
 * by the thread running kite_agent_step(); fields under `lock` are shared with the watch
 * thread and kite_agent_stop(). */
#pragma once
#include <pthread.h>

#include "agent/agent.h"
#include "agent/pods/pods.h"
#include "agent/dns/dns.h"
#include "agent/proxy/proxy.h"
#include "base/backoff.h"
#include "json/patch.h"

#define AGENT_LOG "agent"
#define KITE_AGENT_STATUS_RETRIES 5          /* nodeStatusUpdateRetry */
#define KITE_AGENT_LEASE_RETRIES 5           /* maxUpdateRetries */
#define KITE_AGENT_FAST_MIN_NS (100 * KITE_NS_PER_MS)
#define KITE_AGENT_FAST_MAX_NS (KITE_NS_PER_SEC)
#define KITE_AGENT_READY_GRACE_NS (120 * KITE_NS_PER_SEC) /* nodeReadyGracePeriod */
#define KITE_AGENT_JITTER 0.04

struct kite_agent {
    const struct kite_agent_config *cfg;
    struct kite_client *client;
    bool own_client;
    struct kite_clock *clock;
    kite_agent_status_fn status_fn;     /* one of these two */
    const struct kite_agent_status_source *status_src;
    void *status_ud;
    struct kite_ns_config ns;
    struct kite_ns_sources src;
    char *runtime_error; /* src.runtime_error's storage: the last Status answer's message */
    struct kite_runtime *runtime;
    int bridge_fd; /* the claim on the pod bridge (kite_net_bridge_claim), when the runtime is ours */
    bool own_runtime;
    struct kite_runtime *locked_rt; /* runtime shared by node status and the pods thread */
    struct kite_pods *pods;         /* the pods bound to the node (NULL with a custom status_fn) */
    uint64_t pods_fed_gen;          /* acked_gen last handed to pods */
    char *node_name;
    char *kubelet_version;
    char *kubeconfig_ca;            /* the kubeconfig's CA (PEM): the log endpoint's client CA by default */
    struct kite_proxy *proxy;       /* Service routing (--proxy-mode nftables) */
    struct kite_dns *dns;           /* cluster DNS (--serve-dns) */
    char *dns_addr;                 /* where it answers: the pod network's gateway */
    struct kite_logsrv *logsrv;     /* the log endpoint (started agents with pods) */
    uint64_t rng;
    int64_t report_freq_ns;   /* effective nodeStatusReportFrequency */

    /* shared */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stopping;
    char *deleted_uid;   /* uid from a DELETED watch event, consumed by step */
    bool threads;
    pthread_t thread, watch_thread;
    struct kite_cancel watch_cancel;

    /* loop state */
    bool registered;
    char *node_uid;       /* uid of the Node we registered or found */
    bool ever_registered;
    int64_t next_register, next_status, next_lease;
    struct kite_backoff reg_backoff, status_backoff, lease_backoff;
    /* The last status the server acknowledged and the last Lease it returned, kept serialized
     * (a NodeStatus as a json-c tree costs ~30 KiB, a node's whole state in `kite sim` under 20);
     * parsed when a sync needs them. */
    char *acked_status;        /* NULL = none */
    bool acked_ready;          /* it says Ready=True */
    uint64_t acked_gen;        /* changes of it */
    /* The last sync that found nothing to report (status_src only): its inputs' digest and
     * the acknowledged status it compared with (heartbeat.c) */
    bool memo_valid;
    uint64_t memo_digest, memo_gen;
    int64_t last_report;       /* mono time of the last successful PATCH; 0 = none */
    int64_t started;
    int64_t fast_period;       /* 0 = fast updates over */
    char *lease;               /* without uid, creationTimestamp, managedFields (not sent back);
                                  NULL = GET/POST next */
    bool status_failing, lease_failing, register_failing;
    bool force_report;         /* next status sync sends a full report */
    bool resync_status;        /* next status sync first takes the Node's status from the server */
    json_object *server_node;  /* latest Node from the watch, consumed by step (under lock) */
    struct kite_agent_stats stats;
};

/* register.c */
int kite_agent_register(struct kite_agent *a);
void kite_agent_post_event(struct kite_agent *a, const char *type, const char *reason, const char *message);
void kite_agent_post_events(struct kite_agent *a, struct kite_ns_events *ev);
/* Schema of the Node for strategic merge diffs: the server's (api registry row). */
const struct kite_smp_schema *kite_agent_node_schema(void);

/* heartbeat.c */
/* The status from the agent's source (status_fn or status_src), prev borrowed (may be NULL). */
int kite_agent_compute_status(struct kite_agent *a, json_object *prev, json_object **ret, struct kite_ns_events *ev);
void kite_agent_sync_status(struct kite_agent *a, int64_t now);
void kite_agent_sync_lease(struct kite_agent *a, int64_t now);
/* Marks the Node as gone: the next step registers again (if registerNode). */
void kite_agent_node_gone(struct kite_agent *a, const char *why);
/* The acknowledged status parsed (a new reference; NULL when none), and its replacement
 * (st borrowed; NULL = none). */
json_object *kite_agent_acked_status(struct kite_agent *a);
void kite_agent_set_acked_status(struct kite_agent *a, json_object *st);
/* Forgets the Lease: the next renewal GETs or POSTs it. */
void kite_agent_forget_lease(struct kite_agent *a);
/* Whether a NodeStatus (may be NULL) has Ready=True. */
bool kite_agent_status_ready(json_object *status);
/* Equality of two NodeStatus objects ignoring conditions' lastHeartbeatTime and order. */
bool kite_agent_status_equal(json_object *a, json_object *b);
/* statuscmp.c: the same without copies. 1 equal, 0 not, -1 cannot tell (not objects, a
 * condition without a string type). */
int kite_agent_status_cmp(json_object *a, json_object *b);
/* The serialized status text[0..len) against st, read in place: 1, 0, or -1 when the walk
 * cannot tell (a \u escape, a number other than a plain integer, ...: parse and compare then). */
int kite_agent_status_cmp_text(const char *text, size_t len, json_object *st);
