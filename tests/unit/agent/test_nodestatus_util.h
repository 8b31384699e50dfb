/* Helpers for the node status tests: fake trees in temp dirs and fake sources. */
#pragma once
#include <stdint.h>

#include "agent/nodestatus/nodestatus.h"
#include "base/clock.h"

/* Path of a checked-in fixture tree (tests/unit/agent/fixtures/<name>); caller frees. */
char *nst_fixture(const char *name);
/* A new empty temp dir; caller frees and removes with nst_rmtree. */
char *nst_tmpdir(void);
/* Copies the fixture tree `name` into a new temp dir (so a test may edit it). */
char *nst_fixture_copy(const char *name);
/* Writes root+path (parents created) with content. */
void nst_write(const char *root, const char *path, const char *content);
void nst_rmtree(const char *root);
/* Removes every temp dir this test process made (suite .fini: runs after failures too). */
void nst_cleanup(void);

/* Fake statfs / default route / cpus, driven by this struct as ud. */
struct nst_fake {
    uint64_t total_bytes, avail_bytes, total_inodes, free_inodes;
    int statfs_err;
    const char *route_ip; /* NULL = -ENETUNREACH */
    int cpus;             /* returned as is */
};
/* The fake machine beside the "machine1" fixture: a 61202244Ki filesystem, half free; 3.9M inodes,
 * 1M free; the default route's address 10.0.0.13; 8 CPUs. */
#define NST_FAKE_MACHINE1                                                                                              \
    ((struct nst_fake){.total_bytes = UINT64_C(62671097856), .avail_bytes = UINT64_C(31335548928),                    \
                       .total_inodes = 3907584, .free_inodes = 1000000, .route_ip = "10.0.0.13", .cpus = 8})
int nst_statfs(const char *path, uint64_t *total_bytes, uint64_t *avail_bytes,
               uint64_t *total_inodes, uint64_t *free_inodes, void *ud);
int nst_route_ip(char *buf, size_t len, void *ud);
int nst_cpus(void *ud);

/* Value of a dotted path ("nodeInfo.bootID", "capacity.cpu") as a string, or NULL. */
const char *nst_get(json_object *status, const char *path);
/* The condition of `type` in status.conditions, or NULL. */
json_object *nst_cond(json_object *status, const char *type);
const char *nst_cond_field(json_object *status, const char *type, const char *field);
