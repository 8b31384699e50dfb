/* --controllers: which controllers kite controller-manager runs, named as
 * kube-controller-manager names them (its 1.28+ names and the older short aliases). */
#include "controllers/controllers.h"
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name, *alias;
    unsigned bit;
} CONTROLLERS[] = {
    {"namespace-controller", "namespace", KITE_CTL_NAMESPACE},
    {"node-lifecycle-controller", "nodelifecycle", KITE_CTL_NODE_LIFECYCLE},
    {"taint-eviction-controller", "taint-eviction-controller", KITE_CTL_TAINT_EVICTION},
    {"pod-garbage-collector-controller", "podgc", KITE_CTL_POD_GC},
    {"disruption-controller", "disruption", KITE_CTL_DISRUPTION},
    {"replicaset-controller", "replicaset", KITE_CTL_REPLICASET},
    {"replicationcontroller-controller", "replicationcontroller", KITE_CTL_REPLICATION},
    {"deployment-controller", "deployment", KITE_CTL_DEPLOYMENT},
    {"garbage-collector-controller", "garbagecollector", KITE_CTL_GARBAGE_COLLECTOR},
    {"job-controller", "job", KITE_CTL_JOB},
    {"cronjob-controller", "cronjob", KITE_CTL_CRONJOB},
    {"daemonset-controller", "daemonset", KITE_CTL_DAEMONSET},
    {"statefulset-controller", "statefulset", KITE_CTL_STATEFULSET},
    {"certificatesigningrequest-approving-controller", "csrapproving", KITE_CTL_CSR_APPROVING},
    {"certificatesigningrequest-signing-controller", "csrsigning", KITE_CTL_CSR_SIGNING},
    {"endpointslice-controller", "endpointslice", KITE_CTL_ENDPOINTSLICE},
    {"clusterrole-aggregation-controller", "clusterrole-aggregation", KITE_CTL_CLUSTERROLE_AGGREGATION},
    {"serviceaccount-controller", "serviceaccount", KITE_CTL_SERVICEACCOUNT},
    {"root-ca-certificate-publisher-controller", "root-ca-cert-publisher", KITE_CTL_ROOT_CA_PUBLISHER},
};

static unsigned bit_of(const char *name) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CONTROLLERS); i++)
        if (!strcmp(name, CONTROLLERS[i].name) || !strcmp(name, CONTROLLERS[i].alias)) return CONTROLLERS[i].bit;
    return 0;
}

/* As kube-controller-manager reads the list: "*" turns on every controller, "foo" turns foo
 * on, "-foo" off; a name both on and off is off. An empty list means "*". */
int kite_controllers_off(char *const *names, size_t n, unsigned *ret_off, char **ret_error) {
    unsigned all = 0, on = 0, off = 0;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CONTROLLERS); i++) all |= CONTROLLERS[i].bit;
    bool star = n == 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = names[i];
        if (!strcmp(s, "*")) {
            star = true;
            continue;
        }
        bool neg = s[0] == '-';
        unsigned bit = bit_of(neg ? s + 1 : s);
        if (!bit) {
            *ret_error = kite_asprintf("--controllers: \"%s\" is not in the list of known controllers", neg ? s + 1 : s);
            return -EINVAL;
        }
        if (neg) off |= bit;
        else on |= bit;
    }
    *ret_off = all & ~((star ? all : on) & ~off);
    return 0;
}

const char *kite_controllers_names(void) {
    static char names[512]; /* the aliases of the table, filled on the first call (flag parsing) */
    if (!*names) {
        size_t at = 0;
        for (size_t i = 0; i < KITE_ARRAY_SIZE(CONTROLLERS) && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", CONTROLLERS[i].alias);
    }
    return names;
}
