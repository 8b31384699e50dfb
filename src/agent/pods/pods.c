/* The pods manager: the pods bound to the node (fed by the list + watch thread), their
 * workers, the PLEG (runtime exit events, a relist every 10 s), recovery of what the runtime
 * still runs after an agent restart, removal of containers whose pod is gone, and the status
 * manager's schedule.
 *
 * The pods thread decides what to sync; a pool of KITE_PODS_WORKERS threads runs the syncs
 * (runtime calls, the status computed from them), one pod at a time per worker, so one pod's
 * slow start or stop holds no other pod's exit. While a worker has a pod (pod->busy) the pods
 * thread leaves it alone: events for it wait in `deferred`, probe results in `held_probes`,
 * and the status it computed is sent once the worker hands it back. */
#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "api/quantity.h"
#include "base/log.h"

static void wake(struct kite_pods *p);
static void prober_wake(void *ud) { wake(ud); }

int kite_pods_new(const struct kite_pods_options *o, struct kite_pods **ret) {
    struct kite_pods *p = kite_calloc(1, sizeof(*p));
    p->client = o->client;
    p->rt = o->runtime;
    p->clock = o->clock ? o->clock : kite_clock_real();
    p->node_name = kite_strdup(o->node_name);
    p->root_dir = o->root_dir ? kite_strdup(o->root_dir) : NULL;
    p->seccomp_default = o->seccomp_default;
    p->unsafe_sysctls = o->allowed_unsafe_sysctls && *o->allowed_unsafe_sysctls ? kite_strdup(o->allowed_unsafe_sysctls) : NULL;
    p->apparmor = kite_pods_apparmor_enabled(o->apparmor_enabled_file);
    p->cluster_dns = o->cluster_dns && *o->cluster_dns ? kite_strdup(o->cluster_dns) : NULL;
    p->cluster_domain = o->cluster_domain && *o->cluster_domain ? kite_strdup(o->cluster_domain) : NULL;
    p->backoff_base_ns = o->backoff_base_ns > 0 ? o->backoff_base_ns : KITE_PODS_BACKOFF_MIN_NS;
    p->rt_prefix = kite_asprintf("kite-%s://", p->rt->ops->name);
    p->rng = o->seed ? o->seed : (uint64_t)kite_now_wall(p->clock) | 1;
    kite_recorder_init(&p->rec, p->client, p->clock, o->component ? o->component : "kite-agent", p->node_name);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->hooks_cv, NULL);
    kite_cancel_init(&p->watch_cancel);
    p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->wake_fd < 0) {
        int r = -errno;
        kite_pods_free(p);
        return r;
    }
    p->alloc_cpu_m = p->alloc_mem_m = p->alloc_pods_m = -1;
    p->prober = kite_pods_prober_new(p->clock, p->rt, prober_wake, p);
    kite_pods_vobjs_init(p);
    struct kite_satokens_options to = {.client = p->client, .clock = p->clock};
    p->satokens = kite_satokens_new(&to);
    *ret = p;
    return 0;
}

static void event_release(struct pod_event *e) {
    free(e->type);
    json_object_put(e->obj);
    json_object_put(e->items);
}

void kite_pods_free(struct kite_pods *p) {
    if (!p) return;
    kite_pods_stop(p);
    kite_pods_vobjs_free(p);
    kite_satokens_free(p->satokens);
    kite_pods_prober_free(p->prober);
    for (size_t i = 0; i < p->n_pods; i++) kite_agent_pod_free(p->pods[i]);
    free(p->pods);
    for (size_t i = 0; i < p->n_q; i++) event_release(&p->q[i]);
    free(p->q);
    for (size_t i = 0; i < p->n_deferred; i++) event_release(&p->deferred[i]);
    free(p->deferred);
    for (size_t i = 0; i < p->n_held_probes; i++) kite_pods_probe_result_release(&p->held_probes[i]);
    free(p->held_probes);
    free(p->todo);
    free(p->done);
    kite_pods_hooks_release(p);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->hooks_cv);
    kite_sandbox_statuses_free(p->rec_sb, p->n_rec_sb);
    json_object_put(p->node_status);
    kite_recorder_release(&p->rec);
    kite_pods_logs_release(p);
    if (p->wake_fd >= 0) close(p->wake_fd);
    kite_cancel_release(&p->watch_cancel);
    pthread_mutex_destroy(&p->lock);
    free(p->node_name);
    free(p->root_dir);
    free(p->unsafe_sysctls);
    free(p->cluster_dns);
    free(p->cluster_domain);
    free(p->rt_prefix);
    free(p->host_ip);
    free(p);
}

static void wake(struct kite_pods *p) {
    uint64_t one = 1;
    if (write(p->wake_fd, &one, sizeof(one)) < 0) { /* full counter: already woken */
    }
}

/* A private deep copy: json-c reference counts are not atomic across threads. */
static json_object *copy(json_object *o) {
    json_object *c = NULL;
    if (o) json_object_deep_copy(o, &c, NULL);
    return c;
}

static void enqueue(struct kite_pods *p, const char *type, json_object *obj, json_object *items) {
    pthread_mutex_lock(&p->lock);
    p->q = kite_realloc(p->q, (p->n_q + 1) * sizeof(*p->q));
    p->q[p->n_q++] = (struct pod_event){.type = kite_strdup(type), .obj = obj, .items = items};
    pthread_mutex_unlock(&p->lock);
    wake(p);
}

/* A pod as the agent keeps it: without metadata.managedFields, which it never reads and which
 * held about a fifth of a pod's memory (BENCHMARKS.md, agent RSS per pod). */
static json_object *pod_copy(json_object *pod) {
    json_object *c = copy(pod);
    json_object *meta = json_object_is_type(c, json_type_object) ? json_object_object_get(c, "metadata") : NULL;
    if (json_object_is_type(meta, json_type_object)) json_object_object_del(meta, "managedFields");
    return c;
}

void kite_pods_pod_event(struct kite_pods *p, const char *type, json_object *pod) { enqueue(p, type, pod_copy(pod), NULL); }
void kite_pods_pod_list(struct kite_pods *p, json_object *items) {
    json_object *v = json_object_new_array();
    size_t n = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
    for (size_t i = 0; i < n; i++) json_object_array_add(v, pod_copy(json_object_array_get_idx(items, i)));
    enqueue(p, "LIST", NULL, v);
}

void kite_pods_node_status(struct kite_pods *p, json_object *st) {
    json_object *c = copy(st);
    pthread_mutex_lock(&p->lock);
    json_object_put(p->node_status);
    p->node_status = c;
    pthread_mutex_unlock(&p->lock);
    wake(p);
}

static struct pod *find_pod(struct kite_pods *p, const char *uid) {
    for (size_t i = 0; uid && i < p->n_pods; i++)
        if (strcmp(p->pods[i]->uid, uid) == 0) return p->pods[i];
    return NULL;
}

/* Claims what the runtime still has of this pod from before a restart: its sandbox and the
 * latest attempt of each container (the one before kept for lastState; older ones removed). */
static bool recover(struct kite_pods *p, struct pod *pod) {
    size_t k = p->n_rec_sb;
    for (size_t i = 0; i < p->n_rec_sb; i++)
        if (kite_streq(p->rec_sb[i].uid, pod->uid) && (k == p->n_rec_sb || p->rec_sb[i].state == KITE_SANDBOX_READY))
            k = i;
    if (k == p->n_rec_sb) return false;
    struct kite_sandbox_status sb = p->rec_sb[k];
    p->rec_sb[k] = p->rec_sb[--p->n_rec_sb];
    pod->sandbox_id = kite_strdup(sb.id);
    pod->sandbox_ip = kite_strdup(sb.ip ? sb.ip : "");
    bool ready = sb.state == KITE_SANDBOX_READY;
    kite_sandbox_status_release(&sb);
    struct kite_container_status *v = NULL;
    size_t n = 0;
    if (p->rt->ops->list_containers(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS, &v, &n) < 0) n = 0;
    bool any_regular = false;
    for (size_t i = 0; i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        ssize_t best = -1, second = -1;
        for (size_t j = 0; j < n; j++) {
            if (!kite_streq(v[j].name, c->name)) continue;
            if (best < 0 || v[j].attempt > v[best].attempt) second = best, best = (ssize_t)j;
            else if (second < 0 || v[j].attempt > v[second].attempt) second = (ssize_t)j;
        }
        for (size_t j = 0; j < n; j++)
            if (kite_streq(v[j].name, c->name) && (ssize_t)j != best && (ssize_t)j != second)
                p->rt->ops->remove_container(p->rt, v[j].id, KITE_PODS_RT_TIMEOUT_NS);
        if (best < 0) continue;
        c->id = kite_strdup(v[best].id);
        c->restarts = v[best].attempt;
        c->pulled_event = true;
        if (!c->init) any_regular = true;
        if (second >= 0) {
            c->prev_id = kite_strdup(v[second].id);
            c->last = v[second];
            memset(&v[second], 0, sizeof(v[second]));
            c->have_last = true;
        }
    }
    kite_container_statuses_free(v, n);
    /* once a regular container was created, every init container had completed */
    for (size_t i = 0; any_regular && i < pod->n_init; i++) pod->c[i].done = true;
    kite_pods_refresh(p, pod);
    log_info(PODS_LOG, "pod %s/%s: recovered sandbox %s from the runtime", pod->ns, pod->name, pod->sandbox_id);
    if (!ready) {
        /* its holder died: the pod's containers start again in a new sandbox */
        p->rt->ops->remove_sandbox(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS);
        free(pod->sandbox_id);
        pod->sandbox_id = NULL;
    }
    return true;
}

void kite_pods_ephemeral_sync(struct pod *pod) {
    json_object *ecs = kite_agent_pj(pod->obj, "spec.ephemeralContainers");
    size_t n = ecs && json_object_is_type(ecs, json_type_array) ? json_object_array_length(ecs) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *spec = json_object_array_get_idx(ecs, i);
        const char *name = kite_agent_pjs(spec, "name");
        bool known = false;
        for (size_t k = pod->n_main; k < pod->nc && !known; k++) known = kite_streq(pod->c[k].name, name);
        if (known || !name) continue;
        pod->c = kite_realloc(pod->c, (pod->nc + 1) * sizeof(*pod->c));
        pod->c[pod->nc++] = (struct pod_ctr){.name = kite_strdup(name), .ephemeral = true, .spec = json_object_get(spec)};
    }
}

static struct pod *new_pod(struct kite_pods *p, json_object *obj) {
    const char *uid = kite_agent_pjs(obj, "metadata.uid"), *ns = kite_agent_pjs(obj, "metadata.namespace"), *name = kite_agent_pjs(obj, "metadata.name");
    if (!uid || !ns || !name || p->n_pods >= KITE_PODS_MAX_PODS) return NULL;
    struct pod *pod = kite_calloc(1, sizeof(*pod));
    pod->uid = kite_strdup(uid);
    pod->ns = kite_strdup(ns);
    pod->name = kite_strdup(name);
    pod->obj = json_object_get(obj);
    pod->in_api = true;
    json_object *tg = kite_agent_pj(obj, "spec.terminationGracePeriodSeconds");
    pod->grace_s = tg ? json_object_get_int64(tg) : KITE_PODS_DEFAULT_GRACE_S;
    kite_backoff_init(&pod->patch_bo, 200 * KITE_NS_PER_MS, KITE_PODS_STATUS_RESYNC_NS, 2.0, 0.1, p->rng++);
    json_object *ics = kite_agent_pj(obj, "spec.initContainers"), *cs = kite_agent_pj(obj, "spec.containers");
    size_t ni = ics && json_object_is_type(ics, json_type_array) ? json_object_array_length(ics) : 0;
    size_t nr = cs && json_object_is_type(cs, json_type_array) ? json_object_array_length(cs) : 0;
    pod->c = kite_calloc(ni + nr + 1, sizeof(*pod->c));
    for (size_t i = 0; i < ni + nr; i++) {
        json_object *spec = i < ni ? json_object_array_get_idx(ics, i) : json_object_array_get_idx(cs, i - ni);
        pod->c[pod->nc] = (struct pod_ctr){.name = kite_strdup(kite_agent_pjs(spec, "name") ? kite_agent_pjs(spec, "name") : ""),
                                           .init = i < ni, .spec = json_object_get(spec),
                                           .sidecar = i < ni && kite_streq(kite_agent_pjs(spec, "restartPolicy"), "Always")};
        pod->nc++;
        if (i < ni) pod->n_init++;
    }
    pod->n_main = pod->nc;
    kite_pods_ephemeral_sync(pod);
    const char *phase = kite_agent_pjs(obj, "status.phase");
    int64_t st = 0;
    if (kite_agent_pjs(obj, "status.startTime") && kite_time_parse(kite_agent_pjs(obj, "status.startTime"), &st) == 0) pod->start_wall = st;
    else pod->start_wall = kite_now_wall(p->clock);
    p->pods = kite_realloc(p->pods, (p->n_pods + 1) * sizeof(*p->pods));
    p->pods[p->n_pods++] = pod;
    bool recovered = recover(p, pod);
    if (kite_streq(phase, "Succeeded") || kite_streq(phase, "Failed")) {
        /* the API already has its end: a restarted agent does not run it again */
        pod->finished = true;
        pod->killed = true;
    } else if (!recovered) {
        kite_pods_admit(p, pod);
    } else {
        pod->admitted = true;
    }
    return pod;
}

/* Whether an update of the pod asks for a sync: its spec or metadata changed (not only its
 * status or resourceVersion). As the kubelet's config source, the pod's own status echo from
 * the watch does not put it back in the queue behind every other pod. */
static bool differs(json_object *a, json_object *b) {
    if (!a || !b) return true;
    if (!json_object_equal(kite_agent_pj(a, "spec"), kite_agent_pj(b, "spec"))) return true;
    static const char *const keys[] = {"deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
                                       "ownerReferences", "finalizers"};
    json_object *ma = kite_agent_pj(a, "metadata"), *mb = kite_agent_pj(b, "metadata");
    for (size_t i = 0; i < KITE_ARRAY_SIZE(keys); i++)
        if (!json_object_equal(json_object_object_get(ma, keys[i]), json_object_object_get(mb, keys[i]))) return true;
    return false;
}

static void apply(struct kite_pods *p, const char *type, json_object *obj) {
    struct pod *pod = find_pod(p, kite_agent_pjs(obj, "metadata.uid"));
    if (kite_streq(type, "DELETED")) {
        if (pod) {
            pod->in_api = false;
            pod->dirty = true;
        }
        return;
    }
    bool fresh = !pod;
    if (!pod && !(pod = new_pod(p, obj))) return;
    bool changed = fresh || !pod->in_api || differs(pod->obj, obj);
    if (pod->obj != obj) {
        json_object_put(pod->obj);
        pod->obj = json_object_get(obj);
        kite_pods_ephemeral_sync(pod);
    }
    pod->in_api = true;
    if (kite_agent_pj(obj, "metadata.deletionTimestamp")) {
        /* as the kubelet's pod workers: a grace period only ever gets shorter (a later DELETE with
         * a smaller gracePeriodSeconds hurries a stop under way) */
        json_object *g = kite_agent_pj(obj, "metadata.deletionGracePeriodSeconds");
        if (!g) g = kite_agent_pj(obj, "spec.terminationGracePeriodSeconds");
        int64_t grace = KITE_MAX(g ? json_object_get_int64(g) : KITE_PODS_DEFAULT_GRACE_S, 0);
        if (!pod->deleting || grace < pod->grace_s) pod->grace_s = grace;
        pod->deleting = true;
    }
    if (changed) pod->dirty = true;
}

static void apply_node_status(struct kite_pods *p, json_object *ns) {
    if (ns) {
        p->node_known = true;
        int64_t m;
        json_object *alloc = json_object_object_get(ns, "allocatable");
        const char *names[] = {"cpu", "memory", "pods"};
        int64_t *dst[] = {&p->alloc_cpu_m, &p->alloc_mem_m, &p->alloc_pods_m};
        for (size_t i = 0; i < 3; i++)
            if (kite_agent_pjs(alloc, names[i]) && kite_quantity_parse_milli(kite_agent_pjs(alloc, names[i]), &m) == 0) *dst[i] = m;
        json_object *addrs = json_object_object_get(ns, "addresses");
        for (size_t i = 0; addrs && i < json_object_array_length(addrs); i++) {
            json_object *a = json_object_array_get_idx(addrs, i);
            if (kite_streq(kite_agent_pjs(a, "type"), "InternalIP") && kite_agent_pjs(a, "address")) {
                if (!kite_streq(p->host_ip, kite_agent_pjs(a, "address"))) {
                    /* workers read their pod's copy, refreshed before its next sync */
                    free(p->host_ip);
                    p->host_ip = kite_strdup(kite_agent_pjs(a, "address"));
                    for (size_t j = 0; j < p->n_pods; j++) p->pods[j]->dirty = true;
                }
                break;
            }
        }
        json_object_put(ns);
    }
}

/* An event that must wait: its pod is with a worker, or it is a list (it touches every pod)
 * while any pod is. */
static bool event_blocked(struct kite_pods *p, const struct pod_event *e) {
    if (e->items) return p->n_busy > 0;
    struct pod *pod = e->obj ? find_pod(p, kite_agent_pjs(e->obj, "metadata.uid")) : NULL;
    return pod && pod->busy;
}

static void apply_event(struct kite_pods *p, struct pod_event *e) {
    if (e->items) {
        /* a list: what it lacks is gone */
        for (size_t j = 0; j < p->n_pods; j++) {
            bool found = false;
            for (size_t k = 0; k < json_object_array_length(e->items) && !found; k++)
                found = kite_streq(kite_agent_pjs(json_object_array_get_idx(e->items, k), "metadata.uid"), p->pods[j]->uid);
            if (!found) {
                p->pods[j]->in_api = false;
                p->pods[j]->dirty = true;
            }
        }
        for (size_t k = 0; k < json_object_array_length(e->items); k++)
            apply(p, "MODIFIED", json_object_array_get_idx(e->items, k));
        p->listed = true;
    } else if (e->obj) {
        apply(p, e->type, e->obj);
    }
}

static void drain_queue(struct kite_pods *p) {
    pthread_mutex_lock(&p->lock);
    struct pod_event *q = TAKE_PTR(p->q);
    size_t n = p->n_q;
    p->n_q = 0;
    json_object *ns = TAKE_PTR(p->node_status);
    pthread_mutex_unlock(&p->lock);
    /* the node's allocatable first: admission of the pods below uses it */
    apply_node_status(p, ns);
    /* the held events come first, in their order; a held list holds everything after it */
    struct pod_event *all = p->deferred;
    size_t n_all = p->n_deferred;
    if (n) {
        all = kite_realloc(all, (n_all + n) * sizeof(*all));
        memcpy(all + n_all, q, n * sizeof(*q));
        n_all += n;
    }
    free(q);
    p->deferred = NULL;
    p->n_deferred = 0;
    p->list_held = false;
    for (size_t i = 0; i < n_all; i++) {
        if (p->list_held || event_blocked(p, &all[i])) {
            if (all[i].items) p->list_held = true;
            p->deferred = kite_realloc(p->deferred, (p->n_deferred + 1) * sizeof(*p->deferred));
            p->deferred[p->n_deferred++] = all[i];
            continue;
        }
        apply_event(p, &all[i]);
        event_release(&all[i]);
    }
    free(all);
}

/* After the first full list: sandboxes and containers of pods the API does not have go. */
static void remove_orphans(struct kite_pods *p) {
    for (size_t i = 0; i < p->n_rec_sb; i++) {
        log_info(PODS_LOG, "removing sandbox %s of pod %s/%s (uid %s): the pod is not in the API", p->rec_sb[i].id,
                 p->rec_sb[i].ns, p->rec_sb[i].name, p->rec_sb[i].uid);
        p->rt->ops->stop_sandbox(p->rt, p->rec_sb[i].id, KITE_PODS_RT_TIMEOUT_NS);
        if (p->rt->ops->remove_sandbox(p->rt, p->rec_sb[i].id, KITE_PODS_RT_TIMEOUT_NS) == 0 && p->rec_sb[i].log_dir &&
            *p->rec_sb[i].log_dir)
            kite_rm_rf(p->rec_sb[i].log_dir);
    }
    kite_sandbox_statuses_free(p->rec_sb, p->n_rec_sb);
    p->rec_sb = NULL;
    p->n_rec_sb = 0;
    kite_pods_volumes_remove_orphans(p);
    struct kite_container_status *v = NULL;
    size_t n = 0;
    if (p->rt->ops->list_containers(p->rt, NULL, KITE_PODS_RT_TIMEOUT_NS, &v, &n) < 0) return;
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (size_t j = 0; j < p->n_pods && !known; j++) known = kite_streq(p->pods[j]->sandbox_id, v[i].sandbox_id);
        if (!known) p->rt->ops->remove_container(p->rt, v[i].id, KITE_PODS_RT_TIMEOUT_NS);
    }
    kite_container_statuses_free(v, n);
}

/* The pod of a container, among the pods no worker has (a busy pod's ids may be changing). */
static struct pod *pod_of_container(struct kite_pods *p, const char *id) {
    for (size_t i = 0; id && i < p->n_pods; i++)
        for (size_t j = 0; !p->pods[i]->busy && j < p->pods[i]->nc; j++)
            if (kite_streq(p->pods[i]->c[j].id, id)) return p->pods[i];
    for (size_t i = 0; id && i < p->n_pods; i++) /* its sandbox's holder */
        if (!p->pods[i]->busy && kite_streq(p->pods[i]->sandbox_id, id)) return p->pods[i];
    return NULL;
}

/* The relist of sandboxes: a running pod's sandbox that is no longer ready sent no event when
 * no process held it (its pinned namespaces gone, as after a reboot): its pod is looked at. */
static bool sandbox_lost(struct kite_pods *p, struct pod *pod) {
    if (!pod->sandbox_id || pod->finished || pod->killed || pod->deleting) return false;
    struct kite_sandbox_status s = {0};
    int r = p->rt->ops->sandbox_status(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS, &s);
    bool lost = r == -ENOENT || (r == 0 && s.state != KITE_SANDBOX_READY);
    if (r == 0) kite_sandbox_status_release(&s);
    return lost;
}

/* ---- pod workers ---- */

/* One sync of a pod: what the runtime has, reported at once (as the kubelet's syncPod sets the
 * status before it acts: an exit reaches the API without waiting for the sandbox to stop or
 * the container to restart), then the next action, its probes and the status after it. */
static void pod_sync(struct kite_pods *p, struct pod *pod) {
    int64_t now = kite_now_mono(p->clock);
    if (kite_pods_refresh(p, pod)) {
        kite_pods_status_update(p, pod);
        kite_pods_status_send(p, pod, now);
    }
    kite_pods_worker_sync(p, pod, now);
    kite_pods_probes_sync(p, pod);
    kite_pods_status_update(p, pod);
    /* sent from here, the worker's: a status change does not wait for the pods thread to go
     * through every other pod's patch */
    kite_pods_status_send(p, pod, kite_now_mono(p->clock));
}

bool kite_pods_holds_resources(const struct pod *pod) {
    return pod->busy ? pod->holds : pod->admitted && !pod->rejected && !pod->finished && !pod->killed;
}

/* Hands the pod to a worker, or syncs it here when there are none (unit tests). */
static void dispatch(struct kite_pods *p, struct pod *pod) {
    if (!kite_streq(pod->host_ip, p->host_ip)) {
        free(pod->host_ip);
        pod->host_ip = p->host_ip ? kite_strdup(p->host_ip) : NULL;
    }
    if (!p->n_workers) {
        pod_sync(p, pod);
        return;
    }
    pod->holds = kite_pods_holds_resources(pod);
    pod->busy = true;
    p->n_busy++;
    pthread_mutex_lock(&p->lock);
    p->todo = kite_realloc(p->todo, (p->n_todo + 1) * sizeof(*p->todo));
    p->todo[p->n_todo++] = pod;
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->lock);
}

/* Takes back the pods whose sync is done. */
static void collect(struct kite_pods *p) {
    pthread_mutex_lock(&p->lock);
    struct pod **done = TAKE_PTR(p->done);
    size_t n = p->n_done;
    p->n_done = 0;
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < n; i++) {
        done[i]->busy = false;
        p->n_busy--;
    }
    free(done);
}

static void *worker_thread(void *ud) {
    struct kite_pods *p = ud;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && !p->n_todo) pthread_cond_wait(&p->work_cv, &p->lock);
        if (p->stopping) break;
        struct pod *pod = p->todo[0];
        memmove(p->todo, p->todo + 1, --p->n_todo * sizeof(*p->todo));
        pthread_mutex_unlock(&p->lock);
        pod_sync(p, pod);
        pthread_mutex_lock(&p->lock);
        p->done = kite_realloc(p->done, (p->n_done + 1) * sizeof(*p->done));
        p->done[p->n_done++] = pod;
        wake(p);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int64_t kite_pods_step(struct kite_pods *p) {
    int64_t now = kite_now_mono(p->clock);
    if (!p->recovered) {
        struct kite_sandbox_status *v = NULL;
        size_t n = 0;
        if (p->rt->ops->list_sandboxes(p->rt, KITE_PODS_RT_TIMEOUT_NS, &v, &n) == 0) {
            p->rec_sb = v;
            p->n_rec_sb = n;
            p->recovered = true;
        } else {
            return now + KITE_PODS_SYNC_ERROR_NS;
        }
    }
    /* Pods wait for the node's own status, as the kubelet waits for its Node before admitting
     * any: without allocatable it cannot admit, without its addresses no pod has a hostIP. */
    if (!p->node_known) {
        pthread_mutex_lock(&p->lock);
        bool have = p->node_status != NULL;
        pthread_mutex_unlock(&p->lock);
        if (!have) return now + KITE_NS_PER_SEC; /* kite_pods_node_status wakes the thread */
    }
    collect(p);
    drain_queue(p);
    /* PLEG: the runtime's exit events name the pods to look at */
    struct kite_container_event *evs = NULL;
    size_t nev = 0;
    if (p->rt->ops->read_events(p->rt, &evs, &nev) == 0) {
        for (size_t i = 0; i < nev; i++) {
            struct pod *pod = pod_of_container(p, evs[i].container_id);
            if (pod) pod->dirty = true;
            else /* maybe a container a worker is starting now: each busy pod looks again */
                for (size_t j = 0; j < p->n_pods; j++)
                    if (p->pods[j]->busy) p->pods[j]->dirty = true;
        }
        kite_container_events_free(evs, nev);
    }
    kite_pods_vobjs_mark_changed(p); /* ConfigMaps and Secrets of volumes that changed */
    if (now >= p->next_relist) {
        for (size_t i = 0; i < p->n_pods; i++)
            if (p->pods[i]->busy || kite_pods_refresh(p, p->pods[i]) || sandbox_lost(p, p->pods[i]))
                p->pods[i]->dirty = true;
        p->next_relist = now + KITE_PODS_RELIST_NS;
    }
    /* probes: run here when there is no prober thread (tests); their results first, so a
     * readiness flip reaches this step's status update */
    int64_t next_probe = INT64_MAX;
    if (!p->threads) next_probe = kite_pods_prober_step(p->prober);
    kite_pods_probe_results(p, now);
    kite_pods_hooks_apply(p);
    for (size_t i = 0; i < p->n_pods && !p->list_held; i++) {
        struct pod *pod = p->pods[i];
        if (pod->busy || (!pod->dirty && !(pod->next_sync && now >= pod->next_sync))) continue;
        pod->dirty = false;
        dispatch(p, pod);
    }
    if (p->listed && !p->orphans_done && !p->n_busy) {
        remove_orphans(p);
        p->orphans_done = true;
    }
    if (now >= p->next_resync) {
        /* the server's copy differs from what it acknowledged (someone else wrote it, such as the
         * node lifecycle controller's Ready=False during a partition): send the whole status again */
        for (size_t i = 0; i < p->n_pods; i++) {
            struct pod *pod = p->pods[i];
            if (!pod->busy && pod->acked && pod->in_api && pod->acked_version == pod->version &&
                kite_agent_pj(pod->obj, "status") && kite_pods_status_diverged(pod->acked, kite_agent_pj(pod->obj, "status"))) {
                json_object_put(pod->acked);
                pod->acked = NULL;
                pod->version++;
            }
        }
        p->next_resync = now + KITE_PODS_STATUS_RESYNC_NS;
    }
    kite_pods_status_sync(p, now);
    /* forget pods that are gone from the API and from the node */
    for (size_t i = 0; i < p->n_pods;) {
        struct pod *pod = p->pods[i];
        if (!pod->busy && !pod->in_api && (pod->removed || (!pod->sandbox_id && pod->killed))) {
            kite_pods_prober_remove(p->prober, NULL, pod->uid);
            kite_pods_logs_forget(p, pod->uid);
            kite_agent_pod_free(pod);
            p->pods[i] = p->pods[--p->n_pods];
        } else
            i++;
    }
    int64_t next = KITE_MIN(KITE_MIN(p->next_relist, p->next_resync), next_probe);
    for (size_t i = 0; i < p->n_pods; i++) {
        struct pod *pod = p->pods[i];
        if (pod->busy) continue; /* its worker wakes the thread when done */
        if (pod->next_sync) next = KITE_MIN(next, pod->next_sync);
        if (pod->version > pod->acked_version && pod->in_api) next = KITE_MIN(next, KITE_MAX(pod->next_patch, now));
    }
    return next;
}

/* ---- threads ---- */

static bool stopping(struct kite_pods *p) {
    pthread_mutex_lock(&p->lock);
    bool s = p->stopping;
    pthread_mutex_unlock(&p->lock);
    return s;
}

static void *pods_thread(void *ud) {
    struct kite_pods *p = ud;
    while (!stopping(p)) {
        int64_t next = kite_pods_step(p);
        int64_t d = next - kite_now_mono(p->clock);
        int ms = d <= 0 ? 0 : (int)KITE_MIN(d / KITE_NS_PER_MS + 1, 1000);
        struct pollfd fds[2] = {{.fd = p->wake_fd, .events = POLLIN}, {.fd = p->rt->ops->events_fd(p->rt), .events = POLLIN}};
        if (poll(fds, fds[1].fd >= 0 ? 2 : 1, ms) > 0 && (fds[0].revents & POLLIN)) {
            uint64_t v;
            if (read(p->wake_fd, &v, sizeof(v)) < 0) {
            }
        }
    }
    return NULL;
}

struct watch_ctx {
    struct kite_pods *p;
    char *rv;
    bool stale;
};

static int on_pod_event(json_object *ev, void *ud) {
    struct watch_ctx *w = ud;
    const char *type = kite_agent_pjs(ev, "type");
    json_object *obj = json_object_object_get(ev, "object");
    if (kite_streq(type, "ERROR")) {
        json_object *code = kite_agent_pj(obj, "code");
        if (code && json_object_get_int(code) == 410) {
            w->stale = true;
            return -ESTALE;
        }
        return -EIO;
    }
    const char *rv = kite_agent_pjs(obj, "metadata.resourceVersion");
    if (rv) {
        free(w->rv);
        w->rv = kite_strdup(rv);
    }
    if (kite_streq(type, "BOOKMARK")) return 0;
    kite_pods_pod_event(w->p, type, obj);
    return 0;
}

static void pause_ms(struct kite_pods *p, int64_t ms) {
    for (int64_t t = 0; t < ms && !stopping(p); t += 100) {
        struct timespec ts = {0, 100 * KITE_NS_PER_MS};
        nanosleep(&ts, NULL);
    }
}

static void *watch_thread(void *ud) {
    struct kite_pods *p = ud;
    struct watch_ctx w = {.p = p};
    struct kite_backoff b;
    kite_backoff_init(&b, KITE_NS_PER_SEC, 30 * KITE_NS_PER_SEC, 2.0, 0.2, p->rng + 7);
    while (!stopping(p)) {
        if (!w.rv) {
            _cleanup_free_ char *path = kite_asprintf("/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", p->node_name);
            json_object *list = NULL;
            int r = kite_client_json(p->client, "GET", path, NULL, NULL, NULL, &list);
            if (r < 0 || !kite_agent_pjs(list, "metadata.resourceVersion")) {
                json_object_put(list);
                log_debug(PODS_LOG, "listing pods: %s", strerror(-r));
                pause_ms(p, kite_backoff_next(&b) / KITE_NS_PER_MS);
                continue;
            }
            w.rv = kite_strdup(kite_agent_pjs(list, "metadata.resourceVersion"));
            kite_pods_pod_list(p, json_object_object_get(list, "items"));
            json_object_put(list);
        }
        _cleanup_free_ char *path = kite_asprintf(
            "/api/v1/pods?watch=true&allowWatchBookmarks=true&fieldSelector=spec.nodeName%%3D%s&resourceVersion=%s",
            p->node_name, w.rv);
        w.stale = false;
        int64_t t0 = kite_now_mono(p->clock);
        int r = kite_client_watch(p->client, path, on_pod_event, &w, &p->watch_cancel);
        if (r == -ECANCELED) break;
        if (w.stale || r == -ESTALE) { /* 410 Gone: the resourceVersion is too old, list again */
            free(w.rv);
            w.rv = NULL;
            continue;
        }
        if (r == 0 && kite_now_mono(p->clock) - t0 > KITE_NS_PER_SEC) {
            kite_backoff_reset(&b);
            continue;
        }
        log_debug(PODS_LOG, "pod watch: %s", strerror(-r));
        pause_ms(p, kite_backoff_next(&b) / KITE_NS_PER_MS);
    }
    free(w.rv);
    return NULL;
}

/* Ends the workers (each finishes the sync it is in). */
static void stop_workers(struct kite_pods *p) {
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    p->workers = NULL;
    p->n_workers = 0;
}

int kite_pods_start(struct kite_pods *p) {
    int r = kite_pods_prober_start(p->prober);
    if (r < 0) return r;
    /* set before the pods thread runs: it must not step the prober itself */
    p->threads = true;
    p->workers = kite_calloc(KITE_PODS_WORKERS, sizeof(*p->workers));
    for (; p->n_workers < KITE_PODS_WORKERS; p->n_workers++)
        if ((r = -pthread_create(&p->workers[p->n_workers], NULL, worker_thread, p)) < 0) {
            stop_workers(p);
            p->threads = false;
            kite_pods_prober_stop(p->prober);
            return r;
        }
    if ((r = -pthread_create(&p->thread, NULL, pods_thread, p)) < 0) {
        p->threads = false;
        kite_pods_prober_stop(p->prober);
        return r;
    }
    if ((r = -pthread_create(&p->watch_thread, NULL, watch_thread, p)) < 0) {
        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        pthread_mutex_unlock(&p->lock);
        wake(p);
        pthread_join(p->thread, NULL);
        stop_workers(p);
        p->threads = false;
        kite_pods_prober_stop(p->prober);
        return r;
    }
    return 0;
}

void kite_pods_stop(struct kite_pods *p) {
    if (!p || !p->threads) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_mutex_unlock(&p->lock);
    wake(p);
    kite_cancel_fire(&p->watch_cancel);
    pthread_join(p->watch_thread, NULL);
    pthread_join(p->thread, NULL);
    stop_workers(p);
    kite_pods_prober_stop(p->prober);
    kite_pods_hooks_wait(p);
    kite_pods_vobjs_stop(p);
    p->threads = false;
}
