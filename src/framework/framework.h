/* The controller framework (controller-runtime's and kube-controller-manager's shape): a group
 * holds the controllers one controller-manager runs, one shared informer per collection for
 * all of them (client/factory.h), and one runner thread per controller (loop.h) that waits for
 * the informers it reads to sync, then steps the controller's core when an observation leaves
 * work or its next deadline comes.
 *
 * A controller is a core (observations in, step out: unit-testable with no thread) and a spec
 * naming the collections it watches (feeds) and what each change does to the core. A
 * controller that acts per object uses kite_ctl_reconcile instead: a keyed work queue with
 * per-item exponential back-off on the objects of one collection (client-go's rate-limited
 * queue and a Reconciler), its sync called with a copy of the object from the shared cache.
 *
 * Lifetime: kite_ctl_group_new, then each controller's start (kite_ctl_run or
 * kite_ctl_reconcile), then kite_ctl_group_start; kite_ctl_group_free stops the runners (the
 * last started first), halts the informers (no handler runs after), then frees the cores. */
#pragma once
#include "base/clock.h"
#include "client/client.h"
#include "client/factory.h"
#include "framework/ctlutil.h"
#include "framework/workqueue.h"

#include <pthread.h>

#define KITE_CTL_MAX_FEEDS 20 /* collections one controller watches */

/* One collection a controller watches, and what its changes do (NULL members skipped). tag is
 * handed back (a controller with one handler for several collections tells them apart). */
struct kite_ctl_feed {
    const char *path;     /* the collection ("/api/v1/pods") */
    const char *selector; /* NULL, or query parameters ("labelSelector=...") */
    void (*upsert)(void *core, json_object *obj, uintptr_t tag);
    /* an update, when the controller needs the old object too (NULL: upsert) */
    void (*update)(void *core, json_object *old, json_object *obj, uintptr_t tag);
    void (*del)(void *core, json_object *obj, uintptr_t tag);
    void (*synced)(void *core, uintptr_t tag); /* after each list's differences were delivered */
    uintptr_t tag;
    bool quiet;   /* its changes do not wake the runner (a Lease renewal only moves a deadline later) */
    bool no_wait; /* the runner does not wait for it to sync before its first step */
    /* NULL, or the only members the handlers read (kite_informer_options' project: the
     * objects are cut down from the watch's text, not parsed whole; a static array) */
    const char *const *project;
    kite_informer_transform transform; /* NULL, or kite_informer_options' transform */
};

struct kite_ctl_spec {
    const char *name; /* the runner thread's name (15 bytes kept) */
    /* ns until the core next needs a step (-1: nothing due); pending: it has work now */
    int64_t (*step)(void *core);
    bool (*pending)(void *core);
    void (*free)(void *core);
    const struct kite_ctl_feed *feeds; /* copied */
    size_t n_feeds;
};

struct kite_ctl_group;
/* client (and clock, NULL = real) are borrowed: they must outlive the group. */
struct kite_ctl_group *kite_ctl_group_new(struct kite_client *client, struct kite_clock *clock);
struct kite_client *kite_ctl_group_client(const struct kite_ctl_group *g);
struct kite_clock *kite_ctl_group_clock(const struct kite_ctl_group *g);
struct kite_informer_factory *kite_ctl_group_informers(const struct kite_ctl_group *g);
/* Adds a controller: its core (owned from here on, freed with spec->free even on failure) fed
 * by the shared informers of spec's feeds, stepped by a runner of its own. 0 or -errno. */
int kite_ctl_run(struct kite_ctl_group *g, const struct kite_ctl_spec *spec, void *core);
/* Starts the shared informers (after every controller was added). */
int kite_ctl_group_start(struct kite_ctl_group *g);
/* Stops and frees everything. NULL is a no-op. */
void kite_ctl_group_free(struct kite_ctl_group *g);
/* The number of controllers and of list + watch streams (tests). */
size_t kite_ctl_group_count(const struct kite_ctl_group *g);

/* Feed and core functions from a core's typed ones: KITE_CTL_FEED(kite_nlc_node_upsert,
 * struct kite_nlc) defines kite_nlc_node_upsert_feed for a kite_ctl_feed's upsert or del;
 * KITE_CTL_CORE(kite_nlc, struct kite_nlc) defines kite_nlc_step_core, kite_nlc_pending_core and
 * kite_nlc_free_core from kite_nlc_step, _pending and _free. */
#define KITE_CTL_FEED(fn, type) \
    static void fn##_feed(void *core, json_object *obj, uintptr_t tag) { (void)tag; fn((type *)core, obj); }
#define KITE_CTL_CORE(prefix, type)                                                       \
    static int64_t prefix##_step_core(void *core) { return prefix##_step((type *)core); }   \
    static bool prefix##_pending_core(void *core) { return prefix##_pending((type *)core); } \
    static void prefix##_free_core(void *core) { prefix##_free((type *)core); }

/* ---- the keyed runner: one step over a controller's own work queue ---- */
/* A controller that keeps its own caches (fed by its feeds) and a keyed work queue under its
 * own lock steps with kite_ctl_keyed_step: each key due is popped under the lock and worked on,
 * then forgotten (a success) or queued again after its own back-off (a failure: wq's
 * backoff_base_ns doubling to backoff_max_ns); a key added again while it was worked on runs
 * once more after. The work is either
 *  - work (the whole of it, called without the lock: it locks what it reads), or
 *  - plan, called under the lock: the requests key needs (acts, made in order (or `workers` at
 *    once) once the lock is
 *    dropped, each answer told to heard, also without the lock) and the events to post after
 *    them; heard returns true when the answer fails the key (NULL: any error but -ENOENT and
 *    -EEXIST does).
 * *again_ns >= 0 (both forms; it starts at -1) queues the key again that much later. Each key
 * runs at most once per step: one due again at once ends the step with 0. */
struct kite_ctl_keyed {
    pthread_mutex_t *lock;    /* guards wq (and what plan reads) */
    struct kite_wq *wq;
    struct kite_clock *clock;
    struct kite_client *client; /* the requests' (plan) */
    void *ud;
    bool (*work)(void *ud, const char *key, int64_t *again_ns); /* true: the key failed */
    void (*plan)(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns);
    bool (*heard)(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events);
    /* > 1: a plan's requests, then its events, go up to this many at once, in no order (for
     * requests that do not depend on one another's, as a ReplicaSet's pod creates) */
    unsigned workers;
};
/* ns until the next key is due (0: one is due now), or -1 when the queue is empty. */
int64_t kite_ctl_keyed_step(const struct kite_ctl_keyed *k);
bool kite_ctl_keyed_pending(const struct kite_ctl_keyed *k);
/* Queues key in_ns from now (the caller holds k->lock). */
void kite_ctl_keyed_add(const struct kite_ctl_keyed *k, const char *key, int64_t in_ns);

/* ---- reconcilers: a keyed work queue over one collection ---- */
#define KITE_CTL_RECONCILE_BACKOFF_BASE_NS KITE_NS_PER_SEC
#define KITE_CTL_RECONCILE_BACKOFF_MAX_NS (30 * KITE_NS_PER_SEC)

struct kite_ctl_reconcile;
struct kite_ctl_reconciler {
    const char *name;               /* runner thread */
    const char *path, *selector;    /* the collection whose keys are queued */
    /* The work for key: obj is a copy of the cached object (NULL when gone; the callee may keep
     * or change it, and puts it). Returns 0 done (the key's back-off is forgotten), -errno to
     * try again after the key's back-off, or > 0 to look again in that many ns. */
    int64_t (*sync)(void *ud, const char *key, json_object *obj);
    void *ud;
    void (*free)(void *ud);         /* at kite_ctl_group_free; NULL: ud is not owned */
    int64_t backoff_base_ns, backoff_max_ns; /* 0: the defaults above */
    int64_t resync_ns;              /* > 0: every cached key is queued again this often */
    /* a change of the collection queues every key, not only its own (a change of one object
     * can change another's work: ClusterRole aggregation) */
    bool queue_all;
    /* more collections whose changes queue keys: map(ud, obj, enqueue-context) */
    const struct kite_ctl_feed *more;
    size_t n_more; /* their upsert/del get the struct kite_ctl_reconcile * as core */
};
int kite_ctl_reconcile(struct kite_ctl_group *g, const struct kite_ctl_reconciler *r);
/* Queues key now (from a feed of `more`, or any thread). */
void kite_ctl_enqueue(struct kite_ctl_reconcile *q, const char *key);
/* The reconciler's ud (in a feed of `more`). */
void *kite_ctl_reconcile_ud(struct kite_ctl_reconcile *q);
