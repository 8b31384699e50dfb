/* The namespace pinner's refusals (src/agent/runtime/nspin.c), answered before any namespace is
 * made or anything mounted: a hostname without a UTS namespace of the pod's own, a sysctl with no
 * value, one not in a separate kernel namespace, one whose namespace the pod shares with the host,
 * and names that would leave /proc/sys. Each many times, so a double free or leak on the error
 * path shows under the sanitizers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/runtime/nspin.h"

static void refused(int types, const char *hostname, const char *sysctl, const char *want) {
    const char *sys[] = {sysctl};
    for (int i = 0; i < 200; i++) {
        char *err = NULL;
        int r = kite_nspin_create("/nonexistent/kite-nspin-test", types, hostname, sysctl ? sys : NULL, sysctl ? 1 : 0,
                                  &err);
        cr_assert_eq(r, -EINVAL, "%s: %d", sysctl ? sysctl : hostname, r);
        cr_assert(err && strstr(err, want), "%s: %s", sysctl ? sysctl : hostname, err ? err : "(none)");
        free(err);
    }
}

Test(nspin, refusals_come_before_any_work) {
    refused(KITE_NSPIN_NET, "pod-a", NULL, "needs a UTS namespace");
    refused(KITE_NSPIN_NET | KITE_NSPIN_UTS, NULL, "net.ipv4.ip_forward", "no value");
    refused(KITE_NSPIN_NET | KITE_NSPIN_UTS, NULL, "vm.swappiness=10", "not in a separate kernel namespace");
    refused(KITE_NSPIN_UTS, NULL, "net.ipv4.ip_unprivileged_port_start=80", "shares the host's namespace");
    refused(KITE_NSPIN_NET, NULL, "net/../../vm/swappiness=1", "");
    refused(KITE_NSPIN_NET, NULL, "=1", "");
}
