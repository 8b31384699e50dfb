/* Two-way strategic merge patch: exact patches for the node agent's cases, and the
 * round-trip property apply(from, diff(from, to)) == to on generated Node documents. */
#include <stdio.h>

#include "helpers.h"

static const struct kite_smp_rule node_rules[] = {
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
    {"status.addresses", "type", KITE_SMP_MERGE, NULL},
    {"spec.taints", "key", KITE_SMP_MERGE, NULL},
    {"metadata.finalizers", NULL, KITE_SMP_MERGE_PRIMITIVES, NULL},
    {"spec.strategy", NULL, KITE_SMP_RETAIN_KEYS, NULL},
    /* status.images has no rule: atomic, as in Kubernetes */
};
static const struct kite_smp_schema node_schema = {node_rules, sizeof node_rules / sizeof node_rules[0]};

struct diff_case {
    const char *name, *from, *to, *want;
};

#define COND(t, s, hb) "{\"type\":\"" t "\",\"status\":\"" s "\",\"lastHeartbeatTime\":\"" hb "\"}"

static const struct diff_case diff_cases[] = {
    {"equal inputs", "{\"a\":{\"b\":[1,{\"c\":2}]}}", "{\"a\":{\"b\":[1,{\"c\":2}]}}", "{}"},
    {"heartbeat only",
     "{\"status\":{\"conditions\":[" COND("Ready", "True", "t1") "," COND("MemoryPressure", "False", "t1") "]}}",
     "{\"status\":{\"conditions\":[" COND("Ready", "True", "t2") "," COND("MemoryPressure", "False", "t2") "]}}",
     "{\"status\":{\"$setElementOrder/conditions\":[{\"type\":\"Ready\"},{\"type\":\"MemoryPressure\"}],"
     "\"conditions\":[{\"type\":\"Ready\",\"lastHeartbeatTime\":\"t2\"},"
     "{\"type\":\"MemoryPressure\",\"lastHeartbeatTime\":\"t2\"}]}}"},
    {"condition status flip",
     "{\"status\":{\"conditions\":[" COND("Ready", "True", "t1") "," COND("MemoryPressure", "False", "t1") "]}}",
     "{\"status\":{\"conditions\":[" COND("Ready", "False", "t1") "," COND("MemoryPressure", "False", "t1") "]}}",
     "{\"status\":{\"$setElementOrder/conditions\":[{\"type\":\"Ready\"},{\"type\":\"MemoryPressure\"}],"
     "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}"},
    {"new image: the whole atomic list",
     "{\"status\":{\"images\":[{\"names\":[\"a\"],\"sizeBytes\":1}],\"conditions\":[" COND("Ready", "True", "t1") "]}}",
     "{\"status\":{\"images\":[{\"names\":[\"b\"],\"sizeBytes\":2},{\"names\":[\"a\"],\"sizeBytes\":1}],"
     "\"conditions\":[" COND("Ready", "True", "t1") "]}}",
     "{\"status\":{\"images\":[{\"names\":[\"b\"],\"sizeBytes\":2},{\"names\":[\"a\"],\"sizeBytes\":1}]}}"},
    {"labels and annotations", "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"},\"annotations\":{\"x\":\"y\"}}}",
     "{\"metadata\":{\"labels\":{\"b\":\"3\",\"c\":\"4\"},\"annotations\":{\"x\":\"y\"}}}",
     "{\"metadata\":{\"labels\":{\"a\":null,\"b\":\"3\",\"c\":\"4\"}}}"},
    {"field removed becomes null", "{\"spec\":{\"unschedulable\":true,\"podCIDR\":\"x\"}}", "{\"spec\":{\"podCIDR\":\"x\"}}",
     "{\"spec\":{\"unschedulable\":null}}"},
    {"finalizer removed and added", "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}",
     "{\"metadata\":{\"finalizers\":[\"a\",\"c\"]}}",
     "{\"metadata\":{\"$setElementOrder/finalizers\":[\"a\",\"c\"],\"finalizers\":[\"c\"],"
     "\"$deleteFromPrimitiveList/finalizers\":[\"b\"]}}"},
    {"taint removed", "{\"spec\":{\"taints\":[{\"key\":\"k1\",\"effect\":\"NoSchedule\"},{\"key\":\"k2\",\"effect\":\"NoExecute\"}]}}",
     "{\"spec\":{\"taints\":[{\"key\":\"k1\",\"effect\":\"NoSchedule\"}]}}",
     "{\"spec\":{\"$setElementOrder/taints\":[{\"key\":\"k1\"}],\"taints\":[{\"$patch\":\"delete\",\"key\":\"k2\"}]}}"},
    {"taint added", "{\"spec\":{\"taints\":[{\"key\":\"k1\",\"effect\":\"NoSchedule\"}]}}",
     "{\"spec\":{\"taints\":[{\"key\":\"k1\",\"effect\":\"NoSchedule\"},{\"key\":\"k2\",\"effect\":\"NoExecute\"}]}}",
     "{\"spec\":{\"$setElementOrder/taints\":[{\"key\":\"k1\"},{\"key\":\"k2\"}],"
     "\"taints\":[{\"key\":\"k2\",\"effect\":\"NoExecute\"}]}}"},
    {"all taints removed", "{\"spec\":{\"taints\":[{\"key\":\"k2\"},{\"key\":\"k1\"}]}}", "{\"spec\":{\"taints\":[]}}",
     "{\"spec\":{\"taints\":[{\"$patch\":\"delete\",\"key\":\"k1\"},{\"$patch\":\"delete\",\"key\":\"k2\"}]}}"},
    {"first taints: whole list", "{\"spec\":{\"taints\":[]}}", "{\"spec\":{\"taints\":[{\"key\":\"k\"}]}}",
     "{\"spec\":{\"taints\":[{\"key\":\"k\"}]}}"},
    {"reorder only", "{\"status\":{\"addresses\":[{\"type\":\"Hostname\",\"address\":\"h\"},{\"type\":\"InternalIP\",\"address\":\"1\"}]}}",
     "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"1\"},{\"type\":\"Hostname\",\"address\":\"h\"}]}}",
     "{\"status\":{\"$setElementOrder/addresses\":[{\"type\":\"InternalIP\"},{\"type\":\"Hostname\"}]}}"},
    {"element field removed", "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"reason\":\"r\"}]}}",
     "{\"status\":{\"conditions\":[{\"type\":\"Ready\"}]}}",
     "{\"status\":{\"$setElementOrder/conditions\":[{\"type\":\"Ready\"}],"
     "\"conditions\":[{\"type\":\"Ready\",\"reason\":null}]}}"},
    {"retainKeys", "{\"spec\":{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1}}}}",
     "{\"spec\":{\"strategy\":{\"type\":\"Recreate\"}}}",
     "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\",\"rollingUpdate\":null}}}"},
    {"scalar type change", "{\"a\":1}", "{\"a\":\"1\"}", "{\"a\":\"1\"}"},
    {"map becomes list", "{\"a\":{\"b\":1}}", "{\"a\":[1]}", "{\"a\":[1]}"},
};

Test(smp_diff, table) {
    for (size_t i = 0; i < sizeof diff_cases / sizeof diff_cases[0]; i++) {
        const struct diff_case *c = &diff_cases[i];
        json_object *from = J(c->from), *to = J(c->to), *patch = NULL, *back = NULL;
        char *fb = strdup(S(from)), *tb = strdup(S(to));
        cr_assert_eq(kite_smp_diff(from, to, &node_schema, &patch), 0, "%s", c->name);
        cr_assert_str_eq(S(from), fb, "%s: from modified", c->name);
        cr_assert_str_eq(S(to), tb, "%s: to modified", c->name);
        free(fb);
        free(tb);
        assert_json(patch, c->want, "%s", c->name);
        char *err = NULL;
        cr_assert_eq(kite_smp_apply(from, patch, &node_schema, &back, &err), 0, "%s: %s", c->name, err);
        cr_assert(kite_json_equal(back, to), "%s: round trip gave %s", c->name, S(back));
        json_object_put(back);
        json_object_put(patch);
        json_object_put(from);
        json_object_put(to);
    }
}

Test(smp_diff, rejects_undiffable_lists) {
    const char *bad[][2] = {
        {"{\"spec\":{\"taints\":[{\"key\":\"a\"},{\"key\":\"a\",\"x\":1}]}}", "{\"spec\":{\"taints\":[{\"key\":\"b\"}]}}"},
        {"{\"spec\":{\"taints\":[{\"key\":\"a\"}]}}", "{\"spec\":{\"taints\":[{\"effect\":\"x\"}]}}"},
        {"{\"spec\":{\"taints\":[{\"key\":\"a\"}]}}", "{\"spec\":{\"taints\":[\"a\"]}}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_object *from = J(bad[i][0]), *to = J(bad[i][1]), *patch = NULL;
        cr_assert_eq(kite_smp_diff(from, to, &node_schema, &patch), -EINVAL, "case %zu", i);
        cr_assert_null(patch);
        json_object_put(from);
        json_object_put(to);
    }
}

/* ---- round trip on generated Node documents ---- */

static uint64_t rng_state;
static unsigned rnd(unsigned n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* Picks a random subset of names in random order. */
static size_t pick(const char *const *names, size_t n, const char **out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (rnd(3)) out[k++] = names[i];
    for (size_t i = k; i > 1; i--) { /* shuffle */
        size_t j = rnd((unsigned)i);
        const char *t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
    }
    return k;
}

static json_object *str(const char *const *vals, size_t n) { return json_object_new_string(vals[rnd((unsigned)n)]); }

static const char *const small[] = {"a", "b", "c"};
static const char *const times[] = {"2024-01-01T00:00:00Z", "2024-01-01T00:00:10Z", "2024-01-01T00:00:20Z"};

static json_object *gen_map(const char *const *keys, size_t n) {
    const char *sel[8];
    size_t k = pick(keys, n, sel);
    json_object *m = json_object_new_object();
    for (size_t i = 0; i < k; i++) json_object_object_add(m, sel[i], str(small, 3));
    return m;
}

static json_object *gen_node(void) {
    static const char *const labels[] = {"kubernetes.io/hostname", "kubernetes.io/os", "zone", "role", "x/y~z"};
    static const char *const finalizers[] = {"f1", "f2", "f3", "f4"};
    static const char *const ctypes[] = {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"};
    static const char *const status[] = {"True", "False", "Unknown"};
    static const char *const tkeys[] = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "dedicated"};
    static const char *const effects[] = {"NoSchedule", "NoExecute", "PreferNoSchedule"};
    static const char *const atypes[] = {"InternalIP", "Hostname", "ExternalIP"};
    const char *sel[8];

    json_object *node = json_object_new_object(), *meta = json_object_new_object();
    json_object *spec = json_object_new_object(), *st = json_object_new_object();
    json_object_object_add(node, "kind", json_object_new_string("Node"));
    json_object_object_add(meta, "name", json_object_new_string("n1"));
    json_object_object_add(meta, "labels", gen_map(labels, 5));
    if (rnd(2)) json_object_object_add(meta, "annotations", gen_map(labels, 5));
    if (rnd(3)) {
        size_t k = pick(finalizers, 4, sel);
        json_object *f = json_object_new_array();
        for (size_t i = 0; i < k; i++) json_object_array_add(f, json_object_new_string(sel[i]));
        json_object_object_add(meta, "finalizers", f);
    }
    json_object_object_add(node, "metadata", meta);

    if (rnd(2)) json_object_object_add(spec, "unschedulable", json_object_new_boolean(rnd(2)));
    if (rnd(4)) {
        size_t k = pick(tkeys, 3, sel);
        json_object *t = json_object_new_array();
        for (size_t i = 0; i < k; i++) {
            json_object *e = json_object_new_object();
            json_object_object_add(e, "key", json_object_new_string(sel[i]));
            if (rnd(2)) json_object_object_add(e, "value", str(small, 3));
            json_object_object_add(e, "effect", str(effects, 3));
            if (rnd(3) == 0) json_object_object_add(e, "timeAdded", str(times, 3));
            json_object_array_add(t, e);
        }
        json_object_object_add(spec, "taints", t);
    }
    json_object_object_add(node, "spec", spec);

    json_object *cond = json_object_new_array();
    size_t k = pick(ctypes, 5, sel);
    for (size_t i = 0; i < k; i++) {
        json_object *c = json_object_new_object();
        json_object_object_add(c, "type", json_object_new_string(sel[i]));
        json_object_object_add(c, "status", str(status, 3));
        json_object_object_add(c, "lastHeartbeatTime", str(times, 3));
        json_object_object_add(c, "lastTransitionTime", str(times, 3));
        if (rnd(2)) json_object_object_add(c, "reason", str(small, 3));
        json_object_array_add(cond, c);
    }
    json_object_object_add(st, "conditions", cond);
    json_object *addr = json_object_new_array();
    k = pick(atypes, 3, sel);
    for (size_t i = 0; i < k; i++) {
        json_object *a = json_object_new_object();
        json_object_object_add(a, "type", json_object_new_string(sel[i]));
        json_object_object_add(a, "address", str(small, 3));
        json_object_array_add(addr, a);
    }
    json_object_object_add(st, "addresses", addr);
    json_object *images = json_object_new_array();
    for (unsigned i = 0, n = rnd(3); i < n; i++) {
        json_object *im = json_object_new_object(), *names = json_object_new_array();
        json_object_array_add(names, str(small, 3));
        json_object_object_add(im, "names", names);
        json_object_object_add(im, "sizeBytes", json_object_new_int64(rnd(3) * 1000));
        json_object_array_add(images, im);
    }
    json_object_object_add(st, "images", images);
    json_object *cap = json_object_new_object();
    json_object_object_add(cap, "cpu", str(small, 3));
    if (rnd(2)) json_object_object_add(cap, "memory", str(small, 3));
    json_object_object_add(st, "capacity", cap);
    json_object_object_add(node, "status", st);
    return node;
}

/* Mostly small edits: `to` starts as from and gets a few fields regenerated. */
static json_object *mutate(json_object *from) {
    json_object *to = NULL, *other = gen_node();
    json_object_deep_copy(from, &to, NULL);
    static const char *const paths[][2] = {{"metadata", "labels"},   {"metadata", "annotations"}, {"metadata", "finalizers"},
                                           {"spec", "taints"},       {"spec", "unschedulable"},   {"status", "conditions"},
                                           {"status", "addresses"},  {"status", "images"},        {"status", "capacity"}};
    for (unsigned n = 1 + rnd(3); n > 0; n--) {
        const char *const *p = paths[rnd(sizeof paths / sizeof paths[0])];
        json_object *src_parent, *dst_parent, *v;
        json_object_object_get_ex(other, p[0], &src_parent);
        json_object_object_get_ex(to, p[0], &dst_parent);
        if (json_object_object_get_ex(src_parent, p[1], &v))
            json_object_object_add(dst_parent, p[1], json_object_get(v));
        else
            json_object_object_del(dst_parent, p[1]);
    }
    json_object_put(other);
    return to;
}

static void check_round_trip(json_object *from, json_object *to, unsigned iter) {
    json_object *patch = NULL, *back = NULL;
    char *err = NULL;
    cr_assert_eq(kite_smp_diff(from, to, &node_schema, &patch), 0, "iter %u", iter);
    int r = kite_smp_apply(from, patch, &node_schema, &back, &err);
    if (r != 0 || !kite_json_equal(back, to)) {
        cr_log_error("iter %u\nfrom  %s", iter, S(from));
        cr_log_error("to    %s", S(to));
        cr_log_error("patch %s", S(patch));
        cr_log_error("back  %s (%s)", back ? S(back) : "-", err ? err : "");
    }
    cr_assert_eq(r, 0, "iter %u", iter);
    cr_assert(kite_json_equal(back, to), "iter %u: round trip differs", iter);
    json_object_put(back);

    /* a diff of a document against itself is empty */
    json_object *same = NULL;
    cr_assert_eq(kite_smp_diff(to, to, &node_schema, &same), 0);
    cr_assert_eq(json_object_object_length(same), 0, "iter %u: self diff %s", iter, S(same));
    json_object_put(same);
    json_object_put(patch);
}

Test(smp_diff, round_trip_node_documents) {
    rng_state = 0x9e3779b97f4a7c15ull;
    for (unsigned iter = 0; iter < 1500; iter++) {
        json_object *from = gen_node();
        json_object *to = (iter % 3 == 0) ? gen_node() : mutate(from);
        check_round_trip(from, to, iter);
        check_round_trip(to, from, iter);
        json_object_put(from);
        json_object_put(to);
    }
}

Test(smp_diff, large_merge_list) {
    /* 600 taints, every third changed, every seventh removed, 50 added: exercises the hashed
     * merge-key paths (a quadratic implementation shows up in this test's runtime) */
    json_object *from = J("{\"spec\":{\"taints\":[]}}"), *to = J("{\"spec\":{\"taints\":[]}}"), *fl, *tl;
    json_object_object_get_ex(json_object_object_get(from, "spec"), "taints", &fl);
    json_object_object_get_ex(json_object_object_get(to, "spec"), "taints", &tl);
    char key[32];
    for (int i = 0; i < 650; i++) {
        snprintf(key, sizeof key, "k%d", i);
        json_object *f = json_object_new_object(), *t = json_object_new_object();
        json_object_object_add(f, "key", json_object_new_string(key));
        json_object_object_add(f, "effect", json_object_new_string("NoSchedule"));
        json_object_object_add(t, "key", json_object_new_string(key));
        json_object_object_add(t, "effect", json_object_new_string(i % 3 ? "NoSchedule" : "NoExecute"));
        if (i < 600) json_object_array_add(fl, f);
        else json_object_put(f);
        if (i % 7) json_object_array_add(tl, t);
        else json_object_put(t);
    }
    json_object *patch = NULL, *back = NULL;
    cr_assert_eq(kite_smp_diff(from, to, &node_schema, &patch), 0);
    cr_assert_eq(kite_smp_apply(from, patch, &node_schema, &back, NULL), 0);
    cr_assert(kite_json_equal(back, to));
    json_object_put(back);
    json_object_put(patch);
    json_object_put(from);
    json_object_put(to);
}
