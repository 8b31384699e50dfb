/* `kite agent`: the node agent as its own process. Flags are kubelet flag names; the
 * --config file (KubeletConfiguration field names) is read first and flags override it. */
#include <signal.h>
#include <stdio.h>

#include "agent/agent.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

int agent_flag_record(const char *name, const char *value, void *ud) {
    struct agent_flag_args *a = ud;
    a->names = kite_realloc(a->names, (a->n + 1) * sizeof(char *));
    a->values = kite_realloc(a->values, (a->n + 1) * sizeof(char *));
    a->names[a->n] = name;
    a->values[a->n++] = value;
    return 0;
}

int agent_flags_apply(const struct agent_flag_args *a, const char *config_path, struct kite_agent_config *cfg) {
    _cleanup_free_ char *err = NULL;
    if (config_path && kite_agent_config_load_file(cfg, config_path, &err) < 0) {
        fprintf(stderr, "kite %s: %s\n", a->cmd, err ? err : "cannot read --config");
        return 2;
    }
    for (size_t i = 0; i < a->n; i++)
        if (kite_agent_config_set_flag(cfg, a->names[i], a->values[i], &err) < 0) {
            fprintf(stderr, "kite %s: %s\n", a->cmd, err ? err : "bad flag value");
            return 2;
        }
    return 0;
}

void agent_flag_args_release(struct agent_flag_args *a) {
    free(a->names);
    free(a->values);
    a->names = a->values = NULL;
    a->n = 0;
}

int cmd_agent(int argc, char **argv) {
    const char *kubeconfig = NULL, *config = NULL;
    struct agent_flag_args fa = {.cmd = "agent"};
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE", "kubeconfig with the API server address and credentials", NULL, &kubeconfig,
                 .required = true),
        FLAG_STR("config", "FILE",
                 "KubeletConfiguration YAML file: nodeStatusUpdateFrequency, nodeStatusReportFrequency,\n"
                 "nodeLeaseDurationSeconds, evictionHard, kubeReserved, systemReserved, maxPods,\n"
                 "registerNode, registerWithTaints, nodeStatusMaxImages, address, port, tlsCertFile,\n"
                 "tlsPrivateKeyFile, authentication.x509.clientCAFile, podCIDR",
                 NULL, &config),
        AGENT_CONFIG_FLAGS("/var/lib/kite-agent"),
        FLAG_END,
    };
    int r = flags_parse("agent",
                        "Runs the node agent: registers this machine as a Node, renews its Lease and reports\n"
                        "its status to the API server.",
                        flags, argc, argv, agent_flag_record, &fa);
    if (r != 0) {
        agent_flag_args_release(&fa);
        return r > 0 ? 0 : 2;
    }
    struct kite_agent_config cfg;
    kite_agent_config_init(&cfg);
    r = agent_flags_apply(&fa, config, &cfg);
    agent_flag_args_release(&fa);
    if (r != 0) {
        kite_agent_config_release(&cfg);
        return r;
    }
    struct kite_agent_options o = {.config = &cfg, .kubeconfig = kubeconfig};
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
