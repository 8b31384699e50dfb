/* The in-memory API server of fakeapi.h. */
#include "fakeapi.h"

#include <unistd.h>
#include "json/patch.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>

static char *status_body(long code, const char *reason) {
    return kite_asprintf("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"%s\",\"code\":%ld}",
                         reason, code);
}

static void answer(struct kite_response *ret, long code, json_object *obj) {
    ret->status = code;
    ret->body = kite_strdup(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN));
}

static void set_rv(struct fakeapi *f, json_object *obj) {
    char rv[24];
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)++f->rv);
    kite_obj_set(kite_obj_ensure(obj, "metadata"), "resourceVersion", json_object_new_string(rv));
}

static const struct kite_smp_schema *schema_of(const char *path) {
    const struct kite_resource *r = strstr(path, "/pods") ? kite_registry_find("", "v1", "pods")
                                    : strstr(path, "/nodes") ? kite_registry_find("", "v1", "nodes")
                                                             : NULL;
    return r ? r->smp : NULL;
}

static int handler(void *ud, const char *method, const char *fullpath, const char *ctype, const char *body, size_t len,
                   struct kite_response *ret) {
    struct fakeapi *f = ud;
    if (f->on_request) f->on_request(f->on_request_ud, method, fullpath);
    pthread_mutex_lock(&f->mu);
    f->log = kite_realloc(f->log, (f->nlog + 1) * sizeof *f->log);
    f->log[f->nlog++] = kite_asprintf("%s %s", method, fullpath);
    _cleanup_free_ char *path = kite_strdup(fullpath);
    char *q = strchr(path, '?');
    if (q) *q++ = 0;
    json_object *in = body && len ? json_tokener_parse(body) : NULL;
    if (f->fail_prefix && strncmp(path, f->fail_prefix, strlen(f->fail_prefix)) == 0 &&
        (!f->fail_method || strcmp(method, f->fail_method) == 0)) {
        ret->status = f->fail_code;
        ret->body = status_body(f->fail_code, "InternalError");
        goto out;
    }
    size_t pl = strlen(path);
    bool status = pl > 7 && strcmp(path + pl - 7, "/status") == 0;
    if (status) path[pl - 7] = 0;
    json_object *cur = kite_map_get(&f->objs, path);
    if (strcmp(method, "GET") == 0) {
        if (cur) {
            answer(ret, 200, cur);
            goto out;
        }
        const char *last = strrchr(path, '/') + 1;
        if (!kite_streq(last, "nodes") && !kite_streq(last, "pods") && !kite_streq(last, "leases") &&
            !kite_streq(last, "events")) {
            ret->status = 404;
            ret->body = status_body(404, "NotFound");
            goto out;
        }
        /* a collection: every object under path, field-selected on spec.nodeName */
        const char *sel = q ? strstr(q, "spec.nodeName%3D") : NULL;
        json_object *list = json_object_new_object(), *items = json_object_new_array();
        const char *k;
        void *v;
        size_t n = strlen(path);
        bool all_pods = strcmp(path, "/api/v1/pods") == 0; /* across namespaces */
        for (size_t it = 0; kite_map_next(&f->objs, &it, &k, &v);) {
            if (all_pods) {
                const char *pp = strstr(k, "/pods/");
                if (strncmp(k, "/api/v1/namespaces/", 19) != 0 || !pp || strchr(pp + 6, '/')) continue;
            } else if (strncmp(k, path, n) != 0 || k[n] != '/' || strchr(k + n + 1, '/')) {
                continue;
            }
            if (sel && !kite_streq(kite_obj_str(kite_obj_get(v, "spec"), "nodeName"), sel + 16)) continue;
            json_object_array_add(items, json_object_get(v));
        }
        kite_obj_set(list, "items", items);
        char rv[24];
        snprintf(rv, sizeof rv, "%llu", (unsigned long long)f->rv);
        kite_obj_set(kite_obj_ensure(list, "metadata"), "resourceVersion", json_object_new_string(rv));
        answer(ret, 200, list);
        json_object_put(list);
        goto out;
    }
    if (strcmp(method, "POST") == 0) {
        const char *name = kite_meta_str(in, "name"), *gen = kite_meta_str(in, "generateName");
        if ((!name || !*name) && gen) { /* the server's generated name: a counter here */
            _cleanup_free_ char *n = kite_asprintf("%s%llu", gen, (unsigned long long)f->rv + 1);
            kite_obj_set(kite_obj_ensure(in, "metadata"), "name", json_object_new_string(n));
            name = kite_meta_str(in, "name");
        }
        const char *nsp = strncmp(path, "/api/v1/namespaces/", 19) == 0 ? path + 19 : NULL;
        if (nsp && !kite_meta_str(in, "namespace") && strchr(nsp, '/')) {
            _cleanup_free_ char *ns = kite_strndup(nsp, (size_t)(strchr(nsp, '/') - nsp));
            kite_obj_set(kite_obj_ensure(in, "metadata"), "namespace", json_object_new_string(ns));
        }
        _cleanup_free_ char *p = kite_asprintf("%s/%s", path, name ? name : "");
        if (kite_map_get(&f->objs, p)) {
            ret->status = 409;
            ret->body = status_body(409, "AlreadyExists");
            goto out;
        }
        json_object *obj = json_object_get(in);
        fakeapi_put(f, p, obj);
        answer(ret, 201, obj);
        goto out;
    }
    if (!cur) {
        ret->status = 404;
        ret->body = status_body(404, "NotFound");
        goto out;
    }
    const char *want_rv = kite_meta_str(in, "resourceVersion");
    if (want_rv && *want_rv && !kite_streq(want_rv, kite_meta_str(cur, "resourceVersion"))) {
        ret->status = 409;
        ret->body = status_body(409, "Conflict");
        goto out;
    }
    if (strcmp(method, "DELETE") == 0) {
        answer(ret, 200, cur);
        json_object_put(kite_map_del(&f->objs, path));
        goto out;
    }
    json_object *next = NULL;
    if (strcmp(method, "PUT") == 0) {
        next = json_object_get(in);
    } else { /* PATCH */
        char *err = NULL;
        json_object *p = NULL;
        json_object_deep_copy(in, &p, NULL);
        json_object *meta = kite_obj_get(p, "metadata");
        if (meta) json_object_object_del(meta, "resourceVersion");
        int e = strcmp(ctype, "application/merge-patch+json") == 0 ? kite_merge_patch(cur, p, &next, &err)
                                                                   : kite_smp_apply(cur, p, schema_of(path), &next, &err);
        json_object_put(p);
        free(err);
        cr_assert_eq(e, 0, "patch of %s failed", path);
    }
    set_rv(f, next);
    answer(ret, 200, next);
    kite_map_put(&f->objs, path, next);
    json_object_put(cur);
out:
    json_object_put(in);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

void fakeapi_init(struct fakeapi *f) {
    *f = (struct fakeapi){0};
    pthread_mutex_init(&f->mu, NULL);
    f->client = kite_client_fake_new(handler, NULL, f);
}

void fakeapi_release(struct fakeapi *f) {
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&f->objs, &it, &k, &v);) json_object_put(v);
    kite_map_release(&f->objs);
    for (size_t i = 0; i < f->nlog; i++) free(f->log[i]);
    free(f->log);
    kite_client_free(f->client);
    pthread_mutex_destroy(&f->mu);
}

json_object *fakeapi_put(struct fakeapi *f, const char *path, json_object *obj) {
    set_rv(f, obj);
    json_object *meta = kite_obj_ensure(obj, "metadata");
    if (f->creation && !kite_obj_get(meta, "creationTimestamp"))
        kite_obj_set(meta, "creationTimestamp", json_object_new_string(f->creation));
    if (!kite_obj_get(meta, "uid")) {
        _cleanup_free_ char *uid = kite_asprintf("uid-%llu", (unsigned long long)f->rv);
        kite_obj_set(meta, "uid", json_object_new_string(uid));
    }
    json_object_put(kite_map_put(&f->objs, path, obj));
    return obj;
}

json_object *fakeapi_get(struct fakeapi *f, const char *path) { return kite_map_get(&f->objs, path); }

size_t fakeapi_count(struct fakeapi *f, const char *method, const char *part) {
    size_t n = 0, ml = strlen(method);
    for (size_t i = 0; i < f->nlog; i++)
        n += strncmp(f->log[i], method, ml) == 0 && f->log[i][ml] == ' ' && strstr(f->log[i] + ml, part);
    return n;
}

size_t fakeapi_events(struct fakeapi *f, const char *reason, const char *name) {
    size_t n = 0;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&f->objs, &it, &k, &v);)
        n += strstr(k, "/events/") && kite_streq(kite_obj_str(v, "reason"), reason) &&
             kite_streq(kite_obj_str(kite_obj_get(v, "involvedObject"), "name"), name);
    return n;
}

json_object *fakeapi_json(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    cr_assert(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "bad JSON: %s", s);
    free(s);
    return o;
}

void fakeapi_meter_hook(void *ud, const char *method, const char *path) {
    struct fakeapi_meter *m = ud;
    if (strcmp(method, m->method) || !strstr(path, m->part)) return;
    int now = atomic_fetch_add(&m->in, 1) + 1;
    for (int most = atomic_load(&m->most); now > most && !atomic_compare_exchange_weak(&m->most, &most, now);) {}
    usleep((useconds_t)m->delay_us);
    atomic_fetch_sub(&m->in, 1);
}
