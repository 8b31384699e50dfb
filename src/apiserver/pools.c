/* The values the server hands out (registry.h, kite_pools): Services' cluster IPs from
 * --service-cluster-ip-range and their node ports from 30000-32767, as kube-apiserver's
 * allocators, and the `kubernetes` Service that holds the range's first address.
 *
 * What is in use is derived from the stored objects, never stored apart from them: at start
 * the kinds' watch caches are listed, then a watcher drained on the store's writer thread
 * follows every change (as the Node authorizer's graph does), so a value an object holds is
 * marked before the write that stored it is acknowledged, and freed when the object is deleted
 * or lets it go, however that happens (DELETE, a namespace's deletion, an update to
 * ExternalName). A write that allocates reserves its values for its own lifetime: a write that
 * fails (validation, a conflict, a name already taken) or is a dry run leaves nothing behind,
 * and one that succeeds hands its values over to the stored object before its reservation
 * ends. A write recomputed after a conflict may take again what it reserved.
 *
 * Several API servers on one store (etcd) cannot see each other's writes in flight, so what
 * is allocated is also kept where they all see it, as kube-apiserver keeps it: one
 * RangeAllocation object per pool (/registry/ranges/serviceips, .../servicenodeports; its data
 * a bitmap as Go's big.Int bytes, bit i = the range's i-th usable value) changed only by
 * compare-and-swap. A value is set there before the write that uses it is submitted (a second
 * server's CAS then fails and it picks again), and cleared by the server whose write let it go
 * (a failed write, an update that dropped it, a delete) once that write is over. A server that
 * dies in between leaves a value set that nothing holds: the repair pass (at start, then every
 * KITE_POOLS_REPAIR_S, as kube-apiserver's repair controllers) sets what stored Services hold
 * and the bitmap lacks (a missing or stale bitmap is rebuilt from the Services), and clears
 * what nothing holds once it has seen it so REPAIR_LEAK_PASSES passes in a row. The same code
 * runs on SQLite, through the same store interface. */
#include "apiserver/internal.h"
#include "base/base64.h"
#include "base/log.h"
#include "base/map.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <time.h>

/* CAS attempts on one bitmap before a write gets -EAGAIN (another server keeps winning). */
#define RANGE_CAS_TRIES 200
/* A value set in a bitmap that no stored object holds is cleared after this many repair passes
 * in a row found it so (kube-apiserver's numRepairsBeforeLeakCleanup): a write of another
 * server may be between its allocation and its store write. */
#define REPAIR_LEAK_PASSES 3
/* Values queued for release (a deletecollection's): beyond it they are left to the repair. */
#define RELEASE_QUEUE_MAX 65536

static const char *const RANGE_KEYS[KITE_POOL_COUNT] = {"/registry/ranges/serviceips",
                                                        "/registry/ranges/servicenodeports"};

/* KEP-3070: dynamic allocation prefers the range above this band, so addresses picked by hand
 * from its start rarely collide: min(max(16, size / 16), 256). */
#define BAND_MIN 16
#define BAND_MAX 256
#define BAND_STEP 16

struct pool {
    uint32_t base, size;  /* values base .. base + size - 1 */
    uint32_t lo, hi;      /* offsets a value may take: [lo, hi) */
    uint32_t band;        /* offsets below it are picked last */
    uint8_t *stored;      /* per offset: objects holding it (saturating) */
    uint8_t *reserved;    /* per offset: writes in flight holding it */
    char range[48];
    /* the shared bitmap (RangeAllocation), as last read; offsets [lo, hi) -> bits [0, hi - lo) */
    pthread_mutex_t cas_mu; /* one CAS of it at a time from this server (keeps bits and leaks) */
    uint8_t *bits;          /* per offset - lo: set in the store */
    uint8_t *leaks;         /* per offset - lo: repair passes in a row that found it set and held by nothing */
};

struct held {
    size_t n;
    struct kite_pool_value v[];
};

struct kite_pools_state {
    pthread_mutex_t mu;
    struct pool pools[KITE_POOL_COUNT];
    struct kite_map held;      /* stored key -> struct held */
    const struct kite_resource *res;
    struct kite_wcache *cache;
    struct kite_watcher *w;
    bool broken;
    struct kite_store *store;
    /* releases waiting for the repair thread (deletecollection's completions run on the store's
     * writer thread, which must not wait for a store write) */
    pthread_mutex_t qmu;
    pthread_cond_t qcond;
    struct kite_pool_value *queue;
    size_t nq, capq;
    bool stop;
    pthread_t thread;
    bool thread_started;
    int64_t repair_s;
};

/* A write's view of the pools: what it reserved (released by pools_op_end). */
struct kite_pools_op {
    struct kite_pools iface;
    struct kite_pools_state *st;
    bool dry_run;   /* reads the bitmaps, never writes them */
    bool committed; /* the write is stored: what it took is the object's */
    size_t n;
    struct kite_pool_value taken[KITE_POOL_VALUES_MAX];
    bool deletes;   /* the write deletes the object it replaces */
    size_t n_old;   /* what the replaced object held and the new one does not */
    struct kite_pool_value old[KITE_POOL_VALUES_MAX];
};

static int parse_cidr(const char *s, uint32_t *ret_base, unsigned *ret_prefix) {
    char ip[INET_ADDRSTRLEN];
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || (size_t)(slash - s) >= sizeof ip) return -EINVAL;
    memcpy(ip, s, (size_t)(slash - s));
    ip[slash - s] = 0;
    char *end;
    unsigned long prefix = strtoul(slash + 1, &end, 10);
    struct in_addr a;
    if (*end || end == slash + 1 || prefix > 32 || inet_pton(AF_INET, ip, &a) != 1) return -EINVAL;
    uint32_t base = ntohl(a.s_addr);
    uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
    if (base & ~mask) return -EINVAL; /* host bits set: say the network */
    *ret_base = base;
    *ret_prefix = (unsigned)prefix;
    return 0;
}

static void pool_init(struct pool *p, uint32_t base, uint32_t size, uint32_t lo, uint32_t hi, uint32_t band) {
    p->base = base;
    p->size = size;
    p->lo = lo;
    p->hi = hi;
    p->band = band;
    p->stored = kite_calloc(size, 1);
    p->reserved = kite_calloc(size, 1);
    p->bits = kite_calloc(hi - lo, 1);
    p->leaks = kite_calloc(hi - lo, 1);
    pthread_mutex_init(&p->cas_mu, NULL);
}

static bool in_use(const struct pool *p, uint32_t off) { return p->stored[off] || p->reserved[off]; }

/* ---- the stored objects' values (the watcher) -------------------------------------------- */

static void mark(struct kite_pools_state *st, const struct kite_pool_value *v, size_t n, int delta) {
    for (size_t i = 0; i < n; i++) {
        struct pool *p = &st->pools[v[i].pool];
        if (v[i].v < p->base || v[i].v - p->base >= p->size) continue; /* outside today's range */
        uint8_t *c = &p->stored[v[i].v - p->base];
        if (delta > 0 && *c < UINT8_MAX) (*c)++;
        else if (delta < 0 && *c > 0) (*c)--;
    }
}

static void apply(struct kite_pools_state *st, struct kite_record *rec, bool deleted) {
    struct held *old = kite_map_del(&st->held, rec->key);
    if (old) {
        mark(st, old->v, old->n, -1);
        free(old);
    }
    if (deleted) return;
    struct kite_pool_value v[KITE_POOL_VALUES_MAX];
    size_t n = st->res->held(kite_apiserver_record_object(rec), v, KITE_POOL_VALUES_MAX);
    if (!n) return;
    struct held *h = kite_malloc(sizeof *h + n * sizeof *v);
    h->n = n;
    memcpy(h->v, v, n * sizeof *v);
    mark(st, v, n, +1);
    kite_map_put(&st->held, rec->key, h);
}

static void drain(struct kite_pools_state *st) {
    struct kite_watch_event evs[16];
    pthread_mutex_lock(&st->mu);
    int n;
    while ((n = kite_watcher_next(st->w, evs, KITE_ARRAY_SIZE(evs))) > 0)
        for (int i = 0; i < n; i++) {
            apply(st, evs[i].rec, evs[i].type == KITE_EV_DELETED);
            kite_record_unref(evs[i].rec);
            kite_record_unref(evs[i].prev);
        }
    if (n == -EPIPE && !st->broken) {
        /* cannot happen while every notify drains the queue; should it, allocate nothing
         * rather than hand out an address that may be in use */
        st->broken = true;
        log_error("apiserver", "the allocator of service IPs and node ports fell behind the services: allocation refused");
    }
    pthread_mutex_unlock(&st->mu);
}

static void on_change(void *ud) { drain(ud); }


/* ---- the shared bitmaps (RangeAllocation objects) -------------------------------------------- */

static uint32_t nbits(const struct pool *p) { return p->hi - p->lo; }

/* What the bitmap cannot know, offset off may not be handed out: held by a stored object or a
 * write in flight here. Under st->mu. */
static bool busy(const struct pool *p, uint32_t off) { return p->stored[off] || p->reserved[off]; }

/* rec (NULL: none) into p->bits. A bitmap missing, of another range or unreadable is rebuilt
 * from what this server holds (returns false then). */
static bool bits_load(struct kite_pools_state *st, struct pool *p, struct kite_record *rec) {
    uint32_t n = nbits(p);
    memset(p->bits, 0, n);
    if (rec) {
        json_object *o = kite_apiserver_record_object(rec); /* borrowed */
        const char *range = kite_obj_str(o, "range"), *data = kite_obj_str(o, "data");
        struct kite_buf b = {0};
        if (range && strcmp(range, p->range) == 0 && (!data || kite_base64_decode_std(data, strlen(data), &b, NULL) == 0)) {
            /* big.Int.Bytes(): big-endian, bit i of the number is the i-th value */
            for (size_t j = 0; j < b.len; j++) {
                uint8_t byte = (uint8_t)b.p[b.len - 1 - j];
                for (unsigned k = 0; k < 8 && byte; k++)
                    if (byte & (1u << k) && 8 * j + k < n) p->bits[8 * j + k] = 1;
            }
            kite_buf_release(&b);
            return true;
        }
        kite_buf_release(&b);
    }
    pthread_mutex_lock(&st->mu);
    for (uint32_t i = 0; i < n; i++) p->bits[i] = busy(p, p->lo + i);
    pthread_mutex_unlock(&st->mu);
    return false;
}

/* p->bits as kube-apiserver writes a RangeAllocation (caller frees). */
static char *bits_encode(const struct pool *p, size_t *ret_len) {
    uint32_t n = nbits(p), top = 0;
    bool any = false;
    for (uint32_t i = n; i-- > 0;)
        if (p->bits[i]) {
            top = i;
            any = true;
            break;
        }
    size_t len = any ? top / 8 + 1 : 0;
    uint8_t *raw = kite_calloc(len ? len : 1, 1);
    for (uint32_t i = 0; any && i <= top; i++)
        if (p->bits[i]) raw[len - 1 - i / 8] |= (uint8_t)(1u << (i % 8));
    struct kite_buf b = {0};
    kite_buf_puts(&b, "{\"kind\":\"RangeAllocation\",\"apiVersion\":\"v1\",\"metadata\":{\"creationTimestamp\":null},\"range\":");
    kite_buf_json_str(&b, p->range);
    kite_buf_puts(&b, ",\"data\":\"");
    kite_base64_append(&b, raw, len, false);
    kite_buf_puts(&b, "\"}");
    free(raw);
    return kite_buf_detach(&b, ret_len);
}

/* fn changes p->bits (fresh: the store had no usable bitmap, rebuilt from this server's view):
 * returns <0 (an error: nothing written), 0 (nothing to write) or 1 (write it). */
typedef int (*bits_fn)(struct kite_pools_state *st, struct pool *p, bool fresh, void *ud);

/* Runs fn on the stored bitmap and writes its change with a compare-and-swap on the bitmap's
 * mod_revision; on a conflict, again on the bitmap that won. write false (a dry run): fn sees the
 * bitmap, nothing is written. 0, fn's error, -EAGAIN (RANGE_CAS_TRIES conflicts in a row) or the
 * store's error. Blocks on the store: never on its writer thread. */
static int range_cas(struct kite_pools_state *st, enum kite_pool pool, bits_fn fn, void *ud, bool write) {
    struct pool *p = &st->pools[pool];
    struct kite_record *cur = NULL;
    int r = kite_store_get(st->store, RANGE_KEYS[pool], &cur);
    if (r < 0 && r != -ENOENT) return r;
    pthread_mutex_lock(&p->cas_mu);
    r = -EAGAIN;
    for (int i = 0; i < RANGE_CAS_TRIES; i++) {
        bool ok = bits_load(st, p, cur);
        r = fn(st, p, !ok, ud);
        if (r == -EEXIST && write && cur) {
            /* this server's copy may be behind the store's (etcd: fed by a watch): a value another
             * server released a moment ago is refused only once the copy is known current, by
             * writing it back unchanged on its mod_revision */
            struct kite_write w = {.type = KITE_WRITE_UPDATE, .key = RANGE_KEYS[pool], .value = cur->value,
                                   .len = cur->len, .expect_mod_rev = cur->mod_rev};
            struct kite_record *now = NULL;
            int c = kite_store_write(st->store, &w, NULL, &now);
            if (c == -ESTALE) {
                kite_record_unref(cur);
                cur = now;
                if (!cur && kite_store_get(st->store, RANGE_KEYS[pool], &cur) < 0) cur = NULL;
                r = -EAGAIN;
                continue;
            }
            kite_record_unref(now);
            if (c < 0 && c != -ENOENT) r = c;
            break;
        }
        if (r <= 0 || !write) break;
        size_t len;
        _cleanup_free_ char *v = bits_encode(p, &len);
        struct kite_write w = {.type = cur ? KITE_WRITE_UPDATE : KITE_WRITE_CREATE, .key = RANGE_KEYS[pool], .value = v,
                               .len = len, .expect_mod_rev = cur ? cur->mod_rev : 0};
        struct kite_record *now = NULL;
        r = kite_store_write(st->store, &w, NULL, &now);
        kite_record_unref(TAKE_PTR(cur));
        if (r == -ESTALE || r == -EEXIST || r == -ENOENT) { /* another server's change won: on top of it */
            cur = r == -ENOENT ? NULL : now;
            if (r != -ENOENT && !cur && kite_store_get(st->store, RANGE_KEYS[pool], &cur) < 0) cur = NULL;
            if (r == -ENOENT) kite_record_unref(now);
            r = -EAGAIN;
            continue;
        }
        kite_record_unref(now);
        break;
    }
    pthread_mutex_unlock(&p->cas_mu);
    kite_record_unref(cur);
    return r < 0 ? r : 0;
}

struct vals {
    const uint32_t *offs; /* offsets in the pool */
    size_t n;
};

/* Sets the values (an explicit request): -EEXIST when one is set already. */
static int take_fn(struct kite_pools_state *st, struct pool *p, bool fresh, void *ud) {
    (void)st, (void)fresh;
    struct vals *v = ud;
    for (size_t i = 0; i < v->n; i++)
        if (p->bits[v->offs[i] - p->lo]) return -EEXIST;
    for (size_t i = 0; i < v->n; i++) p->bits[v->offs[i] - p->lo] = 1;
    return 1;
}

/* Sets the values, set or not (the bootstrap Services' fixed addresses). */
static int mark_fn(struct kite_pools_state *st, struct pool *p, bool fresh, void *ud) {
    (void)st;
    struct vals *v = ud;
    int changed = fresh;
    for (size_t i = 0; i < v->n; i++)
        if (!p->bits[v->offs[i] - p->lo]) p->bits[v->offs[i] - p->lo] = 1, changed = 1;
    return changed;
}

/* Clears the values nothing here holds (a stored object holding one as well keeps it). */
static int clear_fn(struct kite_pools_state *st, struct pool *p, bool fresh, void *ud) {
    struct vals *v = ud;
    int changed = fresh;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < v->n; i++) {
        uint32_t k = v->offs[i] - p->lo;
        if (p->bits[k] && !busy(p, v->offs[i])) p->bits[k] = 0, changed = 1;
    }
    pthread_mutex_unlock(&st->mu);
    return changed;
}

struct pick_ud {
    uint32_t rnd;
    uint32_t off;
};

/* The first offset in [from, to) neither set nor busy, scanning from start (wrapping), or -1. */
static int64_t scan(const struct pool *p, uint32_t from, uint32_t to, uint32_t start) {
    if (from >= to) return -1;
    uint32_t n = to - from;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off = from + (start - from + i) % n;
        if (!p->bits[off - p->lo] && !busy(p, off)) return off;
    }
    return -1;
}

static int pick_fn(struct kite_pools_state *st, struct pool *p, bool fresh, void *ud) {
    (void)fresh;
    struct pick_ud *u = ud;
    uint32_t band = p->band > p->lo ? p->band : p->lo;
    pthread_mutex_lock(&st->mu);
    int64_t off = -1;
    if (!st->broken) {
        off = scan(p, band, p->hi, band + (p->hi > band ? u->rnd % (p->hi - band) : 0));
        if (off < 0) off = scan(p, p->lo, band, p->lo + (band > p->lo ? u->rnd % (band - p->lo) : 0));
    }
    pthread_mutex_unlock(&st->mu);
    if (off < 0) return st->broken ? -EAGAIN : -ENOSPC;
    p->bits[off - p->lo] = 1;
    u->off = (uint32_t)off;
    return 1;
}

struct repair_ud {
    bool counted; /* the leak counters moved on this pass already (a CAS retry runs fn again) */
    size_t added, cleared;
    bool fresh;
};

static int repair_fn(struct kite_pools_state *st, struct pool *p, bool fresh, void *ud) {
    struct repair_ud *u = ud;
    uint32_t n = nbits(p);
    u->added = u->cleared = 0;
    u->fresh = fresh;
    pthread_mutex_lock(&st->mu);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off = p->lo + i;
        if (p->stored[off] && !p->bits[i]) p->bits[i] = 1, u->added++;
        if (busy(p, off) || !p->bits[i]) {
            if (!u->counted) p->leaks[i] = 0;
            continue;
        }
        if (!u->counted && p->leaks[i] < UINT8_MAX) p->leaks[i]++;
        if (p->leaks[i] >= REPAIR_LEAK_PASSES) p->bits[i] = 0, u->cleared++;
    }
    pthread_mutex_unlock(&st->mu);
    u->counted = true;
    return fresh || u->added || u->cleared;
}

/* One repair pass over both bitmaps (logged when it changed something). */
static int repair(struct kite_pools_state *st) {
    int ret = 0;
    for (int k = 0; k < KITE_POOL_COUNT; k++) {
        struct repair_ud u = {0};
        int r = range_cas(st, (enum kite_pool)k, repair_fn, &u, true);
        if (r < 0) {
            log_warn("apiserver", "repair of %s: %s", RANGE_KEYS[k], strerror(-r));
            ret = r;
        } else if (u.fresh) {
            log_info("apiserver", "%s rebuilt from the stored services (it was missing or of another range)", RANGE_KEYS[k]);
        } else if (u.added || u.cleared) {
            log_warn("apiserver", "%s repaired: %zu values held by services were not marked, %zu marked values held by none "
                     "were released", RANGE_KEYS[k], u.added, u.cleared);
        }
    }
    return ret;
}

/* Clears the values (any pools) in the bitmaps now. */
static void release_now(struct kite_pools_state *st, const struct kite_pool_value *v, size_t n) {
    if (!n) return;
    uint32_t *offs = kite_calloc(n, sizeof *offs);
    for (int k = 0; k < KITE_POOL_COUNT; k++) {
        struct pool *p = &st->pools[k];
        struct vals u = {offs, 0};
        for (size_t i = 0; i < n; i++)
            if (v[i].pool == (enum kite_pool)k && v[i].v >= p->base + p->lo && v[i].v < p->base + p->hi)
                offs[u.n++] = v[i].v - p->base;
        if (!u.n) continue;
        int r = range_cas(st, (enum kite_pool)k, clear_fn, &u, true);
        if (r < 0) /* left to the repair */
            log_warn("apiserver", "cannot release %zu values in %s: %s", u.n, RANGE_KEYS[k], strerror(-r));
    }
    free(offs);
}

/* Queues values for the repair thread (from any thread, the store's writer too). */
static void release_later(struct kite_pools_state *st, const struct kite_pool_value *v, size_t n) {
    if (!n) return;
    pthread_mutex_lock(&st->qmu);
    if (st->nq + n <= RELEASE_QUEUE_MAX) {
        if (st->nq + n > st->capq) {
            st->capq = (st->nq + n) * 2;
            st->queue = kite_realloc(st->queue, st->capq * sizeof *st->queue);
        }
        memcpy(st->queue + st->nq, v, n * sizeof *v);
        st->nq += n;
        pthread_cond_signal(&st->qcond);
    }
    pthread_mutex_unlock(&st->qmu);
}

/* Releases what is queued now (before an allocation, so this server's own releases are seen). */
static void flush_releases(struct kite_pools_state *st) {
    pthread_mutex_lock(&st->qmu);
    struct kite_pool_value *q = TAKE_PTR(st->queue);
    size_t n = st->nq;
    st->nq = st->capq = 0;
    pthread_mutex_unlock(&st->qmu);
    release_now(st, q, n);
    free(q);
}

static void *repair_main(void *ud) {
    struct kite_pools_state *st = ud;
    pthread_setname_np(pthread_self(), "pools-repair");
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    next.tv_sec += st->repair_s;
    pthread_mutex_lock(&st->qmu);
    while (!st->stop) {
        if (!st->nq && pthread_cond_timedwait(&st->qcond, &st->qmu, &next) == ETIMEDOUT) {
            pthread_mutex_unlock(&st->qmu);
            repair(st);
            clock_gettime(CLOCK_MONOTONIC, &next);
            next.tv_sec += st->repair_s;
            pthread_mutex_lock(&st->qmu);
            continue;
        }
        if (st->nq) {
            pthread_mutex_unlock(&st->qmu);
            flush_releases(st);
            pthread_mutex_lock(&st->qmu);
        }
    }
    pthread_mutex_unlock(&st->qmu);
    return NULL;
}

/* ---- a write's allocations ------------------------------------------------------------------- */

static bool op_holds(struct kite_pools_op *op, enum kite_pool pool, uint32_t v) {
    for (size_t i = 0; i < op->n; i++)
        if (op->taken[i].pool == pool && op->taken[i].v == v) return true;
    return false;
}

static int op_reserve(struct kite_pools_op *op, struct pool *p, enum kite_pool pool, uint32_t off) {
    if (op->n == KITE_POOL_VALUES_MAX) return -ENOSPC;
    p->reserved[off] = 1;
    op->taken[op->n++] = (struct kite_pool_value){pool, p->base + off};
    return 0;
}

static int take(struct kite_pools *ps, enum kite_pool pool, uint32_t v) {
    struct kite_pools_op *op = ps->ud;
    struct kite_pools_state *st = op->st;
    struct pool *p = &st->pools[pool];
    if (v < p->base || v - p->base < p->lo || v - p->base >= p->hi) return -ERANGE;
    if (op_holds(op, pool, v)) return 0;
    if (op->n == KITE_POOL_VALUES_MAX) return -ENOSPC;
    uint32_t off = v - p->base;
    pthread_mutex_lock(&st->mu);
    int r = st->broken ? -EAGAIN : in_use(p, off) ? -EEXIST : 0;
    pthread_mutex_unlock(&st->mu);
    if (r < 0) return r;
    flush_releases(st);
    struct vals u = {&off, 1};
    if ((r = range_cas(st, pool, take_fn, &u, !op->dry_run)) < 0) {
        if (r != -EEXIST) log_warn("apiserver", "cannot allocate in %s: %s", RANGE_KEYS[pool], strerror(-r));
        return r;
    }
    pthread_mutex_lock(&st->mu);
    r = op_reserve(op, p, pool, off);
    pthread_mutex_unlock(&st->mu);
    return r;
}

static int pick(struct kite_pools *ps, enum kite_pool pool, uint32_t *ret) {
    struct kite_pools_op *op = ps->ud;
    struct kite_pools_state *st = op->st;
    struct pool *p = &st->pools[pool];
    if (op->n == KITE_POOL_VALUES_MAX) return -ENOSPC;
    struct pick_ud u = {0};
    kite_random_bytes(&u.rnd, sizeof u.rnd);
    flush_releases(st);
    int r = range_cas(st, pool, pick_fn, &u, !op->dry_run);
    if (r < 0) {
        if (r != -ENOSPC) log_warn("apiserver", "cannot allocate in %s: %s", RANGE_KEYS[pool], strerror(-r));
        return r;
    }
    pthread_mutex_lock(&st->mu);
    r = op_reserve(op, p, pool, u.off);
    pthread_mutex_unlock(&st->mu);
    if (r == 0) *ret = p->base + u.off;
    return r;
}

static const char *range(struct kite_pools *ps, enum kite_pool pool) {
    struct kite_pools_op *op = ps->ud;
    return op->st->pools[pool].range;
}

static uint32_t first(struct kite_pools *ps, enum kite_pool pool) {
    struct kite_pools_op *op = ps->ud;
    return op->st->pools[pool].base + op->st->pools[pool].lo;
}

struct kite_pools_op *kite_apiserver_pools_op_new(struct kite_apiserver *s, bool dry_run) {
    if (!s->pools) return NULL;
    struct kite_pools_op *op = kite_calloc(1, sizeof *op);
    op->st = s->pools;
    op->dry_run = dry_run;
    op->iface = (struct kite_pools){.take = take, .pick = pick, .range = range, .first = first, .ud = op};
    return op;
}

struct kite_pools *kite_apiserver_pools_op_iface(struct kite_pools_op *op) { return &op->iface; }

static bool holds(const struct kite_pool_value *v, size_t n, struct kite_pool_value x) {
    for (size_t i = 0; i < n; i++)
        if (v[i].pool == x.pool && v[i].v == x.v) return true;
    return false;
}

void kite_apiserver_pools_op_replaced(struct kite_pools_op *op, json_object *old, json_object *obj) {
    if (!op) return;
    struct kite_pool_value was[KITE_POOL_VALUES_MAX], now[KITE_POOL_VALUES_MAX];
    size_t nw = op->st->res->held(old, was, KITE_POOL_VALUES_MAX);
    size_t nn = obj ? op->st->res->held(obj, now, KITE_POOL_VALUES_MAX) : 0;
    op->n_old = 0;
    op->deletes = !obj;
    for (size_t i = 0; i < nw; i++)
        if (!holds(now, nn, was[i]) && !holds(op->old, op->n_old, was[i])) op->old[op->n_old++] = was[i];
}

void kite_apiserver_pools_op_commit(struct kite_pools_op *op, struct kite_record *rec) {
    if (!op || op->dry_run) return;
    struct kite_pool_value held[KITE_POOL_VALUES_MAX], rel[2 * KITE_POOL_VALUES_MAX];
    size_t nh = rec && !op->deletes ? op->st->res->held(kite_apiserver_record_object(rec), held, KITE_POOL_VALUES_MAX) : 0, n = 0;
    /* taken by an attempt a conflict recomputed, and not by the write that was stored */
    for (size_t i = 0; i < op->n; i++)
        if (!holds(held, nh, op->taken[i])) rel[n++] = op->taken[i];
    for (size_t i = 0; i < op->n_old; i++)
        if (!holds(held, nh, op->old[i])) rel[n++] = op->old[i];
    op->committed = true;
    /* released before the reply, as kube-apiserver's registry: a client that deletes a Service
     * and creates one with its address at once finds it free on every server */
    pthread_mutex_lock(&op->st->mu);
    for (size_t i = 0; i < op->n; i++) {
        struct pool *p = &op->st->pools[op->taken[i].pool];
        p->reserved[op->taken[i].v - p->base] = 0;
    }
    op->n = 0;
    pthread_mutex_unlock(&op->st->mu);
    release_now(op->st, rel, n);
}

void kite_apiserver_pools_op_end(struct kite_pools_op *op) {
    if (!op) return;
    struct kite_pools_state *st = op->st;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < op->n; i++) {
        struct pool *p = &st->pools[op->taken[i].pool];
        p->reserved[op->taken[i].v - p->base] = 0;
    }
    pthread_mutex_unlock(&st->mu);
    /* a write that was not stored gives back what it set in the bitmaps before its answer (a
     * client may ask any server for the same value again at once; write ops end on HTTP threads
     * and the retry thread, never on the store's) */
    if (!op->committed && !op->dry_run) release_now(st, op->taken, op->n);
    free(op);
}

void kite_apiserver_pools_release_record(struct kite_apiserver *s, const struct kite_resource *r, struct kite_record *rec) {
    struct kite_pools_state *st = s->pools;
    if (!st || r != st->res || !rec) return;
    struct kite_pool_value v[KITE_POOL_VALUES_MAX];
    size_t n = st->res->held(kite_apiserver_record_object(rec), v, KITE_POOL_VALUES_MAX);
    release_later(st, v, n);
}

/* ---- start --------------------------------------------------------------------------------- */

int kite_apiserver_pools_start(struct kite_apiserver *s, const char *cidr, char **ret_error) {
    const struct kite_resource *res = NULL;
    for (size_t k = 0; kite_resources[k] && !res; k++)
        if (kite_resources[k]->held) res = kite_resources[k];
    if (!res) return 0;
    uint32_t base;
    unsigned prefix;
    if (parse_cidr(cidr, &base, &prefix) < 0 || prefix < KITE_SERVICE_CIDR_PREFIX_MIN || prefix > KITE_SERVICE_CIDR_PREFIX_MAX) {
        *ret_error = kite_asprintf("--service-cluster-ip-range %s: want an IPv4 network address with a prefix from /%d to /%d "
                                   "(e.g. %s)", cidr, KITE_SERVICE_CIDR_PREFIX_MIN, KITE_SERVICE_CIDR_PREFIX_MAX,
                                   KITE_SERVICE_CIDR_DEFAULT);
        return -EINVAL;
    }
    struct kite_pools_state *st = kite_calloc(1, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    pthread_mutex_init(&st->qmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->qcond, &ca);
    pthread_condattr_destroy(&ca);
    st->store = s->store;
    st->repair_s = KITE_POOLS_REPAIR_S;
    uint32_t size = 1u << (32 - prefix);
    uint32_t band = size / BAND_STEP < BAND_MIN ? BAND_MIN : size / BAND_STEP > BAND_MAX ? BAND_MAX : size / BAND_STEP;
    /* neither the network nor the broadcast address */
    pool_init(&st->pools[KITE_POOL_SERVICE_IP], base, size, 1, size - 1, band);
    snprintf(st->pools[KITE_POOL_SERVICE_IP].range, sizeof st->pools[0].range, "%s", cidr);
    uint32_t ports = KITE_NODE_PORT_RANGE_LAST - KITE_NODE_PORT_RANGE_FIRST + 1;
    pool_init(&st->pools[KITE_POOL_NODE_PORT], KITE_NODE_PORT_RANGE_FIRST, ports, 0, ports, 0);
    snprintf(st->pools[KITE_POOL_NODE_PORT].range, sizeof st->pools[0].range, "%d-%d", KITE_NODE_PORT_RANGE_FIRST,
             KITE_NODE_PORT_RANGE_LAST);
    st->res = res;
    st->cache = kite_apiserver_storage_cache(s, res);
    s->pools = st;
    struct kite_record **recs = NULL;
    size_t n = 0;
    int64_t rev = 0;
    int r = kite_wcache_list(st->cache, NULL, NULL, 0, NULL, NULL, &recs, &n, &rev, NULL);
    if (r < 0) {
        *ret_error = kite_asprintf("cannot list %s to find the cluster IPs in use: %s", res->plural, strerror(-r));
        return r;
    }
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < n; i++) {
        apply(st, recs[i], false);
        kite_record_unref(recs[i]);
    }
    pthread_mutex_unlock(&st->mu);
    free(recs);
    r = kite_wcache_watch(st->cache, NULL, rev, KITE_WATCHER_QUEUE_MAX, SIZE_MAX, NULL, on_change, st, &st->w);
    if (r < 0) {
        *ret_error = kite_asprintf("cannot watch %s: %s", res->plural, strerror(-r));
        return r;
    }
    drain(st);
    /* the bitmaps as the stored services have them (another server may be starting too: CAS) */
    if ((r = repair(st)) < 0) {
        *ret_error = kite_asprintf("cannot write the service IP and node port allocations (%s, %s): %s", RANGE_KEYS[0],
                                   RANGE_KEYS[1], strerror(-r));
        return r;
    }
    if (pthread_create(&st->thread, NULL, repair_main, st) != 0) {
        *ret_error = kite_strdup("cannot start the allocation repair thread");
        return -EAGAIN;
    }
    st->thread_started = true;
    return 0;
}

void kite_apiserver_pools_free(struct kite_pools_state *st) {
    if (!st) return;
    if (st->thread_started) {
        pthread_mutex_lock(&st->qmu);
        st->stop = true;
        pthread_cond_signal(&st->qcond);
        pthread_mutex_unlock(&st->qmu);
        pthread_join(st->thread, NULL);
    }
    free(st->queue);
    kite_watcher_close(st->w);
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&st->held, &i, &k, &v);) free(v);
    kite_map_release(&st->held);
    for (size_t i = 0; i < KITE_POOL_COUNT; i++) {
        free(st->pools[i].stored);
        free(st->pools[i].reserved);
        free(st->pools[i].bits);
        free(st->pools[i].leaks);
        if (st->pools[i].bits) pthread_mutex_destroy(&st->pools[i].cas_mu);
    }
    pthread_mutex_destroy(&st->qmu);
    pthread_cond_destroy(&st->qcond);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* ---- the kubernetes Service ------------------------------------------------------------------ */

int kite_apiserver_pools_bootstrap_kubernetes(struct kite_apiserver *s, uint16_t port) {
    struct kite_pools_state *st = s->pools;
    const struct kite_resource *r = st ? st->res : NULL;
    if (!r || strcmp(r->plural, "services") != 0) return 0;
    _cleanup_free_ char *key = kite_object_key(r, "default", "kubernetes");
    struct kite_record *cur = kite_wcache_get(st->cache, key);
    if (cur) {
        kite_record_unref(cur);
        return 0;
    }
    struct pool *p = &st->pools[KITE_POOL_SERVICE_IP];
    pthread_mutex_lock(&st->mu);
    bool taken = in_use(p, p->lo);
    pthread_mutex_unlock(&st->mu);
    char ip[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = htonl(p->base + p->lo)};
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    if (taken) {
        log_warn("apiserver", "cannot create the kubernetes Service: its address %s is held by another Service", ip);
        return 0;
    }
    uint32_t off = p->lo;
    struct vals u = {&off, 1};
    int e = range_cas(st, KITE_POOL_SERVICE_IP, mark_fn, &u, true);
    if (e < 0) return e;
    json_object *o = NULL;
    _cleanup_free_ char *text = kite_asprintf(
        "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"kubernetes\",\"namespace\":\"default\","
        "\"labels\":{\"component\":\"apiserver\",\"provider\":\"kubernetes\"}},\"spec\":{\"clusterIP\":\"%s\","
        "\"ports\":[{\"name\":\"https\",\"port\":443,\"protocol\":\"TCP\",\"targetPort\":%u}],\"type\":\"ClusterIP\","
        "\"sessionAffinity\":\"None\"}}",
        ip, (unsigned)port);
    o = json_tokener_parse(text);
    e = kite_apiserver_create_sync(s, r, o);
    json_object_put(o);
    return e == -EEXIST ? 0 : e;
}

/* ---- the kube-dns Service -------------------------------------------------------------------- */

int kite_apiserver_pools_bootstrap_kube_dns(struct kite_apiserver *s) {
    struct kite_pools_state *st = s->pools;
    const struct kite_resource *r = st ? st->res : NULL;
    if (!r || strcmp(r->plural, "services") != 0) return 0;
    _cleanup_free_ char *key = kite_object_key(r, "kube-system", "kube-dns");
    struct kite_record *cur = kite_wcache_get(st->cache, key);
    if (cur) { /* made before, or by the cluster's user: kept as it is */
        const char *cip = kite_obj_path_str(kite_apiserver_record_object(cur), "spec.clusterIP"); /* borrowed */
        struct in_addr a;
        if (cip && inet_pton(AF_INET, cip, &a) == 1) snprintf(s->kube_dns_ip, sizeof s->kube_dns_ip, "%s", cip);
        kite_record_unref(cur);
        return 0;
    }
    struct pool *p = &st->pools[KITE_POOL_SERVICE_IP];
    pthread_mutex_lock(&st->mu);
    bool taken = in_use(p, KITE_KUBE_DNS_OFFSET);
    pthread_mutex_unlock(&st->mu);
    char ip[INET_ADDRSTRLEN];
    struct in_addr a = {.s_addr = htonl(p->base + KITE_KUBE_DNS_OFFSET)};
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    if (taken) {
        log_warn("apiserver", "cannot create the kube-dns Service: its address %s is held by another Service", ip);
        return 0;
    }
    uint32_t off = KITE_KUBE_DNS_OFFSET;
    struct vals u = {&off, 1};
    int e = range_cas(st, KITE_POOL_SERVICE_IP, mark_fn, &u, true);
    if (e < 0) return e;
    /* as kubeadm's CoreDNS addon has it (less the metrics port: nothing serves it here) */
    _cleanup_free_ char *text = kite_asprintf(
        "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"kube-dns\",\"namespace\":\"kube-system\","
        "\"labels\":{\"k8s-app\":\"kube-dns\",\"kubernetes.io/cluster-service\":\"true\",\"kubernetes.io/name\":\"CoreDNS\"}},"
        "\"spec\":{\"clusterIP\":\"%s\",\"selector\":{\"k8s-app\":\"kube-dns\"},\"ports\":[{\"name\":\"dns\",\"port\":53,"
        "\"protocol\":\"UDP\",\"targetPort\":53},{\"name\":\"dns-tcp\",\"port\":53,\"protocol\":\"TCP\",\"targetPort\":53}],"
        "\"type\":\"ClusterIP\",\"sessionAffinity\":\"None\"}}",
        ip);
    json_object *o = json_tokener_parse(text);
    e = kite_apiserver_create_sync(s, r, o);
    json_object_put(o);
    if (e == 0) snprintf(s->kube_dns_ip, sizeof s->kube_dns_ip, "%s", ip);
    return e == -EEXIST ? 0 : e;
}

const char *kite_apiserver_kube_dns_ip(struct kite_apiserver *s) { return s->kube_dns_ip[0] ? s->kube_dns_ip : NULL; }
