/* Registration (kubelet registerWithAPIServer, k8s-behaviour §1.5): POST the full Node; on
 * 409 AlreadyExists GET it and reconcile only what the kubelet reconciles (the
 * controller-managed-attach-detach annotation, default labels, missing capacity and
 * allocatable) through one status PATCH. Also the best-effort event poster. */
#include <stdio.h>
#include <sys/utsname.h>

#include "api/events.h"
#include "agent/agent-int.h"
#include "api/registry.h"
#include "base/log.h"

/* The server's own Node schema (its registry row), so the agent's patches mean what the
 * server makes of them: a copy had drifted to merging spec.taints by key, which the server
 * (as upstream, with no patch strategy on taints) treats as atomic. */
const struct kite_smp_schema *kite_agent_node_schema(void) {
    return kite_registry_find_kind("", "Node")->smp;
}

#define CMAD_ANNOTATION "volumes.kubernetes.io/controller-managed-attach-detach"

static const char *go_arch(void) {
    static char arch[65];
    struct utsname u;
    if (uname(&u) < 0) return "unknown";
    snprintf(arch, sizeof(arch), "%s", kite_ns_goarch(u.machine));
    return arch;
}

static void default_labels(struct kite_agent *a, json_object *labels) {
    const char *arch = go_arch();
    const char *host = a->ns.hostname ? a->ns.hostname : a->node_name;
    json_object_object_add(labels, "kubernetes.io/hostname", json_object_new_string(host));
    json_object_object_add(labels, "kubernetes.io/os", json_object_new_string("linux"));
    json_object_object_add(labels, "kubernetes.io/arch", json_object_new_string(arch));
    json_object_object_add(labels, "beta.kubernetes.io/os", json_object_new_string("linux"));
    json_object_object_add(labels, "beta.kubernetes.io/arch", json_object_new_string(arch));
}

/* initialNode(): takes ownership of status. */
static json_object *initial_node(struct kite_agent *a, json_object *status) {
    const struct kite_agent_config *c = a->cfg;
    json_object *node = json_object_new_object(), *meta = json_object_new_object();
    json_object *labels = json_object_new_object(), *ann = json_object_new_object(), *spec = json_object_new_object();
    json_object_object_add(node, "apiVersion", json_object_new_string("v1"));
    json_object_object_add(node, "kind", json_object_new_string("Node"));
    json_object_object_add(meta, "name", json_object_new_string(a->node_name));
    if (c->labels) {
        json_object_object_foreach(c->labels, k, v) json_object_object_add(labels, k, json_object_get(v));
    }
    default_labels(a, labels); /* the defaults win over --node-labels, as in the kubelet */
    json_object_object_add(meta, "labels", labels);
    json_object_object_add(ann, CMAD_ANNOTATION, json_object_new_string("true"));
    json_object_object_add(meta, "annotations", ann);
    json_object_object_add(node, "metadata", meta);
    json_object *taints = json_object_new_array();
    if (c->taints)
        for (size_t i = 0; i < json_object_array_length(c->taints); i++)
            json_object_array_add(taints, json_object_get(json_object_array_get_idx(c->taints, i)));
    if (!c->register_schedulable) {
        json_object_object_add(spec, "unschedulable", json_object_new_boolean(1));
        json_object *t = json_object_new_object();
        json_object_object_add(t, "key", json_object_new_string("node.kubernetes.io/unschedulable"));
        json_object_object_add(t, "effect", json_object_new_string("NoSchedule"));
        json_object_array_add(taints, t);
    }
    if (json_object_array_length(taints)) json_object_object_add(spec, "taints", taints);
    else json_object_put(taints);
    if (c->pod_cidr) {
        /* the pod network's range, as a kubelet given --pod-cidr with no controller to assign one */
        json_object *cidrs = json_object_new_array();
        json_object_array_add(cidrs, json_object_new_string(c->pod_cidr));
        json_object_object_add(spec, "podCIDR", json_object_new_string(c->pod_cidr));
        json_object_object_add(spec, "podCIDRs", cidrs);
    }
    json_object_object_add(node, "spec", spec);
    json_object_object_add(node, "status", status);
    return node;
}

static json_object *ensure_obj(json_object *parent, const char *key) {
    json_object *o;
    if (json_object_object_get_ex(parent, key, &o) && json_object_is_type(o, json_type_object)) return o;
    o = json_object_new_object();
    json_object_object_add(parent, key, o);
    return o;
}

/* reconcileExtendedResources/HugePages/DefaultLabels/CMAD over a copy of existing, from the
 * node we tried to create. Returns the reconciled copy (new ref). */
static json_object *reconcile(json_object *existing, json_object *wanted) {
    json_object *node = NULL;
    json_object_deep_copy(existing, &node, NULL);
    json_object *meta = ensure_obj(node, "metadata");
    json_object *ann = ensure_obj(meta, "annotations");
    if (!kite_streq(kite_obj_str_at(ann, CMAD_ANNOTATION, NULL), "true"))
        json_object_object_add(ann, CMAD_ANNOTATION, json_object_new_string("true"));
    static const char *defaults[] = {"kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
                                     "beta.kubernetes.io/os", "beta.kubernetes.io/arch"};
    json_object *labels = ensure_obj(meta, "labels"), *wanted_labels = NULL;
    json_object_object_get_ex(json_object_object_get(wanted, "metadata"), "labels", &wanted_labels);
    for (size_t i = 0; i < KITE_ARRAY_SIZE(defaults); i++) {
        const char *w = kite_obj_str_at(wanted_labels, defaults[i], NULL);
        if (w && !kite_streq(kite_obj_str_at(labels, defaults[i], NULL), w))
            json_object_object_add(labels, defaults[i], json_object_new_string(w));
    }
    json_object *status = ensure_obj(node, "status"), *wstatus = json_object_object_get(wanted, "status");
    static const char *res[] = {"capacity", "allocatable"};
    for (size_t i = 0; i < 2; i++) {
        json_object *have = json_object_object_get(status, res[i]), *want = json_object_object_get(wstatus, res[i]);
        if (!want) continue;
        if (!have || !json_object_is_type(have, json_type_object)) {
            json_object_object_add(status, res[i], json_object_get(want));
            continue;
        }
        /* hugepages-* follow the machine; other missing resources are filled in */
        json_object_object_foreach(want, k, v) {
            json_object *cur = json_object_object_get(have, k);
            if (!cur || (kite_startswith(k, "hugepages-") && !kite_json_equal(cur, v)))
                json_object_object_add(have, k, json_object_get(v));
        }
        json_object_object_foreach(have, hk, hv) {
            (void)hv;
            if (kite_startswith(hk, "hugepages-") && !json_object_object_get(want, hk))
                json_object_object_del(have, hk);
        }
    }
    return node;
}

static json_object *status_of(json_object *node) {
    json_object *s;
    if (node && json_object_object_get_ex(node, "status", &s) && json_object_is_type(s, json_type_object))
        return json_object_get(s);
    return json_object_new_object();
}

static void take_node(struct kite_agent *a, json_object *node) {
    const char *uid = kite_obj_str_at(node, "metadata", "uid");
    free(a->node_uid);
    a->node_uid = kite_strdup(uid ? uid : "");
    json_object *st = status_of(node);
    kite_agent_set_acked_status(a, st);
    json_object_put(st);
}

int kite_agent_register(struct kite_agent *a) {
    _cleanup_free_ char *path = kite_asprintf("/api/v1/nodes/%s", a->node_name);
    json_object *resp = NULL;
    long code = 0;
    int r;
    if (!a->cfg->register_node) {
        /* not ours to create: wait for someone else to, then report on it */
        r = kite_client_json(a->client, "GET", path, NULL, NULL, &code, &resp);
        if (r == 0) take_node(a, resp);
        json_object_put(resp);
        return r;
    }
    json_object *status = NULL;
    struct kite_ns_events ev = {0};
    r = kite_agent_compute_status(a, NULL, &status, &ev);
    if (r < 0) {
        kite_ns_events_release(&ev);
        return r;
    }
    json_object *node = initial_node(a, status);
    r = kite_client_json(a->client, "POST", "/api/v1/nodes", NULL, node, &code, &resp);
    if (r == 0) {
        take_node(a, resp);
    } else if (code == 409) {
        json_object_put(resp);
        resp = NULL;
        json_object *existing = NULL;
        r = kite_client_json(a->client, "GET", path, NULL, NULL, &code, &existing);
        if (r == 0) {
            json_object *want = reconcile(existing, node), *patch = NULL;
            r = kite_smp_diff(existing, want, kite_agent_node_schema(), &patch);
            if (r == 0 && json_object_object_length(patch) > 0) {
                _cleanup_free_ char *spath = kite_asprintf("%s/status", path);
                r = kite_client_json(a->client, "PATCH", spath, "application/strategic-merge-patch+json", patch,
                                     &code, &resp);
                if (r == 0) take_node(a, resp);
            } else if (r == 0) {
                take_node(a, existing);
            }
            json_object_put(patch);
            json_object_put(want);
        }
        json_object_put(existing);
    }
    json_object_put(resp);
    json_object_put(node);
    if (r == 0) kite_agent_post_events(a, &ev);
    kite_ns_events_release(&ev);
    return r;
}

void kite_agent_post_event(struct kite_agent *a, const char *type, const char *reason, const char *message) {
    /* the kubelet's node reference uses the node name as uid; apiVersion is what
     * `kubectl events --for node/NAME` selects on with the kind and name */
    struct kite_event_spec es = {.ns = "default", .kind = "Node", .obj_name = a->node_name, .uid = a->node_name,
                                 .type = type, .reason = reason, .message = message, .component = "kubelet",
                                 .host = a->node_name, .instance = a->node_name, .wall_ns = kite_now_wall(a->clock)};
    json_object *e = kite_event_build(&es);
    /* best-effort, as the kubelet's recorder when the sink is down */
    kite_client_json(a->client, "POST", "/api/v1/namespaces/default/events", NULL, e, NULL, NULL);
    json_object_put(e);
}

void kite_agent_post_events(struct kite_agent *a, struct kite_ns_events *ev) {
    for (size_t i = 0; i < ev->n; i++)
        kite_agent_post_event(a, ev->v[i].type ? ev->v[i].type : "Normal", ev->v[i].reason, ev->v[i].message);
}
