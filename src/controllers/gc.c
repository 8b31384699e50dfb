/* The garbage collector's core (gc.h). The graph holds every watched object by uid; the
 * dependents of an owner are found by a scan (the graph is small next to a request). */
#include "controllers/gc.h"
#include "framework/framework.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/workqueue.h"
#include "controllers/workloads/wlutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define LOG "garbage-collector"

/* The kinds, from the registry: every row with gc_owner, and pods (what they make that owns
 * nothing itself). Built once. */
#define GC_KINDS_MAX 32
static struct kite_gc_kind kinds[GC_KINDS_MAX];
static char prefixes[GC_KINDS_MAX][96];
static size_t n_kinds;
static pthread_once_t kinds_once = PTHREAD_ONCE_INIT;

static void add_kind(const struct kite_resource *r) {
    if (n_kinds == GC_KINDS_MAX) return;
    if (*r->group) snprintf(prefixes[n_kinds], sizeof prefixes[n_kinds], "/apis/%s/%s", r->group, r->version);
    else snprintf(prefixes[n_kinds], sizeof prefixes[n_kinds], "/api/%s", r->version);
    kinds[n_kinds] = (struct kite_gc_kind){r->api_version, r->kind, prefixes[n_kinds], r->plural, r->namespaced};
    n_kinds++;
}

static void build_kinds(void) {
    for (size_t i = 0; kite_resources[i]; i++)
        if (kite_resources[i]->gc_owner) add_kind(kite_resources[i]);
    const struct kite_resource *pods = kite_registry_find("", "v1", "pods");
    if (pods) add_kind(pods);
}

const struct kite_gc_kind *kite_gc_kinds(void) {
    pthread_once(&kinds_once, build_kinds);
    return kinds;
}

size_t kite_gc_n_kinds(void) {
    pthread_once(&kinds_once, build_kinds);
    return n_kinds;
}

struct gnode {
    char *uid, *ns, *name;
    size_t kind;
    json_object *owners;     /* metadata.ownerReferences (own copy; NULL: none) */
    json_object *finalizers; /* metadata.finalizers (own copy) */
    bool deleting;
};

struct kite_gc {
    struct kite_gc_options o;
    pthread_mutex_t lock;
    struct kite_map nodes; /* uid -> gnode */
    struct kite_wq q;      /* uids */
};

struct kite_gc *kite_gc_new(const struct kite_gc_options *o) {
    struct kite_gc *g = kite_calloc(1, sizeof *g);
    g->o = *o;
    if (!g->o.clock) g->o.clock = kite_clock_real();
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

static void gnode_free(struct gnode *n) {
    if (!n) return;
    json_object_put(n->owners);
    json_object_put(n->finalizers);
    free(n->uid);
    free(n->ns);
    free(n->name);
    free(n);
}

void kite_gc_free(struct kite_gc *g) {
    if (!g) return;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&g->nodes, &i, &k, &v);) gnode_free(v);
    kite_map_release(&g->nodes);
    kite_wq_release(&g->q);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static void enqueue(struct kite_gc *g, const char *uid) { kite_wq_add(&g->q, uid, kite_now_mono(g->o.clock)); }

static size_t n_refs(json_object *refs) {
    return refs && json_object_is_type(refs, json_type_array) ? json_object_array_length(refs) : 0;
}

static bool has_finalizer(json_object *fs, const char *f) {
    for (size_t i = 0; i < n_refs(fs); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(fs, i)), f)) return true;
    return false;
}

static json_object *copy(json_object *o) {
    json_object *c = NULL;
    if (o) json_object_deep_copy(o, &c, NULL);
    return c;
}

/* The owners of n waiting on their dependents (foreground, orphan) hear of its change. */
static void enqueue_owners(struct kite_gc *g, json_object *owners) {
    for (size_t i = 0; i < n_refs(owners); i++) {
        const char *uid = kite_obj_str(json_object_array_get_idx(owners, i), "uid");
        if (uid && kite_map_get(&g->nodes, uid)) enqueue(g, uid);
    }
}

void kite_gc_upsert(struct kite_gc *g, size_t kind, json_object *obj) {
    json_object *meta = kite_obj_meta(obj);
    const char *uid = kite_obj_str(meta, "uid");
    if (!uid || !*uid || kind >= KITE_GC_N_KINDS) return;
    pthread_mutex_lock(&g->lock);
    struct gnode *n = kite_map_get(&g->nodes, uid);
    if (!n) {
        n = kite_calloc(1, sizeof *n);
        n->uid = kite_strdup(uid);
        n->ns = kite_strdup(kite_obj_str(meta, "namespace") ? kite_obj_str(meta, "namespace") : "");
        n->name = kite_strdup(kite_obj_str(meta, "name") ? kite_obj_str(meta, "name") : "");
        n->kind = kind;
        kite_map_put(&g->nodes, uid, n);
    }
    json_object *before = n->owners;
    n->owners = copy(kite_obj_get(meta, "ownerReferences"));
    json_object_put(n->finalizers);
    n->finalizers = copy(kite_obj_get(meta, "finalizers"));
    n->deleting = kite_obj_get(meta, "deletionTimestamp") != NULL;
    if (n_refs(n->owners) || n->deleting) enqueue(g, uid);
    enqueue_owners(g, n->owners);
    enqueue_owners(g, before); /* a reference taken off: the old owner may be done waiting */
    json_object_put(before);
    pthread_mutex_unlock(&g->lock);
}

void kite_gc_delete(struct kite_gc *g, size_t kind, json_object *obj) {
    const char *uid = kite_meta_str(obj, "uid");
    if (!uid) return;
    pthread_mutex_lock(&g->lock);
    struct gnode *n = kite_map_del(&g->nodes, uid);
    if (n) {
        enqueue_owners(g, n->owners);
        /* its dependents may be orphans now */
        const char *k;
        void *v;
        for (size_t i = 0; kite_map_next(&g->nodes, &i, &k, &v);) {
            struct gnode *d = v;
            for (size_t j = 0; j < n_refs(d->owners); j++)
                if (kite_streq(kite_obj_str(json_object_array_get_idx(d->owners, j), "uid"), uid)) enqueue(g, d->uid);
        }
    }
    gnode_free(n);
    pthread_mutex_unlock(&g->lock);
}

/* ---- sync ---- */

static const struct kite_gc_kind *kind_of_ref(json_object *ref) {
    for (size_t i = 0; i < KITE_GC_N_KINDS; i++)
        if (kite_streq(kite_obj_str(ref, "apiVersion"), KITE_GC_KINDS[i].api_version) &&
            kite_streq(kite_obj_str(ref, "kind"), KITE_GC_KINDS[i].kind))
            return &KITE_GC_KINDS[i];
    return NULL;
}

static char *path_of(const struct kite_gc_kind *k, const char *ns, const char *name) {
    return k->namespaced ? kite_asprintf("%s/namespaces/%s/%s/%s", k->prefix, ns, k->plural, name)
                         : kite_asprintf("%s/%s/%s", k->prefix, k->plural, name);
}

/* What a pass decided under the lock, done after it is released. */
enum task_type { T_DELETE, T_UNOWN, T_UNFINALIZE, T_VERIFY };
struct task {
    enum task_type type;
    char *path, *uid;       /* the object acted on */
    char *arg;              /* T_DELETE: propagation policy; T_UNOWN: owner uid; T_UNFINALIZE: finalizer */
    json_object *finalizers; /* T_UNFINALIZE: the list left */
    /* T_VERIFY: the owners not in the graph (paths and uids), all = every owner absent */
    char **opaths, **ouids;
    size_t n_owners;
    bool all;
    char *policy;
};
struct tasks {
    struct task *v;
    size_t n, cap;
};

static struct task *task_add(struct tasks *t, enum task_type type, const char *path, const char *uid) {
    if (t->n == t->cap) t->v = kite_realloc(t->v, (t->cap = t->cap ? 2 * t->cap : 8) * sizeof *t->v);
    struct task *x = &t->v[t->n++];
    *x = (struct task){.type = type, .path = kite_strdup(path), .uid = kite_strdup(uid)};
    return x;
}

static void tasks_release(struct tasks *t) {
    for (size_t i = 0; i < t->n; i++) {
        struct task *x = &t->v[i];
        free(x->path), free(x->uid), free(x->arg), free(x->policy);
        json_object_put(x->finalizers);
        for (size_t j = 0; j < x->n_owners; j++) free(x->opaths[j]), free(x->ouids[j]);
        free(x->opaths), free(x->ouids);
    }
    free(t->v);
}

static bool has_dependents(struct kite_gc *g, const char *uid) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&g->nodes, &i, &k, &v);) {
        struct gnode *d = v;
        for (size_t j = 0; j < n_refs(d->owners); j++)
            if (kite_streq(kite_obj_str(json_object_array_get_idx(d->owners, j), "uid"), uid)) return true;
    }
    return false;
}

/* The policy a dependent is deleted with (attemptToDeleteItem): its own finalizers say, else
 * Foreground when something depends on it and its owner waits (foreground), else Background. */
static const char *policy_for(struct kite_gc *g, struct gnode *d, bool owner_waits) {
    if (has_finalizer(d->finalizers, "orphan")) return "Orphan";
    if (has_finalizer(d->finalizers, "foregroundDeletion")) return "Foreground";
    return owner_waits && has_dependents(g, d->uid) ? "Foreground" : "Background";
}

static void unfinalize(struct tasks *t, struct gnode *n, const char *fin) {
    json_object *left = json_object_new_array();
    for (size_t i = 0; i < n_refs(n->finalizers); i++) {
        const char *f = json_object_get_string(json_object_array_get_idx(n->finalizers, i));
        if (f && strcmp(f, fin) != 0) json_object_array_add(left, json_object_new_string(f));
    }
    _cleanup_free_ char *path = path_of(&KITE_GC_KINDS[n->kind], n->ns, n->name);
    struct task *x = task_add(t, T_UNFINALIZE, path, n->uid);
    x->arg = kite_strdup(fin);
    x->finalizers = left;
}

static void sync(struct kite_gc *g, const char *uid, struct tasks *t) {
    struct gnode *n = kite_map_get(&g->nodes, uid);
    if (!n) return;
    bool orphan = n->deleting && has_finalizer(n->finalizers, "orphan");
    bool fg = n->deleting && has_finalizer(n->finalizers, "foregroundDeletion");
    if (orphan || fg) {
        size_t blocking = 0;
        const char *k;
        void *v;
        for (size_t i = 0; kite_map_next(&g->nodes, &i, &k, &v);) {
            struct gnode *d = v;
            for (size_t j = 0; j < n_refs(d->owners); j++) {
                json_object *ref = json_object_array_get_idx(d->owners, j);
                if (!kite_streq(kite_obj_str(ref, "uid"), uid)) continue;
                _cleanup_free_ char *path = path_of(&KITE_GC_KINDS[d->kind], d->ns, d->name);
                if (orphan) {
                    task_add(t, T_UNOWN, path, d->uid)->arg = kite_strdup(uid);
                    blocking++;
                } else {
                    if (!d->deleting) task_add(t, T_DELETE, path, d->uid)->arg = kite_strdup(policy_for(g, d, true));
                    json_object *b = kite_obj_get(ref, "blockOwnerDeletion");
                    if (b && json_object_get_boolean(b)) blocking++;
                }
            }
        }
        if (!blocking) unfinalize(t, n, orphan ? "orphan" : "foregroundDeletion");
        return;
    }
    if (!n_refs(n->owners)) return;
    /* owners not in the graph are verified with a GET before anything is done */
    struct task *x = NULL;
    size_t absent = 0;
    for (size_t j = 0; j < n_refs(n->owners); j++) {
        json_object *ref = json_object_array_get_idx(n->owners, j);
        const struct kite_gc_kind *k = kind_of_ref(ref);
        const char *ouid = kite_obj_str(ref, "uid");
        if (!k || !ouid || kite_map_get(&g->nodes, ouid)) continue; /* present, or a kind not watched */
        if (!x) {
            _cleanup_free_ char *path = path_of(&KITE_GC_KINDS[n->kind], n->ns, n->name);
            x = task_add(t, T_VERIFY, path, n->uid);
            x->opaths = kite_calloc(n_refs(n->owners), sizeof *x->opaths);
            x->ouids = kite_calloc(n_refs(n->owners), sizeof *x->ouids);
        }
        x->opaths[x->n_owners] = path_of(k, n->ns, kite_obj_str(ref, "name"));
        x->ouids[x->n_owners++] = kite_strdup(ouid);
        absent++;
    }
    if (x) {
        x->all = absent == n_refs(n->owners);
        x->policy = kite_strdup(policy_for(g, n, false));
    }
}

/* A strategic merge patch taking the reference to owner uid off an object (pinned to its uid). */
static json_object *unown_patch(const char *uid, const char *owner_uid) {
    json_object *p = json_object_new_object(), *meta = json_object_new_object(), *refs = json_object_new_array(),
                *d = json_object_new_object();
    kite_obj_set(d, "$patch", json_object_new_string("delete"));
    kite_obj_set(d, "uid", json_object_new_string(owner_uid));
    json_object_array_add(refs, d);
    kite_obj_set(meta, "ownerReferences", refs);
    kite_obj_set(meta, "uid", json_object_new_string(uid));
    kite_obj_set(p, "metadata", meta);
    return p;
}

static int delete_obj(struct kite_gc *g, const char *path, const char *uid, const char *policy) {
    json_object *opts = json_object_new_object(), *pre = json_object_new_object();
    kite_obj_set(opts, "kind", json_object_new_string("DeleteOptions"));
    kite_obj_set(opts, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(opts, "propagationPolicy", json_object_new_string(policy));
    kite_obj_set(pre, "uid", json_object_new_string(uid));
    kite_obj_set(opts, "preconditions", pre);
    int e = kite_client_json(g->o.client, "DELETE", path, NULL, opts, NULL, NULL);
    json_object_put(opts);
    return e;
}

/* Runs one task; false when it failed and the object is to be looked at again. */
static bool run_task(struct kite_gc *g, struct task *x) {
    int e = 0;
    switch (x->type) {
    case T_DELETE:
        e = delete_obj(g, x->path, x->uid, x->arg);
        break;
    case T_UNOWN: {
        json_object *p = unown_patch(x->uid, x->arg);
        e = kite_client_json(g->o.client, "PATCH", x->path, "application/strategic-merge-patch+json", p, NULL, NULL);
        json_object_put(p);
        break;
    }
    case T_UNFINALIZE: {
        json_object *p = json_object_new_object(), *meta = json_object_new_object();
        kite_obj_set(meta, "finalizers", json_object_get(x->finalizers));
        kite_obj_set(meta, "uid", json_object_new_string(x->uid));
        kite_obj_set(p, "metadata", meta);
        e = kite_client_json(g->o.client, "PATCH", x->path, "application/merge-patch+json", p, NULL, NULL);
        json_object_put(p);
        break;
    }
    case T_VERIFY: {
        size_t gone = 0;
        bool *absent = kite_calloc(x->n_owners, sizeof *absent);
        for (size_t i = 0; i < x->n_owners; i++) {
            json_object *o = NULL;
            int r = kite_client_json(g->o.client, "GET", x->opaths[i], NULL, NULL, NULL, &o);
            if (r == -ENOENT || (r == 0 && !kite_streq(kite_meta_str(o, "uid"), x->ouids[i]))) absent[i] = true, gone++;
            else if (r < 0) e = r;
            json_object_put(o);
        }
        if (e == 0 && gone == x->n_owners && x->all) {
            e = delete_obj(g, x->path, x->uid, x->policy);
        } else if (e == 0) {
            for (size_t i = 0; i < x->n_owners && e == 0; i++) {
                if (!absent[i]) continue;
                json_object *p = unown_patch(x->uid, x->ouids[i]);
                e = kite_client_json(g->o.client, "PATCH", x->path, "application/strategic-merge-patch+json", p, NULL, NULL);
                json_object_put(p);
            }
        }
        free(absent);
        break;
    }
    }
    if (e < 0 && e != -ENOENT && e != -EEXIST) {
        log_debug(LOG, "%s: %s", x->path, strerror(-e));
        return false;
    }
    return true;
}

int64_t kite_gc_step(struct kite_gc *g) {
    for (;;) {
        pthread_mutex_lock(&g->lock);
        char *uid = kite_wq_pop_due(&g->q, kite_now_mono(g->o.clock));
        if (!uid) {
            int64_t next = kite_wq_next(&g->q, kite_now_mono(g->o.clock));
            pthread_mutex_unlock(&g->lock);
            return next;
        }
        struct tasks t = {0};
        sync(g, uid, &t);
        pthread_mutex_unlock(&g->lock);
        bool ok = true;
        for (size_t i = 0; i < t.n; i++) ok &= run_task(g, &t.v[i]);
        tasks_release(&t);
        if (!ok) {
            pthread_mutex_lock(&g->lock);
            kite_wq_add(&g->q, uid, kite_now_mono(g->o.clock) + KITE_GC_RETRY_NS);
            pthread_mutex_unlock(&g->lock);
        }
        free(uid);
    }
}

bool kite_gc_pending(struct kite_gc *g) {
    pthread_mutex_lock(&g->lock);
    bool due = kite_wq_due(&g->q, kite_now_mono(g->o.clock));
    pthread_mutex_unlock(&g->lock);
    return due;
}

/* ---- on the framework: every kind of KITE_GC_KINDS feeds it (the tag is the row) ---- */
static void gc_upsert_feed(void *core, json_object *obj, uintptr_t kind) { kite_gc_upsert(core, kind, obj); }
static void gc_delete_feed(void *core, json_object *obj, uintptr_t kind) { kite_gc_delete(core, kind, obj); }
KITE_CTL_CORE(kite_gc, struct kite_gc)

int kite_gc_run(struct kite_ctl_group *g) {
    struct kite_gc_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    struct kite_ctl_feed feeds[KITE_CTL_MAX_FEEDS];
    char paths[KITE_CTL_MAX_FEEDS][128];
    size_t n = KITE_MIN(KITE_GC_N_KINDS, (size_t)KITE_CTL_MAX_FEEDS);
    for (size_t i = 0; i < n; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s", KITE_GC_KINDS[i].prefix, KITE_GC_KINDS[i].plural);
        feeds[i] = (struct kite_ctl_feed){.path = paths[i], .upsert = gc_upsert_feed, .del = gc_delete_feed, .tag = i};
    }
    struct kite_ctl_spec spec = {.name = "garbage-collect", .step = kite_gc_step_core, .pending = kite_gc_pending_core,
                                 .free = kite_gc_free_core, .feeds = feeds, .n_feeds = n};
    return kite_ctl_run(g, &spec, kite_gc_new(&o));
}
