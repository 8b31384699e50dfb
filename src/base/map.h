/* String-keyed hash map (open addressing, linear probing). Keys are copied; values are
 * borrowed pointers the caller owns. Not thread-safe: callers lock. */
#pragma once
#include "base/base.h"

struct kite_map_slot {
    char *key; /* NULL = empty; KITE_MAP_TOMBSTONE = deleted */
    uint64_t hash;
    void *value;
};

struct kite_map {
    struct kite_map_slot *slots;
    size_t cap, len, used; /* used counts live + tombstones */
};

extern char kite_map_tombstone[];
#define KITE_MAP_TOMBSTONE kite_map_tombstone

uint64_t kite_hash(const void *data, size_t n);
void *kite_map_get(const struct kite_map *m, const char *key);
/* Inserts or replaces; returns the previous value (or NULL). */
void *kite_map_put(struct kite_map *m, const char *key, void *value);
/* Removes; returns the removed value (or NULL). */
void *kite_map_del(struct kite_map *m, const char *key);
void kite_map_release(struct kite_map *m);

/* Iterate: for (size_t i = 0; kite_map_next(m, &i, &k, &v);) { ... } */
bool kite_map_next(const struct kite_map *m, size_t *iter, const char **ret_key, void **ret_value);
