/* The resource metrics API's pieces (src/apiserver/metrics_api.c): parsing an agent's
 * /metrics/resource answer as metrics-server reads the kubelet's, and the quantities and
 * durations as metrics.k8s.io objects print them. */
#include "apiserver/internal.h"

#include <criterion/criterion.h>

static const char KUBELET_TEXT[] =
    "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds\n"
    "# TYPE container_cpu_usage_seconds_total counter\n"
    "container_cpu_usage_seconds_total{container=\"coredns\",namespace=\"kube-system\",pod=\"coredns-55cb58b774-8p8cn\"} 11.447197 1700000000123\n"
    "container_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"web\"} 2.5e+00 1700000000200\n"
    "# TYPE container_memory_working_set_bytes gauge\n"
    "container_memory_working_set_bytes{container=\"coredns\",namespace=\"kube-system\",pod=\"coredns-55cb58b774-8p8cn\"} 1.6023552e+07 1700000000123\n"
    "container_memory_working_set_bytes{container=\"app\",namespace=\"default\",pod=\"web\"} 4096 1700000000200\n"
    "container_start_time_seconds{container=\"app\",namespace=\"default\",pod=\"web\"} 1.6999e+09 1699900000000\n"
    "node_cpu_usage_seconds_total 357.35491 1700000000500\n"
    "node_memory_working_set_bytes 1.32243456e+09 1700000000500\n"
    "pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 2.5 1700000000200\n"
    "container_swap_usage_bytes{container=\"app\",namespace=\"default\",pod=\"web\"} 0 1700000000200\n"
    "resource_scrape_error 0\n";

static const struct mapi_ctr *find(const struct mapi_batch *b, const char *ns, const char *pod, const char *name) {
    for (size_t i = 0; i < b->n; i++)
        if (!strcmp(b->c[i].ns, ns) && !strcmp(b->c[i].pod, pod) && !strcmp(b->c[i].name, name)) return &b->c[i];
    return NULL;
}

Test(metrics_api, parses_kubelet_resource_metrics) {
    struct mapi_batch b = {0};
    cr_assert_eq(kite_apiserver_mapi_parse(KUBELET_TEXT, strlen(KUBELET_TEXT), 42, &b), 7);
    cr_assert(b.node_has_cpu && b.node_has_mem);
    cr_assert_eq(b.node_cpu_ns, 357354910000ull);
    cr_assert_eq(b.node_cpu_ts, 1700000000500ll * 1000000);
    cr_assert_eq(b.node_mem, 1322434560ull);
    cr_assert_eq(b.n, 2);
    const struct mapi_ctr *c = find(&b, "default", "web", "app");
    cr_assert_not_null(c);
    cr_assert(c->has_cpu && c->has_mem);
    cr_assert_eq(c->cpu_ns, 2500000000ull);
    cr_assert_eq(c->cpu_ts, 1700000000200ll * 1000000);
    cr_assert_eq(c->mem, 4096);
    cr_assert_eq(c->start_ns, 1699900000ll * 1000000000);
    c = find(&b, "kube-system", "coredns-55cb58b774-8p8cn", "coredns");
    cr_assert_not_null(c);
    cr_assert_eq(c->cpu_ns, 11447197000ull);
    cr_assert_eq(c->mem, 16023552ull);
    kite_apiserver_mapi_batch_release(&b);
}

Test(metrics_api, samples_without_timestamps_are_taken_now) {
    const char *t = "node_cpu_usage_seconds_total 1\n"
                    "container_cpu_usage_seconds_total{pod=\"p\",namespace=\"n\",container=\"c\",extra=\"a\\\"}b\"} 3\n";
    struct mapi_batch b = {0};
    cr_assert_eq(kite_apiserver_mapi_parse(t, strlen(t), 77, &b), 2);
    cr_assert_eq(b.node_cpu_ts, 77);
    cr_assert_eq(b.n, 1);
    cr_assert_eq(b.c[0].cpu_ts, 77);
    cr_assert_eq(b.c[0].cpu_ns, 3000000000ull);
    kite_apiserver_mapi_batch_release(&b);
}

Test(metrics_api, malformed_lines_are_refused) {
    static const char *const bad[] = {
        "container_cpu_usage_seconds_total{container=\"c\" 1 2\n",
        "container_cpu_usage_seconds_total{container=\"c\n",
        "node_cpu_usage_seconds_total\n",
        "container_cpu_usage_seconds_total{container} 1\n",
        /* after a container was kept: what was kept goes (a leak the fuzzer found under ASan) */
        "container_cpu_usage_seconds_total{container=\"c\",namespace=\"n\",pod=\"p\"} 1\nnode_cpu_usage_seconds_total\n",
        /* no newline at the end, and a NUL inside a line */
        "container_cpu_usage_seconds_total{container=\"c\"",
        "node_cpu_usage_seconds_total\0 1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct mapi_batch b = {0};
        /* the last one's NUL is inside its line: the whole line is given */
        size_t len = strlen(bad[i]) + (i == sizeof bad / sizeof *bad - 1 ? 4 : 0);
        cr_assert_eq(kite_apiserver_mapi_parse(bad[i], len, 1, &b), -EINVAL, "%s", bad[i]);
        kite_apiserver_mapi_batch_release(&b);
    }
    /* values that are no counts (NaN, negative) are skipped, other series ignored */
    const char *t = "node_cpu_usage_seconds_total NaN\nnode_memory_working_set_bytes -1\nfoo{a=\"b\"} 1\n";
    struct mapi_batch b = {0};
    cr_assert_eq(kite_apiserver_mapi_parse(t, strlen(t), 1, &b), 0);
    cr_assert(!b.node_has_cpu && !b.node_has_mem);
    kite_apiserver_mapi_batch_release(&b);
}

/* A series name that ends the answer, with no value (read past the end, found by the fuzzer):
 * the text is given without its NUL. */
Test(metrics_api, name_at_the_very_end) {
    static const char t[] = "node_cpu_usage_seconds_total 1\ncontainer_cpu_usage_seconds_total";
    char *exact = malloc(sizeof t - 1);
    memcpy(exact, t, sizeof t - 1);
    struct mapi_batch b = {0};
    cr_assert_eq(kite_apiserver_mapi_parse(exact, sizeof t - 1, 1, &b), -EINVAL);
    kite_apiserver_mapi_batch_release(&b);
    free(exact);
}

Test(metrics_api, containers_without_names_are_skipped) {
    const char *t = "container_cpu_usage_seconds_total{namespace=\"n\",pod=\"p\"} 1\n";
    struct mapi_batch b = {0};
    cr_assert_eq(kite_apiserver_mapi_parse(t, strlen(t), 1, &b), 1);
    cr_assert_eq(b.n, 0);
    kite_apiserver_mapi_batch_release(&b);
}

Test(metrics_api, quantities_and_durations) {
    char s[64];
    static const struct { uint64_t v; const char *want; } cpu[] = {
        {0, "0"}, {1, "1n"}, {1500000, "1500u"}, {2000000, "2m"}, {123456789, "123456789n"}, {3000000000ull, "3"},
        {1234000, "1234u"},
    };
    for (size_t i = 0; i < sizeof cpu / sizeof *cpu; i++) {
        kite_apiserver_mapi_format_cpu(cpu[i].v, s);
        cr_assert_str_eq(s, cpu[i].want);
    }
    static const struct { uint64_t v; const char *want; } mem[] = {
        {0, "0"}, {1000, "1000"}, {4096, "4Ki"}, {52428800, "50Mi"}, {1073741824, "1Gi"}, {1073741825, "1073741825"},
    };
    for (size_t i = 0; i < sizeof mem / sizeof *mem; i++) {
        kite_apiserver_mapi_format_memory(mem[i].v, s);
        cr_assert_str_eq(s, mem[i].want);
    }
    static const struct { int64_t ns; const char *want; } dur[] = {
        {15000000000ll, "15s"}, {15012000000ll, "15.012s"}, {60500000000ll, "1m0.5s"}, {3723000000000ll, "1h2m3s"},
        {250000000, "250ms"}, {1500, "1.5µs"}, {0, "0s"},
    };
    for (size_t i = 0; i < sizeof dur / sizeof *dur; i++) {
        kite_apiserver_mapi_format_duration(dur[i].ns, s);
        cr_assert_str_eq(s, dur[i].want);
    }
}
