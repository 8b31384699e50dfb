/* PodRequests (podrequests.h). */
#include "api/podrequests.h"
#include "api/quantity.h"
#include "api/registry.h"

/* the scheduler's defaults for containers that request nothing (pkg/scheduler/util) */
#define NONZERO_CPU_M 100
#define NONZERO_MEM_M (INT64_C(200) * 1024 * 1024 * 1000)


/* A quantity of a resource list in milli-units; false when absent or malformed. */
static bool quantity(json_object *list, const char *name, int64_t *ret) {
    json_object *q = kite_obj_get(list, name);
    if (!q) return false;
    if (json_object_is_type(q, json_type_int)) *ret = kite_sat_mul(json_object_get_int64(q), 1000);
    else if (!json_object_is_type(q, json_type_string) || kite_quantity_parse_milli(json_object_get_string(q), ret) < 0) return false;
    return true;
}

static void container_req(json_object *c, bool nonzero, struct kite_pod_requests *r) {
    json_object *req = kite_obj_get(kite_obj_get(c, "resources"), "requests");
    *r = (struct kite_pod_requests){0};
    if (!quantity(req, "cpu", &r->cpu_m) && nonzero) r->cpu_m = NONZERO_CPU_M;
    if (!quantity(req, "memory", &r->mem_m) && nonzero) r->mem_m = NONZERO_MEM_M;
}

static void add(struct kite_pod_requests *a, const struct kite_pod_requests *b) {
    a->cpu_m = kite_sat_add(a->cpu_m, b->cpu_m), a->mem_m = kite_sat_add(a->mem_m, b->mem_m);
}
static void maxr(struct kite_pod_requests *a, const struct kite_pod_requests *b) {
    a->cpu_m = KITE_MAX(a->cpu_m, b->cpu_m), a->mem_m = KITE_MAX(a->mem_m, b->mem_m);
}

void kite_pod_requests(json_object *pod, bool nonzero, struct kite_pod_requests *ret) {
    json_object *spec = kite_obj_get(pod, "spec"), *cs = kite_obj_get(spec, "containers"), *ics = kite_obj_get(spec, "initContainers");
    struct kite_pod_requests sum = {0}, init_max = {0}, sidecars = {0}, r;
    for (size_t i = 0; i < kite_array_len(cs); i++) {
        container_req(json_object_array_get_idx(cs, i), nonzero, &r);
        add(&sum, &r);
    }
    for (size_t i = 0; i < kite_array_len(ics); i++) {
        json_object *c = json_object_array_get_idx(ics, i);
        container_req(c, nonzero, &r);
        if (kite_streq(kite_obj_str(c, "restartPolicy"), "Always")) {
            /* a sidecar runs beside everything after it */
            add(&sum, &r);
            add(&sidecars, &r);
            r = sidecars;
        } else {
            add(&r, &sidecars);
        }
        maxr(&init_max, &r);
    }
    maxr(&sum, &init_max);
    json_object *oh = kite_obj_get(spec, "overhead");
    int64_t v;
    if (quantity(oh, "cpu", &v)) sum.cpu_m = kite_sat_add(sum.cpu_m, v);
    if (quantity(oh, "memory", &v)) sum.mem_m = kite_sat_add(sum.mem_m, v);
    *ret = sum;
}
