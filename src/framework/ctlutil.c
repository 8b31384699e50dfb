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

const char *const kite_ctl_node_members[] = {"metadata.uid",    "metadata.creationTimestamp", "metadata.deletionTimestamp",
                                             "metadata.labels", "spec",                       "status.conditions",
                                             NULL};
