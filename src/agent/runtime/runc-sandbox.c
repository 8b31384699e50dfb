/* The runc runtime: sandboxes and their network (runc-int.h). A sandbox with share_pid has a
 * pause holder, a container of its own whose namespaces the pod's containers join by
 * /proc/<pid>/ns/<type>; any other has no process: its namespaces are pinned under its dir
 * (nspin.h) and the containers join them by those paths, which saves the holder's conmon and
 * two runc calls per pod (CRI-O's drop_infra_ctr). */
#include "agent/runtime/runc-int.h"
#include "agent/runtime/nspin.h"

/* ---- sandboxes --------------------------------------------------------------------------- */

static bool sb_bool(json_object *sb, const char *key) { return json_object_get_boolean(json_object_object_get(sb, key)); }

static char *sb_dir(struct runc_rt *c, const char *id) { return kite_asprintf("%s/%s", c->sandboxes, id); }

bool kite_rc_sandbox_pinned(json_object *sb) { return sb_bool(sb, "pinned"); }

bool kite_rc_sandbox_ready(struct runc_rt *c, const char *id, json_object *sb) {
    if (kite_rc_sandbox_pinned(sb)) {
        _cleanup_free_ char *dir = sb_dir(c, id);
        return !sb_bool(sb, "stopped") && kite_nspin_held(dir, (int)kite_obj_int(sb, "pinned_ns"));
    }
    int code;
    return kite_rc_read_exit(c, id, &code, NULL) < 0 && kite_rc_holder_alive(kite_rc_container_pid(c, id));
}

int kite_rc_sandbox_join(struct runc_rt *c, const char *id, json_object *sb, char **ret_net, char **ret_ipc, char **ret_uts,
                         pid_t *ret_pause) {
    *ret_pause = 0;
    if (kite_rc_sandbox_pinned(sb)) {
        _cleanup_free_ char *dir = sb_dir(c, id);
        int types = (int)kite_obj_int(sb, "pinned_ns");
        *ret_net = types & KITE_NSPIN_NET ? kite_nspin_path(dir, KITE_NSPIN_NET) : NULL;
        *ret_ipc = types & KITE_NSPIN_IPC ? kite_nspin_path(dir, KITE_NSPIN_IPC) : NULL;
        *ret_uts = types & KITE_NSPIN_UTS ? kite_nspin_path(dir, KITE_NSPIN_UTS) : NULL;
        return 0;
    }
    pid_t pause = kite_rc_container_pid(c, id);
    if (pause <= 0) return -ENOTCONN;
    *ret_net = kite_asprintf("/proc/%d/ns/net", (int)pause);
    *ret_ipc = kite_asprintf("/proc/%d/ns/ipc", (int)pause);
    *ret_uts = kite_asprintf("/proc/%d/ns/uts", (int)pause);
    *ret_pause = pause;
    return 0;
}

/* The pause holder of a share_pid sandbox: a container running the static busybox's sleep,
 * whose namespaces (its pid one too) the containers join. */
static int run_pause(struct runc_rt *c, const char *id, const struct kite_sandbox_config *cfg, const char *cg,
                     const char *pause_log, int64_t deadline, char **ret_error) {
    _cleanup_free_ char *rootfs = kite_rc_cdir(c, id, "rootfs");
    int r = kite_mkdir_p(rootfs, 0755);
    if (r < 0) {
        *ret_error = kite_asprintf("creating the sandbox dirs: %s", strerror(-r));
        return r;
    }
    json_object *args = json_object_new_array(), *env = json_object_new_array(), *meta = json_object_new_object();
    json_object_array_add(args, json_object_new_string("/sleep"));
    json_object_array_add(args, json_object_new_string("2147483647"));
    json_object_array_add(env, json_object_new_string("PATH=/"));
    struct oci_in in = {.args = args, .env = env, .cwd = "/", .cgroup = cg, .readonly_root = true,
                        .host_network = cfg->host_network, .host_ipc = cfg->host_ipc,
                        .hostname = cfg->host_network ? NULL : cfg->hostname && *cfg->hostname ? cfg->hostname : cfg->name,
                        .pause_bin = c->pause_bin};
    json_object *config = kite_rc_oci_config(&in);
    if (cfg->n_sysctls) {
        /* the pod's sysctls, in the namespaces its containers join */
        json_object *sys = json_object_new_object();
        for (size_t i = 0; i < cfg->n_sysctls; i++) {
            const char *eq = strchr(cfg->sysctls[i], '=');
            if (!eq) continue;
            _cleanup_free_ char *k = kite_strndup(cfg->sysctls[i], (size_t)(eq - cfg->sysctls[i]));
            json_object_object_add(sys, k, json_object_new_string(eq + 1));
        }
        json_object_object_add(json_object_object_get(config, "linux"), "sysctl", sys);
    }
    json_object_object_add(meta, "id", json_object_new_string(id));
    json_object_object_add(meta, "sandbox_id", json_object_new_string(id));
    json_object_object_add(meta, "pause", json_object_new_boolean(1));
    json_object_object_add(meta, "cgroup", json_object_new_string(cg));
    r = kite_rc_create_bundle(c, id, config, meta, pause_log, NULL, deadline, ret_error);
    if (r == 0) r = kite_rc_runc_simple(c, deadline, ret_error, (const char *[]){"start", id, NULL});
    if (r == 0) {
        json_object_object_add(meta, "started", json_object_new_int64(kite_rc_now_wall(c)));
        kite_rc_write_meta(c, id, meta);
        /* its end is an event too (the sandbox is gone) */
        pthread_mutex_lock(&c->mu);
        kite_rc_watch_container(c, id);
        pthread_mutex_unlock(&c->mu);
    }
    json_object_put(config);
    json_object_put(meta);
    return r;
}

int kite_rc_run_sandbox(struct kite_runtime *rt, const struct kite_sandbox_config *cfg, int64_t timeout_ns,
                        char **ret_id, char **ret_error) {
    struct runc_rt *c = kite_rc_of(rt);
    int64_t deadline = kite_rc_deadline_of(timeout_ns);
    if (!cfg || !cfg->uid || !*cfg->uid || !cfg->name || !cfg->ns || strchr(cfg->uid, '/') || strchr(cfg->name, '/') ||
        strchr(cfg->ns, '/'))
        return -EINVAL;
    /* a pid namespace to share needs a process to hold it; hostPID shares the host's */
    bool pinned = !cfg->share_pid || cfg->host_pid;
    if (!pinned && access(c->pause_bin, X_OK) < 0) {
        if (ret_error) *ret_error = kite_asprintf("pause binary %s: %s (install busybox-static)", c->pause_bin, strerror(errno));
        return -ENOENT;
    }
    _cleanup_free_ char *id = kite_rc_new_id(), *sdir = sb_dir(c, id);
    _cleanup_free_ char *parent = cfg->cgroup_parent ? kite_strdup(cfg->cgroup_parent)
                                                     : kite_asprintf("%s/pod%s", c->cgroup_root, cfg->uid);
    _cleanup_free_ char *cg = kite_asprintf("%s/%s", parent, id);
    _cleanup_free_ char *log_dir = cfg->log_dir ? kite_strdup(cfg->log_dir)
                                                : kite_asprintf("%s/%s_%s_%s", c->logs, cfg->ns, cfg->name, cfg->uid);
    _cleanup_free_ char *pause_log = kite_asprintf("%s/pause.log", sdir), *err = NULL;
    int r;
    if ((r = kite_mkdir_p(sdir, 0700)) < 0 || (r = kite_mkdir_p(log_dir, 0755)) < 0) {
        if (ret_error) *ret_error = kite_asprintf("creating the sandbox dirs: %s", strerror(-r));
        return r;
    }
    /* the address is taken (durably) before anything runs, so a full CIDR costs no container
     * and a crash from here on leaves an owner the next start can match to its sandbox */
    char ip[KITE_IPAM_ADDR_LEN] = "";
    _cleanup_free_ char *host_if = NULL;
    uint32_t addr = 0;
    if (!cfg->host_network) {
        pthread_mutex_lock(&c->mu);
        r = kite_ipam_allocate(c->ipam, id, &addr, &err);
        pthread_mutex_unlock(&c->mu);
        if (r < 0) {
            kite_rm_rf(sdir);
            if (ret_error) *ret_error = err ? TAKE_PTR(err) : kite_asprintf("allocating an address: %s", strerror(-r));
            return r;
        }
        kite_ipv4_format(addr, ip);
        host_if = kite_asprintf("kv%.12s", id);
    }
    int types = (cfg->host_network ? 0 : KITE_NSPIN_NET | KITE_NSPIN_UTS) | (cfg->host_ipc ? 0 : KITE_NSPIN_IPC);
    json_object *sb = json_object_new_object();
    json_object_object_add(sb, "id", json_object_new_string(id));
    json_object_object_add(sb, "uid", json_object_new_string(cfg->uid));
    if (host_if) {
        json_object_object_add(sb, "ip", json_object_new_string(ip));
        json_object_object_add(sb, "host_if", json_object_new_string(host_if));
    }
    json_object_object_add(sb, "name", json_object_new_string(cfg->name));
    json_object_object_add(sb, "ns", json_object_new_string(cfg->ns));
    json_object_object_add(sb, "host_network", json_object_new_boolean(cfg->host_network));
    json_object_object_add(sb, "host_pid", json_object_new_boolean(cfg->host_pid));
    json_object_object_add(sb, "host_ipc", json_object_new_boolean(cfg->host_ipc));
    json_object_object_add(sb, "share_pid", json_object_new_boolean(!pinned));
    if (pinned) {
        json_object_object_add(sb, "pinned", json_object_new_boolean(1));
        json_object_object_add(sb, "pinned_ns", json_object_new_int(types));
    }
    json_object_object_add(sb, "cgroup_parent", json_object_new_string(parent));
    json_object_object_add(sb, "log_dir", json_object_new_string(log_dir));
    json_object_object_add(sb, "created", json_object_new_int64(kite_rc_now_wall(c)));
    _cleanup_free_ char *sbp = kite_asprintf("%s/sandbox.json", sdir), *netns = NULL;
    r = kite_rc_write_json(sbp, sb);
    json_object_put(sb);
    if (r == 0 && pinned) {
        const char *hostname = cfg->host_network ? NULL : cfg->hostname && *cfg->hostname ? cfg->hostname : cfg->name;
        r = kite_nspin_create(sdir, types, hostname, cfg->sysctls, cfg->n_sysctls, &err);
        if (r == 0 && host_if) netns = kite_nspin_path(sdir, KITE_NSPIN_NET);
    } else if (r == 0) {
        r = run_pause(c, id, cfg, cg, pause_log, deadline, &err);
        if (r == 0 && host_if) netns = kite_asprintf("/proc/%d/ns/net", (int)kite_rc_container_pid(c, id));
    }
    /* plugged in before run_sandbox returns: the pod's containers start with their address */
    if (r == 0 && host_if) {
        pthread_mutex_lock(&c->mu);
        r = kite_net_bridge_ensure(c->bridge, kite_cidr_gateway(&c->cidr), c->cidr.prefix, &err);
        pthread_mutex_unlock(&c->mu);
    }
    if (r == 0 && host_if) r = kite_net_attach(c->bridge, host_if, netns, addr, c->cidr.prefix, kite_cidr_gateway(&c->cidr), &err);
    if (r < 0) {
        if (pinned) {
            kite_nspin_remove(sdir);
        } else {
            struct kite_agent_rt_run rr;
            if (kite_rc_runc(c, kite_rc_deadline_of(0), &rr, (const char *[]){"delete", "--force", id, NULL}) == 0)
                kite_agent_rt_run_release(&rr);
            pthread_mutex_lock(&c->mu);
            kite_rc_unwatch(c, id);
            pthread_mutex_unlock(&c->mu);
            kite_rc_destroy_bundle(c, id);
            kite_rc_cgroup_remove(cg);
        }
        kite_rm_rf(sdir);
        if (host_if) {
            kite_net_detach(host_if);
            pthread_mutex_lock(&c->mu);
            kite_ipam_release(c->ipam, id);
            pthread_mutex_unlock(&c->mu);
        }
        if (ret_error) *ret_error = err ? TAKE_PTR(err) : kite_strdup(strerror(-r));
        return r;
    }
    *ret_id = TAKE_PTR(id);
    return 0;
}

/* The sandbox's containers (not its holder): a new array of ids. */
static char **sandbox_containers(struct runc_rt *c, const char *id, size_t *ret_n) {
    size_t n = 0, k = 0;
    char **ids = kite_rc_list_ids(c, &n);
    for (size_t i = 0; i < n; i++) {
        json_object *meta = kite_rc_read_meta(c, ids[i]);
        if (meta && kite_streq(kite_obj_str(meta, "sandbox_id"), id) && strcmp(ids[i], id) != 0) ids[k++] = ids[i];
        else free(ids[i]);
        json_object_put(meta);
    }
    *ret_n = k;
    return ids;
}

/* A pinned sandbox's namespaces go (and with the network one its veth): stopped, it is not
 * ready again. Idempotent. */
static int unpin(struct runc_rt *c, const char *id, json_object *sb) {
    _cleanup_free_ char *sdir = sb_dir(c, id), *sbp = kite_asprintf("%s/sandbox.json", sdir);
    if (!sb_bool(sb, "stopped")) {
        json_object_object_add(sb, "stopped", json_object_new_boolean(1));
        int r = kite_rc_write_json(sbp, sb);
        if (r < 0) return r;
    }
    int r = kite_nspin_remove(sdir);
    if (r == 0 && kite_obj_str(sb, "host_if")) kite_net_detach(kite_obj_str(sb, "host_if"));
    return r;
}

int kite_rc_stop_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    struct runc_rt *c = kite_rc_of(rt);
    int64_t deadline = kite_rc_deadline_of(timeout_ns);
    json_object *sb = kite_rc_read_sandbox(c, id);
    if (!sb) return -ENOENT;
    size_t n = 0;
    char **ids = sandbox_containers(c, id, &n);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) r = kite_rc_stop_by_id(c, ids[i], 0, deadline);
    kite_strv_free(ids, n);
    if (r == 0) r = kite_rc_sandbox_pinned(sb) ? unpin(c, id, sb) : kite_rc_stop_by_id(c, id, 0, deadline);
    json_object_put(sb);
    return r;
}

int kite_rc_remove_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    struct runc_rt *c = kite_rc_of(rt);
    int64_t deadline = kite_rc_deadline_of(timeout_ns);
    json_object *sb = kite_rc_read_sandbox(c, id);
    if (!sb) return -ENOENT;
    size_t n = 0;
    char **ids = sandbox_containers(c, id, &n);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) r = kite_rc_remove_by_id(c, ids[i], deadline);
    kite_strv_free(ids, n);
    if (r == 0) r = kite_rc_sandbox_pinned(sb) ? unpin(c, id, sb) : kite_rc_remove_by_id(c, id, deadline);
    if (r == -ENOENT) r = 0;
    if (r == 0 && kite_obj_str(sb, "host_if")) {
        /* the veth went with the namespace unless something else holds it; the address is
         * free once the sandbox is gone */
        kite_net_detach(kite_obj_str(sb, "host_if"));
        pthread_mutex_lock(&c->mu);
        r = kite_ipam_release(c->ipam, id);
        pthread_mutex_unlock(&c->mu);
    }
    if (r == 0) {
        _cleanup_free_ char *sdir = sb_dir(c, id);
        kite_rm_rf(sdir);
        /* the pod cgroup goes with its last sandbox */
        kite_rc_cgroup_remove(kite_obj_str(sb, "cgroup_parent"));
    }
    json_object_put(sb);
    return r;
}

static void fill_sandbox(struct runc_rt *c, const char *id, json_object *sb, struct kite_sandbox_status *s) {
    bool ready = kite_rc_sandbox_ready(c, id, sb);
    *s = (struct kite_sandbox_status){
        .id = kite_strdup(id),
        .uid = kite_strdup(kite_obj_str(sb, "uid") ? kite_obj_str(sb, "uid") : ""),
        .name = kite_strdup(kite_obj_str(sb, "name") ? kite_obj_str(sb, "name") : ""),
        .ns = kite_strdup(kite_obj_str(sb, "ns") ? kite_obj_str(sb, "ns") : ""),
        .log_dir = kite_strdup(kite_obj_str(sb, "log_dir") ? kite_obj_str(sb, "log_dir") : ""),
        .state = ready ? KITE_SANDBOX_READY : KITE_SANDBOX_NOTREADY,
        .host_network = json_object_get_boolean(json_object_object_get(sb, "host_network")),
        .created_ns = kite_obj_int(sb, "created"),
        .ip = kite_strdup(kite_obj_str(sb, "ip") ? kite_obj_str(sb, "ip") : ""),
    };
}

int kite_rc_sandbox_status(struct kite_runtime *rt, const char *id, int64_t timeout_ns, struct kite_sandbox_status *ret) {
    struct runc_rt *c = kite_rc_of(rt);
    json_object *sb = kite_rc_read_sandbox(c, id);
    if (!sb) return -ENOENT;
    fill_sandbox(c, id, sb, ret);
    json_object_put(sb);
    return 0;
}

int kite_rc_list_sandboxes(struct kite_runtime *rt, int64_t timeout_ns, struct kite_sandbox_status **ret, size_t *ret_n) {
    struct runc_rt *c = kite_rc_of(rt);
    DIR *d = opendir(c->sandboxes);
    struct kite_sandbox_status *v = NULL;
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        json_object *sb = kite_rc_read_sandbox(c, e->d_name);
        if (!sb) continue;
        v = kite_realloc(v, (n + 1) * sizeof(*v));
        fill_sandbox(c, e->d_name, sb, &v[n++]);
        json_object_put(sb);
    }
    if (d) closedir(d);
    *ret = v;
    *ret_n = n;
    return 0;
}
