/* The garbage collector's core on the fake API: a dependent whose owner is gone is deleted
 * (after a GET says so), one whose owner exists is left alone, an orphaning owner's dependents
 * lose their reference before its finalizer goes, a foreground owner's dependents are deleted
 * and its finalizer goes once the blocking ones are gone. */
#include "controllers/gc.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>

#define RS "/apis/apps/v1/namespaces/default/replicasets/web"
#define POD "/api/v1/namespaces/default/pods/p"

enum { K_DEPLOY, K_RS, K_POD };

struct env {
    struct fakeapi api;
    struct kite_gc *gc;
};

static void env_init(struct env *e) {
    kite_log_set_level(KITE_LOG_ERROR);
    fakeapi_init(&e->api);
    struct kite_gc_options o = {.client = e->api.client};
    e->gc = kite_gc_new(&o);
}

static void env_release(struct env *e) {
    kite_gc_free(e->gc);
    fakeapi_release(&e->api);
}

static size_t kind_row(const char *kind) {
    for (size_t i = 0; i < KITE_GC_N_KINDS; i++)
        if (kite_streq(KITE_GC_KINDS[i].kind, kind)) return i;
    cr_assert_fail("no row for %s", kind);
    return 0;
}

static void add_pod(struct env *e) {
    json_object *p = fakeapi_json("{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"pod-uid\","
                                  "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web\","
                                  "\"uid\":\"rs-uid\",\"controller\":true,\"blockOwnerDeletion\":true}]}}");
    fakeapi_put(&e->api, POD, json_object_get(p));
    kite_gc_upsert(e->gc, kind_row("Pod"), p);
    json_object_put(p);
}

static json_object *rs(const char *extra) {
    return fakeapi_json("{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\",\"uid\":\"rs-uid\"%s}}", extra);
}

Test(gc, table_names_the_owner_kinds) {
    kind_row("Deployment"), kind_row("ReplicaSet"), kind_row("Pod");
}

Test(gc, deletes_a_dependent_whose_owner_is_gone) {
    struct env e;
    env_init(&e);
    add_pod(&e);
    kite_gc_step(e.gc);
    cr_assert_eq(fakeapi_count(&e.api, "GET", RS), 1, "the owner is looked up before anything is deleted");
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 1);
    cr_assert_null(fakeapi_get(&e.api, POD));
    env_release(&e);
}

Test(gc, leaves_a_dependent_whose_owner_exists) {
    struct env e;
    env_init(&e);
    json_object *o = rs("");
    fakeapi_put(&e.api, RS, json_object_get(o));
    add_pod(&e); /* the owner not yet seen by the collector: a GET finds it */
    kite_gc_step(e.gc);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 0);
    kite_gc_upsert(e.gc, kind_row("ReplicaSet"), o);
    add_pod(&e);
    kite_gc_step(e.gc);
    cr_assert_eq(fakeapi_count(&e.api, "GET", RS), 1, "an owner in the graph needs no GET");
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 0);
    /* the owner goes: the dependent is collected */
    json_object_put(kite_map_del(&e.api.objs, RS));
    kite_gc_delete(e.gc, kind_row("ReplicaSet"), o);
    kite_gc_step(e.gc);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 1);
    json_object_put(o);
    env_release(&e);
}

Test(gc, orphan_takes_references_off_then_the_finalizer) {
    struct env e;
    env_init(&e);
    json_object *o = rs(",\"deletionTimestamp\":\"2030-01-01T00:00:00Z\",\"finalizers\":[\"orphan\"]");
    fakeapi_put(&e.api, RS, json_object_get(o));
    kite_gc_upsert(e.gc, kind_row("ReplicaSet"), o);
    add_pod(&e);
    kite_gc_step(e.gc);
    json_object *refs = kite_obj_get(kite_obj_meta(fakeapi_get(&e.api, POD)), "ownerReferences");
    cr_assert(!refs || json_object_array_length(refs) == 0, "%s", json_object_to_json_string(refs));
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", RS), 0, "the finalizer stays until the dependent is seen changed");
    kite_gc_upsert(e.gc, kind_row("Pod"), fakeapi_get(&e.api, POD));
    kite_gc_step(e.gc);
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", RS), 1);
    json_object *fins = kite_obj_get(kite_obj_meta(fakeapi_get(&e.api, RS)), "finalizers");
    cr_assert_eq(json_object_array_length(fins), 0);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 0);
    json_object_put(o);
    env_release(&e);
}

Test(gc, foreground_deletes_dependents_then_the_finalizer) {
    struct env e;
    env_init(&e);
    json_object *o = rs(",\"deletionTimestamp\":\"2030-01-01T00:00:00Z\",\"finalizers\":[\"foregroundDeletion\"]");
    fakeapi_put(&e.api, RS, json_object_get(o));
    kite_gc_upsert(e.gc, kind_row("ReplicaSet"), o);
    add_pod(&e);
    kite_gc_step(e.gc);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", POD), 1);
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", RS), 0, "the blocking dependent is not gone yet");
    json_object *p = fakeapi_json("{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"pod-uid\"}}");
    kite_gc_delete(e.gc, kind_row("Pod"), p);
    kite_gc_step(e.gc);
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", RS), 1);
    json_object_put(p);
    json_object_put(o);
    env_release(&e);
}
