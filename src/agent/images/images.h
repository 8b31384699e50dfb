/* The agent's OCI image store, in a directory (<root>/images/):
 *   blobs/sha256/<hex>      every blob, verified against its digest on import
 *   index.json              {"<normalized name>": "sha256:<manifest hex>"}
 *   unpacked/<hex>/rootfs   the image's layers applied in order, whiteouts honoured
 * Writers take an flock on <dir>/lock, so `kite images` may run beside an agent. */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct kite_image;

/* A manifest or config blob bigger than this is refused (they are small JSON documents). */
#define KITE_IMAGE_JSON_MAX (4 * 1024 * 1024)

/* What a container needs from an image. Release with kite_image_info_release. */
struct kite_image_info {
    char *id;     /* manifest digest "sha256:..." */
    char *rootfs; /* absolute path of the unpacked root */
    char **env, **entrypoint, **cmd;
    size_t n_env, n_entrypoint, n_cmd;
    char *working_dir; /* NULL when the image sets none */
    char *user;        /* the config's User ("1000", "app", "1000:50"); NULL when it sets none */
};
void kite_image_info_release(struct kite_image_info *info);

/* "busybox" -> "docker.io/library/busybox:latest", "foo/bar:1" -> "docker.io/foo/bar:1",
 * digests kept. New string; NULL when name is empty or malformed. */
char *kite_image_normalize(const char *name);

/* Imports an OCI image layout tarball into dir (created when missing). On failure *ret_error
 * says why (a blob whose content does not match its digest: -EBADMSG). 0 or -errno. */
int kite_image_store_import(const char *dir, const char *tar_path, char ***ret_names, size_t *ret_n,
                            char **ret_error);
/* Every image: names (sorted) and size (manifest, config and layers). 0 or -errno; an absent
 * store has no images. */
int kite_image_store_list(const char *dir, struct kite_image **ret, size_t *ret_n);
/* The image named name (normalized first): -ENOENT when absent. */
int kite_image_store_get(const char *dir, const char *name, struct kite_image_info *ret);
/* Removes a name; blobs and the unpacked root no remaining name uses are deleted. -ENOENT. */
int kite_image_store_remove(const char *dir, const char *name);
/* The manifest digest of name, or -ENOENT. */
int kite_image_store_resolve(const char *dir, const char *name, char **ret_id);
