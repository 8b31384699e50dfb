/* Resource usage as the kubelet's resource metrics report it (cAdvisor's way of reading it):
 * a container's from its cgroup, under cgroup v1 (cpuacct and memory hierarchies) or v2 (the
 * unified tree), and the node's from /proc/stat and /proc/meminfo.
 *
 * CPU is a cumulative counter in nanoseconds (a rate is the reader's business, as
 * metrics-server's); memory is the working set: usage less the inactive file pages, which the
 * kernel reclaims first (cAdvisor's container_memory_working_set_bytes). Every path is read
 * under sysroot ("" = the machine), so tests point it at fixture trees. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

struct kite_usage {
    bool has_cpu, has_memory;
    uint64_t cpu_ns;            /* cumulative CPU time, all CPUs */
    uint64_t memory_usage;      /* bytes charged (v1 usage_in_bytes, v2 memory.current) */
    uint64_t memory_working_set; /* usage less inactive_file, floored at 0 */
};

/* cg's usage ("/kite/pod<uid>/<id>", absolute in the hierarchy). v2 when
 * sysroot/sys/fs/cgroup/cgroup.controllers exists (the unified tree mounted at
 * /sys/fs/cgroup), else v1 (sys/fs/cgroup/cpuacct or cpu,cpuacct, and sys/fs/cgroup/memory).
 * 0 with what was found (has_cpu, has_memory), -ENOENT when neither was. */
int kite_cgroup_usage(const char *sysroot, const char *cg, struct kite_usage *ret);
/* The node's: CPU from the first line of proc/stat (user, nice, system, irq, softirq and steal
 * ticks; clk_tck of them a second), memory from proc/meminfo (usage = MemTotal - MemFree, less
 * Inactive(file), as runc reads a v2 root cgroup). 0 or -errno. */
int kite_node_usage(const char *sysroot, long clk_tck, struct kite_usage *ret);

/* Parsers, exposed for tests: the value of key in a "key value" per line file (cpu.stat,
 * memory.stat), or -ENOENT; a file holding one unsigned number. */
int kite_cgstats_keyed(const char *text, const char *key, uint64_t *ret);
int kite_cgstats_number(const char *text, uint64_t *ret);
