/* The agent's own admission of pods, pure parts: the kubelet's sysctl allowlist with
 * --allowed-unsafe-sysctls, and its AppArmor admission. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/pods/pods-int.h"
#include "base/base.h"

static void refused(const char *allowed, const char *name, bool net, bool ipc, const char *want) {
    char *why = kite_pods_sysctl_refusal(allowed, name, net, ipc);
    if (!want) cr_assert_null(why, "%s under %s: %s", name, allowed ? allowed : "(none)", why);
    else cr_assert_str_eq(why ? why : "(admitted)", want, "%s under %s", name, allowed ? allowed : "(none)");
    free(why);
}

Test(kite_pods_admit, unsafe_sysctls_as_the_kubelets_allowlist) {
    /* the safe set alone */
    refused(NULL, "net.ipv4.tcp_syncookies", false, false, NULL);
    refused(NULL, "kernel.msgmax", false, false, "\"kernel.msgmax\" not allowlisted");
    refused(NULL, "net.core.somaxconn", false, false, "\"net.core.somaxconn\" not allowlisted");
    /* names and NAME* prefixes */
    const char *allowed = "kernel.msg*,net.core.somaxconn";
    refused(allowed, "kernel.msgmax", false, false, NULL);
    refused(allowed, "kernel.msgmnb", false, false, NULL);
    refused(allowed, "net.core.somaxconn", false, false, NULL);
    refused(allowed, "net.core.somaxconn2", false, false, "\"net.core.somaxconn2\" not allowlisted");
    refused(allowed, "kernel.sem", false, false, "\"kernel.sem\" not allowlisted");
    /* each in its namespace: not with the host's */
    refused(allowed, "kernel.msgmax", false, true, "\"kernel.msgmax\" not allowed with host ipc enabled");
    refused(allowed, "kernel.msgmax", true, false, NULL);
    refused(allowed, "net.core.somaxconn", true, false, "\"net.core.somaxconn\" not allowed with host net enabled");
    refused("net.*", "net.ipv6.conf.all.forwarding", false, false, NULL);
}

Test(kite_pods_admit, sysctl_patterns_and_namespaces) {
    cr_assert_eq(kite_pods_sysctl_namespace("kernel.sem"), KITE_SYSCTL_IPC);
    cr_assert_eq(kite_pods_sysctl_namespace("kernel.shmmax"), KITE_SYSCTL_IPC);
    cr_assert_eq(kite_pods_sysctl_namespace("fs.mqueue.msg_max"), KITE_SYSCTL_IPC);
    cr_assert_eq(kite_pods_sysctl_namespace("net.core.somaxconn"), KITE_SYSCTL_NET);
    cr_assert_eq(kite_pods_sysctl_namespace("kernel.pid_max"), KITE_SYSCTL_UNKNOWN);
    cr_assert_eq(kite_pods_sysctl_namespace("vm.swappiness"), KITE_SYSCTL_UNKNOWN);
    static const char *const good[] = {"kernel.msg*", "net.core.somaxconn", "net/ipv4/ip_forward", "a", "net.*", "a_b-c.d"};
    static const char *const bad[] = {"", "*", "Kernel.msg", "net..core", ".net", "net.", "net.core-", "net.*.x", "a b", ".*", "net.-*"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(good); i++) cr_assert(kite_pods_sysctl_pattern_valid(good[i]), "%s", good[i]);
    for (size_t i = 0; i < KITE_ARRAY_SIZE(bad); i++) cr_assert(!kite_pods_sysctl_pattern_valid(bad[i]), "%s", bad[i]);
}

Test(kite_pods_admit, unsafe_sysctls_flag) {
    struct kite_agent_config c;
    kite_agent_config_init(&c);
    char *err = NULL;
    cr_assert_eq(kite_agent_config_set_flag(&c, "allowed-unsafe-sysctls", "kernel.msg*, net/core/somaxconn", &err), 0);
    cr_assert_str_eq(c.allowed_unsafe_sysctls, "kernel.msg*,net.core.somaxconn");
    cr_assert_eq(kite_agent_config_set_flag(&c, "allowed-unsafe-sysctls", "kernel.pid_max", &err), -EINVAL);
    cr_assert_str_eq(err, "flag --allowed-unsafe-sysctls: the sysctls \"kernel.pid_max\" are not known to be namespaced");
    free(err);
    err = NULL;
    cr_assert_eq(kite_agent_config_set_flag(&c, "allowed-unsafe-sysctls", "kernel.*", &err), -EINVAL);
    cr_assert_str_eq(err, "flag --allowed-unsafe-sysctls: the sysctls \"kernel.\" are not known to be namespaced");
    free(err);
    err = NULL;
    cr_assert_eq(kite_agent_config_set_flag(&c, "allowed-unsafe-sysctls", "Net.core", &err), -EINVAL);
    cr_assert(strstr(err, "sysctl \"Net.core\" must have at most 253 characters and match regex"), "%s", err);
    free(err);
    cr_assert_str_eq(c.allowed_unsafe_sysctls, "kernel.msg*,net.core.somaxconn"); /* a refused value changes nothing */
    cr_assert_eq(kite_agent_config_set_flag(&c, "seccomp-default", "true", NULL), 0);
    cr_assert(c.seccomp_default);
    kite_agent_config_release(&c);
}

static json_object *pod(const char *json) {
    json_object *o = json_tokener_parse(json);
    cr_assert_not_null(o, "%s", json);
    return o;
}

Test(kite_pods_admit, apparmor_as_the_kubelets_validator) {
    static const char *const confined[] = {
        "{\"spec\":{\"securityContext\":{\"appArmorProfile\":{\"type\":\"RuntimeDefault\"}},\"containers\":[{}]}}",
        "{\"spec\":{\"containers\":[{\"securityContext\":{\"appArmorProfile\":{\"type\":\"Localhost\",\"localhostProfile\":\"p\"}}}]}}",
        "{\"spec\":{\"initContainers\":[{\"securityContext\":{\"appArmorProfile\":{\"type\":\"RuntimeDefault\"}}}],\"containers\":[{}]}}",
        "{\"metadata\":{\"annotations\":{\"container.apparmor.security.beta.kubernetes.io/c\":\"runtime/default\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
    };
    static const char *const free_[] = {
        "{\"spec\":{\"containers\":[{}]}}",
        "{\"spec\":{\"securityContext\":{\"appArmorProfile\":{\"type\":\"Unconfined\"}},\"containers\":[{}]}}",
        "{\"metadata\":{\"annotations\":{\"container.apparmor.security.beta.kubernetes.io/c\":\"unconfined\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(confined); i++) {
        json_object *p = pod(confined[i]);
        char *why = kite_pods_apparmor_refusal(p, false);
        cr_assert_str_eq(why ? why : "(admitted)", "Cannot enforce AppArmor: AppArmor is not enabled on the host", "%s", confined[i]);
        free(why);
        json_object_put(p);
    }
    for (size_t i = 0; i < KITE_ARRAY_SIZE(free_); i++) {
        json_object *p = pod(free_[i]);
        cr_assert_null(kite_pods_apparmor_refusal(p, false), "%s", free_[i]);
        json_object_put(p);
    }
}

Test(kite_pods_admit, apparmor_enabled_file) {
    char path[] = "/tmp/kite-apparmor-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "Y\n", 2), 2);
    close(fd);
    cr_assert(kite_pods_apparmor_enabled(path));
    FILE *f = fopen(path, "w");
    fputs("N\n", f);
    fclose(f);
    cr_assert(!kite_pods_apparmor_enabled(path));
    unlink(path);
    cr_assert(!kite_pods_apparmor_enabled("/nonexistent/apparmor/enabled"));
}
