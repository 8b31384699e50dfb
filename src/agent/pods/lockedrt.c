/* A runtime wrapper that makes any runtime usable from several threads (the pod workers, the
 * PLEG, the prober and the node status share the node's runtime): a runtime that is not
 * `concurrent` gets every call serialized with a mutex. */
#include <pthread.h>

#include "agent/pods/pods.h"
#include "base/base.h"

struct locked_rt {
    struct kite_runtime rt; /* first: the public handle */
    struct kite_runtime *in;
    pthread_mutex_t lock;
};

static struct locked_rt *L(struct kite_runtime *rt) { return (struct locked_rt *)rt; }

/* A concurrent runtime (runc) is called straight through: its calls on different pods then
 * run side by side. */
#define FWD(call)                                   \
    do {                                            \
        struct locked_rt *l = L(rt);                \
        bool lock_ = !l->in->ops->concurrent;       \
        if (lock_) pthread_mutex_lock(&l->lock);    \
        int r_ = l->in->ops->call;                  \
        if (lock_) pthread_mutex_unlock(&l->lock);  \
        return r_;                                  \
    } while (0)
#define IN l->in

static int l_version(struct kite_runtime *rt, char **a, char **b) { FWD(version(IN, a, b)); }
/* Status is thread-safe by contract and must answer while another call hangs: not locked. */
static int l_status(struct kite_runtime *rt, char **reason, char **message) {
    return kite_runtime_status(L(rt)->in, reason, message);
}
static int l_list_images(struct kite_runtime *rt, struct kite_image **v, size_t *n) { FWD(list_images(IN, v, n)); }
static int l_image_status(struct kite_runtime *rt, const char *name, struct kite_image *ret) {
    FWD(image_status(IN, name, ret));
}
static int l_remove_image(struct kite_runtime *rt, const char *name) { FWD(remove_image(IN, name)); }
static int l_import_image(struct kite_runtime *rt, const char *tar, char ***names, size_t *n, char **err) {
    FWD(import_image(IN, tar, names, n, err));
}
static int l_run_sandbox(struct kite_runtime *rt, const struct kite_sandbox_config *cfg, int64_t t, char **id,
                         char **err) {
    FWD(run_sandbox(IN, cfg, t, id, err));
}
static int l_stop_sandbox(struct kite_runtime *rt, const char *id, int64_t t) { FWD(stop_sandbox(IN, id, t)); }
static int l_remove_sandbox(struct kite_runtime *rt, const char *id, int64_t t) { FWD(remove_sandbox(IN, id, t)); }
static int l_sandbox_status(struct kite_runtime *rt, const char *id, int64_t t, struct kite_sandbox_status *ret) {
    FWD(sandbox_status(IN, id, t, ret));
}
static int l_list_sandboxes(struct kite_runtime *rt, int64_t t, struct kite_sandbox_status **v, size_t *n) {
    FWD(list_sandboxes(IN, t, v, n));
}
static int l_create_container(struct kite_runtime *rt, const char *sb, const struct kite_container_config *cfg,
                              int64_t t, char **id, char **err) {
    FWD(create_container(IN, sb, cfg, t, id, err));
}
static int l_start_container(struct kite_runtime *rt, const char *id, int64_t t, char **err) {
    FWD(start_container(IN, id, t, err));
}
static int l_stop_container(struct kite_runtime *rt, const char *id, int64_t g, int64_t t) {
    FWD(stop_container(IN, id, g, t));
}
static int l_remove_container(struct kite_runtime *rt, const char *id, int64_t t) { FWD(remove_container(IN, id, t)); }
static int l_container_status(struct kite_runtime *rt, const char *id, int64_t t, struct kite_container_status *ret) {
    FWD(container_status(IN, id, t, ret));
}
static int l_list_containers(struct kite_runtime *rt, const char *sb, int64_t t, struct kite_container_status **v,
                             size_t *n) {
    FWD(list_containers(IN, sb, t, v, n));
}
static int l_exec_sync(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc, int64_t t,
                       struct kite_exec_result *ret) {
    FWD(exec_sync(IN, id, argv, argc, t, ret));
}
/* streams: long-lived, never under the lock (they hold no runtime state between calls) */
static int l_exec_start(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc, bool tty,
                        bool want_in, bool want_out, bool want_err, struct kite_exec_session *ret, char **err) {
    if (!L(rt)->in->ops->exec_start) return -ENOTSUP;
    FWD(exec_start(IN, id, argv, argc, tty, want_in, want_out, want_err, ret, err));
}
static int l_attach_socket(struct kite_runtime *rt, const char *id, char **ret_path) {
    if (!L(rt)->in->ops->attach_socket) return -ENOTSUP;
    FWD(attach_socket(IN, id, ret_path));
}
static int l_events_fd(struct kite_runtime *rt) { FWD(events_fd(IN)); }
static int l_read_events(struct kite_runtime *rt, struct kite_container_event **v, size_t *n) {
    FWD(read_events(IN, v, n));
}

/* Reads files only and is thread-safe by contract (as status): not locked, so a scrape of the
 * resource metrics never waits behind a pod worker's call. */
static int l_container_stats(struct kite_runtime *rt, const char *id, struct kite_usage *ret) {
    struct kite_runtime *in = L(rt)->in;
    return in->ops->container_stats ? in->ops->container_stats(in, id, ret) : -EOPNOTSUPP;
}

static void l_free(struct kite_runtime *rt) {
    struct locked_rt *l = L(rt);
    pthread_mutex_destroy(&l->lock);
    free((void *)l->rt.ops);
    free(l);
}

struct kite_runtime *kite_runtime_locked_new(struct kite_runtime *inner) {
    struct locked_rt *l = kite_calloc(1, sizeof(*l));
    struct kite_runtime_ops *ops = kite_calloc(1, sizeof(*ops));
    *ops = (struct kite_runtime_ops){
        .name = inner->ops->name, .concurrent = true, .version = l_version, .status = l_status, .list_images = l_list_images, .image_status = l_image_status,
        .remove_image = l_remove_image, .import_image = l_import_image, .run_sandbox = l_run_sandbox,
        .stop_sandbox = l_stop_sandbox, .remove_sandbox = l_remove_sandbox, .sandbox_status = l_sandbox_status,
        .list_sandboxes = l_list_sandboxes, .create_container = l_create_container,
        .start_container = l_start_container, .stop_container = l_stop_container,
        .remove_container = l_remove_container, .container_status = l_container_status,
        .list_containers = l_list_containers, .exec_sync = l_exec_sync, .exec_start = l_exec_start,
        .attach_socket = l_attach_socket, .events_fd = l_events_fd,
        .read_events = l_read_events, .container_stats = l_container_stats, .free = l_free};
    l->rt.ops = ops;
    l->in = inner;
    pthread_mutex_init(&l->lock, NULL);
    return &l->rt;
}
