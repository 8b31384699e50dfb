/* The controllers kite controller-manager runs: one descriptor row each (controllers.h), from
 * which --controllers, its help, the start on leadership and the default RBAC policy derive.
 * Adding a controller: its file (a core and its run on the framework, framework.h), one row
 * here (its start reads the config), and a test. */
#include "controllers/controllers.h"
#include "api/policy_rules.h"
#include "base/base.h"
#include "controllers/workloads/cronjob.h"
#include "controllers/workloads/daemonset.h"
#include "controllers/workloads/deployment.h"
#include "controllers/workloads/disruption.h"
#include "controllers/endpoints.h"
#include "controllers/endpointslice.h"
#include "framework/framework.h"
#include "controllers/gc.h"
#include "controllers/workloads/job.h"
#include "controllers/node/nodecleanup.h"
#include "controllers/node/nodelifecycle.h"
#include "controllers/node/podgc.h"
#include "controllers/workloads/replicaset.h"
#include "controllers/serviceaccounts.h"
#include "controllers/workloads/statefulset.h"
#include "controllers/node/tainteviction.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define READ KITE_RULE_READ
#define WRITE KITE_RULE_WRITE
#define RULE KITE_RULE
#define RULE_NAMES KITE_RULE_NAMES
#define CORE KITE_RULE_CORE
#define PODS_MAKE RULE("\"create\",\"delete\",\"patch\",\"update\"", CORE, "\"pods\"")

/* ---- the starts: config to a controller's options ---- */

static int start_namespace(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_nsctl_run(g); }

/* with --node-cleanup-after, the Nodes Unknown that long are deleted too (nodecleanup.h) */
static int start_node_lifecycle(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) {
    struct kite_nlc_options o = {.grace_ns = cfg->grace_ns,
                                 .startup_grace_ns = cfg->startup_grace_ns,
                                 .period_ns = cfg->period_ns,
                                 .eviction_rate = cfg->eviction_rate,
                                 .secondary_rate = cfg->secondary_rate,
                                 .unhealthy_threshold = cfg->unhealthy_threshold,
                                 .large_cluster = cfg->large_cluster};
    int r = kite_nlc_run(g, &o);
    struct kite_ncc_options co = {.after_ns = cfg->node_cleanup_ns};
    if (r == 0 && cfg->node_cleanup_ns > 0) r = kite_ncc_run(g, &co);
    return r;
}

static int start_taint_eviction(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_tec_run(g); }

static int start_podgc(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) {
    struct kite_podgc_options o = {.terminated_threshold = cfg->terminated_pod_gc_threshold,
                                   .orphan_delay_ns = cfg->pod_gc_orphan_delay_ns};
    return kite_podgc_run(g, &o);
}

static int start_disruption(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_dc_run(g); }
static int start_replicaset(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) {
    return kite_rsc_run(g, &KITE_RSC_REPLICASET);
}
static int start_replication(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) {
    return kite_rsc_run(g, &KITE_RSC_REPLICATIONCONTROLLER);
}
static int start_deployment(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_deployctl_run(g); }
static int start_gc(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_gc_run(g); }
static int start_job(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_jobctl_run(g); }
static int start_cronjob(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_cjctl_run(g); }
static int start_statefulset(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_stsctl_run(g); }
static int start_daemonset(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_dsctl_run(g); }
static int start_csr_approving(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_csr_approver_run(g); }

/* the signer runs only with a CA (--cluster-signing-cert-file) */
static int start_csr_signing(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) {
    if (!cfg->signing_cert || !cfg->signing_key) return 0;
    struct kite_csr_signer_options o = {.ca_cert_pem = cfg->signing_cert, .ca_key_pem = cfg->signing_key,
                                        .signing_duration_s = cfg->signing_duration_s};
    return kite_csr_signer_run(g, &o);
}

static int start_endpoints(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_epc_run(g); }
static int start_endpointslice(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_epsctl_run(g, NULL); }
static int start_aggregation(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) { return kite_aggregator_run(g); }
static int start_serviceaccount(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) {
    return kite_sactl_run_serviceaccounts(g);
}
/* publishes --root-ca-file, else the kubeconfig's CA (none: the controller does nothing) */
static int start_root_ca(struct kite_ctl_group *g, const struct kite_ctl_config *cfg) {
    return kite_sactl_run_root_ca(g, cfg->root_ca);
}

/* ---- the rows ---- */

const struct kite_ctl_desc KITE_CONTROLLERS[] = {
    /* empties any namespaced resource of a namespace being deleted */
    {"namespace-controller", "namespace", start_namespace,
     "[" RULE(READ, CORE, "\"namespaces\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"namespaces/finalize\",\"namespaces/status\"") ","
     RULE("\"delete\",\"deletecollection\",\"get\",\"list\"", "\"*\"", "\"*\"") "]"},
    /* marks nodes and their pods (upstream's node-controller); deletes long-Unknown nodes */
    {"node-lifecycle-controller", "nodelifecycle", start_node_lifecycle,
     "[" RULE(READ ",\"delete\",\"patch\",\"update\"", CORE, "\"nodes\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"nodes/status\",\"pods/status\"") ","
     RULE(READ, "\"coordination.k8s.io\"", "\"leases\"") ","
     RULE(READ, CORE, "\"pods\"") "]"},
    {"taint-eviction-controller", NULL, start_taint_eviction,
     "[" RULE(READ, CORE, "\"nodes\"") ","
     RULE(READ ",\"delete\"", CORE, "\"pods\"") "]"},
    {"pod-garbage-collector-controller", "podgc", start_podgc,
     "[" RULE(READ, CORE, "\"nodes\"") ","
     RULE(READ ",\"delete\"", CORE, "\"pods\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"pods/status\"") "]"},
    {"disruption-controller", "disruption", start_disruption,
     "[" RULE(READ, CORE, "\"pods\"") ","
     RULE(READ, "\"policy\"", "\"poddisruptionbudgets\"") ","
     RULE("\"update\"", "\"policy\"", "\"poddisruptionbudgets/status\"") "]"},
    {"replicaset-controller", "replicaset", start_replicaset,
     "[" RULE(READ "," WRITE, "\"apps\"", "\"replicasets\"") ","
     RULE("\"patch\",\"update\"", "\"apps\"", "\"replicasets/status\",\"replicasets/finalizers\"") ","
     RULE(READ, CORE, "\"pods\"") "," PODS_MAKE "]"},
    /* v1 ReplicationControllers, on the ReplicaSet controller's core */
    {"replicationcontroller-controller", "replicationcontroller", start_replication,
     "[" RULE(READ ",\"patch\",\"update\"", CORE, "\"replicationcontrollers\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"replicationcontrollers/status\",\"replicationcontrollers/finalizers\"") ","
     RULE(READ, CORE, "\"pods\"") "," PODS_MAKE "]"},
    {"deployment-controller", "deployment", start_deployment,
     "[" RULE(READ ",\"patch\",\"update\"", "\"apps\"", "\"deployments\"") ","
     RULE("\"patch\",\"update\"", "\"apps\"", "\"deployments/status\",\"deployments/finalizers\"") ","
     RULE(READ "," WRITE, "\"apps\"", "\"replicasets\"") ","
     RULE(READ, CORE, "\"pods\"") "]"},
    /* every kind's owner references (upstream's generic-garbage-collector) */
    {"garbage-collector-controller", "garbagecollector", start_gc,
     "[" RULE(READ ",\"delete\",\"patch\",\"update\"", "\"*\"", "\"*\"") "]"},
    {"job-controller", "job", start_job,
     "[" RULE(READ ",\"patch\",\"update\"", "\"batch\"", "\"jobs\"") ","
     RULE("\"patch\",\"update\"", "\"batch\"", "\"jobs/status\",\"jobs/finalizers\"") ","
     RULE(READ, CORE, "\"pods\"") "," PODS_MAKE "]"},
    {"cronjob-controller", "cronjob", start_cronjob,
     "[" RULE(READ, "\"batch\"", "\"cronjobs\"") ","
     RULE("\"patch\",\"update\"", "\"batch\"", "\"cronjobs/status\",\"cronjobs/finalizers\"") ","
     RULE(READ ",\"create\",\"delete\"", "\"batch\"", "\"jobs\"") "]"},
    {"daemonset-controller", "daemonset", start_daemonset,
     "[" RULE(READ, "\"apps\"", "\"daemonsets\"") ","
     RULE("\"patch\",\"update\"", "\"apps\"", "\"daemonsets/status\",\"daemonsets/finalizers\"") ","
     RULE(READ "," WRITE, "\"apps\"", "\"controllerrevisions\"") ","
     RULE(READ, CORE, "\"nodes\"") ","
     RULE(READ, CORE, "\"pods\"") "," PODS_MAKE "]"},
    {"statefulset-controller", "statefulset", start_statefulset,
     "[" RULE(READ, "\"apps\"", "\"statefulsets\"") ","
     RULE("\"patch\",\"update\"", "\"apps\"", "\"statefulsets/status\",\"statefulsets/finalizers\"") ","
     RULE(READ "," WRITE, "\"apps\"", "\"controllerrevisions\"") ","
     RULE(READ, CORE, "\"pods\"") "," PODS_MAKE "]"},
    {"certificatesigningrequest-approving-controller", "csrapproving", start_csr_approving,
     "[" RULE(READ, "\"certificates.k8s.io\"", "\"certificatesigningrequests\"") ","
     RULE("\"update\"", "\"certificates.k8s.io\"", "\"certificatesigningrequests/approval\"") ","
     RULE_NAMES("\"approve\"", "\"certificates.k8s.io\"", "\"signers\"", "\"kubernetes.io/kube-apiserver-client-kubelet\"") ","
     RULE("\"create\"", "\"authorization.k8s.io\"", "\"subjectaccessreviews\"") "]"},
    {"certificatesigningrequest-signing-controller", "csrsigning", start_csr_signing,
     "[" RULE(READ, "\"certificates.k8s.io\"", "\"certificatesigningrequests\"") ","
     RULE("\"update\"", "\"certificates.k8s.io\"", "\"certificatesigningrequests/status\"") ","
     RULE_NAMES("\"sign\"", "\"certificates.k8s.io\"", "\"signers\"",
                "\"kubernetes.io/kube-apiserver-client-kubelet\",\"kubernetes.io/kube-apiserver-client\"") "]"},
    /* upstream's endpoints-controller, whose ClusterRole is system:controller:endpoint-controller */
    {"endpoint-controller", "endpoint", start_endpoints,
     "[" RULE(READ, CORE, "\"services\",\"pods\"") ","
     RULE("\"create\",\"delete\",\"get\",\"list\",\"update\",\"watch\"", CORE, "\"endpoints\"") ","
     RULE("\"create\"", CORE, "\"endpoints/restricted\"") "]"},
    {"endpointslice-controller", "endpointslice", start_endpointslice,
     "[" RULE(READ, CORE, "\"services\",\"pods\",\"nodes\"") ","
     RULE("\"update\"", CORE, "\"services/finalizers\"") ","
     RULE("\"create\",\"delete\",\"get\",\"list\",\"update\",\"watch\"", "\"discovery.k8s.io\"", "\"endpointslices\"") "]"},
    /* escalate: it writes rules it does not hold */
    {"clusterrole-aggregation-controller", "clusterrole-aggregation", start_aggregation,
     "[" RULE("\"escalate\",\"get\",\"list\",\"patch\",\"update\",\"watch\"", "\"rbac.authorization.k8s.io\"",
              "\"clusterroles\"") "]"},
    /* the ServiceAccount `default` in every namespace */
    {"serviceaccount-controller", "serviceaccount", start_serviceaccount,
     "[" RULE(READ, CORE, "\"namespaces\"") ","
     RULE(READ ",\"create\"", CORE, "\"serviceaccounts\"") "]"},
    /* the ConfigMap kube-root-ca.crt in every namespace */
    {"root-ca-certificate-publisher-controller", "root-ca-cert-publisher", start_root_ca,
     "[" RULE(READ, CORE, "\"namespaces\"") ","
     RULE(READ ",\"create\",\"update\"", CORE, "\"configmaps\"") "]"},
};
const size_t KITE_N_CONTROLLERS = KITE_ARRAY_SIZE(KITE_CONTROLLERS);

/* ---- derived: --controllers, its help, the roles ---- */

static ssize_t index_of(const char *name) {
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++)
        if (!strcmp(name, KITE_CONTROLLERS[i].name) || kite_streq(name, KITE_CONTROLLERS[i].alias)) return (ssize_t)i;
    return -1;
}

/* As kube-controller-manager reads the list: "*" turns on every controller, "foo" turns foo
 * on, "-foo" off; a name both on and off is off. An empty list means "*". */
int kite_controllers_select(char *const *names, size_t n, bool *on, char **ret_error) {
    bool star = n == 0;
    bool *named = kite_calloc(KITE_N_CONTROLLERS, sizeof *named), *off = kite_calloc(KITE_N_CONTROLLERS, sizeof *off);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        const char *s = names[i];
        if (!strcmp(s, "*")) {
            star = true;
            continue;
        }
        bool neg = s[0] == '-';
        ssize_t k = index_of(neg ? s + 1 : s);
        if (k < 0) {
            *ret_error = kite_asprintf("--controllers: \"%s\" is not in the list of known controllers", neg ? s + 1 : s);
            r = -EINVAL;
        } else if (neg) {
            off[k] = true;
        } else {
            named[k] = true;
        }
    }
    for (size_t i = 0; r == 0 && i < KITE_N_CONTROLLERS; i++) on[i] = (star || named[i]) && !off[i];
    free(named);
    free(off);
    return r;
}

const char *kite_controllers_names(void) {
    static char names[2048]; /* filled on the first call (flag parsing) */
    if (!*names) {
        size_t at = 0;
        for (size_t i = 0; i < KITE_N_CONTROLLERS && at < sizeof names; i++) {
            const struct kite_ctl_desc *d = &KITE_CONTROLLERS[i];
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", d->name);
            if (d->alias && at < sizeof names) at += (size_t)snprintf(names + at, sizeof names - at, " (%s)", d->alias);
        }
    }
    return names;
}

const char *kite_controllers_role(size_t i) {
    static char roles[64][128]; /* filled on the first call for each row */
    if (i >= KITE_N_CONTROLLERS || i >= KITE_ARRAY_SIZE(roles)) return NULL;
    if (!roles[i][0]) snprintf(roles[i], sizeof roles[i], KITE_CTL_ROLE_PREFIX "%s", KITE_CONTROLLERS[i].name);
    return roles[i];
}
