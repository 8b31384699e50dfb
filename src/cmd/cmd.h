/* Subcommands (git's shape): int cmd_<name>(int argc, char **argv). Only src/cmd parses argv. */
#pragma once

int cmd_apiserver(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_kubeconfig(int argc, char **argv);
int cmd_certs(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* Blocks SIGINT/SIGTERM in every thread and waits for one of them; returns the signal. */
int kite_wait_for_signal(void);
/* Call first in main: blocks SIGINT/SIGTERM/SIGPIPE so threads started later inherit it. */
void kite_block_signals(void);
