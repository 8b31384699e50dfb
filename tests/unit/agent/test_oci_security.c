/* The securityContext written into an OCI spec as containerd's CRI writes it. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/runtime/runtime.h"
#include "base/base.h"

static json_object *spec(void) {
    json_object *o = json_object_new_object(), *mounts = json_object_new_array(), *sys = json_object_new_object();
    json_object_object_add(o, "process", json_object_new_object());
    json_object_object_add(o, "linux", json_object_new_object());
    json_object *root = json_object_new_object();
    json_object_object_add(root, "readonly", json_object_new_boolean(0));
    json_object_object_add(o, "root", root);
    json_object_object_add(sys, "destination", json_object_new_string("/sys"));
    json_object_array_add(mounts, sys);
    json_object_object_add(o, "mounts", mounts);
    return o;
}

static json_object *at(json_object *o, const char *a, const char *b) {
    json_object *v = json_object_object_get(o, a);
    return b ? json_object_object_get(v, b) : v;
}

static bool has(json_object *arr, const char *s) {
    for (size_t i = 0; i < json_object_array_length(arr); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(arr, i)), s) == 0) return true;
    return false;
}

Test(oci_security, defaults) {
    struct kite_security_config sec = {0};
    json_object *o = spec();
    kite_oci_apply_security(o, &sec);
    json_object *user = at(o, "process", "user");
    cr_assert_eq(json_object_get_int(json_object_object_get(user, "uid")), 0);
    cr_assert_null(json_object_object_get(user, "additionalGids"));
    json_object *eff = at(at(o, "process", "capabilities"), "effective", NULL);
    cr_assert_eq(json_object_array_length(eff), 14);
    cr_assert(has(eff, "CAP_NET_RAW") && has(eff, "CAP_AUDIT_WRITE") && !has(eff, "CAP_SYS_ADMIN"));
    cr_assert_not(json_object_get_boolean(at(o, "process", "noNewPrivileges")));
    cr_assert_not(json_object_get_boolean(at(o, "root", "readonly")));
    cr_assert(has(at(o, "linux", "maskedPaths"), "/proc/kcore"));
    cr_assert(has(at(o, "linux", "readonlyPaths"), "/proc/sys"));
    json_object_put(o);
}

Test(oci_security, user_groups_readonly_nnp) {
    uint32_t groups[] = {2000, 4000};
    struct kite_security_config sec = {.has_uid = true, .uid = 1000, .has_gid = true, .gid = 3000, .groups = groups,
                                       .n_groups = 2, .readonly_root = true, .no_new_privs = true};
    json_object *o = spec();
    kite_oci_apply_security(o, &sec);
    json_object *user = at(o, "process", "user");
    cr_assert_eq(json_object_get_int(json_object_object_get(user, "uid")), 1000);
    cr_assert_eq(json_object_get_int(json_object_object_get(user, "gid")), 3000);
    json_object *g = json_object_object_get(user, "additionalGids");
    cr_assert_eq(json_object_array_length(g), 2);
    cr_assert_eq(json_object_get_int(json_object_array_get_idx(g, 1)), 4000);
    cr_assert(json_object_get_boolean(at(o, "root", "readonly")));
    cr_assert(json_object_get_boolean(at(o, "process", "noNewPrivileges")));
    json_object_put(o);
}

Test(oci_security, drop_add) {
    const char *drop[] = {"ALL"}, *add[] = {"net_bind_service", "CAP_NET_BIND_SERVICE"};
    struct kite_security_config sec = {.cap_drop = drop, .n_cap_drop = 1, .cap_add = add, .n_cap_add = 2};
    json_object *o = spec();
    kite_oci_apply_security(o, &sec);
    json_object *b = at(at(o, "process", "capabilities"), "bounding", NULL);
    cr_assert_eq(json_object_array_length(b), 1);
    cr_assert(has(b, "CAP_NET_BIND_SERVICE"));
    json_object_put(o);
    const char *drop2[] = {"KILL"}, *add2[] = {"SYS_ADMIN"};
    sec = (struct kite_security_config){.cap_drop = drop2, .n_cap_drop = 1, .cap_add = add2, .n_cap_add = 1};
    o = spec();
    kite_oci_apply_security(o, &sec);
    b = at(at(o, "process", "capabilities"), "permitted", NULL);
    cr_assert_eq(json_object_array_length(b), 14);
    cr_assert(has(b, "CAP_SYS_ADMIN") && !has(b, "CAP_KILL"));
    json_object_put(o);
}

Test(oci_security, privileged) {
    struct kite_security_config sec = {.privileged = true, .no_new_privs = true};
    json_object *o = spec();
    kite_oci_apply_security(o, &sec);
    json_object *eff = at(at(o, "process", "capabilities"), "effective", NULL);
    size_t bnd = 0; /* every capability the process may give */
    for (int i = 0; i <= 40; i++) bnd += prctl(PR_CAPBSET_READ, i, 0, 0, 0) == 1;
    cr_assert_eq(json_object_array_length(eff), bnd);
    cr_assert_eq(has(eff, "CAP_SYS_ADMIN"), prctl(PR_CAPBSET_READ, 21, 0, 0, 0) == 1);
    cr_assert_not(json_object_get_boolean(at(o, "process", "noNewPrivileges")));
    cr_assert_null(at(o, "linux", "maskedPaths"));
    cr_assert_null(at(o, "linux", "readonlyPaths"));
    json_object *opts = json_object_object_get(json_object_array_get_idx(at(o, "mounts", NULL), 0), "options");
    cr_assert(has(opts, "rw") && !has(opts, "ro"));
    json_object_put(o);
}

/* ---- the image's user, resolved in its root ---- */

static char *make_root(void) {
    char tmpl[] = "/tmp/kite-ociuser-XXXXXX";
    char *d = kite_strdup(mkdtemp(tmpl));
    char *etc = kite_asprintf("%s/etc", d);
    mkdir(etc, 0755);
    char *pw = kite_asprintf("%s/passwd", etc), *gr = kite_asprintf("%s/group", etc);
    FILE *f = fopen(pw, "w");
    fputs("root:x:0:0:root:/root:/bin/sh\n# comment\napp:x:1000:1000::/home/app:/bin/sh\n", f);
    fclose(f);
    f = fopen(gr, "w");
    fputs("root:x:0:\napp:x:1000:app\nwheel:x:10:root,app\nvideo:x:44:other,app\n", f);
    fclose(f);
    free(pw);
    free(gr);
    free(etc);
    return d;
}

Test(oci_user, image_user_by_name_and_groups) {
    _cleanup_free_ char *root = make_root();
    struct kite_security_config sec = {0}, out;
    uint32_t *gids = NULL;
    char *err = NULL;
    cr_assert_eq(kite_oci_resolve_user(root, "app", &sec, &out, &gids, &err), 0);
    cr_assert(out.has_uid && out.has_gid);
    cr_assert_eq(out.uid, 1000);
    cr_assert_eq(out.gid, 1000);
    /* the primary group and the two that list app, sorted */
    cr_assert_eq(out.n_groups, 3);
    cr_assert_eq(out.groups[0], 10);
    cr_assert_eq(out.groups[1], 44);
    cr_assert_eq(out.groups[2], 1000);
    free(gids);
    /* "uid:group" with a group name; a uid /etc/passwd does not list has group 0 */
    cr_assert_eq(kite_oci_resolve_user(root, "1000:wheel", &sec, &out, &gids, &err), 0);
    cr_assert_eq(out.gid, 10);
    free(gids);
    cr_assert_eq(kite_oci_resolve_user(root, "4242", &sec, &out, &gids, &err), 0);
    cr_assert_eq(out.uid, 4242);
    cr_assert_eq(out.gid, 0);
    free(gids);
    /* runAsUser and runAsGroup win over the image's user; supplementalGroups are merged */
    uint32_t supp[] = {44, 3000};
    struct kite_security_config rs = {.has_uid = true, .uid = 1000, .groups = supp, .n_groups = 2};
    cr_assert_eq(kite_oci_resolve_user(root, "root", &rs, &out, &gids, &err), 0);
    cr_assert_eq(out.uid, 1000);
    cr_assert_eq(out.gid, 1000);
    cr_assert_eq(out.n_groups, 4); /* 10 44 1000 3000 */
    cr_assert_eq(out.groups[3], 3000);
    free(gids);
    rs.has_gid = true, rs.gid = 7;
    cr_assert_eq(kite_oci_resolve_user(root, NULL, &rs, &out, &gids, &err), 0);
    cr_assert_eq(out.gid, 7);
    free(gids);
    /* names the root does not list */
    cr_assert_eq(kite_oci_resolve_user(root, "ghost", &sec, &out, &gids, &err), -ENOENT);
    cr_assert(strstr(err, "no users found"));
    free(err);
    err = NULL;
    cr_assert_eq(kite_oci_resolve_user(root, "app:nogroup", &sec, &out, &gids, &err), -ENOENT);
    cr_assert(strstr(err, "no groups found"));
    free(err);
    kite_rm_rf(root);
}

Test(oci_user, links_resolve_inside_the_root) {
    /* an image whose /etc/passwd links to the host's: read inside the root, so not found */
    char tmpl[] = "/tmp/kite-ociuser-XXXXXX";
    char *root = mkdtemp(tmpl);
    _cleanup_free_ char *etc = kite_asprintf("%s/etc", root), *pw = kite_asprintf("%s/etc/passwd", root);
    mkdir(etc, 0755);
    cr_assert_eq(symlink("/../../../../etc/passwd", pw), 0);
    struct kite_security_config sec = {0}, out;
    uint32_t *gids = NULL;
    char *err = NULL;
    cr_assert_eq(kite_oci_resolve_user(root, "root", &sec, &out, &gids, &err), -ENOENT);
    free(err);
    kite_rm_rf(root);
}

/* ---- seccomp ---- */

static bool rule_has(json_object *sc, const char *action, const char *name) {
    json_object *rules = json_object_object_get(sc, "syscalls");
    for (size_t i = 0; i < json_object_array_length(rules); i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        if (strcmp(json_object_get_string(json_object_object_get(r, "action")), action) == 0 &&
            !json_object_object_get(r, "args") && has(json_object_object_get(r, "names"), name))
            return true;
    }
    return false;
}

Test(oci_seccomp, runtime_default_by_capabilities) {
    struct kite_security_config sec = {.seccomp = KITE_SECCOMP_RUNTIME_DEFAULT};
    json_object *o = spec();
    kite_oci_apply_security(o, &sec);
    char *err = NULL;
    cr_assert_eq(kite_oci_apply_seccomp(o, &sec, &err), 0);
    json_object *sc = at(o, "linux", "seccomp");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(sc, "defaultAction")), "SCMP_ACT_ERRNO");
    cr_assert(rule_has(sc, "SCMP_ACT_ALLOW", "read"));
    cr_assert(rule_has(sc, "SCMP_ACT_ALLOW", "chroot")); /* CAP_SYS_CHROOT is in the default set */
    cr_assert(!rule_has(sc, "SCMP_ACT_ALLOW", "unshare"));
    cr_assert(!rule_has(sc, "SCMP_ACT_ALLOW", "mount"));
    cr_assert(!rule_has(sc, "SCMP_ACT_ALLOW", "keyctl"));
    cr_assert(rule_has(sc, "SCMP_ACT_ERRNO", "clone3"));
    json_object_put(o);
    /* CAP_SYS_ADMIN opens mount and unshare */
    const char *add[] = {"SYS_ADMIN"};
    struct kite_security_config admin = {.seccomp = KITE_SECCOMP_RUNTIME_DEFAULT, .cap_add = add, .n_cap_add = 1};
    o = spec();
    kite_oci_apply_security(o, &admin);
    cr_assert_eq(kite_oci_apply_seccomp(o, &admin, &err), 0);
    sc = at(o, "linux", "seccomp");
    cr_assert(rule_has(sc, "SCMP_ACT_ALLOW", "unshare") && rule_has(sc, "SCMP_ACT_ALLOW", "mount"));
    cr_assert(!rule_has(sc, "SCMP_ACT_ERRNO", "clone3"));
    json_object_put(o);
    /* Unconfined and privileged: no filter */
    struct kite_security_config priv = {.seccomp = KITE_SECCOMP_RUNTIME_DEFAULT, .privileged = true};
    o = spec();
    cr_assert_eq(kite_oci_apply_seccomp(o, &priv, &err), 0);
    cr_assert_null(at(o, "linux", "seccomp"));
    json_object_put(o);
}

Test(oci_seccomp, localhost_profile) {
    char path[] = "/tmp/kite-seccomp-XXXXXX";
    int fd = mkstemp(path);
    const char *prof = "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"archMap\":[],\"syscalls\":[{\"names\":[\"mkdir\"],"
                       "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":13,\"comment\":\"x\"}]}";
    cr_assert_eq(write(fd, prof, strlen(prof)), (ssize_t)strlen(prof));
    close(fd);
    struct kite_security_config sec = {.seccomp = KITE_SECCOMP_LOCALHOST, .seccomp_localhost = path};
    json_object *o = spec();
    char *err = NULL;
    cr_assert_eq(kite_oci_apply_seccomp(o, &sec, &err), 0);
    json_object *sc = at(o, "linux", "seccomp");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(sc, "defaultAction")), "SCMP_ACT_ALLOW");
    json_object *r = json_object_array_get_idx(json_object_object_get(sc, "syscalls"), 0);
    cr_assert_eq(json_object_get_int(json_object_object_get(r, "errnoRet")), 13);
    cr_assert_null(json_object_object_get(r, "comment"));
    json_object_put(o);
    /* not JSON; absent */
    fd = open(path, O_WRONLY | O_TRUNC);
    cr_assert_eq(write(fd, "{", 1), 1);
    close(fd);
    o = spec();
    cr_assert_eq(kite_oci_apply_seccomp(o, &sec, &err), -EINVAL);
    cr_assert(strstr(err, path));
    free(err);
    unlink(path);
    cr_assert_eq(kite_oci_apply_seccomp(o, &sec, &err), -ENOENT);
    cr_assert(strstr(err, "cannot load seccomp profile"));
    free(err);
    json_object_put(o);
}
