/* NodeRestriction, as kube-apiserver's admission plugin (plugin/pkg/admission/noderestriction):
 * what the Node authorizer lets every node do is narrowed here to the node's own objects, now
 * that the object written is known. A node writes only its own Node (never its taints, a new
 * configSource, or labels outside the kubelet's set) and never deletes it; writes the status
 * of, evicts and deletes only pods bound to it, and creates only mirror pods of itself that
 * reference nothing; and writes only its own Lease in kube-node-lease. Users that are not
 * nodes pass untouched. Refusals are 403 Forbidden with upstream's messages, as
 * admission.NewForbidden renders them: `<resource> "<name>" is forbidden: <why>`. */
#include "apiserver/internal.h"

#include <stdarg.h>
#include <stdio.h>

#define MIRROR_POD_ANNOTATION "kubernetes.io/config.mirror"
#define NODE_LEASE_NAMESPACE "kube-node-lease"

static const char *const OP_NAMES[] = {[KITE_ADMIT_CREATE] = "CREATE", [KITE_ADMIT_UPDATE] = "UPDATE",
                                       [KITE_ADMIT_DELETE] = "DELETE"};


static bool is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

static const char *node_of(json_object *pod) {
    const char *n = kite_obj_str(kite_obj_get(pod, "spec"), "nodeName");
    return n ? n : "";
}

/* ---- labels (getForbiddenLabels, kubelet's IsKubeletLabel) ----------------------------------- */

/* The labels a kubelet may set on its own Node (k8s.io/kubelet/pkg/apis well_known_labels.go). */
static const char *const KUBELET_LABELS[] = {
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
};
/* ... and any label in these prefixes (or a subdomain of them). */
static const char *const KUBELET_LABEL_DOMAINS[] = {"kubelet.kubernetes.io", "node.kubernetes.io"};

/* The prefix of a label key before '/', into out ("" when none). */
static void label_domain(const char *key, char out[256]) {
    const char *slash = strchr(key, '/');
    size_t n = slash ? (size_t)(slash - key) : 0;
    if (n > 255) n = 255;
    memcpy(out, key, n);
    out[n] = 0;
}

/* domain is d or a subdomain of it */
static bool in_domain(const char *domain, const char *d) {
    size_t n = strlen(domain), m = strlen(d);
    return strcmp(domain, d) == 0 || (n > m && domain[n - m - 1] == '.' && strcmp(domain + n - m, d) == 0);
}

static bool forbidden_label(const char *key) {
    char dom[256];
    label_domain(key, dom);
    if (in_domain(dom, "node-restriction.kubernetes.io")) return true;
    if (!in_domain(dom, "kubernetes.io") && !in_domain(dom, "k8s.io")) return false;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(KUBELET_LABELS); i++)
        if (strcmp(key, KUBELET_LABELS[i]) == 0) return false;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(KUBELET_LABEL_DOMAINS); i++)
        if (in_domain(dom, KUBELET_LABEL_DOMAINS[i])) return false;
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The forbidden labels among those added, removed or changed between now and before (either
 * may be NULL), sorted and joined with ", " as sets.String.List(); NULL when none. */
static char *forbidden_changes(json_object *now, json_object *before) {
    json_object *sides[2] = {now, before};
    const char **keys = NULL;
    size_t n = 0, cap = 0;
    for (int s = 0; s < 2; s++) {
        if (!sides[s] || !json_object_is_type(sides[s], json_type_object)) continue;
        json_object_object_foreach(sides[s], k, v) {
            json_object *other = kite_obj_get(sides[!s], k);
            bool changed = !other || !json_object_equal(v, other);
            if (!changed || !forbidden_label(k)) continue;
            bool seen = false;
            for (size_t i = 0; i < n && !seen; i++) seen = strcmp(keys[i], k) == 0;
            if (seen) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                keys = kite_realloc(keys, cap * sizeof *keys);
            }
            keys[n++] = k;
        }
    }
    if (!n) return NULL;
    qsort(keys, n, sizeof *keys, cmp_str);
    struct kite_buf b = {0};
    for (size_t i = 0; i < n; i++) kite_buf_printf(&b, "%s%s", i ? ", " : "", keys[i]);
    free(keys);
    size_t len;
    return kite_buf_detach(&b, &len);
}

static json_object *labels_of(json_object *o) { return kite_obj_get(kite_obj_meta(o), "labels"); }
static json_object *spec_field(json_object *o, const char *k) { return kite_obj_get(kite_obj_get(o, "spec"), k); }

static bool json_same(json_object *a, json_object *b) {
    if (!a || json_object_is_type(a, json_type_null)) return !b || json_object_is_type(b, json_type_null);
    return b && json_object_equal(a, b);
}

static size_t obj_len(json_object *o) { return o && json_object_is_type(o, json_type_object) ? (size_t)json_object_object_length(o) : 0; }

/* as labels.Equals: absent and empty are the same */
static bool maps_equal(json_object *x, json_object *y) {
    if (obj_len(x) != obj_len(y)) return false;
    if (!obj_len(x)) return true;
    json_object_object_foreach(x, k, v) {
        json_object *w = kite_obj_get(y, k);
        if (!w || !json_object_equal(v, w)) return false;
    }
    return true;
}

/* absent and empty lists are the same taints: a client that drops empty lists cannot write the one
 * without the other */
static bool lists_equal(json_object *x, json_object *y) {
    if (!kite_array_len(x) || !kite_array_len(y)) return kite_array_len(x) == kite_array_len(y);
    return json_object_equal(x, y);
}

/* ---- per resource ---------------------------------------------------------------------------- */

static int admit_node(const char *node, const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    const char *name = a->op == KITE_ADMIT_CREATE ? kite_meta_str(a->obj, "name") : a->name;
    if (!is(name, node)) return kite_admission_forbid(a, d, "node \"%s\" is not allowed to modify node \"%s\"", node, name ? name : "");
    if (a->op == KITE_ADMIT_DELETE) return kite_admission_forbid(a, d, "node \"%s\" is not allowed to delete node \"%s\"", node, name);
    _cleanup_free_ char *bad = NULL;
    if (a->op == KITE_ADMIT_CREATE) {
        json_object *cs = spec_field(a->obj, "configSource");
        if (cs && !json_object_is_type(cs, json_type_null))
            return kite_admission_forbid(a, d, "node \"%s\" is not allowed to create pods with a non-nil configSource", node);
        if ((bad = forbidden_changes(labels_of(a->obj), NULL)))
            return kite_admission_forbid(a, d, "node \"%s\" is not allowed to set the following labels: %s", node, bad);
        return 0;
    }
    json_object *cs = spec_field(a->obj, "configSource");
    if (cs && !json_object_is_type(cs, json_type_null) && !json_same(cs, spec_field(a->old, "configSource")))
        return kite_admission_forbid(a, d, "node \"%s\" is not allowed to update configSource to a new non-nil configSource", node);
    json_object *taints = spec_field(a->obj, "taints"), *was = spec_field(a->old, "taints");
    if (!lists_equal(taints, was))
        return kite_admission_forbid(a, d, "node \"%s\" is not allowed to modify taints", node);
    if ((bad = forbidden_changes(labels_of(a->obj), labels_of(a->old))))
        return kite_admission_forbid(a, d, "is not allowed to modify labels: %s", bad);
    return 0;
}

struct ref_seen { bool kinds[4]; };
static void seen_ref(enum kite_node_ref t, const char *name, void *ud) {
    (void)name;
    ((struct ref_seen *)ud)->kinds[t] = true;
}

static int admit_mirror_pod(const char *node, const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    json_object *ann = kite_obj_get(kite_obj_meta(a->obj), "annotations");
    if (!kite_obj_get(ann, MIRROR_POD_ANNOTATION))
        return kite_admission_forbid(a, d, "pod does not have \"%s\" annotation, node \"%s\" can only create mirror pods",
                      MIRROR_POD_ANNOTATION, node);
    if (!is(node_of(a->obj), node))
        return kite_admission_forbid(a, d, "node \"%s\" can only create pods with spec.nodeName set to itself", node);
    json_object *owners = kite_obj_get(kite_obj_meta(a->obj), "ownerReferences");
    size_t n = owners && json_object_is_type(owners, json_type_array) ? json_object_array_length(owners) : 0;
    if (n > 1) return kite_admission_forbid(a, d, "node \"%s\" can only create pods with a single owner reference set to itself", node);
    if (n == 0) return kite_admission_forbid(a, d, "node \"%s\" can only create pods with an owner reference set to itself", node);
    json_object *o = json_object_array_get_idx(owners, 0);
    if (!is(kite_obj_str(o, "apiVersion"), "v1") || !is(kite_obj_str(o, "kind"), "Node") || !is(kite_obj_str(o, "name"), node))
        return kite_admission_forbid(a, d, "node \"%s\" can only create pods with an owner reference set to itself", node);
    json_object *ctl = kite_obj_get(o, "controller"), *block = kite_obj_get(o, "blockOwnerDeletion");
    if (!ctl || !json_object_get_boolean(ctl))
        return kite_admission_forbid(a, d, "node \"%s\" can only create pods with a controller owner reference set to itself", node);
    if (block && json_object_get_boolean(block))
        return kite_admission_forbid(a, d, "node \"%s\" must not set blockOwnerDeletion on an owner reference", node);
    json_object *self = kite_apiserver_lookup(a->srv, kite_registry_find("", "v1", "nodes"), NULL, node);
    if (!self) {
        d->details = (struct status_details){.name = node, .kind = "nodes"};
        d->message = kite_asprintf("nodes \"%s\" not found", node);
        d->code = 404;
        d->reason = "NotFound";
        return -EPERM;
    }
    const char *uid = kite_meta_str(self, "uid"), *want = kite_obj_str(o, "uid");
    if (!is(uid, want)) {
        int r = kite_admission_forbid(a, d, "node %s UID mismatch: expected %s got %s", node, uid ? uid : "", want ? want : "");
        json_object_put(self);
        return r;
    }
    json_object_put(self);
    struct ref_seen seen = {{false}};
    kite_node_graph_pod_refs(a->obj, seen_ref, &seen);
    static const struct { enum kite_node_ref t; const char *what; } ORDER[] = {
        {KITE_NODE_REF_SERVICEACCOUNT, "a service account"},
        {KITE_NODE_REF_SECRET, "secrets"},
        {KITE_NODE_REF_CONFIGMAP, "configmaps"},
        {KITE_NODE_REF_PVC, "persistentvolumeclaims"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(ORDER); i++)
        if (seen.kinds[ORDER[i].t]) return kite_admission_forbid(a, d, "node \"%s\" can not create pods that reference %s", node, ORDER[i].what);
    return 0;
}

static int admit_pod(const char *node, const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (!a->sub) {
        if (a->op == KITE_ADMIT_CREATE) return admit_mirror_pod(node, a, d);
        if (a->op == KITE_ADMIT_DELETE) {
            if (!is(node_of(a->old), node))
                return kite_admission_forbid(a, d, "node \"%s\" can only delete pods with spec.nodeName set to itself", node);
            return 0;
        }
        return kite_admission_forbid(a, d, "unexpected operation \"%s\", node \"%s\" can only create and delete mirror pods",
                      OP_NAMES[a->op], node);
    }
    if (is(a->sub, "status")) {
        if (a->op != KITE_ADMIT_UPDATE) return kite_admission_forbid(a, d, "unexpected operation \"%s\"", OP_NAMES[a->op]);
        if (!is(node_of(a->old), node))
            return kite_admission_forbid(a, d, "node \"%s\" can only update pod status for pods with spec.nodeName set to itself", node);
        if (!maps_equal(labels_of(a->old), labels_of(a->obj)))
            return kite_admission_forbid(a, d, "node \"%s\" cannot update labels through pod status", node);
        return 0;
    }
    if (is(a->sub, "eviction")) {
        /* an eviction is admitted here as the delete it becomes, of the pod it names */
        if (!is(node_of(a->old), node))
            return kite_admission_forbid(a, d, "node %s can only evict pods with spec.nodeName set to itself", node);
        return 0;
    }
    return kite_admission_forbid(a, d, "unexpected pod subresource \"%s\", only 'status' and 'eviction' are allowed", a->sub);
}

static int admit_lease(const char *node, const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (!is(a->ns, NODE_LEASE_NAMESPACE))
        return kite_admission_forbid(a, d, "can only access leases in the \"%s\" system namespace", NODE_LEASE_NAMESPACE);
    const char *name = a->op == KITE_ADMIT_CREATE ? kite_meta_str(a->obj, "name") : a->name;
    if (!is(name, node)) return kite_admission_forbid(a, d, "can only access node lease with the same name as the requesting node");
    return 0;
}

static const struct {
    const char *group, *resource;
    int (*admit)(const char *node, const struct kite_admission_attrs *a, struct kite_admission_denial *d);
} RESOURCES[] = {
    {"coordination.k8s.io", "leases", admit_lease}, /* first: every heartbeat */
    {"", "nodes", admit_node},
    {"", "pods", admit_pod},
};

int kite_admission_node_restriction(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    const char *node;
    if (!a->user || !kite_node_identity(a->user, &node)) return 0;
    if (!*node) return kite_admission_forbid(a, d, "could not determine node from user \"%s\"", a->user->name ? a->user->name : "");
    for (size_t i = 0; i < KITE_ARRAY_SIZE(RESOURCES); i++)
        if (strcmp(a->res->plural, RESOURCES[i].resource) == 0 && strcmp(a->res->group, RESOURCES[i].group) == 0)
            return RESOURCES[i].admit(node, a, d);
    return 0;
}
