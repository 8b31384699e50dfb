/* A count of detached threads an owner must outlive (Go's sync.WaitGroup): the owner adds one
 * before it starts a thread, the thread's very last act is kite_wgroup_done, and the owner's
 * stop waits until none is left before it frees what they use. done() touches nothing of the
 * owner after it unlocks, so the owner may free everything once wait() returns. */
#pragma once
#include <pthread.h>

struct kite_wgroup {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    unsigned n;
};

void kite_wgroup_init(struct kite_wgroup *g);
void kite_wgroup_add(struct kite_wgroup *g);
void kite_wgroup_done(struct kite_wgroup *g);
/* Waits until every thread added is done, then destroys g. */
void kite_wgroup_wait(struct kite_wgroup *g);
