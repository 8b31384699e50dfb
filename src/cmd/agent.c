/* `kite agent`: the node agent as its own process. Flags are kubelet flag names; the
 * --config file (KubeletConfiguration field names) is read first and flags override it. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>

#include "agent/agent.h"
#include "base/log.h"
#include "cmd/cmd.h"

struct flag {
    const char *name, *arg, *help;
};

/* One row per flag; the rows after the first three go to kite_agent_config_set_flag(). */
static const struct flag flags[] = {
    {"kubeconfig", "FILE", "kubeconfig with the API server address and credentials (required)"},
    {"config", "FILE", "KubeletConfiguration YAML file: nodeStatusUpdateFrequency, nodeStatusReportFrequency,\n"
                       "nodeLeaseDurationSeconds, evictionHard, kubeReserved, systemReserved, maxPods,\n"
                       "registerNode, registerWithTaints, nodeStatusMaxImages, address, port"},
    {"help", NULL, "show this help"},
    {"node-name", "NAME", "name of the Node object (default: the lower-cased hostname)"},
    {"node-ip", "IP", "InternalIP address to report (default: address of the default-route interface)"},
    {"node-labels", "K=V,...", "labels to add when registering the Node"},
    {"register-with-taints", "K[=V]:EFFECT,...", "taints to add when registering (effect NoSchedule,\n"
                                                  "PreferNoSchedule or NoExecute)"},
    {"register-node", "BOOL", "create the Node object, and create it again if it is deleted (default true)"},
    {"register-schedulable", "BOOL", "register as schedulable; false sets spec.unschedulable (default true)"},
    {"node-status-update-frequency", "DURATION", "how often node status is computed (default 10s)"},
    {"node-status-report-frequency", "DURATION", "longest time between status reports when nothing changes\n"
                                                 "(default 5m, or the update frequency if only that is set)"},
    {"node-lease-duration-seconds", "N", "lease duration; renewed every quarter of it (default 40)"},
    {"max-pods", "N", "pods this node can run (default 110)"},
    {"root-dir", "DIR", "agent state directory; ephemeral storage is its filesystem (default /var/lib/kite-agent)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: kite agent --kubeconfig FILE [--node-name NAME] [--config FILE] [flags]\n\n"
               "Runs the node agent: registers this machine as a Node, renews its Lease and reports\n"
               "its status to the API server.\n\nflags:\n");
    for (size_t i = 0; i < KITE_ARRAY_SIZE(flags); i++) {
        char head[80];
        snprintf(head, sizeof(head), "--%s%s%s", flags[i].name, flags[i].arg ? " " : "", flags[i].arg ? flags[i].arg : "");
        fprintf(f, "  %-38s ", head);
        for (const char *p = flags[i].help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fprintf(f, "  %-38s ", "");
        }
        fputc('\n', f);
    }
}

int cmd_agent(int argc, char **argv) {
    struct option opts[KITE_ARRAY_SIZE(flags) + 1];
    for (size_t i = 0; i < KITE_ARRAY_SIZE(flags); i++)
        opts[i] = (struct option){flags[i].name, flags[i].arg ? required_argument : no_argument, NULL, (int)i};
    opts[KITE_ARRAY_SIZE(flags)] = (struct option){0};
    const char *kubeconfig = NULL, *config = NULL;
    /* flags are applied after the file, in command-line order */
    int *set_idx = kite_calloc((size_t)argc + 1, sizeof(int));
    char **set_val = kite_calloc((size_t)argc + 1, sizeof(char *));
    size_t n_set = 0;
    int c, ret = 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h' || (c >= 0 && kite_streq(flags[c].name, "help"))) {
            usage(stdout);
            ret = 0;
            goto out;
        }
        if (c < 0 || c >= (int)KITE_ARRAY_SIZE(flags)) {
            usage(stderr);
            ret = 2;
            goto out;
        }
        if (kite_streq(flags[c].name, "kubeconfig")) kubeconfig = optarg;
        else if (kite_streq(flags[c].name, "config")) config = optarg;
        else set_idx[n_set] = c, set_val[n_set++] = optarg;
    }
    if (optind < argc) {
        fprintf(stderr, "kite agent: unexpected argument \"%s\"\n", argv[optind]);
        ret = 2;
        goto out;
    }
    if (!kubeconfig) {
        fprintf(stderr, "kite agent: --kubeconfig is required\n");
        ret = 2;
        goto out;
    }
    struct kite_agent_config cfg;
    kite_agent_config_init(&cfg);
    char *err = NULL;
    if (config && kite_agent_config_load_file(&cfg, config, &err) < 0) {
        fprintf(stderr, "kite agent: %s\n", err ? err : "cannot read --config");
        goto out_cfg;
    }
    for (size_t i = 0; i < n_set; i++) {
        if (kite_agent_config_set_flag(&cfg, flags[set_idx[i]].name, set_val[i], &err) < 0) {
            fprintf(stderr, "kite agent: %s\n", err ? err : "bad flag");
            goto out_cfg;
        }
    }
    struct kite_agent_options o = {.config = &cfg, .kubeconfig = kubeconfig};
    struct kite_agent *a = NULL;
    if (kite_agent_start(&o, &a) < 0) goto out_cfg; /* kite_agent_start logged why */
    log_info("agent", "node agent for %s started", kite_agent_node_name(a));
    int sig = kite_wait_for_signal(); /* main blocked the signals before any thread started */
    log_info("agent", "%s: stopping", strsignal(sig));
    kite_agent_stop(a);
    ret = 0;
out_cfg:
    free(err);
    kite_agent_config_release(&cfg);
out:
    free(set_idx);
    free(set_val);
    return ret;
}
