/* The machine readers, fed fake /proc, /sys and /etc text. */
#include <criterion/criterion.h>
#include <unistd.h>

#include "agent/nodestatus/internal.h"
#include "test_nodestatus_util.h"

TestSuite(ns_machine, .fini = nst_cleanup);

Test(ns_machine, default_route_picks_lowest_metric_up_default) {
    static const struct { const char *text; const char *iface; int err; } cases[] = {
        /* two defaults: the lower metric wins, the non-default 10.0.0.0/16 is ignored */
        {"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
         "wlan0\t00000000\t0100A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
         "eth0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
         "eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n",
         "eth0", 0},
        /* a default route that is down (flags without RTF_UP) does not count */
        {"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
         "eth1\t00000000\t0100000A\t0002\t0\t0\t0\t00000000\t0\t0\t0\n"
         "ens3\t00000000\t0102000A\t0003\t0\t0\t5\t00000000\t0\t0\t0\n",
         "ens3", 0},
        /* no default route at all */
        {"Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
         "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n",
         NULL, -ENOENT},
        {"", NULL, -ENOENT},
        {"Iface\tDestination\n garbage line\n", NULL, -ENOENT},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        char *iface = NULL;
        int r = kite_ns_parse_default_route(cases[i].text, &iface);
        cr_assert_eq(r, cases[i].err, "case %zu: %d", i, r);
        if (cases[i].iface) cr_assert_str_eq(iface, cases[i].iface, "case %zu", i);
        free(iface);
    }
}

Test(ns_machine, default_route_ip_reads_the_sysroot_route) {
    /* The fixture's default route is eth0, which does not exist here: the sysroot's route
     * table is what is read (a loopback-only table gives the loopback address). */
    char *root = nst_tmpdir();
    nst_write(root, "/proc/net/route",
              "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
              "lo\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n");
    char ip[NS_IP_LEN];
    cr_assert_eq(kite_ns_default_route_ip(root, ip, sizeof(ip)), 0);
    cr_assert_str_eq(ip, "127.0.0.1");
    nst_write(root, "/proc/net/route",
              "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
              "nosuchif9\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n");
    cr_assert_eq(kite_ns_default_route_ip(root, ip, sizeof(ip)), -EADDRNOTAVAIL);
    nst_rmtree(root);
    free(root);
}

Test(ns_machine, os_release_pretty_name) {
    static const struct { const char *text, *want; } cases[] = {
        {"NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n", "Debian GNU/Linux 12 (bookworm)"},
        {"PRETTY_NAME='Ubuntu 24.04 LTS'\n", "Ubuntu 24.04 LTS"},
        {"PRETTY_NAME=Alpine\n", "Alpine"},
        {"PRETTY_NAME=\"Say \\\"hi\\\"\"\n", "Say \"hi\""},
        {"PRETTY_NAME_X=\"no\"\nPRETTY_NAME=\"yes\"", "yes"},
        {"PRETTY_NAME=\"\"\n", ""},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        char *v = NULL;
        cr_assert_eq(kite_ns_parse_os_release(cases[i].text, "PRETTY_NAME", &v), 0, "case %zu", i);
        cr_assert_str_eq(v, cases[i].want, "case %zu", i);
        free(v);
    }
    char *v = NULL;
    cr_assert_eq(kite_ns_parse_os_release("NAME=x\n", "PRETTY_NAME", &v), -ENOENT);

    /* /usr/lib/os-release is the fallback when /etc/os-release is absent */
    char *root = nst_tmpdir();
    cr_assert_eq(kite_ns_os_pretty_name(root, &v), -ENOENT);
    nst_write(root, "/usr/lib/os-release", "PRETTY_NAME=\"Fallback OS\"\n");
    cr_assert_eq(kite_ns_os_pretty_name(root, &v), 0);
    cr_assert_str_eq(v, "Fallback OS");
    free(v);
    nst_rmtree(root);
    free(root);
}

Test(ns_machine, meminfo) {
    char *root = nst_fixture("machine1");
    int64_t v;
    cr_assert_eq(kite_ns_meminfo_bytes(root, "MemTotal", &v), 0);
    cr_assert_eq(v, INT64_C(16318472) * 1024);
    cr_assert_eq(kite_ns_meminfo_bytes(root, "MemAvailable", &v), 0);
    cr_assert_eq(v, INT64_C(8000000) * 1024);
    /* a count with no unit is not scaled */
    cr_assert_eq(kite_ns_meminfo_bytes(root, "HugePages_Total", &v), 0);
    cr_assert_eq(v, 4);
    /* "Mem" is a prefix of keys but not a key */
    cr_assert_eq(kite_ns_meminfo_bytes(root, "Mem", &v), -ENOENT);
    cr_assert_eq(kite_ns_meminfo_bytes("/nonexistent-root", "MemTotal", &v), -ENOENT);
    free(root);
}

Test(ns_machine, cpu_list_and_cpu_max) {
    static const struct { const char *list; int n, err; } lists[] = {
        {"0-7\n", 8, 0}, {"0", 1, 0}, {"0-3,8,10-11", 7, 0}, {"0,2,4,6", 4, 0},
        {"", 0, -EINVAL}, {"3-1", 0, -EINVAL}, {"0-3x", 0, -EINVAL}, {"a", 0, -EINVAL},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(lists); i++) {
        int n = -1;
        cr_assert_eq(kite_ns_parse_cpu_list(lists[i].list, &n), lists[i].err, "list %zu", i);
        if (!lists[i].err) cr_assert_eq(n, lists[i].n, "list %zu", i);
    }
    static const struct { const char *text; int n, err; } maxes[] = {
        {"max 100000\n", 0, 0},      {"250000 100000", 3, 0}, {"200000 100000", 2, 0},
        {"50000 100000", 1, 0},      {"1000 100000", 1, 0},   {"150000", 2, 0},
        {"0 100000", 0, -EINVAL},    {"x 100000", 0, -EINVAL}, {"", 0, -EINVAL},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(maxes); i++) {
        int n = -1;
        cr_assert_eq(kite_ns_parse_cpu_max(maxes[i].text, &n), maxes[i].err, "max %zu", i);
        if (!maxes[i].err) cr_assert_eq(n, maxes[i].n, "max %zu", i);
    }
}

Test(ns_machine, online_cpus_under_sysroot_is_capped_by_quota) {
    char *root = nst_fixture_copy("machine1");
    int n;
    cr_assert_eq(kite_ns_online_cpus(root, &n), 0);
    cr_assert_eq(n, 3, "8 online cpus, cpu.max 2.5 cpus -> ceil 3");
    nst_write(root, "/sys/fs/cgroup/cpu.max", "max 100000\n");
    cr_assert_eq(kite_ns_online_cpus(root, &n), 0);
    cr_assert_eq(n, 8);
    nst_write(root, "/sys/fs/cgroup/cpu.max", "1600000 100000\n"); /* quota above the cpus */
    cr_assert_eq(kite_ns_online_cpus(root, &n), 0);
    cr_assert_eq(n, 8);
    nst_write(root, "/sys/devices/system/cpu/online", "0-1,4\n");
    cr_assert_eq(kite_ns_online_cpus(root, &n), 0);
    cr_assert_eq(n, 3);
    /* cgroup v1: quota/period files, -1 = no quota */
    _cleanup_free_ char *v2 = kite_asprintf("%s/sys/fs/cgroup/cpu.max", root);
    cr_assert_eq(unlink(v2), 0);
    nst_write(root, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "150000\n");
    nst_write(root, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    cr_assert_eq(kite_ns_online_cpus(root, &n), 0);
    cr_assert_eq(n, 2);
    nst_write(root, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    cr_assert_eq(kite_ns_online_cpus(root, &n), 0);
    cr_assert_eq(n, 3);
    nst_rmtree(root);
    free(root);
}

Test(ns_machine, hugepages) {
    char *root = nst_fixture_copy("machine1");
    struct kite_ns_hugepages *hp;
    size_t n;
    cr_assert_eq(kite_ns_hugepages(root, &hp, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(hp[0].page_bytes, 2 * 1024 * 1024);
    cr_assert_eq(hp[0].total_bytes, 4 * 2 * 1024 * 1024);
    cr_assert_eq(hp[1].page_bytes, INT64_C(1024) * 1024 * 1024);
    cr_assert_eq(hp[1].total_bytes, 0);
    free(hp);
    /* entries that are not hugepage dirs are ignored */
    nst_write(root, "/sys/kernel/mm/hugepages/README", "x");
    nst_write(root, "/sys/kernel/mm/hugepages/hugepages-64kB/nr_hugepages", "3\n");
    cr_assert_eq(kite_ns_hugepages(root, &hp, &n), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(hp[0].page_bytes, 64 * 1024);
    cr_assert_eq(hp[0].total_bytes, 3 * 64 * 1024);
    free(hp);
    nst_rmtree(root);
    free(root);
}

Test(ns_machine, pid_stats) {
    char *root = nst_fixture_copy("machine1");
    int64_t limit, running;
    cr_assert_eq(kite_ns_pid_stats(root, &limit, &running), 0);
    cr_assert_eq(limit, 127353, "threads-max is lower than pid_max");
    cr_assert_eq(running, 1353, "loadavg's total tasks");
    /* without loadavg: count /proc/<pid> dirs */
    _cleanup_free_ char *la = kite_asprintf("%s/proc/loadavg", root);
    cr_assert_eq(unlink(la), 0);
    nst_write(root, "/proc/1/stat", "x");
    nst_write(root, "/proc/42/stat", "x");
    nst_write(root, "/proc/self-not-a-pid/x", "x");
    nst_write(root, "/proc/sys/kernel/threads-max", "9999999\n");
    cr_assert_eq(kite_ns_pid_stats(root, &limit, &running), 0);
    cr_assert_eq(limit, 4194304);
    cr_assert_eq(running, 2);
    nst_rmtree(root);
    free(root);
}

Test(ns_machine, goarch) {
    static const struct { const char *in, *out; } cases[] = {
        {"x86_64", "amd64"}, {"aarch64", "arm64"}, {"i686", "386"},   {"i386", "386"},
        {"armv7l", "arm"},   {"armv6l", "arm"},    {"ppc64le", "ppc64le"}, {"s390x", "s390x"},
        {"riscv64", "riscv64"}, {"sparc64", "sparc64"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++)
        cr_assert_str_eq(kite_ns_goarch(cases[i].in), cases[i].out, "%s", cases[i].in);
}

Test(ns_machine, read_value_strips_and_bounds) {
    char *root = nst_tmpdir();
    nst_write(root, "/v", "  abc \n\n");
    char *v;
    cr_assert_eq(kite_ns_read_value(root, "/v", &v), 0);
    cr_assert_str_eq(v, "abc");
    free(v);
    nst_write(root, "/empty", "");
    cr_assert_eq(kite_ns_read_value(root, "/empty", &v), 0);
    cr_assert_str_eq(v, "");
    free(v);
    /* a file beyond NS_MAX_FILE_BYTES is refused, not read whole */
    _cleanup_free_ char *big = kite_malloc(NS_MAX_FILE_BYTES + 10);
    memset(big, 'x', NS_MAX_FILE_BYTES + 9);
    big[NS_MAX_FILE_BYTES + 9] = '\0';
    nst_write(root, "/big", big);
    cr_assert_eq(kite_ns_read_file(root, "/big", &v), -EFBIG);
    nst_rmtree(root);
    free(root);
}
