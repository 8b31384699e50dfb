/* The per-sysroot cache of machine facts and readings (kite_ns_cache): what it returns is what
 * the files say, a changed fact shows after the facts TTL and not before, a changed reading after
 * the live TTL, and many nodes over one sysroot read it once. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "agent/nodestatus/internal.h"
#include "json/patch.h"
#include "test_nodestatus_util.h"

TestSuite(nodestatus_cache, .fini = nst_cleanup);

#define T0 "2026-12-02T09:56:15Z"

struct env {
    char *root;
    struct nst_fake fake;
    struct kite_fake_clock clk;
    struct kite_ns_config cfg;
    struct kite_ns_sources src;
};

static void env_init(struct env *e, struct kite_ns_cache *cache) {
    memset(e, 0, sizeof(*e));
    e->root = nst_fixture_copy("machine1");
    e->fake = NST_FAKE_MACHINE1;
    int64_t t0;
    cr_assert_eq(kite_time_parse(T0, &t0), 0);
    kite_fake_clock_init(&e->clk, t0);
    kite_ns_config_defaults(&e->cfg);
    e->cfg.node_name = "worker-node-3";
    e->cfg.root_dir = "/var/lib/kite";
    e->cfg.kubelet_version = "v1.32.0-kite.1";
    e->src = (struct kite_ns_sources){
        .sysroot = e->root,
        .clock = &e->clk.clock,
        .statfs = nst_statfs,
        .default_route_ip = nst_route_ip,
        .ud = &e->fake,
        .runtime_ready = true,
        .pleg_healthy = true,
        .cache = cache,
    };
}

static json_object *run(struct env *e) {
    json_object *st = NULL;
    cr_assert_eq(kite_nodestatus_compute(&e->cfg, &e->src, NULL, &st, NULL), 0);
    return st;
}

static void check_field(struct env *e, const char *path, const char *want) {
    json_object *st = run(e);
    const char *got = nst_get(st, path);
    cr_assert(got && strcmp(got, want) == 0, "%s: got %s want %s", path, got ? got : "(none)", want);
    json_object_put(st);
}

static struct kite_ns_cache_stats stats(struct kite_ns_cache *k) {
    struct kite_ns_cache_stats s;
    kite_ns_cache_get_stats(k, &s);
    return s;
}

/* What a computation over the cache reports is what one without it reports. */
Test(nodestatus_cache, same_status_as_without) {
    struct env e;
    env_init(&e, NULL);
    e.cfg.evict_pid_pct = 10; /* PIDPressure reads pid_max, threads-max and loadavg too */
    json_object *plain = run(&e);
    e.src.cache = kite_ns_cache_new(e.root, KITE_NS_FACTS_TTL_NS, KITE_NS_PER_SEC);
    json_object *cached = run(&e), *again = run(&e);
    cr_assert(kite_json_equal(plain, cached), "cached: %s\nplain: %s", json_object_to_json_string(cached),
              json_object_to_json_string(plain));
    cr_assert(kite_json_equal(plain, again));
    cr_assert_str_eq(nst_get(cached, "nodeInfo.machineID"), "966f88b992d85b9ebc325b493c9769e3");
    cr_assert_not_null(nst_get(cached, "capacity.hugepages-2Mi"));
    json_object_put(plain);
    json_object_put(cached);
    json_object_put(again);
    kite_ns_cache_free(e.src.cache);
    nst_rmtree(e.root);
    free(e.root);
}

/* A fact file changed shows after the facts TTL, not before. */
Test(nodestatus_cache, fact_change_after_refresh) {
    struct env e;
    env_init(&e, NULL);
    struct kite_ns_cache *k = kite_ns_cache_new(e.root, 300 * KITE_NS_PER_SEC, 0);
    e.src.cache = k;
    check_field(&e, "nodeInfo.machineID", "966f88b992d85b9ebc325b493c9769e3");
    check_field(&e, "capacity.memory", "16318472Ki");
    nst_write(e.root, "/etc/machine-id", "0123456789abcdef0123456789abcdef\n");
    nst_write(e.root, "/proc/meminfo", "MemTotal: 8388608 kB\nMemAvailable: 4000000 kB\n");
    nst_write(e.root, "/etc/os-release", "PRETTY_NAME=\"Changed OS 1\"\n");
    kite_fake_clock_advance(&e.clk, 299 * KITE_NS_PER_SEC);
    check_field(&e, "nodeInfo.machineID", "966f88b992d85b9ebc325b493c9769e3");
    check_field(&e, "capacity.memory", "16318472Ki");
    cr_assert_eq(stats(k).fact_loads, 1);
    kite_fake_clock_advance(&e.clk, KITE_NS_PER_SEC);
    check_field(&e, "nodeInfo.machineID", "0123456789abcdef0123456789abcdef");
    check_field(&e, "capacity.memory", "8Gi");
    check_field(&e, "nodeInfo.osImage", "Changed OS 1");
    cr_assert_eq(stats(k).fact_loads, 2);
    kite_ns_cache_free(k);
    nst_rmtree(e.root);
    free(e.root);
}

/* With a live TTL of 0 (the agent) MemAvailable is read on every computation; with 1 s (the
 * simulator) a change shows within a second, not before. */
Test(nodestatus_cache, live_readings) {
    struct env e;
    env_init(&e, NULL);
    struct kite_ns_cache *agent = kite_ns_cache_new(e.root, KITE_NS_FACTS_TTL_NS, 0);
    struct kite_ns_cache *sim = kite_ns_cache_new(e.root, KITE_NS_FACTS_TTL_NS, KITE_NS_PER_SEC);
    e.cfg.evict_mem_bytes = 4LL << 30; /* MemAvailable 8000000 kB (~7.6 GiB): no pressure */
    e.src.cache = agent;
    json_object *st = run(&e);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "False");
    json_object_put(st);
    e.src.cache = sim;
    st = run(&e);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "False");
    json_object_put(st);

    nst_write(e.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 1000000 kB\n");
    e.src.cache = agent;
    st = run(&e);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "True", "the agent reads it each time");
    json_object_put(st);
    e.src.cache = sim;
    kite_fake_clock_advance(&e.clk, KITE_NS_PER_SEC - 1);
    st = run(&e);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "False", "within the live TTL");
    json_object_put(st);
    kite_fake_clock_advance(&e.clk, 1);
    st = run(&e);
    cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "status"), "True", "past the live TTL");
    json_object_put(st);
    cr_assert_eq(stats(agent).meminfo_reads, 2);
    cr_assert_eq(stats(sim).meminfo_reads, 2);
    cr_assert_eq(stats(agent).fact_loads, 1);
    kite_ns_cache_free(agent);
    kite_ns_cache_free(sim);
    nst_rmtree(e.root);
    free(e.root);
}

/* Many nodes over one machine shape: the sysroot is read once, and its files are not needed
 * again until a TTL passes. */
Test(nodestatus_cache, shared_sysroot_read_once) {
    struct env e;
    env_init(&e, NULL);
    struct kite_ns_cache *k = kite_ns_cache_new(e.root, KITE_NS_FACTS_TTL_NS, KITE_NS_PER_SEC);
    e.src.cache = k;
    e.cfg.evict_pid_pct = 10;
    json_object *first = run(&e);
    /* the files go: what the nodes report comes from the cache */
    nst_rmtree(e.root);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "node-%04d", i);
        e.cfg.node_name = name;
        json_object *st = run(&e);
        cr_assert_str_eq(nst_get(st, "nodeInfo.machineID"), "966f88b992d85b9ebc325b493c9769e3");
        cr_assert_str_eq(nst_get(st, "capacity.memory"), nst_get(first, "capacity.memory"));
        cr_assert_str_eq(nst_cond_field(st, "MemoryPressure", "reason"), "KubeletHasSufficientMemory");
        cr_assert_str_eq(nst_cond_field(st, "Ready", "status"), "True");
        json_object_put(st);
    }
    struct kite_ns_cache_stats s = stats(k);
    cr_assert_eq(s.fact_loads, 1);
    cr_assert_eq(s.meminfo_reads, 1);
    cr_assert_eq(s.loadavg_reads, 1);
    /* past the live TTL the readings are read again (and are gone now) */
    kite_fake_clock_advance(&e.clk, KITE_NS_PER_SEC);
    json_object *st = run(&e);
    s = stats(k);
    cr_assert_eq(s.meminfo_reads, 2);
    cr_assert_eq(s.fact_loads, 1);
    cr_assert_not_null(nst_get(st, "capacity.memory"), "facts still cached");
    json_object_put(st);
    json_object_put(first);
    kite_ns_cache_free(k);
    free(e.root);
}
