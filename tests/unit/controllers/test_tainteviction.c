/* The taint eviction controller's core on a fake clock: which tolerations count, when a pod
 * is deleted, the DisruptionTarget condition before the delete, and cancellation. */
#include "controllers/node/tainteviction.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>

#define S KITE_NS_PER_SEC
#define POD "/api/v1/namespaces/default/pods/p"

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_tec *tec;
};

static void env_init(struct env *e) {
    kite_log_set_level(KITE_LOG_ERROR); /* the controllers' progress lines */
    kite_fake_clock_init(&e->clock, INT64_C(1893553445) * S);
    fakeapi_init(&e->api);
    struct kite_tec_options o = {.client = e->api.client, .clock = &e->clock.clock};
    e->tec = kite_tec_new(&o);
}

static void env_release(struct env *e) {
    kite_tec_free(e->tec);
    fakeapi_release(&e->api);
}

static void run_for(struct env *e, int64_t ns) {
    int64_t end = kite_now_mono(&e->clock.clock) + ns;
    for (;;) {
        int64_t next = kite_tec_step(e->tec);
        if (kite_tec_pending(e->tec)) continue;
        int64_t now = kite_now_mono(&e->clock.clock);
        if (now >= end) break;
        kite_fake_clock_advance(&e->clock, KITE_MIN(KITE_MAX(next, 1), end - now));
    }
}

static void set_node(struct env *e, const char *taints) {
    json_object *n = fakeapi_json("{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"taints\":%s}}", taints);
    kite_tec_node_upsert(e->tec, n);
    json_object_put(n);
}

static void set_pod(struct env *e, const char *tolerations) {
    json_object *p = fakeapi_json("{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"u1\"},"
                                  "\"spec\":{\"nodeName\":\"n1\",\"tolerations\":%s},\"status\":{}}", tolerations);
    if (!fakeapi_get(&e->api, POD)) fakeapi_put(&e->api, POD, json_object_get(p));
    kite_tec_pod_upsert(e->tec, p);
    json_object_put(p);
}

#define UR_TAINT "[{\"key\":\"node.kubernetes.io/unreachable\",\"effect\":\"NoExecute\",\"timeAdded\":\"2030-01-02T03:04:05Z\"}]"
#define NR_TAINT "[{\"key\":\"node.kubernetes.io/not-ready\",\"effect\":\"NoExecute\"}]"
#define TOL(secs)                                                                                                    \
    "[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":" secs "}," \
    "{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":" secs "}]"

Test(tainteviction, toleration_seconds) {
    static const struct {
        const char *taints, *tols;
        int r;
        int64_t s;
    } cases[] = {
        {UR_TAINT, "[]", -EPERM, 0},
        {UR_TAINT, "null", -EPERM, 0},
        {UR_TAINT, TOL("300"), 0, 300},
        {UR_TAINT, TOL("-5"), 0, 0},
        {UR_TAINT, "[{\"operator\":\"Exists\"}]", 0, -1},                        /* tolerates everything */
        {UR_TAINT, "[{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\"}]", 0, -1},
        {UR_TAINT, "[{\"key\":\"node.kubernetes.io/unreachable\",\"effect\":\"NoSchedule\",\"operator\":\"Exists\"}]",
         -EPERM, 0},                                                                 /* another effect */
        {UR_TAINT, "[{\"key\":\"node.kubernetes.io/unreachable\",\"value\":\"x\"}]", -EPERM, 0}, /* Equal, value differs */
        {"[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoExecute\"}]", "[{\"key\":\"k\",\"value\":\"v\",\"tolerationSeconds\":7}]", 0, 7},
        /* the first toleration matching each taint counts */
        {"[{\"key\":\"a\",\"effect\":\"NoExecute\"},{\"key\":\"b\",\"effect\":\"NoExecute\"}]",
         "[{\"key\":\"a\",\"operator\":\"Exists\",\"tolerationSeconds\":60},{\"key\":\"b\",\"operator\":\"Exists\",\"tolerationSeconds\":30},"
         "{\"operator\":\"Exists\",\"tolerationSeconds\":1}]",
         0, 30},
        {"[{\"key\":\"a\",\"effect\":\"NoExecute\"},{\"key\":\"b\",\"effect\":\"NoExecute\"}]",
         "[{\"key\":\"a\",\"operator\":\"Exists\",\"tolerationSeconds\":60}]", -EPERM, 0},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        json_object *t = json_tokener_parse(cases[i].taints), *l = json_tokener_parse(cases[i].tols);
        int64_t s = 12345;
        int r = kite_tec_toleration_seconds(t, l, &s);
        cr_assert_eq(r, cases[i].r, "case %zu: %d", i, r);
        if (r == 0) cr_assert_eq(s, cases[i].s, "case %zu: %lld", i, (long long)s);
        json_object_put(t);
        json_object_put(l);
    }
}

Test(tainteviction, deleted_after_toleration_seconds_with_disruption_target) {
    struct env e;
    env_init(&e);
    set_pod(&e, TOL("300"));
    set_node(&e, "null");
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), -1);
    set_node(&e, UR_TAINT);
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), 300 * S);
    /* the taint swaps to not-ready: still counted from when the pod first became due */
    run_for(&e, 100 * S);
    set_node(&e, NR_TAINT);
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), 200 * S);
    run_for(&e, 199 * S);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 0);
    run_for(&e, 1 * S);
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", POD "/status"), 1);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 1);
    /* the condition went in first */
    size_t patch_at = 0, delete_at = 0;
    for (size_t i = 0; i < e.api.nlog; i++) {
        if (strcmp(e.api.log[i], "PATCH " POD "/status") == 0) patch_at = i + 1;
        if (strcmp(e.api.log[i], "DELETE " POD) == 0) delete_at = i + 1;
    }
    cr_assert(patch_at && delete_at && patch_at < delete_at);
    cr_assert_eq(fakeapi_events(&e.api, "TaintManagerEviction", "p"), 1);
    cr_assert_null(fakeapi_get(&e.api, POD));
    env_release(&e);
}

Test(tainteviction, condition_content) {
    struct env e;
    env_init(&e);
    /* keep the pod: the DELETE fails, the condition stays to be read */
    e.api.fail_prefix = POD;
    e.api.fail_method = "DELETE";
    e.api.fail_code = 500;
    set_pod(&e, "[]");
    set_node(&e, UR_TAINT);
    run_for(&e, 0); /* not tolerated: at once */
    json_object *p = fakeapi_get(&e.api, POD);
    cr_assert_not_null(p);
    json_object *conds = kite_obj_get(kite_obj_get(p, "status"), "conditions");
    cr_assert_eq(json_object_array_length(conds), 1);
    json_object *c = json_object_array_get_idx(conds, 0);
    cr_assert_str_eq(kite_obj_str(c, "type"), "DisruptionTarget");
    cr_assert_str_eq(kite_obj_str(c, "status"), "True");
    cr_assert_str_eq(kite_obj_str(c, "reason"), "DeletionByTaintManager");
    cr_assert_str_eq(kite_obj_str(c, "message"), "Taint manager: deleting due to NoExecute taint");
    cr_assert_str_eq(kite_obj_str(c, "lastTransitionTime"), "2030-01-02T03:04:05Z");
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 1);
    /* retried a second later, KITE_TEC_RETRIES times in all */
    run_for(&e, 30 * S);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), KITE_TEC_RETRIES);
    env_release(&e);
}

Test(tainteviction, untolerated_at_once_and_cancelled_when_the_taint_goes) {
    struct env e;
    env_init(&e);
    set_pod(&e, TOL("60"));
    set_node(&e, UR_TAINT);
    run_for(&e, 30 * S);
    set_node(&e, "[]");
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), -1, "cancelled with the taint");
    cr_assert_eq(fakeapi_events(&e.api, "TaintManagerEviction", "p"), 1, "Cancelling deletion");
    run_for(&e, 100 * S);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 0);
    /* tainted again: a new count from now */
    set_node(&e, UR_TAINT);
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), 60 * S);
    /* its tolerations change to tolerate for good: cancelled */
    set_pod(&e, "[{\"operator\":\"Exists\"}]");
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), -1);
    /* to tolerate nothing: deleted at once */
    set_pod(&e, "[]");
    run_for(&e, 0);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 1);
    env_release(&e);
}

Test(tainteviction, shorter_toleration_moves_the_deadline_and_node_deletion_cancels) {
    struct env e;
    env_init(&e);
    set_pod(&e, TOL("300"));
    set_node(&e, UR_TAINT);
    run_for(&e, 10 * S);
    set_pod(&e, TOL("100"));
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), 90 * S, "counted from the first time it was due");
    json_object *n = fakeapi_json("{\"metadata\":{\"name\":\"n1\"}}");
    kite_tec_node_delete(e.tec, n);
    json_object_put(n);
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), -1, "no node, no taints");
    /* a pod being deleted is not deleted again */
    set_node(&e, UR_TAINT);
    json_object *p = fakeapi_json("{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"u1\","
                                  "\"deletionTimestamp\":\"2030-01-02T03:04:05Z\"},\"spec\":{\"nodeName\":\"n1\"}}");
    kite_tec_pod_upsert(e.tec, p);
    json_object_put(p);
    run_for(&e, 400 * S);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 0);
    env_release(&e);
}

Test(tainteviction, failed_eviction_is_retried) {
    struct env e;
    env_init(&e);
    e.api.fail_prefix = POD "/status";
    e.api.fail_code = 500;
    set_pod(&e, "[]");
    set_node(&e, UR_TAINT);
    run_for(&e, 0);
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", POD "/status"), 1);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 0, "no delete without the condition");
    e.api.fail_prefix = NULL;
    run_for(&e, 1 * S);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 1);
    env_release(&e);
}

/* Freed while a pod's eviction is still scheduled: the timer heap is released before the
 * pods holding its timers (releasing it writes into each armed timer). */
Test(tainteviction, freed_with_an_eviction_pending) {
    struct env e;
    env_init(&e);
    set_pod(&e, TOL("300"));
    set_node(&e, UR_TAINT);
    run_for(&e, 0);
    cr_assert_eq(kite_tec_scheduled(e.tec, "default", "p"), 300 * S);
    env_release(&e);
}
