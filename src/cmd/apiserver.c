/* kite apiserver, and the pieces kite up shares with it. */
#include "api/quantity.h"
#include "apiserver/apiserver.h"
#include "base/clock.h"
#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

#include <stdio.h>
#include <stdlib.h>

int cmd_apiserver(int argc, char **argv) {
    const char *data_dir = NULL, *listen = "127.0.0.1:6443", *store = NULL, *tokens = NULL, *threads = NULL;
    const char *event_ttl = NULL;
    const struct flag flags[] = {
        FLAG_STR("data-dir", "directory for the store, certificates and admin.kubeconfig (required)", &data_dir),
        FLAG_STR("listen", "address to serve HTTPS on (default 127.0.0.1:6443)", &listen),
        FLAG_STR("store", "store URL (default sqlite:DATA_DIR/kite.db)", &store),
        FLAG_STR("token-auth-file", "static bearer tokens: CSV token,user,uid,\"group1,group2\"", &tokens),
        FLAG_STR("threads", "HTTP worker threads (default: number of CPUs)", &threads),
        FLAG_STR("event-ttl", "how long events are kept after they last happened (default 1h)", &event_ttl),
        FLAG_END,
    };
    int r = flags_parse("apiserver", "Runs the Kubernetes-compatible API server on an embedded durable store.", flags,
                        argc, argv, NULL, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    if (!data_dir) {
        fprintf(stderr, "kite apiserver: --data-dir is required\n");
        return 2;
    }
    int64_t ttl_ns = 0;
    if (event_ttl && (kite_duration_parse(event_ttl, &ttl_ns) < 0 || ttl_ns < KITE_NS_PER_SEC)) {
        fprintf(stderr, "kite apiserver: --event-ttl: invalid duration \"%s\" (at least 1s)\n", event_ttl);
        return 2;
    }
    struct kite_apiserver_options o = {.data_dir = data_dir, .listen = listen, .store_url = store,
                                       .token_file = tokens, .threads = threads ? (unsigned)atoi(threads) : 0,
                                       .event_ttl_s = ttl_ns / KITE_NS_PER_SEC};
    struct kite_apiserver *s;
    if ((r = kite_apiserver_start(&o, &s)) < 0) {
        log_error("apiserver", "cannot start: %s", strerror(-r));
        return 1;
    }
    log_info("apiserver", "serving on %s (data dir %s)", kite_apiserver_url(s), data_dir);
    kite_wait_for_signal();
    log_info("apiserver", "shutting down");
    kite_apiserver_stop(s);
    return 0;
}
