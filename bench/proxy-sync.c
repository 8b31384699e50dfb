/* The Service proxy's kernel write for one changed Service at SERVICES x ENDPOINTS: the whole
 * table (the baseline: what every sync wrote before partial syncs) vs the partial script
 * (only the changed Service's chains and elements), alternating in the same run, each timed
 * from the script's build to libnftables' return (the transaction committed).
 *
 *   build/proxy-sync [SERVICES=1000] [ENDPOINTS=10] [ROUNDS=20]     # as root
 *
 * Writes a table of its own (kite-bench-sync-PID) and removes it. Prints p50/p99 of both and
 * their ratio, then a "summary:" line. */
#include <json-c/json.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/proxy/proxy.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static json_object *service(int i) {
    char s[512];
    snprintf(s, sizeof s,
             "{\"metadata\":{\"namespace\":\"default\",\"name\":\"s%d\"},\"spec\":{\"clusterIP\":\"172.28.%d.%d\","
             "\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}}", i, i / 250, i % 250 + 1);
    return json_tokener_parse(s);
}

static json_object *slice(int i, int n, int ready_from) {
    json_object *eps = json_object_new_array();
    for (int j = 0; j < n; j++) {
        char s[256];
        snprintf(s, sizeof s, "{\"addresses\":[\"10.%d.%d.%d\"],\"conditions\":{\"ready\":%s}}", 10 + i / 250,
                 i % 250, j + 1, j >= ready_from ? "true" : "false");
        json_object_array_add(eps, json_tokener_parse(s));
    }
    char s[512];
    snprintf(s, sizeof s,
             "{\"metadata\":{\"namespace\":\"default\",\"name\":\"s%d\",\"labels\":{\"kubernetes.io/service-name\":"
             "\"s%d\"}},\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"\",\"port\":8080,\"protocol\":\"TCP\"}]}", i, i);
    json_object *sl = json_tokener_parse(s);
    json_object_object_add(sl, "endpoints", eps);
    return sl;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, int p) {
    qsort(v, n, sizeof *v, cmp);
    int i = (n * p + 99) / 100 - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static struct nft_ctx *nft; /* one context for every run, as the agent's sync thread */

static void run(const char *script) {
    char *err = NULL;
    if (kite_proxy_nft_exec(nft, script, &err) < 0) {
        fprintf(stderr, "nftables: %s\n", err ? err : "failed");
        exit(1);
    }
}

int main(int argc, char **argv) {
    int nsvc = argc > 1 ? atoi(argv[1]) : 1000, neps = argc > 2 ? atoi(argv[2]) : 10,
        rounds = argc > 3 ? atoi(argv[3]) : 20;
    if (geteuid() != 0) {
        fprintf(stderr, "proxy-sync: needs root\n");
        return 2;
    }
    nft = kite_proxy_nft_new();
    char table[64];
    snprintf(table, sizeof table, "kite-bench-sync-%d", (int)getpid());
    struct kite_proxy_ruleset_options o = {.table = table, .node_name = "n1", .pod_cidr = "10.0.0.0/8"};
    json_object *svcs = json_object_new_object(), *slices = json_object_new_object(), *state = json_object_new_object();
    for (int i = 0; i < nsvc; i++) {
        char k[32];
        snprintf(k, sizeof k, "default/s%d", i);
        json_object_object_add(svcs, k, service(i));
        json_object_object_add(slices, k, slice(i, neps, 0));
    }
    char *s = kite_proxy_ruleset(&o, svcs, slices, state);
    run(s);
    free(s);
    double *full = calloc(rounds, sizeof *full), *part = calloc(rounds, sizeof *part);
    size_t full_bytes = 0, part_bytes = 0;
    for (int r = 0; r < rounds; r++) {
        /* one Service's endpoints change (half of them not ready, or back), as bench/proxy.py */
        int i = (r * 37) % nsvc;
        char k[32];
        snprintf(k, sizeof k, "default/s%d", i);
        json_object_object_add(slices, k, slice(i, neps, r % 2 ? 0 : neps / 2));
        double t0 = now_ms();
        s = kite_proxy_ruleset(&o, svcs, slices, state);
        run(s);
        full[r] = now_ms() - t0;
        full_bytes = strlen(s);
        free(s);
        /* and back, as a partial sync */
        json_object_object_add(slices, k, slice(i, neps, r % 2 ? neps / 2 : 0));
        json_object *changed = json_object_new_object();
        json_object_object_add(changed, k, NULL);
        t0 = now_ms();
        s = kite_proxy_ruleset_partial(&o, svcs, slices, changed, state);
        run(s);
        part[r] = now_ms() - t0;
        part_bytes = strlen(s);
        free(s);
        json_object_put(changed);
    }
    s = kite_proxy_cleanup_script(table);
    run(s);
    free(s);
    double f50 = pct(full, rounds, 50), f99 = pct(full, rounds, 99), p50 = pct(part, rounds, 50),
           p99 = pct(part, rounds, 99);
    printf("one changed Service at %d Services x %d endpoints, %d rounds: whole table (baseline) p50 %.1f ms, "
           "p99 %.1f ms (%zu-byte script); partial p50 %.2f ms, p99 %.2f ms (%zu-byte script); "
           "partial/whole p50 %.4f\n", nsvc, neps, rounds, f50, f99, full_bytes, p50, p99, part_bytes, p50 / f50);
    printf("summary: sync_full_p50_ms=%.1f sync_full_p99_ms=%.1f sync_partial_p50_ms=%.2f sync_partial_p99_ms=%.2f\n",
           f50, f99, p50, p99);
    json_object_put(svcs);
    json_object_put(slices);
    json_object_put(state);
    free(full);
    free(part);
    nft_ctx_free(nft);
    return 0;
}
