/* The runc runtime (runtime.h). Each container, a sandbox's pause holder included, is an OCI
 * bundle in <root>/containers/<id>/ run by runc under its own conmon: conmon is the
 * container's parent, so the container outlives an agent restart, its exit code lands in
 * <bundle>/exit and <root>/exits/<id> even while the agent is down, and its stdout/stderr go to
 * a CRI-format log. The agent sees an exit through a pidfd on the container's process (the
 * moment) and inotify on the exits dir (the code), both in one epoll set the agent polls.
 *
 * A pod's network, IPC and UTS namespaces are pinned by bind mounts under its sandbox's dir
 * (nspin.h), which the containers join by path: no process holds them. Only a pod that shares
 * one pid namespace among its containers (shareProcessNamespace) has a pause holder: the host's
 * static busybox bind-mounted read-only as /sleep into an empty read-only rootfs (it needs no
 * image and no libraries; kite itself links shared libraries, so it cannot be re-executed
 * inside an empty root), whose namespaces, pid included, the containers join by
 * /proc/<pause pid>/ns/<type> (runc-sandbox.c). */
#include "agent/runtime/runc-int.h"

struct runc_rt *kite_rc_of(struct kite_runtime *rt) { return (struct runc_rt *)rt; }

int64_t kite_rc_deadline_of(int64_t timeout_ns) {
    return kite_sat_add(kite_agent_rt_mono_ns(), timeout_ns > 0 ? timeout_ns : KITE_RT_DEFAULT_TIMEOUT_NS);
}

int64_t kite_rc_now_wall(struct runc_rt *c) { return kite_now_wall(c->clock); }


char *kite_rc_new_id(void) {
    unsigned char b[16];
    kite_random_bytes(b, sizeof b);
    char *s = kite_malloc(33);
    for (int i = 0; i < 16; i++) snprintf(s + 2 * i, 3, "%02x", b[i]);
    return s;
}

static bool valid_id(const char *id) {
    if (!id || strlen(id) != 32) return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

static char *find_in_path(const char *name) {
    const char *path = getenv("PATH");
    _cleanup_free_ char *copy = kite_strdup(path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *p = kite_asprintf("%s/%s", d, name);
        if (access(p, X_OK) == 0) return p;
        free(p);
    }
    /* agents started with a narrow PATH still find Debian's /usr/sbin/runc */
    char *p = kite_asprintf("/usr/sbin/%s", name);
    if (access(p, X_OK) == 0) return p;
    free(p);
    return NULL;
}

/* ---- runc and files ---------------------------------------------------------------------- */

/* Runs `runc --root STATE args...`; 0 with r->status, or -errno / -ETIMEDOUT. */
int kite_rc_runc(struct runc_rt *c, int64_t deadline, struct kite_agent_rt_run *r, const char *const *args) {
    const char *argv[32];
    size_t n = 0;
    argv[n++] = c->runc;
    argv[n++] = "--root";
    argv[n++] = c->state;
    for (size_t i = 0; args[i] && n < KITE_ARRAY_SIZE(argv) - 1; i++) argv[n++] = args[i];
    argv[n] = NULL;
    *r = (struct kite_agent_rt_run){.argv = argv, .pass_fd = -1, .deadline = deadline};
    return kite_agent_rt_run(r);
}

/* runc with a simple result: 0, -EIO (runc failed; *ret_error its output), -ETIMEDOUT. */
int kite_rc_runc_simple(struct runc_rt *c, int64_t deadline, char **ret_error, const char *const *args) {
    struct kite_agent_rt_run r;
    int e = kite_rc_runc(c, deadline, &r, args);
    if (e == 0 && r.status != 0) {
        if (ret_error) *ret_error = kite_asprintf("runc %s: %s", args[0], r.out);
        e = -EIO;
    }
    kite_agent_rt_run_release(&r);
    return e;
}

static json_object *read_json(const char *path) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (kite_read_file(path, RC_META_MAX, &text, &len) < 0) return NULL;
    return json_tokener_parse(text);
}

int kite_rc_write_json(const char *path, json_object *o) {
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    return kite_write_file_atomic(path, s, strlen(s), 0644, false);
}

char *kite_rc_cdir(struct runc_rt *c, const char *id, const char *file) {
    return file ? kite_asprintf("%s/%s/%s", c->containers, id, file) : kite_asprintf("%s/%s", c->containers, id);
}

json_object *kite_rc_read_meta(struct runc_rt *c, const char *id) {
    if (!valid_id(id)) return NULL;
    _cleanup_free_ char *p = kite_rc_cdir(c, id, "meta.json");
    return read_json(p);
}

/* mu held: the temporary file's name is fixed */
void kite_rc_write_meta_locked(struct runc_rt *c, const char *id, json_object *meta) {
    _cleanup_free_ char *p = kite_rc_cdir(c, id, "meta.json");
    kite_rc_write_json(p, meta);
}

void kite_rc_write_meta(struct runc_rt *c, const char *id, json_object *meta) {
    pthread_mutex_lock(&c->mu);
    kite_rc_write_meta_locked(c, id, meta);
    pthread_mutex_unlock(&c->mu);
}

static pid_t read_pid(const char *path) {
    _cleanup_free_ char *t = NULL;
    size_t len = 0;
    int64_t v = 0;
    if (kite_read_file(path, 64, &t, &len) < 0) return 0;
    t[strcspn(t, "\n ")] = 0;
    return kite_parse_int64(t, &v) == 0 && v > 0 ? (pid_t)v : 0;
}

pid_t kite_rc_container_pid(struct runc_rt *c, const char *id) {
    _cleanup_free_ char *p = kite_rc_cdir(c, id, "pidfile");
    return read_pid(p);
}

/* Alive and not a zombie. */
bool kite_rc_pid_alive(pid_t pid) {
    if (pid <= 0) return false;
    _cleanup_free_ char *p = kite_asprintf("/proc/%d/stat", pid), *t = NULL;
    size_t len = 0;
    if (kite_read_file(p, 4096, &t, &len) < 0) return false;
    const char *rp = strrchr(t, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* Alive and still holding its namespaces. A sandbox's holder that is the first process of its pid
 * namespace (shareProcessNamespace) and was killed is not a zombie yet while the kernel reaps the
 * namespace's other processes, but its namespaces are gone already: a container joining them
 * through /proc/PID/ns then fails to start, so the sandbox is not ready. */
bool kite_rc_holder_alive(pid_t pid) {
    if (!kite_rc_pid_alive(pid)) return false;
    char p[48], t[64];
    snprintf(p, sizeof p, "/proc/%d/ns/ipc", (int)pid);
    return readlink(p, t, sizeof t) > 0;
}

/* The exit code conmon wrote; -ENOENT while there is none. */
int kite_rc_read_exit(struct runc_rt *c, const char *id, int *ret_code, int64_t *ret_mtime) {
    _cleanup_free_ char *p = kite_rc_cdir(c, id, "exit"), *t = NULL;
    size_t len = 0;
    int r = kite_read_file(p, 64, &t, &len);
    if (r < 0) return r;
    int64_t v = 0;
    t[strcspn(t, "\n ")] = 0;
    if (!*t || kite_parse_int64(t, &v) < 0) return -EAGAIN; /* being written */
    struct stat st;
    if (ret_mtime && stat(p, &st) == 0) *ret_mtime = st.st_mtim.tv_sec * KITE_NS_PER_SEC + st.st_mtim.tv_nsec;
    *ret_code = (int)v;
    return 0;
}

/* Starts conmon on the bundle (conmon runs `runc create`) and waits for the container's pid on
 * conmon's sync pipe. */
static int conmon_create(struct runc_rt *c, const char *id, const char *log_path, const struct kite_container_config *cfg,
                         int64_t deadline, char **ret_error) {
    _cleanup_free_ char *bundle = kite_rc_cdir(c, id, NULL), *pidfile = kite_rc_cdir(c, id, "pidfile"),
                        *cpid = kite_rc_cdir(c, id, "conmon.pid"), *log = kite_asprintf("k8s-file:%s", log_path),
                        *rootarg = kite_asprintf("--root=%s", c->state);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -errno;
    const char *argv[] = {c->conmon, "--api-version", "1", "-c", id, "-u", id, "-n", id, "-r", c->runc,
                          "-b", bundle, "-p", pidfile, "-P", cpid, "-l", log, "--exit-dir", c->exits,
                          "-0", bundle, "--socket-dir-path", c->sockets, "--runtime-arg", rootarg,
                          "--log-level", "error", "--syslog", NULL, NULL, NULL, NULL};
    /* stdin held open for attach (left open after an attach ends unless stdinOnce), and a
     * terminal: conmon makes the console and relays it on its attach socket */
    size_t na = KITE_ARRAY_SIZE(argv) - 4;
    if (cfg && cfg->stdin_open) argv[na++] = "-i";
    if (cfg && cfg->stdin_open && !cfg->stdin_once) argv[na++] = "--leave-stdin-open";
    if (cfg && cfg->tty) argv[na++] = "-t";
    const char *env[] = {"_OCI_SYNCPIPE=3", NULL};
    /* conmon writes its "oom" marker into its working directory: the bundle */
    struct kite_agent_rt_run r = {.argv = argv, .env = env, .pass_fd = p[1], .cwd = bundle, .discard_output = true, .deadline = deadline};
    int e = kite_agent_rt_run(&r);
    close(p[1]);
    kite_agent_rt_run_release(&r);
    if (e == 0 && r.status != 0) {
        *ret_error = kite_asprintf("conmon exited with %d", r.status);
        e = -EIO;
    }
    /* the daemonized conmon answers {"data": pid} or {"data": -1, "message": ...} */
    char buf[4096];
    size_t len = 0;
    while (e == 0 && len < sizeof buf - 1 && !memchr(buf, '\n', len)) {
        int w = kite_agent_rt_wait_fd(p[0], deadline);
        if (w <= 0) {
            e = w == 0 ? -ETIMEDOUT : w;
            break;
        }
        ssize_t n = read(p[0], buf + len, sizeof buf - 1 - len);
        if (n <= 0) {
            e = -EIO;
            *ret_error = kite_strdup("conmon closed its sync pipe without an answer");
            break;
        }
        len += (size_t)n;
    }
    close(p[0]);
    if (e < 0) return e;
    buf[len] = 0;
    json_object *o = json_tokener_parse(buf), *d = NULL;
    int64_t pid = o && json_object_object_get_ex(o, "data", &d) ? json_object_get_int64(d) : -1;
    if (pid <= 0) {
        /* runc could not start the process (no such executable, a mount that fails...) */
        const char *msg = kite_obj_str(o, "message");
        *ret_error = kite_asprintf("OCI runtime create failed: %s", msg ? msg : buf);
        e = -ENOEXEC;
    }
    json_object_put(o);
    return e;
}

/* ---- containers -------------------------------------------------------------------------- */

json_object *kite_rc_read_sandbox(struct runc_rt *c, const char *id) {
    if (!valid_id(id)) return NULL;
    _cleanup_free_ char *p = kite_asprintf("%s/%s/sandbox.json", c->sandboxes, id);
    return read_json(p);
}

static json_object *env_merge(char **img, size_t n_img, const char *const *env, size_t n_env) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n_img; i++) {
        size_t k = strcspn(img[i], "=");
        bool overridden = false;
        for (size_t j = 0; j < n_env; j++)
            if (strncmp(env[j], img[i], k) == 0 && env[j][k] == '=') overridden = true;
        if (!overridden) json_object_array_add(a, json_object_new_string(img[i]));
    }
    for (size_t j = 0; j < n_env; j++) json_object_array_add(a, json_object_new_string(env[j]));
    bool has_path = false;
    for (size_t i = 0; i < json_object_array_length(a); i++)
        if (kite_startswith(json_object_get_string(json_object_array_get_idx(a, i)), "PATH=")) has_path = true;
    if (!has_path)
        json_object_array_add(a, json_object_new_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    return a;
}

/* The rootfs: an overlay of the image's unpacked root with a per-container upper dir, or a
 * copy where overlay cannot be mounted (an overlay root dir). */
static int make_rootfs(struct runc_rt *c, const char *id, const char *lower, int64_t deadline, char **ret_error) {
    _cleanup_free_ char *rootfs = kite_rc_cdir(c, id, "rootfs"), *upper = kite_rc_cdir(c, id, "upper"), *work = kite_rc_cdir(c, id, "work");
    if (mkdir(rootfs, 0755) < 0 || mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0) return -errno;
    _cleanup_free_ char *opts = kite_asprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
    if (mount("overlay", rootfs, "overlay", 0, opts) == 0) return 0;
    _cleanup_free_ char *src = kite_asprintf("%s/.", lower);
    const char *argv[] = {"/bin/cp", "-a", src, rootfs, NULL};
    struct kite_agent_rt_run r = {.argv = argv, .pass_fd = -1, .deadline = deadline};
    int e = kite_agent_rt_run(&r);
    if (e == 0 && r.status != 0) {
        *ret_error = kite_asprintf("copying the image root: %s", r.out);
        e = -EIO;
    }
    kite_agent_rt_run_release(&r);
    return e;
}

void kite_rc_destroy_bundle(struct runc_rt *c, const char *id) {
    _cleanup_free_ char *rootfs = kite_rc_cdir(c, id, "rootfs"), *dir = kite_rc_cdir(c, id, NULL),
                        *exitf = kite_asprintf("%s/%s", c->exits, id);
    umount2(rootfs, MNT_DETACH);
    kite_rm_rf(dir);
    unlink(exitf);
}

/* Common to containers and pause holders: bundle + conmon + meta. */
int kite_rc_create_bundle(struct runc_rt *c, const char *id, json_object *config, json_object *meta, const char *log_path,
                          const struct kite_container_config *cfg, int64_t deadline, char **ret_error) {
    _cleanup_free_ char *cfgp = kite_rc_cdir(c, id, "config.json");
    int r = kite_rc_write_json(cfgp, config);
    if (r < 0) return r;
    _cleanup_free_ char *logdir = kite_strdup(log_path);
    *strrchr(logdir, '/') = 0;
    if ((r = kite_mkdir_p(logdir, 0755)) < 0) return r;
    json_object_object_add(meta, "created", json_object_new_int64(kite_rc_now_wall(c)));
    kite_rc_write_meta(c, id, meta);
    return conmon_create(c, id, log_path, cfg, deadline, ret_error);
}

static int rc_create_container(struct kite_runtime *rt, const char *sandbox_id, const struct kite_container_config *cfg,
                               int64_t timeout_ns, char **ret_id, char **ret_error) {
    struct runc_rt *c = kite_rc_of(rt);
    int64_t deadline = kite_rc_deadline_of(timeout_ns);
    _cleanup_free_ char *err = NULL;
    if (!cfg || !cfg->name || !*cfg->name || strchr(cfg->name, '/') || !cfg->image) return -EINVAL;
    json_object *sb = kite_rc_read_sandbox(c, sandbox_id);
    if (!sb) {
        if (ret_error) *ret_error = kite_asprintf("sandbox %s not found", sandbox_id ? sandbox_id : "");
        return -ENOENT;
    }
    _cleanup_free_ char *join_net = NULL, *join_ipc = NULL, *join_uts = NULL;
    pid_t pause = 0;
    if (!kite_rc_sandbox_ready(c, sandbox_id, sb) ||
        kite_rc_sandbox_join(c, sandbox_id, sb, &join_net, &join_ipc, &join_uts, &pause) < 0) {
        json_object_put(sb);
        if (ret_error) *ret_error = kite_asprintf("sandbox %s is not ready", sandbox_id);
        return -ENOTCONN;
    }
    struct kite_image_info img = {0};
    int r = kite_image_store_get(c->images, cfg->image, &img);
    if (r < 0) {
        json_object_put(sb);
        if (ret_error) *ret_error = kite_asprintf("image %s: %s", cfg->image, r == -ENOENT ? "not present" : strerror(-r));
        return r;
    }
    _cleanup_free_ char *id = kite_rc_new_id(), *dir = kite_rc_cdir(c, id, NULL);
    _cleanup_free_ char *cg = kite_asprintf("%s/%s", kite_obj_str(sb, "cgroup_parent"), id);
    _cleanup_free_ char *rel = cfg->log_path ? kite_strdup(cfg->log_path) : kite_asprintf("%s/%u.log", cfg->name, cfg->attempt);
    _cleanup_free_ char *log_path = kite_asprintf("%s/%s", kite_obj_str(sb, "log_dir"), rel);
    json_object *args = json_object_new_array(), *meta = json_object_new_object();
    if (cfg->n_command)
        for (size_t i = 0; i < cfg->n_command; i++) json_object_array_add(args, json_object_new_string(cfg->command[i]));
    else
        for (size_t i = 0; i < img.n_entrypoint; i++) json_object_array_add(args, json_object_new_string(img.entrypoint[i]));
    if (cfg->n_args)
        for (size_t i = 0; i < cfg->n_args; i++) json_object_array_add(args, json_object_new_string(cfg->args[i]));
    else if (!cfg->n_command)
        for (size_t i = 0; i < img.n_cmd; i++) json_object_array_add(args, json_object_new_string(img.cmd[i]));
    if (json_object_array_length(args) == 0) {
        json_object_put(args);
        json_object_put(meta);
        json_object_put(sb);
        kite_image_info_release(&img);
        if (ret_error) *ret_error = kite_strdup("no command: neither the container nor the image gives one");
        return -EINVAL;
    }
    /* the user: runAsUser or the image's, resolved in the image's root as containerd does */
    struct kite_security_config sec;
    _cleanup_free_ uint32_t *gids = NULL;
    if ((r = kite_oci_resolve_user(img.rootfs, img.user, &cfg->sec, &sec, &gids, ret_error)) < 0) {
        json_object_put(args);
        json_object_put(meta);
        json_object_put(sb);
        kite_image_info_release(&img);
        return r;
    }
    struct oci_in in = {.args = args, .sec = &sec,
                        .env = env_merge(img.env, img.n_env, cfg->env, cfg->n_env),
                        .cwd = cfg->working_dir && *cfg->working_dir ? cfg->working_dir : img.working_dir ? img.working_dir : "/",
                        .cgroup = cg,
                        .host_network = json_object_get_boolean(json_object_object_get(sb, "host_network")),
                        .host_pid = json_object_get_boolean(json_object_object_get(sb, "host_pid")),
                        .host_ipc = json_object_get_boolean(json_object_object_get(sb, "host_ipc")),
                        .join_net = join_net, .join_ipc = join_ipc, .join_uts = join_uts,
                        /* shareProcessNamespace: the holder's pid namespace, shared by all */
                        .pid_ns_pid = json_object_get_boolean(json_object_object_get(sb, "share_pid")) ? pause : 0,
                        .cfg = cfg};
    if (cfg->pid_ns_of) {
        in.pid_ns_pid = valid_id(cfg->pid_ns_of) ? kite_rc_container_pid(c, cfg->pid_ns_of) : 0;
        if (!kite_rc_pid_alive(in.pid_ns_pid)) {
            json_object_put(in.args);
            json_object_put(in.env);
            json_object_put(meta);
            json_object_put(sb);
            kite_image_info_release(&img);
            if (ret_error) *ret_error = kite_strdup("the target container is not running (its pid namespace is joined)");
            return -ENOTCONN;
        }
    }
    json_object *config = kite_rc_oci_config(&in);
    if ((r = kite_oci_apply_seccomp(config, &sec, ret_error)) < 0) {
        json_object_put(config);
        json_object_put(meta);
        json_object_put(sb);
        kite_image_info_release(&img);
        return r;
    }
    json_object_object_add(meta, "id", json_object_new_string(id));
    json_object_object_add(meta, "sandbox_id", json_object_new_string(sandbox_id));
    json_object_object_add(meta, "name", json_object_new_string(cfg->name));
    json_object_object_add(meta, "attempt", json_object_new_int64(cfg->attempt));
    json_object_object_add(meta, "image", json_object_new_string(cfg->image));
    json_object_object_add(meta, "image_id", json_object_new_string(img.id));
    json_object_object_add(meta, "log_path", json_object_new_string(log_path));
    json_object_object_add(meta, "cgroup", json_object_new_string(cg));
    if ((r = kite_mkdir_p(dir, 0700)) == 0 && (r = make_rootfs(c, id, img.rootfs, deadline, &err)) == 0)
        r = kite_rc_create_bundle(c, id, config, meta, log_path, cfg, deadline, &err);
    json_object_put(config);
    json_object_put(sb);
    kite_image_info_release(&img);
    if (r == -ENOEXEC) {
        /* as containerd's: the container exists, its start fails (StartError, exit 128); the
         * record stays until it is removed, its root goes now */
        struct kite_agent_rt_run rr;
        if (kite_rc_runc(c, kite_rc_deadline_of(0), &rr, (const char *[]){"delete", "--force", id, NULL}) == 0) kite_agent_rt_run_release(&rr);
        _cleanup_free_ char *rootfs = kite_rc_cdir(c, id, "rootfs"), *upper = kite_rc_cdir(c, id, "upper"), *work = kite_rc_cdir(c, id, "work");
        umount2(rootfs, MNT_DETACH);
        kite_rm_rf(rootfs);
        kite_rm_rf(upper);
        kite_rm_rf(work);
        kite_rc_cgroup_remove(cg);
        json_object_object_add(meta, "start_error", json_object_new_string(err ? err : "the process could not start"));
        kite_rc_write_meta(c, id, meta);
        json_object_put(meta);
        *ret_id = TAKE_PTR(id);
        return 0;
    }
    json_object_put(meta);
    if (r < 0) {
        struct kite_agent_rt_run rr;
        if (kite_rc_runc(c, kite_rc_deadline_of(0), &rr, (const char *[]){"delete", "--force", id, NULL}) == 0) kite_agent_rt_run_release(&rr);
        kite_rc_destroy_bundle(c, id);
        kite_rc_cgroup_remove(cg);
        if (ret_error) *ret_error = err ? TAKE_PTR(err) : kite_strdup(strerror(-r));
        return r;
    }
    *ret_id = TAKE_PTR(id);
    return 0;
}

static int rc_start_container(struct kite_runtime *rt, const char *id, int64_t timeout_ns, char **ret_error) {
    struct runc_rt *c = kite_rc_of(rt);
    json_object *meta = kite_rc_read_meta(c, id);
    if (!meta) return -ENOENT;
    /* the process runs from within `runc start`: a fast one ends before it returns */
    const char *serr = kite_obj_str(meta, "start_error");
    if (serr) {
        /* its process could not be created: the start fails, the container has exited (128) */
        if (ret_error) *ret_error = kite_strdup(serr);
        if (!kite_obj_int(meta, "finished")) {
            json_object_object_add(meta, "finished", json_object_new_int64(kite_rc_now_wall(c)));
            kite_rc_write_meta(c, id, meta);
        }
        json_object_put(meta);
        return -ENOEXEC;
    }
    int64_t started = kite_rc_now_wall(c);
    int r = kite_rc_runc_simple(c, kite_rc_deadline_of(timeout_ns), ret_error, (const char *[]){"start", id, NULL});
    if (r == 0) {
        json_object_object_add(meta, "started", json_object_new_int64(started));
        kite_rc_write_meta(c, id, meta);
        pthread_mutex_lock(&c->mu);
        kite_rc_watch_container(c, id);
        pthread_mutex_unlock(&c->mu);
    }
    json_object_put(meta);
    return r;
}

static int fill_status(struct runc_rt *c, const char *id, json_object *meta, struct kite_container_status *s) {
    *s = (struct kite_container_status){
        .id = kite_strdup(id),
        .sandbox_id = kite_strdup(kite_obj_str(meta, "sandbox_id") ? kite_obj_str(meta, "sandbox_id") : ""),
        .name = kite_strdup(kite_obj_str(meta, "name") ? kite_obj_str(meta, "name") : ""),
        .image = kite_strdup(kite_obj_str(meta, "image") ? kite_obj_str(meta, "image") : ""),
        .image_id = kite_strdup(kite_obj_str(meta, "image_id") ? kite_obj_str(meta, "image_id") : ""),
        .log_path = kite_strdup(kite_obj_str(meta, "log_path") ? kite_obj_str(meta, "log_path") : ""),
        .attempt = (uint32_t)kite_obj_int(meta, "attempt"),
        .created_ns = kite_obj_int(meta, "created"),
        .started_ns = kite_obj_int(meta, "started"),
    };
    if (kite_obj_str(meta, "start_error")) {
        s->state = KITE_CONTAINER_EXITED;
        s->exit_code = 128;
        s->finished_ns = kite_obj_int(meta, "finished") ? kite_obj_int(meta, "finished") : s->created_ns;
        s->reason = kite_strdup("StartError");
        s->message = kite_strdup(kite_obj_str(meta, "start_error"));
        return 0;
    }
    int code = 0;
    int64_t mtime = 0;
    int r = kite_rc_read_exit(c, id, &code, &mtime);
    if (r == 0) {
        int64_t seen = kite_rc_watch_finished(c, id);
        kite_rc_record_exit(c, id, meta, seen ? seen : mtime);
        s->state = KITE_CONTAINER_EXITED;
        s->exit_code = code;
        s->signal = code > 128 && code < 128 + 65 ? code - 128 : 0;
        s->finished_ns = kite_obj_int(meta, "finished");
        s->oom_killed = json_object_get_boolean(json_object_object_get(meta, "oom"));
        s->reason = kite_strdup(s->oom_killed ? "OOMKilled" : code == 0 ? "Completed" : "Error");
        return 0;
    }
    pid_t pid = kite_rc_container_pid(c, id);
    if (kite_rc_pid_alive(pid)) {
        s->state = s->started_ns ? KITE_CONTAINER_RUNNING : KITE_CONTAINER_CREATED;
        s->pid = pid;
        return 0;
    }
    s->state = KITE_CONTAINER_UNKNOWN;
    s->reason = kite_strdup("ContainerLost");
    s->message = kite_strdup(pid ? "the container's process is gone and no exit code was recorded"
                                 : "the container has no process");
    return 0;
}

static int rc_container_status(struct kite_runtime *rt, const char *id, int64_t timeout_ns,
                               struct kite_container_status *ret) {
    struct runc_rt *c = kite_rc_of(rt);
    json_object *meta = kite_rc_read_meta(c, id);
    if (!meta || json_object_get_boolean(json_object_object_get(meta, "pause"))) {
        json_object_put(meta);
        return -ENOENT;
    }
    int r = fill_status(c, id, meta, ret);
    json_object_put(meta);
    return r;
}

/* Waits until the container's exit file is there (conmon writes it a few ms after the exit). */
static int wait_exit_file(struct runc_rt *c, const char *id, int64_t deadline) {
    int code;
    for (;;) {
        if (kite_rc_read_exit(c, id, &code, NULL) == 0) return 0;
        if (kite_agent_rt_mono_ns() >= deadline) return -ETIMEDOUT;
        struct timespec ts = {0, KITE_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
}

/* The start time (clock ticks after boot) of process pid, from /proc/PID/stat; -1 when gone. */
static int64_t proc_start(pid_t pid) {
    _cleanup_free_ char *p = kite_asprintf("/proc/%d/stat", (int)pid), *t = NULL;
    size_t len = 0;
    if (kite_read_file(p, 4096, &t, &len) < 0) return -1;
    const char *q = strrchr(t, ')');
    /* after "pid (comm) ": state is field 3, starttime field 22 */
    for (int field = 2; q && field < 22; field++) q = strchr(q + 1, ' ');
    int64_t v = 0;
    if (!q) return -1;
    _cleanup_free_ char *num = kite_strndup(q + 1, strcspn(q + 1, " "));
    return kite_parse_int64(num, &v) == 0 ? v : -1;
}

/* A pidfd on the container's process if it is still the one runc started: the pid and start
 * time in runc's state.json, which `runc kill` checks before it signals (so signalling through
 * this descriptor is what runc kill does, without running runc). -1 when it cannot tell. */
static int init_pidfd(struct runc_rt *c, const char *id, pid_t pid) {
    _cleanup_free_ char *sp = kite_asprintf("%s/%s/state.json", c->state, id), *text = NULL;
    size_t len = 0;
    if (!valid_id(id) || kite_read_file(sp, 4 * 1024 * 1024, &text, &len) < 0) return -1;
    json_object *st = json_tokener_parse(text);
    int64_t want_pid = kite_obj_int(st, "init_process_pid"), want_start = kite_obj_int(st, "init_process_start");
    json_object_put(st);
    if (want_pid != pid || want_start <= 0) return -1;
    int fd = kite_agent_rt_pidfd_open(pid);
    /* the descriptor names one process from here on: that one must be runc's */
    if (fd >= 0 && proc_start(pid) != want_start) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* SIGTERM or SIGKILL to the container's process: through its pidfd when it is known to be
 * runc's init (direct), else by `runc kill`. */
static void signal_ctr(struct runc_rt *c, const char *id, int fd, bool direct, int sig, int64_t deadline) {
    if (direct) {
        syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
        return;
    }
    kite_rc_runc_simple(c, deadline, NULL, (const char *[]){"kill", id, sig == SIGKILL ? "KILL" : "TERM", NULL});
}

int kite_rc_stop_by_id(struct runc_rt *c, const char *id, int64_t grace_ns, int64_t deadline) {
    int code;
    if (kite_rc_read_exit(c, id, &code, NULL) == 0) return 0;
    pid_t pid = kite_rc_container_pid(c, id);
    if (!kite_rc_pid_alive(pid)) return 0;
    int fd = init_pidfd(c, id, pid);
    bool direct = fd >= 0;
    if (!direct) fd = kite_agent_rt_pidfd_open(pid);
    if (fd < 0) return 0;
    int r = 0;
    if (grace_ns > 0) {
        signal_ctr(c, id, fd, direct, SIGTERM, deadline);
        r = kite_agent_rt_wait_fd(fd, KITE_MIN(deadline, kite_sat_add(kite_agent_rt_mono_ns(), grace_ns)));
    }
    if (r <= 0) {
        signal_ctr(c, id, fd, direct, SIGKILL, deadline);
        r = kite_agent_rt_wait_fd(fd, deadline);
    }
    close(fd);
    if (r <= 0) return r == 0 ? -ETIMEDOUT : r;
    return wait_exit_file(c, id, KITE_MIN(deadline, kite_agent_rt_mono_ns() + RC_EXIT_FILE_WAIT_NS));
}

static int rc_stop_container(struct kite_runtime *rt, const char *id, int64_t grace_ns, int64_t timeout_ns) {
    struct runc_rt *c = kite_rc_of(rt);
    json_object *meta = kite_rc_read_meta(c, id);
    if (!meta) return -ENOENT;
    json_object_put(meta);
    return kite_rc_stop_by_id(c, id, grace_ns, kite_rc_deadline_of(timeout_ns > 0 ? kite_sat_add(timeout_ns, grace_ns) : 0));
}

int kite_rc_remove_by_id(struct runc_rt *c, const char *id, int64_t deadline) {
    json_object *meta = kite_rc_read_meta(c, id);
    if (!meta) return -ENOENT;
    int r = kite_rc_stop_by_id(c, id, 0, deadline);
    if (r == 0) {
        int code;
        if (kite_rc_read_exit(c, id, &code, NULL) == 0) kite_rc_record_exit(c, id, meta, kite_rc_now_wall(c));
        r = kite_rc_runc_simple(c, deadline, NULL, (const char *[]){"delete", "--force", id, NULL});
        /* runc forgets a container whose state is gone; what is left is ours to clean */
        if (r == -EIO) r = 0;
    }
    if (r == 0) {
        pthread_mutex_lock(&c->mu);
        kite_rc_unwatch(c, id);
        pthread_mutex_unlock(&c->mu);
        kite_rc_destroy_bundle(c, id);
        if (kite_obj_str(meta, "cgroup")) kite_rc_cgroup_remove(kite_obj_str(meta, "cgroup"));
    }
    json_object_put(meta);
    return r;
}

static int rc_remove_container(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    return kite_rc_remove_by_id(kite_rc_of(rt), id, kite_rc_deadline_of(timeout_ns));
}

/* Every container id in containers/, pause holders included when with_pause. */
char **kite_rc_list_ids(struct runc_rt *c, size_t *ret_n) {
    DIR *d = opendir(c->containers);
    char **v = NULL;
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!valid_id(e->d_name)) continue;
        v = kite_realloc(v, (n + 1) * sizeof(char *));
        v[n++] = kite_strdup(e->d_name);
    }
    if (d) closedir(d);
    *ret_n = n;
    return v;
}

static int rc_list_containers(struct kite_runtime *rt, const char *sandbox_id, int64_t timeout_ns,
                              struct kite_container_status **ret, size_t *ret_n) {
    struct runc_rt *c = kite_rc_of(rt);
    size_t n_ids = 0, n = 0;
    char **ids = kite_rc_list_ids(c, &n_ids);
    struct kite_container_status *v = n_ids ? kite_calloc(n_ids, sizeof(*v)) : NULL;
    for (size_t i = 0; i < n_ids; i++) {
        json_object *meta = kite_rc_read_meta(c, ids[i]);
        if (meta && !json_object_get_boolean(json_object_object_get(meta, "pause")) &&
            (!sandbox_id || kite_streq(kite_obj_str(meta, "sandbox_id"), sandbox_id)))
            fill_status(c, ids[i], meta, &v[n++]);
        json_object_put(meta);
    }
    kite_strv_free(ids, n_ids);
    *ret = v;
    *ret_n = n;
    return 0;
}

/* Whether container id runs (a command may run in it, its terminal be attached): -ENOENT (no
 * such container), -ENOTCONN (it is not running), or 0. */
static int running(struct runc_rt *c, const char *id) {
    json_object *meta = kite_rc_read_meta(c, id);
    if (!meta) return -ENOENT;
    json_object_put(meta);
    int code;
    if (kite_rc_read_exit(c, id, &code, NULL) == 0 || !kite_rc_pid_alive(kite_rc_container_pid(c, id))) return -ENOTCONN;
    return 0;
}

static int rc_exec_sync(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc, int64_t timeout_ns,
                        struct kite_exec_result *ret) {
    struct runc_rt *c = kite_rc_of(rt);
    if (!argc) return -EINVAL;
    int e0 = running(c, id);
    if (e0 < 0) return e0;
    const char **args = kite_calloc(argc + 8, sizeof(char *));
    size_t n = 0;
    args[n++] = c->runc;
    args[n++] = "--root";
    args[n++] = c->state;
    args[n++] = "exec";
    args[n++] = id;
    for (size_t i = 0; i < argc; i++) args[n++] = argv[i];
    struct kite_agent_rt_run r = {.argv = args, .pass_fd = -1, .term_first = true, .deadline = kite_rc_deadline_of(timeout_ns),
                       .out_max = KITE_RT_EXEC_OUTPUT_MAX};
    int e = kite_agent_rt_run(&r);
    free(args);
    if (e < 0) {
        kite_agent_rt_run_release(&r);
        return e;
    }
    *ret = (struct kite_exec_result){.exit_code = r.status, .output = r.out, .output_len = r.out_len, .truncated = r.truncated};
    return 0;
}

/* A command with its streams: `runc exec` in the foreground, so runc's exit code is the
 * command's. With a tty runc wants a terminal of its own (it makes the container's and copies
 * between the two, resizing the container's on SIGWINCH): the child gets a new session whose
 * controlling terminal is the slave of a pty this side holds the master of, so a TIOCSWINSZ on
 * the master reaches the command. */
static int rc_exec_start(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc, bool tty,
                         bool want_in, bool want_out, bool want_err, struct kite_exec_session *ret, char **ret_error) {
    struct runc_rt *c = kite_rc_of(rt);
    if (!argc) return -EINVAL;
    int e0 = running(c, id);
    if (e0 < 0) return e0;
    *ret = (struct kite_exec_session){.pid = -1, .pidfd = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .pty_fd = -1};
    _cleanup_free_ char *rnd = kite_rc_new_id(), *pf_name = kite_asprintf("exec-%s.pid", rnd);
    char *pid_file = kite_rc_cdir(c, id, pf_name);
    const char **args = kite_calloc(argc + 10, sizeof(char *));
    size_t n = 0;
    args[n++] = c->runc;
    args[n++] = "--root";
    args[n++] = c->state;
    args[n++] = "exec";
    if (tty) args[n++] = "--tty";
    args[n++] = "--pid-file";
    args[n++] = pid_file;
    args[n++] = id;
    for (size_t i = 0; i < argc; i++) args[n++] = argv[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, master = -1, e = 0;
    if (tty) {
        char slave[128];
        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 || ptsname_r(master, slave, sizeof slave) != 0) {
            e = -errno;
        } else {
            struct winsize ws = {.ws_row = 24, .ws_col = 80};
            ioctl(master, TIOCSWINSZ, &ws);
            /* opened after setsid and without O_NOCTTY: the child's controlling terminal */
            posix_spawn_file_actions_addopen(&fa, 0, slave, O_RDWR, 0);
            posix_spawn_file_actions_adddup2(&fa, 0, 1);
            posix_spawn_file_actions_adddup2(&fa, 0, 2);
        }
    } else {
        if ((want_in && pipe2(in, O_CLOEXEC) < 0) || (want_out && pipe2(out, O_CLOEXEC) < 0) ||
            (want_err && pipe2(err, O_CLOEXEC) < 0))
            e = -errno;
        if (want_in) posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (want_out) posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        if (want_err) posix_spawn_file_actions_adddup2(&fa, err[1], 2);
        else posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    pid_t pid = -1;
    if (e == 0) e = kite_agent_rt_spawn(&pid, c->runc, &fa, (char *const *)args, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(args);
    int child_ends[] = {in[0], out[1], err[1]};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(child_ends); i++)
        if (child_ends[i] >= 0) close(child_ends[i]);
    if (e < 0) {
        int mine[] = {in[1], out[0], err[0], master};
        for (size_t i = 0; i < KITE_ARRAY_SIZE(mine); i++)
            if (mine[i] >= 0) close(mine[i]);
        free(pid_file);
        if (ret_error) *ret_error = kite_asprintf("starting runc exec: %s", strerror(-e));
        return e;
    }
    int mine[] = {in[1], out[0], err[0], master};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(mine); i++)
        if (mine[i] >= 0) fcntl(mine[i], F_SETFL, fcntl(mine[i], F_GETFL) | O_NONBLOCK);
    ret->pid = pid;
    ret->pidfd = kite_agent_rt_pidfd_open(pid);
    ret->in_fd = in[1];
    ret->out_fd = out[0];
    ret->err_fd = err[0];
    ret->pty_fd = master;
    ret->cmd_pid_file = pid_file;
    return 0;
}

static int rc_attach_socket(struct kite_runtime *rt, const char *id, char **ret_path) {
    struct runc_rt *c = kite_rc_of(rt);
    int e = running(c, id);
    if (e < 0) return e;
    /* conmon's socket is <bundle>/attach, linked from <sockets>/<id> (a short path for
     * sun_path's 108 bytes) */
    *ret_path = kite_asprintf("%s/%s/attach", c->sockets, id);
    return 0;
}

/* ---- version, images, lifecycle ---------------------------------------------------------- */

static int rc_version(struct kite_runtime *rt, char **ret_name, char **ret_version) {
    struct runc_rt *c = kite_rc_of(rt);
    if (!c->version) {
        const char *argv[] = {c->runc, "--version", NULL};
        struct kite_agent_rt_run r = {.argv = argv, .pass_fd = -1, .deadline = kite_rc_deadline_of(0)};
        int e = kite_agent_rt_run(&r);
        const char *p = e == 0 && r.status == 0 ? strstr(r.out, "runc version ") : NULL;
        if (p) c->version = kite_strndup(p + 13, strcspn(p + 13, " \n"));
        kite_agent_rt_run_release(&r);
        if (!c->version) return e < 0 ? e : -EIO;
    }
    *ret_name = kite_strdup("runc");
    *ret_version = kite_strdup(c->version);
    return 0;
}

/* Ready when every binary the runtime executes is there and executable and its state dirs are
 * writable: what a broken install, a removed package or a read-only root dir breaks. Only
 * access(2): a hung runc process or container cannot hold this up. */
static int rc_status(struct kite_runtime *rt, char **ret_reason, char **ret_message) {
    struct runc_rt *c = kite_rc_of(rt);
    const struct {
        const char *what, *path;
        int mode;
        const char *reason;
    } checks[] = {
        {"the OCI runtime runc", c->runc, X_OK, "RuncNotFound"},
        {"the container monitor conmon", c->conmon, X_OK, "ConmonNotFound"},
        {"the pause binary", c->pause_bin, X_OK, "PauseNotFound"},
        {"the runtime state dir", c->state, W_OK | X_OK, "StateDirNotWritable"},
        {"the container log dir", c->logs, W_OK | X_OK, "LogDirNotWritable"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(checks); i++) {
        int e = !checks[i].path ? ENOENT : access(checks[i].path, checks[i].mode) < 0 ? errno : 0;
        if (!e) continue;
        *ret_reason = kite_strdup(checks[i].reason);
        *ret_message = kite_asprintf("%s %s: %s", checks[i].what, checks[i].path ? checks[i].path : "(not in PATH)",
                                     strerror(e));
        return -e;
    }
    return 0;
}

static int rc_list_images(struct kite_runtime *rt, struct kite_image **ret, size_t *ret_n) {
    return kite_image_store_list(kite_rc_of(rt)->images, ret, ret_n);
}

static int rc_image_status(struct kite_runtime *rt, const char *name, struct kite_image *ret) {
    struct runc_rt *c = kite_rc_of(rt);
    _cleanup_free_ char *id = NULL;
    int r = kite_image_store_resolve(c->images, name, &id);
    if (r < 0) return r;
    struct kite_image *v = NULL;
    size_t n = 0;
    if ((r = kite_image_store_list(c->images, &v, &n)) < 0) return r;
    r = -ENOENT;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].id, id) == 0) {
            *ret = v[i];
            v[i] = (struct kite_image){0};
            r = 0;
        }
    kite_images_free(v, n);
    struct kite_image_info info = {0};
    if (r == 0 && kite_image_store_get(c->images, name, &info) == 0 && info.user) ret->user = TAKE_PTR(info.user);
    kite_image_info_release(&info);
    return r;
}

static int rc_remove_image(struct kite_runtime *rt, const char *name) {
    struct runc_rt *c = kite_rc_of(rt);
    _cleanup_free_ char *id = NULL;
    int r = kite_image_store_resolve(c->images, name, &id);
    if (r < 0) return r;
    /* an image another name still holds may go; the last name of one in use may not */
    struct kite_image *v = NULL;
    size_t n = 0, names = 0;
    if (kite_image_store_list(c->images, &v, &n) == 0)
        for (size_t i = 0; i < n; i++)
            if (strcmp(v[i].id, id) == 0) names = v[i].n_names;
    kite_images_free(v, n);
    if (names <= 1) {
        size_t n_ids = 0;
        char **ids = kite_rc_list_ids(c, &n_ids);
        for (size_t i = 0; i < n_ids; i++) {
            json_object *meta = kite_rc_read_meta(c, ids[i]);
            if (kite_streq(kite_obj_str(meta, "image_id"), id)) r = -EBUSY;
            json_object_put(meta);
        }
        kite_strv_free(ids, n_ids);
        if (r < 0) return r;
    }
    return kite_image_store_remove(c->images, name);
}

static int rc_import_image(struct kite_runtime *rt, const char *tar_path, char ***ret_names, size_t *ret_n, char **ret_error) {
    return kite_image_store_import(kite_rc_of(rt)->images, tar_path, ret_names, ret_n, ret_error);
}

/* The container's cgroup as its meta recorded it at create. */
static int rc_container_stats(struct kite_runtime *rt, const char *id, struct kite_usage *ret) {
    json_object *meta = kite_rc_read_meta(kite_rc_of(rt), id);
    const char *cg = kite_obj_str(meta, "cgroup");
    int r = cg && *cg ? kite_cgroup_usage("", cg, ret) : -ENOENT;
    json_object_put(meta);
    return r;
}

static void rc_free(struct kite_runtime *rt) {
    struct runc_rt *c = kite_rc_of(rt);
    for (size_t i = 0; i < c->n_watches; i++) {
        if (c->watches[i].pidfd >= 0) close(c->watches[i].pidfd);
        free(c->watches[i].id);
    }
    free(c->watches);
    kite_ipam_free(c->ipam);
    if (c->epfd >= 0) close(c->epfd);
    if (c->inofd >= 0) close(c->inofd);
    char *strs_[] = {c->root, c->runc, c->conmon, c->pause_bin, c->cgroup_root, c->images, c->state, c->exits,
                     c->containers, c->sandboxes, c->logs, c->sockets, c->version, c->bridge};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(strs_); i++) free(strs_[i]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static const struct kite_runtime_ops runc_ops = {
    .name = "runc",
    .concurrent = true,
    .version = rc_version,
    .status = rc_status,
    .list_images = rc_list_images,
    .image_status = rc_image_status,
    .remove_image = rc_remove_image,
    .import_image = rc_import_image,
    .run_sandbox = kite_rc_run_sandbox,
    .stop_sandbox = kite_rc_stop_sandbox,
    .remove_sandbox = kite_rc_remove_sandbox,
    .sandbox_status = kite_rc_sandbox_status,
    .list_sandboxes = kite_rc_list_sandboxes,
    .create_container = rc_create_container,
    .start_container = rc_start_container,
    .stop_container = rc_stop_container,
    .remove_container = rc_remove_container,
    .container_status = rc_container_status,
    .list_containers = rc_list_containers,
    .exec_sync = rc_exec_sync,
    .exec_start = rc_exec_start,
    .attach_socket = rc_attach_socket,
    .events_fd = kite_rc_events_fd,
    .read_events = kite_rc_read_events,
    .container_stats = rc_container_stats,
    .free = rc_free,
};

int kite_runtime_runc_new(const struct kite_runc_options *o, struct kite_runtime **ret, char **ret_error) {
    if (!o || !o->root_dir || !*o->root_dir) return -EINVAL;
    struct runc_rt *c = kite_calloc(1, sizeof(*c));
    c->rt.ops = &runc_ops;
    pthread_mutex_init(&c->mu, NULL);
    c->epfd = c->inofd = -1;
    c->clock = kite_clock_real();
    c->root = kite_strdup(o->root_dir);
    c->runc = o->runc_path ? kite_strdup(o->runc_path) : find_in_path("runc");
    c->conmon = o->conmon_path ? kite_strdup(o->conmon_path) : find_in_path("conmon");
    c->pause_bin = kite_strdup(o->pause_binary ? o->pause_binary : KITE_RT_PAUSE_BINARY);
    c->cgroup_root = kite_strdup(o->cgroup_root ? o->cgroup_root : KITE_RT_CGROUP_ROOT);
    c->images = kite_asprintf("%s/images", c->root);
    c->state = kite_asprintf("%s/runc", c->root);
    c->exits = kite_asprintf("%s/exits", c->root);
    c->containers = kite_asprintf("%s/containers", c->root);
    c->sandboxes = kite_asprintf("%s/sandboxes", c->root);
    c->logs = kite_asprintf("%s/logs", c->root);
    c->sockets = kite_asprintf("%s/sockets", c->root);
    c->bridge = kite_strdup(o->bridge ? o->bridge : KITE_NET_BRIDGE_DEFAULT);
    int r = kite_cidr_parse(o->pod_cidr ? o->pod_cidr : KITE_NET_POD_CIDR_DEFAULT, &c->cidr, ret_error);
    if (r == 0 && !kite_net_valid_ifname(c->bridge)) {
        if (ret_error) *ret_error = kite_asprintf("invalid bridge name \"%s\" (1 to 15 characters, no '/', ':' or spaces)", c->bridge);
        r = -EINVAL;
    }
    if (r < 0) {
        rc_free(&c->rt);
        return r;
    }
    if (!c->runc || !c->conmon) {
        if (ret_error) *ret_error = kite_asprintf("%s not found (install runc and conmon)", !c->runc ? "runc" : "conmon");
        rc_free(&c->rt);
        return -ENOENT;
    }
    const char *dirs[] = {c->root, c->state, c->exits, c->containers, c->sandboxes, c->logs, c->sockets};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(dirs) && r == 0; i++) r = kite_mkdir_p(dirs[i], 0700);
    if (r == 0 && ((c->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
                   (c->inofd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
                   inotify_add_watch(c->inofd, c->exits, IN_CLOSE_WRITE | IN_MOVED_TO) < 0))
        r = -errno;
    if (r == 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = c->inofd};
        if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->inofd, &ev) < 0) r = -errno;
    }
    if (r < 0) {
        if (ret_error) *ret_error = kite_asprintf("setting up %s: %s", c->root, strerror(-r));
        rc_free(&c->rt);
        return r;
    }
    _cleanup_free_ char *ipam_dir = kite_asprintf("%s/ipam", c->root);
    if ((r = kite_ipam_open(ipam_dir, &c->cidr, &c->ipam, ret_error)) < 0) {
        rc_free(&c->rt);
        return r;
    }
    /* addresses whose sandbox is gone (a crash between allocation and removal) go back */
    for (size_t i = 0; i < kite_ipam_count(c->ipam);) {
        json_object *sb = kite_rc_read_sandbox(c, kite_ipam_owner(c->ipam, i));
        json_object_put(sb);
        if (sb || kite_ipam_release(c->ipam, kite_ipam_owner(c->ipam, i)) < 0) i++;
    }
    /* recovery: containers still running under their conmon are watched again; those that
     * ended meanwhile keep the code conmon wrote, read by status */
    size_t n = 0;
    char **ids = kite_rc_list_ids(c, &n);
    for (size_t i = 0; i < n; i++) {
        int code;
        json_object *meta = kite_rc_read_meta(c, ids[i]);
        if (meta && kite_obj_int(meta, "started") && kite_rc_read_exit(c, ids[i], &code, NULL) < 0 && kite_rc_pid_alive(kite_rc_container_pid(c, ids[i])))
            kite_rc_watch_container(c, ids[i]);
        json_object_put(meta);
    }
    kite_strv_free(ids, n);
    *ret = &c->rt;
    return 0;
}
