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
#include "base/slots.h"

#include <pthread.h>

#define LOG "taint-eviction"
#define COMPONENT "taint-eviction-controller"

struct tpod;
struct tnode {
    char *name;
    json_object *taints; /* its NoExecute taints (own array; NULL: none) */
    bool gone;           /* deleted, kept while pods still name it */
    struct kite_slots pods; /* struct tpod * */
};

struct tpod {
    struct kite_ctl_pod id;
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
    kite_slots_release(&n->pods);
    free(n->name);
    free(n);
}

static void tpod_free(struct tpod *p) {
    json_object_put(p->tolerations);
    kite_ctl_pod_release(&p->id);
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
    _cleanup_free_ char *msg = kite_asprintf(fmt, p->id.ns, p->id.name);
    kite_ctl_event(&t->events, t->o.clock, COMPONENT, "Pod", p->id.ns, p->id.name, p->id.uid, "Normal",
                   "TaintManagerEviction", msg);
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
    struct tpod *moved = kite_slots_remove(&n->pods, p->slot);
    if (moved) moved->slot = p->slot;
    p->node = NULL;
    if (n->gone && !n->pods.n) {
        kite_map_del(&t->nodes, n->name);
        tnode_free(n);
    }
}

static void attach(struct kite_tec *t, struct tpod *p, const char *node) {
    struct tnode *n = node_get(t, node);
    p->slot = kite_slots_add(&n->pods, p);
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
        for (size_t i = 0; i < n->pods.n; i++) process(t, n->pods.v[i], now);
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
        for (size_t i = 0; i < n->pods.n; i++) process(t, n->pods.v[i], now);
        n->gone = true;
        if (!n->pods.n) {
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
        kite_ctl_pod_init(&p->id, ns, name, NULL);
        kite_timer_init(&p->timer);
        kite_map_put(&t->pods, key, p);
    }
    kite_ctl_pod_set_uid(&p->id, kite_meta_str(pod, "uid"));
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

static void evict_failed(void *ud, const struct kite_ctl_pod *pod, int e) {
    struct kite_tec *t = ud;
    struct tpod *p = kite_map_get(&t->pods, pod->key);
    if (p && !kite_timer_armed(&p->timer) && ++p->attempts < KITE_TEC_RETRIES) {
        log_warn(LOG, "pod %s: cannot evict: %s (will retry)", pod->key, strerror(-e));
        kite_timers_set(&t->timers, &p->timer, kite_now_mono(t->o.clock) + KITE_TEC_RETRY_NS);
    } else if (p) {
        log_warn(LOG, "pod %s: cannot evict: %s", pod->key, strerror(-e));
    }
}

static void evicted(void *ud, const struct kite_ctl_pod *pod) {
    log_info(LOG, "pod %s: deleted for its node's NoExecute taints", pod->key);
}

int64_t kite_tec_step(struct kite_tec *t) {
    struct kite_ctl_pod_kill *due = NULL;
    size_t nd = 0;
    pthread_mutex_lock(&t->lock);
    int64_t now = kite_now_mono(t->o.clock);
    struct kite_timer *tm;
    while ((tm = kite_timers_pop_due(&t->timers, now))) {
        struct tpod *p = kite_container_of(tm, struct tpod, timer);
        pod_event(t, p, "Marking for deletion Pod %s/%s");
        due = kite_realloc(due, (nd + 1) * sizeof *due);
        /* addConditionAndDeletePod */
        due[nd] = (struct kite_ctl_pod_kill){.reason = "DeletionByTaintManager",
                                             .message = "Taint manager: deleting due to NoExecute taint"};
        kite_ctl_pod_copy(&due[nd++].pod, &p->id);
    }
    struct kite_ctl_acts events = t->events;
    t->events = (struct kite_ctl_acts){0};
    t->kicked = false;
    pthread_mutex_unlock(&t->lock);

    kite_ctl_acts_run(t->o.client, &events, NULL, NULL);
    kite_ctl_acts_release(&events);
    kite_ctl_pod_kills_run(t->o.client, t->o.clock, &t->lock, due, nd, evict_failed, evicted, t);
    pthread_mutex_lock(&t->lock);
    int64_t next = kite_timers_next_in(&t->timers, kite_now_mono(t->o.clock), KITE_TEC_IDLE_NS);
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
