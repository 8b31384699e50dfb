/* The runc runtime: exit watching (a pidfd per container, inotify on the exits dir) and the exit events (runc-int.h). */
#include "agent/runtime/runc-int.h"

/* ---- exit watching (mu held) ------------------------------------------------------------- */

static struct watch *find_watch(struct runc_rt *c, const char *id) {
    for (size_t i = 0; i < c->n_watches; i++)
        if (strcmp(c->watches[i].id, id) == 0) return &c->watches[i];
    return NULL;
}

void kite_rc_watch_container(struct runc_rt *c, const char *id) {
    if (find_watch(c, id)) return;
    pid_t pid = kite_rc_container_pid(c, id);
    int fd = pid > 0 ? kite_agent_rt_pidfd_open(pid) : -1;
    c->watches = kite_realloc(c->watches, (c->n_watches + 1) * sizeof(*c->watches));
    struct watch *w = &c->watches[c->n_watches++];
    *w = (struct watch){.id = kite_strdup(id), .pidfd = fd};
    if (fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
}

void kite_rc_unwatch(struct runc_rt *c, const char *id) {
    struct watch *w = find_watch(c, id);
    if (!w) return;
    if (w->pidfd >= 0) {
        epoll_ctl(c->epfd, EPOLL_CTL_DEL, w->pidfd, NULL);
        close(w->pidfd);
    }
    free(w->id);
    *w = c->watches[--c->n_watches];
}

/* Records what is known at an exit: the OOM flag (the cgroup goes with `runc delete`) and the
 * finish time. Idempotent. */
void kite_rc_record_exit(struct runc_rt *c, const char *id, json_object *meta, int64_t finished) {
    if (kite_obj_int(meta, "finished")) return;
    pthread_mutex_lock(&c->mu);
    finished = KITE_MAX(finished, kite_obj_int(meta, "started"));
    const char *cg = kite_obj_str(meta, "cgroup");
    _cleanup_free_ char *oomf = kite_rc_cdir(c, id, "oom");
    bool oom = (cg && kite_rc_cgroup_oom_kills(cg) > 0) || access(oomf, F_OK) == 0;
    json_object_object_add(meta, "oom", json_object_new_boolean(oom));
    json_object_object_add(meta, "finished", json_object_new_int64(finished));
    kite_rc_write_meta_locked(c, id, meta);
    pthread_mutex_unlock(&c->mu);
}

/* The wall time the pidfd saw the container end; 0 = not seen. */
int64_t kite_rc_watch_finished(struct runc_rt *c, const char *id) {
    pthread_mutex_lock(&c->mu);
    struct watch *w = find_watch(c, id);
    int64_t t = w ? w->finished_ns : 0;
    pthread_mutex_unlock(&c->mu);
    return t;
}

/* ---- events ------------------------------------------------------------------------------ */

int kite_rc_events_fd(struct kite_runtime *rt) { return kite_rc_of(rt)->epfd; }

/* The exit of a watched container, once conmon wrote its code (an id named twice, by its
 * pidfd and its exit file, counts once: the first unwatches it). */
static void push_event(struct kite_container_event **v, size_t *n, struct runc_rt *c, const char *id) {
    pthread_mutex_lock(&c->mu);
    bool watched = find_watch(c, id) != NULL;
    pthread_mutex_unlock(&c->mu);
    if (!watched) return;
    json_object *meta = kite_rc_read_meta(c, id);
    int code = 0;
    int64_t mtime = 0;
    if (!meta || kite_rc_read_exit(c, id, &code, &mtime) < 0) {
        json_object_put(meta);
        return;
    }
    int64_t seen = kite_rc_watch_finished(c, id);
    kite_rc_record_exit(c, id, meta, seen ? seen : mtime);
    *v = kite_realloc(*v, (*n + 1) * sizeof(**v));
    (*v)[(*n)++] = (struct kite_container_event){
        .container_id = kite_strdup(id),
        .sandbox_id = kite_strdup(kite_obj_str(meta, "sandbox_id") ? kite_obj_str(meta, "sandbox_id") : ""),
        .exit_code = code,
        .oom_killed = json_object_get_boolean(json_object_object_get(meta, "oom")),
        .finished_ns = kite_obj_int(meta, "finished"),
    };
    pthread_mutex_lock(&c->mu);
    kite_rc_unwatch(c, id);
    pthread_mutex_unlock(&c->mu);
    json_object_put(meta);
}

/* The ids whose exit the epoll set reports (mu held): a pidfd that ended, or an exit file
 * conmon wrote for a watched container. */
static void take_exits(struct runc_rt *c, char ***ids, size_t *n) {
    struct epoll_event evs[64];
    int k;
    while ((k = epoll_wait(c->epfd, evs, 64, 0)) > 0) {
        for (int i = 0; i < k; i++) {
            int fd = evs[i].data.fd;
            if (fd == c->inofd) {
                char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
                ssize_t len;
                while ((len = read(c->inofd, buf, sizeof buf)) > 0)
                    for (char *p = buf; p < buf + len;) {
                        struct inotify_event *ie = (struct inotify_event *)p;
                        if (ie->len && find_watch(c, ie->name)) {
                            *ids = kite_realloc(*ids, (*n + 1) * sizeof(char *));
                            (*ids)[(*n)++] = kite_strdup(ie->name);
                        }
                        p += sizeof(*ie) + ie->len;
                    }
                continue;
            }
            for (size_t j = 0; j < c->n_watches; j++) {
                struct watch *w = &c->watches[j];
                if (w->pidfd != fd) continue;
                /* the moment of the exit; the code follows in conmon's exit file */
                w->finished_ns = kite_rc_now_wall(c);
                epoll_ctl(c->epfd, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                w->pidfd = -1;
                *ids = kite_realloc(*ids, (*n + 1) * sizeof(char *));
                (*ids)[(*n)++] = kite_strdup(w->id);
                break;
            }
        }
    }
}

int kite_rc_read_events(struct kite_runtime *rt, struct kite_container_event **ret, size_t *ret_n) {
    struct runc_rt *c = kite_rc_of(rt);
    struct kite_container_event *v = NULL;
    size_t n = 0, n_ids = 0;
    char **ids = NULL;
    pthread_mutex_lock(&c->mu);
    take_exits(c, &ids, &n_ids);
    pthread_mutex_unlock(&c->mu);
    /* files are read without the lock */
    for (size_t i = 0; i < n_ids; i++) push_event(&v, &n, c, ids[i]);
    kite_strv_free(ids, n_ids);
    *ret = v;
    *ret_n = n;
    return 0;
}
