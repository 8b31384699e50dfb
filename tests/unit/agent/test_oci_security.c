/* The securityContext written into an OCI spec as containerd's CRI writes it. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/prctl.h>

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
