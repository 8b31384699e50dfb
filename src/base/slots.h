/* An unordered array whose members know their place in it (their slot), so that removing one
 * is O(1): the last member moves into its slot. The pod GC and taint eviction controllers index
 * the pods bound to each node so. Not thread-safe: callers lock. */
#pragma once
#include "base/base.h"

struct kite_slots {
    void **v;
    size_t n, cap;
};

/* Appends p; returns its slot. */
static inline size_t kite_slots_add(struct kite_slots *s, void *p) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->v = kite_realloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n] = p;
    return s->n++;
}

/* Removes the member at slot; returns the member that moved into slot (the caller updates its
 * slot), or NULL when it was the last. */
static inline void *kite_slots_remove(struct kite_slots *s, size_t slot) {
    s->v[slot] = s->v[--s->n];
    return slot < s->n ? s->v[slot] : NULL;
}

static inline void kite_slots_release(struct kite_slots *s) {
    free(s->v);
    *s = (struct kite_slots){0};
}
