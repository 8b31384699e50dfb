/* `kite agent`: the node agent as its own process. Flags are kubelet flag names; the
 * --config file (KubeletConfiguration field names) is read first and flags override it. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/certmgr.h"
#include "agent/proxy/proxy.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

int kite_cmd_agent_flag_record(const char *name, const char *value, void *ud) {
    struct agent_flag_args *a = ud;
    a->names = kite_realloc(a->names, (a->n + 1) * sizeof(char *));
    a->values = kite_realloc(a->values, (a->n + 1) * sizeof(char *));
    a->names[a->n] = name;
    a->values[a->n++] = value;
    return 0;
}

int kite_cmd_agent_flags_apply(const struct agent_flag_args *a, const char *config_path, struct kite_agent_config *cfg) {
    _cleanup_free_ char *err = NULL;
    if (config_path && kite_agent_config_load_file(cfg, config_path, &err) < 0) {
        fprintf(stderr, "%s%s: %s\n", kite_cmd_flags_prog_prefix(a->cmd), a->cmd, err ? err : "cannot read --config");
        return 2;
    }
    for (size_t i = 0; i < a->n; i++)
        if (kite_agent_config_set_flag(cfg, a->names[i], a->values[i], &err) < 0) {
            fprintf(stderr, "%s%s: %s\n", kite_cmd_flags_prog_prefix(a->cmd), a->cmd, err ? err : "bad flag value");
            return 2;
        }
    return 0;
}

void kite_cmd_agent_flag_args_release(struct agent_flag_args *a) {
    free(a->names);
    free(a->values);
    a->names = a->values = NULL;
    a->n = 0;
}

/* TLS bootstrap runs on a thread of its own so that SIGINT/SIGTERM (waited for by the main
 * thread) can stop an agent still waiting for its certificate; when it fails it ends the
 * process the same way. */
struct boot {
    struct kite_certmgr_options cm;
    struct kite_agent_options ao;
    struct kite_cancel cancel;
    struct kite_agent *agent;
    struct kite_certmgr *certmgr;
    int rc;
};

static void *boot_run(void *ud) {
    struct boot *b = ud;
    _cleanup_free_ char *err = NULL;
    b->rc = kite_certmgr_bootstrap(&b->cm, &b->cancel, &err);
    if (b->rc == 0 && !kite_cancel_fired(&b->cancel)) {
        b->rc = kite_agent_start(&b->ao, &b->agent); /* logs why */
        if (b->rc == 0) {
            log_info("agent", "node agent for %s started", kite_agent_node_name(b->agent));
            if ((b->rc = kite_certmgr_start(&b->cm, kite_agent_client(b->agent), &b->certmgr)) < 0)
                err = kite_asprintf("cannot start the certificate manager: %s", strerror(-b->rc));
        }
    }
    if (b->rc < 0 && b->rc != -ECANCELED) {
        if (err) log_error("agent", "%s", err);
        kill(getpid(), SIGTERM);
    }
    return NULL;
}

static int run_bootstrapped(struct boot *b) {
    kite_cancel_init(&b->cancel);
    pthread_t t;
    if (pthread_create(&t, NULL, boot_run, b) != 0) {
        kite_cancel_release(&b->cancel);
        return 1;
    }
    int sig = kite_wait_for_signal();
    kite_cancel_fire(&b->cancel);
    pthread_join(t, NULL);
    kite_cancel_release(&b->cancel);
    if (b->rc == 0) log_info("agent", "%s: stopping", strsignal(sig));
    kite_certmgr_stop(b->certmgr);
    kite_agent_stop(b->agent);
    return b->rc < 0 && b->rc != -ECANCELED ? 1 : 0;
}

int cmd_agent(int argc, char **argv) {
    return kite_cmd_agent_main("agent", argc, argv);
}

int kite_cmd_agent_main(const char *cmd, int argc, char **argv) {
    const char *kubeconfig = NULL, *config = NULL, *bootstrap_kubeconfig = NULL, *cert_dir = NULL;
    int64_t rotate_after_ns = 0;
    bool cleanup = false;
    struct agent_flag_args fa = {.cmd = cmd};
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE", "kubeconfig with the API server address and credentials", NULL, &kubeconfig,
                 .required = true, .unless = "cleanup"),
        FLAG_STR("config", "FILE",
                 "KubeletConfiguration YAML file: nodeStatusUpdateFrequency, nodeStatusReportFrequency,\n"
                 "nodeLeaseDurationSeconds, evictionHard, kubeReserved, systemReserved, maxPods,\n"
                 "registerNode, registerWithTaints, nodeStatusMaxImages, address, port, tlsCertFile,\n"
                 "tlsPrivateKeyFile, authentication.x509.clientCAFile, podCIDR",
                 NULL, &config),
        AGENT_CONFIG_FLAGS("/var/lib/kite-agent"),
        FLAG_STR("bootstrap-kubeconfig", "FILE",
                 "kubeconfig with a bootstrap token: when --kubeconfig does not exist or its certificate\n"
                 "expired, ask for a client certificate with it and write --kubeconfig; then renew the\n"
                 "certificate before it expires",
                 NULL, &bootstrap_kubeconfig),
        FLAG_STR("cert-dir", "DIR", "where the client certificate and key are kept (" KITE_CERTMGR_CERT_FILE ")", NULL,
                 &cert_dir, .def_note = "ROOT_DIR/pki"),
        FLAG_DURATION("rotate-certificates-after", "renew the client certificate this long after it was obtained "
                      "instead of at 70-90% of its lifetime (tests)", NULL, KITE_NS_PER_SEC, &rotate_after_ns),
        FLAG_BOOLEAN("cleanup", "remove the Service proxy's nftables table (--proxy-table) and exit", &cleanup),
        FLAG_END,
    };
    int r = kite_cmd_flags_parse(cmd,
                        "Runs the node agent: registers this machine as a Node, renews its Lease and reports\n"
                        "its status to the API server.",
                        flags, argc, argv, kite_cmd_agent_flag_record, &fa);
    if (r != 0) {
        kite_cmd_agent_flag_args_release(&fa);
        return r > 0 ? 0 : 2;
    }
    struct kite_agent_config cfg;
    kite_agent_config_init(&cfg);
    r = kite_cmd_agent_flags_apply(&fa, config, &cfg);
    kite_cmd_agent_flag_args_release(&fa);
    if (r != 0) {
        kite_agent_config_release(&cfg);
        return r;
    }
    if (cleanup) {
        _cleanup_free_ char *script = kite_proxy_cleanup_script(cfg.proxy_table ? cfg.proxy_table : KITE_PROXY_TABLE_DEFAULT);
        _cleanup_free_ char *err = NULL;
        r = kite_proxy_nft_run(script, false, &err);
        if (r < 0) fprintf(stderr, "%s%s: --cleanup: %s", kite_cmd_flags_prog_prefix(cmd), cmd, err ? err : "nftables failed\n");
        kite_agent_config_release(&cfg);
        return r < 0 ? 1 : 0;
    }
    struct kite_agent_options o = {.config = &cfg, .kubeconfig = kubeconfig};
    if (bootstrap_kubeconfig) {
        _cleanup_free_ char *dir = cert_dir ? kite_strdup(cert_dir) : kite_asprintf("%s/pki", cfg.root_dir);
        _cleanup_free_ char *node = cfg.node_name ? kite_strdup(cfg.node_name) : kite_agent_default_node_name();
        struct boot b = {.cm = {.bootstrap_kubeconfig = bootstrap_kubeconfig, .kubeconfig = kubeconfig, .cert_dir = dir,
                                .node_name = node ? node : "localhost", .rotate_after_ns = rotate_after_ns},
                         .ao = o};
        r = run_bootstrapped(&b);
        kite_agent_config_release(&cfg);
        return r;
    }
    struct kite_agent *a = NULL;
    if (kite_agent_start(&o, &a) < 0) { /* kite_agent_start logged why */
        kite_agent_config_release(&cfg);
        return 1;
    }
    log_info("agent", "node agent for %s started", kite_agent_node_name(a));
    int sig = kite_wait_for_signal(); /* main blocked the signals before any thread started */
    log_info("agent", "%s: stopping", strsignal(sig));
    kite_agent_stop(a);
    kite_agent_config_release(&cfg);
    return 0;
}
