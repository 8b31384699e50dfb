/* The serviceaccount and root-ca-cert-publisher controllers' core
 * (src/controllers/serviceaccounts.c), stepped by hand against the fake API: what each
 * namespace gets, what a terminating one does not, a deleted or changed object put back, a
 * failed create retried after back-off, and each controller off on its own. */
#include <criterion/criterion.h>

#include "controllers/serviceaccounts.h"
#include "fakeapi.h"

#define CA "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
#define SA_PATH(ns) "/api/v1/namespaces/" ns "/serviceaccounts/default"
#define CM_PATH(ns) "/api/v1/namespaces/" ns "/configmaps/kube-root-ca.crt"

struct env {
    struct fakeapi api;
    struct kite_fake_clock clock;
    struct kite_sactl *c;
};

static void setup(struct env *e, bool no_sa, bool no_ca) {
    fakeapi_init(&e->api);
    kite_fake_clock_init(&e->clock, 1700000000LL * KITE_NS_PER_SEC);
    struct kite_sactl_options o = {.client = e->api.client, .clock = &e->clock.clock, .root_ca_pem = no_ca ? NULL : CA,
                                   .no_serviceaccounts = no_sa};
    e->c = kite_sactl_new(&o);
}

static void teardown(struct env *e) {
    kite_sactl_free(e->c);
    fakeapi_release(&e->api);
}

static json_object *ns_obj(const char *name, bool terminating) {
    return fakeapi_json("{\"metadata\":{\"name\":\"%s\"%s},\"status\":{\"phase\":\"%s\"}}", name,
                        terminating ? ",\"deletionTimestamp\":\"2023-11-14T22:13:20Z\"" : "",
                        terminating ? "Terminating" : "Active");
}

/* Feeds the controller what the fake API holds now (as its informers would). */
static void feed(struct env *e, const char *ns) {
    _cleanup_free_ char *sa = kite_asprintf("/api/v1/namespaces/%s/serviceaccounts/default", ns);
    _cleanup_free_ char *cm = kite_asprintf("/api/v1/namespaces/%s/configmaps/kube-root-ca.crt", ns);
    json_object *o = fakeapi_get(&e->api, sa);
    if (o) kite_sactl_sa_upsert(e->c, o);
    if ((o = fakeapi_get(&e->api, cm))) kite_sactl_cm_upsert(e->c, o);
}

Test(serviceaccounts, every_active_namespace_gets_both) {
    struct env e;
    setup(&e, false, false);
    json_object *a = ns_obj("a", false), *t = ns_obj("t", true);
    kite_sactl_ns_upsert(e.c, a);
    kite_sactl_ns_upsert(e.c, t);
    cr_assert(kite_sactl_pending(e.c));
    kite_sactl_step(e.c);
    json_object *sa = fakeapi_get(&e.api, SA_PATH("a")), *cm = fakeapi_get(&e.api, CM_PATH("a"));
    cr_assert_not_null(sa);
    cr_assert_str_eq(kite_obj_str(sa, "kind"), "ServiceAccount");
    cr_assert_not_null(cm);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(cm, "data"), "ca.crt"), CA);
    cr_assert_str_eq(kite_obj_str(kite_obj_get(kite_obj_meta(cm), "annotations"), "kubernetes.io/description"),
                     KITE_SACTL_CM_DESCRIPTION);
    cr_assert_null(fakeapi_get(&e.api, SA_PATH("t")), "a terminating namespace gets nothing");
    cr_assert_null(fakeapi_get(&e.api, CM_PATH("t")));
    /* seen: nothing more to do, even on a namespace update */
    feed(&e, "a");
    kite_sactl_ns_upsert(e.c, a);
    kite_sactl_step(e.c);
    cr_assert_eq(fakeapi_count(&e.api, "POST", "/serviceaccounts"), 1);
    cr_assert_eq(fakeapi_count(&e.api, "PUT", "/configmaps"), 0);
    /* deleted: made again */
    json_object *old = json_object_get(fakeapi_get(&e.api, SA_PATH("a")));
    json_object_put(kite_map_del(&e.api.objs, SA_PATH("a")));
    kite_sactl_sa_delete(e.c, old);
    json_object_put(old);
    kite_sactl_step(e.c);
    cr_assert_not_null(fakeapi_get(&e.api, SA_PATH("a")));
    /* a changed bundle (or another key) is put back, with the resourceVersion seen */
    json_object *changed = fakeapi_json("{\"metadata\":{\"name\":\"kube-root-ca.crt\",\"namespace\":\"a\","
                                        "\"resourceVersion\":\"%s\"},\"data\":{\"ca.crt\":\"junk\",\"x\":\"y\"}}",
                                        kite_meta_str(fakeapi_get(&e.api, CM_PATH("a")), "resourceVersion"));
    json_object_put(kite_map_put(&e.api.objs, CM_PATH("a"), json_object_get(changed)));
    kite_sactl_cm_upsert(e.c, changed);
    json_object_put(changed);
    kite_sactl_step(e.c);
    cr_assert_eq(fakeapi_count(&e.api, "PUT", CM_PATH("a")), 1);
    cm = fakeapi_get(&e.api, CM_PATH("a"));
    json_object *data = kite_obj_get(cm, "data");
    cr_assert_eq(json_object_object_length(data), 1);
    cr_assert_str_eq(kite_obj_str(data, "ca.crt"), CA);
    json_object_put(a);
    json_object_put(t);
    teardown(&e);
}

Test(serviceaccounts, failed_create_is_retried_after_backoff) {
    struct env e;
    setup(&e, false, true);
    e.api.fail_prefix = "/api/v1/namespaces/a/serviceaccounts";
    e.api.fail_code = 500;
    json_object *a = ns_obj("a", false);
    kite_sactl_ns_upsert(e.c, a);
    int64_t next = kite_sactl_step(e.c);
    cr_assert_eq(fakeapi_count(&e.api, "POST", "/serviceaccounts"), 1);
    cr_assert_gt(next, 0, "retried later, not in a loop");
    cr_assert(!kite_sactl_pending(e.c));
    e.api.fail_prefix = NULL;
    kite_fake_clock_advance(&e.clock, next);
    cr_assert(kite_sactl_pending(e.c));
    kite_sactl_step(e.c);
    cr_assert_not_null(fakeapi_get(&e.api, SA_PATH("a")));
    cr_assert_null(fakeapi_get(&e.api, CM_PATH("a")), "the publisher is off without a CA");
    json_object_put(a);
    teardown(&e);
}

Test(serviceaccounts, serviceaccount_controller_off) {
    struct env e;
    setup(&e, true, false);
    json_object *a = ns_obj("a", false);
    kite_sactl_ns_upsert(e.c, a);
    kite_sactl_step(e.c);
    cr_assert_null(fakeapi_get(&e.api, SA_PATH("a")));
    cr_assert_not_null(fakeapi_get(&e.api, CM_PATH("a")));
    /* a deleted namespace is forgotten */
    kite_sactl_ns_delete(e.c, a);
    cr_assert(!kite_sactl_pending(e.c));
    json_object_put(a);
    teardown(&e);
}
