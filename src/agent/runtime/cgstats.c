/* Reading resource usage from cgroups and /proc (cgstats.h). Files are small (memory.stat is
 * ~1-2 KiB); each is read whole, up to CG_FILE_MAX. */
#include "agent/runtime/cgstats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

#define CG_FILE_MAX (64u * 1024)

int kite_cgstats_number(const char *text, uint64_t *ret) {
    if (!text) return -EINVAL;
    while (*text == ' ' || *text == '\t') text++;
    if (*text < '0' || *text > '9') return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno) return -ERANGE;
    while (*end == ' ' || *end == '\n' || *end == '\t') end++;
    if (*end) return -EINVAL;
    *ret = v;
    return 0;
}

int kite_cgstats_keyed(const char *text, const char *key, uint64_t *ret) {
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, key, kl) != 0 || (l[kl] != ' ' && l[kl] != '\t')) continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(l + kl + 1, &end, 10);
        if (errno || end == l + kl + 1) return -EINVAL;
        *ret = v;
        return 0;
    }
    return -ENOENT;
}

static char *read_text(const char *sysroot, const char *fmt_dir, const char *cg, const char *file) {
    _cleanup_free_ char *p = kite_asprintf("%s%s%s/%s", sysroot, fmt_dir, cg, file);
    char *t = NULL;
    size_t len = 0;
    if (kite_read_file(p, CG_FILE_MAX, &t, &len) < 0) return NULL;
    return t;
}

static bool read_number(const char *sysroot, const char *dir, const char *cg, const char *file, uint64_t *ret) {
    _cleanup_free_ char *t = read_text(sysroot, dir, cg, file);
    return t && kite_cgstats_number(t, ret) == 0;
}

static bool read_keyed(const char *sysroot, const char *dir, const char *cg, const char *file, const char *key,
                       uint64_t *ret) {
    _cleanup_free_ char *t = read_text(sysroot, dir, cg, file);
    return t && kite_cgstats_keyed(t, key, ret) == 0;
}

static uint64_t working_set(uint64_t usage, uint64_t inactive_file) {
    return usage > inactive_file ? usage - inactive_file : 0;
}

static bool is_v2(const char *sysroot) {
    _cleanup_free_ char *p = kite_asprintf("%s/sys/fs/cgroup/cgroup.controllers", sysroot);
    return access(p, F_OK) == 0;
}

int kite_cgroup_usage(const char *sysroot, const char *cg, struct kite_usage *ret) {
    struct kite_usage u = {0};
    uint64_t v, inactive = 0;
    if (!sysroot) sysroot = "";
    if (is_v2(sysroot)) {
        const char *d = "/sys/fs/cgroup";
        if (read_keyed(sysroot, d, cg, "cpu.stat", "usage_usec", &v)) {
            u.has_cpu = true;
            u.cpu_ns = v * 1000;
        }
        if (read_number(sysroot, d, cg, "memory.current", &v)) {
            u.has_memory = true;
            u.memory_usage = v;
            read_keyed(sysroot, d, cg, "memory.stat", "inactive_file", &inactive);
            u.memory_working_set = working_set(v, inactive);
        }
    } else {
        /* cpuacct alone, or co-mounted with cpu (the usual cpuacct symlink points there) */
        if (read_number(sysroot, "/sys/fs/cgroup/cpuacct", cg, "cpuacct.usage", &v) ||
            read_number(sysroot, "/sys/fs/cgroup/cpu,cpuacct", cg, "cpuacct.usage", &v)) {
            u.has_cpu = true;
            u.cpu_ns = v;
        }
        if (read_number(sysroot, "/sys/fs/cgroup/memory", cg, "memory.usage_in_bytes", &v)) {
            u.has_memory = true;
            u.memory_usage = v;
            /* hierarchical (total_) first, as cAdvisor: a container's cgroup may have children */
            if (!read_keyed(sysroot, "/sys/fs/cgroup/memory", cg, "memory.stat", "total_inactive_file", &inactive))
                read_keyed(sysroot, "/sys/fs/cgroup/memory", cg, "memory.stat", "inactive_file", &inactive);
            u.memory_working_set = working_set(v, inactive);
        }
    }
    if (!u.has_cpu && !u.has_memory) return -ENOENT;
    *ret = u;
    return 0;
}

/* The value of a /proc/meminfo line ("MemTotal:       16326868 kB") in bytes. */
static bool meminfo(const char *text, const char *key, uint64_t *ret) {
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, key, kl) != 0 || l[kl] != ':') continue;
        char *end;
        unsigned long long v = strtoull(l + kl + 1, &end, 10);
        if (end == l + kl + 1) return false;
        while (*end == ' ') end++;
        *ret = strncmp(end, "kB", 2) == 0 ? v * 1024 : v;
        return true;
    }
    return false;
}

int kite_node_usage(const char *sysroot, long clk_tck, struct kite_usage *ret) {
    struct kite_usage u = {0};
    if (!sysroot) sysroot = "";
    if (clk_tck <= 0) return -EINVAL;
    _cleanup_free_ char *sp = kite_asprintf("%s/proc/stat", sysroot), *mp = kite_asprintf("%s/proc/meminfo", sysroot);
    _cleanup_free_ char *st = NULL, *mi = NULL;
    size_t len;
    /* /proc/stat grows with the CPUs and interrupts: only its first line matters */
    int r = kite_read_file(sp, 4u << 20, &st, &len);
    if (r < 0) return r;
    unsigned long long t[8] = {0};
    if (strncmp(st, "cpu ", 4) != 0 ||
        sscanf(st + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6],
               &t[7]) < 7)
        return -EINVAL;
    /* user nice system idle iowait irq softirq steal: busy = all but idle and iowait (guest
     * time is already inside user and nice) */
    unsigned long long busy = t[0] + t[1] + t[2] + t[5] + t[6] + t[7];
    u.has_cpu = true;
    u.cpu_ns = (uint64_t)(busy / (unsigned long long)clk_tck) * 1000000000ull +
               (uint64_t)(busy % (unsigned long long)clk_tck) * 1000000000ull / (uint64_t)clk_tck;
    if ((r = kite_read_file(mp, CG_FILE_MAX, &mi, &len)) < 0) return r;
    uint64_t total, free_, inactive = 0;
    if (!meminfo(mi, "MemTotal", &total) || !meminfo(mi, "MemFree", &free_)) return -EINVAL;
    meminfo(mi, "Inactive(file)", &inactive);
    u.has_memory = true;
    u.memory_usage = total > free_ ? total - free_ : 0;
    u.memory_working_set = working_set(u.memory_usage, inactive);
    *ret = u;
    return 0;
}
