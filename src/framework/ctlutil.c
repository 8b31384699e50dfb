/* Shared controller helpers (ctlutil.h). */
#include "framework/ctlutil.h"
#include "api/events.h"
#include "api/registry.h"

#include <stdatomic.h>
#include <stdlib.h>

void kite_ctl_acts_add(struct kite_ctl_acts *a, int kind, const char *key, const char *method, const char *path,
                       const char *ctype, json_object *body) {
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 8;
        a->v = kite_realloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = (struct kite_ctl_act){kind, kite_strdup(key ? key : ""), kite_strdup(method), kite_strdup(path),
                                         ctype ? kite_strdup(ctype) : NULL, body};
}

void kite_ctl_acts_release(struct kite_ctl_acts *a) {
    for (size_t i = 0; i < a->n; i++) {
        free(a->v[i].key);
        free(a->v[i].method);
        free(a->v[i].path);
        free(a->v[i].ctype);
        json_object_put(a->v[i].body);
    }
    free(a->v);
    *a = (struct kite_ctl_acts){0};
}

void kite_ctl_acts_move(struct kite_ctl_acts *to, struct kite_ctl_acts *from) {
    for (size_t i = 0; i < from->n; i++) {
        if (to->n == to->cap) {
            to->cap = to->cap ? to->cap * 2 : 8;
            to->v = kite_realloc(to->v, to->cap * sizeof *to->v);
        }
        to->v[to->n++] = from->v[i];
    }
    free(from->v);
    *from = (struct kite_ctl_acts){0};
}

void kite_ctl_event(struct kite_ctl_acts *a, struct kite_clock *clock, const char *component, const char *kind,
                    const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                    const char *msg) {
    struct kite_event_spec es = {.ns = ns, .kind = kind, .obj_name = name, .obj_ns = strcmp(kind, "Node") ? ns : NULL,
                                 .uid = uid, .type = type, .reason = reason, .message = msg, .component = component,
                                 .instance = "", .wall_ns = kite_now_wall(clock)};
    json_object *ev = kite_event_build(&es);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/events", ns);
    kite_ctl_acts_add(a, KITE_CTL_EVENT, name, "POST", path, NULL, ev);
}

void kite_ctl_acts_run(struct kite_client *client, struct kite_ctl_acts *a,
                       void (*fn)(void *, const struct kite_ctl_act *, int, json_object *), void *ud) {
    for (size_t i = 0; i < a->n; i++) {
        const struct kite_ctl_act *x = &a->v[i];
        json_object *out = NULL;
        int e = kite_client_json(client, x->method, x->path, x->ctype, x->body, NULL, &out);
        if (x->kind != KITE_CTL_EVENT && fn) fn(ud, x, e, e == 0 ? out : NULL);
        json_object_put(out);
    }
}

struct parallel {
    size_t n;
    atomic_size_t next;
    void (*fn)(void *, size_t);
    void *ud;
};

static void *parallel_worker(void *arg) {
    struct parallel *p = arg;
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) p->fn(p->ud, i);
    return NULL;
}

void kite_ctl_parallel(size_t n, unsigned workers, void (*fn)(void *ud, size_t i), void *ud) {
    struct parallel p = {.n = n, .fn = fn, .ud = ud};
    size_t nt = KITE_MIN((size_t)workers, n);
    pthread_t *t = nt > 1 ? kite_calloc(nt - 1, sizeof *t) : NULL;
    size_t started = 0;
    for (; started + 1 < nt; started++)
        if (pthread_create(&t[started], NULL, parallel_worker, &p) != 0) break;
    parallel_worker(&p); /* this thread is one of them (and all of them if none started) */
    for (size_t i = 0; i < started; i++) pthread_join(t[i], NULL);
    free(t);
}

struct acts_parallel {
    struct kite_client *client;
    struct kite_ctl_acts *a;
    pthread_mutex_t mu; /* one fn call at a time */
    void (*fn)(void *, const struct kite_ctl_act *, int, json_object *);
    void *ud;
};

static void act_one(void *ud, size_t i) {
    struct acts_parallel *p = ud;
    const struct kite_ctl_act *x = &p->a->v[i];
    json_object *out = NULL;
    int e = kite_client_json(p->client, x->method, x->path, x->ctype, x->body, NULL, &out);
    if (x->kind != KITE_CTL_EVENT && p->fn) {
        pthread_mutex_lock(&p->mu);
        p->fn(p->ud, x, e, e == 0 ? out : NULL);
        pthread_mutex_unlock(&p->mu);
    }
    json_object_put(out);
}

void kite_ctl_acts_run_parallel(struct kite_client *client, struct kite_ctl_acts *a, unsigned workers,
                                void (*fn)(void *, const struct kite_ctl_act *, int, json_object *), void *ud) {
    if (KITE_MIN((size_t)workers, a->n) <= 1) {
        kite_ctl_acts_run(client, a, fn, ud);
        return;
    }
    struct acts_parallel p = {.client = client, .a = a, .fn = fn, .ud = ud};
    pthread_mutex_init(&p.mu, NULL);
    kite_ctl_parallel(a->n, workers, act_one, &p);
    pthread_mutex_destroy(&p.mu);
}

json_object *kite_ctl_condition(json_object *obj, const char *type) {
    json_object *conds = kite_obj_get(kite_obj_get(obj, "status"), "conditions");
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (kite_streq(kite_obj_str(c, "type"), type)) return c;
    }
    return NULL;
}

json_object *kite_ctl_taint(json_object *node, const char *key, const char *effect) {
    json_object *ts = kite_obj_get(kite_obj_get(node, "spec"), "taints");
    for (size_t i = 0; ts && json_object_is_type(ts, json_type_array) && i < json_object_array_length(ts); i++) {
        json_object *t = json_object_array_get_idx(ts, i);
        if (kite_streq(kite_obj_str(t, "key"), key) && kite_streq(kite_obj_str(t, "effect"), effect)) return t;
    }
    return NULL;
}

uint64_t kite_ctl_rv(json_object *obj) {
    const char *rv = kite_meta_str(obj, "resourceVersion");
    return rv ? strtoull(rv, NULL, 10) : 0;
}

void kite_ctl_pod_init(struct kite_ctl_pod *p, const char *ns, const char *name, const char *uid) {
    *p = (struct kite_ctl_pod){kite_asprintf("%s/%s", ns, name), kite_strdup(ns), kite_strdup(name),
                               uid ? kite_strdup(uid) : NULL};
}

void kite_ctl_pod_copy(struct kite_ctl_pod *to, const struct kite_ctl_pod *from) {
    *to = (struct kite_ctl_pod){kite_strdup(from->key), kite_strdup(from->ns), kite_strdup(from->name),
                                from->uid ? kite_strdup(from->uid) : NULL};
}

void kite_ctl_pod_set_uid(struct kite_ctl_pod *p, const char *uid) {
    if (kite_streq(uid, p->uid)) return;
    free(p->uid);
    p->uid = uid ? kite_strdup(uid) : NULL;
}

void kite_ctl_pod_release(struct kite_ctl_pod *p) {
    free(p->key);
    free(p->ns);
    free(p->name);
    free(p->uid);
    *p = (struct kite_ctl_pod){0};
}

int kite_ctl_pod_kill(struct kite_client *client, struct kite_clock *clock, const struct kite_ctl_pod_kill *k) {
    const struct kite_ctl_pod *p = &k->pod;
    int e;
    if (k->phase || k->reason) {
        json_object *patch = json_object_new_object(), *st = kite_obj_ensure(patch, "status");
        if (k->phase) kite_obj_set(st, "phase", json_object_new_string(k->phase));
        if (k->reason) {
            char now[21];
            kite_time_format(kite_now_wall(clock), now);
            json_object *c = json_object_new_object(), *conds = json_object_new_array();
            kite_obj_set(c, "type", json_object_new_string("DisruptionTarget"));
            kite_obj_set(c, "status", json_object_new_string("True"));
            kite_obj_set(c, "reason", json_object_new_string(k->reason));
            kite_obj_set(c, "message", json_object_new_string(k->message ? k->message : ""));
            kite_obj_set(c, "lastTransitionTime", json_object_new_string(now));
            json_object_array_add(conds, c);
            kite_obj_set(st, "conditions", conds);
        }
        _cleanup_free_ char *sp = kite_asprintf("/api/v1/namespaces/%s/pods/%s/status", p->ns, p->name);
        e = kite_client_json(client, "PATCH", sp, "application/strategic-merge-patch+json", patch, NULL, NULL);
        json_object_put(patch);
        if (e == -ENOENT) return 0;
        if (e < 0) return e;
    }
    json_object *opts = json_object_new_object();
    kite_obj_set(opts, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(opts, "kind", json_object_new_string("DeleteOptions"));
    if (k->grace0) kite_obj_set(opts, "gracePeriodSeconds", json_object_new_int(0));
    if (p->uid) kite_obj_set(kite_obj_ensure(opts, "preconditions"), "uid", json_object_new_string(p->uid));
    _cleanup_free_ char *dp = kite_asprintf("/api/v1/namespaces/%s/pods/%s", p->ns, p->name);
    e = kite_client_json(client, "DELETE", dp, NULL, opts, NULL, NULL);
    json_object_put(opts);
    return e == -ENOENT || e == -EEXIST ? 0 : e; /* gone, or another pod now has the name (409) */
}

void kite_ctl_pod_kills_run(struct kite_client *client, struct kite_clock *clock, pthread_mutex_t *lock,
                            struct kite_ctl_pod_kill *v, size_t n,
                            void (*failed)(void *ud, const struct kite_ctl_pod *p, int e),
                            void (*done)(void *ud, const struct kite_ctl_pod *p), void *ud) {
    for (size_t i = 0; i < n; i++) {
        int e = kite_ctl_pod_kill(client, clock, &v[i]);
        if (e < 0) {
            pthread_mutex_lock(lock);
            failed(ud, &v[i].pod, e);
            pthread_mutex_unlock(lock);
        } else {
            done(ud, &v[i].pod);
        }
        kite_ctl_pod_release(&v[i].pod);
    }
    free(v);
}

const char *const kite_ctl_node_members[] = {"metadata.uid",    "metadata.creationTimestamp", "metadata.deletionTimestamp",
                                             "metadata.labels", "spec",                       "status.conditions",
                                             NULL};
