/* Records: immutable, refcounted versions of one key (store.h). One allocation holds the
 * struct, the key and the value; a tombstone (delete-event record) borrows the value bytes of
 * the version it deleted by holding a reference to it, so deletes copy nothing. */
#include "store/store-int.h"

struct kite_record *kite_record_alloc(const char *key, size_t key_len, const void *value, size_t len) {
    struct kite_record *r = kite_malloc(sizeof(*r) + key_len + 1 + len + 1);
    char *k = (char *)(r + 1), *v = k + key_len + 1;
    memcpy(k, key, key_len);
    k[key_len] = 0;
    if (len)
        memcpy(v, value, len);
    v[len] = 0;
    *r = (struct kite_record){ .key = k, .value = v, .len = len };
    atomic_init(&r->refs, 1);
    atomic_init(&r->cache, NULL);
    return r;
}

struct kite_record *kite_record_tombstone(struct kite_record *live, int64_t rev) {
    struct kite_record *r = kite_malloc(sizeof(*r));
    *r = (struct kite_record){
        .key = live->key,
        .value = live->value,
        .len = live->len,
        .create_rev = live->create_rev,
        .mod_rev = rev,
        .version = live->version,
        .deleted = true,
        .owner = kite_record_ref(live),
    };
    atomic_init(&r->refs, 1);
    atomic_init(&r->cache, NULL);
    return r;
}

struct kite_record *kite_record_new(const char *key, const void *value, size_t len, int64_t create_rev,
                                    int64_t mod_rev, int64_t version) {
    struct kite_record *r = kite_record_alloc(key, strlen(key), value, len);
    r->create_rev = create_rev;
    r->mod_rev = mod_rev;
    r->version = version;
    return r;
}

struct kite_record *kite_record_ref(struct kite_record *r) {
    if (r)
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}

void kite_record_unref(struct kite_record *r) {
    if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    void *obj = atomic_load_explicit(&r->cache, memory_order_acquire);
    if (obj && r->cache_free)
        r->cache_free(obj);
    kite_record_unref(r->owner);
    free(r);
}

void *kite_record_cache(const struct kite_record *r) {
    return atomic_load_explicit(&((struct kite_record *)r)->cache, memory_order_acquire);
}

void *kite_record_set_cache(struct kite_record *r, void *obj, void (*free_fn)(void *)) {
    void *expected = NULL;
    /* free_fn is written by the winner after the CAS; it is only read by the last unref, which
     * the winner's own reference (held during this call) orders after this store. */
    if (atomic_compare_exchange_strong_explicit(&r->cache, &expected, obj, memory_order_acq_rel,
                                                memory_order_acquire)) {
        r->cache_free = free_fn;
        return obj;
    }
    if (obj && free_fn)
        free_fn(obj);
    return expected;
}
