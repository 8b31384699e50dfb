/* The serviceaccount and root-ca-cert-publisher controllers (serviceaccounts.h): one state per
 * namespace under one lock, a keyed work queue of namespaces, and requests made outside the
 * lock from the runner thread alone. */
#include "controllers/serviceaccounts.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"
#include "framework/framework.h"
#include "framework/workqueue.h"

#include <pthread.h>
#include <stdio.h>

#define LOG "serviceaccounts"
#define DESCRIPTION_ANNOTATION "kubernetes.io/description"
#define IDLE_NS (300 * KITE_NS_PER_SEC)

struct nsstate {
    bool known;      /* the namespace itself was seen */
    bool active;     /* ... and is not terminating */
    bool has_sa;     /* the ServiceAccount `default` is there */
    json_object *cm; /* the ConfigMap kube-root-ca.crt as last seen (owned), or NULL */
};

struct kite_sactl {
    struct kite_sactl_options o;
    char *ca;
    pthread_mutex_t lock;
    struct kite_map ns; /* name -> struct nsstate */
    struct kite_wq q;
};

struct kite_sactl *kite_sactl_new(const struct kite_sactl_options *o) {
    struct kite_sactl *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    if (!c->o.clock) c->o.clock = kite_clock_real();
    c->ca = o->root_ca_pem ? kite_strdup(o->root_ca_pem) : NULL;
    c->o.root_ca_pem = NULL;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void state_free(struct nsstate *st) {
    if (!st) return;
    json_object_put(st->cm);
    free(st);
}

void kite_sactl_free(struct kite_sactl *c) {
    if (!c) return;
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->ns, &i, &k, &v);) state_free(v);
    kite_map_release(&c->ns);
    kite_wq_release(&c->q);
    pthread_mutex_destroy(&c->lock);
    free(c->ca);
    free(c);
}

/* under the lock */
static struct nsstate *state(struct kite_sactl *c, const char *ns) {
    struct nsstate *st = kite_map_get(&c->ns, ns);
    if (!st) kite_map_put(&c->ns, ns, st = kite_calloc(1, sizeof *st));
    return st;
}

static void queue(struct kite_sactl *c, const char *ns) { kite_wq_add(&c->q, ns, kite_now_mono(c->o.clock)); }

void kite_sactl_ns_upsert(struct kite_sactl *c, json_object *obj) {
    const char *name = kite_meta_str(obj, "name");
    if (!name) return;
    const char *phase = kite_obj_str(kite_obj_get(obj, "status"), "phase");
    bool active = !kite_meta_str(obj, "deletionTimestamp") && !kite_streq(phase, "Terminating");
    pthread_mutex_lock(&c->lock);
    struct nsstate *st = state(c, name);
    st->known = true;
    st->active = active;
    if (active) queue(c, name);
    pthread_mutex_unlock(&c->lock);
}

void kite_sactl_ns_delete(struct kite_sactl *c, json_object *obj) {
    const char *name = kite_meta_str(obj, "name");
    if (!name) return;
    pthread_mutex_lock(&c->lock);
    state_free(kite_map_del(&c->ns, name));
    kite_wq_forget(&c->q, name);
    pthread_mutex_unlock(&c->lock);
}

static void sa_set(struct kite_sactl *c, json_object *obj, bool present) {
    const char *ns = kite_meta_str(obj, "namespace");
    if (!ns || !kite_streq(kite_meta_str(obj, "name"), KITE_SACTL_SA_NAME)) return;
    pthread_mutex_lock(&c->lock);
    struct nsstate *st = state(c, ns);
    st->has_sa = present;
    if (!present) queue(c, ns);
    pthread_mutex_unlock(&c->lock);
}
void kite_sactl_sa_upsert(struct kite_sactl *c, json_object *sa) { sa_set(c, sa, true); }
void kite_sactl_sa_delete(struct kite_sactl *c, json_object *sa) { sa_set(c, sa, false); }

static void cm_set(struct kite_sactl *c, json_object *obj, bool present) {
    const char *ns = kite_meta_str(obj, "namespace");
    if (!ns || !kite_streq(kite_meta_str(obj, "name"), KITE_SACTL_CM_NAME)) return;
    json_object *copy = NULL;
    if (present) json_object_deep_copy(obj, &copy, NULL);
    pthread_mutex_lock(&c->lock);
    struct nsstate *st = state(c, ns);
    json_object_put(st->cm);
    st->cm = copy;
    queue(c, ns);
    pthread_mutex_unlock(&c->lock);
}
void kite_sactl_cm_upsert(struct kite_sactl *c, json_object *cm) { cm_set(c, cm, true); }
void kite_sactl_cm_delete(struct kite_sactl *c, json_object *cm) { cm_set(c, cm, false); }

bool kite_sactl_pending(struct kite_sactl *c) {
    pthread_mutex_lock(&c->lock);
    bool due = kite_wq_due(&c->q, kite_now_mono(c->o.clock));
    pthread_mutex_unlock(&c->lock);
    return due;
}

/* The ConfigMap holds exactly ca.crt = the CA, and the description (upstream's check). */
static bool cm_current(const struct kite_sactl *c, json_object *cm) {
    json_object *data = kite_obj_get(cm, "data");
    const char *desc = kite_obj_str(kite_obj_get(kite_obj_meta(cm), "annotations"), DESCRIPTION_ANNOTATION);
    return data && json_object_is_type(data, json_type_object) && json_object_object_length(data) == 1 &&
           kite_streq(kite_obj_str(data, "ca.crt"), c->ca) && desc && *desc;
}

/* The ConfigMap as the publisher writes it: cur (borrowed; NULL for a new one) with data
 * replaced and the description set. */
static json_object *cm_body(const struct kite_sactl *c, const char *ns, json_object *cur) {
    json_object *cm = NULL;
    if (cur) json_object_deep_copy(cur, &cm, NULL);
    else {
        cm = json_object_new_object();
        kite_obj_set(cm, "apiVersion", json_object_new_string("v1"));
        kite_obj_set(cm, "kind", json_object_new_string("ConfigMap"));
        json_object *meta = kite_obj_ensure(cm, "metadata");
        kite_obj_set(meta, "name", json_object_new_string(KITE_SACTL_CM_NAME));
        kite_obj_set(meta, "namespace", json_object_new_string(ns));
    }
    json_object *data = json_object_new_object();
    kite_obj_set(data, "ca.crt", json_object_new_string(c->ca));
    kite_obj_set(cm, "data", data);
    kite_obj_set(kite_obj_ensure(kite_obj_meta(cm), "annotations"), DESCRIPTION_ANNOTATION,
                 json_object_new_string(KITE_SACTL_CM_DESCRIPTION));
    return cm;
}

/* A create's outcome: done, or gone with its namespace (404, or 403 terminating). */
static bool settled(int e) { return e == 0 || e == -EEXIST || e == -ENOENT || e == -EPERM; }

/* One namespace's work, outside the lock. 0, or -errno to retry with back-off. */
static int sync_ns(struct kite_sactl *c, const char *ns, bool need_sa, json_object *cm_create, json_object *cm_update) {
    int rc = 0, e;
    if (need_sa) {
        json_object *sa = json_object_new_object();
        kite_obj_set(sa, "apiVersion", json_object_new_string("v1"));
        kite_obj_set(sa, "kind", json_object_new_string("ServiceAccount"));
        kite_obj_set(kite_obj_ensure(sa, "metadata"), "name", json_object_new_string(KITE_SACTL_SA_NAME));
        _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/serviceaccounts", ns);
        e = kite_client_json(c->o.client, "POST", path, "application/json", sa, NULL, NULL);
        json_object_put(sa);
        if (!settled(e)) {
            log_warn(LOG, "cannot create serviceaccount %s/" KITE_SACTL_SA_NAME ": %s (will retry)", ns, strerror(-e));
            rc = e;
        }
    }
    if (cm_create) {
        _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/configmaps", ns);
        e = kite_client_json(c->o.client, "POST", path, "application/json", cm_create, NULL, NULL);
        if (!settled(e)) {
            log_warn(LOG, "cannot create configmap %s/" KITE_SACTL_CM_NAME ": %s (will retry)", ns, strerror(-e));
            rc = e;
        }
    }
    if (cm_update) {
        /* a PUT with the resourceVersion seen: a newer one (409) is judged again when it arrives */
        _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/configmaps/" KITE_SACTL_CM_NAME, ns);
        e = kite_client_json(c->o.client, "PUT", path, "application/json", cm_update, NULL, NULL);
        if (e < 0 && e != -ENOENT && e != -EEXIST) {
            log_warn(LOG, "cannot update configmap %s/" KITE_SACTL_CM_NAME ": %s (will retry)", ns, strerror(-e));
            rc = e;
        }
    }
    return rc;
}

int64_t kite_sactl_step(struct kite_sactl *c) {
    for (;;) {
        pthread_mutex_lock(&c->lock);
        int64_t now = kite_now_mono(c->o.clock);
        char *ns = kite_wq_pop_due(&c->q, now);
        if (!ns) {
            int64_t next = kite_wq_next(&c->q, now);
            pthread_mutex_unlock(&c->lock);
            return next < 0 ? IDLE_NS : next;
        }
        struct nsstate *st = kite_map_get(&c->ns, ns);
        bool need_sa = false;
        json_object *create = NULL, *update = NULL;
        if (st && st->known && st->active) {
            need_sa = !c->o.no_serviceaccounts && !st->has_sa;
            if (c->ca && !st->cm) create = cm_body(c, ns, NULL);
            else if (c->ca && !cm_current(c, st->cm)) update = cm_body(c, ns, st->cm);
        }
        pthread_mutex_unlock(&c->lock);
        int r = need_sa || create || update ? sync_ns(c, ns, need_sa, create, update) : 0;
        json_object_put(create);
        json_object_put(update);
        pthread_mutex_lock(&c->lock);
        if (r < 0 && kite_map_get(&c->ns, ns)) kite_wq_add_backoff(&c->q, ns, kite_now_mono(c->o.clock));
        else kite_wq_forget(&c->q, ns);
        pthread_mutex_unlock(&c->lock);
        free(ns);
    }
}

/* ---- on the framework: namespaces feed both, and each its own object by name ---- */
KITE_CTL_FEED(kite_sactl_ns_upsert, struct kite_sactl)
KITE_CTL_FEED(kite_sactl_ns_delete, struct kite_sactl)
KITE_CTL_FEED(kite_sactl_sa_upsert, struct kite_sactl)
KITE_CTL_FEED(kite_sactl_sa_delete, struct kite_sactl)
KITE_CTL_FEED(kite_sactl_cm_upsert, struct kite_sactl)
KITE_CTL_FEED(kite_sactl_cm_delete, struct kite_sactl)
KITE_CTL_CORE(kite_sactl, struct kite_sactl)

int kite_sactl_run_serviceaccounts(struct kite_ctl_group *g) {
    struct kite_sactl_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/namespaces", .upsert = kite_sactl_ns_upsert_feed, .del = kite_sactl_ns_delete_feed},
        {.path = "/api/v1/serviceaccounts", .selector = "fieldSelector=metadata.name%3D" KITE_SACTL_SA_NAME,
         .upsert = kite_sactl_sa_upsert_feed, .del = kite_sactl_sa_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "serviceaccount", .step = kite_sactl_step_core,
                                 .pending = kite_sactl_pending_core, .free = kite_sactl_free_core, .feeds = feeds,
                                 .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_sactl_new(&o));
}

int kite_sactl_run_root_ca(struct kite_ctl_group *g, const char *root_ca_pem) {
    if (!root_ca_pem) {
        log_info(LOG, "no CA to publish as %s (no --root-ca-file, no CA in the kubeconfig)", KITE_SACTL_CM_NAME);
        return 0;
    }
    struct kite_sactl_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g),
                                   .root_ca_pem = root_ca_pem, .no_serviceaccounts = true};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/api/v1/namespaces", .upsert = kite_sactl_ns_upsert_feed, .del = kite_sactl_ns_delete_feed},
        {.path = "/api/v1/configmaps", .selector = "fieldSelector=metadata.name%3D" KITE_SACTL_CM_NAME,
         .upsert = kite_sactl_cm_upsert_feed, .del = kite_sactl_cm_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "root-ca-publish", .step = kite_sactl_step_core,
                                 .pending = kite_sactl_pending_core, .free = kite_sactl_free_core, .feeds = feeds,
                                 .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_sactl_new(&o));
}
