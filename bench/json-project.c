/* A Lease watch event as an informer projects it: the event's type and object found in the line
 * and the object cut to the node lifecycle controller's members (client/informer.c on_line),
 * with the path-by-path scan kite_json_project used to do (tests/unit/json/scan_reference.h)
 * and with the one-walk scan of json/scan.c, in alternating rounds of the same run. Build and run:
 *   make -j2 all && cc -O2 -g -std=gnu11 -D_GNU_SOURCE -Isrc -I/usr/include/json-c -o build/json-project \
 *       bench/json-project.c build/lib/libkite_json.a build/lib/libkite_base.a -ljson-c -lm
 *   build/json-project [seconds per round (1)] [rounds (3)] [old|new: only that one, for a profiler]
 * The event is one `kite up` served to a Lease watch (a `kite sim` node's renewal, managedFields
 * included). */
#include "json/scan.h"
#include "../tests/unit/json/scan_reference.h"

#include <stdlib.h>
#include <time.h>

static const char EVENT[] =
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\","
    "\"metadata\":{\"name\":\"sim-00002\",\"namespace\":\"kube-node-lease\",\"uid\":\"c2ab9fe4-3da5-4"
    "b3f-b3c5-233b5b112f63\",\"resourceVersion\":\"142\",\"creationTimestamp\":\"2026-12-06T22:50:35Z"
    "\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"sim-00002\",\"uid\":"
    "\"e85b700a-31ba-4a1e-8a48-fde2193bb642\"}],\"managedFields\":[{\"manager\":\"kite-sim\",\"operat"
    "ion\":\"Update\",\"apiVersion\":\"coordination.k8s.io/v1\",\"time\":\"2026-12-06T22:51:06Z\",\"f"
    "ieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:ownerReferences\":{\"k:{\\\"uid\\\":\\\""
    "e85b700a-31ba-4a1e-8a48-fde2193bb642\\\"}\":{\".\":{},\"f:apiVersion\":{},\"f:kind\":{},\"f:name"
    "\":{},\"f:uid\":{}}}},\"f:spec\":{\"f:holderIdentity\":{},\"f:leaseDurationSeconds\":{},\"f:rene"
    "wTime\":{}}}}]},\"spec\":{\"holderIdentity\":\"sim-00002\",\"leaseDurationSeconds\":40,\"renewTi"
    "me\":\"2026-12-06T22:51:06.023387Z\"}}}";

/* the informer's own members, then the node lifecycle controller's (nodelifecycle.c) */
static const char *const PATHS[] = {"metadata.name", "metadata.namespace", "metadata.resourceVersion", "spec.renewTime",
                                    NULL};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* (the machine is shared: CPU time, not wall) */
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile size_t sink;

/* what on_line did: two member walks over the line, the cut path by path */
static int event_old(const char *s, size_t n, bool cut_only) {
    const char *t = s, *o = s;
    size_t tn = 0, on = n;
    if (!cut_only && (ref_json_member(s, n, "type", &t, &tn) != 1 || ref_json_member(s, n, "object", &o, &on) != 1))
        return -1;
    json_object *obj = ref_json_project(o, on, PATHS);
    if (!obj) return -1;
    sink += tn + (size_t)json_object_object_length(obj);
    json_object_put(obj);
    return 0;
}

/* what it does now: one walk for both members, one walk per object for the cut */
static int event_new(const char *s, size_t n, bool cut_only) {
    static const char *const names[] = {"type", "object"};
    const char *m[2] = {s, s};
    size_t mn[2] = {0, n};
    if (!cut_only && (kite_json_members(s, n, 2, names, m, mn) < 0 || !m[0] || !m[1])) return -1;
    json_object *obj = kite_json_project(m[1], mn[1], PATHS);
    if (!obj) return -1;
    sink += mn[0] + (size_t)json_object_object_length(obj);
    json_object_put(obj);
    return 0;
}

/* CPU ns per call of f over `secs` seconds of CPU time */
static double run(int (*f)(const char *, size_t, bool), const char *s, size_t n, bool cut_only, double secs) {
    size_t calls = 0;
    double t0 = now_s(), t;
    do {
        for (int k = 0; k < 1000; k++)
            if (f(s, n, cut_only) < 0) {
                fprintf(stderr, "the event did not scan\n");
                exit(1);
            }
        calls += 1000;
    } while ((t = now_s()) - t0 < secs);
    return (t - t0) * 1e9 / (double)calls;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    const char *only = argc > 3 ? argv[3] : NULL;
    size_t n = sizeof EVENT - 1;
    const char *o;
    size_t on;
    if (kite_json_member(EVENT, n, "object", &o, &on) != 1) return 1;
    /* both give the same cut */
    json_object *a = ref_json_project(o, on, PATHS), *b = kite_json_project(o, on, PATHS);
    if (!a || !b || strcmp(json_object_to_json_string(a), json_object_to_json_string(b)) != 0) {
        fprintf(stderr, "the cuts differ\n");
        return 1;
    }
    printf("Lease watch event: %zu bytes (object %zu), paths:", n, on);
    for (size_t k = 0; PATHS[k]; k++) printf(" %s", PATHS[k]);
    printf("\ncut: %s\n", json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN));
    json_object_put(a);
    json_object_put(b);
    printf("%-6s %-22s %12s %12s %8s\n", "round", "work", "old ns/op", "new ns/op", "old/new");
    double so[2] = {0}, sn[2] = {0};
    for (int r = 0; r < rounds; r++)
        for (int cut_only = 0; cut_only < 2; cut_only++) {
            const char *s = cut_only ? o : EVENT;
            size_t len = cut_only ? on : n;
            bool old = !only || strcmp(only, "old") == 0, new = !only || strcmp(only, "new") == 0;
            double to = old ? run(event_old, s, len, cut_only, secs) : 0, tn = new ? run(event_new, s, len, cut_only, secs) : 0;
            so[cut_only] += to, sn[cut_only] += tn;
            printf("%-6d %-22s %12.0f %12.0f %7.2fx\n", r + 1, cut_only ? "kite_json_project" : "event line (on_line)",
                   to, tn, to / tn);
        }
    for (int cut_only = 0; cut_only < 2; cut_only++)
        printf("%-6s %-22s %12.0f %12.0f %7.2fx\n", "mean", cut_only ? "kite_json_project" : "event line (on_line)",
               so[cut_only] / rounds, sn[cut_only] / rounds, so[cut_only] / sn[cut_only]);
    return (int)(sink & 0);
}
