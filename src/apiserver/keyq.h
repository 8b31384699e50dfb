/* Per-key write queues: at most one write of a key runs at a time; later writes of the key wait
 * in arrival order and are handed the key, one at a time, as the write before them completes.
 *
 * The API server uses it so that concurrent updates of one object do not lose the store's
 * compare-and-swap to each other and get recomputed (write.c). A waiter costs a link in the
 * waiting write and no thread. Thread-safe (one mutex; hold and release are a map lookup). */
#pragma once
#include "base/base.h"

/* Embedded in whatever waits; keyq owns it while it is queued. */
struct keyq_link {
    struct keyq_link *next;
};

struct keyq;

/* max_waiters: writes that may wait for one key at once (keyq_hold refuses more). */
struct keyq *kite_apiserver_keyq_new(size_t max_waiters);
/* NULL ok. Forgets links still queued (their owners own them). */
void kite_apiserver_keyq_free(struct keyq *q);

enum { KEYQ_HELD = 0, KEYQ_QUEUED = 1 };
/* Takes key for the caller (KEYQ_HELD) or, when another holds it, queues w behind the waiters
 * already there (KEYQ_QUEUED): w is returned by a later keyq_release of key and then holds it.
 * -EAGAIN (nothing queued) when max_waiters already wait for key. */
int kite_apiserver_keyq_hold(struct keyq *q, const char *key, struct keyq_link *w);
/* The holder gives key up. Returns the first waiter, which holds key from now on (the caller
 * must start it), or NULL when none waited and key is free. */
struct keyq_link *kite_apiserver_keyq_release(struct keyq *q, const char *key);
/* Keys held right now (for tests and for checking that a stopped server left none). */
size_t kite_apiserver_keyq_held(struct keyq *q);
