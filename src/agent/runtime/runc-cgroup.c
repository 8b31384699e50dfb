/* The runc runtime: cgroups (runc-int.h). */
#include "agent/runtime/runc-int.h"

/* ---- cgroups ----------------------------------------------------------------------------- */

/* The OOM-kill count of a cgroup: v2 memory.events or v1 memory.oom_control, both "oom_kill N". */
int64_t kite_rc_cgroup_oom_kills(const char *cg) {
    const char *files[] = {"/sys/fs/cgroup%s/memory.events", "/sys/fs/cgroup/memory%s/memory.oom_control"};
    for (size_t i = 0; i < 2; i++) {
        _cleanup_free_ char *p = kite_asprintf(files[i], cg), *t = NULL;
        size_t len = 0;
        if (kite_read_file(p, 4096, &t, &len) < 0) continue;
        const char *k = strstr(t, "oom_kill ");
        if (k) return strtoll(k + 9, NULL, 10);
    }
    return 0;
}

/* Removes a cgroup (empty by now) in the v2 tree and every v1 hierarchy. */
void kite_rc_cgroup_remove(const char *cg) {
    _cleanup_free_ char *v2 = kite_asprintf("/sys/fs/cgroup%s", cg);
    rmdir(v2);
    DIR *d = opendir("/sys/fs/cgroup");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        _cleanup_free_ char *p = kite_asprintf("/sys/fs/cgroup/%s%s", e->d_name, cg);
        rmdir(p);
    }
    closedir(d);
}

bool kite_rc_cgroup_v2_memory(void) {
    _cleanup_free_ char *t = NULL;
    size_t len = 0;
    return kite_read_file("/sys/fs/cgroup/cgroup.controllers", 4096, &t, &len) == 0 && strstr(t, "memory");
}
