/* kite up: a whole local cluster in one process — the apiserver on the embedded store, the
 * controllers, the scheduler and a node agent for this machine with its own node credential
 * (system:node:NAME). */
#include "agent/agent.h"
#include "agent/runtime/net.h"
#include "apiserver/apiserver.h"
#include "base/log.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "controllers/controllers.h"
#include "pki/pki.h"

#include <ctype.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int cmd_up(int argc, char **argv) {
    struct apiserver_args args = {0};
    const char *config = NULL;
    bool no_agent = false, update_kubeconfig = false;
    const char *context_name = "kite";
    int64_t signing_duration_ns = (int64_t)KITE_CSR_SIGNING_DURATION_S * KITE_NS_PER_SEC;
    struct agent_flag_args fa = {.cmd = "up"};
    struct controller_args cargs;
    kite_cmd_controller_args_defaults(&cargs); /* one controller-manager, in-process: no election */
    struct flag_list ctls __attribute__((cleanup(kite_cmd_flag_list_release))) = {0};
    cargs.controllers = &ctls;
    const struct flag flags[] = {
        APISERVER_FLAGS(&args),
        FLAG_STR("config", "FILE", "agent KubeletConfiguration YAML file (see kite agent --help)", NULL, &config),
        FLAG_BOOLEAN("no-agent", "run only the control plane", &no_agent),
        FLAG_BOOLEAN("update-kubeconfig",
                     "add this cluster to your kubeconfig ($KUBECONFIG's first file, else ~/.kube/config) as\n"
                     "--kubeconfig-context and switch to it; removed again at a clean stop (kind's and k3d's\n"
                     "behaviour; other contexts are left as they are)",
                     &update_kubeconfig),
        FLAG_STR("kubeconfig-context", "NAME", "the context, cluster and user name --update-kubeconfig writes", "kite",
                 &context_name),
        FLAG_DURATION("cluster-signing-duration", "longest validity of a certificate the CSR signer issues (with the "
                      "cluster CA)", "8760h", KITE_NS_PER_SEC, &signing_duration_ns),
        AGENT_CONFIG_FLAGS("DATA_DIR/agent"),
        POD_GC_FLAGS(&cargs),
        FLAG_LIST("controllers", "NAME,...", "controllers to run, as kite controller-manager --controllers", "*", &ctls),
        FLAG_END,
    };
    int r = kite_cmd_flags_parse("up", "Runs a local cluster: apiserver (embedded store) + a node agent for this machine.", flags,
                        argc, argv, kite_cmd_agent_flag_record, &fa);
    _cleanup_free_ bool *on = kite_calloc(KITE_N_CONTROLLERS, sizeof *on);
    _cleanup_free_ char *sel_err = NULL;
    if (r == 0 && kite_controllers_select(ctls.v, ctls.n, on, &sel_err) < 0) {
        fprintf(stderr, "kite up: %s\n", sel_err);
        r = -1;
    }
    if (r != 0) {
        kite_cmd_agent_flag_args_release(&fa);
        return r > 0 ? 0 : 2;
    }
    /* a local cluster refuses the pods that take the host (privileged, host namespaces, hostPath)
     * unless their namespace is labelled otherwise; kube-apiserver's default is privileged */
    if (!args.psa_default) args.psa_default = "baseline";
    struct kite_apiserver_options o;
    if (kite_cmd_apiserver_args_options(&args, &o) != 0) {
        kite_cmd_agent_flag_args_release(&fa);
        return 2;
    }
    cargs.grace_ns = args.node_grace_ns; /* one grace period for the report and the controller */
    const char *data_dir = o.data_dir;
    struct kite_agent_config ac;
    kite_agent_config_init(&ac);
    ac.proxy = ac.masquerade_pod_traffic = true; /* a local cluster routes its Services */
    ac.serve_dns = true;                         /* ... and answers their names */
    r = kite_cmd_agent_flags_apply(&fa, config, &ac);
    kite_cmd_agent_flag_args_release(&fa);
    if (r != 0) {
        kite_agent_config_release(&ac);
        return r;
    }
    o.kube_dns_service = true; /* the kube-dns Service, as kubeadm makes it */
    struct kite_apiserver *s;
    _cleanup_free_ char *start_err = NULL;
    if ((r = kite_apiserver_start(&o, &s, &start_err)) < 0) {
        if (r == -EADDRINUSE)
            log_error("up", "cannot start the apiserver: %s is in use (another kite up?): choose another address with "
                      "--listen", o.listen);
        else
            log_error("up", "cannot start the apiserver: %s", start_err ? start_err : strerror(-r));
        kite_agent_config_release(&ac);
        return 1;
    }
    log_info("up", "apiserver serving on %s; kubectl: KUBECONFIG=%s/admin.kubeconfig", kite_apiserver_url(s), data_dir);
    /* pods name the kube-dns ClusterIP in their resolv.conf, and each node's proxy routes it to the
     * node's own DNS responder; without that Service (its address held by another) they name
     * the responder's address */
    if (ac.proxy && ac.serve_dns && !ac.cluster_dns && kite_apiserver_kube_dns_ip(s))
        ac.cluster_dns = kite_strdup(kite_apiserver_kube_dns_ip(s));

    struct kite_controllers ctl = {0};
    /* the controllers run as themselves (system:kube-controller-manager), with what RBAC gives them */
    _cleanup_free_ char *ctl_kc = kite_asprintf("%s/controller-manager.kubeconfig", data_dir), *ctl_err = NULL;
    cargs.el.kubeconfig = ctl_kc;
    /* the signer has the data dir's CA, as kube-controller-manager's --cluster-signing-*-file */
    _cleanup_free_ char *ca_crt = kite_asprintf("%s/pki/ca.crt", data_dir), *ca_key = kite_asprintf("%s/pki/ca.key", data_dir);
    cargs.signing_cert_file = ca_crt;
    cargs.signing_key_file = ca_key;
    cargs.signing_duration_ns = signing_duration_ns;
    if ((r = kite_cmd_controllers_start(&cargs, &ctl, &ctl_err)) < 0)
        log_error("up", "cannot start the controllers: %s", ctl_err ? ctl_err : strerror(-r));

    /* the scheduler, as itself (system:kube-scheduler): nodes are candidates only once they exist */
    struct kite_scheduler_proc sched = {0};
    _cleanup_free_ char *sched_kc = kite_asprintf("%s/scheduler.kubeconfig", data_dir), *sched_err = NULL;
    struct scheduler_args sargs = {.el.kubeconfig = sched_kc}; /* one, in-process: no election */
    if ((r = kite_cmd_scheduler_start(&sargs, &sched, &sched_err)) < 0)
        log_error("up", "cannot start the scheduler: %s", sched_err ? sched_err : strerror(-r));

    struct kite_agent *agent = NULL;
    if (!no_agent) {
        if (!ac.node_name) {
            char host[256] = "localhost";
            gethostname(host, sizeof host - 1);
            for (char *c = host; *c; c++) *c = (char)tolower((unsigned char)*c);
            ac.node_name = kite_strdup(host);
        }
        if (!ac.root_dir || strcmp(ac.root_dir, "/var/lib/kite-agent") == 0) {
            free(ac.root_dir);
            ac.root_dir = kite_asprintf("%s/agent", data_dir);
        }
        mkdir(ac.root_dir, 0700);
        /* the local cluster's node names its pod range, as a node given --pod-cidr does */
        if (!ac.pod_cidr) ac.pod_cidr = kite_strdup(KITE_NET_POD_CIDR_DEFAULT);
        _cleanup_free_ char *pki = kite_asprintf("%s/pki", data_dir), *ca_path = kite_asprintf("%s/pki/ca.crt", data_dir);
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL, *cn = kite_asprintf("system:node:%s", ac.node_name);
        _cleanup_free_ char *kc_path = kite_asprintf("%s/agent.kubeconfig", data_dir);
        const char *orgs[] = {"system:nodes"};
        if ((r = kite_pki_read_file(ca_path, &ca)) < 0 || (r = kite_pki_issue_client(pki, cn, orgs, 1, &cert, &key)) < 0) {
            log_error("up", "cannot issue the node credential: %s", strerror(-r));
        } else {
            _cleanup_free_ char *kc = kite_pki_kubeconfig(ac.node_name, kite_apiserver_url(s), ca, cert, key, NULL);
            struct kite_agent_options ao = {.config = &ac, .kubeconfig = kc_path};
            if ((r = kite_write_file_atomic(kc_path, kc, strlen(kc), 0600, true)) < 0 || (r = kite_agent_start(&ao, &agent)) < 0)
                log_error("up", "cannot start the node agent: %s", strerror(-r));
            else
                log_info("up", "node agent running as system:node:%s", ac.node_name);
        }
        /* a node that cannot run (its port or pod bridge is another's) is refused at start, with
         * what is taken and the flag that changes it (logged above), not run half-way */
        if (!agent) {
            kite_cmd_scheduler_stop(&sched);
            kite_cmd_controllers_stop(&ctl);
            kite_apiserver_stop(s);
            kite_agent_config_release(&ac);
            return 1;
        }
    }
    if (update_kubeconfig) {
        _cleanup_free_ char *admin = kite_asprintf("%s/admin.kubeconfig", data_dir), *file = NULL, *kerr = NULL;
        if ((r = kite_kubeconfig_merge_cluster(admin, context_name, &file, &kerr)) < 0) {
            log_error("up", "cannot update your kubeconfig: %s", kerr ? kerr : strerror(-r));
            update_kubeconfig = false;
        } else {
            log_info("up", "kubeconfig %s: context \"%s\" added and current (kubectl needs no KUBECONFIG)", file,
                     context_name);
        }
    }
    kite_wait_for_signal();
    log_info("up", "shutting down");
    if (update_kubeconfig) {
        _cleanup_free_ char *kerr = NULL;
        if ((r = kite_kubeconfig_unmerge_cluster(context_name, kite_apiserver_url(s), &kerr)) < 0)
            log_error("up", "cannot remove context \"%s\" from your kubeconfig: %s", context_name,
                      kerr ? kerr : strerror(-r));
    }
    kite_agent_stop(agent);
    kite_cmd_scheduler_stop(&sched);
    kite_cmd_controllers_stop(&ctl);
    kite_apiserver_stop(s);
    kite_agent_config_release(&ac);
    return 0;
}
