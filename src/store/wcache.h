/* kite watch cache (DESIGN.md "Watch cache"): one per resource prefix (e.g.
 * "/registry/nodes/"). Holds the current records (a skip list: get O(log n), ordered list
 * O(log n + k)) and a bounded ring of recent events; serves list and watch without touching
 * SQLite. It subscribes to the store, so it is current before any write completion fires
 * (read-your-writes). Slow watchers are dropped, never waited on.
 *
 * Thread-safety: all functions are safe from any thread; lists and gets run concurrently with
 * the store's writer thread applying changes (a readers-writer lock). */
#pragma once
#include "store/store.h"

/* Default ring size (events kept for watches resuming from an older resourceVersion). */
#define KITE_WCACHE_RING_DEFAULT 4096
/* Largest ring and largest per-watcher queue accepted (-EINVAL beyond). */
#define KITE_WCACHE_RING_MAX (1u << 22)
#define KITE_WATCHER_QUEUE_MAX (1u << 20)

struct kite_wcache;
/* Creates a cache of every key under prefix, subscribed to s (which must outlive the cache:
 * free every cache before closing the store). Fills the ring with the last ring_cap changes
 * still in the store's history, so after a restart a watcher resuming from a revision seen
 * before it gets every later change exactly once. ring_cap 0 = KITE_WCACHE_RING_DEFAULT. */
int kite_wcache_new(struct kite_store *s, const char *prefix, size_t ring_cap, struct kite_wcache **ret);
/* Frees the cache. Every watcher must be closed first. The store subscription remains but
 * becomes a no-op. NULL ok. */
void kite_wcache_free(struct kite_wcache *c);
/* The revision the cache is current to (the store's revision when it last applied a batch). */
int64_t kite_wcache_rev(struct kite_wcache *c);
/* Watches from a revision below this get -ENODATA: every change with a revision above it is
 * still in the ring. */
int64_t kite_wcache_oldest_rev(struct kite_wcache *c);
/* Number of live keys in the cache. */
size_t kite_wcache_count(struct kite_wcache *c);
/* The current record for key: a new reference, or NULL. */
struct kite_record *kite_wcache_get(struct kite_wcache *c, const char *key);

/* Returns true to keep r in a list. Called with the cache's read lock held: must not call
 * into the cache. */
typedef bool (*kite_record_filter)(struct kite_record *r, void *ud);
/* Snapshot list of keys under sub_prefix (e.g. "/registry/leases/kube-node-lease/"; NULL = all),
 * key order, strictly after start_after (NULL = from the start), keeping records for which filter
 * returns true (NULL = all), up to limit (0 = all). *ret_rev (optional) = the revision of the
 * snapshot; *ret_more (optional) = more matching keys remain. *ret gets new references (caller
 * unrefs each and frees the array; NULL when *ret_n is 0). */
int kite_wcache_list(struct kite_wcache *c, const char *sub_prefix, const char *start_after, size_t limit,
                     kite_record_filter filter, void *ud, struct kite_record ***ret, size_t *ret_n,
                     int64_t *ret_rev, bool *ret_more);

enum kite_event_type { KITE_EV_ADDED = 1, KITE_EV_MODIFIED, KITE_EV_DELETED };
/* rec: the new record (ADDED/MODIFIED) or the delete-event record (DELETED: value = the last
 * value, mod_rev = the delete's revision); prev: the replaced version (NULL for ADDED from a
 * create, or when unknown). */
struct kite_watch_event {
    enum kite_event_type type;
    int64_t rev;
    struct kite_record *rec;
    struct kite_record *prev;
};
/* Decides whether/how a watcher sees a change: return the type to deliver (e.g. turn MODIFIED
 * into ADDED/DELETED when a selector starts/stops matching) or 0 to skip. NULL = deliver as is.
 * Called on the writer thread at fan-out time, and on the kite_wcache_watch caller's thread for
 * events replayed from the ring. Must not block or call into the cache. */
typedef int (*kite_watch_filter)(const struct kite_watch_event *ev, void *ud);

struct kite_watcher;
/* Watches keys under sub_prefix (NULL = all) for events with rev > from_rev. The queue holds at
 * most max_queue events (0 = KITE_WCACHE_RING_DEFAULT); on overflow the watcher is marked dropped:
 * the event that did not fit and all later ones are not queued, the queued ones can still be
 * read (a client can resume from the last one it got). notify(ud) (may be NULL) is called on the writer thread, must not
 * block and must not call kite_wcache_* or kite_watcher_close (kite_watcher_next is fine): it is
 * edge-triggered — called when the queue goes from empty to non-empty or when the watcher is
 * dropped — so consumers drain with kite_watcher_next until it returns 0. If replayed events are
 * already queued when this returns, notify is not called for them: call kite_watcher_next first.
 * -ENODATA if from_rev < kite_wcache_oldest_rev (the API server answers 410 Expired). */
int kite_wcache_watch(struct kite_wcache *c, const char *sub_prefix, int64_t from_rev, size_t max_queue,
                      kite_watch_filter filter, void (*notify)(void *ud), void *ud, struct kite_watcher **ret);
/* Non-blocking pop of up to n events into out (caller unrefs rec and prev of each). Returns the
 * count (0 = none right now), or -EPIPE once the watcher was dropped for falling behind and its
 * queue is empty. */
int kite_watcher_next(struct kite_watcher *w, struct kite_watch_event *out, size_t n);
/* The revision the watcher's consumer is current to: when every event queued so far has been
 * taken with kite_watcher_next, every change up to the returned revision that the watcher's
 * prefix and filter let through has been delivered (a bookmark may carry it). 0 while events
 * are still queued, or once the watcher was dropped. */
int64_t kite_watcher_progress(struct kite_watcher *w);
/* True once the watcher was dropped for falling behind. */
bool kite_watcher_dropped(struct kite_watcher *w);
/* Unregisters and frees the watcher (NULL ok). Safe from any thread except inside notify; no
 * notify runs after it returns. */
void kite_watcher_close(struct kite_watcher *w);
