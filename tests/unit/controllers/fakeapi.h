/* An in-memory API server behind the fake client transport, for controller tests: objects by
 * path, resourceVersions and their preconditions (409), strategic merge patches with the
 * kinds' real schemas, field-selected pod lists, and a log of every request. */
#pragma once
#include "api/registry.h"
#include "base/map.h"
#include "client/client.h"

#include <pthread.h>
#include <stdatomic.h>

struct fakeapi {
    pthread_mutex_t mu;
    struct kite_map objs; /* path -> json_object */
    uint64_t rv;
    char **log;           /* "METHOD path" of every request */
    size_t nlog;
    const char *fail_prefix; /* requests whose path starts so answer fail_code */
    long fail_code;
    const char *fail_method; /* NULL: any */
    const char *creation;    /* creationTimestamp given to created objects (NULL: none) */
    /* called at each request before it is answered (NULL: none), e.g. to let a fake clock run */
    void (*on_request)(void *ud, const char *method, const char *path);
    void *on_request_ud;
    struct kite_client *client;
};
void fakeapi_init(struct fakeapi *f);
void fakeapi_release(struct fakeapi *f);
/* Stores obj (taken) at path as created, giving it a resourceVersion; returns it (borrowed). */
json_object *fakeapi_put(struct fakeapi *f, const char *path, json_object *obj);
/* The object at path (borrowed), or NULL. */
json_object *fakeapi_get(struct fakeapi *f, const char *path);
/* How many requests matched method and contained path_part. */
size_t fakeapi_count(struct fakeapi *f, const char *method, const char *path_part);
/* Events posted with this reason about this object name. */
size_t fakeapi_events(struct fakeapi *f, const char *reason, const char *name);
/* Parses JSON text (test literals). */
json_object *fakeapi_json(const char *fmt, ...) KITE_PRINTF(1, 2);

/* An on_request hook (on_request_ud = the meter): requests of method whose path holds part are
 * each held delay_us (a round trip), and the most of them in flight at once is kept. */
struct fakeapi_meter {
    const char *method, *part;
    int delay_us;
    atomic_int in, most;
};
void fakeapi_meter_hook(void *ud, const char *method, const char *path);
