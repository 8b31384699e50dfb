/* A component that runs only while it holds a Lease (controller-manager, scheduler): its
 * command's start-up, its clients and its election, one wiring for both (cmd.h). */
#include "base/log.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "framework/leader.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LEASE_NS "kube-system"

int kite_cmd_elected_check(const char *cmd, const struct elected_args *a) {
    /* client-go's checks: the leader must give up before a candidate may take over */
    if (a->leader_elect && (a->le_duration_ns <= a->le_renew_ns ||
                            (double)a->le_renew_ns <= KITE_LEADER_JITTER * (double)a->le_retry_ns)) {
        fprintf(stderr, "kite %s: --leader-elect-lease-duration must be greater than "
                        "--leader-elect-renew-deadline, and that greater than %.1f x --leader-elect-retry-period\n",
                cmd, KITE_LEADER_JITTER);
        return -EINVAL;
    }
    return 0;
}

int kite_cmd_elected_start(struct elected *e, const struct elected_args *a, const struct elected_component *o, void *ud,
                  char **ret_error) {
    struct kite_kubeconfig *kc = NULL;
    int r = kite_kubeconfig_load(a->kubeconfig, NULL, &kc, ret_error);
    if (r < 0) return r;
    struct kite_client_options co = {.user_agent = o->user_agent, .max_connections = o->connections};
    r = kite_client_new(kc, &co, &e->client);
    /* the election renews on a client of its own (as client-go's), which the write gate of the
     * component's client does not hold back */
    _cleanup_free_ char *le_agent = kite_asprintf("%s/leader-election", o->user_agent);
    struct kite_client_options leo = {.user_agent = le_agent};
    if (r == 0 && a->leader_elect && (r = kite_client_new(kc, &leo, &e->le_client)) < 0)
        kite_client_free(TAKE_PTR(e->client));
    kite_kubeconfig_free(kc);
    if (r < 0) {
        *ret_error = kite_asprintf("%s: cannot use its server or credentials: %s", a->kubeconfig, strerror(-r));
        return r;
    }
    if (!a->leader_elect) {
        o->started(ud);
        return 0;
    }
    /* client-go's identity: the hostname and something unique to this process */
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    uint64_t salt = (uint64_t)kite_now_wall(kite_clock_real()) ^ ((uint64_t)getpid() << 32);
    _cleanup_free_ char *id = kite_asprintf("%s_%016llx", host, (unsigned long long)salt);
    struct kite_leader_options lo = {
        .client = e->le_client, .gated = e->client, .ns = LEASE_NS, .name = o->lease_name, .identity = id,
        .lease_duration_ns = a->le_duration_ns, .renew_deadline_ns = a->le_renew_ns,
        .retry_period_ns = a->le_retry_ns, .started = o->started, .stopped = o->stopped, .ud = ud,
    };
    if ((r = kite_leader_start(&lo, &e->leader)) < 0) {
        *ret_error = kite_asprintf("cannot start leader election: %s", strerror(-r));
        kite_client_free(TAKE_PTR(e->client));
        kite_client_free(TAKE_PTR(e->le_client));
        return r;
    }
    log_info(o->log, "leader election as %s on lease %s/%s", id, LEASE_NS, o->lease_name);
    return 0;
}

void kite_cmd_elected_stop(struct elected *e, void (*stopped)(void *ud), void *ud) {
    if (e->leader) kite_leader_stop(TAKE_PTR(e->leader)); /* calls stopped if leading, then releases */
    else stopped(ud);
    kite_client_free(TAKE_PTR(e->client));
    kite_client_free(TAKE_PTR(e->le_client));
}

#define MAX_OWN_FLAGS 32

int kite_cmd_elected_main(const struct elected_cmd *c, int argc, char **argv) {
    struct elected_args *a = c->args;
    a->leader_elect = true;
    struct flag flags[MAX_OWN_FLAGS + 6] = {
        FLAG_STR("kubeconfig", "FILE", "kubeconfig with the API server address and credentials", NULL, &a->kubeconfig,
                 .required = true),
        LEADER_ELECT_FLAGS(c->elect_desc, &a->leader_elect, &a->le_duration_ns, &a->le_renew_ns, &a->le_retry_ns),
    };
    size_t n = 5;
    for (const struct flag *f = c->own; f && f->name && n < MAX_OWN_FLAGS + 5; f++) flags[n++] = *f;
    flags[n] = (struct flag)FLAG_END;
    int r = kite_cmd_flags_parse(c->cmd, c->summary, flags, argc, argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    if (kite_cmd_elected_check(c->cmd, a) < 0) return 2;
    _cleanup_free_ char *err = NULL;
    if ((r = c->start(c->ud, &err)) < 0) {
        log_error(c->log, "cannot start: %s", err ? err : strerror(-r));
        return 1;
    }
    log_info(c->log, "running against %s", a->kubeconfig);
    kite_wait_for_signal();
    log_info(c->log, "shutting down");
    c->stop(c->ud);
    return 0;
}
