/* Node status setters: gather the machine's real state and build a Node's status, as the
 * kubelet's pkg/kubelet/nodestatus/setters.go does. One small setter per aspect, run in a fixed
 * order with Ready last; every source (files under a sysroot, statfs, the default route, the
 * online cpu count, the clock, the runtime) is injected so tests can feed fake machines.
 *
 * Shared interface with the agent core (/tmp/kite-nodestatus-iface.md): names are fixed. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "base/clock.h"

struct kite_runtime; /* src/agent/runtime/runtime.h */
struct kite_ns_cache; /* below */

/* Values of KubeletConfiguration that node status needs (the agent core fills it; every string
 * borrowed for the duration of the call). */
struct kite_ns_config {
    const char *node_name;
    const char *node_ip;         /* --node-ip, or NULL = address of the default-route interface */
    const char *external_ip;     /* NULL = none */
    const char *hostname;        /* Hostname address; NULL = node_name */
    const char *root_dir;        /* agent root dir: ephemeral-storage = its filesystem */
    const char *kubelet_version; /* e.g. "v1.32.0-kite.1" */
    int max_pods;                /* 110 */
    int max_images;              /* nodeStatusMaxImages, 50; -1 = no cap */
    int daemon_port;             /* 10250 */
    /* reservations, in milli-units (cpu millicores*1, bytes*1000 as kite_quantity milli) */
    int64_t kube_reserved_cpu_m, kube_reserved_mem_m, kube_reserved_eph_m;
    int64_t system_reserved_cpu_m, system_reserved_mem_m, system_reserved_eph_m;
    /* evictionHard: absolute amounts or percentages. An absolute value < 0 means unset; a
     * percentage (in percent: 10 means "10%") < 0 means unset. When both are set the absolute
     * one wins. Percentages are of: MemTotal, the root_dir filesystem's size, its inode count,
     * and min(pid_max, threads-max). memory.available is MemAvailable; pid.available is the
     * pid limit minus running tasks. */
    int64_t evict_mem_bytes;    double evict_mem_pct;    /* memory.available<100Mi */
    int64_t evict_nodefs_bytes; double evict_nodefs_pct; /* nodefs.available<10% */
    int64_t evict_inodes_count; double evict_inodes_pct; /* nodefs.inodesFree<5% */
    int64_t evict_pid_count;    double evict_pid_pct;    /* pid.available (headroom) */
};

/* Everything the setters read from the machine, injectable for tests. */
struct kite_ns_sources {
    const char *sysroot;          /* prefix for /proc, /sys, /etc paths ("" or NULL = the real machine) */
    struct kite_clock *clock;     /* borrowed; NULL = kite_clock_real() */
    struct kite_runtime *runtime; /* version + images; borrowed; NULL = none (version empty, no images) */
    /* optional overrides (NULL = real implementation) */
    int (*statfs)(const char *path, uint64_t *total_bytes, uint64_t *avail_bytes,
                  uint64_t *total_inodes, uint64_t *free_inodes, void *ud);
    int (*default_route_ip)(char *buf, size_t len, void *ud); /* "10.0.0.5"; 0 or -errno */
    int (*online_cpus)(void *ud);                             /* affinity/cpuset/quota aware; >0 or -errno */
    void *ud;
    /* The machine's facts and readings for this sysroot, kept between computations (NULL =
     * every file read on every computation). Made for this sysroot with kite_ns_cache_new;
     * shared by every computation over it (one thread at a time). */
    struct kite_ns_cache *cache;
    /* health inputs to Ready, set by the agent core (strings borrowed). Ready's message joins
     * the errors as Kubernetes' errors.NewAggregate does ("a" alone, "[a, b]" for several). */
    bool runtime_ready; const char *runtime_error; /* whole message when not ready; NULL =
                                                    * "container runtime is down" */
    bool pleg_healthy;  const char *pleg_error;    /* PLEG Healthy()'s error, e.g. "pleg was last
                                                    * seen active 3m0.5s ago; threshold is 3m0s";
                                                    * reported as "PLEG is not healthy: <it>";
                                                    * NULL = "pleg has yet to be successful" */
    /* Optional: a number that changes whenever the runtime's image list may have changed
     * (0 or -errno). With it a read (kite_nodestatus_read) digests the number instead of
     * listing the images; the build lists them. NULL = the read lists and digests them. */
    int (*images_gen)(void *ud, uint64_t *ret);
};

/* One transition event. type is a static string ("Normal"/"Warning"); reason and message are
 * owned by the array. */
struct kite_ns_event {
    const char *type;
    char *reason;
    char *message;
};
struct kite_ns_events {
    struct kite_ns_event *v;
    size_t n;
};
/* Frees every event and the array; leaves e empty (reusable). NULL-safe. */
void kite_ns_events_release(struct kite_ns_events *e);

/* Runs every setter in the fixed order (addresses, machine info/capacity/allocatable, version
 * info, daemon endpoints, images, MemoryPressure, DiskPressure, PIDPressure, Ready last) and
 * returns a complete NodeStatus JSON object (new ref, caller puts). prev_status (borrowed, may
 * be NULL) is the last status known (from the server or last computed): conditions keep their
 * lastTransitionTime unless their status flips; lastHeartbeatTime = now on every condition.
 * Transition events (NodeReady, NodeNotReady, NodeHasSufficientMemory, NodeHasInsufficientMemory,
 * NodeHasNoDiskPressure, NodeHasDiskPressure, NodeHasSufficientPID, NodeHasInsufficientPID; message
 * "Node <name> status is now: <Reason>") are appended to *events (may be NULL = not wanted).
 * A source that cannot be read leaves its field out (as the kubelet does when cAdvisor fails)
 * rather than failing the whole status; Ready then reports the missing capacity.
 * Returns 0 or -errno (-EINVAL on a NULL cfg/src/ret_status). *ret_status set only on success. */
int kite_nodestatus_compute(const struct kite_ns_config *cfg, const struct kite_ns_sources *src,
                            json_object *prev_status, json_object **ret_status,
                            struct kite_ns_events *events);

/* The computation in two steps, for callers that skip the second when nothing changed.
 *
 * kite_nodestatus_read reads every source (the filesystem, the cache's facts and readings,
 * the default route, the cpus, the runtime's version and images, the health inputs) and
 * reduces each to what the status shows of it (MemAvailable, the free bytes, inodes and pids
 * only as "under the eviction threshold or not"), with a 64-bit digest of that and of cfg.
 * kite_nodestatus_build makes the status from what was read, exactly as
 * kite_nodestatus_compute (= read + build). The status depends on nothing else besides
 * prev_status and the clock, and on the clock only through lastHeartbeatTime and the
 * lastTransitionTime of a condition that flips (or that prev_status lacks): so two reads with
 * the same digest build statuses that differ at most in those, from the same prev_status.
 * cfg and src must be the same (same values) for the read and its build. 0 or -errno. */
struct kite_ns_inputs;
int kite_nodestatus_read(const struct kite_ns_config *cfg, const struct kite_ns_sources *src,
                         struct kite_ns_inputs **ret);
uint64_t kite_ns_inputs_digest(const struct kite_ns_inputs *in);
int kite_nodestatus_build(const struct kite_ns_config *cfg, const struct kite_ns_sources *src,
                          const struct kite_ns_inputs *in, json_object *prev_status, json_object **ret_status,
                          struct kite_ns_events *events);
void kite_ns_inputs_free(struct kite_ns_inputs *in); /* NULL-safe */

/* The cache of one sysroot's machine (kite_ns_sources.cache).
 *
 * Facts: what cAdvisor's MachineInfo holds and the kubelet reads once at start-up (machine-id,
 * product_uuid, boot_id, os-release's PRETTY_NAME, osrelease and arch, the online cpus and the
 * cgroup cpu quota, hugepages, MemTotal, pid_max and threads-max) are read together and kept
 * facts_ttl_ns (KITE_NS_FACTS_TTL_NS: 5 minutes, cAdvisor's update_machine_info_interval, so a
 * changed file still shows; the kubelet itself never re-reads them while it runs).
 * Readings: what changes (MemAvailable for MemoryPressure, the running tasks of /proc/loadavg
 * for PIDPressure) are kept live_ttl_ns: 0 = read on every computation (the agent); the
 * simulator, whose thousands of nodes share one machine shape, keeps them 1 s.
 * Times are the monotonic time of the computation's clock. Not thread-safe. */
#define KITE_NS_FACTS_TTL_NS (300 * KITE_NS_PER_SEC)
struct kite_ns_cache *kite_ns_cache_new(const char *sysroot, int64_t facts_ttl_ns, int64_t live_ttl_ns);
void kite_ns_cache_free(struct kite_ns_cache *cache); /* NULL-safe */
/* How often the cache went to the files: fact loads (all facts at once) and live readings. */
struct kite_ns_cache_stats {
    uint64_t fact_loads;
    uint64_t meminfo_reads; /* MemAvailable */
    uint64_t loadavg_reads; /* running tasks */
};
void kite_ns_cache_get_stats(const struct kite_ns_cache *cache, struct kite_ns_cache_stats *ret);

/* Fills cfg with Kubernetes' defaults (max_pods 110, max_images 50, daemon_port 10250, eviction
 * hard memory.available 100Mi, nodefs.available 10%, nodefs.inodesFree 5%, pid unset, no
 * reservations, every string NULL). */
void kite_ns_config_defaults(struct kite_ns_config *cfg);

/* Go's GOARCH name for a uname(2) machine string ("x86_64" -> "amd64", "aarch64" -> "arm64",
 * "i686" -> "386", "armv7l" -> "arm", "ppc64le", "s390x", "riscv64"). Unknown machines are
 * returned unchanged. Returns a static string or machine itself (borrowed). */
const char *kite_ns_goarch(const char *machine);
