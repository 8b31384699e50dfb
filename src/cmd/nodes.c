/* kite nodes: the divergence report, every node in exactly one state with its evidence
 * (Healthy, NotReady, Unreachable, LeaseExpired, NeverReported, Cordoned, Draining,
 * StaleObject, Reregistered, OrphanMachine), as the API server computes it (GET /debug/kite/nodes). */
#include "api/registry.h"
#include "base/log.h"
#include "client/client.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

#include <stdio.h>
#include <string.h>

int cmd_nodes(int argc, char **argv) {
    const char *kubeconfig = NULL, *context = NULL, *output = "";
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE",
                 "kubeconfig with the API server address and credentials (default: as kubectl, $KUBECONFIG,\n"
                 "else ~/.kube/config)",
                 NULL, &kubeconfig),
        FLAG_STR("context", "NAME", "the kubeconfig context to use (default: its current-context)", NULL, &context),
        FLAG_STR("output", "FORMAT", "\"json\" for the report as JSON (also -o json); else a table", "", &output),
        FLAG_END};
    /* kubectl's -o */
    char **args = kite_calloc((size_t)argc + 1, sizeof *args);
    for (int i = 0; i < argc; i++) args[i] = strcmp(argv[i], "-o") == 0 ? "--output" : argv[i];
    int r = kite_cmd_flags_parse("nodes",
                        "Lists every node in exactly one state, with the evidence for it: Healthy, NotReady, Unreachable,\n"
                        "LeaseExpired, NeverReported, Cordoned, Draining, StaleObject, Reregistered or OrphanMachine.",
                        flags, argc, args, NULL, NULL);
    free(args);
    if (r != 0) return r > 0 ? 0 : 2;
    if (*output && strcmp(output, "json") != 0) {
        fprintf(stderr, "kite nodes: unknown output format \"%s\" (json, or none for a table)\n", output);
        return 2;
    }
    struct kite_kubeconfig *kc = NULL;
    _cleanup_free_ char *err = NULL;
    if ((r = kite_kubeconfig_load_default(kubeconfig, context, &kc, &err)) < 0) {
        fprintf(stderr, "kite nodes: %s\n", err ? err : strerror(-r));
        return 1;
    }
    struct kite_client *c = NULL;
    struct kite_client_options co = {.user_agent = "kite-nodes"};
    r = kite_client_new(kc, &co, &c);
    kite_kubeconfig_free(kc);
    if (r < 0) {
        fprintf(stderr, "kite nodes: %s: cannot use its server or credentials: %s\n",
                kubeconfig ? kubeconfig : "kubeconfig", strerror(-r));
        return 1;
    }
    json_object *rep = NULL;
    long status = 0;
    r = kite_client_json(c, "GET", "/debug/kite/nodes", NULL, NULL, &status, &rep);
    kite_client_free(c);
    if (r < 0) {
        fprintf(stderr, "kite nodes: GET /debug/kite/nodes: %s (HTTP %ld)\n", strerror(-r), status);
        json_object_put(rep);
        return 1;
    }
    json_object *items = kite_obj_get(rep, "items");
    size_t n = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
    if (*output) {
        printf("%s\n", json_object_to_json_string_ext(rep, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    } else {
        int w = 4;
        for (size_t i = 0; i < n; i++) {
            const char *name = kite_obj_str(json_object_array_get_idx(items, i), "name");
            if (name && (int)strlen(name) > w) w = (int)strlen(name);
        }
        printf("%-*s   %-13s   %s\n", w, "NAME", "STATE", "EVIDENCE");
        for (size_t i = 0; i < n; i++) {
            json_object *it = json_object_array_get_idx(items, i);
            printf("%-*s   %-13s   %s\n", w, kite_obj_str(it, "name"), kite_obj_str(it, "state"), kite_obj_str(it, "evidence"));
        }
    }
    json_object_put(rep);
    return 0;
}
