/* The Job controller's core (job.h). A Job's sync works on copies of the Job and its pods taken
 * under the lock; what it learns for later (pods it created and has not seen yet, pods it
 * deleted, the failures since the last success) is kept per Job and read and written under the
 * lock only by the runner thread's step. */
#include "controllers/workloads/job.h"
#include "base/backoff.h"
#include "api/registry.h"
#include "base/log.h"
#include "base/map.h"
#include "client/informer.h"
#include "framework/framework.h"
#include "controllers/controllers.h"
#include "framework/ctlutil.h"
#include "framework/loop.h"
#include "framework/workqueue.h"
#include "controllers/workloads/wlutil.h"

#include <pthread.h>
#include <stdio.h>

#define LOG "job-controller"
#define COMPONENT "job-controller"
#define UID_LABEL "batch.kubernetes.io/controller-uid"

struct jstate {
    json_object *job; /* own copy; NULL: not known (its pods are orphans once jobs are synced) */
    struct kite_wl_awaited created; /* pods created, not yet seen */
    struct kite_wl_names deleted;   /* pods deleted, not yet seen going */
    struct kite_wl_names finalized; /* uids of pods whose finalizer was removed, not yet seen so */
    int failures;         /* failed pods counted since the last success (back-off) */
    int64_t last_failure; /* wall ns of the latest of them */
};

struct kite_jobctl {
    struct kite_jobctl_options o;
    pthread_mutex_t lock;
    struct kite_map jobs; /* "ns/name" -> struct jstate */
    struct kite_wl_cache pods; /* the pods Jobs control */
    struct kite_wq q;     /* the Jobs' keys */
    struct kite_ctl_keyed k;
    bool jobs_synced;
};

static bool work(void *ud, const char *key, int64_t *again_ns);

struct kite_jobctl *kite_jobctl_new(const struct kite_jobctl_options *o) {
    struct kite_jobctl *c = kite_calloc(1, sizeof *c);
    c->o = *o;
    if (!c->o.clock) c->o.clock = kite_clock_real();
    pthread_mutex_init(&c->lock, NULL);
    c->q.backoff_base_ns = KITE_JOB_RETRY_NS;
    c->q.backoff_max_ns = KITE_JOB_RETRY_MAX_NS;
    c->k = (struct kite_ctl_keyed){.lock = &c->lock, .wq = &c->q, .clock = c->o.clock, .ud = c, .work = work};
    return c;
}

static void jstate_free(struct jstate *s) {
    json_object_put(s->job);
    kite_wl_names_release(&s->created.names);
    kite_wl_names_release(&s->deleted);
    kite_wl_names_release(&s->finalized);
    free(s);
}

void kite_jobctl_free(struct kite_jobctl *c) {
    if (!c) return;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&c->jobs, &it, &k, &v);) jstate_free(v);
    kite_map_release(&c->jobs);
    kite_wl_cache_release(&c->pods);
    kite_wq_release(&c->q);
    pthread_mutex_destroy(&c->lock);
    free(c);
}


static struct jstate *state(struct kite_jobctl *c, const char *key) {
    return kite_wl_state(&c->jobs, key, sizeof(struct jstate));
}

static void queue(struct kite_jobctl *c, const char *key) { kite_ctl_keyed_add(&c->k, key, 0); }


void kite_jobctl_job_upsert(struct kite_jobctl *c, json_object *job) {
    _cleanup_free_ char *key = kite_informer_key(job);
    if (!key) return;
    pthread_mutex_lock(&c->lock);
    kite_wl_keep_copy(&state(c, key)->job, job);
    queue(c, key);
    pthread_mutex_unlock(&c->lock);
}

void kite_jobctl_job_delete(struct kite_jobctl *c, json_object *job) {
    _cleanup_free_ char *key = kite_informer_key(job);
    if (!key) return;
    pthread_mutex_lock(&c->lock);
    struct jstate *s = state(c, key);
    json_object_put(TAKE_PTR(s->job));
    queue(c, key); /* its pods' finalizers go */
    pthread_mutex_unlock(&c->lock);
}

static void pod_changed(struct kite_jobctl *c, json_object *pod, bool gone) {
    pthread_mutex_lock(&c->lock);
    _cleanup_free_ char *owner = kite_wl_cache_owned(&c->pods, pod, gone, "batch/v1", "Job");
    if (owner) {
        state(c, owner);
        queue(c, owner);
    }
    pthread_mutex_unlock(&c->lock);
}
void kite_jobctl_pod_upsert(struct kite_jobctl *c, json_object *pod) { pod_changed(c, pod, false); }
void kite_jobctl_pod_delete(struct kite_jobctl *c, json_object *pod) { pod_changed(c, pod, true); }

void kite_jobctl_jobs_synced(struct kite_jobctl *c) {
    pthread_mutex_lock(&c->lock);
    c->jobs_synced = true;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&c->jobs, &it, &k, &v);)
        if (!((struct jstate *)v)->job) queue(c, k);
    pthread_mutex_unlock(&c->lock);
}

bool kite_jobctl_pending(struct kite_jobctl *c) { return kite_ctl_keyed_pending(&c->k); }

int64_t kite_job_backoff_ns(int failures) {
    return failures <= 0 ? 0 : kite_backoff_exp(KITE_JOB_BACKOFF_NS, KITE_JOB_BACKOFF_MAX_NS, (unsigned)failures - 1);
}

/* ---- one Job's sync -------------------------------------------------------------------- */

/* What a sync reads (copies, owned) and leaves for the next one. */
struct sync {
    struct kite_jobctl *c;
    const char *key;
    json_object *job;   /* NULL: gone */
    json_object **pods; /* its pods (controller reference to it) */
    size_t npods;
    struct kite_wl_names created, deleted, finalized; /* in: as kept; out: as to keep */
    int failures;
    int64_t last_failure, now, requeue; /* requeue: ns, -1 none */
    bool failed; /* a request failed: the Job is synced again after its back-off */
    struct kite_ctl_acts events;
};

static bool has_finalizer(json_object *pod) {
    json_object *f = kite_obj_get(kite_obj_meta(pod), "finalizers");
    for (size_t i = 0; f && json_object_is_type(f, json_type_array) && i < json_object_array_length(f); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(f, i)), KITE_JOB_TRACKING_FINALIZER)) return true;
    return false;
}
static const char *phase(json_object *pod) {
    const char *p = kite_obj_str(kite_obj_get(pod, "status"), "phase");
    return p ? p : "";
}
static bool deleting(json_object *o) { return kite_meta_str(o, "deletionTimestamp") != NULL; }
static bool succeeded(json_object *pod) { return kite_streq(phase(pod), "Succeeded"); }
/* isPodFailed with podReplacementPolicy TerminatingOrFailed: a pod being deleted before it
 * succeeded has failed */
static bool failed(json_object *pod) { return kite_streq(phase(pod), "Failed") || (deleting(pod) && !succeeded(pod)); }
static bool terminating(json_object *pod) { return deleting(pod) && !kite_streq(phase(pod), "Failed") && !succeeded(pod); }
static bool pod_ready(json_object *pod) {
    json_object *cd = kite_ctl_condition(pod, "Ready");
    return cd && kite_streq(kite_obj_str(cd, "status"), "True");
}
static int64_t i64(json_object *o, const char *k) {
    json_object *v = kite_obj_get(o, k);
    return v ? json_object_get_int64(v) : 0;
}

/* When the pod's last container finished (wall ns), else now. */
static int64_t finish_time(json_object *pod, int64_t now) {
    json_object *cs = kite_obj_get(kite_obj_get(pod, "status"), "containerStatuses");
    int64_t latest = 0;
    for (size_t i = 0; cs && json_object_is_type(cs, json_type_array) && i < json_object_array_length(cs); i++) {
        json_object *term = kite_obj_get(kite_obj_get(json_object_array_get_idx(cs, i), "state"), "terminated");
        const char *t = kite_obj_str(term, "finishedAt");
        int64_t ns;
        if (t && kite_time_parse(t, &ns) == 0 && ns > latest) latest = ns;
    }
    return latest ? latest : now;
}

/* kite_ctl_condition reads obj.status.conditions: wrap a status to ask it. */
static json_object *wrap(json_object *status) {
    json_object *o = json_object_new_object();
    kite_obj_set(o, "status", json_object_get(status));
    return o;
}
static bool status_cond(json_object *status, const char *type) {
    json_object *o = wrap(status);
    json_object *cd = kite_ctl_condition(o, type);
    bool t = cd && kite_streq(kite_obj_str(cd, "status"), "True");
    json_object_put(o);
    return t;
}
static json_object *status_cond_obj(json_object *status, const char *type) {
    json_object *o = wrap(status), *cd = kite_ctl_condition(o, type);
    json_object_put(o); /* cd is still held by status */
    return cd;
}

static void add_condition(struct sync *s, json_object *status, const char *type, const char *reason, const char *msg) {
    if (status_cond(status, type)) return;
    char ts[21];
    kite_time_format(s->now, ts);
    json_object *conds = kite_obj_get(status, "conditions");
    if (!conds || !json_object_is_type(conds, json_type_array)) {
        conds = json_object_new_array();
        kite_obj_set(status, "conditions", conds);
    }
    json_object *cd = json_object_new_object();
    kite_obj_set(cd, "type", json_object_new_string(type));
    kite_obj_set(cd, "status", json_object_new_string("True"));
    kite_obj_set(cd, "lastProbeTime", json_object_new_string(ts));
    kite_obj_set(cd, "lastTransitionTime", json_object_new_string(ts));
    kite_obj_set(cd, "reason", json_object_new_string(reason));
    kite_obj_set(cd, "message", json_object_new_string(msg));
    json_object_array_add(conds, cd);
}

/* A condition turned to status (its times now). */
static void set_condition(struct sync *s, json_object *cd, const char *status, const char *reason, const char *msg) {
    char ts[21];
    kite_time_format(s->now, ts);
    kite_obj_set(cd, "status", json_object_new_string(status));
    kite_obj_set(cd, "lastProbeTime", json_object_new_string(ts));
    kite_obj_set(cd, "lastTransitionTime", json_object_new_string(ts));
    kite_obj_set(cd, "reason", json_object_new_string(reason));
    kite_obj_set(cd, "message", json_object_new_string(msg));
}

/* An event about the Job (client-go's recorder, involvedObject batch/v1). */
static void job_event(struct sync *s, const char *type, const char *reason, const char *msg) {
    kite_ctl_event(&s->events, s->c->o.clock, COMPONENT, "Job", kite_meta_str(s->job, "namespace"),
                   kite_meta_str(s->job, "name"), kite_meta_str(s->job, "uid"), type, reason, msg);
    json_object *io = kite_obj_get(s->events.v[s->events.n - 1].body, "involvedObject");
    kite_obj_set(io, "apiVersion", json_object_new_string("batch/v1"));
}

static int remove_finalizer(struct sync *s, json_object *pod) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s", kite_meta_str(pod, "namespace"),
                                              kite_meta_str(pod, "name"));
    json_object *patch = json_object_new_object(), *meta = json_object_new_object(), *list = json_object_new_array();
    json_object_array_add(list, json_object_new_string(KITE_JOB_TRACKING_FINALIZER));
    kite_obj_set(meta, "$deleteFromPrimitiveList/finalizers", list);
    kite_obj_set(patch, "metadata", meta);
    int e = kite_client_json(s->c->o.client, "PATCH", path, "application/strategic-merge-patch+json", patch, NULL, NULL);
    json_object_put(patch);
    return e == -ENOENT ? 0 : e;
}

static int put_status(struct sync *s, json_object *status) {
    json_object *body = kite_wl_copy(s->job);
    kite_obj_set(body, "status", json_object_get(status));
    _cleanup_free_ char *path = kite_asprintf("/apis/batch/v1/namespaces/%s/jobs/%s/status", kite_meta_str(s->job, "namespace"),
                                              kite_meta_str(s->job, "name"));
    json_object *answer = NULL;
    int e = kite_client_json(s->c->o.client, "PUT", path, NULL, body, NULL, &answer);
    json_object_put(body);
    /* the next write carries the new resourceVersion and status (s->job itself stays: the
     * sync holds pointers into it) */
    const char *rv = e == 0 ? kite_meta_str(answer, "resourceVersion") : NULL;
    if (rv) {
        kite_obj_set(kite_obj_meta(s->job), "resourceVersion", json_object_new_string(rv));
        kite_obj_set(s->job, "status", kite_wl_copy(status));
    }
    json_object_put(answer);
    return e;
}

static int create_pod(struct sync *s) {
    json_object *pod = kite_wl_pod_from_template(kite_obj_get(kite_obj_get(s->job, "spec"), "template"), s->job,
                                                 "batch/v1", "Job", NULL);
    json_object *meta = kite_obj_meta(pod), *fins = kite_obj_get(meta, "finalizers");
    if (!fins || !json_object_is_type(fins, json_type_array))
        kite_obj_set(meta, "finalizers", fins = json_object_new_array());
    json_object_array_add(fins, json_object_new_string(KITE_JOB_TRACKING_FINALIZER));
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods", kite_meta_str(s->job, "namespace"));
    json_object *answer = NULL;
    int e = kite_client_json(s->c->o.client, "POST", path, NULL, pod, NULL, &answer);
    json_object_put(pod);
    if (e == 0) {
        const char *name = kite_meta_str(answer, "name");
        if (name) kite_wl_names_add(&s->created, name);
        _cleanup_free_ char *msg = kite_asprintf("Created pod: %s", name ? name : "");
        job_event(s, "Normal", "SuccessfulCreate", msg);
    }
    json_object_put(answer);
    return e;
}

static int delete_pod(struct sync *s, json_object *pod) {
    const char *name = kite_meta_str(pod, "name");
    _cleanup_free_ char *path = kite_asprintf("/api/v1/namespaces/%s/pods/%s", kite_meta_str(pod, "namespace"), name);
    int e = kite_client_json(s->c->o.client, "DELETE", path, NULL, NULL, NULL, NULL);
    if (e == 0 || e == -ENOENT) {
        kite_wl_names_add(&s->deleted, name);
        _cleanup_free_ char *msg = kite_asprintf("Deleted pod: %s", name);
        job_event(s, "Normal", "SuccessfulDelete", msg);
        return 0;
    }
    return e;
}

static bool uid_in(json_object *list, const char *uid) {
    for (size_t i = 0; list && json_object_is_type(list, json_type_array) && i < json_object_array_length(list); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(list, i)), uid)) return true;
    return false;
}

static json_object *uncounted_list(json_object *status, const char *which) {
    json_object *u = kite_obj_ensure(status, "uncountedTerminatedPods"), *l = kite_obj_get(u, which);
    if (!l || !json_object_is_type(l, json_type_array)) {
        l = json_object_new_array();
        kite_obj_set(u, which, l);
    }
    return l;
}

static json_object *pod_by_uid(struct sync *s, const char *uid) {
    for (size_t i = 0; i < s->npods; i++)
        if (kite_streq(kite_meta_str(s->pods[i], "uid"), uid)) return s->pods[i];
    return NULL;
}

/* A Job gone or being deleted lets go of its pods (their finalizers). */
static void release_pods(struct sync *s) {
    for (size_t i = 0; i < s->npods; i++)
        if (has_finalizer(s->pods[i]) && remove_finalizer(s, s->pods[i]) < 0) s->failed = true;
}

static int cmp_finish(const void *a, const void *b) {
    int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* Phase 1 of counting: pods newly seen finished go into uncountedTerminatedPods (written
 * before any finalizer is removed), and the back-off record follows them in finish order.
 * success_ending: the Job met its success criteria; pods it deletes then are not failures. */
static int record_finished(struct sync *s, json_object *status, bool success_ending) {
    json_object *us = uncounted_list(status, "succeeded"), *uf = uncounted_list(status, "failed");
    int64_t(*seen)[2] = s->npods ? kite_calloc(s->npods, sizeof *seen) : NULL; /* {finish, +1 success / -1 failure} */
    size_t n = 0;
    for (size_t i = 0; i < s->npods; i++) {
        json_object *p = s->pods[i];
        const char *uid = kite_meta_str(p, "uid");
        if (!uid || !has_finalizer(p) || uid_in(us, uid) || uid_in(uf, uid)) continue;
        if (succeeded(p)) {
            json_object_array_add(us, json_object_new_string(uid));
            seen[n][0] = finish_time(p, s->now), seen[n++][1] = 1;
        } else if (failed(p) && !success_ending) {
            json_object_array_add(uf, json_object_new_string(uid));
            seen[n][0] = finish_time(p, s->now), seen[n++][1] = -1;
        }
    }
    if (n) qsort(seen, n, sizeof *seen, cmp_finish);
    for (size_t i = 0; i < n; i++) {
        if (seen[i][1] > 0) {
            s->failures = 0;
        } else {
            s->failures++;
            s->last_failure = KITE_MAX(s->last_failure, seen[i][0]);
        }
    }
    free(seen);
    return n ? put_status(s, status) : 0;
}

/* Phases 2 and 3: finalizers off the finished pods, then those pods into the counters. */
static void count_finished(struct sync *s, json_object *status, bool success_ending) {
    for (size_t i = 0; i < s->npods; i++) {
        json_object *p = s->pods[i];
        if (!has_finalizer(p) || !(succeeded(p) || failed(p))) continue;
        if (remove_finalizer(s, p) < 0) {
            s->failed = true;
            continue;
        }
        kite_obj_set(kite_obj_meta(p), "finalizers", json_object_new_array()); /* as it now is */
        kite_wl_names_add(&s->finalized, kite_meta_str(p, "uid"));
    }
    static const char *const which[] = {"succeeded", "failed"};
    for (size_t w = 0; w < 2; w++) {
        json_object *l = uncounted_list(status, which[w]), *keep = json_object_new_array();
        int64_t moved = 0;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
            const char *uid = json_object_get_string(json_object_array_get_idx(l, i));
            json_object *p = pod_by_uid(s, uid);
            if (p && has_finalizer(p)) json_object_array_add(keep, json_object_new_string(uid));
            else moved++;
        }
        kite_obj_set(kite_obj_get(status, "uncountedTerminatedPods"), which[w], keep);
        kite_obj_set(status, which[w], json_object_new_int64(i64(status, which[w]) + moved));
    }
    (void)success_ending;
}

static void sync_job(struct sync *s) {
    json_object *spec = kite_obj_get(s->job, "spec");
    json_object *status = kite_wl_copy(kite_obj_get(s->job, "status"));
    if (!status) status = json_object_new_object();
    json_object *before = kite_wl_copy(status);
    bool finished = status_cond(status, "Complete") || status_cond(status, "Failed");
    bool success_ending = status_cond(status, "SuccessCriteriaMet");
    if (record_finished(s, status, success_ending) < 0) {
        s->failed = true;
        goto out;
    }
    json_object_put(before);
    before = kite_wl_copy(status);
    count_finished(s, status, success_ending);
    if (finished) goto write;

    /* the pods that run (or will: created, not seen yet) */
    json_object **active = s->npods ? kite_calloc(s->npods, sizeof *active) : NULL;
    size_t nactive = 0, ready = 0, nterminating = 0;
    for (size_t i = 0; i < s->npods; i++) {
        json_object *p = s->pods[i];
        if (terminating(p)) nterminating++;
        if (succeeded(p) || failed(p) || kite_wl_names_has(&s->deleted, kite_meta_str(p, "name"))) continue;
        active[nactive++] = p;
        if (pod_ready(p)) ready++;
    }
    size_t unseen = s->created.n; /* created pods still to arrive count as running */

    json_object *us = uncounted_list(status, "succeeded"), *uf = uncounted_list(status, "failed");
    int64_t n_succeeded = i64(status, "succeeded") + (int64_t)json_object_array_length(us);
    int64_t n_failed = i64(status, "failed") + (int64_t)json_object_array_length(uf);
    /* pastBackoffLimitOnFailure: with OnFailure, containers restarted in place count (all of
     * them, not only new ones, as upstream: >= backoffLimit, or any restart when it is 0) */
    bool restarts_exceed = false;
    if (kite_streq(kite_obj_str(kite_obj_get(kite_obj_get(spec, "template"), "spec"), "restartPolicy"), "OnFailure")) {
        int64_t restarts = 0;
        static const char *const lists[] = {"initContainerStatuses", "containerStatuses"};
        for (size_t i = 0; i < nactive; i++)
            for (size_t l = 0; l < 2; l++) {
                json_object *cs = kite_obj_get(kite_obj_get(active[i], "status"), lists[l]);
                for (size_t j = 0; cs && json_object_is_type(cs, json_type_array) && j < json_object_array_length(cs); j++)
                    restarts += i64(json_object_array_get_idx(cs, j), "restartCount");
            }
        int64_t limit = i64(spec, "backoffLimit");
        restarts_exceed = limit == 0 ? restarts > 0 : restarts >= limit;
    }
    bool suspend = json_object_get_boolean(kite_obj_get(spec, "suspend"));
    char ts[21];
    kite_time_format(s->now, ts);
    /* a suspended Job says so, and its deadline counts from when it is resumed */
    json_object *susp = status_cond_obj(status, "Suspended");
    bool was_suspended = susp && kite_streq(kite_obj_str(susp, "status"), "True");
    if (suspend && !was_suspended && !success_ending && !status_cond(status, "FailureTarget")) {
        if (susp) set_condition(s, susp, "True", "JobSuspended", "Job suspended");
        else add_condition(s, status, "Suspended", "JobSuspended", "Job suspended");
        json_object_object_del(status, "startTime");
    } else if (!suspend && was_suspended) {
        set_condition(s, susp, "False", "JobResumed", "Job resumed");
        kite_obj_set(status, "startTime", json_object_new_string(ts));
    }
    if (!kite_obj_get(status, "startTime") && !suspend) kite_obj_set(status, "startTime", json_object_new_string(ts));

    json_object *comp = kite_obj_get(spec, "completions");
    int64_t parallelism = i64(spec, "parallelism"), ads = -1, started = 0;
    if (kite_obj_get(spec, "activeDeadlineSeconds")) ads = i64(spec, "activeDeadlineSeconds");
    const char *st = kite_obj_str(status, "startTime");
    if (st) kite_time_parse(st, &started);

    /* the end, when it comes: the target condition first, the final one once no pod runs */
    if (!status_cond(status, "FailureTarget") && !success_ending) {
        if (n_failed > i64(spec, "backoffLimit") || restarts_exceed) {
            add_condition(s, status, "FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit");
        } else if (ads >= 0 && !suspend && started && s->now >= kite_time_add(started, kite_sec_to_ns(ads))) {
            add_condition(s, status, "FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline");
        } else if ((comp && n_succeeded >= json_object_get_int64(comp)) ||
                   (!comp && n_succeeded > 0 && nactive + unseen == 0)) {
            add_condition(s, status, "SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods");
            success_ending = true;
        }
    }
    json_object *target = status_cond_obj(status, success_ending ? "SuccessCriteriaMet" : "FailureTarget");
    if (target && kite_streq(kite_obj_str(target, "status"), "True")) {
        for (size_t i = 0; i < nactive; i++)
            if (delete_pod(s, active[i]) < 0) s->failed = true;
        nterminating += nactive;
        nactive = 0, ready = 0;
        bool left = nterminating > 0 || unseen > 0 || json_object_array_length(uncounted_list(status, "succeeded")) ||
                    json_object_array_length(uncounted_list(status, "failed"));
        if (!left) {
            const char *reason = kite_obj_str(target, "reason"), *msg = kite_obj_str(target, "message");
            _cleanup_free_ char *r = kite_strdup(reason ? reason : ""), *m = kite_strdup(msg ? msg : "");
            if (success_ending) {
                add_condition(s, status, "Complete", r, m);
                kite_obj_set(status, "completionTime", json_object_new_string(ts));
                job_event(s, "Normal", "Completed", "Job completed");
            } else {
                add_condition(s, status, "Failed", r, m);
                job_event(s, "Warning", r, m);
            }
        }
    } else {
        /* manageJob: as many running as parallelism allows and completions still need */
        int64_t want = parallelism;
        if (comp) want = KITE_MIN(want, KITE_MAX(json_object_get_int64(comp) - n_succeeded, 0));
        else if (n_succeeded > 0) want = (int64_t)(nactive + unseen);
        if (suspend) want = 0;
        int64_t have = (int64_t)(nactive + unseen);
        if (have > want) {
            for (size_t i = nactive; i-- > 0 && have > want;) {
                if (delete_pod(s, active[i]) < 0) {
                    s->failed = true;
                    break;
                }
                have--, nactive--;
            }
        } else if (have < want) {
            int64_t wait = s->failures ? kite_job_backoff_ns(s->failures) - (s->now - s->last_failure) : 0;
            if (wait > 0) {
                s->requeue = s->requeue < 0 ? wait : KITE_MIN(s->requeue, wait);
            } else {
                for (; have < want; have++)
                    if (create_pod(s) < 0) {
                        s->failed = true;
                        break;
                    }
            }
        }
        if (ads >= 0 && started && !suspend) {
            int64_t left = kite_time_add(started, kite_sec_to_ns(ads)) - s->now;
            s->requeue = s->requeue < 0 ? KITE_MAX(left, 0) : KITE_MIN(s->requeue, KITE_MAX(left, 0));
        }
        nactive = (size_t)KITE_MAX(have, 0);
    }
    free(active);
    kite_obj_set(status, "active", json_object_new_int64((int64_t)nactive));
    kite_obj_set(status, "ready", json_object_new_int64((int64_t)ready));
    kite_obj_set(status, "terminating", json_object_new_int64((int64_t)nterminating));
write:
    /* the counters are written even when 0, as upstream's status carries them */
    if (!kite_obj_get(status, "succeeded")) kite_obj_set(status, "succeeded", json_object_new_int(0));
    if (!kite_obj_get(status, "failed")) kite_obj_set(status, "failed", json_object_new_int(0));
    if (!kite_json_equal(status, before) && put_status(s, status) < 0) s->failed = true;
out:
    json_object_put(before);
    json_object_put(status);
}

static void sync_one(struct sync *s) {
    if (!s->job || deleting(s->job)) {
        release_pods(s);
        return;
    }
    sync_job(s);
}

/* Takes what the sync of key needs (under the lock). */
static void snapshot(struct kite_jobctl *c, const char *key, struct jstate *js, struct sync *s) {
    *s = (struct sync){.c = c, .key = key, .now = kite_now_wall(c->o.clock), .requeue = -1,
                       .failures = js->failures, .last_failure = js->last_failure};
    s->job = kite_wl_copy(js->job);
    const char *uid = js->job ? kite_meta_str(js->job, "uid") : NULL;
    const char *k;
    void *v;
    bool orphans = !js->job && c->jobs_synced;
    for (size_t it = 0; kite_map_next(&c->pods.m, &it, &k, &v);) {
        _cleanup_free_ char *owner = kite_wl_controller_key(v, "batch/v1", "Job");
        if (!owner || strcmp(owner, key) != 0) continue;
        if (!js->job && !orphans) continue;
        if (uid && !kite_wl_owner_uid(v, uid)) continue; /* a pod of an older Job of the same name */
        json_object *p = kite_wl_copy(v);
        const char *puid = kite_meta_str(p, "uid");
        /* a finalizer this controller removed is gone, whatever the cache still shows: the pod
         * is counted already and must not be counted again */
        if (puid && kite_wl_names_has(&js->finalized, puid) && has_finalizer(p)) {
            kite_wl_names_add(&s->finalized, puid);
            kite_obj_set(kite_obj_meta(p), "finalizers", json_object_new_array());
        }
        s->pods = kite_realloc(s->pods, (s->npods + 1) * sizeof *s->pods);
        s->pods[s->npods++] = p;
    }
    /* expectations: a created pod seen, or a deleted one going, is no longer awaited */
    int64_t mono = kite_now_mono(c->o.clock);
    kite_wl_awaited_expire(&js->created, mono, KITE_JOB_EXPECT_NS);
    for (size_t i = 0; i < js->created.names.n; i++) {
        _cleanup_free_ char *pk = kite_asprintf("%s/%s", kite_meta_str(js->job, "namespace"), js->created.names.v[i]);
        if (!kite_wl_cache_get(&c->pods, pk)) kite_wl_names_add(&s->created, js->created.names.v[i]);
    }
    for (size_t i = 0; i < js->deleted.n; i++) {
        _cleanup_free_ char *pk = kite_asprintf("%s/%s", kite_meta_str(js->job, "namespace"), js->deleted.v[i]);
        json_object *p = kite_wl_cache_get(&c->pods, pk);
        if (p && !deleting(p)) kite_wl_names_add(&s->deleted, js->deleted.v[i]);
    }
}

static void sync_release(struct sync *s) {
    json_object_put(s->job);
    for (size_t i = 0; i < s->npods; i++) json_object_put(s->pods[i]);
    free(s->pods);
    kite_wl_names_release(&s->created);
    kite_wl_names_release(&s->deleted);
    kite_wl_names_release(&s->finalized);
    kite_ctl_acts_release(&s->events);
}

/* One Job's pass (the keyed runner's work): what it needs taken under the lock, its requests
 * made without it, what it awaits now kept under the lock again. */
static bool work(void *ud, const char *key, int64_t *again_ns) {
    struct kite_jobctl *c = ud;
    struct sync s;
    pthread_mutex_lock(&c->lock);
    struct jstate *js = kite_map_get(&c->jobs, key);
    if (!js) {
        pthread_mutex_unlock(&c->lock);
        return false;
    }
    snapshot(c, key, js, &s);
    pthread_mutex_unlock(&c->lock);
    sync_one(&s);
    kite_ctl_acts_run(c->o.client, &s.events, NULL, NULL);
    pthread_mutex_lock(&c->lock);
    js = state(c, key);
    /* what it awaits now (the still-awaited and the newly created or deleted pods), the
     * back-off record, and the Job as its last status write left it */
    kite_wl_awaited_keep(&js->created, &s.created, kite_now_mono(c->o.clock));
    kite_wl_names_release(&js->deleted);
    kite_wl_names_release(&js->finalized);
    js->deleted = s.deleted, js->finalized = s.finalized;
    s.deleted = s.finalized = (struct kite_wl_names){0};
    js->failures = s.failures, js->last_failure = s.last_failure;
    if (s.job && js->job && kite_ctl_rv(s.job) > kite_ctl_rv(js->job)) {
        json_object_put(js->job);
        js->job = json_object_get(s.job);
    }
    *again_ns = s.requeue;
    bool failed = s.failed;
    if (!js->job && !s.npods && !failed && s.requeue < 0 && !kite_wq_queued(&c->q, key))
        jstate_free(kite_map_del(&c->jobs, key));
    pthread_mutex_unlock(&c->lock);
    sync_release(&s);
    return failed;
}

int64_t kite_jobctl_step(struct kite_jobctl *c) { return kite_ctl_keyed_step(&c->k); }

/* ---- on the framework: Jobs and the pods they made feed it ---- */
KITE_CTL_FEED(kite_jobctl_job_upsert, struct kite_jobctl)
KITE_CTL_FEED(kite_jobctl_job_delete, struct kite_jobctl)
KITE_CTL_FEED(kite_jobctl_pod_upsert, struct kite_jobctl)
KITE_CTL_FEED(kite_jobctl_pod_delete, struct kite_jobctl)
KITE_CTL_CORE(kite_jobctl, struct kite_jobctl)
static void jobs_synced(void *core, uintptr_t tag) { kite_jobctl_jobs_synced(core); }

int kite_jobctl_run(struct kite_ctl_group *g) {
    struct kite_jobctl_options o = {.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/apis/batch/v1/jobs", .upsert = kite_jobctl_job_upsert_feed, .del = kite_jobctl_job_delete_feed,
         .synced = jobs_synced},
        /* only the pods a Job made carry its controller-uid label */
        {.path = "/api/v1/pods", .selector = "labelSelector=batch.kubernetes.io%2Fcontroller-uid",
         .upsert = kite_jobctl_pod_upsert_feed, .del = kite_jobctl_pod_delete_feed},
    };
    struct kite_ctl_spec spec = {.name = "job-controller", .step = kite_jobctl_step_core, .pending = kite_jobctl_pending_core,
                                 .free = kite_jobctl_free_core, .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, kite_jobctl_new(&o));
}
