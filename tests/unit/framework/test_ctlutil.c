/* The controllers' request runner: kite_ctl_acts_run_parallel makes up to `workers` requests at
 * once against the fake transport (which holds each for a while and counts how many it holds at
 * once), and tells the caller of every outcome but the events'. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "framework/ctlutil.h"

struct held {
    atomic_int now, most, served;
};

static int slow_h(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                  struct kite_response *ret) {
    struct held *h = ud;
    int n = ++h->now;
    for (int m = h->most; n > m && !atomic_compare_exchange_weak(&h->most, &m, n);) {}
    usleep(50 * 1000);
    h->now--;
    h->served++;
    ret->status = strstr(path, "/n3/") ? 404 : 200;
    ret->body = kite_asprintf("{\"path\":\"%s\"}", path);
    return 0;
}

struct heard {
    int calls, failed, inside, overlapped;
    bool seen[20];
};

static void outcome(void *ud, const struct kite_ctl_act *a, int e, json_object *answer) {
    struct heard *h = ud;
    if (h->inside++) h->overlapped++; /* one call at a time, as the runner promises */
    usleep(1000);
    h->calls++;
    int i = atoi(a->key + 1);
    cr_assert(!h->seen[i], "%s heard twice", a->key);
    h->seen[i] = true;
    if (e < 0) {
        h->failed++;
        cr_assert_eq(e, -ENOENT);
        cr_assert_null(answer);
    } else {
        cr_assert_str_eq(json_object_get_string(json_object_object_get(answer, "path")), a->path);
    }
    h->inside--;
}

static void run(unsigned workers, int want_most) {
    struct held held = {0};
    struct kite_client *c = kite_client_fake_new(slow_h, NULL, &held);
    struct kite_ctl_acts acts = {0};
    for (int i = 0; i < 20; i++) {
        char key[16], path[64];
        snprintf(key, sizeof key, "n%d", i);
        snprintf(path, sizeof path, "/api/v1/nodes/n%d/status", i);
        kite_ctl_acts_add(&acts, 1, key, "PATCH", path, "application/strategic-merge-patch+json", json_object_new_object());
    }
    kite_ctl_acts_add(&acts, KITE_CTL_EVENT, "n0", "POST", "/api/v1/namespaces/default/events", NULL,
                      json_object_new_object());
    struct heard heard = {0};
    kite_ctl_acts_run_parallel(c, &acts, workers, outcome, &heard);
    cr_assert_eq(held.served, 21);     /* every request made, the event too */
    cr_assert_eq(held.most, want_most); /* at most `workers` at once, and that many */
    cr_assert_eq(heard.calls, 20);     /* every outcome but the event's */
    cr_assert_eq(heard.failed, 1);     /* n3's 404 */
    cr_assert_eq(heard.overlapped, 0);
    kite_ctl_acts_release(&acts);
    kite_client_free(c);
}

Test(ctlutil, parallel_requests_up_to_the_workers) { run(KITE_CTL_WORKERS, KITE_CTL_WORKERS); }

Test(ctlutil, one_worker_makes_them_in_turn) { run(1, 1); }
