/* Pod address management for the runc runtime's pod network: IPv4 addresses handed out from
 * the pod CIDR, one per sandbox, kept in a directory so that an agent restart neither reuses
 * the address of a running pod nor leaks one (CNI host-local's layout: one file per address,
 * named by the address and holding its owner).
 *
 * The network and broadcast addresses and the gateway (the first address, the bridge's) are
 * never handed out. Allocation is round-robin from the last address handed out, as host-local
 * does, so a released address is not reused at once while stale connections may still aim at
 * it. Addresses on disk outside the current CIDR (the CIDR was changed while pods ran) stay
 * reserved to their owners until released, and are never handed out again. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Narrowest and widest pod CIDR: a /30 leaves one pod address; a /8 16,777,213. */
#define KITE_IPAM_PREFIX_MIN 8
#define KITE_IPAM_PREFIX_MAX 30
/* An owner (a sandbox id) is at most this long: [0-9a-zA-Z_-]. */
#define KITE_IPAM_OWNER_MAX 64
/* Longest dotted quad with its NUL. */
#define KITE_IPAM_ADDR_LEN 16

struct kite_cidr {
    uint32_t net; /* host byte order, host bits zero */
    int prefix;
};

/* "10.88.0.0/16" -> *ret. -EINVAL for anything else (IPv6, host bits set, a prefix outside
 * KITE_IPAM_PREFIX_MIN..MAX), with *ret_error (may be NULL) saying why. */
int kite_cidr_parse(const char *s, struct kite_cidr *ret, char **ret_error);
/* Dotted quad of a host-order address into buf (KITE_IPAM_ADDR_LEN bytes). */
void kite_ipv4_format(uint32_t addr, char *buf);
/* The gateway: the first address of the CIDR. */
static inline uint32_t kite_cidr_gateway(const struct kite_cidr *c) { return c->net + 1; }
/* Addresses a CIDR can hand out: its size less network, gateway and broadcast. */
static inline uint32_t kite_cidr_capacity(const struct kite_cidr *c) {
    return (uint32_t)((UINT64_C(1) << (32 - c->prefix)) - 3);
}

struct kite_ipam;

/* Opens (creating) the state directory dir for the CIDR: reads the addresses held there.
 * 0 or -errno (*ret_error, may be NULL, says which file). */
int kite_ipam_open(const char *dir, const struct kite_cidr *cidr, struct kite_ipam **ret, char **ret_error);
void kite_ipam_free(struct kite_ipam *m);

/* The owner's address: the one it already holds, else a new one, persisted (fsync + rename)
 * before it is returned. -ENOSPC when the CIDR has none left (*ret_error says so), -EINVAL
 * for a bad owner, other -errno from the disk. */
int kite_ipam_allocate(struct kite_ipam *m, const char *owner, uint32_t *ret_addr, char **ret_error);
/* Forgets every address of owner (0 also when it had none), durably. */
int kite_ipam_release(struct kite_ipam *m, const char *owner);
/* The owner's address: 0 or -ENOENT. */
int kite_ipam_lookup(const struct kite_ipam *m, const char *owner, uint32_t *ret_addr);
/* Number of addresses held, and the i-th owner (borrowed) for reconciling with what runs. */
size_t kite_ipam_count(const struct kite_ipam *m);
const char *kite_ipam_owner(const struct kite_ipam *m, size_t i);
