/* Helpers shared by every runtime backend. */
#include "agent/runtime/runtime.h"

#include "base/base.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

void kite_strv_free(char **v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

void kite_image_release(struct kite_image *img) {
    if (!img) return;
    kite_strv_free(img->names, img->n_names);
    free(img->id);
    free(img->user);
    *img = (struct kite_image){0};
}

void kite_images_free(struct kite_image *v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) kite_image_release(&v[i]);
    free(v);
}

struct kite_image *kite_images_dup(const struct kite_image *v, size_t n) {
    if (!n) return NULL;
    struct kite_image *out = kite_calloc(n, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        out[i].size_bytes = v[i].size_bytes;
        out[i].n_names = v[i].n_names;
        out[i].id = v[i].id ? kite_strdup(v[i].id) : NULL;
        out[i].user = v[i].user ? kite_strdup(v[i].user) : NULL;
        if (v[i].n_names) out[i].names = kite_calloc(v[i].n_names, sizeof(char *));
        for (size_t j = 0; j < v[i].n_names; j++) out[i].names[j] = kite_strdup(v[i].names[j]);
    }
    return out;
}

void kite_sandbox_status_release(struct kite_sandbox_status *s) {
    if (!s) return;
    free(s->id);
    free(s->uid);
    free(s->name);
    free(s->ns);
    free(s->log_dir);
    free(s->ip);
    *s = (struct kite_sandbox_status){0};
}

void kite_sandbox_statuses_free(struct kite_sandbox_status *v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) kite_sandbox_status_release(&v[i]);
    free(v);
}

void kite_container_status_release(struct kite_container_status *s) {
    if (!s) return;
    free(s->id);
    free(s->sandbox_id);
    free(s->name);
    free(s->image);
    free(s->image_id);
    free(s->log_path);
    free(s->reason);
    free(s->message);
    *s = (struct kite_container_status){0};
}

void kite_container_statuses_free(struct kite_container_status *v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) kite_container_status_release(&v[i]);
    free(v);
}

void kite_container_events_free(struct kite_container_event *v, size_t n) {
    if (!v) return;
    for (size_t i = 0; i < n; i++) {
        free(v[i].container_id);
        free(v[i].sandbox_id);
    }
    free(v);
}

const char *kite_container_state_name(enum kite_container_state s) {
    switch (s) {
    case KITE_CONTAINER_CREATED: return "created";
    case KITE_CONTAINER_RUNNING: return "running";
    case KITE_CONTAINER_EXITED: return "exited";
    default: return "unknown";
    }
}

int kite_runtime_status(struct kite_runtime *rt, char **ret_reason, char **ret_message) {
    if (!rt->ops->status) return 0;
    return rt->ops->status(rt, ret_reason, ret_message);
}

void kite_runtime_free(struct kite_runtime *rt) {
    if (rt && rt->ops && rt->ops->free) rt->ops->free(rt);
}

void kite_exec_session_kill(struct kite_exec_session *s) {
    if (s->cmd_pid_file) {
        _cleanup_free_ char *t = NULL;
        size_t len = 0;
        int64_t v = 0;
        if (kite_read_file(s->cmd_pid_file, 64, &t, &len) == 0) {
            t[strcspn(t, "\n ")] = 0;
            if (kite_parse_int64(t, &v) == 0 && v > 1) kill((pid_t)v, SIGKILL);
        }
    }
    if (s->pid > 0) kill(s->pid, SIGKILL);
}

void kite_exec_session_release(struct kite_exec_session *s) {
    int fds[] = {s->pidfd, s->in_fd, s->out_fd, s->err_fd, s->pty_fd};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(fds); i++)
        if (fds[i] >= 0) close(fds[i]);
    s->pidfd = s->in_fd = s->out_fd = s->err_fd = s->pty_fd = -1;
    if (s->cmd_pid_file) unlink(s->cmd_pid_file);
    free(s->cmd_pid_file);
    s->cmd_pid_file = NULL;
}
