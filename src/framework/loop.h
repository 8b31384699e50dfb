/* A controller's runner thread: it steps its core when kicked or when the core's next deadline
 * comes, and otherwise sleeps on a condition variable (no polling). step returns ns until the
 * core next needs it (-1: nothing due); pending says whether it has work now (read under the
 * core's own lock, so a kick between a step and the wait is not lost). Before its first step it
 * waits for the informers it reads to have synced (client-go's WaitForCacheSync, which polls
 * every 100 ms): a controller that acts on a half-filled cache creates what already exists. */
#pragma once
#include "base/base.h"
#include "client/informer.h"

#include <pthread.h>

#define KITE_CTL_LOOP_MAX_WAIT 24 /* informers one runner waits for */
#define KITE_CTL_LOOP_SYNC_POLL_NS (100 * KITE_NS_PER_MS)
#define KITE_CTL_LOOP_IDLE_NS (60 * KITE_NS_PER_SEC) /* longest sleep with nothing due (a safety net) */

struct kite_ctl_loop {
    int64_t (*step)(void *core);
    bool (*pending)(void *core);
    void *core;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop, started, kicked;
    pthread_t thread;
    struct kite_informer *wait[KITE_CTL_LOOP_MAX_WAIT];
    size_t nwait;
};

/* Sets the loop up with no thread: kicks are taken (and dropped) until kite_ctl_loop_run. */
void kite_ctl_loop_init(struct kite_ctl_loop *l, int64_t (*step)(void *), bool (*pending)(void *), void *core);
/* Starts the thread; it steps only once each of wait[0..n) has synced (NULL entries skipped). */
int kite_ctl_loop_run(struct kite_ctl_loop *l, const char *name, struct kite_informer *const *wait, size_t n);
/* init + run. */
int kite_ctl_loop_start(struct kite_ctl_loop *l, const char *name, int64_t (*step)(void *), bool (*pending)(void *),
                        void *core, struct kite_informer *const *wait, size_t n);
/* Wakes the runner (the core has new work). */
void kite_ctl_loop_kick(struct kite_ctl_loop *l);
/* Stops the thread and joins it; kicks are still taken (the informers that kick it may be
 * stopped after: the thread no longer reads them). */
void kite_ctl_loop_join(struct kite_ctl_loop *l);
/* Joins (if not yet) and releases; a loop never set up is a no-op. Stop the informers that
 * kick it first. */
void kite_ctl_loop_stop(struct kite_ctl_loop *l);
