/* The kubelet's resource metrics in Prometheus' text format (0.0.4), as metrics-server reads
 * them, and the quantities and durations of metrics.k8s.io objects: the parts of the metrics API
 * (metrics_api.c) that need no server, kept apart for the unit tests and the fuzzer. The text
 * comes from a node's agent: every scan is bounded by the answer's end (it need not end in NUL
 * or a newline), label values are cut at 255 bytes, and a malformed line refuses the answer. */
#include "apiserver/internal.h"

#include "base/map.h"

#include <math.h>
#include <stdio.h>

/* Bytes from p before end or the first byte of reject (NUL included). */
static size_t span(const char *p, const char *end, const char *reject) {
    const char *q = p;
    while (q < end && *q && !strchr(reject, *q)) q++;
    return (size_t)(q - p);
}

/* The index of ns/pod/name in b (added when new), or SIZE_MAX past the limit. idx maps the
 * key to index + 1. */
static size_t ctr_of(struct mapi_batch *b, struct kite_map *idx, const char *ns, const char *pod, const char *name) {
    _cleanup_free_ char *key = kite_asprintf("%s/%s/%s", ns, pod, name);
    uintptr_t at = (uintptr_t)kite_map_get(idx, key);
    if (at) return at - 1;
    if (b->n >= KITE_METRICS_MAX_CONTAINERS) return SIZE_MAX;
    if (b->n == b->cap) b->c = kite_realloc(b->c, (b->cap = b->cap ? 2 * b->cap : 16) * sizeof *b->c);
    b->c[b->n] = (struct mapi_ctr){.ns = kite_strdup(ns), .pod = kite_strdup(pod), .name = kite_strdup(name)};
    kite_map_put(idx, key, (void *)(uintptr_t)(b->n + 1));
    return b->n++;
}

/* One label value, unescaped, into out (at most max-1 bytes); returns the byte after the
 * closing quote, or NULL. */
static const char *label_value(const char *p, const char *end, char *out, size_t max) {
    size_t n = 0;
    if (p >= end || *p != '"') return NULL;
    for (p++; p < end && *p != '"'; p++) {
        char ch = *p;
        if (ch == '\\' && p + 1 < end) {
            ch = *++p;
            if (ch == 'n') ch = '\n';
        }
        if (n + 1 < max) out[n++] = ch;
    }
    out[n] = 0;
    return p < end ? p + 1 : NULL;
}

void kite_apiserver_mapi_batch_release(struct mapi_batch *b) {
    for (size_t i = 0; i < b->n; i++) {
        free(b->c[i].ns);
        free(b->c[i].pod);
        free(b->c[i].name);
    }
    free(b->c);
    *b = (struct mapi_batch){0};
}

int kite_apiserver_mapi_parse(const char *text, size_t len, int64_t now_ns, struct mapi_batch *b) {
    static const char *const names[] = {"node_cpu_usage_seconds_total", "node_memory_working_set_bytes",
                                        "container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
                                        "container_start_time_seconds"};
    struct kite_map idx = {0};
    const char *end = text + len;
    int found = 0;
    for (const char *l = text, *nl; l < end; l = nl + 1) {
        nl = memchr(l, '\n', (size_t)(end - l));
        if (!nl) nl = end;
        if (l == nl || *l == '#') continue;
        size_t nlen = span(l, nl, "{ ");
        int which = -1;
        for (int i = 0; i < (int)KITE_ARRAY_SIZE(names); i++)
            if (strlen(names[i]) == nlen && memcmp(l, names[i], nlen) == 0) which = i;
        if (which < 0) continue;
        const char *p = l + nlen;
        char ns[256] = "", pod[256] = "", ctr[256] = "";
        if (p < nl && *p == '{') {
            for (p++; p < nl && *p != '}';) {
                size_t kl = span(p, nl, "=}");
                const char *eq = p + kl;
                if (eq >= nl || *eq != '=') goto bad;
                char tmp[256];
                char *dst = kl == 9 && memcmp(p, "namespace", 9) == 0 ? ns
                            : kl == 3 && memcmp(p, "pod", 3) == 0     ? pod
                            : kl == 9 && memcmp(p, "container", 9) == 0 ? ctr
                                                                      : tmp;
                if (!(p = label_value(eq + 1, nl, dst, 256))) goto bad;
                if (p < nl && *p == ',') p++;
            }
            if (p >= nl) goto bad;
            p++;
        }
        char num[64];
        while (p < nl && *p == ' ') p++;
        size_t vl = span(p, nl, " ");
        if (!vl || vl >= sizeof num) goto bad;
        memcpy(num, p, vl);
        num[vl] = 0;
        char *e;
        double v = strtod(num, &e);
        if (*e || !isfinite(v) || v < 0) continue;
        p += vl;
        int64_t ts = now_ns;
        while (p < nl && *p == ' ') p++;
        if (p < nl) {
            size_t tl = span(p, nl, " ");
            if (tl && tl < sizeof num) {
                memcpy(num, p, tl);
                num[tl] = 0;
                long long t = strtoll(num, &e, 10);
                if (!*e && t > 0 && t < INT64_MAX / 1000000) ts = (int64_t)t * 1000000;
            }
        }
        uint64_t ns_val = v * 1e9 >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(v * 1e9);
        found++;
        if (which == 0) {
            b->node_has_cpu = true;
            b->node_cpu_ns = ns_val;
            b->node_cpu_ts = ts;
        } else if (which == 1) {
            b->node_has_mem = true;
            b->node_mem = v >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(v);
            b->node_mem_ts = ts;
        } else {
            if (!*ns || !*pod || !*ctr) continue;
            size_t at = ctr_of(b, &idx, ns, pod, ctr);
            if (at == SIZE_MAX) continue;
            struct mapi_ctr *c = &b->c[at];
            if (which == 2) {
                c->has_cpu = true;
                c->cpu_ns = ns_val;
                c->cpu_ts = ts;
            } else if (which == 3) {
                c->has_mem = true;
                c->mem = v >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(v);
                c->mem_ts = ts;
            } else {
                c->start_ns = (int64_t)ns_val;
            }
        }
    }
    kite_map_release(&idx);
    return found;
bad:
    kite_map_release(&idx);
    return -EINVAL;
}

void kite_apiserver_mapi_format_duration(int64_t ns, char out[64]) {
    /* Go's time.Duration.String(), as metav1.Duration marshals it: "15.012s", "1m0.5s", "1h2m3s", "250ms" */
    if (ns <= 0) {
        snprintf(out, 64, "0s");
        return;
    }
    if (ns < KITE_NS_PER_SEC) {
        const char *unit = ns < 1000 ? "ns" : ns < 1000000 ? "µs" : "ms";
        int64_t div = ns < 1000 ? 1 : ns < 1000000 ? 1000 : 1000000;
        char frac[16];
        snprintf(frac, sizeof frac, "%0*lld", div == 1 ? 1 : div == 1000 ? 3 : 6, (long long)(ns % div));
        size_t fl = div == 1 ? 0 : strlen(frac);
        while (fl && frac[fl - 1] == '0') frac[--fl] = 0;
        snprintf(out, 64, "%lld%s%s%s", (long long)(ns / div), fl ? "." : "", fl ? frac : "", unit);
        return;
    }
    int64_t s = ns / KITE_NS_PER_SEC, h = s / 3600, mi = s / 60 % 60, sec = s % 60;
    char frac[16];
    snprintf(frac, sizeof frac, "%09lld", (long long)(ns % KITE_NS_PER_SEC));
    size_t fl = strlen(frac);
    while (fl && frac[fl - 1] == '0') frac[--fl] = 0;
    char secs[32];
    snprintf(secs, sizeof secs, "%lld%s%ss", (long long)sec, fl ? "." : "", fl ? frac : "");
    if (h) snprintf(out, 64, "%lldh%lldm%s", (long long)h, (long long)mi, secs);
    else if (mi) snprintf(out, 64, "%lldm%s", (long long)mi, secs);
    else snprintf(out, 64, "%s", secs);
}

/* Quantities as resource.Quantity prints them: CPU in nanocores made canonical (DecimalSI:
 * 1500000n = "1500u", 2000000n = "2m"), memory in bytes (BinarySI: "Ki", "Mi", ... when exact). */
void kite_apiserver_mapi_format_cpu(uint64_t nanocores, char out[32]) {
    static const char *const suf[] = {"n", "u", "m", ""};
    size_t i = 0;
    if (!nanocores) {
        snprintf(out, 32, "0");
        return;
    }
    while (i < 3 && nanocores % 1000 == 0) {
        nanocores /= 1000;
        i++;
    }
    snprintf(out, 32, "%llu%s", (unsigned long long)nanocores, suf[i]);
}

void kite_apiserver_mapi_format_memory(uint64_t bytes, char out[32]) {
    static const char *const suf[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    size_t i = 0;
    while (bytes && i < 6 && bytes % 1024 == 0) {
        bytes /= 1024;
        i++;
    }
    snprintf(out, 32, "%llu%s", (unsigned long long)bytes, suf[i]);
}

