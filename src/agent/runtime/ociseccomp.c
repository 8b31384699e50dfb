/* Seccomp in the OCI spec as containerd's CRI writes it (runtime.h, kite_oci_apply_seccomp):
 * RuntimeDefault is containerd's default profile (an allow list; what is not listed fails with
 * EPERM, so unshare, mount, keyctl, bpf... fail unless the container holds the capability
 * that opens them), Localhost a profile file in the Docker/containerd format. */
#include <errno.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/utsname.h>

#include "agent/runtime/runtime.h"
#include "base/base.h"

/* The most bytes of a Localhost profile. */
#define KITE_SECCOMP_PROFILE_MAX (1024 * 1024)

/* Allowed to every container. */
static const char *const allowed[] = {
    "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk", "cachestat", "capget", "capset", "chdir",
    "chmod", "chown", "chown32", "clock_adjtime", "clock_adjtime64", "clock_getres", "clock_getres_time64",
    "clock_gettime", "clock_gettime64", "clock_nanosleep", "clock_nanosleep_time64", "close", "close_range",
    "connect", "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_ctl_old", "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
    "execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2", "fadvise64", "fadvise64_64",
    "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchown32", "fchownat",
    "fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr",
    "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64", "futex",
    "futex_requeue", "futex_time64", "futex_wait", "futex_waitv", "futex_wake", "futimesat", "getcpu", "getcwd",
    "getdents", "getdents64", "getegid", "getegid32", "geteuid", "geteuid32", "getgid", "getgid32", "getgroups",
    "getgroups32", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
    "getrandom", "getresgid", "getresgid32", "getresuid", "getresuid32", "getrlimit", "get_robust_list",
    "getrusage", "getsid", "getsockname", "getsockopt", "get_thread_area", "gettid", "gettimeofday", "getuid",
    "getuid32", "getxattr", "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
    "ioctl", "io_destroy", "io_getevents", "io_pgetevents", "io_pgetevents_time64", "ioprio_get", "ioprio_set",
    "io_setup", "io_submit", "ipc", "kill", "landlock_add_rule", "landlock_create_ruleset",
    "landlock_restrict_self", "lchown", "lchown32", "lgetxattr", "link", "linkat", "listen", "listxattr",
    "llistxattr", "_llseek", "lremovexattr", "lseek", "lsetxattr", "lstat", "lstat64", "madvise",
    "map_shadow_stack", "membarrier", "memfd_create", "mincore", "mkdir", "mkdirat", "mknod",
    "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mq_getsetattr", "mq_notify",
    "mq_open", "mq_timedreceive", "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64", "mq_unlink",
    "mremap", "mseal", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap",
    "nanosleep", "newfstatat", "_newselect", "open", "openat", "openat2", "pause",
    "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll",
    "ppoll", "ppoll_time64", "prctl", "pread64", "preadv", "preadv2", "prlimit64", "process_mrelease",
    "pselect6", "pselect6_time64", "ptrace", "pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
    "readlinkat", "readv", "recv", "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages",
    "removexattr", "rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction",
    "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_getaffinity", "sched_getattr", "sched_getparam",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval",
    "sched_rr_get_interval_time64", "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
    "sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "semtimedop_time64", "send",
    "sendfile", "sendfile64", "sendmmsg", "sendmsg", "sendto", "setfsgid", "setfsgid32", "setfsuid",
    "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32", "setitimer", "setpgid", "setpriority",
    "setregid", "setregid32", "setresgid", "setresgid32", "setresuid", "setresuid32", "setreuid", "setreuid32",
    "setrlimit", "set_robust_list", "setsid", "setsockopt", "set_thread_area", "set_tid_address", "setuid",
    "setuid32", "setxattr", "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd",
    "signalfd4", "sigprocmask", "sigreturn", "socket", "socketcall", "socketpair", "splice", "stat", "stat64",
    "statfs", "statfs64", "statx", "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee",
    "tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64",
    "timer_settime", "timer_settime64", "timerfd_create", "timerfd_gettime", "timerfd_gettime64",
    "timerfd_settime", "timerfd_settime64", "times", "tkill", "truncate", "truncate64", "ugetrlimit", "umask",
    "uname", "unlink", "unlinkat", "utime", "utimensat", "utimensat_time64", "utimes", "vfork", "vmsplice",
    "wait4", "waitid", "waitpid", "write", "writev"};

/* Allowed to a container holding the capability. */
static const struct {
    const char *cap;
    const char *names[14];
} by_cap[] = {
    {"CAP_DAC_READ_SEARCH", {"open_by_handle_at"}},
    {"CAP_SYS_ADMIN",
     {"bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick", "lookup_dcookie",
      "mount", "mount_setattr", "move_mount", "name_to_handle_at", "open_tree"}},
    {"CAP_SYS_ADMIN", {"perf_event_open", "quotactl", "quotactl_fd", "setdomainname", "sethostname", "setns",
                       "umount", "umount2", "unshare"}},
    {"CAP_SYS_BOOT", {"reboot"}},
    {"CAP_SYS_CHROOT", {"chroot"}},
    {"CAP_SYS_MODULE", {"delete_module", "init_module", "finit_module"}},
    {"CAP_SYS_PACCT", {"acct"}},
    {"CAP_SYS_PTRACE", {"kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev"}},
    {"CAP_SYS_RAWIO", {"iopl", "ioperm"}},
    {"CAP_SYS_TIME", {"settimeofday", "stime", "clock_settime", "clock_settime64"}},
    {"CAP_SYS_TTY_CONFIG", {"vhangup"}},
    {"CAP_SYS_NICE", {"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"}},
    {"CAP_SYSLOG", {"syslog"}},
    {"CAP_BPF", {"bpf"}},
    {"CAP_PERFMON", {"perf_event_open"}},
};

static json_object *names_of(const char *const *v, size_t n) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n && v[i]; i++) json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

static json_object *rule(json_object *names, const char *action, json_object *args) {
    json_object *r = json_object_new_object();
    json_object_object_add(r, "names", names);
    json_object_object_add(r, "action", json_object_new_string(action));
    if (args) json_object_object_add(r, "args", args);
    return r;
}

static json_object *arg(unsigned index, uint64_t value, uint64_t two, const char *op) {
    json_object *a = json_object_new_object();
    json_object_object_add(a, "index", json_object_new_int64(index));
    json_object_object_add(a, "value", json_object_new_uint64(value));
    json_object_object_add(a, "valueTwo", json_object_new_uint64(two));
    json_object_object_add(a, "op", json_object_new_string(op));
    json_object *v = json_object_new_array();
    json_object_array_add(v, a);
    return v;
}

static json_object *arches(void) {
    struct utsname u;
    const char *v[3] = {0};
    if (uname(&u) == 0 && strcmp(u.machine, "x86_64") == 0) v[0] = "SCMP_ARCH_X86_64", v[1] = "SCMP_ARCH_X86", v[2] = "SCMP_ARCH_X32";
    else if (uname(&u) == 0 && strcmp(u.machine, "aarch64") == 0) v[0] = "SCMP_ARCH_AARCH64", v[1] = "SCMP_ARCH_ARM";
    return names_of(v, 3);
}

static bool has_cap(json_object *caps, const char *cap) {
    for (size_t i = 0; caps && i < json_object_array_length(caps); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(caps, i)), cap)) return true;
    return false;
}

json_object *kite_oci_default_seccomp(json_object *spec) {
    json_object *caps = json_object_object_get(json_object_object_get(json_object_object_get(spec, "process"), "capabilities"),
                                               "bounding");
    json_object *s = json_object_new_object(), *rules = json_object_new_array();
    json_object_object_add(s, "defaultAction", json_object_new_string("SCMP_ACT_ERRNO"));
    json_object_object_add(s, "defaultErrnoRet", json_object_new_int(EPERM));
    json_object_object_add(s, "architectures", arches());
    json_object_array_add(rules, rule(names_of(allowed, KITE_ARRAY_SIZE(allowed)), "SCMP_ACT_ALLOW", NULL));
    /* personality: only the Linux, UNAME26 and PER_LINUX32 personas, and the query */
    static const uint64_t personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(personas); i++)
        json_object_array_add(rules, rule(names_of((const char *[]){"personality"}, 1), "SCMP_ACT_ALLOW",
                                          arg(0, personas[i], 0, "SCMP_CMP_EQ")));
    struct utsname u;
    if (uname(&u) == 0 && strcmp(u.machine, "x86_64") == 0)
        json_object_array_add(rules, rule(names_of((const char *[]){"arch_prctl", "modify_ldt"}, 2), "SCMP_ACT_ALLOW", NULL));
    for (size_t i = 0; i < KITE_ARRAY_SIZE(by_cap); i++)
        if (has_cap(caps, by_cap[i].cap))
            json_object_array_add(rules, rule(names_of(by_cap[i].names, KITE_ARRAY_SIZE(by_cap[i].names)),
                                              "SCMP_ACT_ALLOW", NULL));
    if (!has_cap(caps, "CAP_SYS_ADMIN")) {
        /* clone without new namespaces; clone3 (whose flags a filter cannot see) says ENOSYS so
         * the C library falls back to clone */
        const uint64_t ns = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;
        json_object_array_add(rules, rule(names_of((const char *[]){"clone"}, 1), "SCMP_ACT_ALLOW",
                                          arg(0, ns, 0, "SCMP_CMP_MASKED_EQ")));
        json_object *r = rule(names_of((const char *[]){"clone3"}, 1), "SCMP_ACT_ERRNO", NULL);
        json_object_object_add(r, "errnoRet", json_object_new_int(ENOSYS));
        json_object_array_add(rules, r);
    }
    json_object_object_add(s, "syscalls", rules);
    return s;
}

/* A profile in the Docker/containerd format as the OCI spec's linux.seccomp; NULL with
 * *ret_error when it is not one. */
static json_object *profile_from(json_object *p, char **ret_error) {
    json_object *s = json_object_new_object(), *v;
    const char *da = json_object_get_string(json_object_object_get(p, "defaultAction"));
    if (!json_object_is_type(p, json_type_object) || !da || !kite_startswith(da, "SCMP_ACT_")) {
        json_object_put(s);
        *ret_error = kite_strdup("the profile has no defaultAction");
        return NULL;
    }
    json_object_object_add(s, "defaultAction", json_object_new_string(da));
    if ((v = json_object_object_get(p, "defaultErrnoRet"))) json_object_object_add(s, "defaultErrnoRet", json_object_get(v));
    if ((v = json_object_object_get(p, "flags"))) json_object_object_add(s, "flags", json_object_get(v));
    json_object *archs = json_object_new_array();
    if ((v = json_object_object_get(p, "architectures")) && json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++)
            json_object_array_add(archs, json_object_get(json_object_array_get_idx(v, i)));
    } else if ((v = json_object_object_get(p, "archMap")) && json_object_is_type(v, json_type_array)) {
        /* archMap: this machine's architecture and its sub-architectures */
        json_object *mine = arches();
        const char *main_arch = json_object_array_length(mine) ? json_object_get_string(json_object_array_get_idx(mine, 0)) : "";
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            json_object *m = json_object_array_get_idx(v, i), *subs = json_object_object_get(m, "subArchitectures");
            if (!kite_streq(json_object_get_string(json_object_object_get(m, "architecture")), main_arch)) continue;
            json_object_array_add(archs, json_object_new_string(main_arch));
            for (size_t j = 0; subs && j < json_object_array_length(subs); j++)
                json_object_array_add(archs, json_object_get(json_object_array_get_idx(subs, j)));
        }
        json_object_put(mine);
    }
    json_object_object_add(s, "architectures", archs);
    json_object *rules = json_object_new_array(), *sc = json_object_object_get(p, "syscalls");
    for (size_t i = 0; sc && json_object_is_type(sc, json_type_array) && i < json_object_array_length(sc); i++) {
        json_object *in = json_object_array_get_idx(sc, i), *out = json_object_new_object(), *names = NULL;
        if ((v = json_object_object_get(in, "names")) && json_object_is_type(v, json_type_array)) names = json_object_get(v);
        else if ((v = json_object_object_get(in, "name")) && json_object_is_type(v, json_type_string)) {
            names = json_object_new_array();
            json_object_array_add(names, json_object_get(v));
        }
        const char *action = json_object_get_string(json_object_object_get(in, "action"));
        if (!names || !action) {
            json_object_put(names);
            json_object_put(out);
            json_object_put(rules);
            json_object_put(s);
            *ret_error = kite_asprintf("syscalls[%zu] has no names or no action", i);
            return NULL;
        }
        json_object_object_add(out, "names", names);
        json_object_object_add(out, "action", json_object_new_string(action));
        if ((v = json_object_object_get(in, "errnoRet"))) json_object_object_add(out, "errnoRet", json_object_get(v));
        if ((v = json_object_object_get(in, "args")) && json_object_is_type(v, json_type_array))
            json_object_object_add(out, "args", json_object_get(v));
        json_object_array_add(rules, out);
    }
    json_object_object_add(s, "syscalls", rules);
    return s;
}

int kite_oci_apply_seccomp(json_object *spec, const struct kite_security_config *sec, char **ret_error) {
    json_object *linux_ = json_object_object_get(spec, "linux");
    if (!linux_ || sec->privileged || sec->seccomp == KITE_SECCOMP_UNCONFINED) return 0;
    if (sec->seccomp == KITE_SECCOMP_RUNTIME_DEFAULT) {
        json_object_object_add(linux_, "seccomp", kite_oci_default_seccomp(spec));
        return 0;
    }
    char *data = NULL;
    size_t len = 0;
    int r = sec->seccomp_localhost ? kite_read_file(sec->seccomp_localhost, KITE_SECCOMP_PROFILE_MAX, &data, &len) : -EINVAL;
    if (r < 0) {
        *ret_error = kite_asprintf("failed to generate seccomp spec opts: cannot load seccomp profile \"%s\": %s",
                                   sec->seccomp_localhost ? sec->seccomp_localhost : "", strerror(-r));
        return r;
    }
    json_object *p = json_tokener_parse(data);
    free(data);
    char *why = NULL;
    json_object *s = p ? profile_from(p, &why) : NULL;
    json_object_put(p);
    if (!s) {
        *ret_error = kite_asprintf("failed to generate seccomp spec opts: seccomp profile \"%s\": %s",
                                   sec->seccomp_localhost, why ? why : "not JSON");
        free(why);
        return -EINVAL;
    }
    json_object_object_add(linux_, "seccomp", s);
    return 0;
}
