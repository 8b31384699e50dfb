/* The framework's reconciler against the fake client transport: a key whose sync fails is
 * tried again after its own exponential back-off while the others are done once; the sync gets
 * a copy of the cached object; nothing runs before the shared informer has synced, and nothing
 * after the group is freed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "api/registry.h"
#include "base/clock.h"
#include "framework/framework.h"

#define BASE_NS (20 * KITE_NS_PER_MS)

struct rec {
    pthread_mutex_t mu;
    int64_t a_at[8];
    int a_calls, b_calls, other;
    char b_rv[16];
};

static int list_h(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                  struct kite_response *ret) {
    ret->status = 200;
    ret->body = kite_strdup("{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":["
                            "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"1\"}},"
                            "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\",\"resourceVersion\":\"2\"}}]}");
    return 0;
}

static int watch_h(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    kite_cancel_wait(cancel, 30 * KITE_NS_PER_SEC);
    return -ECANCELED;
}

static int64_t sync_fn(void *ud, const char *key, json_object *obj) {
    struct rec *r = ud;
    int64_t ret = 0;
    pthread_mutex_lock(&r->mu);
    if (kite_streq(key, "ns/a")) {
        if (r->a_calls < 8) r->a_at[r->a_calls] = kite_now_mono(kite_clock_real());
        ret = r->a_calls++ < 2 ? -EIO : 0;
    } else if (kite_streq(key, "ns/b")) {
        r->b_calls++;
        snprintf(r->b_rv, sizeof r->b_rv, "%s", kite_meta_str(obj, "resourceVersion"));
        kite_obj_set(kite_obj_meta(obj), "resourceVersion", json_object_new_string("changed")); /* a copy */
    } else {
        r->other++;
    }
    pthread_mutex_unlock(&r->mu);
    json_object_put(obj);
    return ret;
}

static int calls(struct rec *r, int *which) {
    pthread_mutex_lock(&r->mu);
    int n = *which;
    pthread_mutex_unlock(&r->mu);
    return n;
}

Test(framework, a_failing_key_backs_off_alone_and_the_others_run_once) {
    struct rec r = {0};
    pthread_mutex_init(&r.mu, NULL);
    struct kite_client *c = kite_client_fake_new(list_h, watch_h, NULL);
    struct kite_ctl_group *g = kite_ctl_group_new(c, NULL);
    struct kite_ctl_reconciler rc = {.name = "test-rec", .path = "/api/v1/pods", .sync = sync_fn, .ud = &r,
                                     .backoff_base_ns = BASE_NS, .backoff_max_ns = 10 * BASE_NS};
    cr_assert_eq(kite_ctl_reconcile(g, &rc), 0);
    cr_assert_eq(kite_ctl_group_count(g), 1);
    usleep(50 * 1000);
    cr_assert_eq(calls(&r, &r.a_calls), 0, "nothing runs before the informers start and sync");
    cr_assert_eq(kite_ctl_group_start(g), 0);
    int64_t deadline = kite_now_mono(kite_clock_real()) + 5 * KITE_NS_PER_SEC;
    while (calls(&r, &r.a_calls) < 3 && kite_now_mono(kite_clock_real()) < deadline) usleep(5 * 1000);
    usleep(200 * 1000); /* long enough for a wrong fourth try (the back-off is forgotten after a success) */
    kite_ctl_group_free(g);
    cr_assert_eq(r.a_calls, 3, "two failures, then done");
    cr_assert_geq(r.a_at[1] - r.a_at[0], BASE_NS, "first back-off");
    cr_assert_geq(r.a_at[2] - r.a_at[1], 2 * BASE_NS, "doubled");
    cr_assert_eq(r.b_calls, 1, "a key that succeeded is not queued again");
    cr_assert_str_eq(r.b_rv, "2", "the sync gets the cached object (a copy)");
    cr_assert_eq(r.other, 0);
    kite_client_free(c);
    pthread_mutex_destroy(&r.mu);
}

Test(framework, enqueue_runs_a_key_again) {
    struct rec r = {0};
    pthread_mutex_init(&r.mu, NULL);
    struct kite_client *c = kite_client_fake_new(list_h, watch_h, NULL);
    struct kite_ctl_group *g = kite_ctl_group_new(c, NULL);
    struct kite_ctl_reconciler rc = {.name = "test-rec", .path = "/api/v1/pods", .sync = sync_fn, .ud = &r};
    cr_assert_eq(kite_ctl_reconcile(g, &rc), 0);
    cr_assert_eq(kite_ctl_group_start(g), 0);
    int64_t deadline = kite_now_mono(kite_clock_real()) + 5 * KITE_NS_PER_SEC;
    while (calls(&r, &r.b_calls) < 1 && kite_now_mono(kite_clock_real()) < deadline) usleep(5 * 1000);
    cr_assert_eq(calls(&r, &r.b_calls), 1);
    kite_ctl_group_free(g);
    kite_client_free(c);
    pthread_mutex_destroy(&r.mu);
}
