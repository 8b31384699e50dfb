/* Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection: the
 * holder renews spec.renewTime every retry period; another candidate takes the lease when it
 * has seen the same record unchanged for leaseDurationSeconds, judged on its own clock from
 * when it observed the record change (never on the holder's timestamps, so clock skew does
 * not matter). A leader that cannot renew within the renew deadline stops leading. Updates
 * carry the resourceVersion read, so two candidates never both win. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

/* client-go's defaults (and kube-controller-manager's --leader-elect-* flags) */
#define KITE_LEADER_LEASE_DURATION_NS (15 * KITE_NS_PER_SEC)
#define KITE_LEADER_RENEW_DEADLINE_NS (10 * KITE_NS_PER_SEC)
#define KITE_LEADER_RETRY_PERIOD_NS (2 * KITE_NS_PER_SEC)
#define KITE_LEADER_JITTER 1.2 /* acquire attempts every retry period + up to 120 % */

struct kite_leader_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
    const char *ns, *name;      /* the Lease (copied) */
    const char *identity;       /* copied */
    int64_t lease_duration_ns, renew_deadline_ns, retry_period_ns; /* 0 = the defaults above */
    /* Called when leadership is gained and lost (or at stop while leading): started on a
     * thread of its own (the elector renews meanwhile), stopped on the elector's thread once
     * started has returned. */
    void (*started)(void *ud);
    /* NULL, or the client the controllers write with (borrowed; not the one above): its
     * writes pass only while kite_leader_may_write (kite_leader_start sets the gate) */
    struct kite_client *gated;
    void (*stopped)(void *ud);
    void *ud;
};

struct kite_leader;
/* A candidate with no thread (kite_leader_try drives it: unit tests). */
struct kite_leader *kite_leader_new(const struct kite_leader_options *o);
void kite_leader_free(struct kite_leader *l);
/* One attempt to acquire or renew (client-go's tryAcquireOrRenew): 1 when this candidate
 * holds the lease after it, 0 when another valid holder does, -errno on a failed request. */
int kite_leader_try(struct kite_leader *l);
/* Gives the lease up if held (holder "", leaseDurationSeconds 1), so another candidate
 * takes it at its next attempt. */
int kite_leader_release(struct kite_leader *l);
bool kite_leader_is_leader(struct kite_leader *l);
/* The write gate of the controllers' client (kite_client_set_write_gate; ud is the
 * kite_leader): this candidate's last attempt found it holding the lease, renewed less than
 * the renew deadline ago by this process's monotonic clock (counted from when the renewal was
 * sent). A process paused past it (SIGSTOP, a stalled machine) writes nothing until it has
 * renewed, and its elector stops the controllers first (their knowledge is stale too). Safe
 * from any thread. */
bool kite_leader_may_write(void *ud);

/* Runs the election on a thread: acquire, call started, renew every retry period; when a
 * renewal has not succeeded for the renew deadline, call stopped and try to acquire again. */
int kite_leader_start(const struct kite_leader_options *o, struct kite_leader **ret);
/* Stops the thread; if leading, calls stopped, then releases the lease. NULL is a no-op. */
void kite_leader_stop(struct kite_leader *l);
