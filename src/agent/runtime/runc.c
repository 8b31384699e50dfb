/* The runc runtime (runtime.h). Each container, a sandbox's pause holder included, is an OCI
 * bundle in <root>/containers/<id>/ run by runc under its own conmon: conmon is the
 * container's parent, so the container outlives an agent restart, its exit code lands in
 * <bundle>/exit and <root>/exits/<id> even while the agent is down, and its stdout/stderr go to
 * a CRI-format log. The agent sees an exit through a pidfd on the container's process (the
 * moment) and inotify on the exits dir (the code), both in one epoll set the agent polls.
 *
 * The pause holder is the host's static busybox bind-mounted read-only as /sleep into an empty
 * read-only rootfs: it needs no image and no libraries (kite itself links shared libraries, so
 * it cannot be re-executed inside an empty root). It holds the pod's network, IPC and UTS
 * namespaces; the pod's containers join them by /proc/<pause pid>/ns/<type>. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

#include "agent/images/images.h"
#include "agent/runtime/cgstats.h"
#include "agent/runtime/ipam.h"
#include "agent/runtime/net.h"
#include "agent/runtime/proc.h"
#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "base/clock.h"

/* How long after its process ended conmon may take to write the exit file. */
#define RC_EXIT_FILE_WAIT_NS (2 * KITE_NS_PER_SEC)
#define RC_META_MAX (64 * 1024)

struct watch {
    char *id;
    int pidfd;
    int64_t finished_ns; /* wall time the pidfd saw the exit; 0 = not yet */
};

struct runc_rt {
    struct kite_runtime rt;
    char *root, *runc, *conmon, *pause_bin, *cgroup_root;
    char *images, *state, *exits, *containers, *sandboxes, *logs, *sockets;
    char *version;
    int epfd, inofd;
    /* the pod network: sandboxes' addresses from cidr, their veths on bridge */
    char *bridge;
    struct kite_cidr cidr;
    struct kite_ipam *ipam;
    /* Calls run from several threads at once (the agent's pod workers): mu guards the
     * watches, the address allocator, the bridge and every meta.json write; it is never held
     * while a runc, conmon or copy child runs, so one pod's slow call does not hold another's. */
    pthread_mutex_t mu;
    struct watch *watches;
    size_t n_watches;
    struct kite_clock *clock;
};

static struct runc_rt *rc_of(struct kite_runtime *rt) { return (struct runc_rt *)rt; }

static int64_t deadline_of(int64_t timeout_ns) {
    return kite_sat_add(rt_mono_ns(), timeout_ns > 0 ? timeout_ns : KITE_RT_DEFAULT_TIMEOUT_NS);
}

static int64_t now_wall(struct runc_rt *c) { return kite_now_wall(c->clock); }


static char *new_id(void) {
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
static int runc(struct runc_rt *c, int64_t deadline, struct rt_run *r, const char *const *args) {
    const char *argv[32];
    size_t n = 0;
    argv[n++] = c->runc;
    argv[n++] = "--root";
    argv[n++] = c->state;
    for (size_t i = 0; args[i] && n < KITE_ARRAY_SIZE(argv) - 1; i++) argv[n++] = args[i];
    argv[n] = NULL;
    *r = (struct rt_run){.argv = argv, .pass_fd = -1, .deadline = deadline};
    return rt_run(r);
}

/* runc with a simple result: 0, -EIO (runc failed; *ret_error its output), -ETIMEDOUT. */
static int runc_simple(struct runc_rt *c, int64_t deadline, char **ret_error, const char *const *args) {
    struct rt_run r;
    int e = runc(c, deadline, &r, args);
    if (e == 0 && r.status != 0) {
        if (ret_error) *ret_error = kite_asprintf("runc %s: %s", args[0], r.out);
        e = -EIO;
    }
    rt_run_release(&r);
    return e;
}

static json_object *read_json(const char *path) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (kite_read_file(path, RC_META_MAX, &text, &len) < 0) return NULL;
    return json_tokener_parse(text);
}

static int write_json(const char *path, json_object *o) {
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    return kite_write_file_atomic(path, s, strlen(s), 0644, false);
}

static const char *jstr(json_object *o, const char *k) {
    json_object *v = NULL;
    return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

static int64_t jint(json_object *o, const char *k) {
    json_object *v = NULL;
    return o && json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

static char *cdir(struct runc_rt *c, const char *id, const char *file) {
    return file ? kite_asprintf("%s/%s/%s", c->containers, id, file) : kite_asprintf("%s/%s", c->containers, id);
}

static json_object *read_meta(struct runc_rt *c, const char *id) {
    if (!valid_id(id)) return NULL;
    _cleanup_free_ char *p = cdir(c, id, "meta.json");
    return read_json(p);
}

/* mu held: the temporary file's name is fixed */
static void write_meta_locked(struct runc_rt *c, const char *id, json_object *meta) {
    _cleanup_free_ char *p = cdir(c, id, "meta.json");
    write_json(p, meta);
}

static void write_meta(struct runc_rt *c, const char *id, json_object *meta) {
    pthread_mutex_lock(&c->mu);
    write_meta_locked(c, id, meta);
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

static pid_t container_pid(struct runc_rt *c, const char *id) {
    _cleanup_free_ char *p = cdir(c, id, "pidfile");
    return read_pid(p);
}

/* Alive and not a zombie. */
static bool pid_alive(pid_t pid) {
    if (pid <= 0) return false;
    _cleanup_free_ char *p = kite_asprintf("/proc/%d/stat", pid), *t = NULL;
    size_t len = 0;
    if (kite_read_file(p, 4096, &t, &len) < 0) return false;
    const char *rp = strrchr(t, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* The exit code conmon wrote; -ENOENT while there is none. */
static int read_exit(struct runc_rt *c, const char *id, int *ret_code, int64_t *ret_mtime) {
    _cleanup_free_ char *p = cdir(c, id, "exit"), *t = NULL;
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

/* ---- cgroups ----------------------------------------------------------------------------- */

/* The OOM-kill count of a cgroup: v2 memory.events or v1 memory.oom_control, both "oom_kill N". */
static int64_t cgroup_oom_kills(const char *cg) {
    const char *files[] = {"/sys/fs/cgroup%s/memory.events", "/sys/fs/cgroup/memory%s/memory.oom_control"};
    for (size_t i = 0; i < 2; i++) {
        _cleanup_free_ char *p = kite_asprintf(files[i], cg), *t = NULL;
        size_t len = 0;
        if (kite_read_file(p, 4096, &t, &len) < 0) continue;
        const char *k = strstr(t, "oom_kill ");
        if (k) return strtoll(k + 9, NULL, 10);
    }
    return 0;
}

/* Removes a cgroup (empty by now) in the v2 tree and every v1 hierarchy. */
static void cgroup_remove(const char *cg) {
    _cleanup_free_ char *v2 = kite_asprintf("/sys/fs/cgroup%s", cg);
    rmdir(v2);
    DIR *d = opendir("/sys/fs/cgroup");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        _cleanup_free_ char *p = kite_asprintf("/sys/fs/cgroup/%s%s", e->d_name, cg);
        rmdir(p);
    }
    closedir(d);
}

static bool cgroup_v2_memory(void) {
    _cleanup_free_ char *t = NULL;
    size_t len = 0;
    return kite_read_file("/sys/fs/cgroup/cgroup.controllers", 4096, &t, &len) == 0 && strstr(t, "memory");
}

/* ---- exit watching (mu held) ------------------------------------------------------------- */

static struct watch *find_watch(struct runc_rt *c, const char *id) {
    for (size_t i = 0; i < c->n_watches; i++)
        if (strcmp(c->watches[i].id, id) == 0) return &c->watches[i];
    return NULL;
}

static void watch_container(struct runc_rt *c, const char *id) {
    if (find_watch(c, id)) return;
    pid_t pid = container_pid(c, id);
    int fd = pid > 0 ? rt_pidfd_open(pid) : -1;
    c->watches = kite_realloc(c->watches, (c->n_watches + 1) * sizeof(*c->watches));
    struct watch *w = &c->watches[c->n_watches++];
    *w = (struct watch){.id = kite_strdup(id), .pidfd = fd};
    if (fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
}

static void unwatch(struct runc_rt *c, const char *id) {
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
static void record_exit(struct runc_rt *c, const char *id, json_object *meta, int64_t finished) {
    if (jint(meta, "finished")) return;
    pthread_mutex_lock(&c->mu);
    finished = KITE_MAX(finished, jint(meta, "started"));
    const char *cg = jstr(meta, "cgroup");
    _cleanup_free_ char *oomf = cdir(c, id, "oom");
    bool oom = (cg && cgroup_oom_kills(cg) > 0) || access(oomf, F_OK) == 0;
    json_object_object_add(meta, "oom", json_object_new_boolean(oom));
    json_object_object_add(meta, "finished", json_object_new_int64(finished));
    write_meta_locked(c, id, meta);
    pthread_mutex_unlock(&c->mu);
}

/* The wall time the pidfd saw the container end; 0 = not seen. */
static int64_t watch_finished(struct runc_rt *c, const char *id) {
    pthread_mutex_lock(&c->mu);
    struct watch *w = find_watch(c, id);
    int64_t t = w ? w->finished_ns : 0;
    pthread_mutex_unlock(&c->mu);
    return t;
}

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

struct oci_in {
    json_object *args, *env;
    const char *cwd, *hostname, *cgroup;
    bool readonly_root, host_network, host_pid, host_ipc;
    pid_t join_pid; /* 0 = new namespaces (a pause holder) */
    pid_t pid_ns_pid; /* 0 = a pid namespace of its own, else that process's */
    const struct kite_container_config *cfg;
    const struct kite_security_config *sec; /* NULL = cfg's */
    const char *pause_bin;
};

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

static json_object *oci_config(const struct oci_in *in) {
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
    _cleanup_free_ char *net = NULL, *ipc = NULL, *uts = NULL;
    if (in->join_pid) {
        net = kite_asprintf("/proc/%d/ns/net", in->join_pid);
        ipc = kite_asprintf("/proc/%d/ns/ipc", in->join_pid);
        uts = kite_asprintf("/proc/%d/ns/uts", in->join_pid);
    }
    if (!in->host_ipc) add_ns(nss, "ipc", ipc);
    if (!in->host_network) {
        add_ns(nss, "network", net);
        add_ns(nss, "uts", uts);
    }
    json_object_object_add(linux_, "namespaces", nss);
    json_object_object_add(linux_, "cgroupsPath", json_object_new_string(in->cgroup));
    if (cfg && cfg->memory_limit_bytes > 0) {
        json_object *mem = json_object_new_object();
        json_object_object_add(mem, "limit", json_object_new_int64(cfg->memory_limit_bytes));
        /* no swap beyond the limit, where the kernel can account it (v1 needs swapaccount) */
        if (cgroup_v2_memory() || access("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", F_OK) == 0)
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

/* Starts conmon on the bundle (conmon runs `runc create`) and waits for the container's pid on
 * conmon's sync pipe. */
static int conmon_create(struct runc_rt *c, const char *id, const char *log_path, const struct kite_container_config *cfg,
                         int64_t deadline, char **ret_error) {
    _cleanup_free_ char *bundle = cdir(c, id, NULL), *pidfile = cdir(c, id, "pidfile"),
                        *cpid = cdir(c, id, "conmon.pid"), *log = kite_asprintf("k8s-file:%s", log_path),
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
    struct rt_run r = {.argv = argv, .env = env, .pass_fd = p[1], .cwd = bundle, .discard_output = true, .deadline = deadline};
    int e = rt_run(&r);
    close(p[1]);
    rt_run_release(&r);
    if (e == 0 && r.status != 0) {
        *ret_error = kite_asprintf("conmon exited with %d", r.status);
        e = -EIO;
    }
    /* the daemonized conmon answers {"data": pid} or {"data": -1, "message": ...} */
    char buf[4096];
    size_t len = 0;
    while (e == 0 && len < sizeof buf - 1 && !memchr(buf, '\n', len)) {
        int w = rt_wait_fd(p[0], deadline);
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
        const char *msg = jstr(o, "message");
        *ret_error = kite_asprintf("OCI runtime create failed: %s", msg ? msg : buf);
        e = -ENOEXEC;
    }
    json_object_put(o);
    return e;
}

/* ---- containers -------------------------------------------------------------------------- */

static json_object *read_sandbox(struct runc_rt *c, const char *id) {
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
    _cleanup_free_ char *rootfs = cdir(c, id, "rootfs"), *upper = cdir(c, id, "upper"), *work = cdir(c, id, "work");
    if (mkdir(rootfs, 0755) < 0 || mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0) return -errno;
    _cleanup_free_ char *opts = kite_asprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
    if (mount("overlay", rootfs, "overlay", 0, opts) == 0) return 0;
    _cleanup_free_ char *src = kite_asprintf("%s/.", lower);
    const char *argv[] = {"/bin/cp", "-a", src, rootfs, NULL};
    struct rt_run r = {.argv = argv, .pass_fd = -1, .deadline = deadline};
    int e = rt_run(&r);
    if (e == 0 && r.status != 0) {
        *ret_error = kite_asprintf("copying the image root: %s", r.out);
        e = -EIO;
    }
    rt_run_release(&r);
    return e;
}

static void destroy_bundle(struct runc_rt *c, const char *id) {
    _cleanup_free_ char *rootfs = cdir(c, id, "rootfs"), *dir = cdir(c, id, NULL),
                        *exitf = kite_asprintf("%s/%s", c->exits, id);
    umount2(rootfs, MNT_DETACH);
    kite_rm_rf(dir);
    unlink(exitf);
}

/* Common to containers and pause holders: bundle + conmon + meta. */
static int create_bundle(struct runc_rt *c, const char *id, json_object *config, json_object *meta, const char *log_path,
                         const struct kite_container_config *cfg, int64_t deadline, char **ret_error) {
    _cleanup_free_ char *cfgp = cdir(c, id, "config.json");
    int r = write_json(cfgp, config);
    if (r < 0) return r;
    _cleanup_free_ char *logdir = kite_strdup(log_path);
    *strrchr(logdir, '/') = 0;
    if ((r = kite_mkdir_p(logdir, 0755)) < 0) return r;
    json_object_object_add(meta, "created", json_object_new_int64(now_wall(c)));
    write_meta(c, id, meta);
    return conmon_create(c, id, log_path, cfg, deadline, ret_error);
}

static int rc_create_container(struct kite_runtime *rt, const char *sandbox_id, const struct kite_container_config *cfg,
                               int64_t timeout_ns, char **ret_id, char **ret_error) {
    struct runc_rt *c = rc_of(rt);
    int64_t deadline = deadline_of(timeout_ns);
    _cleanup_free_ char *err = NULL;
    if (!cfg || !cfg->name || !*cfg->name || strchr(cfg->name, '/') || !cfg->image) return -EINVAL;
    json_object *sb = read_sandbox(c, sandbox_id);
    if (!sb) {
        if (ret_error) *ret_error = kite_asprintf("sandbox %s not found", sandbox_id ? sandbox_id : "");
        return -ENOENT;
    }
    pid_t pause = container_pid(c, sandbox_id);
    if (!pid_alive(pause)) {
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
    _cleanup_free_ char *id = new_id(), *dir = cdir(c, id, NULL);
    _cleanup_free_ char *cg = kite_asprintf("%s/%s", jstr(sb, "cgroup_parent"), id);
    _cleanup_free_ char *rel = cfg->log_path ? kite_strdup(cfg->log_path) : kite_asprintf("%s/%u.log", cfg->name, cfg->attempt);
    _cleanup_free_ char *log_path = kite_asprintf("%s/%s", jstr(sb, "log_dir"), rel);
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
                        .join_pid = pause,
                        .cfg = cfg};
    if (cfg->pid_ns_of) {
        in.pid_ns_pid = valid_id(cfg->pid_ns_of) ? container_pid(c, cfg->pid_ns_of) : 0;
        if (!pid_alive(in.pid_ns_pid)) {
            json_object_put(in.args);
            json_object_put(in.env);
            json_object_put(meta);
            json_object_put(sb);
            kite_image_info_release(&img);
            if (ret_error) *ret_error = kite_strdup("the target container is not running (its pid namespace is joined)");
            return -ENOTCONN;
        }
    }
    json_object *config = oci_config(&in);
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
        r = create_bundle(c, id, config, meta, log_path, cfg, deadline, &err);
    json_object_put(config);
    json_object_put(sb);
    kite_image_info_release(&img);
    if (r == -ENOEXEC) {
        /* as containerd's: the container exists, its start fails (StartError, exit 128); the
         * record stays until it is removed, its root goes now */
        struct rt_run rr;
        if (runc(c, deadline_of(0), &rr, (const char *[]){"delete", "--force", id, NULL}) == 0) rt_run_release(&rr);
        _cleanup_free_ char *rootfs = cdir(c, id, "rootfs"), *upper = cdir(c, id, "upper"), *work = cdir(c, id, "work");
        umount2(rootfs, MNT_DETACH);
        kite_rm_rf(rootfs);
        kite_rm_rf(upper);
        kite_rm_rf(work);
        cgroup_remove(cg);
        json_object_object_add(meta, "start_error", json_object_new_string(err ? err : "the process could not start"));
        write_meta(c, id, meta);
        json_object_put(meta);
        *ret_id = TAKE_PTR(id);
        return 0;
    }
    json_object_put(meta);
    if (r < 0) {
        struct rt_run rr;
        if (runc(c, deadline_of(0), &rr, (const char *[]){"delete", "--force", id, NULL}) == 0) rt_run_release(&rr);
        destroy_bundle(c, id);
        cgroup_remove(cg);
        if (ret_error) *ret_error = err ? TAKE_PTR(err) : kite_strdup(strerror(-r));
        return r;
    }
    *ret_id = TAKE_PTR(id);
    return 0;
}

static int rc_start_container(struct kite_runtime *rt, const char *id, int64_t timeout_ns, char **ret_error) {
    struct runc_rt *c = rc_of(rt);
    json_object *meta = read_meta(c, id);
    if (!meta) return -ENOENT;
    /* the process runs from within `runc start`: a fast one ends before it returns */
    const char *serr = jstr(meta, "start_error");
    if (serr) {
        /* its process could not be created: the start fails, the container has exited (128) */
        if (ret_error) *ret_error = kite_strdup(serr);
        if (!jint(meta, "finished")) {
            json_object_object_add(meta, "finished", json_object_new_int64(now_wall(c)));
            write_meta(c, id, meta);
        }
        json_object_put(meta);
        return -ENOEXEC;
    }
    int64_t started = now_wall(c);
    int r = runc_simple(c, deadline_of(timeout_ns), ret_error, (const char *[]){"start", id, NULL});
    if (r == 0) {
        json_object_object_add(meta, "started", json_object_new_int64(started));
        write_meta(c, id, meta);
        pthread_mutex_lock(&c->mu);
        watch_container(c, id);
        pthread_mutex_unlock(&c->mu);
    }
    json_object_put(meta);
    return r;
}

static int fill_status(struct runc_rt *c, const char *id, json_object *meta, struct kite_container_status *s) {
    *s = (struct kite_container_status){
        .id = kite_strdup(id),
        .sandbox_id = kite_strdup(jstr(meta, "sandbox_id") ? jstr(meta, "sandbox_id") : ""),
        .name = kite_strdup(jstr(meta, "name") ? jstr(meta, "name") : ""),
        .image = kite_strdup(jstr(meta, "image") ? jstr(meta, "image") : ""),
        .image_id = kite_strdup(jstr(meta, "image_id") ? jstr(meta, "image_id") : ""),
        .log_path = kite_strdup(jstr(meta, "log_path") ? jstr(meta, "log_path") : ""),
        .attempt = (uint32_t)jint(meta, "attempt"),
        .created_ns = jint(meta, "created"),
        .started_ns = jint(meta, "started"),
    };
    if (jstr(meta, "start_error")) {
        s->state = KITE_CONTAINER_EXITED;
        s->exit_code = 128;
        s->finished_ns = jint(meta, "finished") ? jint(meta, "finished") : s->created_ns;
        s->reason = kite_strdup("StartError");
        s->message = kite_strdup(jstr(meta, "start_error"));
        return 0;
    }
    int code = 0;
    int64_t mtime = 0;
    int r = read_exit(c, id, &code, &mtime);
    if (r == 0) {
        int64_t seen = watch_finished(c, id);
        record_exit(c, id, meta, seen ? seen : mtime);
        s->state = KITE_CONTAINER_EXITED;
        s->exit_code = code;
        s->signal = code > 128 && code < 128 + 65 ? code - 128 : 0;
        s->finished_ns = jint(meta, "finished");
        s->oom_killed = json_object_get_boolean(json_object_object_get(meta, "oom"));
        s->reason = kite_strdup(s->oom_killed ? "OOMKilled" : code == 0 ? "Completed" : "Error");
        return 0;
    }
    pid_t pid = container_pid(c, id);
    if (pid_alive(pid)) {
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
    struct runc_rt *c = rc_of(rt);
    json_object *meta = read_meta(c, id);
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
        if (read_exit(c, id, &code, NULL) == 0) return 0;
        if (rt_mono_ns() >= deadline) return -ETIMEDOUT;
        struct timespec ts = {0, KITE_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
}

static int stop_by_id(struct runc_rt *c, const char *id, int64_t grace_ns, int64_t deadline) {
    int code;
    if (read_exit(c, id, &code, NULL) == 0) return 0;
    pid_t pid = container_pid(c, id);
    if (!pid_alive(pid)) return 0;
    int fd = rt_pidfd_open(pid);
    if (fd < 0) return 0;
    int r = 0;
    if (grace_ns > 0) {
        runc_simple(c, deadline, NULL, (const char *[]){"kill", id, "TERM", NULL});
        r = rt_wait_fd(fd, KITE_MIN(deadline, kite_sat_add(rt_mono_ns(), grace_ns)));
    }
    if (r <= 0) {
        runc_simple(c, deadline, NULL, (const char *[]){"kill", id, "KILL", NULL});
        r = rt_wait_fd(fd, deadline);
    }
    close(fd);
    if (r <= 0) return r == 0 ? -ETIMEDOUT : r;
    return wait_exit_file(c, id, KITE_MIN(deadline, rt_mono_ns() + RC_EXIT_FILE_WAIT_NS));
}

static int rc_stop_container(struct kite_runtime *rt, const char *id, int64_t grace_ns, int64_t timeout_ns) {
    struct runc_rt *c = rc_of(rt);
    json_object *meta = read_meta(c, id);
    if (!meta) return -ENOENT;
    json_object_put(meta);
    return stop_by_id(c, id, grace_ns, deadline_of(timeout_ns > 0 ? kite_sat_add(timeout_ns, grace_ns) : 0));
}

static int remove_by_id(struct runc_rt *c, const char *id, int64_t deadline) {
    json_object *meta = read_meta(c, id);
    if (!meta) return -ENOENT;
    int r = stop_by_id(c, id, 0, deadline);
    if (r == 0) {
        int code;
        if (read_exit(c, id, &code, NULL) == 0) record_exit(c, id, meta, now_wall(c));
        r = runc_simple(c, deadline, NULL, (const char *[]){"delete", "--force", id, NULL});
        /* runc forgets a container whose state is gone; what is left is ours to clean */
        if (r == -EIO) r = 0;
    }
    if (r == 0) {
        pthread_mutex_lock(&c->mu);
        unwatch(c, id);
        pthread_mutex_unlock(&c->mu);
        destroy_bundle(c, id);
        if (jstr(meta, "cgroup")) cgroup_remove(jstr(meta, "cgroup"));
    }
    json_object_put(meta);
    return r;
}

static int rc_remove_container(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    return remove_by_id(rc_of(rt), id, deadline_of(timeout_ns));
}

/* Every container id in containers/, pause holders included when with_pause. */
static char **list_ids(struct runc_rt *c, size_t *ret_n) {
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
    struct runc_rt *c = rc_of(rt);
    size_t n_ids = 0, n = 0;
    char **ids = list_ids(c, &n_ids);
    struct kite_container_status *v = n_ids ? kite_calloc(n_ids, sizeof(*v)) : NULL;
    for (size_t i = 0; i < n_ids; i++) {
        json_object *meta = read_meta(c, ids[i]);
        if (meta && !json_object_get_boolean(json_object_object_get(meta, "pause")) &&
            (!sandbox_id || kite_streq(jstr(meta, "sandbox_id"), sandbox_id)))
            fill_status(c, ids[i], meta, &v[n++]);
        json_object_put(meta);
    }
    kite_strv_free(ids, n_ids);
    *ret = v;
    *ret_n = n;
    return 0;
}

static int rc_exec_sync(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc, int64_t timeout_ns,
                        struct kite_exec_result *ret) {
    struct runc_rt *c = rc_of(rt);
    if (!argc) return -EINVAL;
    json_object *meta = read_meta(c, id);
    if (!meta) return -ENOENT;
    json_object_put(meta);
    int code;
    if (read_exit(c, id, &code, NULL) == 0 || !pid_alive(container_pid(c, id))) return -ENOTCONN;
    const char **args = kite_calloc(argc + 8, sizeof(char *));
    size_t n = 0;
    args[n++] = c->runc;
    args[n++] = "--root";
    args[n++] = c->state;
    args[n++] = "exec";
    args[n++] = id;
    for (size_t i = 0; i < argc; i++) args[n++] = argv[i];
    struct rt_run r = {.argv = args, .pass_fd = -1, .term_first = true, .deadline = deadline_of(timeout_ns),
                       .out_max = KITE_RT_EXEC_OUTPUT_MAX};
    int e = rt_run(&r);
    free(args);
    if (e < 0) {
        rt_run_release(&r);
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
    struct runc_rt *c = rc_of(rt);
    if (!argc) return -EINVAL;
    json_object *meta = read_meta(c, id);
    if (!meta) return -ENOENT;
    json_object_put(meta);
    int code;
    if (read_exit(c, id, &code, NULL) == 0 || !pid_alive(container_pid(c, id))) return -ENOTCONN;
    *ret = (struct kite_exec_session){.pid = -1, .pidfd = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .pty_fd = -1};
    _cleanup_free_ char *rnd = new_id(), *pf_name = kite_asprintf("exec-%s.pid", rnd);
    char *pid_file = cdir(c, id, pf_name);
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
    if (e == 0) {
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        sigset_t none;
        sigemptyset(&none);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSID);
        e = -posix_spawn(&pid, c->runc, &fa, &attr, (char *const *)args, environ);
        posix_spawnattr_destroy(&attr);
    }
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
    ret->pidfd = rt_pidfd_open(pid);
    ret->in_fd = in[1];
    ret->out_fd = out[0];
    ret->err_fd = err[0];
    ret->pty_fd = master;
    ret->cmd_pid_file = pid_file;
    return 0;
}

static int rc_attach_socket(struct kite_runtime *rt, const char *id, char **ret_path) {
    struct runc_rt *c = rc_of(rt);
    json_object *meta = read_meta(c, id);
    if (!meta) return -ENOENT;
    json_object_put(meta);
    int code;
    if (read_exit(c, id, &code, NULL) == 0 || !pid_alive(container_pid(c, id))) return -ENOTCONN;
    /* conmon's socket is <bundle>/attach, linked from <sockets>/<id> (a short path for
     * sun_path's 108 bytes) */
    *ret_path = kite_asprintf("%s/%s/attach", c->sockets, id);
    return 0;
}

/* ---- sandboxes --------------------------------------------------------------------------- */

static int rc_run_sandbox(struct kite_runtime *rt, const struct kite_sandbox_config *cfg, int64_t timeout_ns,
                          char **ret_id, char **ret_error) {
    struct runc_rt *c = rc_of(rt);
    int64_t deadline = deadline_of(timeout_ns);
    if (!cfg || !cfg->uid || !*cfg->uid || !cfg->name || !cfg->ns || strchr(cfg->uid, '/') || strchr(cfg->name, '/') ||
        strchr(cfg->ns, '/'))
        return -EINVAL;
    if (access(c->pause_bin, X_OK) < 0) {
        if (ret_error) *ret_error = kite_asprintf("pause binary %s: %s (install busybox-static)", c->pause_bin, strerror(errno));
        return -ENOENT;
    }
    _cleanup_free_ char *id = new_id(), *sdir = kite_asprintf("%s/%s", c->sandboxes, id), *dir = cdir(c, id, NULL),
                        *rootfs = cdir(c, id, "rootfs");
    _cleanup_free_ char *parent = cfg->cgroup_parent ? kite_strdup(cfg->cgroup_parent)
                                                     : kite_asprintf("%s/pod%s", c->cgroup_root, cfg->uid);
    _cleanup_free_ char *cg = kite_asprintf("%s/%s", parent, id);
    _cleanup_free_ char *log_dir = cfg->log_dir ? kite_strdup(cfg->log_dir)
                                                : kite_asprintf("%s/%s_%s_%s", c->logs, cfg->ns, cfg->name, cfg->uid);
    _cleanup_free_ char *pause_log = kite_asprintf("%s/pause.log", sdir), *err = NULL;
    int r;
    if ((r = kite_mkdir_p(sdir, 0700)) < 0 || (r = kite_mkdir_p(rootfs, 0755)) < 0 || (r = kite_mkdir_p(log_dir, 0755)) < 0) {
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
            kite_rm_rf(dir);
            if (ret_error) *ret_error = err ? TAKE_PTR(err) : kite_asprintf("allocating an address: %s", strerror(-r));
            return r;
        }
        kite_ipv4_format(addr, ip);
        host_if = kite_asprintf("kv%.12s", id);
    }
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
    json_object_object_add(sb, "cgroup_parent", json_object_new_string(parent));
    json_object_object_add(sb, "log_dir", json_object_new_string(log_dir));
    json_object_object_add(sb, "created", json_object_new_int64(now_wall(c)));
    _cleanup_free_ char *sbp = kite_asprintf("%s/sandbox.json", sdir);
    r = write_json(sbp, sb);
    json_object_put(sb);
    json_object *args = json_object_new_array(), *env = json_object_new_array(), *meta = json_object_new_object();
    json_object_array_add(args, json_object_new_string("/sleep"));
    json_object_array_add(args, json_object_new_string("2147483647"));
    json_object_array_add(env, json_object_new_string("PATH=/"));
    struct oci_in in = {.args = args, .env = env, .cwd = "/", .cgroup = cg, .readonly_root = true,
                        .host_network = cfg->host_network,
                        .hostname = cfg->host_network ? NULL : cfg->hostname && *cfg->hostname ? cfg->hostname : cfg->name,
                        .pause_bin = c->pause_bin};
    json_object *config = oci_config(&in);
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
    if (r == 0) r = create_bundle(c, id, config, meta, pause_log, NULL, deadline, &err);
    if (r == 0) r = runc_simple(c, deadline, &err, (const char *[]){"start", id, NULL});
    if (r == 0) {
        json_object_object_add(meta, "started", json_object_new_int64(now_wall(c)));
        write_meta(c, id, meta);
        /* its end is an event too (the sandbox is gone) */
        pthread_mutex_lock(&c->mu);
        watch_container(c, id);
        pthread_mutex_unlock(&c->mu);
    }
    /* plugged in before run_sandbox returns: the pod's containers start with their address */
    if (r == 0 && host_if) {
        pthread_mutex_lock(&c->mu);
        r = kite_net_bridge_ensure(c->bridge, kite_cidr_gateway(&c->cidr), c->cidr.prefix, &err);
        pthread_mutex_unlock(&c->mu);
    }
    if (r == 0 && host_if)
        r = kite_net_attach(c->bridge, host_if, container_pid(c, id), addr, c->cidr.prefix, kite_cidr_gateway(&c->cidr), &err);
    json_object_put(config);
    json_object_put(meta);
    if (r < 0) {
        struct rt_run rr;
        if (runc(c, deadline_of(0), &rr, (const char *[]){"delete", "--force", id, NULL}) == 0) rt_run_release(&rr);
        destroy_bundle(c, id);
        kite_rm_rf(sdir);
        cgroup_remove(cg);
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

static int rc_stop_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    struct runc_rt *c = rc_of(rt);
    int64_t deadline = deadline_of(timeout_ns);
    json_object *sb = read_sandbox(c, id);
    if (!sb) return -ENOENT;
    json_object_put(sb);
    size_t n = 0;
    char **ids = list_ids(c, &n);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        json_object *meta = read_meta(c, ids[i]);
        if (meta && kite_streq(jstr(meta, "sandbox_id"), id) && strcmp(ids[i], id) != 0) r = stop_by_id(c, ids[i], 0, deadline);
        json_object_put(meta);
    }
    kite_strv_free(ids, n);
    return r < 0 ? r : stop_by_id(c, id, 0, deadline);
}

static int rc_remove_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns) {
    struct runc_rt *c = rc_of(rt);
    int64_t deadline = deadline_of(timeout_ns);
    json_object *sb = read_sandbox(c, id);
    if (!sb) return -ENOENT;
    size_t n = 0;
    char **ids = list_ids(c, &n);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        json_object *meta = read_meta(c, ids[i]);
        if (meta && kite_streq(jstr(meta, "sandbox_id"), id) && strcmp(ids[i], id) != 0) r = remove_by_id(c, ids[i], deadline);
        json_object_put(meta);
    }
    kite_strv_free(ids, n);
    if (r == 0) r = remove_by_id(c, id, deadline);
    if (r == -ENOENT) r = 0;
    if (r == 0 && jstr(sb, "host_if")) {
        /* the veth went with the holder's namespace unless something else holds it; the
         * address is free once the sandbox is gone */
        kite_net_detach(jstr(sb, "host_if"));
        pthread_mutex_lock(&c->mu);
        r = kite_ipam_release(c->ipam, id);
        pthread_mutex_unlock(&c->mu);
    }
    if (r == 0) {
        _cleanup_free_ char *sdir = kite_asprintf("%s/%s", c->sandboxes, id);
        kite_rm_rf(sdir);
        /* the pod cgroup goes with its last sandbox */
        cgroup_remove(jstr(sb, "cgroup_parent"));
    }
    json_object_put(sb);
    return r;
}

static void fill_sandbox(struct runc_rt *c, const char *id, json_object *sb, struct kite_sandbox_status *s) {
    int code;
    bool ready = read_exit(c, id, &code, NULL) < 0 && pid_alive(container_pid(c, id));
    *s = (struct kite_sandbox_status){
        .id = kite_strdup(id),
        .uid = kite_strdup(jstr(sb, "uid") ? jstr(sb, "uid") : ""),
        .name = kite_strdup(jstr(sb, "name") ? jstr(sb, "name") : ""),
        .ns = kite_strdup(jstr(sb, "ns") ? jstr(sb, "ns") : ""),
        .log_dir = kite_strdup(jstr(sb, "log_dir") ? jstr(sb, "log_dir") : ""),
        .state = ready ? KITE_SANDBOX_READY : KITE_SANDBOX_NOTREADY,
        .host_network = json_object_get_boolean(json_object_object_get(sb, "host_network")),
        .created_ns = jint(sb, "created"),
        .ip = kite_strdup(jstr(sb, "ip") ? jstr(sb, "ip") : ""),
    };
}

static int rc_sandbox_status(struct kite_runtime *rt, const char *id, int64_t timeout_ns, struct kite_sandbox_status *ret) {
    struct runc_rt *c = rc_of(rt);
    json_object *sb = read_sandbox(c, id);
    if (!sb) return -ENOENT;
    fill_sandbox(c, id, sb, ret);
    json_object_put(sb);
    return 0;
}

static int rc_list_sandboxes(struct kite_runtime *rt, int64_t timeout_ns, struct kite_sandbox_status **ret, size_t *ret_n) {
    struct runc_rt *c = rc_of(rt);
    DIR *d = opendir(c->sandboxes);
    struct kite_sandbox_status *v = NULL;
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        json_object *sb = read_sandbox(c, e->d_name);
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

/* ---- events ------------------------------------------------------------------------------ */

static int rc_events_fd(struct kite_runtime *rt) { return rc_of(rt)->epfd; }

/* The exit of a watched container, once conmon wrote its code (an id named twice, by its
 * pidfd and its exit file, counts once: the first unwatches it). */
static void push_event(struct kite_container_event **v, size_t *n, struct runc_rt *c, const char *id) {
    pthread_mutex_lock(&c->mu);
    bool watched = find_watch(c, id) != NULL;
    pthread_mutex_unlock(&c->mu);
    if (!watched) return;
    json_object *meta = read_meta(c, id);
    int code = 0;
    int64_t mtime = 0;
    if (!meta || read_exit(c, id, &code, &mtime) < 0) {
        json_object_put(meta);
        return;
    }
    int64_t seen = watch_finished(c, id);
    record_exit(c, id, meta, seen ? seen : mtime);
    *v = kite_realloc(*v, (*n + 1) * sizeof(**v));
    (*v)[(*n)++] = (struct kite_container_event){
        .container_id = kite_strdup(id),
        .sandbox_id = kite_strdup(jstr(meta, "sandbox_id") ? jstr(meta, "sandbox_id") : ""),
        .exit_code = code,
        .oom_killed = json_object_get_boolean(json_object_object_get(meta, "oom")),
        .finished_ns = jint(meta, "finished"),
    };
    pthread_mutex_lock(&c->mu);
    unwatch(c, id);
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
                w->finished_ns = now_wall(c);
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

static int rc_read_events(struct kite_runtime *rt, struct kite_container_event **ret, size_t *ret_n) {
    struct runc_rt *c = rc_of(rt);
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

/* ---- version, images, lifecycle ---------------------------------------------------------- */

static int rc_version(struct kite_runtime *rt, char **ret_name, char **ret_version) {
    struct runc_rt *c = rc_of(rt);
    if (!c->version) {
        const char *argv[] = {c->runc, "--version", NULL};
        struct rt_run r = {.argv = argv, .pass_fd = -1, .deadline = deadline_of(0)};
        int e = rt_run(&r);
        const char *p = e == 0 && r.status == 0 ? strstr(r.out, "runc version ") : NULL;
        if (p) c->version = kite_strndup(p + 13, strcspn(p + 13, " \n"));
        rt_run_release(&r);
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
    struct runc_rt *c = rc_of(rt);
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
    return kite_image_store_list(rc_of(rt)->images, ret, ret_n);
}

static int rc_image_status(struct kite_runtime *rt, const char *name, struct kite_image *ret) {
    struct runc_rt *c = rc_of(rt);
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
    struct runc_rt *c = rc_of(rt);
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
        char **ids = list_ids(c, &n_ids);
        for (size_t i = 0; i < n_ids; i++) {
            json_object *meta = read_meta(c, ids[i]);
            if (kite_streq(jstr(meta, "image_id"), id)) r = -EBUSY;
            json_object_put(meta);
        }
        kite_strv_free(ids, n_ids);
        if (r < 0) return r;
    }
    return kite_image_store_remove(c->images, name);
}

static int rc_import_image(struct kite_runtime *rt, const char *tar_path, char ***ret_names, size_t *ret_n, char **ret_error) {
    return kite_image_store_import(rc_of(rt)->images, tar_path, ret_names, ret_n, ret_error);
}

/* The container's cgroup as its meta recorded it at create. */
static int rc_container_stats(struct kite_runtime *rt, const char *id, struct kite_usage *ret) {
    json_object *meta = read_meta(rc_of(rt), id);
    const char *cg = jstr(meta, "cgroup");
    int r = cg && *cg ? kite_cgroup_usage("", cg, ret) : -ENOENT;
    json_object_put(meta);
    return r;
}

static void rc_free(struct kite_runtime *rt) {
    struct runc_rt *c = rc_of(rt);
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
    .run_sandbox = rc_run_sandbox,
    .stop_sandbox = rc_stop_sandbox,
    .remove_sandbox = rc_remove_sandbox,
    .sandbox_status = rc_sandbox_status,
    .list_sandboxes = rc_list_sandboxes,
    .create_container = rc_create_container,
    .start_container = rc_start_container,
    .stop_container = rc_stop_container,
    .remove_container = rc_remove_container,
    .container_status = rc_container_status,
    .list_containers = rc_list_containers,
    .exec_sync = rc_exec_sync,
    .exec_start = rc_exec_start,
    .attach_socket = rc_attach_socket,
    .events_fd = rc_events_fd,
    .read_events = rc_read_events,
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
        json_object *sb = read_sandbox(c, kite_ipam_owner(c->ipam, i));
        json_object_put(sb);
        if (sb || kite_ipam_release(c->ipam, kite_ipam_owner(c->ipam, i)) < 0) i++;
    }
    /* recovery: containers still running under their conmon are watched again; those that
     * ended meanwhile keep the code conmon wrote, read by status */
    size_t n = 0;
    char **ids = list_ids(c, &n);
    for (size_t i = 0; i < n; i++) {
        int code;
        json_object *meta = read_meta(c, ids[i]);
        if (meta && jint(meta, "started") && read_exit(c, ids[i], &code, NULL) < 0 && pid_alive(container_pid(c, ids[i])))
            watch_container(c, ids[i]);
        json_object_put(meta);
    }
    kite_strv_free(ids, n);
    *ret = &c->rt;
    return 0;
}
