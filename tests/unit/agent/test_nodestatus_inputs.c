/* kite_nodestatus_read / kite_nodestatus_build over a fake machine (fixtures/machine1 plus fake
 * statfs, route, cpus, clock and runtime): the build makes what kite_nodestatus_compute makes;
 * the digest stays while nothing the status shows changes (the clock, readings that move
 * without crossing their thresholds) and changes with every input that does. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "agent/nodestatus/nodestatus.h"
#include "agent/runtime/runtime.h"
#include "test_nodestatus_util.h"

TestSuite(nodestatus_inputs, .fini = nst_cleanup);

struct env {
    char *root;
    struct nst_fake fake;
    struct kite_fake_clock clk;
    struct kite_runtime *rt;
    struct kite_ns_config cfg;
    struct kite_ns_sources src;
    uint64_t images_gen;
};

static int images_gen(void *ud, uint64_t *ret) {
    struct env *e = ud;
    *ret = e->images_gen;
    return 0;
}

static int fake_statfs(const char *path, uint64_t *t, uint64_t *a, uint64_t *ti, uint64_t *fi, void *ud) {
    return nst_statfs(path, t, a, ti, fi, &((struct env *)ud)->fake);
}
static int fake_route(char *buf, size_t len, void *ud) { return nst_route_ip(buf, len, &((struct env *)ud)->fake); }
static int fake_cpus(void *ud) { return nst_cpus(&((struct env *)ud)->fake); }

static void env_init(struct env *e, bool cache) {
    memset(e, 0, sizeof(*e));
    e->root = nst_fixture_copy("machine1");
    e->fake = NST_FAKE_MACHINE1;
    kite_fake_clock_init(&e->clk, INT64_C(1796226146) * KITE_NS_PER_SEC);
    e->rt = kite_runtime_fake_new("1.7.22");
    struct kite_image img = {.names = (char *[]){"a:1", "a@sha256:1"}, .n_names = 2, .size_bytes = 100, .id = "sha256:a"};
    kite_runtime_fake_set_images(e->rt, &img, 1);
    kite_ns_config_defaults(&e->cfg);
    e->cfg.node_name = "worker-node-3";
    e->cfg.root_dir = "/var/lib/kite";
    e->cfg.kubelet_version = "v1.32.0-kite.1";
    e->src = (struct kite_ns_sources){.sysroot = e->root, .clock = &e->clk.clock, .runtime = e->rt,
                                      .statfs = fake_statfs, .default_route_ip = fake_route, .online_cpus = fake_cpus,
                                      .ud = e, .runtime_ready = true, .pleg_healthy = true};
    if (cache) e->src.cache = kite_ns_cache_new(e->root, KITE_NS_FACTS_TTL_NS, 0);
}

static void env_release(struct env *e) {
    kite_ns_cache_free(e->src.cache);
    kite_runtime_free(e->rt);
    nst_rmtree(e->root);
    free(e->root);
}

static uint64_t digest(struct env *e) {
    struct kite_ns_inputs *in = NULL;
    cr_assert_eq(kite_nodestatus_read(&e->cfg, &e->src, &in), 0);
    uint64_t d = kite_ns_inputs_digest(in);
    kite_ns_inputs_free(in);
    return d;
}

static const char *to_s(json_object *o) {
    return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* read + build = compute, byte for byte, with events, from nothing and from a previous status */
Test(nodestatus_inputs, build_makes_what_compute_makes) {
    struct env e;
    env_init(&e, true);
    json_object *prev = NULL;
    for (int round = 0; round < 3; round++) {
        struct kite_ns_events ev1 = {0}, ev2 = {0};
        json_object *a = NULL, *b = NULL;
        cr_assert_eq(kite_nodestatus_compute(&e.cfg, &e.src, prev, &a, &ev1), 0);
        struct kite_ns_inputs *in = NULL;
        cr_assert_eq(kite_nodestatus_read(&e.cfg, &e.src, &in), 0);
        cr_assert_eq(kite_nodestatus_build(&e.cfg, &e.src, in, prev, &b, &ev2), 0);
        kite_ns_inputs_free(in);
        cr_assert_str_eq(to_s(a), to_s(b));
        cr_assert_eq(ev1.n, ev2.n);
        for (size_t i = 0; i < ev1.n; i++) cr_assert_str_eq(ev1.v[i].reason, ev2.v[i].reason);
        cr_assert_not_null(json_object_object_get(b, "images"));
        kite_ns_events_release(&ev1);
        kite_ns_events_release(&ev2);
        json_object_put(prev);
        json_object_put(b);
        prev = a;
        /* the next round from a machine under memory pressure, then back */
        nst_write(e.root, "/proc/meminfo",
                  round == 0 ? "MemTotal: 16318472 kB\nMemAvailable: 50000 kB\n"
                             : "MemTotal: 16318472 kB\nMemAvailable: 8000000 kB\n");
        kite_fake_clock_advance(&e.clk, 10 * KITE_NS_PER_SEC);
    }
    json_object_put(prev);
    env_release(&e);
}

/* The clock, and readings that move without crossing a threshold, leave the digest. */
Test(nodestatus_inputs, digest_stays_while_the_status_would) {
    struct env e;
    env_init(&e, true);
    e.cfg.evict_pid_count = 1000;
    uint64_t d0 = digest(&e);
    kite_fake_clock_advance(&e.clk, 10 * KITE_NS_PER_SEC);
    cr_assert_eq(digest(&e), d0);
    nst_write(e.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 7000000 kB\n");
    e.fake.avail_bytes -= 1000000000;
    e.fake.free_inodes -= 1000;
    nst_write(e.root, "/proc/loadavg", "0.15 0.20 0.25 7/1400 98765\n");
    cr_assert_eq(digest(&e), d0);
    /* an images_gen that stays: the list is not read */
    e.src.images_gen = images_gen;
    uint64_t g0 = digest(&e);
    struct kite_image img = {.names = (char *[]){"b:1"}, .n_names = 1, .size_bytes = 5, .id = "sha256:b"};
    kite_runtime_fake_set_images(e.rt, &img, 1);
    cr_assert_eq(digest(&e), g0);
    env_release(&e);
}

/* Each input the status shows changes the digest. */
Test(nodestatus_inputs, every_input_changes_the_digest) {
    struct env e;
    env_init(&e, true);
    e.cfg.evict_pid_count = 1000;
    uint64_t seen[32];
    size_t n = 0;
#define CHANGED(what)                                                                                                  \
    do {                                                                                                               \
        uint64_t d = digest(&e);                                                                                       \
        for (size_t i = 0; i < n; i++) cr_assert_neq(d, seen[i], "%s: digest seen before", what);                     \
        seen[n++] = d;                                                                                                 \
    } while (0)
    CHANGED("start");
    nst_write(e.root, "/proc/meminfo", "MemTotal: 16318472 kB\nMemAvailable: 50000 kB\n");
    CHANGED("MemAvailable below 100Mi");
    nst_write(e.root, "/proc/loadavg", "0.15 0.20 0.25 9/126500 98765\n"); /* threads-max 127353 */
    CHANGED("tasks past the pid headroom of 1000");
    e.fake.avail_bytes = e.fake.total_bytes / 20;
    CHANGED("disk below 10%");
    uint64_t bytes_low = digest(&e);
    e.fake.avail_bytes = e.fake.total_bytes / 2;
    e.fake.free_inodes = 10;
    cr_assert_eq(digest(&e), bytes_low, "inodes below 5% instead: the same verdict, the same status");
    e.fake.total_bytes += 1 << 20;
    CHANGED("disk size");
    struct kite_image imgs[] = {{.names = (char *[]){"a:1", "a@sha256:1"}, .n_names = 2, .size_bytes = 100, .id = "sha256:a"},
                                {.names = (char *[]){"b:2"}, .n_names = 1, .size_bytes = 500, .id = "sha256:b"}};
    kite_runtime_fake_set_images(e.rt, imgs, 2);
    CHANGED("an image added");
    imgs[1].size_bytes = 501;
    kite_runtime_fake_set_images(e.rt, imgs, 2);
    CHANGED("an image's size");
    imgs[1].names = (char *[]){"b:3"};
    kite_runtime_fake_set_images(e.rt, imgs, 2);
    CHANGED("an image's name");
    kite_runtime_fake_set_error(e.rt, -EIO);
    CHANGED("the runtime's calls failing (no version, no images)");
    kite_runtime_fake_set_error(e.rt, 0);
    e.src.images_gen = images_gen;
    CHANGED("images by generation");
    e.images_gen++;
    CHANGED("images generation");
    e.fake.route_ip = "10.0.0.14";
    CHANGED("InternalIP");
    e.fake.route_ip = NULL;
    CHANGED("no default route");
    e.fake.cpus = 4;
    CHANGED("online cpus");
    e.src.runtime_ready = false;
    CHANGED("runtime not ready");
    e.src.runtime_error = "container runtime not ready: RuntimeReady=false reason:A message:b";
    CHANGED("runtime error message");
    e.src.pleg_healthy = false;
    CHANGED("pleg unhealthy");
    e.src.pleg_error = "pleg was last seen active 3m0.5s ago; threshold is 3m0s";
    CHANGED("pleg message");
    e.src.pleg_error = "pleg was last seen active 3m10.5s ago; threshold is 3m0s";
    CHANGED("pleg message's duration");
    nst_write(e.root, "/etc/os-release", "PRETTY_NAME=\"Changed OS 2\"\n");
    kite_fake_clock_advance(&e.clk, KITE_NS_FACTS_TTL_NS + 1);
    CHANGED("os-release (a fact, after its TTL)");
    e.cfg.max_pods = 200;
    CHANGED("maxPods");
    e.cfg.max_images = 1;
    CHANGED("nodeStatusMaxImages");
    e.cfg.evict_mem_pct = 5;
    CHANGED("evictionHard memory percentage");
    e.cfg.external_ip = "192.0.2.1";
    CHANGED("external IP");
#undef CHANGED
    env_release(&e);
}

/* Without a cache the facts are read for the read, and their values are digested. */
Test(nodestatus_inputs, uncached_facts_are_digested) {
    struct env e;
    env_init(&e, false);
    uint64_t d0 = digest(&e);
    cr_assert_eq(digest(&e), d0);
    nst_write(e.root, "/etc/machine-id", "0123456789abcdef0123456789abcdef\n");
    cr_assert_neq(digest(&e), d0);
    env_release(&e);
}
