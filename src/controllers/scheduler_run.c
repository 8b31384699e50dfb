/* The scheduler's informers and thread (scheduler.h). The thread sleeps on a condition
 * variable until an observation leaves work or the earliest back-off ends: no polling. */
#include "client/informer.h"
#include "controllers/scheduler.h"

#include <pthread.h>

struct kite_schedrun {
    struct kite_sched *core;
    struct kite_informer *nodes, *pods;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t thread;
    bool stop, started;
};

static void *run(void *ud) {
    struct kite_schedrun *r = ud;
    for (;;) {
        int64_t next = kite_sched_step(r->core);
        struct timespec ts;
        kite_cond_deadline(&ts, next);
        pthread_mutex_lock(&r->mu);
        while (!r->stop && !kite_sched_pending(r->core) && pthread_cond_timedwait(&r->cond, &r->mu, &ts) == 0) {}
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
    }
    return NULL;
}

static void kick(struct kite_schedrun *r) {
    pthread_mutex_lock(&r->mu);
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

static void node_add(void *ud, json_object *o) {
    struct kite_schedrun *r = ud;
    kite_sched_node_upsert(r->core, o);
    kick(r);
}
static void node_update(void *ud, json_object *old, json_object *o) { node_add(ud, o); }
static void node_del(void *ud, json_object *o) {
    struct kite_schedrun *r = ud;
    kite_sched_node_delete(r->core, o);
    kick(r);
}
static void pod_add(void *ud, json_object *o) {
    struct kite_schedrun *r = ud;
    kite_sched_pod_upsert(r->core, o);
    kick(r);
}
static void pod_update(void *ud, json_object *old, json_object *o) { pod_add(ud, o); }
static void pod_del(void *ud, json_object *o) {
    struct kite_schedrun *r = ud;
    kite_sched_pod_delete(r->core, o);
    kick(r);
}

int kite_schedrun_start(const struct kite_sched_options *o, struct kite_schedrun **ret) {
    struct kite_schedrun *r = kite_calloc(1, sizeof *r);
    r->core = kite_sched_new(o);
    pthread_mutex_init(&r->mu, NULL);
    kite_cond_init_mono(&r->cond);
    int e = -EAGAIN;
    if (pthread_create(&r->thread, NULL, run, r) != 0) goto fail;
    pthread_setname_np(r->thread, "scheduler");
    r->started = true;
    struct kite_informer_options io = {.client = o->client, .path = "/api/v1/nodes", .name = "sched-nodes", .n_handlers = 1};
    io.handlers[0] = (struct kite_informer_handlers){.add = node_add, .update = node_update, .del = node_del, .ud = r};
    if ((e = kite_informer_start(&io, &r->nodes)) < 0) goto fail;
    io.path = "/api/v1/pods";
    io.name = "sched-pods";
    io.handlers[0] = (struct kite_informer_handlers){.add = pod_add, .update = pod_update, .del = pod_del, .ud = r};
    if ((e = kite_informer_start(&io, &r->pods)) < 0) goto fail;
    *ret = r;
    return 0;
fail:
    kite_schedrun_stop(r);
    return e;
}

void kite_schedrun_stop(struct kite_schedrun *r) {
    if (!r) return;
    kite_informer_stop(r->nodes);
    kite_informer_stop(r->pods);
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->cond);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    kite_sched_free(r->core);
    free(r);
}
