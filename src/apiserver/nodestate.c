/* The divergence report's server side (api/nodestate.h has the states).
 *
 * Why here and not in a controller: one of the states, OrphanMachine (a node credential
 * calling while its Node does not exist), is seen only by the API server, which authenticates
 * the identity; the others are read from the Node, its Lease and its pods, which the server
 * holds in its watch caches anyway. So the server keeps a small table of the node identities
 * that called it (system:node:NAME -> first and last call, and what it was), updated on every
 * authenticated request of such an identity (one lock, one hash lookup), and computes the
 * states from that table and the watch caches: every KITE_NODE_STATE_PERIOD_S on the
 * housekeeping thread (kept for /metrics as kite_node_state{node,state} 1, and an event on the
 * Node, from "kite-apiserver", whenever a node's state changes), and on demand for
 * GET /debug/kite/nodes, which `kite nodes` prints. Judged on this server's clock. With
 * several API servers each sees the identities that call it, so an identity calling with no
 * Node is published: a Lease kite-node-identities/NAME (holderIdentity system:node:NAME,
 * acquireTime its first call, renewTime its last, the call in an annotation), created at the
 * first such call and renewed at most every KITE_NODE_IDENTITY_RENEW_NS while it keeps calling,
 * by the housekeeping pass; every server merges those Leases from its watch cache, ignores one
 * once the Node exists, and deletes it then, or once the identity has not called for the stale
 * threshold (--node-stale-after). This is the one place in the API server that
 * names kinds (nodes, leases, pods, events), by registry lookups. */
#include "api/events.h"
#include "apiserver/internal.h"
#include "json/scan.h"
#include "api/nodestate.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/map.h"

#include <stdio.h>

#define NODE_PREFIX "system:node:"
#define KITE_NODESEEN_MAX 100000 /* identities remembered; past it, new ones are not (counted) */
#define IDENTITY_NS "kite-node-identities" /* the published identities' Leases */
#define IDENTITY_WHAT "kite.io/last-call"
#define KITE_NODE_IDENTITY_RENEW_NS (10LL * KITE_NS_PER_SEC) /* a published last call's lag, at most */

struct seen {
    int64_t first, last;
    int64_t published; /* the last call the identity's Lease carries (0: none written) */
    bool queued;       /* in the publish queue */
    char what[160];
};
/* One name's kept state: its Node and Lease as the watch caches last told (references), what
 * the last pass's classification said, and when time alone could change that. */
struct prev {
    char *name;
    enum kite_node_state state;
    char uid[40];
    int64_t recreated;
    char renew[40];     /* the lease's renewTime last seen */
    int64_t renew_seen; /* when this server saw it first (its clock) */
    int64_t lease_dur;  /* the lease's spec.leaseDurationSeconds, ns */
    struct kite_record *node, *lease;
    int64_t id_first, id_last; /* its published identity Lease (another server's calls too) */
    char id_what[160];
    int64_t recheck;    /* wall: classify again then (0: on a change only) */
    int64_t heap_at;    /* its place in the heap: at most recheck (a renewal moves recheck later
                           without a sift; the entry is placed again when it comes up) */
    size_t heap_pos;    /* NOT_QUEUED: not in the recheck heap */
    bool dirty, cordoned;
};
#define NOT_QUEUED SIZE_MAX
struct refused {
    int64_t at;
    char pod[128], why[200];
};

struct kite_nodestate {
    pthread_mutex_t mu;
    struct kite_map seen; /* node name -> struct seen */
    struct kite_map prev; /* node name -> struct prev */
    struct kite_map refused; /* node name -> struct refused (its pods' latest refused eviction) */
    uint64_t seen_dropped;
    struct kite_node_thresholds t;
    /* kept up to date from the nodes' and leases' watch caches (sync_locked) */
    struct kite_wcache *node_cache, *lease_cache;
    struct kite_watcher *node_w, *lease_w, *id_w;
    char *node_prefix, *lease_prefix, *id_prefix;
    char **publish, **unpublish; /* names whose identity Lease the next pass writes, deletes */
    size_t n_publish, cap_publish, n_unpublish, cap_unpublish;
    bool synced;
    size_t cordoned; /* Nodes with spec.unschedulable */
    struct prev **dirty, **unsettled, **heap;
    size_t n_dirty, cap_dirty, n_unsettled, cap_unsettled, n_heap, cap_heap;
    uint64_t classified; /* classifications by passes */
};

struct kite_nodestate *kite_apiserver_nodestate_new(int64_t stale_ns, int64_t grace_ns) {
    struct kite_nodestate *n = kite_calloc(1, sizeof *n);
    pthread_mutex_init(&n->mu, NULL);
    n->t = (struct kite_node_thresholds){.stale_ns = stale_ns > 0 ? stale_ns : KITE_NODE_STALE_DEFAULT_NS,
                                         .grace_ns = grace_ns > 0 ? grace_ns : KITE_NODE_GRACE_DEFAULT_NS,
                                         .drain_window_ns = KITE_NODE_DRAIN_WINDOW_NS,
                                         .orphan_window_ns = KITE_NODE_ORPHAN_WINDOW_NS,
                                         .rereg_window_ns = KITE_NODE_REREG_WINDOW_NS,
                                         .rereg_slack_ns = KITE_NODE_REREG_SLACK_NS};
    return n;
}

static void free_values(struct kite_map *m) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(m, &i, &k, &v);) free(v);
    kite_map_release(m);
}

static void prev_free(struct prev *pv) {
    kite_record_unref(pv->node);
    kite_record_unref(pv->lease);
    free(pv->name);
    free(pv);
}

void kite_apiserver_nodestate_free(struct kite_nodestate *n) {
    if (!n) return;
    kite_watcher_close(n->node_w);
    kite_watcher_close(n->lease_w);
    kite_watcher_close(n->id_w);
    for (size_t i = 0; i < n->n_publish; i++) free(n->publish[i]);
    for (size_t i = 0; i < n->n_unpublish; i++) free(n->unpublish[i]);
    free(n->publish);
    free(n->unpublish);
    free(n->id_prefix);
    free_values(&n->seen);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&n->prev, &i, &k, &v);) prev_free(v);
    kite_map_release(&n->prev);
    free_values(&n->refused);
    free(n->node_prefix);
    free(n->lease_prefix);
    free(n->dirty);
    free(n->unsettled);
    free(n->heap);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

/* The name's entry, made when missing. */
static struct prev *prev_of(struct kite_nodestate *ns, const char *name) {
    struct prev *pv = kite_map_get(&ns->prev, name);
    if (!pv) {
        pv = kite_calloc(1, sizeof *pv);
        pv->name = kite_strdup(name);
        pv->state = KITE_NODE_NONE;
        pv->heap_pos = NOT_QUEUED;
        kite_map_put(&ns->prev, name, pv);
    }
    return pv;
}

static void push_ptr(struct prev ***v, size_t *n, size_t *cap, struct prev *pv) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *v = kite_realloc(*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = pv;
}

static void push_name(char ***v, size_t *n, size_t *cap, const char *name) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *v = kite_realloc(*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = kite_strdup(name);
}

/* Classified again at the next pass. */
static void mark_dirty(struct kite_nodestate *ns, struct prev *pv) {
    if (pv->dirty) return;
    pv->dirty = true;
    push_ptr(&ns->dirty, &ns->n_dirty, &ns->cap_dirty, pv);
}

/* ---- the recheck heap: entries by the time their state could change with no event -------- */

static void heap_place(struct kite_nodestate *ns, size_t i, struct prev *pv) {
    ns->heap[i] = pv;
    pv->heap_pos = i;
}

static void heap_sift(struct kite_nodestate *ns, size_t i) {
    struct prev *pv = ns->heap[i];
    while (i > 0 && ns->heap[(i - 1) / 2]->heap_at > pv->heap_at) {
        heap_place(ns, i, ns->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        int64_t best = pv->heap_at;
        if (l < ns->n_heap && ns->heap[l]->heap_at < best) m = l, best = ns->heap[l]->heap_at;
        if (r < ns->n_heap && ns->heap[r]->heap_at < best) m = r;
        if (m == i) break;
        heap_place(ns, i, ns->heap[m]);
        i = m;
    }
    heap_place(ns, i, pv);
}

static void heap_remove(struct kite_nodestate *ns, struct prev *pv) {
    size_t i = pv->heap_pos;
    if (i == NOT_QUEUED) return;
    pv->heap_pos = NOT_QUEUED;
    struct prev *last = ns->heap[--ns->n_heap];
    if (i == ns->n_heap) return;
    heap_place(ns, i, last);
    heap_sift(ns, i);
}

/* Sets when pv is next classified with no event (0: never). */
static void set_recheck(struct kite_nodestate *ns, struct prev *pv, int64_t at) {
    if (!at) {
        heap_remove(ns, pv);
        pv->recheck = 0;
        return;
    }
    pv->recheck = at;
    /* later than its place: left there (a renewal costs no sift through 150k entries) */
    if (pv->heap_pos != NOT_QUEUED && at >= pv->heap_at) return;
    pv->heap_at = at;
    if (pv->heap_pos == NOT_QUEUED) {
        if (ns->n_heap == ns->cap_heap) {
            ns->cap_heap = ns->cap_heap ? 2 * ns->cap_heap : 64;
            ns->heap = kite_realloc(ns->heap, ns->cap_heap * sizeof *ns->heap);
        }
        heap_place(ns, ns->n_heap++, pv);
    }
    heap_sift(ns, pv->heap_pos);
}

void kite_apiserver_nodestate_seen(struct kite_apiserver *s, const char *user, const char *method, const char *path) {
    struct kite_nodestate *n = s->nodestate;
    if (!n || !user || strncmp(user, NODE_PREFIX, sizeof NODE_PREFIX - 1) != 0) return;
    const char *name = user + sizeof NODE_PREFIX - 1;
    int64_t now = kite_now_wall(s->clock);
    pthread_mutex_lock(&n->mu);
    struct seen *e = kite_map_get(&n->seen, name);
    if (!e && n->seen.len < KITE_NODESEEN_MAX) {
        e = kite_calloc(1, sizeof *e);
        e->first = now;
        kite_map_put(&n->seen, name, e);
    }
    if (e) {
        bool first = e->last == 0;
        e->last = now;
        snprintf(e->what, sizeof e->what, "%s %s", method, path);
        /* an identity with no Node may be an orphan; a first call may date a re-registration */
        struct prev *pv = first || n->synced ? prev_of(n, name) : kite_map_get(&n->prev, name);
        if (pv && (first || !pv->node)) mark_dirty(n, pv);
        /* no Node (as far as known: the pass looks again after its sync): published for the
         * other servers, on the first call, then every RENEW */
        if (pv && !pv->node && !e->queued && (!e->published || now - e->published >= KITE_NODE_IDENTITY_RENEW_NS)) {
            e->queued = true;
            push_name(&n->publish, &n->n_publish, &n->cap_publish, name);
        }
    } else {
        n->seen_dropped++;
    }
    pthread_mutex_unlock(&n->mu);
}

void kite_apiserver_nodestate_eviction_refused(struct kite_apiserver *s, json_object *pod, int code, const char *message) {
    struct kite_nodestate *n = s->nodestate;
    const char *node = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    if (!n || !node || !*node) return;
    int64_t now = kite_now_wall(s->clock);
    pthread_mutex_lock(&n->mu);
    struct refused *e = kite_map_get(&n->refused, node);
    if (!e && n->refused.len < KITE_NODESEEN_MAX) kite_map_put(&n->refused, node, e = kite_calloc(1, sizeof *e));
    if (e) {
        e->at = now;
        snprintf(e->pod, sizeof e->pod, "%s/%s", kite_meta_str(pod, "namespace") ?: "", kite_meta_str(pod, "name") ?: "");
        snprintf(e->why, sizeof e->why, "%d: %s", code, message ? message : "");
        struct prev *pv = kite_map_get(&n->prev, node);
        if (pv) mark_dirty(n, pv);
    }
    pthread_mutex_unlock(&n->mu);
}

/* The record's parse: the one another reader attached, else one of the caller's own (*own, which
 * it puts). Attaching one here would keep a parsed tree (25 KB for a Node, 9 KB for a Lease) for
 * every node the cluster has. */
static json_object *parsed(struct kite_record *rec, json_object **own) {
    json_object *o = kite_record_cache(rec);
    *own = o ? NULL : kite_apiserver_record_parse(rec);
    return o ? o : *own;
}

/* When this server saw the lease's current renewal, on its own clock (as the node lifecycle
 * controller's probe time, so an agent's skewed clock does not count); the first sight of a
 * lease (a new node, or this server just started) takes its renewTime, at most now. */
static int64_t renewal_seen(struct prev *pv, json_object *lease, int64_t now) {
    const char *rt = kite_obj_str(kite_obj_get(lease, "spec"), "renewTime");
    if (!rt || !*rt) return 0;
    if (strcmp(pv->renew, rt) != 0) {
        int64_t t;
        bool first = !pv->renew[0];
        snprintf(pv->renew, sizeof pv->renew, "%s", rt);
        pv->renew_seen = first && kite_time_parse(rt, &t) == 0 && t < now ? t : now;
    }
    return pv->renew_seen;
}

/* ---- kept up to date from the watch caches ------------------------------------------------ */

struct counts {
    size_t pods, terminating;
};

/* When a healthy node's lease expires, as kite_node_classify judges it (0: no lease judged). */
static int64_t expiry(struct kite_nodestate *ns, struct prev *pv, int64_t now) {
    if (!pv->lease || !pv->renew_seen || ns->t.grace_ns <= 0) return 0;
    int64_t dur = pv->lease_dur;
    int64_t at = pv->renew_seen + (dur > ns->t.grace_ns ? dur : ns->t.grace_ns);
    return at > now ? at : now + KITE_NS_PER_SEC;
}

enum kind { K_NODE, K_LEASE, K_IDENTITY };

static int64_t time_of(json_object *spec, const char *field) {
    int64_t t;
    const char *v = kite_obj_str(spec, field);
    return v && kite_time_parse(v, &t) == 0 ? t : 0;
}

/* One Node, Lease or identity Lease event (or listed object). */
static void apply_parsed(struct kite_nodestate *ns, enum kind kind, struct kite_record *rec, json_object *o, bool deleted,
                         int64_t now) {
    const char *name = kite_meta_str(o, "name");
    if (!name) return;
    struct prev *pv = deleted ? kite_map_get(&ns->prev, name) : prev_of(ns, name);
    if (!pv) return;
    bool is_node = kind == K_NODE;
    if (kind == K_IDENTITY) {
        json_object *spec = deleted ? NULL : kite_obj_get(o, "spec");
        pv->id_first = time_of(spec, "acquireTime");
        pv->id_last = time_of(spec, "renewTime");
        const char *what = deleted ? NULL : kite_obj_str(kite_obj_get(kite_obj_meta(o), "annotations"), IDENTITY_WHAT);
        snprintf(pv->id_what, sizeof pv->id_what, "%s", what ? what : "");
        /* one left from before its Node: deleted by the next pass */
        if (pv->id_last && pv->node) push_name(&ns->unpublish, &ns->n_unpublish, &ns->cap_unpublish, name);
        mark_dirty(ns, pv);
        return;
    }
    if (is_node) {
        /* its published identity has done its work */
        if (!deleted && !pv->node && pv->id_last) push_name(&ns->unpublish, &ns->n_unpublish, &ns->cap_unpublish, name);
        kite_record_unref(pv->node);
        pv->node = deleted ? NULL : kite_record_ref(rec);
        json_object *u = deleted ? NULL : kite_obj_get(kite_obj_get(o, "spec"), "unschedulable");
        bool cordoned = u && json_object_get_boolean(u);
        if (cordoned && !pv->cordoned) ns->cordoned++;
        if (!cordoned && pv->cordoned) ns->cordoned--;
        pv->cordoned = cordoned;
        const char *uid = deleted ? NULL : kite_meta_str(o, "uid");
        if (uid) {
            /* a new object under the same name while its agent kept calling */
            struct seen *sn = kite_map_get(&ns->seen, name);
            if (pv->uid[0] && strcmp(pv->uid, uid) != 0 && sn && now - sn->last < ns->t.orphan_window_ns)
                pv->recreated = now;
            snprintf(pv->uid, sizeof pv->uid, "%s", uid);
        }
        mark_dirty(ns, pv);
        return;
    }
    kite_record_unref(pv->lease);
    pv->lease = deleted ? NULL : kite_record_ref(rec);
    json_object *d = deleted ? NULL : kite_obj_get(kite_obj_get(o, "spec"), "leaseDurationSeconds");
    pv->lease_dur = d ? json_object_get_int64(d) * KITE_NS_PER_SEC : 0;
    if (deleted || !pv->node) {
        mark_dirty(ns, pv);
        return;
    }
    /* a renewal of a healthy node only moves its expiry: no classification */
    renewal_seen(pv, o, now);
    if (pv->state == KITE_NODE_HEALTHY && !pv->dirty) set_recheck(ns, pv, expiry(ns, pv, now));
    else mark_dirty(ns, pv);
}

/* The members apply_parsed reads of each kind, cut from the record's text (a Lease's
 * managedFields and ownerReferences are most of it): a renewal costs a scan and three small
 * values parsed, not the whole object. */
static const char *const *members_of(enum kind kind) {
    static const char *const node[] = {"metadata.name", "metadata.uid", "spec.unschedulable", NULL};
    static const char *const lease[] = {"metadata.name", "spec.leaseDurationSeconds", "spec.renewTime", NULL};
    static const char *const identity[] = {"metadata.name", "metadata.annotations", "spec.acquireTime", "spec.renewTime", NULL};
    return kind == K_NODE ? node : kind == K_LEASE ? lease : identity;
}

static void apply(struct kite_nodestate *ns, enum kind kind, struct kite_record *rec, bool deleted, int64_t now) {
    json_object *o = kite_record_cache(rec), *own = NULL;
    if (!o) o = own = kite_json_project(rec->value, rec->len, members_of(kind));
    if (!o) o = own = kite_apiserver_record_parse(rec); /* text the scan cannot follow */
    apply_parsed(ns, kind, rec, o, deleted, now);
    json_object_put(own);
}

static struct kite_wcache *cache_of(struct kite_apiserver *s, const char *group, const char *plural, const char *nsname,
                                    char **prefix) {
    const struct kite_resource *r = kite_registry_find(group, "v1", plural);
    if (!r) return NULL;
    free(*prefix);
    *prefix = kite_object_prefix(r, nsname);
    return kite_apiserver_storage_cache(s, r);
}

/* Lists into the entries, then watches from the list's revision. */
static int list_and_watch(struct kite_nodestate *ns, struct kite_wcache *c, const char *prefix, enum kind kind,
                          int64_t now, struct kite_watcher **w) {
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev;
    bool more;
    int r = kite_wcache_list(c, prefix, NULL, 0, NULL, NULL, &recs, &n, &rev, &more);
    if (r < 0) return r;
    for (size_t i = 0; i < n; i++) {
        apply(ns, kind, recs[i], false, now);
        kite_record_unref(recs[i]);
    }
    free(recs);
    /* a pass takes what queued in KITE_NODE_STATE_PERIOD_S: room for 150k nodes' renewals */
    return kite_wcache_watch(c, prefix, rev, 1u << 20, (size_t)256 << 20, NULL, NULL, NULL, w);
}

static int drain(struct kite_nodestate *ns, struct kite_watcher *w, enum kind kind, int64_t now) {
    struct kite_watch_event evs[64];
    for (;;) {
        int k = kite_watcher_next(w, evs, KITE_ARRAY_SIZE(evs));
        if (k <= 0) return k;
        for (int i = 0; i < k; i++) {
            apply(ns, kind, evs[i].rec, evs[i].type == KITE_EV_DELETED, now);
            kite_record_unref(evs[i].rec);
            kite_record_unref(evs[i].prev);
        }
    }
}

/* Brings the entries up to date with the watch caches: O(events since the last call). */
static void sync_locked(struct kite_apiserver *s, struct kite_nodestate *ns, int64_t now) {
    if (ns->synced) {
        if (drain(ns, ns->node_w, K_NODE, now) == 0 && drain(ns, ns->lease_w, K_LEASE, now) == 0 &&
            drain(ns, ns->id_w, K_IDENTITY, now) == 0)
            return;
        /* a watcher fell behind and was dropped: start over from a list */
        const char *k;
        void *v;
        for (size_t i = 0; kite_map_next(&ns->prev, &i, &k, &v);) {
            struct prev *pv = v;
            kite_record_unref(TAKE_PTR(pv->node));
            kite_record_unref(TAKE_PTR(pv->lease));
            pv->id_first = pv->id_last = 0;
            pv->cordoned = false;
            mark_dirty(ns, pv);
        }
        ns->cordoned = 0;
    }
    kite_watcher_close(TAKE_PTR(ns->node_w));
    kite_watcher_close(TAKE_PTR(ns->lease_w));
    kite_watcher_close(TAKE_PTR(ns->id_w));
    ns->synced = false;
    if (!ns->node_cache) ns->node_cache = cache_of(s, "", "nodes", NULL, &ns->node_prefix);
    if (!ns->lease_cache) ns->lease_cache = cache_of(s, "coordination.k8s.io", "leases", "kube-node-lease", &ns->lease_prefix);
    if (!ns->node_cache || !ns->lease_cache) return;
    if (!ns->id_prefix) {
        const struct kite_resource *r = kite_registry_find("coordination.k8s.io", "v1", "leases");
        ns->id_prefix = kite_object_prefix(r, IDENTITY_NS);
    }
    if (list_and_watch(ns, ns->node_cache, ns->node_prefix, K_NODE, now, &ns->node_w) < 0 ||
        list_and_watch(ns, ns->lease_cache, ns->lease_prefix, K_LEASE, now, &ns->lease_w) < 0 ||
        list_and_watch(ns, ns->lease_cache, ns->id_prefix, K_IDENTITY, now, &ns->id_w) < 0)
        return;
    ns->synced = true;
}

static struct kite_record **list(struct kite_apiserver *s, const char *group, const char *plural, const char *ns, size_t *n) {
    const struct kite_resource *r = kite_registry_find(group, "v1", plural);
    struct kite_record **recs = NULL;
    int64_t rev;
    bool more;
    *n = 0;
    if (!r) return NULL;
    _cleanup_free_ char *prefix = kite_object_prefix(r, ns);
    if (kite_wcache_list(kite_apiserver_storage_cache(s, r), prefix, NULL, 0, NULL, NULL, &recs, n, &rev, &more) < 0) *n = 0;
    return recs;
}

/* Pods per node: they matter only to tell Draining from Cordoned, so they are listed only
 * while some node is cordoned. Returns the counts' storage (caller frees after the map). */
static struct counts *pod_counts(struct kite_apiserver *s, struct kite_map *counts) {
    size_t np = 0;
    struct kite_record **pods = list(s, "", "pods", NULL, &np);
    struct counts *cv = np ? kite_calloc(np, sizeof *cv) : NULL;
    size_t ncv = 0;
    for (size_t i = 0; i < np; i++) {
        json_object *o = kite_apiserver_record_object(pods[i]);
        const char *node = kite_obj_str(kite_obj_get(o, "spec"), "nodeName");
        if (node && *node) {
            struct counts *c = kite_map_get(counts, node);
            if (!c) kite_map_put(counts, node, c = &cv[ncv++]);
            c->pods++;
            if (kite_obj_get(kite_obj_meta(o), "deletionTimestamp")) c->terminating++;
        }
        kite_record_unref(pods[i]);
    }
    free(pods);
    return cv;
}

/* The node's state now; *next (optional) gets when time alone could change it (0: never). */
static enum kite_node_state classify(struct kite_nodestate *ns, struct prev *pv, int64_t now, struct kite_map *counts,
                                     struct kite_buf *ev, int64_t *next) {
    json_object *own_node = NULL, *own_lease = NULL;
    json_object *node = pv->node ? parsed(pv->node, &own_node) : NULL;
    json_object *lease = pv->lease ? parsed(pv->lease, &own_lease) : NULL;
    struct seen *sn = kite_map_get(&ns->seen, pv->name);
    struct refused *rf = kite_map_get(&ns->refused, pv->name);
    /* with no Node, the calls other servers published count as this one's */
    int64_t first = sn ? sn->first : 0, last = sn ? sn->last : 0;
    const char *what = sn ? sn->what : NULL;
    if (!pv->node && pv->id_last) {
        if (!first || (pv->id_first && pv->id_first < first)) first = pv->id_first ? pv->id_first : pv->id_last;
        if (pv->id_last > last) last = pv->id_last, what = pv->id_what;
    }
    struct counts *c = counts ? kite_map_get(counts, pv->name) : NULL;
    struct kite_node_facts f = {.node = node, .lease = lease,
                                .renewed_ns = node && lease ? renewal_seen(pv, lease, now) : 0,
                                .refused_ns = rf ? rf->at : 0, .refused_pod = rf ? rf->pod : NULL,
                                .refused_why = rf ? rf->why : NULL,
                                .seen_first_ns = first, .seen_last_ns = last,
                                .seen_what = what, .pods = c ? c->pods : 0,
                                .terminating = c ? c->terminating : 0, .recreated_ns = pv->recreated};
    if (next) *next = kite_node_next_change(&f, now, &ns->t);
    enum kite_node_state st = kite_node_classify(&f, now, &ns->t, ev);
    json_object_put(own_node);
    json_object_put(own_lease);
    return st;
}

struct node_row {
    char *name;
    enum kite_node_state state;
    char *evidence;
    char uid[40];
};

/* The events of one pass, written together: a pass that finds 150k nodes silent at once (a
 * network partition, a simulator stopped) sends them as the store's group commits take them,
 * not one write and one fsync after another (minutes). */
#define EVENTS_INFLIGHT 1024
struct event_batch {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    size_t pending;
    uint64_t failed;
    int last_err;
};

static void event_done(void *ud, int err, int64_t rev, struct kite_record *rec) {
    struct event_batch *b = ud;
    pthread_mutex_lock(&b->mu);
    if (err < 0) b->failed++, b->last_err = err;
    b->pending--;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->mu);
}

static void batch_wait(struct event_batch *b, size_t below) {
    pthread_mutex_lock(&b->mu);
    while (b->pending > below) pthread_cond_wait(&b->cond, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

static void record_event(struct kite_apiserver *s, const struct node_row *r, int64_t now, struct event_batch *b) {
    const struct kite_resource *er = kite_registry_find("", "v1", "events");
    if (!er) return;
    struct kite_event_spec es = {.ns = "default", .kind = "Node", .obj_name = r->name, .uid = r->uid,
                                 .type = r->state == KITE_NODE_HEALTHY ? "Normal" : "Warning",
                                 .reason = kite_node_state_name(r->state), .message = r->evidence,
                                 .component = "kite-apiserver", .wall_ns = now};
    json_object *ev = kite_event_build(&es);
    batch_wait(b, EVENTS_INFLIGHT - 1);
    pthread_mutex_lock(&b->mu);
    b->pending++;
    pthread_mutex_unlock(&b->mu);
    int e = kite_apiserver_create_submit(s, er, ev, event_done, b);
    if (e == -EAGAIN) { /* the store's queue is full: wait for this one */
        pthread_mutex_lock(&b->mu);
        b->pending--;
        pthread_mutex_unlock(&b->mu);
        e = kite_apiserver_create_sync(s, er, ev);
    } else if (e < 0) {
        pthread_mutex_lock(&b->mu);
        b->pending--;
        pthread_mutex_unlock(&b->mu);
    }
    if (e < 0) log_warn("apiserver", "node %s: cannot record its %s event: %s", r->name, kite_node_state_name(r->state), strerror(-e));
    json_object_put(ev);
}

/* Writes the identity Lease of a node credential calling with no Node: created, or its
 * renewTime (and last call) updated on its current revision (another server's write in
 * between: the next renewal). */
static int publish_one(struct kite_apiserver *s, const struct kite_resource *r, const char *name, int64_t first,
                       int64_t last, const char *what) {
    char ft[21], lt[21];
    kite_time_format(first, ft);
    kite_time_format(last, lt);
    _cleanup_free_ char *key = kite_object_key(r, IDENTITY_NS, name);
    struct kite_record *cur = NULL;
    if (kite_store_get(s->store, key, &cur) < 0) {
        json_object *o = json_object_new_object(), *meta = json_object_new_object(), *ann = json_object_new_object(),
                    *spec = json_object_new_object();
        kite_obj_set(o, "apiVersion", json_object_new_string("coordination.k8s.io/v1"));
        kite_obj_set(o, "kind", json_object_new_string("Lease"));
        kite_obj_set(meta, "name", json_object_new_string(name));
        kite_obj_set(meta, "namespace", json_object_new_string(IDENTITY_NS));
        kite_obj_set(ann, IDENTITY_WHAT, json_object_new_string(what));
        kite_obj_set(meta, "annotations", ann);
        kite_obj_set(o, "metadata", meta);
        char holder[200];
        snprintf(holder, sizeof holder, NODE_PREFIX "%s", name);
        kite_obj_set(spec, "holderIdentity", json_object_new_string(holder));
        kite_obj_set(spec, "leaseDurationSeconds", json_object_new_int64(KITE_NODE_IDENTITY_RENEW_NS / KITE_NS_PER_SEC));
        kite_obj_set(spec, "acquireTime", json_object_new_string(ft));
        kite_obj_set(spec, "renewTime", json_object_new_string(lt));
        kite_obj_set(o, "spec", spec);
        int e = kite_apiserver_create_sync(s, r, o);
        json_object_put(o);
        return e == -EEXIST ? 0 : e;
    }
    json_object *o = kite_apiserver_record_parse(cur);
    json_object *spec = kite_obj_get(o, "spec"), *meta = kite_obj_meta(o);
    int e = 0;
    if (spec && meta) {
        kite_obj_set(spec, "renewTime", json_object_new_string(lt));
        json_object *ann = kite_obj_get(meta, "annotations");
        if (!ann) kite_obj_set(meta, "annotations", ann = json_object_new_object());
        kite_obj_set(ann, IDENTITY_WHAT, json_object_new_string(what));
        size_t len;
        _cleanup_free_ char *bytes = kite_object_encode(o, &len);
        struct kite_write w = {.type = KITE_WRITE_UPDATE, .key = key, .value = bytes, .len = len, .expect_mod_rev = cur->mod_rev};
        e = kite_store_write(s->store, &w, NULL, NULL);
    }
    json_object_put(o);
    kite_record_unref(cur);
    return e == -ESTALE || e == -ENOENT ? 0 : e;
}

/* The identity Leases the last events asked for: written for identities still calling with no
 * Node, deleted for those whose Node came. A write per identity and renewal period while it
 * calls with no Node, one delete (per server) when its Node comes: nothing for registered nodes. */
static void publish_identities(struct kite_apiserver *s, struct kite_nodestate *ns) {
    const struct kite_resource *r = kite_registry_find("coordination.k8s.io", "v1", "leases");
    pthread_mutex_lock(&ns->mu);
    char **pub = TAKE_PTR(ns->publish), **unpub = TAKE_PTR(ns->unpublish);
    size_t np = ns->n_publish, nu = ns->n_unpublish;
    ns->n_publish = ns->cap_publish = ns->n_unpublish = ns->cap_unpublish = 0;
    pthread_mutex_unlock(&ns->mu);
    for (size_t i = 0; i < np; i++) {
        pthread_mutex_lock(&ns->mu);
        struct seen *e = kite_map_get(&ns->seen, pub[i]);
        struct prev *pv = kite_map_get(&ns->prev, pub[i]);
        struct seen c = e ? *e : (struct seen){0};
        if (e) e->queued = false;
        pthread_mutex_unlock(&ns->mu);
        if (!r || !e || (pv && pv->node)) continue;
        int err = publish_one(s, r, pub[i], c.first, c.last, c.what);
        if (err < 0) {
            log_warn("apiserver", "node identity %s: cannot publish it: %s", pub[i], strerror(-err));
            continue;
        }
        pthread_mutex_lock(&ns->mu);
        if ((e = kite_map_get(&ns->seen, pub[i]))) e->published = c.last;
        pthread_mutex_unlock(&ns->mu);
    }
    for (size_t i = 0; i < nu; i++) {
        if (r) {
            _cleanup_free_ char *key = kite_object_key(r, IDENTITY_NS, unpub[i]);
            struct kite_write w = {.type = KITE_WRITE_DELETE, .key = key};
            kite_store_write(s->store, &w, NULL, NULL); /* -ENOENT: another server's delete won */
        }
        pthread_mutex_lock(&ns->mu);
        struct seen *e = kite_map_get(&ns->seen, unpub[i]);
        if (e) e->published = 0;
        pthread_mutex_unlock(&ns->mu);
    }
    for (size_t i = 0; i < np; i++) free(pub[i]);
    for (size_t i = 0; i < nu; i++) free(unpub[i]);
    free(pub);
    free(unpub);
}

/* The periodic pass: classifies only what changed (events since the last pass), what time
 * could have changed (a healthy node whose lease expiry came; every node in another state,
 * whose evidence and state move with time) and records an event for each new state. A quiet
 * cluster of healthy nodes costs the renewals' events and the expiries' heap, not a list. */
void kite_apiserver_nodestate_pass(struct kite_apiserver *s) {
    struct kite_nodestate *ns = s->nodestate;
    if (!ns) return;
    int64_t now = kite_now_wall(s->clock);
    pthread_mutex_lock(&ns->mu);
    sync_locked(s, ns, now);
    bool any_cordoned = ns->cordoned > 0;
    pthread_mutex_unlock(&ns->mu);
    publish_identities(s, ns);
    struct kite_map counts = {0};
    struct counts *cv = any_cordoned ? pod_counts(s, &counts) : NULL;
    pthread_mutex_lock(&ns->mu);
    while (ns->n_heap && ns->heap[0]->heap_at <= now) {
        struct prev *pv = ns->heap[0];
        if (pv->recheck > now) { /* renewed since it was placed: placed again at its time */
            pv->heap_at = pv->recheck;
            heap_sift(ns, 0);
            continue;
        }
        set_recheck(ns, pv, 0);
        mark_dirty(ns, pv);
    }
    struct prev **uns = TAKE_PTR(ns->unsettled);
    size_t nu = ns->n_unsettled;
    ns->n_unsettled = ns->cap_unsettled = 0;
    for (size_t i = 0; i < nu; i++) mark_dirty(ns, uns[i]);
    free(uns);
    struct prev **todo = TAKE_PTR(ns->dirty);
    size_t nt = ns->n_dirty;
    ns->n_dirty = ns->cap_dirty = 0;
    struct node_row *changed = kite_calloc(nt ? nt : 1, sizeof *changed);
    size_t nch = 0;
    struct kite_buf ev = {0};
    for (size_t i = 0; i < nt; i++) {
        struct prev *pv = todo[i];
        pv->dirty = false;
        kite_buf_reset(&ev);
        int64_t next = 0;
        enum kite_node_state st = classify(ns, pv, now, any_cordoned ? &counts : NULL, &ev, &next);
        ns->classified++;
        /* first sight of a healthy node is no news; anything else, and every change, is */
        if (st != KITE_NODE_NONE && st != pv->state && !(pv->state == KITE_NODE_NONE && st == KITE_NODE_HEALTHY)) {
            struct node_row *r = &changed[nch++];
            r->name = kite_strdup(pv->name);
            r->state = st;
            r->evidence = kite_strdup(ev.p ? ev.p : "");
            snprintf(r->uid, sizeof r->uid, "%s", pv->node ? pv->uid : "");
        }
        pv->state = st;
        if (st == KITE_NODE_HEALTHY) {
            set_recheck(ns, pv, expiry(ns, pv, now));
        } else if (st == KITE_NODE_CORDONED || st == KITE_NODE_DRAINING) {
            /* its pods' count moves with no event of the Node or Lease: judged at every pass */
            set_recheck(ns, pv, 0);
            push_ptr(&ns->unsettled, &ns->n_unsettled, &ns->cap_unsettled, pv);
        } else {
            /* the others move with time only where a threshold is crossed (a lease
             * expiring, Unknown turning stale, a window closing): judged again then, so a
             * cluster of 150k silent nodes costs nothing between those instants */
            if (!pv->node && pv->id_last) { /* a published identity: deleted once it is stale */
                struct seen *sn = kite_map_get(&ns->seen, pv->name);
                int64_t last = KITE_MAX(pv->id_last, sn ? sn->last : 0), gone_at = last + ns->t.stale_ns;
                if (now >= gone_at) push_name(&ns->unpublish, &ns->n_unpublish, &ns->cap_unpublish, pv->name);
                else if (!next || gone_at < next) next = gone_at;
            }
            set_recheck(ns, pv, next);
        }
    }
    kite_buf_release(&ev);
    free(todo);
    pthread_mutex_unlock(&ns->mu);
    kite_map_release(&counts);
    free(cv);
    struct event_batch b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    for (size_t i = 0; i < nch; i++) {
        log_info("apiserver", "node %s: %s: %s", changed[i].name, kite_node_state_name(changed[i].state), changed[i].evidence);
        record_event(s, &changed[i], now, &b);
        free(changed[i].name);
        free(changed[i].evidence);
    }
    batch_wait(&b, 0);
    if (b.failed)
        log_warn("apiserver", "%llu node state events could not be recorded: %s", (unsigned long long)b.failed,
                 strerror(-b.last_err));
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cond);
    free(changed);
}

uint64_t kite_apiserver_nodestate_classified(struct kite_apiserver *s) {
    struct kite_nodestate *ns = s->nodestate;
    if (!ns) return 0;
    pthread_mutex_lock(&ns->mu);
    uint64_t n = ns->classified;
    pthread_mutex_unlock(&ns->mu);
    return n;
}

static int cmp_prev(const void *a, const void *b) {
    return strcmp((*(struct prev *const *)a)->name, (*(struct prev *const *)b)->name);
}

void kite_apiserver_nodestate_metrics(struct kite_apiserver *s, struct kite_buf *b) {
    struct kite_nodestate *ns = s->nodestate;
    if (!ns) return;
    kite_buf_puts(b, "# HELP kite_node_state The divergence state of each node (kite nodes), 1 for its one state.\n"
                     "# TYPE kite_node_state gauge\n");
    pthread_mutex_lock(&ns->mu);
    /* the last pass's states, built when scraped rather than every pass */
    struct prev **v = kite_calloc(ns->prev.len ? ns->prev.len : 1, sizeof *v);
    size_t n = 0;
    const char *k;
    void *val;
    for (size_t i = 0; kite_map_next(&ns->prev, &i, &k, &val);)
        if (((struct prev *)val)->state != KITE_NODE_NONE) v[n++] = val;
    qsort(v, n, sizeof *v, cmp_prev);
    for (size_t i = 0; i < n; i++)
        kite_buf_printf(b, "kite_node_state{node=\"%s\",state=\"%s\"} 1\n", v[i]->name, kite_node_state_name(v[i]->state));
    free(v);
    kite_buf_printf(b, "# HELP kite_node_identities_dropped_total Calls of node identities past the %d remembered.\n"
                       "# TYPE kite_node_identities_dropped_total counter\nkite_node_identities_dropped_total %llu\n",
                    KITE_NODESEEN_MAX, (unsigned long long)ns->seen_dropped);
    pthread_mutex_unlock(&ns->mu);
}

/* GET /debug/kite/nodes: {"items":[{"name","state","evidence"}]} computed now: every Node by
 * name, then the identities with no Node. */
void kite_apiserver_nodestate_reply(struct req *rq) {
    struct kite_apiserver *s = rq->srv;
    struct kite_nodestate *ns = s->nodestate;
    int64_t now = kite_now_wall(s->clock);
    pthread_mutex_lock(&ns->mu);
    sync_locked(s, ns, now);
    bool any_cordoned = ns->cordoned > 0;
    pthread_mutex_unlock(&ns->mu);
    struct kite_map counts = {0};
    struct counts *cv = any_cordoned ? pod_counts(s, &counts) : NULL;
    json_object *out = json_object_new_object(), *items = json_object_new_array();
    pthread_mutex_lock(&ns->mu);
    struct prev **v = kite_calloc(ns->prev.len ? ns->prev.len : 1, sizeof *v);
    size_t n = 0, nodes = 0;
    const char *k;
    void *val;
    for (size_t i = 0; kite_map_next(&ns->prev, &i, &k, &val);)
        if (((struct prev *)val)->node) v[n++] = val;
    nodes = n;
    for (size_t i = 0; kite_map_next(&ns->prev, &i, &k, &val);)
        if (!((struct prev *)val)->node && (kite_map_get(&ns->seen, k) || ((struct prev *)val)->id_last)) v[n++] = val;
    qsort(v, nodes, sizeof *v, cmp_prev);
    qsort(v + nodes, n - nodes, sizeof *v, cmp_prev);
    struct kite_buf ev = {0};
    for (size_t i = 0; i < n; i++) {
        kite_buf_reset(&ev);
        enum kite_node_state st = classify(ns, v[i], now, any_cordoned ? &counts : NULL, &ev, NULL);
        if (st == KITE_NODE_NONE) continue;
        json_object *it = json_object_new_object();
        kite_obj_set(it, "name", json_object_new_string(v[i]->name));
        kite_obj_set(it, "state", json_object_new_string(kite_node_state_name(st)));
        kite_obj_set(it, "evidence", json_object_new_string(ev.p ? ev.p : ""));
        kite_obj_set(it, "hasNode", json_object_new_boolean(v[i]->node != NULL));
        json_object_array_add(items, it);
    }
    pthread_mutex_unlock(&ns->mu);
    kite_buf_release(&ev);
    free(v);
    kite_map_release(&counts);
    free(cv);
    kite_obj_set(out, "kind", json_object_new_string("NodeStateList"));
    kite_obj_set(out, "items", items);
    size_t len;
    const char *txt = json_object_to_json_string_length(out, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    char *body = kite_strdup(txt);
    json_object_put(out);
    kite_apiserver_reply(rq, 200, "application/json", body, len);
}
