/* Pod volumes on the node, as the kubelet's volume manager sets them up before any container
 * starts: emptyDir (a directory under <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>,
 * or a tmpfs for medium Memory, sized by sizeLimit), hostPath with its type checks
 * (DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice), and the
 * configMap, secret, downwardAPI and projected volumes (apivolumes.c: their files; here their
 * directory, a tmpfs for all but configMap, written again on every sync of the pod by the
 * atomic writer, which writes nothing when nothing changed). Each container's volumeMounts
 * become bind mounts (readOnly, subPath; the API volumes always read-only). The pod's
 * directory goes when the pod is removed from the node; its tmpfs mounts are unmounted first.
 *
 * Other volume kinds (persistentVolumeClaim...) need a storage driver: the pod waits in
 * ContainerCreating with a FailedMount event naming them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "api/quantity.h"
#include "base/base.h"
#include "base/log.h"

#define EMPTY_DIR_PLUGIN "kubernetes.io~empty-dir"
/* the plugin directories that may hold a tmpfs */
static const char *const tmpfs_plugins[] = {EMPTY_DIR_PLUGIN, "kubernetes.io~secret", "kubernetes.io~downward-api",
                                            "kubernetes.io~projected"};

char *kite_pods_pod_dir(struct kite_pods *p, const char *uid) {
    return p->root_dir ? kite_asprintf("%s/pods/%s", p->root_dir, uid) : NULL;
}

static int mkdir_p(const char *path, mode_t mode) {
    _cleanup_free_ char *s = kite_strdup(path);
    for (char *q = s + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        if (mkdir(s, 0755) < 0 && errno != EEXIST) return -errno;
        *q = '/';
    }
    if (mkdir(s, mode) < 0 && errno != EEXIST) return -errno;
    return 0;
}

static char *empty_dir_path(struct kite_pods *p, struct pod *pod, const char *name) {
    return kite_asprintf("%s/pods/%s/volumes/" EMPTY_DIR_PLUGIN "/%s", p->root_dir, pod->uid, name);
}

/* hostPath's type checks (pkg/volume/hostpath: checkType). *ret_err gets the kubelet's message. */
static int host_path_check(const char *path, const char *type, char **ret_err) {
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (!type || !*type) return 0;
    if (strcmp(type, "DirectoryOrCreate") == 0) {
        if (!exists) {
            int r = mkdir_p(path, 0755);
            if (r < 0) {
                *ret_err = kite_asprintf("hostPath type check failed: %s: %s", path, strerror(-r));
                return r;
            }
            return 0;
        }
        type = "Directory";
    }
    if (strcmp(type, "FileOrCreate") == 0) {
        if (!exists) {
            int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0 && errno != EEXIST) {
                int e = errno;
                *ret_err = kite_asprintf("hostPath type check failed: %s: %s", path, strerror(e));
                return -e;
            }
            if (fd >= 0) close(fd);
            return 0;
        }
        type = "File";
    }
    static const struct {
        const char *type;
        mode_t fmt;
        const char *what;
    } kinds[] = {
        {"Directory", S_IFDIR, "a directory"}, {"File", S_IFREG, "a file"},
        {"Socket", S_IFSOCK, "a socket file"}, {"CharDevice", S_IFCHR, "a character device"},
        {"BlockDevice", S_IFBLK, "a block device"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(kinds); i++) {
        if (strcmp(type, kinds[i].type) != 0) continue;
        if (exists && (st.st_mode & S_IFMT) == kinds[i].fmt) return 0;
        *ret_err = kite_asprintf("hostPath type check failed: %s is not %s", path, kinds[i].what);
        return -ENOTDIR;
    }
    *ret_err = kite_asprintf("hostPath type check failed: unknown type %s", type);
    return -EINVAL;
}

static bool is_mountpoint(const char *path) {
    struct stat a, b;
    _cleanup_free_ char *parent = kite_asprintf("%s/..", path);
    return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

static int setup_empty_dir(struct kite_pods *p, struct pod *pod, const char *name, json_object *ed, char **ret_err) {
    _cleanup_free_ char *dir = empty_dir_path(p, pod, name);
    int r = mkdir_p(dir, 0777);
    if (r < 0) {
        *ret_err = kite_asprintf("creating %s: %s", dir, strerror(-r));
        return r;
    }
    /* world-writable as the kubelet makes it: containers may run as any user */
    (void)chmod(dir, 0777);
    if (!kite_streq(kite_agent_pjs(ed, "medium"), "Memory") || is_mountpoint(dir)) return 0;
    _cleanup_free_ char *opts = NULL;
    const char *limit = kite_agent_pjs(ed, "sizeLimit");
    int64_t bytes_m = 0;
    if (limit && kite_quantity_parse_milli(limit, &bytes_m) == 0 && bytes_m > 0)
        opts = kite_asprintf("mode=0777,size=%lld", (long long)(bytes_m / 1000));
    else
        opts = kite_strdup("mode=0777");
    if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
        int e = errno;
        *ret_err = kite_asprintf("mounting a tmpfs on %s: %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

static char *api_volume_path(struct kite_pods *p, struct pod *pod, const char *plugin, const char *name) {
    return kite_asprintf("%s/pods/%s/volumes/%s/%s", p->root_dir, pod->uid, plugin, name);
}

/* A configMap, secret, downwardAPI or projected volume: its directory (a tmpfs mounted once,
 * room for the files twice while the atomic writer swaps them) and its files as of now. */
static int setup_api_volume(struct kite_pods *p, struct pod *pod, json_object *v, const char *plugin, bool tmpfs,
                            char **ret_err) {
    struct pods_payload pl = {0};
    int r = kite_pods_api_volume_payload(p, pod, v, &pl, ret_err);
    if (r < 0) return r;
    _cleanup_free_ char *dir = api_volume_path(p, pod, plugin, kite_agent_pjs(v, "name"));
    if ((r = mkdir_p(dir, 0755)) < 0) {
        *ret_err = kite_asprintf("creating %s: %s", dir, strerror(-r));
        kite_pods_payload_release(&pl);
        return r;
    }
    if (tmpfs && !is_mountpoint(dir)) {
        _cleanup_free_ char *opts = kite_asprintf("mode=0755,size=%u", 2 * KITE_PODS_VOLUME_MAX_BYTES + (1u << 20));
        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
            r = -errno;
            *ret_err = kite_asprintf("mounting a tmpfs on %s: %s", dir, strerror(-r));
            kite_pods_payload_release(&pl);
            return r;
        }
    }
    if (pl.has_gid && (chown(dir, (uid_t)-1, pl.gid) < 0 || chmod(dir, 02755) < 0)) {
        r = -errno;
        *ret_err = kite_asprintf("setting the group of %s: %s", dir, strerror(-r));
        kite_pods_payload_release(&pl);
        return r;
    }
    r = kite_pods_atomic_write(dir, &pl, kite_now_wall(p->clock), ret_err);
    kite_pods_payload_release(&pl);
    return r < 0 ? r : 0;
}

/* The host path a volume name stands for (a new string), or NULL when the pod has no such
 * volume or its kind is not served here. *ret_ro: the kind is always mounted read-only. */
static char *volume_path(struct kite_pods *p, struct pod *pod, const char *name, bool *ret_ro) {
    json_object *vols = kite_agent_pj(pod->obj, "spec.volumes");
    size_t n = vols && json_object_is_type(vols, json_type_array) ? json_object_array_length(vols) : 0;
    *ret_ro = false;
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(vols, i);
        if (!kite_streq(kite_agent_pjs(v, "name"), name)) continue;
        if (kite_agent_pj(v, "emptyDir")) return p->root_dir ? empty_dir_path(p, pod, name) : NULL;
        if (kite_agent_pj(v, "hostPath")) return kite_strdup(kite_agent_pjs(v, "hostPath.path"));
        const char *plugin = kite_pods_api_volume_plugin(v, NULL);
        *ret_ro = plugin != NULL;
        if (plugin && p->root_dir) return api_volume_path(p, pod, plugin, name);
        return NULL;
    }
    return NULL;
}

int kite_pods_volumes_setup(struct kite_pods *p, struct pod *pod, char **ret_volume, char **ret_err) {
    json_object *vols = kite_agent_pj(pod->obj, "spec.volumes");
    size_t n = vols && json_object_is_type(vols, json_type_array) ? json_object_array_length(vols) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(vols, i);
        const char *name = kite_agent_pjs(v, "name");
        int r = 0;
        char *err = NULL;
        json_object *ed = kite_agent_pj(v, "emptyDir");
        bool tmpfs = false;
        const char *plugin = kite_pods_api_volume_plugin(v, &tmpfs);
        if ((ed || plugin) && !p->root_dir) {
            err = kite_strdup("this node has no directory for pod volumes");
            r = -ENOTSUP;
        } else if (ed) {
            r = setup_empty_dir(p, pod, name, ed, &err);
        } else if (plugin) {
            r = setup_api_volume(p, pod, v, plugin, tmpfs, &err);
        } else if (kite_agent_pj(v, "hostPath")) {
            const char *path = kite_agent_pjs(v, "hostPath.path");
            if (!path || path[0] != '/') {
                err = kite_strdup("hostPath.path must be absolute");
                r = -EINVAL;
            } else {
                r = host_path_check(path, kite_agent_pjs(v, "hostPath.type"), &err);
            }
        } else {
            json_object_object_foreach(v, key, val) {
                (void)val;
                if (strcmp(key, "name") == 0) continue;
                err = kite_asprintf("volume type %s is not supported by this node (emptyDir, hostPath, configMap, "
                                    "secret, downwardAPI and projected are)", key);
                break;
            }
            if (!err) err = kite_strdup("the volume has no type");
            r = -ENOTSUP;
        }
        if (r < 0) {
            *ret_volume = kite_strdup(name ? name : "");
            *ret_err = err;
            return r;
        }
        free(err);
    }
    return 0;
}

/* subPath must stay inside its volume: relative, no "..", as API validation also checks. */
static bool sub_path_ok(const char *s) {
    if (!s || s[0] == '/') return false;
    for (const char *q = s; *q;) {
        size_t len = strcspn(q, "/");
        if (len == 2 && q[0] == '.' && q[1] == '.') return false;
        q += len;
        while (*q == '/') q++;
    }
    return true;
}

static bool path_within(const char *path, const char *root) {
    size_t n = strlen(root);
    return strncmp(path, root, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* The host path of a volume's subPath, its symlinks resolved (the bind mount's source): it must
 * stay inside the volume, so a symlink a container made in its volume cannot expose the host.
 * A missing subPath is created as a directory, as the kubelet does. */
static int sub_path_resolve(const char *vol, const char *sub, char **ret, char **ret_err) {
    if (!sub_path_ok(sub)) {
        *ret_err = kite_asprintf("subPath \"%s\" must be a relative path within the volume", sub);
        return -EINVAL;
    }
    _cleanup_free_ char *root = realpath(vol, NULL), *full = kite_asprintf("%s/%s", vol, sub);
    if (!root) {
        int e = errno;
        *ret_err = kite_asprintf("subPath \"%s\": the volume's directory %s: %s", sub, vol, strerror(e));
        return -e;
    }
    /* the deepest part that exists must resolve inside the volume before anything is created */
    _cleanup_free_ char *probe = kite_strdup(full);
    char *real = NULL;
    for (;;) {
        if ((real = realpath(probe, NULL)) || errno != ENOENT) break;
        char *slash = strrchr(probe, '/');
        if (!slash || (size_t)(slash - probe) < strlen(vol)) break;
        *slash = 0;
    }
    bool whole = real && strcmp(probe, full) == 0;
    if (!real || !path_within(real, root)) {
        free(real);
        *ret_err = kite_asprintf("subPath \"%s\" resolves outside its volume", sub);
        return -EPERM;
    }
    if (whole) {
        *ret = real;
        return 0;
    }
    free(real);
    int r = mkdir_p(full, 0777);
    if (r < 0) {
        *ret_err = kite_asprintf("creating subPath %s: %s", full, strerror(-r));
        return r;
    }
    if (!(real = realpath(full, NULL)) || !path_within(real, root)) {
        free(real);
        *ret_err = kite_asprintf("subPath \"%s\" resolves outside its volume", sub);
        return -EPERM;
    }
    *ret = real;
    return 0;
}

int kite_pods_volumes_mounts(struct kite_pods *p, struct pod *pod, json_object *ctr, struct kite_mount **ret,
                        size_t *ret_n, char ***ret_paths, char **ret_err) {
    json_object *vm = kite_agent_pj(ctr, "volumeMounts");
    size_t n = vm && json_object_is_type(vm, json_type_array) ? json_object_array_length(vm) : 0;
    struct kite_mount *m = kite_calloc(n + 1, sizeof(*m));
    char **paths = kite_calloc(n + 1, sizeof(char *));
    size_t k = 0;
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(vm, i);
        const char *name = kite_agent_pjs(e, "name"), *dst = kite_agent_pjs(e, "mountPath"), *sub = kite_agent_pjs(e, "subPath");
        bool forced_ro = false;
        char *src = name ? volume_path(p, pod, name, &forced_ro) : NULL;
        if (!src || !dst) {
            free(src);
            *ret_err = kite_asprintf("volume \"%s\" of container %s is not a volume of the pod this node can mount",
                                     name ? name : "", kite_agent_pjs(ctr, "name"));
            r = -ENOENT;
            break;
        }
        if (sub && *sub) {
            char *full = NULL;
            char *why = NULL;
            r = sub_path_resolve(src, sub, &full, &why);
            free(src);
            if (r == -EPERM) { /* the kubelet's words; the detail goes to the log */
                log_warn(PODS_LOG, "pod %s/%s: %s", pod->ns, pod->name, why);
                free(why);
                *ret_err = kite_asprintf("failed to prepare subPath for volumeMount \"%s\" of container \"%s\"", name,
                                         kite_agent_pjs(ctr, "name"));
            } else if (r < 0) {
                *ret_err = why;
            }
            if (r < 0) break;
            src = full;
        }
        json_object *ro = kite_agent_pj(e, "readOnly");
        paths[k] = src;
        m[k++] = (struct kite_mount){.host_path = src, .container_path = dst,
                                     .read_only = forced_ro || (ro && json_object_get_boolean(ro))};
    }
    if (r < 0) {
        kite_strv_free(paths, k);
        free(m);
        return r;
    }
    *ret = m;
    *ret_n = k;
    *ret_paths = paths;
    return 0;
}

/* Unmounts the tmpfs volumes of a pod under one plugin directory (a directory that is no mount
 * point answers EINVAL). */
static void unmount_plugin_dir(const char *pd) {
    DIR *d = opendir(pd);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        _cleanup_free_ char *path = kite_asprintf("%s/%s", pd, e->d_name);
        if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
            log_warn(PODS_LOG, "unmounting %s: %s", path, strerror(errno));
    }
    closedir(d);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

int kite_pods_volumes_teardown(struct kite_pods *p, const char *uid) {
    kite_pods_vobjs_forget(p, uid);
    kite_satokens_forget_pod(p->satokens, uid);
    _cleanup_free_ char *dir = kite_pods_pod_dir(p, uid);
    if (!dir) return 0;
    /* the tmpfs volumes first: their files go with the mount; FTW_MOUNT below never crosses
     * into a mount left behind, so a hostPath bound somewhere under it is never deleted through */
    for (size_t i = 0; i < KITE_ARRAY_SIZE(tmpfs_plugins); i++) {
        _cleanup_free_ char *pd = kite_asprintf("%s/volumes/%s", dir, tmpfs_plugins[i]);
        unmount_plugin_dir(pd);
    }
    if (access(dir, F_OK) < 0) return 0;
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0) {
        int e = errno ? errno : EIO;
        log_warn(PODS_LOG, "removing %s: %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

/* The volume dirs of pods the agent does not have (a pod deleted from the API while the agent
 * was down): removed as the pod's own would have been, a tmpfs volume unmounted so that its
 * memory is returned. */
void kite_pods_volumes_remove_orphans(struct kite_pods *p) {
    _cleanup_free_ char *root = p->root_dir ? kite_asprintf("%s/pods", p->root_dir) : NULL;
    DIR *d = root ? opendir(root) : NULL;
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        bool known = false;
        for (size_t i = 0; i < p->n_pods && !known; i++) known = kite_streq(p->pods[i]->uid, e->d_name);
        if (known) continue;
        log_info(PODS_LOG, "removing the volumes of pod uid %s: the pod is not in the API", e->d_name);
        kite_pods_volumes_teardown(p, e->d_name);
    }
    closedir(d);
}
