/* The taint eviction controller's core (tainteviction.h). Pods are indexed by node so a
 * change of a node's taints looks only at its own pods; a pod's pending deletion is its
 * timer, armed exactly while the pod is due to be evicted. */
#include "controllers/node/tainteviction.h"
#include "framework/framework.h"
#include "api/registry.h"
#include "api/scheduling.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/ctlutil.h"
#include "framework/timers.h"

#include <pthread.h>

#define LOG "taint-eviction"
#define COMPONENT "taint-eviction-controller"

struct tpod;
struct tnode {
    char *name;
    json_object *taints; /* its NoExecute taints (own array; NULL: none) */
    bool gone;           /* deleted, kept while pods still name it */
    struct tpod **pods;
    size_t npods, cap;
};

struct tpod {
    char *key, *ns, *name, *uid;
    struct tnode *node;
    size_t slot;              /* index in node->pods */
    json_object *tolerations; /* own copy */
    bool deleting;            /* has a deletionTimestamp */
    struct kite_timer timer;
    int64_t created; /* mono: when its pending deletion was first scheduled */
    int attempts;
};

struct kite_tec {
    struct kite_tec_options o;
    pthread_mutex_t lock;
    struct kite_map nodes, pods;
    struct kite_timers timers;
    struct kite_ctl_acts events;
    bool kicked;
};

struct kite_tec *kite_tec_new(const struct kite_tec_options *o) {
    struct kite_tec *t = kite_calloc(1, sizeof *t);
    t->o = *o;
    if (!t->o.clock) t->o.clock = kite_clock_real();
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

static void tnode_free(struct tnode *n) {
    json_object_put(n->taints);
    free(n->pods);
    free(n->name);
    free(n);
}

static void tpod_free(struct tpod *p) {
    json_object_put(p->tolerations);
    free(p->key);
    free(p->ns);
    free(p->name);
    free(p->uid);
    free(p);
}

void kite_tec_free(struct kite_tec *t) {
    if (!t) return;
    const char *k;
    void *v;
    kite_timers_release(&t->timers); /* writes into the armed timers, which the pods hold */
    for (size_t it = 0; kite_map_next(&t->pods, &it, &k, &v);) tpod_free(v);
    for (size_t it = 0; kite_map_next(&t->nodes, &it, &k, &v);) tnode_free(v);
    kite_map_release(&t->pods);
    kite_map_release(&t->nodes);
    kite_ctl_acts_release(&t->events);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int kite_tec_toleration_seconds(json_object *taints, json_object *tols, int64_t *ret_s) {
    size_t nt = taints ? json_object_array_length(taints) : 0;
    int64_t min = -1;
    for (size_t i = 0; i < nt; i++) {
        json_object *used = kite_tolerations_find(tols, json_object_array_get_idx(taints, i));
        if (!used) return -EPERM;
        json_object *s = kite_obj_get(used, "tolerationSeconds");
        if (!s || json_object_is_type(s, json_type_null)) continue;
        int64_t v = KITE_MAX(json_object_get_int64(s), 0);
        if (min < 0 || v < min) min = v;
    }
    *ret_s = min;
    return 0;
}

static void pod_event(struct kite_tec *t, struct tpod *p, const char *fmt) {
    _cleanup_free_ char *msg = kite_asprintf(fmt, p->ns, p->name);
    kite_ctl_event(&t->events, t->o.clock, COMPONENT, "Pod", p->ns, p->name, p->uid, "Normal", "TaintManagerEviction",
                   msg);
}

static void cancel(struct kite_tec *t, struct tpod *p) {
    if (!kite_timer_armed(&p->timer)) return;
    kite_timers_cancel(&t->timers, &p->timer);
    if (!p->deleting) pod_event(t, p, "Cancelling deletion of Pod %s/%s");
}

/* processPodOnNode: schedules, moves or cancels p's deletion from its node's taints. */
static void process(struct kite_tec *t, struct tpod *p, int64_t now) {
    json_object *taints = p->node ? p->node->taints : NULL;
    if (p->deleting || !taints) {
        cancel(t, p);
        return;
    }
    int64_t s;
    int64_t at;
    if (kite_tec_toleration_seconds(taints, p->tolerations, &s) < 0) {
        at = now; /* not tolerated: at once */
    } else if (s < 0) {
        cancel(t, p); /* tolerated for good */
        return;
    } else {
        at = kite_sat_add(kite_timer_armed(&p->timer) ? p->created : now, kite_sec_to_ns(s)); /* huge: never */
    }
    if (!kite_timer_armed(&p->timer)) p->created = now, p->attempts = 0;
    kite_timers_set(&t->timers, &p->timer, at);
    t->kicked = true;
}

static struct tnode *node_get(struct kite_tec *t, const char *name) {
    struct tnode *n = kite_map_get(&t->nodes, name);
    if (!n) {
        n = kite_calloc(1, sizeof *n);
        n->name = kite_strdup(name);
        n->gone = true; /* until the node itself is seen */
        kite_map_put(&t->nodes, name, n);
    }
    return n;
}

static void detach(struct kite_tec *t, struct tpod *p) {
    struct tnode *n = p->node;
    if (!n) return;
    n->pods[p->slot] = n->pods[--n->npods];
    n->pods[p->slot]->slot = p->slot;
    p->node = NULL;
    if (n->gone && !n->npods) {
        kite_map_del(&t->nodes, n->name);
        tnode_free(n);
    }
}

static void attach(struct kite_tec *t, struct tpod *p, const char *node) {
    struct tnode *n = node_get(t, node);
    if (n->npods == n->cap) {
        n->cap = n->cap ? n->cap * 2 : 8;
        n->pods = kite_realloc(n->pods, n->cap * sizeof *n->pods);
    }
    p->slot = n->npods;
    n->pods[n->npods++] = p;
    p->node = n;
}

static json_object *noexecute(json_object *node) {
    json_object *ts = kite_obj_get(kite_obj_get(node, "spec"), "taints"), *out = NULL;
    for (size_t i = 0; ts && json_object_is_type(ts, json_type_array) && i < json_object_array_length(ts); i++) {
        json_object *x = json_object_array_get_idx(ts, i);
        if (!kite_streq(kite_obj_str(x, "effect"), "NoExecute")) continue;
        if (!out) out = json_object_new_array();
        json_object_array_add(out, json_object_get(x));
    }
    json_object *copy = NULL;
    if (out) json_object_deep_copy(out, &copy, NULL);
    json_object_put(out);
    return copy;
}

static bool same_json(json_object *a, json_object *b) {
    if (!a || !b) return a == b;
    return json_object_equal(a, b);
}

void kite_tec_node_upsert(struct kite_tec *t, json_object *node) {
    const char *name = kite_meta_str(node, "name");
    if (!name) return;
    json_object *taints = noexecute(node);
    pthread_mutex_lock(&t->lock);
    struct tnode *n = node_get(t, name);
    n->gone = false;
    if (!same_json(n->taints, taints)) {
        json_object_put(n->taints);
        n->taints = TAKE_PTR(taints);
        int64_t now = kite_now_mono(t->o.clock);
        for (size_t i = 0; i < n->npods; i++) process(t, n->pods[i], now);
    }
    pthread_mutex_unlock(&t->lock);
    json_object_put(taints);
}

void kite_tec_node_delete(struct kite_tec *t, json_object *node) {
    const char *name = kite_meta_str(node, "name");
    if (!name) return;
    pthread_mutex_lock(&t->lock);
    struct tnode *n = kite_map_get(&t->nodes, name);
    if (n) {
        json_object_put(TAKE_PTR(n->taints));
        int64_t now = kite_now_mono(t->o.clock);
        for (size_t i = 0; i < n->npods; i++) process(t, n->pods[i], now);
        n->gone = true;
        if (!n->npods) {
            kite_map_del(&t->nodes, name);
            tnode_free(n);
        }
    }
    pthread_mutex_unlock(&t->lock);
}

static void pod_remove(struct kite_tec *t, const char *key) {
    struct tpod *p = kite_map_del(&t->pods, key);
    if (!p) return;
    kite_timers_cancel(&t->timers, &p->timer);
    detach(t, p);
    tpod_free(p);
}

void kite_tec_pod_upsert(struct kite_tec *t, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name");
    const char *node = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    if (!ns || !name) return;
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&t->lock);
    if (!node || !*node) {
        pod_remove(t, key);
        pthread_mutex_unlock(&t->lock);
        return;
    }
    struct tpod *p = kite_map_get(&t->pods, key);
    json_object *tols = kite_obj_get(kite_obj_get(pod, "spec"), "tolerations");
    bool deleting = kite_meta_str(pod, "deletionTimestamp") != NULL, changed = !p;
    if (!p) {
        p = kite_calloc(1, sizeof *p);
        p->key = kite_strdup(key);
        p->ns = kite_strdup(ns);
        p->name = kite_strdup(name);
        kite_timer_init(&p->timer);
        kite_map_put(&t->pods, key, p);
    }
    const char *uid = kite_meta_str(pod, "uid");
    if (!kite_streq(uid, p->uid)) {
        free(p->uid);
        p->uid = uid ? kite_strdup(uid) : NULL;
    }
    if (!p->node || !kite_streq(p->node->name, node)) {
        detach(t, p);
        attach(t, p, node);
        changed = true;
    }
    if (!same_json(p->tolerations, tols)) {
        json_object_put(p->tolerations);
        p->tolerations = NULL;
        if (tols) json_object_deep_copy(tols, &p->tolerations, NULL);
        changed = true;
    }
    if (deleting != p->deleting) p->deleting = deleting, changed = true;
    if (changed) process(t, p, kite_now_mono(t->o.clock));
    pthread_mutex_unlock(&t->lock);
}

void kite_tec_pod_delete(struct kite_tec *t, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name");
    if (!ns || !name) return;
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&t->lock);
    pod_remove(t, key);
    pthread_mutex_unlock(&t->lock);
}

struct due {
    char *key, *ns, *name, *uid;
};

/* addConditionAndDeletePod: the DisruptionTarget condition, then the delete (by uid, so a
 * pod recreated under the same name is not the one deleted). 0 when done or the pod is gone. */
static int evict(struct kite_tec *t, const struct due *d) {
    char now[21];
    kite_time_format(kite_now_wall(t->o.clock), now);
    json_object *p = json_object_new_object(), *c = json_object_new_object(), *conds = json_object_new_array();
    kite_obj_set(c, "type", json_object_new_string("DisruptionTarget"));
    kite_obj_set(c, "status", json_object_new_string("True"));
    kite_obj_set(c, "reason", json_object_new_string("DeletionByTaintManager"));
    kite_obj_set(c, "message", json_object_new_string("Taint manager: deleting due to NoExecute taint"));
    kite_obj_set(c, "lastTransitionTime", json_object_new_string(now));
    json_object_array_add(conds, c);
    kite_obj_set(kite_obj_ensure(p, "status"), "conditions", conds);
    _cleanup_free_ char *sp = kite_asprintf("/api/v1/namespaces/%s/pods/%s/status", d->ns, d->name);
    int e = kite_client_json(t->o.client, "PATCH", sp, "application/strategic-merge-patch+json", p, NULL, NULL);
    json_object_put(p);
    if (e == -ENOENT) return 0;
    if (e < 0) return e;
    json_object *opts = json_object_new_object();
    kite_obj_set(opts, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(opts, "kind", json_object_new_string("DeleteOptions"));
    if (d->uid) kite_obj_set(kite_obj_ensure(opts, "preconditions"), "uid", json_object_new_string(d->uid));
    _cleanup_free_ char *dp = kite_asprintf("/api/v1/namespaces/%s/pods/%s", d->ns, d->name);
    e = kite_client_json(t->o.client, "DELETE", dp, NULL, opts, NULL, NULL);
    json_object_put(opts);
    return e == -ENOENT || e == -EEXIST ? 0 : e; /* gone, or another pod now has the name (409) */
}

int64_t kite_tec_step(struct kite_tec *t) {
    struct due *due = NULL;
    size_t nd = 0;
    pthread_mutex_lock(&t->lock);
    int64_t now = kite_now_mono(t->o.clock);
    struct kite_timer *tm;
    while ((tm = kite_timers_pop_due(&t->timers, now))) {
        struct tpod *p = kite_container_of(tm, struct tpod, timer);
        pod_event(t, p, "Marking for deletion Pod %s/%s");
        due = kite_realloc(due, (nd + 1) * sizeof *due);
        due[nd++] = (struct due){kite_strdup(p->key), kite_strdup(p->ns), kite_strdup(p->name),
                                 p->uid ? kite_strdup(p->uid) : NULL};
    }
    struct kite_ctl_acts events = t->events;
    t->events = (struct kite_ctl_acts){0};
    t->kicked = false;
    pthread_mutex_unlock(&t->lock);

    kite_ctl_acts_run(t->o.client, &events, NULL, NULL);
    kite_ctl_acts_release(&events);
    for (size_t i = 0; i < nd; i++) {
        int e = evict(t, &due[i]);
        if (e < 0) {
            pthread_mutex_lock(&t->lock);
            struct tpod *p = kite_map_get(&t->pods, due[i].key);
            if (p && !kite_timer_armed(&p->timer) && ++p->attempts < KITE_TEC_RETRIES) {
                log_warn(LOG, "pod %s: cannot evict: %s (will retry)", due[i].key, strerror(-e));
                kite_timers_set(&t->timers, &p->timer, kite_now_mono(t->o.clock) + KITE_TEC_RETRY_NS);
            } else if (p) {
                log_warn(LOG, "pod %s: cannot evict: %s", due[i].key, strerror(-e));
            }
            pthread_mutex_unlock(&t->lock);
        } else {
            log_info(LOG, "pod %s: deleted for its node's NoExecute taints", due[i].key);
        }
        free(due[i].key);
        free(due[i].ns);
        free(due[i].name);
        free(due[i].uid);
    }
    free(due);
    pthread_mutex_lock(&t->lock);
    int64_t next = KITE_TEC_IDLE_NS;
    if ((tm = kite_timers_peek(&t->timers))) next = KITE_MAX(0, KITE_MIN(next, tm->at - kite_now_mono(t->o.clock)));
    pthread_mutex_unlock(&t->lock);
    return next;
}

bool kite_tec_pending(struct kite_tec *t) {
    pthread_mutex_lock(&t->lock);
    bool k = t->kicked || t->events.n;
    pthread_mutex_unlock(&t->lock);
    return k;
}

int64_t kite_tec_scheduled(struct kite_tec *t, const char *ns, const char *name) {
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    pthread_mutex_lock(&t->lock);
    struct tpod *p = kite_map_get(&t->pods, key);
    int64_t r = p && kite_timer_armed(&p->timer) ? KITE_MAX(0, p->timer.at - kite_now_mono(t->o.clock)) : -1;
    pthread_mutex_unlock(&t->lock);
    return r;
}

/* ---- on the framework: nodes and pods feed it ---- */
KITE_CTL_FEED(kite_tec_node_upsert, struct kite_tec)
KITE_CTL_FEED(kite_tec_node_delete, struct kite_tec)
KITE_CTL_FEED(kite_tec_pod_upsert, struct kite_tec)
KITE_CTL_FEED(kite_tec_pod_delete, struct kite_tec)
KITE_CTL_CORE(kite_tec, struct kite_tec)

int kite_tec_run(struct kite_ctl_group *g) {
    struct kite_tec_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/nodes", .project = kite_ctl_node_members, .upsert = kite_tec_node_upsert_feed, .del = kite_tec_node_delete_feed},
        {.path = "/api/v1/pods", .upsert = kite_tec_pod_upsert_feed, .del = kite_tec_pod_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "taint-eviction", .step = kite_tec_step_core, .pending = kite_tec_pending_core,
                                 .free = kite_tec_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_tec_new(&o));
}
