/* The disruption controller's core on a fake clock: the status it writes for a budget, no
 * write when nothing changed, recomputation on pod changes, and disruptedPods entries kept
 * while their eviction is recent and dropped after the deletion timeout. */
#include "controllers/workloads/disruption.h"
#include "api/disruption.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>

#define S KITE_NS_PER_SEC
#define PDB_PATH "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web"
#define T0 INT64_C(1893553445)

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_dc *dc;
};

static void env_init(struct env *e) {
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&e->clock, T0 * S);
    fakeapi_init(&e->api);
    struct kite_dc_options o = {.client = e->api.client, .clock = &e->clock.clock};
    e->dc = kite_dc_new(&o);
}

static void env_release(struct env *e) {
    kite_dc_free(e->dc);
    fakeapi_release(&e->api);
}

static json_object *pod(const char *name, bool ready, bool deleting) {
    return fakeapi_json("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"labels\":{\"app\":\"web\"}%s},"
                        "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                        name, deleting ? ",\"deletionTimestamp\":\"2030-01-02T03:04:05Z\"" : "", ready ? "True" : "False");
}

static void add_pod(struct env *e, json_object *p) {
    kite_dc_pod_upsert(e->dc, p);
    json_object_put(p);
}

static json_object *add_pdb(struct env *e, const char *spec, const char *status) {
    json_object *pdb = fakeapi_put(&e->api, PDB_PATH,
                                   fakeapi_json("{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\","
                                                "\"metadata\":{\"name\":\"web\",\"namespace\":\"default\",\"generation\":2},"
                                                "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},%s},\"status\":%s}",
                                                spec, status));
    kite_dc_pdb_upsert(e->dc, pdb);
    return pdb;
}

static int64_t st_int(struct env *e, const char *field) {
    json_object *st = kite_obj_get(fakeapi_get(&e->api, PDB_PATH), "status");
    return json_object_get_int64(kite_obj_get(st, field));
}

Test(disruption, status_written_then_unchanged) {
    struct env e;
    env_init(&e);
    add_pod(&e, pod("a", true, false));
    add_pod(&e, pod("b", true, false));
    add_pod(&e, pod("c", false, false));
    add_pod(&e, pod("d", true, true)); /* being deleted: expected but not healthy */
    add_pdb(&e, "\"minAvailable\":\"50%\"", "{}");
    cr_assert(kite_dc_pending(e.dc));
    kite_dc_step(e.dc);
    cr_assert_eq(fakeapi_count(&e.api, "PUT", "/poddisruptionbudgets/web/status"), 1);
    cr_assert_eq(st_int(&e, "expectedPods"), 4);
    cr_assert_eq(st_int(&e, "desiredHealthy"), 2);
    cr_assert_eq(st_int(&e, "currentHealthy"), 2);
    cr_assert_eq(st_int(&e, "disruptionsAllowed"), 0);
    cr_assert_eq(st_int(&e, "observedGeneration"), 2);
    json_object *c = kite_obj_get(kite_obj_get(fakeapi_get(&e.api, PDB_PATH), "status"), "conditions");
    c = json_object_array_get_idx(c, 0);
    cr_assert_str_eq(kite_obj_str(c, "type"), "DisruptionAllowed");
    cr_assert_str_eq(kite_obj_str(c, "status"), "False");
    cr_assert_str_eq(kite_obj_str(c, "reason"), "InsufficientPods");
    /* the written budget comes back: nothing more to write */
    kite_dc_pdb_upsert(e.dc, fakeapi_get(&e.api, PDB_PATH));
    kite_dc_step(e.dc);
    cr_assert_eq(fakeapi_count(&e.api, "PUT", "/poddisruptionbudgets/web/status"), 1);
    /* c becomes ready: one disruption allowed, the condition turns True */
    add_pod(&e, pod("c", true, false));
    kite_dc_step(e.dc);
    cr_assert_eq(fakeapi_count(&e.api, "PUT", "/poddisruptionbudgets/web/status"), 2);
    cr_assert_eq(st_int(&e, "currentHealthy"), 3);
    cr_assert_eq(st_int(&e, "disruptionsAllowed"), 1);
    env_release(&e);
}

Test(disruption, disrupted_pods_time_out) {
    struct env e;
    env_init(&e);
    add_pod(&e, pod("a", true, false));
    add_pod(&e, pod("b", true, false));
    /* a was evicted just now: it counts as gone until the deletion timeout */
    add_pdb(&e, "\"maxUnavailable\":1", "{\"disruptedPods\":{\"a\":\"2030-01-02T03:04:05Z\"}}");
    int64_t next = kite_dc_step(e.dc);
    cr_assert_eq(st_int(&e, "currentHealthy"), 1);
    cr_assert_eq(st_int(&e, "disruptionsAllowed"), 0);
    cr_assert_eq(next, KITE_MIN(KITE_PDB_DELETION_TIMEOUT_NS, KITE_DC_IDLE_NS), "next %lld", (long long)next);
    kite_dc_pdb_upsert(e.dc, fakeapi_get(&e.api, PDB_PATH));
    kite_fake_clock_advance(&e.clock, KITE_PDB_DELETION_TIMEOUT_NS + S);
    kite_dc_step(e.dc);
    /* never deleted: dropped from the map, healthy again, and a NotDeleted warning */
    cr_assert_eq(st_int(&e, "currentHealthy"), 2);
    cr_assert_eq(st_int(&e, "disruptionsAllowed"), 1);
    cr_assert_null(kite_obj_get(kite_obj_get(fakeapi_get(&e.api, PDB_PATH), "status"), "disruptedPods"));
    cr_assert_eq(fakeapi_events(&e.api, "NotDeleted", "a"), 1);
    env_release(&e);
}

Test(disruption, deleted_pod_leaves_the_map) {
    struct env e;
    env_init(&e);
    add_pod(&e, pod("a", true, true));
    add_pod(&e, pod("b", true, false));
    add_pdb(&e, "\"minAvailable\":1", "{\"disruptedPods\":{\"a\":\"2030-01-02T03:04:05Z\"}}");
    kite_dc_step(e.dc);
    cr_assert_null(kite_obj_get(kite_obj_get(fakeapi_get(&e.api, PDB_PATH), "status"), "disruptedPods"));
    cr_assert_eq(st_int(&e, "currentHealthy"), 1);
    cr_assert_eq(st_int(&e, "disruptionsAllowed"), 0);
    env_release(&e);
}
