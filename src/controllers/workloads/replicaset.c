/* The ReplicaSet controller's core (replicaset.h). */
#include "controllers/workloads/replicaset.h"
#include "framework/framework.h"
#include "api/registry.h"
#include "base/log.h"
#include "controllers/controllers.h"
#include "framework/ctlutil.h"
#include "framework/workqueue.h"
#include "controllers/workloads/wlutil.h"

#include <pthread.h>
#include <stdlib.h>

#define LOG "replicaset"

const struct kite_rsc_kind KITE_RSC_REPLICASET = {"apps/v1", "ReplicaSet", "/apis/apps/v1", "replicasets",
                                                  "replicaset-controller", false};
const struct kite_rsc_kind KITE_RSC_REPLICATIONCONTROLLER = {"v1", "ReplicationController", "/api/v1",
                                                             "replicationcontrollers", "replication-controller", true};

enum { ACT_CREATE, ACT_DELETE, ACT_ADOPT, ACT_STATUS };

struct expect {
    int64_t add;          /* creates asked for and not yet seen */
    struct kite_map dels; /* pod keys asked to be deleted and not yet seen going */
    int64_t at;           /* mono: when set */
};

struct kite_rsc {
    struct kite_rsc_options o;
    pthread_mutex_t lock;
    struct kite_wl_cache pods, rss;
    /* the pods by their controller's uid (uid -> struct kite_map of pod keys) and those with no
     * controller: a sync looks at its own pods and the orphans, not at every pod */
    struct kite_map by_owner, orphans;
    struct kite_map exp; /* rs key -> struct expect */
    struct kite_wq q;
    struct kite_ctl_keyed k;
};

static void plan(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns);
static bool heard(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events);

struct kite_rsc *kite_rsc_new(const struct kite_rsc_options *o) {
    struct kite_rsc *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    if (!c->o.clock) c->o.clock = kite_clock_real();
    if (!c->o.kind) c->o.kind = &KITE_RSC_REPLICASET;
    c->q.backoff_max_ns = KITE_RSC_RETRY_MAX_NS;
    pthread_mutex_init(&c->lock, NULL);
    c->k = (struct kite_ctl_keyed){.lock = &c->lock, .wq = &c->q, .clock = c->o.clock, .client = c->o.client, .ud = c,
                                   .plan = plan, .heard = heard, .workers = KITE_CTL_WORKERS};
    return c;
}

static void expect_free(struct expect *e) {
    if (!e) return;
    kite_map_release(&e->dels);
    free(e);
}

void kite_rsc_free(struct kite_rsc *c) {
    if (!c) return;
    kite_wl_cache_release(&c->pods);
    kite_wl_cache_release(&c->rss);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->by_owner, &i, &k, &v);) {
        kite_map_release(v);
        free(v);
    }
    kite_map_release(&c->by_owner);
    kite_map_release(&c->orphans);
    for (size_t i = 0; kite_map_next(&c->exp, &i, &k, &v);) expect_free(v);
    kite_map_release(&c->exp);
    kite_wq_release(&c->q);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void enqueue(struct kite_rsc *c, const char *key) { kite_wq_add(&c->q, key, kite_now_mono(c->o.clock)); }

/* Whether the owner's spec.selector (a LabelSelector, or a map for map_selector kinds) selects
 * labels. */
static bool selects(struct kite_rsc *c, json_object *owner, json_object *labels) {
    json_object *sel = kite_obj_get(kite_obj_get(owner, "spec"), "selector");
    if (!c->o.kind->map_selector) return kite_label_selector_json_matches(sel, labels);
    if (!sel || !json_object_is_type(sel, json_type_object) || json_object_object_length(sel) == 0) return false;
    json_object_object_foreach(sel, k, v) {
        const char *have = kite_obj_str(labels, k);
        if (!have || !kite_streq(have, json_object_get_string(v))) return false;
    }
    return true;
}

/* The owner key a pod's controller reference names, or NULL (malloc'ed). */
static char *owner_key(struct kite_rsc *c, json_object *pod) {
    return kite_wl_controller_key(pod, c->o.kind->api_version, c->o.kind->kind);
}

static void observe_delete(struct kite_rsc *c, const char *rs_key, json_object *pod) {
    struct expect *e = kite_map_get(&c->exp, rs_key);
    if (!e) return;
    _cleanup_free_ char *pk = kite_wl_key(kite_meta_str(pod, "namespace"), kite_meta_str(pod, "name"));
    kite_map_del(&e->dels, pk);
}

/* An orphan pod may be adopted by any ReplicaSet of its namespace that selects it. */
static void enqueue_selecting(struct kite_rsc *c, json_object *pod) {
    const char *ns = kite_meta_str(pod, "namespace");
    json_object *labels = kite_obj_get(kite_obj_meta(pod), "labels");
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->rss.m, &i, &k, &v);)
        if (kite_streq(kite_meta_str(v, "namespace"), ns) && selects(c, v, labels))
            enqueue(c, k);
}

/* Files pod (key) under its controller's uid, or with the orphans; drop: takes it out. */
static void index_pod(struct kite_rsc *c, const char *key, json_object *pod, bool drop) {
    const char *uid = kite_obj_str(kite_wl_controller_ref(pod), "uid");
    if (!uid) {
        if (drop) kite_map_del(&c->orphans, key);
        else kite_map_put(&c->orphans, key, (void *)1);
        return;
    }
    struct kite_map *set = kite_map_get(&c->by_owner, uid);
    if (!set && drop) return;
    if (!set) {
        set = kite_calloc(1, sizeof *set);
        kite_map_put(&c->by_owner, uid, set);
    }
    if (!drop) {
        kite_map_put(set, key, (void *)1);
    } else {
        kite_map_del(set, key);
        if (!set->len) {
            kite_map_release(set);
            free(kite_map_del(&c->by_owner, uid));
        }
    }
}

void kite_rsc_pod_upsert(struct kite_rsc *c, json_object *pod) {
    pthread_mutex_lock(&c->lock);
    _cleanup_free_ char *pkey = kite_wl_key(kite_meta_str(pod, "namespace"), kite_meta_str(pod, "name"));
    json_object *old = kite_wl_cache_put_cut(&c->pods, pod, kite_wl_pod_members);
    if (!old || !kite_streq(kite_obj_str(kite_wl_controller_ref(old), "uid"),
                            kite_obj_str(kite_wl_controller_ref(pod), "uid"))) { /* filed anew */
        if (old) index_pod(c, pkey, old, true);
        index_pod(c, pkey, pod, false);
    }
    _cleanup_free_ char *key = owner_key(c, pod);
    if (key) {
        struct expect *e = kite_map_get(&c->exp, key);
        if (e && !old && e->add > 0) e->add--;
        if (kite_wl_deleting(pod)) observe_delete(c, key, pod);
        enqueue(c, key);
    } else if (!kite_wl_controller_ref(pod)) {
        enqueue_selecting(c, pod);
    }
    if (old) {
        _cleanup_free_ char *okey = owner_key(c, old);
        if (okey && (!key || strcmp(okey, key) != 0)) enqueue(c, okey);
        json_object_put(old);
    }
    pthread_mutex_unlock(&c->lock);
}

void kite_rsc_pod_delete(struct kite_rsc *c, json_object *pod) {
    pthread_mutex_lock(&c->lock);
    json_object *had = kite_wl_cache_del(&c->pods, pod);
    if (had) {
        _cleanup_free_ char *pkey = kite_wl_key(kite_meta_str(had, "namespace"), kite_meta_str(had, "name"));
        index_pod(c, pkey, had, true);
    }
    json_object_put(had);
    _cleanup_free_ char *key = owner_key(c, pod);
    if (key) {
        observe_delete(c, key, pod);
        enqueue(c, key);
    }
    pthread_mutex_unlock(&c->lock);
}

void kite_rsc_rs_upsert(struct kite_rsc *c, json_object *rs) {
    pthread_mutex_lock(&c->lock);
    json_object_put(kite_wl_cache_put(&c->rss, rs));
    _cleanup_free_ char *key = kite_wl_key(kite_meta_str(rs, "namespace"), kite_meta_str(rs, "name"));
    enqueue(c, key);
    pthread_mutex_unlock(&c->lock);
}

void kite_rsc_rs_delete(struct kite_rsc *c, json_object *rs) {
    pthread_mutex_lock(&c->lock);
    json_object_put(kite_wl_cache_del(&c->rss, rs));
    _cleanup_free_ char *key = kite_wl_key(kite_meta_str(rs, "namespace"), kite_meta_str(rs, "name"));
    expect_free(kite_map_del(&c->exp, key));
    kite_wq_forget(&c->q, key);
    pthread_mutex_unlock(&c->lock);
}

/* ---- ranking (controller.ActivePodsWithRanks) ---- */

struct ranked {
    json_object *pod;
    int64_t rank; /* active pods of the same ReplicaSet on its node */
};

static int phase_ordinal(json_object *pod) {
    const char *p = kite_obj_str(kite_obj_get(pod, "status"), "phase");
    return kite_streq(p, "Pending") ? 0 : kite_streq(p, "Unknown") ? 1 : kite_streq(p, "Running") ? 2 : 0;
}

static int64_t restarts(json_object *pod) {
    int64_t max = 0;
    json_object *cs = kite_obj_get(kite_obj_get(pod, "status"), "containerStatuses");
    for (size_t i = 0; cs && json_object_is_type(cs, json_type_array) && i < json_object_array_length(cs); i++)
    {
        json_object *rc = kite_obj_get(json_object_array_get_idx(cs, i), "restartCount");
        if (rc && json_object_is_type(rc, json_type_int)) max = KITE_MAX(max, json_object_get_int64(rc));
    }
    return max;
}

static int64_t created(json_object *pod) {
    int64_t t = 0;
    const char *s = kite_meta_str(pod, "creationTimestamp");
    if (s) kite_time_parse(s, &t);
    return t;
}

static const char *node_of(json_object *pod) {
    const char *n = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    return n ? n : "";
}

#define FIRST(cond_a, cond_b) \
    do {                      \
        if ((cond_a) != (cond_b)) return (cond_a) ? -1 : 1; \
    } while (0)

static int rank_cmp(const void *pa, const void *pb) {
    const struct ranked *ra = pa, *rb = pb;
    json_object *a = ra->pod, *b = rb->pod;
    const char *na = node_of(a), *nb = node_of(b);
    FIRST(!*na, !*nb);                                   /* unscheduled first */
    int oa = phase_ordinal(a), ob = phase_ordinal(b);
    if (oa != ob) return oa < ob ? -1 : 1;               /* pending < unknown < running */
    int64_t ta = 0, tb = 0;
    bool ya = kite_wl_pod_ready(a, &ta), yb = kite_wl_pod_ready(b, &tb);
    FIRST(!ya, !yb);                                     /* not ready first */
    if (ra->rank != rb->rank) return ra->rank > rb->rank ? -1 : 1; /* more crowded node first */
    if (ya && yb && ta != tb) return ta > tb ? -1 : 1;   /* ready more recently first */
    int64_t xa = restarts(a), xb = restarts(b);
    if (xa != xb) return xa > xb ? -1 : 1;               /* more restarts first */
    int64_t ca = created(a), cb = created(b);
    if (ca != cb) return ca > cb ? -1 : 1;               /* newer first */
    return strcmp(kite_meta_str(a, "name") ? kite_meta_str(a, "name") : "", kite_meta_str(b, "name") ? kite_meta_str(b, "name") : "");
}

void kite_rsc_rank(json_object **pods, size_t n) {
    if (!n) return;
    struct ranked *r = kite_calloc(n, sizeof *r);
    for (size_t i = 0; i < n; i++) {
        r[i].pod = pods[i];
        for (size_t j = 0; j < n; j++)
            if (*node_of(pods[i]) && kite_streq(node_of(pods[i]), node_of(pods[j]))) r[i].rank++;
    }
    qsort(r, n, sizeof *r, rank_cmp);
    for (size_t i = 0; i < n; i++) pods[i] = r[i].pod;
    free(r);
}

/* ---- sync (syncReplicaSet) ---- */

static bool expectations_met(struct kite_rsc *c, const char *key) {
    struct expect *e = kite_map_get(&c->exp, key);
    if (!e) return true;
    if ((e->add <= 0 && e->dels.len == 0) ||
        kite_now_mono(c->o.clock) - e->at > (int64_t)KITE_RSC_EXPECTATIONS_TTL_S * KITE_NS_PER_SEC) {
        expect_free(kite_map_del(&c->exp, key));
        return true;
    }
    return false;
}

static struct expect *expect_set(struct kite_rsc *c, const char *key) {
    struct expect *e = kite_map_get(&c->exp, key);
    if (!e) {
        e = kite_calloc(1, sizeof *e);
        kite_map_put(&c->exp, key, e);
    }
    e->at = kite_now_mono(c->o.clock);
    return e;
}

static json_object *pod_from_template(struct kite_rsc *c, json_object *rs) {
    return kite_wl_pod_from_template(kite_obj_get(kite_obj_get(rs, "spec"), "template"), rs, c->o.kind->api_version,
                                     c->o.kind->kind, NULL);
}

/* A strategic merge patch releasing pod from the controller with uid. */
static json_object *release_patch(json_object *pod, const char *uid) {
    json_object *d = json_object_new_object();
    kite_obj_set(d, "$patch", json_object_new_string("delete"));
    kite_obj_set(d, "uid", json_object_new_string(uid));
    return kite_wl_owner_patch(pod, d);
}

static bool labels_cover(json_object *want, json_object *have) { /* every template label on the pod */
    if (!want || !json_object_is_type(want, json_type_object)) return true;
    json_object_object_foreach(want, k, v) {
        const char *h = kite_obj_str(have, k);
        if (!h || !kite_streq(h, json_object_get_string(v))) return false;
    }
    return true;
}

static void set_int(json_object *o, const char *k, int64_t v) { kite_obj_set(o, k, json_object_new_int64(v)); }

/* The pods a sync of the ReplicaSet with controller uid looks at, one per call: its own, then
 * the orphans (a pod another controller owns is not its to count); *w and *it start at 0. */
static json_object *next_candidate(struct kite_rsc *c, const char *uid, size_t *w, size_t *it) {
    struct kite_map *sets[2] = {uid ? kite_map_get(&c->by_owner, uid) : NULL, &c->orphans};
    const char *k;
    for (; *w < 2; (*w)++, *it = 0)
        while (sets[*w] && kite_map_next(sets[*w], it, &k, NULL)) {
            json_object *pod = kite_wl_cache_get(&c->pods, k);
            if (pod) return pod;
        }
    return NULL;
}

/* An adoption or release: patch (taken) to the pod's controller reference. */
static void adopt_act(struct kite_ctl_acts *acts, const char *key, const char *pods_path, json_object *pod,
                      json_object *patch) {
    _cleanup_free_ char *path = kite_asprintf("%s/%s", pods_path, kite_meta_str(pod, "name"));
    kite_ctl_acts_add(acts, ACT_ADOPT, key, "PATCH", path, "application/strategic-merge-patch+json", patch);
}

/* Plans one ReplicaSet's pass into acts; *next_ns: when to look again (minReadySeconds). */
static void sync(struct kite_rsc *c, const char *key, struct kite_ctl_acts *acts, int64_t *next_ns) {
    json_object *rs = kite_wl_cache_get(&c->rss, key);
    if (!rs) return;
    const char *ns = kite_meta_str(rs, "namespace"), *name = kite_meta_str(rs, "name"), *uid = kite_meta_str(rs, "uid");
    json_object *spec = kite_obj_get(rs, "spec");
    json_object *tlabels = kite_obj_get(kite_obj_meta(kite_obj_get(spec, "template")), "labels");
    int64_t replicas = kite_wl_int(rs, "spec", "replicas"), min_ready = kite_wl_int(rs, "spec", "minReadySeconds");
    bool deleting = kite_wl_deleting(rs);
    _cleanup_free_ char *pods_path = kite_asprintf("/api/v1/namespaces/%s/pods", ns);

    size_t n = 0, cap = 16;
    json_object **active = kite_calloc(cap, sizeof *active);
    json_object *pod;
    for (size_t w = 0, it = 0; (pod = next_candidate(c, uid, &w, &it));) {
        if (!kite_streq(kite_meta_str(pod, "namespace"), ns)) continue;
        json_object *ref = kite_wl_controller_ref(pod), *labels = kite_obj_get(kite_obj_meta(pod), "labels");
        bool matches = selects(c, rs, labels);
        if (ref) {
            if (!kite_streq(kite_obj_str(ref, "uid"), uid)) continue;
            if (!matches) { /* ours no more: released */
                if (!deleting) adopt_act(acts, key, pods_path, pod, release_patch(pod, uid));
                continue;
            }
        } else {
            if (!matches || deleting || kite_wl_deleting(pod)) continue;
            adopt_act(acts, key, pods_path, pod,
                      kite_wl_owner_patch(pod, kite_wl_new_controller_ref(c->o.kind->api_version, c->o.kind->kind, rs)));
        }
        if (!kite_wl_pod_active(pod)) continue;
        if (n == cap) active = kite_realloc(active, (cap *= 2) * sizeof *active);
        active[n++] = pod;
    }

    if (!deleting && expectations_met(c, key)) {
        int64_t diff = (int64_t)n - replicas;
        if (diff < 0) {
            int64_t want = KITE_MIN(-diff, KITE_RSC_BURST);
            expect_set(c, key)->add = want;
            for (int64_t i = 0; i < want; i++)
                kite_ctl_acts_add(acts, ACT_CREATE, key, "POST", pods_path, NULL, pod_from_template(c, rs));
        } else if (diff > 0) {
            int64_t drop = KITE_MIN(diff, KITE_RSC_BURST);
            kite_rsc_rank(active, n);
            struct expect *e = expect_set(c, key);
            for (int64_t i = 0; i < drop; i++) {
                _cleanup_free_ char *pk = kite_wl_key(ns, kite_meta_str(active[i], "name"));
                kite_map_put(&e->dels, pk, (void *)1);
                _cleanup_free_ char *path = kite_asprintf("%s/%s", pods_path, kite_meta_str(active[i], "name"));
                kite_ctl_acts_add(acts, ACT_DELETE, key, "DELETE", path, NULL, NULL);
            }
        }
    }

    /* calculateStatus, over the pods seen before this pass's changes */
    int64_t labeled = 0, ready = 0, available = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *labels = kite_obj_get(kite_obj_meta(active[i]), "labels");
        if (labels_cover(tlabels, labels)) labeled++;
        if (kite_wl_pod_ready(active[i], NULL)) ready++;
        int64_t wait = -1;
        if (kite_wl_pod_available(active[i], min_ready, kite_now_wall(c->o.clock), &wait)) available++;
        kite_wl_min(next_ns, wait);
    }
    free(active);
    json_object *st = kite_obj_get(rs, "status");
    int64_t gen = kite_wl_int(rs, "metadata", "generation");
    if (kite_wl_int(rs, "status", "replicas") != (int64_t)n || kite_wl_int(rs, "status", "fullyLabeledReplicas") != labeled ||
        kite_wl_int(rs, "status", "readyReplicas") != ready || kite_wl_int(rs, "status", "availableReplicas") != available ||
        kite_wl_int(rs, "status", "observedGeneration") != gen || !st) {
        json_object *patch = json_object_new_object(), *s = json_object_new_object();
        set_int(s, "replicas", (int64_t)n);
        set_int(s, "fullyLabeledReplicas", labeled);
        set_int(s, "readyReplicas", ready);
        set_int(s, "availableReplicas", available);
        set_int(s, "observedGeneration", gen);
        kite_obj_set(patch, "status", s);
        _cleanup_free_ char *path = kite_asprintf("%s/namespaces/%s/%s/%s/status", c->o.kind->prefix, ns, c->o.kind->plural, name);
        kite_ctl_acts_add(acts, ACT_STATUS, key, "PATCH", path, "application/merge-patch+json", patch);
    }
}

static void plan(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns) {
    sync(ud, key, acts, again_ns);
}

static bool heard(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events) {
    struct kite_rsc *c = ud;
    const char *slash = strchr(a->key, '/');
    const char *rs_ns = a->key, *rs_name = slash ? slash + 1 : a->key;
    _cleanup_free_ char *ns = kite_strndup(rs_ns, slash ? (size_t)(slash - rs_ns) : 0);
    pthread_mutex_lock(&c->lock);
    json_object *rs = kite_wl_cache_get(&c->rss, a->key);
    const char *uid = rs ? kite_meta_str(rs, "uid") : NULL;
    struct expect *ex = kite_map_get(&c->exp, a->key);
    if (a->kind == ACT_CREATE) {
        if (e < 0 && ex && ex->add > 0) ex->add--;
        if (e == 0) {
            _cleanup_free_ char *msg = kite_asprintf("Created pod: %s", kite_meta_str(answer, "name"));
            kite_ctl_event(events, c->o.clock, c->o.kind->component, c->o.kind->kind, ns, rs_name, uid, "Normal", "SuccessfulCreate", msg);
        } else {
            _cleanup_free_ char *msg = kite_asprintf("Error creating: %s", strerror(-e));
            kite_ctl_event(events, c->o.clock, c->o.kind->component, c->o.kind->kind, ns, rs_name, uid, "Warning", "FailedCreate", msg);
        }
    } else if (a->kind == ACT_DELETE) {
        const char *pod = strrchr(a->path, '/') + 1;
        if (e < 0 && e != -ENOENT && ex) {
            _cleanup_free_ char *pk = kite_wl_key(ns, pod);
            kite_map_del(&ex->dels, pk);
        }
        if (e == 0) {
            _cleanup_free_ char *msg = kite_asprintf("Deleted pod: %s", pod);
            kite_ctl_event(events, c->o.clock, c->o.kind->component, c->o.kind->kind, ns, rs_name, uid, "Normal", "SuccessfulDelete", msg);
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (e < 0 && e != -ENOENT) {
        log_debug(LOG, "%s %s: %s", a->method, a->path, strerror(-e));
        return true;
    }
    return false;
}

int64_t kite_rsc_step(struct kite_rsc *c) { return kite_ctl_keyed_step(&c->k); }
bool kite_rsc_pending(struct kite_rsc *c) { return kite_ctl_keyed_pending(&c->k); }

/* ---- on the framework: ReplicaSets and pods feed it ---- */
KITE_CTL_FEED(kite_rsc_rs_upsert, struct kite_rsc)
KITE_CTL_FEED(kite_rsc_rs_delete, struct kite_rsc)
KITE_CTL_FEED(kite_rsc_pod_upsert, struct kite_rsc)
KITE_CTL_FEED(kite_rsc_pod_delete, struct kite_rsc)
KITE_CTL_CORE(kite_rsc, struct kite_rsc)

int kite_rsc_run(struct kite_ctl_group *g, const struct kite_rsc_kind *kind) {
    struct kite_rsc_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g), .kind = kind};
    _cleanup_free_ char *path = kite_asprintf("%s/%s", kind->prefix, kind->plural);
    const struct kite_ctl_feed feeds[] = {
        {.path = path, .upsert = kite_rsc_rs_upsert_feed, .del = kite_rsc_rs_delete_feed},
        {.path = "/api/v1/pods", .upsert = kite_rsc_pod_upsert_feed, .del = kite_rsc_pod_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = kind->map_selector ? "replication" : "replicaset", .step = kite_rsc_step_core,
                                 .pending = kite_rsc_pending_core, .free = kite_rsc_free_core, .feeds = feeds,
                                 .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_rsc_new(&o));
}
