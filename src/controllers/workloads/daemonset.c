/* The DaemonSet controller's core (daemonset.h): caches of daemon sets, nodes and daemon pods
 * under one lock; a daemon set's sync works on copies taken under it and makes its requests
 * outside it, from the runner thread alone. */
#include "controllers/workloads/daemonset.h"
#include "api/registry.h"
#include "api/scheduling.h"
#include "base/log.h"
#include "base/map.h"
#include "client/informer.h"
#include "framework/framework.h"
#include "controllers/controllers.h"
#include "framework/ctlutil.h"
#include "framework/loop.h"
#include "framework/workqueue.h"
#include "controllers/workloads/wlutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define COMPONENT "daemonset-controller"
#define HASH_LABEL "controller-revision-hash"

/* ---- eligibility (pkg/controller/daemon/util, component-helpers nodeaffinity: api/scheduling.h) ---- */

bool kite_node_affinity_matches(json_object *pod, json_object *node) {
    return kite_pod_node_affinity_matches(pod, node, kite_meta_str(node, "name"));
}

bool kite_node_affinity_allows_name(json_object *pod, const char *node) { return kite_pod_node_affinity_matches(pod, NULL, node); }

bool kite_ds_should_run(json_object *pod, json_object *node, bool *ret_continue) {
    json_object *spec = kite_obj_get(pod, "spec");
    bool fits = kite_node_affinity_matches(pod, node);
    bool run = fits, stay = fits;
    json_object *taints = kite_obj_get(kite_obj_get(node, "spec"), "taints"), *tols = kite_obj_get(spec, "tolerations");
    for (size_t i = 0; i < kite_array_len(taints); i++) {
        json_object *t = json_object_array_get_idx(taints, i);
        const char *effect = kite_obj_str(t, "effect");
        if (kite_tolerations_find(tols, t)) continue;
        if (kite_streq(effect, "NoExecute")) run = stay = false;
        else if (kite_streq(effect, "NoSchedule")) run = false;
    }
    if (ret_continue) *ret_continue = stay;
    return run;
}

/* ---- the daemon pod ---- */

/* AddOrUpdateDaemonPodTolerations: what a daemon pod tolerates beyond its template's */
static const struct {
    const char *key, *effect;
    bool host_network_only;
} DAEMON_TOLERATIONS[] = {
    {"node.kubernetes.io/not-ready", "NoExecute", false},
    {"node.kubernetes.io/unreachable", "NoExecute", false},
    {"node.kubernetes.io/disk-pressure", "NoSchedule", false},
    {"node.kubernetes.io/memory-pressure", "NoSchedule", false},
    {"node.kubernetes.io/pid-pressure", "NoSchedule", false},
    {"node.kubernetes.io/unschedulable", "NoSchedule", false},
    {"node.kubernetes.io/network-unavailable", "NoSchedule", true},
};

static void add_tolerations(json_object *spec) {
    json_object *tols = kite_obj_get(spec, "tolerations");
    if (!tols || !json_object_is_type(tols, json_type_array)) {
        tols = json_object_new_array();
        kite_obj_set(spec, "tolerations", tols);
    }
    json_object *hn = kite_obj_get(spec, "hostNetwork");
    bool host_network = hn && json_object_get_boolean(hn);
    for (size_t i = 0; i < KITE_ARRAY_SIZE(DAEMON_TOLERATIONS); i++) {
        if (DAEMON_TOLERATIONS[i].host_network_only && !host_network) continue;
        bool have = false;
        for (size_t j = 0; j < kite_array_len(tols) && !have; j++) {
            json_object *t = json_object_array_get_idx(tols, j);
            have = kite_streq(kite_obj_str(t, "key"), DAEMON_TOLERATIONS[i].key) &&
                   kite_streq(kite_obj_str(t, "effect"), DAEMON_TOLERATIONS[i].effect);
        }
        if (have) continue;
        json_object *t = json_object_new_object();
        kite_obj_set(t, "key", json_object_new_string(DAEMON_TOLERATIONS[i].key));
        kite_obj_set(t, "operator", json_object_new_string("Exists"));
        kite_obj_set(t, "effect", json_object_new_string(DAEMON_TOLERATIONS[i].effect));
        json_object_array_add(tols, t);
    }
}

/* ReplaceDaemonSetPodNodeNameNodeAffinity: the required terms become the one field term */
static void pin(json_object *spec, const char *node) {
    json_object *aff = kite_obj_ensure(spec, "affinity"), *na = kite_obj_ensure(aff, "nodeAffinity");
    json_object *req = json_object_new_object(), *terms = json_object_new_array(), *term = json_object_new_object();
    json_object *fields = json_object_new_array(), *f = json_object_new_object(), *values = json_object_new_array();
    json_object_array_add(values, json_object_new_string(node));
    kite_obj_set(f, "key", json_object_new_string("metadata.name"));
    kite_obj_set(f, "operator", json_object_new_string("In"));
    kite_obj_set(f, "values", values);
    json_object_array_add(fields, f);
    kite_obj_set(term, "matchFields", fields);
    json_object_array_add(terms, term);
    kite_obj_set(req, "nodeSelectorTerms", terms);
    kite_obj_set(na, "requiredDuringSchedulingIgnoredDuringExecution", req);
}

json_object *kite_ds_new_pod(json_object *ds, const char *node, const char *hash) {
    json_object *pod = kite_wl_pod_from_template(kite_obj_get(kite_obj_get(ds, "spec"), "template"), ds, "apps/v1",
                                                 "DaemonSet", NULL);
    kite_obj_set(kite_obj_ensure(kite_obj_meta(pod), "labels"), HASH_LABEL, json_object_new_string(hash));
    json_object *spec = kite_obj_get(pod, "spec");
    add_tolerations(spec);
    pin(spec, node);
    return pod;
}

/* The template's hash (a stand-in for the ControllerRevision's name hash), 10 hex digits. */
static void template_hash(json_object *ds, char out[16]) {
    const char *t = json_object_to_json_string_ext(kite_obj_get(kite_obj_get(ds, "spec"), "template"),
                                                   JSON_C_TO_STRING_PLAIN);
    snprintf(out, 16, "%010llx", (unsigned long long)(kite_hash(t, strlen(t)) & 0xffffffffffULL));
}

/* ---- the core ---- */

struct dstate {
    json_object *ds;      /* own copy; NULL: gone */
    struct kite_wl_awaited created; /* node names a pod was created for, not yet seen */
};

struct kite_dsctl {
    struct kite_dsctl_options o;
    pthread_mutex_t lock;
    struct kite_map sets, nodes;       /* "ns/name" -> dstate; name -> node copy */
    struct kite_wl_cache pods;         /* the daemon pods */
    struct kite_wq q;                  /* the DaemonSets' keys */
    struct kite_ctl_keyed k;
};

static bool work(void *ud, const char *key, int64_t *again_ns);

struct kite_dsctl *kite_dsctl_new(const struct kite_dsctl_options *o) {
    struct kite_dsctl *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    if (!c->o.clock) c->o.clock = kite_clock_real();
    pthread_mutex_init(&c->lock, NULL);
    c->q.backoff_base_ns = KITE_DS_RETRY_NS;
    c->q.backoff_max_ns = KITE_DS_RETRY_MAX_NS;
    c->k = (struct kite_ctl_keyed){.lock = &c->lock, .wq = &c->q, .clock = c->o.clock, .ud = c, .work = work};
    return c;
}

static void dstate_free(struct dstate *s) {
    json_object_put(s->ds);
    kite_wl_names_release(&s->created.names);
    free(s);
}

void kite_dsctl_free(struct kite_dsctl *c) {
    if (!c) return;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&c->sets, &it, &k, &v);) dstate_free(v);
    for (size_t it = 0; kite_map_next(&c->nodes, &it, &k, &v);) json_object_put(v);
    kite_map_release(&c->sets);
    kite_map_release(&c->nodes);
    kite_wl_cache_release(&c->pods);
    kite_wq_release(&c->q);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void queue(struct kite_dsctl *c, const char *key) { kite_ctl_keyed_add(&c->k, key, 0); }

static struct dstate *state(struct kite_dsctl *c, const char *key) {
    return kite_wl_state(&c->sets, key, sizeof(struct dstate));
}


void kite_dsctl_ds_upsert(struct kite_dsctl *c, json_object *ds) {
    _cleanup_free_ char *key = kite_informer_key(ds);
    if (!key) return;
    pthread_mutex_lock(&c->lock);
    kite_wl_keep_copy(&state(c, key)->ds, ds);
    queue(c, key);
    pthread_mutex_unlock(&c->lock);
}

void kite_dsctl_ds_delete(struct kite_dsctl *c, json_object *ds) {
    _cleanup_free_ char *key = kite_informer_key(ds);
    if (!key) return;
    pthread_mutex_lock(&c->lock);
    struct dstate *s = kite_map_get(&c->sets, key);
    if (s) dstate_free(kite_map_del(&c->sets, key)); /* its pods are the garbage collector's */
    kite_wq_forget(&c->q, key);
    pthread_mutex_unlock(&c->lock);
}

static void all_sets(struct kite_dsctl *c) {
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&c->sets, &it, &k, &v);) queue(c, k);
}

/* what eligibility reads of a Node: the copy kept per node is that alone */
static const char *const NODE_MEMBERS[] = {"metadata.name", "metadata.labels", "spec.taints", NULL};

static void node_changed(struct kite_dsctl *c, json_object *node, bool gone) {
    const char *name = kite_meta_str(node, "name");
    if (!name) return;
    json_object *cut = gone ? NULL : kite_obj_project(node, NODE_MEMBERS), *own = gone ? NULL : kite_wl_copy(cut);
    json_object_put(cut);
    pthread_mutex_lock(&c->lock);
    json_object_put(gone ? kite_map_del(&c->nodes, name) : kite_map_put(&c->nodes, name, own));
    all_sets(c);
    pthread_mutex_unlock(&c->lock);
}
void kite_dsctl_node_upsert(struct kite_dsctl *c, json_object *node) { node_changed(c, node, false); }
void kite_dsctl_node_delete(struct kite_dsctl *c, json_object *node) { node_changed(c, node, true); }

static void pod_changed(struct kite_dsctl *c, json_object *pod, bool gone) {
    pthread_mutex_lock(&c->lock);
    _cleanup_free_ char *owner = kite_wl_cache_owned(&c->pods, pod, gone, "apps/v1", "DaemonSet");
    if (owner && kite_map_get(&c->sets, owner)) queue(c, owner);
    pthread_mutex_unlock(&c->lock);
}
void kite_dsctl_pod_upsert(struct kite_dsctl *c, json_object *pod) { pod_changed(c, pod, false); }
void kite_dsctl_pod_delete(struct kite_dsctl *c, json_object *pod) { pod_changed(c, pod, true); }

bool kite_dsctl_pending(struct kite_dsctl *c) { return kite_ctl_keyed_pending(&c->k); }

/* ---- one daemon set's sync (syncDaemonSet, manage, rollingUpdate, updateDaemonSetStatus) ---- */

struct sync {
    struct kite_dsctl *c;
    json_object *ds;
    json_object **nodes, **pods;
    size_t nnodes, npods;
    struct kite_wl_names created; /* in: awaited; out: to await */
    int64_t now, requeue;
    bool failed; /* a request failed: the set is synced again after its back-off */
    struct kite_ctl_acts events;
};

/* The node a daemon pod is for: where it is bound, else where it is pinned. */
static const char *pod_node(json_object *pod) {
    const char *n = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    if (n && *n) return n;
    json_object *terms = kite_obj_path(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
    for (size_t i = 0; i < kite_array_len(terms); i++) {
        json_object *fields = kite_obj_get(json_object_array_get_idx(terms, i), "matchFields");
        for (size_t j = 0; j < kite_array_len(fields); j++) {
            json_object *f = json_object_array_get_idx(fields, j), *vals = kite_obj_get(f, "values");
            if (kite_streq(kite_obj_str(f, "key"), "metadata.name") && kite_streq(kite_obj_str(f, "operator"), "In") &&
                kite_array_len(vals) == 1)
                return json_object_get_string(json_object_array_get_idx(vals, 0));
        }
    }
    return NULL;
}

static bool deleting(json_object *o) { return kite_meta_str(o, "deletionTimestamp") != NULL; }
static const char *phase(json_object *pod) {
    const char *p = kite_obj_str(kite_obj_get(pod, "status"), "phase");
    return p ? p : "";
}

/* Ready, and for minReadySeconds (IsPodAvailable); *wait: ns until it is, when not yet. */
static bool ready(json_object *pod) {
    json_object *cd = kite_ctl_condition(pod, "Ready");
    return cd && kite_streq(kite_obj_str(cd, "status"), "True");
}
static bool available(struct sync *s, json_object *pod, int64_t min_ready_s) {
    if (!ready(pod)) return false;
    if (min_ready_s <= 0) return true;
    const char *t = kite_obj_str(kite_ctl_condition(pod, "Ready"), "lastTransitionTime");
    int64_t since;
    if (!t || kite_time_parse(t, &since) < 0) return false;
    int64_t left = kite_time_add(since, kite_sec_to_ns(min_ready_s)) - s->now;
    if (left <= 0) return true;
    s->requeue = s->requeue < 0 ? left : KITE_MIN(s->requeue, left);
    return false;
}

static int delete_pod(struct sync *s, json_object *pod) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s", kite_meta_str(pod, "namespace"),
                                              kite_meta_str(pod, "name"));
    int e = kite_client_json(s->c->o.client, "DELETE", path, NULL, NULL, NULL, NULL);
    if (e == -ENOENT) e = 0;
    if (e == 0) {
        _cleanup_free_ char *msg = kite_asprintf("Deleted pod: %s", kite_meta_str(pod, "name"));
        kite_ctl_event(&s->events, s->c->o.clock, COMPONENT, "DaemonSet", kite_meta_str(s->ds, "namespace"),
                       kite_meta_str(s->ds, "name"), kite_meta_str(s->ds, "uid"), "Normal", "SuccessfulDelete", msg);
    }
    return e;
}

static int create_pod(struct sync *s, const char *node, const char *hash) {
    json_object *pod = kite_ds_new_pod(s->ds, node, hash), *answer = NULL;
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods", kite_meta_str(s->ds, "namespace"));
    int e = kite_client_json(s->c->o.client, "POST", path, NULL, pod, NULL, &answer);
    json_object_put(pod);
    if (e == 0) {
        kite_wl_names_add(&s->created, node);
        _cleanup_free_ char *msg = kite_asprintf("Created pod: %s", kite_meta_str(answer, "name") ? kite_meta_str(answer, "name") : "");
        kite_ctl_event(&s->events, s->c->o.clock, COMPONENT, "DaemonSet", kite_meta_str(s->ds, "namespace"),
                       kite_meta_str(s->ds, "name"), kite_meta_str(s->ds, "uid"), "Normal", "SuccessfulCreate", msg);
    }
    json_object_put(answer);
    return e;
}

/* An IntOrString scaled against total, rounded up (GetScaledValueFromIntOrPercent). */
static int64_t scaled(json_object *v, int64_t total, int64_t dflt) {
    if (!v) return dflt;
    if (json_object_is_type(v, json_type_int)) return json_object_get_int64(v);
    const char *str = json_object_get_string(v);
    char *end;
    long long pct = strtoll(str, &end, 10);
    if (end == str || strcmp(end, "%") != 0) return dflt;
    return (pct * total + 99) / 100;
}

struct per_node {
    json_object *node;
    bool run, stay;
    json_object *pods[8]; /* its daemon pods (more are deleted as extras) */
    size_t n;
};

static void sync_ds(struct sync *s) {
    char hash[16];
    template_hash(s->ds, hash);
    json_object *spec = kite_obj_get(s->ds, "spec");
    json_object *proto = kite_ds_new_pod(s->ds, "", hash); /* tolerations as the pods get them */
    struct per_node *pn = s->nnodes ? kite_calloc(s->nnodes, sizeof *pn) : NULL;
    /* the pin is each node's own: judge the template's affinity, with the daemon tolerations */
    json_object *na = kite_obj_get(kite_obj_get(kite_obj_get(proto, "spec"), "affinity"), "nodeAffinity");
    json_object *tmpl_na = kite_obj_get(kite_obj_get(kite_obj_get(kite_obj_get(spec, "template"), "spec"), "affinity"),
                                        "nodeAffinity");
    json_object *req = kite_obj_get(tmpl_na, "requiredDuringSchedulingIgnoredDuringExecution");
    if (req) kite_obj_set(na, "requiredDuringSchedulingIgnoredDuringExecution", kite_wl_copy(req));
    else json_object_object_del(na, "requiredDuringSchedulingIgnoredDuringExecution");
    for (size_t i = 0; i < s->nnodes; i++) {
        pn[i].node = s->nodes[i];
        pn[i].run = kite_ds_should_run(proto, s->nodes[i], &pn[i].stay);
    }
    json_object_put(proto);
    int ndeletes = 0;
    for (size_t i = 0; i < s->npods; i++) {
        json_object *p = s->pods[i];
        const char *node = pod_node(p);
        struct per_node *n = NULL;
        for (size_t j = 0; node && j < s->nnodes && !n; j++)
            if (kite_streq(kite_meta_str(s->nodes[j], "name"), node)) n = &pn[j];
        if (!n || deleting(p)) continue; /* a pod of a node gone is the pod GC's */
        if (n->n < KITE_ARRAY_SIZE(n->pods)) n->pods[n->n++] = p;
        else if (delete_pod(s, p) < 0) s->failed = true;
    }
    int64_t desired = 0, current = 0, misscheduled = 0, nready = 0, navailable = 0, updated = 0, unavailable_now = 0;
    int64_t min_ready = 0;
    json_object *mr = kite_obj_get(spec, "minReadySeconds");
    if (mr) min_ready = json_object_get_int64(mr);
    for (size_t i = 0; i < s->nnodes; i++) {
        struct per_node *n = &pn[i];
        const char *name = kite_meta_str(n->node, "name");
        if (!n->stay) { /* its pods may not stay: they go */
            if (n->n) misscheduled++;
            for (size_t j = 0; j < n->n; j++)
                if (delete_pod(s, n->pods[j]) < 0) s->failed = true;
            n->n = 0;
            continue;
        }
        /* a failed daemon pod is deleted and made again */
        size_t keep = 0;
        for (size_t j = 0; j < n->n; j++) {
            if (kite_streq(phase(n->pods[j]), "Failed")) {
                if (delete_pod(s, n->pods[j]) < 0) s->failed = true;
                ndeletes++;
            } else {
                n->pods[keep++] = n->pods[j];
            }
        }
        n->n = keep;
        for (; n->n > 1; n->n--) /* one per node: the extras go */
            if (delete_pod(s, n->pods[n->n - 1]) < 0) s->failed = true;
        if (!n->n && n->run && !kite_wl_names_has(&s->created, name) && create_pod(s, name, hash) < 0)
            s->failed = true;
        bool scheduled = n->n || kite_wl_names_has(&s->created, name);
        if (!n->run) { /* may stay, is not wanted (a NoSchedule taint came) */
            if (scheduled) misscheduled++;
            continue;
        }
        desired++;
        if (!scheduled) continue;
        current++;
        if (!n->n) { /* created, not seen yet */
            unavailable_now++;
            continue;
        }
        json_object *p = n->pods[0];
        if (kite_streq(kite_obj_str(kite_obj_get(kite_obj_meta(p), "labels"), HASH_LABEL), hash)) updated++;
        if (ready(p)) nready++;
        if (available(s, p, min_ready)) navailable++;
        else unavailable_now++;
    }
    /* rollingUpdate: old pods go while the unavailable stay within maxUnavailable */
    json_object *strategy = kite_obj_get(spec, "updateStrategy");
    if (kite_streq(kite_obj_str(strategy, "type"), "RollingUpdate")) {
        int64_t max_unavailable =
            scaled(kite_obj_get(kite_obj_get(strategy, "rollingUpdate"), "maxUnavailable"), desired, 1);
        if (max_unavailable < 1) max_unavailable = 1;
        int64_t budget = max_unavailable - unavailable_now;
        /* the unavailable old pods first: replacing them costs nothing */
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < s->nnodes; i++) {
                struct per_node *n = &pn[i];
                if (!n->n || !n->stay) continue;
                json_object *p = n->pods[0];
                if (kite_streq(kite_obj_str(kite_obj_get(kite_obj_meta(p), "labels"), HASH_LABEL), hash) || deleting(p))
                    continue;
                bool avail = available(s, p, min_ready);
                if (pass == 0 && avail) continue;
                if (pass == 1 && (!avail || budget <= 0)) continue;
                if (delete_pod(s, p) < 0) {
                    s->failed = true;
                    continue;
                }
                n->n = 0;
                if (pass == 1) budget--;
            }
    }
    free(pn);

    json_object *old = kite_obj_get(s->ds, "status"), *st = old ? kite_wl_copy(old) : json_object_new_object();
    static const char *const keys[] = {"desiredNumberScheduled", "currentNumberScheduled", "numberMisscheduled",
                                       "numberReady", "numberAvailable", "updatedNumberScheduled"};
    int64_t vals[] = {desired, current, misscheduled, nready, navailable, updated};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(keys); i++) kite_obj_set(st, keys[i], json_object_new_int64(vals[i]));
    if (desired - navailable > 0) kite_obj_set(st, "numberUnavailable", json_object_new_int64(desired - navailable));
    else json_object_object_del(st, "numberUnavailable");
    json_object *gen = kite_obj_get(kite_obj_meta(s->ds), "generation");
    if (gen) kite_obj_set(st, "observedGeneration", json_object_new_int64(json_object_get_int64(gen)));
    if (!kite_json_equal(st, old)) {
        json_object *body = kite_wl_copy(s->ds);
        kite_obj_set(body, "status", json_object_get(st));
        _cleanup_free_ char *path = kite_asprintf("/apis/apps/v1/namespaces/%s/daemonsets/%s/status",
                                                  kite_meta_str(s->ds, "namespace"), kite_meta_str(s->ds, "name"));
        if (kite_client_json(s->c->o.client, "PUT", path, NULL, body, NULL, NULL) < 0) s->failed = true;
        json_object_put(body);
    }
    json_object_put(st);
    if (ndeletes) s->requeue = s->requeue < 0 ? KITE_DS_FAILED_BACKOFF_NS : KITE_MIN(s->requeue, KITE_DS_FAILED_BACKOFF_NS);
}

static void snapshot(struct kite_dsctl *c, const char *key, struct dstate *ds, struct sync *s) {
    *s = (struct sync){.c = c, .now = kite_now_wall(c->o.clock), .requeue = -1};
    s->ds = kite_wl_copy(ds->ds);
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&c->nodes, &it, &k, &v);) {
        s->nodes = kite_realloc(s->nodes, (s->nnodes + 1) * sizeof *s->nodes);
        s->nodes[s->nnodes++] = kite_wl_copy(v);
    }
    const char *uid = kite_meta_str(ds->ds, "uid");
    for (size_t it = 0; kite_map_next(&c->pods.m, &it, &k, &v);) {
        _cleanup_free_ char *owner = kite_wl_controller_key(v, "apps/v1", "DaemonSet");
        if (!owner || strcmp(owner, key) != 0 || !kite_wl_owner_uid(v, uid)) continue;
        s->pods = kite_realloc(s->pods, (s->npods + 1) * sizeof *s->pods);
        s->pods[s->npods++] = kite_wl_copy(v);
    }
    /* a node whose created pod has been seen (or whose wait is over) is no longer awaited */
    kite_wl_awaited_expire(&ds->created, kite_now_mono(c->o.clock), KITE_DS_EXPECT_NS);
    for (size_t i = 0; i < ds->created.names.n; i++) {
        bool seen = false;
        for (size_t j = 0; j < s->npods && !seen; j++) seen = kite_streq(pod_node(s->pods[j]), ds->created.names.v[i]);
        if (!seen) kite_wl_names_add(&s->created, ds->created.names.v[i]);
    }
}

static void sync_release(struct sync *s) {
    json_object_put(s->ds);
    for (size_t i = 0; i < s->nnodes; i++) json_object_put(s->nodes[i]);
    for (size_t i = 0; i < s->npods; i++) json_object_put(s->pods[i]);
    free(s->nodes);
    free(s->pods);
    kite_wl_names_release(&s->created);
    kite_ctl_acts_release(&s->events);
}

/* One DaemonSet's pass (the keyed runner's work): what it needs taken under the lock, its
 * requests made without it, the nodes it awaits pods on kept under the lock again. */
static bool work(void *ud, const char *key, int64_t *again_ns) {
    struct kite_dsctl *c = ud;
    struct sync s;
    pthread_mutex_lock(&c->lock);
    struct dstate *ds = kite_map_get(&c->sets, key);
    if (!ds || !ds->ds) {
        pthread_mutex_unlock(&c->lock);
        return false;
    }
    snapshot(c, key, ds, &s);
    pthread_mutex_unlock(&c->lock);
    if (!deleting(s.ds)) sync_ds(&s);
    kite_ctl_acts_run(c->o.client, &s.events, NULL, NULL);
    pthread_mutex_lock(&c->lock);
    ds = kite_map_get(&c->sets, key);
    if (ds) {
        kite_wl_awaited_keep(&ds->created, &s.created, kite_now_mono(c->o.clock));
        *again_ns = s.requeue;
    }
    bool failed = ds && s.failed; /* a set gone meanwhile is not tried again */
    pthread_mutex_unlock(&c->lock);
    sync_release(&s);
    return failed;
}

int64_t kite_dsctl_step(struct kite_dsctl *c) { return kite_ctl_keyed_step(&c->k); }

/* ---- on the framework: DaemonSets, nodes and pods feed it ---- */
KITE_CTL_FEED(kite_dsctl_ds_upsert, struct kite_dsctl)
KITE_CTL_FEED(kite_dsctl_ds_delete, struct kite_dsctl)
KITE_CTL_FEED(kite_dsctl_node_upsert, struct kite_dsctl)
KITE_CTL_FEED(kite_dsctl_node_delete, struct kite_dsctl)
KITE_CTL_FEED(kite_dsctl_pod_upsert, struct kite_dsctl)
KITE_CTL_FEED(kite_dsctl_pod_delete, struct kite_dsctl)
KITE_CTL_CORE(kite_dsctl, struct kite_dsctl)

int kite_dsctl_run(struct kite_ctl_group *g) {
    struct kite_dsctl_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/apis/apps/v1/daemonsets", .upsert = kite_dsctl_ds_upsert_feed, .del = kite_dsctl_ds_delete_feed},
        {.path = "/api/v1/nodes", .project = kite_ctl_node_members, .upsert = kite_dsctl_node_upsert_feed, .del = kite_dsctl_node_delete_feed},
        {.path = "/api/v1/pods", .upsert = kite_dsctl_pod_upsert_feed, .del = kite_dsctl_pod_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "daemonset-ctl", .step = kite_dsctl_step_core, .pending = kite_dsctl_pending_core,
                                 .free = kite_dsctl_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_dsctl_new(&o));
}
