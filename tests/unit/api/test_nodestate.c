/* The divergence states: one state per node, the first that applies, with its evidence. */
#include <criterion/criterion.h>

#include "api/nodestate.h"
#include "base/clock.h"

#include <json-c/json.h>
#include <stdio.h>

#define S KITE_NS_PER_SEC
#define NOW (INT64_C(1893553445) * S) /* 2030-01-02T03:04:05Z */

static json_object *node(const char *ready, const char *reason, const char *since, bool cordoned, const char *created) {
    char buf[1024];
    char cond[512] = "";
    if (ready)
        snprintf(cond, sizeof cond,
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\",\"reason\":\"%s\",\"message\":\"m\","
                 "\"lastTransitionTime\":\"%s\"}]",
                 ready, reason, since);
    snprintf(buf, sizeof buf,
             "{\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\",\"creationTimestamp\":\"%s\"},\"spec\":{%s},\"status\":{%s}}",
             created, cordoned ? "\"unschedulable\":true" : "", cond);
    return json_tokener_parse(buf);
}

Test(nodestate, classification_table) {
    const struct kite_node_thresholds t = {.stale_ns = 3600 * S, .orphan_window_ns = 60 * S,
                                           .rereg_window_ns = 600 * S, .rereg_slack_ns = 10 * S};
    static const char *OLD = "2030-01-01T00:00:00Z", *RECENT = "2030-01-02T03:04:00Z";
    struct {
        json_object *node;
        int64_t seen_first, seen_last, recreated;
        size_t pods, terminating;
        enum kite_node_state want;
        const char *evidence;
    } cases[] = {
        {NULL, NOW - 100 * S, NOW - 5 * S, 0, 0, 0, KITE_NODE_ORPHAN_MACHINE, "no Node object, but its credential called 5s ago"},
        {NULL, NOW - 100 * S, NOW - 90 * S, 0, 0, 0, KITE_NODE_NONE, NULL},
        {NULL, 0, 0, 0, 0, 0, KITE_NODE_NONE, NULL},
        {node("Unknown", "NodeStatusUnknown", OLD, false, OLD), 0, 0, 0, 0, 0, KITE_NODE_STALE_OBJECT, "longer than 60m"},
        {node("Unknown", "NodeStatusUnknown", RECENT, false, OLD), 0, 0, 0, 0, 0, KITE_NODE_UNREACHABLE, "Ready Unknown for 5s"},
        {node("Unknown", "NodeStatusNeverUpdated", RECENT, false, OLD), 0, 0, 0, 0, 0, KITE_NODE_NEVER_REPORTED, "NodeStatusNeverUpdated"},
        {node(NULL, NULL, NULL, false, RECENT), 0, 0, 0, 0, 0, KITE_NODE_NEVER_REPORTED, "no Ready condition"},
        {node("False", "KubeletNotReady", RECENT, true, OLD), 0, 0, 0, 0, 0, KITE_NODE_NOT_READY, "Ready False for 5s: KubeletNotReady: m"},
        {node("True", "KubeletReady", OLD, false, RECENT), NOW - 50 * S, NOW, NOW - 2 * S, 0, 0, KITE_NODE_REREGISTERED, "deleted and created again 2s ago"},
        {node("True", "KubeletReady", OLD, false, RECENT), NOW - 50 * S, NOW, 0, 0, 0, KITE_NODE_REREGISTERED, "created 5s ago"},
        {node("True", "KubeletReady", OLD, false, RECENT), NOW - 7 * S, NOW, 0, 0, 0, KITE_NODE_HEALTHY, "Ready True"},
        {node("True", "KubeletReady", OLD, true, OLD), 0, 0, 0, 3, 1, KITE_NODE_DRAINING, "1 of its 3 pods being deleted"},
        {node("True", "KubeletReady", OLD, true, OLD), 0, 0, 0, 3, 0, KITE_NODE_CORDONED, "3 pods keep running"},
        {node("True", "KubeletReady", OLD, false, OLD), 0, 0, NOW - 700 * S, 0, 0, KITE_NODE_HEALTHY, "Ready True (KubeletReady)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kite_node_facts f = {.node = cases[i].node, .seen_first_ns = cases[i].seen_first,
                                    .seen_last_ns = cases[i].seen_last, .recreated_ns = cases[i].recreated,
                                    .pods = cases[i].pods, .terminating = cases[i].terminating};
        struct kite_buf ev = {0};
        enum kite_node_state s = kite_node_classify(&f, NOW, &t, &ev);
        cr_assert_eq(s, cases[i].want, "case %zu: %s, want %s (%s)", i, kite_node_state_name(s),
                     kite_node_state_name(cases[i].want), ev.p ? ev.p : "");
        if (cases[i].evidence) cr_assert(ev.p && strstr(ev.p, cases[i].evidence), "case %zu: %s", i, ev.p ? ev.p : "");
        kite_buf_release(&ev);
        json_object_put(cases[i].node);
    }
}

Test(nodestate, names) {
    static const char *const want[] = {"OrphanMachine", "StaleObject", "NeverReported", "Unreachable", "LeaseExpired",
                                       "NotReady", "Reregistered", "Draining", "Cordoned", "Healthy"};
    for (int s = 0; s < KITE_NODE_STATES; s++) cr_assert_str_eq(kite_node_state_name(s), want[s]);
    cr_assert_str_eq(kite_node_state_name(KITE_NODE_NONE), "");
}

/* The lease judged by when the server saw it renewed: expired past the longer of its duration and
 * the grace period, whatever Ready says (no controller marked the node); silent past the stale
 * threshold, StaleObject. A cordoned node whose pod's eviction was refused recently drains. */
Test(nodestate, lease_and_refused_evictions) {
    const struct kite_node_thresholds t = {.stale_ns = 3600 * S, .orphan_window_ns = 60 * S, .rereg_window_ns = 600 * S,
                                           .rereg_slack_ns = 10 * S, .grace_ns = 50 * S, .drain_window_ns = 30 * S};
    static const char *OLD = "2030-01-01T00:00:00Z";
    json_object *lease40 = json_tokener_parse("{\"spec\":{\"leaseDurationSeconds\":40,\"renewTime\":\"2030-01-01T00:00:00.000000Z\"}}");
    json_object *lease90 = json_tokener_parse("{\"spec\":{\"leaseDurationSeconds\":90}}");
    struct {
        json_object *node, *lease;
        int64_t renewed, refused;
        size_t pods;
        enum kite_node_state want;
        const char *evidence;
    } cases[] = {
        {node("True", "KubeletReady", OLD, false, OLD), lease40, NOW - 49 * S, 0, 0, KITE_NODE_HEALTHY, "Ready True"},
        {node("True", "KubeletReady", OLD, false, OLD), lease40, NOW - 51 * S, 0, 0, KITE_NODE_LEASE_EXPIRED,
         "Ready True (KubeletReady), but its lease was last renewed 51s ago and expired 1s ago; no node lifecycle controller"},
        {node("True", "KubeletReady", OLD, false, OLD), lease90, NOW - 60 * S, 0, 0, KITE_NODE_HEALTHY, "Ready True"},
        {node("True", "KubeletReady", OLD, false, OLD), lease90, NOW - 91 * S, 0, 0, KITE_NODE_LEASE_EXPIRED, "expired 1s ago"},
        {node("False", "KubeletNotReady", OLD, true, OLD), lease40, NOW - 60 * S, 0, 0, KITE_NODE_LEASE_EXPIRED, "Ready False"},
        {node("True", "KubeletReady", OLD, false, OLD), lease40, NOW - 3601 * S, 0, 0, KITE_NODE_STALE_OBJECT, "silent longer than 60m"},
        {node("True", "KubeletReady", OLD, false, OLD), NULL, NOW - 3601 * S, 0, 0, KITE_NODE_HEALTHY, "no lease"},
        {node("True", "KubeletReady", OLD, true, OLD), lease40, NOW - 1 * S, NOW - 3 * S, 2, KITE_NODE_DRAINING,
         "cordoned; 2 pods left; eviction of default/p refused 3s ago (429: budget)"},
        {node("True", "KubeletReady", OLD, true, OLD), lease40, NOW - 1 * S, NOW - 31 * S, 2, KITE_NODE_CORDONED, "cordoned"},
        {node("True", "KubeletReady", OLD, true, OLD), lease40, NOW - 1 * S, NOW - 3 * S, 0, KITE_NODE_CORDONED, "cordoned"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kite_node_facts f = {.node = cases[i].node, .lease = cases[i].lease, .renewed_ns = cases[i].renewed,
                                    .refused_ns = cases[i].refused, .refused_pod = "default/p",
                                    .refused_why = "429: budget", .pods = cases[i].pods};
        struct kite_buf ev = {0};
        enum kite_node_state s = kite_node_classify(&f, NOW, &t, &ev);
        cr_assert_eq(s, cases[i].want, "case %zu: %s, want %s (%s)", i, kite_node_state_name(s),
                     kite_node_state_name(cases[i].want), ev.p ? ev.p : "");
        cr_assert(ev.p && strstr(ev.p, cases[i].evidence), "case %zu: %s", i, ev.p ? ev.p : "");
        kite_buf_release(&ev);
        json_object_put(cases[i].node);
    }
    json_object_put(lease40);
    json_object_put(lease90);
}

/* When time alone changes the state: the classification just before that instant is the same as
 * now, at it the state moves; with no threshold ahead, 0. */
Test(nodestate, next_change_is_when_the_state_moves) {
    const struct kite_node_thresholds t = {.stale_ns = 3600 * S, .orphan_window_ns = 60 * S, .rereg_window_ns = 600 * S,
                                           .rereg_slack_ns = 10 * S, .grace_ns = 50 * S};
    /* Ready Unknown since 10 min ago: Unreachable, StaleObject 50 min from now */
    json_object *unk = node("Unknown", "NodeStatusUnknown", "2030-01-02T02:54:05Z", false, "2030-01-01T00:00:00Z");
    struct kite_node_facts f = {.node = unk};
    int64_t next = kite_node_next_change(&f, NOW, &t);
    cr_assert_eq(next, NOW + 50 * 60 * S);
    cr_assert_eq(kite_node_classify(&f, next - 1, &t, NULL), KITE_NODE_UNREACHABLE);
    cr_assert_eq(kite_node_classify(&f, next, &t, NULL), KITE_NODE_STALE_OBJECT);
    cr_assert_eq(kite_node_next_change(&f, next, &t), 0, "no threshold after StaleObject");
    json_object_put(unk);

    /* Ready True, lease (duration 40 s) renewed 30 s ago: Healthy, expired at the grace (50 s) */
    json_object *ok = node("True", "KubeletReady", "2030-01-01T00:00:00Z", false, "2030-01-01T00:00:00Z");
    json_object *lease = json_tokener_parse("{\"spec\":{\"leaseDurationSeconds\":40}}");
    f = (struct kite_node_facts){.node = ok, .lease = lease, .renewed_ns = NOW - 30 * S};
    next = kite_node_next_change(&f, NOW, &t);
    cr_assert_eq(next, NOW + 20 * S);
    cr_assert_eq(kite_node_classify(&f, next - 1, &t, NULL), KITE_NODE_HEALTHY);
    cr_assert_eq(kite_node_classify(&f, next, &t, NULL), KITE_NODE_LEASE_EXPIRED);
    /* LeaseExpired: the next is StaleObject, an hour after the renewal */
    next = kite_node_next_change(&f, next, &t);
    cr_assert_eq(next, NOW - 30 * S + 3600 * S);
    cr_assert_eq(kite_node_classify(&f, next - 1, &t, NULL), KITE_NODE_LEASE_EXPIRED);
    cr_assert_eq(kite_node_classify(&f, next, &t, NULL), KITE_NODE_STALE_OBJECT);
    json_object_put(lease);
    json_object_put(ok);

    /* no Node, its credential called 5 s ago: OrphanMachine until the window closes */
    f = (struct kite_node_facts){.seen_first_ns = NOW - 100 * S, .seen_last_ns = NOW - 5 * S};
    next = kite_node_next_change(&f, NOW, &t);
    cr_assert_eq(kite_node_classify(&f, next - 1, &t, NULL), KITE_NODE_ORPHAN_MACHINE);
    cr_assert_eq(kite_node_classify(&f, next, &t, NULL), KITE_NODE_NONE);
}
