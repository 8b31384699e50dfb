/* The replication controller's informers and runner (replication.h). */
#include "controllers/replication.h"
#include "client/informer.h"
#include "controllers/loop.h"
#include "controllers/replicaset.h"

struct kite_replication {
    struct kite_rsc *core;
    struct kite_ctl_loop loop;
    struct kite_informer *pods, *rcs;
};

static int64_t step(void *c) { return kite_rsc_step(c); }
static bool pending(void *c) { return kite_rsc_pending(c); }

static void pod_add(void *ud, json_object *o) {
    struct kite_replication *r = ud;
    kite_rsc_pod_upsert(r->core, o);
    kite_ctl_loop_kick(&r->loop);
}
static void pod_update(void *ud, json_object *old, json_object *o) { pod_add(ud, o); }
static void pod_del(void *ud, json_object *o) {
    struct kite_replication *r = ud;
    kite_rsc_pod_delete(r->core, o);
    kite_ctl_loop_kick(&r->loop);
}
static void rc_add(void *ud, json_object *o) {
    struct kite_replication *r = ud;
    kite_rsc_rs_upsert(r->core, o);
    kite_ctl_loop_kick(&r->loop);
}
static void rc_update(void *ud, json_object *old, json_object *o) { rc_add(ud, o); }
static void rc_del(void *ud, json_object *o) {
    struct kite_replication *r = ud;
    kite_rsc_rs_delete(r->core, o);
    kite_ctl_loop_kick(&r->loop);
}

int kite_replication_start(const struct kite_replication_options *o, struct kite_replication **ret) {
    struct kite_replication *r = kite_calloc(1, sizeof *r);
    struct kite_rsc_options ro = {.client = o->client, .kind = &KITE_RSC_REPLICATIONCONTROLLER};
    r->core = kite_rsc_new(&ro);
    kite_ctl_loop_init(&r->loop, step, pending, r->core);
    int e;
    struct kite_informer_options io = {.client = o->client, .path = "/api/v1/replicationcontrollers", .name = "inf-rc",
                                       .n_handlers = 1};
    io.handlers[0] = (struct kite_informer_handlers){.add = rc_add, .update = rc_update, .del = rc_del, .ud = r};
    if ((e = kite_informer_start(&io, &r->rcs)) < 0) goto fail;
    io.path = "/api/v1/pods";
    io.name = "inf-rc-pods";
    io.handlers[0] = (struct kite_informer_handlers){.add = pod_add, .update = pod_update, .del = pod_del, .ud = r};
    if ((e = kite_informer_start(&io, &r->pods)) < 0) goto fail;
    struct kite_informer *wait[] = {r->rcs, r->pods};
    if ((e = kite_ctl_loop_run(&r->loop, "replication", wait, 2)) < 0) goto fail;
    *ret = r;
    return 0;
fail:
    kite_replication_stop(r);
    return e;
}

void kite_replication_stop(struct kite_replication *r) {
    if (!r) return;
    kite_ctl_loop_join(&r->loop);
    kite_informer_stop(r->pods);
    kite_informer_stop(r->rcs);
    kite_ctl_loop_stop(&r->loop);
    kite_rsc_free(r->core);
    free(r);
}
