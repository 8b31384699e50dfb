/* Subcommands (git's shape): int cmd_<name>(int argc, char **argv). Only src/cmd parses argv. */
#pragma once

int cmd_apiserver(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_kubeconfig(int argc, char **argv);
int cmd_certs(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_controller_manager(int argc, char **argv);

/* The controllers, run by kite controller-manager and in-process by kite up (controller_manager.c). */
struct kite_client;
struct kite_nsctl;
struct kite_binder;
struct kite_controllers {
    struct kite_client *client;
    struct kite_nsctl *nsctl;
    struct kite_binder *binder; /* kite up with an agent: binds pods to its node */
};
/* 0, or -errno with *ret_error a malloc'ed message. */
int controllers_start(const char *kubeconfig, struct kite_controllers *ret, char **ret_error);
/* Starts the binder (until there is a scheduler): unassigned pods go to node. */
int controllers_start_binder(struct kite_controllers *c, const char *node);
void controllers_stop(struct kite_controllers *c);

/* Blocks SIGINT/SIGTERM in every thread and waits for one of them; returns the signal. */
int kite_wait_for_signal(void);
/* Call first in main: blocks SIGINT/SIGTERM/SIGPIPE so threads started later inherit it. */
void kite_block_signals(void);

/* The apiserver's flags, shared by kite apiserver and kite up (apiserver.c). */
struct kite_apiserver_options;
struct apiserver_args {
    const char *data_dir, *listen, *store, *tokens, *threads, *event_ttl, *max_conns;
};
#define APISERVER_FLAGS(a)                                                                                  \
    FLAG_STR("data-dir", "directory for the store, certificates and kubeconfigs (required)", &(a)->data_dir), \
    FLAG_STR("listen", "address to serve HTTPS on (default 127.0.0.1:6443)", &(a)->listen),                 \
    FLAG_STR("store", "store URL (default sqlite:DATA_DIR/kite.db)", &(a)->store),                            \
    FLAG_STR("token-auth-file", "static bearer tokens: CSV token,user,uid,\"group1,group2\"", &(a)->tokens),  \
    FLAG_STR("threads", "HTTP worker threads (default: number of CPUs)", &(a)->threads),                     \
    FLAG_STR("event-ttl", "how long events are kept after they last happened (default 1h)", &(a)->event_ttl), \
    FLAG_STR("max-connections", "client connections served at once; more wait in the listen backlog "          \
             "(default: the open-file limit, raised to its hard limit, less 512; at most 200000)", &(a)->max_conns)
/* Checks the parsed values and fills o (borrowing strings from a). 0, or 2 after printing why
 * as "kite CMD: ...". */
int apiserver_args_options(const char *cmd, const struct apiserver_args *a, struct kite_apiserver_options *o);
