/* The keyed work queue: one entry per key at its earliest time, keys out in time order, and a
 * release with keys still queued (ASan: the heap must not touch freed items). */
#include "controllers/workqueue.h"

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
