#include "agent_fake_api.h"

#include <stdio.h>

#include "json/patch.h"

static const struct kite_smp_rule rules[] = {
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
    {"status.addresses", "type", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema schema = {rules, 2};

void fake_api_init(struct fake_api *f) {
    *f = (struct fake_api){0};
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
}

void fake_api_clear(struct fake_api *f) {
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_reqs; i++) {
        free(f->reqs[i].path);
        json_object_put(f->reqs[i].body);
    }
    free(f->reqs);
    f->reqs = NULL;
    f->n_reqs = 0;
    pthread_mutex_unlock(&f->lock);
}

void fake_api_release(struct fake_api *f) {
    fake_api_clear(f);
    json_object_put(f->node);
    json_object_put(f->lease);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
}

static int reply(struct kite_response *ret, long code, json_object *o) {
    ret->status = code;
    ret->body = kite_strdup(o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "{\"kind\":\"Status\"}");
    return 0;
}

static void set_meta(json_object *o, const char *key, json_object *v) {
    json_object *meta = json_object_object_get(o, "metadata");
    if (!meta) {
        meta = json_object_new_object();
        json_object_object_add(o, "metadata", meta);
    }
    json_object_object_add(meta, key, v);
}

static void server_fields(struct fake_api *f, json_object *lease) {
    if (!f->lease_server_fields) return;
    set_meta(lease, "uid", json_object_new_string("lease-uid-1"));
    set_meta(lease, "creationTimestamp", json_object_new_string("2026-12-02T09:00:00Z"));
    set_meta(lease, "managedFields", json_tokener_parse("[{\"manager\":\"kite\",\"operation\":\"Update\"}]"));
    set_meta(lease, "labels", json_tokener_parse("{\"set-by\":\"someone/else\"}"));
}

static int handle(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                  struct kite_response *ret) {
    struct fake_api *f = ud;
    pthread_mutex_lock(&f->lock);
    f->reqs = kite_realloc(f->reqs, (f->n_reqs + 1) * sizeof(*f->reqs));
    struct fake_req *rq = &f->reqs[f->n_reqs++];
    snprintf(rq->method, sizeof(rq->method), "%s", method);
    rq->path = kite_strdup(path);
    rq->body = body ? json_tokener_parse(body) : NULL;
    int r = 0;
    if (f->down) {
        r = -ECONNREFUSED;
        goto out;
    }
    bool lease = strstr(path, "/leases") != NULL;
    bool is_item = lease ? strstr(path, "/leases/") != NULL : strstr(path, "/nodes/") != NULL;
    json_object **obj = lease ? &f->lease : &f->node;
    if (strstr(path, "/events")) {
        r = reply(ret, 201, rq->body);
    } else if (kite_streq(method, "GET") && is_item) {
        r = reply(ret, *obj ? 200 : 404, *obj);
    } else if (kite_streq(method, "POST") && !is_item) {
        if (*obj) {
            r = reply(ret, 409, NULL);
        } else {
            json_object_deep_copy(rq->body, obj, NULL);
            if (!lease) {
                char uid[32];
                snprintf(uid, sizeof(uid), "uid-%d", ++f->uid_seq);
                set_meta(*obj, "uid", json_object_new_string(uid));
            }
            set_meta(*obj, "resourceVersion", json_object_new_int(++f->rv));
            if (lease) server_fields(f, *obj);
            r = reply(ret, 201, *obj);
        }
    } else if (kite_streq(method, "PUT") && lease && is_item) {
        if (!*obj) {
            r = reply(ret, 404, NULL);
        } else if (f->lease_conflicts > 0) {
            f->lease_conflicts--;
            r = reply(ret, 409, NULL);
        } else {
            json_object_put(*obj);
            *obj = NULL; /* json_object_deep_copy wants an empty destination */
            json_object_deep_copy(rq->body, obj, NULL);
            set_meta(*obj, "resourceVersion", json_object_new_int(++f->rv));
            server_fields(f, *obj);
            r = reply(ret, 200, *obj);
        }
    } else if (kite_streq(method, "PATCH") && !lease && strstr(path, "/status")) {
        if (!f->node) {
            r = reply(ret, 404, NULL);
        } else {
            json_object *out = NULL;
            char *err = NULL;
            if (kite_smp_apply(f->node, rq->body, &schema, &out, &err) < 0) {
                free(err);
                r = reply(ret, 422, NULL);
            } else {
                json_object_put(f->node);
                f->node = out;
                r = reply(ret, 200, f->node);
            }
        }
    } else {
        r = reply(ret, 405, NULL);
    }
out:
    pthread_mutex_unlock(&f->lock);
    return r;
}

static void wake(void *ud) {
    struct fake_api *f = ud;
    pthread_mutex_lock(&f->lock);
    f->watch_cancelled = true; /* a flag of ours: the cancel lock is held here */
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static int watch(void *ud, const char *path, kite_watch_fn fn, void *fn_ud, struct kite_cancel *cancel) {
    struct fake_api *f = ud;
    if (!kite_cancel_set_wake(cancel, wake, f)) return -ECANCELED;
    pthread_mutex_lock(&f->lock);
    f->watching = true;
    while (!f->watch_cancelled) pthread_cond_wait(&f->cond, &f->lock);
    f->watching = false;
    pthread_mutex_unlock(&f->lock);
    kite_cancel_set_wake(cancel, NULL, NULL);
    return -ECANCELED;
}

struct kite_client *fake_api_client(struct fake_api *f) { return kite_client_fake_new(handle, watch, f); }

static bool match(struct fake_req *r, const char *method, const char *contains) {
    return (!method || kite_streq(r->method, method)) && (!contains || strstr(r->path, contains));
}

size_t fake_api_count(struct fake_api *f, const char *method, const char *contains) {
    size_t n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_reqs; i++) n += match(&f->reqs[i], method, contains);
    pthread_mutex_unlock(&f->lock);
    return n;
}

struct fake_req *fake_api_find(struct fake_api *f, const char *method, const char *contains, size_t idx) {
    struct fake_req *out = NULL;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_reqs && !out; i++)
        if (match(&f->reqs[i], method, contains) && idx-- == 0) out = &f->reqs[i];
    pthread_mutex_unlock(&f->lock);
    return out;
}
