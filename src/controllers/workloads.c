/* Informers and runners for the workload controllers (workloads.h). */
#include "controllers/workloads.h"
#include "client/informer.h"
#include "controllers/deployment.h"
#include "controllers/gc.h"
#include "controllers/loop.h"
#include "controllers/replicaset.h"

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
    struct kite_ctl_loop rr, rd, rg;
    struct kite_informer *pods, *rss, *ds;
    struct gc_feed feeds[GC_KINDS_MAX];
};

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
    kite_ctl_loop_kick(&w->rr);
    kite_ctl_loop_kick(&w->rd);
}
static void pod_update(void *ud, json_object *old, json_object *o) { pod_add(ud, o); }
static void pod_del(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_rsc_pod_delete(w->rsc, o);
    kite_deployctl_pod_delete(w->dc, o);
    kite_ctl_loop_kick(&w->rr);
    kite_ctl_loop_kick(&w->rd);
}
static void rs_add(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_rsc_rs_upsert(w->rsc, o);
    kite_deployctl_rs_upsert(w->dc, o);
    kite_ctl_loop_kick(&w->rr);
    kite_ctl_loop_kick(&w->rd);
}
static void rs_update(void *ud, json_object *old, json_object *o) { rs_add(ud, o); }
static void rs_del(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_rsc_rs_delete(w->rsc, o);
    kite_deployctl_rs_delete(w->dc, o);
    kite_ctl_loop_kick(&w->rr);
    kite_ctl_loop_kick(&w->rd);
}
static void d_add(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_deployctl_deployment_upsert(w->dc, o);
    kite_ctl_loop_kick(&w->rd);
}
static void d_update(void *ud, json_object *old, json_object *o) { d_add(ud, o); }
static void d_del(void *ud, json_object *o) {
    struct kite_workloads *w = ud;
    kite_deployctl_deployment_delete(w->dc, o);
    kite_ctl_loop_kick(&w->rd);
}

static void gc_add(void *ud, json_object *o) {
    struct gc_feed *f = ud;
    kite_gc_upsert(f->w->gc, f->kind, o);
    kite_ctl_loop_kick(&f->w->rg);
}
static void gc_update(void *ud, json_object *old, json_object *o) { gc_add(ud, o); }
static void gc_del(void *ud, json_object *o) {
    struct gc_feed *f = ud;
    kite_gc_delete(f->w->gc, f->kind, o);
    kite_ctl_loop_kick(&f->w->rg);
}

int kite_workloads_start(const struct kite_workloads_options *o, struct kite_workloads **ret) {
    struct kite_workloads *w = kite_calloc(1, sizeof *w);
    struct kite_rsc_options ro = {.client = o->client, .clock = o->clock};
    w->rsc = kite_rsc_new(&ro);
    struct kite_deployctl_options dopt = {.client = o->client, .clock = o->clock};
    w->dc = kite_deployctl_new(&dopt);
    struct kite_gc_options gopt = {.client = o->client, .clock = o->clock};
    w->gc = kite_gc_new(&gopt);
    /* the runners take kicks from the informers' first events; they act once their caches fill */
    kite_ctl_loop_init(&w->rr, rsc_step, rsc_pending, w->rsc);
    kite_ctl_loop_init(&w->rd, dc_step, dc_pending, w->dc);
    kite_ctl_loop_init(&w->rg, gc_step, gc_pending, w->gc);
    int r;
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
    struct kite_informer *gc_inf[GC_KINDS_MAX];
    size_t n_gc = 0;
    for (size_t i = 0; i < GC_KINDS_MAX; i++)
        if (w->feeds[i].inf) gc_inf[n_gc++] = w->feeds[i].inf;
    struct kite_informer *rs_inf[] = {w->rss, w->pods}, *d_inf[] = {w->rss, w->pods, w->ds};
    if ((!(o->off & KITE_CTL_REPLICASET) && (r = kite_ctl_loop_run(&w->rr, "replicaset", rs_inf, 2)) < 0) ||
        (!(o->off & KITE_CTL_DEPLOYMENT) && (r = kite_ctl_loop_run(&w->rd, "deployment", d_inf, 3)) < 0) ||
        (!(o->off & KITE_CTL_GARBAGE_COLLECTOR) && (r = kite_ctl_loop_run(&w->rg, "garbage-collect", gc_inf, n_gc)) < 0))
        goto fail;
    *ret = w;
    return 0;
fail:
    kite_workloads_stop(w);
    return r;
}

void kite_workloads_stop(struct kite_workloads *w) {
    if (!w) return;
    /* the runners first: one waiting for its caches reads the informers */
    kite_ctl_loop_join(&w->rr);
    kite_ctl_loop_join(&w->rd);
    kite_ctl_loop_join(&w->rg);
    kite_informer_stop(w->pods);
    kite_informer_stop(w->rss);
    kite_informer_stop(w->ds);
    for (size_t i = 0; i < GC_KINDS_MAX; i++) kite_informer_stop(w->feeds[i].inf);
    kite_ctl_loop_stop(&w->rr);
    kite_ctl_loop_stop(&w->rd);
    kite_ctl_loop_stop(&w->rg);
    kite_gc_free(w->gc);
    kite_rsc_free(w->rsc);
    kite_deployctl_free(w->dc);
    free(w);
}
