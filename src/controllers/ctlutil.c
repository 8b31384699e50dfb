/* Shared controller helpers (ctlutil.h). */
#include "controllers/ctlutil.h"
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

static _Atomic uint64_t event_seq;

void kite_ctl_event(struct kite_ctl_acts *a, struct kite_clock *clock, const char *component, const char *kind,
                    const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                    const char *msg) {
    int64_t wall = kite_now_wall(clock);
    char ts[21];
    kite_time_format(wall, ts);
    /* client-go names events <object>.<unix nanoseconds in hex>; the sequence keeps two of one
     * instant apart */
    _cleanup_free_ char *ename =
        kite_asprintf("%s.%llx", name, (unsigned long long)wall + (unsigned long long)atomic_fetch_add(&event_seq, 1));
    json_object *ev = json_object_new_object(), *meta = json_object_new_object(), *io = json_object_new_object(),
                *src = json_object_new_object();
    kite_obj_set(ev, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(ev, "kind", json_object_new_string("Event"));
    kite_obj_set(meta, "name", json_object_new_string(ename));
    kite_obj_set(meta, "namespace", json_object_new_string(ns));
    kite_obj_set(ev, "metadata", meta);
    kite_obj_set(io, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(io, "kind", json_object_new_string(kind));
    kite_obj_set(io, "name", json_object_new_string(name));
    if (strcmp(kind, "Node") != 0) kite_obj_set(io, "namespace", json_object_new_string(ns));
    if (uid) kite_obj_set(io, "uid", json_object_new_string(uid));
    kite_obj_set(ev, "involvedObject", io);
    kite_obj_set(ev, "reason", json_object_new_string(reason));
    kite_obj_set(ev, "message", json_object_new_string(msg));
    kite_obj_set(src, "component", json_object_new_string(component));
    kite_obj_set(ev, "source", src);
    kite_obj_set(ev, "firstTimestamp", json_object_new_string(ts));
    kite_obj_set(ev, "lastTimestamp", json_object_new_string(ts));
    kite_obj_set(ev, "count", json_object_new_int(1));
    kite_obj_set(ev, "type", json_object_new_string(type));
    kite_obj_set(ev, "reportingComponent", json_object_new_string(component));
    kite_obj_set(ev, "reportingInstance", json_object_new_string(""));
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
