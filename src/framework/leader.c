/* Lease-based leader election (leader.h), following client-go's tryAcquireOrRenew. */
#include "framework/leader.h"
#include "api/registry.h"
#include "base/backoff.h"
#include "base/log.h"

#include <stdatomic.h>
#include <stdio.h>

#define LOG "leader-election"
#define NEVER (INT64_MIN / 2) /* renewed: not holding */

struct kite_leader {
    struct kite_leader_options o;
    char *ns, *name, *identity, *path, *collection;
    json_object *lease;       /* the Lease as last read or written (its resourceVersion) */
    json_object *observed;    /* the spec last observed; NULL before the first read */
    char *observed_raw;       /* its serialization, to notice a change */
    int64_t observed_at;      /* mono, when it was observed */
    int64_t last_renew;       /* mono, our last successful acquire or renew */
    bool leading;             /* between started and stopped */
    _Atomic int64_t renewed;  /* last_renew while holding, for kite_leader_may_write's threads */
    pthread_t thread;
    bool threaded;
    struct kite_cancel cancel;
    uint64_t rng;
};

struct kite_leader *kite_leader_new(const struct kite_leader_options *o) {
    struct kite_leader *l = kite_calloc(1, sizeof *l);
    l->o = *o;
    if (!l->o.clock) l->o.clock = kite_clock_real();
    if (!l->o.lease_duration_ns) l->o.lease_duration_ns = KITE_LEADER_LEASE_DURATION_NS;
    if (!l->o.renew_deadline_ns) l->o.renew_deadline_ns = KITE_LEADER_RENEW_DEADLINE_NS;
    if (!l->o.retry_period_ns) l->o.retry_period_ns = KITE_LEADER_RETRY_PERIOD_NS;
    l->ns = kite_strdup(o->ns);
    l->name = kite_strdup(o->name);
    l->identity = kite_strdup(o->identity);
    l->o.ns = l->ns, l->o.name = l->name, l->o.identity = l->identity;
    l->collection = kite_asprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases", l->ns);
    l->path = kite_asprintf("%s/%s", l->collection, l->name);
    l->rng = (uint64_t)kite_now_mono(l->o.clock) ^ (uint64_t)(uintptr_t)l;
    kite_cancel_init(&l->cancel);
    atomic_init(&l->renewed, NEVER);
    return l;
}

void kite_leader_free(struct kite_leader *l) {
    if (!l) return;
    json_object_put(l->lease);
    json_object_put(l->observed);
    free(l->observed_raw);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l->path);
    free(l->collection);
    kite_cancel_release(&l->cancel);
    free(l);
}

/* when the request that acquired or renewed the lease was sent */
static void renewed(struct kite_leader *l, int64_t at) {
    l->last_renew = at;
    atomic_store(&l->renewed, at);
}

bool kite_leader_may_write(void *ud) {
    struct kite_leader *l = ud;
    return kite_now_mono(l->o.clock) - atomic_load(&l->renewed) < l->o.renew_deadline_ns;
}

static const char *holder_of(json_object *spec) { return kite_obj_str(spec, "holderIdentity"); }

bool kite_leader_is_leader(struct kite_leader *l) { return l->observed && kite_streq(holder_of(l->observed), l->identity); }

/* The observed record is still in force: observed less than its leaseDurationSeconds ago. */
static bool lease_valid(struct kite_leader *l, int64_t now) {
    json_object *d = kite_obj_get(l->observed, "leaseDurationSeconds");
    int64_t dur = d ? kite_sec_to_ns(json_object_get_int64(d)) : 0;
    return l->observed && kite_sat_add(l->observed_at, dur) > now;
}

static void observe(struct kite_leader *l, json_object *spec, int64_t now) {
    json_object_put(l->observed);
    l->observed = json_object_get(spec);
    free(l->observed_raw);
    l->observed_raw = kite_strdup(json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN));
    l->observed_at = now;
}

static json_object *record(struct kite_leader *l, const char *holder, int64_t dur_s, const char *acquire,
                           const char *renew, int64_t transitions) {
    json_object *spec = json_object_new_object();
    kite_obj_set(spec, "holderIdentity", json_object_new_string(holder));
    kite_obj_set(spec, "leaseDurationSeconds", json_object_new_int64(dur_s));
    kite_obj_set(spec, "acquireTime", json_object_new_string(acquire));
    kite_obj_set(spec, "renewTime", json_object_new_string(renew));
    kite_obj_set(spec, "leaseTransitions", json_object_new_int64(transitions));
    (void)l;
    return spec;
}

/* PUT the lease as last read with spec; on success it becomes the observed record. */
static int update(struct kite_leader *l, json_object *spec, int64_t now) {
    json_object *body = json_object_get(l->lease);
    kite_obj_set(body, "spec", json_object_get(spec));
    json_object *out = NULL;
    int e = kite_client_json(l->o.client, "PUT", l->path, NULL, body, NULL, &out);
    json_object_put(body);
    if (e < 0) {
        json_object_put(out);
        /* the lease as last read no longer matches the server: read it again next time */
        json_object_put(TAKE_PTR(l->lease));
        return e;
    }
    json_object_put(l->lease);
    l->lease = out;
    observe(l, spec, now);
    return 0;
}

static int64_t transitions_of(json_object *spec) {
    json_object *t = kite_obj_get(spec, "leaseTransitions");
    return t ? json_object_get_int64(t) : 0;
}

int kite_leader_try(struct kite_leader *l) {
    int64_t now = kite_now_mono(l->o.clock);
    char ts[28];
    kite_microtime_format(kite_now_wall(l->o.clock), ts);
    int64_t dur_s = l->o.lease_duration_ns / KITE_NS_PER_SEC;
    int e;
    /* 1. the leader's fast path: renew the record it wrote last, assuming it is current */
    if (kite_leader_is_leader(l) && lease_valid(l, now) && l->lease) {
        json_object *spec = record(l, l->identity, dur_s, kite_obj_str(l->observed, "acquireTime"), ts,
                                   transitions_of(l->observed));
        e = update(l, spec, now);
        json_object_put(spec);
        if (e == 0) {
            renewed(l, now);
            return 1;
        }
    }
    /* 2. read the lease, or create it */
    json_object *lease = NULL;
    e = kite_client_json(l->o.client, "GET", l->path, NULL, NULL, NULL, &lease);
    if (e == -ENOENT) {
        json_object_put(lease);
        json_object *body = json_object_new_object(), *meta = json_object_new_object();
        kite_obj_set(body, "apiVersion", json_object_new_string("coordination.k8s.io/v1"));
        kite_obj_set(body, "kind", json_object_new_string("Lease"));
        kite_obj_set(meta, "name", json_object_new_string(l->name));
        kite_obj_set(meta, "namespace", json_object_new_string(l->ns));
        kite_obj_set(body, "metadata", meta);
        json_object *spec = record(l, l->identity, dur_s, ts, ts, 0), *out = NULL;
        kite_obj_set(body, "spec", json_object_get(spec));
        e = kite_client_json(l->o.client, "POST", l->collection, NULL, body, NULL, &out);
        json_object_put(body);
        if (e == 0) {
            json_object_put(l->lease);
            l->lease = out;
            observe(l, spec, now);
            renewed(l, now);
        } else {
            json_object_put(out);
        }
        json_object_put(spec);
        return e < 0 ? e : 1;
    }
    if (e < 0) {
        json_object_put(lease);
        return e;
    }
    json_object_put(l->lease);
    l->lease = lease;
    json_object *spec = kite_obj_get(lease, "spec");
    if (!spec) kite_obj_set(lease, "spec", spec = json_object_new_object());
    /* the record was seen when the answer came, not when this try began: a process paused
     * during the GET (SIGSTOP) saw a holder's renewal only now, and its lease runs from now
     * (as client-go's observedTime); an earlier time would let the next try take a lease the
     * holder had just renewed */
    now = kite_now_mono(l->o.clock);
    /* 3. a record that changed since last seen restarts its lease duration on our clock */
    const char *raw = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN);
    if (!l->observed_raw || strcmp(raw, l->observed_raw) != 0) observe(l, spec, now);
    const char *holder = holder_of(spec);
    bool leader = kite_leader_is_leader(l);
    if (holder && *holder && lease_valid(l, now) && !leader) {
        atomic_store(&l->renewed, NEVER);
        return 0;
    }
    /* 4. take it (or keep it) */
    json_object *mine = leader ? record(l, l->identity, dur_s, kite_obj_str(spec, "acquireTime"), ts, transitions_of(spec))
                               : record(l, l->identity, dur_s, ts, ts, transitions_of(spec) + 1);
    e = update(l, mine, now);
    json_object_put(mine);
    if (e < 0) return e;
    renewed(l, now);
    return 1;
}

int kite_leader_release(struct kite_leader *l) {
    if (!kite_leader_is_leader(l) || !l->lease) return 0;
    char ts[28];
    kite_microtime_format(kite_now_wall(l->o.clock), ts);
    atomic_store(&l->renewed, NEVER);
    json_object *spec = record(l, "", 1, ts, ts, transitions_of(l->observed));
    int e = update(l, spec, kite_now_mono(l->o.clock));
    json_object_put(spec);
    return e;
}

static void *start_thread(void *ud) {
    struct kite_leader *l = ud;
    l->o.started(l->o.ud);
    return NULL;
}

static void *run(void *ud) {
    struct kite_leader *l = ud;
    while (!kite_cancel_fired(&l->cancel)) {
        /* acquire: every retry period, jittered so candidates do not move in step */
        int r = kite_leader_try(l);
        if (r <= 0) {
            if (r < 0 && r != -EEXIST) log_debug(LOG, "%s: cannot acquire: %s", l->path, strerror(-r));
            kite_cancel_wait(&l->cancel, kite_jitter(l->o.retry_period_ns, KITE_LEADER_JITTER, &l->rng));
            continue;
        }
        log_info(LOG, "%s acquired the lease %s/%s", l->identity, l->ns, l->name);
        l->leading = true;
        /* the controllers start on a thread of their own, so the lease is renewed meanwhile
         * (a slow start is not a lapse); it is joined before they are stopped */
        pthread_t starter;
        bool starting = l->o.started && pthread_create(&starter, NULL, start_thread, l) == 0;
        if (l->o.started && !starting) l->o.started(l->o.ud);
        /* renew until the deadline passes without a successful renewal */
        while (!kite_cancel_fired(&l->cancel)) {
            kite_cancel_wait(&l->cancel, l->o.retry_period_ns);
            if (kite_cancel_fired(&l->cancel)) break;
            /* paused past the renew deadline (SIGSTOP, a stalled machine): leadership lapsed
             * whoever holds the lease now, and what the controllers know (a node's last
             * renewal seen, on this clock) is stale; they stop, and start afresh (re-reading
             * everything) if this process acquires the lease again */
            if (kite_now_mono(l->o.clock) - l->last_renew >= l->o.renew_deadline_ns) {
                log_warn(LOG, "%s: no renewal for longer than the renew deadline: leadership lapsed", l->identity);
                break;
            }
            r = kite_leader_try(l);
            if (r == 1) continue;
            int64_t since = kite_now_mono(l->o.clock) - l->last_renew;
            if (r == 0 || since >= l->o.renew_deadline_ns) {
                log_warn(LOG, "%s lost the lease %s/%s (%s)", l->identity, l->ns, l->name,
                         r == 0 ? "another holder" : strerror(-r));
                break;
            }
        }
        l->leading = false;
        if (starting) pthread_join(starter, NULL);
        if (l->o.stopped) l->o.stopped(l->o.ud);
    }
    return NULL;
}

int kite_leader_start(const struct kite_leader_options *o, struct kite_leader **ret) {
    struct kite_leader *l = kite_leader_new(o);
    if (o->gated) kite_client_set_write_gate(o->gated, kite_leader_may_write, l);
    if (pthread_create(&l->thread, NULL, run, l) != 0) {
        kite_leader_free(l);
        return -EAGAIN;
    }
    l->threaded = true;
    pthread_setname_np(l->thread, "leader-elect");
    *ret = l;
    return 0;
}

void kite_leader_stop(struct kite_leader *l) {
    if (!l) return;
    kite_cancel_fire(&l->cancel);
    if (l->threaded) pthread_join(l->thread, NULL);
    kite_leader_release(l);
    if (l->o.gated) kite_client_set_write_gate(l->o.gated, NULL, NULL);
    kite_leader_free(l);
}
