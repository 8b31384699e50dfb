/* The list + watch informer (informer.h). */
#include "client/informer.h"
#include "api/registry.h"
#include "base/backoff.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/map.h"
#include "json/parse.h"
#include "json/scan.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define INFORMER_LOG "informer"

struct kite_informer {
    struct kite_client *client;
    char *path, *selector, name[16];
    struct kite_informer_handlers h[KITE_INFORMER_MAX_HANDLERS];
    size_t nh;
    pthread_mutex_t mu;    /* guards cache (written by the thread, read by kite_informer_get) */
    struct kite_map cache; /* key -> json_object (a reference held) */
    const char **project;  /* NULL, or the members kept (o->project + what the informer reads) */
    kite_informer_transform transform;
    char rv[32];
    bool watch_list;       /* list through the watch; false again once the server refused it */
    json_object *initial;  /* the watch-list's objects until its end bookmark; NULL: not in one */
    pthread_t thread;
    bool running, halted;
    struct kite_cancel cancel;
    struct kite_backoff backoff;
    atomic_bool synced;
};

char *kite_informer_key(json_object *obj) {
    const char *ns = kite_meta_str(obj, "namespace"), *name = kite_meta_str(obj, "name");
    if (!name) return NULL;
    return ns && *ns ? kite_asprintf("%s/%s", ns, name) : kite_strdup(name);
}

/* Room for the key of an event's object without an allocation (a longer one is allocated). */
#define KEY_STACK 320

/* kite_informer_key written into buf[KEY_STACK] when it fits (*heap NULL), else allocated
 * (*heap: to free); NULL when obj has no name. */
static const char *key_of(json_object *obj, char *buf, char **heap) {
    json_object *meta = kite_obj_get(obj, "metadata");
    const char *ns = kite_obj_str(meta, "namespace"), *name = kite_obj_str(meta, "name");
    *heap = NULL;
    if (!name) return NULL;
    size_t nsl = ns ? strlen(ns) : 0, nl = strlen(name);
    if (nsl + nl + 2 > KEY_STACK) return *heap = kite_informer_key(obj);
    char *k = buf;
    if (nsl) memcpy(k, ns, nsl), k += nsl, *k++ = '/';
    memcpy(k, name, nl + 1);
    return buf;
}

static void deleted(struct kite_informer *i, json_object *obj) {
    for (size_t k = 0; k < i->nh; k++)
        if (i->h[k].del) i->h[k].del(i->h[k].ud, obj);
}

/* Puts obj (borrowed) in the cache and tells the handlers. */
static void upsert(struct kite_informer *i, json_object *obj) {
    char buf[KEY_STACK];
    _cleanup_free_ char *heap = NULL;
    const char *key = key_of(obj, buf, &heap);
    if (!key) return;
    pthread_mutex_lock(&i->mu);
    json_object *old = kite_map_put(&i->cache, key, json_object_get(obj));
    pthread_mutex_unlock(&i->mu);
    for (size_t k = 0; k < i->nh; k++) {
        if (!old && i->h[k].add) i->h[k].add(i->h[k].ud, obj);
        if (old && i->h[k].update) i->h[k].update(i->h[k].ud, old, obj);
    }
    json_object_put(old);
}

static void removed(struct kite_informer *i, json_object *obj) {
    char buf[KEY_STACK];
    _cleanup_free_ char *heap = NULL;
    const char *key = key_of(obj, buf, &heap);
    pthread_mutex_lock(&i->mu);
    json_object *old = key ? kite_map_del(&i->cache, key) : NULL;
    pthread_mutex_unlock(&i->mu);
    if (!old) return;
    /* the watch's final state of the object, as client-go hands to OnDelete */
    deleted(i, obj);
    json_object_put(old);
}

/* Delivers the difference between the cache and a fresh list. */
static void replace(struct kite_informer *i, json_object *items) {
    size_t n = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
    struct kite_map seen = {0};
    for (size_t k = 0; k < n; k++) {
        json_object *obj = json_object_array_get_idx(items, k);
        _cleanup_free_ char *key = kite_informer_key(obj);
        if (!key) continue;
        kite_map_put(&seen, key, obj);
        json_object *old = kite_map_get(&i->cache, key);
        if (old && kite_streq(kite_meta_str(old, "resourceVersion"), kite_meta_str(obj, "resourceVersion"))) continue;
        upsert(i, obj);
    }
    const char *key;
    void *v;
    char **gone = NULL;
    size_t ngone = 0;
    for (size_t it = 0; kite_map_next(&i->cache, &it, &key, &v);)
        if (!kite_map_get(&seen, key)) {
            gone = kite_realloc(gone, (ngone + 1) * sizeof *gone);
            gone[ngone++] = kite_strdup(key);
        }
    for (size_t k = 0; k < ngone; k++) {
        pthread_mutex_lock(&i->mu);
        json_object *old = kite_map_del(&i->cache, gone[k]);
        pthread_mutex_unlock(&i->mu);
        deleted(i, old);
        json_object_put(old);
        free(gone[k]);
    }
    free(gone);
    kite_map_release(&seen);
    atomic_store(&i->synced, true);
    for (size_t k = 0; k < i->nh; k++)
        if (i->h[k].synced) i->h[k].synced(i->h[k].ud);
}

/* The bookmark that ends a watch-list's initial events (obj whole, not cut down). */
static bool initial_events_end(const char *type, json_object *obj) {
    return kite_streq(type, "BOOKMARK") &&
           kite_streq(kite_obj_str(kite_obj_get(kite_obj_get(obj, "metadata"), "annotations"), "k8s.io/initial-events-end"),
                      "true");
}

/* What the cache and the handlers get of obj (borrowed, cut down already): a new reference. */
static json_object *kept(struct kite_informer *i, json_object *obj) {
    return i->transform && obj ? i->transform(obj) : json_object_get(obj);
}

/* A watch event of type `type` (NULL: none) for obj (borrowed; NULL: none); end: it is the
 * bookmark ending a watch-list's initial events. */
static int on_object(struct kite_informer *i, const char *type, json_object *obj, bool end) {
    const char *rv = kite_meta_str(obj, "resourceVersion");
    if (!type || kite_streq(type, "ERROR")) return -ESTALE; /* 410 Expired, or worse: list again */
    if (i->initial) {
        /* a watch-list's initial state: delivered whole, as a list, at its end bookmark */
        if (kite_streq(type, "ADDED")) json_object_array_add(i->initial, kept(i, obj));
        else if (!end && !kite_streq(type, "BOOKMARK")) return -EBADMSG; /* changes before the state ended */
        if (!end) return 0;
        if (rv) snprintf(i->rv, sizeof i->rv, "%s", rv);
        json_object *all = TAKE_PTR(i->initial);
        replace(i, all);
        json_object_put(all);
        return 0;
    }
    if (rv) snprintf(i->rv, sizeof i->rv, "%s", rv);
    bool up = kite_streq(type, "ADDED") || kite_streq(type, "MODIFIED"), del = kite_streq(type, "DELETED");
    if (!up && !del) return 0;
    json_object *k = kept(i, obj);
    if (up) upsert(i, k);
    else removed(i, k);
    json_object_put(k);
    return 0;
}

static int on_event(json_object *ev, void *ud) {
    const char *type = kite_obj_str(ev, "type");
    json_object *obj = kite_obj_get(ev, "object");
    return on_object(ud, type, obj, initial_events_end(type, obj));
}

/* A watch event's text, for an informer that keeps only some members: the object is cut down
 * from the text (json/scan.h) without parsing the rest of it; an event the scan cannot follow
 * (and a BOOKMARK or ERROR) is parsed whole and cut down after. */
static int on_line(const char *line, size_t len, void *ud) {
    static const char *const members[] = {"type", "object"};
    static const char *const types[] = {"ADDED", "MODIFIED", "DELETED"};
    struct kite_informer *i = ud;
    const char *m[2];
    size_t mn[2];
    json_object *obj;
    if (kite_json_members(line, len, 2, members, m, mn) == 0 && m[0] && m[1] && *m[0] == '"')
        for (size_t k = 0; k < KITE_ARRAY_SIZE(types); k++)
            if (mn[0] == strlen(types[k]) + 2 && memcmp(m[0] + 1, types[k], mn[0] - 2) == 0) {
                if (!(obj = kite_json_project(m[1], mn[1], i->project))) break;
                int r = on_object(i, types[k], obj, false);
                json_object_put(obj);
                return r;
            }
    enum json_tokener_error e;
    json_object *full = kite_json_parse(line, len, JSON_TOKENER_DEFAULT_DEPTH, &e, NULL);
    if (!full || e != json_tokener_success || !json_object_is_type(full, json_type_object)) {
        json_object_put(full);
        return -EBADMSG;
    }
    json_object *whole = kite_obj_get(full, "object");
    const char *type = kite_obj_str(full, "type");
    obj = whole ? kite_obj_project(whole, i->project) : NULL;
    int r = on_object(i, type, obj, initial_events_end(type, whole));
    json_object_put(obj);
    json_object_put(full);
    return r;
}

/* The list, in pages of KITE_INFORMER_PAGE objects (as client-go's reflector): one answer of every
 * object could pass the client's body limit (92,000 Nodes did, and the informer listed again and
 * again, never watching). The pages are one snapshot (the continue token carries its revision);
 * a token that expired between two pages (410) starts the list over, after the back-off. */
static int list(struct kite_informer *i) {
    json_object *all = json_object_new_array();
    _cleanup_free_ char *cont = NULL;
    int e = 0;
    for (;;) {
        struct kite_buf path = {0};
        kite_buf_printf(&path, "%s?%s%slimit=%d", i->path, i->selector ? i->selector : "", i->selector ? "&" : "",
                        KITE_INFORMER_PAGE);
        if (cont) {
            kite_buf_puts(&path, "&continue=");
            kite_buf_query_value(&path, cont); /* the server's are URL-safe base64; another's need not be */
        }
        json_object *l = NULL;
        e = kite_client_json(i->client, "GET", path.p, NULL, NULL, NULL, &l);
        kite_buf_release(&path);
        if (e < 0) {
            json_object_put(l);
            break;
        }
        const char *rv = kite_meta_str(l, "resourceVersion");
        snprintf(i->rv, sizeof i->rv, "%s", rv ? rv : "");
        json_object *items = kite_obj_get(l, "items");
        for (size_t k = 0; k < kite_array_len(items); k++) {
            json_object *o = json_object_array_get_idx(items, k);
            /* the cache keeps the cut-down objects only */
            json_object *cut = i->project ? kite_obj_project(o, i->project) : json_object_get(o);
            json_object_array_add(all, kept(i, cut));
            json_object_put(cut);
        }
        const char *next = kite_meta_str(l, "continue");
        free(cont);
        cont = next && *next ? kite_strdup(next) : NULL;
        json_object_put(l);
        if (!cont) break;
    }
    if (e == 0) replace(i, all);
    else log_warn(INFORMER_LOG, "list of %s: %s; listing again", i->path, strerror(-e));
    json_object_put(all);
    return e;
}

/* One watch: from i->rv, or (listed false) a watch-list of the current state. Returns the
 * watch's end (0: the server ended it). */
static int watch(struct kite_informer *i, bool listed) {
    const char *sel = i->selector ? i->selector : "", *amp = i->selector ? "&" : "";
    _cleanup_free_ char *path =
        listed ? kite_asprintf("%s?%s%swatch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d", i->path,
                               sel, amp, i->rv, KITE_INFORMER_WATCH_S)
               : kite_asprintf("%s?%s%swatch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                               "&allowWatchBookmarks=true&timeoutSeconds=%d",
                               i->path, sel, amp, KITE_INFORMER_WATCH_S);
    if (!listed) i->initial = json_object_new_array();
    int e = i->project ? kite_client_watch_lines(i->client, path, on_line, i, &i->cancel)
                       : kite_client_watch(i->client, path, on_event, i, &i->cancel);
    if (i->initial) { /* the stream ended inside the initial state: none of it is delivered */
        json_object_put(TAKE_PTR(i->initial));
        if (e == 0 || e == -EINVAL) {
            log_warn(INFORMER_LOG, "%s: the server %s a watch-list; listing in pages from now on", i->path,
                     e == 0 ? "ended before the initial events of" : "refused");
            i->watch_list = false;
        }
        if (e == 0) e = -EPROTO; /* not a resumable end */
        if (e == -ESTALE) e = -EAGAIN; /* dropped while still sending them: the back-off first */
    }
    return e;
}

static void *run(void *ud) {
    struct kite_informer *i = ud;
    bool listed = false;
    while (!kite_cancel_fired(&i->cancel)) {
        if (!listed && !i->watch_list) {
            if (list(i) < 0) {
                kite_cancel_wait(&i->cancel, kite_backoff_next(&i->backoff));
                continue;
            }
            listed = true;
        }
        int e = watch(i, listed);
        if (e == 0) { /* the server ended the stream: resume from where it was */
            kite_backoff_reset(&i->backoff);
            listed = true;
            continue;
        }
        listed = false;
        if (e != -ESTALE) kite_cancel_wait(&i->cancel, kite_backoff_next(&i->backoff));
    }
    return NULL;
}

struct kite_informer *kite_informer_new(const struct kite_informer_options *o) {
    struct kite_informer *i = kite_calloc(1, sizeof *i);
    i->client = o->client;
    i->path = kite_strdup(o->path);
    i->selector = o->selector ? kite_strdup(o->selector) : NULL;
    i->watch_list = o->watch_list;
    i->transform = o->transform;
    snprintf(i->name, sizeof i->name, "%s", o->name ? o->name : "informer");
    if (o->project) {
        static const char *const own[] = {"metadata.name", "metadata.namespace", "metadata.resourceVersion"};
        size_t n = 0;
        while (o->project[n]) n++;
        i->project = kite_calloc(n + KITE_ARRAY_SIZE(own) + 1, sizeof *i->project);
        for (size_t k = 0; k < KITE_ARRAY_SIZE(own); k++) i->project[k] = kite_strdup(own[k]);
        for (size_t k = 0; k < n; k++) i->project[KITE_ARRAY_SIZE(own) + k] = kite_strdup(o->project[k]);
    }
    i->nh = KITE_MIN(o->n_handlers, (size_t)KITE_INFORMER_MAX_HANDLERS);
    memcpy(i->h, o->handlers, i->nh * sizeof *i->h);
    pthread_mutex_init(&i->mu, NULL);
    kite_cancel_init(&i->cancel);
    kite_backoff_init(&i->backoff, KITE_NS_PER_SEC, KITE_INFORMER_RETRY_MAX_S * KITE_NS_PER_SEC, 2.0, 0.1,
                      (uint64_t)(uintptr_t)i);
    return i;
}

int kite_informer_add_handlers(struct kite_informer *i, const struct kite_informer_handlers *h) {
    if (i->running) return -EBUSY;
    if (i->nh == KITE_INFORMER_MAX_HANDLERS) return -ENOSPC;
    i->h[i->nh++] = *h;
    return 0;
}

int kite_informer_run(struct kite_informer *i) {
    if (i->running) return 0;
    if (pthread_create(&i->thread, NULL, run, i) != 0) return -EAGAIN;
    pthread_setname_np(i->thread, i->name);
    i->running = true;
    return 0;
}

int kite_informer_start(const struct kite_informer_options *o, struct kite_informer **ret) {
    struct kite_informer *i = kite_informer_new(o);
    int r = kite_informer_run(i);
    if (r < 0) {
        kite_informer_stop(i);
        return r;
    }
    *ret = i;
    return 0;
}

bool kite_informer_synced(struct kite_informer *i) { return atomic_load(&i->synced); }

json_object *kite_informer_get(struct kite_informer *i, const char *key) {
    json_object *copy = NULL;
    pthread_mutex_lock(&i->mu);
    json_object *o = kite_map_get(&i->cache, key);
    if (o) json_object_deep_copy(o, &copy, NULL);
    pthread_mutex_unlock(&i->mu);
    return copy;
}

char **kite_informer_keys(struct kite_informer *i, size_t *n) {
    pthread_mutex_lock(&i->mu);
    char **keys = kite_calloc(i->cache.len + 1, sizeof *keys);
    size_t k = 0;
    const char *key;
    void *v;
    for (size_t it = 0; kite_map_next(&i->cache, &it, &key, &v);) keys[k++] = kite_strdup(key);
    pthread_mutex_unlock(&i->mu);
    *n = k;
    return keys;
}

void kite_informer_halt(struct kite_informer *i) {
    if (!i || i->halted) return;
    i->halted = true;
    kite_cancel_fire(&i->cancel);
    if (i->running) pthread_join(i->thread, NULL);
}

void kite_informer_stop(struct kite_informer *i) {
    if (!i) return;
    kite_informer_halt(i);
    kite_cancel_release(&i->cancel);
    const char *key;
    void *v;
    for (size_t it = 0; kite_map_next(&i->cache, &it, &key, &v);) json_object_put(v);
    kite_map_release(&i->cache);
    pthread_mutex_destroy(&i->mu);
    free(i->path);
    free(i->selector);
    for (size_t k = 0; i->project && i->project[k]; k++) free((char *)i->project[k]);
    free(i->project);
    free(i);
}
