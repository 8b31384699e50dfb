/* Pod status as the kubelet generates it (k8s-behaviour §5) and the status manager (§1.7): a
 * versioned cache per pod, a strategic merge PATCH of pods/status carrying metadata.uid as a
 * precondition only when the status differs from the one the server acknowledged, retries
 * with back-off, a resync every 10 s, terminal phases never moved back, and the final grace-0
 * DELETE once a terminating pod's containers are gone. */
#include <stdio.h>

#include "agent/pods/pods-int.h"
#include "api/registry.h"
#include "api/quantity.h"
#include "base/buf.h"
#include "base/log.h"
#include "json/obj.h"
#include "json/patch.h"

json_object *kite_agent_pj(json_object *o, const char *path) { return kite_obj_path(o, path); }
const char *kite_agent_pjs(json_object *o, const char *path) { return kite_obj_path_str(o, path); }

const char *kite_pods_phase_name(enum pod_phase ph) {
    static const char *n[] = {"Pending", "Running", "Succeeded", "Failed"};
    return n[ph];
}

const char *kite_pods_restart_policy(struct pod *pod) {
    const char *r = kite_agent_pjs(pod->obj, "spec.restartPolicy");
    return r && *r ? r : "Always";
}

/* ---- resources ---- */

static int64_t qty(json_object *res, const char *kind, const char *name) {
    const char *s = kite_agent_pjs(json_object_object_get(res, kind), name);
    int64_t m = 0;
    if (!s || kite_quantity_parse_milli(s, &m) < 0) return -1;
    return m;
}

/* Kubernetes' GetPodQOS over cpu and memory. */
const char *kite_pods_qos_class(json_object *spec) {
    bool any = false, guaranteed = true;
    const char *lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < 2; l++) {
        json_object *cs = json_object_object_get(spec, lists[l]);
        for (size_t i = 0; cs && i < json_object_array_length(cs); i++) {
            json_object *res = json_object_object_get(json_object_array_get_idx(cs, i), "resources");
            const char *names[] = {"cpu", "memory"};
            for (size_t k = 0; k < 2; k++) {
                int64_t req = qty(res, "requests", names[k]), lim = qty(res, "limits", names[k]);
                if (req > 0 || lim > 0) any = true;
                if (lim <= 0 || (req >= 0 && req != lim)) guaranteed = false;
            }
        }
    }
    if (!any) return "BestEffort";
    return guaranteed ? "Guaranteed" : "Burstable";
}

/* ---- phase ---- */

enum pod_phase kite_pods_compute_phase(struct pod *pod) {
    if (pod->rejected || pod->deadline_exceeded) return PHASE_FAILED;
    const char *policy = kite_pods_restart_policy(pod);
    bool no_restart = strcmp(policy, "Never") == 0 || pod->killed;
    for (size_t i = 0; i < pod->n_init; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (c->done) continue;
        if (c->sidecar) return pod->killed ? PHASE_FAILED : PHASE_PENDING; /* restarted whatever the policy */
        bool failed = c->have_st && c->st.state == KITE_CONTAINER_EXITED && c->st.exit_code != 0;
        if (failed && no_restart) return PHASE_FAILED;
        if (pod->killed) return PHASE_FAILED;
        return PHASE_PENDING;
    }
    size_t running = 0, waiting = 0, succeeded = 0, failed = 0, n = 0;
    for (size_t i = pod->n_init; i < pod->n_main; i++) {
        struct pod_ctr *c = &pod->c[i];
        n++;
        if (c->have_st && c->st.state == KITE_CONTAINER_RUNNING) running++;
        else if (c->have_st && c->st.state == KITE_CONTAINER_EXITED) {
            if (c->st.exit_code == 0) succeeded++;
            else failed++;
        } else if (c->have_last) {
            /* waiting to restart after an exit: counts as stopped, as the kubelet's getPhase */
            if (c->last.exit_code == 0) succeeded++;
            else failed++;
        } else
            waiting++;
    }
    if (pod->killed) {
        if (running == 0) return failed == 0 && waiting == 0 && succeeded > 0 ? PHASE_SUCCEEDED : PHASE_FAILED;
    }
    if (waiting > 0) return PHASE_PENDING;
    if (running > 0) return PHASE_RUNNING;
    if (n == 0) return PHASE_PENDING;
    if (strcmp(policy, "Always") == 0) return PHASE_RUNNING;
    if (strcmp(policy, "OnFailure") == 0) return failed > 0 ? PHASE_RUNNING : PHASE_SUCCEEDED;
    return failed > 0 ? PHASE_FAILED : PHASE_SUCCEEDED;
}

/* ---- container statuses ---- */

static void add_str(json_object *o, const char *k, const char *v) { json_object_object_add(o, k, json_object_new_string(v ? v : "")); }

static void add_time(json_object *o, const char *k, int64_t wall) {
    char ts[21];
    kite_time_format(wall, ts);
    add_str(o, k, ts);
}

/* A terminated state; its message cut to max bytes (its start, not splitting a UTF-8
 * character), as the kubelet's status manager shares KITE_PODS_TERM_MSG_POD_MAX among a pod's
 * containers. */
static json_object *terminated_of(struct kite_pods *p, const struct kite_container_status *s, size_t max) {
    json_object *t = json_object_new_object();
    json_object_object_add(t, "exitCode", json_object_new_int(s->exit_code));
    if (s->signal) json_object_object_add(t, "signal", json_object_new_int(s->signal));
    add_str(t, "reason", s->oom_killed ? "OOMKilled" : s->reason ? s->reason : s->exit_code == 0 ? "Completed" : "Error");
    size_t len = s->message ? strlen(s->message) : 0;
    if (len > max) {
        len = max;
        while (len > 0 && ((unsigned char)s->message[len] & 0xC0) == 0x80) len--;
    }
    if (len) json_object_object_add(t, "message", json_object_new_string_len(s->message, (int)len));
    if (s->started_ns) add_time(t, "startedAt", s->started_ns);
    if (s->finished_ns) add_time(t, "finishedAt", s->finished_ns);
    _cleanup_free_ char *cid = kite_asprintf("%s%s", p->rt_prefix, s->id);
    add_str(t, "containerID", cid);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "terminated", t);
    return o;
}

static json_object *ctr_status(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, bool inits_done) {
    json_object *s = json_object_new_object(), *state = json_object_new_object();
    size_t msg_max = KITE_PODS_TERM_MSG_POD_MAX / (pod->nc ? pod->nc : 1);
    add_str(s, "name", c->name);
    add_str(s, "image", kite_agent_pjs(c->spec, "image"));
    add_str(s, "imageID", c->have_st && c->st.image_id ? c->st.image_id : "");
    if (c->id) {
        _cleanup_free_ char *cid = kite_asprintf("%s%s", p->rt_prefix, c->id);
        add_str(s, "containerID", cid);
    }
    bool running = c->have_st && c->st.state == KITE_CONTAINER_RUNNING;
    if (c->wait_reason && !running) {
        json_object *w = json_object_new_object();
        add_str(w, "reason", c->wait_reason);
        if (c->wait_message) add_str(w, "message", c->wait_message);
        json_object_object_add(state, "waiting", w);
    } else if (running) {
        json_object *r = json_object_new_object();
        add_time(r, "startedAt", c->st.started_ns ? c->st.started_ns : c->st.created_ns);
        json_object_object_add(state, "running", r);
    } else if (c->have_st && c->st.state == KITE_CONTAINER_EXITED) {
        json_object_put(state);
        state = terminated_of(p, &c->st, msg_max);
    } else {
        json_object *w = json_object_new_object();
        add_str(w, "reason", c->init || !inits_done ? "PodInitializing" : "ContainerCreating");
        json_object_object_add(state, "waiting", w);
    }
    json_object_object_add(s, "state", state);
    /* waiting to run again (CrashLoopBackOff, RunContainerError): the attempt that just exited is
     * the last state; otherwise the one before the current */
    bool exited = c->have_st && c->st.state == KITE_CONTAINER_EXITED;
    if (c->wait_reason && exited)
        json_object_object_add(s, "lastState", terminated_of(p, &c->st, msg_max));
    else
        json_object_object_add(s, "lastState", c->have_last ? terminated_of(p, &c->last, msg_max) : json_object_new_object());
    json_object_object_add(s, "ready", json_object_new_boolean(!c->ephemeral && kite_pods_ctr_ready(c)));
    json_object_object_add(s, "restartCount", json_object_new_int((int32_t)c->restarts));
    json_object_object_add(s, "started", json_object_new_boolean(kite_pods_ctr_started(c)));
    return s;
}

/* ---- conditions ---- */

static void add_cond(json_object *conds, json_object *prev, const char *type, bool ok, const char *reason,
                     const char *message, int64_t now_wall) {
    json_object *c = json_object_new_object();
    add_str(c, "type", type);
    add_str(c, "status", ok ? "True" : "False");
    json_object_object_add(c, "lastProbeTime", NULL);
    /* the transition time moves only when the status flips */
    const char *keep = NULL;
    json_object *pc = json_object_object_get(prev, "conditions");
    for (size_t i = 0; pc && i < json_object_array_length(pc); i++) {
        json_object *x = json_object_array_get_idx(pc, i);
        if (kite_streq(kite_agent_pjs(x, "type"), type) && kite_streq(kite_agent_pjs(x, "status"), ok ? "True" : "False"))
            keep = kite_agent_pjs(x, "lastTransitionTime");
    }
    if (keep) add_str(c, "lastTransitionTime", keep);
    else add_time(c, "lastTransitionTime", now_wall);
    if (reason) add_str(c, "reason", reason);
    if (message) add_str(c, "message", message);
    json_object_array_add(conds, c);
}

static char *names_list(struct pod *pod, size_t from, size_t to, bool (*pred)(struct pod_ctr *)) {
    struct kite_buf b = {0};
    for (size_t i = from; i < to; i++) {
        if (!pred(&pod->c[i])) continue;
        if (b.len) kite_buf_puts(&b, " ");
        kite_buf_puts(&b, pod->c[i].name);
    }
    if (!b.len) {
        kite_buf_release(&b);
        return NULL;
    }
    kite_buf_putc(&b, ']');
    char *s = kite_buf_detach(&b, NULL);
    char *out = kite_asprintf("[%s", s);
    free(s);
    return out;
}
/* Started once running and past its startup probe; ready once started and past its readiness
 * probe (a container without one is ready when it runs), as the kubelet's status. */
bool kite_pods_ctr_started(struct pod_ctr *c) {
    return c->have_st && c->st.state == KITE_CONTAINER_RUNNING && (!kite_agent_pj(c->spec, "startupProbe") || c->probe_started);
}
bool kite_pods_ctr_ready(struct pod_ctr *c) {
    return kite_pods_ctr_started(c) && (!kite_agent_pj(c->spec, "readinessProbe") || c->probe_ready);
}
/* Of the containers whose readiness makes the pod's: the regular ones and the sidecars. */
static bool not_ready(struct pod_ctr *c) { return (!c->init || c->sidecar) && !kite_pods_ctr_ready(c); }
static bool not_done(struct pod_ctr *c) { return !c->done; }

json_object *kite_pods_build_status(struct kite_pods *p, struct pod *pod, json_object *prev, int64_t now_wall) {
    json_object *st = json_object_new_object();
    enum pod_phase ph = kite_pods_compute_phase(pod);
    add_str(st, "phase", kite_pods_phase_name(ph));
    if (pod->rejected) {
        add_str(st, "reason", pod->reject_reason);
        add_str(st, "message", pod->reject_message);
    } else if (pod->deadline_exceeded) {
        add_str(st, "reason", "DeadlineExceeded");
        add_str(st, "message", "Pod was active on the node longer than the specified deadline");
    }
    json_object *conds = json_object_new_array();
    bool inits_done = true;
    for (size_t i = 0; i < pod->n_init; i++) inits_done = inits_done && pod->c[i].done;
    bool any_started = false;
    for (size_t i = pod->n_init; i < pod->n_main; i++) any_started = any_started || pod->c[i].id;
    if (!pod->rejected) {
        add_cond(conds, prev, "PodReadyToStartContainers", pod->sandbox_id && !pod->killed, NULL, NULL, now_wall);
        _cleanup_free_ char *incomplete = names_list(pod, 0, pod->n_init, not_done);
        if (ph == PHASE_SUCCEEDED) add_cond(conds, prev, "Initialized", true, "PodCompleted", NULL, now_wall);
        else if (inits_done || any_started) add_cond(conds, prev, "Initialized", true, NULL, NULL, now_wall);
        else {
            _cleanup_free_ char *m = kite_asprintf("containers with incomplete status: %s", incomplete ? incomplete : "[]");
            add_cond(conds, prev, "Initialized", false, "ContainersNotInitialized", m, now_wall);
        }
        _cleanup_free_ char *unready = names_list(pod, 0, pod->n_main, not_ready);
        bool terminal = ph == PHASE_SUCCEEDED || ph == PHASE_FAILED;
        const char *treason = ph == PHASE_SUCCEEDED ? "PodCompleted" : "PodFailed";
        _cleanup_free_ char *m = unready ? kite_asprintf("containers with unready status: %s", unready) : NULL;
        bool ready = !terminal && !unready;
        add_cond(conds, prev, "ContainersReady", ready, terminal ? treason : ready ? NULL : "ContainersNotReady",
                 terminal ? NULL : m, now_wall);
        add_cond(conds, prev, "Ready", ready, terminal ? treason : ready ? NULL : "ContainersNotReady",
                 terminal ? NULL : m, now_wall);
        if (pod->hung_op) {
            /* a runtime call of this pod ran out of time: said here, on the pod, not on the node */
            _cleanup_free_ char *hm = kite_asprintf("runtime call %s did not answer within its deadline", pod->hung_op);
            add_cond(conds, prev, "kite.dev/RuntimeResponding", false, "RuntimeCallTimedOut", hm, now_wall);
        }
    }
    add_cond(conds, prev, "PodScheduled", true, NULL, NULL, now_wall);
    json_object_object_add(st, "conditions", conds);
    if (pod->host_ip) {
        add_str(st, "hostIP", pod->host_ip);
        json_object *ips = json_object_new_array(), *ip = json_object_new_object();
        add_str(ip, "ip", pod->host_ip);
        json_object_array_add(ips, ip);
        json_object_object_add(st, "hostIPs", ips);
    }
    json_object *hn = kite_agent_pj(pod->obj, "spec.hostNetwork");
    const char *pip = hn && json_object_get_boolean(hn) ? pod->host_ip : pod->sandbox_ip;
    if (pip && *pip && !pod->rejected) {
        add_str(st, "podIP", pip);
        json_object *ips = json_object_new_array(), *ip = json_object_new_object();
        add_str(ip, "ip", pip);
        json_object_array_add(ips, ip);
        json_object_object_add(st, "podIPs", ips);
    }
    if (pod->start_wall) add_time(st, "startTime", pod->start_wall);
    if (!pod->rejected) {
        json_object *ics = json_object_new_array(), *cs = json_object_new_array(), *ecs = json_object_new_array();
        for (size_t i = 0; i < pod->nc; i++)
            json_object_array_add(pod->c[i].ephemeral ? ecs : pod->c[i].init ? ics : cs,
                                  ctr_status(p, pod, &pod->c[i], inits_done));
        if (pod->n_init) json_object_object_add(st, "initContainerStatuses", ics);
        else json_object_put(ics);
        json_object_object_add(st, "containerStatuses", cs);
        if (pod->nc > pod->n_main) json_object_object_add(st, "ephemeralContainerStatuses", ecs);
        else json_object_put(ecs);
    }
    add_str(st, "qosClass", kite_pods_qos_class(kite_agent_pj(pod->obj, "spec")));
    return st;
}

/* Whether the server's status differs from the one it acknowledged in what the agent owns (the
 * kubelet's needsReconcile): every field the agent sent, and of the conditions only the types it
 * sent, by status, reason and message (others' conditions, such as DisruptionTarget, are theirs). */
static bool cond_diverged(json_object *mine, json_object *theirs) {
    for (size_t i = 0; i < json_object_array_length(mine); i++) {
        json_object *c = json_object_array_get_idx(mine, i), *t = NULL;
        for (size_t j = 0; json_object_is_type(theirs, json_type_array) && j < json_object_array_length(theirs); j++)
            if (kite_streq(kite_agent_pjs(json_object_array_get_idx(theirs, j), "type"), kite_agent_pjs(c, "type")))
                t = json_object_array_get_idx(theirs, j);
        if (!t) return true;
        const char *keys[] = {"status", "reason", "message"};
        for (size_t k = 0; k < KITE_ARRAY_SIZE(keys); k++) {
            const char *a = kite_agent_pjs(c, keys[k]), *b = kite_agent_pjs(t, keys[k]);
            if ((a || b) && !kite_streq(a, b)) return true;
        }
    }
    return false;
}

bool kite_pods_status_diverged(json_object *acked, json_object *server) {
    json_object_object_foreach(acked, key, mine) {
        json_object *theirs = json_object_object_get(server, key);
        if (strcmp(key, "conditions") == 0) {
            if (json_object_is_type(mine, json_type_array) && cond_diverged(mine, theirs)) return true;
        } else if (!json_object_equal(mine, theirs))
            return true;
    }
    return false;
}

static bool terminal_phase(const char *ph) { return kite_streq(ph, "Succeeded") || kite_streq(ph, "Failed"); }

void kite_pods_status_update(struct kite_pods *p, struct pod *pod) {
    kite_pods_logs_publish(p, pod);
    if (pod->finished || !pod->obj) return;
    json_object *prev = pod->status ? pod->status : kite_agent_pj(pod->obj, "status");
    json_object *st = kite_pods_build_status(p, pod, prev, kite_now_wall(p->clock));
    /* a terminal phase is final: nothing moves it back (a restarted agent, a late exit); the
     * containers' states still follow (a pod past its deadline: their ends) */
    if (pod->status && terminal_phase(kite_agent_pjs(pod->status, "phase")) &&
        !kite_streq(kite_agent_pjs(pod->status, "phase"), kite_agent_pjs(st, "phase"))) {
        json_object_put(st);
        return;
    }
    if (pod->status && json_object_equal(st, pod->status)) {
        json_object_put(st);
        return;
    }
    json_object_put(pod->status);
    pod->status = st;
    pod->version++;
}

/* The final delete of a terminating pod, once its containers are gone and the server has its
 * terminal status. */
static void final_delete(struct kite_pods *p, struct pod *pod) {
    json_object *body = json_object_new_object(), *pre = json_object_new_object();
    add_str(body, "kind", "DeleteOptions");
    add_str(body, "apiVersion", "v1");
    json_object_object_add(body, "gracePeriodSeconds", json_object_new_int(0));
    add_str(pre, "uid", pod->uid);
    json_object_object_add(body, "preconditions", pre);
    _cleanup_free_ char *path =
        kite_asprintf("/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0", pod->ns, pod->name);
    long code = 0;
    int r = kite_client_json(p->client, "DELETE", path, NULL, body, &code, NULL);
    json_object_put(body);
    if (r == 0 || code == 404 || code == 409) {
        pod->delete_sent = true;
        log_info(PODS_LOG, "pod %s/%s: deleted (grace period 0)", pod->ns, pod->name);
    } else {
        log_warn(PODS_LOG, "pod %s/%s: final delete: %s", pod->ns, pod->name, strerror(-r));
    }
}

/* Conditions the agent writes; others (DisruptionTarget, readiness gates) belong to others. */
static bool own_condition(const char *type) {
    static const char *const own[] = {"PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready",
                                      "PodScheduled", "kite.dev/RuntimeResponding"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(own); i++)
        if (kite_streq(type, own[i])) return true;
    return false;
}

/* The server's status as far as the agent owns it: the base a patch is computed from when the
 * server acknowledged nothing of this agent's yet (a restarted agent, a diverged status). */
static json_object *owned_of(json_object *server) {
    json_object *out = json_object_new_object();
    if (!json_object_is_type(server, json_type_object)) return out;
    json_object_object_foreach(server, key, v) {
        if (!strcmp(key, "nominatedNodeName") || !strcmp(key, "resize") || !strcmp(key, "resourceClaimStatuses"))
            continue;
        if (!strcmp(key, "conditions") && json_object_is_type(v, json_type_array)) {
            json_object *conds = json_object_new_array();
            for (size_t i = 0; i < json_object_array_length(v); i++) {
                json_object *c = json_object_array_get_idx(v, i);
                if (own_condition(kite_agent_pjs(c, "type"))) json_object_array_add(conds, json_object_get(c));
            }
            json_object_object_add(out, key, conds);
            continue;
        }
        json_object_object_add(out, key, json_object_get(v));
    }
    return out;
}

/* The PATCH body from the status the server has (as acknowledged, or as last seen) to the one
 * built: a two-way strategic merge patch, as the kubelet's PatchPodStatus, so what the new status
 * no longer has goes: a condition's reason and message once it is True again, a sandbox's old
 * address from podIPs. Sending the status whole would merge: those would stay. */
json_object *kite_pods_status_patch(struct pod *pod) {
    json_object *from = pod->acked ? json_object_get(pod->acked) : owned_of(kite_agent_pj(pod->obj, "status"));
    json_object *wf = kite_obj_wrap("status", from), *wt = kite_obj_wrap("status", pod->status), *body = NULL;
    const struct kite_smp_schema *schema = kite_registry_find_kind("", "Pod")->smp;
    if (kite_smp_diff(wf, wt, schema, &body) < 0) {
        /* not expressible as a merge (repeated merge keys): the status whole */
        body = json_object_new_object();
        json_object_object_add(body, "status", json_object_get(pod->status));
    }
    json_object_put(wf);
    json_object_put(wt);
    json_object_put(from);
    json_object *meta = json_object_new_object();
    add_str(meta, "uid", pod->uid);
    json_object_object_add(body, "metadata", meta);
    return body;
}

void kite_pods_status_send(struct kite_pods *p, struct pod *pod, int64_t now) {
    if (!pod->in_api || !pod->status || pod->finished) return;
    if (pod->version <= pod->acked_version || now < pod->next_patch) return;
    if (pod->acked && json_object_equal(pod->acked, pod->status)) {
        pod->acked_version = pod->version;
        return;
    }
    json_object *body = kite_pods_status_patch(pod);
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s/status", pod->ns, pod->name);
    long code = 0;
    uint64_t v = pod->version;
    int r = kite_client_json(p->client, "PATCH", path, "application/strategic-merge-patch+json", body, &code, NULL);
    json_object_put(body);
    if (r == 0) {
        json_object_put(pod->acked);
        pod->acked = json_object_get(pod->status);
        pod->acked_version = v;
        kite_backoff_reset(&pod->patch_bo);
        pod->next_patch = 0;
    } else if (code == 404 || code == 409) {
        /* gone, or another pod by that name (uid precondition): its DELETED event follows;
         * nothing to retry */
        pod->acked_version = v;
    } else {
        pod->next_patch = now + kite_backoff_next(&pod->patch_bo);
        if (code >= 400 && code < 500) /* the patch itself refused: said, not only retried */
            log_warn(PODS_LOG, "pod %s/%s: status patch refused (%ld); retrying", pod->ns, pod->name, code);
        else
            log_debug(PODS_LOG, "pod %s/%s: status patch: %s; retrying", pod->ns, pod->name, strerror(-r));
    }
}

void kite_pods_status_sync(struct kite_pods *p, int64_t now) {
    for (size_t i = 0; i < p->n_pods; i++) {
        struct pod *pod = p->pods[i];
        if (pod->busy || !pod->in_api || !pod->status || pod->finished) continue;
        kite_pods_status_send(p, pod, now);
        if (pod->deleting && pod->killed && !pod->delete_sent && pod->acked_version == pod->version)
            final_delete(p, pod);
    }
}
