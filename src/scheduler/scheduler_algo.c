/* The scheduler's filters, scores and messages (scheduler.h): pure functions of a pod and
 * what is known of a node, with upstream's reason strings. */
#include "api/podrequests.h"
#include "api/quantity.h"
#include "api/registry.h"
#include "api/scheduling.h"
#include "base/buf.h"
#include "scheduler/scheduler.h"

#include <stdio.h>

/* upstream's reasons (pkg/scheduler/framework/plugins) */
#define R_UNSCHEDULABLE "node(s) were unschedulable"
#define R_NOT_READY "node(s) were not ready"
#define R_AFFINITY "node(s) didn't match Pod's node affinity/selector"
#define R_TOO_MANY_PODS "Too many pods"
#define R_CPU "Insufficient cpu"
#define R_MEMORY "Insufficient memory"

#define MAX_NODE_SCORE 100
#define MB (INT64_C(1024) * 1024)
#define IMAGE_MIN_THRESHOLD (23 * MB)
#define IMAGE_MAX_CONTAINER_THRESHOLD (1000 * MB)


/* A quantity field of a resource list: cpu in millicores, others in whole units rounded up,
 * capped at KITE_SCHED_QUANTITY_MAX so that a node's sums of its pods' requests stay exact
 * (and add and remove in step) for thousands of huge requests before they saturate. */
static bool quantity(json_object *list, const char *name, bool milli, int64_t *ret) {
    json_object *q = kite_obj_get(list, name);
    if (!q) return false;
    int64_t m;
    if (json_object_is_type(q, json_type_int)) m = kite_sat_mul(json_object_get_int64(q), 1000);
    else if (!json_object_is_type(q, json_type_string) || kite_quantity_parse_milli(json_object_get_string(q), &m) < 0) return false;
    int64_t v = milli ? m : m / 1000 + (m % 1000 > 0);
    *ret = KITE_MAX(-KITE_SCHED_QUANTITY_MAX, KITE_MIN(v, KITE_SCHED_QUANTITY_MAX));
    return true;
}

void kite_sched_pod_requests(json_object *pod, bool nonzero, struct kite_sched_req *ret) {
    struct kite_pod_requests r;
    kite_pod_requests(pod, nonzero, &r);
    int64_t mem = r.mem_m / 1000 + (r.mem_m % 1000 > 0);
    *ret = (struct kite_sched_req){.cpu = KITE_MAX(-KITE_SCHED_QUANTITY_MAX, KITE_MIN(r.cpu_m, KITE_SCHED_QUANTITY_MAX)),
                                   .mem = KITE_MAX(-KITE_SCHED_QUANTITY_MAX, KITE_MIN(mem, KITE_SCHED_QUANTITY_MAX))};
}

void kite_sched_nodeinfo_init(struct kite_sched_nodeinfo *ni, json_object *node) {
    *ni = (struct kite_sched_nodeinfo){.node = node};
    json_object *st = kite_obj_get(node, "status"), *al = kite_obj_get(st, "allocatable");
    if (!al) al = kite_obj_get(st, "capacity");
    quantity(al, "cpu", true, &ni->alloc_cpu);
    quantity(al, "memory", false, &ni->alloc_mem);
    quantity(al, "pods", false, &ni->alloc_pods);
}

void kite_sched_verdict_release(struct kite_sched_verdict *v) {
    for (size_t i = 0; i < v->n; i++) free(v->reasons[i]);
    *v = (struct kite_sched_verdict){0};
}

static void reject(struct kite_sched_verdict *v, const char *filter, bool unresolvable, char *reason) {
    v->filter = filter;
    v->unresolvable = v->unresolvable || unresolvable;
    if (v->n < KITE_SCHED_MAX_REASONS) v->reasons[v->n++] = reason;
    else free(reason);
}

/* ---- filters: each returns true when the node passes ---- */

struct fctx {
    json_object *pod, *spec, *tols;
    const struct kite_sched_req *req;
    const struct kite_sched_nodeinfo *ni;
    json_object *nspec;
};

static bool f_unschedulable(const struct fctx *c, struct kite_sched_verdict *v) {
    json_object *u = kite_obj_get(c->nspec, "unschedulable");
    if (!u || !json_object_get_boolean(u) || kite_tolerations_tolerate(c->tols, "node.kubernetes.io/unschedulable", "NoSchedule")) return true;
    reject(v, "NodeUnschedulable", true, kite_strdup(R_UNSCHEDULABLE));
    return false;
}

static bool schedule_effect(json_object *taint) {
    const char *effect = kite_obj_str(taint, "effect");
    return kite_streq(effect, "NoSchedule") || kite_streq(effect, "NoExecute");
}

static bool f_taints(const struct fctx *c, struct kite_sched_verdict *v) {
    json_object *t = kite_find_untolerated_taint(kite_obj_get(c->nspec, "taints"), c->tols, schedule_effect);
    if (!t) return true;
    const char *k = kite_obj_str(t, "key"), *val = kite_obj_str(t, "value");
    reject(v, "TaintToleration", true, kite_asprintf("node(s) had untolerated taint {%s: %s}", k ? k : "", val ? val : ""));
    return false;
}

static bool f_ready(const struct fctx *c, struct kite_sched_verdict *v) {
    json_object *conds = kite_obj_get(kite_obj_get(c->ni->node, "status"), "conditions");
    const char *status = NULL;
    for (size_t i = 0; i < kite_array_len(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), "Ready"))
            status = kite_obj_str(json_object_array_get_idx(conds, i), "status");
    if (kite_streq(status, "True")) return true;
    /* what the node lifecycle controller taints such a node with: a pod tolerating that (a
     * DaemonSet's) may go there, as it could once the taint is on */
    if (kite_tolerations_tolerate(c->tols, kite_streq(status, "False") ? "node.kubernetes.io/not-ready" : "node.kubernetes.io/unreachable",
                                  "NoSchedule"))
        return true;
    reject(v, "NodeReady", true, kite_strdup(R_NOT_READY));
    return false;
}

static bool f_affinity(const struct fctx *c, struct kite_sched_verdict *v) {
    bool ok = kite_pod_node_affinity_matches(c->pod, c->ni->node, kite_meta_str(c->ni->node, "name"));
    if (!ok) reject(v, "NodeAffinity", true, kite_strdup(R_AFFINITY));
    return ok;
}

void kite_sched_fit(const struct kite_sched_req *req, const struct kite_sched_nodeinfo *ni, struct kite_sched_verdict *v) {
    /* Kubernetes 1.32: short resources are Unschedulable (preemption may help), never
     * unresolvable */
    if (ni->npods + 1 > ni->alloc_pods) reject(v, "NodeResourcesFit", false, kite_strdup(R_TOO_MANY_PODS));
    if (req->cpu > 0 && req->cpu > ni->alloc_cpu - ni->requested.cpu) reject(v, "NodeResourcesFit", false, kite_strdup(R_CPU));
    if (req->mem > 0 && req->mem > ni->alloc_mem - ni->requested.mem) reject(v, "NodeResourcesFit", false, kite_strdup(R_MEMORY));
}

static bool f_fit(const struct fctx *c, struct kite_sched_verdict *v) {
    kite_sched_fit(c->req, c->ni, v);
    return v->n == 0;
}

/* upstream's default filter order (NodeName and NodePorts aside), kite's NodeReady after the
 * taints so that a tainted node shows the taint */
static bool (*const FILTERS[])(const struct fctx *, struct kite_sched_verdict *) = {
    f_unschedulable, f_taints, f_ready, f_affinity, f_fit,
};

void kite_sched_filter(json_object *pod, const struct kite_sched_req *req, const struct kite_sched_nodeinfo *ni,
                       struct kite_sched_verdict *ret) {
    *ret = (struct kite_sched_verdict){0};
    json_object *spec = kite_obj_get(pod, "spec");
    struct fctx c = {pod, spec, kite_obj_get(spec, "tolerations"), req, ni, kite_obj_get(ni->node, "spec")};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(FILTERS); i++)
        if (!FILTERS[i](&c, ret)) return;
}

/* ---- scores ---- */

static int64_t least_requested(int64_t requested, int64_t capacity) {
    if (capacity <= 0 || requested > capacity) return 0;
    return (capacity - requested) * MAX_NODE_SCORE / capacity;
}

int64_t kite_sched_score_least_allocated(const struct kite_sched_req *pod, const struct kite_sched_nodeinfo *ni) {
    /* cpu and memory, weight 1 each (upstream's default LeastAllocated resources) */
    return (least_requested(kite_sat_add(ni->nonzero.cpu, pod->cpu), ni->alloc_cpu) +
            least_requested(kite_sat_add(ni->nonzero.mem, pod->mem), ni->alloc_mem)) / 2;
}

int64_t kite_sched_score_image_locality(int64_t sum, size_t n_containers) {
    int64_t max = IMAGE_MAX_CONTAINER_THRESHOLD * (int64_t)n_containers;
    if (max <= IMAGE_MIN_THRESHOLD) return 0;
    sum = KITE_MIN(KITE_MAX(sum, IMAGE_MIN_THRESHOLD), max);
    return MAX_NODE_SCORE * (sum - IMAGE_MIN_THRESHOLD) / (max - IMAGE_MIN_THRESHOLD);
}

char *kite_sched_normalized_image(const char *name) {
    const char *colon = strrchr(name, ':'), *slash = strrchr(name, '/');
    if (!colon || (slash && colon < slash)) return kite_asprintf("%s:latest", name);
    return kite_strdup(name);
}

/* ---- the FitError message ---- */

struct count {
    const char *reason;
    size_t n;
};

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* " r1, r2." for the reasons counted over v[0..n) */
static void histogram(struct kite_buf *b, const struct kite_sched_verdict *v, size_t n) {
    struct count *c = NULL;
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < v[i].n; j++) {
            size_t k = 0;
            while (k < nc && strcmp(c[k].reason, v[i].reasons[j]) != 0) k++;
            if (k == nc) {
                c = kite_realloc(c, (nc + 1) * sizeof *c);
                c[nc++] = (struct count){v[i].reasons[j], 0};
            }
            c[k].n++;
        }
    char **s = kite_calloc(nc ? nc : 1, sizeof *s);
    for (size_t k = 0; k < nc; k++) s[k] = kite_asprintf("%zu %s", c[k].n, c[k].reason);
    /* upstream sorts the formatted strings: "10 x" before "2 y" */
    qsort(s, nc, sizeof *s, cmp_str);
    for (size_t k = 0; k < nc; k++) {
        kite_buf_printf(b, "%s%s", k ? ", " : " ", s[k]);
        free(s[k]);
    }
    if (nc) kite_buf_printf(b, ".");
    free(s);
    free(c);
}

char *kite_sched_fit_message(size_t n_nodes, const struct kite_sched_verdict *v, size_t n, const char *post) {
    struct kite_buf b = {0};
    kite_buf_printf(&b, "0/%zu nodes are available:", n_nodes);
    histogram(&b, v, n);
    if (post) kite_buf_printf(&b, " preemption: %s", post);
    return kite_buf_detach(&b, NULL);
}

size_t kite_sched_feasible_to_find(size_t n_nodes) {
    if (n_nodes < KITE_SCHED_MIN_FEASIBLE) return n_nodes;
    size_t drop = n_nodes / 125, pct = drop < 50 ? 50 - drop : 0;
    if (pct < KITE_SCHED_MIN_FEASIBLE_PERCENT) pct = KITE_SCHED_MIN_FEASIBLE_PERCENT;
    size_t n = n_nodes * pct / 100;
    return n < KITE_SCHED_MIN_FEASIBLE ? KITE_SCHED_MIN_FEASIBLE : n;
}
