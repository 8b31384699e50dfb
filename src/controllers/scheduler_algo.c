/* The scheduler's filters, scores and messages (scheduler.h): pure functions of a pod and
 * what is known of a node, with upstream's reason strings. */
#include "api/quantity.h"
#include "api/registry.h"
#include "base/buf.h"
#include "controllers/scheduler.h"

#include <stdio.h>

/* upstream's reasons (pkg/scheduler/framework/plugins) */
#define R_UNSCHEDULABLE "node(s) were unschedulable"
#define R_NOT_READY "node(s) were not ready"
#define R_AFFINITY "node(s) didn't match Pod's node affinity/selector"
#define R_TOO_MANY_PODS "Too many pods"
#define R_CPU "Insufficient cpu"
#define R_MEMORY "Insufficient memory"

/* the scheduler's defaults for containers that request nothing (pkg/scheduler/util) */
#define NONZERO_CPU 100                        /* millicores */
#define NONZERO_MEM (INT64_C(200) * 1024 * 1024) /* bytes */
#define MAX_NODE_SCORE 100
#define MB (INT64_C(1024) * 1024)
#define IMAGE_MIN_THRESHOLD (23 * MB)
#define IMAGE_MAX_CONTAINER_THRESHOLD (1000 * MB)

static bool is_array(json_object *a) { return a && json_object_is_type(a, json_type_array); }
static size_t alen(json_object *a) { return is_array(a) ? json_object_array_length(a) : 0; }

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

static void container_req(json_object *c, bool nonzero, struct kite_sched_req *r) {
    json_object *req = kite_obj_get(kite_obj_get(c, "resources"), "requests");
    *r = (struct kite_sched_req){0};
    if (!quantity(req, "cpu", true, &r->cpu) && nonzero) r->cpu = NONZERO_CPU;
    if (!quantity(req, "memory", false, &r->mem) && nonzero) r->mem = NONZERO_MEM;
}

static void add(struct kite_sched_req *a, const struct kite_sched_req *b) {
    a->cpu = kite_sat_add(a->cpu, b->cpu), a->mem = kite_sat_add(a->mem, b->mem);
}
static void maxr(struct kite_sched_req *a, const struct kite_sched_req *b) {
    a->cpu = KITE_MAX(a->cpu, b->cpu), a->mem = KITE_MAX(a->mem, b->mem);
}

void kite_sched_pod_requests(json_object *pod, bool nonzero, struct kite_sched_req *ret) {
    json_object *spec = kite_obj_get(pod, "spec"), *cs = kite_obj_get(spec, "containers"), *ics = kite_obj_get(spec, "initContainers");
    struct kite_sched_req sum = {0}, init_max = {0}, sidecars = {0}, r;
    for (size_t i = 0; i < alen(cs); i++) {
        container_req(json_object_array_get_idx(cs, i), nonzero, &r);
        add(&sum, &r);
    }
    for (size_t i = 0; i < alen(ics); i++) {
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
    if (quantity(oh, "cpu", true, &v)) sum.cpu = kite_sat_add(sum.cpu, v);
    if (quantity(oh, "memory", false, &v)) sum.mem = kite_sat_add(sum.mem, v);
    *ret = sum;
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

bool kite_sched_tolerates(json_object *tols, json_object *taint) {
    for (size_t i = 0; i < alen(tols); i++) {
        json_object *t = json_object_array_get_idx(tols, i);
        const char *effect = kite_obj_str(t, "effect"), *key = kite_obj_str(t, "key"), *op = kite_obj_str(t, "operator");
        if (effect && *effect && !kite_streq(effect, kite_obj_str(taint, "effect"))) continue;
        if (key && *key && !kite_streq(key, kite_obj_str(taint, "key"))) continue;
        if (!op || !*op || kite_streq(op, "Equal")) {
            const char *a = kite_obj_str(t, "value"), *b = kite_obj_str(taint, "value");
            if (kite_streq(a ? a : "", b ? b : "")) return true;
        } else if (kite_streq(op, "Exists")) {
            return true;
        }
    }
    return false;
}

static bool tolerates_key(json_object *tols, const char *key) {
    json_object *taint = json_object_new_object();
    kite_obj_set(taint, "key", json_object_new_string(key));
    kite_obj_set(taint, "effect", json_object_new_string("NoSchedule"));
    bool ok = kite_sched_tolerates(tols, taint);
    json_object_put(taint);
    return ok;
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
    if (!u || !json_object_get_boolean(u) || tolerates_key(c->tols, "node.kubernetes.io/unschedulable")) return true;
    reject(v, "NodeUnschedulable", true, kite_strdup(R_UNSCHEDULABLE));
    return false;
}

static bool f_taints(const struct fctx *c, struct kite_sched_verdict *v) {
    json_object *taints = kite_obj_get(c->nspec, "taints");
    for (size_t i = 0; i < alen(taints); i++) {
        json_object *t = json_object_array_get_idx(taints, i);
        const char *effect = kite_obj_str(t, "effect");
        if (!kite_streq(effect, "NoSchedule") && !kite_streq(effect, "NoExecute")) continue;
        if (kite_sched_tolerates(c->tols, t)) continue;
        const char *k = kite_obj_str(t, "key"), *val = kite_obj_str(t, "value");
        reject(v, "TaintToleration", true, kite_asprintf("node(s) had untolerated taint {%s: %s}", k ? k : "", val ? val : ""));
        return false;
    }
    return true;
}

static bool f_ready(const struct fctx *c, struct kite_sched_verdict *v) {
    json_object *conds = kite_obj_get(kite_obj_get(c->ni->node, "status"), "conditions");
    const char *status = NULL;
    for (size_t i = 0; i < alen(conds); i++)
        if (kite_streq(kite_obj_str(json_object_array_get_idx(conds, i), "type"), "Ready"))
            status = kite_obj_str(json_object_array_get_idx(conds, i), "status");
    if (kite_streq(status, "True")) return true;
    /* what the node lifecycle controller taints such a node with: a pod tolerating that (a
     * DaemonSet's) may go there, as it could once the taint is on */
    if (tolerates_key(c->tols, kite_streq(status, "False") ? "node.kubernetes.io/not-ready" : "node.kubernetes.io/unreachable"))
        return true;
    reject(v, "NodeReady", true, kite_strdup(R_NOT_READY));
    return false;
}

static bool in_values(json_object *values, const char *s) {
    for (size_t i = 0; s && i < alen(values); i++)
        if (kite_streq(json_object_get_string(json_object_array_get_idx(values, i)), s)) return true;
    return false;
}

/* labels.Requirement.Matches for one matchExpressions entry; value NULL = the label is absent. */
static bool requirement(json_object *expr, const char *value) {
    const char *op = kite_obj_str(expr, "operator");
    json_object *values = kite_obj_get(expr, "values");
    if (kite_streq(op, "In")) return in_values(values, value);
    if (kite_streq(op, "NotIn")) return !in_values(values, value);
    if (kite_streq(op, "Exists")) return value != NULL;
    if (kite_streq(op, "DoesNotExist")) return value == NULL;
    if (kite_streq(op, "Gt") || kite_streq(op, "Lt")) {
        int64_t have, want;
        if (!value || alen(values) != 1 || kite_parse_int64(value, &have) < 0 ||
            kite_parse_int64(json_object_get_string(json_object_array_get_idx(values, 0)), &want) < 0)
            return false;
        return kite_streq(op, "Gt") ? have > want : have < want;
    }
    return false;
}

static bool term_matches(json_object *term, json_object *node) {
    json_object *exprs = kite_obj_get(term, "matchExpressions"), *fields = kite_obj_get(term, "matchFields");
    if (!alen(exprs) && !alen(fields)) return false; /* an empty term selects nothing */
    json_object *labels = kite_obj_get(kite_obj_meta(node), "labels");
    for (size_t i = 0; i < alen(exprs); i++) {
        json_object *e = json_object_array_get_idx(exprs, i);
        if (!requirement(e, kite_obj_str(labels, kite_obj_str(e, "key")))) return false;
    }
    for (size_t i = 0; i < alen(fields); i++) {
        json_object *e = json_object_array_get_idx(fields, i);
        const char *op = kite_obj_str(e, "operator");
        /* metadata.name is the only node field selectable, with In or NotIn */
        if (!kite_streq(kite_obj_str(e, "key"), "metadata.name") || !(kite_streq(op, "In") || kite_streq(op, "NotIn")))
            return false;
        if (!requirement(e, kite_meta_str(node, "name"))) return false;
    }
    return true;
}

bool kite_sched_node_selector_terms_match(json_object *terms, json_object *node) {
    for (size_t i = 0; i < alen(terms); i++)
        if (term_matches(json_object_array_get_idx(terms, i), node)) return true;
    return false;
}

static bool f_affinity(const struct fctx *c, struct kite_sched_verdict *v) {
    json_object *sel = kite_obj_get(c->spec, "nodeSelector"), *labels = kite_obj_get(kite_obj_meta(c->ni->node), "labels");
    bool ok = true;
    if (sel && json_object_is_type(sel, json_type_object)) {
        json_object_object_foreach(sel, k, val) {
            if (!kite_streq(kite_obj_str(labels, k), json_object_get_string(val))) ok = false;
        }
    }
    json_object *req = kite_obj_get(kite_obj_get(kite_obj_get(c->spec, "affinity"), "nodeAffinity"),
                                    "requiredDuringSchedulingIgnoredDuringExecution");
    if (ok && req && !json_object_is_type(req, json_type_null))
        ok = kite_sched_node_selector_terms_match(kite_obj_get(req, "nodeSelectorTerms"), c->ni->node);
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
