/* The divergence states of a node (nodestate.h). */
#include "api/nodestate.h"
#include "api/registry.h"
#include "api/table.h"
#include "base/clock.h"

#include <string.h>

static const char *const NAMES[KITE_NODE_STATES] = {
    [KITE_NODE_ORPHAN_MACHINE] = "OrphanMachine", [KITE_NODE_STALE_OBJECT] = "StaleObject",
    [KITE_NODE_NEVER_REPORTED] = "NeverReported", [KITE_NODE_UNREACHABLE] = "Unreachable",
    [KITE_NODE_LEASE_EXPIRED] = "LeaseExpired",
    [KITE_NODE_NOT_READY] = "NotReady",           [KITE_NODE_REREGISTERED] = "Reregistered",
    [KITE_NODE_DRAINING] = "Draining",            [KITE_NODE_CORDONED] = "Cordoned",
    [KITE_NODE_HEALTHY] = "Healthy",
};

const char *kite_node_state_name(enum kite_node_state s) {
    return s >= 0 && s < KITE_NODE_STATES ? NAMES[s] : "";
}

static const char *str(json_object *o, const char *k) {
    const char *v = kite_obj_str(o, k);
    return v ? v : "";
}

static json_object *condition(json_object *node, const char *type) {
    json_object *conds = kite_obj_get(kite_obj_get(node, "status"), "conditions");
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(str(c, "type"), type) == 0) return c;
    }
    return NULL;
}

/* "5m" for the time from t_ns to now_ns ("?" when t_ns is unknown). */
static void ago(int64_t t_ns, int64_t now_ns, char out[32]) {
    if (!t_ns) {
        strcpy(out, "?");
        return;
    }
    kite_human_duration((now_ns - t_ns) / KITE_NS_PER_SEC, out);
}

static int64_t time_of(const char *s) {
    int64_t ns;
    return *s && kite_time_parse(s, &ns) == 0 ? ns : 0;
}

/* "; lease renewed 3s ago" / "; no lease" */
static void lease_evidence(const struct kite_node_facts *f, int64_t now, struct kite_buf *ev) {
    char a[32];
    int64_t renew = time_of(str(kite_obj_get(f->lease, "spec"), "renewTime"));
    if (!f->lease) kite_buf_puts(ev, "; no lease");
    else if (!renew) kite_buf_puts(ev, "; lease never renewed");
    else {
        ago(renew, now, a);
        kite_buf_printf(ev, "; lease renewed %s ago", a);
    }
}

static void seen_evidence(const struct kite_node_facts *f, const char *name, int64_t now, struct kite_buf *ev) {
    char a[32];
    if (!f->seen_last_ns) {
        kite_buf_printf(ev, "; system:node:%s not seen by this apiserver", name);
        return;
    }
    ago(f->seen_last_ns, now, a);
    kite_buf_printf(ev, "; system:node:%s last called %s ago", name, a);
    if (f->seen_what && *f->seen_what) kite_buf_printf(ev, " (%s)", f->seen_what);
}

/* When the lease expired, on the server's clock: its duration or the grace period (the longer)
 * after the server saw the renewal; 0 while it has not (or there is no lease to judge). */
static int64_t lease_expired_at(const struct kite_node_facts *f, int64_t now, const struct kite_node_thresholds *t) {
    json_object *d = kite_obj_get(kite_obj_get(f->lease, "spec"), "leaseDurationSeconds");
    int64_t dur = d ? json_object_get_int64(d) * KITE_NS_PER_SEC : 0;
    int64_t at = f->renewed_ns + (dur > t->grace_ns ? dur : t->grace_ns);
    return f->lease && f->renewed_ns && t->grace_ns > 0 && now >= at ? at : 0;
}

enum kite_node_state kite_node_classify(const struct kite_node_facts *f, int64_t now, const struct kite_node_thresholds *t,
                                        struct kite_buf *ev) {
    struct kite_buf scratch = {0};
    if (!ev) ev = &scratch;
    char a[32], b[32];
    enum kite_node_state s;
    json_object *meta = kite_obj_meta(f->node);
    const char *name = str(meta, "name");
    if (!f->node) {
        if (!f->seen_last_ns || now - f->seen_last_ns > t->orphan_window_ns) {
            kite_buf_release(&scratch);
            return KITE_NODE_NONE;
        }
        ago(f->seen_last_ns, now, a);
        kite_buf_printf(ev, "no Node object, but its credential called %s ago", a);
        if (f->seen_what && *f->seen_what) kite_buf_printf(ev, " (%s)", f->seen_what);
        kite_buf_release(&scratch);
        return KITE_NODE_ORPHAN_MACHINE;
    }
    json_object *ready = condition(f->node, "Ready");
    const char *st = str(ready, "status"), *reason = str(ready, "reason"), *msg = str(ready, "message");
    int64_t since = time_of(str(ready, "lastTransitionTime"));
    int64_t created = time_of(str(meta, "creationTimestamp"));
    bool cordoned = kite_obj_get(kite_obj_get(f->node, "spec"), "unschedulable") &&
                    json_object_get_boolean(kite_obj_get(kite_obj_get(f->node, "spec"), "unschedulable"));
    if (ready && strcmp(st, "Unknown") == 0) {
        ago(since, now, a);
        if (since && now - since >= t->stale_ns) {
            kite_human_duration(t->stale_ns / KITE_NS_PER_SEC, b);
            kite_buf_printf(ev, "Ready Unknown (%s) for %s, longer than %s", reason, a, b);
            s = KITE_NODE_STALE_OBJECT;
        } else if (strcmp(reason, "NodeStatusNeverUpdated") == 0) {
            kite_buf_printf(ev, "Ready Unknown for %s: %s (%s)", a, msg, reason);
            s = KITE_NODE_NEVER_REPORTED;
        } else {
            kite_buf_printf(ev, "Ready Unknown for %s: %s (%s)", a, msg, reason);
            s = KITE_NODE_UNREACHABLE;
        }
        lease_evidence(f, now, ev);
        seen_evidence(f, name, now, ev);
    } else if (!ready) {
        ago(created, now, a);
        kite_buf_printf(ev, "no Ready condition: the agent has posted no status since the Node was created %s ago", a);
        lease_evidence(f, now, ev);
        seen_evidence(f, name, now, ev);
        s = KITE_NODE_NEVER_REPORTED;
    } else if (lease_expired_at(f, now, t)) {
        /* the agent went silent and nothing marked it: no controller-manager runs, or it lags */
        int64_t at = lease_expired_at(f, now, t);
        ago(f->renewed_ns, now, a);
        ago(at, now, b);
        kite_buf_printf(ev, "Ready %s (%s), but its lease was last renewed %s ago and expired %s ago; no node "
                            "lifecycle controller marked it Unknown", st, reason, a, b);
        /* silent longer than the stale threshold: decommissioned, as a node Unknown that long */
        s = now - f->renewed_ns >= t->stale_ns ? KITE_NODE_STALE_OBJECT : KITE_NODE_LEASE_EXPIRED;
        if (s == KITE_NODE_STALE_OBJECT) {
            kite_human_duration(t->stale_ns / KITE_NS_PER_SEC, b);
            kite_buf_printf(ev, ", silent longer than %s", b);
        }
        seen_evidence(f, name, now, ev);
    } else if (strcmp(st, "True") != 0) {
        ago(since, now, a);
        kite_buf_printf(ev, "Ready %s for %s: %s%s%s", st, a, reason, *msg ? ": " : "", msg);
        s = KITE_NODE_NOT_READY;
    } else if (f->recreated_ns && now - f->recreated_ns < t->rereg_window_ns) {
        ago(f->recreated_ns, now, a);
        kite_buf_printf(ev, "the Node was deleted and created again %s ago (new uid %s) while its agent kept calling", a,
                        str(meta, "uid"));
        s = KITE_NODE_REREGISTERED;
    } else if (f->seen_first_ns && created > f->seen_first_ns + t->rereg_slack_ns && now - created < t->rereg_window_ns) {
        ago(created, now, a);
        ago(f->seen_first_ns, now, b);
        kite_buf_printf(ev, "the Node was created %s ago, its agent has been calling for %s: deleted and registered again",
                        a, b);
        s = KITE_NODE_REREGISTERED;
    } else if (cordoned && f->terminating) {
        kite_buf_printf(ev, "cordoned; %zu of its %zu pods being deleted", f->terminating, f->pods);
        s = KITE_NODE_DRAINING;
    } else if (cordoned && f->pods && f->refused_ns && now - f->refused_ns < t->drain_window_ns) {
        /* a drain held by a disruption budget: its evictions are refused, nothing is deleted */
        ago(f->refused_ns, now, a);
        kite_buf_printf(ev, "cordoned; %zu pods left; eviction of %s refused %s ago", f->pods,
                        f->refused_pod ? f->refused_pod : "a pod", a);
        if (f->refused_why) kite_buf_printf(ev, " (%s)", f->refused_why);
        s = KITE_NODE_DRAINING;
    } else if (cordoned) {
        kite_buf_printf(ev, "cordoned (spec.unschedulable); %zu pods keep running", f->pods);
        s = KITE_NODE_CORDONED;
    } else {
        kite_buf_printf(ev, "Ready True (%s)", reason);
        lease_evidence(f, now, ev);
        s = KITE_NODE_HEALTHY;
    }
    kite_buf_release(&scratch);
    return s;
}

static void later(int64_t at, int64_t now, int64_t *best) {
    if (at > now && (!*best || at < *best)) *best = at;
}

/* Every comparison with now in kite_node_classify, as the instant it flips. */
int64_t kite_node_next_change(const struct kite_node_facts *f, int64_t now, const struct kite_node_thresholds *t) {
    int64_t best = 0;
    if (!f->node) {
        if (f->seen_last_ns) later(f->seen_last_ns + t->orphan_window_ns + 1, now, &best);
        return best;
    }
    json_object *ready = condition(f->node, "Ready");
    int64_t since = time_of(str(ready, "lastTransitionTime"));
    int64_t created = time_of(str(kite_obj_meta(f->node), "creationTimestamp"));
    if (since) later(since + t->stale_ns, now, &best);
    if (f->lease && f->renewed_ns && t->grace_ns > 0) {
        json_object *d = kite_obj_get(kite_obj_get(f->lease, "spec"), "leaseDurationSeconds");
        int64_t dur = d ? json_object_get_int64(d) * KITE_NS_PER_SEC : 0;
        later(f->renewed_ns + (dur > t->grace_ns ? dur : t->grace_ns), now, &best);
        later(f->renewed_ns + t->stale_ns, now, &best);
    }
    if (f->recreated_ns) later(f->recreated_ns + t->rereg_window_ns, now, &best);
    if (created) later(created + t->rereg_window_ns, now, &best);
    if (f->refused_ns) later(f->refused_ns + t->drain_window_ns, now, &best);
    return best;
}
