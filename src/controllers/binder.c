/* The binder (controllers.h): binds unassigned pods to one node, standing in for a scheduler.
 * One thread: list the unassigned pods and bind each, then watch them from the list's
 * revision; a failed binding ends the watch and the next list tries again after a back-off. */
#include "controllers/controllers.h"
#include "controllers/daemonset.h"
#include "api/registry.h"
#include "base/backoff.h"
#include "base/log.h"

#include <pthread.h>
#include <stdio.h>

#define UNASSIGNED "/api/v1/pods?fieldSelector=spec.nodeName%3D"
#define SCHEDULER "default-scheduler"

struct kite_binder {
    struct kite_client *client;
    struct kite_clock *clock;
    char *node;
    pthread_t thread;
    struct kite_cancel cancel;
    struct kite_backoff backoff;
    bool retry; /* a binding failed: list again after a back-off */
};

static bool to_bind(json_object *pod) {
    json_object *spec = kite_obj_get(pod, "spec"), *gates = kite_obj_get(spec, "schedulingGates");
    const char *node = kite_obj_str(spec, "nodeName"), *sched = kite_obj_str(spec, "schedulerName");
    return (!node || !*node) && !kite_meta_str(pod, "deletionTimestamp") && (!sched || kite_streq(sched, SCHEDULER)) &&
           !(gates && json_object_is_type(gates, json_type_array) && json_object_array_length(gates) > 0);
}

int kite_binder_bind(struct kite_client *client, json_object *pod, const char *node) {
    /* a pod pinned to another node (a daemon pod) waits for a scheduler */
    if (!to_bind(pod) || !kite_node_affinity_allows_name(pod, node)) return 0;
    const char *ns = kite_meta_str(pod, "namespace"), *name = kite_meta_str(pod, "name"), *uid = kite_meta_str(pod, "uid");
    if (!ns || !name) return 0;
    json_object *b = json_object_new_object(), *meta = json_object_new_object(), *target = json_object_new_object();
    kite_obj_set(b, "kind", json_object_new_string("Binding"));
    kite_obj_set(b, "apiVersion", json_object_new_string("v1"));
    kite_obj_set(meta, "name", json_object_new_string(name));
    kite_obj_set(meta, "namespace", json_object_new_string(ns));
    if (uid) kite_obj_set(meta, "uid", json_object_new_string(uid));
    kite_obj_set(b, "metadata", meta);
    kite_obj_set(target, "kind", json_object_new_string("Node"));
    kite_obj_set(target, "name", json_object_new_string(node));
    kite_obj_set(b, "target", target);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s/binding", ns, name);
    int e = kite_client_json(client, "POST", path, NULL, b, NULL, NULL);
    json_object_put(b);
    /* bound by someone else meanwhile, or gone: nothing left to do */
    return e == -EEXIST || e == -ENOENT ? 0 : e;
}

static void bind_logged(struct kite_binder *b, json_object *pod) {
    int e = kite_binder_bind(b->client, pod, b->node);
    if (e == 0) return;
    b->retry = true;
    log_warn("binder", "pod %s/%s: cannot bind to %s: %s (will retry)", kite_meta_str(pod, "namespace"),
             kite_meta_str(pod, "name"), b->node, strerror(-e));
}

struct watch_ctx {
    struct kite_binder *b;
    char rv[32];
};

static int on_event(json_object *ev, void *ud) {
    struct watch_ctx *w = ud;
    json_object *obj = kite_obj_get(ev, "object");
    const char *type = kite_obj_str(ev, "type"), *rv = kite_meta_str(obj, "resourceVersion");
    if (kite_streq(type, "ERROR")) return -ESTALE; /* 410: list again */
    if (rv) snprintf(w->rv, sizeof w->rv, "%s", rv);
    if (kite_streq(type, "ADDED") || kite_streq(type, "MODIFIED")) {
        bind_logged(w->b, obj);
        if (w->b->retry) return -EAGAIN;
    }
    return 0;
}

static void *run(void *ud) {
    struct kite_binder *b = ud;
    while (!kite_cancel_fired(&b->cancel)) {
        json_object *list = NULL;
        b->retry = false;
        int e = kite_client_json(b->client, "GET", UNASSIGNED, NULL, NULL, NULL, &list);
        struct watch_ctx w = {b, ""};
        if (e == 0) {
            json_object *items = kite_obj_get(list, "items");
            for (size_t i = 0; items && i < json_object_array_length(items); i++)
                bind_logged(b, json_object_array_get_idx(items, i));
            const char *rv = kite_meta_str(list, "resourceVersion");
            snprintf(w.rv, sizeof w.rv, "%s", rv ? rv : "");
        }
        json_object_put(list);
        if (e < 0 || b->retry) { /* the server is away, or a binding failed: back off, then list again */
            kite_cancel_wait(&b->cancel, kite_backoff_next(&b->backoff));
            continue;
        }
        kite_backoff_reset(&b->backoff);
        _cleanup_free_ char *path = kite_asprintf("%s&watch=true&resourceVersion=%s&timeoutSeconds=%d", UNASSIGNED, w.rv,
                                                  KITE_BINDER_RESYNC_S);
        if (kite_client_watch(b->client, path, on_event, &w, &b->cancel) == -EAGAIN)
            kite_cancel_wait(&b->cancel, kite_backoff_next(&b->backoff));
    }
    return NULL;
}

int kite_binder_start(const struct kite_binder_options *o, struct kite_binder **ret) {
    struct kite_binder *b = kite_calloc(1, sizeof *b);
    b->client = o->client;
    b->clock = o->clock ? o->clock : kite_clock_real();
    b->node = kite_strdup(o->node_name);
    kite_cancel_init(&b->cancel);
    kite_backoff_init(&b->backoff, KITE_NS_PER_SEC, KITE_BINDER_RETRY_MAX_S * KITE_NS_PER_SEC, 2.0, 0.1,
                      (uint64_t)kite_now_mono(b->clock));
    if (pthread_create(&b->thread, NULL, run, b) != 0) {
        kite_cancel_release(&b->cancel);
        free(b->node);
        free(b);
        return -EAGAIN;
    }
    pthread_setname_np(b->thread, "binder");
    *ret = b;
    return 0;
}

void kite_binder_stop(struct kite_binder *b) {
    if (!b) return;
    kite_cancel_fire(&b->cancel);
    pthread_join(b->thread, NULL);
    kite_cancel_release(&b->cancel);
    free(b->node);
    free(b);
}
