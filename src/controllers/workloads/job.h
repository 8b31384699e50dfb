/* The Job controller (k8s.io/kubernetes pkg/controller/job): runs a Job's pods until
 * `completions` of them succeed, at most `parallelism` at once, and fails the Job when more than
 * `backoffLimit` pods failed (BackoffLimitExceeded) or it ran past `activeDeadlineSeconds`
 * (DeadlineExceeded). A failed pod is replaced after a back-off of 10 s doubling per failure
 * since the last success, capped at KITE_JOB_BACKOFF_MAX_NS.
 *
 * Pods are counted as upstream counts them since 1.26: each carries the finalizer
 * batch.kubernetes.io/job-tracking; a pod seen finished is first written to the Job's
 * status.uncountedTerminatedPods, then its finalizer is removed, then it moves into
 * status.succeeded / status.failed — so a pod deleted at any point is counted once. A Job that
 * meets its end gets FailureTarget or SuccessCriteriaMet first (1.31+), its remaining pods are
 * deleted, and Failed or Complete (with completionTime) follows once none is left running. A
 * suspended Job runs no pod (condition Suspended, JobSuspended; JobResumed when resumed, its
 * startTime then reset).
 *
 * Like the node controllers, the core is driven by observations (the informers' objects) and
 * kite_jobctl_step, locks on every call, and makes its requests outside the lock. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_JOB_TRACKING_FINALIZER "batch.kubernetes.io/job-tracking"
#define KITE_JOB_BACKOFF_NS (10 * KITE_NS_PER_SEC)     /* DefaultJobPodFailureBackOff */
#define KITE_JOB_BACKOFF_MAX_NS (360 * KITE_NS_PER_SEC) /* the documented cap: six minutes */
#define KITE_JOB_RETRY_NS KITE_NS_PER_SEC               /* a failed request: synced again after this, */
#define KITE_JOB_RETRY_MAX_NS (10 * KITE_NS_PER_SEC)    /* doubling per failure to this */
#define KITE_JOB_EXPECT_NS (300 * KITE_NS_PER_SEC)      /* a created pod not seen after this is forgotten */

struct kite_jobctl_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_jobctl;
struct kite_jobctl *kite_jobctl_new(const struct kite_jobctl_options *o);
void kite_jobctl_free(struct kite_jobctl *c);

/* Observations (objects borrowed; copied). */
void kite_jobctl_job_upsert(struct kite_jobctl *c, json_object *job);
void kite_jobctl_job_delete(struct kite_jobctl *c, json_object *job);
void kite_jobctl_pod_upsert(struct kite_jobctl *c, json_object *pod);
void kite_jobctl_pod_delete(struct kite_jobctl *c, json_object *pod);
/* The jobs list was delivered: a pod whose Job is not known is an orphan from now on. */
void kite_jobctl_jobs_synced(struct kite_jobctl *c);
/* Syncs the Jobs due now; returns ns until the next is due (-1 when none). */
int64_t kite_jobctl_step(struct kite_jobctl *c);
bool kite_jobctl_pending(struct kite_jobctl *c);

/* The back-off before a Job's next pod after `failures` consecutive failures: 0, then 10 s,
 * 20 s, 40 s ... capped at KITE_JOB_BACKOFF_MAX_NS. */
int64_t kite_job_backoff_ns(int failures);

/* Adds the controller to g (framework.h): Jobs and pods with a controller-uid label feed it. */
struct kite_ctl_group;
int kite_jobctl_run(struct kite_ctl_group *g);
