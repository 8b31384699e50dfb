/* The pod garbage collector's core (podgc.h). A node name pods are bound to has an entry
 * whether or not the Node exists; while it does not, its quarantine timer runs. A pod is marked
 * due when a change may make it collectable; the step decides from the state then. */
#include "controllers/node/podgc.h"
#include "framework/framework.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/ctlutil.h"
#include "framework/timers.h"
#include "base/slots.h"

#include <pthread.h>

#define LOG "pod-gc"

struct gpod;
struct gnode {
    char *name;
    bool exists, ready, oos;
    bool gone;    /* a GET after the quarantine found no such Node */
    bool checking; /* that GET is under way */
    struct kite_timer quarantine;
    struct kite_slots pods; /* struct gpod * */
};

struct gpod {
    struct kite_ctl_pod id;
    struct gnode *node;
    size_t slot;
    bool terminating, terminal, evicted, failed_phase;
    bool due, sent, retry;
    int64_t created; /* wall ns */
    int attempts;
};

struct kite_podgc {
    struct kite_podgc_options o;
    pthread_mutex_t lock;
    struct kite_map nodes, pods;
    struct kite_timers timers;
    struct kite_timer retry; /* failed deletions are tried again when it fires */
    struct gpod **due;
    size_t ndue, capdue;
    size_t nterminal;
    bool kicked;
};

struct kite_podgc *kite_podgc_new(const struct kite_podgc_options *o) {
    struct kite_podgc *g = kite_calloc(1, sizeof *g);
    g->o = *o;
    if (!g->o.clock) g->o.clock = kite_clock_real();
    if (g->o.orphan_delay_ns <= 0) g->o.orphan_delay_ns = 40 * KITE_NS_PER_SEC;
    kite_timer_init(&g->retry);
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

static void gnode_free(struct gnode *n) {
    kite_slots_release(&n->pods);
    free(n->name);
    free(n);
}

static void gpod_free(struct gpod *p) {
    kite_ctl_pod_release(&p->id);
    free(p);
}

void kite_podgc_free(struct kite_podgc *g) {
    if (!g) return;
    kite_timers_release(&g->timers); /* it marks the nodes' timers idle: before they go */
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&g->pods, &it, &k, &v);) gpod_free(v);
    for (size_t it = 0; kite_map_next(&g->nodes, &it, &k, &v);) gnode_free(v);
    kite_map_release(&g->pods);
    kite_map_release(&g->nodes);
    free(g->due);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static void mark_due(struct kite_podgc *g, struct gpod *p) {
    if (p->due) return;
    if (g->ndue == g->capdue) {
        g->capdue = g->capdue ? g->capdue * 2 : 16;
        g->due = kite_realloc(g->due, g->capdue * sizeof *g->due);
    }
    g->due[g->ndue++] = p;
    p->due = true;
    g->kicked = true;
}

static void unmark_due(struct kite_podgc *g, struct gpod *p) {
    if (!p->due) return;
    for (size_t i = 0; i < g->ndue; i++)
        if (g->due[i] == p) {
            g->due[i] = g->due[--g->ndue];
            break;
        }
    p->due = false;
}

/* A missing node with pods starts (or keeps) its quarantine. */
static void quarantine(struct kite_podgc *g, struct gnode *n) {
    if (n->exists || n->gone || n->checking || !n->pods.n || kite_timer_armed(&n->quarantine)) return;
    kite_timers_set(&g->timers, &n->quarantine, kite_now_mono(g->o.clock) + g->o.orphan_delay_ns);
    g->kicked = true;
}

static struct gnode *node_get(struct kite_podgc *g, const char *name) {
    struct gnode *n = kite_map_get(&g->nodes, name);
    if (!n) {
        n = kite_calloc(1, sizeof *n);
        n->name = kite_strdup(name);
        kite_timer_init(&n->quarantine);
        kite_map_put(&g->nodes, name, n);
    }
    return n;
}

static void node_maybe_free(struct kite_podgc *g, struct gnode *n) {
    if (n->exists || n->pods.n || n->checking) return;
    kite_timers_cancel(&g->timers, &n->quarantine);
    kite_map_del(&g->nodes, n->name);
    gnode_free(n);
}

static void detach(struct kite_podgc *g, struct gpod *p) {
    struct gnode *n = p->node;
    if (!n) return;
    struct gpod *moved = kite_slots_remove(&n->pods, p->slot);
    if (moved) moved->slot = p->slot;
    p->node = NULL;
    node_maybe_free(g, n);
}

static void attach(struct kite_podgc *g, struct gpod *p, const char *node) {
    struct gnode *n = node_get(g, node);
    p->slot = kite_slots_add(&n->pods, p);
    p->node = n;
    quarantine(g, n);
}

/* Whether p is collectable now, and how: the condition to set (NULL: none). */
static bool collectable(const struct gpod *p, const char **ret_cond) {
    *ret_cond = NULL;
    if (!p->node) return p->terminating; /* unscheduled and terminating */
    if (p->node->gone) {
        *ret_cond = "PodGC: node no longer exists";
        return true;
    }
    /* non-graceful node shutdown: the operator's out-of-service taint on a node not Ready */
    return p->terminating && p->node->exists && !p->node->ready && p->node->oos;
}

void kite_podgc_node_upsert(struct kite_podgc *g, json_object *node) {
    const char *name = kite_meta_str(node, "name");
    if (!name) return;
    json_object *cond = kite_ctl_condition(node, "Ready");
    bool ready = kite_streq(kite_obj_str(cond, "status"), "True");
    bool oos = false;
    json_object *taints = kite_obj_get(kite_obj_get(node, "spec"), "taints");
    for (size_t i = 0; taints && json_object_is_type(taints, json_type_array) && i < json_object_array_length(taints); i++)
        oos = oos || kite_streq(kite_obj_str(json_object_array_get_idx(taints, i), "key"), KITE_PODGC_OUT_OF_SERVICE);
    pthread_mutex_lock(&g->lock);
    struct gnode *n = node_get(g, name);
    bool was_fenced = n->exists && !n->ready && n->oos;
    n->exists = true, n->gone = false, n->ready = ready, n->oos = oos;
    kite_timers_cancel(&g->timers, &n->quarantine);
    if (!ready && oos && !was_fenced)
        for (size_t i = 0; i < n->pods.n; i++)
            if (((struct gpod *)n->pods.v[i])->terminating) mark_due(g, n->pods.v[i]);
    pthread_mutex_unlock(&g->lock);
}

void kite_podgc_node_delete(struct kite_podgc *g, json_object *node) {
    const char *name = kite_meta_str(node, "name");
    if (!name) return;
    pthread_mutex_lock(&g->lock);
    struct gnode *n = kite_map_get(&g->nodes, name);
    if (n) {
        n->exists = false;
        quarantine(g, n);
        node_maybe_free(g, n);
    }
    pthread_mutex_unlock(&g->lock);
}

static void pod_remove(struct kite_podgc *g, const char *key) {
    struct gpod *p = kite_map_del(&g->pods, key);
    if (!p) return;
    unmark_due(g, p);
    if (p->terminal) g->nterminal--;
    detach(g, p);
    gpod_free(p);
}

void kite_podgc_pod_upsert(struct kite_podgc *g, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name");
    if (!ns || !name) return;
    const char *node = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    if (node && !*node) node = NULL;
    json_object *st = kite_obj_get(pod, "status");
    const char *phase = kite_obj_str(st, "phase");
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&g->lock);
    struct gpod *p = kite_map_get(&g->pods, key);
    if (!p) {
        p = kite_calloc(1, sizeof *p);
        kite_ctl_pod_init(&p->id, ns, name, kite_meta_str(pod, "uid"));
        const char *ct = kite_meta_str(pod, "creationTimestamp");
        if (ct) kite_time_parse(ct, &p->created);
        kite_map_put(&g->pods, key, p);
    }
    if (!p->node || !node || !kite_streq(p->node->name, node)) {
        detach(g, p);
        if (node) attach(g, p, node);
    }
    bool terminal = kite_streq(phase, "Succeeded") || kite_streq(phase, "Failed");
    if (terminal != p->terminal) g->nterminal += terminal ? 1 : (size_t)-1;
    p->terminal = terminal;
    p->failed_phase = kite_streq(phase, "Failed");
    p->evicted = p->failed_phase && kite_streq(kite_obj_str(st, "reason"), "Evicted");
    p->terminating = kite_meta_str(pod, "deletionTimestamp") != NULL;
    const char *cond;
    if (collectable(p, &cond)) mark_due(g, p);
    if (g->o.terminated_threshold > 0 && g->nterminal > (size_t)g->o.terminated_threshold) g->kicked = true;
    pthread_mutex_unlock(&g->lock);
}

void kite_podgc_pod_delete(struct kite_podgc *g, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name");
    if (!ns || !name) return;
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&g->lock);
    pod_remove(g, key);
    pthread_mutex_unlock(&g->lock);
}

/* ---- the requests ---- */

/* markFailedAndDeletePodWithCondition: phase Failed (and the condition) unless the pod is
 * terminal already, then a delete with grace 0. */
static void job_add(struct kite_ctl_pod_kill **v, size_t *n, const struct gpod *p, const char *cond) {
    *v = kite_realloc(*v, (*n + 1) * sizeof **v);
    struct kite_ctl_pod_kill *k = &(*v)[(*n)++];
    *k = (struct kite_ctl_pod_kill){.phase = p->terminal ? NULL : "Failed", .grace0 = true};
    if (!p->terminal && cond) k->reason = "DeletionByPodGC", k->message = cond;
    kite_ctl_pod_copy(&k->pod, &p->id);
}

/* byEvictionAndCreationTimestamp */
static int cmp_terminated(const void *a, const void *b) {
    const struct gpod *x = *(struct gpod *const *)a, *y = *(struct gpod *const *)b;
    if (x->evicted != y->evicted) return x->evicted ? -1 : 1;
    if (x->created != y->created) return x->created < y->created ? -1 : 1;
    return strcmp(x->id.name, y->id.name);
}

static void terminated_jobs(struct kite_podgc *g, struct kite_ctl_pod_kill **v, size_t *n) {
    if (g->o.terminated_threshold <= 0 || g->nterminal <= (size_t)g->o.terminated_threshold) return;
    struct gpod **t = kite_malloc(g->nterminal * sizeof *t);
    size_t nt = 0;
    const char *k;
    void *val;
    for (size_t it = 0; kite_map_next(&g->pods, &it, &k, &val);)
        if (((struct gpod *)val)->terminal && nt < g->nterminal) t[nt++] = val;
    qsort(t, nt, sizeof *t, cmp_terminated);
    size_t excess = nt - (size_t)g->o.terminated_threshold;
    for (size_t i = 0; i < excess; i++)
        if (!t[i]->sent) {
            t[i]->sent = true;
            job_add(v, n, t[i], NULL);
        }
    free(t);
}

/* GET the node after its quarantine (upstream's checkIfNodeExists: the informer may lag). */
static void check_nodes(struct kite_podgc *g, char **names, size_t n) {
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s", names[i]);
        int e = kite_client_json(g->o.client, "GET", path, NULL, NULL, NULL, NULL);
        pthread_mutex_lock(&g->lock);
        struct gnode *nd = kite_map_get(&g->nodes, names[i]);
        if (nd) {
            nd->checking = false;
            if (e == -ENOENT && !nd->exists) {
                nd->gone = true;
                log_info(LOG, "node %s is gone: collecting its %zu pods", nd->name, nd->pods.n);
                for (size_t j = 0; j < nd->pods.n; j++) mark_due(g, nd->pods.v[j]);
            } else if (e < 0 && !nd->exists) {
                log_warn(LOG, "node %s: cannot check it: %s (will retry)", nd->name, strerror(-e));
                kite_timers_set(&g->timers, &nd->quarantine, kite_now_mono(g->o.clock) + KITE_PODGC_RETRY_NS);
            }
            node_maybe_free(g, nd);
        }
        pthread_mutex_unlock(&g->lock);
        free(names[i]);
    }
    free(names);
}

static void collect_failed(void *ud, const struct kite_ctl_pod *pod, int e) {
    struct kite_podgc *g = ud;
    log_warn(LOG, "pod %s: cannot delete it: %s (will retry)", pod->key, strerror(-e));
    struct gpod *p = kite_map_get(&g->pods, pod->key);
    if (p) {
        p->sent = false, p->retry = true;
        if (!kite_timer_armed(&g->retry))
            kite_timers_set(&g->timers, &g->retry, kite_now_mono(g->o.clock) + KITE_PODGC_RETRY_NS);
    }
}

static void collected(void *ud, const struct kite_ctl_pod *pod) { log_info(LOG, "pod %s: force-deleted", pod->key); }

int64_t kite_podgc_step(struct kite_podgc *g) {
    pthread_mutex_lock(&g->lock);
    g->kicked = false;
    int64_t now = kite_now_mono(g->o.clock);
    char **check = NULL;
    size_t nc = 0;
    struct kite_timer *t;
    while ((t = kite_timers_pop_due(&g->timers, now))) {
        if (t == &g->retry) {
            const char *k;
            void *v;
            for (size_t it = 0; kite_map_next(&g->pods, &it, &k, &v);) {
                struct gpod *p = v;
                if (p->retry) p->retry = false, mark_due(g, p);
            }
            continue;
        }
        struct gnode *n = kite_container_of(t, struct gnode, quarantine);
        if (n->exists || !n->pods.n) continue;
        n->checking = true;
        check = kite_realloc(check, (nc + 1) * sizeof *check);
        check[nc++] = kite_strdup(n->name);
    }
    pthread_mutex_unlock(&g->lock);
    if (nc) check_nodes(g, check, nc);

    pthread_mutex_lock(&g->lock);
    struct kite_ctl_pod_kill *jobs = NULL;
    size_t nj = 0;
    for (size_t i = 0; i < g->ndue; i++) {
        struct gpod *p = g->due[i];
        p->due = false;
        const char *cond;
        if (!p->sent && collectable(p, &cond)) {
            p->sent = true;
            job_add(&jobs, &nj, p, cond);
        }
    }
    g->ndue = 0;
    terminated_jobs(g, &jobs, &nj);
    pthread_mutex_unlock(&g->lock);

    kite_ctl_pod_kills_run(g->o.client, g->o.clock, &g->lock, jobs, nj, collect_failed, collected, g);
    pthread_mutex_lock(&g->lock);
    int64_t next = kite_timers_next_in(&g->timers, kite_now_mono(g->o.clock), KITE_PODGC_IDLE_NS);
    pthread_mutex_unlock(&g->lock);
    return next;
}

bool kite_podgc_pending(struct kite_podgc *g) {
    pthread_mutex_lock(&g->lock);
    bool k = g->kicked || g->ndue;
    pthread_mutex_unlock(&g->lock);
    return k;
}

/* ---- on the framework: nodes and pods feed it ---- */
KITE_CTL_FEED(kite_podgc_node_upsert, struct kite_podgc)
KITE_CTL_FEED(kite_podgc_node_delete, struct kite_podgc)
KITE_CTL_FEED(kite_podgc_pod_upsert, struct kite_podgc)
KITE_CTL_FEED(kite_podgc_pod_delete, struct kite_podgc)
KITE_CTL_CORE(kite_podgc, struct kite_podgc)

int kite_podgc_run(struct kite_ctl_group *g, const struct kite_podgc_options *o) {
    struct kite_podgc_options no = *o;
    no.client = kite_ctl_group_client(g), no.clock = kite_ctl_group_clock(g);
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/nodes", .project = kite_ctl_node_members, .upsert = kite_podgc_node_upsert_feed, .del = kite_podgc_node_delete_feed},
        {.path = "/api/v1/pods", .upsert = kite_podgc_pod_upsert_feed, .del = kite_podgc_pod_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "pod-gc", .step = kite_podgc_step_core, .pending = kite_podgc_pending_core,
                                 .free = kite_podgc_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_podgc_new(&no));
}
