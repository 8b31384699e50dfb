/* The deployment controller's core (deployment.h). */
#include "controllers/workloads/deployment.h"
#include "framework/framework.h"
#include "api/registry.h"
#include "base/buf.h"
#include "base/log.h"
#include "controllers/controllers.h"
#include "framework/ctlutil.h"
#include "framework/workqueue.h"
#include "controllers/workloads/wlutil.h"
#include "json/patch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define LOG "deployment"
#define COMPONENT "deployment-controller"
#define HASH_LABEL "pod-template-hash"
#define REVISION "deployment.kubernetes.io/revision"
#define DESIRED "deployment.kubernetes.io/desired-replicas"
#define MAX_REPLICAS "deployment.kubernetes.io/max-replicas"

enum { ACT_CREATE_RS, ACT_OTHER };

struct kite_deployctl {
    struct kite_deployctl_options o;
    pthread_mutex_t lock;
    struct kite_wl_cache ds, rss, pods;
    struct kite_wq q;
    struct kite_ctl_keyed k;
};

static void plan(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns);
static bool heard(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events);

struct kite_deployctl *kite_deployctl_new(const struct kite_deployctl_options *o) {
    struct kite_deployctl *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    if (!c->o.clock) c->o.clock = kite_clock_real();
    pthread_mutex_init(&c->lock, NULL);
    c->q.backoff_base_ns = KITE_DEPLOYCTL_RETRY_NS;
    c->q.backoff_max_ns = KITE_DEPLOYCTL_RETRY_MAX_NS;
    c->k = (struct kite_ctl_keyed){.lock = &c->lock, .wq = &c->q, .clock = c->o.clock, .client = c->o.client, .ud = c,
                                   .plan = plan, .heard = heard};
    return c;
}

void kite_deployctl_free(struct kite_deployctl *c) {
    if (!c) return;
    kite_wl_cache_release(&c->ds);
    kite_wl_cache_release(&c->rss);
    kite_wl_cache_release(&c->pods);
    kite_wq_release(&c->q);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- the template hash (controller.ComputeHash) ---- */

static void strip_nulls(json_object *o);

void kite_deployctl_template_hash(json_object *tmpl, int64_t collision_count, char out[16]) {
    json_object *t = NULL;
    json_object_deep_copy(tmpl, &t, NULL);
    strip_nulls(t);
    unsigned char cc[8] = {0}; /* collisionCount as 8 little-endian bytes */
    uint32_t v = (uint32_t)collision_count;
    for (int i = 0; i < 4; i++) cc[i] = (unsigned char)(v >> (8 * i));
    kite_wl_hash(t, cc, collision_count >= 0 ? sizeof cc : 0, out);
    json_object_put(t);
}

/* ---- the rolling step ---- */

static int64_t scaled(json_object *v, int64_t total, bool round_up, int64_t dflt) {
    if (!v) return dflt;
    if (json_object_is_type(v, json_type_int)) return json_object_get_int64(v);
    const char *s = json_object_get_string(v);
    char *end;
    long long pct = strtoll(s, &end, 10);
    if (end == s || *end != '%') return dflt;
    return round_up ? (pct * total + 99) / 100 : pct * total / 100;
}

void kite_deployctl_fenceposts(json_object *max_surge, json_object *max_unavailable, int64_t desired, int64_t *ret_surge,
                        int64_t *ret_unavailable) {
    int64_t s = scaled(max_surge, desired, true, 0), u = scaled(max_unavailable, desired, false, 0);
    if (s == 0 && u == 0) u = 1; /* a rollout must be able to move */
    *ret_surge = s;
    *ret_unavailable = u;
}

int kite_deployctl_rolling_step(int64_t desired, int64_t surge, int64_t unavailable, struct kite_deployctl_rs *nrs,
                         struct kite_deployctl_rs *old, size_t n_old) {
    int64_t old_count = 0, old_available = 0;
    for (size_t i = 0; i < n_old; i++) old_count += old[i].replicas, old_available += old[i].available;
    int64_t all = old_count + nrs->replicas;
    /* reconcileNewReplicaSet / NewRSNewReplicas */
    if (nrs->replicas > desired) {
        nrs->replicas = desired;
        return 1;
    }
    if (nrs->replicas < desired && all < desired + surge) {
        int64_t up = KITE_MIN(desired + surge - all, desired - nrs->replicas);
        nrs->replicas += up;
        return 1;
    }
    /* reconcileOldReplicaSets */
    if (old_count == 0) return 0;
    int64_t min_available = desired - KITE_MIN(unavailable, desired);
    int64_t new_unavailable = nrs->replicas - nrs->available;
    int64_t max_down = all - min_available - new_unavailable, done = 0;
    if (max_down <= 0) return 0;
    for (size_t i = 0; i < n_old && done < max_down; i++) { /* cleanupUnhealthyReplicas */
        struct kite_deployctl_rs *r = &old[i];
        if (r->replicas == 0 || r->replicas <= r->available) continue;
        int64_t d = KITE_MIN(max_down - done, r->replicas - r->available);
        r->replicas -= d;
        done += d;
    }
    int64_t available = old_available + nrs->available; /* scaleDownOldReplicaSetsForRollingUpdate */
    if (available > min_available) {
        int64_t want = available - min_available, down = 0;
        for (size_t i = 0; i < n_old && down < want; i++) {
            struct kite_deployctl_rs *r = &old[i];
            if (r->replicas == 0) continue;
            int64_t d = KITE_MIN(r->replicas, want - down);
            r->replicas -= d;
            down += d;
        }
        done += down;
    }
    return done > 0 ? 2 : 0;
}

/* ---- observations ---- */

static void enqueue(struct kite_deployctl *c, const char *key) { kite_wq_add(&c->q, key, kite_now_mono(c->o.clock)); }

static char *owner_key(json_object *obj, const char *kind) { return kite_wl_controller_key(obj, NULL, kind); }

void kite_deployctl_deployment_upsert(struct kite_deployctl *c, json_object *d) {
    pthread_mutex_lock(&c->lock);
    json_object_put(kite_wl_cache_put(&c->ds, d));
    _cleanup_free_ char *key = kite_wl_key(kite_meta_str(d, "namespace"), kite_meta_str(d, "name"));
    enqueue(c, key);
    pthread_mutex_unlock(&c->lock);
}

void kite_deployctl_deployment_delete(struct kite_deployctl *c, json_object *d) {
    pthread_mutex_lock(&c->lock);
    json_object_put(kite_wl_cache_del(&c->ds, d));
    pthread_mutex_unlock(&c->lock);
}

static void rs_changed(struct kite_deployctl *c, json_object *rs) {
    _cleanup_free_ char *key = owner_key(rs, "Deployment");
    if (key) {
        enqueue(c, key);
        return;
    }
    /* an orphan: any Deployment of its namespace that selects it may adopt it */
    const char *k;
    void *v;
    json_object *labels = kite_obj_get(kite_obj_meta(rs), "labels");
    for (size_t i = 0; kite_map_next(&c->ds.m, &i, &k, &v);)
        if (kite_streq(kite_meta_str(v, "namespace"), kite_meta_str(rs, "namespace")) &&
            kite_label_selector_json_matches(kite_obj_get(kite_obj_get(v, "spec"), "selector"), labels))
            enqueue(c, k);
}

void kite_deployctl_rs_upsert(struct kite_deployctl *c, json_object *rs) {
    pthread_mutex_lock(&c->lock);
    json_object_put(kite_wl_cache_put(&c->rss, rs));
    rs_changed(c, rs);
    pthread_mutex_unlock(&c->lock);
}

void kite_deployctl_rs_delete(struct kite_deployctl *c, json_object *rs) {
    pthread_mutex_lock(&c->lock);
    json_object_put(kite_wl_cache_del(&c->rss, rs));
    rs_changed(c, rs);
    pthread_mutex_unlock(&c->lock);
}

/* Pods matter only to Recreate (old pods must be gone first): a pod's end wakes its Deployment. */
static void pod_changed(struct kite_deployctl *c, json_object *pod) {
    _cleanup_free_ char *rs_key = owner_key(pod, "ReplicaSet");
    json_object *rs = rs_key ? kite_wl_cache_get(&c->rss, rs_key) : NULL;
    _cleanup_free_ char *key = rs ? owner_key(rs, "Deployment") : NULL;
    if (key) enqueue(c, key);
}

void kite_deployctl_pod_upsert(struct kite_deployctl *c, json_object *pod) {
    pthread_mutex_lock(&c->lock);
    json_object *old = kite_wl_cache_put_cut(&c->pods, pod, kite_wl_pod_members);
    /* only a change of phase or deletion matters */
    if (!old || !kite_streq(kite_obj_str(kite_obj_get(old, "status"), "phase"), kite_obj_str(kite_obj_get(pod, "status"), "phase")))
        pod_changed(c, pod);
    json_object_put(old);
    pthread_mutex_unlock(&c->lock);
}

void kite_deployctl_pod_delete(struct kite_deployctl *c, json_object *pod) {
    pthread_mutex_lock(&c->lock);
    json_object_put(kite_wl_cache_del(&c->pods, pod));
    pod_changed(c, pod);
    pthread_mutex_unlock(&c->lock);
}

/* ---- sync ---- */

void kite_deployctl_proportional(int64_t allowed, struct kite_deployctl_rs *rs, size_t n) {
    if (!n) return;
    int64_t total = 0;
    ssize_t first = -1;
    for (size_t i = 0; i < n; i++)
        if (rs[i].replicas > 0) {
            total += rs[i].replicas;
            if (first < 0) first = (ssize_t)i;
        }
    if (first < 0) {
        rs[0].replicas = allowed;
        return;
    }
    int64_t given = 0;
    for (size_t i = 0; i < n; i++) {
        if (rs[i].replicas <= 0) continue;
        rs[i].replicas = rs[i].replicas * allowed / total; /* rounded down; the rest below */
        given += rs[i].replicas;
    }
    rs[first].replicas += allowed - given;
}

struct rsv {
    json_object *rs;
    int64_t revision, created;
    struct kite_deployctl_rs cur, want;
};

static int64_t revision_of(json_object *rs) {
    const char *r = kite_obj_str(kite_obj_get(kite_obj_meta(rs), "annotations"), REVISION);
    return r ? strtoll(r, NULL, 10) : 0;
}

static int by_created(const void *a, const void *b) {
    const struct rsv *x = a, *y = b;
    if (x->created != y->created) return x->created < y->created ? -1 : 1;
    return strcmp(kite_meta_str(x->rs, "name"), kite_meta_str(y->rs, "name"));
}

static int by_revision(const void *a, const void *b) {
    const struct rsv *x = a, *y = b;
    if (x->revision != y->revision) return x->revision < y->revision ? -1 : 1;
    return by_created(a, b);
}

/* A null member reads as absent (Go's decoder leaves the field zero): a template written back
 * from a Go struct (kubectl rollout undo) carries "creationTimestamp": null. */
static void strip_nulls(json_object *o) {
    if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) strip_nulls(json_object_array_get_idx(o, i));
        return;
    }
    if (!json_object_is_type(o, json_type_object)) return;
    for (bool again = true; again;) {
        again = false;
        json_object_object_foreach(o, k, v) {
            if (!v) {
                json_object_object_del(o, k);
                again = true;
                break;
            }
            strip_nulls(v);
        }
    }
}

/* A copy of the template without the hash label and null members, to compare. */
static json_object *unhashed(json_object *tmpl) {
    json_object *t = NULL;
    json_object_deep_copy(tmpl, &t, NULL);
    json_object *labels = kite_obj_get(kite_obj_meta(t), "labels");
    if (labels) json_object_object_del(labels, HASH_LABEL);
    strip_nulls(t);
    return t;
}

/* EqualIgnoreHash: the two templates are equal with the hash label dropped from both (a
 * ReplicaSet's body as posted carries it too). */
static bool same_template(json_object *rs_tmpl, json_object *d_tmpl) {
    json_object *t = unhashed(rs_tmpl), *u = unhashed(d_tmpl);
    bool eq = kite_json_equal(t, u);
    json_object_put(t);
    json_object_put(u);
    return eq;
}

static json_object *str_int(int64_t v) {
    char b[24];
    snprintf(b, sizeof b, "%lld", (long long)v);
    return json_object_new_string(b);
}

/* The annotations a Deployment passes on to its ReplicaSets (all but the controller's own and
 * kubectl's last-applied configuration: skipCopyAnnotation). */
static bool copied_annotation(const char *k) {
    static const char *const skip[] = {REVISION, "deployment.kubernetes.io/revision-history", DESIRED, MAX_REPLICAS,
                                       "kubectl.kubernetes.io/last-applied-configuration"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(skip); i++)
        if (strcmp(k, skip[i]) == 0) return false;
    return true;
}

static json_object *new_rs(json_object *d, const char *hash, int64_t replicas, int64_t revision, int64_t surge) {
    json_object *spec = kite_obj_get(d, "spec");
    json_object *rs = json_object_new_object(), *meta = json_object_new_object(), *rspec = json_object_new_object();
    kite_obj_set(rs, "apiVersion", json_object_new_string("apps/v1"));
    kite_obj_set(rs, "kind", json_object_new_string("ReplicaSet"));
    _cleanup_free_ char *name = kite_asprintf("%s-%s", kite_meta_str(d, "name"), hash);
    kite_obj_set(meta, "name", json_object_new_string(name));
    kite_obj_set(meta, "namespace", json_object_new_string(kite_meta_str(d, "namespace")));
    json_object *tmpl = NULL, *sel = NULL;
    json_object_deep_copy(kite_obj_get(spec, "template"), &tmpl, NULL);
    json_object_deep_copy(kite_obj_get(spec, "selector"), &sel, NULL);
    json_object *tlabels = kite_obj_ensure(kite_obj_ensure(tmpl, "metadata"), "labels");
    kite_obj_set(tlabels, HASH_LABEL, json_object_new_string(hash));
    kite_obj_set(kite_obj_ensure(sel, "matchLabels"), HASH_LABEL, json_object_new_string(hash));
    json_object *labels = NULL;
    json_object_deep_copy(tlabels, &labels, NULL);
    kite_obj_set(meta, "labels", labels);
    json_object *ann = json_object_new_object(), *dann = kite_obj_get(kite_obj_meta(d), "annotations");
    if (dann && json_object_is_type(dann, json_type_object)) {
        json_object_object_foreach(dann, k, v) if (copied_annotation(k)) kite_obj_set(ann, k, json_object_new_string(json_object_get_string(v)));
    }
    kite_obj_set(ann, DESIRED, str_int(kite_wl_int(d, "spec", "replicas")));
    kite_obj_set(ann, MAX_REPLICAS, str_int(kite_wl_int(d, "spec", "replicas") + surge));
    kite_obj_set(ann, REVISION, str_int(revision));
    kite_obj_set(meta, "annotations", ann);
    kite_wl_set_controller_ref(meta, "apps/v1", "Deployment", d);
    kite_obj_set(rs, "metadata", meta);
    kite_obj_set(rspec, "replicas", json_object_new_int64(replicas));
    kite_obj_set(rspec, "minReadySeconds", json_object_new_int64(kite_wl_int(d, "spec", "minReadySeconds")));
    kite_obj_set(rspec, "selector", sel);
    kite_obj_set(rspec, "template", tmpl);
    kite_obj_set(rs, "spec", rspec);
    return rs;
}

struct plan {
    struct kite_deployctl *c;
    json_object *d;
    const char *key, *ns, *name, *uid;
    struct kite_ctl_acts acts, events;
    int64_t surge, unavailable, desired;
    json_object *spec;
    bool recreate;
    /* the Deployment's ReplicaSets: all (the new one first), the new one or NULL, the old ones
     * and their newest revision */
    struct rsv *all, *nrs, *old;
    size_t n, n_old;
    int64_t max_old;
};

static void scale_rs(struct plan *p, json_object *rs, int64_t from, int64_t to) {
    json_object *patch = json_object_new_object(), *spec = json_object_new_object(), *meta = json_object_new_object(),
                *ann = json_object_new_object();
    kite_obj_set(spec, "replicas", json_object_new_int64(to));
    kite_obj_set(patch, "spec", spec);
    kite_obj_set(ann, DESIRED, str_int(p->desired));
    kite_obj_set(ann, MAX_REPLICAS, str_int(p->desired + p->surge));
    kite_obj_set(meta, "annotations", ann);
    kite_obj_set(patch, "metadata", meta);
    _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/replicasets/%s", p->ns, kite_meta_str(rs, "name"));
    kite_ctl_acts_add(&p->acts, ACT_OTHER, p->key, "PATCH", path, "application/merge-patch+json", patch);
    _cleanup_free_ char *msg = kite_asprintf("Scaled %s replica set %s from %lld to %lld", to > from ? "up" : "down",
                                             kite_meta_str(rs, "name"), (long long)from, (long long)to);
    kite_ctl_event(&p->events, p->c->o.clock, COMPONENT, "Deployment", p->ns, p->name, p->uid, "Normal", "ScalingReplicaSet", msg);
}

/* Condition helpers (SetDeploymentCondition): the same status and reason keeps the times; a
 * new reason with the same status keeps lastTransitionTime. */
static json_object *find_cond(json_object *conds, const char *type) {
    for (size_t i = 0; i < json_object_array_length(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), type)) return json_object_array_get_idx(conds, i);
    return NULL;
}

static void set_cond(json_object *conds, const char *type, const char *status, const char *reason, const char *msg,
                     const char *now, bool touch) {
    json_object *cur = find_cond(conds, type);
    if (cur && kite_streq(kite_obj_str(cur, "status"), status) && kite_streq(kite_obj_str(cur, "reason"), reason) && !touch) {
        kite_obj_set(cur, "message", json_object_new_string(msg));
        return;
    }
    const char *ltt = cur && kite_streq(kite_obj_str(cur, "status"), status) ? kite_obj_str(cur, "lastTransitionTime") : NULL;
    json_object *c = json_object_new_object();
    kite_obj_set(c, "type", json_object_new_string(type));
    kite_obj_set(c, "status", json_object_new_string(status));
    kite_obj_set(c, "lastUpdateTime", json_object_new_string(now));
    kite_obj_set(c, "lastTransitionTime", json_object_new_string(ltt ? ltt : now));
    kite_obj_set(c, "reason", json_object_new_string(reason));
    kite_obj_set(c, "message", json_object_new_string(msg));
    if (cur) {
        for (size_t i = 0; i < json_object_array_length(conds); i++)
            if (json_object_array_get_idx(conds, i) == cur) {
                json_object_array_put_idx(conds, i, c);
                return;
            }
    }
    json_object_array_add(conds, c);
}

/* calculateStatus and syncRolloutStatus; *next_ns: when the progress deadline runs out. */
static void status(struct plan *p, struct rsv *all, size_t n, struct rsv *nrs, const char *created_rs, int64_t *next_ns) {
    json_object *d = p->d, *old = kite_obj_get(d, "status");
    int64_t replicas = 0, ready = 0, available = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        replicas += kite_wl_int(all[i].rs, "status", "replicas");
        ready += kite_wl_int(all[i].rs, "status", "readyReplicas");
        available += kite_wl_int(all[i].rs, "status", "availableReplicas");
        total += all[i].cur.replicas;
    }
    int64_t updated = nrs ? kite_wl_int(nrs->rs, "status", "replicas") : 0;
    int64_t gen = kite_wl_int(d, "metadata", "generation");
    json_object *st = json_object_new_object(), *conds = NULL;
    json_object_deep_copy(kite_obj_get(old, "conditions"), &conds, NULL);
    if (!conds || !json_object_is_type(conds, json_type_array)) {
        json_object_put(conds);
        conds = json_object_new_array();
    }
    kite_obj_set(st, "observedGeneration", json_object_new_int64(gen));
    kite_obj_set(st, "replicas", json_object_new_int64(replicas));
    kite_obj_set(st, "updatedReplicas", json_object_new_int64(updated));
    kite_obj_set(st, "readyReplicas", json_object_new_int64(ready));
    kite_obj_set(st, "availableReplicas", json_object_new_int64(available));
    kite_obj_set(st, "unavailableReplicas", json_object_new_int64(KITE_MAX(total - available, 0)));
    json_object *cc = kite_obj_get(old, "collisionCount");
    if (cc) kite_obj_set(st, "collisionCount", json_object_new_int64(json_object_get_int64(cc)));
    int64_t now = kite_now_wall(p->c->o.clock);
    char ts[21];
    kite_time_format(now, ts);
    int64_t max_unavailable = kite_streq(kite_obj_str(kite_obj_get(kite_obj_get(d, "spec"), "strategy"), "type"), "RollingUpdate") &&
                                      p->desired > 0 ? KITE_MIN(p->unavailable, p->desired) : 0;
    if (available >= p->desired - max_unavailable)
        set_cond(conds, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", ts, false);
    else
        set_cond(conds, "Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", ts, false);
    json_object *pds = kite_obj_get(kite_obj_get(d, "spec"), "progressDeadlineSeconds");
    const char *rs_name = nrs ? kite_meta_str(nrs->rs, "name") : created_rs;
    if (created_rs) {
        _cleanup_free_ char *msg = kite_asprintf("Created new replica set \"%s\"", created_rs);
        set_cond(conds, "Progressing", "True", "NewReplicaSetCreated", msg, ts, false);
    } else if (json_object_get_boolean(kite_obj_get(kite_obj_get(d, "spec"), "paused"))) {
        /* checkPausedConditions: no progress deadline while paused */
        json_object *cur = find_cond(conds, "Progressing");
        if (!cur || !kite_streq(kite_obj_str(cur, "reason"), "DeploymentPaused"))
            set_cond(conds, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", ts, false);
    } else if (find_cond(conds, "Progressing") &&
               kite_streq(kite_obj_str(find_cond(conds, "Progressing"), "reason"), "DeploymentPaused")) {
        set_cond(conds, "Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed", ts, false);
    } else if (pds) {
        json_object *cur = find_cond(conds, "Progressing");
        bool complete_before = replicas == updated && cur && kite_streq(kite_obj_str(cur, "reason"), "NewReplicaSetAvailable");
        bool complete = updated == p->desired && replicas == p->desired && available == p->desired;
        int64_t old_updated = kite_wl_int(d, "status", "updatedReplicas"), old_replicas = kite_wl_int(d, "status", "replicas");
        bool progressing = updated > old_updated || replicas - updated < old_replicas - old_updated ||
                           ready > kite_wl_int(d, "status", "readyReplicas") || available > kite_wl_int(d, "status", "availableReplicas");
        if (!complete_before) {
            int64_t since = 0;
            if (cur && kite_time_parse(kite_obj_str(cur, "lastUpdateTime") ? kite_obj_str(cur, "lastUpdateTime") : "", &since) < 0) since = 0;
            int64_t deadline = kite_time_add(since, kite_sec_to_ns(json_object_get_int64(pds)));
            if (complete) {
                _cleanup_free_ char *msg = rs_name ? kite_asprintf("ReplicaSet \"%s\" has successfully progressed.", rs_name)
                                                   : kite_asprintf("Deployment \"%s\" has successfully progressed.", p->name);
                set_cond(conds, "Progressing", "True", "NewReplicaSetAvailable", msg, ts, false);
            } else if (progressing) {
                _cleanup_free_ char *msg = kite_asprintf("ReplicaSet \"%s\" is progressing.", rs_name ? rs_name : "");
                set_cond(conds, "Progressing", "True", "ReplicaSetUpdated", msg, ts, true);
                kite_wl_min(next_ns, kite_sat_add(kite_sec_to_ns(json_object_get_int64(pds)), KITE_NS_PER_SEC));
            } else if (cur && !kite_streq(kite_obj_str(cur, "reason"), "ProgressDeadlineExceeded") && since && now > deadline) {
                _cleanup_free_ char *msg = kite_asprintf("ReplicaSet \"%s\" has timed out progressing.", rs_name ? rs_name : "");
                set_cond(conds, "Progressing", "False", "ProgressDeadlineExceeded", msg, ts, false);
            } else if (cur && since && now <= deadline) {
                kite_wl_min(next_ns, deadline - now + KITE_NS_PER_SEC);
            }
        }
    }
    kite_obj_set(st, "conditions", conds);
    /* written only when it differs (the conditions' times change only with them) */
    json_object *cmp = NULL;
    json_object_deep_copy(old, &cmp, NULL);
    if (cmp) json_object_object_del(cmp, "terminatingReplicas");
    bool same = kite_json_equal(cmp, st);
    json_object_put(cmp);
    if (same) {
        json_object_put(st);
        return;
    }
    json_object *patch = json_object_new_object();
    kite_obj_set(patch, "status", st);
    _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/deployments/%s/status", p->ns, p->name);
    kite_ctl_acts_add(&p->acts, ACT_OTHER, p->key, "PATCH", path, "application/merge-patch+json", patch);
}

/* Any pod of the old ReplicaSets still not terminal (oldPodsRunning). */
static bool old_pods_running(struct kite_deployctl *c, struct rsv *old, size_t n) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->pods.m, &i, &k, &v);) {
        json_object *ref = kite_wl_controller_ref(v);
        const char *phase = kite_obj_str(kite_obj_get(v, "status"), "phase");
        if (!ref || kite_streq(phase, "Succeeded") || kite_streq(phase, "Failed")) continue;
        for (size_t j = 0; j < n; j++)
            if (kite_streq(kite_obj_str(ref, "uid"), kite_meta_str(old[j].rs, "uid"))) return true;
    }
    return false;
}

static void annotate(struct plan *p, const char *kind_path, const char *name, const char *k, json_object *v) {
    json_object *patch = json_object_new_object(), *meta = json_object_new_object(), *ann = json_object_new_object();
    kite_obj_set(ann, k, v);
    kite_obj_set(meta, "annotations", ann);
    kite_obj_set(patch, "metadata", meta);
    _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/%s/%s", p->ns, kind_path, name);
    kite_ctl_acts_add(&p->acts, ACT_OTHER, p->key, "PATCH", path, "application/merge-patch+json", patch);
}

/* ClaimReplicaSets: the ReplicaSets of the Deployment's namespace it controls, an orphan its
 * selector matches adopted on the way; into p->all, p->n. */
static void claim_replicasets(struct plan *p) {
    json_object *d = p->d, *sel = kite_obj_get(p->spec, "selector");
    size_t cap = 8;
    p->all = kite_calloc(cap, sizeof *p->all);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&p->c->rss.m, &i, &k, &v);) {
        json_object *rs = v;
        if (!kite_streq(kite_meta_str(rs, "namespace"), p->ns)) continue;
        json_object *ref = kite_wl_controller_ref(rs);
        if (ref && !kite_streq(kite_obj_str(ref, "uid"), p->uid)) continue;
        if (!ref) { /* adopt an orphan the selector matches */
            if (kite_wl_deleting(d) || kite_wl_deleting(rs) ||
                !kite_label_selector_json_matches(sel, kite_obj_get(kite_obj_meta(rs), "labels")))
                continue;
            json_object *patch = kite_wl_owner_patch(rs, kite_wl_new_controller_ref("apps/v1", "Deployment", d));
            _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/replicasets/%s", p->ns, kite_meta_str(rs, "name"));
            kite_ctl_acts_add(&p->acts, ACT_OTHER, p->key, "PATCH", path, "application/strategic-merge-patch+json", patch);
        }
        if (p->n == cap) p->all = kite_realloc(p->all, (cap *= 2) * sizeof *p->all);
        struct rsv *r = &p->all[p->n++];
        *r = (struct rsv){.rs = rs, .revision = revision_of(rs)};
        const char *ct = kite_meta_str(rs, "creationTimestamp");
        if (ct) kite_time_parse(ct, &r->created);
        r->cur.replicas = kite_wl_int(rs, "spec", "replicas");
        r->cur.available = kite_wl_int(rs, "status", "availableReplicas");
        r->want = r->cur;
    }
}

/* FindNewReplicaSet (the oldest of those with the Deployment's template) and FindOldReplicaSets:
 * p->all sorted by age with the new one moved first, p->old the rest, p->max_old their newest
 * revision. */
static void find_new_and_old(struct plan *p) {
    json_object *tmpl = kite_obj_get(p->spec, "template");
    qsort(p->all, p->n, sizeof *p->all, by_created);
    p->nrs = NULL;
    for (size_t i = 0; i < p->n && !p->nrs; i++)
        if (same_template(kite_obj_get(kite_obj_get(p->all[i].rs, "spec"), "template"), tmpl)) p->nrs = &p->all[i];
    if (p->nrs && p->nrs != &p->all[0]) { /* keep old ones contiguous: new first */
        struct rsv t = *p->nrs;
        memmove(&p->all[1], &p->all[0], (size_t)(p->nrs - p->all) * sizeof *p->all);
        p->all[0] = t;
    }
    if (p->nrs) p->nrs = &p->all[0];
    p->old = p->nrs ? p->all + 1 : p->all;
    p->n_old = p->nrs ? p->n - 1 : p->n;
    p->max_old = 0;
    for (size_t i = 0; i < p->n_old; i++) p->max_old = KITE_MAX(p->max_old, p->old[i].revision);
}

/* The rolling update's next sizes (want), from the current ones: the new ReplicaSet's into
 * *nrs, the old ones' into p->old[].want when old_want. */
static void rolling_step(struct plan *p, struct kite_deployctl_rs *nrs, bool old_want) {
    struct kite_deployctl_rs *olds = p->n_old ? kite_calloc(p->n_old, sizeof *olds) : NULL;
    for (size_t i = 0; i < p->n_old; i++) olds[i] = p->old[i].cur;
    kite_deployctl_rolling_step(p->desired, p->surge, p->unavailable, nrs, olds, p->n_old);
    for (size_t i = 0; old_want && i < p->n_old; i++) p->old[i].want = olds[i];
    free(olds);
}

/* getNewReplicaSet with createIfNotExisted: the ReplicaSet of the template's hash, at the size
 * the strategy starts it with, its revision one past the old ones'; its name into rs_name. */
static void create_new_rs(struct plan *p, char rs_name[320]) {
    json_object *cc = kite_obj_get(kite_obj_get(p->d, "status"), "collisionCount");
    char hash[16];
    kite_deployctl_template_hash(kite_obj_get(p->spec, "template"), cc ? json_object_get_int64(cc) : -1, hash);
    int64_t start = p->desired;
    if (!p->recreate) {
        struct kite_deployctl_rs fresh = {0};
        rolling_step(p, &fresh, false);
        start = fresh.replicas;
    }
    json_object *rs = new_rs(p->d, hash, start, p->max_old + 1, p->surge);
    snprintf(rs_name, 320, "%s", kite_meta_str(rs, "name"));
    _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/replicasets", p->ns);
    kite_ctl_acts_add(&p->acts, ACT_CREATE_RS, p->key, "POST", path, NULL, rs);
    if (start > 0) {
        _cleanup_free_ char *msg = kite_asprintf("Scaled up replica set %s from 0 to %lld", rs_name, (long long)start);
        kite_ctl_event(&p->events, p->c->o.clock, COMPONENT, "Deployment", p->ns, p->name, p->uid, "Normal", "ScalingReplicaSet", msg);
    }
    annotate(p, "deployments", p->name, REVISION, str_int(p->max_old + 1));
}

/* The revision annotations once the new ReplicaSet exists: an old template again (rollout
 * undo) becomes the newest revision, and the Deployment names the new one's. */
static void sync_revision(struct plan *p) {
    int64_t next = p->max_old + 1;
    if (p->nrs->revision < next) annotate(p, "replicasets", kite_meta_str(p->nrs->rs, "name"), REVISION, str_int(next));
    const char *drev = kite_obj_str(kite_obj_get(kite_obj_meta(p->d), "annotations"), REVISION);
    if (!drev || strtoll(drev, NULL, 10) != KITE_MAX(p->nrs->revision, next))
        annotate(p, "deployments", p->name, REVISION, str_int(KITE_MAX(p->nrs->revision, next)));
}

/* rolloutRecreate and rolloutRolling: the sizes every ReplicaSet should have now (want). */
static void rollout(struct plan *p, bool old_active, bool may_create) {
    if (!p->recreate) {
        rolling_step(p, &p->nrs->want, true);
    } else if (old_active) { /* the old ones go first, all of them */
        for (size_t i = 0; i < p->n_old; i++) p->old[i].want.replicas = 0;
    } else if (may_create) {
        p->nrs->want.replicas = p->desired;
    }
}

/* Every ReplicaSet whose wanted size differs is scaled; whether any was. */
static bool scale_to_want(struct plan *p) {
    bool changed = false;
    for (size_t i = 0; i < p->n; i++)
        if (p->all[i].want.replicas != p->all[i].cur.replicas) {
            scale_rs(p, p->all[i].rs, p->all[i].cur.replicas, p->all[i].want.replicas);
            changed = true;
        }
    return changed;
}

/* cleanupDeployment: old ReplicaSets with no pods past revisionHistoryLimit, oldest revision
 * first. */
static void cleanup_history(struct plan *p) {
    int64_t limit = kite_obj_get(p->spec, "revisionHistoryLimit") ? kite_wl_int(p->d, "spec", "revisionHistoryLimit") : 10;
    struct rsv *dead = p->n_old ? kite_calloc(p->n_old, sizeof *dead) : NULL;
    size_t nd = 0;
    for (size_t i = 0; i < p->n_old; i++)
        if (p->old[i].cur.replicas == 0 && kite_wl_int(p->old[i].rs, "status", "replicas") == 0 && !kite_wl_deleting(p->old[i].rs))
            dead[nd++] = p->old[i];
    if (nd) qsort(dead, nd, sizeof *dead, by_revision);
    for (size_t i = 0; (int64_t)(nd - i) > limit; i++) {
        _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/replicasets/%s", p->ns, kite_meta_str(dead[i].rs, "name"));
        kite_ctl_acts_add(&p->acts, ACT_OTHER, p->key, "DELETE", path, NULL, NULL);
    }
    free(dead);
}

/* A paused Deployment (sync's scale): no rollout, but a change of replicas scales what runs
 * proportionally, newest first. */
static void scale_paused(struct plan *p) {
    struct kite_deployctl_rs *sizes = kite_calloc(p->n, sizeof *sizes);
    int64_t sum = 0, n_active = 0;
    for (size_t i = 0; i < p->n; i++) {
        sizes[i] = p->all[i].cur;
        sum += sizes[i].replicas, n_active += sizes[i].replicas > 0;
    }
    int64_t allowed = n_active > 1 ? p->desired + (p->recreate ? 0 : p->surge) : p->desired;
    if (sum != allowed) {
        kite_deployctl_proportional(allowed, sizes, p->n);
        for (size_t i = 0; i < p->n; i++)
            if (sizes[i].replicas != p->all[i].cur.replicas) scale_rs(p, p->all[i].rs, p->all[i].cur.replicas, sizes[i].replicas);
    }
    free(sizes);
}

static void sync(struct kite_deployctl *c, const char *key, struct plan *p, int64_t *next_ns) {
    json_object *d = kite_wl_cache_get(&c->ds, key);
    if (!d) return;
    p->c = c, p->d = d, p->key = key;
    p->ns = kite_meta_str(d, "namespace"), p->name = kite_meta_str(d, "name"), p->uid = kite_meta_str(d, "uid");
    p->spec = kite_obj_get(d, "spec");
    json_object *strat = kite_obj_get(p->spec, "strategy"), *ru = kite_obj_get(strat, "rollingUpdate");
    p->recreate = kite_streq(kite_obj_str(strat, "type"), "Recreate");
    p->desired = kite_wl_int(d, "spec", "replicas");
    if (p->recreate) p->surge = 0, p->unavailable = 0;
    else kite_deployctl_fenceposts(kite_obj_get(ru, "maxSurge"), kite_obj_get(ru, "maxUnavailable"), p->desired, &p->surge, &p->unavailable);

    claim_replicasets(p);
    find_new_and_old(p);
    const char *created = NULL;
    char rs_name[320];
    bool deleting = kite_wl_deleting(d), paused = json_object_get_boolean(kite_obj_get(p->spec, "paused"));
    if (!deleting && !paused) {
        bool old_active = false;
        for (size_t i = 0; i < p->n_old; i++) old_active |= p->old[i].cur.replicas > 0;
        bool may_create = !p->recreate || (!old_active && !old_pods_running(c, p->old, p->n_old));
        if (!p->nrs && may_create) {
            create_new_rs(p, rs_name);
            created = rs_name;
        } else if (p->nrs) {
            sync_revision(p);
            rollout(p, old_active, may_create);
            if (!scale_to_want(p) && kite_wl_int(p->nrs->rs, "status", "availableReplicas") == p->desired) cleanup_history(p);
        }
    } else if (!deleting && p->n) {
        scale_paused(p);
    }
    status(p, p->all, p->n, p->nrs, created, next_ns);
    free(p->all);
}

static void plan(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns) {
    struct plan p = {0};
    sync(ud, key, &p, again_ns);
    *acts = p.acts, *events = p.events;
}

/* A ReplicaSet of that name that is not this template's (a hash collision): the Deployment's
 * status.collisionCount goes up, and the next hash differs (upstream's getNewReplicaSet). */
static bool heard(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events) {
    struct kite_deployctl *c = ud;
    if (e == 0 || e == -ENOENT) return false;
    if (a->kind != ACT_CREATE_RS || e != -EEXIST) {
        log_debug(LOG, "%s %s: %s", a->method, a->path, strerror(-e));
        return true;
    }
    _cleanup_free_ char *path = kite_asprintf("%s/%s", a->path, kite_meta_str(a->body, "name"));
    json_object *cur = NULL, *d = NULL;
    if (kite_client_json(c->o.client, "GET", path, NULL, NULL, NULL, &cur) == 0) {
        json_object *ref = kite_wl_controller_ref(cur);
        json_object *owner = kite_wl_controller_ref(a->body);
        bool ours = ref && kite_streq(kite_obj_str(ref, "uid"), kite_obj_str(owner, "uid")) &&
                    same_template(kite_obj_get(kite_obj_get(cur, "spec"), "template"),
                                  kite_obj_get(kite_obj_get(a->body, "spec"), "template"));
        if (!ours) {
            pthread_mutex_lock(&c->lock);
            json_object *cd = kite_wl_cache_get(&c->ds, key);
            if (cd) json_object_deep_copy(cd, &d, NULL);
            pthread_mutex_unlock(&c->lock);
        }
    }
    if (d) {
        int64_t cc = kite_wl_int(d, "status", "collisionCount") + 1;
        json_object *patch = json_object_new_object(), *st = json_object_new_object();
        kite_obj_set(st, "collisionCount", json_object_new_int64(cc));
        kite_obj_set(patch, "status", st);
        _cleanup_free_ char *dpath = kite_asprintf("/apis/apps/v1/namespaces/%s/deployments/%s/status", kite_meta_str(d, "namespace"),
                                                   kite_meta_str(d, "name"));
        kite_client_json(c->o.client, "PATCH", dpath, "application/merge-patch+json", patch, NULL, NULL);
        json_object_put(patch);
        json_object_put(d);
    }
    json_object_put(cur);
    return true;
}

int64_t kite_deployctl_step(struct kite_deployctl *c) { return kite_ctl_keyed_step(&c->k); }
bool kite_deployctl_pending(struct kite_deployctl *c) { return kite_ctl_keyed_pending(&c->k); }

/* ---- on the framework: Deployments, ReplicaSets and pods feed it ---- */
KITE_CTL_FEED(kite_deployctl_deployment_upsert, struct kite_deployctl)
KITE_CTL_FEED(kite_deployctl_deployment_delete, struct kite_deployctl)
KITE_CTL_FEED(kite_deployctl_rs_upsert, struct kite_deployctl)
KITE_CTL_FEED(kite_deployctl_rs_delete, struct kite_deployctl)
KITE_CTL_FEED(kite_deployctl_pod_upsert, struct kite_deployctl)
KITE_CTL_FEED(kite_deployctl_pod_delete, struct kite_deployctl)
KITE_CTL_CORE(kite_deployctl, struct kite_deployctl)

int kite_deployctl_run(struct kite_ctl_group *g) {
    struct kite_deployctl_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/apis/apps/v1/replicasets", .upsert = kite_deployctl_rs_upsert_feed, .del = kite_deployctl_rs_delete_feed},
        {.path = "/api/v1/pods", .upsert = kite_deployctl_pod_upsert_feed, .del = kite_deployctl_pod_delete_feed},
        {.path = "/apis/apps/v1/deployments", .upsert = kite_deployctl_deployment_upsert_feed,
         .del = kite_deployctl_deployment_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "deployment", .step = kite_deployctl_step_core, .pending = kite_deployctl_pending_core,
                                 .free = kite_deployctl_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_deployctl_new(&o));
}
