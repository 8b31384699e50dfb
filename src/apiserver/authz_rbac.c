/* The RBAC authorizer (kube-apiserver's --authorization-mode=RBAC) and its privilege-escalation
 * checks on writes of roles and bindings.
 *
 * The authorizer never reads the store: it keeps an index of the four RBAC kinds, filled from
 * their watch caches at start and kept current by a watcher on each, whose events are applied
 * on the store's writer thread as they are fanned out (before the write's completion fires, so
 * a client that created a binding is authorized by it on its next request). The index maps a
 * subject ("u:NAME" for users and service accounts, "g:NAME" for groups) to the bindings that
 * name it; a request looks up its user's and groups' entries and resolves each binding's role
 * (kept compiled, by store key) when it gets there, so a role's change needs no re-indexing.
 * If a watcher were ever dropped (it cannot fall behind: it is drained on the thread that
 * feeds it) the index would be stale: it then stops granting anything, and says so in the log. */
#include "apiserver/rbac.h"

#include "base/map.h"

#include <stdio.h>

struct rbac_subject {
    char *key; /* "u:NAME" / "g:NAME" */
};
struct rbac_binding {
    char *ns;        /* "" for a ClusterRoleBinding */
    char *name;
    char *role_key;  /* store key of the role it refers to */
    const char *role_kind; /* "Role" / "ClusterRole" (static) */
    char *role_name;
    bool cluster;
    struct rbac_subject *subjects;
    size_t n_subjects;
};
struct bvec {
    struct rbac_binding **v;
    size_t n, cap;
};

enum { K_ROLE, K_CLUSTERROLE, K_ROLEBINDING, K_CLUSTERROLEBINDING, K_COUNT };
static const char *const PLURALS[K_COUNT] = {"roles", "clusterroles", "rolebindings", "clusterrolebindings"};

struct rbac_index;
struct rbac_feed {
    struct rbac_index *idx;
    int kind;
    struct kite_watcher *w;
};
struct rbac_index {
    pthread_rwlock_t lock;
    struct kite_map roles;      /* store key -> struct rbac_rules * (roles and clusterroles) */
    struct kite_map bindings;   /* store key -> struct rbac_binding * */
    struct kite_map by_subject; /* subject key -> struct bvec * */
    struct rbac_feed feeds[K_COUNT];
    const struct kite_resource *res[K_COUNT];
    bool broken;
};

/* ---- updates (under the write lock) ------------------------------------------------------- */

static void binding_free(struct rbac_binding *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n_subjects; i++) free(b->subjects[i].key);
    free(b->subjects);
    free(b->ns);
    free(b->name);
    free(b->role_key);
    free(b->role_name);
    free(b);
}

static void unindex(struct rbac_index *x, struct rbac_binding *b) {
    for (size_t i = 0; i < b->n_subjects; i++) {
        struct bvec *v = kite_map_get(&x->by_subject, b->subjects[i].key);
        for (size_t j = 0; v && j < v->n; j++)
            if (v->v[j] == b) {
                v->v[j] = v->v[--v->n];
                break;
            }
        if (v && !v->n) {
            kite_map_del(&x->by_subject, b->subjects[i].key);
            free(v->v);
            free(v);
        }
    }
}

static void index_binding(struct rbac_index *x, struct rbac_binding *b) {
    for (size_t i = 0; i < b->n_subjects; i++) {
        struct bvec *v = kite_map_get(&x->by_subject, b->subjects[i].key);
        if (!v) {
            v = kite_calloc(1, sizeof *v);
            kite_map_put(&x->by_subject, b->subjects[i].key, v);
        }
        if (v->n == v->cap) {
            v->cap = v->cap ? v->cap * 2 : 4;
            v->v = kite_realloc(v->v, v->cap * sizeof *v->v);
        }
        v->v[v->n++] = b;
    }
}

static struct rbac_binding *binding_of(struct rbac_index *x, json_object *o, bool cluster) {
    struct rbac_binding *b = kite_calloc(1, sizeof *b);
    const char *ns = cluster ? "" : (kite_meta_str(o, "namespace") ? kite_meta_str(o, "namespace") : "");
    b->cluster = cluster;
    b->ns = kite_strdup(ns);
    b->name = kite_strdup(kite_meta_str(o, "name") ? kite_meta_str(o, "name") : "");
    json_object *ref = kite_obj_get(o, "roleRef");
    const char *kind = kite_obj_str(ref, "kind"), *rname = kite_obj_str(ref, "name");
    bool clusterrole = kind && strcmp(kind, "ClusterRole") == 0;
    b->role_kind = clusterrole ? "ClusterRole" : "Role";
    b->role_name = kite_strdup(rname ? rname : "");
    b->role_key = clusterrole ? kite_object_key(x->res[K_CLUSTERROLE], NULL, b->role_name)
                              : kite_object_key(x->res[K_ROLE], ns, b->role_name);
    json_object *subs = kite_obj_get(o, "subjects");
    size_t n = subs && json_object_is_type(subs, json_type_array) ? json_object_array_length(subs) : 0;
    b->subjects = n ? kite_calloc(n, sizeof *b->subjects) : NULL;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(subs, i);
        const char *sk = kite_obj_str(s, "kind"), *sn = kite_obj_str(s, "name"), *sns = kite_obj_str(s, "namespace");
        if (!sk || !sn) continue;
        char *key = NULL;
        if (strcmp(sk, "User") == 0) key = kite_asprintf("u:%s", sn);
        else if (strcmp(sk, "Group") == 0) key = kite_asprintf("g:%s", sn);
        else if (strcmp(sk, "ServiceAccount") == 0 && ((sns && *sns) || *ns))
            key = kite_asprintf("u:system:serviceaccount:%s:%s", sns && *sns ? sns : ns, sn);
        if (key) b->subjects[b->n_subjects++].key = key;
    }
    return b;
}

static void apply(struct rbac_index *x, int kind, const char *key, json_object *o) {
    if (kind == K_ROLE || kind == K_CLUSTERROLE) {
        struct rbac_rules *old = o ? NULL : kite_map_del(&x->roles, key);
        if (o) {
            struct rbac_rules *r = kite_calloc(1, sizeof *r);
            kite_apiserver_rbac_rules_append(r, kite_obj_get(o, "rules"));
            old = kite_map_put(&x->roles, key, r);
        }
        if (old) kite_apiserver_rbac_rules_release(old), free(old);
        return;
    }
    struct rbac_binding *old = kite_map_del(&x->bindings, key);
    if (old) unindex(x, old), binding_free(old);
    if (!o) return;
    struct rbac_binding *b = binding_of(x, o, kind == K_CLUSTERROLEBINDING);
    kite_map_put(&x->bindings, key, b);
    index_binding(x, b);
}

static void apply_record(struct rbac_index *x, int kind, const struct kite_record *rec, bool deleted) {
    if (deleted) {
        apply(x, kind, rec->key, NULL);
        return;
    }
    json_object *o = kite_object_decode(rec->value, rec->len, rec->mod_rev);
    if (o) apply(x, kind, rec->key, o);
    json_object_put(o);
}

/* Drains a feed's watcher: on the writer thread (notify) and once after it is set up. The
 * events are taken and applied under the write lock so that two drainers keep their order. */
static void drain(struct rbac_feed *f) {
    struct rbac_index *x = f->idx;
    struct kite_watch_event ev[32];
    pthread_rwlock_wrlock(&x->lock);
    for (;;) {
        int n = kite_watcher_next(f->w, ev, KITE_ARRAY_SIZE(ev));
        if (n == -EPIPE && !x->broken) {
            x->broken = true;
            log_error("rbac", "the RBAC index lost events of %s: it grants nothing until the apiserver restarts",
                      PLURALS[f->kind]);
        }
        if (n <= 0) break;
        for (int i = 0; i < n; i++) {
            apply_record(x, f->kind, ev[i].rec, ev[i].type == KITE_EV_DELETED);
            kite_record_unref(ev[i].rec);
            kite_record_unref(ev[i].prev);
        }
    }
    pthread_rwlock_unlock(&x->lock);
}

static void feed_notify(void *ud) { drain(ud); }

int kite_apiserver_rbac_start(struct kite_apiserver *s) {
    struct rbac_index *x = kite_calloc(1, sizeof *x);
    pthread_rwlockattr_t at;
    pthread_rwlockattr_init(&at);
    /* the writer thread must not wait behind a stream of readers */
    pthread_rwlockattr_setkind_np(&at, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&x->lock, &at);
    pthread_rwlockattr_destroy(&at);
    for (int k = 0; k < K_COUNT; k++) {
        x->res[k] = kite_registry_find(KITE_RBAC_GROUP, "v1", PLURALS[k]);
        x->feeds[k] = (struct rbac_feed){.idx = x, .kind = k};
    }
    s->rbac = x;
    for (int k = 0; k < K_COUNT; k++) {
        struct kite_wcache *c = x->res[k] ? kite_apiserver_storage_cache(s, x->res[k]) : NULL;
        if (!c) return -ENOENT;
        struct kite_record **recs = NULL;
        size_t n = 0;
        int64_t rev = 0;
        pthread_rwlock_wrlock(&x->lock);
        int r = kite_wcache_list(c, NULL, NULL, 0, NULL, NULL, &recs, &n, &rev, NULL);
        for (size_t i = 0; r >= 0 && i < n; i++) apply_record(x, k, recs[i], false);
        for (size_t i = 0; i < n; i++) kite_record_unref(recs[i]);
        free(recs);
        pthread_rwlock_unlock(&x->lock);
        if (r < 0) return r;
        r = kite_wcache_watch(c, NULL, rev, KITE_WATCHER_QUEUE_MAX, SIZE_MAX, NULL, feed_notify, &x->feeds[k],
                              &x->feeds[k].w);
        if (r < 0) return r;
        drain(&x->feeds[k]); /* events replayed from the ring get no notify */
    }
    return 0;
}

void kite_apiserver_rbac_stop(struct kite_apiserver *s) {
    struct rbac_index *x = s->rbac;
    if (!x) return;
    for (int k = 0; k < K_COUNT; k++) kite_watcher_close(x->feeds[k].w);
    const char *key;
    void *v;
    for (size_t i = 0; kite_map_next(&x->roles, &i, &key, &v);) kite_apiserver_rbac_rules_release(v), free(v);
    for (size_t i = 0; kite_map_next(&x->bindings, &i, &key, &v);) binding_free(v);
    for (size_t i = 0; kite_map_next(&x->by_subject, &i, &key, &v);) free(((struct bvec *)v)->v), free(v);
    kite_map_release(&x->roles);
    kite_map_release(&x->bindings);
    kite_map_release(&x->by_subject);
    pthread_rwlock_destroy(&x->lock);
    free(x);
    s->rbac = NULL;
}

/* ---- reading (under the read lock) -------------------------------------------------------- */

/* Calls fn for every binding that applies to u in namespace ns (NULL: cluster bindings only),
 * with its role's rules (NULL when the role does not exist); stops when fn returns true. */
typedef bool (*visit_fn)(const struct rbac_binding *b, const struct rbac_rules *rules, void *ud);
static bool visit(struct rbac_index *x, const struct kite_user *u, const char *ns, visit_fn fn, void *ud) {
    for (size_t g = 0; g <= u->n_groups; g++) {
        const char *who = g == 0 ? u->name : u->groups[g - 1];
        char small[256];
        _cleanup_free_ char *big = NULL; /* names too long for the stack (rare) */
        const char *key = small;
        if ((size_t)snprintf(small, sizeof small, "%c:%s", g == 0 ? 'u' : 'g', who) >= sizeof small)
            key = big = kite_asprintf("%c:%s", g == 0 ? 'u' : 'g', who);
        struct bvec *v = kite_map_get(&x->by_subject, key);
        for (size_t i = 0; v && i < v->n; i++) {
            const struct rbac_binding *b = v->v[i];
            if (!b->cluster && (!ns || strcmp(ns, b->ns) != 0)) continue;
            if (fn(b, kite_map_get(&x->roles, b->role_key), ud)) return true;
        }
    }
    return false;
}

struct allow_ctx {
    const struct kite_authz_attrs *a;
    const struct rbac_binding *by;
};

static bool allows(const struct rbac_binding *b, const struct rbac_rules *rules, void *ud) {
    struct allow_ctx *c = ud;
    for (size_t i = 0; rules && i < rules->n; i++)
        if (kite_apiserver_rbac_rule_allows(&rules->v[i], c->a)) {
            c->by = b;
            return true;
        }
    return false;
}

enum kite_authz_decision kite_apiserver_rbac_authorize(const struct kite_authz_attrs *a, char **ret_reason) {
    struct rbac_index *x = a->view ? a->view->rbac : NULL;
    if (!x || !a->user || !a->user->name) return KITE_AUTHZ_NO_OPINION;
    struct allow_ctx c = {.a = a};
    pthread_rwlock_rdlock(&x->lock);
    /* a non-resource request is granted by cluster bindings only */
    bool ok = !x->broken && visit(x, a->user, a->resource ? a->ns : NULL, allows, &c);
    if (ok && ret_reason && !*ret_reason)
        *ret_reason = kite_asprintf("RBAC: allowed by %s \"%s\" of %s \"%s\"", c.by->cluster ? "ClusterRoleBinding" : "RoleBinding",
                                    c.by->name, c.by->role_kind, c.by->role_name);
    pthread_rwlock_unlock(&x->lock);
    return ok ? KITE_AUTHZ_ALLOW : KITE_AUTHZ_NO_OPINION;
}

static bool collect(const struct rbac_binding *b, const struct rbac_rules *rules, void *ud) {
    if (rules) kite_apiserver_rbac_rules_extend(ud, rules); /* copies: the caller uses them after the lock */
    return false;
}

void kite_apiserver_rbac_rules_for(struct kite_apiserver *s, const struct kite_user *u, const char *ns, struct rbac_rules *out) {
    struct rbac_index *x = s->rbac;
    if (!x) return;
    pthread_rwlock_rdlock(&x->lock);
    if (!x->broken) visit(x, u, ns, collect, out);
    pthread_rwlock_unlock(&x->lock);
}

int kite_apiserver_rbac_role_rules(struct kite_apiserver *s, const char *kind, const char *ns, const char *name,
                              struct rbac_rules *out) {
    struct rbac_index *x = s->rbac;
    if (!x) return -ENOENT;
    bool cluster = strcmp(kind, "ClusterRole") == 0;
    _cleanup_free_ char *key = cluster ? kite_object_key(x->res[K_CLUSTERROLE], NULL, name) : kite_object_key(x->res[K_ROLE], ns, name);
    pthread_rwlock_rdlock(&x->lock);
    const struct rbac_rules *r = kite_map_get(&x->roles, key);
    if (r) collect(NULL, r, out);
    pthread_rwlock_unlock(&x->lock);
    return r ? 0 : -ENOENT;
}
