/* The runner thread of loop.h. */
#include "controllers/loop.h"
#include "base/clock.h"

static void *run(void *ud) {
    struct kite_ctl_loop *l = ud;
    for (;;) {
        int64_t next = l->step(l->core);
        struct timespec ts;
        kite_cond_deadline(&ts, next);
        pthread_mutex_lock(&l->mu);
        while (!l->stop && !l->pending(l->core) && pthread_cond_timedwait(&l->cond, &l->mu, &ts) == 0) {}
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
    }
    return NULL;
}

int kite_ctl_loop_start(struct kite_ctl_loop *l, const char *name, int64_t (*step)(void *), bool (*pending)(void *),
                        void *core) {
    l->step = step, l->pending = pending, l->core = core;
    pthread_mutex_init(&l->mu, NULL);
    kite_cond_init_mono(&l->cond);
    if (pthread_create(&l->thread, NULL, run, l) != 0) return -EAGAIN;
    pthread_setname_np(l->thread, name);
    l->started = true;
    return 0;
}

void kite_ctl_loop_kick(struct kite_ctl_loop *l) {
    if (!l->started) return;
    pthread_mutex_lock(&l->mu);
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mu);
}

void kite_ctl_loop_stop(struct kite_ctl_loop *l) {
    if (!l->step) return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_signal(&l->cond);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cond);
    l->step = NULL;
}
