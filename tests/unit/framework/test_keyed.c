/* The framework's keyed runner (kite_ctl_keyed_step) on a fake clock: a key whose work fails
 * is tried again after its own exponential back-off while the others are done once; delayed
 * adds and "again" times fire at their time and not before; a key queued again while its work
 * ran runs once more after it (in the next step: each key at most once a step); the plan form
 * makes the planned requests without the lock, posts the events after them, and backs off a
 * key whose request failed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "framework/framework.h"

#define MS KITE_NS_PER_MS

struct env {
    struct kite_fake_clock clock;
    pthread_mutex_t lock;
    struct kite_wq wq;
    struct kite_ctl_keyed k;
    int runs[4];             /* per key "a".."d" */
    const char *fail;        /* this key's work fails */
    const char *again_key;   /* this key asks to be looked at again once, again_ns later */
    int64_t again_ns;
    const char *requeue_key; /* this key is queued again while its work runs (its first run) */
};

static int idx(const char *key) { return key[0] - 'a'; }

static bool work(void *ud, const char *key, int64_t *again_ns) {
    struct env *e = ud;
    int n = e->runs[idx(key)]++;
    if (e->again_key && strcmp(key, e->again_key) == 0 && n == 0) *again_ns = e->again_ns;
    if (e->requeue_key && strcmp(key, e->requeue_key) == 0 && n == 0) {
        /* a feed seeing a change meanwhile (it takes the lock as feeds do) */
        pthread_mutex_lock(&e->lock);
        kite_ctl_keyed_add(&e->k, key, 0);
        pthread_mutex_unlock(&e->lock);
    }
    return e->fail && strcmp(key, e->fail) == 0;
}

static void env_init(struct env *e, int64_t base, int64_t max) {
    memset(e, 0, sizeof *e);
    kite_fake_clock_init(&e->clock, 1000 * KITE_NS_PER_SEC);
    pthread_mutex_init(&e->lock, NULL);
    e->wq.backoff_base_ns = base, e->wq.backoff_max_ns = max;
    e->k = (struct kite_ctl_keyed){.lock = &e->lock, .wq = &e->wq, .clock = &e->clock.clock, .ud = e, .work = work};
}

static void add(struct env *e, const char *key, int64_t in_ns) {
    pthread_mutex_lock(&e->lock);
    kite_ctl_keyed_add(&e->k, key, in_ns);
    pthread_mutex_unlock(&e->lock);
}

static void env_release(struct env *e) {
    kite_wq_release(&e->wq);
    pthread_mutex_destroy(&e->lock);
}

Test(keyed, a_failing_key_backs_off_alone) {
    struct env e;
    env_init(&e, 100 * MS, 1000 * MS);
    e.fail = "a";
    add(&e, "a", 0), add(&e, "b", 0), add(&e, "c", 0);
    cr_assert(kite_ctl_keyed_pending(&e.k));
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 100 * MS, "the failed key's first back-off");
    cr_assert_eq(e.runs[0], 1);
    cr_assert_eq(e.runs[1], 1);
    cr_assert_eq(e.runs[2], 1);
    cr_assert_not(kite_ctl_keyed_pending(&e.k));
    kite_fake_clock_advance(&e.clock, 99 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 1 * MS);
    cr_assert_eq(e.runs[0], 1, "not before its back-off");
    kite_fake_clock_advance(&e.clock, 1 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 200 * MS, "doubled");
    cr_assert_eq(e.runs[0], 2);
    kite_fake_clock_advance(&e.clock, 200 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 400 * MS);
    cr_assert_eq(e.runs[0], 3);
    cr_assert_eq(kite_wq_failures(&e.wq, "a"), 3);
    /* the others ran once and were forgotten */
    cr_assert_eq(e.runs[1], 1);
    cr_assert_eq(e.runs[2], 1);
    cr_assert_eq(kite_wq_failures(&e.wq, "b"), 0);
    /* a success forgets the back-off: the next failure waits the base again */
    e.fail = NULL;
    kite_fake_clock_advance(&e.clock, 400 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), -1, "nothing left");
    cr_assert_eq(e.runs[0], 4);
    cr_assert_eq(kite_wq_failures(&e.wq, "a"), 0);
    e.fail = "a";
    add(&e, "a", 0);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 100 * MS);
    env_release(&e);
}

Test(keyed, the_back_off_is_capped) {
    struct env e;
    env_init(&e, 100 * MS, 300 * MS);
    e.fail = "a";
    add(&e, "a", 0);
    int64_t expect[] = {100 * MS, 200 * MS, 300 * MS, 300 * MS};
    for (size_t i = 0; i < 4; i++) {
        int64_t next = kite_ctl_keyed_step(&e.k);
        cr_assert_eq(next, expect[i], "try %zu: %lld", i, (long long)next);
        kite_fake_clock_advance(&e.clock, next);
    }
    env_release(&e);
}

Test(keyed, delayed_adds_fire_at_their_time) {
    struct env e;
    env_init(&e, 100 * MS, 1000 * MS);
    add(&e, "a", 300 * MS);
    add(&e, "b", 500 * MS);
    cr_assert_not(kite_ctl_keyed_pending(&e.k));
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 300 * MS);
    kite_fake_clock_advance(&e.clock, 299 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 1 * MS);
    cr_assert_eq(e.runs[0], 0, "not a nanosecond early");
    kite_fake_clock_advance(&e.clock, 1 * MS);
    cr_assert(kite_ctl_keyed_pending(&e.k));
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 200 * MS);
    cr_assert_eq(e.runs[0], 1);
    cr_assert_eq(e.runs[1], 0);
    /* an earlier add moves a key earlier; a later one leaves it */
    add(&e, "b", 50 * MS);
    add(&e, "b", 900 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 50 * MS);
    kite_fake_clock_advance(&e.clock, 50 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), -1);
    cr_assert_eq(e.runs[1], 1, "once, at the earlier time");
    env_release(&e);
}

Test(keyed, work_asks_to_look_again_later) {
    struct env e;
    env_init(&e, 100 * MS, 1000 * MS);
    e.again_key = "c", e.again_ns = 700 * MS;
    add(&e, "c", 0);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 700 * MS);
    cr_assert_eq(e.runs[2], 1);
    kite_fake_clock_advance(&e.clock, 699 * MS);
    kite_ctl_keyed_step(&e.k);
    cr_assert_eq(e.runs[2], 1);
    kite_fake_clock_advance(&e.clock, 1 * MS);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), -1);
    cr_assert_eq(e.runs[2], 2);
    /* a failure and an again time: the earlier of the back-off and the again time */
    e.fail = "c", e.again_key = "d", e.again_ns = 50 * MS;
    add(&e, "c", 0);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 100 * MS);
    env_release(&e);
}

Test(keyed, a_key_queued_again_while_it_runs_runs_once_more_after) {
    struct env e;
    env_init(&e, 100 * MS, 1000 * MS);
    e.requeue_key = "a";
    add(&e, "a", 0), add(&e, "b", 0);
    /* each key at most once a step: the step ends saying a key is due now */
    cr_assert_eq(kite_ctl_keyed_step(&e.k), 0);
    cr_assert_eq(e.runs[0], 1);
    cr_assert_eq(e.runs[1], 1);
    cr_assert(kite_ctl_keyed_pending(&e.k));
    cr_assert_eq(kite_ctl_keyed_step(&e.k), -1);
    cr_assert_eq(e.runs[0], 2, "once more, after");
    cr_assert_eq(e.runs[1], 1);
    cr_assert_eq(kite_ctl_keyed_step(&e.k), -1);
    cr_assert_eq(e.runs[0], 2, "and only once");
    env_release(&e);
}

/* ---- the plan form: requests planned under the lock, made without it ---- */

struct api {
    pthread_mutex_t *lock; /* the controller's: free while requests are made */
    char log[8][64];
    int n;
    bool locked_during_request;
};

static int handler(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                   struct kite_response *ret) {
    struct api *a = ud;
    if (pthread_mutex_trylock(a->lock) == 0) pthread_mutex_unlock(a->lock);
    else a->locked_during_request = true;
    if (a->n < 8) snprintf(a->log[a->n++], sizeof a->log[0], "%s %s", method, path);
    ret->status = strstr(path, "/fail") ? 500 : 201;
    ret->body = kite_strdup(ret->status == 201 ? "{\"metadata\":{\"name\":\"made\"}}"
                                               : "{\"kind\":\"Status\",\"code\":500,\"reason\":\"InternalError\"}");
    return 0;
}

struct planner {
    struct env e;
    int heard_ok, heard_err;
};

static void plan(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns) {
    struct planner *p = ud;
    cr_assert_neq(pthread_mutex_trylock(&p->e.lock), 0, "plan runs under the lock");
    p->e.runs[idx(key)]++;
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/ns/configmaps%s", key[0] == 'a' ? "/fail" : "");
    kite_ctl_acts_add(acts, 0, key, "POST", path, "application/json", json_object_new_object());
    kite_ctl_event(events, &p->e.clock.clock, "test", "ConfigMap", "ns", key, NULL, "Normal", "Planned", "planned");
}

static bool heard(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events) {
    struct planner *p = ud;
    if (e == 0) p->heard_ok++;
    else p->heard_err++;
    return e < 0;
}

Test(keyed, the_plan_form_acts_without_the_lock_and_backs_off_a_failed_request) {
    struct planner p;
    env_init(&p.e, 100 * MS, 1000 * MS);
    p.heard_ok = p.heard_err = 0;
    struct api a = {.lock = &p.e.lock};
    struct kite_client *c = kite_client_fake_new(handler, NULL, &a);
    p.e.k = (struct kite_ctl_keyed){.lock = &p.e.lock, .wq = &p.e.wq, .clock = &p.e.clock.clock, .client = c, .ud = &p,
                                    .plan = plan, .heard = heard};
    add(&p.e, "a", 0), add(&p.e, "b", 0);
    cr_assert_eq(kite_ctl_keyed_step(&p.e.k), 100 * MS, "a's request failed: its back-off");
    cr_assert_eq(p.heard_ok, 1);
    cr_assert_eq(p.heard_err, 1);
    cr_assert_not(a.locked_during_request);
    cr_assert_eq(a.n, 4, "two requests and two events");
    /* each key's events after its requests */
    for (int i = 0; i < 4; i += 2) {
        cr_assert(strstr(a.log[i], "/configmaps"), "%s", a.log[i]);
        cr_assert(strstr(a.log[i + 1], "/events"), "%s", a.log[i + 1]);
    }
    kite_fake_clock_advance(&p.e.clock, 100 * MS);
    kite_ctl_keyed_step(&p.e.k);
    cr_assert_eq(p.e.runs[0], 2);
    cr_assert_eq(p.e.runs[1], 1);
    kite_client_free(c);
    env_release(&p.e);
}
