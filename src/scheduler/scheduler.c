/* The scheduler's core (scheduler.h): a cache of nodes with the requests of the pods counted
 * on them, and upstream's three queues for the pods to place — active (a heap by priority,
 * then arrival), back-off (a timer per pod) and unschedulable (waiting for a change that may
 * make room). One pod is scheduled at a time; the node chosen is "assumed" (its requests
 * counted there) before the binding is posted, so the next pod sees them; a batch of decisions
 * then has its bindings posted several at once. */
#include "scheduler/scheduler.h"
#include "api/registry.h"
#include "base/backoff.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/ctlutil.h"
#include "framework/timers.h"

#include <pthread.h>
#include <stdio.h>

#define LOG "scheduler"
/* Pods decided before their bindings are posted, KITE_CTL_WORKERS at once: one binding and one
 * event at a time held the scheduler to ~120 pods/s behind a busy apiserver. */
#define KITE_SCHED_BATCH (KITE_CTL_WORKERS * 4)
#define NO_NODES "no nodes available to schedule pods"

struct snode {
    char *name;
    json_object *obj;  /* the Node (a reference); NULL while only pods name it */
    char *fingerprint; /* what the filters read of it: a change there may make room */
    struct kite_sched_nodeinfo ni;
    struct kite_map images; /* normalized image name -> int64_t size (malloc'ed) */
    size_t refs;            /* pods counted here */
    size_t scratch;         /* index in a step's candidate list */
};

enum qstate { Q_NONE, Q_ACTIVE, Q_BACKOFF, Q_UNSCHED };
static const char *const QSTATE[] = {NULL, "active", "backoff", "unschedulable"};

struct spod {
    char *key, *ns, *name, *uid;
    int64_t priority;
    json_object *obj; /* the pod to place (a reference) while it waits; NULL otherwise */
    struct snode *node; /* where its requests count (bound or assumed) */
    bool assumed;
    struct kite_sched_req req, nz;
    enum qstate q;
    struct kite_timer qt;    /* its place in the active heap */
    struct kite_timer timer; /* back-off end (Q_BACKOFF), or the unschedulable flush (Q_UNSCHED) */
    int attempts;
    int64_t backoff_until;
    size_t uidx; /* in s->unsched */
};

struct kite_sched {
    struct kite_sched_options o;
    pthread_mutex_t lock;
    struct kite_map nodes, pods, image_nodes; /* image_nodes: name -> size_t count (malloc'ed) */
    size_t n_nodes;                           /* snodes with an object */
    struct kite_timers active, timers;
    struct spod **unsched;
    size_t n_unsched, cap_unsched;
    uint64_t seq, rng;
    size_t next_start; /* where the next pod's search for feasible nodes starts */
    bool kicked;
};

struct kite_sched *kite_sched_new(const struct kite_sched_options *o) {
    struct kite_sched *s = kite_calloc(1, sizeof *s);
    s->o = *o;
    if (!s->o.clock) s->o.clock = kite_clock_real();
    s->o.scheduler_name = kite_strdup(o->scheduler_name ? o->scheduler_name : KITE_SCHED_DEFAULT_NAME);
    s->rng = o->seed ? o->seed : (uint64_t)kite_now_wall(s->o.clock) | 1;
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

static void free_values(struct kite_map *m) {
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(m, &it, &k, &v);) free(v);
    kite_map_release(m);
}

static void snode_free(struct snode *n) {
    json_object_put(n->obj);
    free_values(&n->images);
    free(n->fingerprint);
    free(n->name);
    free(n);
}

static void spod_free(struct spod *p) {
    json_object_put(p->obj);
    free(p->key);
    free(p->ns);
    free(p->name);
    free(p->uid);
    free(p);
}

void kite_sched_free(struct kite_sched *s) {
    if (!s) return;
    /* the heaps mark their timers idle: release them while the pods are alive */
    kite_timers_release(&s->active);
    kite_timers_release(&s->timers);
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&s->pods, &it, &k, &v);) spod_free(v);
    for (size_t it = 0; kite_map_next(&s->nodes, &it, &k, &v);) snode_free(v);
    kite_map_release(&s->pods);
    kite_map_release(&s->nodes);
    free_values(&s->image_nodes);
    free(s->unsched);
    free((char *)s->o.scheduler_name);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* ---- queues ---- */

static void unsched_remove(struct kite_sched *s, struct spod *p) {
    s->unsched[p->uidx] = s->unsched[--s->n_unsched];
    s->unsched[p->uidx]->uidx = p->uidx;
}

static void dequeue(struct kite_sched *s, struct spod *p) {
    kite_timers_cancel(&s->active, &p->qt);
    kite_timers_cancel(&s->timers, &p->timer);
    if (p->q == Q_UNSCHED) unsched_remove(s, p);
    p->q = Q_NONE;
}

static void to_active(struct kite_sched *s, struct spod *p) {
    dequeue(s, p);
    /* PrioritySort: higher priority first, then first come; a min-heap key */
    int64_t prio = KITE_MAX(KITE_MIN(p->priority, INT32_MAX), INT32_MIN);
    kite_timers_set(&s->active, &p->qt, -prio * (INT64_C(1) << 31) + (int64_t)(s->seq++ & 0x7fffffff));
    p->q = Q_ACTIVE;
    s->kicked = true;
}

static void to_backoff_or_active(struct kite_sched *s, struct spod *p, int64_t now) {
    if (p->backoff_until <= now) {
        to_active(s, p);
        return;
    }
    dequeue(s, p);
    kite_timers_set(&s->timers, &p->timer, p->backoff_until);
    p->q = Q_BACKOFF;
    s->kicked = true; /* the runner's next deadline moved */
}

static void to_unsched(struct kite_sched *s, struct spod *p, int64_t now) {
    dequeue(s, p);
    if (s->n_unsched == s->cap_unsched) {
        s->cap_unsched = s->cap_unsched ? s->cap_unsched * 2 : 16;
        s->unsched = kite_realloc(s->unsched, s->cap_unsched * sizeof *s->unsched);
    }
    p->uidx = s->n_unsched;
    s->unsched[s->n_unsched++] = p;
    kite_timers_set(&s->timers, &p->timer, now + KITE_SCHED_UNSCHED_MAX_NS);
    p->q = Q_UNSCHED;
}

/* A failed attempt: the next waits initial x 2^(attempts-1), capped (upstream's calculateBackoffDuration). */
static void failed(struct kite_sched *s, struct spod *p, int64_t now) {
    unsigned n = p->attempts > 1 ? (unsigned)p->attempts - 1 : 0;
    p->backoff_until = now + kite_backoff_exp(KITE_SCHED_BACKOFF_INITIAL_NS, KITE_SCHED_BACKOFF_MAX_NS, n);
}

/* Something changed that may let waiting pods fit (moveAllToActiveOrBackoffQueue). */
static void move_all(struct kite_sched *s) {
    int64_t now = kite_now_mono(s->o.clock);
    while (s->n_unsched) to_backoff_or_active(s, s->unsched[s->n_unsched - 1], now);
}

/* ---- nodes ---- */

static struct snode *node_get(struct kite_sched *s, const char *name) {
    struct snode *n = kite_map_get(&s->nodes, name);
    if (!n) {
        n = kite_calloc(1, sizeof *n);
        n->name = kite_strdup(name);
        kite_map_put(&s->nodes, name, n);
    }
    return n;
}

static void node_maybe_free(struct kite_sched *s, struct snode *n) {
    if (n->obj || n->refs) return;
    kite_map_del(&s->nodes, n->name);
    snode_free(n);
}

static void images_count(struct kite_sched *s, struct snode *n, int delta) {
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&n->images, &it, &k, &v);) {
        size_t *c = kite_map_get(&s->image_nodes, k);
        if (!c) {
            if (delta < 0) continue;
            c = kite_calloc(1, sizeof *c);
            kite_map_put(&s->image_nodes, k, c);
        }
        if (delta > 0) (*c)++;
        else if (--*c == 0) free(kite_map_del(&s->image_nodes, k));
    }
}

/* A copy of obj (an object) sharing its members but name, which becomes val (taken; NULL:
 * dropped). */
static json_object *with_member(json_object *obj, const char *name, json_object *val) {
    json_object *o = json_object_new_object();
    json_object_object_foreach(obj, k, v) {
        if (strcmp(k, name) != 0) json_object_object_add(o, k, json_object_get(v));
    }
    if (val) json_object_object_add(o, name, val);
    return o;
}

json_object *kite_sched_node_transform(json_object *node) {
    json_object *st = kite_obj_get(node, "status"), *imgs = kite_obj_get(st, "images");
    if (!imgs || !json_object_is_type(st, json_type_object)) return json_object_get(node);
    struct kite_buf b = {0};
    for (size_t i = 0; json_object_is_type(imgs, json_type_array) && i < json_object_array_length(imgs); i++) {
        json_object *img = json_object_array_get_idx(imgs, i), *names = kite_obj_get(img, "names");
        int64_t size = json_object_get_int64(kite_obj_get(img, "sizeBytes"));
        for (size_t j = 0; names && json_object_is_type(names, json_type_array) && j < json_object_array_length(names); j++) {
            const char *nm = json_object_get_string(json_object_array_get_idx(names, j));
            /* a name with a space or a line break is no image reference */
            if (nm && *nm && !strpbrk(nm, " \n")) kite_buf_printf(&b, "%lld %s\n", (long long)size, nm);
        }
    }
    json_object *status = with_member(st, "images", NULL);
    json_object_object_add(status, "imageSizes", json_object_new_string_len(b.p ? b.p : "", (int)b.len));
    kite_buf_release(&b);
    return with_member(node, "status", status);
}

static void images_load(struct snode *n) {
    free_values(&n->images);
    n->images = (struct kite_map){0};
    const char *p = kite_obj_str(kite_obj_get(n->obj, "status"), "imageSizes");
    while (p && *p) {
        char *end;
        long long size = strtoll(p, &end, 10);
        const char *nl = strchr(end, '\n');
        if (end == p || *end != ' ' || !nl) break; /* only this file writes it */
        _cleanup_free_ char *nm = kite_strndup(end + 1, (size_t)(nl - end - 1));
        if (!kite_map_get(&n->images, nm)) {
            int64_t *v = kite_malloc(sizeof *v);
            *v = size;
            kite_map_put(&n->images, nm, v);
        }
        p = nl + 1;
    }
}

/* The parts of a node the filters read (heartbeats and images aside). */
static char *fingerprint(json_object *node) {
    json_object *st = kite_obj_get(node, "status"), *conds = kite_obj_get(st, "conditions");
    const char *ready = NULL;
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), "Ready"))
            ready = kite_obj_str(json_object_array_get_idx(conds, i), "status");
    json_object *sp = kite_obj_get(node, "spec"), *labels = kite_obj_get(kite_obj_meta(node), "labels");
    return kite_asprintf("%s|%s|%s|%s|%s|%s", json_object_to_json_string(kite_obj_get(sp, "unschedulable")),
                         json_object_to_json_string(kite_obj_get(sp, "taints")), json_object_to_json_string(labels),
                         json_object_to_json_string(kite_obj_get(st, "allocatable")),
                         json_object_to_json_string(kite_obj_get(st, "capacity")), ready ? ready : "");
}

void kite_sched_node_upsert(struct kite_sched *s, json_object *whole) {
    const char *name = kite_meta_str(whole, "name");
    if (!name) return;
    json_object *node = kite_sched_node_transform(whole);
    char *fp = fingerprint(node);
    pthread_mutex_lock(&s->lock);
    struct snode *n = node_get(s, name);
    if (!n->obj) s->n_nodes++;
    else images_count(s, n, -1);
    json_object_put(n->obj);
    n->obj = json_object_get(node);
    struct kite_sched_nodeinfo keep = n->ni;
    kite_sched_nodeinfo_init(&n->ni, node);
    n->ni.requested = keep.requested, n->ni.nonzero = keep.nonzero, n->ni.npods = keep.npods;
    images_load(n);
    images_count(s, n, +1);
    bool changed = !kite_streq(fp, n->fingerprint);
    free(n->fingerprint);
    n->fingerprint = fp;
    if (changed) move_all(s); /* a node added, or one whose schedulable properties changed */
    pthread_mutex_unlock(&s->lock);
    json_object_put(node);
}

void kite_sched_node_delete(struct kite_sched *s, json_object *node) {
    const char *name = kite_meta_str(node, "name");
    if (!name) return;
    pthread_mutex_lock(&s->lock);
    struct snode *n = kite_map_get(&s->nodes, name);
    if (n && n->obj) {
        images_count(s, n, -1);
        json_object_put(TAKE_PTR(n->obj));
        free(TAKE_PTR(n->fingerprint));
        s->n_nodes--;
        node_maybe_free(s, n);
    }
    pthread_mutex_unlock(&s->lock);
}

/* ---- pods ---- */

static void count_on(struct kite_sched *s, struct spod *p, struct snode *n) {
    p->node = n;
    n->refs++;
    n->ni.npods++;
    n->ni.requested.cpu = kite_sat_add(n->ni.requested.cpu, p->req.cpu);
    n->ni.requested.mem = kite_sat_add(n->ni.requested.mem, p->req.mem);
    n->ni.nonzero.cpu = kite_sat_add(n->ni.nonzero.cpu, p->nz.cpu);
    n->ni.nonzero.mem = kite_sat_add(n->ni.nonzero.mem, p->nz.mem);
}

static void uncount(struct kite_sched *s, struct spod *p) {
    struct snode *n = TAKE_PTR(p->node);
    if (!n) return;
    n->refs--;
    n->ni.npods--;
    n->ni.requested.cpu = kite_sat_sub(n->ni.requested.cpu, p->req.cpu);
    n->ni.requested.mem = kite_sat_sub(n->ni.requested.mem, p->req.mem);
    n->ni.nonzero.cpu = kite_sat_sub(n->ni.nonzero.cpu, p->nz.cpu);
    n->ni.nonzero.mem = kite_sat_sub(n->ni.nonzero.mem, p->nz.mem);
    p->assumed = false;
    node_maybe_free(s, n);
}

static bool terminated(json_object *pod) {
    const char *phase = kite_obj_str(kite_obj_get(pod, "status"), "phase");
    return kite_streq(phase, "Succeeded") || kite_streq(phase, "Failed");
}

/* A pod this scheduler places: unbound, its schedulerName, not being deleted, not gated. */
static bool ours(struct kite_sched *s, json_object *pod) {
    json_object *spec = kite_obj_get(pod, "spec"), *gates = kite_obj_get(spec, "schedulingGates");
    const char *sched = kite_obj_str(spec, "schedulerName");
    return !kite_meta_str(pod, "deletionTimestamp") && !terminated(pod) &&
           kite_streq(sched && *sched ? sched : KITE_SCHED_DEFAULT_NAME, s->o.scheduler_name) &&
           !(gates && json_object_is_type(gates, json_type_array) && json_object_array_length(gates) > 0);
}

static void set_str(char **dst, const char *v) {
    if (kite_streq(*dst, v)) return;
    free(*dst);
    *dst = v ? kite_strdup(v) : NULL;
}

void kite_sched_pod_upsert(struct kite_sched *s, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name");
    if (!ns || !name) return;
    const char *node = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    if (node && !*node) node = NULL;
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&s->lock);
    struct spod *p = kite_map_get(&s->pods, key);
    if (!p) {
        p = kite_calloc(1, sizeof *p);
        p->key = kite_strdup(key);
        p->ns = kite_strdup(ns);
        p->name = kite_strdup(name);
        kite_timer_init(&p->qt);
        kite_timer_init(&p->timer);
        kite_map_put(&s->pods, key, p);
    }
    set_str(&p->uid, kite_meta_str(pod, "uid"));
    p->priority = json_object_get_int64(kite_obj_get(kite_obj_get(pod, "spec"), "priority"));
    if (node) {
        /* bound: its requests count on its node until it terminates */
        json_object_put(TAKE_PTR(p->obj));
        dequeue(s, p);
        bool was_counted = p->node && !p->assumed;
        struct snode *old = p->node;
        bool count = !terminated(pod);
        if (p->node && (!count || !kite_streq(p->node->name, node) || p->assumed)) uncount(s, p);
        if (count && !p->node) {
            kite_sched_pod_requests(pod, false, &p->req);
            kite_sched_pod_requests(pod, true, &p->nz);
            count_on(s, p, node_get(s, node));
        }
        if (was_counted && (!count || p->node != old)) move_all(s); /* room freed */
    } else if (p->assumed) {
        /* an update from before the binding: it stays where it is assumed */
    } else if (ours(s, pod)) {
        /* upstream's isPodUpdated: what the pod asks for, not its status or resourceVersion */
        json_object *om = kite_obj_meta(p->obj), *nm = kite_obj_meta(pod);
        bool changed = !p->obj || !json_object_equal(kite_obj_get(p->obj, "spec"), kite_obj_get(pod, "spec")) ||
                       !json_object_equal(kite_obj_get(om, "labels"), kite_obj_get(nm, "labels")) ||
                       !json_object_equal(kite_obj_get(om, "annotations"), kite_obj_get(nm, "annotations"));
        json_object_put(p->obj);
        p->obj = json_object_get(pod);
        kite_sched_pod_requests(pod, false, &p->req);
        kite_sched_pod_requests(pod, true, &p->nz);
        if (p->q == Q_NONE) to_active(s, p);
        else if (p->q == Q_UNSCHED && changed) to_backoff_or_active(s, p, kite_now_mono(s->o.clock));
    } else {
        json_object_put(TAKE_PTR(p->obj));
        dequeue(s, p);
    }
    pthread_mutex_unlock(&s->lock);
}

void kite_sched_pod_delete(struct kite_sched *s, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name");
    if (!ns || !name) return;
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&s->lock);
    struct spod *p = kite_map_del(&s->pods, key);
    if (p) {
        bool freed = p->node != NULL;
        dequeue(s, p);
        uncount(s, p);
        spod_free(p);
        if (freed) move_all(s);
    }
    pthread_mutex_unlock(&s->lock);
}

/* ---- one scheduling attempt ---- */

struct decision {
    char *key, *ns, *name, *uid, *node; /* node NULL: unschedulable, msg says why */
    char *msg;
    json_object *cond; /* the pod's PodScheduled condition before (a copy), or NULL */
};

static void decision_release(struct decision *d) {
    free(d->key);
    free(d->ns);
    free(d->name);
    free(d->uid);
    free(d->node);
    free(d->msg);
    json_object_put(d->cond);
}

/* The post-filter message: upstream's DefaultPreemption dry run, without evicting anything. */
static char *preemption_message(struct kite_sched *s, struct spod *p, struct snode **cand,
                                struct kite_sched_verdict *v, size_t n) {
    if (kite_streq(kite_obj_str(kite_obj_get(p->obj, "spec"), "preemptionPolicy"), "Never"))
        return kite_strdup("not eligible due to preemptionPolicy=Never.");
    /* what each node would have without the pods of lower priority */
    struct kite_sched_nodeinfo *without = kite_calloc(n, sizeof *without);
    bool *victims = kite_calloc(n, sizeof *victims);
    for (size_t i = 0; i < n; i++) without[i] = cand[i]->ni;
    const char *k;
    void *val;
    for (size_t it = 0; kite_map_next(&s->pods, &it, &k, &val);) {
        struct spod *q = val;
        if (!q->node || !q->node->obj || q->priority >= p->priority) continue;
        size_t i = q->node->scratch;
        if (i >= n || cand[i] != q->node) continue;
        victims[i] = true;
        without[i].npods--;
        without[i].requested.cpu = kite_sat_sub(without[i].requested.cpu, q->req.cpu);
        without[i].requested.mem = kite_sat_sub(without[i].requested.mem, q->req.mem);
    }
    struct kite_sched_verdict *pv = kite_calloc(n, sizeof *pv);
    for (size_t i = 0; i < n; i++) {
        if (v[i].unresolvable) pv[i].reasons[pv[i].n++] = kite_strdup("Preemption is not helpful for scheduling");
        else if (!victims[i]) pv[i].reasons[pv[i].n++] = kite_strdup("No preemption victims found for incoming pod");
        else {
            kite_sched_fit(&p->req, &without[i], &pv[i]);
            /* room could be made here: upstream would evict; kite does not preempt */
            if (!pv[i].n) pv[i].reasons[pv[i].n++] = kite_strdup("Preemption is not supported");
        }
    }
    char *msg = kite_sched_fit_message(n, pv, n, NULL);
    for (size_t i = 0; i < n; i++) kite_sched_verdict_release(&pv[i]);
    free(pv);
    free(victims);
    free(without);
    return msg;
}

/* Filters and scores every node for p (locked). On success p is assumed on the node chosen. */
static void decide(struct kite_sched *s, struct spod *p, struct decision *d) {
    size_t n = 0;
    struct snode **cand = kite_calloc(s->n_nodes ? s->n_nodes : 1, sizeof *cand);
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&s->nodes, &it, &k, &v);) {
        struct snode *nd = v;
        if (!nd->obj || n == s->n_nodes) continue;
        nd->scratch = n;
        cand[n++] = nd;
    }
    if (!n) {
        d->msg = kite_strdup(NO_NODES);
        free(cand);
        return;
    }
    struct kite_sched_verdict *verd = kite_calloc(n, sizeof *verd);
    json_object *spec = kite_obj_get(p->obj, "spec");
    json_object *cs = kite_obj_get(spec, "containers"), *ics = kite_obj_get(spec, "initContainers");
    size_t ncs = cs ? json_object_array_length(cs) : 0, nics = ics ? json_object_array_length(ics) : 0;
    struct snode *best = NULL;
    int64_t best_score = -1, ties = 0;
    size_t want = kite_sched_feasible_to_find(n), start = s->next_start % n, seen = 0, feasible = 0;
    for (; seen < n && feasible < want; seen++) {
        size_t i = (start + seen) % n;
        kite_sched_filter(p->obj, &p->req, &cand[i]->ni, &verd[i]);
        if (verd[i].filter) continue;
        feasible++;
        int64_t image_sum = 0;
        for (size_t j = 0; j < ncs + nics; j++) {
            json_object *c = json_object_array_get_idx(j < nics ? ics : cs, j < nics ? j : j - nics);
            const char *image = kite_obj_str(c, "image");
            if (!image) continue;
            _cleanup_free_ char *norm = kite_sched_normalized_image(image);
            int64_t *size = kite_map_get(&cand[i]->images, norm);
            size_t *have = kite_map_get(&s->image_nodes, norm);
            /* spread: an image on few nodes counts less (upstream's scaledImageScore) */
            if (size && have) image_sum += (int64_t)((double)*size * ((double)*have / (double)s->n_nodes));
        }
        int64_t score = kite_sched_score_least_allocated(&p->nz, &cand[i]->ni) +
                        kite_sched_score_image_locality(image_sum, ncs + nics);
        /* reservoir sampling among the best, as upstream's selectHost */
        if (score > best_score) best = cand[i], best_score = score, ties = 1;
        else if (score == best_score && kite_rand01(&s->rng) * (double)++ties < 1.0) best = cand[i];
    }
    s->next_start = (start + seen) % n;
    if (best) {
        d->node = kite_strdup(best->name);
        count_on(s, p, best);
        p->assumed = true;
    } else {
        _cleanup_free_ char *post = preemption_message(s, p, cand, verd, n);
        d->msg = kite_sched_fit_message(n, verd, n, post);
    }
    for (size_t i = 0; i < n; i++) kite_sched_verdict_release(&verd[i]);
    free(verd);
    free(cand);
}

static int bind(struct kite_sched *s, const struct decision *d) {
    json_object *b = json_object_new_object(), *meta = json_object_new_object(), *target = json_object_new_object();
    kite_obj_set(b, "kind", json_object_new_string("Binding"));
    kite_obj_set(b, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(meta, "name", json_object_new_string(d->name));
    kite_obj_set(meta, "namespace", json_object_new_string(d->ns));
    if (d->uid) kite_obj_set(meta, "uid", json_object_new_string(d->uid));
    kite_obj_set(b, "metadata", meta);
    kite_obj_set(target, "kind", json_object_new_string("Node"));
    kite_obj_set(target, "name", json_object_new_string(d->node));
    kite_obj_set(b, "target", target);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s/binding", d->ns, d->name);
    int e = kite_client_json(s->o.client, "POST", path, NULL, b, NULL, NULL);
    json_object_put(b);
    return e;
}

/* PodScheduled=False, reason Unschedulable (upstream's updatePod), only when it changes. */
static void mark_unschedulable(struct kite_sched *s, const struct decision *d) {
    const char *status = kite_obj_str(d->cond, "status");
    if (kite_streq(status, "False") && kite_streq(kite_obj_str(d->cond, "reason"), "Unschedulable") &&
        kite_streq(kite_obj_str(d->cond, "message"), d->msg))
        return;
    json_object *patch = json_object_new_object(), *c = json_object_new_object(), *conds = json_object_new_array();
    kite_obj_set(c, "type", json_object_new_string("PodScheduled"));
    kite_obj_set(c, "status", json_object_new_string("False"));
    kite_obj_set(c, "reason", json_object_new_string("Unschedulable"));
    kite_obj_set(c, "message", json_object_new_string(d->msg));
    kite_obj_set(c, "lastProbeTime", NULL);
    if (!kite_streq(status, "False")) {
        char now[21];
        kite_time_format(kite_now_wall(s->o.clock), now);
        kite_obj_set(c, "lastTransitionTime", json_object_new_string(now));
    }
    json_object_array_add(conds, c);
    kite_obj_set(kite_obj_ensure(patch, "status"), "conditions", conds);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s/status", d->ns, d->name);
    int e = kite_client_json(s->o.client, "PATCH", path, "application/strategic-merge-patch+json", patch, NULL, NULL);
    json_object_put(patch);
    if (e < 0 && e != -ENOENT) log_warn(LOG, "pod %s: cannot set its PodScheduled condition: %s", d->key, strerror(-e));
}

static void truncate_msg(char *m) {
    if (strlen(m) > KITE_SCHED_MAX_MESSAGE) strcpy(m + KITE_SCHED_MAX_MESSAGE - 3, "...");
}

/* Runs d's requests (unlocked); a failed binding sends the pod back to wait. */
static void carry_out(struct kite_sched *s, struct decision *d) {
    struct kite_ctl_acts ev = {0};
    if (d->node) {
        int e = bind(s, d);
        if (e == 0 || e == -EEXIST || e == -ENOENT) {
            if (e == 0) {
                _cleanup_free_ char *msg = kite_asprintf("Successfully assigned %s/%s to %s", d->ns, d->name, d->node);
                kite_ctl_event(&ev, s->o.clock, KITE_SCHED_DEFAULT_NAME, "Pod", d->ns, d->name, d->uid, "Normal", "Scheduled", msg);
                log_info(LOG, "%s", msg);
            }
            /* 409: bound elsewhere meanwhile; 404: gone. The informer tells the rest. */
        } else {
            pthread_mutex_lock(&s->lock);
            struct spod *p = kite_map_get(&s->pods, d->key);
            if (p && p->assumed) {
                uncount(s, p);
                int64_t now = kite_now_mono(s->o.clock);
                failed(s, p, now);
                if (p->obj) to_backoff_or_active(s, p, now);
            }
            pthread_mutex_unlock(&s->lock);
            _cleanup_free_ char *msg = kite_asprintf("Binding rejected: %s", strerror(-e));
            kite_ctl_event(&ev, s->o.clock, KITE_SCHED_DEFAULT_NAME, "Pod", d->ns, d->name, d->uid, "Warning", "FailedScheduling", msg);
            log_warn(LOG, "pod %s: cannot bind to %s: %s (will retry)", d->key, d->node, strerror(-e));
        }
    } else {
        truncate_msg(d->msg);
        kite_ctl_event(&ev, s->o.clock, KITE_SCHED_DEFAULT_NAME, "Pod", d->ns, d->name, d->uid, "Warning", "FailedScheduling", d->msg);
        mark_unschedulable(s, d);
        log_info(LOG, "pod %s: %s", d->key, d->msg);
    }
    kite_ctl_acts_run(s->o.client, &ev, NULL, NULL);
    kite_ctl_acts_release(&ev);
}

static json_object *scheduled_condition(json_object *pod) {
    json_object *conds = kite_obj_get(kite_obj_get(pod, "status"), "conditions"), *copy = NULL;
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), "PodScheduled"))
            json_object_deep_copy(json_object_array_get_idx(conds, i), &copy, NULL);
    return copy;
}

struct batch {
    struct kite_sched *s;
    struct decision v[KITE_SCHED_BATCH];
    size_t n;
};

static void carry_out_one(void *ud, size_t i) {
    struct batch *b = ud;
    carry_out(b->s, &b->v[i]);
}

int64_t kite_sched_step(struct kite_sched *s) {
    struct batch batch = {.s = s};
    pthread_mutex_lock(&s->lock);
    for (;;) {
        int64_t now = kite_now_mono(s->o.clock);
        struct kite_timer *t;
        while ((t = kite_timers_pop_due(&s->timers, now))) {
            struct spod *p = kite_container_of(t, struct spod, timer);
            if (p->q == Q_UNSCHED) unsched_remove(s, p), p->q = Q_NONE; /* waited long enough: try again */
            to_backoff_or_active(s, p, now);
        }
        s->kicked = false;
        if (!(t = kite_timers_peek(&s->active))) break;
        struct spod *p = kite_container_of(t, struct spod, qt);
        kite_timers_cancel(&s->active, &p->qt);
        p->q = Q_NONE;
        p->attempts++;
        struct decision *d = &batch.v[batch.n++];
        *d = (struct decision){.key = kite_strdup(p->key), .ns = kite_strdup(p->ns), .name = kite_strdup(p->name),
                               .uid = p->uid ? kite_strdup(p->uid) : NULL, .cond = scheduled_condition(p->obj)};
        decide(s, p, d);
        if (!d->node) { /* assumed otherwise: it keeps its object until the informer shows it bound */
            failed(s, p, now);
            to_unsched(s, p, now);
        }
        if (batch.n < KITE_SCHED_BATCH && kite_timers_peek(&s->active)) continue;
        /* the decisions' bindings and events, KITE_CTL_WORKERS at once (upstream's binding
         * cycles run beside the next scheduling cycles): the next pods are decided only after,
         * so that a binding refused is back in the queue before them */
        pthread_mutex_unlock(&s->lock);
        kite_ctl_parallel(batch.n, KITE_CTL_WORKERS, carry_out_one, &batch);
        for (size_t i = 0; i < batch.n; i++) decision_release(&batch.v[i]);
        batch.n = 0;
        pthread_mutex_lock(&s->lock);
    }
    int64_t next = KITE_SCHED_IDLE_NS;
    struct kite_timer *t = kite_timers_peek(&s->timers);
    if (t) next = KITE_MAX(0, KITE_MIN(next, t->at - kite_now_mono(s->o.clock)));
    pthread_mutex_unlock(&s->lock);
    return next;
}

bool kite_sched_pending(struct kite_sched *s) {
    pthread_mutex_lock(&s->lock);
    bool k = s->kicked || kite_timers_peek(&s->active);
    pthread_mutex_unlock(&s->lock);
    return k;
}

const char *kite_sched_pod_state(struct kite_sched *s, const char *ns, const char *name) {
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&s->lock);
    struct spod *p = kite_map_get(&s->pods, key);
    const char *r = !p ? NULL : p->q != Q_NONE ? QSTATE[p->q] : p->assumed ? "assumed" : p->node ? "bound" : NULL;
    pthread_mutex_unlock(&s->lock);
    return r;
}
