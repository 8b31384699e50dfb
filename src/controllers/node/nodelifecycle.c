/* The node lifecycle controller's core (nodelifecycle.h). Invariants, under n->lock:
 * - a node's deadline timer is armed exactly when some of its four watched conditions is not
 *   Unknown yet; it fires at probe + grace (probe: mono time of the last renewal observed);
 * - zone counters hold the nodes seen (not excluded) and how many of them are not Ready, as
 *   last observed from the server;
 * - `want` is the NoExecute taint the controller has decided on; reconcile() makes spec.taints
 *   match it and the NoSchedule mirror of the conditions, with the resourceVersion observed as
 *   a precondition (a conflict is retried after the newer node is seen). */
#include "controllers/node/nodelifecycle.h"
#include "framework/framework.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/ctlutil.h"
#include "framework/ratelimit.h"
#include "framework/timers.h"

#include <pthread.h>
#include <stdio.h>

#define LOG "node-lifecycle"
#define COMPONENT "node-controller"
#define SMP "application/strategic-merge-patch+json"
#define T_NOT_READY "node.kubernetes.io/not-ready"
#define T_UNREACHABLE "node.kubernetes.io/unreachable"

const char *const kite_zone_state_names[] = {"Initial", "Normal", "PartialDisruption", "FullDisruption"};

enum cstat { C_NONE, C_TRUE, C_FALSE, C_UNKNOWN };
enum noexec { NX_NONE, NX_NOT_READY, NX_UNREACHABLE };
enum { ACT_STATUS, ACT_TAINTS, ACT_PODS };

/* The conditions marked Unknown when a node goes silent (NetworkUnavailable is left alone). */
static const char *const WATCHED[] = {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"};

/* Condition -> NoSchedule taint (doNoScheduleTaintingPass's nodeConditionToTaintKeyStatusMap). */
static const struct {
    const char *type, *status, *taint;
} NOSCHEDULE[] = {
    {"Ready", "False", T_NOT_READY},
    {"Ready", "Unknown", T_UNREACHABLE},
    {"MemoryPressure", "True", "node.kubernetes.io/memory-pressure"},
    {"DiskPressure", "True", "node.kubernetes.io/disk-pressure"},
    {"NetworkUnavailable", "True", "node.kubernetes.io/network-unavailable"},
    {"PIDPressure", "True", "node.kubernetes.io/pid-pressure"},
};
#define T_UNSCHEDULABLE "node.kubernetes.io/unschedulable"

struct zone {
    char *key;
    size_t total, not_ready;
    enum kite_zone_state state;
    struct kite_bucket bucket;
    struct kite_name_queue queue; /* nodes waiting for their NoExecute taint */
};

struct node {
    char *name;
    json_object *obj;  /* the node as last observed (own deep copy); NULL while only its Lease is known */
    uint64_t rv;
    struct zone *zone; /* NULL when excluded from disruption checks */
    char *hb;          /* Ready's lastHeartbeatTime as last observed (or as the controller wrote it) */
    int64_t renew;     /* the Lease's renewTime (wall ns) last observed; 0 none */
    int64_t probe;     /* mono: when a renewal was last observed */
    enum cstat ready;  /* as last observed */
    enum noexec want;
    bool pods_pending; /* its pods still to be marked not ready */
    /* from obj, kept so a renewal reads no JSON (a cache miss per lookup at scale) */
    bool markable;     /* some watched condition is not Unknown yet */
    bool started;      /* it has a Ready condition: the grace, not the startup grace */
    struct kite_timer deadline, retry;
};

struct kite_nlc {
    struct kite_nlc_options o;
    pthread_mutex_t lock;
    struct kite_map nodes; /* name -> struct node */
    struct zone **zones;
    size_t nzones;
    struct kite_timers deadlines, retries;
    struct kite_name_queue dirty, pods;
    struct kite_ctl_acts events;
    bool kicked;
};

static enum cstat cstat_of(json_object *cond) {
    const char *s = kite_obj_str(cond, "status");
    return !cond ? C_NONE : kite_streq(s, "True") ? C_TRUE : kite_streq(s, "False") ? C_FALSE : C_UNKNOWN;
}

struct kite_nlc *kite_nlc_new(const struct kite_nlc_options *o) {
    struct kite_nlc *n = kite_calloc(1, sizeof *n);
    n->o = *o;
    if (!n->o.clock) n->o.clock = kite_clock_real();
    if (n->o.period_ns <= 0) n->o.period_ns = 5 * KITE_NS_PER_SEC;
    pthread_mutex_init(&n->lock, NULL);
    return n;
}

static void zone_free(struct zone *z) {
    free(z->key);
    kite_name_queue_release(&z->queue);
    free(z);
}

static void node_free(struct kite_nlc *n, struct node *d) {
    kite_timers_cancel(&n->deadlines, &d->deadline);
    kite_timers_cancel(&n->retries, &d->retry);
    json_object_put(d->obj);
    free(d->name);
    free(d->hb);
    free(d);
}

void kite_nlc_free(struct kite_nlc *n) {
    if (!n) return;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&n->nodes, &it, &k, &v);) node_free(n, v);
    kite_map_release(&n->nodes);
    for (size_t i = 0; i < n->nzones; i++) zone_free(n->zones[i]);
    free(n->zones);
    kite_timers_release(&n->deadlines);
    kite_timers_release(&n->retries);
    kite_name_queue_release(&n->dirty);
    kite_name_queue_release(&n->pods);
    kite_ctl_acts_release(&n->events);
    pthread_mutex_destroy(&n->lock);
    free(n);
}

static double zone_rate(struct kite_nlc *n, struct zone *z, enum kite_zone_state s) {
    if (s == KITE_ZONE_PARTIAL) return (int64_t)z->total > n->o.large_cluster ? n->o.secondary_rate : 0;
    return n->o.eviction_rate;
}

static struct zone *zone_get(struct kite_nlc *n, const char *key) {
    for (size_t i = 0; i < n->nzones; i++)
        if (strcmp(n->zones[i]->key, key) == 0) return n->zones[i];
    struct zone *z = kite_calloc(1, sizeof *z);
    z->key = kite_strdup(key);
    z->state = KITE_ZONE_INITIAL;
    kite_bucket_init(&z->bucket, n->o.eviction_rate, 1, kite_now_mono(n->o.clock));
    n->zones = kite_realloc(n->zones, (n->nzones + 1) * sizeof *n->zones);
    n->zones[n->nzones++] = z;
    return z;
}

/* Kubernetes' zone key (region + ":\0:" + zone), written "region:zone"; "" without labels. */
static char *zone_key(json_object *node) {
    json_object *labels = kite_obj_get(kite_obj_get(node, "metadata"), "labels");
    const char *r = kite_obj_str(labels, KITE_NLC_REGION_LABEL), *z = kite_obj_str(labels, KITE_NLC_ZONE_LABEL);
    if ((!r || !*r) && (!z || !*z)) return kite_strdup("");
    return kite_asprintf("%s:%s", r ? r : "", z ? z : "");
}

static void count(struct node *d, int sign) {
    if (!d->obj || !d->zone) return;
    d->zone->total += (size_t)sign;
    if (d->ready != C_TRUE) d->zone->not_ready += (size_t)sign;
}

/* Some watched condition is not Unknown yet: there is something to mark at the deadline. */
static bool markable(struct node *d) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(WATCHED); i++)
        if (cstat_of(kite_ctl_condition(d->obj, WATCHED[i])) != C_UNKNOWN) return true;
    return false;
}

static void arm(struct kite_nlc *n, struct node *d) {
    if (!d->obj || !d->markable) {
        kite_timers_cancel(&n->deadlines, &d->deadline);
        return;
    }
    kite_timers_set(&n->deadlines, &d->deadline, d->probe + (d->started ? n->o.grace_ns : n->o.startup_grace_ns));
}

static void node_event(struct kite_nlc *n, struct node *d, const char *type, const char *reason, const char *msg) {
    kite_ctl_event(&n->events, n->o.clock, COMPONENT, "Node", "default", d->name, kite_meta_str(d->obj, "uid"), type,
                   reason, msg);
}

/* processTaintBaseEviction: decides the NoExecute taint from Ready. A node switching between
 * not-ready and unreachable swaps at once; a first taint waits in its zone's queue. */
static void noexec_decide(struct kite_nlc *n, struct node *d) {
    bool nr = kite_ctl_taint(d->obj, T_NOT_READY, "NoExecute"), ur = kite_ctl_taint(d->obj, T_UNREACHABLE, "NoExecute");
    switch (d->ready) {
    /* a node already carrying its taint is not queued again: it would spend a token */
    case C_FALSE:
        if (ur || nr) d->want = NX_NOT_READY;
        else if (d->zone) kite_name_queue_add(&d->zone->queue, d->name);
        break;
    case C_UNKNOWN:
        if (nr || ur) d->want = NX_UNREACHABLE;
        else if (d->zone) kite_name_queue_add(&d->zone->queue, d->name);
        break;
    case C_TRUE:
        d->want = NX_NONE;
        if (d->zone) kite_name_queue_remove(&d->zone->queue, d->name);
        break;
    case C_NONE:
        break;
    }
    (void)n;
}

static struct node *node_get(struct kite_nlc *n, const char *name) {
    struct node *d = kite_map_get(&n->nodes, name);
    if (d) return d;
    d = kite_calloc(1, sizeof *d);
    d->name = kite_strdup(name);
    kite_timer_init(&d->deadline);
    kite_timer_init(&d->retry);
    kite_map_put(&n->nodes, name, d);
    return d;
}

static void upsert_locked(struct kite_nlc *n, json_object *obj) {
    const char *name = kite_meta_str(obj, "name");
    if (!name) return;
    struct node *d = node_get(n, name);
    uint64_t rv = kite_ctl_rv(obj);
    if (d->obj && rv && rv < d->rv) return; /* older than what a write's answer showed */
    int64_t now = kite_now_mono(n->o.clock);
    bool first = !d->obj;
    json_object *ready = kite_ctl_condition(obj, "Ready");
    const char *hb = kite_obj_str(ready, "lastHeartbeatTime");
    if (first) {
        if (ready) {
            d->probe = now; /* known to the server before this controller: a fresh grace */
        } else {
            /* never posted status: the startup grace runs from its creation */
            int64_t created = 0, wall = kite_now_wall(n->o.clock);
            if (kite_time_parse(kite_meta_str(obj, "creationTimestamp") ?: "", &created) < 0 || created > wall)
                created = wall;
            int64_t p = now - (wall - created);
            if (!d->renew || p > d->probe) d->probe = p;
        }
    } else if (ready && !kite_streq(hb, d->hb)) {
        d->probe = now;
    }
    if (ready) {
        free(d->hb);
        d->hb = hb ? kite_strdup(hb) : NULL;
    }
    enum cstat was = d->ready;
    count(d, -1);
    /* the copy kept is what the controller reads: conditions, taints, unschedulable, labels */
    static const char *const members[] = {"metadata.name",   "metadata.uid", "metadata.resourceVersion",
                                          "metadata.creationTimestamp", "metadata.labels", "spec.taints",
                                          "spec.unschedulable", "status.conditions", NULL};
    json_object *copy = NULL, *cut = kite_obj_project(obj, members);
    json_object_deep_copy(cut, &copy, NULL);
    json_object_put(cut);
    json_object_put(d->obj);
    d->obj = copy;
    d->rv = rv;
    d->ready = cstat_of(ready);
    d->started = ready != NULL;
    d->markable = markable(d);
    json_object *labels = kite_obj_get(kite_obj_get(obj, "metadata"), "labels");
    _cleanup_free_ char *zk = zone_key(obj);
    struct zone *z = kite_obj_get(labels, KITE_NLC_EXCLUDE_LABEL) ? NULL : zone_get(n, zk);
    if (d->zone && d->zone != z) kite_name_queue_remove(&d->zone->queue, d->name);
    d->zone = z;
    count(d, +1);
    if (first) {
        d->want = kite_ctl_taint(copy, T_UNREACHABLE, "NoExecute") ? NX_UNREACHABLE
                  : kite_ctl_taint(copy, T_NOT_READY, "NoExecute") ? NX_NOT_READY
                                                                    : NX_NONE;
        _cleanup_free_ char *msg = kite_asprintf("Registered Node %s in Controller", d->name);
        node_event(n, d, "Normal", "RegisteredNode", msg);
    }
    if (!first && was == C_TRUE && d->ready != C_TRUE) {
        _cleanup_free_ char *msg = kite_asprintf("Node %s status is now: NodeNotReady", d->name);
        node_event(n, d, "Normal", "NodeNotReady", msg);
        d->pods_pending = true;
        kite_name_queue_add(&n->pods, d->name);
    }
    if (d->ready == C_TRUE) {
        d->pods_pending = false;
        kite_name_queue_remove(&n->pods, d->name);
    }
    noexec_decide(n, d);
    kite_name_queue_add(&n->dirty, d->name);
    arm(n, d);
    n->kicked = true;
}

void kite_nlc_node_upsert(struct kite_nlc *n, json_object *obj) {
    pthread_mutex_lock(&n->lock);
    upsert_locked(n, obj);
    pthread_mutex_unlock(&n->lock);
}

void kite_nlc_node_delete(struct kite_nlc *n, json_object *obj) {
    const char *name = kite_meta_str(obj, "name");
    if (!name) return;
    pthread_mutex_lock(&n->lock);
    struct node *d = kite_map_get(&n->nodes, name);
    if (d && d->obj) {
        _cleanup_free_ char *msg = kite_asprintf("Removing Node %s from Controller", name);
        node_event(n, d, "Normal", "RemovingNode", msg);
        count(d, -1);
        if (d->zone) kite_name_queue_remove(&d->zone->queue, name);
        kite_name_queue_remove(&n->dirty, name);
        kite_name_queue_remove(&n->pods, name);
        kite_map_del(&n->nodes, name);
        node_free(n, d);
        n->kicked = true;
    }
    pthread_mutex_unlock(&n->lock);
}

void kite_nlc_lease_upsert(struct kite_nlc *n, json_object *lease) {
    const char *name = kite_meta_str(lease, "name"), *rt = kite_obj_str(kite_obj_get(lease, "spec"), "renewTime");
    int64_t renew;
    if (!name || !rt || kite_time_parse(rt, &renew) < 0) return;
    pthread_mutex_lock(&n->lock);
    struct node *d = node_get(n, name);
    if (renew > d->renew) { /* a newer renewal, as the lease's holder tells time: alive now, on our clock */
        d->renew = renew;
        d->probe = kite_now_mono(n->o.clock);
        arm(n, d);
    }
    pthread_mutex_unlock(&n->lock);
}

void kite_nlc_pod_upsert(struct kite_nlc *n, json_object *pod) {
    const char *node = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    if (!node || !*node || cstat_of(kite_ctl_condition(pod, "Ready")) != C_TRUE) return;
    pthread_mutex_lock(&n->lock);
    struct node *d = kite_map_get(&n->nodes, node);
    if (d && d->obj && d->ready != C_TRUE && d->ready != C_NONE) {
        d->pods_pending = true;
        kite_name_queue_add(&n->pods, d->name);
        n->kicked = true;
    }
    pthread_mutex_unlock(&n->lock);
}

/* The status patch marking d's silent conditions Unknown (tryUpdateNodeHealth), or NULL. */
static json_object *mark(struct kite_nlc *n, struct node *d) {
    char now[21];
    kite_time_format(kite_now_wall(n->o.clock), now);
    const char *created = kite_meta_str(d->obj, "creationTimestamp");
    json_object *conds = json_object_new_array();
    for (size_t i = 0; i < KITE_ARRAY_SIZE(WATCHED); i++) {
        json_object *c = kite_ctl_condition(d->obj, WATCHED[i]), *m = json_object_new_object();
        if (c && cstat_of(c) == C_UNKNOWN) {
            json_object_put(m);
            continue;
        }
        const char *hb = c ? kite_obj_str(c, "lastHeartbeatTime") : created;
        kite_obj_set(m, "type", json_object_new_string(WATCHED[i]));
        kite_obj_set(m, "status", json_object_new_string("Unknown"));
        kite_obj_set(m, "reason", json_object_new_string(c ? "NodeStatusUnknown" : "NodeStatusNeverUpdated"));
        kite_obj_set(m, "message",
                     json_object_new_string(c ? "Kubelet stopped posting node status." : "Kubelet never posted node status."));
        if (hb) kite_obj_set(m, "lastHeartbeatTime", json_object_new_string(hb));
        kite_obj_set(m, "lastTransitionTime", json_object_new_string(now));
        json_object_array_add(conds, m);
        /* the heartbeat written for a Ready never posted is ours, not a sign of life */
        if (!c && strcmp(WATCHED[i], "Ready") == 0) {
            free(d->hb);
            d->hb = hb ? kite_strdup(hb) : NULL;
        }
    }
    if (json_object_array_length(conds) == 0) {
        json_object_put(conds);
        return NULL;
    }
    json_object *p = json_object_new_object();
    kite_obj_set(kite_obj_ensure(p, "metadata"), "resourceVersion", json_object_new_string(kite_meta_str(d->obj, "resourceVersion") ?: ""));
    kite_obj_set(kite_obj_ensure(p, "status"), "conditions", conds);
    return p;
}

static bool managed(json_object *t) {
    const char *key = kite_obj_str(t, "key"), *effect = kite_obj_str(t, "effect");
    if (kite_streq(effect, "NoExecute")) return kite_streq(key, T_NOT_READY) || kite_streq(key, T_UNREACHABLE);
    if (!kite_streq(effect, "NoSchedule")) return false;
    if (kite_streq(key, T_UNSCHEDULABLE)) return true;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(NOSCHEDULE); i++)
        if (kite_streq(key, NOSCHEDULE[i].taint)) return true;
    return false;
}

/* The taint patch making d's controller taints what its conditions and `want` say, or NULL
 * when they already are. Other taints are kept as they are, in their order. */
static json_object *reconcile(struct kite_nlc *n, struct node *d) {
    const char *want[KITE_ARRAY_SIZE(NOSCHEDULE) + 2][2];
    size_t nw = 0;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(NOSCHEDULE); i++)
        if (kite_streq(kite_obj_str(kite_ctl_condition(d->obj, NOSCHEDULE[i].type), "status"), NOSCHEDULE[i].status))
            want[nw][0] = NOSCHEDULE[i].taint, want[nw++][1] = "NoSchedule";
    json_object *u = kite_obj_get(kite_obj_get(d->obj, "spec"), "unschedulable");
    if (u && json_object_get_boolean(u)) want[nw][0] = T_UNSCHEDULABLE, want[nw++][1] = "NoSchedule";
    if (d->want != NX_NONE) want[nw][0] = d->want == NX_NOT_READY ? T_NOT_READY : T_UNREACHABLE, want[nw++][1] = "NoExecute";

    json_object *old = kite_obj_get(kite_obj_get(d->obj, "spec"), "taints"), *taints = json_object_new_array();
    bool have[KITE_ARRAY_SIZE(want)] = {0}, changed = false;
    for (size_t i = 0; old && json_object_is_type(old, json_type_array) && i < json_object_array_length(old); i++) {
        json_object *t = json_object_array_get_idx(old, i);
        bool keep = !managed(t);
        for (size_t w = 0; !keep && w < nw; w++)
            if (kite_streq(kite_obj_str(t, "key"), want[w][0]) && kite_streq(kite_obj_str(t, "effect"), want[w][1]))
                keep = have[w] = true;
        if (keep) json_object_array_add(taints, json_object_get(t));
        else changed = true;
    }
    char now[21];
    kite_time_format(kite_now_wall(n->o.clock), now);
    for (size_t w = 0; w < nw; w++) {
        if (have[w]) continue;
        json_object *t = json_object_new_object();
        kite_obj_set(t, "key", json_object_new_string(want[w][0]));
        kite_obj_set(t, "effect", json_object_new_string(want[w][1]));
        kite_obj_set(t, "timeAdded", json_object_new_string(now));
        json_object_array_add(taints, t);
        changed = true;
    }
    if (!changed) {
        json_object_put(taints);
        return NULL;
    }
    json_object *p = json_object_new_object();
    kite_obj_set(kite_obj_ensure(p, "metadata"), "resourceVersion", json_object_new_string(kite_meta_str(d->obj, "resourceVersion") ?: ""));
    kite_obj_set(kite_obj_ensure(p, "spec"), "taints", taints);
    return p;
}

static enum kite_zone_state zone_compute(struct kite_nlc *n, struct zone *z) {
    size_t ready = z->total - z->not_ready;
    if (ready == 0 && z->not_ready > 0) return KITE_ZONE_FULL;
    if (z->not_ready > 2 && (double)z->not_ready / (double)z->total >= n->o.unhealthy_threshold) return KITE_ZONE_PARTIAL;
    return KITE_ZONE_NORMAL;
}

/* handleDisruption: zone states and their queues' rates; every zone fully disrupted stops
 * NoExecute tainting and takes those taints off (this controller's own view is more likely
 * wrong than every node at once); leaving that mode gives every node a fresh grace. */
static void disruption(struct kite_nlc *n, int64_t now) {
    bool all_are = true, all_were = true, any = false;
    enum kite_zone_state next[n->nzones ? n->nzones : 1];
    for (size_t i = 0; i < n->nzones; i++) {
        struct zone *z = n->zones[i];
        if (!z->total) {
            z->state = KITE_ZONE_INITIAL; /* no nodes left: forgotten, as Kubernetes deletes it */
            continue;
        }
        any = true;
        next[i] = zone_compute(n, z);
        if (next[i] != KITE_ZONE_FULL) all_are = false;
        if (z->state != KITE_ZONE_FULL) all_were = false;
    }
    if (!any || (all_are && all_were)) return;
    const char *k;
    void *v;
    if (all_are) {
        log_warn(LOG, "every node is not Ready: entering master disruption mode (no NoExecute taints)");
        for (size_t it = 0; kite_map_next(&n->nodes, &it, &k, &v);) {
            struct node *d = v;
            if (!d->obj) continue;
            d->want = NX_NONE;
            if (d->zone) kite_name_queue_remove(&d->zone->queue, d->name);
            kite_name_queue_add(&n->dirty, d->name);
        }
        for (size_t i = 0; i < n->nzones; i++)
            if (n->zones[i]->total) {
                kite_bucket_set_rate(&n->zones[i]->bucket, 0, now);
                n->zones[i]->state = KITE_ZONE_FULL;
            }
        return;
    }
    if (all_were) {
        log_info(LOG, "some nodes are Ready: leaving master disruption mode");
        for (size_t it = 0; kite_map_next(&n->nodes, &it, &k, &v);) {
            struct node *d = v;
            d->probe = now;
            arm(n, d);
            if (d->obj) noexec_decide(n, d);
        }
        for (size_t i = 0; i < n->nzones; i++)
            if (n->zones[i]->total) {
                kite_bucket_set_rate(&n->zones[i]->bucket, zone_rate(n, n->zones[i], next[i]), now);
                n->zones[i]->state = next[i];
            }
        return;
    }
    for (size_t i = 0; i < n->nzones; i++) {
        struct zone *z = n->zones[i];
        if (!z->total || z->state == next[i]) continue;
        log_info(LOG, "zone \"%s\": %s -> %s (%zu of %zu nodes not Ready)", z->key, kite_zone_state_names[z->state],
                 kite_zone_state_names[next[i]], z->not_ready, z->total);
        kite_bucket_set_rate(&z->bucket, zone_rate(n, z, next[i]), now);
        z->state = next[i];
    }
}

static void retry_later(struct kite_nlc *n, struct node *d, int64_t now) {
    kite_timers_set(&n->retries, &d->retry, now + KITE_NLC_RETRY_NS);
}

static void mark_pods(struct kite_nlc *n, const char *node, struct kite_ctl_acts *events, bool *failed) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", node);
    json_object *list = NULL;
    if (kite_client_json(n->o.client, "GET", path, NULL, NULL, NULL, &list) < 0) {
        json_object_put(list);
        *failed = true;
        return;
    }
    char now[21];
    kite_time_format(kite_now_wall(n->o.clock), now);
    json_object *items = kite_obj_get(list, "items");
    for (size_t i = 0; items && i < json_object_array_length(items); i++) {
        json_object *pod = json_object_array_get_idx(items, i), *ready = kite_ctl_condition(pod, "Ready");
        if (!ready || cstat_of(ready) == C_FALSE || !kite_streq(kite_obj_str(kite_obj_get(pod, "spec"), "nodeName"), node))
            continue;
        const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name");
        json_object *p = json_object_new_object(), *c = json_object_new_object(), *conds = json_object_new_array();
        kite_obj_set(kite_obj_ensure(p, "metadata"), "resourceVersion", json_object_new_string(kite_meta_str(pod, "resourceVersion") ?: ""));
        kite_obj_set(c, "type", json_object_new_string("Ready"));
        kite_obj_set(c, "status", json_object_new_string("False"));
        kite_obj_set(c, "lastTransitionTime", json_object_new_string(now));
        json_object_array_add(conds, c);
        kite_obj_set(kite_obj_ensure(p, "status"), "conditions", conds);
        _cleanup_free_ char *pp = kite_asprintf("/api/v1/namespaces/%s/pods/%s/status", ns, name);
        int e = kite_client_json(n->o.client, "PATCH", pp, SMP, p, NULL, NULL);
        json_object_put(p);
        if (e == -ENOENT) continue;
        if (e < 0) {
            log_warn(LOG, "pod %s/%s on node %s: cannot set Ready=False: %s", ns, name, node, strerror(-e));
            *failed = true;
            continue;
        }
        kite_ctl_event(events, n->o.clock, COMPONENT, "Pod", ns, name, kite_meta_str(pod, "uid"), "Warning",
                       "NodeNotReady", "Node is not ready");
    }
    json_object_put(list);
}

static void outcome(void *ud, const struct kite_ctl_act *a, int e, json_object *answer) {
    struct kite_nlc *n = ud;
    if (e == 0 && answer) {
        kite_nlc_node_upsert(n, answer);
        return;
    }
    if (e == 0) return;
    if (e != -EEXIST) log_warn(LOG, "node %s: %s %s: %s (will retry)", a->key, a->method, a->path, strerror(-e));
    pthread_mutex_lock(&n->lock);
    struct node *d = kite_map_get(&n->nodes, a->key);
    int64_t now = kite_now_mono(n->o.clock);
    if (d && a->kind == ACT_STATUS) kite_timers_set(&n->deadlines, &d->deadline, now + KITE_NLC_RETRY_NS);
    else if (d) retry_later(n, d, now);
    pthread_mutex_unlock(&n->lock);
}

/* A node's deadline has come due since this step began. The step's slow tail (its nodes' pods,
 * events: a request each, and a start-up has one RegisteredNode per node) then waits for the next
 * step, so that a node is marked within a request (a round of events) of its deadline, not after
 * all of them. */
static bool deadline_due(struct kite_nlc *n) {
    pthread_mutex_lock(&n->lock);
    struct kite_timer *t = kite_timers_peek(&n->deadlines);
    bool due = t && t->at <= kite_now_mono(n->o.clock);
    pthread_mutex_unlock(&n->lock);
    return due;
}

/* Events posted at once between two looks at the deadlines: a round of requests per worker. */
#define EVENT_ROUND (KITE_CTL_WORKERS * 4)

/* Posts events, KITE_CTL_WORKERS at once (a start-up has one RegisteredNode per node: 92,000 of
 * them one at a time took minutes), a round at a time until a deadline comes due (one round at
 * least); the rest go back in front of those queued meanwhile. Returns whether some were put off. */
static bool post_events(struct kite_nlc *n, struct kite_ctl_acts *events) {
    size_t done = 0;
    while (done < events->n && !(done && deadline_due(n))) {
        struct kite_ctl_acts round = {.v = &events->v[done], .n = KITE_MIN((size_t)EVENT_ROUND, events->n - done)};
        kite_ctl_acts_run_parallel(n->o.client, &round, KITE_CTL_WORKERS, NULL, NULL);
        done += round.n;
    }
    if (done == events->n) return false;
    struct kite_ctl_acts rest = {.n = events->n - done, .cap = events->n - done};
    rest.v = kite_calloc(rest.cap, sizeof *rest.v);
    memcpy(rest.v, events->v + done, rest.n * sizeof *rest.v);
    pthread_mutex_lock(&n->lock);
    kite_ctl_acts_move(&rest, &n->events);
    n->events = rest;
    pthread_mutex_unlock(&n->lock);
    events->n = done; /* the rest are n->events' now */
    return true;
}

int64_t kite_nlc_step(struct kite_nlc *n) {
    struct kite_ctl_acts marks = {0}, acts = {0};
    char **pod_nodes = NULL;
    size_t npod = 0;
    pthread_mutex_lock(&n->lock);
    int64_t now = kite_now_mono(n->o.clock);
    struct kite_timer *t;
    while ((t = kite_timers_pop_due(&n->deadlines, now))) {
        struct node *d = kite_container_of(t, struct node, deadline);
        json_object *p = mark(n, d);
        if (p) {
            log_info(LOG, "node %s: no renewal seen for %.1f s: marking it Unknown", d->name,
                     (double)(now - d->probe) / (double)KITE_NS_PER_SEC);
            _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s/status", d->name);
            kite_ctl_acts_add(&marks, ACT_STATUS, d->name, "PATCH", path, SMP, p);
        }
    }
    while ((t = kite_timers_pop_due(&n->retries, now))) {
        struct node *d = kite_container_of(t, struct node, retry);
        kite_name_queue_add(&n->dirty, d->name);
        if (d->pods_pending) kite_name_queue_add(&n->pods, d->name);
    }
    disruption(n, now);
    int64_t next = n->o.period_ns;
    for (size_t i = 0; i < n->nzones; i++) {
        struct zone *z = n->zones[i];
        const char *name;
        while ((name = kite_name_queue_peek(&z->queue)) && kite_bucket_try(&z->bucket, now)) {
            struct node *d = kite_map_get(&n->nodes, name);
            if (d && d->ready == C_FALSE) d->want = NX_NOT_READY;
            if (d && d->ready == C_UNKNOWN) d->want = NX_UNREACHABLE;
            if (d) kite_name_queue_add(&n->dirty, d->name);
            kite_name_queue_pop(&z->queue);
        }
        if (kite_name_queue_peek(&z->queue)) next = KITE_MIN(next, kite_bucket_wait(&z->bucket, now));
    }
    const char *name;
    while ((name = kite_name_queue_peek(&n->dirty))) {
        struct node *d = kite_map_get(&n->nodes, name);
        json_object *p = d && d->obj ? reconcile(n, d) : NULL;
        if (p) {
            _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s", d->name);
            kite_ctl_acts_add(&acts, ACT_TAINTS, d->name, "PATCH", path, SMP, p);
        }
        kite_name_queue_pop(&n->dirty);
    }
    while ((name = kite_name_queue_peek(&n->pods))) {
        struct node *d = kite_map_get(&n->nodes, name);
        if (d && d->pods_pending && d->ready != C_TRUE) {
            d->pods_pending = false;
            pod_nodes = kite_realloc(pod_nodes, (npod + 1) * sizeof *pod_nodes);
            pod_nodes[npod++] = kite_strdup(name);
        }
        kite_name_queue_pop(&n->pods);
    }
    struct kite_ctl_acts events = n->events;
    n->events = (struct kite_ctl_acts){0};
    if ((t = kite_timers_peek(&n->deadlines))) next = KITE_MIN(next, t->at - now);
    if ((t = kite_timers_peek(&n->retries))) next = KITE_MIN(next, t->at - now);
    n->kicked = false;
    pthread_mutex_unlock(&n->lock);

    /* the marks first, then the taints: each node's requests of one kind at once, as Kubernetes'
     * workers make them (a node's mark and its taints never race) */
    kite_ctl_acts_run_parallel(n->o.client, &marks, KITE_CTL_WORKERS, outcome, n);
    kite_ctl_acts_run_parallel(n->o.client, &acts, KITE_CTL_WORKERS, outcome, n);
    for (size_t i = 0; i < npod; i++) {
        if (i && deadline_due(n)) { /* the others' pods in the next step */
            pthread_mutex_lock(&n->lock);
            for (; i < npod; i++) {
                struct node *d = kite_map_get(&n->nodes, pod_nodes[i]);
                if (d && d->ready != C_TRUE) {
                    d->pods_pending = true;
                    kite_name_queue_add(&n->pods, d->name);
                }
                free(pod_nodes[i]);
            }
            pthread_mutex_unlock(&n->lock);
            next = 0;
            break;
        }
        bool failed = false;
        mark_pods(n, pod_nodes[i], &events, &failed);
        if (failed) {
            pthread_mutex_lock(&n->lock);
            struct node *d = kite_map_get(&n->nodes, pod_nodes[i]);
            if (d && d->ready != C_TRUE) {
                d->pods_pending = true;
                retry_later(n, d, kite_now_mono(n->o.clock));
                next = KITE_MIN(next, KITE_NLC_RETRY_NS);
            }
            pthread_mutex_unlock(&n->lock);
        }
        free(pod_nodes[i]);
    }
    free(pod_nodes);
    if (post_events(n, &events)) next = 0;
    kite_ctl_acts_release(&marks);
    kite_ctl_acts_release(&acts);
    kite_ctl_acts_release(&events);
    return KITE_MAX(next, 0);
}

bool kite_nlc_pending(struct kite_nlc *n) {
    pthread_mutex_lock(&n->lock);
    bool k = n->kicked;
    pthread_mutex_unlock(&n->lock);
    return k;
}

int kite_nlc_zone(struct kite_nlc *n, const char *key, enum kite_zone_state *ret_state, double *ret_rate,
                  size_t *ret_queued) {
    int r = -ENOENT;
    pthread_mutex_lock(&n->lock);
    for (size_t i = 0; i < n->nzones; i++) {
        struct zone *z = n->zones[i];
        if (strcmp(z->key, key) != 0) continue;
        if (ret_state) *ret_state = z->state;
        if (ret_rate) *ret_rate = z->bucket.rate;
        if (ret_queued) *ret_queued = kite_name_queue_len(&z->queue);
        r = 0;
    }
    pthread_mutex_unlock(&n->lock);
    return r;
}

/* ---- on the framework: nodes, their Leases and pods feed it ---- */
KITE_CTL_FEED(kite_nlc_node_upsert, struct kite_nlc)
KITE_CTL_FEED(kite_nlc_node_delete, struct kite_nlc)
KITE_CTL_FEED(kite_nlc_lease_upsert, struct kite_nlc)
KITE_CTL_FEED(kite_nlc_pod_upsert, struct kite_nlc)
KITE_CTL_CORE(kite_nlc, struct kite_nlc)

int kite_nlc_run(struct kite_ctl_group *g, const struct kite_nlc_options *o) {
    struct kite_nlc_options no = *o;
    no.client = kite_ctl_group_client(g), no.clock = kite_ctl_group_clock(g);
    /* a renewal is read for its holder's name and renewTime alone: at 10,000 nodes, 1,000
     * renewals a second, a full parse of each was the controller-manager's largest cost */
    static const char *const lease_members[] = {"spec.renewTime", NULL};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/nodes", .project = kite_ctl_node_members, .upsert = kite_nlc_node_upsert_feed, .del = kite_nlc_node_delete_feed},
        /* a renewal only moves a deadline later: the runner need not wake for it */
        {.path = KITE_NODE_LEASES_PATH, .upsert = kite_nlc_lease_upsert_feed, .quiet = true, .project = lease_members},
        {.path = "/api/v1/pods", .upsert = kite_nlc_pod_upsert_feed},
    };
    struct kite_ctl_spec spec = {.name = "node-lifecycle", .step = kite_nlc_step_core, .pending = kite_nlc_pending_core,
                                 .free = kite_nlc_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_nlc_new(&no));
}
