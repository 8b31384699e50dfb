/* The CronJob controller (k8s.io/kubernetes pkg/controller/cronjob, cronjob_controllerv2): for
 * each CronJob it finds the latest schedule time (api/cron.h, in spec.timeZone or the
 * process's zone) at or before now and after status.lastScheduleTime (or the CronJob's
 * creation), and makes a Job NAME-<minutes since the epoch> from spec.jobTemplate for it,
 * unless suspended, past startingDeadlineSeconds, or another Job of it is active under
 * concurrencyPolicy Forbid (Replace deletes the active ones first). Finished Jobs beyond
 * successfulJobsHistoryLimit / failedJobsHistoryLimit are deleted oldest first. status.active,
 * lastScheduleTime and lastSuccessfulTime follow its Jobs. It wakes at the next schedule time
 * (no polling). Runs on the framework (framework.h): CronJobs and Jobs feed it. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_CJ_RETRY_MAX_NS (10 * KITE_NS_PER_SEC) /* longest back-off of a failed pass */
#define KITE_CJ_MISSED_MAX 100 /* schedule times looked back through (upstream warns past 100) */

struct kite_cjctl_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_ctl_group;
/* Adds the controller to g (framework.h): 0, or -errno. */
int kite_cjctl_run(struct kite_ctl_group *g);
