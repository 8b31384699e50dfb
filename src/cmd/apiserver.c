/* kite apiserver, and the pieces kite up shares with it. */
#include "api/quantity.h"
#include "apiserver/apiserver.h"
#include "base/clock.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

#include <stdio.h>
#include <stdlib.h>

int apiserver_args_options(const char *cmd, const struct apiserver_args *a, struct kite_apiserver_options *o) {
    if (!a->data_dir) {
        fprintf(stderr, "kite %s: --data-dir is required\n", cmd);
        return 2;
    }
    int64_t ttl_ns = 0;
    if (a->event_ttl && (kite_duration_parse(a->event_ttl, &ttl_ns) < 0 || ttl_ns < KITE_NS_PER_SEC)) {
        fprintf(stderr, "kite %s: --event-ttl: invalid duration \"%s\" (at least 1s)\n", cmd, a->event_ttl);
        return 2;
    }
    char *end = NULL;
    long threads = a->threads ? strtol(a->threads, &end, 10) : 0;
    if (a->threads && (end == a->threads || *end || threads < 1 || threads > 256)) {
        fprintf(stderr, "kite %s: --threads: \"%s\" is not a number from 1 to 256\n", cmd, a->threads);
        return 2;
    }
    *o = (struct kite_apiserver_options){.data_dir = a->data_dir, .listen = a->listen ? a->listen : "127.0.0.1:6443",
                                         .store_url = a->store, .token_file = a->tokens, .threads = (unsigned)threads,
                                         .event_ttl_s = ttl_ns / KITE_NS_PER_SEC};
    return 0;
}

int cmd_apiserver(int argc, char **argv) {
    struct apiserver_args args = {0};
    const struct flag flags[] = {APISERVER_FLAGS(&args), FLAG_END};
    int r = flags_parse("apiserver", "Runs the Kubernetes-compatible API server on an embedded durable store.", flags,
                        argc, argv, NULL, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    struct kite_apiserver_options o;
    if ((r = apiserver_args_options("apiserver", &args, &o)) != 0) return r;
    struct kite_apiserver *s;
    if ((r = kite_apiserver_start(&o, &s)) < 0) {
        log_error("apiserver", "cannot start: %s", strerror(-r));
        return 1;
    }
    log_info("apiserver", "serving on %s (data dir %s)", kite_apiserver_url(s), o.data_dir);
    kite_wait_for_signal();
    log_info("apiserver", "shutting down");
    kite_apiserver_stop(s);
    return 0;
}
