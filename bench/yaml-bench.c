/* Hostile YAML bodies through kite_yaml_parse: each shape built at about the request-body size
 * (3 MiB) unless noted, parsed once, the wall time and the result printed. Build and run:
 *   make -j2 all && cc -O2 -g -std=gnu11 -D_GNU_SOURCE -Isrc -o build/yaml-bench bench/yaml-bench.c \
 *       build/lib/libkite_api.a build/lib/libkite_json.a build/lib/libkite_base.a -lyaml -ljson-c -lm
 *   build/yaml-bench [shape]     (BENCHMARKS.md, "Hostile YAML") */
#include "api/yaml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY (3u << 20)

static void gen_bomb(struct kite_buf *b) { /* one 8 KiB scalar through 99^3 aliases */
    kite_buf_puts(b, "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  a: &a \"");
    for (int i = 0; i < 8192; i++) kite_buf_putc(b, 'x');
    kite_buf_puts(b, "\"\n");
    const char *names = "abcd";
    for (int l = 1; l < 4; l++) {
        kite_buf_printf(b, "  %c: &%c [", names[l], names[l]);
        for (int i = 0; i < 99; i++) kite_buf_printf(b, "%s*%c", i ? "," : "", names[l - 1]);
        kite_buf_puts(b, "]\n");
    }
}
static void gen_deep(struct kite_buf *b) { /* 200k-deep [ */
    for (int i = 0; i < 200000; i++) kite_buf_putc(b, '[');
    for (int i = 0; i < 200000; i++) kite_buf_putc(b, ']');
}
static void gen_deep_map(struct kite_buf *b) { /* {a: {a: ... */
    while (b->len < BODY / 2) kite_buf_puts(b, "{a: ");
    size_t n = b->len / 4;
    kite_buf_putc(b, '1');
    for (size_t i = 0; i < n; i++) kite_buf_putc(b, '}');
}
static void gen_anchors(struct kite_buf *b) { /* 100k anchored scalars, each used once */
    for (int i = 0; i < 100000; i++) kite_buf_printf(b, "k%d: &a%d v\n", i, i);
    for (int i = 0; i < 100000 && b->len < BODY; i++) kite_buf_printf(b, "r%d: *a%d\n", i, i);
}
static void gen_aliases(struct kite_buf *b) { /* one anchor, aliases to the body limit */
    kite_buf_puts(b, "a: &a {x: 1}\nl: [");
    while (b->len < BODY) kite_buf_puts(b, "*a,");
    kite_buf_puts(b, "*a]\n");
}
static void gen_long_keys(struct kite_buf *b) { /* 1000-byte keys */
    for (int i = 0; b->len < BODY; i++) {
        kite_buf_printf(b, "k%07d", i);
        for (int j = 0; j < 990; j++) kite_buf_putc(b, 'k');
        kite_buf_puts(b, ": v\n");
    }
}
static void gen_docs(struct kite_buf *b) { /* many small documents */
    while (b->len < BODY) kite_buf_puts(b, "---\na: 1\n");
}
static void gen_flow_maps(struct kite_buf *b) { /* a flow sequence of small flow mappings */
    kite_buf_puts(b, "items: [");
    for (int i = 0; b->len < BODY; i++) kite_buf_printf(b, "{k: %d, v: x},", i);
    kite_buf_puts(b, "{}]\n");
}
static void gen_scalars(struct kite_buf *b) { /* a plain list of small scalars (the normal worst case) */
    while (b->len < BODY) kite_buf_puts(b, "- abc\n");
}
static void gen_directives(struct kite_buf *b) { /* %TAG directives (libyaml checks each against all before) */
    for (int i = 0; b->len < BODY - 64; i++) kite_buf_printf(b, "%%TAG !t%d! tag:x,%d:\n", i, i);
    kite_buf_puts(b, "---\na: 1\n");
}

static const struct {
    const char *name;
    void (*gen)(struct kite_buf *);
} shapes[] = {
    {"bomb", gen_bomb},       {"deep-seq", gen_deep},   {"deep-map", gen_deep_map},   {"anchors", gen_anchors},
    {"aliases", gen_aliases}, {"long-keys", gen_long_keys}, {"documents", gen_docs}, {"flow-maps", gen_flow_maps},
    {"scalars", gen_scalars}, {"directives", gen_directives},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(shapes); i++) {
        if (argc > 1 && strcmp(argv[1], shapes[i].name) != 0) continue;
        struct kite_buf b = {0};
        shapes[i].gen(&b);
        json_object *o = NULL;
        char *err = NULL;
        double t0 = now();
        int r = kite_yaml_parse(b.p, b.len, &o, &err);
        double t = now() - t0;
        printf("%-11s %8zu bytes  %9.1f ms  %s\n", shapes[i].name, b.len, t * 1e3, r == 0 ? "parsed" : err ? err : strerror(-r));
        fflush(stdout);
        json_object_put(o);
        free(err);
        kite_buf_release(&b);
    }
    return 0;
}
