/* kite scheduler: the scheduler as its own process, an API client of any apiserver (kite up
 * runs the same in-process). With --leader-elect (the default) it schedules only while this
 * process holds the Lease kube-system/kube-scheduler, as kube-scheduler does. */
#include "base/log.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "controllers/leader.h"
#include "controllers/scheduler.h"

#include <stdio.h>
#include <unistd.h>

#define LOG "scheduler"
#define LEASE_NS "kube-system"
#define LEASE_NAME "kube-scheduler"

static void lead(void *ud) {
    struct kite_scheduler_proc *p = ud;
    struct kite_sched_options o = {.client = p->client};
    int r = kite_schedrun_start(&o, &p->run);
    if (r < 0) log_error(LOG, "cannot start the scheduler: %s", strerror(-r));
    else log_info(LOG, "scheduling");
}

static void unlead(void *ud) {
    struct kite_scheduler_proc *p = ud;
    kite_schedrun_stop(TAKE_PTR(p->run));
    log_info(LOG, "scheduling stopped");
}

int scheduler_start(const struct scheduler_args *a, struct kite_scheduler_proc *ret, char **ret_error) {
    struct kite_kubeconfig *kc = NULL;
    ret->args = *a;
    int r = kite_kubeconfig_load(a->kubeconfig, NULL, &kc, ret_error);
    if (r < 0) return r;
    struct kite_client_options co = {.user_agent = "kite-scheduler"};
    r = kite_client_new(kc, &co, &ret->client);
    /* the election renews on its own client, which the scheduler's write gate does not hold back */
    struct kite_client_options leo = {.user_agent = "kite-scheduler/leader-election"};
    if (r == 0 && a->leader_elect && (r = kite_client_new(kc, &leo, &ret->le_client)) < 0)
        kite_client_free(TAKE_PTR(ret->client));
    kite_kubeconfig_free(kc);
    if (r < 0) {
        *ret_error = kite_asprintf("%s: cannot use its server or credentials: %s", a->kubeconfig, strerror(-r));
        return r;
    }
    if (!a->leader_elect) {
        lead(ret);
        return 0;
    }
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    uint64_t salt = (uint64_t)kite_now_wall(kite_clock_real()) ^ ((uint64_t)getpid() << 32);
    _cleanup_free_ char *id = kite_asprintf("%s_%016llx", host, (unsigned long long)salt);
    struct kite_leader_options lo = {
        .client = ret->le_client, .gated = ret->client, .ns = LEASE_NS, .name = LEASE_NAME, .identity = id,
        .lease_duration_ns = a->le_duration_ns, .renew_deadline_ns = a->le_renew_ns, .retry_period_ns = a->le_retry_ns,
        .started = lead, .stopped = unlead, .ud = ret,
    };
    if ((r = kite_leader_start(&lo, &ret->leader)) < 0) {
        *ret_error = kite_asprintf("cannot start leader election: %s", strerror(-r));
        kite_client_free(TAKE_PTR(ret->client));
        kite_client_free(TAKE_PTR(ret->le_client));
        return r;
    }
    log_info(LOG, "leader election as %s on lease %s/%s", id, LEASE_NS, LEASE_NAME);
    return 0;
}

void scheduler_stop(struct kite_scheduler_proc *p) {
    if (p->leader) kite_leader_stop(TAKE_PTR(p->leader)); /* calls unlead if leading */
    else unlead(p);
    kite_client_free(TAKE_PTR(p->client));
    kite_client_free(TAKE_PTR(p->le_client));
}

int cmd_scheduler(int argc, char **argv) {
    struct scheduler_args a = {.leader_elect = true};
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE", "kubeconfig with the API server address and credentials", NULL, &a.kubeconfig,
                 .required = true),
        FLAG_BOOLEAN("leader-elect", "schedule only while holding the Lease kube-system/kube-scheduler", &a.leader_elect,
                     .def_note = "true"),
        FLAG_DURATION("leader-elect-lease-duration", "how long a candidate waits after last seeing the lease change",
                      "15s", KITE_NS_PER_SEC, &a.le_duration_ns),
        FLAG_DURATION("leader-elect-renew-deadline", "how long the leader keeps trying to renew before it stops", "10s",
                      KITE_NS_PER_MS, &a.le_renew_ns),
        FLAG_DURATION("leader-elect-retry-period", "time between attempts to acquire or renew", "2s", KITE_NS_PER_MS,
                      &a.le_retry_ns),
        FLAG_END};
    int r = flags_parse("scheduler",
                        "Runs kite's scheduler against an API server: places pods for the default-scheduler on nodes\n"
                        "and binds them.",
                        flags, argc, argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    if (a.leader_elect && (a.le_duration_ns <= a.le_renew_ns || (double)a.le_renew_ns <= KITE_LEADER_JITTER * (double)a.le_retry_ns)) {
        fprintf(stderr, "kite scheduler: --leader-elect-lease-duration must be greater than "
                        "--leader-elect-renew-deadline, and that greater than %.1f x --leader-elect-retry-period\n",
                KITE_LEADER_JITTER);
        return 2;
    }
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
