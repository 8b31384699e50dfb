/* A tiny in-memory API server for agent tests: one Node, one Lease, events; records every
 * request; failures injectable. Used through kite_client_fake_new(). */
#pragma once
#include <pthread.h>
#include "client/client.h"

struct fake_req {
    char method[8];
    char *path;
    json_object *body; /* NULL when none or not JSON */
};

struct fake_api {
    pthread_mutex_t lock;
    json_object *node;  /* NULL = absent */
    json_object *lease; /* NULL = absent */
    int uid_seq;
    int rv;
    struct fake_req *reqs;
    size_t n_reqs;
    bool down;            /* every request: -ECONNREFUSED */
    int lease_conflicts;  /* next n lease PUTs answer 409 */
    bool lease_server_fields; /* Lease writes keep a uid, creationTimestamp, managedFields and a
                               * label, as a real server's answers carry */
    /* watch: blocks until cancelled */
    pthread_cond_t cond;
    bool watching, watch_cancelled;
};

void fake_api_init(struct fake_api *f);
void fake_api_release(struct fake_api *f);
struct kite_client *fake_api_client(struct fake_api *f);
/* Forget the recorded requests. */
void fake_api_clear(struct fake_api *f);
/* Count of recorded requests with this method and path prefix ending exactly as suffix
 * (NULL = any). */
size_t fake_api_count(struct fake_api *f, const char *method, const char *path_contains);
/* The i-th recorded request matching (borrowed) or NULL. */
struct fake_req *fake_api_find(struct fake_api *f, const char *method, const char *path_contains, size_t i);
