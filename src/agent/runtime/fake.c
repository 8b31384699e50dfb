/* The fake runtime: images, sandboxes and containers in memory, exits scripted per container
 * name, for tests of everything above the runtime interface and for simulated nodes. An exit
 * is due at start + exit_after; read_events() reports due exits and events_fd() (a timerfd)
 * polls readable at the next one. */
#include <pthread.h>
#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/images/images.h"
#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "base/clock.h"

struct fcontainer {
    struct kite_container_status st;
    struct kite_fake_script script;
    char *exec_output;
    bool reported;
};

struct fsandbox {
    struct kite_sandbox_status st;
};

struct fscript {
    char *name;
    struct kite_fake_script s;
    char *exec_output;
};

struct fake_runtime {
    struct kite_runtime rt; /* first: the public handle */
    char *version;
    struct kite_image *images;
    size_t n_images;
    int err;
    char *hang;
    pthread_mutex_t status_lock; /* the Status answer: read by the node status thread */
    char *not_ready_reason, *not_ready_message; /* NULL = ready */
    struct fsandbox *sandboxes;
    size_t n_sandboxes;
    struct fcontainer *containers;
    size_t n_containers;
    struct fscript *scripts;
    size_t n_scripts;
    uint64_t next_id;
    uint32_t next_ip; /* sandboxes' addresses: 10.88.0.2 onwards, as the runc runtime's default */
    int tfd;
};

static struct fake_runtime *fake_of(struct kite_runtime *rt) { return (struct fake_runtime *)rt; }

static int64_t wall(void) { return kite_now_wall(kite_clock_real()); }

static void sleep_ns(int64_t ns) {
    struct timespec ts = {ns / KITE_NS_PER_SEC, ns % KITE_NS_PER_SEC};
    while (ns > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* The common prologue: the set error, or a scripted hang until the call's timeout. */
static int enter(struct fake_runtime *f, const char *op, int64_t timeout_ns) {
    if (f->err) return f->err;
    if (f->hang && strcmp(f->hang, op) == 0) {
        sleep_ns(timeout_ns > 0 ? timeout_ns : KITE_RT_DEFAULT_TIMEOUT_NS);
        return -ETIMEDOUT;
    }
    return 0;
}

static char *fake_id(struct fake_runtime *f) { return kite_asprintf("%032llx", (unsigned long long)++f->next_id); }

static struct fcontainer *find_c(struct fake_runtime *f, const char *id) {
    for (size_t i = 0; id && i < f->n_containers; i++)
        if (strcmp(f->containers[i].st.id, id) == 0) return &f->containers[i];
    return NULL;
}

static struct fsandbox *find_s(struct fake_runtime *f, const char *id) {
    for (size_t i = 0; id && i < f->n_sandboxes; i++)
        if (strcmp(f->sandboxes[i].st.id, id) == 0) return &f->sandboxes[i];
    return NULL;
}

static void set_exited(struct fcontainer *c, int code, bool oom, int64_t at) {
    c->st.state = KITE_CONTAINER_EXITED;
    c->st.pid = 0;
    c->st.exit_code = code;
    c->st.signal = code > 128 ? code - 128 : 0;
    c->st.oom_killed = oom;
    c->st.finished_ns = at;
    free(c->st.reason);
    c->st.reason = kite_strdup(oom ? "OOMKilled" : code == 0 ? "Completed" : "Error");
}

/* Applies scripted exits that are due and re-arms the timer for the next one. */
static void advance(struct fake_runtime *f) {
    int64_t now = wall(), next = 0;
    for (size_t i = 0; i < f->n_containers; i++) {
        struct fcontainer *c = &f->containers[i];
        if (c->st.state != KITE_CONTAINER_RUNNING || c->script.exit_after_ns < 0) continue;
        int64_t due = c->st.started_ns + c->script.exit_after_ns;
        if (due <= now)
            set_exited(c, c->script.oom ? 137 : c->script.exit_code, c->script.oom, due);
        else if (!next || due < next)
            next = due;
    }
    struct itimerspec its = {0};
    if (next) {
        int64_t d = KITE_MAX(next - now, 1);
        its.it_value = (struct timespec){d / KITE_NS_PER_SEC, d % KITE_NS_PER_SEC};
    }
    timerfd_settime(f->tfd, 0, &its, NULL);
}

static int fake_status(struct kite_runtime *rt, char **ret_reason, char **ret_message) {
    struct fake_runtime *f = fake_of(rt);
    pthread_mutex_lock(&f->status_lock);
    int r = 0;
    if (f->not_ready_reason) {
        *ret_reason = kite_strdup(f->not_ready_reason);
        *ret_message = kite_strdup(f->not_ready_message);
        r = -EIO;
    }
    pthread_mutex_unlock(&f->status_lock);
    return r;
}

static int fake_version(struct kite_runtime *rt, char **ret_name, char **ret_version) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "version", 0);
    if (r < 0) return r;
    *ret_name = kite_strdup("fake");
    *ret_version = kite_strdup(f->version);
    return 0;
}

static int fake_list_images(struct kite_runtime *rt, struct kite_image **ret, size_t *ret_n) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "list_images", 0);
    if (r < 0) return r;
    *ret = kite_images_dup(f->images, f->n_images);
    *ret_n = f->n_images;
    return 0;
}

static struct kite_image *find_image(struct fake_runtime *f, const char *name) {
    _cleanup_free_ char *norm = kite_image_normalize(name);
    for (size_t i = 0; i < f->n_images; i++)
        for (size_t j = 0; j < f->images[i].n_names; j++)
            if (kite_streq(f->images[i].names[j], name) || kite_streq(f->images[i].names[j], norm)) return &f->images[i];
    return NULL;
}

static int fake_image_status(struct kite_runtime *rt, const char *name, struct kite_image *ret) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "image_status", 0);
    if (r < 0) return r;
    struct kite_image *img = find_image(f, name);
    if (!img) return -ENOENT;
    struct kite_image *copy = kite_images_dup(img, 1);
    *ret = *copy;
    free(copy);
    return 0;
}

static int fake_remove_image(struct kite_runtime *rt, const char *name) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "remove_image", 0);
    if (r < 0) return r;
    struct kite_image *img = find_image(f, name);
    if (!img) return -ENOENT;
    kite_image_release(img);
    *img = f->images[--f->n_images];
    return 0;
}

static int fake_import_image(struct kite_runtime *rt, const char *tar_path, char ***ret_names, size_t *ret_n,
                             char **ret_error) {
    if (ret_error) *ret_error = kite_strdup("the fake runtime imports no images");
    return -EOPNOTSUPP;
}

static int fake_run_sandbox(struct kite_runtime *rt, const struct kite_sandbox_config *cfg, int64_t timeout_ns,
                            char **ret_id, char **ret_error) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "run_sandbox", timeout_ns);
    if (r < 0) return r;
    if (!cfg || !cfg->uid || !cfg->name || !cfg->ns) return -EINVAL;
    f->sandboxes = kite_realloc(f->sandboxes, (f->n_sandboxes + 1) * sizeof(*f->sandboxes));
    struct fsandbox *s = &f->sandboxes[f->n_sandboxes++];
    s->st = (struct kite_sandbox_status){.id = fake_id(f), .uid = kite_strdup(cfg->uid), .name = kite_strdup(cfg->name),
                                         .ns = kite_strdup(cfg->ns),
                                         .log_dir = kite_asprintf("/fake/logs/%s_%s_%s", cfg->ns, cfg->name, cfg->uid),
                                         .state = KITE_SANDBOX_READY, .host_network = cfg->host_network,
                                         .created_ns = wall(),
                                         .ip = cfg->host_network ? kite_strdup("")
                                                                 : kite_asprintf("10.88.%u.%u", (f->next_ip + 2) / 256,
                                                                                 (f->next_ip + 2) % 256)};
    if (!cfg->host_network) f->next_ip++;
    *ret_id = kite_strdup(s->st.id);
    return 0;
}

static int stop_c(struct fake_runtime *f, struct fcontainer *c, int64_t grace_ns) {
    advance(f);
    if (c->st.state == KITE_CONTAINER_RUNNING) {
        if (c->script.ignore_sigterm) {
            sleep_ns(grace_ns);
            set_exited(c, 137, false, wall());
        } else {
            set_exited(c, 143, false, wall());
        }
    } else if (c->st.state == KITE_CONTAINER_CREATED) {
        set_exited(c, 137, false, wall());
    }
    return 0;
}

static int fake_stop_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "stop_sandbox", timeout_ns);
    if (r < 0) return r;
    struct fsandbox *s = find_s(f, id);
    if (!s) return -ENOENT;
    for (size_t i = 0; i < f->n_containers; i++)
        if (strcmp(f->containers[i].st.sandbox_id, id) == 0) stop_c(f, &f->containers[i], 0);
    s->st.state = KITE_SANDBOX_NOTREADY;
    return 0;
}

static void free_c(struct fcontainer *c) {
    kite_container_status_release(&c->st);
    free(c->exec_output);
}

static int fake_remove_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "remove_sandbox", timeout_ns);
    if (r < 0) return r;
    struct fsandbox *s = find_s(f, id);
    if (!s) return -ENOENT;
    for (size_t i = 0; i < f->n_containers;)
        if (strcmp(f->containers[i].st.sandbox_id, id) == 0) {
            free_c(&f->containers[i]);
            f->containers[i] = f->containers[--f->n_containers];
        } else {
            i++;
        }
    kite_sandbox_status_release(&s->st);
    *s = f->sandboxes[--f->n_sandboxes];
    return 0;
}

static void dup_sandbox(const struct kite_sandbox_status *in, struct kite_sandbox_status *out) {
    *out = *in;
    out->id = kite_strdup(in->id);
    out->uid = kite_strdup(in->uid);
    out->name = kite_strdup(in->name);
    out->ns = kite_strdup(in->ns);
    out->log_dir = kite_strdup(in->log_dir);
    out->ip = kite_strdup(in->ip);
}

static int fake_sandbox_status(struct kite_runtime *rt, const char *id, int64_t timeout_ns, struct kite_sandbox_status *ret) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "sandbox_status", timeout_ns);
    if (r < 0) return r;
    struct fsandbox *s = find_s(f, id);
    if (!s) return -ENOENT;
    dup_sandbox(&s->st, ret);
    return 0;
}

static int fake_list_sandboxes(struct kite_runtime *rt, int64_t timeout_ns, struct kite_sandbox_status **ret, size_t *ret_n) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "list_sandboxes", timeout_ns);
    if (r < 0) return r;
    *ret = f->n_sandboxes ? kite_calloc(f->n_sandboxes, sizeof(**ret)) : NULL;
    for (size_t i = 0; i < f->n_sandboxes; i++) dup_sandbox(&f->sandboxes[i].st, &(*ret)[i]);
    *ret_n = f->n_sandboxes;
    return 0;
}

static int fake_create_container(struct kite_runtime *rt, const char *sandbox_id, const struct kite_container_config *cfg,
                                 int64_t timeout_ns, char **ret_id, char **ret_error) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "create_container", timeout_ns);
    if (r < 0) return r;
    if (!cfg || !cfg->name || !cfg->image) return -EINVAL;
    struct fsandbox *s = find_s(f, sandbox_id);
    if (!s) return -ENOENT;
    if (s->st.state != KITE_SANDBOX_READY) return -ENOTCONN;
    struct kite_image *img = find_image(f, cfg->image);
    if (!img) {
        if (ret_error) *ret_error = kite_asprintf("image %s: not present", cfg->image);
        return -ENOENT;
    }
    f->containers = kite_realloc(f->containers, (f->n_containers + 1) * sizeof(*f->containers));
    struct fcontainer *c = &f->containers[f->n_containers++];
    *c = (struct fcontainer){.script = {.exit_after_ns = -1}};
    for (size_t i = 0; i < f->n_scripts; i++)
        if (strcmp(f->scripts[i].name, cfg->name) == 0) {
            c->script = f->scripts[i].s;
            c->exec_output = f->scripts[i].exec_output ? kite_strdup(f->scripts[i].exec_output) : NULL;
        }
    c->st = (struct kite_container_status){
        .id = fake_id(f), .sandbox_id = kite_strdup(sandbox_id), .name = kite_strdup(cfg->name),
        .image = kite_strdup(cfg->image), .image_id = kite_strdup(img->id ? img->id : ""),
        .log_path = kite_asprintf("%s/%s/%u.log", s->st.log_dir, cfg->name, cfg->attempt), .attempt = cfg->attempt,
        .state = KITE_CONTAINER_CREATED, .created_ns = wall()};
    *ret_id = kite_strdup(c->st.id);
    return 0;
}

static int fake_start_container(struct kite_runtime *rt, const char *id, int64_t timeout_ns, char **ret_error) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "start_container", timeout_ns);
    if (r < 0) return r;
    struct fcontainer *c = find_c(f, id);
    if (!c) return -ENOENT;
    if (c->st.state != KITE_CONTAINER_CREATED) return -EBUSY;
    if (c->script.start_delay_ns > 0) {
        if (timeout_ns > 0 && c->script.start_delay_ns > timeout_ns) {
            sleep_ns(timeout_ns);
            return -ETIMEDOUT;
        }
        sleep_ns(c->script.start_delay_ns);
    }
    c->st.state = KITE_CONTAINER_RUNNING;
    c->st.started_ns = wall();
    c->st.pid = 1000 + (int)f->next_id;
    advance(f);
    return 0;
}

static int fake_stop_container(struct kite_runtime *rt, const char *id, int64_t grace_ns, int64_t timeout_ns) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "stop_container", timeout_ns);
    if (r < 0) return r;
    struct fcontainer *c = find_c(f, id);
    return c ? stop_c(f, c, grace_ns) : -ENOENT;
}

static int fake_remove_container(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "remove_container", timeout_ns);
    if (r < 0) return r;
    struct fcontainer *c = find_c(f, id);
    if (!c) return -ENOENT;
    free_c(c);
    *c = f->containers[--f->n_containers];
    return 0;
}

static void dup_status(const struct kite_container_status *in, struct kite_container_status *out) {
    *out = *in;
    out->id = kite_strdup(in->id);
    out->sandbox_id = kite_strdup(in->sandbox_id);
    out->name = kite_strdup(in->name);
    out->image = kite_strdup(in->image);
    out->image_id = kite_strdup(in->image_id);
    out->log_path = kite_strdup(in->log_path);
    out->reason = in->reason ? kite_strdup(in->reason) : NULL;
    out->message = in->message ? kite_strdup(in->message) : NULL;
}

static int fake_container_status(struct kite_runtime *rt, const char *id, int64_t timeout_ns, struct kite_container_status *ret) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "container_status", timeout_ns);
    if (r < 0) return r;
    advance(f);
    struct fcontainer *c = find_c(f, id);
    if (!c) return -ENOENT;
    dup_status(&c->st, ret);
    return 0;
}

static int fake_list_containers(struct kite_runtime *rt, const char *sandbox_id, int64_t timeout_ns,
                                struct kite_container_status **ret, size_t *ret_n) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "list_containers", timeout_ns);
    if (r < 0) return r;
    advance(f);
    struct kite_container_status *v = f->n_containers ? kite_calloc(f->n_containers, sizeof(*v)) : NULL;
    size_t n = 0;
    for (size_t i = 0; i < f->n_containers; i++)
        if (!sandbox_id || strcmp(f->containers[i].st.sandbox_id, sandbox_id) == 0) dup_status(&f->containers[i].st, &v[n++]);
    *ret = v;
    *ret_n = n;
    return 0;
}

static int fake_exec_sync(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc,
                          int64_t timeout_ns, struct kite_exec_result *ret) {
    struct fake_runtime *f = fake_of(rt);
    int r = enter(f, "exec_sync", timeout_ns);
    if (r < 0) return r;
    advance(f);
    struct fcontainer *c = find_c(f, id);
    if (!c) return -ENOENT;
    if (c->st.state != KITE_CONTAINER_RUNNING) return -ENOTCONN;
    const char *out = c->exec_output ? c->exec_output : "";
    *ret = (struct kite_exec_result){.exit_code = c->script.exec_exit_code, .output = kite_strdup(out), .output_len = strlen(out)};
    return 0;
}

static int fake_events_fd(struct kite_runtime *rt) { return fake_of(rt)->tfd; }

static int fake_read_events(struct kite_runtime *rt, struct kite_container_event **ret, size_t *ret_n) {
    struct fake_runtime *f = fake_of(rt);
    uint64_t ticks;
    if (read(f->tfd, &ticks, sizeof ticks) < 0) { /* nothing due: EAGAIN */
    }
    advance(f);
    struct kite_container_event *v = NULL;
    size_t n = 0;
    for (size_t i = 0; i < f->n_containers; i++) {
        struct fcontainer *c = &f->containers[i];
        if (c->st.state != KITE_CONTAINER_EXITED || c->reported) continue;
        c->reported = true;
        if (c->script.no_exit_event) continue;
        v = kite_realloc(v, (n + 1) * sizeof(*v));
        v[n++] = (struct kite_container_event){.container_id = kite_strdup(c->st.id), .sandbox_id = kite_strdup(c->st.sandbox_id),
                                               .exit_code = c->st.exit_code, .oom_killed = c->st.oom_killed,
                                               .finished_ns = c->st.finished_ns};
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static void fake_free(struct kite_runtime *rt) {
    struct fake_runtime *f = fake_of(rt);
    free(f->not_ready_reason);
    free(f->not_ready_message);
    pthread_mutex_destroy(&f->status_lock);
    kite_images_free(f->images, f->n_images);
    for (size_t i = 0; i < f->n_sandboxes; i++) kite_sandbox_status_release(&f->sandboxes[i].st);
    for (size_t i = 0; i < f->n_containers; i++) free_c(&f->containers[i]);
    for (size_t i = 0; i < f->n_scripts; i++) {
        free(f->scripts[i].name);
        free(f->scripts[i].exec_output);
    }
    free(f->scripts);
    free(f->sandboxes);
    free(f->containers);
    free(f->hang);
    free(f->version);
    if (f->tfd >= 0) close(f->tfd);
    free(f);
}

static const struct kite_runtime_ops fake_ops = {
    .name = "fake",
    .version = fake_version,
    .status = fake_status,
    .list_images = fake_list_images,
    .image_status = fake_image_status,
    .remove_image = fake_remove_image,
    .import_image = fake_import_image,
    .run_sandbox = fake_run_sandbox,
    .stop_sandbox = fake_stop_sandbox,
    .remove_sandbox = fake_remove_sandbox,
    .sandbox_status = fake_sandbox_status,
    .list_sandboxes = fake_list_sandboxes,
    .create_container = fake_create_container,
    .start_container = fake_start_container,
    .stop_container = fake_stop_container,
    .remove_container = fake_remove_container,
    .container_status = fake_container_status,
    .list_containers = fake_list_containers,
    .exec_sync = fake_exec_sync,
    .events_fd = fake_events_fd,
    .read_events = fake_read_events,
    .free = fake_free,
};

struct kite_runtime *kite_runtime_fake_new(const char *version) {
    struct fake_runtime *f = kite_calloc(1, sizeof(*f));
    f->rt.ops = &fake_ops;
    f->version = kite_strdup(version ? version : "0.0.0");
    pthread_mutex_init(&f->status_lock, NULL);
    f->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return &f->rt;
}

void kite_runtime_fake_set_images(struct kite_runtime *rt, const struct kite_image *v, size_t n) {
    struct fake_runtime *f = fake_of(rt);
    kite_images_free(f->images, f->n_images);
    f->images = kite_images_dup(v, n);
    f->n_images = n;
}

void kite_runtime_fake_set_error(struct kite_runtime *rt, int err) { fake_of(rt)->err = err; }

void kite_runtime_fake_set_ready(struct kite_runtime *rt, bool ready, const char *reason, const char *message) {
    struct fake_runtime *f = fake_of(rt);
    pthread_mutex_lock(&f->status_lock);
    free(f->not_ready_reason);
    free(f->not_ready_message);
    f->not_ready_reason = ready ? NULL : kite_strdup(reason ? reason : "RuntimeNotReady");
    f->not_ready_message = ready ? NULL : kite_strdup(message ? message : "");
    pthread_mutex_unlock(&f->status_lock);
}

void kite_runtime_fake_set_exec(struct kite_runtime *rt, const char *name, int exit_code, const char *output) {
    struct fake_runtime *f = fake_of(rt);
    for (size_t i = 0; i < f->n_containers; i++) {
        struct fcontainer *c = &f->containers[i];
        if (!kite_streq(c->st.name, name)) continue;
        c->script.exec_exit_code = exit_code;
        free(c->exec_output);
        c->exec_output = output ? kite_strdup(output) : NULL;
    }
    for (size_t i = 0; i < f->n_scripts; i++) {
        if (!kite_streq(f->scripts[i].name, name)) continue;
        f->scripts[i].s.exec_exit_code = exit_code;
        free(f->scripts[i].exec_output);
        f->scripts[i].exec_output = output ? kite_strdup(output) : NULL;
    }
}

void kite_runtime_fake_script(struct kite_runtime *rt, const char *name, const struct kite_fake_script *s) {
    struct fake_runtime *f = fake_of(rt);
    f->scripts = kite_realloc(f->scripts, (f->n_scripts + 1) * sizeof(*f->scripts));
    f->scripts[f->n_scripts++] = (struct fscript){.name = kite_strdup(name), .s = *s,
                                                  .exec_output = s->exec_output ? kite_strdup(s->exec_output) : NULL};
    f->scripts[f->n_scripts - 1].s.exec_output = NULL;
}

void kite_runtime_fake_hang(struct kite_runtime *rt, const char *op) {
    struct fake_runtime *f = fake_of(rt);
    free(f->hang);
    f->hang = op ? kite_strdup(op) : NULL;
}
