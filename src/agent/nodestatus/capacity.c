/* The MachineInfo setter: nodeInfo's machine ids, capacity and allocatable.
 *
 * allocatable = capacity - kubeReserved - systemReserved - evictionHard, per resource, never
 * below zero (pkg/kubelet/cm GetNodeAllocatableAbsolute + setters.go MachineInfo); memory also
 * loses the hugepages capacity, since pages reserved for hugetlb cannot back ordinary pods.
 * All arithmetic is in milli-units so cpu reservations like "100m" are exact. */
#include "agent/nodestatus/internal.h"

#include <stdio.h>

#include "api/quantity.h"

/* Resource names as capacity/allocatable keys; Go marshals the map sorted by key. */
#define NS_MAX_RESOURCES (4 + 16)

struct res {
    char name[48];
    char value[32];
};

/* Formats bytes-like milli-units as resource.Quantity's BinarySI String(). A whole value
 * >= 1024 that is not a multiple of 1024 prints as a plain integer there ("96589578081"),
 * whatever its decimal zeros; the shared formatter would say "96589578k", so it is handled
 * here. */
static void fmt_bytes(int64_t milli, char out[32]) {
    if (milli % 1000 == 0 && milli >= 1024000 && (milli / 1000) % 1024 != 0) {
        snprintf(out, 32, "%lld", (long long)(milli / 1000));
        return;
    }
    kite_quantity_format_milli(milli, KITE_Q_BINARY_SI, out);
}

static int cmp_res(const void *a, const void *b) {
    return strcmp(((const struct res *)a)->name, ((const struct res *)b)->name);
}

static void put_sorted(json_object *obj, struct res *v, size_t n) {
    qsort(v, n, sizeof(*v), cmp_res);
    for (size_t i = 0; i < n; i++)
        json_object_object_add(obj, v[i].name, json_object_new_string(v[i].value));
}

static void add_res(struct res *v, size_t *n, const char *name, int64_t milli, bool bytes) {
    if (*n >= NS_MAX_RESOURCES) return;
    struct res *r = &v[(*n)++];
    snprintf(r->name, sizeof(r->name), "%s", name);
    if (milli < 0) milli = 0;
    if (bytes)
        fmt_bytes(milli, r->value);
    else
        kite_quantity_format_milli(milli, KITE_Q_DECIMAL_SI, r->value);
}

/* bytes * 1000, saturating: a filesystem beyond 9 PB is reported as 9 PB. */
static int64_t to_milli(int64_t bytes) {
    return bytes > INT64_MAX / 1000 ? INT64_MAX / 1000 * 1000 : bytes * 1000;
}

static void set_info(struct ns_ctx *c, const char *key, const char *v) {
    if (v && *v) json_object_object_add(kite_ns_obj(c, "nodeInfo"), key, json_object_new_string(v));
}

int kite_ns_set_machine(struct ns_ctx *c) {
    const struct kite_ns_config *cfg = c->cfg;
    const struct ns_facts *f = c->facts;
    set_info(c, "machineID", f->machine_id);
    set_info(c, "systemUUID", f->system_uuid);
    set_info(c, "bootID", f->boot_id);

    struct res cap[NS_MAX_RESOURCES], alloc[NS_MAX_RESOURCES];
    size_t ncap = 0, nalloc = 0;
    int err = 0;

    int cpus = c->in->cpus, r = c->in->cpus_r; /* the override's or the facts' */
    if (r == 0 && cpus > 0) {
        int64_t m = (int64_t)cpus * 1000;
        add_res(cap, &ncap, "cpu", m, false);
        add_res(alloc, &nalloc, "cpu", m - cfg->kube_reserved_cpu_m - cfg->system_reserved_cpu_m,
                false);
    } else {
        err = r < 0 ? r : -ENODATA;
    }

    /* hugepages: reported for every size the kernel offers, allocatable = capacity */
    int64_t huge_total = 0;
    if (f->huge_r == 0) {
        for (size_t i = 0; i < f->n_huge; i++) {
            const struct kite_ns_hugepages *hp = &f->huge[i];
            char size[32];
            fmt_bytes(hp->page_bytes * 1000, size);
            char name[48];
            snprintf(name, sizeof(name), "hugepages-%s", size);
            add_res(cap, &ncap, name, hp->total_bytes * 1000, true);
            add_res(alloc, &nalloc, name, hp->total_bytes * 1000, true);
            huge_total += hp->total_bytes;
        }
    }

    if ((r = f->mem_total_r) == 0) {
        int64_t mem = f->mem_total;
        int64_t evict = kite_ns_threshold(cfg->evict_mem_bytes, cfg->evict_mem_pct, mem);
        int64_t m = to_milli(mem);
        add_res(cap, &ncap, "memory", m, true);
        add_res(alloc, &nalloc, "memory",
                m - cfg->kube_reserved_mem_m - cfg->system_reserved_mem_m -
                    to_milli(evict > 0 ? evict : 0) - to_milli(huge_total),
                true);
    } else {
        err = r;
    }

    if (c->fs_ok) {
        int64_t total = c->fs_total > INT64_MAX ? INT64_MAX : (int64_t)c->fs_total;
        int64_t evict = kite_ns_threshold(cfg->evict_nodefs_bytes, cfg->evict_nodefs_pct, total);
        int64_t m = to_milli(total);
        add_res(cap, &ncap, "ephemeral-storage", m, true);
        add_res(alloc, &nalloc, "ephemeral-storage",
                m - cfg->kube_reserved_eph_m - cfg->system_reserved_eph_m -
                    to_milli(evict > 0 ? evict : 0),
                true);
    } else {
        err = -ENODATA;
    }

    add_res(cap, &ncap, "pods", (int64_t)cfg->max_pods * 1000, false);
    add_res(alloc, &nalloc, "pods", (int64_t)cfg->max_pods * 1000, false);

    put_sorted(kite_ns_obj(c, "capacity"), cap, ncap);
    put_sorted(kite_ns_obj(c, "allocatable"), alloc, nalloc);
    return err;
}
