/* Informers and runners for the node controllers (manager.h). */
#include "controllers/manager.h"
#include "client/informer.h"
#include "controllers/loop.h"

struct kite_ctlmgr {
    struct kite_nlc *nlc;
    struct kite_tec *tec;
    struct kite_podgc *gc;
    struct kite_dc *dc;
    struct kite_ncc *ncc; /* NULL unless --node-cleanup-after */
    struct kite_ctl_loop rn, rt, rg, rd, rc;
    struct kite_informer *nodes, *leases, *pods, *pdbs;
};

static int64_t nlc_step(void *c) { return kite_nlc_step(c); }
static bool nlc_pending(void *c) { return kite_nlc_pending(c); }
static int64_t tec_step(void *c) { return kite_tec_step(c); }
static int64_t dc_step(void *c) { return kite_dc_step(c); }
static int64_t ncc_step(void *c) { return kite_ncc_step(c); }
static bool ncc_pending(void *c) { return kite_ncc_pending(c); }
static bool dc_pending(void *c) { return kite_dc_pending(c); }
static bool tec_pending(void *c) { return kite_tec_pending(c); }
static int64_t gc_step(void *c) { return kite_podgc_step(c); }
static bool gc_pending(void *c) { return kite_podgc_pending(c); }

static void node_add(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_nlc_node_upsert(m->nlc, o);
    kite_tec_node_upsert(m->tec, o);
    kite_podgc_node_upsert(m->gc, o);
    if (m->ncc) {
        kite_ncc_node_upsert(m->ncc, o);
        kite_ctl_loop_kick(&m->rc);
    }
    kite_ctl_loop_kick(&m->rn);
    kite_ctl_loop_kick(&m->rt);
    kite_ctl_loop_kick(&m->rg);
}
static void node_update(void *ud, json_object *old, json_object *o) { node_add(ud, o); }
static void node_del(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_nlc_node_delete(m->nlc, o);
    kite_tec_node_delete(m->tec, o);
    kite_podgc_node_delete(m->gc, o);
    if (m->ncc) kite_ncc_node_delete(m->ncc, o);
    kite_ctl_loop_kick(&m->rn);
    kite_ctl_loop_kick(&m->rt);
    kite_ctl_loop_kick(&m->rg);
}
static void lease_add(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_nlc_lease_upsert(m->nlc, o);
    /* a renewal only moves a deadline later: the runner need not wake for it */
}
static void lease_update(void *ud, json_object *old, json_object *o) { lease_add(ud, o); }
static void pod_add(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_nlc_pod_upsert(m->nlc, o);
    kite_tec_pod_upsert(m->tec, o);
    kite_podgc_pod_upsert(m->gc, o);
    kite_dc_pod_upsert(m->dc, o);
    kite_ctl_loop_kick(&m->rn);
    kite_ctl_loop_kick(&m->rt);
    kite_ctl_loop_kick(&m->rg);
    kite_ctl_loop_kick(&m->rd);
}
static void pod_update(void *ud, json_object *old, json_object *o) { pod_add(ud, o); }
static void pod_del(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_tec_pod_delete(m->tec, o);
    kite_podgc_pod_delete(m->gc, o);
    kite_dc_pod_delete(m->dc, o);
    kite_ctl_loop_kick(&m->rt);
    kite_ctl_loop_kick(&m->rg);
    kite_ctl_loop_kick(&m->rd);
}
static void pdb_add(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_dc_pdb_upsert(m->dc, o);
    kite_ctl_loop_kick(&m->rd);
}
static void pdb_update(void *ud, json_object *old, json_object *o) { pdb_add(ud, o); }
static void pdb_del(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_dc_pdb_delete(m->dc, o);
    kite_ctl_loop_kick(&m->rd);
}

int kite_ctlmgr_start(const struct kite_ctlmgr_options *o, struct kite_ctlmgr **ret) {
    struct kite_ctlmgr *m = kite_calloc(1, sizeof *m);
    struct kite_nlc_options no = o->nlc;
    no.client = o->client;
    m->nlc = kite_nlc_new(&no);
    struct kite_tec_options to = {.client = o->client, .clock = no.clock};
    m->tec = kite_tec_new(&to);
    struct kite_podgc_options go = o->podgc;
    go.client = o->client, go.clock = no.clock;
    m->gc = kite_podgc_new(&go);
    struct kite_dc_options dco = {.client = o->client, .clock = no.clock};
    m->dc = kite_dc_new(&dco);
    /* the runners take kicks from the informers' first events; they act once their caches fill */
    kite_ctl_loop_init(&m->rn, nlc_step, nlc_pending, m->nlc);
    kite_ctl_loop_init(&m->rt, tec_step, tec_pending, m->tec);
    kite_ctl_loop_init(&m->rg, gc_step, gc_pending, m->gc);
    kite_ctl_loop_init(&m->rd, dc_step, dc_pending, m->dc);
    if (o->node_cleanup_after_ns > 0) {
        struct kite_ncc_options co = {.client = o->client, .clock = no.clock, .after_ns = o->node_cleanup_after_ns};
        m->ncc = kite_ncc_new(&co);
        kite_ctl_loop_init(&m->rc, ncc_step, ncc_pending, m->ncc);
    }
    int r;
    struct kite_informer_options io = {.client = o->client, .path = "/api/v1/nodes", .name = "inf-nodes", .n_handlers = 1};
    io.handlers[0] = (struct kite_informer_handlers){.add = node_add, .update = node_update, .del = node_del, .ud = m};
    if ((r = kite_informer_start(&io, &m->nodes)) < 0) goto fail;
    io.path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    io.name = "inf-leases";
    io.handlers[0] = (struct kite_informer_handlers){.add = lease_add, .update = lease_update, .ud = m};
    if ((r = kite_informer_start(&io, &m->leases)) < 0) goto fail;
    io.path = "/api/v1/pods";
    io.name = "inf-pods";
    io.handlers[0] = (struct kite_informer_handlers){.add = pod_add, .update = pod_update, .del = pod_del, .ud = m};
    if ((r = kite_informer_start(&io, &m->pods)) < 0) goto fail;
    io.path = "/apis/policy/v1/poddisruptionbudgets";
    io.name = "inf-pdbs";
    io.handlers[0] = (struct kite_informer_handlers){.add = pdb_add, .update = pdb_update, .del = pdb_del, .ud = m};
    if ((r = kite_informer_start(&io, &m->pdbs)) < 0) goto fail;
    struct kite_informer *inf[] = {m->nodes, m->leases, m->pods, m->pdbs};
    if ((!(o->off & KITE_CTL_NODE_LIFECYCLE) && (r = kite_ctl_loop_run(&m->rn, "node-lifecycle", inf, 3)) < 0) ||
        (!(o->off & KITE_CTL_TAINT_EVICTION) && (r = kite_ctl_loop_run(&m->rt, "taint-eviction", inf, 3)) < 0) ||
        (!(o->off & KITE_CTL_POD_GC) && (r = kite_ctl_loop_run(&m->rg, "pod-gc", inf, 3)) < 0) ||
        (!(o->off & KITE_CTL_DISRUPTION) && (r = kite_ctl_loop_run(&m->rd, "disruption", inf, 4)) < 0) ||
        (m->ncc && (r = kite_ctl_loop_run(&m->rc, "node-cleanup", inf, 1)) < 0))
        goto fail;
    *ret = m;
    return 0;
fail:
    kite_ctlmgr_stop(m);
    return r;
}

void kite_ctlmgr_stop(struct kite_ctlmgr *m) {
    if (!m) return;
    /* the runners first: one waiting for its caches reads the informers */
    kite_ctl_loop_join(&m->rn);
    kite_ctl_loop_join(&m->rt);
    kite_ctl_loop_join(&m->rg);
    kite_ctl_loop_join(&m->rd);
    kite_ctl_loop_join(&m->rc);
    kite_informer_stop(m->nodes);
    kite_informer_stop(m->leases);
    kite_informer_stop(m->pods);
    kite_informer_stop(m->pdbs);
    kite_ctl_loop_stop(&m->rn);
    kite_ctl_loop_stop(&m->rt);
    kite_ctl_loop_stop(&m->rg);
    kite_ctl_loop_stop(&m->rd);
    kite_ctl_loop_stop(&m->rc);
    kite_ncc_free(m->ncc);
    kite_nlc_free(m->nlc);
    kite_podgc_free(m->gc);
    kite_tec_free(m->tec);
    kite_dc_free(m->dc);
    free(m);
}
