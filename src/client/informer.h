/* A shared informer, as client-go's: one thread lists a collection, then watches it from the
 * list's resourceVersion, keeps the objects in a cache keyed by namespace/name, and calls
 * handlers on add, update and delete. A watch that ends is resumed from the last
 * resourceVersion seen; a 410 (or any watch error) lists again, and the handlers see the
 * difference between the cache and the new list (adds, updates, deletes), so nothing is
 * missed across the gap. A failed list is retried after a back-off (1 s doubling to
 * KITE_INFORMER_RETRY_MAX_S).
 *
 * With watch_list, the list is the watch's own start (client-go's WatchListClient): one watch
 * with sendInitialEvents=true streams the current objects as ADDED events, then a bookmark
 * annotated k8s.io/initial-events-end, then the changes after them, with no gap between the two:
 * a list in pages takes seconds at 100,000 objects, and the watch from its revision after that
 * found the watch cache's history long gone (410) under thousands of writes a second, so the
 * informer listed again, forever. A server that refuses the parameters (400, 422) or ends the
 * stream before the bookmark is listed in pages from then on. */
#pragma once
#include "client/client.h"

#define KITE_INFORMER_RETRY_MAX_S 30
#define KITE_INFORMER_MAX_HANDLERS 16 /* handler sets on one informer (controllers sharing it) */
#define KITE_INFORMER_PAGE 500 /* objects per page of a list (as client-go's reflector) */
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

typedef json_object *(*kite_informer_transform)(json_object *obj);

struct kite_informer_options {
    struct kite_client *client; /* borrowed: must outlive the informer */
    const char *path;           /* the collection ("/api/v1/nodes"); copied */
    const char *selector;       /* NULL, or query parameters ("fieldSelector=spec.nodeName%3Dn1"); copied */
    const char *name;           /* thread name (15 bytes kept) */
    /* NULL, or the only members the handlers read and the cache keeps (dotted paths,
     * NULL-terminated; copied; metadata's name, namespace and resourceVersion are always kept):
     * watch events are cut down from their text without a full parse (json/scan.h). A Lease
     * renewal's tree is then 5 objects, not 20: a controller watching many Leases spends its
     * time on what it reads. */
    const char *const *project;
    /* NULL, or what the cache and the handlers get of each object after the cut: a new reference
     * to obj or to a smaller form of what the handlers read (as client-go's SetTransform: the
     * scheduler keeps a Node's images as one string, not ~150 objects). */
    kite_informer_transform transform;
    bool watch_list;            /* list through the watch (above) */
    /* every set is called, in order, for each change: controllers share one watch */
    struct kite_informer_handlers handlers[KITE_INFORMER_MAX_HANDLERS];
    size_t n_handlers;
};

struct kite_informer;
/* kite_informer_new + kite_informer_run. */
int kite_informer_start(const struct kite_informer_options *o, struct kite_informer **ret);
/* An informer with no thread yet: handler sets may be added until kite_informer_run. */
struct kite_informer *kite_informer_new(const struct kite_informer_options *o);
/* Adds a handler set (copied); -ENOSPC past KITE_INFORMER_MAX_HANDLERS, -EBUSY once running. */
int kite_informer_add_handlers(struct kite_informer *i, const struct kite_informer_handlers *h);
/* Starts its thread (list, then watch); 0 when already running. */
int kite_informer_run(struct kite_informer *i);
/* Cancels the watch and joins the thread: no handler is called after it returns; the cache and
 * kite_informer_synced stay readable until kite_informer_stop. */
void kite_informer_halt(struct kite_informer *i);
/* A deep copy of the cached object under key ("namespace/name" or "name"), or NULL; safe from
 * any thread. */
json_object *kite_informer_get(struct kite_informer *i, const char *key);
/* Every key in the cache (malloc'ed array of malloc'ed strings, *n of them); any thread. */
char **kite_informer_keys(struct kite_informer *i, size_t *n);
/* The first list has been delivered to the handlers (client-go's HasSynced); safe from any
 * thread. */
bool kite_informer_synced(struct kite_informer *i);
/* Halts (if not yet) and frees the cache. NULL is a no-op. */
void kite_informer_stop(struct kite_informer *i);

/* The cache key of an object: "namespace/name", or "name" for a cluster-scoped one
 * (malloc'ed; NULL without a name). */
char *kite_informer_key(json_object *obj);
