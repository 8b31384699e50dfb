/* Machine readers: small parsers over /proc, /sys and /etc, every path under a sysroot so tests
 * can hand in a fake tree. The parse step of each reader is separate so it can be fed text. */
#include "agent/nodestatus/internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/buf.h"

/* Hugepage sizes beyond this are not real (the largest today is 16Gi on ppc64). */
#define NS_MAX_HUGEPAGE_SIZES 16
/* Bound on cpu set size asked of sched_getaffinity (CPU_SETSIZE is only 1024). */
#define NS_MAX_CPUS 65536

int kite_ns_read_file(const char *sysroot, const char *path, char **ret) {
    _cleanup_free_ char *full = kite_asprintf("%s%s", sysroot ? sysroot : "", path);
    return kite_read_file(full, NS_MAX_FILE_BYTES, ret, NULL);
}

int kite_ns_read_value(const char *sysroot, const char *path, char **ret) {
    char *s;
    int r = kite_ns_read_file(sysroot, path, &s);
    if (r < 0) return r;
    size_t start = 0, end = strlen(s);
    while (start < end && isspace((unsigned char)s[start])) start++;
    while (end > start && isspace((unsigned char)s[end - 1])) end--;
    memmove(s, s + start, end - start);
    s[end - start] = '\0';
    *ret = s;
    return 0;
}

int kite_ns_meminfo_bytes(const char *sysroot, const char *key, int64_t *ret) {
    _cleanup_free_ char *text = NULL;
    int r = kite_ns_read_file(sysroot, "/proc/meminfo", &text);
    if (r < 0) return r;
    size_t klen = strlen(key);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            char *p = line + klen + 1, *end;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (errno || end == p || v < 0) return -EINVAL;
            while (*end == ' ') end++;
            /* meminfo's "kB" is KiB; a value with no unit is a count of bytes */
            if (strcmp(end, "kB") == 0) {
                if (v > INT64_MAX / 1024) return -ERANGE;
                v *= 1024;
            } else if (*end) {
                return -EINVAL;
            }
            *ret = v;
            return 0;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int kite_ns_parse_os_release(const char *text, const char *key, char **ret) {
    size_t klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == '=') {
            /* Shell-style value: "..." or '...' quoting, backslash escapes inside "". */
            struct kite_buf b = {0};
            kite_buf_puts(&b, "");
            const char *p = line + klen + 1, *e = line + len;
            char quote = 0;
            for (; p < e; p++) {
                if (!quote && (*p == '"' || *p == '\'')) quote = *p;
                else if (quote && *p == quote) quote = 0;
                else if (quote != '\'' && *p == '\\' && p + 1 < e) kite_buf_putc(&b, *++p);
                else if (!quote && (*p == ' ' || *p == '\t' || *p == '#')) break;
                else kite_buf_putc(&b, *p);
            }
            *ret = kite_buf_detach(&b, NULL);
            return 0;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int kite_ns_os_pretty_name(const char *sysroot, char **ret) {
    _cleanup_free_ char *text = NULL;
    int r = kite_ns_read_file(sysroot, "/etc/os-release", &text);
    if (r == -ENOENT) r = kite_ns_read_file(sysroot, "/usr/lib/os-release", &text);
    if (r < 0) return r;
    return kite_ns_parse_os_release(text, "PRETTY_NAME", ret);
}

int kite_ns_parse_default_route(const char *route_text, char **ret_iface) {
    /* Columns: Iface Destination Gateway Flags RefCnt Use Metric Mask ...; hex, host order. */
    const char *line = strchr(route_text, '\n'); /* skip the header */
    long best_metric = -1;
    char best[IF_NAMESIZE + 1] = "";
    while (line && *++line) {
        char iface[IF_NAMESIZE + 1];
        unsigned long dest, gw, flags, mask;
        long refcnt, use, metric;
        int n = sscanf(line, "%16s %lx %lx %lx %ld %ld %ld %lx", iface, &dest, &gw, &flags, &refcnt,
                       &use, &metric, &mask);
        line = strchr(line, '\n');
        if (n != 8) continue;
        if (dest != 0 || mask != 0 || !(flags & 0x1 /* RTF_UP */)) continue;
        if (best_metric < 0 || metric < best_metric) {
            best_metric = metric;
            memcpy(best, iface, sizeof(best));
        }
    }
    if (best_metric < 0) return -ENOENT;
    *ret_iface = kite_strdup(best);
    return 0;
}

int kite_ns_default_route_ip(const char *sysroot, char *buf, size_t len) {
    _cleanup_free_ char *text = NULL, *iface = NULL;
    int r = kite_ns_read_file(sysroot, "/proc/net/route", &text);
    if (r < 0) return r;
    r = kite_ns_parse_default_route(text, &iface);
    if (r < 0) return r;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) < 0) return -errno;
    r = -EADDRNOTAVAIL;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !kite_streq(i->ifa_name, iface))
            continue;
        const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)i->ifa_addr;
        r = inet_ntop(AF_INET, &sin->sin_addr, buf, (socklen_t)len) ? 0 : -errno;
        break;
    }
    freeifaddrs(ifs);
    return r;
}

int kite_ns_parse_cpu_list(const char *list, int *ret) {
    int count = 0;
    const char *p = list;
    while (*p && *p != '\n') {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0) return -EINVAL;
        p = end;
        if (*p == '-') {
            b = strtol(++p, &end, 10);
            if (end == p || b < a) return -EINVAL;
            p = end;
        }
        if (b - a + 1 > NS_MAX_CPUS - count) return -ERANGE;
        count += (int)(b - a + 1);
        if (*p == ',') p++;
        else if (*p && *p != '\n') return -EINVAL;
    }
    if (count == 0) return -EINVAL;
    *ret = count;
    return 0;
}

int kite_ns_parse_cpu_max(const char *text, int *ret) {
    char quota[32];
    long long period = 100000;
    int n = sscanf(text, "%31s %lld", quota, &period);
    if (n < 1) return -EINVAL;
    if (strcmp(quota, "max") == 0) {
        *ret = 0;
        return 0;
    }
    int64_t q;
    if (kite_parse_int64(quota, &q) < 0 || q <= 0 || period <= 0) return -EINVAL;
    int64_t cpus = (q + period - 1) / period; /* a partial cpu still needs a whole one */
    if (cpus > NS_MAX_CPUS) cpus = NS_MAX_CPUS;
    *ret = (int)cpus;
    return 0;
}

int kite_ns_online_cpus(const char *sysroot, int *ret) {
    int n, r;
    if (!sysroot || !*sysroot) {
        /* The cpus this process may run on: taskset/cpuset-restricted agents see fewer. */
        size_t setsize = CPU_ALLOC_SIZE(NS_MAX_CPUS);
        cpu_set_t *set = CPU_ALLOC(NS_MAX_CPUS);
        if (!set) return -ENOMEM;
        CPU_ZERO_S(setsize, set);
        if (sched_getaffinity(0, setsize, set) < 0) {
            r = -errno;
            CPU_FREE(set);
            return r;
        }
        n = CPU_COUNT_S(setsize, set);
        CPU_FREE(set);
    } else {
        _cleanup_free_ char *list = NULL;
        r = kite_ns_read_value(sysroot, "/sys/devices/system/cpu/online", &list);
        if (r < 0) return r;
        r = kite_ns_parse_cpu_list(list, &n);
        if (r < 0) return r;
    }
    _cleanup_free_ char *max = NULL, *v1_quota = NULL, *v1_period = NULL;
    int quota = 0;
    if (kite_ns_read_value(sysroot, "/sys/fs/cgroup/cpu.max", &max) == 0) {
        (void)kite_ns_parse_cpu_max(max, &quota);
    } else if (kite_ns_read_value(sysroot, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", &v1_quota) == 0 &&
               kite_ns_read_value(sysroot, "/sys/fs/cgroup/cpu/cpu.cfs_period_us", &v1_period) == 0) {
        /* cgroup v1 says the same in two files; a quota of -1 is "max" */
        _cleanup_free_ char *text = kite_asprintf(
            "%s %s", kite_streq(v1_quota, "-1") ? "max" : v1_quota, v1_period);
        (void)kite_ns_parse_cpu_max(text, &quota);
    }
    if (quota > 0 && quota < n) n = quota;
    *ret = n;
    return 0;
}

static int cmp_hugepages(const void *a, const void *b) {
    const struct kite_ns_hugepages *x = a, *y = b;
    return (x->page_bytes > y->page_bytes) - (x->page_bytes < y->page_bytes);
}

int kite_ns_hugepages(const char *sysroot, struct kite_ns_hugepages **ret, size_t *ret_n) {
    _cleanup_free_ char *dir = kite_asprintf("%s/sys/kernel/mm/hugepages", sysroot ? sysroot : "");
    DIR *d = opendir(dir);
    if (!d) return -errno;
    struct kite_ns_hugepages *v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < NS_MAX_HUGEPAGE_SIZES) {
        long long kb;
        char rest[8];
        /* "hugepages-2048kB" */
        if (sscanf(de->d_name, "hugepages-%lldk%7s", &kb, rest) != 2 || strcmp(rest, "B") != 0 ||
            kb <= 0 || kb > INT64_MAX / 1024)
            continue;
        _cleanup_free_ char *path =
            kite_asprintf("/sys/kernel/mm/hugepages/%s/nr_hugepages", de->d_name);
        _cleanup_free_ char *nr = NULL;
        int64_t count;
        if (kite_ns_read_value(sysroot, path, &nr) < 0 || kite_parse_int64(nr, &count) < 0 || count < 0)
            continue;
        int64_t page = kb * 1024;
        if (count > 0 && count > INT64_MAX / 1000 / page) continue; /* must fit as milli */
        v = kite_realloc(v, (n + 1) * sizeof(*v));
        v[n++] = (struct kite_ns_hugepages){.page_bytes = page, .total_bytes = page * count};
    }
    closedir(d);
    if (n) qsort(v, n, sizeof(*v), cmp_hugepages);
    *ret = v;
    *ret_n = n;
    return 0;
}

static int count_pid_dirs(const char *sysroot, int64_t *ret) {
    _cleanup_free_ char *dir = kite_asprintf("%s/proc", sysroot ? sysroot : "");
    DIR *d = opendir(dir);
    if (!d) return -errno;
    int64_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] >= '1' && de->d_name[0] <= '9' &&
            strspn(de->d_name, "0123456789") == strlen(de->d_name))
            n++;
    closedir(d);
    *ret = n;
    return 0;
}

int kite_ns_pid_limit(const char *sysroot, int64_t *ret_limit) {
    _cleanup_free_ char *pid_max = NULL, *threads_max = NULL;
    int64_t limit, tmax;
    int r = kite_ns_read_value(sysroot, "/proc/sys/kernel/pid_max", &pid_max);
    if (r < 0) return r;
    if (kite_parse_int64(pid_max, &limit) < 0) return -EINVAL;
    /* Every thread takes a pid, so threads-max caps the pid space too. */
    if (kite_ns_read_value(sysroot, "/proc/sys/kernel/threads-max", &threads_max) == 0 &&
        kite_parse_int64(threads_max, &tmax) == 0 && tmax < limit)
        limit = tmax;
    *ret_limit = limit;
    return 0;
}

int kite_ns_pid_running(const char *sysroot, int64_t *ret_running) {
    _cleanup_free_ char *loadavg = NULL;
    int64_t running = -1;
    int r;
    /* loadavg's 4th field is "running/total" tasks; total counts threads, which hold pids. */
    if (kite_ns_read_value(sysroot, "/proc/loadavg", &loadavg) == 0) {
        long long run, total;
        if (sscanf(loadavg, "%*s %*s %*s %lld/%lld", &run, &total) == 2 && total >= 0)
            running = total;
    }
    if (running < 0 && (r = count_pid_dirs(sysroot, &running)) < 0) return r;
    *ret_running = running;
    return 0;
}

int kite_ns_pid_stats(const char *sysroot, int64_t *ret_limit, int64_t *ret_running) {
    int64_t limit, running;
    int r = kite_ns_pid_limit(sysroot, &limit);
    if (r < 0) return r;
    if ((r = kite_ns_pid_running(sysroot, &running)) < 0) return r;
    *ret_limit = limit;
    *ret_running = running;
    return 0;
}

int kite_ns_statfs(const char *path, uint64_t *total_bytes, uint64_t *avail_bytes,
              uint64_t *total_inodes, uint64_t *free_inodes) {
    struct statvfs s;
    if (statvfs(path, &s) < 0) return -errno;
    *total_bytes = (uint64_t)s.f_blocks * s.f_frsize;
    *avail_bytes = (uint64_t)s.f_bavail * s.f_frsize;
    *total_inodes = s.f_files;
    *free_inodes = s.f_ffree;
    return 0;
}
