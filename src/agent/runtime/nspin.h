/* A pod's namespaces held without a process (CRI-O's pinns): a short-lived thread unshares the
 * network, IPC and UTS namespaces, sets the hostname and the sysctls inside them, and bind-mounts
 * its /proc/thread-self/ns/<type> onto <dir>/<type>; then it ends, and the mounts alone keep the
 * namespaces alive (a container joins one by that path, the agent enters it by opening it). The
 * mounts are in the agent's mount namespace, so they outlive an agent restart (not a reboot). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

enum {
    KITE_NSPIN_NET = 1 << 0,
    KITE_NSPIN_IPC = 1 << 1,
    KITE_NSPIN_UTS = 1 << 2,
};

/* The file <dir>/<type> of one of the types ("net", "ipc", "uts"): a new string. */
char *kite_nspin_path(const char *dir, int type);

/* Creates the namespaces of types (a mask; 0 creates none) pinned under dir (which exists).
 * hostname (NULL = leave the new UTS namespace's copy of the host's) needs KITE_NSPIN_UTS.
 * sysctls are "name=value" (name dotted: net.ipv4.ip_local_port_range), each of a namespace
 * created here as runc allows them: net.* in the network namespace; kernel.shm*, kernel.msg*,
 * kernel.sem, fs.mqueue.* in the IPC one; kernel.hostname and kernel.domainname in the UTS one;
 * any other is refused (it would change the host). On failure nothing is left pinned. 0, or
 * -errno with *ret_error (may be NULL). */
int kite_nspin_create(const char *dir, int types, const char *hostname, const char *const *sysctls, size_t n_sysctls,
                      char **ret_error);

/* Whether each of types is pinned under dir (its file is a mount of a namespace). */
bool kite_nspin_held(const char *dir, int types);

/* Unmounts and removes <dir>/{net,ipc,uts}, those that are there. Idempotent: 0, or -errno of a
 * mount that would not go. */
int kite_nspin_remove(const char *dir);
