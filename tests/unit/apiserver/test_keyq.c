/* Per-key write queues (src/apiserver/keyq.c): one holder per key, waiters handed the key in
 * arrival order, a bound on waiters, and many threads handing keys to each other. */
#include "apiserver/keyq.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

Test(keyq, free_key_is_held_at_once_and_freed_by_release) {
    struct keyq *q = kite_apiserver_keyq_new(8);
    struct keyq_link a;
    cr_assert_eq(kite_apiserver_keyq_held(q), 0);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "/registry/leases/default/a", &a), KEYQ_HELD);
    cr_assert_eq(kite_apiserver_keyq_held(q), 1);
    cr_assert_null(kite_apiserver_keyq_release(q, "/registry/leases/default/a"));
    cr_assert_eq(kite_apiserver_keyq_held(q), 0);
    /* free again: held again at once */
    cr_assert_eq(kite_apiserver_keyq_hold(q, "/registry/leases/default/a", &a), KEYQ_HELD);
    cr_assert_null(kite_apiserver_keyq_release(q, "/registry/leases/default/a"));
    cr_assert_null(kite_apiserver_keyq_release(q, "/registry/leases/default/a")); /* not held: nothing to hand on */
    kite_apiserver_keyq_free(q);
}

Test(keyq, waiters_get_the_key_in_arrival_order) {
    struct keyq *q = kite_apiserver_keyq_new(8);
    struct keyq_link w[4];
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[0]), KEYQ_HELD);
    for (int i = 1; i < 4; i++) cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[i]), KEYQ_QUEUED);
    cr_assert_eq(kite_apiserver_keyq_held(q), 1);
    cr_assert_eq(kite_apiserver_keyq_release(q, "k"), &w[1]);
    struct keyq_link late;
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &late), KEYQ_QUEUED); /* still held (by w[1]): behind w[3] */
    cr_assert_eq(kite_apiserver_keyq_release(q, "k"), &w[2]);
    cr_assert_eq(kite_apiserver_keyq_release(q, "k"), &w[3]);
    cr_assert_eq(kite_apiserver_keyq_release(q, "k"), &late);
    cr_assert_eq(kite_apiserver_keyq_held(q), 1);
    cr_assert_null(kite_apiserver_keyq_release(q, "k"));
    cr_assert_eq(kite_apiserver_keyq_held(q), 0);
    kite_apiserver_keyq_free(q);
}

Test(keyq, keys_are_independent) {
    struct keyq *q = kite_apiserver_keyq_new(8);
    struct keyq_link a, b, c;
    cr_assert_eq(kite_apiserver_keyq_hold(q, "/registry/leases/ns/a", &a), KEYQ_HELD);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "/registry/leases/ns/b", &b), KEYQ_HELD);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "/registry/leases/ns/a", &c), KEYQ_QUEUED);
    cr_assert_eq(kite_apiserver_keyq_held(q), 2);
    cr_assert_null(kite_apiserver_keyq_release(q, "/registry/leases/ns/b"));
    cr_assert_eq(kite_apiserver_keyq_release(q, "/registry/leases/ns/a"), &c);
    cr_assert_null(kite_apiserver_keyq_release(q, "/registry/leases/ns/a"));
    cr_assert_eq(kite_apiserver_keyq_held(q), 0);
    kite_apiserver_keyq_free(q);
}

Test(keyq, waiters_past_the_limit_are_refused) {
    struct keyq *q = kite_apiserver_keyq_new(2);
    struct keyq_link w[5];
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[0]), KEYQ_HELD);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[1]), KEYQ_QUEUED);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[2]), KEYQ_QUEUED);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[3]), -EAGAIN);
    struct keyq_link other;
    cr_assert_eq(kite_apiserver_keyq_hold(q, "other", &other), KEYQ_HELD); /* the limit is per key */
    cr_assert_eq(kite_apiserver_keyq_release(q, "k"), &w[1]);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[4]), KEYQ_QUEUED); /* room again */
    cr_assert_eq(kite_apiserver_keyq_release(q, "k"), &w[2]);
    cr_assert_eq(kite_apiserver_keyq_release(q, "k"), &w[4]);
    cr_assert_null(kite_apiserver_keyq_release(q, "k"));
    cr_assert_null(kite_apiserver_keyq_release(q, "other"));
    kite_apiserver_keyq_free(q);

    q = kite_apiserver_keyq_new(0); /* no waiting at all */
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[0]), KEYQ_HELD);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[1]), -EAGAIN);
    cr_assert_null(kite_apiserver_keyq_release(q, "k"));
    cr_assert_eq(kite_apiserver_keyq_hold(q, "k", &w[1]), KEYQ_HELD);
    cr_assert_null(kite_apiserver_keyq_release(q, "k"));
    kite_apiserver_keyq_free(q);
}

Test(keyq, free_with_keys_held_and_waiters_queued) {
    struct keyq *q = kite_apiserver_keyq_new(8);
    struct keyq_link w[3];
    cr_assert_eq(kite_apiserver_keyq_hold(q, "a", &w[0]), KEYQ_HELD);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "a", &w[1]), KEYQ_QUEUED);
    cr_assert_eq(kite_apiserver_keyq_hold(q, "b", &w[2]), KEYQ_HELD);
    kite_apiserver_keyq_free(q); /* frees its own memory (the sanitizer build checks for leaks) */
    kite_apiserver_keyq_free(NULL);
}

/* Many threads writing a few keys as write.c does: whoever releases a key runs the waiter it
 * gets. Each write checks that it is alone on its key and counts itself; every write must run
 * exactly once, and each key's writes in the order each thread queued them. */
#define STRESS_THREADS 8
#define STRESS_OPS 4000
#define STRESS_KEYS 3

struct sop {
    struct keyq_link link;
    int thread, seq, key;
    atomic_int runs;
};

static struct keyq *sq;
static atomic_int busy[STRESS_KEYS];
static int last_seq[STRESS_KEYS][STRESS_THREADS]; /* guarded by the key itself */
static atomic_int violations, done_ops;

static void key_name(int k, char *buf, size_t n) { snprintf(buf, n, "/registry/leases/default/lease-%d", k); }

/* Runs op, which holds its key, then every waiter it hands the key to. */
static void run_chain(struct sop *op) {
    while (op) {
        if (atomic_fetch_add(&busy[op->key], 1) != 0) atomic_fetch_add(&violations, 1);
        if (op->seq <= last_seq[op->key][op->thread]) atomic_fetch_add(&violations, 1);
        last_seq[op->key][op->thread] = op->seq;
        atomic_fetch_add(&op->runs, 1);
        atomic_fetch_add(&done_ops, 1);
        atomic_fetch_sub(&busy[op->key], 1);
        char key[64];
        key_name(op->key, key, sizeof key);
        struct keyq_link *next = kite_apiserver_keyq_release(sq, key);
        op = next ? (struct sop *)((char *)next - offsetof(struct sop, link)) : NULL;
    }
}

static void *stress_thread(void *ud) {
    struct sop *ops = ud;
    for (int i = 0; i < STRESS_OPS; i++) {
        char key[64];
        key_name(ops[i].key, key, sizeof key);
        int r = kite_apiserver_keyq_hold(sq, key, &ops[i].link);
        if (r == KEYQ_HELD) run_chain(&ops[i]);
        else if (r != KEYQ_QUEUED) atomic_fetch_add(&violations, 1);
    }
    return NULL;
}

Test(keyq, threads_hand_keys_on_without_losing_or_reordering_writes, .timeout = 120) {
    sq = kite_apiserver_keyq_new(STRESS_THREADS * STRESS_OPS);
    struct sop *ops = calloc(STRESS_THREADS * STRESS_OPS, sizeof *ops);
    for (int t = 0; t < STRESS_THREADS; t++)
        for (int i = 0; i < STRESS_OPS; i++) {
            struct sop *op = &ops[t * STRESS_OPS + i];
            op->thread = t;
            op->seq = i + 1;
            op->key = (i * 7 + t) % STRESS_KEYS;
        }
    pthread_t th[STRESS_THREADS];
    for (int t = 0; t < STRESS_THREADS; t++) pthread_create(&th[t], NULL, stress_thread, &ops[t * STRESS_OPS]);
    for (int t = 0; t < STRESS_THREADS; t++) pthread_join(th[t], NULL);
    cr_assert_eq(atomic_load(&violations), 0);
    cr_assert_eq(atomic_load(&done_ops), STRESS_THREADS * STRESS_OPS);
    for (int i = 0; i < STRESS_THREADS * STRESS_OPS; i++) cr_assert_eq(atomic_load(&ops[i].runs), 1, "op %d", i);
    cr_assert_eq(kite_apiserver_keyq_held(sq), 0);
    kite_apiserver_keyq_free(sq);
    free(ops);
}
