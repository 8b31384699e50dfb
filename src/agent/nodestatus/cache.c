/* The machine facts and readings the setters use, read together and kept per sysroot
 * (nodestatus.h, kite_ns_cache): what cAdvisor's MachineInfo caches for the kubelet is read once
 * per facts TTL, not on every computation; MemAvailable and the running tasks once per live TTL
 * (0: every computation). Without a cache the facts are read for each computation, as before. */
#include "agent/nodestatus/internal.h"

#include <sys/utsname.h>

struct kite_ns_cache {
    char *sysroot;
    int64_t facts_ttl, live_ttl;
    struct ns_facts facts;
    bool have_facts;
    int64_t facts_at; /* mono ns of the last load */
    /* live readings: result, value, when */
    bool have_avail, have_running;
    int avail_r, running_r;
    int64_t avail, running;
    int64_t avail_at, running_at;
    struct kite_ns_cache_stats stats;
};

static char *read_first(const char *sysroot, const char *const *paths) {
    for (const char *const *p = paths; *p; p++) {
        char *v = NULL;
        if (kite_ns_read_value(sysroot, *p, &v) == 0 && *v) return v;
        free(v);
    }
    return NULL;
}

void kite_ns_facts_read(const char *sysroot, struct ns_facts *f) {
    static const char *const machine_id[] = {"/etc/machine-id", "/var/lib/dbus/machine-id", NULL};
    static const char *const uuid[] = {"/sys/class/dmi/id/product_uuid", NULL};
    static const char *const boot_id[] = {"/proc/sys/kernel/random/boot_id", NULL};
    memset(f, 0, sizeof(*f));
    if (!sysroot) sysroot = "";
    f->machine_id = read_first(sysroot, machine_id);
    f->system_uuid = read_first(sysroot, uuid);
    f->boot_id = read_first(sysroot, boot_id);

    /* kernel and arch come from the sysroot's /proc when it has them (tests, chroots), else
     * uname(2): on the real machine both are the same kernel's answer. */
    struct utsname u;
    bool have_uname = uname(&u) == 0;
    char *v = NULL;
    if (kite_ns_read_value(sysroot, "/proc/sys/kernel/osrelease", &v) == 0)
        f->kernel = TAKE_PTR(v);
    else if (!*sysroot && have_uname)
        f->kernel = kite_strdup(u.release);
    free(v);
    v = NULL;
    if (kite_ns_read_value(sysroot, "/proc/sys/kernel/arch", &v) == 0)
        f->arch = kite_strdup(kite_ns_goarch(v));
    else if (have_uname)
        f->arch = kite_strdup(kite_ns_goarch(u.machine));
    free(v);
    v = NULL;
    if (kite_ns_os_pretty_name(sysroot, &v) == 0) f->os_image = TAKE_PTR(v);
    free(v);

    f->cpus_r = kite_ns_online_cpus(sysroot, &f->cpus);
    f->huge_r = kite_ns_hugepages(sysroot, &f->huge, &f->n_huge);
    f->mem_total_r = kite_ns_meminfo_bytes(sysroot, "MemTotal", &f->mem_total);
    f->pid_limit_r = kite_ns_pid_limit(sysroot, &f->pid_limit);
}

void kite_ns_facts_release(struct ns_facts *f) {
    free(f->machine_id);
    free(f->system_uuid);
    free(f->boot_id);
    free(f->kernel);
    free(f->arch);
    free(f->os_image);
    free(f->huge);
    memset(f, 0, sizeof(*f));
}

struct kite_ns_cache *kite_ns_cache_new(const char *sysroot, int64_t facts_ttl_ns, int64_t live_ttl_ns) {
    struct kite_ns_cache *k = kite_calloc(1, sizeof(*k));
    k->sysroot = kite_strdup(sysroot ? sysroot : "");
    k->facts_ttl = facts_ttl_ns > 0 ? facts_ttl_ns : 0;
    k->live_ttl = live_ttl_ns > 0 ? live_ttl_ns : 0;
    return k;
}

void kite_ns_cache_free(struct kite_ns_cache *k) {
    if (!k) return;
    kite_ns_facts_release(&k->facts);
    free(k->sysroot);
    free(k);
}

void kite_ns_cache_get_stats(const struct kite_ns_cache *k, struct kite_ns_cache_stats *ret) {
    *ret = k->stats;
}

/* Whether a value read at `at` is still good at now (a clock that went back is no excuse). */
static bool fresh(bool have, int64_t at, int64_t now, int64_t ttl) {
    return have && ttl > 0 && now >= at && now - at < ttl;
}

static int64_t mono_now(struct ns_ctx *c) {
    return kite_now_mono(c->src->clock ? c->src->clock : kite_clock_real());
}

const struct ns_facts *kite_ns_cache_facts(struct ns_ctx *c, struct ns_facts *own) {
    struct kite_ns_cache *k = c->src->cache;
    if (!k) {
        kite_ns_facts_read(c->sysroot, own);
        return own;
    }
    int64_t now = mono_now(c);
    if (!fresh(k->have_facts, k->facts_at, now, k->facts_ttl)) {
        kite_ns_facts_release(&k->facts);
        kite_ns_facts_read(k->sysroot, &k->facts);
        k->have_facts = true;
        k->facts_at = now;
        k->stats.fact_loads++;
    }
    return &k->facts;
}

int kite_ns_mem_available(struct ns_ctx *c, int64_t *ret) {
    struct kite_ns_cache *k = c->src->cache;
    if (!k) return kite_ns_meminfo_bytes(c->sysroot, "MemAvailable", ret);
    int64_t now = mono_now(c);
    if (!fresh(k->have_avail, k->avail_at, now, k->live_ttl)) {
        k->avail_r = kite_ns_meminfo_bytes(k->sysroot, "MemAvailable", &k->avail);
        k->have_avail = true;
        k->avail_at = now;
        k->stats.meminfo_reads++;
    }
    if (k->avail_r == 0) *ret = k->avail;
    return k->avail_r;
}

int kite_ns_tasks_running(struct ns_ctx *c, int64_t *ret) {
    struct kite_ns_cache *k = c->src->cache;
    if (!k) return kite_ns_pid_running(c->sysroot, ret);
    int64_t now = mono_now(c);
    if (!fresh(k->have_running, k->running_at, now, k->live_ttl)) {
        k->running_r = kite_ns_pid_running(k->sysroot, &k->running);
        k->have_running = true;
        k->running_at = now;
        k->stats.loadavg_reads++;
    }
    if (k->running_r == 0) *ret = k->running;
    return k->running_r;
}
