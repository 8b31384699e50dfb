/* The agent's container-runtime interface, in the CRI's shape (DESIGN.md "Runtime"): version and
 * images today; sandboxes, containers and logs are added beside them so a CRI (gRPC) backend can
 * sit next to `process` and `fake`. A runtime is used from one thread at a time. */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct kite_runtime;

/* One image as the runtime reports it. names and every names[i] are owned by the struct's
 * holder; free arrays with kite_images_free(). */
struct kite_image {
    char **names;
    size_t n_names;
    int64_t size_bytes;
};

struct kite_runtime_ops {
    const char *name; /* "kite-process", "fake" */
    /* *ret_name ("kite-process") and *ret_version ("0.1.0") are new strings the caller frees;
     * set only on success. 0 or -errno. */
    int (*version)(struct kite_runtime *rt, char **ret_name, char **ret_version);
    /* A new array (caller frees with kite_images_free); *ret may be NULL when *ret_n is 0.
     * 0 or -errno. */
    int (*list_images)(struct kite_runtime *rt, struct kite_image **ret, size_t *ret_n);
    /* Releases the runtime; NULL-safe callers use kite_runtime_free(). */
    void (*free)(struct kite_runtime *rt);
};

/* Every runtime embeds this as its first member. */
struct kite_runtime {
    const struct kite_runtime_ops *ops;
};

/* Frees v[0..n) and v itself. NULL-safe. */
void kite_images_free(struct kite_image *v, size_t n);

/* Deep copy of n images (new array, caller frees with kite_images_free). NULL when n == 0. */
struct kite_image *kite_images_dup(const struct kite_image *v, size_t n);

/* rt->ops->free(rt), NULL-safe. */
void kite_runtime_free(struct kite_runtime *rt);

/* Name of the process runtime and its version, as reported by version(). */
#define KITE_RUNTIME_PROCESS_NAME "kite-process"
#define KITE_RUNTIME_PROCESS_VERSION "0.1.0"

/* The process runtime (runs pods as plain processes; for now: version, and images from
 * <root_dir>/images/ if present). Each entry of that directory not starting with "." is one
 * image: its name is the entry name percent-decoded ("docker.io%2Flibrary%2Fnginx:1.27" ->
 * "docker.io/library/nginx:1.27"), its size the file's size, or for a directory the total size
 * of the regular files below it. root_dir is copied. 0 or -errno. */
int kite_runtime_process_new(const char *root_dir, struct kite_runtime **ret);

/* A fake runtime for tests: name "fake", the given version (copied; NULL = "0.0.0"), images
 * settable. Aborts on OOM, never NULL. */
struct kite_runtime *kite_runtime_fake_new(const char *version);
/* Replaces the fake's images with a deep copy of v[0..n) (borrowed). */
void kite_runtime_fake_set_images(struct kite_runtime *rt, const struct kite_image *v, size_t n);
/* Makes the fake's version()/list_images() fail with err (0 = succeed again). */
void kite_runtime_fake_set_error(struct kite_runtime *rt, int err);
