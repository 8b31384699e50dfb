/* The token bucket, the unique name queue and the timer heap of the controllers. */
#include "framework/ratelimit.h"
#include "framework/timers.h"
#include "base/clock.h"

#include <criterion/criterion.h>
#include <stdio.h>

#define S KITE_NS_PER_SEC

Test(ratelimit, bucket) {
    struct kite_bucket b;
    kite_bucket_init(&b, 0.1, 1, 0);
    cr_assert(kite_bucket_try(&b, 0), "starts full");
    cr_assert(!kite_bucket_try(&b, 0));
    cr_assert_eq(kite_bucket_wait(&b, 0) / KITE_NS_PER_MS, 10000);
    cr_assert(!kite_bucket_try(&b, 9 * S));
    cr_assert(kite_bucket_try(&b, 10 * S + 1));
    /* burst 1: a long idle time gives one token, not many */
    cr_assert(kite_bucket_try(&b, 1000 * S));
    cr_assert(!kite_bucket_try(&b, 1000 * S));
    /* a new rate: drained when the old bucket had no token */
    kite_bucket_set_rate(&b, 0.01, 1000 * S);
    cr_assert(!kite_bucket_try(&b, 1000 * S));
    cr_assert(!kite_bucket_try(&b, 1099 * S));
    cr_assert(kite_bucket_try(&b, 1100 * S + 1));
    /* a new rate with a token in hand: a full new bucket */
    kite_bucket_set_rate(&b, 0.1, 2000 * S);
    cr_assert(kite_bucket_try(&b, 2000 * S));
    /* rate 0: never */
    kite_bucket_set_rate(&b, 0, 3000 * S);
    cr_assert(!kite_bucket_try(&b, 1000000 * S));
    cr_assert_eq(kite_bucket_wait(&b, 0), INT64_MAX);
}

Test(ratelimit, name_queue) {
    struct kite_name_queue q = {0};
    cr_assert(kite_name_queue_add(&q, "a"));
    cr_assert(kite_name_queue_add(&q, "b"));
    cr_assert(!kite_name_queue_add(&q, "a"), "unique");
    cr_assert(kite_name_queue_add(&q, "c"));
    kite_name_queue_remove(&q, "a");
    cr_assert_eq(kite_name_queue_len(&q), 2);
    cr_assert_str_eq(kite_name_queue_peek(&q), "b");
    cr_assert(kite_name_queue_add(&q, "a"), "added again after its removal: at the end");
    kite_name_queue_pop(&q);
    cr_assert_str_eq(kite_name_queue_peek(&q), "c");
    kite_name_queue_pop(&q);
    cr_assert_str_eq(kite_name_queue_peek(&q), "a");
    kite_name_queue_pop(&q);
    cr_assert_null(kite_name_queue_peek(&q));
    /* a flapping name does not grow the ring without bound */
    for (int i = 0; i < 100000; i++) {
        kite_name_queue_add(&q, "flap");
        kite_name_queue_remove(&q, "flap");
        kite_name_queue_add(&q, "stay");
    }
    cr_assert_leq(q.cap, 64, "cap %zu", q.cap);
    cr_assert_str_eq(kite_name_queue_peek(&q), "stay");
    kite_name_queue_release(&q);
}

struct item {
    struct kite_timer t;
    int id;
};

Test(ratelimit, timers_against_a_sorted_scan) {
    enum { N = 2000 };
    static struct item items[N];
    struct kite_timers h = {0};
    uint64_t rng = 42;
    for (int i = 0; i < N; i++) {
        kite_timer_init(&items[i].t);
        items[i].id = i;
    }
    for (int round = 0; round < 20000; round++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        struct item *it = &items[rng % N];
        if ((rng >> 20) % 4 == 0) kite_timers_cancel(&h, &it->t);
        else kite_timers_set(&h, &it->t, (int64_t)((rng >> 24) % 100000));
    }
    /* pops come out in deadline order and match the armed set exactly */
    size_t armed = 0;
    for (int i = 0; i < N; i++) armed += kite_timer_armed(&items[i].t);
    int64_t last = -1;
    size_t popped = 0;
    struct kite_timer *t;
    while ((t = kite_timers_pop_due(&h, INT64_MAX))) {
        cr_assert_geq(t->at, last);
        cr_assert(!kite_timer_armed(t));
        last = t->at;
        popped++;
    }
    cr_assert_eq(popped, armed);
    cr_assert_null(kite_timers_pop_due(&h, INT64_MAX));
    kite_timers_set(&h, &items[0].t, 50);
    cr_assert_null(kite_timers_pop_due(&h, 49), "not due yet");
    cr_assert_eq(kite_timers_pop_due(&h, 50), &items[0].t);
    kite_timers_release(&h);
}
