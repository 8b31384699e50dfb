/* kubeconfig loading. Only what a node agent needs is read: cluster server/CA/insecure and
 * user cert/key/token. exec/auth-provider plugins are not supported (an error names them). */
#include "client/kubeconfig.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/base64.h"
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

static const char *str_field(json_object *o, const char *key) {
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string)) return NULL;
    return json_object_get_string(v);
}

/* Finds {name: NAME, <kind>: {...}} in root[list]. */
static json_object *named(json_object *root, const char *list, const char *kind, const char *name) {
    json_object *a;
    if (!json_object_object_get_ex(root, list, &a) || !json_object_is_type(a, json_type_array)) return NULL;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        json_object *e = json_object_array_get_idx(a, i), *inner;
        if (kite_streq(str_field(e, "name"), name) && json_object_object_get_ex(e, kind, &inner) &&
            json_object_is_type(inner, json_type_object))
            return inner;
    }
    return NULL;
}

/* Reads a "<x>-data" (base64) or "<x>" (path) pair; neither = not set. */
static int data_or_file(json_object *o, const char *data_key, const char *file_key, const char *base_dir,
                        char **ret, size_t *ret_len, char **ret_err) {
    const char *d = str_field(o, data_key), *f = str_field(o, file_key);
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
    const char *ctx_name = context ? context : str_field(root, "current-context");
    if (!ctx_name || !*ctx_name) FAIL(-EINVAL, "current-context is not set");
    json_object *ctx = named(root, "contexts", "context", ctx_name);
    if (!ctx) FAIL(-ENOENT, "context \"%s\" not found", ctx_name);
    k->context = kite_strdup(ctx_name);
    const char *cluster_name = str_field(ctx, "cluster"), *user_name = str_field(ctx, "user");
    json_object *cluster = cluster_name ? named(root, "clusters", "cluster", cluster_name) : NULL;
    if (!cluster) FAIL(-ENOENT, "context \"%s\": cluster \"%s\" not found", ctx_name, cluster_name ? cluster_name : "");
    const char *server = str_field(cluster, "server");
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
        const char *tok = str_field(user, "token"), *tokfile = str_field(user, "tokenFile");
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
