/* A pod's namespaces held by bind mounts (nspin.h). unshare() on a thread moves that thread
 * alone into the new namespaces (the network, IPC and UTS ones may be unshared by one thread of
 * many); the thread sets what is set inside them, pins them and ends, so the agent's other
 * threads never leave the host's namespaces and no process is forked. */
#include "agent/runtime/nspin.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/base.h"

static const struct {
    int type;
    const char *name;
    int clone_flag;
} kinds[] = {
    {KITE_NSPIN_NET, "net", CLONE_NEWNET},
    {KITE_NSPIN_IPC, "ipc", CLONE_NEWIPC},
    {KITE_NSPIN_UTS, "uts", CLONE_NEWUTS},
};

char *kite_nspin_path(const char *dir, int type) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++)
        if (kinds[i].type == type) return kite_asprintf("%s/%s", dir, kinds[i].name);
    return NULL;
}

/* The namespace a sysctl lives in, as runc's validation sorts them; 0 = none (the host's). */
static int sysctl_ns(const char *name) {
    static const char *const ipc[] = {"kernel.shm", "kernel.msg", "fs.mqueue."};
    if (kite_streq(name, "kernel.sem")) return KITE_NSPIN_IPC;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(ipc); i++)
        if (strncmp(name, ipc[i], strlen(ipc[i])) == 0) return KITE_NSPIN_IPC;
    if (strncmp(name, "net.", 4) == 0) return KITE_NSPIN_NET;
    if (kite_streq(name, "kernel.hostname") || kite_streq(name, "kernel.domainname")) return KITE_NSPIN_UTS;
    return 0;
}

struct pin_job {
    const char *dir, *hostname;
    int types;
    const char *const *sysctls;
    size_t n_sysctls;
    int r;
    char *error;
};

static int job_fail(struct pin_job *j, int r, char *msg) {
    j->r = r;
    j->error = msg;
    return r;
}

static int write_sysctl(struct pin_job *j, const char *kv) {
    const char *eq = strchr(kv, '=');
    _cleanup_free_ char *name = kite_strndup(kv, (size_t)(eq - kv));
    _cleanup_free_ char *path = kite_asprintf("/proc/sys/%s", name);
    for (char *q = path + strlen("/proc/sys/"); *q; q++)
        if (*q == '.') *q = '/';
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return job_fail(j, -errno, kite_asprintf("sysctl %s: %s", name, strerror(errno)));
    size_t len = strlen(eq + 1);
    ssize_t w = write(fd, eq + 1, len);
    int e = w < 0 ? errno : (size_t)w != len ? EIO : 0;
    close(fd);
    if (e) return job_fail(j, -e, kite_asprintf("sysctl %s=%s: %s", name, eq + 1, strerror(e)));
    return 0;
}

static void *pin_thread(void *arg) {
    struct pin_job *j = arg;
    int flags = 0;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++)
        if (j->types & kinds[i].type) flags |= kinds[i].clone_flag;
    if (unshare(flags) < 0) {
        job_fail(j, -errno, kite_asprintf("unshare: %s", strerror(errno)));
        return NULL;
    }
    if (j->hostname && sethostname(j->hostname, strlen(j->hostname)) < 0) {
        job_fail(j, -errno, kite_asprintf("setting the hostname %s: %s", j->hostname, strerror(errno)));
        return NULL;
    }
    for (size_t i = 0; i < j->n_sysctls; i++)
        if (write_sysctl(j, j->sysctls[i]) < 0) return NULL;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++) {
        if (!(j->types & kinds[i].type)) continue;
        _cleanup_free_ char *dst = kite_nspin_path(j->dir, kinds[i].type);
        _cleanup_free_ char *src = kite_asprintf("/proc/thread-self/ns/%s", kinds[i].name);
        int fd = open(dst, O_RDONLY | O_CREAT | O_CLOEXEC, 0444);
        if (fd < 0) {
            job_fail(j, -errno, kite_asprintf("creating %s: %s", dst, strerror(errno)));
            return NULL;
        }
        close(fd);
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0) {
            job_fail(j, -errno, kite_asprintf("bind-mounting %s on %s: %s", src, dst, strerror(errno)));
            return NULL;
        }
    }
    return NULL;
}

int kite_nspin_create(const char *dir, int types, const char *hostname, const char *const *sysctls, size_t n_sysctls,
                      char **ret_error) {
    if (hostname && !(types & KITE_NSPIN_UTS)) {
        if (ret_error) *ret_error = kite_strdup("a hostname needs a UTS namespace of the pod's own");
        return -EINVAL;
    }
    for (size_t i = 0; i < n_sysctls; i++) {
        const char *eq = strchr(sysctls[i], '=');
        _cleanup_free_ char *name = eq ? kite_strndup(sysctls[i], (size_t)(eq - sysctls[i])) : kite_strdup(sysctls[i]);
        int ns = eq && eq > sysctls[i] ? sysctl_ns(name) : 0;
        if (!ns || !(types & ns) || strstr(name, "..") || strchr(name, '/')) {
            if (ret_error)
                *ret_error = kite_asprintf(!eq ? "sysctl \"%s\": no value"
                                           : ns ? "sysctl \"%s\" is not allowed: the pod shares the host's namespace of it"
                                                : "sysctl \"%s\" is not in a separate kernel namespace",
                                           name);
            return -EINVAL;
        }
    }
    if (!types) return 0;
    struct pin_job j = {.dir = dir, .hostname = hostname, .types = types, .sysctls = sysctls, .n_sysctls = n_sysctls};
    pthread_t t;
    int r = -pthread_create(&t, NULL, pin_thread, &j);
    if (r < 0) {
        if (ret_error) *ret_error = kite_asprintf("starting a thread: %s", strerror(-r));
        return r;
    }
    pthread_join(t, NULL);
    if (j.r < 0) {
        kite_nspin_remove(dir);
        if (ret_error) *ret_error = kite_asprintf("pod namespaces: %s", j.error ? j.error : strerror(-j.r));
        free(j.error);
        return j.r;
    }
    return 0;
}

bool kite_nspin_held(const char *dir, int types) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++) {
        if (!(types & kinds[i].type)) continue;
        _cleanup_free_ char *p = kite_nspin_path(dir, kinds[i].type);
        struct statfs fs;
        if (statfs(p, &fs) < 0 || fs.f_type != NSFS_MAGIC) return false;
    }
    return true;
}

int kite_nspin_remove(const char *dir) {
    int r = 0;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++) {
        _cleanup_free_ char *p = kite_nspin_path(dir, kinds[i].type);
        /* a file mounted twice (never by this code) needs as many unmounts */
        int e, k = 0;
        do e = umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW) == 0 ? 0 : errno;
        while (e == 0 && ++k < 8);
        if (e && e != EINVAL && e != ENOENT && r == 0) r = -e;
        if (unlink(p) < 0 && errno != ENOENT && r == 0) r = -errno;
    }
    return r;
}
