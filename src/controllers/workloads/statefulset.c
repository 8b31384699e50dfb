/* The StatefulSet controller (statefulset.h). */
#include "controllers/workloads/statefulset.h"
#include "api/registry.h"
#include "base/log.h"
#include "controllers/controllers.h"
#include "framework/ctlutil.h"
#include "framework/framework.h"
#include "framework/workqueue.h"
#include "controllers/workloads/wlutil.h"
#include "json/patch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define LOG "statefulset"
#define COMPONENT "statefulset-controller"
#define REVISION_LABEL "controller-revision-hash"
#define HASH_LABEL "controller.kubernetes.io/hash"


enum { ACT_CREATE, ACT_DELETE, ACT_STATUS, ACT_ADOPT, ACT_REVISION };

struct kite_statefulsets {
    struct kite_stsctl_options o;
    pthread_mutex_t lock;
    struct kite_wl_cache pods, sets, revs;
    struct kite_wq q;
    struct kite_ctl_keyed k;
};

static void enqueue(struct kite_statefulsets *c, const char *key) { kite_wq_add(&c->q, key, kite_now_mono(c->o.clock)); }

/* The StatefulSet key a pod's controller reference names, or NULL (malloc'ed). */
static char *owner_key(json_object *pod) { return kite_wl_controller_key(pod, "apps/v1", "StatefulSet"); }

static int64_t ordinal_of(const char *set, const char *pod);

/* A pod a StatefulSet may adopt (ClaimPods with isMemberOf): no controller, not being deleted,
 * named SET-N and selected by the set's selector, in its namespace. */
static bool adoptable(json_object *set, json_object *pod) {
    return !kite_wl_controller_ref(pod) && !kite_wl_deleting(pod) && !kite_wl_deleting(set) &&
           kite_streq(kite_meta_str(pod, "namespace"), kite_meta_str(set, "namespace")) &&
           ordinal_of(kite_meta_str(set, "name"), kite_meta_str(pod, "name")) >= 0 &&
           kite_label_selector_json_matches(kite_obj_get(kite_obj_get(set, "spec"), "selector"),
                                            kite_obj_get(kite_obj_meta(pod), "labels"));
}

static void pod_upsert(struct kite_statefulsets *c, json_object *pod, bool del) {
    pthread_mutex_lock(&c->lock);
    json_object *old = del ? kite_wl_cache_del(&c->pods, pod) : kite_wl_cache_put_cut(&c->pods, pod, kite_wl_pod_members);
    _cleanup_free_ char *key = owner_key(pod);
    if (key) enqueue(c, key);
    else if (!del) { /* an orphan: the set it is a member of may adopt it */
        const char *k;
        void *v;
        for (size_t i = 0; kite_map_next(&c->sets.m, &i, &k, &v);)
            if (adoptable(v, pod)) enqueue(c, k);
    }
    json_object_put(old);
    pthread_mutex_unlock(&c->lock);
}
static void pod_add(void *ud, json_object *o, uintptr_t tag) { pod_upsert(ud, o, false); }
static void pod_del(void *ud, json_object *o, uintptr_t tag) { pod_upsert(ud, o, true); }
void kite_stsctl_pod_upsert(struct kite_statefulsets *c, json_object *pod) { pod_upsert(c, pod, false); }

static void set_upsert(struct kite_statefulsets *c, json_object *set, bool del) {
    pthread_mutex_lock(&c->lock);
    json_object_put(del ? kite_wl_cache_del(&c->sets, set) : kite_wl_cache_put(&c->sets, set));
    _cleanup_free_ char *key = kite_wl_key(kite_meta_str(set, "namespace"), kite_meta_str(set, "name"));
    if (del) kite_wq_forget(&c->q, key);
    else enqueue(c, key);
    pthread_mutex_unlock(&c->lock);
}
static void set_add(void *ud, json_object *o, uintptr_t tag) { set_upsert(ud, o, false); }
void kite_stsctl_set_upsert(struct kite_statefulsets *c, json_object *set) { set_upsert(c, set, false); }

/* ControllerRevisions: the set that controls one looks again (its history changed) */
static void rev_upsert(struct kite_statefulsets *c, json_object *rev, bool del) {
    pthread_mutex_lock(&c->lock);
    json_object *old = del ? kite_wl_cache_del(&c->revs, rev) : kite_wl_cache_put(&c->revs, rev);
    _cleanup_free_ char *key = owner_key(rev);
    if (key && kite_wl_cache_get(&c->sets, key)) enqueue(c, key);
    json_object_put(old);
    pthread_mutex_unlock(&c->lock);
}
static void rev_add(void *ud, json_object *o, uintptr_t tag) { rev_upsert(ud, o, false); }
static void rev_del(void *ud, json_object *o, uintptr_t tag) { rev_upsert(ud, o, true); }
void kite_stsctl_rev_upsert(struct kite_statefulsets *c, json_object *rev) { rev_upsert(c, rev, false); }
static void set_del(void *ud, json_object *o, uintptr_t tag) { set_upsert(ud, o, true); }

/* A revision's data, as upstream's getPatch: {"spec":{"template":{...,"$patch":"replace"}}},
 * the strategic merge patch kubectl rollout undo sends back. As Go's json.Marshal of a map
 * writes it (keys sorted, the template's "creationTimestamp":null), so that kubectl finds a
 * template equal to it byte for byte ("skipped rollback"). */
static json_object *revision_data(json_object *set) {
    json_object *tmpl = kite_wl_copy(kite_obj_get(kite_obj_get(set, "spec"), "template"));
    if (!tmpl) tmpl = json_object_new_object();
    json_object *tmeta = kite_obj_get(tmpl, "metadata");
    if (!tmeta) kite_obj_set(tmpl, "metadata", tmeta = json_object_new_object());
    if (!json_object_object_get_ex(tmeta, "creationTimestamp", NULL)) json_object_object_add(tmeta, "creationTimestamp", NULL);
    kite_obj_set(tmpl, "$patch", json_object_new_string("replace"));
    json_object *spec = json_object_new_object(), *data = json_object_new_object();
    kite_obj_set(spec, "template", tmpl);
    kite_obj_set(data, "spec", spec);
    struct kite_buf b = {0};
    kite_wl_canonical(data, &b);
    json_object *sorted = json_tokener_parse(b.p);
    kite_buf_release(&b);
    if (!sorted) return data;
    json_object_put(data);
    return sorted;
}

/* The revision's hash (HashControllerRevision): FNV-32a of the data (keys sorted) followed, when
 * collision_count > 0, by its decimal text, through rand.SafeEncodeString, as
 * controller.kubernetes.io/hash and the revision's name carry it. */
static char *revision_hash(json_object *data, int64_t collision_count) {
    char h[16], cc[24];
    int n = collision_count > 0 ? snprintf(cc, sizeof cc, "%lld", (long long)collision_count) : 0;
    kite_wl_hash(data, cc, (size_t)n, h);
    return kite_strdup(h);
}

static int64_t rev_number(json_object *rev) {
    json_object *v = kite_obj_get(rev, "revision");
    return v ? json_object_get_int64(v) : 0;
}

static int cmp_rev(const void *a, const void *b) {
    int64_t x = rev_number(*(json_object *const *)a), y = rev_number(*(json_object *const *)b);
    if (x != y) return x < y ? -1 : 1;
    return strcmp(kite_meta_str(*(json_object *const *)a, "name"), kite_meta_str(*(json_object *const *)b, "name"));
}

/* The ordinal of a pod named NAME-N, or -1. */
static int64_t ordinal_of(const char *set, const char *pod) {
    if (!set || !pod) return -1;
    size_t n = strlen(set);
    if (strncmp(pod, set, n) != 0 || pod[n] != '-' || !pod[n + 1]) return -1;
    char *end;
    long long v = strtoll(pod + n + 1, &end, 10);
    return *end || v < 0 || (pod[n + 1] == '0' && pod[n + 2]) ? -1 : v;
}

static bool running_ready(json_object *pod) {
    return kite_streq(kite_obj_str(kite_obj_get(pod, "status"), "phase"), "Running") && kite_wl_pod_ready(pod, NULL) &&
           !kite_wl_deleting(pod);
}

static bool terminal(json_object *pod) {
    const char *ph = kite_obj_str(kite_obj_get(pod, "status"), "phase");
    return kite_streq(ph, "Failed") || kite_streq(ph, "Succeeded");
}

static const char *revision_label(json_object *pod) {
    const char *r = kite_obj_str(kite_obj_get(kite_obj_meta(pod), "labels"), REVISION_LABEL);
    return r ? r : "";
}


/* A pod of the set from template tmpl (the update revision's or, below the partition, the
 * current one's), labelled with that revision. */
static json_object *new_pod(json_object *set, json_object *tmpl, int64_t ord, const char *rev) {
    _cleanup_free_ char *name = kite_asprintf("%s-%lld", kite_meta_str(set, "name"), (long long)ord);
    _cleanup_free_ char *idx = kite_asprintf("%lld", (long long)ord);
    json_object *pod = kite_wl_pod_from_template(tmpl, set, "apps/v1", "StatefulSet", name);
    json_object *labels = kite_obj_ensure(kite_obj_meta(pod), "labels");
    kite_obj_set(labels, "statefulset.kubernetes.io/pod-name", json_object_new_string(name));
    kite_obj_set(labels, "apps.kubernetes.io/pod-index", json_object_new_string(idx));
    kite_obj_set(labels, REVISION_LABEL, json_object_new_string(rev));
    /* the stable network identity: hostname NAME-N in the governing Service's subdomain */
    json_object *spec = kite_obj_get(pod, "spec");
    kite_obj_set(spec, "hostname", json_object_new_string(name));
    const char *svc = kite_obj_str(kite_obj_get(set, "spec"), "serviceName");
    if (svc && *svc) kite_obj_set(spec, "subdomain", json_object_new_string(svc));
    return pod;
}

static void set_int(json_object *o, const char *k, int64_t v) { kite_obj_set(o, k, json_object_new_int64(v)); }

static void delete_pod(struct kite_ctl_acts *acts, const char *key, json_object *pod) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s", kite_meta_str(pod, "namespace"),
                                              kite_meta_str(pod, "name"));
    kite_ctl_acts_add(acts, ACT_DELETE, key, "DELETE", path, NULL, NULL);
}

/* Plans one StatefulSet's pass (statefulset.h); *next_ns: when to look again (minReadySeconds). */
static void sync(struct kite_statefulsets *c, const char *key, struct kite_ctl_acts *acts, int64_t *next_ns) {
    json_object *set = kite_wl_cache_get(&c->sets, key);
    if (!set || kite_wl_deleting(set)) return;
    const char *ns = kite_meta_str(set, "namespace"), *name = kite_meta_str(set, "name"), *uid = kite_meta_str(set, "uid");
    json_object *spec = kite_obj_get(set, "spec"), *strategy = kite_obj_get(spec, "updateStrategy");
    int64_t replicas = kite_wl_int(set, "spec", "replicas"), min_ready = kite_wl_int(set, "spec", "minReadySeconds");
    bool parallel = kite_streq(kite_obj_str(spec, "podManagementPolicy"), "Parallel");
    bool rolling = !kite_streq(kite_obj_str(strategy, "type"), "OnDelete");
    json_object *pv = kite_obj_get(kite_obj_get(strategy, "rollingUpdate"), "partition");
    int64_t partition = pv && json_object_is_type(pv, json_type_int) ? json_object_get_int64(pv) : 0;
    _cleanup_free_ char *pods_path = kite_asprintf("/api/v1/namespaces/%s/pods", ns);
    json_object *tmpl = kite_obj_get(spec, "template"), *current_tmpl = tmpl;

    const char *k;
    void *v;
    /* the set's history (getStatefulSetRevisions): the revisions it controls, oldest first */
    size_t nrevs = 0, revcap = 4;
    json_object **revs = kite_calloc(revcap, sizeof *revs);
    for (size_t i = 0; kite_map_next(&c->revs.m, &i, &k, &v);) {
        json_object *ref = kite_wl_controller_ref(v);
        if (!kite_streq(kite_meta_str(v, "namespace"), ns)) continue;
        if (!ref && !kite_wl_deleting(v) &&
            kite_label_selector_json_matches(kite_obj_get(spec, "selector"), kite_obj_get(kite_obj_meta(v), "labels"))) {
            /* an orphaned revision the set selects (its set deleted with --cascade=orphan and made
             * again): adopted, as ClaimControllerRevisions */
            json_object *patch = kite_wl_owner_patch(v, kite_wl_new_controller_ref("apps/v1", "StatefulSet", set));
            _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/controllerrevisions/%s", ns,
                                                      kite_meta_str(v, "name"));
            kite_ctl_acts_add(acts, ACT_REVISION, key, "PATCH", path, "application/strategic-merge-patch+json", patch);
        } else if (!ref || !kite_streq(kite_obj_str(ref, "uid"), uid)) {
            continue;
        }
        if (nrevs == revcap) revs = kite_realloc(revs, (revcap *= 2) * sizeof *revs);
        revs[nrevs++] = v;
    }
    qsort(revs, nrevs, sizeof *revs, cmp_rev);
    int64_t next_number = nrevs ? rev_number(revs[nrevs - 1]) + 1 : 1;
    json_object *data = revision_data(set), *equal = NULL;
    int64_t collision_count = kite_wl_int(set, "status", "collisionCount");
    for (size_t i = 0; i < nrevs; i++)
        if (kite_json_equal(kite_obj_get(revs[i], "data"), data)) equal = revs[i];
    char *update_rev;
    if (equal && equal == revs[nrevs - 1]) { /* unchanged */
        update_rev = kite_strdup(kite_meta_str(equal, "name"));
        json_object_put(data);
    } else if (equal) { /* back to an older template: that revision becomes the newest */
        update_rev = kite_strdup(kite_meta_str(equal, "name"));
        json_object *patch = json_object_new_object();
        kite_obj_set(patch, "revision", json_object_new_int64(next_number));
        _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/controllerrevisions/%s", ns, update_rev);
        kite_ctl_acts_add(acts, ACT_REVISION, key, "PATCH", path, "application/merge-patch+json", patch);
        json_object_put(data);
    } else { /* a new revision, named SET-HASH, labelled as the template, annotated as the set */
        _cleanup_free_ char *hash = revision_hash(data, collision_count);
        update_rev = kite_asprintf("%s-%s", name, hash);
        /* CreateControllerRevision: a revision of that name with other data (not this set's
         * history) is a collision: collisionCount goes up and the name is hashed again; one
         * with the same data is the update revision */
        json_object *taken;
        for (;;) {
            _cleanup_free_ char *rk = kite_wl_key(ns, update_rev);
            taken = kite_wl_cache_get(&c->revs, rk);
            if (!taken || kite_json_equal(kite_obj_get(taken, "data"), data)) break;
            free(update_rev);
            _cleanup_free_ char *again = revision_hash(data, ++collision_count);
            update_rev = kite_asprintf("%s-%s", name, again);
        }
        if (taken) {
            json_object_put(data);
        } else {
            json_object *rev = json_object_new_object(), *meta = json_object_new_object();
            kite_obj_set(rev, "apiVersion", json_object_new_string("apps/v1"));
            kite_obj_set(rev, "kind", json_object_new_string("ControllerRevision"));
            kite_obj_set(meta, "name", json_object_new_string(update_rev));
            kite_obj_set(meta, "namespace", json_object_new_string(ns));
            json_object *labels = kite_wl_copy(kite_obj_get(kite_obj_meta(tmpl), "labels"));
            if (!labels) labels = json_object_new_object();
            kite_obj_set(labels, HASH_LABEL, json_object_new_string(hash)); /* as NewControllerRevision named it */
            kite_obj_set(meta, "labels", labels);
            json_object *ann = kite_wl_copy(kite_obj_get(kite_obj_meta(set), "annotations"));
            if (ann) kite_obj_set(meta, "annotations", ann);
            kite_wl_set_controller_ref(meta, "apps/v1", "StatefulSet", set);
            kite_obj_set(rev, "metadata", meta);
            kite_obj_set(rev, "data", data);
            kite_obj_set(rev, "revision", json_object_new_int64(next_number));
            _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/controllerrevisions", ns);
            kite_ctl_acts_add(acts, ACT_REVISION, key, "POST", path, NULL, rev);
        }
    }
    /* the current revision: status.currentRevision while the history holds it, else the update's */
    const char *cur = kite_obj_str(kite_obj_get(set, "status"), "currentRevision");
    json_object *cur_obj = NULL;
    for (size_t i = 0; cur && i < nrevs; i++)
        if (kite_streq(kite_meta_str(revs[i], "name"), cur)) cur_obj = revs[i];
    _cleanup_free_ char *current_rev = kite_strdup(cur_obj ? cur : update_rev);
    json_object *cur_tmpl = cur_obj ? kite_obj_get(kite_obj_get(kite_obj_get(cur_obj, "data"), "spec"), "template") : NULL;
    json_object *cur_copy = NULL;
    if (cur_tmpl && !kite_streq(current_rev, update_rev)) {
        cur_copy = kite_wl_copy(cur_tmpl);
        json_object_object_del(cur_copy, "$patch");
        current_tmpl = cur_copy;
    }

    /* the set's pods by ordinal: [0, replicas) wanted, the rest condemned */
    size_t cap = (size_t)replicas + 1, ncond = 0;
    json_object **want = kite_calloc(cap, sizeof *want), **condemned = kite_calloc(1, sizeof *condemned);
    size_t condcap = 1;
    int64_t count = 0, ready = 0, available = 0, current = 0, updated = 0;
    for (size_t i = 0; kite_map_next(&c->pods.m, &i, &k, &v);) {
        json_object *pod = v, *ref = kite_wl_controller_ref(pod);
        if (!ref && adoptable(set, pod)) { /* adopted (its ownerReferences patched), and counted as the set's */
            /* pinned to this pod by its uid, not a namesake */
            json_object *patch = kite_wl_owner_patch(pod, kite_wl_new_controller_ref("apps/v1", "StatefulSet", set));
            _cleanup_free_ char *path = kite_asprintf("%s/%s", pods_path, kite_meta_str(pod, "name"));
            kite_ctl_acts_add(acts, ACT_ADOPT, key, "PATCH", path, "application/strategic-merge-patch+json", patch);
        } else if (!kite_streq(kite_meta_str(pod, "namespace"), ns) || !ref || !kite_streq(kite_obj_str(ref, "uid"), uid)) {
            continue;
        }
        int64_t ord = ordinal_of(name, kite_meta_str(pod, "name"));
        if (ord < 0) continue;
        count++;
        if (running_ready(pod)) ready++;
        int64_t wait = -1;
        if (running_ready(pod) && kite_wl_pod_available(pod, min_ready, kite_now_wall(c->o.clock), &wait)) available++;
        kite_wl_min(next_ns, wait);
        if (kite_streq(revision_label(pod), current_rev)) current++;
        if (kite_streq(revision_label(pod), update_rev)) updated++;
        if (ord < replicas) {
            want[ord] = pod;
        } else {
            if (ncond == condcap) condemned = kite_realloc(condemned, (condcap *= 2) * sizeof *condemned);
            condemned[ncond++] = pod;
        }
    }

    bool blocked = false; /* OrderedReady: a pod not Running and Ready holds the later ones back */
    for (int64_t ord = 0; ord < replicas; ord++) {
        json_object *pod = want[ord];
        if (pod && terminal(pod) && !kite_wl_deleting(pod)) { /* failed: made again once gone */
            delete_pod(acts, key, pod);
            pod = NULL;
            if (!parallel) {
                blocked = true;
                break;
            }
            continue;
        }
        if (!pod) {
            /* newVersionedStatefulSetPod: below the partition (RollingUpdate), or below
             * currentReplicas (OnDelete), a pod is made again at the current revision */
            bool old = rolling ? ord < partition : ord < kite_wl_int(set, "status", "currentReplicas");
            json_object *np = old ? new_pod(set, current_tmpl, ord, current_rev) : new_pod(set, tmpl, ord, update_rev);
            kite_ctl_acts_add(acts, ACT_CREATE, key, "POST", pods_path, NULL, np);
            if (!parallel) {
                blocked = true;
                break;
            }
            continue;
        }
        if (!running_ready(pod) && !parallel) {
            blocked = true;
            break;
        }
    }

    /* the condemned: all at once (Parallel), else the highest first, one at a time, once every
     * wanted pod is Running and Ready */
    bool any_deleting = false;
    for (size_t i = 0; i < ncond; i++) any_deleting |= kite_wl_deleting(condemned[i]);
    if (parallel) {
        for (size_t i = 0; i < ncond; i++)
            if (!kite_wl_deleting(condemned[i])) delete_pod(acts, key, condemned[i]);
    } else if (!blocked && !any_deleting && ncond) {
        size_t hi = 0;
        for (size_t i = 1; i < ncond; i++)
            if (ordinal_of(name, kite_meta_str(condemned[i], "name")) > ordinal_of(name, kite_meta_str(condemned[hi], "name")))
                hi = i;
        delete_pod(acts, key, condemned[hi]);
        blocked = true;
    }

    /* RollingUpdate: with every wanted pod Running and Ready, the highest-ordinal pod at or
     * above the partition still on another revision is replaced */
    bool all_ready = true;
    for (int64_t ord = 0; ord < replicas; ord++) all_ready &= want[ord] && running_ready(want[ord]);
    if (rolling && !blocked && all_ready && !any_deleting) {
        for (int64_t ord = replicas - 1; ord >= partition && ord >= 0; ord--) {
            if (!kite_streq(revision_label(want[ord]), update_rev)) {
                delete_pod(acts, key, want[ord]);
                break;
            }
        }
    }
    /* truncateHistory: revisions neither current, nor the update's, nor any pod's, beyond
     * revisionHistoryLimit, the oldest first */
    int64_t limit = kite_obj_get(spec, "revisionHistoryLimit") ? kite_wl_int(set, "spec", "revisionHistoryLimit") : 10;
    size_t nhist = 0;
    for (size_t i = 0; i < nrevs; i++) {
        const char *rn = kite_meta_str(revs[i], "name");
        bool live = kite_streq(rn, current_rev) || kite_streq(rn, update_rev);
        for (size_t j = 0; !live && j < (size_t)replicas; j++) live = want[j] && kite_streq(revision_label(want[j]), rn);
        for (size_t j = 0; !live && j < ncond; j++) live = kite_streq(revision_label(condemned[j]), rn);
        if (!live) revs[nhist++] = revs[i];
    }
    for (size_t i = 0; limit >= 0 && (int64_t)nhist > limit && i < nhist - (size_t)limit; i++) {
        _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/controllerrevisions/%s", ns,
                                                  kite_meta_str(revs[i], "name"));
        kite_ctl_acts_add(acts, ACT_REVISION, key, "DELETE", path, NULL, NULL);
    }
    free(revs);
    json_object_put(cur_copy);
    free(want);
    free(condemned);

    /* the update is complete once every wanted pod runs the new revision */
    const char *status_current = current_rev;
    if (updated == replicas && count == replicas) status_current = update_rev, current = updated;
    json_object *st = kite_obj_get(set, "status");
    int64_t gen = kite_wl_int(set, "metadata", "generation");
    if (!st || kite_wl_int(set, "status", "replicas") != count || kite_wl_int(set, "status", "readyReplicas") != ready ||
        kite_wl_int(set, "status", "availableReplicas") != available ||
        kite_wl_int(set, "status", "currentReplicas") != current || kite_wl_int(set, "status", "updatedReplicas") != updated ||
        kite_wl_int(set, "status", "observedGeneration") != gen ||
        !kite_streq(kite_obj_str(st, "currentRevision"), status_current) ||
        !kite_streq(kite_obj_str(st, "updateRevision"), update_rev) || !kite_obj_get(st, "collisionCount") ||
        kite_wl_int(set, "status", "collisionCount") != collision_count) {
        json_object *patch = json_object_new_object(), *s = json_object_new_object();
        set_int(s, "observedGeneration", gen);
        set_int(s, "replicas", count);
        set_int(s, "readyReplicas", ready);
        set_int(s, "availableReplicas", available);
        set_int(s, "currentReplicas", current);
        set_int(s, "updatedReplicas", updated);
        kite_obj_set(s, "currentRevision", json_object_new_string(status_current));
        kite_obj_set(s, "updateRevision", json_object_new_string(update_rev));
        set_int(s, "collisionCount", collision_count);
        kite_obj_set(patch, "status", s);
        _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/statefulsets/%s/status", ns, name);
        kite_ctl_acts_add(acts, ACT_STATUS, key, "PATCH", path, "application/merge-patch+json", patch);
    }
    free(update_rev);
}

static void plan(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns) {
    sync(ud, key, acts, again_ns);
}

static bool heard(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events) {
    struct kite_statefulsets *c = ud;
    const char *slash = strchr(a->key, '/');
    _cleanup_free_ char *ns = kite_strndup(a->key, slash ? (size_t)(slash - a->key) : 0);
    const char *set = slash ? slash + 1 : a->key;
    pthread_mutex_lock(&c->lock);
    json_object *obj = kite_wl_cache_get(&c->sets, a->key);
    _cleanup_free_ char *uid = obj ? kite_strdup(kite_meta_str(obj, "uid")) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (a->kind == ACT_CREATE && e == 0) {
        _cleanup_free_ char *msg = kite_asprintf("create Pod %s in StatefulSet %s successful", kite_meta_str(answer, "name"), set);
        kite_ctl_event(events, c->o.clock, COMPONENT, "StatefulSet", ns, set, uid, "Normal", "SuccessfulCreate", msg);
    } else if (a->kind == ACT_CREATE && e != -EEXIST) {
        _cleanup_free_ char *msg = kite_asprintf("create Pod %s in StatefulSet %s failed error: %s",
                                                 kite_meta_str(a->body, "name"), set, strerror(-e));
        kite_ctl_event(events, c->o.clock, COMPONENT, "StatefulSet", ns, set, uid, "Warning", "FailedCreate", msg);
    } else if (a->kind == ACT_DELETE && e == 0) {
        _cleanup_free_ char *msg = kite_asprintf("delete Pod %s in StatefulSet %s successful", strrchr(a->path, '/') + 1, set);
        kite_ctl_event(events, c->o.clock, COMPONENT, "StatefulSet", ns, set, uid, "Normal", "SuccessfulDelete", msg);
    }
    /* a revision name taken meanwhile (the cache behind): the next pass sees it and hashes again */
    if (a->kind == ACT_REVISION && e == -EEXIST) return true;
    /* a pod that exists already (a cache behind its create) or is gone already is no failure */
    if (e < 0 && e != -ENOENT && e != -EEXIST) {
        log_debug(LOG, "%s %s: %s", a->method, a->path, strerror(-e));
        return true;
    }
    return false;
}

int64_t kite_stsctl_step(struct kite_statefulsets *c) { return kite_ctl_keyed_step(&c->k); }
static int64_t step(void *ud) { return kite_stsctl_step(ud); }
static bool pending(void *ud) { return kite_ctl_keyed_pending(&((struct kite_statefulsets *)ud)->k); }

void kite_stsctl_free(struct kite_statefulsets *c) {
    if (!c) return;
    kite_wl_cache_release(&c->pods);
    kite_wl_cache_release(&c->sets);
    kite_wl_cache_release(&c->revs);
    kite_wq_release(&c->q);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
static void free_core(void *ud) { kite_stsctl_free(ud); }

struct kite_statefulsets *kite_stsctl_new(const struct kite_stsctl_options *o) {
    struct kite_statefulsets *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    if (!c->o.clock) c->o.clock = kite_clock_real();
    c->q.backoff_max_ns = KITE_STS_RETRY_MAX_NS;
    pthread_mutex_init(&c->lock, NULL);
    c->k = (struct kite_ctl_keyed){.lock = &c->lock, .wq = &c->q, .clock = c->o.clock, .client = c->o.client, .ud = c,
                                   .plan = plan, .heard = heard};
    return c;
}

int kite_stsctl_run(struct kite_ctl_group *g) {
    struct kite_stsctl_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/apis/apps/v1/statefulsets", .upsert = set_add, .del = set_del},
        {.path = "/api/v1/pods", .upsert = pod_add, .del = pod_del},
        {.path = "/apis/apps/v1/controllerrevisions", .upsert = rev_add, .del = rev_del},
    };
    struct kite_ctl_spec spec = {.name = "statefulset", .step = step, .pending = pending, .free = free_core,
                                 .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_stsctl_new(&o));
}
