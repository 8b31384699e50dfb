/* Per-key write queues (keyq.h).
 *
 * A held key is in the map. With nothing waiting its value is the ALONE marker, so the common
 * case (one write of a key at a time) allocates only the map's copy of the key; the first
 * waiter brings a struct waiters, which goes again when the last one was handed the key. */
#include "apiserver/keyq.h"
#include "base/map.h"

#include <pthread.h>

struct waiters {
    struct keyq_link *head, **tail;
    size_t n;
};

struct keyq {
    pthread_mutex_t mu;
    struct kite_map held; /* key -> &ALONE or struct waiters */
    size_t max_waiters;
};

static char ALONE;

struct keyq *kite_apiserver_keyq_new(size_t max_waiters) {
    struct keyq *q = kite_calloc(1, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    q->max_waiters = max_waiters;
    return q;
}

void kite_apiserver_keyq_free(struct keyq *q) {
    if (!q) return;
    size_t it = 0;
    void *v;
    while (kite_map_next(&q->held, &it, NULL, &v))
        if (v != &ALONE) free(v);
    kite_map_release(&q->held);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

int kite_apiserver_keyq_hold(struct keyq *q, const char *key, struct keyq_link *w) {
    int r = KEYQ_QUEUED;
    pthread_mutex_lock(&q->mu);
    void *v = kite_map_get(&q->held, key);
    if (!v) {
        kite_map_put(&q->held, key, &ALONE);
        r = KEYQ_HELD;
    } else if ((v == &ALONE ? 0 : ((struct waiters *)v)->n) >= q->max_waiters) {
        r = -EAGAIN;
    } else {
        struct waiters *ws = v;
        if (v == &ALONE) {
            ws = kite_calloc(1, sizeof *ws);
            ws->tail = &ws->head;
            kite_map_put(&q->held, key, ws);
        }
        w->next = NULL;
        *ws->tail = w;
        ws->tail = &w->next;
        ws->n++;
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

struct keyq_link *kite_apiserver_keyq_release(struct keyq *q, const char *key) {
    struct keyq_link *next = NULL;
    pthread_mutex_lock(&q->mu);
    void *v = kite_map_get(&q->held, key);
    if (v == &ALONE) {
        kite_map_del(&q->held, key);
    } else if (v) {
        struct waiters *ws = v;
        next = ws->head;
        ws->head = next->next;
        if (--ws->n == 0) {
            kite_map_put(&q->held, key, &ALONE);
            free(ws);
        }
        next->next = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    return next;
}

size_t kite_apiserver_keyq_held(struct keyq *q) {
    pthread_mutex_lock(&q->mu);
    size_t n = q->held.len;
    pthread_mutex_unlock(&q->mu);
    return n;
}
