/* The process runtime: pods run as plain processes under <root_dir>. For now it answers
 * version() and lists the images stored under <root_dir>/images/ (one entry per image, the
 * entry name percent-encoded since image references contain '/'). */
#include "agent/runtime/runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

/* An images directory with more entries than this is cut short: node status shows at most 50
 * anyway, and the bound keeps a runaway directory from costing unbounded memory. */
#define KITE_RUNTIME_MAX_IMAGES 4096
/* Image trees deeper than this are not walked further (a layer tree is a few levels). */
#define KITE_RUNTIME_MAX_DEPTH 64

struct process_runtime {
    struct kite_runtime rt; /* first: the public handle */
    char *root_dir;
};

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "docker.io%2Flibrary%2Fnginx:1.27" -> "docker.io/library/nginx:1.27"; a '%' not followed by
 * two hex digits is kept literally. */
static char *percent_decode(const char *s) {
    char *out = kite_malloc(strlen(s) + 1), *o = out;
    for (const char *p = s; *p; p++) {
        int hi, lo;
        if (*p == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

/* Total size of the regular files below dirfd (consumed: closed before returning). */
static int64_t tree_size(int dirfd, int depth) {
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return 0;
    }
    int64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        struct stat st;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        if (S_ISREG(st.st_mode)) {
            total += st.st_size;
        } else if (S_ISDIR(st.st_mode) && depth < KITE_RUNTIME_MAX_DEPTH) {
            int fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) total += tree_size(fd, depth + 1);
        }
    }
    closedir(d);
    return total;
}

static int process_version(struct kite_runtime *rt, char **ret_name, char **ret_version) {
    *ret_name = kite_strdup(KITE_RUNTIME_PROCESS_NAME);
    *ret_version = kite_strdup(KITE_RUNTIME_PROCESS_VERSION);
    return 0;
}

static int process_list_images(struct kite_runtime *rt, struct kite_image **ret, size_t *ret_n) {
    struct process_runtime *p = (struct process_runtime *)rt;
    _cleanup_free_ char *dir = kite_asprintf("%s/images", p->root_dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno != ENOENT) return -errno;
        *ret = NULL; /* no images directory: no images */
        *ret_n = 0;
        return 0;
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        int e = -errno;
        close(dfd);
        return e;
    }
    struct kite_image *v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < KITE_RUNTIME_MAX_IMAGES) {
        if (de->d_name[0] == '.') continue;
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        int64_t size;
        if (S_ISREG(st.st_mode)) {
            size = st.st_size;
        } else if (S_ISDIR(st.st_mode)) {
            int fd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) continue;
            size = tree_size(fd, 1);
        } else {
            continue;
        }
        v = kite_realloc(v, (n + 1) * sizeof(*v));
        v[n].names = kite_malloc(sizeof(char *));
        v[n].names[0] = percent_decode(de->d_name);
        v[n].n_names = 1;
        v[n].size_bytes = size;
        n++;
    }
    closedir(d);
    *ret = v;
    *ret_n = n;
    return 0;
}

static void process_free(struct kite_runtime *rt) {
    struct process_runtime *p = (struct process_runtime *)rt;
    free(p->root_dir);
    free(p);
}

static const struct kite_runtime_ops process_ops = {
    .name = KITE_RUNTIME_PROCESS_NAME,
    .version = process_version,
    .list_images = process_list_images,
    .free = process_free,
};

int kite_runtime_process_new(const char *root_dir, struct kite_runtime **ret) {
    if (!root_dir || !*root_dir || !ret) return -EINVAL;
    struct process_runtime *p = kite_calloc(1, sizeof(*p));
    p->rt.ops = &process_ops;
    p->root_dir = kite_strdup(root_dir);
    *ret = &p->rt;
    return 0;
}
