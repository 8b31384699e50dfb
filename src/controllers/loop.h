/* A controller's runner thread, as the node controllers' (manager.c): it steps its core when
 * kicked or when the core's next deadline comes, and otherwise sleeps on a condition variable
 * (no polling). step returns ns until the core next needs it; pending says whether it has work
 * now (read under the core's own lock, so a kick between a step and the wait is not lost). */
#pragma once
#include "base/base.h"

#include <pthread.h>

struct kite_ctl_loop {
    int64_t (*step)(void *core);
    bool (*pending)(void *core);
    void *core;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop, started;
    pthread_t thread;
};

int kite_ctl_loop_start(struct kite_ctl_loop *l, const char *name, int64_t (*step)(void *), bool (*pending)(void *),
                        void *core);
/* Wakes the runner (the core has new work). */
void kite_ctl_loop_kick(struct kite_ctl_loop *l);
/* Stops and joins; a loop never started is a no-op. */
void kite_ctl_loop_stop(struct kite_ctl_loop *l);
