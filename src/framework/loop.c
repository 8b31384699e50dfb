/* The runner thread of loop.h. */
#include "framework/loop.h"
#include "base/clock.h"

static bool synced(struct kite_ctl_loop *l) {
    for (size_t i = 0; i < l->nwait; i++)
        if (l->wait[i] && !kite_informer_synced(l->wait[i])) return false;
    return true;
}

/* Sleeps until kicked, stopped, pending work or ns passed; false when stopped. */
static bool sleep_for(struct kite_ctl_loop *l, int64_t ns, bool check_pending) {
    struct timespec ts;
    kite_cond_deadline(&ts, ns);
    pthread_mutex_lock(&l->mu);
    while (!l->stop && !l->kicked && !(check_pending && l->pending(l->core)) &&
           pthread_cond_timedwait(&l->cond, &l->mu, &ts) == 0) {}
    l->kicked = false;
    bool stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    return !stop;
}

static void *run(void *ud) {
    struct kite_ctl_loop *l = ud;
    while (!synced(l))
        if (!sleep_for(l, KITE_CTL_LOOP_SYNC_POLL_NS, false)) return NULL;
    for (;;) {
        int64_t next = l->step(l->core);
        if (!sleep_for(l, next < 0 ? KITE_CTL_LOOP_IDLE_NS : next, true)) break;
    }
    return NULL;
}

void kite_ctl_loop_init(struct kite_ctl_loop *l, int64_t (*step)(void *), bool (*pending)(void *), void *core) {
    l->step = step, l->pending = pending, l->core = core;
    pthread_mutex_init(&l->mu, NULL);
    kite_cond_init_mono(&l->cond);
}

int kite_ctl_loop_run(struct kite_ctl_loop *l, const char *name, struct kite_informer *const *wait, size_t n) {
    l->nwait = KITE_MIN(n, (size_t)KITE_CTL_LOOP_MAX_WAIT);
    if (l->nwait) memcpy(l->wait, wait, l->nwait * sizeof *wait);
    if (pthread_create(&l->thread, NULL, run, l) != 0) return -EAGAIN;
    pthread_setname_np(l->thread, name);
    l->started = true;
    return 0;
}

int kite_ctl_loop_start(struct kite_ctl_loop *l, const char *name, int64_t (*step)(void *), bool (*pending)(void *),
                        void *core, struct kite_informer *const *wait, size_t n) {
    kite_ctl_loop_init(l, step, pending, core);
    return kite_ctl_loop_run(l, name, wait, n);
}

void kite_ctl_loop_kick(struct kite_ctl_loop *l) {
    if (!l->step) return;
    pthread_mutex_lock(&l->mu);
    /* a runner already kicked has been signalled, or has not yet looked: it will see the kick */
    if (!l->kicked) pthread_cond_signal(&l->cond);
    l->kicked = true;
    pthread_mutex_unlock(&l->mu);
}

void kite_ctl_loop_join(struct kite_ctl_loop *l) {
    if (!l->step || !l->started) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    l->started = false;
}

void kite_ctl_loop_stop(struct kite_ctl_loop *l) {
    if (!l->step) return;
    kite_ctl_loop_join(l);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cond);
    l->step = NULL;
}
