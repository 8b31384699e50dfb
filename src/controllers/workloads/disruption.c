/* The disruption controller's core (disruption.h). Budgets and pods are kept by
 * namespace/name; a change marks the budgets of its namespace dirty, and a step recomputes the
 * dirty ones (each against the pods of its namespace) and writes those whose status differs.
 * A failed write marks its budget dirty again; a conflict needs nothing more, since the newer
 * budget comes back through the informer and marks it. */
#include "controllers/workloads/disruption.h"
#include "framework/framework.h"
#include "api/disruption.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/ctlutil.h"
#include "json/patch.h"
#include "json/scan.h"
#include "controllers/workloads/wlutil.h"

#include <pthread.h>

#define LOG "disruption"
#define COMPONENT "controllermanager"
#define RETRY_NS KITE_NS_PER_SEC

struct kite_dc {
    struct kite_dc_options o;
    pthread_mutex_t lock;
    struct kite_map pods, pdbs; /* "ns/name" -> json_object (owned) */
    struct kite_map dirty;      /* budget keys to recompute */
    int64_t recheck_ns;         /* wall time an entry of some disruptedPods times out; 0: none */
    struct kite_map failed;     /* budget keys whose write failed: dirty again at retry_ns */
    int64_t retry_ns;           /* wall; 0: nothing failed */
};

struct kite_dc *kite_dc_new(const struct kite_dc_options *o) {
    struct kite_dc *d = kite_calloc(1, sizeof *d);
    d->o = *o;
    if (!d->o.clock) d->o.clock = kite_clock_real();
    pthread_mutex_init(&d->lock, NULL);
    return d;
}

static void clear_objs(struct kite_map *m) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(m, &i, &k, &v);) json_object_put(v);
    kite_map_release(m);
}

void kite_dc_free(struct kite_dc *d) {
    if (!d) return;
    clear_objs(&d->pods);
    clear_objs(&d->pdbs);
    kite_map_release(&d->dirty);
    kite_map_release(&d->failed);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static const char *ns_of(json_object *o) { return kite_meta_str(o, "namespace") ? kite_meta_str(o, "namespace") : ""; }

/* Marks every budget of namespace ns dirty (under the lock). */
static void mark_namespace(struct kite_dc *d, const char *ns) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&d->pdbs, &i, &k, &v);)
        if (strcmp(ns_of(v), ns) == 0) kite_map_put(&d->dirty, k, (void *)1);
}

static void put(struct kite_dc *d, struct kite_map *m, json_object *obj, bool is_pdb) {
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns_of(obj), kite_meta_str(obj, "name") ? kite_meta_str(obj, "name") : "");
    /* a copy of its own: json-c's reference counts are not atomic, and the informer (and the
     * other controllers sharing it) hold the observed object on other threads */
    json_object *copy = NULL;
    if (is_pdb) json_object_deep_copy(obj, &copy, NULL);
    else copy = kite_obj_project_copy(obj, kite_wl_pod_members); /* what it counts of a pod */
    pthread_mutex_lock(&d->lock);
    json_object_put(kite_map_put(m, key, copy));
    if (is_pdb) kite_map_put(&d->dirty, key, (void *)1);
    else mark_namespace(d, ns_of(obj));
    pthread_mutex_unlock(&d->lock);
}

static void del(struct kite_dc *d, struct kite_map *m, json_object *obj, bool is_pdb) {
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns_of(obj), kite_meta_str(obj, "name") ? kite_meta_str(obj, "name") : "");
    pthread_mutex_lock(&d->lock);
    json_object_put(kite_map_del(m, key));
    if (is_pdb) kite_map_del(&d->dirty, key);
    else mark_namespace(d, ns_of(obj));
    pthread_mutex_unlock(&d->lock);
}

void kite_dc_pod_upsert(struct kite_dc *d, json_object *pod) { put(d, &d->pods, pod, false); }
void kite_dc_pod_delete(struct kite_dc *d, json_object *pod) { del(d, &d->pods, pod, false); }
void kite_dc_pdb_upsert(struct kite_dc *d, json_object *pdb) { put(d, &d->pdbs, pdb, true); }
void kite_dc_pdb_delete(struct kite_dc *d, json_object *pdb) { del(d, &d->pdbs, pdb, true); }

bool kite_dc_pending(struct kite_dc *d) {
    pthread_mutex_lock(&d->lock);
    bool p = d->dirty.len > 0;
    pthread_mutex_unlock(&d->lock);
    return p;
}

static bool deleting(json_object *pod) { return kite_obj_get(kite_obj_meta(pod), "deletionTimestamp") != NULL; }

/* When the eviction recorded for name in disrupted was made (0: not recorded, or unreadable). */
static int64_t disrupted_at(json_object *disrupted, const char *name) {
    const char *t = kite_obj_str(disrupted, name);
    int64_t ns;
    return t && kite_time_parse(t, &ns) == 0 ? ns : 0;
}

json_object *kite_dc_status(json_object *pdb, json_object *const *pods, size_t n, int64_t now_ns, int64_t *ret_recheck_ns) {
    json_object *old = kite_obj_get(pdb, "status");
    json_object *old_disrupted = kite_obj_get(old, "disruptedPods");
    json_object *disrupted = json_object_new_object();
    int64_t recheck = 0;
    int32_t matching = 0, current = 0;
    for (size_t i = 0; i < n; i++) {
        if (!kite_pdb_selects(pdb, pods[i])) continue;
        matching++;
        if (deleting(pods[i])) continue; /* going already: neither healthy nor still to be confirmed */
        const char *name = kite_meta_str(pods[i], "name");
        int64_t at = name ? disrupted_at(old_disrupted, name) : 0;
        if (at && at + KITE_PDB_DELETION_TIMEOUT_NS > now_ns) {
            /* evicted, its deletion not yet seen: counts as gone until the timeout */
            json_object_object_add(disrupted, name, json_object_get(kite_obj_get(old_disrupted, name)));
            if (!recheck || at + KITE_PDB_DELETION_TIMEOUT_NS < recheck) recheck = at + KITE_PDB_DELETION_TIMEOUT_NS;
            continue;
        }
        if (kite_pdb_pod_ready(pods[i])) current++;
    }
    int32_t expected, desired;
    if (kite_pdb_expected(pdb, matching, &expected, &desired) < 0) {
        json_object_put(disrupted);
        return NULL;
    }
    json_object *st = NULL;
    if (old) json_object_deep_copy(old, &st, NULL);
    else st = json_object_new_object();
    json_object *gen = kite_obj_get(kite_obj_meta(pdb), "generation");
    kite_obj_set(st, "observedGeneration", json_object_new_int64(gen ? json_object_get_int64(gen) : 0));
    if (json_object_object_length(disrupted)) kite_obj_set(st, "disruptedPods", disrupted);
    else {
        json_object_put(disrupted);
        json_object_object_del(st, "disruptedPods");
    }
    kite_obj_set(st, "disruptionsAllowed", json_object_new_int64(kite_pdb_allowed(current, desired, expected)));
    kite_obj_set(st, "currentHealthy", json_object_new_int64(current));
    kite_obj_set(st, "desiredHealthy", json_object_new_int64(desired));
    kite_obj_set(st, "expectedPods", json_object_new_int64(expected));
    kite_pdb_set_condition(st, now_ns);
    if (ret_recheck_ns) *ret_recheck_ns = recheck;
    return st;
}

/* A pod evicted but not deleted within the timeout: upstream's NotDeleted warning. */
static void not_deleted_events(struct kite_dc *d, json_object *pdb, json_object *const *pods, size_t n, int64_t now,
                               struct kite_ctl_acts *acts) {
    json_object *old_disrupted = kite_obj_get(kite_obj_get(pdb, "status"), "disruptedPods");
    if (!old_disrupted) return;
    for (size_t i = 0; i < n; i++) {
        const char *name = kite_meta_str(pods[i], "name");
        int64_t at = name ? disrupted_at(old_disrupted, name) : 0;
        if (!at || deleting(pods[i]) || at + KITE_PDB_DELETION_TIMEOUT_NS > now) continue;
        _cleanup_free_ char *msg = kite_asprintf("Pod was expected by PDB %s/%s to be deleted but it wasn't", ns_of(pdb),
                                                 kite_meta_str(pdb, "name"));
        kite_ctl_event(acts, d->o.clock, COMPONENT, "Pod", ns_of(pods[i]), name, kite_meta_str(pods[i], "uid"), "Warning",
                       "NotDeleted", msg);
    }
}

static void sync_one(struct kite_dc *d, const char *key, int64_t now, struct kite_ctl_acts *acts) {
    json_object *pdb = kite_map_get(&d->pdbs, key);
    if (!pdb) return;
    const char *ns = ns_of(pdb);
    size_t n = 0, cap = d->pods.len;
    json_object **pods = kite_calloc(cap ? cap : 1, sizeof *pods);
    const char *k;
    void *v;
    for (size_t i = 0; n < cap && kite_map_next(&d->pods, &i, &k, &v);)
        if (strcmp(ns_of(v), ns) == 0) pods[n++] = v;
    int64_t recheck = 0;
    json_object *st = kite_dc_status(pdb, pods, n, now, &recheck);
    if (st && !kite_json_equal(st, kite_obj_get(pdb, "status"))) {
        not_deleted_events(d, pdb, pods, n, now, acts);
        json_object *body = NULL;
        json_object_deep_copy(pdb, &body, NULL);
        kite_obj_set(body, "status", st);
        _cleanup_free_ char *path = kite_asprintf("/apis/policy/v1/namespaces/%s/poddisruptionbudgets/%s/status", ns,
                                                  kite_meta_str(pdb, "name"));
        kite_ctl_acts_add(acts, 1, key, "PUT", path, "application/json", body);
    } else {
        json_object_put(st);
    }
    if (recheck && (!d->recheck_ns || recheck < d->recheck_ns)) d->recheck_ns = recheck;
    free(pods);
}

static void written(void *ud, const struct kite_ctl_act *act, int e, json_object *answer) {
    struct kite_dc *d = ud;
    if (e == 0 || e == -ENOENT || e == -ESTALE || e == -EEXIST) return; /* done, gone, or a newer one is on its way */
    log_warn(LOG, "poddisruptionbudget %s: cannot update its status: %s (will retry)", act->key, strerror(-e));
    pthread_mutex_lock(&d->lock);
    kite_map_put(&d->failed, act->key, (void *)1);
    if (!d->retry_ns) d->retry_ns = kite_now_wall(d->o.clock) + RETRY_NS;
    pthread_mutex_unlock(&d->lock);
}

int64_t kite_dc_step(struct kite_dc *d) {
    struct kite_ctl_acts acts = {0};
    pthread_mutex_lock(&d->lock);
    int64_t now = kite_now_wall(d->o.clock);
    if (d->recheck_ns && now >= d->recheck_ns) {
        /* an eviction timed out: recompute every budget still naming evicted pods */
        d->recheck_ns = 0;
        const char *pk;
        void *pv;
        for (size_t i = 0; kite_map_next(&d->pdbs, &i, &pk, &pv);)
            if (kite_obj_get(kite_obj_get(pv, "status"), "disruptedPods")) kite_map_put(&d->dirty, pk, (void *)1);
    }
    const char *k;
    void *v;
    if (d->retry_ns && now >= d->retry_ns) {
        for (size_t i = 0; kite_map_next(&d->failed, &i, &k, &v);) kite_map_put(&d->dirty, k, (void *)1);
        kite_map_release(&d->failed);
        d->failed = (struct kite_map){0};
        d->retry_ns = 0;
    }
    struct kite_map dirty = d->dirty;
    d->dirty = (struct kite_map){0};
    for (size_t i = 0; kite_map_next(&dirty, &i, &k, &v);) sync_one(d, k, now, &acts);
    kite_map_release(&dirty);
    pthread_mutex_unlock(&d->lock);
    kite_ctl_acts_run(d->o.client, &acts, written, d);
    kite_ctl_acts_release(&acts);
    pthread_mutex_lock(&d->lock);
    int64_t next = KITE_DC_IDLE_NS;
    if (d->recheck_ns) next = KITE_MIN(next, KITE_MAX(d->recheck_ns - now, 0));
    if (d->retry_ns) next = KITE_MIN(next, KITE_MAX(d->retry_ns - now, 0));
    pthread_mutex_unlock(&d->lock);
    return next;
}

/* ---- on the framework: pods and PodDisruptionBudgets feed it ---- */
KITE_CTL_FEED(kite_dc_pod_upsert, struct kite_dc)
KITE_CTL_FEED(kite_dc_pod_delete, struct kite_dc)
KITE_CTL_FEED(kite_dc_pdb_upsert, struct kite_dc)
KITE_CTL_FEED(kite_dc_pdb_delete, struct kite_dc)
KITE_CTL_CORE(kite_dc, struct kite_dc)

int kite_dc_run(struct kite_ctl_group *g) {
    struct kite_dc_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/pods", .upsert = kite_dc_pod_upsert_feed, .del = kite_dc_pod_delete_feed},
        {.path = "/apis/policy/v1/poddisruptionbudgets", .upsert = kite_dc_pdb_upsert_feed, .del = kite_dc_pdb_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "disruption", .step = kite_dc_step_core, .pending = kite_dc_pending_core,
                                 .free = kite_dc_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_dc_new(&o));
}
