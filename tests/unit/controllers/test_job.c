/* The Job controller's core on a fake clock against the fake API: pods made up to parallelism,
 * completions counted through uncountedTerminatedPods and the tracking finalizer, the
 * back-off between failures, backoffLimit and activeDeadlineSeconds, and the conditions'
 * order (SuccessCriteriaMet / FailureTarget before Complete / Failed). */
#include "controllers/workloads/job.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>
#include <stdio.h>

#define S KITE_NS_PER_SEC
#define JOB "/apis/batch/v1/namespaces/default/jobs/j"
#define PODS "/api/v1/namespaces/default/pods"

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_jobctl *c;
};

static void env_init(struct env *e, const char *spec) {
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&e->clock, INT64_C(1893553445) * S);
    fakeapi_init(&e->api);
    struct kite_jobctl_options o = {.client = e->api.client, .clock = &e->clock.clock};
    e->c = kite_jobctl_new(&o);
    json_object *job = fakeapi_json(
        "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"j\",\"namespace\":\"default\",\"uid\":\"ju\"},"
        "\"spec\":{%s\"template\":{\"metadata\":{\"labels\":{\"batch.kubernetes.io/controller-uid\":\"ju\"}},"
        "\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}}}",
        spec);
    fakeapi_put(&e->api, JOB, job);
    kite_jobctl_jobs_synced(e->c);
}

static void env_release(struct env *e) {
    kite_jobctl_free(e->c);
    fakeapi_release(&e->api);
}

/* Feeds the controller what the fake API holds (as its informers would) and steps it until
 * it has nothing left to do now. */
static void settle(struct env *e) {
    for (int round = 0; round < 20; round++) {
        size_t before = e->api.nlog;
        kite_jobctl_job_upsert(e->c, fakeapi_get(&e->api, JOB));
        const char *k;
        void *v;
        for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);)
            if (strncmp(k, PODS "/", sizeof PODS) == 0) kite_jobctl_pod_upsert(e->c, v);
        kite_jobctl_step(e->c);
        if (e->api.nlog == before) return;
    }
}

static size_t pods(struct env *e, const char *phase) {
    size_t n = 0;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);) {
        if (strncmp(k, PODS "/", sizeof PODS) != 0) continue;
        const char *p = kite_obj_str(kite_obj_get(v, "status"), "phase");
        if (!phase ? !p || (strcmp(p, "Succeeded") && strcmp(p, "Failed")) : p && strcmp(p, phase) == 0) n++;
    }
    return n;
}

/* Ends the first running pod with the phase (and a finish time of now). */
static void finish_one(struct env *e, const char *phase) {
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);) {
        if (strncmp(k, PODS "/", sizeof PODS) != 0 || kite_obj_get(v, "status")) continue;
        char ts[21];
        kite_time_format(kite_now_wall(&e->clock.clock), ts);
        kite_obj_set(v, "status",
                     fakeapi_json("{\"phase\":\"%s\",\"containerStatuses\":[{\"name\":\"c\",\"state\":{\"terminated\":"
                                  "{\"exitCode\":%d,\"finishedAt\":\"%s\"}}}]}",
                                  phase, strcmp(phase, "Failed") == 0 ? 1 : 0, ts));
        return;
    }
    cr_assert_fail("no running pod to finish");
}

static int64_t status_int(struct env *e, const char *k) {
    json_object *v = kite_obj_get(kite_obj_get(fakeapi_get(&e->api, JOB), "status"), k);
    return v ? json_object_get_int64(v) : -1;
}

/* The condition types of the Job's status in order, "A,B". */
static void cond_types(struct env *e, char *out, size_t n) {
    json_object *conds = kite_obj_get(kite_obj_get(fakeapi_get(&e->api, JOB), "status"), "conditions");
    out[0] = 0;
    for (size_t i = 0; conds && i < json_object_array_length(conds); i++) {
        json_object *cd = json_object_array_get_idx(conds, i);
        snprintf(out + strlen(out), n - strlen(out), "%s%s/%s", i ? "," : "", kite_obj_str(cd, "type"),
                 kite_obj_str(cd, "reason"));
    }
}

static bool all_finalizers_gone(struct env *e) {
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e->api.objs, &it, &k, &v);) {
        if (strncmp(k, PODS "/", sizeof PODS) != 0) continue;
        json_object *f = kite_obj_get(kite_obj_meta(v), "finalizers");
        if (f && json_object_array_length(f)) return false;
    }
    return true;
}

Test(job, backoff_schedule) {
    cr_assert_eq(kite_job_backoff_ns(0), 0);
    cr_assert_eq(kite_job_backoff_ns(1), 10 * S);
    cr_assert_eq(kite_job_backoff_ns(2), 20 * S);
    cr_assert_eq(kite_job_backoff_ns(3), 40 * S);
    cr_assert_eq(kite_job_backoff_ns(6), 320 * S);
    cr_assert_eq(kite_job_backoff_ns(7), 360 * S); /* capped */
    cr_assert_eq(kite_job_backoff_ns(60), 360 * S);
}

Test(job, completions_with_parallelism) {
    struct env e;
    env_init(&e, "\"completions\":3,\"parallelism\":2,\"backoffLimit\":6,");
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 2, "parallelism 2: two pods");
    cr_assert_eq(status_int(&e, "active"), 2);
    cr_assert_eq(status_int(&e, "succeeded"), 0);
    cr_assert(kite_obj_get(kite_obj_get(fakeapi_get(&e.api, JOB), "status"), "startTime"));
    json_object *pod = NULL;
    const char *k;
    void *v;
    for (size_t it = 0; kite_map_next(&e.api.objs, &it, &k, &v);)
        if (strncmp(k, PODS "/", sizeof PODS) == 0) pod = v;
    cr_assert_str_eq(kite_meta_str(pod, "generateName"), "j-");
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(kite_obj_get(kite_obj_meta(pod), "finalizers"), 0)),
                     KITE_JOB_TRACKING_FINALIZER);
    cr_assert_str_eq(kite_obj_str(json_object_array_get_idx(kite_obj_get(kite_obj_meta(pod), "ownerReferences"), 0), "uid"),
                     "ju");

    finish_one(&e, "Succeeded");
    settle(&e);
    cr_assert_eq(status_int(&e, "succeeded"), 1);
    cr_assert_eq(pods(&e, NULL), 2, "one more for the third completion");
    cr_assert(all_finalizers_gone(&e) == false); /* the running ones keep theirs */
    finish_one(&e, "Succeeded");
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 1, "two done, one running: no fourth");
    finish_one(&e, "Succeeded");
    settle(&e);
    cr_assert_eq(status_int(&e, "succeeded"), 3);
    cr_assert_eq(status_int(&e, "active"), 0);
    char conds[256];
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "SuccessCriteriaMet/CompletionsReached,Complete/CompletionsReached");
    cr_assert(kite_obj_get(kite_obj_get(fakeapi_get(&e.api, JOB), "status"), "completionTime"));
    cr_assert(all_finalizers_gone(&e));
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 3, "exactly three pods made");
    cr_assert_eq(fakeapi_events(&e.api, "Completed", "j"), 1);
    env_release(&e);
}

Test(job, failures_back_off_then_backoff_limit) {
    struct env e;
    env_init(&e, "\"backoffLimit\":2,\"completions\":1,\"parallelism\":1,");
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 1);
    finish_one(&e, "Failed");
    settle(&e);
    cr_assert_eq(status_int(&e, "failed"), 1, "the failure counted once");
    cr_assert_eq(pods(&e, NULL), 0, "no replacement during the 10 s back-off");
    kite_fake_clock_advance(&e.clock, 9 * S);
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 0);
    kite_fake_clock_advance(&e.clock, 1 * S);
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 1, "replaced after 10 s");
    finish_one(&e, "Failed");
    settle(&e);
    cr_assert_eq(status_int(&e, "failed"), 2);
    kite_fake_clock_advance(&e.clock, 19 * S);
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 0, "the second back-off is 20 s");
    kite_fake_clock_advance(&e.clock, 1 * S);
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 1);
    finish_one(&e, "Failed"); /* the third failure: past backoffLimit 2 */
    settle(&e);
    cr_assert_eq(status_int(&e, "failed"), 3);
    char conds[256];
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "FailureTarget/BackoffLimitExceeded,Failed/BackoffLimitExceeded");
    cr_assert_null(kite_obj_get(kite_obj_get(fakeapi_get(&e.api, JOB), "status"), "completionTime"));
    kite_fake_clock_advance(&e.clock, 3600 * S);
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 0, "a failed Job makes no more pods");
    cr_assert_eq(fakeapi_count(&e.api, "POST", PODS), 3);
    cr_assert(all_finalizers_gone(&e));
    cr_assert_eq(fakeapi_events(&e.api, "BackoffLimitExceeded", "j"), 1);
    env_release(&e);
}

Test(job, success_resets_backoff) {
    struct env e;
    env_init(&e, "\"completions\":2,\"parallelism\":1,\"backoffLimit\":6,");
    settle(&e);
    finish_one(&e, "Failed");
    settle(&e);
    kite_fake_clock_advance(&e.clock, 10 * S);
    settle(&e);
    finish_one(&e, "Succeeded");
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 1, "after a success the next pod comes at once");
    env_release(&e);
}

Test(job, active_deadline) {
    struct env e;
    env_init(&e, "\"activeDeadlineSeconds\":30,\"parallelism\":2,\"completions\":4,");
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 2);
    kite_fake_clock_advance(&e.clock, 29 * S);
    settle(&e);
    char conds[256];
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "");
    kite_fake_clock_advance(&e.clock, 1 * S);
    settle(&e);
    cr_assert_eq(fakeapi_count(&e.api, "DELETE", PODS), 2, "its running pods are deleted");
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "FailureTarget/DeadlineExceeded,Failed/DeadlineExceeded");
    env_release(&e);
}

Test(job, on_failure_restarts_count) {
    struct env e;
    env_init(&e, "\"backoffLimit\":2,\"completions\":1,\"parallelism\":1,");
    json_object *job = fakeapi_get(&e.api, JOB);
    kite_obj_set(kite_obj_get(kite_obj_get(kite_obj_get(job, "spec"), "template"), "spec"), "restartPolicy",
                 json_object_new_string("OnFailure"));
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 1);
    const char *k;
    void *v;
    json_object *pod = NULL;
    for (size_t it = 0; kite_map_next(&e.api.objs, &it, &k, &v);)
        if (strncmp(k, PODS "/", sizeof PODS) == 0) pod = v;
    kite_obj_set(pod, "status", fakeapi_json("{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"c\",\"restartCount\":1}]}"));
    settle(&e);
    char conds[256];
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "", "one restart of two allowed");
    kite_obj_set(pod, "status", fakeapi_json("{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"c\",\"restartCount\":2}]}"));
    settle(&e);
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "FailureTarget/BackoffLimitExceeded,Failed/BackoffLimitExceeded");
    env_release(&e);
}

Test(job, suspend_and_resume) {
    struct env e;
    env_init(&e, "\"completions\":2,\"parallelism\":2,\"backoffLimit\":6,\"suspend\":true,");
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 0, "a suspended Job runs nothing");
    char conds[256];
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "Suspended/JobSuspended");
    cr_assert_null(kite_obj_get(kite_obj_get(fakeapi_get(&e.api, JOB), "status"), "startTime"));
    kite_obj_set(kite_obj_get(fakeapi_get(&e.api, JOB), "spec"), "suspend", json_object_new_boolean(false));
    settle(&e);
    cr_assert_eq(pods(&e, NULL), 2);
    cond_types(&e, conds, sizeof conds);
    cr_assert_str_eq(conds, "Suspended/JobResumed");
    cr_assert(kite_obj_get(kite_obj_get(fakeapi_get(&e.api, JOB), "status"), "startTime"));
    env_release(&e);
}
