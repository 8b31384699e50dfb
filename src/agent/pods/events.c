/* The agent's event recorder, with client-go's EventCorrelator rules (k8s-behaviour §5.5):
 * events similar but for their message aggregate once 10 distinct messages came within 10
 * minutes ("(combined from similar events): "); an identical event bumps count and
 * lastTimestamp of the Event already posted (strategic merge PATCH) instead of posting a new
 * one; a token bucket per involved object (burst 25, one more per 5 minutes) drops the excess.
 * Posting is best effort, as the kubelet's recorder when its sink is down. */
#include <stdio.h>

#include "api/events.h"
#include "agent/pods/pods-int.h"
#include "base/buf.h"
#include "base/log.h"

void kite_recorder_init(struct kite_recorder *r, struct kite_client *c, struct kite_clock *clock, const char *component,
                        const char *host) {
    *r = (struct kite_recorder){.client = c, .clock = clock, .component = kite_strdup(component),
                                .host = kite_strdup(host)};
    pthread_mutex_init(&r->lock, NULL);
}

void kite_recorder_release(struct kite_recorder *r) {
    for (size_t i = 0; i < r->n_e; i++) {
        free(r->e[i].key);
        free(r->e[i].name);
        free(r->e[i].ns);
        free(r->e[i].first_ts);
    }
    for (size_t i = 0; i < r->n_b; i++) free(r->b[i].key);
    for (size_t i = 0; i < r->n_a; i++) {
        free(r->a[i].key);
        kite_strv_free(r->a[i].msgs, r->a[i].n_msgs);
    }
    free(r->e);
    free(r->b);
    free(r->a);
    free(r->component);
    free(r->host);
    pthread_mutex_destroy(&r->lock);
}

/* The spam filter: false when the object's bucket is empty. */
static bool spam_allow(struct kite_recorder *r, const char *key, int64_t now) {
    struct ev_bucket *b = NULL;
    for (size_t i = 0; i < r->n_b && !b; i++)
        if (strcmp(r->b[i].key, key) == 0) b = &r->b[i];
    if (!b) {
        if (r->n_b >= KITE_PODS_EVENT_CACHE) { /* forget the oldest: an object long quiet */
            free(r->b[0].key);
            memmove(&r->b[0], &r->b[1], (r->n_b - 1) * sizeof(*r->b));
            r->n_b--;
        }
        r->b = kite_realloc(r->b, (r->n_b + 1) * sizeof(*r->b));
        b = &r->b[r->n_b++];
        *b = (struct ev_bucket){.key = kite_strdup(key), .tokens = KITE_PODS_EVENT_BURST, .last = now};
    }
    b->tokens += (double)(now - b->last) / (double)KITE_PODS_EVENT_REFILL_NS;
    if (b->tokens > KITE_PODS_EVENT_BURST) b->tokens = KITE_PODS_EVENT_BURST;
    b->last = now;
    if (b->tokens < 1.0) return false;
    b->tokens -= 1.0;
    return true;
}

/* Aggregation: true when this similar key has seen KITE_PODS_EVENT_AGG_MAX distinct messages
 * within the window. */
static bool aggregate(struct kite_recorder *r, const char *key, const char *msg, int64_t now) {
    struct ev_agg *a = NULL;
    for (size_t i = 0; i < r->n_a && !a; i++)
        if (strcmp(r->a[i].key, key) == 0) a = &r->a[i];
    if (!a) {
        if (r->n_a >= KITE_PODS_EVENT_CACHE) {
            free(r->a[0].key);
            kite_strv_free(r->a[0].msgs, r->a[0].n_msgs);
            memmove(&r->a[0], &r->a[1], (r->n_a - 1) * sizeof(*r->a));
            r->n_a--;
        }
        r->a = kite_realloc(r->a, (r->n_a + 1) * sizeof(*r->a));
        a = &r->a[r->n_a++];
        *a = (struct ev_agg){.key = kite_strdup(key), .first = now};
    }
    if (now - a->first > KITE_PODS_EVENT_AGG_WINDOW_NS) {
        kite_strv_free(a->msgs, a->n_msgs);
        a->msgs = NULL;
        a->n_msgs = 0;
        a->first = now;
    }
    bool seen = false;
    for (size_t i = 0; i < a->n_msgs && !seen; i++) seen = strcmp(a->msgs[i], msg) == 0;
    if (!seen && a->n_msgs < KITE_PODS_EVENT_AGG_MAX) {
        a->msgs = kite_realloc(a->msgs, (a->n_msgs + 1) * sizeof(char *));
        a->msgs[a->n_msgs++] = kite_strdup(msg);
    }
    return a->n_msgs >= KITE_PODS_EVENT_AGG_MAX;
}

static struct ev_entry *find_entry(struct kite_recorder *r, const char *key) {
    for (size_t i = 0; i < r->n_e; i++)
        if (strcmp(r->e[i].key, key) == 0) return &r->e[i];
    return NULL;
}

static struct ev_entry *add_entry(struct kite_recorder *r, const char *key) {
    if (r->n_e >= KITE_PODS_EVENT_CACHE) { /* LRU: evict the least recently used */
        size_t old = 0;
        for (size_t i = 1; i < r->n_e; i++)
            if (r->e[i].used < r->e[old].used) old = i;
        free(r->e[old].key);
        free(r->e[old].name);
        free(r->e[old].ns);
        free(r->e[old].first_ts);
        r->e[old] = r->e[--r->n_e];
    }
    r->e = kite_realloc(r->e, (r->n_e + 1) * sizeof(*r->e));
    struct ev_entry *e = &r->e[r->n_e++];
    *e = (struct ev_entry){.key = kite_strdup(key)};
    return e;
}

static void record(struct kite_recorder *r, json_object *obj, const char *field_path, const char *type,
                   const char *reason, const char *message) {
    const char *ns = kite_agent_pjs(obj, "metadata.namespace"), *name = kite_agent_pjs(obj, "metadata.name"),
               *uid = kite_agent_pjs(obj, "metadata.uid");
    if (!ns || !name) return;
    if (!uid) uid = "";
    int64_t now = kite_now_mono(r->clock), wall = kite_now_wall(r->clock);
    _cleanup_free_ char *objkey = kite_asprintf("%s\x1f%s\x1fPod\x1f%s\x1f%s\x1f%s\x1fv1", r->component, r->host, ns,
                                                name, uid);
    _cleanup_free_ char *similar = kite_asprintf("%s\x1f%s\x1f%s\x1f%s", objkey, field_path ? field_path : "", type,
                                                 reason);
    _cleanup_free_ char *msg = aggregate(r, similar, message, now)
                                   ? kite_asprintf("(combined from similar events): %s", message)
                                   : kite_strdup(message);
    _cleanup_free_ char *key = kite_asprintf("%s\x1f%s", similar, msg);
    struct ev_entry *e = find_entry(r, key);
    /* the filter comes last in client-go too: a dropped event is still counted above */
    if (!spam_allow(r, objkey, now)) {
        r->dropped++;
        return;
    }
    char ts[21];
    kite_time_format(wall, ts);
    if (e && e->name) {
        e->count++;
        e->used = ++r->tick;
        json_object *patch = json_object_new_object();
        json_object_object_add(patch, "count", json_object_new_int(e->count));
        json_object_object_add(patch, "lastTimestamp", json_object_new_string(ts));
        _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/events/%s", e->ns, e->name);
        int rc = kite_client_json(r->client, "PATCH", path, "application/strategic-merge-patch+json", patch, NULL, NULL);
        json_object_put(patch);
        if (rc == 0) {
            r->patched++;
            return;
        }
        /* the Event is gone (expired, deleted): post it anew, as client-go does on a failed patch */
        log_debug(PODS_LOG, "patching event %s: %s", e->name, strerror(-rc));
    }
    if (!e) e = add_entry(r, key);
    e->used = ++r->tick;
    free(e->name);
    free(e->ns);
    e->name = kite_event_name(name, wall);
    e->ns = kite_strdup(ns);
    if (!e->first_ts) e->first_ts = kite_strdup(ts);
    if (e->count < 1) e->count = 1;
    struct kite_event_spec es = {.ns = ns, .name = e->name, .kind = "Pod", .obj_name = name, .obj_ns = ns, .uid = uid,
                                 .field_path = field_path, .type = type, .reason = reason, .message = msg,
                                 .component = r->component, .host = r->host, .instance = r->host, .wall_ns = wall,
                                 .first_ts = e->first_ts, .count = (int)e->count};
    json_object *ev = kite_event_build(&es);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/events", ns);
    if (kite_client_json(r->client, "POST", path, NULL, ev, NULL, NULL) == 0) r->posted++;
    json_object_put(ev);
}

void kite_recorder_pod_event(struct kite_recorder *r, json_object *obj, const char *field_path, const char *type,
                             const char *reason, const char *message) {
    pthread_mutex_lock(&r->lock);
    record(r, obj, field_path, type, reason, message);
    pthread_mutex_unlock(&r->lock);
}
