/* nodeStatusHasChanged without copies (src/agent/statuscmp.c): statuses that differ only in
 * their conditions' lastHeartbeatTime (or conditions' order) compare equal, any other difference
 * does not; the tree-against-text walk agrees with the tree comparison and with the reference
 * (copy, drop the heartbeats, sort the conditions by type, compare) on many mutations of a real
 * NodeStatus. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "agent/agent-int.h"
#include "json/patch.h"

#define STATUS                                                                                                   \
    "{\"capacity\":{\"cpu\":\"8\",\"ephemeral-storage\":\"61202244Ki\",\"hugepages-2Mi\":\"0\",\"memory\":"      \
    "\"16318472Ki\",\"pods\":\"110\"},\"allocatable\":{\"cpu\":\"8\",\"memory\":\"16215048Ki\",\"pods\":\"110\"}," \
    "\"conditions\":["                                                                                            \
    "{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2026-12-02T09:56:15Z\","          \
    "\"lastTransitionTime\":\"2026-12-02T09:00:00Z\",\"reason\":\"KubeletHasSufficientMemory\",\"message\":"     \
    "\"kubelet has sufficient memory available\"},"                                                               \
    "{\"type\":\"DiskPressure\",\"status\":\"False\",\"lastHeartbeatTime\":\"2026-12-02T09:56:15Z\","            \
    "\"lastTransitionTime\":\"2026-12-02T09:00:00Z\",\"reason\":\"KubeletHasNoDiskPressure\",\"message\":"       \
    "\"kubelet has no disk pressure\"},"                                                                          \
    "{\"type\":\"NetworkUnavailable\",\"status\":\"False\",\"lastHeartbeatTime\":\"2026-12-02T08:00:00Z\","      \
    "\"lastTransitionTime\":\"2026-12-02T08:00:00Z\",\"reason\":\"RouteCreated\",\"message\":\"a\\/b\\n\"},"     \
    "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"2026-12-02T09:56:15Z\","                    \
    "\"lastTransitionTime\":\"2026-12-02T09:00:00Z\",\"reason\":\"KubeletReady\",\"message\":"                   \
    "\"kubelet is posting ready status\"}],"                                                                      \
    "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.13\"},{\"type\":\"Hostname\",\"address\":"     \
    "\"worker-node-3\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},"                            \
    "\"nodeInfo\":{\"machineID\":\"966f88b9\",\"bootID\":\"b007\",\"kernelVersion\":\"6.1.0\","                  \
    "\"osImage\":\"Debian GNU/Linux 12 (bookworm)\",\"architecture\":\"amd64\"},"                                 \
    "\"images\":[{\"names\":[\"registry.example/app-1:v1\",\"registry.example/app-1@sha256:01\"],"               \
    "\"sizeBytes\":24691356},{\"names\":[\"busybox:1.36\"],\"sizeBytes\":7654321}],\"config\":null,"             \
    "\"volumesInUse\":[],\"flag\":true}"

/* The reference: nodeStatusHasChanged as kite computed it before (copies, normalized). */
static int cond_cmp(const void *x, const void *y) {
    json_object *a = *(json_object *const *)x, *b = *(json_object *const *)y;
    const char *ta = json_object_get_string(json_object_object_get(a, "type"));
    const char *tb = json_object_get_string(json_object_object_get(b, "type"));
    return strcmp(ta ? ta : "", tb ? tb : "");
}
static void normalize(json_object *st) {
    json_object *conds;
    if (!json_object_object_get_ex(st, "conditions", &conds) || !json_object_is_type(conds, json_type_array)) return;
    for (size_t i = 0; i < json_object_array_length(conds); i++)
        json_object_object_del(json_object_array_get_idx(conds, i), "lastHeartbeatTime");
    json_object_array_sort(conds, cond_cmp);
}
static bool reference_equal(json_object *a, json_object *b) {
    json_object *ca = NULL, *cb = NULL;
    json_object_deep_copy(a, &ca, NULL);
    json_object_deep_copy(b, &cb, NULL);
    normalize(ca);
    normalize(cb);
    bool eq = kite_json_equal(ca, cb);
    json_object_put(ca);
    json_object_put(cb);
    return eq;
}

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "parse %s", s);
    return o;
}

/* Every comparison of acked (as a tree and as its text) with st must say want; the text walk
 * may also say it cannot tell (-1) when told to allow it (the agent parses and compares then). */
static int cannot_tell;
static void expect_ex(json_object *acked, json_object *st, bool want, const char *what, bool allow_unsure) {
    cr_assert_eq(reference_equal(acked, st), want, "reference disagrees on %s", what);
    cr_assert_eq(kite_agent_status_equal(acked, st), want, "tree: %s", what);
    cr_assert_eq(kite_agent_status_equal(st, acked), want, "tree (swapped): %s", what);
    const char *text = json_object_to_json_string_ext(acked, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    int r = kite_agent_status_cmp_text(text, strlen(text), st);
    if (r < 0 && allow_unsure) cannot_tell++;
    else cr_assert_eq(r, want ? 1 : 0, "text (%d): %s", r, what);
    text = json_object_to_json_string_ext(acked, JSON_C_TO_STRING_PRETTY); /* escaped slashes, spaces */
    int r2 = kite_agent_status_cmp_text(text, strlen(text), st);
    cr_assert_eq(r2, r, "pretty text (%d): %s", r2, what);
}
static void expect(json_object *acked, json_object *st, bool want, const char *what) {
    expect_ex(acked, st, want, what, false);
}

static json_object *cond(json_object *st, size_t i) {
    return json_object_array_get_idx(json_object_object_get(st, "conditions"), i);
}

Test(statuscmp, heartbeats_only_compare_equal) {
    json_object *a = parse(STATUS), *b = parse(STATUS);
    expect(a, b, true, "same");
    for (size_t i = 0; i < 4; i++)
        json_object_object_add(cond(b, i), "lastHeartbeatTime", json_object_new_string("2026-12-02T10:06:15Z"));
    expect(a, b, true, "new heartbeats");
    json_object_object_del(cond(b, 1), "lastHeartbeatTime");
    expect(a, b, true, "a heartbeat missing");
    /* conditions in another order */
    json_object *conds = json_object_object_get(b, "conditions");
    json_object *first = json_object_get(json_object_array_get_idx(conds, 0));
    json_object *last = json_object_get(json_object_array_get_idx(conds, 3));
    json_object_array_put_idx(conds, 0, last);
    json_object_array_put_idx(conds, 3, first);
    expect(a, b, true, "conditions reordered");
    json_object_put(a);
    json_object_put(b);
}

Test(statuscmp, other_differences_do_not) {
    static const struct {
        const char *what, *path, *key; /* path: member of the status; key: member of it; NULL: whole */
        int cond; /* >= 0: that condition's key */
    } muts[] = {
        {"Ready status", NULL, "status", 3},
        {"Ready reason", NULL, "reason", 3},
        {"transition time", NULL, "lastTransitionTime", 0},
        {"message", NULL, "message", 2},
        {"capacity", "capacity", "memory", -1},
        {"allocatable", "allocatable", "cpu", -1},
        {"bootID", "nodeInfo", "bootID", -1},
        {"osImage", "nodeInfo", "osImage", -1},
    };
    for (size_t m = 0; m < KITE_ARRAY_SIZE(muts); m++) {
        json_object *a = parse(STATUS), *b = parse(STATUS);
        json_object *o = muts[m].cond >= 0 ? cond(b, (size_t)muts[m].cond) : json_object_object_get(b, muts[m].path);
        json_object_object_add(o, muts[m].key, json_object_new_string("changed"));
        expect(a, b, false, muts[m].what);
        json_object_object_del(o, muts[m].key);
        expect(a, b, false, muts[m].what);
        json_object_put(a);
        json_object_put(b);
    }
    struct { const char *what, *a, *b; } pairs[] = {
        {"an image's size", "\"sizeBytes\":7654321", "\"sizeBytes\":7654322"},
        {"an image's name", "busybox:1.36", "busybox:1.37"},
        {"the port", "\"Port\":10250", "\"Port\":0"},
        {"an escape", "a\\/b\\n", "a\\/b\\t"},
        {"a string for a number", "\"Port\":10250", "\"Port\":\"10250\""},
        {"a bool", "\"flag\":true", "\"flag\":false"},
        {"null", "\"config\":null", "\"config\":{}"},
        {"an extra member", "\"flag\":true", "\"flag\":true,\"phase\":\"Running\""},
        {"an extra condition", "\"conditions\":[", "\"conditions\":[{\"type\":\"X\",\"status\":\"True\"},"},
        {"a heartbeat outside conditions", "\"bootID\":\"b007\"", "\"bootID\":\"b007\",\"lastHeartbeatTime\":\"x\""},
        {"a condition's type", "\"type\":\"DiskPressure\"", "\"type\":\"PIDPressure\""},
        {"an empty array", "\"volumesInUse\":[]", "\"volumesInUse\":[\"a\"]"},
    };
    for (size_t p = 0; p < KITE_ARRAY_SIZE(pairs); p++) {
        const char *at = strstr(STATUS, pairs[p].a);
        cr_assert_not_null(at, "%s", pairs[p].what);
        char *other = kite_asprintf("%.*s%s%s", (int)(at - STATUS), STATUS, pairs[p].b, at + strlen(pairs[p].a));
        json_object *a = parse(STATUS), *b = parse(other);
        expect(a, b, false, pairs[p].what);
        expect(b, a, false, pairs[p].what);
        json_object_put(a);
        json_object_put(b);
        free(other);
    }
}

/* The walk says "cannot tell" where a plain scan is not enough, and never guesses. */
Test(statuscmp, cannot_tell) {
    json_object *st = parse("{\"nodeInfo\":{\"osImage\":\"caf\\u00e9\"},\"x\":1.5}");
    const char *t1 = "{\"nodeInfo\":{\"osImage\":\"caf\\u00e9\"},\"x\":1.5}";
    cr_assert_eq(kite_agent_status_cmp_text(t1, strlen(t1), st), -1);
    const char *t2 = "{\"nodeInfo\":{\"osImage\":\"caf\xc3\xa9\"},\"x\":1.5}";
    cr_assert_eq(kite_agent_status_cmp_text(t2, strlen(t2), st), -1, "a double");
    const char *t3 = "{\"nodeInfo\":";
    cr_assert_eq(kite_agent_status_cmp_text(t3, strlen(t3), st), -1, "malformed");
    json_object_put(st);
}

static uint64_t rng = 0x9e3779b97f4a7c15;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random leaf (object member) of o: its parent and key, found by walking down. */
static void mutate(json_object *o) {
    for (;;) {
        if (json_object_is_type(o, json_type_array)) {
            size_t n = json_object_array_length(o);
            if (!n) {
                json_object_array_add(o, json_object_new_string("new"));
                return;
            }
            if (next() % 8 == 0) { /* swap two elements */
                size_t i = next() % n, j = next() % n;
                json_object *x = json_object_get(json_object_array_get_idx(o, i));
                json_object *y = json_object_get(json_object_array_get_idx(o, j));
                json_object_array_put_idx(o, i, y);
                json_object_array_put_idx(o, j, x);
                return;
            }
            o = json_object_array_get_idx(o, next() % n);
            continue;
        }
        if (!json_object_is_type(o, json_type_object)) return;
        int n = json_object_object_length(o);
        if (!n) {
            json_object_object_add(o, "k", json_object_new_int(1));
            return;
        }
        int pick = (int)(next() % (uint64_t)n), i = 0;
        const char *key = NULL;
        json_object *val = NULL;
        json_object_object_foreach(o, k, v) {
            if (i++ == pick) {
                key = k;
                val = v;
                break;
            }
        }
        bool leaf = !json_object_is_type(val, json_type_object) && !json_object_is_type(val, json_type_array);
        if (leaf || next() % 4 == 0) {
            char *kc = kite_strdup(key);
            switch (next() % 5) {
            case 0: json_object_object_del(o, kc); break;
            case 1: json_object_object_add(o, kc, json_object_new_string("2026-12-02T10:00:00Z")); break;
            case 2: json_object_object_add(o, kc, json_object_new_int((int)(next() % 3))); break;
            case 3: json_object_object_add(o, "added", json_object_new_string("x")); break;
            default: json_object_object_add(o, kc, json_object_new_string("False")); break;
            }
            free(kc);
            return;
        }
        o = val;
    }
}

Test(statuscmp, agrees_with_reference_on_mutations) {
    int equal = 0, different = 0;
    for (int i = 0; i < 3000; i++) {
        json_object *a = parse(STATUS), *b = parse(STATUS);
        int k = 1 + (int)(next() % 3);
        for (int j = 0; j < k; j++) mutate(next() % 2 ? b : a);
        bool want = reference_equal(a, b);
        want ? equal++ : different++;
        /* a condition whose type was deleted or made a number: the walk cannot tell */
        expect_ex(a, b, want, json_object_to_json_string(b), true);
        json_object_put(a);
        json_object_put(b);
    }
    cr_assert_gt(equal, 30, "equal cases: %d", equal);
    cr_assert_gt(different, 100, "different cases: %d", different);
    cr_assert_lt(cannot_tell, 300, "cannot tell: %d", cannot_tell);
}
