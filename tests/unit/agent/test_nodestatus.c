/* kite_nodestatus_compute over a fake machine (fixtures/machine1 plus fake statfs, route, clock
 * and runtime): every field, the allocatable arithmetic, conditions and transitions. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "agent/nodestatus/internal.h"
#include "agent/runtime/runtime.h"
#include "test_nodestatus_util.h"

TestSuite(nodestatus, .fini = nst_cleanup);

#define T0 "2026-12-02T09:56:15Z"
#define T1 "2026-12-02T09:56:25Z"
#define T2 "2026-12-02T09:56:35Z"

struct env {
    char *root;
    struct nst_fake fake;
    struct kite_fake_clock clk;
    struct kite_runtime *rt;
    struct kite_ns_config cfg;
    struct kite_ns_sources src;
    struct kite_ns_events ev;
};

static void env_init(struct env *e) {
    memset(e, 0, sizeof(*e));
    e->root = nst_fixture_copy("machine1");
    e->fake = NST_FAKE_MACHINE1;
    int64_t t0;
    cr_assert_eq(kite_time_parse(T0, &t0), 0);
    kite_fake_clock_init(&e->clk, t0);
    e->rt = kite_runtime_fake_new("1.7.22");
    kite_ns_config_defaults(&e->cfg);
    e->cfg.node_name = "worker-node-3";
    e->cfg.root_dir = "/var/lib/kite";
    e->cfg.kubelet_version = "v1.32.0-kite.1";
    e->src = (struct kite_ns_sources){
        .sysroot = e->root,
        .clock = &e->clk.clock,
        .runtime = e->rt,
        .statfs = nst_statfs,
        .default_route_ip = nst_route_ip,
        .ud = &e->fake,
        .runtime_ready = true,
        .pleg_healthy = true,
    };
}

static void env_release(struct env *e) {
    kite_ns_events_release(&e->ev);
    kite_runtime_free(e->rt);
    nst_rmtree(e->root);
    free(e->root);
}

static json_object *run(struct env *e, json_object *prev) {
    json_object *st = NULL;
    cr_assert_eq(kite_nodestatus_compute(&e->cfg, &e->src, prev, &st, &e->ev), 0);
    cr_assert_not_null(st);
    return st;
}

static void advance(struct env *e) { kite_fake_clock_advance(&e->clk, 10 * KITE_NS_PER_SEC); }

static void assert_events(struct env *e, const char *const *want, size_t n) {
    cr_assert_eq(e->ev.n, n, "events: got %zu want %zu", e->ev.n, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(e->ev.v[i].type, "Normal");
        cr_assert_str_eq(e->ev.v[i].reason, want[i]);
        char msg[128];
        snprintf(msg, sizeof(msg), "Node worker-node-3 status is now: %s", want[i]);
        cr_assert_str_eq(e->ev.v[i].message, msg);
    }
    kite_ns_events_release(&e->ev);
}

static const char *to_s(json_object *o) {
    return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

Test(nodestatus, full_status_of_fake_machine) {
    struct env e;
    env_init(&e);
    e.src.online_cpus = NULL; /* exercise the sysroot cpu path: 8 online, quota 2.5 -> 3 */
    json_object *st = run(&e, NULL);

    /* addresses: InternalIP from the default route, then Hostname = node name */
    cr_assert_str_eq(to_s(json_object_object_get(st, "addresses")),
                     "[{\"type\":\"InternalIP\",\"address\":\"10.0.0.13\"},"
                     "{\"type\":\"Hostname\",\"address\":\"worker-node-3\"}]");
    /* nodeInfo, in Kubernetes' field order */
    cr_assert_str_eq(to_s(json_object_object_get(st, "nodeInfo")),
                     "{\"machineID\":\"966f88b992d85b9ebc325b493c9769e3\","
                     "\"systemUUID\":\"7e6f2553-214f-5184-af6b-76f49be32a04\","
                     "\"bootID\":\"13292d14-3c09-5f6d-9127-e9364230bdb2\","
                     "\"kernelVersion\":\"6.1.0-28-amd64\","
                     "\"osImage\":\"Debian GNU/Linux 12 (bookworm)\","
                     "\"containerRuntimeVersion\":\"fake://1.7.22\","
                     "\"kubeletVersion\":\"v1.32.0-kite.1\",\"kubeProxyVersion\":\"\","
                     "\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"}");
    /* capacity: keys sorted as Go marshals a map */
    cr_assert_str_eq(to_s(json_object_object_get(st, "capacity")),
                     "{\"cpu\":\"3\",\"ephemeral-storage\":\"61202244Ki\",\"hugepages-1Gi\":\"0\","
                     "\"hugepages-2Mi\":\"8Mi\",\"memory\":\"16318472Ki\",\"pods\":\"110\"}");
    /* allocatable: memory - 100Mi eviction - 8Mi hugepages; ephemeral - float32(10%) */
    cr_assert_str_eq(to_s(json_object_object_get(st, "allocatable")),
                     "{\"cpu\":\"3\",\"ephemeral-storage\":\"56403987978\",\"hugepages-1Gi\":\"0\","
                     "\"hugepages-2Mi\":\"8Mi\",\"memory\":\"16207880Ki\",\"pods\":\"110\"}");
    cr_assert_str_eq(to_s(json_object_object_get(st, "daemonEndpoints")),
                     "{\"kubeletEndpoint\":{\"Port\":10250}}");
    /* no images in the runtime: the field is omitted (omitempty) */
    cr_assert_null(json_object_object_get(st, "images"));

    /* conditions in setter order, all first reported now */
    const char *want =
        "[{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"" T0 "\","
        "\"lastTransitionTime\":\"" T0 "\",\"reason\":\"KubeletHasSufficientMemory\","
        "\"message\":\"kubelet has sufficient memory available\"},"
        "{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"" T0 "\","
        "\"lastTransitionTime\":\"" T0 "\",\"reason\":\"KubeletHasNoDiskPressure\","
        "\"message\":\"kubelet has no disk pressure\"},"
        "{\"type\":\"PIDPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"" T0 "\","
        "\"lastTransitionTime\":\"" T0 "\",\"reason\":\"KubeletHasSufficientPID\","
        "\"message\":\"kubelet has sufficient PID available\"},"
        "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"" T0 "\","
        "\"lastTransitionTime\":\"" T0 "\",\"reason\":\"KubeletReady\","
        "\"message\":\"kubelet is posting ready status\"}]";
    cr_assert_str_eq(to_s(json_object_object_get(st, "conditions")), want);

    /* top-level key order of NodeStatus */
    const char *order[] = {"capacity", "allocatable", "conditions", "addresses", "daemonEndpoints",
                           "nodeInfo"};
    size_t i = 0;
    json_object_object_foreach(st, k, v) {
        (void)v;
        cr_assert_lt(i, KITE_ARRAY_SIZE(order));
        cr_assert_str_eq(k, order[i++]);
    }
    static const char *const first[] = {"NodeHasSufficientMemory", "NodeHasNoDiskPressure",
                                        "NodeHasSufficientPID", "NodeReady"};
    assert_events(&e, first, 4);
    json_object_put(st);
    env_release(&e);
}

Test(nodestatus, addresses_node_ip_external_hostname) {
    struct env e;
    env_init(&e);
    static const struct {
        const char *node_ip, *external_ip, *hostname, *route_ip, *want;
    } cases[] = {
        {NULL, NULL, NULL, "192.168.1.20",
         "[{\"type\":\"InternalIP\",\"address\":\"192.168.1.20\"},{\"type\":\"Hostname\",\"address\":\"worker-node-3\"}]"},
        {"10.1.2.3", NULL, NULL, "192.168.1.20", /* --node-ip wins over the route */
         "[{\"type\":\"InternalIP\",\"address\":\"10.1.2.3\"},{\"type\":\"Hostname\",\"address\":\"worker-node-3\"}]"},
        {"10.1.2.3", "203.0.113.7", "host.example", NULL,
         "[{\"type\":\"InternalIP\",\"address\":\"10.1.2.3\"},{\"type\":\"ExternalIP\",\"address\":\"203.0.113.7\"},"
         "{\"type\":\"Hostname\",\"address\":\"host.example\"}]"},
        {"fd00::5", NULL, NULL, NULL,
         "[{\"type\":\"InternalIP\",\"address\":\"fd00::5\"},{\"type\":\"Hostname\",\"address\":\"worker-node-3\"}]"},
        /* no route and no node IP: Hostname only */
        {NULL, NULL, NULL, NULL, "[{\"type\":\"Hostname\",\"address\":\"worker-node-3\"}]"},
        /* a node IP that is not an IP is not reported */
        {"not-an-ip", NULL, NULL, "192.168.1.20", "[{\"type\":\"Hostname\",\"address\":\"worker-node-3\"}]"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        e.cfg.node_ip = cases[i].node_ip;
        e.cfg.external_ip = cases[i].external_ip;
        e.cfg.hostname = cases[i].hostname;
        e.fake.route_ip = cases[i].route_ip;
        json_object *st = run(&e, NULL);
        cr_assert_str_eq(to_s(json_object_object_get(st, "addresses")), cases[i].want, "case %zu", i);
        json_object_put(st);
    }
    env_release(&e);
}

Test(nodestatus, allocatable_arithmetic) {
    struct env e;
    env_init(&e);
    /* 1000 MiB memory, no hugepages, 100 GiB disk, 4 cpus */
    nst_write(e.root, "/proc/meminfo", "MemTotal: 1024000 kB\nMemAvailable: 512000 kB\n");
    nst_write(e.root, "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0\n");
    e.fake.total_bytes = UINT64_C(100) << 30;
    e.fake.avail_bytes = UINT64_C(50) << 30;
    e.src.online_cpus = nst_cpus;
    e.fake.cpus = 4;
    static const struct {
        int64_t kr_cpu, sr_cpu, kr_mem, sr_mem, kr_eph, sr_eph; /* milli */
        int64_t ev_mem; double ev_mem_pct; int64_t ev_fs; double ev_fs_pct;
        const char *cpu, *mem, *eph;
    } cases[] = {
        /* defaults: 100Mi memory, 10% nodefs (as float32: 10737418400 bytes; the result
         * ends in 000 yet prints without a suffix, as BinarySI does) */
        {0, 0, 0, 0, 0, 0, 100 << 20, -1, -1, 10, "4", "900Mi", "96636764000"},
        /* reservations in every resource; 500m + 250m cpu */
        {500, 250, (INT64_C(200) << 20) * 1000, (INT64_C(100) << 20) * 1000,
         (INT64_C(1) << 30) * 1000, (INT64_C(1) << 30) * 1000, 100 << 20, -1, -1, 10,
         "3250m", "600Mi", "94489280352"},
        /* no eviction thresholds at all */
        {0, 0, 0, 0, 0, 0, -1, -1, -1, -1, "4", "1000Mi", "100Gi"},
        /* absolute nodefs threshold, percentage memory threshold (5% of 1000Mi = 50Mi) */
        {1000, 0, 0, 0, 0, 0, -1, 5, INT64_C(10) << 30, -1, "3", "950Mi", "90Gi"},
        /* reservations beyond capacity clamp at zero */
        {8000, 0, (INT64_C(2) << 30) * 1000, 0, (INT64_C(200) << 30) * 1000, 0, -1, -1, -1, -1,
         "0", "0", "0"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        e.cfg.kube_reserved_cpu_m = cases[i].kr_cpu;
        e.cfg.system_reserved_cpu_m = cases[i].sr_cpu;
        e.cfg.kube_reserved_mem_m = cases[i].kr_mem;
        e.cfg.system_reserved_mem_m = cases[i].sr_mem;
        e.cfg.kube_reserved_eph_m = cases[i].kr_eph;
        e.cfg.system_reserved_eph_m = cases[i].sr_eph;
        e.cfg.evict_mem_bytes = cases[i].ev_mem;
        e.cfg.evict_mem_pct = cases[i].ev_mem_pct;
        e.cfg.evict_nodefs_bytes = cases[i].ev_fs;
        e.cfg.evict_nodefs_pct = cases[i].ev_fs_pct;
        json_object *st = run(&e, NULL);
        cr_assert_str_eq(nst_get(st, "capacity.cpu"), "4");
        cr_assert_str_eq(nst_get(st, "capacity.memory"), "1000Mi");
        cr_assert_str_eq(nst_get(st, "capacity.ephemeral-storage"), "100Gi");
        cr_assert_str_eq(nst_get(st, "allocatable.cpu"), cases[i].cpu, "case %zu", i);
        cr_assert_str_eq(nst_get(st, "allocatable.memory"), cases[i].mem, "case %zu", i);
        cr_assert_str_eq(nst_get(st, "allocatable.ephemeral-storage"), cases[i].eph, "case %zu", i);
        cr_assert_str_eq(nst_get(st, "allocatable.pods"), "110");
        cr_assert_str_eq(nst_get(st, "allocatable.hugepages-2Mi"), "0");
        json_object_put(st);
    }
    env_release(&e);
}

Test(nodestatus, hugepages_reduce_memory_allocatable) {
    struct env e;
    env_init(&e);
    nst_write(e.root, "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "2\n");
    nst_write(e.root, "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n");
    e.cfg.evict_mem_bytes = -1;
    json_object *st = run(&e, NULL);
    cr_assert_str_eq(nst_get(st, "capacity.hugepages-1Gi"), "2Gi");
    cr_assert_str_eq(nst_get(st, "capacity.hugepages-2Mi"), "1Gi");
    cr_assert_str_eq(nst_get(st, "allocatable.hugepages-1Gi"), "2Gi");
    cr_assert_str_eq(nst_get(st, "allocatable.hugepages-2Mi"), "1Gi");
    /* 16318472Ki - 3Gi */
    cr_assert_str_eq(nst_get(st, "allocatable.memory"), "13172744Ki");
    json_object_put(st);
    /* no hugepages directory at all: no hugepages resources */
    _cleanup_free_ char *cmd = kite_asprintf("rm -rf '%s/sys/kernel/mm/hugepages'", e.root);
    cr_assert_eq(system(cmd), 0);
    st = run(&e, NULL);
    cr_assert_null(nst_get(st, "capacity.hugepages-2Mi"));
    cr_assert_str_eq(nst_get(st, "allocatable.memory"), "16318472Ki");
    json_object_put(st);
    env_release(&e);
}

Test(nodestatus, images_sorted_capped_and_names_truncated) {
    struct env e;
    env_init(&e);
    char *n_small[] = {"small:1"};
    char *n_big[] = {"big@sha256:aa", "big:1", "big:2", "big:3", "big:4", "big:5", "big:6"};
    char *n_mid[] = {"mid:1", "mid:latest"};
    char *n_tie_b[] = {"b-tie:1"};
    char *n_tie_a[] = {"a-tie:1"};
    struct kite_image imgs[] = {
        {n_small, 1, 100, NULL, NULL}, {n_big, 7, 900000000, NULL, NULL}, {n_mid, 2, 5000, NULL, NULL}, {n_tie_b, 1, 700, NULL, NULL},
        {n_tie_a, 1, 700, NULL, NULL},
    };
    kite_runtime_fake_set_images(e.rt, imgs, KITE_ARRAY_SIZE(imgs));
    json_object *st = run(&e, NULL);
    cr_assert_str_eq(to_s(json_object_object_get(st, "images")),
                     "[{\"names\":[\"big@sha256:aa\",\"big:1\",\"big:2\",\"big:3\",\"big:4\"],\"sizeBytes\":900000000},"
                     "{\"names\":[\"mid:1\",\"mid:latest\"],\"sizeBytes\":5000},"
                     "{\"names\":[\"a-tie:1\"],\"sizeBytes\":700},"
                     "{\"names\":[\"b-tie:1\"],\"sizeBytes\":700},"
                     "{\"names\":[\"small:1\"],\"sizeBytes\":100}]");
    json_object_put(st);
    e.cfg.max_images = 2;
    st = run(&e, NULL);
    json_object *arr = json_object_object_get(st, "images");
    cr_assert_eq(json_object_array_length(arr), 2);
    cr_assert_str_eq(nst_get(json_object_array_get_idx(arr, 1), "sizeBytes"), "5000");
    json_object_put(st);
    e.cfg.max_images = 0;
    st = run(&e, NULL);
    cr_assert_null(json_object_object_get(st, "images"));
    json_object_put(st);
    e.cfg.max_images = -1;
    st = run(&e, NULL);
    cr_assert_eq(json_object_array_length(json_object_object_get(st, "images")), 5);
    json_object_put(st);
    /* a failing runtime: no images, no runtime version, status still produced */
    kite_runtime_fake_set_error(e.rt, -ECONNREFUSED);
    st = run(&e, NULL);
    cr_assert_null(json_object_object_get(st, "images"));
    cr_assert_str_eq(nst_get(st, "nodeInfo.containerRuntimeVersion"), "");
    json_object_put(st);
    env_release(&e);
}

Test(nodestatus, memory_pressure) {
    struct env e;
    env_init(&e);
    nst_write(e.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 102399 kB\n");
    json_object *st = run(&e, NULL);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "True");
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "reason"), "KubeletHasInsufficientMemory");
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "message"), "kubelet has insufficient memory available");
    cr_assert_str_eq(nst_cond_field(st, "DiskPressure", "status"), "False");
    cr_assert_str_eq(nst_cond_field(st, "Ready", "status"), "True", "pressure is not NotReady");
    json_object_put(st);
    /* exactly at the threshold is not below it */
    nst_write(e.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 102400 kB\n");
    st = run(&e, NULL);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "False");
    json_object_put(st);
    /* percentage threshold: 10% of 16318472Ki */
    e.cfg.evict_mem_bytes = -1;
    e.cfg.evict_mem_pct = 10;
    nst_write(e.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 1600000 kB\n");
    st = run(&e, NULL);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "True");
    json_object_put(st);
    env_release(&e);
}

Test(nodestatus, disk_pressure_bytes_and_inodes) {
    struct env e;
    env_init(&e);
    static const struct { uint64_t avail, ifree; int64_t ev_inodes; const char *want; } cases[] = {
        {UINT64_C(31335548928), 1000000, -1, "False"},
        {UINT64_C(6267109877), 1000000, -1, "True"},  /* < float32 10% of 62671097856 */
        {UINT64_C(6267109878), 1000000, -1, "False"}, /* == threshold */
        {UINT64_C(31335548928), 195378, -1, "True"},  /* < 5% of 3907584 inodes (195379) */
        {UINT64_C(31335548928), 195379, -1, "False"},
        {UINT64_C(31335548928), 999, 1000, "True"},   /* absolute inode threshold */
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        e.fake.avail_bytes = cases[i].avail;
        e.fake.free_inodes = cases[i].ifree;
        e.cfg.evict_inodes_count = cases[i].ev_inodes;
        json_object *st = run(&e, NULL);
        const char *s = nst_cond_field(st, "DiskPressure", "status");
        cr_assert_str_eq(s, cases[i].want, "case %zu", i);
        cr_assert_str_eq(nst_cond_field(st, "DiskPressure", "reason"),
                         strcmp(s, "True") == 0 ? "KubeletHasDiskPressure" : "KubeletHasNoDiskPressure");
        cr_assert_str_eq(nst_cond_field(st, "DiskPressure", "message"),
                         strcmp(s, "True") == 0 ? "kubelet has disk pressure" : "kubelet has no disk pressure");
        json_object_put(st);
    }
    env_release(&e);
}

Test(nodestatus, pid_pressure) {
    struct env e;
    env_init(&e);
    /* limit 127353 (threads-max), 1353 running -> headroom 126000 */
    static const struct { int64_t count; double pct; const char *want; } cases[] = {
        {-1, -1, "False"},      /* Kubernetes' default: no threshold, never pressure */
        {126001, -1, "True"},
        {126000, -1, "False"},
        {-1, 99, "True"},       /* 99% of 127353 = 126079 > headroom */
        {-1, 50, "False"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        e.cfg.evict_pid_count = cases[i].count;
        e.cfg.evict_pid_pct = cases[i].pct;
        json_object *st = run(&e, NULL);
        cr_assert_str_eq(nst_cond_field(st, "PIDPressure", "status"), cases[i].want, "case %zu", i);
        if (strcmp(cases[i].want, "True") == 0) {
            cr_assert_str_eq(nst_cond_field(st, "PIDPressure", "reason"), "KubeletHasInsufficientPID");
            cr_assert_str_eq(nst_cond_field(st, "PIDPressure", "message"), "kubelet has insufficient PID available");
        }
        json_object_put(st);
    }
    env_release(&e);
}

Test(nodestatus, ready_false_reasons) {
    struct env e;
    env_init(&e);
    static const struct {
        bool rt_ready; const char *rt_err; bool pleg; const char *pleg_err; bool no_fs; const char *msg;
    } cases[] = {
        {false, NULL, true, NULL, false, "container runtime is down"},
        {false, "container runtime not ready: RuntimeReady=false", true, NULL, false,
         "container runtime not ready: RuntimeReady=false"},
        {true, NULL, false, "pleg was last seen active 3m0.5s ago; threshold is 3m0s", false,
         "PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s"},
        {true, NULL, false, NULL, false, "PLEG is not healthy: pleg has yet to be successful"},
        {true, NULL, true, NULL, true, "Missing node capacity for resources: ephemeral-storage"},
        {false, NULL, false, NULL, true,
         "[container runtime is down, PLEG is not healthy: pleg has yet to be successful, "
         "Missing node capacity for resources: ephemeral-storage]"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        e.src.runtime_ready = cases[i].rt_ready;
        e.src.runtime_error = cases[i].rt_err;
        e.src.pleg_healthy = cases[i].pleg;
        e.src.pleg_error = cases[i].pleg_err;
        e.fake.statfs_err = cases[i].no_fs ? -EIO : 0;
        json_object *st = run(&e, NULL);
        cr_assert_str_eq(nst_cond_field(st, "Ready", "status"), "False", "case %zu", i);
        cr_assert_str_eq(nst_cond_field(st, "Ready", "reason"), "KubeletNotReady");
        cr_assert_str_eq(nst_cond_field(st, "Ready", "message"), cases[i].msg, "case %zu", i);
        json_object_put(st);
    }
    /* cpu, memory and pods missing together, in Kubernetes' order */
    e.src.runtime_ready = e.src.pleg_healthy = true;
    e.fake.statfs_err = 0;
    e.cfg.max_pods = 110;
    e.src.online_cpus = nst_cpus;
    e.fake.cpus = 0;
    nst_write(e.root, "/proc/meminfo", "MemAvailable: 1 kB\n");
    json_object *st = run(&e, NULL);
    cr_assert_str_eq(nst_cond_field(st, "Ready", "message"), "Missing node capacity for resources: cpu, memory");
    json_object_put(st);
    env_release(&e);
}

Test(nodestatus, transitions_keep_or_move_lastTransitionTime) {
    struct env e;
    env_init(&e);
    json_object *s0 = run(&e, NULL);
    kite_ns_events_release(&e.ev);

    /* 10 s later, nothing changed: heartbeat moves, transition stays, no events */
    advance(&e);
    json_object *s1 = run(&e, s0);
    cr_assert_eq(e.ev.n, 0);
    const char *types[] = {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"};
    for (size_t i = 0; i < 4; i++) {
        cr_assert_str_eq(nst_cond_field(s1, types[i], "lastHeartbeatTime"), T1);
        cr_assert_str_eq(nst_cond_field(s1, types[i], "lastTransitionTime"), T0);
    }

    /* runtime goes down and memory runs out: both flip at T2, with events */
    advance(&e);
    e.src.runtime_ready = false;
    nst_write(e.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 1000 kB\n");
    json_object *s2 = run(&e, s1);
    static const char *const flips[] = {"NodeHasInsufficientMemory", "NodeNotReady"};
    assert_events(&e, flips, 2);
    cr_assert_str_eq(nst_cond_field(s2, "Ready", "lastTransitionTime"), T2);
    cr_assert_str_eq(nst_cond_field(s2, "MemoryPressure", "lastTransitionTime"), T2);
    cr_assert_str_eq(nst_cond_field(s2, "DiskPressure", "lastTransitionTime"), T0);

    /* a new message with the same status is not a transition */
    advance(&e);
    e.src.runtime_error = "container runtime not ready: x";
    json_object *s3 = run(&e, s2);
    cr_assert_eq(e.ev.n, 0);
    cr_assert_str_eq(nst_cond_field(s3, "Ready", "lastTransitionTime"), T2);
    cr_assert_str_eq(nst_cond_field(s3, "Ready", "message"), "container runtime not ready: x");

    json_object_put(s0);
    json_object_put(s1);
    json_object_put(s2);
    json_object_put(s3);
    env_release(&e);
}

Test(nodestatus, prev_from_server_unknown_and_foreign_conditions) {
    struct env e;
    env_init(&e);
    /* as the node lifecycle controller leaves it: Ready Unknown; plus a condition the agent
     * does not own, which must keep its place and content */
    json_object *prev = json_tokener_parse(
        "{\"conditions\":["
        "{\"type\":\"NetworkUnavailable\",\"status\":\"False\",\"lastHeartbeatTime\":\"2026-01-01T00:00:00Z\","
        "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\",\"reason\":\"RouteCreated\",\"message\":\"ok\"},"
        "{\"type\":\"Ready\",\"status\":\"Unknown\",\"lastHeartbeatTime\":\"2026-01-01T00:00:00Z\","
        "\"lastTransitionTime\":\"2026-01-02T00:00:00Z\",\"reason\":\"NodeStatusUnknown\","
        "\"message\":\"Kubelet stopped posting node status.\"},"
        "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2026-01-01T00:00:00Z\","
        "\"lastTransitionTime\":\"2025-06-01T00:00:00Z\",\"reason\":\"KubeletHasSufficientMemory\","
        "\"message\":\"kubelet has sufficient memory available\"}]}");
    cr_assert_not_null(prev);
    json_object *st = run(&e, prev);
    json_object *conds = json_object_object_get(st, "conditions");
    cr_assert_eq(json_object_array_length(conds), 5);
    const char *order[] = {"NetworkUnavailable", "Ready", "MemoryPressure", "DiskPressure", "PIDPressure"};
    for (size_t i = 0; i < 5; i++)
        cr_assert_str_eq(nst_get(json_object_array_get_idx(conds, i), "type"), order[i]);
    cr_assert_str_eq(nst_cond_field(st, "NetworkUnavailable", "lastHeartbeatTime"), "2026-01-01T00:00:00Z");
    cr_assert_str_eq(nst_cond_field(st, "Ready", "lastTransitionTime"), T0);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "lastTransitionTime"), "2025-06-01T00:00:00Z");
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "lastHeartbeatTime"), T0);
    /* events, in setter order: the two conditions that were absent, Ready (Unknown -> True) */
    static const char *const want[] = {"NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeReady"};
    assert_events(&e, want, 3);
    json_object_put(st);
    json_object_put(prev);
    env_release(&e);
}

Test(nodestatus, same_machine_same_bytes_and_bad_args) {
    struct env e;
    env_init(&e);
    json_object *a = run(&e, NULL), *b = run(&e, a), *c = run(&e, b);
    cr_assert_str_eq(to_s(b), to_s(c), "a steady machine computes an identical status");
    json_object *st = NULL;
    cr_assert_eq(kite_nodestatus_compute(NULL, &e.src, NULL, &st, NULL), -EINVAL);
    cr_assert_eq(kite_nodestatus_compute(&e.cfg, NULL, NULL, &st, NULL), -EINVAL);
    cr_assert_eq(kite_nodestatus_compute(&e.cfg, &e.src, NULL, NULL, NULL), -EINVAL);
    cr_assert_null(st);
    /* events may be NULL */
    cr_assert_eq(kite_nodestatus_compute(&e.cfg, &e.src, NULL, &st, NULL), 0);
    json_object_put(st);
    json_object_put(a);
    json_object_put(b);
    json_object_put(c);
    env_release(&e);
}

Test(nodestatus, config_defaults) {
    struct kite_ns_config c;
    memset(&c, 0x5a, sizeof(c));
    kite_ns_config_defaults(&c);
    cr_assert_eq(c.max_pods, 110);
    cr_assert_eq(c.max_images, 50);
    cr_assert_eq(c.daemon_port, 10250);
    cr_assert_eq(c.evict_mem_bytes, 100 * 1024 * 1024);
    cr_assert(c.evict_nodefs_bytes < 0 && c.evict_nodefs_pct == 10);
    cr_assert(c.evict_inodes_count < 0 && c.evict_inodes_pct == 5);
    cr_assert(c.evict_pid_count < 0 && c.evict_pid_pct < 0);
    cr_assert_eq(c.kube_reserved_cpu_m, 0);
    cr_assert_null(c.node_ip);
}
