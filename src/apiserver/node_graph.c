/* The Node authorizer's graph (kube-apiserver's plugin/pkg/auth/authorizer/node graph): which
 * node each pod is bound to, and which Secrets, ConfigMaps, PersistentVolumeClaims and
 * ServiceAccounts the pods bound to each node reference.
 *
 * It is kept current from the pods' watch cache, event by event: a watcher whose notify drains
 * it on the store's writer thread while the change is fanned out, so it is current before the
 * write that changed it is acknowledged (a node that sees its pod bound can read the pod's
 * Secret at once, as it reads the pod itself). The parse it needs is the record's cached one,
 * which the agents' own filtered pod watches make on that thread anyway. A decision is then
 * one or two hash lookups under a read lock: no scan of pods per request, no allocation.
 *
 * Keys: pods "ns/name" -> struct pod_entry (bound pods only); edges "T/ns/name/node" -> the
 * number of that node's pods referencing the object (T one letter per kind). Object names
 * never hold '/', so a reference that does is not recorded (it could not be asked for). */
#include "apiserver/internal.h"
#include "base/map.h"

#include <stdio.h>

#define KEY_MAX 1024 /* "T/" + namespace (63) + name (253) + node (253) with room to spare */

struct pod_entry {
    char *node;
    char **edges; /* keys into g->edges, sorted */
    size_t n_edges;
};

struct kite_node_graph {
    pthread_rwlock_t lock;
    struct kite_map pods;
    struct kite_map edges;
    struct kite_wcache *cache;
    struct kite_watcher *w;
    size_t prefix_len; /* of "/registry/pods/" */
    bool broken;       /* the watcher was dropped: the graph no longer follows the pods */
};

/* ---- what a pod references (Kubernetes' VisitPodSecretNames, VisitPodConfigmapNames) ---- */

/* Volume sources naming a Secret, by the field path of the name. */
static const struct { const char *source, *path[2]; } SECRET_VOLUMES[] = {
    {"secret", {"secretName"}},           {"azureFile", {"secretName"}},
    {"cephfs", {"secretRef", "name"}},    {"cinder", {"secretRef", "name"}},
    {"flexVolume", {"secretRef", "name"}}, {"iscsi", {"secretRef", "name"}},
    {"rbd", {"secretRef", "name"}},       {"scaleIO", {"secretRef", "name"}},
    {"storageos", {"secretRef", "name"}}, {"csi", {"nodePublishSecretRef", "name"}},
};
static const char *const CONTAINER_LISTS[] = {"containers", "initContainers", "ephemeralContainers"};


static void ref(kite_node_ref_fn fn, void *ud, enum kite_node_ref t, const char *name) {
    if (name && *name) fn(t, name, ud);
}

void kite_node_graph_pod_refs(json_object *pod, kite_node_ref_fn fn, void *ud) {
    json_object *spec = kite_obj_get(pod, "spec");
    if (!spec) return;
    ref(fn, ud, KITE_NODE_REF_SERVICEACCOUNT, kite_obj_str(spec, "serviceAccountName"));
    json_object *ips = kite_obj_get(spec, "imagePullSecrets");
    for (size_t i = 0; i < kite_array_len(ips); i++)
        ref(fn, ud, KITE_NODE_REF_SECRET, kite_obj_str(json_object_array_get_idx(ips, i), "name"));
    for (size_t l = 0; l < KITE_ARRAY_SIZE(CONTAINER_LISTS); l++) {
        json_object *cs = kite_obj_get(spec, CONTAINER_LISTS[l]);
        for (size_t i = 0; i < kite_array_len(cs); i++) {
            json_object *c = json_object_array_get_idx(cs, i);
            json_object *env = kite_obj_get(c, "env"), *from = kite_obj_get(c, "envFrom");
            for (size_t j = 0; j < kite_array_len(env); j++) {
                json_object *e = json_object_array_get_idx(env, j);
                ref(fn, ud, KITE_NODE_REF_SECRET, kite_obj_str_at(e, "valueFrom", "secretKeyRef", "name"));
                ref(fn, ud, KITE_NODE_REF_CONFIGMAP, kite_obj_str_at(e, "valueFrom", "configMapKeyRef", "name"));
            }
            for (size_t j = 0; j < kite_array_len(from); j++) {
                json_object *e = json_object_array_get_idx(from, j);
                ref(fn, ud, KITE_NODE_REF_SECRET, kite_obj_str_at(e, "secretRef", "name", NULL));
                ref(fn, ud, KITE_NODE_REF_CONFIGMAP, kite_obj_str_at(e, "configMapRef", "name", NULL));
            }
        }
    }
    json_object *vols = kite_obj_get(spec, "volumes");
    const char *pod_name = kite_meta_str(pod, "name");
    for (size_t i = 0; i < kite_array_len(vols); i++) {
        json_object *v = json_object_array_get_idx(vols, i);
        for (size_t k = 0; k < KITE_ARRAY_SIZE(SECRET_VOLUMES); k++)
            ref(fn, ud, KITE_NODE_REF_SECRET,
                kite_obj_str_at(v, SECRET_VOLUMES[k].source, SECRET_VOLUMES[k].path[0], SECRET_VOLUMES[k].path[1]));
        ref(fn, ud, KITE_NODE_REF_CONFIGMAP, kite_obj_str_at(v, "configMap", "name", NULL));
        ref(fn, ud, KITE_NODE_REF_PVC, kite_obj_str_at(v, "persistentVolumeClaim", "claimName", NULL));
        if (kite_obj_get(v, "ephemeral") && pod_name) { /* the claim is named <pod>-<volume> */
            char claim[KEY_MAX];
            if (snprintf(claim, sizeof claim, "%s-%s", pod_name, kite_obj_str(v, "name") ? kite_obj_str(v, "name") : "") <
                (int)sizeof claim)
                ref(fn, ud, KITE_NODE_REF_PVC, claim);
        }
        json_object *srcs = kite_obj_get(kite_obj_get(v, "projected"), "sources");
        for (size_t j = 0; j < kite_array_len(srcs); j++) {
            json_object *s = json_object_array_get_idx(srcs, j);
            ref(fn, ud, KITE_NODE_REF_SECRET, kite_obj_str_at(s, "secret", "name", NULL));
            ref(fn, ud, KITE_NODE_REF_CONFIGMAP, kite_obj_str_at(s, "configMap", "name", NULL));
        }
    }
}

/* ---- keys -------------------------------------------------------------------------------- */

static const char REF_LETTER[] = {[KITE_NODE_REF_SECRET] = 's', [KITE_NODE_REF_CONFIGMAP] = 'c',
                                  [KITE_NODE_REF_PVC] = 'p', [KITE_NODE_REF_SERVICEACCOUNT] = 'a'};

static bool edge_key(char out[KEY_MAX], enum kite_node_ref t, const char *ns, const char *name, const char *node) {
    if (strchr(name, '/') || strchr(node, '/')) return false;
    int n = snprintf(out, KEY_MAX, "%c/%s/%s/%s", REF_LETTER[t], ns, name, node);
    return n > 0 && n < KEY_MAX;
}

static bool pod_key(char out[KEY_MAX], const char *ns, const char *name) {
    int n = snprintf(out, KEY_MAX, "%s/%s", ns, name);
    return n > 0 && n < KEY_MAX;
}

/* ---- updates (graph write-locked) -------------------------------------------------------- */

struct collect {
    const char *ns, *node;
    char **keys;
    size_t n, cap;
};

static void collect_ref(enum kite_node_ref t, const char *name, void *ud) {
    struct collect *c = ud;
    char key[KEY_MAX];
    if (!edge_key(key, t, c->ns, name, c->node)) return;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0) return; /* one edge per object, however often referenced */
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->keys = kite_realloc(c->keys, c->cap * sizeof *c->keys);
    }
    c->keys[c->n++] = kite_strdup(key);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void edges_add(struct kite_node_graph *g, char **keys, size_t n, intptr_t delta) {
    for (size_t i = 0; i < n; i++) {
        intptr_t c = (intptr_t)kite_map_get(&g->edges, keys[i]) + delta;
        if (c > 0) kite_map_put(&g->edges, keys[i], (void *)c);
        else kite_map_del(&g->edges, keys[i]);
    }
}

static void entry_free(struct pod_entry *e) {
    if (!e) return;
    for (size_t i = 0; i < e->n_edges; i++) free(e->edges[i]);
    free(e->edges);
    free(e->node);
    free(e);
}

/* Sets the pod at ns/name to pod (NULL: deleted). An unchanged pod (a status write: the
 * spec's references are what they were) changes nothing. */
static void set_pod(struct kite_node_graph *g, const char *ns, const char *name, json_object *pod) {
    char pk[KEY_MAX];
    if (!pod_key(pk, ns, name)) return;
    const char *node = pod ? kite_obj_str_at(pod, "spec", "nodeName", NULL) : NULL;
    if (node && (!*node || strchr(node, '/'))) node = NULL;
    struct collect c = {.ns = ns, .node = node};
    if (node) {
        kite_node_graph_pod_refs(pod, collect_ref, &c);
        if (c.n > 1) qsort(c.keys, c.n, sizeof *c.keys, cmp_str);
    }
    struct pod_entry *old = kite_map_get(&g->pods, pk);
    if (old && node && strcmp(old->node, node) == 0 && old->n_edges == c.n) {
        size_t i = 0;
        while (i < c.n && strcmp(old->edges[i], c.keys[i]) == 0) i++;
        if (i == c.n) {
            for (i = 0; i < c.n; i++) free(c.keys[i]);
            free(c.keys);
            return;
        }
    }
    if (old) {
        edges_add(g, old->edges, old->n_edges, -1);
        entry_free(kite_map_del(&g->pods, pk));
    }
    if (!node) return;
    struct pod_entry *e = kite_calloc(1, sizeof *e);
    e->node = kite_strdup(node);
    e->edges = c.keys;
    e->n_edges = c.n;
    edges_add(g, e->edges, e->n_edges, +1);
    kite_map_put(&g->pods, pk, e);
}

/* "/registry/pods/ns/name" -> ns, name (in buf). */
static bool split_key(struct kite_node_graph *g, const char *key, char buf[KEY_MAX], const char **ns, const char **name) {
    if (strlen(key) <= g->prefix_len || snprintf(buf, KEY_MAX, "%s", key + g->prefix_len) >= KEY_MAX) return false;
    char *slash = strchr(buf, '/');
    if (!slash) return false;
    *slash = 0;
    *ns = buf;
    *name = slash + 1;
    return true;
}

static void apply_record(struct kite_node_graph *g, struct kite_record *rec, bool deleted) {
    char buf[KEY_MAX];
    const char *ns, *name;
    if (!split_key(g, rec->key, buf, &ns, &name)) return;
    if (deleted) {
        set_pod(g, ns, name, NULL);
        return;
    }
    /* parsed for the moment: a tree left on every pod's latest record is tens of KB per pod */
    json_object *pod = kite_record_cache(rec), *own = pod ? NULL : kite_apiserver_record_parse(rec);
    set_pod(g, ns, name, pod ? pod : own);
    json_object_put(own);
}

/* Takes what the watcher holds, in order: the pop and the apply under one hold of the write
 * lock, so two drainers (the starter replaying, the writer fanning out) never reorder. */
static void drain(struct kite_node_graph *g) {
    struct kite_watch_event evs[16];
    pthread_rwlock_wrlock(&g->lock);
    int n;
    while ((n = kite_watcher_next(g->w, evs, KITE_ARRAY_SIZE(evs))) > 0)
        for (int i = 0; i < n; i++) {
            apply_record(g, evs[i].rec, evs[i].type == KITE_EV_DELETED);
            kite_record_unref(evs[i].rec);
            kite_record_unref(evs[i].prev);
        }
    if (n == -EPIPE && !g->broken) {
        /* cannot happen while every notify drains the queue; should it, refuse rather than
         * answer from a stale graph */
        g->broken = true;
        log_error("apiserver", "the node authorizer's pod graph fell behind the pods: graph-based grants are refused");
    }
    pthread_rwlock_unlock(&g->lock);
}

static void on_pods(void *ud) { drain(ud); }

int kite_node_graph_start(struct kite_apiserver *s) {
    const struct kite_resource *pods = kite_registry_find("", "v1", "pods");
    struct kite_wcache *cache = pods ? kite_apiserver_storage_cache(s, pods) : NULL;
    if (!cache) return -ENOENT;
    struct kite_node_graph *g = kite_calloc(1, sizeof *g);
    pthread_rwlock_init(&g->lock, NULL);
    g->cache = cache;
    g->prefix_len = strlen("/registry/") + strlen(pods->storage ? pods->storage : pods->plural) + 1;
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev = 0;
    int r = kite_wcache_list(cache, NULL, NULL, 0, NULL, NULL, &recs, &n, &rev, NULL);
    if (r < 0) {
        pthread_rwlock_destroy(&g->lock);
        free(g);
        return r;
    }
    pthread_rwlock_wrlock(&g->lock);
    for (size_t i = 0; i < n; i++) {
        apply_record(g, recs[i], false);
        kite_record_unref(recs[i]);
    }
    pthread_rwlock_unlock(&g->lock);
    free(recs);
    /* every later change: those since the list are replayed into the queue, drained below */
    r = kite_wcache_watch(cache, NULL, rev, KITE_WATCHER_QUEUE_MAX, SIZE_MAX, NULL, on_pods, g, &g->w);
    if (r < 0) {
        kite_node_graph_free(g);
        return r;
    }
    s->node_graph = g;
    drain(g);
    return 0;
}

void kite_node_graph_free(struct kite_node_graph *g) {
    if (!g) return;
    kite_watcher_close(g->w);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&g->pods, &i, &k, &v);) entry_free(v);
    kite_map_release(&g->pods);
    kite_map_release(&g->edges);
    pthread_rwlock_destroy(&g->lock);
    free(g);
}

/* ---- queries (graph read-locked; no allocation) ----------------------------------------- */

enum kite_node_pod kite_node_graph_pod(struct kite_node_graph *g, const char *ns, const char *name, const char *node) {
    char pk[KEY_MAX];
    if (!g || !ns || !name || !pod_key(pk, ns, name)) return KITE_NODE_POD_UNKNOWN;
    pthread_rwlock_rdlock(&g->lock);
    enum kite_node_pod r = KITE_NODE_POD_UNKNOWN;
    if (!g->broken) {
        struct pod_entry *e = kite_map_get(&g->pods, pk);
        if (e) r = strcmp(e->node, node) == 0 ? KITE_NODE_POD_OWN : KITE_NODE_POD_OTHER;
    }
    pthread_rwlock_unlock(&g->lock);
    return r;
}

bool kite_node_graph_has(struct kite_node_graph *g, enum kite_node_ref t, const char *ns, const char *name,
                         const char *node) {
    char key[KEY_MAX];
    if (!g || !ns || !name || !edge_key(key, t, ns, name, node)) return false;
    pthread_rwlock_rdlock(&g->lock);
    bool r = !g->broken && kite_map_get(&g->edges, key) != NULL;
    pthread_rwlock_unlock(&g->lock);
    return r;
}
