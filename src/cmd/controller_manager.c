/* kite controller-manager: the controllers as their own process, an API client of any
 * apiserver (kite up runs the same controllers in-process). */
#include "base/log.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "controllers/controllers.h"

#include <stdio.h>

int controllers_start(const char *kubeconfig, struct kite_controllers *ret, char **ret_error) {
    struct kite_kubeconfig *kc = NULL;
    int r = kite_kubeconfig_load(kubeconfig, NULL, &kc, ret_error);
    if (r < 0) return r;
    struct kite_client_options co = {.user_agent = "kite-controller-manager"};
    r = kite_client_new(kc, &co, &ret->client);
    kite_kubeconfig_free(kc);
    if (r < 0) {
        *ret_error = kite_asprintf("%s: cannot use its server or credentials: %s", kubeconfig, strerror(-r));
        return r;
    }
    struct kite_nsctl_options no = {.client = ret->client};
    if ((r = kite_nsctl_start(&no, &ret->nsctl)) < 0) {
        *ret_error = kite_asprintf("cannot start the namespace controller: %s", strerror(-r));
        kite_client_free(TAKE_PTR(ret->client));
        return r;
    }
    struct kite_aggregator_options ao = {.client = ret->client};
    if ((r = kite_aggregator_start(&ao, &ret->aggregator)) < 0) {
        *ret_error = kite_asprintf("cannot start the clusterrole aggregation controller: %s", strerror(-r));
        kite_nsctl_stop(TAKE_PTR(ret->nsctl));
        kite_client_free(TAKE_PTR(ret->client));
    }
    return r;
}

int controllers_start_binder(struct kite_controllers *c, const char *node) {
    if (!c->client) return -ENOTCONN;
    struct kite_binder_options bo = {.client = c->client, .node_name = node};
    return kite_binder_start(&bo, &c->binder);
}

void controllers_stop(struct kite_controllers *c) {
    kite_binder_stop(TAKE_PTR(c->binder));
    kite_nsctl_stop(TAKE_PTR(c->nsctl));
    kite_aggregator_stop(TAKE_PTR(c->aggregator));
    kite_client_free(TAKE_PTR(c->client));
}

int cmd_controller_manager(int argc, char **argv) {
    const char *kubeconfig = NULL;
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE", "kubeconfig with the API server address and credentials", NULL, &kubeconfig,
                 .required = true),
        FLAG_END};
    int r = flags_parse("controller-manager", "Runs kite's controllers (namespace, clusterrole aggregation) against an API server.", flags, argc,
                        argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    struct kite_controllers c = {0};
    _cleanup_free_ char *err = NULL;
    if ((r = controllers_start(kubeconfig, &c, &err)) < 0) {
        log_error("controller-manager", "cannot start: %s", err ? err : strerror(-r));
        return 1;
    }
    log_info("controller-manager", "running against %s", kubeconfig);
    kite_wait_for_signal();
    log_info("controller-manager", "shutting down");
    controllers_stop(&c);
    return 0;
}
