#include "base/wgroup.h"

void kite_wgroup_init(struct kite_wgroup *g) {
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->n = 0;
}

void kite_wgroup_add(struct kite_wgroup *g) {
    pthread_mutex_lock(&g->mu);
    g->n++;
    pthread_mutex_unlock(&g->mu);
}

void kite_wgroup_done(struct kite_wgroup *g) {
    pthread_mutex_lock(&g->mu);
    if (--g->n == 0) pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

void kite_wgroup_wait(struct kite_wgroup *g) {
    pthread_mutex_lock(&g->mu);
    while (g->n) pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mu);
}
