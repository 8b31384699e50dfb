/* Small tools: kite kubeconfig, kite certs, kite version. */
#include "base/base.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "pki/pki.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/version.h"

int cmd_version(int argc, char **argv) {
    const struct flag flags[] = {FLAG_END};
    int r = kite_cmd_flags_parse("version", "Prints the version of kite and of the Kubernetes API it serves.", flags, argc, argv,
                        NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    printf("kite %s (Kubernetes API v1.32)\n", KITE_VERSION);
    return 0;
}

int cmd_certs(int argc, char **argv) {
    const char *data_dir = NULL;
    const struct flag flags[] = {
        FLAG_STR("data-dir", "DIR", "data directory (certificates go to DATA_DIR/pki)", NULL, &data_dir, .required = true),
        FLAG_END};
    int r = kite_cmd_flags_parse("certs", "Creates the CA, serving, admin and kubelet-client certificates (kept when already valid).", flags,
                        argc, argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    mkdir(data_dir, 0700);
    _cleanup_free_ char *pki = kite_asprintf("%s/pki", data_dir);
    mkdir(pki, 0700);
    if ((r = kite_pki_ensure(pki, NULL, 0)) < 0) {
        fprintf(stderr, "kite certs: %s\n", strerror(-r));
        return 1;
    }
    printf("%s\n", pki);
    return 0;
}

/* The server URL is read from admin.kubeconfig (with the kubeconfig loader, as every client
 * reads it) so the node kubeconfig points where the running apiserver serves. NULL with
 * *ret_err set when it cannot be read. */
static char *server_url(const char *data_dir, char **ret_err) {
    _cleanup_free_ char *path = kite_asprintf("%s/admin.kubeconfig", data_dir);
    struct kite_kubeconfig *kc = NULL;
    if (kite_kubeconfig_load(path, NULL, &kc, ret_err) < 0) return NULL;
    char *url = TAKE_PTR(kc->server);
    kite_kubeconfig_free(kc);
    return url;
}

/* A kubeconfig holds a private key: FILE is made 0600 whatever the umask, on a temporary
 * name created with O_EXCL (no existing file or link is written through), synced, and
 * renamed over FILE, so a reader sees the old file or the whole new one. */
static int write_private(const char *path, const char *data, size_t len) {
    _cleanup_free_ char *tmp = kite_asprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    int r = fchmod(fd, 0600) < 0 ? -errno : 0;
    for (size_t off = 0; r == 0 && off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) r = -errno;
        else off += (size_t)n;
    }
    if (r == 0 && fsync(fd) < 0) r = -errno;
    if (close(fd) < 0 && r == 0) r = -errno;
    if (r == 0 && rename(tmp, path) < 0) r = -errno;
    if (r < 0) {
        unlink(tmp);
        return r;
    }
    _cleanup_free_ char *dir = kite_strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* the rename itself survives a crash */
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int cmd_kubeconfig(int argc, char **argv) {
    const char *data_dir = NULL, *node = NULL, *server = NULL, *user = NULL, *out = NULL;
    struct flag_list groups = {0};
    const struct flag flags[] = {
        FLAG_STR("data-dir", "DIR", "data directory of the apiserver", NULL, &data_dir, .required = true),
        FLAG_STR("node", "NAME", "node name: the identity is CN=system:node:NAME, O=system:nodes", NULL, &node),
        FLAG_STR("user", "NAME", "instead of --node: a user's identity, CN=NAME (what RBAC bindings name)", NULL, &user),
        FLAG_LIST("group", "G,...", "with --user: the user's groups (one O each)", NULL, &groups),
        FLAG_STR("server", "URL", "API server URL", NULL, &server, .def_note = "the one in DATA_DIR/admin.kubeconfig"),
        FLAG_STR("o", "FILE", "write the kubeconfig to FILE (mode 0600) instead of printing it", NULL, &out),
        FLAG_END,
    };
    int r = kite_cmd_flags_parse("kubeconfig", "Prints a kubeconfig for a node or user identity, signed by the data dir's CA.",
                        flags, argc, argv, NULL, NULL);
    if (r != 0) {
        kite_cmd_flag_list_release(&groups);
        return r > 0 ? 0 : 2;
    }
    if (!node == !user || (node && groups.n) || (user && !*user)) {
        fprintf(stderr, "kite kubeconfig: %s\n", node && user ? "--node and --user exclude each other"
                                                 : node         ? "--group goes with --user"
                                                 : user         ? "--user needs a name"
                                                                : "--node is required (or --user)");
        kite_cmd_flag_list_release(&groups);
        return 2;
    }
    _cleanup_free_ char *err = NULL;
    _cleanup_free_ char *url = server ? kite_strdup(server) : server_url(data_dir, &err);
    if (!url) {
        fprintf(stderr, "kite kubeconfig: no --server given and %s\n", err ? err : "no admin.kubeconfig");
        kite_cmd_flag_list_release(&groups);
        return 1;
    }
    _cleanup_free_ char *pki = kite_asprintf("%s/pki", data_dir), *ca_path = kite_asprintf("%s/pki/ca.crt", data_dir);
    _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
    _cleanup_free_ char *cn = node ? kite_asprintf("system:node:%s", node) : kite_strdup(user);
    const char *node_orgs[] = {"system:nodes"};
    const char *const *orgs = node ? node_orgs : (const char *const *)groups.v;
    size_t n_orgs = node ? 1 : groups.n;
    r = kite_pki_read_file(ca_path, &ca);
    if (r >= 0) r = kite_pki_issue_client(pki, cn, orgs, n_orgs, &cert, &key);
    kite_cmd_flag_list_release(&groups);
    if (r < 0) {
        fprintf(stderr, "kite kubeconfig: %s\n", strerror(-r));
        return 1;
    }
    _cleanup_free_ char *kc = kite_pki_kubeconfig(node ? node : user, url, ca, cert, key, NULL);
    if (!out) {
        fputs(kc, stdout);
        return 0;
    }
    if ((r = write_private(out, kc, strlen(kc))) < 0) {
        fprintf(stderr, "kite kubeconfig: cannot write %s: %s\n", out, strerror(-r));
        return 1;
    }
    return 0;
}
