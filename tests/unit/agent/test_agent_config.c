#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "agent/agent.h"
#include "api/yaml.h"

static int apply(struct kite_agent_config *c, const char *yaml, char **err) {
    json_object *o = NULL;
    cr_assert_eq(kite_yaml_parse(yaml, strlen(yaml), &o, NULL), 0);
    int r = kite_agent_config_apply(c, o, err);
    json_object_put(o);
    return r;
}

Test(agent_config, defaults_are_the_kubelets) {
    struct kite_agent_config c;
    kite_agent_config_init(&c);
    cr_assert_eq(c.status_update_freq_ns, 10 * KITE_NS_PER_SEC);
    cr_assert_eq(c.status_report_freq_ns, 300 * KITE_NS_PER_SEC);
    cr_assert_eq(c.lease_duration_s, 40);
    cr_assert(c.register_node);
    cr_assert_eq(c.ns.max_pods, 110);
    cr_assert_eq(c.ns.max_images, 50);
    cr_assert_eq(c.ns.daemon_port, 10250);
    cr_assert_str_eq(c.root_dir, "/var/lib/kite-agent");
    kite_agent_config_release(&c);
}

Test(agent_config, file_values) {
    struct kite_agent_config c;
    kite_agent_config_init(&c);
    char *err = NULL;
    int r = apply(&c,
                  "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                  "nodeStatusUpdateFrequency: 4s\nnodeStatusReportFrequency: 1m\nnodeLeaseDurationSeconds: 20\n"
                  "maxPods: 50\nregisterNode: false\nnodeStatusMaxImages: -1\naddress: 0.0.0.0\nport: 10260\n"
                  "evictionHard: {memory.available: 200Mi, nodefs.available: 15%, imagefs.available: 15%}\n"
                  "kubeReserved: {cpu: 100m, memory: 1Gi}\nsystemReserved: {ephemeral-storage: 1Gi}\n"
                  "registerWithTaints:\n- {key: a, value: b, effect: NoSchedule}\n- {key: c, effect: NoExecute}\n"
                  "authentication: {anonymous: {enabled: false}}\npodCIDR: 10.244.0.0/24\n"
                  "allowedUnsafeSysctls: [net.core.somaxconn, kernel.msg*]\n",
                  &err);
    cr_assert_eq(r, 0, "%s", err ? err : "");
    cr_assert_eq(c.status_update_freq_ns, 4 * KITE_NS_PER_SEC);
    cr_assert_eq(c.status_report_freq_ns, 60 * KITE_NS_PER_SEC);
    cr_assert_eq(c.lease_duration_s, 20);
    cr_assert_eq(c.ns.max_pods, 50);
    cr_assert_not(c.register_node);
    cr_assert_eq(c.ns.max_images, -1);
    cr_assert_eq(c.ns.daemon_port, 10260);
    cr_assert_str_eq(c.address, "0.0.0.0");
    cr_assert_str_eq(c.pod_cidr, "10.244.0.0/24");
    cr_assert_str_eq(c.allowed_unsafe_sysctls, "net.core.somaxconn,kernel.msg*");
    cr_assert_eq(c.ns.evict_mem_bytes, 200 * 1024 * 1024);
    cr_assert_eq(c.ns.evict_nodefs_pct, 15.0);
    cr_assert_lt(c.ns.evict_nodefs_bytes, 0, "a percentage leaves the absolute unset");
    cr_assert_eq(c.ns.kube_reserved_cpu_m, 100);
    cr_assert_eq(c.ns.kube_reserved_mem_m, INT64_C(1024) * 1024 * 1024 * 1000);
    cr_assert_eq(c.ns.system_reserved_eph_m, INT64_C(1024) * 1024 * 1024 * 1000);
    cr_assert_eq(json_object_array_length(c.taints), 2);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(json_object_array_get_idx(c.taints, 1), "effect")),
                     "NoExecute");
    kite_agent_config_release(&c);
}

Test(agent_config, bad_values_name_the_field) {
    struct { const char *yaml, *msg; } cases[] = {
        {"nodeStatusUpdateFrequency: abc", "config: nodeStatusUpdateFrequency: invalid duration \"abc\""},
        {"nodeStatusReportFrequency: 10", "config: nodeStatusReportFrequency: invalid duration \"10\""},
        {"nodeStatusUpdateFrequency: -1s", "config: nodeStatusUpdateFrequency: duration must be positive"},
        {"nodeLeaseDurationSeconds: forty", "config: nodeLeaseDurationSeconds: invalid integer \"forty\""},
        {"nodeLeaseDurationSeconds: 0", "config: nodeLeaseDurationSeconds: 0 out of range"},
        {"maxPods: 1.5", "config: maxPods: invalid integer \"1.5\""},
        {"registerNode: maybe", "config: registerNode: invalid boolean \"maybe\""},
        {"port: 70000", "config: port: 70000 out of range"},
        {"evictionHard: {memory.available: lots}", "config: evictionHard: memory.available: invalid quantity \"lots\""},
        {"evictionHard: {disk.available: 1Gi}", "config: evictionHard: unknown eviction signal \"disk.available\""},
        {"evictionHard: {nodefs.available: 120%}", "invalid percentage \"120%\""},
        {"kubeReserved: {cpu: x}", "config: kubeReserved: cpu: invalid quantity \"x\""},
        {"systemReserved: {gpu: 1}", "config: systemReserved: unknown resource \"gpu\""},
        {"evictionHard: 5", "config: evictionHard: expected a mapping"},
        {"registerWithTaints: [{key: a, effect: Sometimes}]", "invalid effect \"Sometimes\""},
        {"registerWithTaints: {key: a}", "config: registerWithTaints: expected a list"},
        {"- a\n- b\n", "expected a mapping at the top"},
        {"podCIDR: 10.244.0.1/24", "config: podCIDR: invalid CIDR \"10.244.0.1/24\": host bits are set"},
        {"allowedUnsafeSysctls: net.core.somaxconn", "config: allowedUnsafeSysctls: expected a list"},
        {"allowedUnsafeSysctls: [vm.swappiness]", "the sysctls \"vm.swappiness\" are not known to be namespaced"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_agent_config c;
        kite_agent_config_init(&c);
        char *err = NULL;
        cr_assert_eq(apply(&c, cases[i].yaml, &err), -EINVAL, "case %zu", i);
        cr_assert(err && strstr(err, cases[i].msg), "case %zu: %s", i, err ? err : "(null)");
        free(err);
        kite_agent_config_release(&c);
    }
}

Test(agent_config, flags_override_file) {
    char path[] = "/tmp/kite-agent-cfg-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *y = "nodeStatusUpdateFrequency: 4s\nmaxPods: 50\nregisterWithTaints: [{key: a, effect: NoSchedule}]\n";
    cr_assert_eq(write(fd, y, strlen(y)), (ssize_t)strlen(y));
    close(fd);
    struct kite_agent_config c;
    kite_agent_config_init(&c);
    char *err = NULL;
    cr_assert_eq(kite_agent_config_load_file(&c, path, &err), 0, "%s", err ? err : "");
    unlink(path);
    struct { const char *flag, *value; } flags[] = {
        {"node-status-update-frequency", "2s"}, {"max-pods", "20"},
        {"register-with-taints", "x=y:NoExecute,z:PreferNoSchedule"}, {"node-ip", "10.1.2.3"},
        {"node-labels", "a=1,b=2"}, {"root-dir", "/tmp/r"}, {"register-node", "false"},
        {"node-status-report-frequency", "30s"}, {"node-lease-duration-seconds", "60"}, {"node-name", "x1"},
        {"pod-cidr", "10.1.0.0/16"}, {"pod-bridge", "br-pods"},
    };
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        cr_assert_eq(kite_agent_config_set_flag(&c, flags[i].flag, flags[i].value, &err), 0, "%s", flags[i].flag);
    cr_assert_eq(c.status_update_freq_ns, 2 * KITE_NS_PER_SEC);
    cr_assert_eq(c.status_report_freq_ns, 30 * KITE_NS_PER_SEC);
    cr_assert_eq(c.lease_duration_s, 60);
    cr_assert_eq(c.ns.max_pods, 20);
    cr_assert_eq(json_object_array_length(c.taints), 2, "flag taints replace the file's");
    json_object *t0 = json_object_array_get_idx(c.taints, 0);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(t0, "key")), "x");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(t0, "value")), "y");
    cr_assert_null(json_object_object_get(json_object_array_get_idx(c.taints, 1), "value"));
    cr_assert_str_eq(c.node_ip, "10.1.2.3");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(c.labels, "b")), "2");
    cr_assert_str_eq(c.root_dir, "/tmp/r");
    cr_assert_not(c.register_node);
    cr_assert_str_eq(c.node_name, "x1");
    cr_assert_str_eq(c.pod_cidr, "10.1.0.0/16");
    cr_assert_str_eq(c.pod_bridge, "br-pods");
    kite_agent_config_release(&c);
}

Test(agent_config, bad_flags) {
    struct { const char *flag, *value, *msg; int r; } cases[] = {
        {"node-status-update-frequency", "abc", "flag --node-status-update-frequency: invalid duration \"abc\"", -EINVAL},
        {"max-pods", "x", "flag --max-pods: invalid integer \"x\"", -EINVAL},
        {"node-labels", "novalue", "flag --node-labels: invalid label \"novalue\"", -EINVAL},
        {"register-with-taints", "a=b", "flag --register-with-taints: invalid taint \"a=b\"", -EINVAL},
        {"register-with-taints", "a=b:Never", "invalid effect \"Never\"", -EINVAL},
        {"register-node", "yes", "flag --register-node: invalid boolean \"yes\"", -EINVAL},
        {"pod-cidr", "fd00::/64", "flag --pod-cidr: invalid CIDR \"fd00::/64\": \"fd00::\" is not an IPv4 address", -EINVAL},
        {"pod-cidr", "10.0.0.0/31", "flag --pod-cidr: invalid CIDR \"10.0.0.0/31\": the prefix length must be 8 to 30", -EINVAL},
        {"pod-bridge", "a-name-longer-than-15", "flag --pod-bridge: invalid interface name", -EINVAL},
        {"pod-bridge", "a/b", "flag --pod-bridge: invalid interface name", -EINVAL},
        {"bogus", "1", "unknown flag --bogus", -ENOENT},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kite_agent_config c;
        kite_agent_config_init(&c);
        char *err = NULL;
        cr_assert_eq(kite_agent_config_set_flag(&c, cases[i].flag, cases[i].value, &err), cases[i].r, "case %zu", i);
        cr_assert(err && strstr(err, cases[i].msg), "case %zu: %s", i, err ? err : "(null)");
        free(err);
        kite_agent_config_release(&c);
    }
}

Test(agent_config, missing_file_is_an_error) {
    struct kite_agent_config c;
    kite_agent_config_init(&c);
    char *err = NULL;
    cr_assert_eq(kite_agent_config_load_file(&c, "/nonexistent/kite.yaml", &err), -ENOENT);
    cr_assert(err && strstr(err, "/nonexistent/kite.yaml"));
    free(err);
    kite_agent_config_release(&c);
}

Test(agent_config, log_endpoint_settings) {
    struct kite_agent_config c;
    kite_agent_config_init(&c);
    char *err = NULL;
    cr_assert_eq(apply(&c, "port: 0\ntlsCertFile: /a.crt\ntlsPrivateKeyFile: /a.key\n"
                           "authentication: {x509: {clientCAFile: /ca.crt}, webhook: {enabled: false}}\n", &err), 0, "%s", err);
    cr_assert_eq(c.ns.daemon_port, 0); /* any free port */
    cr_assert_str_eq(c.tls_cert_file, "/a.crt");
    cr_assert_str_eq(c.tls_key_file, "/a.key");
    cr_assert_str_eq(c.client_ca_file, "/ca.crt");
    cr_assert_eq(kite_agent_config_set_flag(&c, "port", "10260", &err), 0);
    cr_assert_eq(c.ns.daemon_port, 10260);
    cr_assert_eq(kite_agent_config_set_flag(&c, "client-ca-file", "/other.crt", &err), 0);
    cr_assert_str_eq(c.client_ca_file, "/other.crt");
    cr_assert_eq(kite_agent_config_set_flag(&c, "address", "127.0.0.1", &err), 0);
    cr_assert_str_eq(c.address, "127.0.0.1");
    cr_assert_eq(kite_agent_config_set_flag(&c, "port", "65536", &err), -EINVAL);
    cr_assert(strstr(err, "--port"), "%s", err);
    free(err);
    kite_agent_config_release(&c);
}
