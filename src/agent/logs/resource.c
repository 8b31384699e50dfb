/* Rendering the resource metrics (resource.h). Sorted as the kubelet's registry gathers them:
 * by metric family name, then by labels, so two scrapes of the same node compare line by line. */
#include "agent/logs/resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "base/clock.h"

static int64_t ms(int64_t ns) { return ns / 1000000; }

/* A label value in the text format: \, " and newline escaped. */
static void label(struct kite_buf *b, const char *k, const char *v, bool first) {
    kite_buf_printf(b, "%s%s=\"", first ? "" : ",", k);
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\' || *p == '"') kite_buf_putc(b, '\\');
        if (*p == '\n') {
            kite_buf_puts(b, "\\n");
            continue;
        }
        kite_buf_putc(b, *p);
    }
    kite_buf_putc(b, '"');
}

static void seconds(struct kite_buf *b, uint64_t ns) {
    kite_buf_printf(b, "%llu.%09llu", (unsigned long long)(ns / 1000000000ull), (unsigned long long)(ns % 1000000000ull));
}

static void family(struct kite_buf *b, const char *name, const char *help, const char *type) {
    kite_buf_printf(b, "# HELP %s [STABLE] %s\n# TYPE %s %s\n", name, help, name, type);
}

static int by_ctr(const void *a, const void *b) {
    const struct kite_ctr_sample *x = a, *y = b;
    int r = strcmp(x->name, y->name);
    if (!r) r = strcmp(x->ns, y->ns);
    if (!r) r = strcmp(x->pod, y->pod);
    return r;
}
static int by_pod(const void *a, const void *b) {
    const struct kite_ctr_sample *x = a, *y = b;
    int r = strcmp(x->ns, y->ns);
    if (!r) r = strcmp(x->pod, y->pod);
    if (!r) r = strcmp(x->uid, y->uid);
    return r;
}

enum what { CPU, MEM, START };

static void ctr_lines(struct kite_buf *b, const struct kite_ctr_sample *v, size_t n, enum what w) {
    for (size_t i = 0; i < n; i++) {
        const struct kite_ctr_sample *c = &v[i];
        if ((w == CPU && !c->u.has_cpu) || (w == MEM && !c->u.has_memory)) continue;
        kite_buf_puts(b, w == CPU ? "container_cpu_usage_seconds_total{" : w == MEM ? "container_memory_working_set_bytes{"
                                                                                  : "container_start_time_seconds{");
        label(b, "container", c->name, true);
        label(b, "namespace", c->ns, false);
        label(b, "pod", c->pod, false);
        kite_buf_puts(b, "} ");
        if (w == CPU) seconds(b, c->u.cpu_ns);
        else if (w == MEM) kite_buf_printf(b, "%llu", (unsigned long long)c->u.memory_working_set);
        else seconds(b, (uint64_t)(c->started_ns > 0 ? c->started_ns : 0));
        kite_buf_printf(b, " %lld\n", (long long)ms(w == START ? c->started_ns : c->ts_ns));
    }
}

/* Per pod (v sorted by pod): the sum of its containers' values, at the latest of their times. */
static void pod_lines(struct kite_buf *b, const struct kite_ctr_sample *v, size_t n, enum what w) {
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint64_t sum = 0;
        int64_t ts = 0;
        bool any = false;
        for (; j < n && by_pod(&v[i], &v[j]) == 0; j++) {
            if ((w == CPU && !v[j].u.has_cpu) || (w == MEM && !v[j].u.has_memory)) continue;
            any = true;
            sum += w == CPU ? v[j].u.cpu_ns : v[j].u.memory_working_set;
            if (v[j].ts_ns > ts) ts = v[j].ts_ns;
        }
        if (any) {
            kite_buf_puts(b, w == CPU ? "pod_cpu_usage_seconds_total{" : "pod_memory_working_set_bytes{");
            label(b, "namespace", v[i].ns, true);
            label(b, "pod", v[i].pod, false);
            kite_buf_puts(b, "} ");
            if (w == CPU) seconds(b, sum);
            else kite_buf_printf(b, "%llu", (unsigned long long)sum);
            kite_buf_printf(b, " %lld\n", (long long)ms(ts));
        }
        i = j;
    }
}

void kite_resource_metrics_render(const struct kite_usage *node, int64_t node_ts_ns, const struct kite_ctr_sample *c,
                                  size_t n, bool scrape_error, struct kite_buf *out) {
    struct kite_ctr_sample *v = kite_calloc(n ? n : 1, sizeof *v);
    if (n) memcpy(v, c, n * sizeof *v);
    qsort(v, n, sizeof *v, by_ctr);
    family(out, "container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", "counter");
    ctr_lines(out, v, n, CPU);
    family(out, "container_memory_working_set_bytes", "Current working set of the container in bytes", "gauge");
    ctr_lines(out, v, n, MEM);
    family(out, "container_start_time_seconds", "Start time of the container since unix epoch in seconds", "gauge");
    ctr_lines(out, v, n, START);
    family(out, "node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", "counter");
    if (node && node->has_cpu) {
        kite_buf_puts(out, "node_cpu_usage_seconds_total ");
        seconds(out, node->cpu_ns);
        kite_buf_printf(out, " %lld\n", (long long)ms(node_ts_ns));
    }
    family(out, "node_memory_working_set_bytes", "Current working set of the node in bytes", "gauge");
    if (node && node->has_memory)
        kite_buf_printf(out, "node_memory_working_set_bytes %llu %lld\n", (unsigned long long)node->memory_working_set,
                        (long long)ms(node_ts_ns));
    qsort(v, n, sizeof *v, by_pod);
    family(out, "pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", "counter");
    pod_lines(out, v, n, CPU);
    family(out, "pod_memory_working_set_bytes", "Current working set of the pod in bytes", "gauge");
    pod_lines(out, v, n, MEM);
    family(out, "resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge");
    kite_buf_printf(out, "resource_scrape_error %d\n", scrape_error ? 1 : 0);
    free(v);
}

/* RFC 3339 with seconds, as metav1.Time. */
static void rfc3339(struct kite_buf *b, int64_t ns) {
    char s[21];
    kite_time_format(ns, s);
    kite_buf_printf(b, "\"%s\"", s);
}

static void usage_json(struct kite_buf *b, const struct kite_usage *u, int64_t ts) {
    kite_buf_puts(b, "\"cpu\":{\"time\":");
    rfc3339(b, ts);
    if (u->has_cpu) kite_buf_printf(b, ",\"usageCoreNanoSeconds\":%llu", (unsigned long long)u->cpu_ns);
    kite_buf_puts(b, "},\"memory\":{\"time\":");
    rfc3339(b, ts);
    if (u->has_memory)
        kite_buf_printf(b, ",\"usageBytes\":%llu,\"workingSetBytes\":%llu", (unsigned long long)u->memory_usage,
                        (unsigned long long)u->memory_working_set);
    kite_buf_puts(b, "}");
}

void kite_stats_summary_render(const char *node_name, int64_t boot_ns, const struct kite_usage *node, int64_t node_ts_ns,
                               const struct kite_ctr_sample *c, size_t n, struct kite_buf *out) {
    struct kite_ctr_sample *v = kite_calloc(n ? n : 1, sizeof *v);
    if (n) memcpy(v, c, n * sizeof *v);
    qsort(v, n, sizeof *v, by_pod);
    /* names are DNS labels and subdomains: nothing to escape */
    kite_buf_printf(out, "{\"node\":{\"nodeName\":\"%s\",\"startTime\":", node_name ? node_name : "");
    rfc3339(out, boot_ns);
    if (node) {
        kite_buf_putc(out, ',');
        usage_json(out, node, node_ts_ns);
    }
    kite_buf_puts(out, "},\"pods\":[");
    for (size_t i = 0; i < n;) {
        size_t j = i;
        struct kite_usage sum = {0};
        int64_t ts = 0, start = INT64_MAX;
        for (; j < n && by_pod(&v[i], &v[j]) == 0; j++) {
            sum.has_cpu |= v[j].u.has_cpu;
            sum.has_memory |= v[j].u.has_memory;
            sum.cpu_ns += v[j].u.cpu_ns;
            sum.memory_usage += v[j].u.memory_usage;
            sum.memory_working_set += v[j].u.memory_working_set;
            if (v[j].ts_ns > ts) ts = v[j].ts_ns;
            if (v[j].started_ns < start) start = v[j].started_ns;
        }
        kite_buf_printf(out, "%s{\"podRef\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\"},\"startTime\":",
                        i ? "," : "", v[i].pod, v[i].ns, v[i].uid);
        rfc3339(out, start);
        kite_buf_puts(out, ",\"containers\":[");
        for (size_t k = i; k < j; k++) {
            kite_buf_printf(out, "%s{\"name\":\"%s\",\"startTime\":", k > i ? "," : "", v[k].name);
            rfc3339(out, v[k].started_ns);
            kite_buf_putc(out, ',');
            usage_json(out, &v[k].u, v[k].ts_ns);
            kite_buf_putc(out, '}');
        }
        kite_buf_puts(out, "],");
        usage_json(out, &sum, ts);
        kite_buf_putc(out, '}');
        i = j;
    }
    kite_buf_puts(out, "]}\n");
    free(v);
}
