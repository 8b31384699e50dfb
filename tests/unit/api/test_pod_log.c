/* pods/log's connect hook (kube's LogLocation and the kubelet's container checks): which
 * container, which node, the agent's path, and the 400s. */
#include <criterion/criterion.h>
#include <json-c/json.h>

#include "api/registry.h"

struct q {
    const char *const *kv; /* name, value, ..., NULL */
};
static const char *query(void *ud, const char *name) {
    const struct q *q = ud;
    for (size_t i = 0; q->kv[i]; i += 2)
        if (strcmp(q->kv[i], name) == 0) return q->kv[i + 1];
    return NULL;
}

static const char *const POD =
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"nodeName\":\"n1\",\"initContainers\":[{\"name\":\"i\"}],"
    "\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]},\"status\":{\"containerStatuses\":["
    "{\"name\":\"a\",\"state\":{\"running\":{}},\"lastState\":{\"terminated\":{\"exitCode\":1}}},"
    "{\"name\":\"b\",\"state\":{\"waiting\":{\"reason\":\"ImagePullBackOff\"}}}],"
    "\"initContainerStatuses\":[{\"name\":\"i\",\"state\":{\"terminated\":{\"exitCode\":0}}}]}}";

static int run(const char *pod, const char *const *kv, char **node, char **path, char **msg) {
    const struct kite_subresource *sr = kite_resource_subresource(kite_registry_find("", "v1", "pods"), "log");
    cr_assert(sr && sr->connect);
    json_object *o = json_tokener_parse(pod);
    cr_assert_not_null(o);
    struct q q = {kv};
    *node = *path = *msg = NULL;
    int r = sr->connect(o, query, &q, node, path, msg);
    json_object_put(o);
    return r;
}

Test(pod_log, path_with_the_options) {
    char *node, *path, *msg;
    const char *kv[] = {"container", "a", "follow", "true", "tailLines", "2", "timestamps", "true",
                        "sinceTime", "2026-01-02T03:04:05+01:00", "ignored", "x", NULL};
    cr_assert_eq(run(POD, kv, &node, &path, &msg), 0, "%s", msg);
    cr_assert_str_eq(node, "n1");
    cr_assert_str_eq(path, "/containerLogs/ns/p/a?follow=true&timestamps=true&tailLines=2&sinceTime=2026-01-02T03:04:05%2B01:00");
    free(node);
    free(path);
    const char *prev[] = {"container", "a", "previous", "true", NULL};
    cr_assert_eq(run(POD, prev, &node, &path, &msg), 0, "%s", msg);
    cr_assert_str_eq(path, "/containerLogs/ns/p/a?previous=true");
    free(node);
    free(path);
    /* an init container that ended */
    const char *init[] = {"container", "i", NULL};
    cr_assert_eq(run(POD, init, &node, &path, &msg), 0, "%s", msg);
    free(node);
    free(path);
}

Test(pod_log, the_only_container_is_the_default) {
    char *node, *path, *msg;
    const char *none[] = {NULL};
    cr_assert_eq(run("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
                     "[{\"name\":\"only\"}]},\"status\":{\"containerStatuses\":[{\"name\":\"only\",\"state\":{\"terminated\":{}}}]}}",
                     none, &node, &path, &msg),
                 0);
    cr_assert_str_eq(path, "/containerLogs/ns/p/only");
    free(node);
    free(path);
}

struct bad {
    const char *const *kv;
    const char *pod;
    int code;
    const char *msg;
};

Test(pod_log, refusals) {
    static const char *const none[] = {NULL}, *const unknown[] = {"container", "x", NULL},
                             *const waiting[] = {"container", "b", NULL},
                             *const noprev[] = {"container", "b", "previous", "true", NULL},
                             *const tail[] = {"container", "a", "tailLines", "-1", NULL},
                             *const limit[] = {"container", "a", "limitBytes", "0", NULL},
                             *const both[] = {"container", "a", "sinceSeconds", "5", "sinceTime", "2026-01-02T03:04:05Z", NULL},
                             *const notint[] = {"container", "a", "tailLines", "x", NULL};
    const char *unbound = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}";
    const char *pending = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"nodeName\":\"n\",\"containers\":[{\"name\":\"c\"}]}}";
    const struct bad cases[] = {
        {none, POD, 400, "a container name must be specified for pod p, choose one of: [i a b]"},
        {unknown, POD, 400, "container x is not valid for pod p"},
        {waiting, POD, 400, "container \"b\" in pod \"p\" is waiting to start: trying and failing to pull image"},
        {noprev, POD, 400, "previous terminated container \"b\" in pod \"p\" not found"},
        {tail, POD, 400, "PodLogOptions \"\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"},
        {limit, POD, 400, "PodLogOptions \"\" is invalid: limitBytes: Invalid value: 0: must be greater than 0"},
        {both, POD, 422, "PodLogOptions \"\" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"},
        {notint, POD, 400, "strconv.ParseInt: parsing \"x\": invalid syntax"},
        {none, unbound, 400, "pod p does not have a host assigned"},
        {none, pending, 400, "container \"c\" in pod \"p\" is waiting to start: ContainerCreating"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *node, *path, *msg;
        int r = run(cases[i].pod, cases[i].kv, &node, &path, &msg);
        cr_assert_eq(r, cases[i].code, "case %zu: %d %s", i, r, msg ? msg : "");
        cr_assert_str_eq(msg, cases[i].msg, "case %zu", i);
        cr_assert_null(node);
        cr_assert_null(path);
        free(msg);
    }
}
