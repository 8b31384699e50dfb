/* Informers and runners for the node controllers (manager.h). */
#include "controllers/manager.h"
#include "client/informer.h"

#include <pthread.h>

struct runner {
    int64_t (*step)(void *core);
    bool (*pending)(void *core);
    void *core;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop;
    pthread_t thread;
    bool started;
};

struct kite_ctlmgr {
    struct kite_nlc *nlc;
    struct kite_tec *tec;
    struct kite_podgc *gc;
    struct kite_dc *dc;
    struct kite_ncc *ncc; /* NULL unless --node-cleanup-after */
    struct runner rn, rt, rg, rd, rc;
    struct kite_informer *nodes, *leases, *pods, *pdbs;
};

static void *run(void *ud) {
    struct runner *r = ud;
    for (;;) {
        int64_t next = r->step(r->core);
        struct timespec ts;
        kite_cond_deadline(&ts, next);
        pthread_mutex_lock(&r->mu);
        while (!r->stop && !r->pending(r->core) && pthread_cond_timedwait(&r->cond, &r->mu, &ts) == 0) {}
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
    }
    return NULL;
}

static void kick(struct runner *r) {
    pthread_mutex_lock(&r->mu);
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

/* A runner that is off (--controllers) is set up but has no thread: its core still takes the
 * informers' observations, and nothing acts on them. */
static int runner_start(struct runner *r, const char *name, bool on, int64_t (*step)(void *), bool (*pending)(void *),
                        void *core) {
    r->step = step, r->pending = pending, r->core = core;
    pthread_mutex_init(&r->mu, NULL);
    kite_cond_init_mono(&r->cond);
    if (!on) return 0;
    if (pthread_create(&r->thread, NULL, run, r) != 0) return -EAGAIN;
    pthread_setname_np(r->thread, name);
    r->started = true;
    return 0;
}

static void runner_stop(struct runner *r) {
    if (!r->step) return;
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
        kick(&m->rc);
    }
    kick(&m->rn);
    kick(&m->rt);
    kick(&m->rg);
}
static void node_update(void *ud, json_object *old, json_object *o) { node_add(ud, o); }
static void node_del(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_nlc_node_delete(m->nlc, o);
    kite_tec_node_delete(m->tec, o);
    kite_podgc_node_delete(m->gc, o);
    if (m->ncc) kite_ncc_node_delete(m->ncc, o);
    kick(&m->rn);
    kick(&m->rt);
    kick(&m->rg);
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
    kick(&m->rn);
    kick(&m->rt);
    kick(&m->rg);
    kick(&m->rd);
}
static void pod_update(void *ud, json_object *old, json_object *o) { pod_add(ud, o); }
static void pod_del(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_tec_pod_delete(m->tec, o);
    kite_podgc_pod_delete(m->gc, o);
    kite_dc_pod_delete(m->dc, o);
    kick(&m->rt);
    kick(&m->rg);
    kick(&m->rd);
}
static void pdb_add(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_dc_pdb_upsert(m->dc, o);
    kick(&m->rd);
}
static void pdb_update(void *ud, json_object *old, json_object *o) { pdb_add(ud, o); }
static void pdb_del(void *ud, json_object *o) {
    struct kite_ctlmgr *m = ud;
    kite_dc_pdb_delete(m->dc, o);
    kick(&m->rd);
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
    int r;
    if ((r = runner_start(&m->rn, "node-lifecycle", !(o->off & KITE_CTL_NODE_LIFECYCLE), nlc_step, nlc_pending, m->nlc)) < 0 ||
        (r = runner_start(&m->rt, "taint-eviction", !(o->off & KITE_CTL_TAINT_EVICTION), tec_step, tec_pending, m->tec)) < 0 ||
        (r = runner_start(&m->rg, "pod-gc", !(o->off & KITE_CTL_POD_GC), gc_step, gc_pending, m->gc)) < 0 ||
        (r = runner_start(&m->rd, "disruption", !(o->off & KITE_CTL_DISRUPTION), dc_step, dc_pending, m->dc)) < 0)
        goto fail;
    if (o->node_cleanup_after_ns > 0) {
        struct kite_ncc_options co = {.client = o->client, .clock = no.clock, .after_ns = o->node_cleanup_after_ns};
        m->ncc = kite_ncc_new(&co);
        if ((r = runner_start(&m->rc, "node-cleanup", true, ncc_step, ncc_pending, m->ncc)) < 0) goto fail;
    }
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
    *ret = m;
    return 0;
fail:
    kite_ctlmgr_stop(m);
    return r;
}

void kite_ctlmgr_stop(struct kite_ctlmgr *m) {
    if (!m) return;
    kite_informer_stop(m->nodes);
    kite_informer_stop(m->leases);
    kite_informer_stop(m->pods);
    kite_informer_stop(m->pdbs);
    runner_stop(&m->rn);
    runner_stop(&m->rt);
    runner_stop(&m->rg);
    runner_stop(&m->rd);
    runner_stop(&m->rc);
    kite_ncc_free(m->ncc);
    kite_nlc_free(m->nlc);
    kite_podgc_free(m->gc);
    kite_tec_free(m->tec);
    kite_dc_free(m->dc);
    free(m);
}
