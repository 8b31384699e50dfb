/* The runc runtime: the OCI config of a bundle (runc-int.h). */
#include "agent/runtime/runc-int.h"

/* ---- OCI config -------------------------------------------------------------------------- */

static json_object *strs(const char *const *v, size_t n) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

static void add_mount(json_object *mounts, const char *dst, const char *type, const char *src, const char *const *opts) {
    json_object *m = json_object_new_object();
    json_object_object_add(m, "destination", json_object_new_string(dst));
    json_object_object_add(m, "type", json_object_new_string(type));
    json_object_object_add(m, "source", json_object_new_string(src));
    size_t n = 0;
    while (opts[n]) n++;
    json_object_object_add(m, "options", strs(opts, n));
    json_object_array_add(mounts, m);
}

static void add_ns(json_object *nss, const char *type, const char *path) {
    json_object *n = json_object_new_object();
    json_object_object_add(n, "type", json_object_new_string(type));
    if (path) json_object_object_add(n, "path", json_object_new_string(path));
    json_object_array_add(nss, n);
}


/* containerd's default capability set */
static const char *const default_caps[] = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",     "CAP_MKNOD",
    "CAP_NET_RAW", "CAP_SETGID",       "CAP_SETUID",           "CAP_SETFCAP",    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",      "CAP_AUDIT_WRITE"};
/* every capability up to CAP_LAST_CAP of 5.x/6.x, by number (privileged: those in the agent's bounding set) */
static const char *const all_caps[] = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"};

/* "net_admin" / "CAP_NET_ADMIN" -> "CAP_NET_ADMIN" (into buf); "ALL" stays "ALL" */
static const char *cap_name(const char *in, char *buf, size_t len) {
    bool all = strcasecmp(in, "ALL") == 0;
    snprintf(buf, len, "%s%s", all || strncasecmp(in, "CAP_", 4) == 0 ? "" : "CAP_", in);
    for (char *q = buf; *q; q++) *q = (char)toupper((unsigned char)*q);
    return buf;
}

static bool cap_listed(const char *cap, const char *const *v, size_t n) {
    char buf[64];
    for (size_t i = 0; i < n; i++) {
        const char *c = cap_name(v[i], buf, sizeof(buf));
        if (kite_streq(c, "ALL") || kite_streq(c, cap)) return true;
    }
    return false;
}

/* The capability set as containerd's CRI builds it: privileged gets all; else the default set
 * minus drop (ALL drops every one) plus add (ALL adds every one). */
static json_object *cap_set(const struct kite_security_config *sec) {
    json_object *a = json_object_new_array();
    if (sec->privileged || cap_listed("ALL", sec->cap_add, sec->n_cap_add)) {
        for (size_t i = 0; i < KITE_ARRAY_SIZE(all_caps); i++) /* those the agent may give */
            if (prctl(PR_CAPBSET_READ, (unsigned long)i, 0, 0, 0) == 1)
                json_object_array_add(a, json_object_new_string(all_caps[i]));
        return a;
    }
    for (size_t i = 0; i < KITE_ARRAY_SIZE(default_caps); i++)
        if (!cap_listed(default_caps[i], sec->cap_drop, sec->n_cap_drop))
            json_object_array_add(a, json_object_new_string(default_caps[i]));
    char buf[64];
    for (size_t i = 0; i < sec->n_cap_add; i++) {
        const char *c = cap_name(sec->cap_add[i], buf, sizeof(buf));
        bool have = false;
        for (size_t j = 0; j < json_object_array_length(a) && !have; j++)
            have = kite_streq(json_object_get_string(json_object_array_get_idx(a, j)), c);
        if (!have) json_object_array_add(a, json_object_new_string(c));
    }
    return a;
}

void kite_oci_apply_security(struct json_object *spec, const struct kite_security_config *sec) {
    static const char *masked[] = {"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                                   "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
                                   "/proc/scsi"};
    static const char *ro[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"};
    json_object *proc = json_object_object_get(spec, "process"), *linux_ = json_object_object_get(spec, "linux");
    json_object *user = json_object_new_object();
    json_object_object_add(user, "uid", json_object_new_int64(sec->has_uid ? sec->uid : 0));
    json_object_object_add(user, "gid", json_object_new_int64(sec->has_gid ? sec->gid : 0));
    if (sec->n_groups) {
        json_object *g = json_object_new_array();
        for (size_t i = 0; i < sec->n_groups; i++) json_object_array_add(g, json_object_new_int64(sec->groups[i]));
        json_object_object_add(user, "additionalGids", g);
    }
    json_object_object_add(proc, "user", user);
    json_object *capo = json_object_new_object(), *set = cap_set(sec);
    json_object_object_add(capo, "bounding", set);
    json_object_object_add(capo, "effective", json_object_get(set));
    json_object_object_add(capo, "permitted", json_object_get(set));
    json_object_object_add(proc, "capabilities", capo);
    json_object_object_add(proc, "noNewPrivileges", json_object_new_boolean(sec->no_new_privs && !sec->privileged));
    json_object *root = json_object_object_get(spec, "root");
    if (root && sec->readonly_root) json_object_object_add(root, "readonly", json_object_new_boolean(1));
    if (!sec->privileged && !sec->proc_unmasked) {
        json_object_object_add(linux_, "maskedPaths", strs(masked, KITE_ARRAY_SIZE(masked)));
        json_object_object_add(linux_, "readonlyPaths", strs(ro, KITE_ARRAY_SIZE(ro)));
    }
    if (sec->privileged) {
        /* privileged: /sys writable as the CRI mounts it */
        json_object *mounts = json_object_object_get(spec, "mounts");
        for (size_t i = 0; mounts && i < json_object_array_length(mounts); i++) {
            json_object *m = json_object_array_get_idx(mounts, i);
            if (kite_streq(json_object_get_string(json_object_object_get(m, "destination")), "/sys"))
                json_object_object_add(m, "options", strs((const char *[]){"nosuid", "noexec", "nodev", "rw"}, 4));
        }
    }
}

json_object *kite_rc_oci_config(const struct oci_in *in) {
    json_object *o = json_object_new_object(), *proc = json_object_new_object();
    json_object_object_add(o, "ociVersion", json_object_new_string("1.0.2"));
    json_object_object_add(proc, "terminal", json_object_new_boolean(in->cfg && in->cfg->tty));
    json_object_object_add(proc, "args", in->args);
    json_object_object_add(proc, "env", in->env);
    json_object_object_add(proc, "cwd", json_object_new_string(in->cwd));
    json_object_object_add(o, "process", proc);
    json_object *root = json_object_new_object();
    json_object_object_add(root, "path", json_object_new_string("rootfs"));
    json_object_object_add(root, "readonly", json_object_new_boolean(in->readonly_root));
    json_object_object_add(o, "root", root);
    if (in->hostname) json_object_object_add(o, "hostname", json_object_new_string(in->hostname));

    json_object *mounts = json_object_new_array();
    add_mount(mounts, "/proc", "proc", "proc", (const char *[]){"nosuid", "noexec", "nodev", NULL});
    add_mount(mounts, "/dev", "tmpfs", "tmpfs", (const char *[]){"nosuid", "strictatime", "mode=755", "size=65536k", NULL});
    add_mount(mounts, "/dev/pts", "devpts", "devpts",
              (const char *[]){"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5", NULL});
    add_mount(mounts, "/dev/shm", "tmpfs", "shm", (const char *[]){"nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL});
    add_mount(mounts, "/dev/mqueue", "mqueue", "mqueue", (const char *[]){"nosuid", "noexec", "nodev", NULL});
    add_mount(mounts, "/sys", "sysfs", "sysfs", (const char *[]){"nosuid", "noexec", "nodev", "ro", NULL});
    if (in->pause_bin) add_mount(mounts, "/sleep", "bind", in->pause_bin, (const char *[]){"rbind", "ro", NULL});
    const struct kite_container_config *cfg = in->cfg;
    for (size_t i = 0; cfg && i < cfg->n_mounts; i++)
        add_mount(mounts, cfg->mounts[i].container_path, "bind", cfg->mounts[i].host_path,
                  cfg->mounts[i].read_only ? (const char *[]){"rbind", "rprivate", "ro", NULL}
                                           : (const char *[]){"rbind", "rprivate", "rw", NULL});
    json_object_object_add(o, "mounts", mounts);

    json_object *linux_ = json_object_new_object(), *nss = json_object_new_array(), *res = json_object_new_object();
    _cleanup_free_ char *pidns = in->pid_ns_pid ? kite_asprintf("/proc/%d/ns/pid", in->pid_ns_pid) : NULL;
    if (!in->host_pid || pidns) add_ns(nss, "pid", pidns);
    add_ns(nss, "mount", NULL);
    if (!in->host_ipc) add_ns(nss, "ipc", in->join_ipc);
    if (!in->host_network) {
        add_ns(nss, "network", in->join_net);
        add_ns(nss, "uts", in->join_uts);
    }
    json_object_object_add(linux_, "namespaces", nss);
    json_object_object_add(linux_, "cgroupsPath", json_object_new_string(in->cgroup));
    if (cfg && cfg->memory_limit_bytes > 0) {
        json_object *mem = json_object_new_object();
        json_object_object_add(mem, "limit", json_object_new_int64(cfg->memory_limit_bytes));
        /* no swap beyond the limit, where the kernel can account it (v1 needs swapaccount) */
        if (kite_rc_cgroup_v2_memory() || access("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", F_OK) == 0)
            json_object_object_add(mem, "swap", json_object_new_int64(cfg->memory_limit_bytes));
        json_object_object_add(res, "memory", mem);
    }
    if (cfg && (cfg->cpu_quota_us > 0 || cfg->cpu_shares > 0)) {
        json_object *cpu = json_object_new_object();
        if (cfg->cpu_quota_us > 0) {
            json_object_object_add(cpu, "quota", json_object_new_int64(cfg->cpu_quota_us));
            json_object_object_add(cpu, "period", json_object_new_int64(cfg->cpu_period_us > 0 ? cfg->cpu_period_us : 100000));
        }
        if (cfg->cpu_shares > 0) json_object_object_add(cpu, "shares", json_object_new_int64(cfg->cpu_shares));
        json_object_object_add(res, "cpu", cpu);
    }
    if (cfg && cfg->pids_limit > 0) {
        json_object *pids = json_object_new_object();
        json_object_object_add(pids, "limit", json_object_new_int64(cfg->pids_limit));
        json_object_object_add(res, "pids", pids);
    }
    json_object_object_add(linux_, "resources", res);
    json_object_object_add(o, "linux", linux_);
    static const struct kite_security_config none = {0};
    kite_oci_apply_security(o, in->sec ? in->sec : cfg ? &cfg->sec : &none);
    return o;
}
