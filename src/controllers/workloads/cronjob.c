/* The CronJob controller (cronjob.h). */
#include "controllers/workloads/cronjob.h"
#include "api/cron.h"
#include "api/registry.h"
#include "base/log.h"
#include "framework/ctlutil.h"
#include "framework/framework.h"
#include "framework/workqueue.h"
#include "controllers/workloads/wlutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define LOG "cronjob"
#define COMPONENT "cronjob-controller"
#define SCHEDULED_ANNOTATION "batch.kubernetes.io/cronjob-scheduled-timestamp"

enum { ACT_CREATE, ACT_DELETE, ACT_STATUS };

struct kite_cronjobs {
    struct kite_cjctl_options o;
    pthread_mutex_t lock;
    struct kite_wl_cache jobs, cjs;
    struct kite_wq q;
    struct kite_ctl_keyed k;
};

static void enqueue_at(struct kite_cronjobs *c, const char *key, int64_t in_ns) {
    kite_wq_add(&c->q, key, kite_now_mono(c->o.clock) + in_ns);
}

static char *owner_key(json_object *job) { return kite_wl_controller_key(job, "batch/v1", "CronJob"); }

static void job_change(struct kite_cronjobs *c, json_object *job, bool del) {
    pthread_mutex_lock(&c->lock);
    json_object_put(del ? kite_wl_cache_del(&c->jobs, job) : kite_wl_cache_put(&c->jobs, job));
    _cleanup_free_ char *key = owner_key(job);
    if (key) enqueue_at(c, key, 0);
    pthread_mutex_unlock(&c->lock);
}
static void job_add(void *ud, json_object *o, uintptr_t tag) { job_change(ud, o, false); }
static void job_del(void *ud, json_object *o, uintptr_t tag) { job_change(ud, o, true); }

static void cj_change(struct kite_cronjobs *c, json_object *cj, bool del) {
    pthread_mutex_lock(&c->lock);
    json_object_put(del ? kite_wl_cache_del(&c->cjs, cj) : kite_wl_cache_put(&c->cjs, cj));
    _cleanup_free_ char *key = kite_wl_key(kite_meta_str(cj, "namespace"), kite_meta_str(cj, "name"));
    if (del) kite_wq_forget(&c->q, key);
    else enqueue_at(c, key, 0);
    pthread_mutex_unlock(&c->lock);
}
static void cj_add(void *ud, json_object *o, uintptr_t tag) { cj_change(ud, o, false); }
static void cj_del(void *ud, json_object *o, uintptr_t tag) { cj_change(ud, o, true); }

/* "Complete" or "Failed" when the Job has finished (that condition True), else NULL */
static const char *finished(json_object *job) {
    json_object *conds = kite_obj_get(kite_obj_get(job, "status"), "conditions");
    size_t n = conds && json_object_is_type(conds, json_type_array) ? json_object_array_length(conds) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *cd = json_object_array_get_idx(conds, i);
        const char *t = kite_obj_str(cd, "type");
        if ((kite_streq(t, "Complete") || kite_streq(t, "Failed")) && kite_streq(kite_obj_str(cd, "status"), "True"))
            return kite_streq(t, "Complete") ? "Complete" : "Failed";
    }
    return NULL;
}

static int64_t time_of(json_object *obj, const char *a, const char *b) {
    int64_t ns = 0;
    const char *s = kite_obj_str(kite_obj_get(obj, a), b);
    return s && kite_time_parse(s, &ns) == 0 ? ns : 0;
}


/* getJobFromTemplate2: NAME-<scheduled minutes since the epoch> */
static json_object *new_job(json_object *cj, time_t scheduled) {
    json_object *tmpl = kite_obj_get(kite_obj_get(cj, "spec"), "jobTemplate"), *tmeta = kite_obj_meta(tmpl);
    _cleanup_free_ char *name = kite_asprintf("%s-%lld", kite_meta_str(cj, "name"), (long long)(scheduled / 60));
    json_object *job = json_object_new_object(), *meta = json_object_new_object();
    kite_obj_set(job, "apiVersion", json_object_new_string("batch/v1"));
    kite_obj_set(job, "kind", json_object_new_string("Job"));
    kite_obj_set(meta, "name", json_object_new_string(name));
    kite_obj_set(meta, "namespace", json_object_new_string(kite_meta_str(cj, "namespace")));
    json_object *labels = kite_wl_copy(kite_obj_get(tmeta, "labels"));
    json_object *ann = kite_wl_copy(kite_obj_get(tmeta, "annotations"));
    if (labels) kite_obj_set(meta, "labels", labels);
    if (!ann) ann = json_object_new_object();
    char ts[21];
    kite_time_format((int64_t)scheduled * KITE_NS_PER_SEC, ts);
    kite_obj_set(ann, SCHEDULED_ANNOTATION, json_object_new_string(ts));
    kite_obj_set(meta, "annotations", ann);
    kite_wl_set_controller_ref(meta, "batch/v1", "CronJob", cj);
    kite_obj_set(job, "metadata", meta);
    json_object *spec = kite_wl_copy(kite_obj_get(tmpl, "spec"));
    kite_obj_set(job, "spec", spec ? spec : json_object_new_object());
    return job;
}

static void delete_job(struct kite_ctl_acts *acts, const char *key, json_object *job) {
    _cleanup_free_ char *path = kite_asprintf("/apis/batch/v1/namespaces/%s/jobs/%s?propagationPolicy=Background",
                                              kite_meta_str(job, "namespace"), kite_meta_str(job, "name"));
    kite_ctl_acts_add(acts, ACT_DELETE, key, "DELETE", path, NULL, NULL);
}

static int cmp_created(const void *a, const void *b) {
    int64_t x = time_of(*(json_object *const *)a, "metadata", "creationTimestamp");
    int64_t y = time_of(*(json_object *const *)b, "metadata", "creationTimestamp");
    return x < y ? -1 : x > y;
}

/* deletes the oldest finished Jobs of one kind past limit */
static void trim(struct kite_ctl_acts *acts, const char *key, json_object **jobs, size_t n, int64_t limit) {
    if ((int64_t)n <= limit) return;
    qsort(jobs, n, sizeof *jobs, cmp_created);
    for (size_t i = 0; i < n - (size_t)limit; i++) delete_job(acts, key, jobs[i]);
}

static json_object *job_ref(json_object *job) {
    json_object *r = json_object_new_object();
    kite_obj_set(r, "kind", json_object_new_string("Job"));
    kite_obj_set(r, "namespace", json_object_new_string(kite_meta_str(job, "namespace")));
    kite_obj_set(r, "name", json_object_new_string(kite_meta_str(job, "name")));
    kite_obj_set(r, "uid", json_object_new_string(kite_meta_str(job, "uid")));
    kite_obj_set(r, "apiVersion", json_object_new_string("batch/v1"));
    kite_obj_set(r, "resourceVersion", json_object_new_string(kite_meta_str(job, "resourceVersion")));
    return r;
}

/* Plans one CronJob's pass; *next_ns: when its next schedule time comes. */
static void sync(struct kite_cronjobs *c, const char *key, struct kite_ctl_acts *acts, int64_t *next_ns) {
    json_object *cj = kite_wl_cache_get(&c->cjs, key);
    if (!cj || kite_wl_deleting(cj)) return;
    const char *ns = kite_meta_str(cj, "namespace"), *name = kite_meta_str(cj, "name"), *uid = kite_meta_str(cj, "uid");
    json_object *spec = kite_obj_get(cj, "spec");
    int64_t now_ns = kite_now_wall(c->o.clock);
    time_t now = (time_t)(now_ns / KITE_NS_PER_SEC);

    /* its Jobs: active, succeeded, failed */
    size_t n = 0, cap = 8, ns_ok = 0, ns_fail = 0;
    json_object **active = kite_calloc(cap, sizeof *active), **ok = kite_calloc(cap, sizeof *ok),
                **bad = kite_calloc(cap, sizeof *bad);
    int64_t last_success = time_of(cj, "status", "lastSuccessfulTime");
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&c->jobs.m, &i, &k, &v);) {
        json_object *job = v, *ref = kite_wl_controller_ref(job);
        if (!kite_streq(kite_meta_str(job, "namespace"), ns) || !ref || !kite_streq(kite_obj_str(ref, "uid"), uid)) continue;
        const char *f = finished(job);
        if (n == cap || ns_ok == cap || ns_fail == cap) {
            cap *= 2;
            active = kite_realloc(active, cap * sizeof *active);
            ok = kite_realloc(ok, cap * sizeof *ok);
            bad = kite_realloc(bad, cap * sizeof *bad);
        }
        if (!f) {
            if (!kite_wl_deleting(job)) active[n++] = job;
        } else if (kite_streq(f, "Complete")) {
            if (!kite_wl_deleting(job)) ok[ns_ok++] = job;
            int64_t done = time_of(job, "status", "completionTime");
            if (done > last_success) last_success = done;
        } else if (!kite_wl_deleting(job)) {
            bad[ns_fail++] = job;
        }
    }
    json_object *sl = kite_obj_get(spec, "successfulJobsHistoryLimit"), *fl = kite_obj_get(spec, "failedJobsHistoryLimit");
    if (sl) trim(acts, key, ok, ns_ok, json_object_get_int64(sl));
    if (fl) trim(acts, key, bad, ns_fail, json_object_get_int64(fl));

    int64_t last_sched_ns = time_of(cj, "status", "lastScheduleTime");
    struct kite_cron cron;
    struct kite_tz *tz = NULL;
    const char *tz_name = kite_obj_str(spec, "timeZone");
    bool suspended = json_object_get_boolean(kite_obj_get(spec, "suspend"));
    int64_t new_last = last_sched_ns;
    if (kite_cron_parse(kite_obj_str(spec, "schedule"), &cron, NULL) == 0 &&
        (!tz_name || kite_tz_load(tz_name, &tz) == 0)) {
        time_t earliest = (time_t)((last_sched_ns ? last_sched_ns : time_of(cj, "metadata", "creationTimestamp")) / KITE_NS_PER_SEC);
        json_object *dl = kite_obj_get(spec, "startingDeadlineSeconds");
        if (dl && earliest < now - (time_t)json_object_get_int64(dl)) earliest = now - (time_t)json_object_get_int64(dl);
        /* the latest schedule time in (earliest, now] */
        time_t t = earliest, latest = -1;
        for (int i = 0; i < KITE_CJ_MISSED_MAX * 10; i++) {
            time_t nx = kite_cron_next(&cron, tz, t);
            if (nx < 0 || nx > now) break;
            latest = t = nx;
        }
        if (latest >= 0 && !suspended) {
            const char *policy = kite_obj_str(spec, "concurrencyPolicy");
            if (kite_streq(policy, "Forbid") && n > 0) {
                /* skipped: looked at again when the active Job finishes */
                latest = -1;
            } else {
                if (kite_streq(policy, "Replace"))
                    for (size_t i = 0; i < n; i++) delete_job(acts, key, active[i]);
                _cleanup_free_ char *jobs_path = kite_asprintf("/apis/batch/v1/namespaces/%s/jobs", ns);
                kite_ctl_acts_add(acts, ACT_CREATE, key, "POST", jobs_path, NULL, new_job(cj, latest));
                new_last = (int64_t)latest * KITE_NS_PER_SEC;
            }
        }
        time_t nx = kite_cron_next(&cron, tz, now);
        if (nx >= 0) kite_wl_min(next_ns, (int64_t)(nx - now) * KITE_NS_PER_SEC + (KITE_NS_PER_SEC - now_ns % KITE_NS_PER_SEC));
    }
    kite_tz_free(tz);

    /* status: the active Jobs (a Job made in this pass joins on the next), the times */
    json_object *refs = json_object_new_array();
    for (size_t i = 0; i < n; i++) json_object_array_add(refs, job_ref(active[i]));
    json_object *st = kite_obj_get(cj, "status"), *old_refs = kite_obj_get(st, "active");
    bool same_refs = (!old_refs && n == 0) || (old_refs && json_object_array_length(old_refs) == n);
    for (size_t i = 0; same_refs && i < n; i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found |= kite_streq(kite_obj_str(json_object_array_get_idx(old_refs, j), "uid"), kite_meta_str(active[i], "uid"));
        same_refs = found;
    }
    if (!same_refs || new_last != last_sched_ns || last_success != time_of(cj, "status", "lastSuccessfulTime")) {
        json_object *patch = json_object_new_object(), *s = json_object_new_object();
        kite_obj_set(s, "active", n ? refs : NULL);
        if (!n) json_object_put(refs);
        char ts[21];
        if (new_last) {
            kite_time_format(new_last, ts);
            kite_obj_set(s, "lastScheduleTime", json_object_new_string(ts));
        }
        if (last_success) {
            kite_time_format(last_success, ts);
            kite_obj_set(s, "lastSuccessfulTime", json_object_new_string(ts));
        }
        kite_obj_set(patch, "status", s);
        _cleanup_free_ char *path = kite_asprintf("/apis/batch/v1/namespaces/%s/cronjobs/%s/status", ns, name);
        kite_ctl_acts_add(acts, ACT_STATUS, key, "PATCH", path, "application/merge-patch+json", patch);
    } else {
        json_object_put(refs);
    }
    free(active);
    free(ok);
    free(bad);
}

static void plan(void *ud, const char *key, struct kite_ctl_acts *acts, struct kite_ctl_acts *events, int64_t *again_ns) {
    sync(ud, key, acts, again_ns);
}

static bool heard(void *ud, const char *key, const struct kite_ctl_act *a, int e, json_object *answer,
                  struct kite_ctl_acts *events) {
    struct kite_cronjobs *c = ud;
    const char *slash = strchr(a->key, '/');
    _cleanup_free_ char *ns = kite_strndup(a->key, slash ? (size_t)(slash - a->key) : 0);
    const char *cj = slash ? slash + 1 : a->key;
    pthread_mutex_lock(&c->lock);
    json_object *obj = kite_wl_cache_get(&c->cjs, a->key);
    _cleanup_free_ char *uid = obj ? kite_strdup(kite_meta_str(obj, "uid")) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (a->kind == ACT_CREATE && e == 0) {
        _cleanup_free_ char *msg = kite_asprintf("Created job %s", kite_meta_str(answer, "name"));
        kite_ctl_event(events, c->o.clock, COMPONENT, "CronJob", ns, cj, uid, "Normal", "SuccessfulCreate", msg);
    } else if (a->kind == ACT_CREATE && e != -EEXIST) {
        _cleanup_free_ char *msg = kite_asprintf("Error creating job: %s", strerror(-e));
        kite_ctl_event(events, c->o.clock, COMPONENT, "CronJob", ns, cj, uid, "Warning", "FailedCreate", msg);
    } else if (a->kind == ACT_DELETE && e == 0) {
        const char *job = strrchr(a->path, '/') + 1;
        _cleanup_free_ char *jn = kite_strndup(job, strcspn(job, "?"));
        _cleanup_free_ char *msg = kite_asprintf("Deleted job %s", jn);
        kite_ctl_event(events, c->o.clock, COMPONENT, "CronJob", ns, cj, uid, "Normal", "SuccessfulDelete", msg);
    }
    /* a Job that exists already was made for this schedule time; one gone is gone */
    if (e < 0 && e != -ENOENT && e != -EEXIST) {
        log_debug(LOG, "%s %s: %s", a->method, a->path, strerror(-e));
        return true;
    }
    return false;
}

static int64_t step(void *ud) { return kite_ctl_keyed_step(&((struct kite_cronjobs *)ud)->k); }
static bool pending(void *ud) { return kite_ctl_keyed_pending(&((struct kite_cronjobs *)ud)->k); }

static void free_core(void *ud) {
    struct kite_cronjobs *c = ud;
    kite_wl_cache_release(&c->jobs);
    kite_wl_cache_release(&c->cjs);
    kite_wq_release(&c->q);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int kite_cjctl_run(struct kite_ctl_group *g) {
    struct kite_cronjobs *c = kite_calloc(1, sizeof *c);
    c->o = (struct kite_cjctl_options){.client = kite_ctl_group_client(g), .clock = kite_ctl_group_clock(g)};
    if (!c->o.clock) c->o.clock = kite_clock_real();
    c->q.backoff_max_ns = KITE_CJ_RETRY_MAX_NS;
    pthread_mutex_init(&c->lock, NULL);
    c->k = (struct kite_ctl_keyed){.lock = &c->lock, .wq = &c->q, .clock = c->o.clock, .client = c->o.client, .ud = c,
                                   .plan = plan, .heard = heard};
    static const struct kite_ctl_feed feeds[] = {
        {.path = "/apis/batch/v1/cronjobs", .upsert = cj_add, .del = cj_del},
        {.path = "/apis/batch/v1/jobs", .upsert = job_add, .del = job_del},
    };
    struct kite_ctl_spec spec = {.name = "cronjob", .step = step, .pending = pending, .free = free_core,
                                 .feeds = feeds, .n_feeds = KITE_ARRAY_SIZE(feeds)};
    return kite_ctl_run(g, &spec, c);
}
