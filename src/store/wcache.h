/* kite watch cache (DESIGN.md "Watch cache"): one per resource prefix (e.g.
 * "/registry/nodes/"). Holds the current records (a skip list: get O(log n), ordered list
 * O(log n + k)) and a bounded ring of recent events; serves list and watch without touching
 * SQLite. It subscribes to the store, so it is current before any write completion fires
 * (read-your-writes). Slow watchers are dropped, never waited on. Both the ring and every
 * watcher's queue are bounded by events and by bytes.
 *
 * Thread-safety: all functions are safe from any thread; lists and gets run concurrently with
 * the store's writer thread applying changes (a readers-writer lock). */
#pragma once
#include "store/store.h"

/* History (the ring of recent events kept for watches resuming from an older resourceVersion),
 * per cache: at most this many events AND this many bytes, whichever binds first. The count
 * keeps the ring's slot array small (4096 x 32 B); the bytes bound what big objects can pin: 4096
 * versions of a 100 KB object would be 400 MB, of a 1.5 MiB one 6 GiB. 32 MiB still holds the
 * full 4096 events of objects up to 8 KB (leases, pods, nodes are 0.5-5 KB), so resuming works
 * as before for ordinary objects, and at least 21 versions of the largest object allowed
 * (KITE_STORE_VALUE_MAX); with ~25 resource types all churning huge objects the worst case is
 * ~800 MB. */
#define KITE_WCACHE_RING_DEFAULT 4096
#define KITE_WCACHE_HISTORY_BYTES_DEFAULT ((size_t)32 << 20)
/* Largest ring and largest per-watcher queue accepted (-EINVAL beyond). */
#define KITE_WCACHE_RING_MAX (1u << 22)
#define KITE_WATCHER_QUEUE_MAX (1u << 20)
/* A watcher's queue, when the caller passes 0: events and bytes it may lag behind before it is
 * dropped. The bytes bound what one client that stopped reading can pin once its events have
 * left the history (without it, 10,000 events of 1.5 MiB objects = 15 GiB). 16 MiB is more
 * than 10 s of a busy lease stream (~1,000 renewals/s of ~600 B), so a client that reads at
 * all keeps up; a watcher's events are mostly the history's records (shared, counted in both). */
#define KITE_WATCHER_QUEUE_DEFAULT 10000
#define KITE_WATCHER_QUEUE_BYTES_DEFAULT ((size_t)16 << 20)
/* A watcher's queue starts with this many slots and doubles as needed, so an idle watch costs
 * ~1 KB rather than its whole bound up front. */
#define KITE_WATCHER_QUEUE_INITIAL 16

struct kite_wcache;
/* Creates a cache of every key under prefix, subscribed to s (which must outlive the cache:
 * free every cache before closing the store). Fills the ring with the last ring_cap changes
 * still in the store's history, so after a restart a watcher resuming from a revision seen
 * before it gets every later change exactly once. ring_cap 0 = KITE_WCACHE_RING_DEFAULT; the
 * ring also holds at most KITE_WCACHE_HISTORY_BYTES_DEFAULT bytes (kite_wcache_set_history_bytes). */
int kite_wcache_new(struct kite_store *s, const char *prefix, size_t ring_cap, struct kite_wcache **ret);
/* Sets the ring's byte bound (0 = KITE_WCACHE_HISTORY_BYTES_DEFAULT), dropping the oldest
 * events at once if it now holds more. The newest event always stays, even if larger. */
void kite_wcache_set_history_bytes(struct kite_wcache *c, size_t max_bytes);
/* The ring's contents. Bytes are what its events hold: each event's record (struct, key and
 * value; a DELETE's record borrows the value of the version it deleted) plus its slot. A
 * record's cached parse (kite_record_set_cache) is not counted. */
struct kite_wcache_stats {
    size_t events, bytes, max_events, max_bytes;
    int64_t oldest_rev; /* = kite_wcache_oldest_rev */
};
void kite_wcache_stats(struct kite_wcache *c, struct kite_wcache_stats *ret);
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
 * most max_queue events (0 = KITE_WATCHER_QUEUE_DEFAULT) and max_queue_bytes of records (0 =
 * KITE_WATCHER_QUEUE_BYTES_DEFAULT; one event always fits into an empty queue); it starts with
 * KITE_WATCHER_QUEUE_INITIAL slots and grows as needed. When an event does not fit the watcher
 * is dropped: its queued events are released at once (a consumer that fell this far behind
 * re-lists, so they would be of no use) and it gets no more. notify(ud) (may be NULL) is called
 * on the writer thread, must not block and must not call kite_wcache_* or kite_watcher_close
 * (kite_watcher_next, _dropped, _stats are fine): it is edge-triggered — called when the queue
 * goes from empty to non-empty or when the watcher is dropped — so consumers drain with
 * kite_watcher_next until it returns 0. If replayed events are already queued when this
 * returns, notify is not called for them: call kite_watcher_next first (the replay may also
 * have dropped the watcher already).
 * A from_rev ahead of the cache delivers nothing until the cache passes it.
 * -ENODATA if from_rev < kite_wcache_oldest_rev (the API server answers 410 Expired). */
int kite_wcache_watch(struct kite_wcache *c, const char *sub_prefix, int64_t from_rev, size_t max_queue,
                      size_t max_queue_bytes, kite_watch_filter filter, void (*notify)(void *ud), void *ud,
                      struct kite_watcher **ret);
/* Non-blocking pop of up to n events into out (caller unrefs rec and prev of each). Returns the
 * count (0 = none right now), or -EPIPE once the watcher was dropped for falling behind. */
int kite_watcher_next(struct kite_watcher *w, struct kite_watch_event *out, size_t n);
/* The revision the watcher's consumer is current to: when every event queued so far has been
 * taken with kite_watcher_next, every change up to the returned revision that the watcher's
 * prefix and filter let through has been delivered (a bookmark may carry it). 0 while events
 * are still queued, or once the watcher was dropped. */
int64_t kite_watcher_progress(struct kite_watcher *w);
/* True once the watcher was dropped for falling behind. */
bool kite_watcher_dropped(struct kite_watcher *w);
/* A watcher's queue. queued_bytes counts the queued events' records as kite_wcache_stats does
 * (shared with the ring while they are still in it); slot_bytes is the queue's own array. Once
 * dropped, behind/behind_bytes say how far it was behind when it was (the queue, counting the
 * event that did not fit), and the queue is empty. */
struct kite_watcher_stats {
    size_t queued, queued_bytes, slots, slot_bytes;
    bool dropped;
    size_t behind, behind_bytes;
};
void kite_watcher_stats(struct kite_watcher *w, struct kite_watcher_stats *ret);
/* Unregisters and frees the watcher (NULL ok). Safe from any thread except inside notify; no
 * notify runs after it returns. */
void kite_watcher_close(struct kite_watcher *w);
