/* Resource usage from cgroups and /proc (cgstats.h) over fixture trees of both layouts: cgroup
 * v1 (cpuacct alone or co-mounted as cpu,cpuacct; memory with hierarchical total_ counters) and
 * v2 (the unified tree), and the rendering of /metrics/resource and /stats/summary from them. */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <string.h>

#include "agent/logs/resource.h"
#include "agent/runtime/cgstats.h"
#include "test_nodestatus_util.h"

Test(cgstats, v1_container) {
    _cleanup_free_ char *root = nst_fixture("cgv1");
    struct kite_usage u;
    cr_assert_eq(kite_cgroup_usage(root, "/kite/pod1234/abcd", &u), 0);
    cr_assert(u.has_cpu && u.has_memory);
    cr_assert_eq(u.cpu_ns, 5123456789ull); /* cpuacct.usage is in ns */
    cr_assert_eq(u.memory_usage, 57671680ull);
    /* usage - total_inactive_file (hierarchical), not the cgroup's own inactive_file */
    cr_assert_eq(u.memory_working_set, 57671680ull - 2097152ull);
}

Test(cgstats, v1_comounted_cpu_cpuacct) {
    _cleanup_free_ char *root = nst_fixture("cgv1cc");
    struct kite_usage u;
    cr_assert_eq(kite_cgroup_usage(root, "/kite/pod1234/efgh", &u), 0);
    cr_assert_eq(u.cpu_ns, 42);
    /* inactive_file alone when there are no total_ counters; the working set floors at 0 */
    cr_assert_eq(u.memory_usage, 4096);
    cr_assert_eq(u.memory_working_set, 0);
}

Test(cgstats, v2_container) {
    _cleanup_free_ char *root = nst_fixture("cgv2");
    struct kite_usage u;
    cr_assert_eq(kite_cgroup_usage(root, "/kite/pod1234/abcd", &u), 0);
    cr_assert_eq(u.cpu_ns, 7250000ull * 1000); /* usage_usec */
    cr_assert_eq(u.memory_usage, 10485760ull);
    cr_assert_eq(u.memory_working_set, 10485760ull - 3145728ull);
}

Test(cgstats, missing_cgroup) {
    _cleanup_free_ char *v1 = nst_fixture("cgv1"), *v2 = nst_fixture("cgv2");
    struct kite_usage u = {.cpu_ns = 7};
    cr_assert_eq(kite_cgroup_usage(v1, "/kite/pod1234/gone", &u), -ENOENT);
    cr_assert_eq(kite_cgroup_usage(v2, "/kite/pod1234/gone", &u), -ENOENT);
    cr_assert_eq(u.cpu_ns, 7); /* untouched on failure */
}

Test(cgstats, node_from_proc) {
    _cleanup_free_ char *root = nst_fixture("cgv1");
    struct kite_usage u;
    cr_assert_eq(kite_node_usage(root, 100, &u), 0);
    /* user + nice + system + irq + softirq + steal ticks at 100 a second */
    cr_assert_eq(u.cpu_ns, (188116ull + 865 + 97285 + 0 + 914 + 0) * 10000000ull);
    cr_assert_eq(u.memory_usage, (24683748ull - 21860428ull) * 1024);
    cr_assert_eq(u.memory_working_set, (24683748ull - 21860428ull - 600000ull) * 1024);
    cr_assert_eq(kite_node_usage(root, 0, &u), -EINVAL);
}

Test(cgstats, parsers) {
    uint64_t v;
    cr_assert_eq(kite_cgstats_number("123\n", &v), 0);
    cr_assert_eq(v, 123);
    cr_assert_eq(kite_cgstats_number("max\n", &v), -EINVAL);
    cr_assert_eq(kite_cgstats_number("12 34\n", &v), -EINVAL);
    cr_assert_eq(kite_cgstats_number("99999999999999999999999\n", &v), -ERANGE);
    const char *stat = "total_inactive_file 5\ninactive_file 7\nfile 9\n";
    cr_assert_eq(kite_cgstats_keyed(stat, "inactive_file", &v), 0);
    cr_assert_eq(v, 7); /* a key is matched whole, not as a suffix */
    cr_assert_eq(kite_cgstats_keyed(stat, "file", &v), 0);
    cr_assert_eq(v, 9);
    cr_assert_eq(kite_cgstats_keyed(stat, "inactive", &v), -ENOENT);
    cr_assert_eq(kite_cgstats_keyed("usage_usec x\n", "usage_usec", &v), -EINVAL);
}

Test(cgstats, resource_metrics_text) {
    struct kite_usage node = {.has_cpu = true, .has_memory = true, .cpu_ns = 1500000000ull, .memory_working_set = 4096};
    struct kite_ctr_sample c[] = {
        {.ns = "default", .pod = "web", .uid = "u1", .name = "b", .started_ns = 1700000000000000000, .ts_ns = 1700000005000000000,
         .u = {.has_cpu = true, .has_memory = true, .cpu_ns = 250000000, .memory_working_set = 1000}},
        {.ns = "default", .pod = "web", .uid = "u1", .name = "a", .started_ns = 1700000001000000000, .ts_ns = 1700000005000000000,
         .u = {.has_cpu = true, .has_memory = true, .cpu_ns = 2000000001, .memory_working_set = 24}},
    };
    struct kite_buf b = {0};
    kite_resource_metrics_render(&node, 1700000006000000000, c, 2, false, &b);
    const char *t = b.p;
    cr_assert(strstr(t, "# TYPE container_cpu_usage_seconds_total counter\n"
                        "container_cpu_usage_seconds_total{container=\"a\",namespace=\"default\",pod=\"web\"} 2.000000001 1700000005000\n"
                        "container_cpu_usage_seconds_total{container=\"b\",namespace=\"default\",pod=\"web\"} 0.250000000 1700000005000\n"),
              "%s", t);
    cr_assert(strstr(t, "container_memory_working_set_bytes{container=\"b\",namespace=\"default\",pod=\"web\"} 1000 1700000005000\n"));
    cr_assert(strstr(t, "container_start_time_seconds{container=\"a\",namespace=\"default\",pod=\"web\"} 1700000001.000000000 1700000001000\n"));
    cr_assert(strstr(t, "node_cpu_usage_seconds_total 1.500000000 1700000006000\n"));
    cr_assert(strstr(t, "node_memory_working_set_bytes 4096 1700000006000\n"));
    cr_assert(strstr(t, "pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 2.250000001 1700000005000\n"));
    cr_assert(strstr(t, "pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} 1024 1700000005000\n"));
    cr_assert(strstr(t, "resource_scrape_error 0\n"));
    kite_buf_release(&b);

    /* a node not measured: its families have no samples; label values escaped */
    struct kite_ctr_sample odd = {.ns = "n", .pod = "p", .uid = "u", .name = "q\"\\", .u = {.has_cpu = true}};
    kite_resource_metrics_render(NULL, 0, &odd, 1, true, &b);
    cr_assert(strstr(b.p, "container=\"q\\\"\\\\\""), "%s", b.p);
    cr_assert_null(strstr(b.p, "\nnode_cpu_usage_seconds_total "));
    cr_assert_null(strstr(b.p, "container_memory_working_set_bytes{"));
    cr_assert(strstr(b.p, "resource_scrape_error 1\n"));
    kite_buf_release(&b);
}

Test(cgstats, summary_json) {
    struct kite_usage node = {.has_cpu = true, .has_memory = true, .cpu_ns = 5, .memory_usage = 10, .memory_working_set = 8};
    struct kite_ctr_sample c[] = {
        {.ns = "default", .pod = "web", .uid = "u1", .name = "a", .started_ns = 1700000001000000000, .ts_ns = 1700000005000000000,
         .u = {.has_cpu = true, .has_memory = true, .cpu_ns = 3, .memory_usage = 7, .memory_working_set = 6}},
        {.ns = "default", .pod = "web", .uid = "u1", .name = "b", .started_ns = 1700000000000000000, .ts_ns = 1700000005000000000,
         .u = {.has_cpu = true, .has_memory = true, .cpu_ns = 4, .memory_usage = 2, .memory_working_set = 1}},
    };
    struct kite_buf b = {0};
    kite_stats_summary_render("n1", 1600000000000000000, &node, 1700000006000000000, c, 2, &b);
    json_object *s = json_tokener_parse(b.p);
    cr_assert_not_null(s, "%s", b.p);
    json_object *n = json_object_object_get(s, "node");
    cr_assert_str_eq(json_object_get_string(json_object_object_get(n, "nodeName")), "n1");
    cr_assert_eq(json_object_get_int64(json_object_object_get(json_object_object_get(n, "memory"), "workingSetBytes")), 8);
    json_object *pods = json_object_object_get(s, "pods");
    cr_assert_eq(json_object_array_length(pods), 1);
    json_object *p = json_object_array_get_idx(pods, 0);
    cr_assert_str_eq(json_object_get_string(json_object_object_get(p, "startTime")), "2023-11-14T22:13:20Z");
    cr_assert_eq(json_object_get_int64(json_object_object_get(json_object_object_get(p, "cpu"), "usageCoreNanoSeconds")), 7);
    cr_assert_eq(json_object_array_length(json_object_object_get(p, "containers")), 2);
    json_object_put(s);
    kite_buf_release(&b);
}
