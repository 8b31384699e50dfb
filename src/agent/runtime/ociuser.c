/* The process user of a container as containerd's CRI resolves it against the image's root
 * (runtime.h, kite_oci_resolve_user). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "base/buf.h"

/* The most bytes of an image's /etc/passwd or /etc/group read. */
#define KITE_OCI_ETC_MAX (1024 * 1024)

/* path (absolute inside the root) of the root dir, every link resolved inside it; NULL when absent. */
static char *root_file(const char *root, const char *path) {
    int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return NULL;
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof how);
    close(dfd);
    if (fd < 0) return NULL;
    struct kite_buf b = {0};
    char buf[8192];
    ssize_t n;
    while (b.len < KITE_OCI_ETC_MAX && (n = read(fd, buf, sizeof buf)) > 0) kite_buf_append(&b, buf, (size_t)n);
    close(fd);
    kite_buf_putc(&b, 0);
    return kite_buf_detach(&b, NULL);
}

static bool parse_id(const char *s, uint32_t *ret) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-' || v > UINT32_MAX) return false;
    *ret = (uint32_t)v;
    return true;
}

/* The fields of line (colon-separated, cut in place) into f[0..n): how many there were. */
static size_t fields(char *line, char **f, size_t n) {
    size_t k = 0;
    while (k < n) {
        f[k++] = line;
        char *c = strchr(line, ':');
        if (!c) break;
        *c = 0;
        line = c + 1;
    }
    return k;
}

/* The /etc/passwd entry whose name is name (uid ignored) or, name NULL, whose uid is uid. */
static bool passwd_find(const char *passwd, const char *name, uint32_t uid, char **ret_name, uint32_t *ret_uid,
                        uint32_t *ret_gid) {
    if (!passwd) return false;
    _cleanup_free_ char *copy = kite_strdup(passwd);
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4];
        uint32_t u, g;
        if (line[0] == '#' || fields(line, f, 4) < 4 || !parse_id(f[2], &u) || !parse_id(f[3], &g)) continue;
        if (name ? strcmp(f[0], name) != 0 : u != uid) continue;
        if (ret_name) *ret_name = kite_strdup(f[0]);
        *ret_uid = u;
        *ret_gid = g;
        return true;
    }
    return false;
}

static bool group_find(const char *group, const char *name, uint32_t *ret_gid) {
    if (!group) return false;
    _cleanup_free_ char *copy = kite_strdup(group);
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4];
        if (line[0] != '#' && fields(line, f, 4) >= 3 && strcmp(f[0], name) == 0 && parse_id(f[2], ret_gid)) return true;
    }
    return false;
}

static void gid_add(uint32_t **v, size_t *n, uint32_t g) {
    for (size_t i = 0; i < *n; i++)
        if ((*v)[i] == g) return;
    *v = kite_realloc(*v, (*n + 1) * sizeof(**v));
    size_t i = *n;
    while (i > 0 && (*v)[i - 1] > g) {
        (*v)[i] = (*v)[i - 1];
        i--;
    }
    (*v)[i] = g;
    (*n)++;
}

/* The groups of /etc/group that list user as a member (not the one named as the user). */
static void member_gids(const char *group, const char *user, uint32_t **v, size_t *n) {
    if (!group || !user) return;
    _cleanup_free_ char *copy = kite_strdup(group);
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4];
        uint32_t g;
        if (line[0] == '#' || fields(line, f, 4) < 4 || !parse_id(f[2], &g) || strcmp(f[0], user) == 0) continue;
        char *msave = NULL;
        for (char *m = strtok_r(f[3], ",", &msave); m; m = strtok_r(NULL, ",", &msave))
            if (strcmp(m, user) == 0) gid_add(v, n, g);
    }
}

int kite_oci_resolve_user(const char *root, const char *image_user, const struct kite_security_config *sec,
                          struct kite_security_config *out, uint32_t **ret_groups, char **ret_error) {
    *out = *sec;
    *ret_groups = NULL;
    _cleanup_free_ char *passwd = root ? root_file(root, "/etc/passwd") : NULL;
    _cleanup_free_ char *group = root ? root_file(root, "/etc/group") : NULL;
    _cleanup_free_ char *uname = NULL;
    uint32_t uid = 0, gid = 0, pu, pg;
    if (sec->has_uid) {
        /* runAsUser: its /etc/passwd entry gives the group (0 when it has none) */
        uid = sec->uid;
        if (passwd_find(passwd, NULL, uid, &uname, &pu, &pg)) gid = pg;
    } else if (image_user && *image_user) {
        /* the image's User: "user" or "user:group", each a number or a name */
        _cleanup_free_ char *u = kite_strdup(image_user);
        char *g = strchr(u, ':');
        if (g) *g++ = 0;
        if (parse_id(u, &uid)) {
            if (passwd_find(passwd, NULL, uid, &uname, &pu, &pg)) gid = pg;
        } else if (passwd_find(passwd, u, 0, &uname, &uid, &gid)) {
        } else {
            if (ret_error) *ret_error = kite_asprintf("image user %s: no users found", image_user);
            return -ENOENT;
        }
        if (g && !parse_id(g, &gid) && !group_find(group, g, &gid)) {
            if (ret_error) *ret_error = kite_asprintf("image user %s: no groups found", image_user);
            return -ENOENT;
        }
    } else if (passwd_find(passwd, NULL, 0, &uname, &pu, &pg)) {
        gid = pg;
    }
    if (sec->has_gid) gid = sec->gid;
    out->has_uid = out->has_gid = true;
    out->uid = uid;
    out->gid = gid;
    /* the additional groups: the primary one, those /etc/group lists the user in, and the
     * pod's supplementalGroups and fsGroup, sorted, as containerd merges them */
    uint32_t *v = NULL;
    size_t n = 0;
    gid_add(&v, &n, gid);
    member_gids(group, uname, &v, &n);
    for (size_t i = 0; i < sec->n_groups; i++) gid_add(&v, &n, sec->groups[i]);
    out->groups = v;
    out->n_groups = n;
    *ret_groups = v;
    return 0;
}
