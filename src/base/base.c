#include "base/base.h"

#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

/* mimalloc's, when the binary links it (build/kite); NULL in the others */
extern void mi_collect(bool force) __attribute__((weak));

void kite_mem_trim(void) {
    if (mi_collect) {
        mi_collect(true);
        return;
    }
    /* one at a time: where malloc is not glibc's (the sanitizers' allocators), the first
     * malloc_trim initializes glibc's arenas, and two threads doing it at once crashed */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    malloc_trim(0);
    pthread_mutex_unlock(&mu);
}

static void *oom(void) {
    fputs("kite: out of memory\n", stderr);
    abort();
}

void *kite_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    return p ? p : oom();
}

void *kite_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    return p ? p : oom();
}

void *kite_realloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    return p ? p : oom();
}

char *kite_strdup(const char *s) {
    char *p = strdup(s ? s : "");
    return p ? p : oom();
}

char *kite_strndup(const char *s, size_t n) {
    char *p = strndup(s, n);
    return p ? p : oom();
}

char *kite_asprintf(const char *fmt, ...) {
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    return r < 0 ? oom() : s;
}

int kite_parse_int64(const char *s, int64_t *ret) {
    if (!s || !*s) return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE) return -ERANGE;
    if (*end || end == s || (s[0] == '+') || (s[0] == ' ')) return -EINVAL;
    *ret = v;
    return 0;
}

#include <sys/random.h>

void kite_random_bytes(void *buf, size_t n) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            abort(); /* getrandom(2) does not fail on supported kernels */
        }
        p += r;
        n -= (size_t)r;
    }
}

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/buf.h"

int kite_read_file(const char *path, size_t max, char **ret, size_t *ret_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct kite_buf b = {0};
    kite_buf_grow(&b, 4096);
    b.p[0] = 0;
    int r = 0;
    for (;;) {
        kite_buf_grow(&b, 4096);
        ssize_t n = read(fd, b.p + b.len, b.cap - b.len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        if (n == 0) break;
        b.len += (size_t)n;
        b.p[b.len] = 0;
        if (b.len > max) {
            r = -EFBIG;
            break;
        }
    }
    close(fd);
    if (r < 0) {
        kite_buf_release(&b);
        return r;
    }
    *ret = kite_buf_detach(&b, ret_len);
    return 0;
}

int kite_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode, bool unchanged) {
    if (unchanged) {
        char *old = NULL;
        size_t old_len = 0;
        bool same = kite_read_file(path, len, &old, &old_len) == 0 && old_len == len && memcmp(old, data, len) == 0;
        free(old);
        if (same) return 0;
    }
    char *tmp = kite_asprintf("%s.tmp", path);
    int r = 0, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) {
        r = -errno;
        free(tmp);
        return r;
    }
    if (fchmod(fd, (mode_t)mode) < 0) r = -errno;
    for (size_t off = 0; r == 0 && off < len;) {
        ssize_t n = write(fd, (const char *)data + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) r = -errno;
        else off += (size_t)n;
    }
    if (r == 0 && fsync(fd) < 0) r = -errno;
    if (close(fd) < 0 && r == 0) r = -errno;
    if (r == 0 && rename(tmp, path) < 0) r = -errno;
    if (r < 0) unlink(tmp);
    free(tmp);
    return r;
}

int kite_mkdir_p(const char *path, unsigned mode) {
    char *p = kite_strdup(path);
    int r = 0;
    for (char *s = p + 1; *s && r == 0; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) r = -errno;
            *s = '/';
        }
    if (r == 0 && mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) r = -errno;
    free(p);
    return r;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)f;
    if (flag == FTW_DP || flag == FTW_D) return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
    return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int kite_rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode)) return unlink(path) < 0 ? -errno : 0;
    return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 ? -errno : 0;
}
