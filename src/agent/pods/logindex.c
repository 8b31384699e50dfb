/* Where each container's log is, published by the pods thread for the agent's log server
 * (another thread): the current attempt's file, whether that attempt still runs, and the
 * previous attempt's file (`kubectl logs --previous`). A copy under the pods lock, so the
 * server never touches the workers' state; a change of a running flag calls the subscriber,
 * which ends followed logs of attempts that ended. */
#include "agent/pods/pods-int.h"

struct log_ctr {
    char *name, *path, *prev_path;
    char *id; /* the current attempt's container */
    bool running;
    char *run_id;       /* the same while it runs (resource metrics), and its start */
    int64_t started_ns;
};
struct log_pod {
    char *uid, *ns, *name;
    struct log_ctr *c;
    size_t nc;
};

static void log_pod_free(struct log_pod *lp) {
    if (!lp) return;
    for (size_t i = 0; i < lp->nc; i++) {
        free(lp->c[i].name);
        free(lp->c[i].path);
        free(lp->c[i].prev_path);
        free(lp->c[i].id);
        free(lp->c[i].run_id);
    }
    free(lp->c);
    free(lp->uid);
    free(lp->ns);
    free(lp->name);
    free(lp);
}

static struct log_pod *build(const struct pod *pod) {
    struct log_pod *lp = kite_calloc(1, sizeof *lp);
    lp->uid = kite_strdup(pod->uid);
    lp->ns = kite_strdup(pod->ns);
    lp->name = kite_strdup(pod->name);
    lp->c = kite_calloc(pod->nc ? pod->nc : 1, sizeof *lp->c);
    lp->nc = pod->nc;
    for (size_t i = 0; i < pod->nc; i++) {
        const struct pod_ctr *c = &pod->c[i];
        lp->c[i].name = kite_strdup(c->name);
        if (c->have_st && c->st.log_path && *c->st.log_path) lp->c[i].path = kite_strdup(c->st.log_path);
        if (c->have_last && c->last.log_path && *c->last.log_path) lp->c[i].prev_path = kite_strdup(c->last.log_path);
        if (c->id) lp->c[i].id = kite_strdup(c->id);
        lp->c[i].running = c->have_st && (c->st.state == KITE_CONTAINER_RUNNING || c->st.state == KITE_CONTAINER_CREATED);
        if (c->have_st && c->st.state == KITE_CONTAINER_RUNNING && c->st.id) {
            lp->c[i].run_id = kite_strdup(c->st.id);
            lp->c[i].started_ns = c->st.started_ns;
        }
    }
    return lp;
}

static bool same(const struct log_pod *a, const struct log_pod *b) {
    if (a->nc != b->nc) return false;
    for (size_t i = 0; i < a->nc; i++)
        if (a->c[i].running != b->c[i].running || !kite_streq(a->c[i].path, b->c[i].path) ||
            !kite_streq(a->c[i].prev_path, b->c[i].prev_path) || !kite_streq(a->c[i].id, b->c[i].id))
            return false;
    return true;
}

static size_t find_uid(struct kite_pods *p, const char *uid) {
    for (size_t i = 0; i < p->n_logs; i++)
        if (strcmp(p->logs[i]->uid, uid) == 0) return i;
    return SIZE_MAX;
}

static void notify(struct kite_pods *p) {
    pthread_mutex_lock(&p->lock);
    void (*fn)(void *) = p->log_hook;
    void *ud = p->log_hook_ud;
    pthread_mutex_unlock(&p->lock);
    if (fn) fn(ud);
}

void kite_pods_logs_publish(struct kite_pods *p, const struct pod *pod) {
    struct log_pod *lp = build(pod);
    pthread_mutex_lock(&p->lock);
    size_t i = find_uid(p, pod->uid);
    bool changed = true;
    if (i != SIZE_MAX) {
        changed = !same(p->logs[i], lp);
        log_pod_free(p->logs[i]);
        p->logs[i] = lp;
    } else {
        p->logs = kite_realloc(p->logs, (p->n_logs + 1) * sizeof *p->logs);
        p->logs[p->n_logs++] = lp;
    }
    pthread_mutex_unlock(&p->lock);
    if (changed) notify(p);
}

void kite_pods_logs_forget(struct kite_pods *p, const char *uid) {
    pthread_mutex_lock(&p->lock);
    size_t i = find_uid(p, uid);
    if (i != SIZE_MAX) {
        log_pod_free(p->logs[i]);
        p->logs[i] = p->logs[--p->n_logs];
    }
    pthread_mutex_unlock(&p->lock);
    if (i != SIZE_MAX) notify(p);
}

void kite_pods_logs_release(struct kite_pods *p) {
    for (size_t i = 0; i < p->n_logs; i++) log_pod_free(p->logs[i]);
    free(p->logs);
    p->logs = NULL;
    p->n_logs = 0;
}

void kite_pods_log_subscribe(struct kite_pods *p, void (*fn)(void *ud), void *ud) {
    pthread_mutex_lock(&p->lock);
    p->log_hook_ud = ud;
    p->log_hook = fn;
    pthread_mutex_unlock(&p->lock);
}

int kite_pods_log_lookup(struct kite_pods *p, const char *ns, const char *name, const char *container, bool previous,
                         char **ret_path, bool *ret_running) {
    int r = -ENOENT;
    pthread_mutex_lock(&p->lock);
    /* a name may be reused by a newer pod while the older one is still on the node: the last
     * published wins (the newest pod) */
    for (size_t i = p->n_logs; i-- > 0 && r == -ENOENT;) {
        struct log_pod *lp = p->logs[i];
        if (strcmp(lp->ns, ns) != 0 || strcmp(lp->name, name) != 0) continue;
        r = -ESRCH;
        for (size_t k = 0; k < lp->nc; k++) {
            if (strcmp(lp->c[k].name, container) != 0) continue;
            const char *path = previous ? lp->c[k].prev_path : lp->c[k].path;
            if (!path) {
                r = -ENODATA;
                break;
            }
            *ret_path = kite_strdup(path);
            *ret_running = !previous && lp->c[k].running;
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return r;
}

int kite_pods_running_containers(struct kite_pods *p, struct kite_pods_ctr_ref **ret, size_t *ret_n) {
    struct kite_pods_ctr_ref *v = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < p->n_logs; i++) {
        const struct log_pod *lp = p->logs[i];
        for (size_t k = 0; k < lp->nc; k++) {
            if (!lp->c[k].run_id) continue;
            if (n == cap) v = kite_realloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
            v[n++] = (struct kite_pods_ctr_ref){.ns = kite_strdup(lp->ns), .pod = kite_strdup(lp->name),
                                                .uid = kite_strdup(lp->uid), .name = kite_strdup(lp->c[k].name),
                                                .id = kite_strdup(lp->c[k].run_id), .started_ns = lp->c[k].started_ns};
        }
    }
    pthread_mutex_unlock(&p->lock);
    *ret = v;
    *ret_n = n;
    return 0;
}

void kite_pods_ctr_refs_free(struct kite_pods_ctr_ref *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(v[i].ns);
        free(v[i].pod);
        free(v[i].uid);
        free(v[i].name);
        free(v[i].id);
    }
    free(v);
}

int kite_pods_container_lookup(struct kite_pods *p, const char *ns, const char *name, const char *container,
                               char **ret_id) {
    int r = -ENOENT;
    pthread_mutex_lock(&p->lock);
    for (size_t i = p->n_logs; i-- > 0 && r == -ENOENT;) {
        struct log_pod *lp = p->logs[i];
        if (strcmp(lp->ns, ns) != 0 || strcmp(lp->name, name) != 0) continue;
        r = -ESRCH;
        for (size_t k = 0; k < lp->nc; k++) {
            if (!container && lp->c[k].id && lp->c[k].running) {
                *ret_id = kite_strdup(lp->c[k].id);
                r = 0;
                break;
            }
            if (!container) {
                r = -ENOTCONN;
                continue;
            }
            if (strcmp(lp->c[k].name, container) != 0) continue;
            if (!lp->c[k].id || !lp->c[k].running) {
                r = -ENOTCONN;
                break;
            }
            *ret_id = kite_strdup(lp->c[k].id);
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return r;
}

struct kite_runtime *kite_pods_runtime(struct kite_pods *p) { return p->rt; }
