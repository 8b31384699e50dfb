/* SIGINT/SIGTERM handling shared by the mains (kite's and kite-agent's): blocked before any
 * thread starts so that only the thread calling sigwait() ever takes them. */
#include <pthread.h>
#include <signal.h>

#include "cmd/cmd.h"

void kite_block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int kite_wait_for_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    return sig;
}
