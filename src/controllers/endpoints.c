/* The endpoints controller's reconcile (endpoints.h): pure functions of a Service, its pods and
 * its current Endpoints, as upstream's syncService. */
#include "controllers/endpoints.h"
#include "controllers/endpointslice.h"
#include "api/kinds/endpoints.h"
#include "api/registry.h"
#include "json/patch.h"

#include <stdio.h>

static const char *str(json_object *o, const char *k) {
    const char *s = kite_obj_str(o, k);
    return s ? s : "";
}
static json_object *jstr(const char *s) { return json_object_new_string(s); }


/* podToEndpointAddressForService, with the hostname when ShouldSetHostname */
static json_object *address(json_object *svc, json_object *pod) {
    json_object *a = json_object_new_object(), *spec = kite_obj_get(pod, "spec"), *meta = kite_obj_meta(pod);
    kite_obj_set(a, "ip", jstr(kite_eps_pod_ip(pod)));
    if (*str(spec, "hostname") && !strcmp(str(spec, "subdomain"), str(kite_obj_meta(svc), "name")) &&
        !strcmp(str(meta, "namespace"), str(kite_obj_meta(svc), "namespace")))
        kite_obj_set(a, "hostname", jstr(str(spec, "hostname")));
    kite_obj_set(a, "nodeName", jstr(str(spec, "nodeName")));
    json_object *ref = json_object_new_object();
    kite_obj_set(ref, "kind", jstr("Pod"));
    kite_obj_set(ref, "namespace", jstr(str(meta, "namespace")));
    kite_obj_set(ref, "name", jstr(str(meta, "name")));
    kite_obj_set(ref, "uid", jstr(str(meta, "uid")));
    kite_obj_set(a, "targetRef", ref);
    return a;
}

json_object *kite_epc_subsets(json_object *svc, json_object *const *pods, size_t n_pods) {
    json_object *raw = json_object_new_array(), *spec = kite_obj_get(svc, "spec");
    json_object *sel = kite_eps_selector(svc);
    bool publish = kite_eps_publish_not_ready(svc);
    bool no_ports = !kite_array_len(kite_obj_get(spec, "ports"));
    bool headless = !strcmp(str(spec, "clusterIP"), "None");
    for (size_t i = 0; sel && i < n_pods; i++) {
        json_object *pod = pods[i];
        if (!kite_streq(kite_meta_str(pod, "namespace"), kite_meta_str(svc, "namespace")) ||
            !kite_eps_selects(sel, kite_obj_get(kite_obj_meta(pod), "labels")))
            continue;
        /* ShouldPodBeInEndpoints(pod, includeTerminating = publishNotReadyAddresses) */
        if (!kite_eps_pod_included(pod) || (!publish && kite_meta_str(pod, "deletionTimestamp"))) continue;
        json_object *ports = NULL;
        if (no_ports) {
            if (!headless) continue; /* only a headless Service may have endpoints without ports */
        } else {
            ports = kite_eps_ports(svc, pod);
            if (!kite_array_len(ports)) { /* no target port found on the pod */
                json_object_put(ports);
                continue;
            }
            for (size_t j = 0; j < kite_array_len(ports); j++) {
                json_object *p = json_object_array_get_idx(ports, j);
                if (!*str(p, "name")) json_object_object_del(p, "name"); /* omitempty, unlike a slice's */
            }
        }
        /* addEndpointSubset: ready, or tolerated as such */
        bool ready = publish || kite_eps_conditions(pod, false).serving;
        json_object *ss = json_object_new_object(), *addrs = json_object_new_array();
        json_object_array_add(addrs, address(svc, pod));
        kite_obj_set(ss, ready ? "addresses" : "notReadyAddresses", addrs);
        if (ports) kite_obj_set(ss, "ports", ports);
        json_object_array_add(raw, ss);
    }
    json_object *out = kite_endpoints_repack(raw);
    json_object_put(raw);
    return out;
}

/* ---- the trigger time ---------------------------------------------------------------------------- */

static const char *ready_time(json_object *pod) {
    json_object *conds = kite_obj_get(kite_obj_get(pod, "status"), "conditions");
    for (size_t i = 0; i < kite_array_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (!strcmp(str(c, "type"), "Ready")) return str(c, "lastTransitionTime");
    }
    return "";
}

/* RFC 3339 times of one precision order as strings; "" is the zero time */
static void take_min(char out[40], const char *t) {
    if (*t && (!*out || strcmp(t, out) < 0)) snprintf(out, 40, "%s", t);
}

void kite_epc_trigger_time(json_object **state, json_object *svc, json_object *const *pods, size_t n_pods, char out[40]) {
    *out = 0;
    bool known = *state != NULL;
    json_object *old_pods = known ? kite_obj_get(*state, "pods") : NULL;
    json_object *next = json_object_new_object(), *next_pods = json_object_new_object();
    json_object *sel = kite_eps_selector(svc);
    for (size_t i = 0; sel && i < n_pods; i++) {
        if (!kite_streq(kite_meta_str(pods[i], "namespace"), kite_meta_str(svc, "namespace")) ||
            !kite_eps_selects(sel, kite_obj_get(kite_obj_meta(pods[i]), "labels")))
            continue;
        const char *t = ready_time(pods[i]), *name = str(kite_obj_meta(pods[i]), "name");
        if (!*t) continue;
        kite_obj_set(next_pods, name, jstr(t));
        if (!known || strcmp(str(old_pods, name), t) != 0) take_min(out, t);
    }
    const char *created = str(kite_obj_meta(svc), "creationTimestamp");
    if (!known || strcmp(str(*state, "service"), created) != 0) take_min(out, created);
    kite_obj_set(next, "service", jstr(created));
    kite_obj_set(next, "pods", next_pods);
    json_object_put(*state);
    *state = next;
}

/* ---- the capacity ---------------------------------------------------------------------------------- */

static size_t count_of(json_object *subsets, const char *which) {
    size_t n = 0;
    for (size_t i = 0; i < kite_array_len(subsets); i++) n += kite_array_len(kite_obj_get(json_object_array_get_idx(subsets, i), which));
    return n;
}

/* Keeps the first n of the list at which (removed when n is 0). */
static void keep_first(json_object *ss, const char *which, size_t n) {
    json_object *a = kite_obj_get(ss, which);
    size_t len = kite_array_len(a);
    if (!n) json_object_object_del(ss, which);
    else if (len > n) json_object_array_del_idx(a, n, len - n);
}

bool kite_epc_truncate(json_object *subsets) {
    size_t ready = count_of(subsets, "addresses"), not_ready = count_of(subsets, "notReadyAddresses");
    if (ready + not_ready <= KITE_EPC_MAX_CAPACITY) return false;
    /* truncateEndpoints: not-ready addresses go first; past the capacity in ready ones alone,
     * every not-ready one goes and the ready ones are cut, each subset in proportion (rounded
     * up, the last ones getting what is left) */
    bool cut_ready = ready > KITE_EPC_MAX_CAPACITY;
    size_t max = cut_ready ? KITE_EPC_MAX_CAPACITY : KITE_EPC_MAX_CAPACITY - ready, total = cut_ready ? ready : not_ready;
    size_t room = max;
    for (size_t i = 0; i < kite_array_len(subsets); i++) {
        json_object *ss = json_object_array_get_idx(subsets, i);
        size_t in = kite_array_len(kite_obj_get(ss, cut_ready ? "addresses" : "notReadyAddresses"));
        size_t add = (in * max + total - 1) / total;
        if (add > room) add = room;
        if (cut_ready) {
            keep_first(ss, "addresses", add);
            keep_first(ss, "notReadyAddresses", 0);
        } else {
            keep_first(ss, "notReadyAddresses", add);
        }
        room -= KITE_MIN(add, in);
    }
    return true;
}

/* ---- the reconcile ------------------------------------------------------------------------------- */

static json_object *want_labels(json_object *svc) {
    json_object *l = json_object_new_object(), *sl = kite_obj_get(kite_obj_meta(svc), "labels");
    if (sl && json_object_is_type(sl, json_type_object)) {
        json_object_object_foreach(sl, k, v) kite_obj_set(l, k, jstr(json_object_get_string(v)));
    }
    /* IsServiceIPSet: a cluster IP that is neither empty nor None */
    const char *ip = str(kite_obj_get(svc, "spec"), "clusterIP");
    if (!*ip || !strcmp(ip, "None")) kite_obj_set(l, KITE_EPC_LABEL_HEADLESS, jstr(""));
    else json_object_object_del(l, KITE_EPC_LABEL_HEADLESS);
    return l;
}

static bool empty_or_equal(json_object *a, json_object *b) {
    if (!kite_array_len(a) && !kite_array_len(b)) return true;
    return a && b && kite_json_equal(a, b);
}

enum kite_epc_op kite_epc_reconcile(json_object *svc, json_object *const *pods, size_t n_pods, json_object *cur,
                                    bool svc_gone, const char *trigger, json_object **ret) {
    *ret = NULL;
    if (!svc) return cur && svc_gone ? KITE_EPC_DELETE : KITE_EPC_NONE;
    if (!strcmp(str(kite_obj_get(svc, "spec"), "type"), "ExternalName") || !kite_eps_selector(svc)) return KITE_EPC_NONE;
    json_object *subsets = kite_epc_subsets(svc, pods, n_pods), *labels = want_labels(svc);
    bool truncated = kite_epc_truncate(subsets);
    json_object *have_labels = cur ? kite_obj_get(kite_obj_meta(cur), "labels") : NULL;
    bool labels_same = json_object_object_length(labels) ? have_labels && kite_json_equal(labels, have_labels)
                                                         : !have_labels || !json_object_object_length(have_labels);
    bool marked = cur && kite_obj_str(kite_obj_get(kite_obj_meta(cur), "annotations"), KITE_EPC_ANN_OVER_CAPACITY);
    if (cur && labels_same && marked == truncated && empty_or_equal(kite_obj_get(cur, "subsets"), subsets)) {
        json_object_put(subsets);
        json_object_put(labels);
        return KITE_EPC_NONE;
    }
    json_object *o = NULL;
    if (cur) {
        json_object_deep_copy(cur, &o, NULL);
    } else {
        o = json_object_new_object();
        kite_obj_set(o, "apiVersion", jstr("v1"));
        kite_obj_set(o, "kind", jstr("Endpoints"));
        json_object *meta = kite_obj_ensure(o, "metadata");
        kite_obj_set(meta, "name", jstr(str(kite_obj_meta(svc), "name")));
        kite_obj_set(meta, "namespace", jstr(str(kite_obj_meta(svc), "namespace")));
    }
    json_object *meta = kite_obj_meta(o);
    if (json_object_object_length(labels)) kite_obj_set(meta, "labels", labels);
    else {
        json_object_object_del(meta, "labels");
        json_object_put(labels);
    }
    json_object *ann = kite_obj_get(meta, "annotations");
    if (!ann || !json_object_is_type(ann, json_type_object)) kite_obj_set(meta, "annotations", ann = json_object_new_object());
    if (trigger && *trigger) kite_obj_set(ann, KITE_EPC_ANN_TRIGGER, jstr(trigger));
    else json_object_object_del(ann, KITE_EPC_ANN_TRIGGER);
    if (truncated) kite_obj_set(ann, KITE_EPC_ANN_OVER_CAPACITY, jstr("truncated"));
    else json_object_object_del(ann, KITE_EPC_ANN_OVER_CAPACITY);
    if (!json_object_object_length(ann)) json_object_object_del(meta, "annotations");
    if (kite_array_len(subsets)) kite_obj_set(o, "subsets", subsets);
    else {
        json_object_object_del(o, "subsets");
        json_object_put(subsets);
    }
    *ret = o;
    return cur ? KITE_EPC_UPDATE : KITE_EPC_CREATE;
}
