/* The EndpointSlice reconcile (endpointslice.h): pure functions of a Service, pods and slices. */
#include "controllers/endpointslice.h"
#include "api/registry.h"
#include "base/map.h"
#include "controllers/workloads/wlutil.h"
#include "json/patch.h"

#include <stdio.h>
#include <sys/types.h>

static const char *str(json_object *o, const char *k) {
    const char *s = kite_obj_str(o, k);
    return s ? s : "";
}
static json_object *jstr(const char *s) { return json_object_new_string(s); }

/* ---- one endpoint ---------------------------------------------------------------------------- */

bool kite_eps_pod_included(json_object *pod) {
    json_object *status = kite_obj_get(pod, "status");
    if (!*str(status, "podIP") && !kite_array_len(kite_obj_get(status, "podIPs"))) return false;
    const char *phase = str(status, "phase"), *policy = str(kite_obj_get(pod, "spec"), "restartPolicy");
    if (strcmp(policy, "Never") == 0) return strcmp(phase, "Failed") != 0 && strcmp(phase, "Succeeded") != 0;
    if (strcmp(policy, "OnFailure") == 0) return strcmp(phase, "Succeeded") != 0;
    return true;
}

static bool pod_ready(json_object *pod) {
    json_object *conds = kite_obj_get(kite_obj_get(pod, "status"), "conditions");
    for (size_t i = 0; i < kite_array_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(str(c, "type"), "Ready") == 0) return strcmp(str(c, "status"), "True") == 0;
    }
    return false;
}

struct kite_eps_conditions kite_eps_conditions(json_object *pod, bool publish_not_ready) {
    struct kite_eps_conditions c = {.serving = pod_ready(pod), .terminating = kite_meta_str(pod, "deletionTimestamp") != NULL};
    c.ready = publish_not_ready || (c.serving && !c.terminating);
    return c;
}

bool kite_eps_publish_not_ready(json_object *svc) {
    json_object *v = kite_obj_get(kite_obj_get(svc, "spec"), "publishNotReadyAddresses");
    return v && json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
}

const char *kite_eps_pod_ip(json_object *pod) {
    json_object *status = kite_obj_get(pod, "status");
    if (*str(status, "podIP")) return str(status, "podIP");
    json_object *ips = kite_obj_get(status, "podIPs");
    return kite_array_len(ips) ? str(json_object_array_get_idx(ips, 0), "ip") : "";
}

json_object *kite_eps_endpoint(json_object *svc, json_object *pod, const char *zone) {
    json_object *ep = json_object_new_object();
    json_object *addrs = json_object_new_array();
    json_object_array_add(addrs, jstr(kite_eps_pod_ip(pod)));
    kite_obj_set(ep, "addresses", addrs);
    struct kite_eps_conditions c = kite_eps_conditions(pod, kite_eps_publish_not_ready(svc));
    json_object *conds = json_object_new_object();
    kite_obj_set(conds, "ready", json_object_new_boolean(c.ready));
    kite_obj_set(conds, "serving", json_object_new_boolean(c.serving));
    kite_obj_set(conds, "terminating", json_object_new_boolean(c.terminating));
    kite_obj_set(ep, "conditions", conds);
    json_object *pspec = kite_obj_get(pod, "spec");
    /* ShouldSetHostname: the pod names this Service as its subdomain */
    if (*str(pspec, "hostname") && strcmp(str(pspec, "subdomain"), str(kite_obj_meta(svc), "name")) == 0)
        kite_obj_set(ep, "hostname", jstr(str(pspec, "hostname")));
    json_object *ref = json_object_new_object();
    kite_obj_set(ref, "kind", jstr("Pod"));
    kite_obj_set(ref, "namespace", jstr(str(kite_obj_meta(pod), "namespace")));
    kite_obj_set(ref, "name", jstr(str(kite_obj_meta(pod), "name")));
    kite_obj_set(ref, "uid", jstr(str(kite_obj_meta(pod), "uid")));
    kite_obj_set(ep, "targetRef", ref);
    if (*str(pspec, "nodeName")) kite_obj_set(ep, "nodeName", jstr(str(pspec, "nodeName")));
    if (zone && *zone) kite_obj_set(ep, "zone", jstr(zone));
    return ep;
}

/* podutil.FindPort: a numeric target port as is; a named one from the containers' ports with
 * the service port's protocol; -1 when the pod has none of that name. */
static int64_t find_port(json_object *pod, json_object *sp) {
    json_object *tp = kite_obj_get(sp, "targetPort");
    if (!tp) return json_object_get_int64(kite_obj_get(sp, "port"));
    if (!json_object_is_type(tp, json_type_string)) return json_object_get_int64(tp);
    const char *name = json_object_get_string(tp), *proto = str(sp, "protocol");
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < KITE_ARRAY_SIZE(lists); l++) {
        json_object *cs = kite_obj_get(kite_obj_get(pod, "spec"), lists[l]);
        for (size_t i = 0; i < kite_array_len(cs); i++) {
            json_object *ports = kite_obj_get(json_object_array_get_idx(cs, i), "ports");
            for (size_t j = 0; j < kite_array_len(ports); j++) {
                json_object *p = json_object_array_get_idx(ports, j);
                const char *pp = *str(p, "protocol") ? str(p, "protocol") : "TCP";
                if (strcmp(str(p, "name"), name) == 0 && strcmp(pp, proto) == 0)
                    return json_object_get_int64(kite_obj_get(p, "containerPort"));
            }
        }
    }
    return -1;
}

json_object *kite_eps_ports(json_object *svc, json_object *pod) {
    json_object *out = json_object_new_array();
    json_object *sports = kite_obj_get(kite_obj_get(svc, "spec"), "ports");
    for (size_t i = 0; i < kite_array_len(sports); i++) {
        json_object *sp = json_object_array_get_idx(sports, i);
        int64_t port = find_port(pod, sp);
        if (port < 0) continue;
        json_object *p = json_object_new_object();
        kite_obj_set(p, "name", jstr(str(sp, "name")));
        kite_obj_set(p, "port", json_object_new_int((int32_t)port));
        kite_obj_set(p, "protocol", jstr(*str(sp, "protocol") ? str(sp, "protocol") : "TCP"));
        if (*str(sp, "appProtocol")) kite_obj_set(p, "appProtocol", jstr(str(sp, "appProtocol")));
        json_object_array_add(out, p);
    }
    return out;
}

json_object *kite_eps_selector(json_object *svc) {
    json_object *spec = kite_obj_get(svc, "spec");
    if (strcmp(str(spec, "type"), "ExternalName") == 0) return NULL;
    json_object *sel = kite_obj_get(spec, "selector");
    return sel && json_object_is_type(sel, json_type_object) && json_object_object_length(sel) ? sel : NULL;
}

bool kite_eps_selects(json_object *selector, json_object *labels) {
    if (!selector) return false;
    json_object_object_foreach(selector, k, v) {
        const char *have = kite_obj_str(labels, k);
        if (!have || strcmp(have, json_object_get_string(v)) != 0) return false;
    }
    return true;
}

/* ---- the plan ---------------------------------------------------------------------------------- */

static void push(json_object ***v, size_t *n, json_object *o) {
    *v = kite_realloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = o;
}

static void push_name(struct kite_eps_plan *out, json_object *slice) {
    out->del = kite_realloc(out->del, (out->n_del + 1) * sizeof *out->del);
    out->del[out->n_del++] = kite_strdup(kite_meta_str(slice, "name") ? kite_meta_str(slice, "name") : "");
}

void kite_eps_plan_release(struct kite_eps_plan *p) {
    for (size_t i = 0; i < p->n_create; i++) json_object_put(p->create[i]);
    for (size_t i = 0; i < p->n_update; i++) json_object_put(p->update[i]);
    for (size_t i = 0; i < p->n_del; i++) free(p->del[i]);
    free(p->create);
    free(p->update);
    free(p->del);
    *p = (struct kite_eps_plan){0};
}

/* The endpoints wanted for one set of ports. */
struct group {
    char *key;           /* the ports' JSON */
    json_object *ports;  /* owned */
    json_object **eps;   /* owned, by pod name */
    char **names;        /* pod names (borrowed from the pods) */
    bool *placed;
    size_t n;
};

struct work_slice {
    json_object *obj;    /* a copy being edited (owned) */
    struct group *g;     /* NULL: its ports are no longer wanted */
    json_object *eps;    /* its new endpoints (owned) */
    bool changed, keep;
};

static struct group *group_for(struct group **gs, size_t *n, json_object *ports) {
    const char *key = json_object_to_json_string_ext(ports, JSON_C_TO_STRING_PLAIN);
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*gs)[i].key, key) == 0) return &(*gs)[i];
    *gs = kite_realloc(*gs, (*n + 1) * sizeof **gs);
    struct group *g = &(*gs)[(*n)++];
    *g = (struct group){.key = kite_strdup(key), .ports = json_object_get(ports)};
    return g;
}

static void group_add(struct group *g, json_object *ep, const char *name) {
    g->eps = kite_realloc(g->eps, (g->n + 1) * sizeof *g->eps);
    g->names = kite_realloc(g->names, (g->n + 1) * sizeof *g->names);
    g->placed = kite_realloc(g->placed, (g->n + 1) * sizeof *g->placed);
    g->eps[g->n] = ep;
    g->names[g->n] = (char *)name;
    g->placed[g->n] = false;
    g->n++;
}

static void groups_free(struct group *gs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(gs[i].key);
        json_object_put(gs[i].ports);
        for (size_t j = 0; j < gs[i].n; j++) json_object_put(gs[i].eps[j]);
        free(gs[i].eps);
        free(gs[i].names);
        free(gs[i].placed);
    }
    free(gs);
}

static int by_name(const void *a, const void *b) {
    return strcmp(kite_meta_str(*(json_object *const *)a, "name"), kite_meta_str(*(json_object *const *)b, "name"));
}

/* The labels every slice of svc carries: the Service's own, the service name, who manages it,
 * and whether the Service is headless. */
static json_object *slice_labels(json_object *svc) {
    json_object *l = json_object_new_object();
    json_object *sl = kite_obj_get(kite_obj_meta(svc), "labels");
    if (sl && json_object_is_type(sl, json_type_object)) {
        json_object_object_foreach(sl, k, v) kite_obj_set(l, k, jstr(json_object_get_string(v))); /* copies: no shared refs */
    }
    json_object_object_del(l, KITE_EPS_LABEL_HEADLESS);
    kite_obj_set(l, KITE_EPS_LABEL_SERVICE_NAME, jstr(str(kite_obj_meta(svc), "name")));
    kite_obj_set(l, KITE_EPS_LABEL_MANAGED_BY, jstr(KITE_EPS_MANAGED_BY));
    if (strcmp(str(kite_obj_get(svc, "spec"), "clusterIP"), "None") == 0) kite_obj_set(l, KITE_EPS_LABEL_HEADLESS, jstr(""));
    return l;
}

/* [the controller reference to the Service] */
static json_object *owner_refs(json_object *svc) {
    json_object *a = json_object_new_array();
    json_object_array_add(a, kite_wl_new_controller_ref("v1", "Service", svc));
    return a;
}

static json_object *new_slice(json_object *svc, json_object *ports) {
    json_object *s = json_object_new_object();
    kite_obj_set(s, "apiVersion", jstr("discovery.k8s.io/v1"));
    kite_obj_set(s, "kind", jstr("EndpointSlice"));
    json_object *meta = kite_obj_ensure(s, "metadata");
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-", str(kite_obj_meta(svc), "name"));
    kite_obj_set(meta, "generateName", jstr(prefix));
    kite_obj_set(meta, "namespace", jstr(str(kite_obj_meta(svc), "namespace")));
    kite_obj_set(meta, "labels", slice_labels(svc));
    kite_obj_set(meta, "ownerReferences", owner_refs(svc));
    kite_obj_set(s, "addressType", jstr("IPv4"));
    kite_obj_set(s, "endpoints", json_object_new_array());
    if (ports && kite_array_len(ports)) kite_obj_set(s, "ports", json_object_get(ports));
    return s;
}

/* The identity of an endpoint across reconciles: its pod's name, else its first address. */
static const char *ep_id(json_object *ep) {
    json_object *ref = kite_obj_get(ep, "targetRef");
    if (ref && *str(ref, "name")) return str(ref, "name");
    json_object *a = kite_obj_get(ep, "addresses");
    return kite_array_len(a) ? json_object_get_string(json_object_array_get_idx(a, 0)) : "";
}

static int64_t group_find(struct group *g, const char *name) {
    for (size_t i = 0; g && i < g->n; i++)
        if (!g->placed[i] && strcmp(g->names[i], name) == 0) return (int64_t)i;
    return -1;
}

/* The slice's metadata lacks what the controller puts there (labels, owner). */
static bool meta_differs(json_object *slice, json_object *svc) {
    json_object *want = slice_labels(svc), *have = kite_obj_get(kite_obj_meta(slice), "labels");
    bool differs = !have || !kite_json_equal(want, have);
    json_object_put(want);
    json_object *refs = owner_refs(svc);
    differs = differs || !kite_json_equal(refs, kite_obj_get(kite_obj_meta(slice), "ownerReferences"));
    json_object_put(refs);
    return differs;
}

static bool owned_by(json_object *slice, json_object *svc) {
    json_object *refs = kite_obj_get(kite_obj_meta(slice), "ownerReferences");
    for (size_t i = 0; i < kite_array_len(refs); i++) {
        json_object *r = json_object_array_get_idx(refs, i);
        if (strcmp(str(r, "kind"), "Service") == 0 && strcmp(str(r, "uid"), str(kite_obj_meta(svc), "uid")) == 0) return true;
    }
    return false;
}

static void finish_slice(struct work_slice *w, json_object *svc, struct kite_eps_plan *out) {
    if (!w->keep) {
        push_name(out, w->obj);
        return;
    }
    if (!w->changed && !meta_differs(w->obj, svc)) return;
    json_object *meta = kite_obj_meta(w->obj);
    kite_obj_set(meta, "labels", slice_labels(svc));
    kite_obj_set(meta, "ownerReferences", owner_refs(svc));
    kite_obj_set(w->obj, "endpoints", json_object_get(w->eps));
    if (w->g && kite_array_len(w->g->ports)) kite_obj_set(w->obj, "ports", json_object_get(w->g->ports));
    else json_object_object_del(w->obj, "ports");
    push(&out->update, &out->n_update, json_object_get(w->obj));
}

void kite_eps_reconcile(json_object *svc, json_object *const *pods, size_t n_pods, json_object *const *slices,
                        size_t n_slices, const char *(*zone)(void *ud, const char *node), void *ud, size_t max,
                        struct kite_eps_plan *out) {
    *out = (struct kite_eps_plan){0};
    if (!max) max = KITE_EPS_MAX_PER_SLICE;
    json_object *sel = svc ? kite_eps_selector(svc) : NULL;
    if (!sel) {
        for (size_t i = 0; i < n_slices; i++)
            push_name(out, slices[i]);
        return;
    }
    /* the wanted endpoints, grouped by their ports, in pod name order */
    json_object **sorted = n_pods ? kite_calloc(n_pods, sizeof *sorted) : NULL;
    size_t np = 0;
    for (size_t i = 0; i < n_pods; i++)
        if (kite_eps_selects(sel, kite_obj_get(kite_obj_meta(pods[i]), "labels")) && kite_eps_pod_included(pods[i]))
            sorted[np++] = pods[i];
    if (np) qsort(sorted, np, sizeof *sorted, by_name);
    struct group *gs = NULL;
    size_t ng = 0;
    for (size_t i = 0; i < np; i++) {
        json_object *ports = kite_eps_ports(svc, sorted[i]);
        const char *node = str(kite_obj_get(sorted[i], "spec"), "nodeName");
        group_add(group_for(&gs, &ng, ports), kite_eps_endpoint(svc, sorted[i], *node && zone ? zone(ud, node) : NULL),
                  kite_meta_str(sorted[i], "name"));
        json_object_put(ports);
    }
    free(sorted);

    /* 1. the existing slices keep the endpoints still wanted in their port set, changed in place */
    struct work_slice *ws = n_slices ? kite_calloc(n_slices, sizeof *ws) : NULL;
    for (size_t i = 0; i < n_slices; i++) {
        struct work_slice *w = &ws[i];
        json_object_deep_copy(slices[i], &w->obj, NULL);
        json_object *ports = kite_obj_get(w->obj, "ports");
        json_object *empty = ports ? NULL : json_object_new_array();
        w->g = NULL;
        const char *key = json_object_to_json_string_ext(ports ? ports : empty, JSON_C_TO_STRING_PLAIN);
        for (size_t k = 0; k < ng; k++)
            if (strcmp(gs[k].key, key) == 0) w->g = &gs[k];
        json_object_put(empty);
        w->eps = json_object_new_array();
        json_object *have = kite_obj_get(w->obj, "endpoints");
        for (size_t j = 0; j < kite_array_len(have); j++) {
            json_object *ep = json_object_array_get_idx(have, j);
            int64_t at = group_find(w->g, ep_id(ep));
            if (at < 0 || json_object_array_length(w->eps) >= max) {
                w->changed = true; /* gone, or a slice over the limit */
                continue;
            }
            w->g->placed[at] = true;
            if (!kite_json_equal(ep, w->g->eps[at])) w->changed = true;
            json_object_array_add(w->eps, json_object_get(w->g->eps[at]));
        }
        w->keep = w->g != NULL;
    }
    /* 2. new endpoints: first into slices written anyway, then slices with room, then new ones */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n_slices; i++) {
            struct work_slice *w = &ws[i];
            if (!w->g || (pass == 0 && !w->changed)) continue;
            for (size_t k = 0; k < w->g->n && json_object_array_length(w->eps) < max; k++) {
                if (w->g->placed[k]) continue;
                w->g->placed[k] = true;
                w->changed = true;
                json_object_array_add(w->eps, json_object_get(w->g->eps[k]));
            }
        }
    size_t total = 0;
    for (size_t k = 0; k < ng; k++) {
        json_object *cur = NULL;
        for (size_t j = 0; j < gs[k].n; j++) {
            if (gs[k].placed[j]) continue;
            if (!cur || json_object_array_length(kite_obj_get(cur, "endpoints")) >= max) {
                cur = new_slice(svc, gs[k].ports);
                push(&out->create, &out->n_create, cur);
            }
            json_object_array_add(kite_obj_get(cur, "endpoints"), json_object_get(gs[k].eps[j]));
        }
        total += gs[k].n;
    }
    /* 3. slices left empty go, except one placeholder when the Service has no endpoint at all */
    for (size_t i = 0; i < n_slices; i++)
        if (ws[i].keep && json_object_array_length(ws[i].eps) == 0) ws[i].keep = false;
    if (total == 0) {
        ssize_t keep = -1;
        for (size_t i = 0; i < n_slices && keep < 0; i++)
            if (!kite_array_len(kite_obj_get(slices[i], "ports")) && !kite_array_len(kite_obj_get(slices[i], "endpoints"))) keep = (ssize_t)i;
        if (keep < 0 && n_slices) {
            keep = 0;
            ws[0].changed = true;
        }
        if (keep >= 0) {
            ws[keep].keep = true;
            ws[keep].g = NULL;
        } else {
            push(&out->create, &out->n_create, new_slice(svc, NULL));
        }
    }
    for (size_t i = 0; i < n_slices; i++) {
        /* a slice to delete and one to create: the new one takes the old one's place, one
         * update instead of two writes (upstream's finalize), when the old is this Service's */
        if (!ws[i].keep && out->n_create && owned_by(slices[i], svc)) {
            json_object *c = out->create[--out->n_create];
            json_object *meta = kite_obj_meta(c);
            kite_obj_set(meta, "name", jstr(kite_meta_str(slices[i], "name")));
            const char *rv = kite_meta_str(slices[i], "resourceVersion");
            if (rv) kite_obj_set(meta, "resourceVersion", jstr(rv));
            push(&out->update, &out->n_update, c);
            goto next;
        }
        finish_slice(&ws[i], svc, out);
    next:
        json_object_put(ws[i].obj);
        json_object_put(ws[i].eps);
    }
    free(ws);
    groups_free(gs, ng);
}

/* ---- the writes -------------------------------------------------------------------------------- */

#define SLICES_PATH "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices"

int kite_eps_apply(struct kite_client *client, const char *ns, const struct kite_eps_plan *p,
                   void (*written)(void *ud, json_object *slice), void (*deleted)(void *ud, const char *ns, const char *name),
                   void *ud) {
    int err = 0;
    _cleanup_free_ char *coll = kite_asprintf(SLICES_PATH, ns);
    /* creates first, as upstream: an endpoint moving between slices is never missing from all */
    for (size_t i = 0; i < p->n_create + p->n_update; i++) {
        bool update = i >= p->n_create;
        json_object *slice = update ? p->update[i - p->n_create] : p->create[i];
        _cleanup_free_ char *path = update ? kite_asprintf("%s/%s", coll, kite_meta_str(slice, "name")) : kite_strdup(coll);
        json_object *ans = NULL;
        int e = kite_client_json(client, update ? "PUT" : "POST", path, NULL, slice, NULL, &ans);
        if (e == 0 && written) written(ud, ans);
        else if (e < 0 && !err && !(e == -ENOENT && !update)) err = e; /* a create's -ENOENT: the namespace is going */
        json_object_put(ans);
    }
    for (size_t i = 0; i < p->n_del; i++) {
        _cleanup_free_ char *path = kite_asprintf("%s/%s", coll, p->del[i]);
        int e = kite_client_json(client, "DELETE", path, NULL, NULL, NULL, NULL);
        if ((e == 0 || e == -ENOENT) && deleted) deleted(ud, ns, p->del[i]);
        else if (e < 0 && !err) err = e;
    }
    return err;
}
