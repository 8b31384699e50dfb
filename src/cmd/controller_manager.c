/* kite controller-manager: the controllers as their own process, an API client of any
 * apiserver (kite up runs the same controllers in-process). With --leader-elect (the
 * default) the controllers run only while this process holds the Lease
 * kube-system/kube-controller-manager, so several can run and one takes over when the leader
 * dies. */
#include "base/log.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "controllers/controllers.h"
#include "controllers/daemonset.h"
#include "controllers/job.h"
#include "controllers/endpointslice.h"
#include "controllers/leader.h"
#include "controllers/cronjob.h"
#include "controllers/replication.h"
#include "controllers/statefulset.h"
#include "controllers/workloads.h"
#include "controllers/manager.h"
#include "controllers/serviceaccounts.h"
#include "pki/pki.h"

#include <string.h>

#include <stdio.h>
#include <unistd.h>

#define LOG "controller-manager"
#define LEASE_NS "kube-system"
#define LEASE_NAME "kube-controller-manager"

#define CONTROLLER_FLAGS(a)                                                                                      \
    FLAG_BOOLEAN("leader-elect", "run the controllers only while holding the Lease "                             \
                 "kube-system/kube-controller-manager", &(a)->leader_elect, .def_note = "true"),                  \
    FLAG_DURATION("leader-elect-lease-duration", "how long a candidate waits after last seeing the lease change",  \
                  "15s", KITE_NS_PER_SEC, &(a)->le_duration_ns),                                                 \
    FLAG_DURATION("leader-elect-renew-deadline", "how long the leader keeps trying to renew before it stops",     \
                  "10s", KITE_NS_PER_MS, &(a)->le_renew_ns),                                                     \
    FLAG_DURATION("leader-elect-retry-period", "time between attempts to acquire or renew", "2s", KITE_NS_PER_MS, \
                  &(a)->le_retry_ns),                                                                            \
    FLAG_DURATION("node-monitor-grace-period", "how long a node may go unrenewed before it is marked Unknown",    \
                  KITE_NLC_GRACE_DEFAULT, KITE_NS_PER_SEC, &(a)->grace_ns),                                      \
    FLAG_DURATION("node-startup-grace-period", "how long a new node may go without posting status",               \
                  KITE_NLC_STARTUP_GRACE_DEFAULT, KITE_NS_PER_SEC, &(a)->startup_grace_ns),                      \
    FLAG_DURATION("node-monitor-period", "longest time between passes of the node lifecycle controller",          \
                  KITE_NLC_PERIOD_DEFAULT, 100 * KITE_NS_PER_MS, &(a)->period_ns),                               \
    FLAG_FLOAT("node-eviction-rate", "nodes per second given NoExecute taints in a healthy zone", "0.1", 0, 1000, \
               &(a)->eviction_rate),                                                                             \
    FLAG_FLOAT("secondary-node-eviction-rate", "the same in a zone past the unhealthy threshold", "0.01", 0, 1000, \
               &(a)->secondary_rate),                                                                            \
    FLAG_FLOAT("unhealthy-zone-threshold", "share of not-Ready nodes (at least 3) that makes a zone unhealthy",    \
               "0.55", 0, 1, &(a)->unhealthy_threshold),                                                         \
    FLAG_DURATION("cluster-signing-duration", "longest validity of a certificate the CSR signer issues", "8760h",    \
                  KITE_NS_PER_SEC, &(a)->signing_duration_ns),                                                   \
    POD_GC_FLAGS(a),                                                                                             \
    FLAG_DURATION("node-cleanup-after", "delete Nodes whose Ready condition has been Unknown this long (0: never)", \
                  "0s", 0, &(a)->node_cleanup_ns),                                                                \
    FLAG_INT("large-cluster-size-threshold", "zones with more nodes than this keep the secondary rate when "      \
             "unhealthy; smaller ones stop", "50", 0, 1000000, &(a)->large_cluster)

void controller_args_defaults(struct controller_args *a) {
    *a = (struct controller_args){
        .le_duration_ns = KITE_LEADER_LEASE_DURATION_NS,
        .le_renew_ns = KITE_LEADER_RENEW_DEADLINE_NS,
        .le_retry_ns = KITE_LEADER_RETRY_PERIOD_NS,
        .grace_ns = 50 * KITE_NS_PER_SEC,
        .startup_grace_ns = 60 * KITE_NS_PER_SEC,
        .period_ns = 5 * KITE_NS_PER_SEC,
        .large_cluster = KITE_NLC_LARGE_CLUSTER,
        .eviction_rate = KITE_NLC_EVICTION_RATE,
        .secondary_rate = KITE_NLC_SECONDARY_RATE,
        .unhealthy_threshold = KITE_NLC_UNHEALTHY_THRESHOLD,
        .signing_duration_ns = (int64_t)KITE_CSR_SIGNING_DURATION_S * KITE_NS_PER_SEC,
        .terminated_pod_gc_threshold = 12500,
        .pod_gc_orphan_delay_ns = 40 * KITE_NS_PER_SEC,
    };
}

/* ---- the controllers, one row each (or one per group sharing informers) ----
 * A row starts when any controller of its bits is on (--controllers; the row's start reads
 * `off` for its own). lead() starts them in order, unlead() stops them in reverse. */

static int start_namespace(struct kite_controllers *c, unsigned off) {
    struct kite_nsctl_options o = {.client = c->client};
    return kite_nsctl_start(&o, &c->nsctl);
}
static void stop_namespace(struct kite_controllers *c) { kite_nsctl_stop(TAKE_PTR(c->nsctl)); }

static int start_nodes(struct kite_controllers *c, unsigned off) {
    struct kite_ctlmgr_options o = {
        .client = c->client,
        .nlc = {.grace_ns = c->args.grace_ns,
                .startup_grace_ns = c->args.startup_grace_ns,
                .period_ns = c->args.period_ns,
                .eviction_rate = c->args.eviction_rate,
                .secondary_rate = c->args.secondary_rate,
                .unhealthy_threshold = c->args.unhealthy_threshold,
                .large_cluster = c->args.large_cluster},
        .podgc = {.terminated_threshold = c->args.terminated_pod_gc_threshold,
                  .orphan_delay_ns = c->args.pod_gc_orphan_delay_ns},
        .node_cleanup_after_ns = off & KITE_CTL_NODE_LIFECYCLE ? 0 : c->args.node_cleanup_ns,
        .off = off,
    };
    return kite_ctlmgr_start(&o, &c->nodes);
}
static void stop_nodes(struct kite_controllers *c) { kite_ctlmgr_stop(TAKE_PTR(c->nodes)); }

static int start_aggregation(struct kite_controllers *c, unsigned off) {
    struct kite_aggregator_options o = {.client = c->client};
    return kite_aggregator_start(&o, &c->aggregator);
}
static void stop_aggregation(struct kite_controllers *c) { kite_aggregator_stop(TAKE_PTR(c->aggregator)); }

static int start_workloads(struct kite_controllers *c, unsigned off) {
    struct kite_workloads_options o = {.client = c->client, .off = off};
    return kite_workloads_start(&o, &c->workloads);
}
static void stop_workloads(struct kite_controllers *c) { kite_workloads_stop(TAKE_PTR(c->workloads)); }

static int start_replication(struct kite_controllers *c, unsigned off) {
    struct kite_replication_options o = {.client = c->client};
    return kite_replication_start(&o, &c->replication);
}
static void stop_replication(struct kite_controllers *c) { kite_replication_stop(TAKE_PTR(c->replication)); }

static int start_statefulsets(struct kite_controllers *c, unsigned off) {
    struct kite_stsctl_options o = {.client = c->client};
    return kite_statefulsets_start(&o, &c->statefulsets);
}
static void stop_statefulsets(struct kite_controllers *c) { kite_statefulsets_stop(TAKE_PTR(c->statefulsets)); }

static int start_cronjobs(struct kite_controllers *c, unsigned off) {
    struct kite_cjctl_options o = {.client = c->client};
    return kite_cronjobs_start(&o, &c->cronjobs);
}
static void stop_cronjobs(struct kite_controllers *c) { kite_cronjobs_stop(TAKE_PTR(c->cronjobs)); }

static int start_jobs(struct kite_controllers *c, unsigned off) {
    struct kite_jobctl_options o = {.client = c->client};
    return kite_jobs_start(&o, &c->jobs);
}
static void stop_jobs(struct kite_controllers *c) { kite_jobs_stop(TAKE_PTR(c->jobs)); }

static int start_daemonsets(struct kite_controllers *c, unsigned off) {
    struct kite_dsctl_options o = {.client = c->client};
    return kite_daemonsets_start(&o, &c->daemonsets);
}
static void stop_daemonsets(struct kite_controllers *c) { kite_daemonsets_stop(TAKE_PTR(c->daemonsets)); }

/* the signer runs only with a CA (--cluster-signing-cert-file) */
static int start_csr(struct kite_controllers *c, unsigned off) {
    bool sign = !(off & KITE_CTL_CSR_SIGNING);
    struct kite_csrctl_options o = {.client = c->client,
                                    .ca_cert_pem = sign ? c->signing_cert : NULL,
                                    .ca_key_pem = sign ? c->signing_key : NULL,
                                    .signing_duration_s = c->args.signing_duration_ns / KITE_NS_PER_SEC,
                                    .no_approve = off & KITE_CTL_CSR_APPROVING};
    return o.no_approve && !o.ca_cert_pem ? 0 : kite_csrctl_start(&o, &c->csrctl);
}
static void stop_csr(struct kite_controllers *c) { kite_csrctl_stop(TAKE_PTR(c->csrctl)); }

static int start_endpointslices(struct kite_controllers *c, unsigned off) {
    struct kite_epsctl_options o = {.client = c->client};
    return kite_epsctl_start(&o, &c->endpointslices);
}
static void stop_endpointslices(struct kite_controllers *c) { kite_epsctl_stop(TAKE_PTR(c->endpointslices)); }

/* the publisher's CA is the kubeconfig's (upstream's default without --root-ca-file) */
static int start_serviceaccounts(struct kite_controllers *c, unsigned off) {
    struct kite_sactl_options o = {.client = c->client,
                                   .root_ca_pem = off & KITE_CTL_ROOT_CA_PUBLISHER ? NULL : c->root_ca,
                                   .no_serviceaccounts = off & KITE_CTL_SERVICEACCOUNT};
    return kite_serviceaccounts_start(&o, &c->serviceaccounts);
}
static void stop_serviceaccounts(struct kite_controllers *c) { kite_serviceaccounts_stop(TAKE_PTR(c->serviceaccounts)); }

static const struct {
    const char *what;
    unsigned bits;
    int (*start)(struct kite_controllers *c, unsigned off);
    void (*stop)(struct kite_controllers *c);
} ROWS[] = {
    {"the namespace controller", KITE_CTL_NAMESPACE, start_namespace, stop_namespace},
    {"the node controllers",
     KITE_CTL_NODE_LIFECYCLE | KITE_CTL_TAINT_EVICTION | KITE_CTL_POD_GC | KITE_CTL_DISRUPTION, start_nodes, stop_nodes},
    {"the clusterrole aggregation controller", KITE_CTL_CLUSTERROLE_AGGREGATION, start_aggregation, stop_aggregation},
    {"the workload controllers", KITE_CTL_REPLICASET | KITE_CTL_DEPLOYMENT | KITE_CTL_GARBAGE_COLLECTOR,
     start_workloads, stop_workloads},
    {"the replication controller", KITE_CTL_REPLICATION, start_replication, stop_replication},
    {"the job controller", KITE_CTL_JOB, start_jobs, stop_jobs},
    {"the cronjob controller", KITE_CTL_CRONJOB, start_cronjobs, stop_cronjobs},
    {"the daemon set controller", KITE_CTL_DAEMONSET, start_daemonsets, stop_daemonsets},
    {"the stateful set controller", KITE_CTL_STATEFULSET, start_statefulsets, stop_statefulsets},
    {"the certificate signing request controller", KITE_CTL_CSR_APPROVING | KITE_CTL_CSR_SIGNING, start_csr, stop_csr},
    {"the endpointslice controller", KITE_CTL_ENDPOINTSLICE, start_endpointslices, stop_endpointslices},
    {"the serviceaccount and root CA publisher controllers", KITE_CTL_SERVICEACCOUNT | KITE_CTL_ROOT_CA_PUBLISHER,
     start_serviceaccounts, stop_serviceaccounts},
};

/* Leadership gained: start the controllers (on the elector's thread; they start threads). */
static void lead(void *ud) {
    struct kite_controllers *c = ud;
    unsigned off = c->args.off;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(ROWS); i++) {
        int r;
        if ((off & ROWS[i].bits) != ROWS[i].bits && (r = ROWS[i].start(c, off)) < 0)
            log_error(LOG, "cannot start %s: %s", ROWS[i].what, strerror(-r));
    }
    log_info(LOG, "controllers running");
}

static void unlead(void *ud) {
    struct kite_controllers *c = ud;
    for (size_t i = KITE_ARRAY_SIZE(ROWS); i-- > 0;) ROWS[i].stop(c);
    log_info(LOG, "controllers stopped");
}

int controllers_start(const struct controller_args *a, struct kite_controllers *ret, char **ret_error) {
    struct kite_kubeconfig *kc = NULL;
    ret->args = *a;
    int r;
    if ((r = kite_controllers_off(a->controllers ? a->controllers->v : NULL, a->controllers ? a->controllers->n : 0,
                                  &ret->args.off, ret_error)) < 0)
        return r;
    if ((a->signing_cert_file == NULL) != (a->signing_key_file == NULL)) {
        *ret_error = kite_strdup("--cluster-signing-cert-file and --cluster-signing-key-file go together");
        return -EINVAL;
    }
    if (a->signing_duration_ns < KITE_CSR_MIN_EXPIRATION_S * KITE_NS_PER_SEC) {
        *ret_error = kite_asprintf("--cluster-signing-duration must be at least %ds", KITE_CSR_MIN_EXPIRATION_S);
        return -EINVAL;
    }
    if (a->signing_cert_file && (r = kite_pki_read_file(a->signing_cert_file, &ret->signing_cert)) < 0) {
        *ret_error = kite_asprintf("%s: %s", a->signing_cert_file, strerror(-r));
        return r;
    }
    if (a->signing_key_file && (r = kite_pki_read_file(a->signing_key_file, &ret->signing_key)) < 0) {
        *ret_error = kite_asprintf("%s: %s", a->signing_key_file, strerror(-r));
        free(TAKE_PTR(ret->signing_cert));
        return r;
    }
    r = kite_kubeconfig_load(a->kubeconfig, NULL, &kc, ret_error);
    if (r < 0) return r;
    if (a->root_ca_file && (r = kite_pki_read_file(a->root_ca_file, &ret->root_ca)) < 0) {
        *ret_error = kite_asprintf("%s: %s", a->root_ca_file, strerror(-r));
        kite_kubeconfig_free(kc);
        free(TAKE_PTR(ret->signing_cert));
        free(TAKE_PTR(ret->signing_key));
        return r;
    }
    if (!ret->root_ca && kc->ca_pem) ret->root_ca = kite_strdup(kc->ca_pem);
    struct kite_client_options co = {.user_agent = "kite-controller-manager"};
    r = kite_client_new(kc, &co, &ret->client);
    /* the election renews on a client of its own (as kube-controller-manager's), which the
     * write gate of the controllers' client does not hold back */
    struct kite_client_options leo = {.user_agent = "kite-controller-manager/leader-election"};
    if (r == 0 && a->leader_elect && (r = kite_client_new(kc, &leo, &ret->le_client)) < 0)
        kite_client_free(TAKE_PTR(ret->client));
    kite_kubeconfig_free(kc);
    if (r < 0) {
        *ret_error = kite_asprintf("%s: cannot use its server or credentials: %s", a->kubeconfig, strerror(-r));
        free(TAKE_PTR(ret->root_ca));
        return r;
    }
    if (!a->leader_elect) {
        lead(ret);
        return 0;
    }
    /* client-go's identity: the hostname and something unique to this process */
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    uint64_t salt = (uint64_t)kite_now_wall(kite_clock_real()) ^ ((uint64_t)getpid() << 32);
    _cleanup_free_ char *id = kite_asprintf("%s_%016llx", host, (unsigned long long)salt);
    struct kite_leader_options lo = {
        .client = ret->le_client, .gated = ret->client, .ns = LEASE_NS, .name = LEASE_NAME, .identity = id,
        .lease_duration_ns = a->le_duration_ns, .renew_deadline_ns = a->le_renew_ns, .retry_period_ns = a->le_retry_ns,
        .started = lead, .stopped = unlead, .ud = ret,
    };
    if ((r = kite_leader_start(&lo, &ret->leader)) < 0) {
        *ret_error = kite_asprintf("cannot start leader election: %s", strerror(-r));
        kite_client_free(TAKE_PTR(ret->client));
        kite_client_free(TAKE_PTR(ret->le_client));
        return r;
    }
    log_info(LOG, "leader election as %s on lease %s/%s", id, LEASE_NS, LEASE_NAME);
    return 0;
}

void controllers_stop(struct kite_controllers *c) {
    if (c->leader) kite_leader_stop(TAKE_PTR(c->leader)); /* calls unlead if leading, then releases */
    else unlead(c);
    kite_client_free(TAKE_PTR(c->client));
    kite_client_free(TAKE_PTR(c->le_client));
    free(TAKE_PTR(c->signing_cert));
    free(TAKE_PTR(c->root_ca));
    if (c->signing_key) explicit_bzero(c->signing_key, strlen(c->signing_key));
    free(TAKE_PTR(c->signing_key));
}

int cmd_controller_manager(int argc, char **argv) {
    struct controller_args a;
    controller_args_defaults(&a);
    a.leader_elect = true;
    struct flag_list ctls __attribute__((cleanup(flag_list_release))) = {0};
    a.controllers = &ctls;
    _cleanup_free_ char *ctl_help = kite_asprintf("controllers to run: '*' all, 'foo' foo, '-foo' not foo; names "
                                                  "as kube-controller-manager's or their short forms: %s",
                                                  kite_controllers_names());
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE", "kubeconfig with the API server address and credentials", NULL, &a.kubeconfig,
                 .required = true),
        CONTROLLER_FLAGS(&a),
        FLAG_STR("cluster-signing-cert-file", "FILE", "CA certificate (PEM) the CSR signer signs with", NULL,
                 &a.signing_cert_file),
        FLAG_STR("cluster-signing-key-file", "FILE", "key (PEM) of --cluster-signing-cert-file", NULL,
                 &a.signing_key_file),
        FLAG_STR("root-ca-file", "FILE", "the CA bundle (PEM) published as kube-root-ca.crt in every namespace", NULL,
                 &a.root_ca_file, .def_note = "the kubeconfig's certificate-authority"),
        FLAG_LIST("controllers", "NAME,...", ctl_help, "*", &ctls),
        FLAG_END};
    int r = flags_parse("controller-manager",
                        "Runs kite's controllers (namespace, node lifecycle, taint eviction, pod GC, clusterrole\n"
                        "aggregation, CSR approving and signing) against an API server.",
                        flags, argc, argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    /* client-go's checks: the leader must give up before a candidate may take over */
    if (a.leader_elect && (a.le_duration_ns <= a.le_renew_ns || (double)a.le_renew_ns <= KITE_LEADER_JITTER * (double)a.le_retry_ns)) {
        fprintf(stderr, "kite controller-manager: --leader-elect-lease-duration must be greater than "
                        "--leader-elect-renew-deadline, and that greater than %.1f x --leader-elect-retry-period\n",
                KITE_LEADER_JITTER);
        return 2;
    }
    struct kite_controllers c = {0};
    _cleanup_free_ char *err = NULL;
    if ((r = controllers_start(&a, &c, &err)) < 0) {
        log_error(LOG, "cannot start: %s", err ? err : strerror(-r));
        return 1;
    }
    log_info(LOG, "running against %s", a.kubeconfig);
    kite_wait_for_signal();
    log_info(LOG, "shutting down");
    controllers_stop(&c);
    return 0;
}
