/* Test harness for the apiserver module: a real struct kite_apiserver in the test process
 * (data dir under /dev/shm when it exists, else /tmp; listen 127.0.0.1:0; a fake clock),
 * driven over HTTPS by libcurl with the admin client certificate from DATA_DIR/pki. Criterion
 * runs each test in its own process: every test starts its own server (api_start in the
 * suite's .init) and stops it (api_stop in .fini). */
#pragma once
#include "apiserver/apiserver.h"
#include "base/clock.h"

#include <json-c/json.h>

/* The fake clock's wall time at start: 2030-01-02T03:04:05Z. */
#define API_T0_S INT64_C(1893553445)
#define API_T0 "2030-01-02T03:04:05Z"

struct api {
    char dir[128];
    struct kite_fake_clock clock;
    struct kite_apiserver *srv;
    void *curl;        /* CURL *, kept across requests (keep-alive) */
    char *ca, *cert, *key;
};
extern struct api api;

/* Extra request headers of the next api_req calls ("Impersonate-User: bob"), NULL-terminated;
 * NULL for none. Reset by api_start. */
extern const char *const *api_headers;
/* The audit log options of the next api_start (path relative to the test's dir); reset by api_stop. */
extern const char *api_audit_file;
extern int64_t api_audit_maxsize_mb, api_audit_maxbackup;
/* Starts the server on a fresh data dir; event_ttl_s 0 = the server's default. */
void api_start_ttl(int64_t event_ttl_s);
static inline void api_start(void) { api_start_ttl(0); }
/* Stops the server and removes the data dir. */
void api_stop(void);

/* One request: method, path (with query), body (NULL: none) of content_type (NULL with a body:
 * application/json). Returns the HTTP status (fails the test on a transport error); *ret (may
 * be NULL) gets the parsed JSON answer, or NULL when the body is not JSON. */
long api_req(const char *method, const char *path, const char *content_type, const char *body, json_object **ret);
/* The same with a body of len bytes (protobuf holds NULs). */
long api_req_len(const char *method, const char *path, const char *content_type, const char *body, size_t len,
                 json_object **ret);
/* The same with a printf-formatted JSON body. */
long api_reqf(const char *method, const char *path, json_object **ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Values at a dotted path ("metadata.name", "items.3.metadata.name": digits index arrays);
 * NULL when absent (jstr also when not a string). Borrowed. */
json_object *jget(json_object *o, const char *path);
const char *jstr(json_object *o, const char *path);
/* The fake clock's wall time, RFC 3339 seconds. */
void api_now(char out[21]);
void api_advance_s(int64_t s);
