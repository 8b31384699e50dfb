/* kite_nodestatus_compute on the real machine (sysroot ""): every value must equal what the
 * machine itself reports through an independent path. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>

#include "agent/nodestatus/nodestatus.h"
#include "agent/runtime/runtime.h"
#include "api/quantity.h"
#include "base/base.h"
#include "test_nodestatus_util.h"

/* First line of a file, without its newline; NULL when unreadable. */
static char *first_line(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    fclose(f);
    if (n < 0) {
        free(line);
        return NULL;
    }
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static char *os_release_pretty(void) {
    FILE *f = fopen("/etc/os-release", "r");
    if (!f) f = fopen("/usr/lib/os-release", "r");
    if (!f) return NULL;
    char line[1024];
    char *out = NULL;
    while (fgets(line, sizeof(line), f)) {
        if (!kite_startswith(line, "PRETTY_NAME=")) continue;
        char *v = line + strlen("PRETTY_NAME=");
        v[strcspn(v, "\n")] = '\0';
        size_t n = strlen(v);
        if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
            v[n - 1] = '\0';
            v++;
        }
        out = kite_strdup(v);
        break;
    }
    fclose(f);
    return out;
}

Test(nodestatus_real, matches_the_machine) {
    struct kite_ns_config cfg;
    kite_ns_config_defaults(&cfg);
    cfg.node_name = "real";
    cfg.root_dir = "/tmp";
    cfg.kubelet_version = "v1.32.0-kite.1";
    struct kite_runtime *rt = kite_runtime_fake_new("0.1.0");
    struct kite_ns_sources src = {.sysroot = "", .runtime = rt, .runtime_ready = true, .pleg_healthy = true};
    json_object *st = NULL;
    cr_assert_eq(kite_nodestatus_compute(&cfg, &src, NULL, &st, NULL), 0);

    /* cpu = cpus this process may use (exactly, when no cgroup quota applies) */
    cpu_set_t set;
    CPU_ZERO(&set);
    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    int affinity = CPU_COUNT(&set);
    _cleanup_free_ char *cpumax = first_line("/sys/fs/cgroup/cpu.max");
    _cleanup_free_ char *v1quota = first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    int64_t cpu_m = 0;
    cr_assert_eq(kite_quantity_parse_milli(nst_get(st, "capacity.cpu"), &cpu_m), 0);
    bool quota = cpumax ? !kite_startswith(cpumax, "max") : v1quota && strcmp(v1quota, "-1") != 0;
    if (!quota)
        cr_assert_eq(cpu_m, (int64_t)affinity * 1000);
    else
        cr_assert_leq(cpu_m, (int64_t)affinity * 1000);

    /* memory = MemTotal */
    _cleanup_free_ char *memline = first_line("/proc/meminfo");
    long long kb = 0;
    cr_assert_eq(sscanf(memline, "MemTotal: %lld kB", &kb), 1);
    int64_t mem_m = 0;
    cr_assert_eq(kite_quantity_parse_milli(nst_get(st, "capacity.memory"), &mem_m), 0);
    cr_assert_eq(mem_m, (int64_t)kb * 1024 * 1000);

    /* ephemeral-storage = root_dir's filesystem */
    struct statvfs sv;
    cr_assert_eq(statvfs("/tmp", &sv), 0);
    int64_t eph_m = 0;
    cr_assert_eq(kite_quantity_parse_milli(nst_get(st, "capacity.ephemeral-storage"), &eph_m), 0);
    cr_assert_eq(eph_m, (int64_t)sv.f_blocks * (int64_t)sv.f_frsize * 1000);

    struct utsname u;
    cr_assert_eq(uname(&u), 0);
    cr_assert_str_eq(nst_get(st, "nodeInfo.kernelVersion"), u.release);
    cr_assert_str_eq(nst_get(st, "nodeInfo.architecture"), kite_ns_goarch(u.machine));
    _cleanup_free_ char *boot = first_line("/proc/sys/kernel/random/boot_id");
    cr_assert_not_null(boot);
    cr_assert_str_eq(nst_get(st, "nodeInfo.bootID"), boot);
    _cleanup_free_ char *pretty = os_release_pretty();
    if (pretty) cr_assert_str_eq(nst_get(st, "nodeInfo.osImage"), pretty);
    _cleanup_free_ char *mid = first_line("/etc/machine-id");
    if (mid && *mid) cr_assert_str_eq(nst_get(st, "nodeInfo.machineID"), mid);
    cr_assert_str_eq(nst_get(st, "nodeInfo.containerRuntimeVersion"),
                     "fake://0.1.0");

    /* with a default route there is an InternalIP; either way the Hostname is last */
    json_object *addrs = json_object_object_get(st, "addresses");
    size_t n = json_object_array_length(addrs);
    cr_assert_geq(n, 1);
    cr_assert_str_eq(nst_get(json_object_array_get_idx(addrs, n - 1), "address"), "real");
    FILE *f = fopen("/proc/net/route", "r");
    bool has_default = false;
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            char iface[32];
            unsigned long dest, gw, flags;
            if (sscanf(line, "%31s %lx %lx %lx", iface, &dest, &gw, &flags) == 4 && dest == 0 && (flags & 1))
                has_default = true;
        }
        fclose(f);
    }
    if (has_default) {
        cr_assert_eq(n, 2);
        cr_assert_str_eq(nst_get(json_object_array_get_idx(addrs, 0), "type"), "InternalIP");
    }
    cr_assert_str_eq(nst_cond_field(st, "Ready", "status"), "True");
    json_object_put(st);
    kite_runtime_free(rt);
}
