/* The keyed work queue: one entry per key at its earliest time, keys out in time order, and a
 * release with keys still queued (ASan: the heap must not touch freed items). */
#include "framework/workqueue.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(workqueue, dedupes_keys_at_their_earliest_time) {
    struct kite_wq q = {0};
    kite_wq_add(&q, "a", 30);
    kite_wq_add(&q, "b", 10);
    kite_wq_add(&q, "a", 5);  /* earlier: moves */
    kite_wq_add(&q, "b", 50); /* later: stays at 10 */
    cr_assert_eq(kite_wq_next(&q, 0), 5);
    cr_assert_null(kite_wq_pop_due(&q, 4));
    char *k = kite_wq_pop_due(&q, 20);
    cr_assert_str_eq(k, "a");
    free(k);
    k = kite_wq_pop_due(&q, 20);
    cr_assert_str_eq(k, "b");
    free(k);
    cr_assert_null(kite_wq_pop_due(&q, 100));
    cr_assert_eq(kite_wq_next(&q, 0), -1);
    kite_wq_release(&q);
}

Test(workqueue, release_with_keys_queued) {
    struct kite_wq q = {0};
    char key[16];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "k%d", i);
        kite_wq_add(&q, key, i);
    }
    kite_wq_release(&q);
}

#define MS KITE_NS_PER_MS

Test(workqueue, failures_back_off_per_key_until_forgotten) {
    struct kite_wq q = {0};
    int64_t now = 1000 * MS;
    /* client-go's ItemExponentialFailureRateLimiter: 5 ms, 10 ms, 20 ms ... per key */
    for (unsigned i = 0; i < 4; i++) {
        kite_wq_add_backoff(&q, "a", now);
        cr_assert_eq(kite_wq_failures(&q, "a"), i + 1);
        cr_assert_eq(kite_wq_next(&q, now), (5 * MS) << i, "failure %u", i + 1);
        free(kite_wq_pop_due(&q, now + ((5 * MS) << i)));
    }
    kite_wq_add_backoff(&q, "b", now);
    cr_assert_eq(kite_wq_next(&q, now), 5 * MS, "b has its own count");
    free(kite_wq_pop_due(&q, now + 5 * MS));
    kite_wq_forget(&q, "a");
    cr_assert_eq(kite_wq_failures(&q, "a"), 0);
    kite_wq_add_backoff(&q, "a", now);
    cr_assert_eq(kite_wq_next(&q, now), 5 * MS, "forgotten: the base again");
    free(kite_wq_pop_due(&q, now + 5 * MS));
    /* capped at 1000 s */
    for (unsigned i = 0; i < 40; i++) {
        kite_wq_add_backoff(&q, "c", now);
        free(kite_wq_pop_due(&q, now + KITE_WQ_BACKOFF_MAX_NS));
    }
    kite_wq_add_backoff(&q, "c", now);
    cr_assert_eq(kite_wq_next(&q, now), KITE_WQ_BACKOFF_MAX_NS);
    /* a failure while already queued earlier keeps the earlier time (dedup) */
    kite_wq_add(&q, "d", now + 1);
    kite_wq_add_backoff(&q, "d", now);
    char *k = kite_wq_pop_due(&q, now + 1);
    cr_assert_str_eq(k, "d");
    free(k);
    cr_assert_null(kite_wq_pop_due(&q, now + 5 * MS), "queued once");
    kite_wq_release(&q);
}

Test(workqueue, the_owner_caps_the_back_off) {
    struct kite_wq q = {.backoff_max_ns = 1000 * MS};
    for (unsigned i = 0; i < 12; i++) {
        kite_wq_add_backoff(&q, "a", 0);
        free(kite_wq_pop_due(&q, 1000 * MS));
    }
    kite_wq_add_backoff(&q, "a", 0);
    cr_assert_eq(kite_wq_next(&q, 0), 1000 * MS);
    kite_wq_release(&q);
}
