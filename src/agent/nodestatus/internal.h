/* Internal to the node status setters (and their unit tests): the setter context, the machine
 * readers (sysroot-aware file parsers), and the setters themselves. */
#pragma once
#include "agent/nodestatus/nodestatus.h"
#include "base/base.h"

/* Longest file the readers accept: /proc and /sys files are tiny; os-release and meminfo are a
 * few KiB. A longer file is refused (-EFBIG) rather than read without bound. */
#define NS_MAX_FILE_BYTES (1024 * 1024)
/* At most this many names per image in node status (MaxNamesPerImageInNodeStatus). */
#define NS_MAX_NAMES_PER_IMAGE 5
/* Longest IPv4/IPv6 textual address plus NUL (INET6_ADDRSTRLEN). */
#define NS_IP_LEN 46

/* The machine facts (nodestatus.h, kite_ns_cache): read together, each with its own result. */
struct ns_facts {
    char *machine_id, *system_uuid, *boot_id; /* NULL = unreadable or empty */
    char *kernel;   /* osrelease, else uname's release on the real machine; NULL = neither */
    char *arch;     /* GOARCH of the sysroot's arch file, else of uname's machine; NULL = neither */
    char *os_image; /* PRETTY_NAME; NULL = none ("Linux") */
    int cpus_r, cpus;           /* kite_ns_online_cpus */
    int huge_r;                 /* kite_ns_hugepages */
    struct kite_ns_hugepages *huge;
    size_t n_huge;
    int mem_total_r;            /* MemTotal */
    int64_t mem_total;
    int pid_limit_r;            /* kite_ns_pid_limit */
    int64_t pid_limit;
};
/* Reads every fact of sysroot; ns_facts_release frees what it holds. */
void kite_ns_facts_read(const char *sysroot, struct ns_facts *f);
void kite_ns_facts_release(struct ns_facts *f);

/* What kite_nodestatus_read read, reduced to what the status shows (nodestatus.h). */
struct kite_ns_inputs {
    uint64_t digest;
    struct ns_facts own;          /* the facts read for this computation when there is no cache */
    const struct ns_facts *facts; /* the cache's or &own */
    /* root_dir's filesystem: capacity, and DiskPressure's verdict */
    bool fs_ok;
    uint64_t fs_total;
    bool disk_pressure;
    bool mem_pressure, pid_pressure;
    int ip_r;                     /* the InternalIP: 0 and ip, or -errno */
    char ip[NS_IP_LEN];
    int cpus_r, cpus;             /* the override's or the facts' */
    int version_r;                /* containerRuntimeVersion "name://version"; NULL = no runtime */
    char *version;
    bool images_listed;           /* images/n_images/images_r hold the list (else the build lists) */
    int images_r;
    struct kite_image *images;
    size_t n_images;
};

/* One run of the setters. Setters add to status (owned) and read earlier setters' results. */
struct ns_ctx {
    const struct kite_ns_config *cfg;
    const struct kite_ns_sources *src;
    const char *sysroot;   /* never NULL */
    const struct kite_ns_inputs *in; /* what was read (NULL while reading) */
    json_object *prev;     /* borrowed previous status; may be NULL */
    json_object *status;   /* the status being built */
    struct kite_ns_events *events; /* may be NULL */
    int64_t now_ns;
    char now[21];
    /* filesystem size of root_dir (in->fs_ok, in->fs_total) */
    bool fs_ok;
    uint64_t fs_total;
    const struct ns_facts *facts; /* the cache's, or read for this run */
};

/* The changing readings, through src->cache when there is one: MemAvailable and the running
 * tasks (kite_ns_pid_running). 0 or -errno. */
int kite_ns_mem_available(struct ns_ctx *c, int64_t *ret);
int kite_ns_tasks_running(struct ns_ctx *c, int64_t *ret);
/* The facts for this run: the cache's (re-read when older than its TTL) or *own read now. */
const struct ns_facts *kite_ns_cache_facts(struct ns_ctx *c, struct ns_facts *own);

/* ---- machine readers (machine.c); all return 0 or -errno and set outputs only on success ---- */

/* Reads sysroot+path whole (bounded by NS_MAX_FILE_BYTES); *ret is NUL-terminated, caller frees. */
int kite_ns_read_file(const char *sysroot, const char *path, char **ret);
/* As ns_read_file, with surrounding whitespace stripped (a one-value /proc or /sys file). */
int kite_ns_read_value(const char *sysroot, const char *path, char **ret);
/* A "Key:   N kB" line of /proc/meminfo, in bytes. -ENOENT when the key is absent. */
int kite_ns_meminfo_bytes(const char *sysroot, const char *key, int64_t *ret);
/* PRETTY_NAME of /etc/os-release (or /usr/lib/os-release), unquoted; caller frees. */
int kite_ns_os_pretty_name(const char *sysroot, char **ret);
/* The parse step of ns_os_pretty_name, on os-release text. */
int kite_ns_parse_os_release(const char *text, const char *key, char **ret);
/* Interface of the default route in /proc/net/route text (up, destination 0, lowest metric). */
int kite_ns_parse_default_route(const char *route_text, char **ret_iface);
/* IPv4 address of the default-route interface (route from sysroot, address via getifaddrs). */
int kite_ns_default_route_ip(const char *sysroot, char *buf, size_t len);
/* Count of cpus in a kernel cpu list ("0-3,8,10-11" -> 7). */
int kite_ns_parse_cpu_list(const char *list, int *ret);
/* cgroup v2 cpu.max text ("max 100000" / "150000 100000") -> cpus, rounded up; 0 = no quota. */
int kite_ns_parse_cpu_max(const char *text, int *ret);
/* Online cpus: sched_getaffinity (or <sysroot>/sys/devices/system/cpu/online under a
 * sysroot), capped by the cgroup cpu quota, rounded up: <sysroot>/sys/fs/cgroup/cpu.max (v2),
 * else <sysroot>/sys/fs/cgroup/cpu/cpu.cfs_quota_us / cpu.cfs_period_us (v1). */
int kite_ns_online_cpus(const char *sysroot, int *ret);
/* One hugepage size present under <sysroot>/sys/kernel/mm/hugepages. */
struct kite_ns_hugepages {
    int64_t page_bytes;
    int64_t total_bytes;
};
/* Every hugepage size, sorted by page size; *ret caller frees. */
int kite_ns_hugepages(const char *sysroot, struct kite_ns_hugepages **ret, size_t *ret_n);
/* Process headroom: min(pid_max, threads-max) - running tasks (/proc/loadavg, else /proc/[0-9]*). */
int kite_ns_pid_stats(const char *sysroot, int64_t *ret_limit, int64_t *ret_running);
/* Its two halves: the limit min(pid_max, threads-max), and the running tasks. */
int kite_ns_pid_limit(const char *sysroot, int64_t *ret_limit);
int kite_ns_pid_running(const char *sysroot, int64_t *ret_running);
/* statvfs(path). */
int kite_ns_statfs(const char *path, uint64_t *total_bytes, uint64_t *avail_bytes,
              uint64_t *total_inodes, uint64_t *free_inodes);

/* ---- setters, in the order kite_nodestatus_compute runs them ---- */
int kite_ns_set_addresses(struct ns_ctx *c);   /* addresses.c */
int kite_ns_set_machine(struct ns_ctx *c);     /* capacity.c: nodeInfo ids + capacity + allocatable */
int kite_ns_set_version(struct ns_ctx *c);     /* info.c */
int kite_ns_set_daemon(struct ns_ctx *c);      /* info.c */
int kite_ns_set_images(struct ns_ctx *c);      /* info.c */
int kite_ns_set_memory_pressure(struct ns_ctx *c); /* conditions.c */
int kite_ns_set_disk_pressure(struct ns_ctx *c);
int kite_ns_set_pid_pressure(struct ns_ctx *c);
int kite_ns_set_ready(struct ns_ctx *c);

/* ---- helpers shared by setters (nodestatus.c) ---- */

/* status[key] as an object, created (in place) if absent. Borrowed. */
json_object *kite_ns_obj(struct ns_ctx *c, const char *key);
/* Sets the condition `type` to status/reason/message, keeping lastTransitionTime from the
 * previous status unless the status flips, lastHeartbeatTime = now, and records event_true /
 * event_false on a flip (to "True" / to anything else). */
void kite_ns_set_condition(struct ns_ctx *c, const char *type, const char *status, const char *reason,
                      const char *message, const char *event_true, const char *event_false);
/* Threshold from an absolute value (>= 0 wins) or percent of total (>= 0); -1 = unset. */
int64_t kite_ns_threshold(int64_t abs, double pct, int64_t total);
