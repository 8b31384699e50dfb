/* The first half of a node status computation (nodestatus.h, kite_nodestatus_read): every
 * source read once, reduced to what the status shows of it, and digested.
 *
 * Why: a node whose machine does not change computes the same status every 10 s, and building
 * it (a json-c tree with ~50 images) and comparing it with the acknowledged status is most of
 * what a status sync costs; the agent keeps the digest of the last read whose build found
 * nothing to report, and skips the build and the comparison while the digest and the
 * acknowledged status stay the same (heartbeat.c). For that the digest must cover everything
 * the build uses besides prev_status and the clock, and nothing that changes without changing
 * the status: so the readings enter it as the verdicts the setters make of them
 * (MemAvailable < threshold, free bytes or inodes < threshold, pid headroom < threshold), the
 * build (the setters) uses those same verdicts, and the clock enters the status only as
 * lastHeartbeatTime and the lastTransitionTime of a flip (kite_ns_set_condition), both of
 * which the comparison with the acknowledged status ignores or reports as a change anyway.
 * The digest is FNV-1a over the values, each with its length or a marker for "none". */
#include "agent/nodestatus/internal.h"

#include <arpa/inet.h>
#include <stdio.h>

#include "agent/runtime/runtime.h"

struct hash {
    uint64_t h;
};

static void h_bytes(struct hash *h, const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t x = h->h;
    for (size_t i = 0; i < n; i++) {
        x ^= b[i];
        x *= UINT64_C(0x100000001b3);
    }
    h->h = x;
}

static void h_u64(struct hash *h, uint64_t v) { h_bytes(h, &v, sizeof v); }
static void h_i64(struct hash *h, int64_t v) { h_u64(h, (uint64_t)v); }
static void h_dbl(struct hash *h, double v) { h_bytes(h, &v, sizeof v); }

/* A string with its length; NULL distinct from "". */
static void h_str(struct hash *h, const char *s) {
    if (!s) {
        h_u64(h, UINT64_MAX);
        return;
    }
    size_t n = strlen(s);
    h_u64(h, n);
    h_bytes(h, s, n);
}

static void h_cfg(struct hash *h, const struct kite_ns_config *c) {
    const char *strs[] = {c->node_name, c->node_ip, c->external_ip, c->hostname, c->root_dir, c->kubelet_version};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(strs); i++) h_str(h, strs[i]);
    const int64_t nums[] = {c->max_pods,
                            c->max_images,
                            c->daemon_port,
                            c->kube_reserved_cpu_m,
                            c->kube_reserved_mem_m,
                            c->kube_reserved_eph_m,
                            c->system_reserved_cpu_m,
                            c->system_reserved_mem_m,
                            c->system_reserved_eph_m,
                            c->evict_mem_bytes,
                            c->evict_nodefs_bytes,
                            c->evict_inodes_count,
                            c->evict_pid_count};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(nums); i++) h_i64(h, nums[i]);
    h_dbl(h, c->evict_mem_pct);
    h_dbl(h, c->evict_nodefs_pct);
    h_dbl(h, c->evict_inodes_pct);
    h_dbl(h, c->evict_pid_pct);
}

static void h_facts(struct hash *h, const struct ns_facts *f) {
    const char *strs[] = {f->machine_id, f->system_uuid, f->boot_id, f->kernel, f->arch, f->os_image};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(strs); i++) h_str(h, strs[i]);
    /* cpus: see kite_nodestatus_read */
    h_i64(h, f->huge_r);
    if (f->huge_r == 0) {
        h_u64(h, f->n_huge);
        for (size_t i = 0; i < f->n_huge; i++) {
            h_i64(h, f->huge[i].page_bytes);
            h_i64(h, f->huge[i].total_bytes);
        }
    }
    h_i64(h, f->mem_total_r);
    if (f->mem_total_r == 0) h_i64(h, f->mem_total);
    /* pid_limit: only through PIDPressure's verdict */
}

static void h_images(struct hash *h, const struct kite_image *v, size_t n) {
    h_u64(h, n);
    for (size_t i = 0; i < n; i++) {
        h_i64(h, v[i].size_bytes);
        h_u64(h, v[i].n_names);
        for (size_t j = 0; j < v[i].n_names; j++) h_str(h, v[i].names[j]);
    }
}

static bool mem_pressure(struct ns_ctx *c, const struct ns_facts *f) {
    const struct kite_ns_config *cfg = c->cfg;
    int64_t avail = -1, total = f->mem_total_r == 0 ? f->mem_total : -1;
    int r = kite_ns_mem_available(c, &avail);
    int64_t threshold = kite_ns_threshold(cfg->evict_mem_bytes, cfg->evict_mem_pct, total);
    return r == 0 && threshold >= 0 && avail < threshold;
}

static bool disk_pressure(const struct kite_ns_config *cfg, uint64_t total_b, uint64_t avail, uint64_t inodes_total,
                          uint64_t inodes_free) {
    int64_t total = total_b > INT64_MAX ? INT64_MAX : (int64_t)total_b;
    int64_t bytes = kite_ns_threshold(cfg->evict_nodefs_bytes, cfg->evict_nodefs_pct, total);
    if (bytes >= 0 && avail < (uint64_t)bytes) return true;
    /* Filesystems without an inode table (btrfs reports 0 total) never run out of inodes. */
    if (inodes_total > 0) {
        int64_t itotal = inodes_total > INT64_MAX ? INT64_MAX : (int64_t)inodes_total;
        int64_t threshold = kite_ns_threshold(cfg->evict_inodes_count, cfg->evict_inodes_pct, itotal);
        if (threshold >= 0 && inodes_free < (uint64_t)threshold) return true;
    }
    return false;
}

static bool pid_pressure(struct ns_ctx *c, const struct ns_facts *f) {
    const struct kite_ns_config *cfg = c->cfg;
    /* Kubernetes sets no pid.available threshold by default: then there is nothing to read. */
    if (cfg->evict_pid_count < 0 && cfg->evict_pid_pct < 0) return false;
    int64_t limit = f->pid_limit, running;
    if (f->pid_limit_r != 0 || kite_ns_tasks_running(c, &running) != 0) return false;
    int64_t threshold = kite_ns_threshold(cfg->evict_pid_count, cfg->evict_pid_pct, limit);
    return threshold >= 0 && limit - running < threshold;
}

static bool is_ip(const char *s) {
    unsigned char addr[sizeof(struct in6_addr)];
    return s && (inet_pton(AF_INET, s, addr) == 1 || inet_pton(AF_INET6, s, addr) == 1);
}

int kite_nodestatus_read(const struct kite_ns_config *cfg, const struct kite_ns_sources *src,
                         struct kite_ns_inputs **ret) {
    if (!cfg || !src || !ret) return -EINVAL;
    struct kite_ns_inputs *in = kite_calloc(1, sizeof *in);
    struct ns_ctx c = {.cfg = cfg, .src = src, .sysroot = src->sysroot ? src->sysroot : ""};
    struct hash h = {UINT64_C(0xcbf29ce484222325)};
    h_cfg(&h, cfg);

    /* The root filesystem is read once: capacity and DiskPressure must agree. */
    const char *root = cfg->root_dir ? cfg->root_dir : "/";
    uint64_t total = 0, avail = 0, inodes = 0, ifree = 0;
    int r = src->statfs ? src->statfs(root, &total, &avail, &inodes, &ifree, src->ud)
                        : kite_ns_statfs(root, &total, &avail, &inodes, &ifree);
    in->fs_ok = r == 0;
    in->fs_total = in->fs_ok ? total : 0;
    in->disk_pressure = in->fs_ok && disk_pressure(cfg, total, avail, inodes, ifree);
    h_u64(&h, in->fs_ok);
    h_u64(&h, in->fs_total);
    h_u64(&h, in->disk_pressure);

    in->facts = kite_ns_cache_facts(&c, &in->own);
    h_facts(&h, in->facts);
    in->mem_pressure = mem_pressure(&c, in->facts);
    in->pid_pressure = pid_pressure(&c, in->facts);
    h_u64(&h, in->mem_pressure);
    h_u64(&h, in->pid_pressure);

    if (src->online_cpus) {
        int n = src->online_cpus(src->ud);
        in->cpus = n;
        in->cpus_r = n > 0 ? 0 : n == 0 ? -ENODATA : n;
    } else {
        in->cpus_r = in->facts->cpus_r;
        in->cpus = in->facts->cpus;
    }
    h_i64(&h, in->cpus_r);
    h_i64(&h, in->cpus_r == 0 ? in->cpus : 0);

    if (cfg->node_ip) {
        if (is_ip(cfg->node_ip))
            snprintf(in->ip, sizeof in->ip, "%s", cfg->node_ip);
        else
            in->ip_r = -EINVAL;
    } else {
        in->ip_r = src->default_route_ip ? src->default_route_ip(in->ip, sizeof in->ip, src->ud)
                                         : kite_ns_default_route_ip(c.sysroot, in->ip, sizeof in->ip);
        if (in->ip_r == 0 && !is_ip(in->ip)) in->ip_r = -EINVAL;
    }
    if (in->ip_r != 0) in->ip[0] = 0;
    h_i64(&h, in->ip_r);
    h_str(&h, in->ip);

    struct kite_runtime *rt = src->runtime;
    if (rt && rt->ops->version) {
        _cleanup_free_ char *name = NULL, *version = NULL;
        in->version_r = rt->ops->version(rt, &name, &version);
        if (in->version_r == 0) in->version = kite_asprintf("%s://%s", name, version);
    }
    h_i64(&h, in->version_r);
    h_str(&h, in->version);

    uint64_t gen;
    if (!rt || !rt->ops->list_images) {
        in->images_listed = true; /* none */
        h_u64(&h, 0);
    } else if (src->images_gen && src->images_gen(src->ud, &gen) == 0) {
        h_u64(&h, 1);
        h_u64(&h, gen);
    } else {
        in->images_listed = true;
        in->images_r = rt->ops->list_images(rt, &in->images, &in->n_images);
        h_u64(&h, 2);
        h_i64(&h, in->images_r);
        if (in->images_r == 0) h_images(&h, in->images, in->n_images);
    }

    /* Ready's inputs, as kite_ns_set_ready reads them from src */
    h_u64(&h, src->runtime_ready);
    h_str(&h, src->runtime_ready ? NULL : src->runtime_error);
    h_u64(&h, src->pleg_healthy);
    h_str(&h, src->pleg_healthy ? NULL : src->pleg_error);

    in->digest = h.h;
    *ret = in;
    return 0;
}

uint64_t kite_ns_inputs_digest(const struct kite_ns_inputs *in) { return in->digest; }

void kite_ns_inputs_free(struct kite_ns_inputs *in) {
    if (!in) return;
    kite_ns_facts_release(&in->own);
    free(in->version);
    if (in->images_r == 0) kite_images_free(in->images, in->n_images);
    free(in);
}
