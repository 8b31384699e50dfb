/* kite scheduler: the scheduler as its own process, an API client of any apiserver (kite up
 * runs the same in-process). With --leader-elect (the default) it schedules only while this
 * process holds the Lease kube-system/kube-scheduler, as kube-scheduler does. */
#include "base/log.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "controllers/framework.h"
#include "controllers/leader.h"
#include "controllers/scheduler.h"

#include <stdio.h>
#include <unistd.h>

#define LOG "scheduler"
#define LEASE_NAME "kube-scheduler"

static void lead(void *ud) {
    struct kite_scheduler_proc *p = ud;
    struct kite_sched_options o = {0};
    p->group = kite_ctl_group_new(p->el.client, NULL);
    int r = kite_sched_run(p->group, &o);
    if (r == 0) r = kite_ctl_group_start(p->group);
    if (r < 0) log_error(LOG, "cannot start the scheduler: %s", strerror(-r));
    else log_info(LOG, "scheduling");
}

static void unlead(void *ud) {
    struct kite_scheduler_proc *p = ud;
    kite_ctl_group_free(TAKE_PTR(p->group));
    log_info(LOG, "scheduling stopped");
}

int scheduler_start(const struct scheduler_args *a, struct kite_scheduler_proc *ret, char **ret_error) {
    ret->args = *a;
    struct elected_options eo = {
        .kubeconfig = a->kubeconfig, .user_agent = "kite-scheduler", .lease_name = LEASE_NAME, .log = LOG,
        .leader_elect = a->leader_elect, .lease_duration_ns = a->le_duration_ns, .renew_deadline_ns = a->le_renew_ns,
        .retry_period_ns = a->le_retry_ns, .started = lead, .stopped = unlead, .ud = ret,
    };
    return elected_start(&ret->el, &eo, ret_error);
}

void scheduler_stop(struct kite_scheduler_proc *p) { elected_stop(&p->el, unlead, p); }

int cmd_scheduler(int argc, char **argv) {
    struct scheduler_args a = {.leader_elect = true};
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE", "kubeconfig with the API server address and credentials", NULL, &a.kubeconfig,
                 .required = true),
        LEADER_ELECT_FLAGS("schedule only while holding the Lease kube-system/kube-scheduler", &a.leader_elect,
                           &a.le_duration_ns, &a.le_renew_ns, &a.le_retry_ns),
        FLAG_END};
    int r = flags_parse("scheduler",
                        "Runs kite's scheduler against an API server: places pods for the default-scheduler on nodes\n"
                        "and binds them.",
                        flags, argc, argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    struct elected_options eo = {.leader_elect = a.leader_elect, .lease_duration_ns = a.le_duration_ns,
                                 .renew_deadline_ns = a.le_renew_ns, .retry_period_ns = a.le_retry_ns};
    if (elected_check("scheduler", &eo) < 0) return 2;
    struct kite_scheduler_proc p = {0};
    _cleanup_free_ char *err = NULL;
    if ((r = scheduler_start(&a, &p, &err)) < 0) {
        log_error(LOG, "cannot start: %s", err ? err : strerror(-r));
        return 1;
    }
    log_info(LOG, "running against %s", a.kubeconfig);
    kite_wait_for_signal();
    log_info(LOG, "shutting down");
    scheduler_stop(&p);
    return 0;
}
