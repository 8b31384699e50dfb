#include "base/map.h"

char kite_map_tombstone[1];

uint64_t kite_hash(const void *data, size_t n) {
    /* FNV-1a, 64-bit */
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static struct kite_map_slot *find(const struct kite_map *m, const char *key, uint64_t h) {
    if (!m->cap) return NULL;
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct kite_map_slot *s = &m->slots[i];
        if (!s->key) return NULL;
        if (s->key != KITE_MAP_TOMBSTONE && s->hash == h && strcmp(s->key, key) == 0) return s;
    }
}

static void rehash(struct kite_map *m, size_t cap) {
    struct kite_map_slot *old = m->slots;
    size_t oldcap = m->cap;
    m->slots = kite_calloc(cap, sizeof *m->slots);
    m->cap = cap;
    m->used = m->len;
    for (size_t i = 0; i < oldcap; i++) {
        if (!old[i].key || old[i].key == KITE_MAP_TOMBSTONE) continue;
        size_t j = old[i].hash & (cap - 1);
        while (m->slots[j].key) j = (j + 1) & (cap - 1);
        m->slots[j] = old[i];
    }
    free(old);
}

void *kite_map_get(const struct kite_map *m, const char *key) {
    struct kite_map_slot *s = find(m, key, kite_hash(key, strlen(key)));
    return s ? s->value : NULL;
}

void *kite_map_put(struct kite_map *m, const char *key, void *value) {
    uint64_t h = kite_hash(key, strlen(key));
    struct kite_map_slot *s = find(m, key, h);
    if (s) {
        void *prev = s->value;
        s->value = value;
        return prev;
    }
    if ((m->used + 1) * 4 >= m->cap * 3) rehash(m, m->cap ? (m->len * 2 >= m->cap ? m->cap * 2 : m->cap) : 16);
    size_t i = h & (m->cap - 1);
    while (m->slots[i].key && m->slots[i].key != KITE_MAP_TOMBSTONE) i = (i + 1) & (m->cap - 1);
    if (!m->slots[i].key) m->used++;
    m->slots[i] = (struct kite_map_slot){kite_strdup(key), h, value};
    m->len++;
    return NULL;
}

void *kite_map_del(struct kite_map *m, const char *key) {
    struct kite_map_slot *s = find(m, key, kite_hash(key, strlen(key)));
    if (!s) return NULL;
    void *prev = s->value;
    free(s->key);
    s->key = KITE_MAP_TOMBSTONE;
    s->value = NULL;
    m->len--;
    return prev;
}

void kite_map_release(struct kite_map *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key && m->slots[i].key != KITE_MAP_TOMBSTONE) free(m->slots[i].key);
    free(m->slots);
    *m = (struct kite_map){0};
}

bool kite_map_next(const struct kite_map *m, size_t *iter, const char **ret_key, void **ret_value) {
    for (; *iter < m->cap; (*iter)++) {
        struct kite_map_slot *s = &m->slots[*iter];
        if (s->key && s->key != KITE_MAP_TOMBSTONE) {
            if (ret_key) *ret_key = s->key;
            if (ret_value) *ret_value = s->value;
            (*iter)++;
            return true;
        }
    }
    return false;
}
