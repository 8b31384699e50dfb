/* The CronJob controller (k8s.io/kubernetes pkg/controller/cronjob, cronjob_controllerv2): for
 * each CronJob it finds the latest schedule time (api/cron.h, in spec.timeZone or the
 * process's zone) at or before now and after status.lastScheduleTime (or the CronJob's
 * creation), and makes a Job NAME-<minutes since the epoch> from spec.jobTemplate for it,
 * unless suspended, past startingDeadlineSeconds, or another Job of it is active under
 * concurrencyPolicy Forbid (Replace deletes the active ones first). Finished Jobs beyond
 * successfulJobsHistoryLimit / failedJobsHistoryLimit are deleted oldest first. status.active,
 * lastScheduleTime and lastSuccessfulTime follow its Jobs. It wakes at the next schedule time
 * (no polling). Runs on informers of its own for CronJobs and Jobs and a runner (loop.h). */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_CJ_RETRY_MAX_NS (10 * KITE_NS_PER_SEC) /* longest back-off of a failed pass */
#define KITE_CJ_MISSED_MAX 100 /* schedule times looked back through (upstream warns past 100) */

struct kite_cjctl_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_cronjobs;
int kite_cronjobs_start(const struct kite_cjctl_options *o, struct kite_cronjobs **ret);
/* Stops the runner and the informers. NULL is a no-op. */
void kite_cronjobs_stop(struct kite_cronjobs *c);
