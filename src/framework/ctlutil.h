/* What the node controllers (lifecycle, taint eviction, pod GC) share: requests queued under
 * their lock and made after it is dropped, events as client-go's recorder writes them, reading
 * conditions and taints, and deleting pods. */
#pragma once
#include "base/clock.h"
#include "client/client.h"
#include "json/scan.h"

#include <pthread.h>

/* A request to make once the controller's lock is released. */
struct kite_ctl_act {
    int kind;        /* the controller's own */
    char *key;       /* the object it concerns (node name, pod namespace/name) */
    char *method, *path, *ctype;
    json_object *body; /* owned */
};
struct kite_ctl_acts {
    struct kite_ctl_act *v;
    size_t n, cap;
};
/* Appends (takes ownership of body). */
void kite_ctl_acts_add(struct kite_ctl_acts *a, int kind, const char *key, const char *method, const char *path,
                       const char *ctype, json_object *body);
void kite_ctl_acts_release(struct kite_ctl_acts *a);
/* Moves every request of from to the end of to. */
void kite_ctl_acts_move(struct kite_ctl_acts *to, struct kite_ctl_acts *from);

#define KITE_CTL_EVENT -1 /* kind of a queued event POST */

/* Queues a core/v1 Event about an object (involvedObject apiVersion "v1") as
 * client-go's recorder posts it: ns is the event's namespace ("default" for a Node). */
void kite_ctl_event(struct kite_ctl_acts *a, struct kite_clock *clock, const char *component, const char *kind,
                    const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                    const char *msg);
/* Makes the requests in order; events are fire-and-forget. fn (may be NULL) hears each other
 * request's outcome: 0 with the answer (borrowed), or -errno. */
void kite_ctl_acts_run(struct kite_client *client, struct kite_ctl_acts *a,
                       void (*fn)(void *ud, const struct kite_ctl_act *act, int e, json_object *answer), void *ud);

/* Requests a controller makes at once (kube-controller-manager's node lifecycle controller
 * updates nodes with 8 workers): marking 1% of 92,000 nodes Unknown one request at a time took
 * minutes behind a busy apiserver. */
#define KITE_CTL_WORKERS 8
/* fn(ud, i) for every i < n, up to `workers` at once (threads of its own, and this one, joined
 * before it returns); in no particular order. */
void kite_ctl_parallel(size_t n, unsigned workers, void (*fn)(void *ud, size_t i), void *ud);
/* kite_ctl_acts_run, up to `workers` requests at once (threads of its own, joined before it
 * returns; the client should keep that many connections): for requests that do not depend on one
 * another's order. fn is called from those threads, one call at a time. */
void kite_ctl_acts_run_parallel(struct kite_client *client, struct kite_ctl_acts *a, unsigned workers,
                                void (*fn)(void *ud, const struct kite_ctl_act *act, int e, json_object *answer),
                                void *ud);

/* A condition of status.conditions by type (borrowed), or NULL. */
json_object *kite_ctl_condition(json_object *obj, const char *type);
/* A taint of spec.taints with key and effect, or NULL. */
json_object *kite_ctl_taint(json_object *node, const char *key, const char *effect);
/* The resourceVersion as a number (0 when absent or not a number). */
uint64_t kite_ctl_rv(json_object *obj);

/* A pod as the node controllers track it: "namespace/name", its parts, and its uid (NULL: none
 * known). All owned. */
struct kite_ctl_pod {
    char *key, *ns, *name, *uid;
};
void kite_ctl_pod_init(struct kite_ctl_pod *p, const char *ns, const char *name, const char *uid);
void kite_ctl_pod_copy(struct kite_ctl_pod *to, const struct kite_ctl_pod *from);
void kite_ctl_pod_set_uid(struct kite_ctl_pod *p, const char *uid);
void kite_ctl_pod_release(struct kite_ctl_pod *p);

/* A pod's deletion by a controller, and what it first writes to the pod's status: */
struct kite_ctl_pod_kill {
    struct kite_ctl_pod pod;
    const char *phase;            /* status.phase (NULL: left alone) */
    const char *reason, *message; /* a DisruptionTarget condition (reason NULL: none) */
    bool grace0;                  /* deleted with gracePeriodSeconds 0 (else the pod's own) */
};
/* markFailedAndDeletePodWithCondition, addConditionAndDeletePod: the status patch (when k sets
 * a phase or a condition), then the delete with the pod's uid as precondition (so a pod made
 * again under the name is not the one hit). 0 when done or the pod is gone (or is another now),
 * else -errno. */
int kite_ctl_pod_kill(struct kite_client *client, struct kite_clock *clock, const struct kite_ctl_pod_kill *k);
/* Makes a step's n deletions (v; freed with them) outside the controller's lock, one after the
 * other: failed (called with lock held) hears each failure, done (without) each success. */
void kite_ctl_pod_kills_run(struct kite_client *client, struct kite_clock *clock, pthread_mutex_t *lock,
                            struct kite_ctl_pod_kill *v, size_t n,
                            void (*failed)(void *ud, const struct kite_ctl_pod *p, int e),
                            void (*done)(void *ud, const struct kite_ctl_pod *p), void *ud);

/* The members of a Node the controllers read (kite_ctl_feed.project): every controller's Node
 * feed names this one array, so they share one informer, and a Node is cached and copied
 * with its labels, spec and conditions alone (a Node of 3.5 KB of JSON is ~42 KB as a json-c
 * tree, most of it images, node info, addresses, capacity and managedFields, which no
 * controller reads). Controllers write Nodes only by patches. */
extern const char *const kite_ctl_node_members[];
