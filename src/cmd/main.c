/* kite: one binary, subcommands in a table (git's main.c). */
#include "cmd/cmd.h"

#include <stdio.h>
#include <string.h>

struct cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct cmd COMMANDS[] = {
    {"up", cmd_up, "run a whole local cluster in one process (apiserver + node agent)"},
    {"apiserver", cmd_apiserver, "run the Kubernetes-compatible API server"},
    {"agent", cmd_agent, "run the node agent against an API server"},
    {"controller-manager", cmd_controller_manager, "run the controllers (namespace) against an API server"},
    {"scheduler", cmd_scheduler, "run the scheduler against an API server"},
    {"sim", cmd_sim, "run many simulated nodes on the node agent's code, for scale tests"},
    {"kubeconfig", cmd_kubeconfig, "print a kubeconfig for a node identity"},
    {"certs", cmd_certs, "create the CA and certificates in a data dir"},
    {"token", cmd_token, "create and list bootstrap tokens for joining nodes"},
    {"images", cmd_images, "import, list and remove the node's container images"},
    {"nodes", cmd_nodes, "list every node's state (divergences between machines and Node objects)"},
    {"store", cmd_store, "copy every object from one store into another (SQLite, etcd)"},
    {"version", cmd_version, "print the version"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: kite <command> [flags]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(f, "  %-19s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\nRun 'kite <command> --help' for the flags of a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (strcmp(argv[1], COMMANDS[i].name) == 0) {
            kite_block_signals();
            return COMMANDS[i].fn(argc - 1, argv + 1);
        }
    fprintf(stderr, "kite: '%s' is not a kite command\n\n", argv[1]);
    usage(stderr);
    return 2;
}
