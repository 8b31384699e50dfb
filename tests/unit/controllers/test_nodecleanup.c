/* Stale Node cleanup on a fake clock: a node Unknown for --node-cleanup-after is deleted with
 * its uid as a precondition, one Ready or Unknown for less is kept. */
#include "controllers/node/nodecleanup.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>

#define S KITE_NS_PER_SEC
#define T0 INT64_C(1893553445) /* 2030-01-02T03:04:05Z */

static json_object *node(struct fakeapi *f, const char *name, const char *ready, const char *since) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s", name);
    return fakeapi_put(f, path, fakeapi_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"uid\":\"u-%s\"},"
                                             "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\","
                                             "\"lastTransitionTime\":\"%s\"}]}}",
                                             name, name, ready, since));
}

Test(nodecleanup, deletes_only_nodes_unknown_long_enough) {
    kite_log_set_level(KITE_LOG_ERROR);
    struct kite_fake_clock clock;
    kite_fake_clock_init(&clock, T0 * S);
    struct fakeapi f;
    fakeapi_init(&f);
    struct kite_ncc_options o = {.client = f.client, .clock = &clock.clock, .after_ns = 60 * S};
    struct kite_ncc *c = kite_ncc_new(&o);
    kite_ncc_node_upsert(c, node(&f, "old", "Unknown", "2030-01-02T03:03:00Z"));   /* 65 s ago */
    kite_ncc_node_upsert(c, node(&f, "young", "Unknown", "2030-01-02T03:04:00Z")); /* 5 s ago */
    kite_ncc_node_upsert(c, node(&f, "fine", "True", "2030-01-02T03:00:00Z"));
    cr_assert(kite_ncc_pending(c));
    int64_t next = kite_ncc_step(c);
    cr_assert_eq(fakeapi_count(&f, "DELETE", "/api/v1/nodes/"), 1);
    cr_assert_null(fakeapi_get(&f, "/api/v1/nodes/old"));
    cr_assert_eq(fakeapi_events(&f, "DeletingNode", "old"), 1);
    cr_assert_eq(next, KITE_NCC_RETRY_NS, "next %lld", (long long)next); /* until the informer sees it gone */
    json_object *gone = fakeapi_json("{\"metadata\":{\"name\":\"old\"}}");
    kite_ncc_node_delete(c, gone);
    json_object_put(gone);
    next = kite_ncc_step(c);
    cr_assert_eq(next, 55 * S, "next %lld", (long long)next);
    cr_assert_not(kite_ncc_pending(c));
    kite_fake_clock_advance(&clock, 55 * S);
    cr_assert(kite_ncc_pending(c));
    kite_ncc_step(c);
    cr_assert_null(fakeapi_get(&f, "/api/v1/nodes/young"));
    cr_assert_not_null(fakeapi_get(&f, "/api/v1/nodes/fine"));
    kite_ncc_free(c);
    fakeapi_release(&f);
}
