/* The kubelet's atomic writer (pkg/volume/util/atomic_writer.go): a volume's files are written
 * into a new timestamped directory (..2026_12_06_07_20_00.123456789), then the ..data symlink
 * is pointed at it by renaming a fresh ..data_tmp over it, so a reader sees either every old
 * file or every new one. What the container sees at the top of the volume are symlinks through
 * ..data (key -> ..data/key), made once; entries of a previous payload that are gone are
 * removed, and so is the previous timestamped directory. A payload equal to what ..data holds
 * (contents, modes and group) writes nothing. With the pod's fsGroup, every file and directory
 * of the volume gets its group and directories the setgid bit, as SetVolumeOwnership does
 * (the payload's modes carry the group's read bits already). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "base/log.h"

#define DATA_DIR "..data"
#define DATA_TMP "..data_tmp"
#define PATH_MAX_LEN 4096

static char *dup0(const char *data, size_t len) {
    char *s = kite_malloc(len + 1);
    if (len) memcpy(s, data, len);
    s[len] = 0;
    return s;
}

void kite_pods_payload_release(struct pods_payload *pl) {
    for (size_t i = 0; i < pl->n; i++) {
        free(pl->f[i].path);
        free(pl->f[i].data);
    }
    free(pl->f);
    memset(pl, 0, sizeof(*pl));
}

void kite_pods_payload_add(struct pods_payload *pl, const char *path, const char *data, size_t len, mode_t mode) {
    for (size_t i = 0; i < pl->n; i++)
        if (strcmp(pl->f[i].path, path) == 0) { /* a later source wins, as upstream's map */
            pl->bytes -= pl->f[i].len;
            free(pl->f[i].data);
            pl->f[i].data = dup0(data, len);
            pl->f[i].len = len;
            pl->f[i].mode = mode;
            pl->bytes += len;
            return;
        }
    pl->f = kite_realloc(pl->f, (pl->n + 1) * sizeof(*pl->f));
    pl->f[pl->n++] = (struct pods_file){.path = kite_strdup(path), .data = dup0(data, len), .len = len, .mode = mode};
    pl->bytes += len;
}

/* upstream's validatePath, on the path cleaned as filepath.Clean would ("a//b/." is "a/b") */
char *kite_pods_payload_path_clean(const char *in, char **ret_err) {
    if (!in || !*in) {
        *ret_err = kite_strdup("invalid path: must not be empty");
        return NULL;
    }
    if (strlen(in) > PATH_MAX_LEN) {
        *ret_err = kite_asprintf("invalid path: must be less than or equal to %d characters", PATH_MAX_LEN);
        return NULL;
    }
    if (in[0] == '/') {
        *ret_err = kite_asprintf("invalid path: must be relative path: %s", in);
        return NULL;
    }
    struct kite_buf b = {0};
    for (const char *q = in; *q;) {
        size_t len = strcspn(q, "/");
        if (len == 2 && q[0] == '.' && q[1] == '.') {
            kite_buf_release(&b);
            *ret_err = kite_asprintf("invalid path: must not contain '..': %s", in);
            return NULL;
        }
        if (len && !(len == 1 && q[0] == '.')) {
            if (b.len) kite_buf_putc(&b, '/');
            kite_buf_append(&b, q, len);
        }
        q += len;
        while (*q == '/') q++;
    }
    if (!b.len) {
        kite_buf_release(&b);
        *ret_err = kite_strdup("invalid path: must not be empty");
        return NULL;
    }
    if (strncmp(b.p, "..", 2) == 0) {
        kite_buf_release(&b);
        *ret_err = kite_asprintf("invalid path: must not start with '..': %s", in);
        return NULL;
    }
    return b.p;
}

/* The first element of a relative path (a new string). */
static char *top_of(const char *path) { return kite_strndup(path, strcspn(path, "/")); }

/* Whether dirfd/path holds exactly data with mode (and group). */
static bool same_file(int dirfd, const struct pods_payload *pl, const char *path, const char *data, size_t len,
                      mode_t mode) {
    int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len && (st.st_mode & 07777) == mode &&
                (!pl->has_gid || st.st_gid == pl->gid);
    char buf[8192];
    for (size_t off = 0; same && off < len;) {
        ssize_t k = read(fd, buf, KITE_MIN(sizeof(buf), len - off));
        if (k <= 0 || memcmp(buf, data + off, (size_t)k) != 0) same = false;
        else off += (size_t)k;
    }
    close(fd);
    return same;
}

/* Regular files under dirfd/rel, counted (subdirectories followed, never symlinks). */
static size_t count_files(int dirfd) {
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return 0;
    }
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) n += count_files(sub);
        } else {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The payload is already what ..data holds, and every user-visible entry is there. */
static bool unchanged(const char *dir, const char *old_ts, const struct pods_payload *pl) {
    if (!old_ts) return false;
    _cleanup_free_ char *ts = kite_asprintf("%s/%s", dir, old_ts);
    int fd = open(ts, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    bool same = true;
    for (size_t i = 0; same && i < pl->n; i++) {
        same = same_file(fd, pl, pl->f[i].path, pl->f[i].data, pl->f[i].len, pl->f[i].mode);
        _cleanup_free_ char *top = top_of(pl->f[i].path), *vis = kite_asprintf("%s/%s", dir, top);
        struct stat st;
        if (same && lstat(vis, &st) < 0) same = false;
    }
    if (same) same = count_files(fd) == pl->n; /* count_files closes fd */
    else close(fd);
    return same;
}

/* A directory's group and mode: the fsGroup's, setgid (SetVolumeOwnership's), or 0755. */
static int own_dir_at(int dirfd, const char *path, const struct pods_payload *pl) {
    if (pl->has_gid && fchownat(dirfd, path, (uid_t)-1, pl->gid, AT_SYMLINK_NOFOLLOW) < 0) return -errno;
    return fchmodat(dirfd, path, pl->has_gid ? 02755 : 0755, 0) < 0 ? -errno : 0;
}

static int mkdirs_at(int dirfd, const char *path, const struct pods_payload *pl) {
    _cleanup_free_ char *s = kite_strdup(path);
    for (char *q = s; (q = strchr(q, '/')); q++) {
        *q = 0;
        if (mkdirat(dirfd, s, 0755) == 0) {
            int r = own_dir_at(dirfd, s, pl);
            if (r < 0) return r;
        } else if (errno != EEXIST) {
            return -errno;
        }
        *q = '/';
    }
    return 0;
}

static int write_file_at(int dirfd, const struct pods_file *f, const struct pods_payload *pl) {
    int r = mkdirs_at(dirfd, f->path, pl);
    if (r < 0) return r;
    int fd = openat(dirfd, f->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    for (size_t off = 0; off < f->len;) {
        ssize_t k = write(fd, f->data + off, f->len - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            r = k < 0 ? -errno : -EIO;
            close(fd);
            return r;
        }
        off += (size_t)k;
    }
    /* the group first (a chown clears set-id bits), then the exact mode, whatever the umask */
    if (pl->has_gid && fchown(fd, (uid_t)-1, pl->gid) < 0) r = -errno;
    if (!r && fchmod(fd, f->mode) < 0) r = -errno;
    if (close(fd) < 0 && !r) r = -errno;
    return r;
}

static void remove_tree(const char *path) {
    int r = kite_rm_rf(path);
    if (r < 0) log_warn(PODS_LOG, "removing %s: %s", path, strerror(-r));
}

/* A new, empty timestamped directory under dir; its name into *ret. */
static int new_ts_dir(const char *dir, int64_t now_wall, char **ret) {
    time_t secs = (time_t)(now_wall / KITE_NS_PER_SEC);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char stamp[64];
    strftime(stamp, sizeof(stamp), "..%Y_%m_%d_%H_%M_%S", &tm);
    long ns = (long)(now_wall % KITE_NS_PER_SEC);
    for (int attempt = 0; attempt < 1000; attempt++) {
        char *name = kite_asprintf("%s.%09ld", stamp, (ns + attempt) % KITE_NS_PER_SEC);
        _cleanup_free_ char *path = kite_asprintf("%s/%s", dir, name);
        if (mkdir(path, 0755) == 0) {
            (void)chmod(path, 0755);
            *ret = name;
            return 0;
        }
        int e = errno;
        free(name);
        if (e != EEXIST) return -e;
    }
    return -EEXIST;
}

int kite_pods_atomic_write(const char *dir, const struct pods_payload *pl, int64_t now_wall, char **ret_err) {
    for (size_t i = 0; i < pl->n; i++) {
        char *err = NULL;
        _cleanup_free_ char *clean = kite_pods_payload_path_clean(pl->f[i].path, &err);
        if (!clean || strcmp(clean, pl->f[i].path) != 0) {
            *ret_err = err ? err : kite_asprintf("invalid path: %s is not clean", pl->f[i].path);
            if (clean) free(err);
            return -EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            size_t lj = strlen(pl->f[j].path), li = strlen(pl->f[i].path);
            const char *a = lj < li ? pl->f[j].path : pl->f[i].path, *b = lj < li ? pl->f[i].path : pl->f[j].path;
            size_t la = KITE_MIN(li, lj);
            if (strncmp(a, b, la) == 0 && (b[la] == '/' || b[la] == 0)) {
                *ret_err = kite_asprintf("invalid payload: %s is both a file and a directory", a);
                return -EINVAL;
            }
        }
    }
    _cleanup_free_ char *data_link = kite_asprintf("%s/" DATA_DIR, dir), *tmp_link = kite_asprintf("%s/" DATA_TMP, dir);
    char target[256];
    ssize_t tl = readlink(data_link, target, sizeof(target) - 1);
    _cleanup_free_ char *old_ts = NULL;
    if (tl > 0) {
        target[tl] = 0;
        if (strncmp(target, "..", 2) == 0 && !strchr(target, '/')) old_ts = kite_strdup(target);
    }
    if (unchanged(dir, old_ts, pl)) return 0;

    _cleanup_free_ char *ts = NULL;
    int r = new_ts_dir(dir, now_wall, &ts);
    if (r < 0) {
        *ret_err = kite_asprintf("creating a directory in %s: %s", dir, strerror(-r));
        return r;
    }
    _cleanup_free_ char *ts_path = kite_asprintf("%s/%s", dir, ts);
    int fd = open(ts_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        *ret_err = kite_asprintf("opening %s: %s", ts_path, strerror(-r));
        remove_tree(ts_path);
        return r;
    }
    if ((r = own_dir_at(fd, ".", pl)) < 0) *ret_err = kite_asprintf("setting the group of %s: %s", ts_path, strerror(-r));
    for (size_t i = 0; i < pl->n && r == 0; i++)
        if ((r = write_file_at(fd, &pl->f[i], pl)) < 0)
            *ret_err = kite_asprintf("writing %s/%s: %s", ts_path, pl->f[i].path, strerror(-r));
    close(fd);
    if (r < 0) {
        remove_tree(ts_path);
        return r;
    }
    /* the user-visible entries: one symlink per top-level name, through ..data */
    for (size_t i = 0; i < pl->n; i++) {
        _cleanup_free_ char *top = top_of(pl->f[i].path), *vis = kite_asprintf("%s/%s", dir, top),
                            *to = kite_asprintf(DATA_DIR "/%s", top);
        struct stat st;
        if (lstat(vis, &st) == 0) continue;
        if (symlink(to, vis) < 0 && errno != EEXIST) {
            r = -errno;
            *ret_err = kite_asprintf("creating the symlink %s: %s", vis, strerror(-r));
            remove_tree(ts_path);
            return r;
        }
    }
    /* the swap: ..data_tmp -> the new directory, renamed over ..data */
    (void)unlink(tmp_link);
    if (symlink(ts, tmp_link) < 0 || rename(tmp_link, data_link) < 0) {
        r = -errno;
        *ret_err = kite_asprintf("swapping %s: %s", data_link, strerror(-r));
        (void)unlink(tmp_link);
        remove_tree(ts_path);
        return r;
    }
    /* user-visible symlinks into ..data whose name the payload no longer has */
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "..", 2) == 0 || strcmp(e->d_name, ".") == 0) continue;
        _cleanup_free_ char *vis = kite_asprintf("%s/%s", dir, e->d_name);
        char t[PATH_MAX_LEN + 16];
        ssize_t k = readlink(vis, t, sizeof(t) - 1);
        if (k <= 0) continue; /* not ours: a subPath's directory, say */
        t[k] = 0;
        _cleanup_free_ char *want = kite_asprintf(DATA_DIR "/%s", e->d_name);
        if (strcmp(t, want) != 0) continue;
        bool used = false;
        for (size_t i = 0; i < pl->n && !used; i++) {
            size_t tl2 = strcspn(pl->f[i].path, "/");
            used = tl2 == strlen(e->d_name) && strncmp(pl->f[i].path, e->d_name, tl2) == 0;
        }
        if (!used && unlink(vis) < 0) log_warn(PODS_LOG, "removing %s: %s", vis, strerror(errno));
    }
    if (d) closedir(d);
    if (old_ts && strcmp(old_ts, ts) != 0) {
        _cleanup_free_ char *old_path = kite_asprintf("%s/%s", dir, old_ts);
        remove_tree(old_path);
    }
    return 1;
}
