/* The namespace controller (controllers.h): empties terminating namespaces, then finalizes
 * them. A reconciler (framework.h) on the shared namespace informer: a terminating namespace
 * that could not be finished yet is tried again after its own back-off. */
#include "controllers/controllers.h"
#include "api/registry.h"
#include "framework/framework.h"
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#define FINALIZER "kubernetes"


static bool has_finalizer(json_object *ns) {
    json_object *f = kite_obj_get(kite_obj_get(ns, "spec"), "finalizers");
    for (size_t i = 0; f && json_object_is_type(f, json_type_array) && i < json_object_array_length(f); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(f, i)), FINALIZER)) return true;
    return false;
}

static bool terminating(json_object *ns) { return kite_meta_str(ns, "deletionTimestamp") && has_finalizer(ns); }

static char *collection_path(const struct kite_resource *r, const char *ns) {
    return kite_asprintf("/%s/%s/namespaces/%s/%s", *r->group ? "apis" : "api", kite_resource_api_version(r), ns,
                         r->plural);
}

/* What a pass found, for the namespace's conditions (worded and sorted as
 * kube-controller-manager's, so an unchanged state writes unchanged conditions). */
struct findings {
    struct kite_buf failed;     /* "leases.coordination.k8s.io: <message>, ..." */
    size_t n_failed;
    char **remaining;           /* "leases.coordination.k8s.io has 2 resource instances" */
    size_t n_remaining;
    struct finalizer_count { char *name; size_t n; } *finalizers; /* objects each finalizer holds */
    size_t n_finalizers;
};

static void add_item(struct kite_buf *b, const char *fmt, ...) KITE_PRINTF(2, 3);
static void add_item(struct kite_buf *b, const char *fmt, ...) {
    if (b->len) kite_buf_puts(b, ", ");
    va_list ap;
    va_start(ap, fmt);
    char *s;
    if (vasprintf(&s, fmt, ap) >= 0) {
        kite_buf_puts(b, s);
        free(s);
    }
    va_end(ap);
}

static void count_finalizer(struct findings *f, const char *name) {
    for (size_t i = 0; i < f->n_finalizers; i++)
        if (kite_streq(f->finalizers[i].name, name)) {
            f->finalizers[i].n++;
            return;
        }
    f->finalizers = kite_realloc(f->finalizers, (f->n_finalizers + 1) * sizeof *f->finalizers);
    f->finalizers[f->n_finalizers++] = (struct finalizer_count){kite_strdup(name), 1};
}

static void findings_release(struct findings *f) {
    kite_buf_release(&f->failed);
    for (size_t i = 0; i < f->n_remaining; i++) free(f->remaining[i]);
    free(f->remaining);
    for (size_t i = 0; i < f->n_finalizers; i++) free(f->finalizers[i].name);
    free(f->finalizers);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* items sorted, joined by ", " (sort.Strings + strings.Join) */
static void join_sorted(char **items, size_t n, struct kite_buf *out) {
    if (n > 1) qsort(items, n, sizeof *items, cmp_str);
    for (size_t i = 0; i < n; i++) add_item(out, "%s", items[i]);
}

/* Deletes a resource's objects in ns, then counts what is left (held by finalizers). */
static void empty_resource(struct kite_client *client, const struct kite_resource *r, const char *ns, struct findings *f) {
    _cleanup_free_ char *path = collection_path(r, ns);
    char gr[128];
    kite_resource_gr(r, gr);
    json_object *st = NULL;
    long code = 0;
    int e = kite_client_json(client, "DELETE", path, NULL, NULL, &code, &st);
    if (e < 0) {
        const char *msg = kite_obj_str(st, "message");
        f->n_failed++;
        add_item(&f->failed, "%s: %s", gr, msg ? msg : code ? "request failed" : strerror(-e));
        json_object_put(st);
        return;
    }
    json_object_put(st);
    json_object *list = NULL;
    if ((e = kite_client_json(client, "GET", path, NULL, NULL, &code, &list)) < 0) {
        json_object_put(list); /* the Status */
        f->n_failed++;
        add_item(&f->failed, "%s: listing what remains: %s", gr, strerror(-e));
        return;
    }
    json_object *items = kite_obj_get(list, "items");
    size_t n = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
    if (n) {
        f->remaining = kite_realloc(f->remaining, (f->n_remaining + 1) * sizeof *f->remaining);
        f->remaining[f->n_remaining++] = kite_asprintf("%s has %zu resource instances", gr, n);
    }
    for (size_t i = 0; i < n; i++) {
        json_object *fin = kite_obj_get(kite_obj_meta(json_object_array_get_idx(items, i)), "finalizers");
        for (size_t j = 0; fin && json_object_is_type(fin, json_type_array) && j < json_object_array_length(fin); j++) {
            const char *name = json_object_get_string(json_object_array_get_idx(fin, j));
            if (name) count_finalizer(f, name);
        }
    }
    json_object_put(list);
}

static void condition(json_object *conds, const char *type, const struct kite_buf *b, const char *reason_true,
                      const char *prefix, const char *now) {
    json_object *c = json_object_new_object();
    kite_obj_set(c, "type", json_object_new_string(type));
    kite_obj_set(c, "status", json_object_new_string(b->len ? "True" : "False"));
    kite_obj_set(c, "lastTransitionTime", json_object_new_string(now));
    kite_obj_set(c, "reason", json_object_new_string(b->len ? reason_true : "ContentDeleted"));
    char *msg = b->len ? kite_asprintf("%s%s", prefix, b->p) : kite_strdup("All content successfully deleted");
    kite_obj_set(c, "message", json_object_new_string(msg));
    free(msg);
    json_object_array_add(conds, c);
}

/* Writes the pass's findings as the namespace's conditions (a strategic merge by type). */
static int report(struct kite_client *client, struct kite_clock *clock, const char *name, const struct findings *f) {
    char now[21];
    kite_time_format(kite_now_wall(clock), now);
    json_object *patch = json_object_new_object(), *conds = json_object_new_array();
    /* "N remaining: <one error>" or "N remaining: [<error>, <error>]" (utilerrors.NewAggregate) */
    struct kite_buf failed = {0}, remaining = {0}, finalizers = {0};
    if (f->n_failed == 1) kite_buf_puts(&failed, f->failed.p);
    else if (f->n_failed) kite_buf_printf(&failed, "[%s]", f->failed.p);
    _cleanup_free_ char *failed_prefix = kite_asprintf("Failed to delete all resource types, %zu remaining: ", f->n_failed);
    join_sorted(f->remaining, f->n_remaining, &remaining);
    char **fins = kite_calloc(f->n_finalizers + 1, sizeof *fins);
    for (size_t i = 0; i < f->n_finalizers; i++)
        fins[i] = kite_asprintf("%s in %zu resource instances", f->finalizers[i].name, f->finalizers[i].n);
    join_sorted(fins, f->n_finalizers, &finalizers);
    for (size_t i = 0; i < f->n_finalizers; i++) free(fins[i]);
    free(fins);
    condition(conds, "NamespaceDeletionContentFailure", &failed, "ContentDeletionFailed", failed_prefix, now);
    condition(conds, "NamespaceContentRemaining", &remaining, "SomeResourcesRemain", "Some resources are remaining: ",
              now);
    condition(conds, "NamespaceFinalizersRemaining", &finalizers, "SomeFinalizersRemain",
              "Some content in the namespace has finalizers remaining: ", now);
    kite_buf_release(&failed);
    kite_buf_release(&remaining);
    kite_buf_release(&finalizers);
    kite_obj_set(kite_obj_ensure(patch, "status"), "conditions", conds);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/status", name);
    int e = kite_client_json(client, "PATCH", path, "application/strategic-merge-patch+json", patch, NULL, NULL);
    json_object_put(patch);
    return e == -ENOENT ? 0 : e;
}

/* Removes the finalizer (PUT .../finalize with the namespace as read, less "kubernetes"). */
static int finalize(struct kite_client *client, json_object *ns) {
    json_object *spec = kite_obj_get(ns, "spec"), *f = kite_obj_get(spec, "finalizers"), *keep = json_object_new_array();
    for (size_t i = 0; f && i < json_object_array_length(f); i++) {
        json_object *v = json_object_array_get_idx(f, i);
        if (!kite_streq(json_object_get_string(v), FINALIZER)) json_object_array_add(keep, json_object_get(v));
    }
    kite_obj_set(spec, "finalizers", keep);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/finalize", kite_meta_str(ns, "name"));
    int e = kite_client_json(client, "PUT", path, NULL, ns, NULL, NULL);
    return e == -ENOENT ? 0 : e;
}

int kite_nsctl_sync(struct kite_client *client, struct kite_clock *clock, const char *name) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s", name);
    json_object *ns = NULL;
    int e = kite_client_json(client, "GET", path, NULL, NULL, NULL, &ns);
    if (e < 0 || !terminating(ns)) { /* ns: the Status on an error */
        json_object_put(ns);
        return e == -ENOENT ? 0 : e;
    }
    struct findings f = {0};
    const struct kite_resource *nsr = kite_registry_namespaces();
    for (size_t i = 0; kite_resources[i]; i++) {
        const struct kite_resource *r = kite_resources[i];
        /* a resource stored under another's folder (events.k8s.io/v1 Events) is emptied with it */
        if (r->namespaced && r != nsr && !r->storage && kite_resource_stored(r)) empty_resource(client, r, name, &f);
    }
    if (f.n_failed || f.n_remaining) {
        e = report(client, clock, name, &f);
        if (e == 0) e = -EAGAIN;
    } else {
        e = finalize(client, ns);
    }
    findings_release(&f);
    json_object_put(ns);
    return e;
}

/* ---- on the framework: a reconciler over namespaces ---- */

static int64_t reconcile(void *ud, const char *name, json_object *ns) {
    bool term = ns && terminating(ns);
    json_object_put(ns);
    if (!term) return 0;
    int e = kite_nsctl_sync(kite_ctl_group_client(ud), kite_ctl_group_clock(ud), name);
    if (e < 0 && e != -EAGAIN) log_warn("namespace-controller", "namespace %s: %s (will retry)", name, strerror(-e));
    return e; /* content remaining (-EAGAIN): again after the namespace's back-off */
}

int kite_nsctl_run(struct kite_ctl_group *g) {
    struct kite_ctl_reconciler r = {
        .name = "namespace-ctl", .path = "/api/v1/namespaces", .sync = reconcile, .ud = g,
        .backoff_max_ns = KITE_NSCTL_RETRY_MAX_S * KITE_NS_PER_SEC, .resync_ns = KITE_NSCTL_RESYNC_S * KITE_NS_PER_SEC,
    };
    return kite_ctl_reconcile(g, &r);
}
