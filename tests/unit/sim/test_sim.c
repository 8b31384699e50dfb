/* kite sim's per-node bookkeeping without a server: node names, the control commands (kill,
 * revive, flap, stats, reset) and the synthetic machines written at start. */
#include "sim/sim.h"

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int no_mint(void *ud, const char *node, char **cert, char **key) { return -EPERM; }

static char dir[64];
static struct kite_sim *sim_make(unsigned nodes) {
    snprintf(dir, sizeof dir, "/tmp/kite-test-sim-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    static struct kite_kubeconfig kc = {.server = "https://127.0.0.1:1"};
    char machines[128];
    snprintf(machines, sizeof machines, "%s/machines", dir);
    struct kite_sim_options o = {.kc = &kc, .nodes = nodes, .prefix = "p", .inflight = 4, .mint = no_mint,
                                 .machines_dir = machines};
    struct kite_sim *s = NULL;
    char *err = NULL;
    cr_assert_eq(kite_sim_new(&o, &s, &err), 0, "%s", err ? err : "");
    return s;
}

static void sim_done(struct kite_sim *s) {
    kite_sim_free(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

static unsigned dead(struct kite_sim *s) {
    struct kite_sim_stats st;
    kite_sim_get_stats(s, &st);
    return st.dead;
}

static void expect(struct kite_sim *s, const char *line, const char *want) {
    char *got = kite_sim_control(s, line);
    cr_assert(!strncmp(got, want, strlen(want)), "%s: got \"%s\", want \"%s...\"", line, got, want);
    free(got);
}

Test(sim, names) {
    struct kite_sim *s = sim_make(10);
    char name[64];
    kite_sim_node_name(s, 7, name, sizeof name);
    cr_assert_str_eq(name, "p-00007");
    sim_done(s);
    s = sim_make(1000000);
    kite_sim_node_name(s, 999999, name, sizeof name);
    cr_assert_str_eq(name, "p-999999");
    kite_sim_node_name(s, 3, name, sizeof name);
    cr_assert_str_eq(name, "p-000003");
    /* as snprintf("%s-%0*u") for every number and every buffer length, cut ones too */
    for (unsigned i = 0; i < 1000000; i += 997) {
        for (size_t len = 1; len <= 10; len++) {
            char want[64], got[64];
            snprintf(want, len, "p-%06u", i);
            memset(got, 'x', sizeof got);
            kite_sim_node_name(s, i, got, len);
            cr_assert_str_eq(got, want, "node %u in %zu bytes", i, len);
        }
    }
    sim_done(s);
}

Test(sim, control) {
    struct kite_sim *s = sim_make(10);
    expect(s, "kill p-00003 p-00004", "ok 2");
    cr_assert_eq(dead(s), 2);
    expect(s, "kill p-00003", "ok 1"); /* already dead: no change */
    cr_assert_eq(dead(s), 2);
    expect(s, "revive p-00003\n", "ok 1");
    cr_assert_eq(dead(s), 1);
    /* a bad name changes nothing, even with good ones before it */
    expect(s, "kill p-00001 p-3", "error: no simulated node \"p-3\"");
    expect(s, "kill p-00010", "error: no simulated node");
    expect(s, "kill q-00001", "error: no simulated node");
    cr_assert_eq(dead(s), 1);
    expect(s, "flap 5 p-00001", "ok 1");
    cr_assert_eq(dead(s), 2);
    expect(s, "flap 0 p-00001", "ok 1");
    cr_assert_eq(dead(s), 1);
    expect(s, "flap x p-00001", "error: flap: bad period");
    expect(s, "flap", "error: flap SECONDS NAME...");
    expect(s, "explode", "error: unknown command \"explode\"");
    expect(s, "", "error: empty command");
    expect(s, "reset", "ok 0");
    char *js = kite_sim_control(s, "stats");
    json_object *o = json_tokener_parse(js);
    cr_assert_not_null(o, "%s", js);
    cr_assert_eq(json_object_get_int(json_object_object_get(o, "nodes")), 10);
    cr_assert_eq(json_object_get_int(json_object_object_get(o, "dead")), 1);
    cr_assert_eq(json_object_get_int(json_object_object_get(o, "started")), 0);
    json_object_put(o);
    free(js);
    sim_done(s);
}

static unsigned stat_of(struct kite_sim *s, const char *key) {
    char *js = kite_sim_control(s, "stats");
    json_object *o = json_tokener_parse(js);
    cr_assert_not_null(o, "%s", js);
    unsigned v = (unsigned)json_object_get_int(json_object_object_get(o, key));
    json_object_put(o);
    free(js);
    return v;
}

Test(sim, network_controls) {
    struct kite_sim *s = sim_make(10);
    expect(s, "partition p-00001 p-00002", "ok 2");
    cr_assert_eq(stat_of(s, "partitioned"), 2);
    expect(s, "heal p-00001", "ok 1");
    cr_assert_eq(stat_of(s, "partitioned"), 1);
    expect(s, "partition p-00003 nope", "error: no simulated node \"nope\"");
    cr_assert_eq(stat_of(s, "partitioned"), 1);
    expect(s, "slow 1500 p-00004 p-00005 p-00006", "ok 3");
    cr_assert_eq(stat_of(s, "slow"), 3);
    expect(s, "slow 0 p-00004", "ok 1");
    cr_assert_eq(stat_of(s, "slow"), 2);
    expect(s, "slow -1 p-00004", "error: slow: bad delay");
    expect(s, "slow 600001 p-00004", "error: slow: bad delay");
    expect(s, "slow", "error: slow MILLISECONDS NAME...");
    cr_assert_eq(stat_of(s, "slow"), 2);
    cr_assert_eq(dead(s), 0); /* partitioned and slow nodes still run */
    sim_done(s);
}

Test(sim, shared_connections_need_credentials) {
    /* impersonating the nodes takes credentials of the simulator's own */
    static struct kite_kubeconfig kc = {.server = "https://127.0.0.1:1"};
    struct kite_sim_options o = {.kc = &kc, .nodes = 3, .prefix = "p", .inflight = 4, .connections = 2,
                                 .mint = no_mint, .machines_dir = "/tmp/kite-test-sim-noneed"};
    struct kite_sim *s = NULL;
    char *err = NULL;
    cr_assert_eq(kite_sim_new(&o, &s, &err), -EINVAL);
    cr_assert(err && strstr(err, "impersonate"), "%s", err ? err : "");
    free(err);
}

Test(sim, machines) {
    struct kite_sim *s = sim_make(3);
    char path[256];
    for (int k = 0; k < KITE_SIM_SHAPES; k++) {
        snprintf(path, sizeof path, "%s/machines/machine-%d/proc/meminfo", dir, k);
        cr_assert_eq(access(path, R_OK), 0, "%s", path);
    }
    snprintf(path, sizeof path, "%s/machines/machine-7/proc/meminfo", dir);
    FILE *f = fopen(path, "r");
    char line[128] = "";
    cr_assert(fgets(line, sizeof line, f));
    fclose(f);
    cr_assert(strstr(line, "536870912 kB"), "%s", line); /* 512 GiB */
    sim_done(s);
}

Test(sim, bad_options) {
    static struct kite_kubeconfig kc = {.server = "https://127.0.0.1:1"};
    struct kite_sim_options o = {.kc = &kc, .nodes = 0, .prefix = "p", .inflight = 4, .mint = no_mint,
                                 .machines_dir = "/tmp"};
    struct kite_sim *s = NULL;
    char *err = NULL;
    cr_assert_eq(kite_sim_new(&o, &s, &err), -EINVAL);
    free(err);
}

/* Shared connections speak HTTP/2 on an https server only; stats say which protocol carries the
 * nodes' requests (HTTP/1.1 with --http2=false). */
Test(sim, http2_shared_connections) {
    char d[64] = "/tmp/kite-test-sim-XXXXXX", machines[128], *err = NULL;
    cr_assert_not_null(mkdtemp(d));
    snprintf(machines, sizeof machines, "%s/machines", d);
    static struct kite_kubeconfig plain = {.server = "http://127.0.0.1:1", .token = "t"};
    struct kite_sim_options o = {.kc = &plain, .nodes = 3, .prefix = "p", .connections = 2, .http2 = true,
                                 .inflight = 8, .mint = no_mint, .machines_dir = machines};
    struct kite_sim *s = NULL;
    cr_assert_eq(kite_sim_new(&o, &s, &err), -EINVAL);
    cr_assert(err && strstr(err, "https only"), "%s", err ? err : "");
    free(err);
    err = NULL;
    static struct kite_kubeconfig tls = {.server = "https://127.0.0.1:1", .token = "t"};
    const char *want[] = {"HTTP/1.1", "HTTP/2"};
    for (int h2 = 0; h2 < 2; h2++) {
        o.kc = &tls;
        o.http2 = h2;
        cr_assert_eq(kite_sim_new(&o, &s, &err), 0, "%s", err ? err : "");
        char *st = kite_sim_control(s, "stats");
        json_object *j = json_tokener_parse(st);
        cr_assert_str_eq(json_object_get_string(json_object_object_get(j, "protocol")), want[h2], "%s", st);
        /* an HTTP/2 connection opens with the first request that needs it */
        if (h2) cr_assert_eq(json_object_get_int(json_object_object_get(j, "openConnections")), 0, "%s", st);
        json_object_put(j);
        free(st);
        kite_sim_free(s);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    cr_assert_eq(system(cmd), 0);
}
