/* kite controller-manager: the controllers as their own process, an API client of any
 * apiserver (kite up runs the same controllers in-process). With --leader-elect (the
 * default) the controllers run only while this process holds the Lease
 * kube-system/kube-controller-manager, so several can run and one takes over when the leader
 * dies. */
#include "base/log.h"
#include "client/factory.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "framework/ctlutil.h"
#include "apiserver/apiserver.h"
#include "controllers/controllers.h"
#include "framework/framework.h"
#include "framework/leader.h"
#include "controllers/node/nodelifecycle.h"
#include "pki/pki.h"

#include <string.h>

#include <stdio.h>
#include <unistd.h>

#define LOG "controller-manager"
#define LEASE_NAME "kube-controller-manager"

#define CONTROLLER_FLAGS(a)                                                                                      \
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

void kite_cmd_controller_args_defaults(struct controller_args *a) {
    *a = (struct controller_args){
        .el = {.le_duration_ns = KITE_LEADER_LEASE_DURATION_NS,
               .le_renew_ns = KITE_LEADER_RENEW_DEADLINE_NS,
               .le_retry_ns = KITE_LEADER_RETRY_PERIOD_NS},
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

/* ---- the controllers: the rows of KITE_CONTROLLERS (controllers/registry.c) ---- */

/* Leadership gained: the controllers --controllers leaves on join one group (shared informers,
 * a runner each), then its informers start (on the elector's thread; they start threads). */
static void lead(void *ud) {
    struct kite_controllers *c = ud;
    struct kite_ctl_config cfg = {
        .grace_ns = c->args.grace_ns,
        .startup_grace_ns = c->args.startup_grace_ns,
        .period_ns = c->args.period_ns,
        .large_cluster = c->args.large_cluster,
        .eviction_rate = c->args.eviction_rate,
        .secondary_rate = c->args.secondary_rate,
        .unhealthy_threshold = c->args.unhealthy_threshold,
        .node_cleanup_ns = c->args.node_cleanup_ns,
        .terminated_pod_gc_threshold = c->args.terminated_pod_gc_threshold,
        .pod_gc_orphan_delay_ns = c->args.pod_gc_orphan_delay_ns,
        .signing_cert = c->signing_cert,
        .signing_key = c->signing_key,
        .signing_duration_s = c->args.signing_duration_ns / KITE_NS_PER_SEC,
        .root_ca = c->root_ca,
    };
    c->group = kite_ctl_group_new(c->el.client, NULL);
    /* a restart under 100,000 nodes lists them without losing the renewals meanwhile */
    kite_informer_factory_set_watch_list(kite_ctl_group_informers(c->group), true);
    for (size_t i = 0; i < KITE_N_CONTROLLERS; i++) {
        int r;
        if (c->on[i] && (r = KITE_CONTROLLERS[i].start(c->group, &cfg)) < 0)
            log_error(LOG, "cannot start the %s: %s", KITE_CONTROLLERS[i].name, strerror(-r));
    }
    int r = kite_ctl_group_start(c->group);
    if (r < 0) log_error(LOG, "cannot start the controllers' informers: %s", strerror(-r));
    log_info(LOG, "controllers running");
}

static void unlead(void *ud) {
    struct kite_controllers *c = ud;
    kite_ctl_group_free(TAKE_PTR(c->group));
    log_info(LOG, "controllers stopped");
}

const struct kite_apiserver_role *kite_cmd_controller_roles(size_t *n) {
    static struct kite_apiserver_role roles[64];
    *n = KITE_MIN(KITE_N_CONTROLLERS, KITE_ARRAY_SIZE(roles));
    for (size_t i = 0; i < *n; i++)
        roles[i] = (struct kite_apiserver_role){kite_controllers_role(i), KITE_CONTROLLERS[i].rbac, KITE_CTL_USER};
    return roles;
}

int kite_cmd_controllers_start(const struct controller_args *a, struct kite_controllers *ret, char **ret_error) {
    ret->args = *a;
    int r;
    ret->on = kite_calloc(KITE_N_CONTROLLERS, sizeof *ret->on);
    if ((r = kite_controllers_select(a->controllers ? a->controllers->v : NULL, a->controllers ? a->controllers->n : 0,
                                     ret->on, ret_error)) < 0) {
        free(TAKE_PTR(ret->on));
        return r;
    }
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
    /* what kube-root-ca.crt publishes: --root-ca-file, else the kubeconfig's CA (upstream's default) */
    if (a->root_ca_file) r = kite_pki_read_file(a->root_ca_file, &ret->root_ca);
    else {
        struct kite_kubeconfig *kc = NULL;
        if ((r = kite_kubeconfig_load(a->el.kubeconfig, NULL, &kc, ret_error)) == 0 && kc->ca_pem)
            ret->root_ca = kite_strdup(kc->ca_pem);
        kite_kubeconfig_free(kc);
    }
    if (r < 0) {
        if (a->root_ca_file) *ret_error = kite_asprintf("%s: %s", a->root_ca_file, strerror(-r));
        free(TAKE_PTR(ret->signing_cert));
        free(TAKE_PTR(ret->signing_key));
        free(TAKE_PTR(ret->on));
        return r;
    }
    static const struct elected_component component = {
        .user_agent = "kite-controller-manager", .lease_name = LEASE_NAME, .log = LOG,
        /* the controllers' workers (KITE_CTL_WORKERS) make requests at once */
        .connections = KITE_CTL_WORKERS + 2, .started = lead, .stopped = unlead};
    if ((r = kite_cmd_elected_start(&ret->el, &a->el, &component, ret, ret_error)) < 0) {
        free(TAKE_PTR(ret->root_ca));
        free(TAKE_PTR(ret->signing_cert));
        free(TAKE_PTR(ret->signing_key));
        free(TAKE_PTR(ret->on));
    }
    return r;
}

void kite_cmd_controllers_stop(struct kite_controllers *c) {
    kite_cmd_elected_stop(&c->el, unlead, c);
    free(TAKE_PTR(c->signing_cert));
    free(TAKE_PTR(c->root_ca));
    if (c->signing_key) explicit_bzero(c->signing_key, strlen(c->signing_key));
    free(TAKE_PTR(c->signing_key));
    free(TAKE_PTR(c->on));
}

struct cmd {
    struct controller_args a;
    struct kite_controllers c;
};
static int start(void *ud, char **ret_error) {
    struct cmd *m = ud;
    return kite_cmd_controllers_start(&m->a, &m->c, ret_error);
}
static void stop(void *ud) { kite_cmd_controllers_stop(&((struct cmd *)ud)->c); }

int cmd_controller_manager(int argc, char **argv) {
    struct cmd m = {0};
    kite_cmd_controller_args_defaults(&m.a);
    struct flag_list ctls __attribute__((cleanup(kite_cmd_flag_list_release))) = {0};
    m.a.controllers = &ctls;
    _cleanup_free_ char *ctl_help = kite_asprintf("controllers to run: '*' all, 'foo' foo, '-foo' not foo; names "
                                                  "as kube-controller-manager's (or their short forms): %s",
                                                  kite_controllers_names());
    const struct flag flags[] = {
        CONTROLLER_FLAGS(&m.a),
        FLAG_STR("cluster-signing-cert-file", "FILE", "CA certificate (PEM) the CSR signer signs with", NULL,
                 &m.a.signing_cert_file),
        FLAG_STR("cluster-signing-key-file", "FILE", "key (PEM) of --cluster-signing-cert-file", NULL,
                 &m.a.signing_key_file),
        FLAG_STR("root-ca-file", "FILE", "the CA bundle (PEM) published as kube-root-ca.crt in every namespace", NULL,
                 &m.a.root_ca_file, .def_note = "the kubeconfig's certificate-authority"),
        FLAG_LIST("controllers", "NAME,...", ctl_help, "*", &ctls),
        FLAG_END};
    struct elected_cmd ec = {
        .cmd = "controller-manager",
        .summary = "Runs kite's controllers (--controllers names them), each on shared informers with a runner\n"
                   "of its own, against an API server.",
        .elect_desc = "run the controllers only while holding the Lease kube-system/kube-controller-manager",
        .log = LOG, .args = &m.a.el, .own = flags, .start = start, .stop = stop, .ud = &m};
    return kite_cmd_elected_main(&ec, argc, argv);
}
