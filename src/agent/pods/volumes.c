/* Pod volumes on the node, as the kubelet's volume manager sets them up before any container
 * starts: emptyDir (a directory under <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>,
 * or a tmpfs for medium Memory, sized by sizeLimit) and hostPath with its type checks
 * (DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice). Each
 * container's volumeMounts become bind mounts (readOnly, subPath). The pod's directory goes
 * when the pod is removed from the node; a tmpfs is unmounted first.
 *
 * Other volume kinds (configMap, secret, projected, persistentVolumeClaim...) need the API or
 * a storage driver: the pod waits in ContainerCreating with a FailedMount event naming them. */
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

char *pods_pod_dir(struct kite_pods *p, const char *uid) {
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
    if (!kite_streq(pjs(ed, "medium"), "Memory") || is_mountpoint(dir)) return 0;
    _cleanup_free_ char *opts = NULL;
    const char *limit = pjs(ed, "sizeLimit");
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

/* The host path a volume name stands for (a new string), or NULL when the pod has no such
 * volume or its kind is not served here. */
static char *volume_path(struct kite_pods *p, struct pod *pod, const char *name) {
    json_object *vols = pj(pod->obj, "spec.volumes");
    size_t n = vols && json_object_is_type(vols, json_type_array) ? json_object_array_length(vols) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(vols, i);
        if (!kite_streq(pjs(v, "name"), name)) continue;
        if (pj(v, "emptyDir")) return p->root_dir ? empty_dir_path(p, pod, name) : NULL;
        if (pj(v, "hostPath")) return kite_strdup(pjs(v, "hostPath.path"));
        return NULL;
    }
    return NULL;
}

int pods_volumes_setup(struct kite_pods *p, struct pod *pod, char **ret_volume, char **ret_err) {
    json_object *vols = pj(pod->obj, "spec.volumes");
    size_t n = vols && json_object_is_type(vols, json_type_array) ? json_object_array_length(vols) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(vols, i);
        const char *name = pjs(v, "name");
        int r = 0;
        char *err = NULL;
        json_object *ed = pj(v, "emptyDir");
        if (ed && !p->root_dir) {
            err = kite_strdup("this node has no directory for pod volumes");
            r = -ENOTSUP;
        } else if (ed) {
            r = setup_empty_dir(p, pod, name, ed, &err);
        } else if (pj(v, "hostPath")) {
            const char *path = pjs(v, "hostPath.path");
            if (!path || path[0] != '/') {
                err = kite_strdup("hostPath.path must be absolute");
                r = -EINVAL;
            } else {
                r = host_path_check(path, pjs(v, "hostPath.type"), &err);
            }
        } else {
            json_object_object_foreach(v, key, val) {
                (void)val;
                if (strcmp(key, "name") == 0) continue;
                err = kite_asprintf("volume type %s is not supported by this node (emptyDir and hostPath are)", key);
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

int pods_volumes_mounts(struct kite_pods *p, struct pod *pod, json_object *ctr, struct kite_mount **ret,
                        size_t *ret_n, char ***ret_paths, char **ret_err) {
    json_object *vm = pj(ctr, "volumeMounts");
    size_t n = vm && json_object_is_type(vm, json_type_array) ? json_object_array_length(vm) : 0;
    struct kite_mount *m = kite_calloc(n + 1, sizeof(*m));
    char **paths = kite_calloc(n + 1, sizeof(char *));
    size_t k = 0;
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(vm, i);
        const char *name = pjs(e, "name"), *dst = pjs(e, "mountPath"), *sub = pjs(e, "subPath");
        char *src = name ? volume_path(p, pod, name) : NULL;
        if (!src || !dst) {
            free(src);
            *ret_err = kite_asprintf("volume \"%s\" of container %s is not a volume of the pod this node can mount",
                                     name ? name : "", pjs(ctr, "name"));
            r = -ENOENT;
            break;
        }
        if (sub && *sub) {
            if (!sub_path_ok(sub)) {
                free(src);
                *ret_err = kite_asprintf("subPath \"%s\" must be a relative path within the volume", sub);
                r = -EINVAL;
                break;
            }
            char *full = kite_asprintf("%s/%s", src, sub);
            free(src);
            src = full;
            struct stat st;
            if (stat(src, &st) < 0 && (r = mkdir_p(src, 0777)) < 0) {
                *ret_err = kite_asprintf("creating subPath %s: %s", src, strerror(-r));
                free(src);
                break;
            }
        }
        json_object *ro = pj(e, "readOnly");
        paths[k] = src;
        m[k++] = (struct kite_mount){.host_path = src, .container_path = dst,
                                     .read_only = ro && json_object_get_boolean(ro)};
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

/* Unmounts the tmpfs emptyDirs of a pod (a directory that is no mount point answers EINVAL). */
static void unmount_empty_dirs(const char *eds) {
    DIR *d = opendir(eds);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        _cleanup_free_ char *path = kite_asprintf("%s/%s", eds, e->d_name);
        if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
            log_warn(PODS_LOG, "unmounting %s: %s", path, strerror(errno));
    }
    closedir(d);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

int pods_volumes_teardown(struct kite_pods *p, const char *uid) {
    _cleanup_free_ char *dir = pods_pod_dir(p, uid);
    if (!dir) return 0;
    _cleanup_free_ char *eds = kite_asprintf("%s/volumes/" EMPTY_DIR_PLUGIN, dir);
    /* the tmpfs emptyDirs first: their files go with the mount; FTW_MOUNT below never crosses
     * into a mount left behind, so a hostPath bound somewhere under it is never deleted through */
    unmount_empty_dirs(eds);
    if (access(dir, F_OK) < 0) return 0;
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0) {
        int e = errno ? errno : EIO;
        log_warn(PODS_LOG, "removing %s: %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

/* The volume dirs of pods the agent does not have (a pod deleted from the API while the agent
 * was down): removed as the pod's own would have been, a tmpfs emptyDir unmounted so that its
 * memory is returned. */
void pods_volumes_remove_orphans(struct kite_pods *p) {
    _cleanup_free_ char *root = p->root_dir ? kite_asprintf("%s/pods", p->root_dir) : NULL;
    DIR *d = root ? opendir(root) : NULL;
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        bool known = false;
        for (size_t i = 0; i < p->n_pods && !known; i++) known = kite_streq(p->pods[i]->uid, e->d_name);
        if (known) continue;
        log_info(PODS_LOG, "removing the volumes of pod uid %s: the pod is not in the API", e->d_name);
        pods_volumes_teardown(p, e->d_name);
    }
    closedir(d);
}
