/* The controller framework (framework.h): groups, runners fed by shared informers, reconcilers. */
#include "framework/framework.h"
#include "framework/loop.h"
#include "framework/workqueue.h"

#include <pthread.h>

struct kite_ctl;
struct binding {
    struct kite_ctl *ctl;
    struct kite_ctl_feed feed;
    struct kite_informer *inf;
};

struct kite_ctl {
    struct kite_ctl_loop loop;
    void *core;
    void (*free)(void *core);
    struct binding b[KITE_CTL_MAX_FEEDS];
    size_t nb;
};

struct kite_ctl_group {
    struct kite_client *client;
    struct kite_clock *clock;
    struct kite_informer_factory *informers;
    struct kite_ctl **ctls;
    size_t n;
};

struct kite_ctl_group *kite_ctl_group_new(struct kite_client *client, struct kite_clock *clock) {
    struct kite_ctl_group *g = kite_calloc(1, sizeof *g);
    g->client = client;
    g->clock = clock ? clock : kite_clock_real();
    g->informers = kite_informer_factory_new(client);
    return g;
}

struct kite_client *kite_ctl_group_client(const struct kite_ctl_group *g) { return g->client; }
struct kite_clock *kite_ctl_group_clock(const struct kite_ctl_group *g) { return g->clock; }
struct kite_informer_factory *kite_ctl_group_informers(const struct kite_ctl_group *g) { return g->informers; }
size_t kite_ctl_group_count(const struct kite_ctl_group *g) { return g->n; }

static void add(struct kite_ctl_group *g, struct kite_ctl *c) {
    g->ctls = kite_realloc(g->ctls, (g->n + 1) * sizeof *g->ctls);
    g->ctls[g->n++] = c;
}

/* Wakes the runner for a change from b's informer. Not while that informer fills its cache: the
 * runner does not step before it synced, and on_synced wakes it then (a runner woken for each of
 * 50,000 Nodes listed after a restart only looked and slept again). */
static void kick(struct binding *b) {
    if (!b->feed.quiet && kite_informer_synced(b->inf)) kite_ctl_loop_kick(&b->ctl->loop);
}

static void on_add(void *ud, json_object *obj) {
    struct binding *b = ud;
    if (!b->feed.upsert) return;
    b->feed.upsert(b->ctl->core, obj, b->feed.tag);
    kick(b);
}
static void on_update(void *ud, json_object *old, json_object *obj) {
    struct binding *b = ud;
    if (!b->feed.update) {
        on_add(ud, obj);
        return;
    }
    b->feed.update(b->ctl->core, old, obj, b->feed.tag);
    kick(b);
}
static void on_del(void *ud, json_object *obj) {
    struct binding *b = ud;
    if (!b->feed.del) return;
    b->feed.del(b->ctl->core, obj, b->feed.tag);
    kick(b);
}
static void on_synced(void *ud) {
    struct binding *b = ud;
    if (b->feed.synced) b->feed.synced(b->ctl->core, b->feed.tag);
    kite_ctl_loop_kick(&b->ctl->loop);
}

static int run(struct kite_ctl_group *g, const struct kite_ctl_spec *spec, void *core, struct kite_ctl **ret) {
    struct kite_ctl *c = kite_calloc(1, sizeof *c);
    c->core = core, c->free = spec->free;
    kite_ctl_loop_init(&c->loop, spec->step, spec->pending, core);
    /* in the group from here: its handlers may be on informers, so it is freed only after they halt */
    add(g, c);
    if (spec->n_feeds > KITE_CTL_MAX_FEEDS) return -E2BIG;
    struct kite_informer *wait[KITE_CTL_MAX_FEEDS];
    size_t nwait = 0;
    for (size_t i = 0; i < spec->n_feeds; i++) {
        struct binding *b = &c->b[c->nb++];
        b->ctl = c, b->feed = spec->feeds[i];
        struct kite_informer_handlers h = {.add = on_add, .update = on_update, .del = on_del, .synced = on_synced, .ud = b};
        struct kite_informer *inf = kite_informer_factory_watch(g->informers, b->feed.path, b->feed.selector, b->feed.project,
                                                                b->feed.transform, &h);
        if (!inf) return -ENOSPC;
        b->inf = inf;
        if (!b->feed.no_wait) wait[nwait++] = inf;
    }
    if (ret) *ret = c;
    return kite_ctl_loop_run(&c->loop, spec->name, wait, nwait);
}

int kite_ctl_run(struct kite_ctl_group *g, const struct kite_ctl_spec *spec, void *core) {
    return run(g, spec, core, NULL);
}

int kite_ctl_group_start(struct kite_ctl_group *g) { return kite_informer_factory_start(g->informers); }

void kite_ctl_group_free(struct kite_ctl_group *g) {
    if (!g) return;
    /* the runners first (the last started first): one waiting for its caches reads the informers */
    for (size_t i = g->n; i-- > 0;) {
        kite_ctl_loop_join(&g->ctls[i]->loop);
    }
    kite_informer_factory_halt(g->informers);
    for (size_t i = g->n; i-- > 0;) {
        struct kite_ctl *c = g->ctls[i];
        kite_ctl_loop_stop(&c->loop);
        if (c->free) c->free(c->core);
        free(c);
    }
    kite_informer_factory_free(g->informers);
    free(g->ctls);
    free(g);
}

/* ---- the keyed runner ---- */

void kite_ctl_keyed_add(const struct kite_ctl_keyed *k, const char *key, int64_t in_ns) {
    kite_wq_add(k->wq, key, kite_now_mono(k->clock) + KITE_MAX(in_ns, (int64_t)0));
}

bool kite_ctl_keyed_pending(const struct kite_ctl_keyed *k) {
    pthread_mutex_lock(k->lock);
    bool due = kite_wq_due(k->wq, kite_now_mono(k->clock));
    pthread_mutex_unlock(k->lock);
    return due;
}

struct outcome {
    const struct kite_ctl_keyed *k;
    const char *key;
    struct kite_ctl_acts events;
    bool failed;
};

static void heard(void *ud, const struct kite_ctl_act *a, int e, json_object *answer) {
    struct outcome *o = ud;
    bool failed = o->k->heard ? o->k->heard(o->k->ud, o->key, a, e, answer, &o->events) : e < 0 && e != -ENOENT && e != -EEXIST;
    o->failed |= failed;
}

/* The plan form's work: plan under the lock, the requests and events without it. */
static bool plan_and_act(const struct kite_ctl_keyed *k, const char *key, int64_t *again_ns) {
    struct kite_ctl_acts acts = {0};
    struct outcome o = {.k = k, .key = key};
    pthread_mutex_lock(k->lock);
    k->plan(k->ud, key, &acts, &o.events, again_ns);
    pthread_mutex_unlock(k->lock);
    if (k->workers > 1) { /* heard is called one answer at a time */
        kite_ctl_acts_run_parallel(k->client, &acts, k->workers, heard, &o);
        kite_ctl_acts_run_parallel(k->client, &o.events, k->workers, NULL, NULL);
    } else {
        kite_ctl_acts_run(k->client, &acts, heard, &o);
        kite_ctl_acts_run(k->client, &o.events, NULL, NULL);
    }
    kite_ctl_acts_release(&acts);
    kite_ctl_acts_release(&o.events);
    return o.failed;
}

int64_t kite_ctl_keyed_step(const struct kite_ctl_keyed *k) {
    struct kite_map done = {0}; /* the keys worked on in this step */
    int64_t next;
    for (;;) {
        pthread_mutex_lock(k->lock);
        char *key = kite_wq_pop_due(k->wq, kite_now_mono(k->clock));
        if (key && kite_map_get(&done, key)) {
            /* due again at once: the next step runs it (the runner's loop sees it pending) */
            kite_wq_add(k->wq, key, kite_now_mono(k->clock));
            free(key);
            key = NULL;
        }
        if (!key) {
            next = kite_wq_next(k->wq, kite_now_mono(k->clock));
            pthread_mutex_unlock(k->lock);
            break;
        }
        pthread_mutex_unlock(k->lock);
        kite_map_put(&done, key, (void *)1);
        int64_t again = -1;
        bool failed = k->work ? k->work(k->ud, key, &again) : plan_and_act(k, key, &again);
        pthread_mutex_lock(k->lock);
        int64_t now = kite_now_mono(k->clock);
        if (failed) kite_wq_add_backoff(k->wq, key, now);
        else kite_wq_forget(k->wq, key);
        if (again >= 0) kite_wq_add(k->wq, key, now + again);
        pthread_mutex_unlock(k->lock);
        free(key);
    }
    kite_map_release(&done);
    return next;
}

/* ---- reconcilers ---- */

struct kite_ctl_reconcile {
    struct kite_ctl_reconciler r;
    struct kite_clock *clock;
    struct kite_informer *inf;
    struct kite_ctl *ctl;
    pthread_mutex_t mu;
    struct kite_wq wq;
    int64_t next_resync; /* monotonic ns; 0: none */
    bool listed;         /* the first list was delivered (its objects came as upserts) */
};

void *kite_ctl_reconcile_ud(struct kite_ctl_reconcile *q) { return q->r.ud; }

static void enqueue_at(struct kite_ctl_reconcile *q, const char *key, int64_t at) {
    pthread_mutex_lock(&q->mu);
    kite_wq_add(&q->wq, key, at);
    pthread_mutex_unlock(&q->mu);
}

void kite_ctl_enqueue(struct kite_ctl_reconcile *q, const char *key) {
    enqueue_at(q, key, kite_now_mono(q->clock));
    if (q->ctl) kite_ctl_loop_kick(&q->ctl->loop);
}

static void enqueue_all(struct kite_ctl_reconcile *q) {
    size_t n = 0;
    char **keys = kite_informer_keys(q->inf, &n);
    int64_t now = kite_now_mono(q->clock);
    for (size_t i = 0; i < n; i++) {
        enqueue_at(q, keys[i], now);
        free(keys[i]);
    }
    free(keys);
}

static void primary_changed(void *core, json_object *obj, uintptr_t tag) {
    struct kite_ctl_reconcile *q = core;
    if (q->r.queue_all) {
        /* the changed object itself may be gone from the cache already (a delete) */
        enqueue_all(q);
    }
    _cleanup_free_ char *key = kite_informer_key(obj);
    if (key) enqueue_at(q, key, kite_now_mono(q->clock));
}

static void primary_synced(void *core, uintptr_t tag) {
    struct kite_ctl_reconcile *q = core;
    /* The first list's objects were each queued as they came, and the loop may already have
     * synced one and put it in back-off (the informer reads as synced before this runs): queueing
     * it again now would undo its back-off. A later list: what was missed across the gap is
     * looked at again. */
    if (!q->listed) {
        q->listed = true;
        return;
    }
    enqueue_all(q);
}

static bool rec_pending(void *core) {
    struct kite_ctl_reconcile *q = core;
    struct kite_ctl_keyed k = {.lock = &q->mu, .wq = &q->wq, .clock = q->clock};
    return kite_ctl_keyed_pending(&k);
}

static bool rec_work(void *core, const char *key, int64_t *again_ns) {
    struct kite_ctl_reconcile *q = core;
    int64_t r = q->r.sync(q->r.ud, key, kite_informer_get(q->inf, key));
    if (r > 0) *again_ns = r;
    return r < 0;
}

static int64_t rec_step(void *core) {
    struct kite_ctl_reconcile *q = core;
    int64_t now = kite_now_mono(q->clock);
    if (q->r.resync_ns > 0 && now >= q->next_resync) {
        enqueue_all(q);
        q->next_resync = now + q->r.resync_ns;
    }
    struct kite_ctl_keyed k = {.lock = &q->mu, .wq = &q->wq, .clock = q->clock, .ud = q, .work = rec_work};
    int64_t next = kite_ctl_keyed_step(&k);
    if (q->r.resync_ns > 0) {
        int64_t to_resync = KITE_MAX(q->next_resync - kite_now_mono(q->clock), (int64_t)0);
        if (next < 0 || to_resync < next) next = to_resync;
    }
    return next;
}

static void rec_free(void *core) {
    struct kite_ctl_reconcile *q = core;
    if (q->r.free) q->r.free(q->r.ud);
    kite_wq_release(&q->wq);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

int kite_ctl_reconcile(struct kite_ctl_group *g, const struct kite_ctl_reconciler *r) {
    if (r->n_more + 1 > KITE_CTL_MAX_FEEDS) {
        if (r->free) r->free(r->ud);
        return -E2BIG;
    }
    struct kite_ctl_reconcile *q = kite_calloc(1, sizeof *q);
    q->r = *r;
    q->clock = g->clock;
    pthread_mutex_init(&q->mu, NULL);
    q->wq.backoff_base_ns = r->backoff_base_ns > 0 ? r->backoff_base_ns : KITE_CTL_RECONCILE_BACKOFF_BASE_NS;
    q->wq.backoff_max_ns = r->backoff_max_ns > 0 ? r->backoff_max_ns : KITE_CTL_RECONCILE_BACKOFF_MAX_NS;
    q->next_resync = kite_now_mono(g->clock) + r->resync_ns;
    q->inf = kite_informer_factory_watch(g->informers, r->path, r->selector, NULL, NULL, NULL);
    if (!q->inf) {
        rec_free(q);
        return -ENOSPC;
    }
    struct kite_ctl_feed feeds[KITE_CTL_MAX_FEEDS] = {
        {.path = r->path, .selector = r->selector, .upsert = primary_changed, .del = primary_changed, .synced = primary_synced},
    };
    for (size_t i = 0; i < r->n_more; i++) feeds[i + 1] = r->more[i];
    struct kite_ctl_spec spec = {
        .name = r->name, .step = rec_step, .pending = rec_pending, .free = rec_free, .feeds = feeds, .n_feeds = r->n_more + 1};
    return run(g, &spec, q, &q->ctl);
}
