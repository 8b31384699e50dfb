/* kite base: allocation, cleanup attributes, small helpers used everywhere.
 *
 * Conventions (STYLE.md): functions return 0 or -errno; constructors return NULL only
 * on failure; allocation failure aborts the process (there is no sane recovery in a
 * server that must not lose acknowledged writes half-way). */
#pragma once
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KITE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define KITE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KITE_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KITE_UNUSED __attribute__((unused))
#define KITE_PRINTF(f, a) __attribute__((format(printf, f, a)))

void *kite_malloc(size_t n);
void *kite_calloc(size_t n, size_t size);
void *kite_realloc(void *p, size_t n);
char *kite_strdup(const char *s);
char *kite_strndup(const char *s, size_t n);
char *kite_asprintf(const char *fmt, ...) KITE_PRINTF(1, 2);
/* Gives memory the calling thread freed back to the system now: mimalloc (build/kite) keeps
 * freed pages of a thread's heap until that thread allocates again, so a burst of large
 * buffers freed by a thread that then idles stays resident. glibc's malloc: malloc_trim. */
void kite_mem_trim(void);

/* systemd-style scope cleanup: `_cleanup_free_ char *s = ...;` and TAKE_PTR(s) to hand it on. */
/* Saturating int64 arithmetic for values a client chooses (seconds turned into ns, durations
 * added to times, quantities scaled): past the range the result sticks at INT64_MAX or
 * INT64_MIN instead of wrapping, so "forever" stays forever and a huge request stays huge. */
static inline int64_t kite_sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}
static inline int64_t kite_sat_sub(int64_t a, int64_t b) {
    int64_t r;
    if (!__builtin_sub_overflow(a, b, &r)) return r;
    return b < 0 ? INT64_MAX : INT64_MIN;
}
static inline int64_t kite_sat_mul(int64_t a, int64_t b) {
    int64_t r;
    if (!__builtin_mul_overflow(a, b, &r)) return r;
    return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

static inline void kite_freep(void *p) { free(*(void **)p); }
#define _cleanup_free_ __attribute__((cleanup(kite_freep)))
#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })

static inline bool kite_streq(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}
static inline bool kite_startswith(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}
/* Parses a base-10 int64 with no trailing garbage. 0 or -EINVAL/-ERANGE. */
int kite_parse_int64(const char *s, int64_t *ret);
/* Fills buf with n bytes from the kernel's CSPRNG (getrandom). */
void kite_random_bytes(void *buf, size_t n);
/* Reads a whole file into *ret (malloc'ed, NUL-terminated; *ret_len may be NULL).
 * -EFBIG when it holds more than max bytes; -errno from open/read. */
int kite_read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* Replaces path with len bytes of data, created with mode, so that a crash leaves the old file
 * or the new one, never a torn one (a temporary file beside it, fsync, rename). When unchanged
 * is true and the file already holds exactly data, nothing is written (no disk space needed).
 * 0 or -errno; the temporary file is removed on failure. */
/* mkdir -p: creates path and its missing parents with mode. 0 or -errno. */
int kite_mkdir_p(const char *path, unsigned mode);
/* rm -rf that stays on one filesystem (a mount below path is left, not emptied) and never
 * follows symlinks. 0 (also when path does not exist) or -errno. */
int kite_rm_rf(const char *path);
int kite_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode, bool unchanged);
