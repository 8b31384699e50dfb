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
 * several API servers each sees the identities that call it. This is the one place in the API
 * server that names kinds (nodes, leases, pods, events), by registry lookups. */
#include "api/events.h"
#include "apiserver/internal.h"
#include "api/nodestate.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/map.h"

#include <stdio.h>

#define NODE_PREFIX "system:node:"
#define KITE_NODESEEN_MAX 100000 /* identities remembered; past it, new ones are not (counted) */

struct seen {
    int64_t first, last;
    char what[160];
};
struct prev {
    enum kite_node_state state;
    char uid[40];
    int64_t recreated;
    char renew[40];     /* the lease's renewTime last seen */
    int64_t renew_seen; /* when this server saw it first (its clock) */
};
struct refused {
    int64_t at;
    char pod[128], why[200];
};

struct kite_nodestate {
    pthread_mutex_t mu;
    struct kite_map seen; /* node name -> struct seen */
    struct kite_map prev; /* node name -> struct prev (the last pass's) */
    struct kite_map refused; /* node name -> struct refused (its pods' latest refused eviction) */
    struct kite_buf metrics; /* the last pass's kite_node_state lines */
    uint64_t seen_dropped;
    struct kite_node_thresholds t;
};

struct kite_nodestate *nodestate_new(int64_t stale_ns, int64_t grace_ns) {
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

void nodestate_free(struct kite_nodestate *n) {
    if (!n) return;
    free_values(&n->seen);
    free_values(&n->prev);
    free_values(&n->refused);
    kite_buf_release(&n->metrics);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

void nodestate_seen(struct kite_apiserver *s, const char *user, const char *method, const char *path) {
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
        e->last = now;
        snprintf(e->what, sizeof e->what, "%s %s", method, path);
    } else {
        n->seen_dropped++;
    }
    pthread_mutex_unlock(&n->mu);
}

void nodestate_eviction_refused(struct kite_apiserver *s, json_object *pod, int code, const char *message) {
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
    }
    pthread_mutex_unlock(&n->mu);
}

/* The node's prev entry (made when missing: a node not seen by a pass yet). */
static struct prev *prev_of(struct kite_nodestate *ns, const char *name) {
    struct prev *pv = kite_map_get(&ns->prev, name);
    if (!pv) {
        pv = kite_calloc(1, sizeof *pv);
        pv->state = KITE_NODE_NONE;
        kite_map_put(&ns->prev, name, pv);
    }
    return pv;
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

/* ---- one computation over the watch caches ------------------------------------------------ */

struct node_row {
    char *name;
    enum kite_node_state state;
    char *evidence;
    char uid[40];
    bool has_node;
};

static struct kite_record **list(struct kite_apiserver *s, const char *group, const char *plural, const char *ns, size_t *n) {
    const struct kite_resource *r = kite_registry_find(group, "v1", plural);
    struct kite_record **recs = NULL;
    int64_t rev;
    bool more;
    *n = 0;
    if (!r) return NULL;
    _cleanup_free_ char *prefix = kite_object_prefix(r, ns);
    if (kite_wcache_list(storage_cache(s, r), prefix, NULL, 0, NULL, NULL, &recs, n, &rev, &more) < 0) *n = 0;
    return recs;
}

static void unref_all(struct kite_record **recs, size_t n) {
    for (size_t i = 0; i < n; i++) kite_record_unref(recs[i]);
    free(recs);
}

struct counts {
    size_t pods, terminating;
};

/* Computes every node's state; with update, records uid changes (re-registrations) and
 * returns the rows for events and metrics. */
static struct node_row *compute(struct kite_apiserver *s, int64_t now, bool update, size_t *ret_n) {
    struct kite_nodestate *ns = s->nodestate;
    size_t nn, nl, np = 0;
    struct kite_record **nodes = list(s, "", "nodes", NULL, &nn);
    struct kite_record **leases = list(s, "coordination.k8s.io", "leases", "kube-node-lease", &nl);
    struct kite_map lease_by = {0}, node_by = {0}, counts = {0};
    bool any_cordoned = false;
    for (size_t i = 0; i < nl; i++) {
        json_object *o = record_object(leases[i]);
        if (kite_meta_str(o, "name")) kite_map_put(&lease_by, kite_meta_str(o, "name"), o);
    }
    for (size_t i = 0; i < nn; i++) {
        json_object *o = record_object(nodes[i]);
        if (kite_meta_str(o, "name")) kite_map_put(&node_by, kite_meta_str(o, "name"), o);
        json_object *u = kite_obj_get(kite_obj_get(o, "spec"), "unschedulable");
        if (u && json_object_get_boolean(u)) any_cordoned = true;
    }
    /* pods matter only to tell Draining from Cordoned: not read while nothing is cordoned */
    struct kite_record **pods = any_cordoned ? list(s, "", "pods", NULL, &np) : NULL;
    struct counts *cv = np ? kite_calloc(np, sizeof *cv) : NULL;
    size_t ncv = 0;
    for (size_t i = 0; i < np; i++) {
        json_object *o = record_object(pods[i]);
        const char *node = kite_obj_str(kite_obj_get(o, "spec"), "nodeName");
        if (!node || !*node) continue;
        struct counts *c = kite_map_get(&counts, node);
        if (!c) kite_map_put(&counts, node, c = &cv[ncv++]);
        c->pods++;
        if (kite_obj_get(kite_obj_meta(o), "deletionTimestamp")) c->terminating++;
    }

    pthread_mutex_lock(&ns->mu);
    size_t cap = nn + ns->seen.len, n = 0;
    struct node_row *rows = kite_calloc(cap ? cap : 1, sizeof *rows);
    struct kite_buf ev = {0};
    for (int pass = 0; pass < 2; pass++) {
        /* first every Node, then identities with no Node */
        size_t it = 0;
        const char *name;
        void *v;
        for (size_t i = 0; pass == 0 ? i < nn : kite_map_next(&ns->seen, &it, &name, &v); i++) {
            json_object *node = NULL;
            if (pass == 0) {
                node = record_object(nodes[i]);
                name = kite_meta_str(node, "name");
                if (!name) continue;
            } else if (kite_map_get(&node_by, name)) {
                continue;
            }
            struct seen *sn = kite_map_get(&ns->seen, name);
            json_object *lease = kite_map_get(&lease_by, name);
            struct prev *pv = node && lease ? prev_of(ns, name) : kite_map_get(&ns->prev, name);
            struct refused *rf = kite_map_get(&ns->refused, name);
            const char *uid = node ? kite_meta_str(node, "uid") : NULL;
            if (update && node && uid && pv && pv->uid[0] && strcmp(pv->uid, uid) != 0 && sn && now - sn->last < ns->t.orphan_window_ns)
                pv->recreated = now; /* a new object under the same name while its agent kept calling */
            struct counts *c = kite_map_get(&counts, name);
            struct kite_node_facts f = {.node = node, .lease = lease,
                                        .renewed_ns = node && lease ? renewal_seen(pv, lease, now) : 0,
                                        .refused_ns = rf ? rf->at : 0, .refused_pod = rf ? rf->pod : NULL,
                                        .refused_why = rf ? rf->why : NULL,
                                        .seen_first_ns = sn ? sn->first : 0, .seen_last_ns = sn ? sn->last : 0,
                                        .seen_what = sn ? sn->what : NULL, .pods = c ? c->pods : 0,
                                        .terminating = c ? c->terminating : 0, .recreated_ns = pv ? pv->recreated : 0};
            kite_buf_reset(&ev);
            enum kite_node_state st = kite_node_classify(&f, now, &ns->t, &ev);
            if (st == KITE_NODE_NONE) continue;
            struct node_row *r = &rows[n++];
            r->name = kite_strdup(name);
            r->state = st;
            r->evidence = kite_strdup(ev.p ? ev.p : "");
            r->has_node = node != NULL;
            snprintf(r->uid, sizeof r->uid, "%s", uid ? uid : "");
        }
    }
    kite_buf_release(&ev);
    pthread_mutex_unlock(&ns->mu);
    kite_map_release(&lease_by);
    kite_map_release(&node_by);
    kite_map_release(&counts);
    free(cv);
    unref_all(nodes, nn);
    unref_all(leases, nl);
    unref_all(pods, np);
    *ret_n = n;
    return rows;
}

static void rows_free(struct node_row *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(rows[i].name);
        free(rows[i].evidence);
    }
    free(rows);
}

static void record_event(struct kite_apiserver *s, const struct node_row *r, int64_t now) {
    const struct kite_resource *er = kite_registry_find("", "v1", "events");
    if (!er) return;
    struct kite_event_spec es = {.ns = "default", .kind = "Node", .obj_name = r->name, .uid = r->uid,
                                 .type = r->state == KITE_NODE_HEALTHY ? "Normal" : "Warning",
                                 .reason = kite_node_state_name(r->state), .message = r->evidence,
                                 .component = "kite-apiserver", .wall_ns = now};
    json_object *ev = kite_event_build(&es);
    int e = apiserver_create_sync(s, er, ev);
    if (e < 0) log_warn("apiserver", "node %s: cannot record its %s event: %s", r->name, kite_node_state_name(r->state), strerror(-e));
    json_object_put(ev);
}

void nodestate_pass(struct kite_apiserver *s) {
    struct kite_nodestate *ns = s->nodestate;
    if (!ns) return;
    int64_t now = kite_now_wall(s->clock);
    size_t n;
    struct node_row *rows = compute(s, now, true, &n);
    struct kite_buf m = {0};
    struct node_row **changed = kite_calloc(n ? n : 1, sizeof *changed);
    size_t nch = 0;
    pthread_mutex_lock(&ns->mu);
    struct kite_map keep = {0};
    for (size_t i = 0; i < n; i++) {
        struct prev *pv = kite_map_del(&ns->prev, rows[i].name);
        if (!pv) pv = kite_calloc(1, sizeof *pv), pv->state = KITE_NODE_NONE;
        /* first sight of a healthy node is no news; anything else, and every change, is */
        if (pv->state != rows[i].state && !(pv->state == KITE_NODE_NONE && rows[i].state == KITE_NODE_HEALTHY))
            changed[nch++] = &rows[i];
        pv->state = rows[i].state;
        if (rows[i].uid[0]) snprintf(pv->uid, sizeof pv->uid, "%s", rows[i].uid);
        kite_map_put(&keep, rows[i].name, pv);
        kite_buf_printf(&m, "kite_node_state{node=\"%s\",state=\"%s\"} 1\n", rows[i].name, kite_node_state_name(rows[i].state));
    }
    /* nodes gone from the report keep their uid (a Node deleted and made again later) */
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&ns->prev, &it, &k, &v);) {
        struct prev *pv = v;
        pv->state = KITE_NODE_NONE;
        kite_map_put(&keep, k, pv);
    }
    kite_map_release(&ns->prev);
    ns->prev = keep;
    kite_buf_release(&ns->metrics);
    ns->metrics = m;
    pthread_mutex_unlock(&ns->mu);
    for (size_t i = 0; i < nch; i++) {
        log_info("apiserver", "node %s: %s: %s", changed[i]->name, kite_node_state_name(changed[i]->state), changed[i]->evidence);
        record_event(s, changed[i], now);
    }
    free(changed);
    rows_free(rows, n);
}

void nodestate_metrics(struct kite_apiserver *s, struct kite_buf *b) {
    struct kite_nodestate *ns = s->nodestate;
    if (!ns) return;
    kite_buf_puts(b, "# HELP kite_node_state The divergence state of each node (kite nodes), 1 for its one state.\n"
                     "# TYPE kite_node_state gauge\n");
    pthread_mutex_lock(&ns->mu);
    if (ns->metrics.len) kite_buf_append(b, ns->metrics.p, ns->metrics.len);
    kite_buf_printf(b, "# HELP kite_node_identities_dropped_total Calls of node identities past the %d remembered.\n"
                       "# TYPE kite_node_identities_dropped_total counter\nkite_node_identities_dropped_total %llu\n",
                    KITE_NODESEEN_MAX, (unsigned long long)ns->seen_dropped);
    pthread_mutex_unlock(&ns->mu);
}

/* GET /debug/kite/nodes: {"items":[{"name","state","evidence"}]} computed now. */
void nodestate_reply(struct req *rq) {
    size_t n;
    struct node_row *rows = compute(rq->srv, kite_now_wall(rq->srv->clock), false, &n);
    json_object *out = json_object_new_object(), *items = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        json_object *it = json_object_new_object();
        kite_obj_set(it, "name", json_object_new_string(rows[i].name));
        kite_obj_set(it, "state", json_object_new_string(kite_node_state_name(rows[i].state)));
        kite_obj_set(it, "evidence", json_object_new_string(rows[i].evidence));
        kite_obj_set(it, "hasNode", json_object_new_boolean(rows[i].has_node));
        json_object_array_add(items, it);
    }
    kite_obj_set(out, "kind", json_object_new_string("NodeStateList"));
    kite_obj_set(out, "items", items);
    size_t len;
    const char *txt = json_object_to_json_string_length(out, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    char *body = kite_strdup(txt);
    json_object_put(out);
    rows_free(rows, n);
    reply(rq, 200, "application/json", body, len);
}
