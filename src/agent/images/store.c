/* The OCI image store (images.h). Tarballs and layers are read with libarchive; blobs are
 * hashed with GnuTLS while they are copied, so a blob is checked before anything uses it. */
#include "agent/images/images.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gnutls/crypto.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/runtime/runtime.h"
#include "agent/images/libarchive.h"
#include "base/base.h"
#include "json/obj.h"

#define ANNOT_FULL_NAME "io.containerd.image.name"
#define ANNOT_REF_NAME "org.opencontainers.image.ref.name"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

void kite_image_info_release(struct kite_image_info *info) {
    if (!info) return;
    free(info->id);
    free(info->rootfs);
    kite_strv_free(info->env, info->n_env);
    kite_strv_free(info->entrypoint, info->n_entrypoint);
    kite_strv_free(info->cmd, info->n_cmd);
    free(info->working_dir);
    free(info->user);
    *info = (struct kite_image_info){0};
}

char *kite_image_normalize(const char *name) {
    if (!name || !*name || strchr(name, ' ') || name[0] == '/' || name[strlen(name) - 1] == '/') return NULL;
    const char *slash = strchr(name, '/');
    _cleanup_free_ char *full = NULL;
    /* a first component with '.' or ':' or "localhost" is a registry host (docker's rule) */
    if (slash && (memchr(name, '.', slash - name) || memchr(name, ':', slash - name) ||
                  (slash - name == 9 && strncmp(name, "localhost", 9) == 0)))
        full = kite_strdup(name);
    else if (slash)
        full = kite_asprintf("docker.io/%s", name);
    else
        full = kite_asprintf("docker.io/library/%s", name);
    const char *last = strrchr(full, '/');
    if (strchr(last, '@') || strchr(last, ':')) return TAKE_PTR(full);
    return kite_asprintf("%s:latest", full);
}

static bool is_hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

/* "sha256:<hex>" -> pointer to hex, or NULL */
static const char *digest_hex(const char *d) {
    if (!d || !kite_startswith(d, "sha256:") || !is_hex64(d + 7)) return NULL;
    return d + 7;
}


static char *errf(const char *fmt, ...) KITE_PRINTF(1, 2);
static char *errf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) abort();
    va_end(ap);
    return s;
}

static int lock_store(const char *dir) {
    _cleanup_free_ char *p = kite_asprintf("%s/lock", dir);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    if (flock(fd, LOCK_EX) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

static json_object *read_json(const char *path, int *ret_err) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = kite_read_file(path, KITE_IMAGE_JSON_MAX, &text, &len);
    if (r < 0) {
        *ret_err = r;
        return NULL;
    }
    json_object *o = json_tokener_parse(text);
    if (!o) *ret_err = -EBADMSG;
    return o;
}

static json_object *read_index(const char *dir, int *ret_err) {
    _cleanup_free_ char *p = kite_asprintf("%s/index.json", dir);
    int r = 0;
    json_object *o = read_json(p, &r);
    if (!o && r == -ENOENT) return json_object_new_object();
    if (o && !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        o = NULL;
        r = -EBADMSG;
    }
    *ret_err = r;
    return o;
}

static int write_index(const char *dir, json_object *idx) {
    _cleanup_free_ char *p = kite_asprintf("%s/index.json", dir);
    const char *s = json_object_to_json_string_ext(idx, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    return kite_write_file_atomic(p, s, strlen(s), 0644, false);
}

/* ---- import ----------------------------------------------------------------------------- */

/* Copies the current entry to path while hashing; compares with want_hex. */
static int copy_blob(struct archive *a, const char *path, const char *want_hex, char **ret_error) {
    const struct kite_libarchive *la = kite_libarchive_load(NULL); /* loaded by the import */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    gnutls_hash_hd_t h;
    if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0) {
        close(fd);
        return -ENOMEM;
    }
    char buf[65536];
    int r = 0;
    for (;;) {
        la_ssize_t n = la->archive_read_data(a, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) {
            *ret_error = errf("reading blob sha256:%s: %s", want_hex, la->archive_error_string(a));
            r = -EIO;
            break;
        }
        gnutls_hash(h, buf, (size_t)n);
        for (la_ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0) {
                r = -errno;
                break;
            }
            off += w;
        }
        if (r < 0) break;
    }
    unsigned char md[32];
    gnutls_hash_deinit(h, md);
    if (close(fd) < 0 && r == 0) r = -errno;
    if (r < 0) return r;
    char got[65];
    for (int i = 0; i < 32; i++) snprintf(got + 2 * i, 3, "%02x", md[i]);
    if (strcmp(got, want_hex) != 0) {
        *ret_error = errf("blob sha256:%s: content has digest sha256:%s (corrupted or tampered)", want_hex, got);
        return -EBADMSG;
    }
    return 0;
}

/* A blob present in the store with the descriptor's size. */
static int check_blob(const char *dir, json_object *desc, const char **ret_hex, char **ret_error) {
    const char *digest = kite_obj_str(desc, "digest"), *hex = digest_hex(digest);
    if (!hex) {
        *ret_error = errf("descriptor digest %s: only sha256 digests are supported", digest ? digest : "(none)");
        return -EBADMSG;
    }
    _cleanup_free_ char *p = kite_asprintf("%s/blobs/sha256/%s", dir, hex);
    struct stat st;
    if (stat(p, &st) < 0) {
        *ret_error = errf("blob %s is referenced but not in the archive", digest);
        return -EBADMSG;
    }
    json_object *size = NULL;
    if (json_object_object_get_ex(desc, "size", &size) && json_object_get_int64(size) != (int64_t)st.st_size) {
        *ret_error = errf("blob %s has %lld bytes, its descriptor says %lld", digest, (long long)st.st_size,
                          (long long)json_object_get_int64(size));
        return -EBADMSG;
    }
    *ret_hex = hex;
    return 0;
}

/* Strips "./" and "/" prefixes; NULL when a component is "..". New string. */
static char *clean_path(const char *p) {
    while (*p == '/' || (p[0] == '.' && p[1] == '/')) p += (*p == '/') ? 1 : 2;
    _cleanup_free_ char *s = kite_strdup(p);
    size_t n = strlen(s);
    while (n && s[n - 1] == '/') s[--n] = 0;
    for (char *c = s; c && *c;) {
        char *e = strchr(c, '/');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == 2 && c[0] == '.' && c[1] == '.') return NULL;
        c = e ? e + 1 : NULL;
    }
    return TAKE_PTR(s);
}

/* Removes everything inside dir (an opaque whiteout). */
static int empty_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -errno;
    struct dirent *e;
    int r = 0;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        _cleanup_free_ char *p = kite_asprintf("%s/%s", dir, e->d_name);
        int q = kite_rm_rf(p);
        if (q < 0 && r == 0) r = q;
    }
    closedir(d);
    return r;
}

/* True when rootfs/rel resolves inside rootfs (no symlink leads out). */
static bool inside(const char *rootfs, const char *rel) {
    _cleanup_free_ char *p = kite_asprintf("%s/%s", rootfs, rel);
    char *real = realpath(p, NULL);
    if (!real) return errno == ENOENT; /* nothing there to remove */
    bool ok = kite_startswith(real, rootfs) && (real[strlen(rootfs)] == '/' || real[strlen(rootfs)] == 0);
    free(real);
    return ok;
}

static struct archive *open_layer(const char *path) {
    const struct kite_libarchive *la = kite_libarchive_load(NULL); /* loaded by the import */
    struct archive *a = la->archive_read_new();
    la->archive_read_support_filter_all(a);
    la->archive_read_support_format_tar(a);
    if (la->archive_read_open_filename(a, path, 65536) != ARCHIVE_OK) {
        la->archive_read_free(a);
        return NULL;
    }
    return a;
}

/* Applies one layer to rootfs: its whiteouts first (they delete what lower layers made), then
 * its other entries, extracted without following symlinks out of the root. */
static int apply_layer(const char *rootfs, const char *layer, char **ret_error) {
    const struct kite_libarchive *la = kite_libarchive_load(NULL); /* loaded by the import */
    struct archive *a = open_layer(layer);
    if (!a) {
        *ret_error = errf("layer %s: not a readable tar", layer);
        return -EBADMSG;
    }
    struct archive_entry *e;
    int r = 0, ar;
    while ((ar = la->archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        _cleanup_free_ char *p = clean_path(la->archive_entry_pathname(e));
        if (!p) continue;
        char *base = strrchr(p, '/');
        base = base ? base + 1 : p;
        if (!kite_startswith(base, ".wh.")) continue;
        _cleanup_free_ char *dir = base == p ? kite_strdup("") : kite_strndup(p, (size_t)(base - p - 1));
        if (!inside(rootfs, dir)) continue;
        _cleanup_free_ char *target = strcmp(base, ".wh..wh..opq") == 0
                                          ? kite_asprintf("%s/%s", rootfs, dir)
                                          : kite_asprintf("%s/%s/%s", rootfs, dir, base + 4);
        r = strcmp(base, ".wh..wh..opq") == 0 ? empty_dir(target) : kite_rm_rf(target);
        if (r < 0) {
            *ret_error = errf("layer %s: whiteout %s: %s", layer, p, strerror(-r));
            break;
        }
    }
    if (r == 0 && ar != ARCHIVE_EOF) {
        *ret_error = errf("layer %s: %s", layer, la->archive_error_string(a));
        r = -EBADMSG;
    }
    la->archive_read_free(a);
    if (r < 0) return r;

    a = open_layer(layer);
    if (!a) return -EIO;
    struct archive *w = la->archive_write_disk_new();
    la->archive_write_disk_set_options(w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_OWNER |
                                          ARCHIVE_EXTRACT_XATTR | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_UNLINK);
    while ((ar = la->archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        _cleanup_free_ char *p = clean_path(la->archive_entry_pathname(e));
        if (!p || !*p) continue;
        const char *base = strrchr(p, '/');
        base = base ? base + 1 : p;
        if (kite_startswith(base, ".wh.")) continue;
        _cleanup_free_ char *dst = kite_asprintf("%s/%s", rootfs, p);
        la->archive_entry_set_pathname(e, dst);
        const char *hl = la->archive_entry_hardlink(e);
        if (hl) {
            _cleanup_free_ char *hp = clean_path(hl);
            if (!hp) continue;
            _cleanup_free_ char *hdst = kite_asprintf("%s/%s", rootfs, hp);
            la->archive_entry_set_hardlink(e, hdst);
        }
        if (la->archive_write_header(w, e) < ARCHIVE_WARN) {
            *ret_error = errf("layer %s: extracting %s: %s", layer, p, la->archive_error_string(w));
            r = -EIO;
            break;
        }
        const void *buf;
        size_t size;
        la_int64_t off;
        int dr;
        while ((dr = la->archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK)
            if (la->archive_write_data_block(w, buf, size, off) < ARCHIVE_WARN) break;
        if (dr < ARCHIVE_WARN) {
            *ret_error = errf("layer %s: reading %s: %s", layer, p, la->archive_error_string(a));
            r = -EBADMSG;
            break;
        }
        la->archive_write_finish_entry(w);
    }
    if (r == 0 && ar != ARCHIVE_EOF) {
        *ret_error = errf("layer %s: %s", layer, la->archive_error_string(a));
        r = -EBADMSG;
    }
    la->archive_write_close(w);
    la->archive_write_free(w);
    la->archive_read_free(a);
    return r;
}

/* Unpacks the manifest's layers into unpacked/<hex>/rootfs unless already there. */
static int unpack(const char *dir, const char *mhex, json_object *manifest, char **ret_error) {
    _cleanup_free_ char *done = kite_asprintf("%s/unpacked/%s", dir, mhex);
    struct stat st;
    if (stat(done, &st) == 0) return 0;
    char rnd[8];
    kite_random_bytes(rnd, sizeof rnd);
    _cleanup_free_ char *tmp = kite_asprintf("%s/unpacked/.tmp-%02x%02x%02x%02x", dir, rnd[0] & 0xff, rnd[1] & 0xff,
                                             rnd[2] & 0xff, rnd[3] & 0xff);
    _cleanup_free_ char *rootfs = kite_asprintf("%s/rootfs", tmp);
    int r = kite_mkdir_p(rootfs, 0755);
    if (r < 0) return r;
    json_object *layers = NULL;
    json_object_object_get_ex(manifest, "layers", &layers);
    size_t n = json_object_is_type(layers, json_type_array) ? json_object_array_length(layers) : 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        const char *hex = NULL;
        if ((r = check_blob(dir, json_object_array_get_idx(layers, i), &hex, ret_error)) < 0) break;
        _cleanup_free_ char *lp = kite_asprintf("%s/blobs/sha256/%s", dir, hex);
        r = apply_layer(rootfs, lp, ret_error);
    }
    if (r == 0 && rename(tmp, done) < 0) r = errno == ENOTEMPTY || errno == EEXIST ? 0 : -errno;
    if (r < 0 || stat(tmp, &st) == 0) kite_rm_rf(tmp);
    return r;
}

static char *entry_name(json_object *desc) {
    json_object *ann = NULL;
    json_object_object_get_ex(desc, "annotations", &ann);
    const char *full = kite_obj_str(ann, ANNOT_FULL_NAME), *ref = kite_obj_str(ann, ANNOT_REF_NAME);
    if (full) return kite_image_normalize(full);
    /* a ref.name that is a whole reference (skopeo writes those); a bare tag names nothing */
    if (ref && (strchr(ref, '/') || strchr(ref, ':'))) return kite_image_normalize(ref);
    return NULL;
}

int kite_image_store_import(const char *dir, const char *tar_path, char ***ret_names, size_t *ret_n,
                            char **ret_error) {
    _cleanup_free_ char *err = NULL;
    _cleanup_free_ char *blobs = kite_asprintf("%s/blobs/sha256", dir), *unp = kite_asprintf("%s/unpacked", dir);
    _cleanup_free_ char *tmpd = kite_asprintf("%s/tmp", dir);
    int r;
    if ((r = kite_mkdir_p(blobs, 0755)) < 0 || (r = kite_mkdir_p(unp, 0755)) < 0 || (r = kite_mkdir_p(tmpd, 0700)) < 0) {
        if (ret_error) *ret_error = errf("creating %s: %s", dir, strerror(-r));
        return r;
    }
    char *lerr = NULL;
    const struct kite_libarchive *la = kite_libarchive_load(&lerr);
    if (!la) {
        if (ret_error) *ret_error = lerr;
        else free(lerr);
        return -ENOENT;
    }
    int lock = lock_store(dir);
    if (lock < 0) return lock;
    struct archive *a = la->archive_read_new();
    la->archive_read_support_filter_all(a);
    la->archive_read_support_format_tar(a);
    json_object *index = NULL, *idx = NULL;
    char **names = NULL;
    size_t n_names = 0;
    if (la->archive_read_open_filename(a, tar_path, 65536) != ARCHIVE_OK) {
        err = errf("%s: %s", tar_path, la->archive_error_string(a));
        r = -EBADMSG;
        goto out;
    }
    struct archive_entry *e;
    int ar;
    while ((ar = la->archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        _cleanup_free_ char *p = clean_path(la->archive_entry_pathname(e));
        if (!p) continue;
        if (strcmp(p, "index.json") == 0) {
            int64_t size = la->archive_entry_size(e);
            if (size > KITE_IMAGE_JSON_MAX) {
                err = errf("index.json: larger than %d bytes", KITE_IMAGE_JSON_MAX);
                r = -EFBIG;
                goto out;
            }
            _cleanup_free_ char *text = kite_calloc(1, (size_t)size + 1);
            if (la->archive_read_data(a, text, (size_t)size) != size) {
                err = errf("index.json: %s", la->archive_error_string(a));
                r = -EBADMSG;
                goto out;
            }
            json_object_put(index);
            index = json_tokener_parse(text);
        } else if (kite_startswith(p, "blobs/") && la->archive_entry_filetype(e) == AE_IFREG) {
            if (!kite_startswith(p, "blobs/sha256/") || !is_hex64(p + 13)) {
                err = errf("%s: only sha256 blobs are supported", p);
                r = -EBADMSG;
                goto out;
            }
            _cleanup_free_ char *tmp = kite_asprintf("%s/%s", tmpd, p + 13);
            _cleanup_free_ char *dst = kite_asprintf("%s/%s", blobs, p + 13);
            if ((r = copy_blob(a, tmp, p + 13, &err)) < 0) {
                unlink(tmp);
                goto out;
            }
            if (rename(tmp, dst) < 0) {
                r = -errno;
                goto out;
            }
        }
    }
    if (ar != ARCHIVE_EOF) {
        err = errf("%s: %s", tar_path, la->archive_error_string(a));
        r = -EBADMSG;
        goto out;
    }
    json_object *mans = NULL;
    if (!index || !json_object_object_get_ex(index, "manifests", &mans) ||
        !json_object_is_type(mans, json_type_array)) {
        err = errf("%s: no index.json with a manifests list (not an OCI image layout)", tar_path);
        r = -EBADMSG;
        goto out;
    }
    if (!(idx = read_index(dir, &r))) goto out;
    for (size_t i = 0; i < json_object_array_length(mans); i++) {
        json_object *desc = json_object_array_get_idx(mans, i);
        const char *mt = kite_obj_str(desc, "mediaType");
        if (mt && strcmp(mt, MT_MANIFEST) != 0 && strcmp(mt, MT_DOCKER_MANIFEST) != 0) {
            err = errf("index entry %zu: media type %s is not supported (image indexes are not)", i, mt);
            r = -EOPNOTSUPP;
            goto out;
        }
        _cleanup_free_ char *name = entry_name(desc);
        if (!name) {
            err = errf("index entry %zu: no image name (annotation " ANNOT_FULL_NAME " or a full " ANNOT_REF_NAME ")", i);
            r = -EINVAL;
            goto out;
        }
        const char *mhex = NULL, *chex = NULL;
        if ((r = check_blob(dir, desc, &mhex, &err)) < 0) goto out;
        _cleanup_free_ char *mpath = kite_asprintf("%s/%s", blobs, mhex);
        json_object *manifest = read_json(mpath, &r), *cfg = NULL;
        if (!manifest) {
            err = errf("manifest sha256:%s: not JSON", mhex);
            goto out;
        }
        if (!json_object_object_get_ex(manifest, "config", &cfg) || (r = check_blob(dir, cfg, &chex, &err)) < 0 ||
            (r = unpack(dir, mhex, manifest, &err)) < 0) {
            if (!err) err = errf("manifest sha256:%s: no config", mhex);
            if (r == 0) r = -EBADMSG;
            json_object_put(manifest);
            goto out;
        }
        json_object_put(manifest);
        _cleanup_free_ char *mdigest = kite_asprintf("sha256:%s", mhex);
        json_object_object_add(idx, name, json_object_new_string(mdigest));
        names = kite_realloc(names, (n_names + 1) * sizeof(char *));
        names[n_names++] = TAKE_PTR(name);
    }
    r = write_index(dir, idx);
out:
    la->archive_read_free(a);
    json_object_put(index);
    json_object_put(idx);
    close(lock);
    if (r < 0) {
        if (ret_error) *ret_error = err ? TAKE_PTR(err) : errf("%s", strerror(-r));
        kite_strv_free(names, n_names);
        return r;
    }
    if (ret_names) {
        *ret_names = names;
        *ret_n = n_names;
    } else {
        kite_strv_free(names, n_names);
    }
    return 0;
}

/* ---- queries ---------------------------------------------------------------------------- */

static int64_t manifest_size(const char *dir, const char *mhex) {
    _cleanup_free_ char *p = kite_asprintf("%s/blobs/sha256/%s", dir, mhex);
    int r = 0;
    json_object *m = read_json(p, &r), *cfg = NULL, *layers = NULL, *v = NULL;
    if (!m) return 0;
    int64_t size = 0;
    if (json_object_object_get_ex(m, "config", &cfg) && json_object_object_get_ex(cfg, "size", &v))
        size += json_object_get_int64(v);
    if (json_object_object_get_ex(m, "layers", &layers) && json_object_is_type(layers, json_type_array))
        for (size_t i = 0; i < json_object_array_length(layers); i++)
            if (json_object_object_get_ex(json_object_array_get_idx(layers, i), "size", &v))
                size += json_object_get_int64(v);
    json_object_put(m);
    return size;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int kite_image_store_list(const char *dir, struct kite_image **ret, size_t *ret_n) {
    int r = 0;
    json_object *idx = read_index(dir, &r);
    if (!idx) return r;
    struct kite_image *v = NULL;
    size_t n = 0;
    json_object_object_foreach(idx, name, val) {
        const char *id = json_object_get_string(val);
        size_t i = 0;
        while (i < n && strcmp(v[i].id, id) != 0) i++;
        if (i == n) {
            v = kite_realloc(v, (n + 1) * sizeof(*v));
            v[n++] = (struct kite_image){.id = kite_strdup(id), .size_bytes = digest_hex(id) ? manifest_size(dir, id + 7) : 0};
        }
        v[i].names = kite_realloc(v[i].names, (v[i].n_names + 1) * sizeof(char *));
        v[i].names[v[i].n_names++] = kite_strdup(name);
    }
    for (size_t i = 0; i < n; i++) qsort(v[i].names, v[i].n_names, sizeof(char *), cmp_str);
    json_object_put(idx);
    *ret = v;
    *ret_n = n;
    return 0;
}

int kite_image_store_resolve(const char *dir, const char *name, char **ret_id) {
    _cleanup_free_ char *norm = kite_image_normalize(name);
    if (!norm) return -EINVAL;
    int r = 0;
    json_object *idx = read_index(dir, &r);
    if (!idx) return r;
    const char *id = kite_obj_str(idx, norm);
    /* a digest names its image too */
    if (!id && digest_hex(name)) {
        json_object_object_foreach(idx, k, val) {
            (void)k;
            if (strcmp(json_object_get_string(val), name) == 0) id = name;
        }
    }
    r = id && digest_hex(id) ? 0 : -ENOENT;
    if (r == 0) *ret_id = kite_strdup(id);
    json_object_put(idx);
    return r;
}

static char **strv_from(json_object *arr, size_t *ret_n) {
    *ret_n = 0;
    if (!json_object_is_type(arr, json_type_array)) return NULL;
    size_t n = json_object_array_length(arr);
    char **v = n ? kite_calloc(n, sizeof(char *)) : NULL;
    for (size_t i = 0; i < n; i++) v[i] = kite_strdup(json_object_get_string(json_object_array_get_idx(arr, i)));
    *ret_n = n;
    return v;
}

int kite_image_store_get(const char *dir, const char *name, struct kite_image_info *ret) {
    _cleanup_free_ char *id = NULL;
    int r = kite_image_store_resolve(dir, name, &id);
    if (r < 0) return r;
    _cleanup_free_ char *mp = kite_asprintf("%s/blobs/sha256/%s", dir, id + 7);
    json_object *m = read_json(mp, &r), *cfgd = NULL;
    if (!m) return r;
    const char *chex = json_object_object_get_ex(m, "config", &cfgd) ? digest_hex(kite_obj_str(cfgd, "digest")) : NULL;
    _cleanup_free_ char *cp = chex ? kite_asprintf("%s/blobs/sha256/%s", dir, chex) : NULL;
    json_object_put(m);
    if (!cp) return -EBADMSG;
    json_object *c = read_json(cp, &r), *config = NULL, *v = NULL;
    if (!c) return r;
    *ret = (struct kite_image_info){.id = TAKE_PTR(id)};
    ret->rootfs = kite_asprintf("%s/unpacked/%s/rootfs", dir, ret->id + 7);
    if (json_object_object_get_ex(c, "config", &config)) {
        if (json_object_object_get_ex(config, "Env", &v)) ret->env = strv_from(v, &ret->n_env);
        if (json_object_object_get_ex(config, "Entrypoint", &v)) ret->entrypoint = strv_from(v, &ret->n_entrypoint);
        if (json_object_object_get_ex(config, "Cmd", &v)) ret->cmd = strv_from(v, &ret->n_cmd);
        const char *wd = kite_obj_str(config, "WorkingDir");
        if (wd && *wd) ret->working_dir = kite_strdup(wd);
        const char *user = kite_obj_str(config, "User");
        if (user && *user) ret->user = kite_strdup(user);
    }
    json_object_put(c);
    struct stat st;
    if (stat(ret->rootfs, &st) < 0) {
        kite_image_info_release(ret);
        return -ENOENT;
    }
    return 0;
}

/* Deletes blobs and unpacked roots that no name in idx reaches. */
static void gc(const char *dir, json_object *idx) {
    json_object *keep = json_object_new_object();
    json_object_object_foreach(idx, k, val) {
        (void)k;
        const char *mhex = digest_hex(json_object_get_string(val));
        if (!mhex) continue;
        json_object_object_add(keep, mhex, NULL);
        _cleanup_free_ char *mp = kite_asprintf("%s/blobs/sha256/%s", dir, mhex);
        int r = 0;
        json_object *m = read_json(mp, &r), *cfg = NULL, *layers = NULL;
        if (!m) continue;
        if (json_object_object_get_ex(m, "config", &cfg) && digest_hex(kite_obj_str(cfg, "digest")))
            json_object_object_add(keep, digest_hex(kite_obj_str(cfg, "digest")), NULL);
        if (json_object_object_get_ex(m, "layers", &layers) && json_object_is_type(layers, json_type_array))
            for (size_t i = 0; i < json_object_array_length(layers); i++) {
                const char *h = digest_hex(kite_obj_str(json_object_array_get_idx(layers, i), "digest"));
                if (h) json_object_object_add(keep, h, NULL);
            }
        json_object_put(m);
    }
    const char *subs[] = {"blobs/sha256", "unpacked"};
    for (size_t s = 0; s < 2; s++) {
        _cleanup_free_ char *d = kite_asprintf("%s/%s", dir, subs[s]);
        DIR *dh = opendir(d);
        if (!dh) continue;
        struct dirent *e;
        while ((e = readdir(dh))) {
            if (e->d_name[0] == '.' || json_object_object_get_ex(keep, e->d_name, NULL)) continue;
            _cleanup_free_ char *p = kite_asprintf("%s/%s", d, e->d_name);
            kite_rm_rf(p);
        }
        closedir(dh);
    }
    json_object_put(keep);
}

int kite_image_store_remove(const char *dir, const char *name) {
    _cleanup_free_ char *norm = kite_image_normalize(name);
    if (!norm) return -EINVAL;
    struct stat st;
    if (stat(dir, &st) < 0) return -ENOENT;
    int lock = lock_store(dir);
    if (lock < 0) return lock;
    int r = 0;
    json_object *idx = read_index(dir, &r);
    if (idx) {
        if (!json_object_object_get_ex(idx, norm, NULL)) {
            r = -ENOENT;
        } else {
            json_object_object_del(idx, norm);
            if ((r = write_index(dir, idx)) == 0) gc(dir, idx);
        }
        json_object_put(idx);
    }
    close(lock);
    return r;
}
