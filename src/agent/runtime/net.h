/* The runc runtime's pod network: one Linux bridge on the host holding the pod CIDR's gateway
 * address, and per sandbox a veth pair with one end on the bridge and the other, named eth0,
 * in the sandbox's network namespace with the pod's address, loopback up and a default route
 * through the gateway. Traffic stays on this machine: pods reach each other over the bridge
 * (layer 2, no forwarding needed) and the host reaches them through the bridge's address;
 * there is no NAT and no route off the node.
 *
 * Everything goes through rtnetlink (libmnl). Needs CAP_NET_ADMIN (and CAP_SYS_ADMIN to enter
 * a sandbox's namespace). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define KITE_NET_BRIDGE_DEFAULT "kite0"
#define KITE_NET_POD_CIDR_DEFAULT "10.88.0.0/16"
/* The pod's interface inside its namespace. */
#define KITE_NET_POD_IFNAME "eth0"

/* Where agents record which pod bridge each of them uses: one lock file per bridge. */
#define KITE_NET_LOCK_DIR "/run/kite"

/* Claims the bridge for this process for as long as *ret_fd stays open (an flock on
 * KITE_NET_LOCK_DIR/bridge-NAME.lock, released by the kernel when the process ends, so a crashed
 * agent leaves no claim behind). Two live agents on one bridge would hand out the same pod
 * addresses: -EBUSY, and *ret_error names the agent holding it and the flags that choose another. */
int kite_net_bridge_claim(const char *bridge, const char *root_dir, int *ret_fd, char **ret_error);

/* A Linux interface name: 1 to 15 bytes, none of '/', ':', whitespace, not "." or "..". */
bool kite_net_valid_ifname(const char *name);

/* Creates the bridge if it is missing, gives it gw/prefix (addresses in host byte order) if it
 * lacks it, and brings it up. 0 or -errno with *ret_error (may be NULL) saying which step. */
int kite_net_bridge_ensure(const char *bridge, uint32_t gw, int prefix, char **ret_error);

/* Plugs the network namespace at netns (a /proc/PID/ns/net or a bind mount of one) into the
 * bridge: a veth pair host_if (on the bridge, up) <-> eth0 (in the namespace, addr/prefix, up),
 * lo up, default route via gw. On failure nothing is left behind. 0 or -errno with *ret_error
 * (may be NULL). */
int kite_net_attach(const char *bridge, const char *host_if, const char *netns, uint32_t addr, int prefix, uint32_t gw,
                    char **ret_error);

/* Deletes host_if and with it its peer. 0 also when it does not exist (the namespace it was
 * plugged into is gone, which takes the pair with it). */
int kite_net_detach(const char *host_if);
