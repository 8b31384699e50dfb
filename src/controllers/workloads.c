/* Informers and runners for the workload controllers (workloads.h). */
#include "controllers/workloads.h"
#include "client/informer.h"
#include "controllers/deployment.h"
#include "controllers/gc.h"
#include "controllers/replicaset.h"

#include <pthread.h>

struct runner {
    int64_t (*step)(void *core);
    bool (*pending)(void *core);
    void *core;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop, kicked, started, init;
    pthread_t thread;
};

#define GC_KINDS_MAX 16 /* rows of KITE_GC_KINDS watched */

struct gc_feed {
    struct kite_workloads *w;
    size_t kind;
    struct kite_informer *inf;
};

struct kite_workloads {
    struct kite_rsc *rsc;
    struct kite_deployctl *dc;
    struct kite_gc *gc;
    struct runner rr, rd, rg;
    struct kite_informer *pods, *rss, *ds;
    struct gc_feed feeds[GC_KINDS_MAX];
};

/* Idle this long at most with nothing queued (a safety net only: observations kick). */
#define IDLE_NS (60 * KITE_NS_PER_SEC)

static void *run(void *ud) {
    struct runner *r = ud;
    for (;;) {
        int64_t next = r->step(r->core);
        struct timespec ts;
        kite_cond_deadline(&ts, next < 0 ? IDLE_NS : next);
        pthread_mutex_lock(&r->mu);
        while (!r->stop && !r->kicked && !r->pending(r->core) && pthread_cond_timedwait(&r->cond, &r->mu, &ts) == 0) {}
        r->kicked = false;
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
    }
    return NULL;
}

static void kick(struct runner *r) {
    pthread_mutex_lock(&r->mu);
    r->kicked = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

/* A runner that is off (--controllers) is set up but has no thread (see manager.c). */
static int runner_start(struct runner *r, const char *name, bool on, int64_t (*step)(void *), bool (*pending)(void *),
                        void *core) {
    r->step = step, r->pending = pending, r->core = core;
    pthread_mutex_init(&r->mu, NULL);
    kite_cond_init_mono(&r->cond);
    r->init = true;
    if (!on) return 0;
    if (pthread_create(&r->thread, NULL, run, r) != 0) return -EAGAIN;
    pthread_setname_np(r->thread, name);
    r->started = true;
    return 0;
}

static void runner_stop(struct runner *r) {
    if (!r->init) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->cond);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
}

static int64_t rsc_step(void *c) { return kite_rsc_step(c); }
static bool rsc_pending(void *c) { return kite_rsc_pending(c); }
static int64_t gc_step(void *c) { return kite_gc_step(c); }
static bool gc_pending(void *c) { return kite_gc_pending(c); }
static int64_t dc_step(void *c) { return kite_deployctl_step(c); }
static bool dc_pending(void *c) { return kite_deployctl_pending(c); }

static void pod_add(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_rsc_pod_upsert(w->rsc, o);
    kite_deployctl_pod_upsert(w->dc, o);
    kick(&w->rr);
    kick(&w->rd);
}
static void pod_update(void *ud, json_object *old, json_object *o) { pod_add(ud, o); }
static void pod_del(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_rsc_pod_delete(w->rsc, o);
    kite_deployctl_pod_delete(w->dc, o);
    kick(&w->rr);
    kick(&w->rd);
}
static void rs_add(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_rsc_rs_upsert(w->rsc, o);
    kite_deployctl_rs_upsert(w->dc, o);
    kick(&w->rr);
    kick(&w->rd);
}
static void rs_update(void *ud, json_object *old, json_object *o) { rs_add(ud, o); }
static void rs_del(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_rsc_rs_delete(w->rsc, o);
    kite_deployctl_rs_delete(w->dc, o);
    kick(&w->rr);
    kick(&w->rd);
}
static void d_add(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_deployctl_deployment_upsert(w->dc, o);
    kick(&w->rd);
}
static void d_update(void *ud, json_object *old, json_object *o) { d_add(ud, o); }
static void d_del(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_deployctl_deployment_delete(w->dc, o);
    kick(&w->rd);
}

static void gc_add(void *ud, json_object *o) {
    struct gc_feed *f = ud;
    kite_gc_upsert(f->w->gc, f->kind, o);
    kick(&f->w->rg);
}
static void gc_update(void *ud, json_object *old, json_object *o) { gc_add(ud, o); }
static void gc_del(void *ud, json_object *o) {
    struct gc_feed *f = ud;
    kite_gc_delete(f->w->gc, f->kind, o);
    kick(&f->w->rg);
}

int kite_workloads_start(const struct kite_workloads_options *o, struct kite_workloads **ret) {
    struct kite_workloads *w = kite_calloc(1, sizeof *w);
    struct kite_rsc_options ro = {.client = o->client, .clock = o->clock};
    w->rsc = kite_rsc_new(&ro);
    struct kite_deployctl_options dopt = {.client = o->client, .clock = o->clock};
    w->dc = kite_deployctl_new(&dopt);
    struct kite_gc_options gopt = {.client = o->client, .clock = o->clock};
    w->gc = kite_gc_new(&gopt);
    int r;
    if ((r = runner_start(&w->rr, "replicaset", !(o->off & KITE_CTL_REPLICASET), rsc_step, rsc_pending, w->rsc)) < 0 ||
        (r = runner_start(&w->rd, "deployment", !(o->off & KITE_CTL_DEPLOYMENT), dc_step, dc_pending, w->dc)) < 0 ||
        (r = runner_start(&w->rg, "garbage-collect", !(o->off & KITE_CTL_GARBAGE_COLLECTOR), gc_step, gc_pending, w->gc)) < 0)
        goto fail;
    struct kite_informer_options io = {.client = o->client, .path = "/apis/apps/v1/replicasets", .name = "inf-rs", .n_handlers = 1};
    io.handlers[0] = (struct kite_informer_handlers){.add = rs_add, .update = rs_update, .del = rs_del, .ud = w};
    if ((r = kite_informer_start(&io, &w->rss)) < 0) goto fail;
    io.path = "/api/v1/pods";
    io.name = "inf-wl-pods";
    io.handlers[0] = (struct kite_informer_handlers){.add = pod_add, .update = pod_update, .del = pod_del, .ud = w};
    if ((r = kite_informer_start(&io, &w->pods)) < 0) goto fail;
    io.path = "/apis/apps/v1/deployments";
    io.name = "inf-deploy";
    io.handlers[0] = (struct kite_informer_handlers){.add = d_add, .update = d_update, .del = d_del, .ud = w};
    if ((r = kite_informer_start(&io, &w->ds)) < 0) goto fail;
    /* the collector watches every kind of its table on informers of its own */
    for (size_t i = 0; i < KITE_GC_N_KINDS && i < GC_KINDS_MAX; i++) {
        struct gc_feed *f = &w->feeds[i];
        f->w = w, f->kind = i;
        _cleanup_free_ char *path = kite_asprintf("%s/%s", KITE_GC_KINDS[i].prefix, KITE_GC_KINDS[i].plural);
        io.path = path;
        io.name = "inf-gc";
        io.handlers[0] = (struct kite_informer_handlers){.add = gc_add, .update = gc_update, .del = gc_del, .ud = f};
        if ((r = kite_informer_start(&io, &f->inf)) < 0) goto fail;
    }
    *ret = w;
    return 0;
fail:
    kite_workloads_stop(w);
    return r;
}

void kite_workloads_stop(struct kite_workloads *w) {
    if (!w) return;
    kite_informer_stop(w->pods);
    kite_informer_stop(w->rss);
    kite_informer_stop(w->ds);
    for (size_t i = 0; i < GC_KINDS_MAX; i++) kite_informer_stop(w->feeds[i].inf);
    runner_stop(&w->rr);
    runner_stop(&w->rd);
    runner_stop(&w->rg);
    kite_gc_free(w->gc);
    kite_rsc_free(w->rsc);
    kite_deployctl_free(w->dc);
    free(w);
}
