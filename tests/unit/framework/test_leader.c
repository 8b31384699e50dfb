/* Leader election against the in-memory API server, each candidate on its own fake clock
 * (their wall clocks far apart, to show only the observer's clock counts). */
#include "framework/leader.h"
#include "unit/controllers/fakeapi.h"

#include <criterion/criterion.h>

#define S KITE_NS_PER_SEC
#define LEASE "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"

struct cand {
    struct kite_fake_clock clock;
    struct kite_leader *l;
};

/* Every test: the API server and two candidates, a and b, their wall clocks at WALL. */
#define WALL INT64_C(1893553445) /* 2030-01-02T03:04:05Z */
static struct fakeapi api;
static struct cand a, b;

static void cand_init(struct cand *c, const char *id, int64_t wall_s) {
    kite_fake_clock_init(&c->clock, wall_s * S);
    struct kite_leader_options o = {.client = api.client, .clock = &c->clock.clock, .ns = "kube-system",
                                    .name = "kube-controller-manager", .identity = id};
    c->l = kite_leader_new(&o);
}

static void setup(void) {
    fakeapi_init(&api);
    cand_init(&a, "a", WALL);
    cand_init(&b, "b", WALL);
}
static void teardown(void) {
    kite_leader_free(a.l);
    kite_leader_free(b.l);
    fakeapi_release(&api);
}
TestSuite(leader, .init = setup, .fini = teardown);

static void both_advance(int64_t ns) {
    kite_fake_clock_advance(&a.clock, ns);
    kite_fake_clock_advance(&b.clock, ns);
}

/* The lease's spec as the API server holds it. */
static json_object *spec(void) {
    json_object *l = fakeapi_get(&api, LEASE);
    cr_assert_not_null(l);
    return kite_obj_get(l, "spec");
}

Test(leader, handover_after_one_lease_duration_on_the_candidates_clock) {
    kite_leader_free(b.l);
    cand_init(&b, "b", INT64_C(1000000000)); /* b's wall clock is 28 years behind */
    cr_assert_eq(kite_leader_try(a.l), 1, "the first candidate creates the lease");
    cr_assert(kite_leader_is_leader(a.l));
    json_object *s = spec();
    cr_assert_str_eq(kite_obj_str(s, "holderIdentity"), "a");
    cr_assert_eq(json_object_get_int(kite_obj_get(s, "leaseDurationSeconds")), 15);
    cr_assert_eq(json_object_get_int(kite_obj_get(s, "leaseTransitions")), 0);
    cr_assert_str_eq(kite_obj_str(s, "acquireTime"), "2030-01-02T03:04:05.000000Z");
    cr_assert_str_eq(kite_obj_str(s, "renewTime"), "2030-01-02T03:04:05.000000Z");
    cr_assert_eq(kite_leader_try(b.l), 0, "held");
    cr_assert(!kite_leader_is_leader(b.l));
    /* a renews every 2 s; b keeps seeing new records and waits */
    for (int i = 0; i < 10; i++) {
        both_advance(2 * S);
        cr_assert_eq(kite_leader_try(a.l), 1);
        cr_assert_eq(kite_leader_try(b.l), 0);
    }
    cr_assert_str_eq(kite_obj_str(spec(), "acquireTime"), "2030-01-02T03:04:05.000000Z", "kept by renewals");
    cr_assert_str_eq(kite_obj_str(spec(), "renewTime"), "2030-01-02T03:04:25.000000Z");
    /* a dies right after b saw its last renewal: b takes over 15 s after that, not before */
    both_advance(14 * S);
    cr_assert_eq(kite_leader_try(b.l), 0);
    both_advance(1 * S);
    cr_assert_eq(kite_leader_try(b.l), 1);
    cr_assert(kite_leader_is_leader(b.l));
    s = spec();
    cr_assert_str_eq(kite_obj_str(s, "holderIdentity"), "b");
    cr_assert_eq(json_object_get_int(kite_obj_get(s, "leaseTransitions")), 1);
    cr_assert_str_eq(kite_obj_str(s, "acquireTime"), kite_obj_str(s, "renewTime"));
    /* a comes back: it sees b's record and stands by */
    cr_assert_eq(kite_leader_try(a.l), 0);
    cr_assert(!kite_leader_is_leader(a.l));
}

Test(leader, release_hands_over_at_once) {
    cr_assert_eq(kite_leader_try(a.l), 1);
    cr_assert_eq(kite_leader_try(b.l), 0);
    cr_assert_eq(kite_leader_release(a.l), 0);
    json_object *s = spec();
    cr_assert_str_eq(kite_obj_str(s, "holderIdentity"), "");
    cr_assert_eq(json_object_get_int(kite_obj_get(s, "leaseDurationSeconds")), 1);
    both_advance(2 * S);
    cr_assert_eq(kite_leader_try(b.l), 1, "an empty holder is free to take");
    cr_assert_eq(json_object_get_int(kite_obj_get(spec(), "leaseTransitions")), 1);
}

Test(leader, a_changed_lease_wins_over_a_stale_update) {
    cr_assert_eq(kite_leader_try(a.l), 1);
    cr_assert_eq(kite_leader_try(b.l), 0);
    both_advance(16 * S);
    /* b takes the lease a stopped renewing; a's renewal from its old read is refused (409),
     * and its next look shows b */
    cr_assert_eq(kite_leader_try(b.l), 1);
    cr_assert_lt(kite_leader_try(a.l), 1);
    cr_assert_str_eq(kite_obj_str(spec(), "holderIdentity"), "b");
    cr_assert(!kite_leader_is_leader(a.l));
}

Test(leader, api_errors_are_not_leadership) {
    api.fail_prefix = "/apis/coordination.k8s.io";
    api.fail_code = 503;
    cr_assert_eq(kite_leader_try(a.l), -EAGAIN);
    cr_assert(!kite_leader_is_leader(a.l));
}

Test(leader, writes_only_while_renewed_within_the_renew_deadline) {
    cr_assert(!kite_leader_may_write(a.l), "not before holding");
    cr_assert_eq(kite_leader_try(a.l), 1);
    cr_assert(kite_leader_may_write(a.l));
    cr_assert_eq(kite_leader_try(b.l), 0);
    cr_assert(!kite_leader_may_write(b.l), "a candidate that sees another holder");
    /* a is paused: past the renew deadline it writes nothing, though nobody took the lease */
    both_advance(KITE_LEADER_RENEW_DEADLINE_NS - 1);
    cr_assert(kite_leader_may_write(a.l));
    both_advance(1);
    cr_assert(!kite_leader_may_write(a.l), "renewed a renew deadline ago");
    cr_assert_eq(kite_leader_try(a.l), 1, "still its lease");
    cr_assert(kite_leader_may_write(a.l), "renewed again");
    cr_assert_eq(kite_leader_try(b.l), 0, "b sees the renewal");
    /* paused past the lease: b takes it; a, thawed, may not write, and learns it lost */
    both_advance(KITE_LEADER_LEASE_DURATION_NS);
    cr_assert(!kite_leader_may_write(a.l));
    cr_assert_eq(kite_leader_try(b.l), 1);
    cr_assert(kite_leader_may_write(b.l));
    cr_assert(!kite_leader_may_write(a.l));
    cr_assert_eq(kite_leader_try(a.l), 0);
    cr_assert(!kite_leader_may_write(a.l));
    /* a release gives the right up at once */
    cr_assert_eq(kite_leader_release(b.l), 0);
    cr_assert(!kite_leader_may_write(b.l));
}

/* A candidate paused while its GET was under way (SIGSTOP for longer than a lease) sees the
 * holder's renewal only when the answer comes: the lease runs from then, on its clock. It took
 * over at its next try (the holder, paused in turn, did not renew meanwhile) when the record was
 * dated from the start of the try. */
static struct cand *paused_cand;
static void pause_during_get(void *ud, const char *method, const char *path) {
    if (paused_cand && !strcmp(method, "GET")) {
        kite_fake_clock_advance(&paused_cand->clock, 20 * S);
        paused_cand = NULL;
    }
}

Test(leader, a_record_seen_after_a_pause_runs_from_when_it_was_seen) {
    cr_assert_eq(kite_leader_try(a.l), 1);
    cr_assert_eq(kite_leader_try(b.l), 0, "held");
    both_advance(2 * S);
    cr_assert_eq(kite_leader_try(a.l), 1, "a renews: a record b has not seen");
    api.on_request = pause_during_get;
    paused_cand = &b;
    cr_assert_eq(kite_leader_try(b.l), 0, "b sees a's renewal (after a 20 s pause in its GET)");
    api.on_request = NULL;
    /* a is paused now and renews nothing; b's next try comes at once */
    cr_assert_eq(kite_leader_try(b.l), 0, "a's renewal was seen just now: its lease has 15 s to run");
    kite_fake_clock_advance(&b.clock, 14 * S);
    cr_assert_eq(kite_leader_try(b.l), 0);
    kite_fake_clock_advance(&b.clock, 1 * S);
    cr_assert_eq(kite_leader_try(b.l), 1, "taken 15 s after it was seen");
}
