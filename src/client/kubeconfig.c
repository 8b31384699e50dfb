/* kubeconfig loading. Only what a node agent needs is read: cluster server/CA/insecure and
 * user cert/key/token. exec/auth-provider plugins are not supported (an error names them). */
#include "client/kubeconfig.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base64.h"
#include "json/obj.h"
#include "api/yaml.h"

static int read_blob(const char *path, const char *base_dir, char **ret, size_t *ret_len) {
    _cleanup_free_ char *full = NULL;
    if (path[0] != '/' && base_dir) full = kite_asprintf("%s/%s", base_dir, path);
    int fd = open(full ? full : path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            buf = kite_realloc(buf, cap + 1);
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = -errno;
            close(fd);
            free(buf);
            return e;
        }
        if (n == 0) break;
        len += (size_t)n;
        if (len > KITE_KUBECONFIG_MAX_BLOB) {
            close(fd);
            free(buf);
            return -EFBIG;
        }
    }
    close(fd);
    if (!buf) buf = kite_malloc(1);
    buf[len] = 0;
    *ret = buf;
    *ret_len = len;
    return 0;
}

/* Finds {name: NAME, <kind>: {...}} in root[list]. */
static json_object *named(json_object *root, const char *list, const char *kind, const char *name) {
    json_object *a;
    if (!json_object_object_get_ex(root, list, &a) || !json_object_is_type(a, json_type_array)) return NULL;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        json_object *e = json_object_array_get_idx(a, i), *inner;
        if (kite_streq(kite_obj_str(e, "name"), name) && json_object_object_get_ex(e, kind, &inner) &&
            json_object_is_type(inner, json_type_object))
            return inner;
    }
    return NULL;
}

/* Reads a "<x>-data" (base64) or "<x>" (path) pair; neither = not set. */
static int data_or_file(json_object *o, const char *data_key, const char *file_key, const char *base_dir,
                        char **ret, size_t *ret_len, char **ret_err) {
    const char *d = kite_obj_str(o, data_key), *f = kite_obj_str(o, file_key);
    int r;
    if (d && *d) {
        if (strlen(d) > KITE_KUBECONFIG_MAX_BLOB * 2) r = -EFBIG;
        else r = kite_base64_decode(d, ret, ret_len);
        if (r < 0 && ret_err) *ret_err = kite_asprintf("kubeconfig: %s: invalid base64", data_key);
        return r;
    }
    if (f && *f) {
        r = read_blob(f, base_dir, ret, ret_len);
        if (r < 0 && ret_err) *ret_err = kite_asprintf("kubeconfig: %s: %s: %s", file_key, f, strerror(-r));
        return r;
    }
    return 0;
}

static void wipe_free(char *p, size_t n) {
    if (!p) return;
    explicit_bzero(p, n);
    free(p);
}

void kite_kubeconfig_free(struct kite_kubeconfig *k) {
    if (!k) return;
    free(k->server);
    free(k->ca_pem);
    free(k->cert_pem);
    wipe_free(k->key_pem, k->key_len);
    if (k->token) wipe_free(k->token, strlen(k->token));
    free(k->context);
    free(k);
}

#define FAIL(code, ...)                                                \
    do {                                                               \
        if (ret_err) *ret_err = kite_asprintf("kubeconfig: " __VA_ARGS__); \
        kite_kubeconfig_free(k);                                       \
        return (code);                                                 \
    } while (0)

int kite_kubeconfig_from_json(json_object *root, const char *context, const char *base_dir,
                              struct kite_kubeconfig **ret, char **ret_err) {
    struct kite_kubeconfig *k = kite_calloc(1, sizeof(*k));
    if (!json_object_is_type(root, json_type_object)) FAIL(-EINVAL, "not a mapping");
    const char *ctx_name = context ? context : kite_obj_str(root, "current-context");
    if (!ctx_name || !*ctx_name) FAIL(-EINVAL, "current-context is not set");
    json_object *ctx = named(root, "contexts", "context", ctx_name);
    if (!ctx) FAIL(-ENOENT, "context \"%s\" not found", ctx_name);
    k->context = kite_strdup(ctx_name);
    const char *cluster_name = kite_obj_str(ctx, "cluster"), *user_name = kite_obj_str(ctx, "user");
    json_object *cluster = cluster_name ? named(root, "clusters", "cluster", cluster_name) : NULL;
    if (!cluster) FAIL(-ENOENT, "context \"%s\": cluster \"%s\" not found", ctx_name, cluster_name ? cluster_name : "");
    const char *server = kite_obj_str(cluster, "server");
    if (!server || !*server) FAIL(-EINVAL, "cluster \"%s\": server is not set", cluster_name);
    if (!kite_startswith(server, "https://") && !kite_startswith(server, "http://"))
        FAIL(-EINVAL, "cluster \"%s\": server \"%s\" is not an http(s) URL", cluster_name, server);
    k->server = kite_strdup(server);
    size_t sl = strlen(k->server);
    while (sl > 0 && k->server[sl - 1] == '/') k->server[--sl] = 0;
    json_object *ins;
    if (json_object_object_get_ex(cluster, "insecure-skip-tls-verify", &ins))
        k->insecure = json_object_is_type(ins, json_type_boolean) ? json_object_get_boolean(ins)
                                                                   : kite_streq(json_object_get_string(ins), "true");
    int r = data_or_file(cluster, "certificate-authority-data", "certificate-authority", base_dir, &k->ca_pem,
                         &k->ca_len, ret_err);
    if (r < 0) goto err;
    json_object *user = user_name ? named(root, "users", "user", user_name) : NULL;
    if (user_name && *user_name && !user) FAIL(-ENOENT, "context \"%s\": user \"%s\" not found", ctx_name, user_name);
    if (user) {
        if (json_object_object_get_ex(user, "exec", NULL) || json_object_object_get_ex(user, "auth-provider", NULL))
            FAIL(-EOPNOTSUPP, "user \"%s\": exec and auth-provider credentials are not supported", user_name);
        r = data_or_file(user, "client-certificate-data", "client-certificate", base_dir, &k->cert_pem, &k->cert_len,
                         ret_err);
        if (r < 0) goto err;
        r = data_or_file(user, "client-key-data", "client-key", base_dir, &k->key_pem, &k->key_len, ret_err);
        if (r < 0) goto err;
        if (!k->cert_pem != !k->key_pem)
            FAIL(-EINVAL, "user \"%s\": client certificate and key must be given together", user_name);
        const char *tok = kite_obj_str(user, "token"), *tokfile = kite_obj_str(user, "tokenFile");
        if (tok && *tok) {
            k->token = kite_strdup(tok);
        } else if (tokfile && *tokfile) {
            size_t n;
            r = read_blob(tokfile, base_dir, &k->token, &n);
            if (r < 0) FAIL(r, "user \"%s\": tokenFile %s: %s", user_name, tokfile, strerror(-r));
            while (n > 0 && (k->token[n - 1] == '\n' || k->token[n - 1] == '\r' || k->token[n - 1] == ' '))
                k->token[--n] = 0;
        }
    }
    *ret = k;
    return 0;
err:
    kite_kubeconfig_free(k);
    return r;
}

int kite_kubeconfig_load(const char *path, const char *context, struct kite_kubeconfig **ret, char **ret_err) {
    json_object *root = NULL;
    _cleanup_free_ char *yerr = NULL;
    int r = kite_yaml_load_file(path, &root, &yerr);
    if (r < 0) {
        if (ret_err)
            *ret_err = yerr ? kite_asprintf("kubeconfig %s: %s", path, yerr)
                            : kite_asprintf("kubeconfig %s: %s", path, strerror(-r));
        return r;
    }
    _cleanup_free_ char *dir = kite_strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    r = kite_kubeconfig_from_json(root, context, slash ? (*dir ? dir : "/") : NULL, ret, ret_err);
    json_object_put(root);
    return r;
}

/* ---- kubectl's loading rules ---- */

/* Makes a relative file reference absolute against the directory of the file that names it. */
static void absolutize(json_object *inner, const char *dir) {
    static const char *const keys[] = {"certificate-authority", "client-certificate", "client-key", "tokenFile"};
    for (size_t i = 0; dir && i < KITE_ARRAY_SIZE(keys); i++) {
        const char *v = kite_obj_str(inner, keys[i]);
        if (!v || !*v || v[0] == '/') continue;
        _cleanup_free_ char *abs = kite_asprintf("%s/%s", dir, v);
        json_object_object_add(inner, keys[i], json_object_new_string(abs));
    }
}

/* Adds root's entries to merged where merged has none of that name yet (the first file wins). */
static void merge_into(json_object *merged, json_object *root, const char *dir) {
    const char *cur = kite_obj_str(root, "current-context");
    const char *have = kite_obj_str(merged, "current-context");
    if ((!have || !*have) && cur && *cur) json_object_object_add(merged, "current-context", json_object_new_string(cur));
    static const char *const lists[][2] = {{"contexts", "context"}, {"clusters", "cluster"}, {"users", "user"}};
    for (size_t l = 0; l < KITE_ARRAY_SIZE(lists); l++) {
        json_object *a = json_object_object_get(root, lists[l][0]), *to = json_object_object_get(merged, lists[l][0]);
        for (size_t i = 0; json_object_is_type(a, json_type_array) && i < json_object_array_length(a); i++) {
            json_object *e = json_object_array_get_idx(a, i), *copy = NULL, *inner;
            const char *name = kite_obj_str(e, "name");
            if (!name || named(merged, lists[l][0], lists[l][1], name)) continue;
            if (json_object_deep_copy(e, &copy, NULL) < 0) continue;
            if (json_object_object_get_ex(copy, lists[l][1], &inner)) absolutize(inner, dir);
            json_object_array_add(to, copy);
        }
    }
}

int kite_kubeconfig_load_default(const char *path, const char *context, struct kite_kubeconfig **ret,
                                 char **ret_err) {
    if (path && *path) return kite_kubeconfig_load(path, context, ret, ret_err);
    const char *env = getenv("KUBECONFIG");
    _cleanup_free_ char *home_cfg = NULL;
    if (!env || !*env) {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            if (ret_err) *ret_err = kite_asprintf("no kubeconfig: give --kubeconfig, or set KUBECONFIG or HOME");
            return -ENOENT;
        }
        home_cfg = kite_asprintf("%s/.kube/config", home);
        return kite_kubeconfig_load(home_cfg, context, ret, ret_err);
    }
    json_object *merged = json_object_new_object();
    json_object_object_add(merged, "contexts", json_object_new_array());
    json_object_object_add(merged, "clusters", json_object_new_array());
    json_object_object_add(merged, "users", json_object_new_array());
    _cleanup_free_ char *list = kite_strdup(env);
    size_t files = 0;
    int r = 0;
    for (char *save = NULL, *f = strtok_r(list, ":", &save); f; f = strtok_r(NULL, ":", &save)) {
        if (access(f, F_OK) != 0) continue; /* kubectl skips files that do not exist */
        json_object *root = NULL;
        _cleanup_free_ char *yerr = NULL;
        if ((r = kite_yaml_load_file(f, &root, &yerr)) < 0) {
            if (ret_err) *ret_err = kite_asprintf("kubeconfig %s: %s", f, yerr ? yerr : strerror(-r));
            json_object_put(merged);
            return r;
        }
        _cleanup_free_ char *dir = kite_strdup(f);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        if (json_object_is_type(root, json_type_object)) merge_into(merged, root, slash ? (*dir ? dir : "/") : ".");
        json_object_put(root);
        files++;
    }
    if (!files) {
        if (ret_err) *ret_err = kite_asprintf("no kubeconfig: none of the files in KUBECONFIG (%s) exists", env);
        json_object_put(merged);
        return -ENOENT;
    }
    r = kite_kubeconfig_from_json(merged, context, NULL, ret, ret_err);
    json_object_put(merged);
    return r;
}

/* ---- a cluster's entries in a user's kubeconfig file (kind's and k3d's kubeconfig update) ---- */

/* Removes root[list]'s entry called name; true when there was one. */
static bool drop_named(json_object *root, const char *list, const char *name) {
    json_object *a = json_object_object_get(root, list);
    for (size_t i = 0; json_object_is_type(a, json_type_array) && i < json_object_array_length(a); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(a, i), "name"), name)) {
            json_object_array_del_idx(a, i, 1);
            return true;
        }
    return false;
}

static json_object *entry(const char *name, const char *kind, json_object *inner) {
    json_object *e = json_object_new_object();
    json_object_object_add(e, "name", json_object_new_string(name));
    json_object_object_add(e, kind, inner);
    return e;
}

/* kubectl's lock beside the file (FILE.lock, created exclusively), waited for up to 5 s. */
static int lock_file(const char *lock) {
    for (int i = 0; i < 100; i++) {
        int fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (errno != EEXIST) return -errno;
        usleep(50000);
    }
    return -EBUSY;
}

static int edit_file(const char *file, const char *name, const char *server, json_object *cluster, json_object *user,
                     char **ret_err) {
    _cleanup_free_ char *lock = kite_asprintf("%s.lock", file), *dir = kite_strdup(file);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        mkdir(dir, 0700);
    }
    int r = lock_file(lock);
    if (r < 0) {
        if (ret_err) *ret_err = kite_asprintf("%s: %s", lock, r == -EBUSY ? "held by another writer" : strerror(-r));
        return r;
    }
    json_object *root = NULL;
    _cleanup_free_ char *yerr = NULL;
    if (access(file, F_OK) == 0 && (r = kite_yaml_load_file(file, &root, &yerr)) < 0) {
        if (ret_err) *ret_err = kite_asprintf("%s: %s (left as it is)", file, yerr ? yerr : strerror(-r));
        unlink(lock);
        return r;
    }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        root = json_object_new_object();
        json_object_object_add(root, "apiVersion", json_object_new_string("v1"));
        json_object_object_add(root, "kind", json_object_new_string("Config"));
        json_object_object_add(root, "preferences", json_object_new_object());
    }
    static const char *const lists[] = {"clusters", "users", "contexts"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(lists); i++)
        if (!json_object_is_type(json_object_object_get(root, lists[i]), json_type_array))
            json_object_object_add(root, lists[i], json_object_new_array());
    json_object *ours = named(root, "clusters", "cluster", name);
    bool changed = false;
    if (cluster) {
        for (size_t i = 0; i < KITE_ARRAY_SIZE(lists); i++) drop_named(root, lists[i], name);
        json_object *ctx = json_object_new_object();
        json_object_object_add(ctx, "cluster", json_object_new_string(name));
        json_object_object_add(ctx, "user", json_object_new_string(name));
        json_object_array_add(json_object_object_get(root, "clusters"), entry(name, "cluster", json_object_get(cluster)));
        json_object_array_add(json_object_object_get(root, "users"), entry(name, "user", json_object_get(user)));
        json_object_array_add(json_object_object_get(root, "contexts"), entry(name, "context", ctx));
        json_object_object_add(root, "current-context", json_object_new_string(name));
        changed = true;
    } else if (ours && kite_streq(kite_obj_str(ours, "server"), server)) {
        /* only entries still pointing at this cluster: a later cluster may have taken the name */
        for (size_t i = 0; i < KITE_ARRAY_SIZE(lists); i++) drop_named(root, lists[i], name);
        if (kite_streq(kite_obj_str(root, "current-context"), name))
            json_object_object_add(root, "current-context", json_object_new_string(""));
        changed = true;
    }
    if (changed) {
        struct kite_buf b = {0};
        if ((r = kite_yaml_emit(root, &b)) == 0) r = kite_write_file_atomic(file, b.p, b.len, 0600, false);
        if (r < 0 && ret_err) *ret_err = kite_asprintf("writing %s: %s", file, strerror(-r));
        kite_buf_release(&b);
    }
    json_object_put(root);
    unlink(lock);
    return r;
}

static char *user_kubeconfig_file(void) {
    const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
    if (env && *env) {
        size_t n = strcspn(env, ":");
        return kite_strndup(env, n);
    }
    return home && *home ? kite_asprintf("%s/.kube/config", home) : NULL;
}

int kite_kubeconfig_merge_cluster(const char *from, const char *name, char **ret_file, char **ret_err) {
    json_object *src = NULL;
    _cleanup_free_ char *yerr = NULL;
    int r = kite_yaml_load_file(from, &src, &yerr);
    if (r < 0) {
        if (ret_err) *ret_err = kite_asprintf("%s: %s", from, yerr ? yerr : strerror(-r));
        return r;
    }
    const char *cur = kite_obj_str(src, "current-context");
    json_object *ctx = cur ? named(src, "contexts", "context", cur) : NULL;
    json_object *cluster = ctx ? named(src, "clusters", "cluster", kite_obj_str(ctx, "cluster")) : NULL;
    json_object *user = ctx ? named(src, "users", "user", kite_obj_str(ctx, "user")) : NULL;
    _cleanup_free_ char *dir = kite_strdup(from);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    char *file = user_kubeconfig_file();
    if (!cluster || !user || !file) {
        if (ret_err) *ret_err = kite_asprintf(!file ? "no kubeconfig to update: set KUBECONFIG or HOME"
                                                    : "%s: no current context with a cluster and a user", from);
        json_object_put(src);
        free(file);
        return -EINVAL;
    }
    absolutize(cluster, slash ? dir : ".");
    absolutize(user, slash ? dir : ".");
    r = edit_file(file, name, NULL, cluster, user, ret_err);
    json_object_put(src);
    if (r == 0 && ret_file) *ret_file = file;
    else free(file);
    return r;
}

int kite_kubeconfig_unmerge_cluster(const char *name, const char *server, char **ret_err) {
    _cleanup_free_ char *file = user_kubeconfig_file();
    if (!file || access(file, F_OK) != 0) return 0;
    return edit_file(file, name, server, NULL, NULL, ret_err);
}
