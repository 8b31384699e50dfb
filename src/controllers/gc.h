/* The garbage collector (k8s.io/kubernetes pkg/controller/garbagecollector), for the kinds of
 * KITE_GC_KINDS (derived from the registry: the kinds whose row sets gc_owner, so that
 * Foreground and Orphan deletes wait for the collector, and pods). It keeps a graph of those objects by uid with their
 * ownerReferences and acts on it:
 *  - a dependent whose owners are all gone (not in the graph, and a GET of each says 404 or
 *    another uid) is deleted (Background; Foreground when it has dependents of its own); one
 *    with only some owners gone loses the references to those;
 *  - an owner being deleted with the "foregroundDeletion" finalizer (propagationPolicy
 *    Foreground) gets its dependents deleted, and its finalizer removed once none that
 *    blocks it (blockOwnerDeletion) is left;
 *  - an owner being deleted with the "orphan" finalizer gets its reference taken off every
 *    dependent, then its finalizer removed.
 * Driven like the other cores: observations, then kite_gc_step. Locks on every call. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_GC_RETRY_NS (1 * KITE_NS_PER_SEC)

/* A kind the collector watches: its apiVersion and kind (as ownerReferences name them), its
 * API prefix and plural (the collection across namespaces is <prefix>/<plural>). */
struct kite_gc_kind {
    const char *api_version, *kind, *prefix, *plural;
    bool namespaced;
};
/* Derived from the registry: every resource with gc_owner, and pods. */
const struct kite_gc_kind *kite_gc_kinds(void);
size_t kite_gc_n_kinds(void);
#define KITE_GC_KINDS (kite_gc_kinds())
#define KITE_GC_N_KINDS (kite_gc_n_kinds())

struct kite_gc_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_gc;
struct kite_gc *kite_gc_new(const struct kite_gc_options *o);
void kite_gc_free(struct kite_gc *g);
/* An object of KITE_GC_KINDS[kind] was added or changed / deleted. */
void kite_gc_upsert(struct kite_gc *g, size_t kind, json_object *obj);
void kite_gc_delete(struct kite_gc *g, size_t kind, json_object *obj);
int64_t kite_gc_step(struct kite_gc *g);
bool kite_gc_pending(struct kite_gc *g);

struct kite_ctl_group;
/* Adds the collector to g (framework.h). */
int kite_gc_run(struct kite_ctl_group *g);
