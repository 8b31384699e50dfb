/* A shared informer, as client-go's: one thread lists a collection, then watches it from the
 * list's resourceVersion, keeps the objects in a cache keyed by namespace/name, and calls
 * handlers on add, update and delete. A watch that ends is resumed from the last
 * resourceVersion seen; a 410 (or any watch error) lists again, and the handlers see the
 * difference between the cache and the new list (adds, updates, deletes), so nothing is
 * missed across the gap. A failed list is retried after a back-off (1 s doubling to
 * KITE_INFORMER_RETRY_MAX_S). */
#pragma once
#include "client/client.h"

#define KITE_INFORMER_RETRY_MAX_S 30
#define KITE_INFORMER_MAX_HANDLERS 4
#define KITE_INFORMER_WATCH_S 300 /* a watch's timeoutSeconds; the server ends it, it resumes */

/* Called on the informer's thread; objects are borrowed for the call (json_object_get to
 * keep one). NULL members are skipped. */
struct kite_informer_handlers {
    void (*add)(void *ud, json_object *obj);
    void (*update)(void *ud, json_object *old, json_object *obj);
    void (*del)(void *ud, json_object *obj);
    /* after a list's differences have been delivered (the cache matches the server) */
    void (*synced)(void *ud);
    void *ud;
};

struct kite_informer_options {
    struct kite_client *client; /* borrowed: must outlive the informer */
    const char *path;           /* the collection ("/api/v1/nodes"); copied */
    const char *selector;       /* NULL, or query parameters ("fieldSelector=spec.nodeName%3Dn1"); copied */
    const char *name;           /* thread name (15 bytes kept) */
    /* every set is called, in order, for each change: controllers share one watch */
    struct kite_informer_handlers handlers[KITE_INFORMER_MAX_HANDLERS];
    size_t n_handlers;
};

struct kite_informer;
int kite_informer_start(const struct kite_informer_options *o, struct kite_informer **ret);
/* The first list has been delivered to the handlers (client-go's HasSynced); safe from any
 * thread. */
bool kite_informer_synced(struct kite_informer *i);
/* Cancels the watch and joins; frees the cache. NULL is a no-op. */
void kite_informer_stop(struct kite_informer *i);

/* The cache key of an object: "namespace/name", or "name" for a cluster-scoped one
 * (malloc'ed; NULL without a name). */
char *kite_informer_key(json_object *obj);
