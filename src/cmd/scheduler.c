/* kite scheduler: the scheduler as its own process, an API client of any apiserver (kite up
 * runs the same in-process). With --leader-elect (the default) it schedules only while this
 * process holds the Lease kube-system/kube-scheduler, as kube-scheduler does. */
#include "base/log.h"
#include "client/factory.h"
#include "cmd/cmd.h"
#include "framework/ctlutil.h"
#include "framework/framework.h"
#include "scheduler/scheduler.h"

#include <string.h>

#define LOG "scheduler"
#define LEASE_NAME "kube-scheduler"

static void lead(void *ud) {
    struct kite_scheduler_proc *p = ud;
    struct kite_sched_options o = {0};
    p->group = kite_ctl_group_new(p->el.client, NULL);
    kite_informer_factory_set_watch_list(kite_ctl_group_informers(p->group), true);
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

static const struct elected_component COMPONENT = {
    .user_agent = "kite-scheduler", .lease_name = LEASE_NAME, .log = LOG, .connections = KITE_CTL_WORKERS + 2,
    .started = lead, .stopped = unlead};

int kite_cmd_scheduler_start(const struct scheduler_args *a, struct kite_scheduler_proc *ret, char **ret_error) {
    ret->args = *a;
    return kite_cmd_elected_start(&ret->el, &a->el, &COMPONENT, ret, ret_error);
}

void kite_cmd_scheduler_stop(struct kite_scheduler_proc *p) { kite_cmd_elected_stop(&p->el, unlead, p); }

struct cmd {
    struct scheduler_args a;
    struct kite_scheduler_proc p;
};
static int start(void *ud, char **ret_error) {
    struct cmd *c = ud;
    return kite_cmd_scheduler_start(&c->a, &c->p, ret_error);
}
static void stop(void *ud) { kite_cmd_scheduler_stop(&((struct cmd *)ud)->p); }

int cmd_scheduler(int argc, char **argv) {
    struct cmd c = {0};
    struct elected_cmd ec = {
        .cmd = "scheduler",
        .summary = "Runs kite's scheduler against an API server: places pods for the default-scheduler on nodes\n"
                   "and binds them.",
        .elect_desc = "schedule only while holding the Lease kube-system/kube-scheduler",
        .log = LOG, .args = &c.a.el, .start = start, .stop = stop, .ud = &c};
    return kite_cmd_elected_main(&ec, argc, argv);
}
