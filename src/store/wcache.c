/* The watch cache (wcache.h).
 *
 * State: a skip list of the current records ordered by key (list O(log n + k), so paginating
 * 50k keys never sorts) and a hash index of the same nodes (get and the update of an existing
 * key O(1): a write's cost does not grow with the number of objects), a ring of the last events (at most ring_cap of them and
 * hist_max bytes), `rev` (the newest applied revision) and `floor` (every event with a revision
 * above it is in the ring).
 *
 * Lock order (one order everywhere; a thread only ever takes locks further down the list):
 *   1. the store's sub_mu — held by the store's writer thread while it calls on_events;
 *   2. w_mu (the watcher list; held for a whole fan-out, so a new watcher's replay and the live
 *      events meet without gap or duplicate, and so close can promise no notify after it returns);
 *   3. lock (rwlock over the skip list, ring, rev, floor: lists and gets share it, the writer
 *      takes it exclusively once per batch);
 *   4. a watcher's own mu (its queue) — and, beside it, whatever notify takes (never a cache lock).
 * kite_wcache_new must therefore hold none of 2-4 while kite_store_subscribe_snapshot takes
 * sub_mu. It needs the writer to wait until the snapshot is loaded, which it gets from `ready`:
 * on_events waits on ready_cond (under ready_mu, a leaf lock) until new() has filled the cache,
 * which it does holding no store lock, so the wait always ends.
 *
 * Memory: records are refcounted and shared — the skip list, the ring's events, and watchers'
 * queues each hold references. An event is charged its record's bytes (struct, key, value; a
 * tombstone borrows the deleted version's value, so only its struct) plus its slot. Its `prev`
 * is not charged: it is the key's previous version, the record of the key's previous event,
 * charged there; so a ring's real footprint is its charge plus at most one older version of
 * each key it holds. A watcher's queue shares its records with the ring while they are still in
 * it, so its charge is an upper bound on what it alone pins.
 * The writer thread never waits on a consumer: a full queue drops its watcher. */
#include "store/wcache.h"

#include "base/map.h"

#include <pthread.h>
#include <stdatomic.h>

/* Skip list height: 4^16 keys before the top level stops paying off. */
#define SKIP_LEVELS 16

struct node {
    struct kite_record *rec; /* owned ref; NULL only in the head */
    int height;
    struct node *next[];
};

struct kite_watcher {
    struct kite_wcache *c;
    struct kite_watcher *prev, *next; /* in c->watchers, under c->w_mu */
    char *sub_prefix;
    int64_t from_rev;                 /* events at or before it are not the watcher's (a from_rev
                                         ahead of the cache waits for it, as kube-apiserver's cacher) */
    kite_watch_filter filter;
    void (*notify)(void *ud);
    void *ud;
    size_t max_len, max_bytes;
    pthread_mutex_t mu;
    /* under mu: a ring of cap slots (grown on demand up to max_len) holding len events with
     * owned refs, `bytes` their charge */
    struct kite_watch_event *q;
    size_t cap, head, len, bytes;
    bool dropped;
    size_t behind, behind_bytes; /* the backlog when it was dropped */
    /* every event up to this revision was offered to the watcher (release-stored by the fan-out
     * after its deliveries; see kite_watcher_progress) */
    _Atomic int64_t seen_rev;
};

struct event_vec {
    struct kite_watch_event *v;
    size_t n, cap;
};

struct slot {
    struct node *n; /* NULL: free */
    uint64_t h;     /* kite_hash of n's key */
};

struct kite_wcache {
    struct kite_store *store;
    char *prefix;
    pthread_rwlock_t lock;
    struct node *head;
    int height;
    size_t count;
    /* the same nodes by key's hash (open addressing, linear probing, cap a power of two, at most
     * half full): a get and the update of an existing key cost a hash and a strcmp instead of a
     * skip-list descent through ~17 nodes on cold cache lines (150k keys); each slot keeps its
     * key's hash, so a probe reads the node and its key only when the hashes agree */
    struct slot *slots;
    size_t slot_cap;
    uint64_t rng;
    struct kite_watch_event *ring;
    size_t ring_cap, ring_start, ring_len;
    size_t hist_bytes, hist_max;
    int64_t rev, floor;
    pthread_mutex_t w_mu;
    struct kite_watcher *watchers;
    /* set once new() has loaded the snapshot; on_events waits for it (see the lock order) */
    _Atomic bool ready;
    pthread_mutex_t ready_mu;
    pthread_cond_t ready_cond;
    /* on_events scratch (writer thread only) */
    struct kite_watch_event *batch;
    size_t batch_cap;
    struct event_vec evicted;
    struct kite_record **displaced;
};

/* ---- skip list ---- */

static struct node *node_new(struct kite_record *rec, int height) {
    struct node *n = kite_calloc(1, sizeof(*n) + height * sizeof(n->next[0]));
    n->rec = rec;
    n->height = height;
    return n;
}

static int random_height(struct kite_wcache *c) {
    /* xorshift64; p = 1/4 per level */
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    uint64_t x = c->rng;
    int h = 1;
    while (h < SKIP_LEVELS && (x & 3) == 0) {
        h++;
        x >>= 2;
    }
    return h;
}

/* The last node with key < key (inclusive = false) or <= key (inclusive = true) at each level. */
static struct node *seek(struct kite_wcache *c, const char *key, bool inclusive, struct node **update) {
    struct node *x = c->head;
    for (int l = c->height - 1; l >= 0; l--) {
        for (;;) {
            struct node *n = x->next[l];
            if (!n) break;
            int cmp = strcmp(n->rec->key, key);
            if (cmp > 0 || (cmp == 0 && !inclusive)) break;
            x = n;
        }
        if (update) update[l] = x;
    }
    return x;
}

/* ---- the hash index ---- */

static uint64_t key_hash(const char *key) { return kite_hash(key, strlen(key)); }

/* Places n (hash h) in the first free slot of its probe run; the index has room. */
static void index_place(struct kite_wcache *c, struct node *n, uint64_t h) {
    size_t i = (size_t)h & (c->slot_cap - 1);
    while (c->slots[i].n) i = (i + 1) & (c->slot_cap - 1);
    c->slots[i] = (struct slot){.n = n, .h = h};
}

static void index_grow(struct kite_wcache *c) {
    struct slot *old = c->slots;
    size_t old_cap = c->slot_cap;
    c->slot_cap = old_cap ? 2 * old_cap : 64;
    c->slots = kite_calloc(c->slot_cap, sizeof(*c->slots));
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].n) index_place(c, old[i].n, old[i].h);
    free(old);
}

/* n's key (hash h) is not in the index yet; count is updated by the caller. */
static void index_add(struct kite_wcache *c, struct node *n, uint64_t h) {
    if (2 * (c->count + 1) > c->slot_cap) index_grow(c);
    index_place(c, n, h);
}

static size_t index_pos(const struct kite_wcache *c, const char *key, uint64_t h) {
    if (!c->slot_cap) return SIZE_MAX;
    for (size_t i = (size_t)h & (c->slot_cap - 1);; i = (i + 1) & (c->slot_cap - 1)) {
        if (!c->slots[i].n) return SIZE_MAX;
        if (c->slots[i].h == h && strcmp(c->slots[i].n->rec->key, key) == 0) return i;
    }
}

/* Removes slot i, moving later entries of its probe run back (no tombstones). */
static void index_del_at(struct kite_wcache *c, size_t i) {
    size_t mask = c->slot_cap - 1;
    c->slots[i].n = NULL;
    for (size_t j = (i + 1) & mask; c->slots[j].n; j = (j + 1) & mask) {
        size_t home = (size_t)c->slots[j].h & mask;
        /* j's entry may move to i when i lies cyclically in [home, j) */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            c->slots[i] = c->slots[j];
            c->slots[j].n = NULL;
            i = j;
        }
    }
}

static struct node *find(struct kite_wcache *c, const char *key) {
    size_t i = index_pos(c, key, key_hash(key));
    return i == SIZE_MAX ? NULL : c->slots[i].n;
}

/* Returns the record rec replaced (the caller's reference), or NULL. */
static struct kite_record *skip_put(struct kite_wcache *c, struct kite_record *rec) {
    uint64_t kh = key_hash(rec->key);
    size_t at = index_pos(c, rec->key, kh);
    struct node *n = at == SIZE_MAX ? NULL : c->slots[at].n;
    if (n) { /* the same key: the node stays where it is */
        struct kite_record *old = n->rec;
        n->rec = kite_record_ref(rec);
        return old;
    }
    struct node *update[SKIP_LEVELS];
    seek(c, rec->key, false, update);
    int h = random_height(c);
    for (int l = c->height; l < h; l++) update[l] = c->head;
    if (h > c->height) c->height = h;
    n = node_new(kite_record_ref(rec), h);
    for (int l = 0; l < h; l++) {
        n->next[l] = update[l]->next[l];
        update[l]->next[l] = n;
    }
    index_add(c, n, kh);
    c->count++;
    return NULL;
}

/* Returns the removed record (the caller's reference), or NULL. */
static struct kite_record *skip_del(struct kite_wcache *c, const char *key) {
    size_t at = index_pos(c, key, key_hash(key));
    if (at == SIZE_MAX) return NULL;
    index_del_at(c, at);
    struct node *update[SKIP_LEVELS];
    struct node *n = seek(c, key, false, update)->next[0];
    if (!n || strcmp(n->rec->key, key) != 0) return NULL;
    for (int l = 0; l < n->height; l++)
        if (update[l]->next[l] == n) update[l]->next[l] = n->next[l];
    while (c->height > 1 && !c->head->next[c->height - 1]) c->height--;
    struct kite_record *old = n->rec;
    free(n);
    c->count--;
    return old;
}

/* ---- ring and queues ---- */

static void event_release(struct kite_watch_event *e) {
    kite_record_unref(e->rec);
    kite_record_unref(e->prev);
}

/* What the record holds on its own: one allocation of struct, key and value, except a tombstone,
 * which is only the struct (it borrows the deleted version's bytes). */
static size_t record_bytes(const struct kite_record *r) {
    return sizeof(*r) + (r->deleted ? 0 : strlen(r->key) + 1 + r->len + 1);
}

/* An event's charge in the ring (see "Memory" above). */
static size_t event_bytes(const struct kite_watch_event *e) {
    return sizeof(*e) + record_bytes(e->rec);
}

static void vec_push(struct event_vec *v, const struct kite_watch_event *e) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->v = kite_realloc(v->v, v->cap * sizeof(*v->v));
    }
    v->v[v->n++] = *e;
}

static struct kite_watch_event *ring_at(struct kite_wcache *c, size_t i) {
    return &c->ring[(c->ring_start + i) % c->ring_cap];
}

/* Drops the oldest event: its references go to evicted (the caller releases them, outside the
 * locks), or are released here when evicted is NULL. */
static void ring_pop(struct kite_wcache *c, struct event_vec *evicted) {
    struct kite_watch_event *old = ring_at(c, 0);
    c->floor = old->rev;
    c->hist_bytes -= event_bytes(old);
    if (evicted)
        vec_push(evicted, old);
    else
        event_release(old);
    c->ring_start = (c->ring_start + 1) % c->ring_cap;
    c->ring_len--;
}

/* Takes ownership of e's references. Older events leave the ring while it would hold more than
 * ring_cap events or hist_max bytes; e itself always goes in. */
static void ring_push(struct kite_wcache *c, const struct kite_watch_event *e, struct event_vec *evicted) {
    size_t b = event_bytes(e);
    while (c->ring_len && (c->ring_len == c->ring_cap || c->hist_bytes + b > c->hist_max)) ring_pop(c, evicted);
    *ring_at(c, c->ring_len++) = *e;
    c->hist_bytes += b;
}

static enum kite_event_type ev_type(enum kite_write_type t) {
    return t == KITE_WRITE_CREATE ? KITE_EV_ADDED : t == KITE_WRITE_UPDATE ? KITE_EV_MODIFIED : KITE_EV_DELETED;
}

/* Doubles w's slots (up to max_len), keeping the queued events in order from slot 0. */
static void queue_grow(struct kite_watcher *w) {
    size_t cap = KITE_MIN(KITE_MAX(2 * w->cap, (size_t)KITE_WATCHER_QUEUE_INITIAL), w->max_len);
    struct kite_watch_event *q = kite_malloc(cap * sizeof(*q));
    for (size_t i = 0; i < w->len; i++) q[i] = w->q[(w->head + i) % w->cap];
    free(w->q);
    w->q = q;
    w->cap = cap;
    w->head = 0;
}

/* Offers one event to one watcher. Returns true when notify should run. A watcher dropped here
 * has its queue handed to *dropped (the caller releases it after the fan-out; NULL = here). */
static bool deliver(struct kite_watcher *w, const struct kite_watch_event *e, struct event_vec *dropped) {
    if (e->rev <= w->from_rev || !kite_startswith(e->rec->key, w->sub_prefix)) return false;
    int type = w->filter ? w->filter(e, w->ud) : (int)e->type;
    if (type == 0) return false;
    size_t b = record_bytes(e->rec);
    bool wake = false;
    struct kite_watch_event *q = NULL;
    size_t qcap = 0, qhead = 0, qlen = 0;
    pthread_mutex_lock(&w->mu);
    if (w->dropped) {
        /* already told */
    } else if (w->len == w->max_len || (w->len && w->bytes + b > w->max_bytes)) {
        w->dropped = true;
        w->behind = w->len + 1;
        w->behind_bytes = w->bytes + b;
        q = w->q, qcap = w->cap, qhead = w->head, qlen = w->len;
        w->q = NULL;
        w->cap = w->head = w->len = w->bytes = 0;
        wake = true;
    } else {
        if (w->len == w->cap) queue_grow(w);
        w->q[(w->head + w->len) % w->cap] = (struct kite_watch_event){
            .type = type, .rev = e->rev, .rec = kite_record_ref(e->rec), .prev = kite_record_ref(e->prev)
        };
        w->bytes += b;
        wake = w->len++ == 0;
    }
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i < qlen; i++) {
        struct kite_watch_event *x = &q[(qhead + i) % qcap];
        if (dropped)
            vec_push(dropped, x);
        else
            event_release(x);
    }
    free(q);
    return wake;
}

/* ---- store callbacks ---- */

static void on_history(void *ud, const struct kite_store_event *ev) {
    struct kite_wcache *c = ud;
    struct kite_watch_event e = {
        ev_type(ev->type), ev->rev, kite_record_ref(ev->rec), kite_record_ref(ev->prev)
    };
    ring_push(c, &e, NULL);
}

/* A batch is applied under one hold of the write lock, and the references it displaces (records
 * replaced in the skip list, events pushed out of the ring, queues of dropped watchers) are
 * dropped only after both locks are released: dropping the last reference of a record frees
 * its cached object, which readers must not wait for. The batch's events are fanned out from
 * their own copy (one more reference each), valid even when the batch is longer than the ring. */
static void on_events(void *ud, const struct kite_store_event *evs, size_t n) {
    struct kite_wcache *c = ud;
    if (!atomic_load_explicit(&c->ready, memory_order_acquire)) {
        pthread_mutex_lock(&c->ready_mu);
        while (!atomic_load_explicit(&c->ready, memory_order_acquire)) pthread_cond_wait(&c->ready_cond, &c->ready_mu);
        pthread_mutex_unlock(&c->ready_mu);
    }
    if (n > c->batch_cap) {
        c->batch_cap = KITE_MAX(n, 2 * c->batch_cap);
        c->batch = kite_realloc(c->batch, c->batch_cap * sizeof(*c->batch));
        c->displaced = kite_realloc(c->displaced, c->batch_cap * sizeof(*c->displaced));
    }
    size_t ndisp = 0;
    c->evicted.n = 0;
    pthread_mutex_lock(&c->w_mu);
    pthread_rwlock_wrlock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        const struct kite_store_event *ev = &evs[i];
        struct kite_watch_event e = {
            ev_type(ev->type), ev->rev, kite_record_ref(ev->rec), kite_record_ref(ev->prev)
        };
        c->batch[i] = e;
        struct kite_record *old = ev->type == KITE_WRITE_DELETE ? skip_del(c, ev->rec->key) : skip_put(c, ev->rec);
        if (old) c->displaced[ndisp++] = old;
        kite_record_ref(e.rec);
        kite_record_ref(e.prev);
        ring_push(c, &e, &c->evicted);
    }
    c->rev = evs[n - 1].rev;
    pthread_rwlock_unlock(&c->lock);
    if (c->watchers) {
        for (size_t i = 0; i < n; i++)
            for (struct kite_watcher *w = c->watchers; w; w = w->next)
                if (deliver(w, &c->batch[i], &c->evicted) && w->notify) w->notify(w->ud);
        for (struct kite_watcher *w = c->watchers; w; w = w->next)
            atomic_store_explicit(&w->seen_rev, evs[n - 1].rev, memory_order_release);
    }
    pthread_mutex_unlock(&c->w_mu);
    for (size_t i = 0; i < n; i++) event_release(&c->batch[i]);
    for (size_t i = 0; i < c->evicted.n; i++) event_release(&c->evicted.v[i]);
    for (size_t i = 0; i < ndisp; i++) kite_record_unref(c->displaced[i]);
    /* a burst (a long batch, a dropped watcher's queue) leaves no big scratch behind */
    if (c->evicted.cap > 4096) {
        free(c->evicted.v);
        c->evicted = (struct event_vec){0};
    }
}

/* ---- public API ---- */

int kite_wcache_new(struct kite_store *s, const char *prefix, size_t ring_cap, struct kite_wcache **ret) {
    if (!s || !prefix) return -EINVAL;
    if (ring_cap == 0) ring_cap = KITE_WCACHE_RING_DEFAULT;
    if (ring_cap > KITE_WCACHE_RING_MAX) return -EINVAL;
    struct kite_wcache *c = kite_calloc(1, sizeof(*c));
    c->store = s;
    c->prefix = kite_strdup(prefix);
    pthread_rwlock_init(&c->lock, NULL);
    pthread_mutex_init(&c->w_mu, NULL);
    pthread_mutex_init(&c->ready_mu, NULL);
    pthread_cond_init(&c->ready_cond, NULL);
    c->head = node_new(NULL, SKIP_LEVELS);
    c->height = 1;
    c->rng = kite_hash(prefix, strlen(prefix)) | 1;
    c->ring_cap = ring_cap;
    c->ring = kite_calloc(ring_cap, sizeof(*c->ring));
    c->hist_max = KITE_WCACHE_HISTORY_BYTES_DEFAULT;
    c->floor = kite_store_compacted_rev(s);

    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev = 0;
    /* The writer may call on_events as soon as the subscription exists, before the snapshot is
     * loaded: it waits for `ready`. No cache lock is held here (see the lock order). Until ready
     * nothing else can reach c, so filling it needs no lock: ready's release store publishes it. */
    /* The replay fills the ring: older changes than it holds would only pass through it. */
    struct kite_store_replay replay = {.cb = on_history, .ud = c, .max = ring_cap};
    int r = kite_store_subscribe_snapshot(s, prefix, on_events, c, &replay, &recs, &n, &rev);
    if (r < 0) {
        kite_wcache_free(c);
        return r;
    }
    /* Records arrive in key order: append at the tail, O(1) each. */
    struct node *tail[SKIP_LEVELS];
    for (int l = 0; l < SKIP_LEVELS; l++) tail[l] = c->head;
    for (size_t i = 0; i < n; i++) {
        int h = random_height(c);
        struct node *nd = node_new(recs[i], h); /* takes the snapshot's ref */
        for (int l = 0; l < h; l++) {
            tail[l]->next[l] = nd;
            tail[l] = nd;
        }
        if (h > c->height) c->height = h;
    }
    if (n) { /* the index, sized once */
        c->slot_cap = 64;
        while (c->slot_cap < 2 * n) c->slot_cap *= 2;
        c->slots = kite_calloc(c->slot_cap, sizeof(*c->slots));
        for (struct node *x = c->head->next[0]; x; x = x->next[0]) index_place(c, x, key_hash(x->rec->key));
    }
    c->count = n;
    free(recs);
    c->rev = rev;
    /* A compaction racing the history read may have removed some of the oldest events. */
    c->floor = KITE_MAX(c->floor, KITE_MAX(replay.from, kite_store_compacted_rev(s)));
    pthread_mutex_lock(&c->ready_mu);
    atomic_store_explicit(&c->ready, true, memory_order_release);
    pthread_cond_broadcast(&c->ready_cond);
    pthread_mutex_unlock(&c->ready_mu);
    *ret = c;
    return 0;
}

void kite_wcache_free(struct kite_wcache *c) {
    if (!c) return;
    kite_store_unsubscribe(c->store, on_events, c);
    for (struct node *n = c->head, *next; n; n = next) {
        next = n->next[0];
        kite_record_unref(n->rec);
        free(n);
    }
    for (size_t i = 0; i < c->ring_len; i++) event_release(ring_at(c, i));
    free(c->slots);
    free(c->ring);
    free(c->batch);
    free(c->evicted.v);
    free(c->displaced);
    pthread_rwlock_destroy(&c->lock);
    pthread_mutex_destroy(&c->w_mu);
    pthread_mutex_destroy(&c->ready_mu);
    pthread_cond_destroy(&c->ready_cond);
    free(c->prefix);
    free(c);
}

void kite_wcache_set_history_bytes(struct kite_wcache *c, size_t max_bytes) {
    struct event_vec evicted = {0};
    pthread_rwlock_wrlock(&c->lock);
    c->hist_max = max_bytes ? max_bytes : KITE_WCACHE_HISTORY_BYTES_DEFAULT;
    while (c->ring_len > 1 && c->hist_bytes > c->hist_max) ring_pop(c, &evicted);
    pthread_rwlock_unlock(&c->lock);
    for (size_t i = 0; i < evicted.n; i++) event_release(&evicted.v[i]);
    free(evicted.v);
}

void kite_wcache_stats(struct kite_wcache *c, struct kite_wcache_stats *ret) {
    pthread_rwlock_rdlock(&c->lock);
    *ret = (struct kite_wcache_stats){
        .events = c->ring_len, .bytes = c->hist_bytes, .max_events = c->ring_cap, .max_bytes = c->hist_max,
        .oldest_rev = c->floor,
    };
    pthread_rwlock_unlock(&c->lock);
}

/* Under the lock: the cache is current to its last event's revision, and to the revision the
 * store has handed every subscriber (a batch above it not yet applied here would hold the
 * store's fan-out on this lock, so it is not counted). */
static int64_t current_rev(struct kite_wcache *c) { return KITE_MAX(c->rev, kite_store_applied_rev(c->store)); }

int64_t kite_wcache_rev(struct kite_wcache *c) {
    pthread_rwlock_rdlock(&c->lock);
    int64_t r = current_rev(c);
    pthread_rwlock_unlock(&c->lock);
    return r;
}

int64_t kite_wcache_oldest_rev(struct kite_wcache *c) {
    pthread_rwlock_rdlock(&c->lock);
    int64_t r = c->floor;
    pthread_rwlock_unlock(&c->lock);
    return r;
}

size_t kite_wcache_count(struct kite_wcache *c) {
    pthread_rwlock_rdlock(&c->lock);
    size_t n = c->count;
    pthread_rwlock_unlock(&c->lock);
    return n;
}

struct kite_record *kite_wcache_get(struct kite_wcache *c, const char *key) {
    pthread_rwlock_rdlock(&c->lock);
    struct node *n = find(c, key);
    struct kite_record *r = n ? kite_record_ref(n->rec) : NULL;
    pthread_rwlock_unlock(&c->lock);
    return r;
}

int kite_wcache_list(struct kite_wcache *c, const char *sub_prefix, const char *start_after, size_t limit,
                     kite_record_filter filter, void *ud, struct kite_record ***ret, size_t *ret_n,
                     int64_t *ret_rev, bool *ret_more) {
    if (!sub_prefix) sub_prefix = "";
    struct kite_record **v = NULL;
    size_t n = 0, cap = 0;
    bool more = false;
    pthread_rwlock_rdlock(&c->lock);
    bool after = start_after && strcmp(start_after, sub_prefix) >= 0;
    struct node *x = seek(c, after ? start_after : sub_prefix, after, NULL)->next[0];
    for (; x && kite_startswith(x->rec->key, sub_prefix); x = x->next[0]) {
        if (filter && !filter(x->rec, ud)) continue;
        if (limit && n == limit) {
            more = true;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : (limit && limit < 64 ? limit : 64);
            v = kite_realloc(v, cap * sizeof(*v));
        }
        v[n++] = kite_record_ref(x->rec);
    }
    int64_t rev = current_rev(c);
    pthread_rwlock_unlock(&c->lock);
    *ret = v;
    *ret_n = n;
    if (ret_rev) *ret_rev = rev;
    if (ret_more) *ret_more = more;
    return 0;
}

static void watcher_free(struct kite_watcher *w) {
    for (size_t i = 0; i < w->len; i++) event_release(&w->q[(w->head + i) % w->cap]);
    pthread_mutex_destroy(&w->mu);
    free(w->q);
    free(w->sub_prefix);
    free(w);
}

int kite_wcache_watch(struct kite_wcache *c, const char *sub_prefix, int64_t from_rev, size_t max_queue,
                      size_t max_queue_bytes, kite_watch_filter filter, void (*notify)(void *ud), void *ud,
                      struct kite_watcher **ret) {
    if (max_queue == 0) max_queue = KITE_WATCHER_QUEUE_DEFAULT;
    if (max_queue > KITE_WATCHER_QUEUE_MAX) return -EINVAL;
    struct kite_watcher *w = kite_calloc(1, sizeof(*w));
    w->c = c;
    w->sub_prefix = kite_strdup(sub_prefix ? sub_prefix : "");
    w->from_rev = from_rev;
    w->filter = filter;
    w->notify = notify;
    w->ud = ud;
    w->max_len = max_queue;
    w->max_bytes = max_queue_bytes ? max_queue_bytes : KITE_WATCHER_QUEUE_BYTES_DEFAULT;
    pthread_mutex_init(&w->mu, NULL);

    pthread_mutex_lock(&c->w_mu);
    pthread_rwlock_rdlock(&c->lock);
    if (from_rev < c->floor) {
        pthread_rwlock_unlock(&c->lock);
        pthread_mutex_unlock(&c->w_mu);
        watcher_free(w);
        return -ENODATA;
    }
    /* The ring is in revision order: binary search for the first event after from_rev. */
    size_t lo = 0, hi = c->ring_len;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ring_at(c, mid)->rev <= from_rev)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* (a drop here releases the queue under the locks: its records are all still in the ring) */
    for (size_t i = lo; i < c->ring_len && !w->dropped; i++) deliver(w, ring_at(c, i), NULL);
    atomic_store_explicit(&w->seen_rev, KITE_MAX(from_rev, c->rev), memory_order_release);
    pthread_rwlock_unlock(&c->lock);
    w->next = c->watchers;
    if (w->next) w->next->prev = w;
    c->watchers = w;
    pthread_mutex_unlock(&c->w_mu);
    *ret = w;
    return 0;
}

int kite_watcher_next(struct kite_watcher *w, struct kite_watch_event *out, size_t n) {
    pthread_mutex_lock(&w->mu);
    size_t k = 0;
    for (; k < n && w->len; k++) {
        out[k] = w->q[w->head];
        w->bytes -= record_bytes(out[k].rec);
        w->head = (w->head + 1) % w->cap;
        w->len--;
    }
    int r = k == 0 && w->dropped ? -EPIPE : (int)k;
    pthread_mutex_unlock(&w->mu);
    return r;
}

int64_t kite_watcher_progress(struct kite_watcher *w) {
    /* seen_rev first: the deliveries before its store are then visible in len */
    int64_t seen = atomic_load_explicit(&w->seen_rev, memory_order_acquire);
    pthread_mutex_lock(&w->mu);
    bool caught_up = w->len == 0 && !w->dropped;
    pthread_mutex_unlock(&w->mu);
    return caught_up ? seen : 0;
}

bool kite_watcher_dropped(struct kite_watcher *w) {
    pthread_mutex_lock(&w->mu);
    bool d = w->dropped;
    pthread_mutex_unlock(&w->mu);
    return d;
}

void kite_watcher_stats(struct kite_watcher *w, struct kite_watcher_stats *ret) {
    pthread_mutex_lock(&w->mu);
    *ret = (struct kite_watcher_stats){
        .queued = w->len, .queued_bytes = w->bytes, .slots = w->cap, .slot_bytes = w->cap * sizeof(*w->q),
        .dropped = w->dropped, .behind = w->behind, .behind_bytes = w->behind_bytes,
    };
    pthread_mutex_unlock(&w->mu);
}

void kite_watcher_close(struct kite_watcher *w) {
    if (!w) return;
    struct kite_wcache *c = w->c;
    pthread_mutex_lock(&c->w_mu);
    if (w->prev)
        w->prev->next = w->next;
    else
        c->watchers = w->next;
    if (w->next) w->next->prev = w->prev;
    pthread_mutex_unlock(&c->w_mu);
    watcher_free(w);
}
