/* The default RBAC policy, created and reconciled at every start as kube-apiserver's
 * rbac/bootstrap-roles post-start hook does (plugin/pkg/auth/authorizer/rbac/bootstrappolicy):
 * missing roles and bindings are created; those annotated
 * rbac.authorization.kubernetes.io/autoupdate=true get back the rules, labels, aggregation rule
 * and subjects of the defaults they lack (what an administrator added stays). Rules name
 * upstream's resources, kite's or not yet, so the roles read as users know them.
 *
 * kite's controller-manager runs as the user system:kube-controller-manager with the least its
 * controllers need; the scheduler runs as system:kube-scheduler. */
#include "apiserver/rbac.h"
#include "api/policy_rules.h"

#include <stdio.h>

/* the group kite token create (and kubeadm) gives its tokens beyond system:bootstrappers */
#define KITE_BOOTSTRAP_DEFAULT_GROUP "system:bootstrappers:kubeadm:default-node-token"

#define READ KITE_RULE_READ
#define WRITE KITE_RULE_WRITE
#define RULE KITE_RULE
#define RULE_NAMES KITE_RULE_NAMES
#define URLS KITE_RULE_URLS
#define CORE KITE_RULE_CORE
#define AGG(to) "\"rbac.authorization.k8s.io/aggregate-to-" to "\":\"true\""
#define EVENTS KITE_RULE_EVENTS

struct boot_role {
    const char *name;
    const char *labels;      /* JSON object members beyond the bootstrapping label, or "" */
    const char *aggregation; /* JSON aggregationRule, or NULL */
    const char *rules;       /* JSON array */
};

static const struct boot_role ROLES[] = {
    {"cluster-admin", "", NULL, "[" RULE("\"*\"", "\"*\"", "\"*\"") "," URLS("\"*\"", "\"*\"") "]"},
    {"admin", "", "{\"clusterRoleSelectors\":[{\"matchLabels\":{" AGG("admin") "}}]}", "[]"},
    {"edit", "," AGG("admin"), "{\"clusterRoleSelectors\":[{\"matchLabels\":{" AGG("edit") "}}]}", "[]"},
    {"view", "," AGG("edit"), "{\"clusterRoleSelectors\":[{\"matchLabels\":{" AGG("view") "}}]}", "[]"},
    {"system:aggregate-to-admin", "," AGG("admin"), NULL,
     "[" RULE("\"create\"", "\"authorization.k8s.io\"", "\"localsubjectaccessreviews\"") ","
     RULE(READ "," WRITE, "\"rbac.authorization.k8s.io\"", "\"rolebindings\",\"roles\"") "]"},
    {"system:aggregate-to-edit", "," AGG("edit"), NULL,
     "[" RULE("\"impersonate\"", CORE, "\"serviceaccounts\"") ","
     RULE(WRITE, CORE, "\"pods\",\"pods/attach\",\"pods/exec\",\"pods/portforward\",\"pods/proxy\"") ","
     RULE("\"create\"", CORE, "\"pods/eviction\"") ","
     RULE(WRITE, CORE, "\"configmaps\",\"events\",\"persistentvolumeclaims\",\"replicationcontrollers\","
                       "\"replicationcontrollers/scale\",\"secrets\",\"serviceaccounts\",\"services\",\"services/proxy\"") ","
     RULE("\"create\"", CORE, "\"serviceaccounts/token\"") ","
     RULE(WRITE, "\"apps\"", "\"daemonsets\",\"deployments\",\"deployments/rollback\",\"deployments/scale\",\"replicasets\","
                             "\"replicasets/scale\",\"statefulsets\",\"statefulsets/scale\"") ","
     RULE(WRITE, "\"autoscaling\"", "\"horizontalpodautoscalers\"") ","
     RULE(WRITE, "\"batch\"", "\"cronjobs\",\"jobs\"") ","
     RULE(WRITE, "\"policy\"", "\"poddisruptionbudgets\"") ","
     RULE(WRITE, "\"networking.k8s.io\"", "\"ingresses\",\"networkpolicies\"") ","
     RULE(WRITE, "\"coordination.k8s.io\"", "\"leases\"") ","
     RULE(READ, CORE, "\"pods/attach\",\"pods/exec\",\"pods/portforward\",\"pods/proxy\",\"secrets\",\"services/proxy\"") "]"},
    {"system:aggregate-to-view", "," AGG("view"), NULL,
     "[" RULE(READ, CORE, "\"configmaps\",\"endpoints\",\"persistentvolumeclaims\",\"persistentvolumeclaims/status\",\"pods\","
                         "\"replicationcontrollers\",\"replicationcontrollers/scale\",\"serviceaccounts\",\"services\","
                         "\"services/status\"") ","
     RULE(READ, CORE, "\"bindings\",\"events\",\"limitranges\",\"namespaces/status\",\"pods/log\",\"pods/status\","
                      "\"replicationcontrollers/status\",\"resourcequotas\",\"resourcequotas/status\"") ","
     RULE(READ, CORE, "\"namespaces\"") ","
     RULE(READ, "\"discovery.k8s.io\"", "\"endpointslices\"") ","
     RULE(READ, "\"apps\"", "\"controllerrevisions\",\"daemonsets\",\"daemonsets/status\",\"deployments\",\"deployments/scale\","
                            "\"deployments/status\",\"replicasets\",\"replicasets/scale\",\"replicasets/status\",\"statefulsets\","
                            "\"statefulsets/scale\",\"statefulsets/status\"") ","
     RULE(READ, "\"autoscaling\"", "\"horizontalpodautoscalers\",\"horizontalpodautoscalers/status\"") ","
     RULE(READ, "\"batch\"", "\"cronjobs\",\"cronjobs/status\",\"jobs\",\"jobs/status\"") ","
     RULE(READ, "\"policy\"", "\"poddisruptionbudgets\",\"poddisruptionbudgets/status\"") ","
     RULE(READ, "\"networking.k8s.io\"", "\"ingresses\",\"ingresses/status\",\"networkpolicies\"") ","
     RULE(READ, "\"coordination.k8s.io\"", "\"leases\"") ","
     RULE(READ, "\"events.k8s.io\"", "\"events\"") "]"},
    /* metrics-server's: the resource metrics API (kubectl top) for whoever holds view, edit or admin */
    {"system:aggregated-metrics-reader", "," AGG("admin") "," AGG("edit") "," AGG("view"), NULL,
     "[" RULE("\"get\",\"list\",\"watch\"", "\"metrics.k8s.io\"", "\"pods\",\"nodes\"") "]"},
    {"system:basic-user", "", NULL,
     "[" RULE("\"create\"", "\"authentication.k8s.io\"", "\"selfsubjectreviews\"") ","
     RULE("\"create\"", "\"authorization.k8s.io\"", "\"selfsubjectaccessreviews\",\"selfsubjectrulesreviews\"") "]"},
    {"system:discovery", "", NULL,
     "[" URLS("\"get\"", "\"/api\",\"/api/*\",\"/apis\",\"/apis/*\",\"/healthz\",\"/livez\",\"/openapi\",\"/openapi/*\","
                         "\"/readyz\",\"/version\",\"/version/\"") "]"},
    {"system:public-info-viewer", "", NULL,
     "[" URLS("\"get\"", "\"/healthz\",\"/livez\",\"/readyz\",\"/version\",\"/version/\"") "]"},
    /* NodeRules(): what every node may do; the Node authorizer narrows it to the node's own
     * objects. Unbound, as upstream since 1.8 (the Node authorizer grants it). */
    {"system:node", "", NULL,
     "[" RULE("\"create\"", "\"authentication.k8s.io\"", "\"tokenreviews\"") ","
     RULE("\"create\"", "\"authorization.k8s.io\"", "\"localsubjectaccessreviews\",\"subjectaccessreviews\"") ","
     RULE(READ, CORE, "\"services\"") ","
     RULE("\"create\",\"get\",\"list\",\"watch\"", CORE, "\"nodes\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"nodes/status\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"nodes\"") ","
     RULE("\"create\",\"patch\",\"update\"", CORE, "\"events\"") ","
     RULE(READ, CORE, "\"pods\"") ","
     RULE("\"create\",\"delete\"", CORE, "\"pods\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"pods/status\"") ","
     RULE("\"create\"", CORE, "\"pods/eviction\"") ","
     RULE("\"get\"", CORE, "\"configmaps\",\"secrets\"") ","
     RULE("\"get\"", CORE, "\"persistentvolumeclaims\",\"persistentvolumes\"") ","
     RULE("\"get\"", CORE, "\"endpoints\"") ","
     RULE("\"create\",\"get\",\"list\",\"watch\"", "\"certificates.k8s.io\"", "\"certificatesigningrequests\"") ","
     RULE("\"create\",\"delete\",\"get\",\"patch\",\"update\"", "\"coordination.k8s.io\"", "\"leases\"") ","
     RULE("\"get\",\"patch\",\"update\"", CORE, "\"persistentvolumeclaims/status\"") ","
     RULE("\"get\"", "\"storage.k8s.io\"", "\"volumeattachments\"") ","
     RULE("\"create\"", CORE, "\"serviceaccounts/token\"") ","
     RULE(READ, "\"storage.k8s.io\"", "\"csidrivers\"") ","
     RULE("\"create\",\"delete\",\"get\",\"patch\",\"update\"", "\"storage.k8s.io\"", "\"csinodes\"") ","
     RULE(READ, "\"node.k8s.io\"", "\"runtimeclasses\"") "]"},
    /* kite's controller-manager: what it needs whichever controllers run (Events, its leader
     * election Lease, delegated authentication and authorization); each controller's own rules
     * are its ClusterRole system:controller:<name>, from its descriptor row (the apiserver's
     * options: kite_apiserver_options.controller_roles) */
    {"system:kube-controller-manager", "", NULL,
     "[" EVENTS ","
     RULE("\"create\"", "\"coordination.k8s.io\"", "\"leases\"") ","
     RULE_NAMES("\"get\",\"update\"", "\"coordination.k8s.io\"", "\"leases\"", "\"kube-controller-manager\"") ","
     RULE("\"create\"", "\"authentication.k8s.io\"", "\"tokenreviews\"") ","
     RULE("\"create\"", "\"authorization.k8s.io\"", "\"subjectaccessreviews\"") "]"},
    {"system:kube-scheduler", "", NULL,
     "[" EVENTS ","
     RULE("\"create\"", "\"authentication.k8s.io\"", "\"tokenreviews\"") ","
     RULE("\"create\"", "\"authorization.k8s.io\"", "\"subjectaccessreviews\"") ","
     RULE("\"create\"", "\"coordination.k8s.io\"", "\"leases\"") ","
     RULE_NAMES("\"get\",\"update\"", "\"coordination.k8s.io\"", "\"leases\"", "\"kube-scheduler\"") ","
     RULE(READ, CORE, "\"nodes\"") ","
     RULE("\"delete\",\"get\",\"list\",\"watch\"", CORE, "\"pods\"") ","
     RULE("\"create\"", CORE, "\"bindings\",\"pods/binding\"") ","
     RULE("\"patch\",\"update\"", CORE, "\"pods/status\"") ","
     RULE(READ, CORE, "\"replicationcontrollers\",\"services\"") ","
     RULE(READ, "\"apps\",\"extensions\"", "\"replicasets\"") ","
     RULE(READ, "\"apps\"", "\"statefulsets\"") ","
     RULE(READ, "\"policy\"", "\"poddisruptionbudgets\"") ","
     RULE(READ, CORE, "\"persistentvolumeclaims\",\"persistentvolumes\"") ","
     RULE(READ, "\"storage.k8s.io\"", "\"csidrivers\",\"csinodes\",\"csistoragecapacities\"") ","
     RULE(READ, CORE, "\"namespaces\"") "]"},
    /* kube-proxy's (upstream's system:node-proxier): the node agent's Service proxy */
    {"system:node-proxier", "", NULL,
     "[" RULE("\"list\",\"watch\"", CORE, "\"endpoints\",\"services\"") ","
     RULE("\"get\",\"list\",\"watch\"", CORE, "\"nodes\"") ","
     RULE("\"create\",\"patch\",\"update\"", CORE, "\"events\"") ","
     RULE("\"create\",\"patch\",\"update\"", "\"events.k8s.io\"", "\"events\"") ","
     RULE("\"list\",\"watch\"", "\"discovery.k8s.io\"", "\"endpointslices\"") "]"},
    /* what the node agent's Service proxy reads, and no more: system:node-proxier also lists
     * every Node, which a node's own credential may not (the Node authorizer's rule) */
    {"kite:node-proxier", "", NULL,
     "[" RULE("\"list\",\"watch\"", CORE, "\"services\"") ","
     RULE("\"list\",\"watch\"", "\"discovery.k8s.io\"", "\"endpointslices\"") "]"},
    /* TLS bootstrap (upstream's bootstrap policy): a bootstrap token may ask for a node's
     * client certificate, and the approver (csrapproving.c) approves what the requester may
     * create as nodeclient (a new node) or selfnodeclient (a node renewing its own). */
    {"system:node-bootstrapper", "", NULL,
     "[" RULE("\"create\",\"get\",\"list\",\"watch\"", "\"certificates.k8s.io\"", "\"certificatesigningrequests\"") "]"},
    {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", "", NULL,
     "[" RULE("\"create\"", "\"certificates.k8s.io\"", "\"certificatesigningrequests/nodeclient\"") "]"},
    {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "", NULL,
     "[" RULE("\"create\"", "\"certificates.k8s.io\"", "\"certificatesigningrequests/selfnodeclient\"") "]"},
};

#define GROUP_SUBJECT(g) "{\"kind\":\"Group\",\"apiGroup\":\"rbac.authorization.k8s.io\",\"name\":\"" g "\"}"
#define USER_SUBJECT(u) "{\"kind\":\"User\",\"apiGroup\":\"rbac.authorization.k8s.io\",\"name\":\"" u "\"}"

struct boot_binding {
    const char *name, *role, *subjects;
};
static const struct boot_binding BINDINGS[] = {
    {"cluster-admin", "cluster-admin", "[" GROUP_SUBJECT("system:masters") "]"},
    {"system:basic-user", "system:basic-user", "[" GROUP_SUBJECT("system:authenticated") "]"},
    {"system:discovery", "system:discovery", "[" GROUP_SUBJECT("system:authenticated") "]"},
    {"system:public-info-viewer", "system:public-info-viewer",
     "[" GROUP_SUBJECT("system:authenticated") "," GROUP_SUBJECT("system:unauthenticated") "]"},
    {"system:kube-controller-manager", "system:kube-controller-manager", "[" USER_SUBJECT("system:kube-controller-manager") "]"},
    {"system:kube-scheduler", "system:kube-scheduler", "[" USER_SUBJECT("system:kube-scheduler") "]"},
    /* what kubeadm binds for its default node token and for nodes renewing */
    {"kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "[" GROUP_SUBJECT(KITE_BOOTSTRAP_DEFAULT_GROUP) "]"},
    {"kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
     "[" GROUP_SUBJECT(KITE_BOOTSTRAP_DEFAULT_GROUP) "]"},
    {"kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
     "[" GROUP_SUBJECT("system:nodes") "]"},
    /* kube-proxy's, as upstream binds it */
    {"system:node-proxier", "system:node-proxier", "[" USER_SUBJECT("system:kube-proxy") "]"},
    /* every node runs the Service proxy in its agent */
    {"kite:node-proxier", "kite:node-proxier", "[" GROUP_SUBJECT("system:nodes") "]"},
};

static json_object *parse(const char *text) {
    json_object *o = json_tokener_parse(text);
    if (!o) log_error("rbac", "bootstrap policy does not parse: %s", text); /* a bug: the tables are constants */
    return o;
}

static json_object *skeleton(const struct kite_resource *r, const char *name) {
    json_object *o = json_object_new_object();
    kite_obj_set(o, "kind", json_object_new_string(r->kind));
    kite_obj_set(o, "apiVersion", json_object_new_string(r->api_version));
    json_object *meta = kite_obj_ensure(o, "metadata");
    kite_obj_set(meta, "name", json_object_new_string(name));
    kite_obj_set(kite_obj_ensure(meta, "annotations"), "rbac.authorization.kubernetes.io/autoupdate", json_object_new_string("true"));
    kite_obj_set(kite_obj_ensure(meta, "labels"), "kubernetes.io/bootstrapping", json_object_new_string("rbac-defaults"));
    return o;
}

static json_object *role_object(const struct kite_resource *r, const struct boot_role *b) {
    json_object *o = skeleton(r, b->name);
    _cleanup_free_ char *labels = kite_asprintf("{\"kubernetes.io/bootstrapping\":\"rbac-defaults\"%s}", b->labels);
    kite_obj_set(kite_obj_meta(o), "labels", parse(labels));
    kite_obj_set(o, "rules", parse(b->rules));
    if (b->aggregation) kite_obj_set(o, "aggregationRule", parse(b->aggregation));
    return o;
}

/* A bootstrap role's labels match an aggregation selector's matchLabels (all the bootstrap
 * selectors are matchLabels). */
static bool labels_match(json_object *labels, json_object *match) {
    if (!match || !json_object_is_type(match, json_type_object)) return false;
    json_object_object_foreach(match, k, v) {
        const char *have = kite_obj_str(labels, k);
        if (!have || strcmp(have, json_object_get_string(v)) != 0) return false;
    }
    return true;
}

/* An aggregated role starts with the rules of the defaults it aggregates (through aggregated
 * ones too: edit is aggregated into admin), so a bare apiserver (no controller-manager yet)
 * already has a useful view, edit and admin; the aggregation controller keeps them current. */
static void add_aggregated(const struct kite_resource *r, json_object *rules, json_object *sels, int depth) {
    for (size_t i = 0; depth < 8 && i < KITE_ARRAY_SIZE(ROLES); i++) {
        json_object *other = role_object(r, &ROLES[i]);
        json_object *labels = kite_obj_get(kite_obj_meta(other), "labels");
        bool match = false;
        for (size_t s = 0; sels && s < json_object_array_length(sels); s++)
            match |= labels_match(labels, kite_obj_get(json_object_array_get_idx(sels, s), "matchLabels"));
        json_object *more = kite_obj_get(other, "rules");
        for (size_t k = 0; match && k < json_object_array_length(more); k++) {
            json_object *rule = json_object_array_get_idx(more, k);
            bool dup = false;
            for (size_t h = 0; !dup && h < json_object_array_length(rules); h++)
                dup = kite_json_equal(json_object_array_get_idx(rules, h), rule);
            if (!dup) json_object_array_add(rules, json_object_get(rule));
        }
        if (match && ROLES[i].aggregation)
            add_aggregated(r, rules, kite_obj_get(kite_obj_get(other, "aggregationRule"), "clusterRoleSelectors"), depth + 1);
        json_object_put(other);
    }
}

static void initial_aggregation(const struct kite_resource *r, json_object *role) {
    add_aggregated(r, kite_obj_get(role, "rules"), kite_obj_get(kite_obj_get(role, "aggregationRule"), "clusterRoleSelectors"), 0);
}

static int write_update(struct kite_apiserver *s, const char *key, json_object *o, int64_t mod_rev) {
    size_t len;
    _cleanup_free_ char *bytes = kite_object_encode(o, &len);
    struct kite_write w = {.type = KITE_WRITE_UPDATE, .key = key, .value = bytes, .len = len, .expect_mod_rev = mod_rev};
    return kite_store_write(s->store, &w, NULL, NULL);
}

/* Adds to `have` the members of want's string map `field` it lacks; true when it changed. */
static bool merge_map(json_object *have_meta, json_object *want_meta, const char *field) {
    json_object *want = kite_obj_get(want_meta, field);
    if (!want || !json_object_is_type(want, json_type_object)) return false;
    json_object *have = kite_obj_ensure(have_meta, field);
    bool changed = false;
    json_object_object_foreach(want, k, v) {
        if (kite_obj_get(have, k)) continue;
        kite_obj_set(have, k, json_object_get(v));
        changed = true;
    }
    return changed;
}

/* a[k] and b[k] are the same string, absent counting as "" */
static bool same_str(json_object *a, json_object *b, const char *k) {
    const char *x = kite_obj_str(a, k), *y = kite_obj_str(b, k);
    return strcmp(x ? x : "", y ? y : "") == 0;
}

/* Reconciles one default (role or binding) with the stored object: creates it, or adds what
 * an autoupdate object lacks. list_field: "rules" or "subjects". */
static int reconcile(struct kite_apiserver *s, const struct kite_resource *r, json_object *want, const char *list_field) {
    const char *name = kite_meta_str(want, "name");
    _cleanup_free_ char *key = kite_object_key(r, NULL, name);
    struct kite_record *rec = kite_wcache_get(kite_apiserver_storage_cache(s, r), key);
    if (!rec) {
        int e = kite_apiserver_create_sync(s, r, want);
        return e == -EEXIST ? 0 : e;
    }
    json_object *have = kite_object_decode(rec->value, rec->len, rec->mod_rev);
    int64_t mod_rev = rec->mod_rev;
    kite_record_unref(rec);
    if (!have) return 0;
    const char *auto_update = kite_obj_str(kite_obj_get(kite_obj_meta(have), "annotations"), "rbac.authorization.kubernetes.io/autoupdate");
    int e = 0;
    if (!auto_update || strcmp(auto_update, "true") != 0) goto out;
    bool changed = merge_map(kite_obj_meta(have), kite_obj_meta(want), "labels");
    changed |= merge_map(kite_obj_meta(have), kite_obj_meta(want), "annotations");
    if (kite_obj_get(want, "aggregationRule") && !kite_obj_get(have, "aggregationRule")) {
        kite_obj_set(have, "aggregationRule", json_object_get(kite_obj_get(want, "aggregationRule")));
        changed = true;
    }
    json_object *wl = kite_obj_get(want, list_field), *hl = kite_obj_get(have, list_field);
    if (!hl || !json_object_is_type(hl, json_type_array)) {
        hl = json_object_new_array();
        kite_obj_set(have, list_field, hl);
    }
    /* an aggregated role's rules are the aggregation controller's */
    bool rules_owned = strcmp(list_field, "rules") != 0 || !kite_obj_get(want, "aggregationRule");
    for (size_t i = 0; rules_owned && i < json_object_array_length(wl); i++) {
        json_object *item = json_object_array_get_idx(wl, i);
        bool present = false;
        if (strcmp(list_field, "rules") == 0) {
            struct rbac_rules owner = {0}, one = {0};
            kite_apiserver_rbac_rules_append(&owner, hl);
            json_object *a = json_object_new_array();
            json_object_array_add(a, json_object_get(item));
            kite_apiserver_rbac_rules_append(&one, a);
            json_object_put(a);
            present = kite_apiserver_rbac_rules_cover(&owner, &one, NULL);
            kite_apiserver_rbac_rules_release(&owner);
            kite_apiserver_rbac_rules_release(&one);
        } else {
            for (size_t k = 0; !present && k < json_object_array_length(hl); k++) {
                json_object *h = json_object_array_get_idx(hl, k);
                present = same_str(h, item, "kind") && same_str(h, item, "name") && same_str(h, item, "namespace");
            }
        }
        if (!present) {
            json_object_array_add(hl, json_object_get(item));
            changed = true;
        }
    }
    /* a default that exists already serves as it is if it cannot be put back now (changed
     * meanwhile by a client, a full disk): the next start tries again */
    if (changed && (e = write_update(s, key, have, mod_rev)) < 0) {
        log_warn("rbac", "cannot restore the default %s %s: %s", r->kind, name, strerror(-e));
        e = 0;
    }
out:
    json_object_put(have);
    return e;
}

/* A ClusterRole and its ClusterRoleBinding (same name) to one user, from the apiserver's
 * options (the controllers' roles). */
static int reconcile_extra(struct kite_apiserver *s, const struct kite_resource *cr, const struct kite_resource *crb,
                           const struct kite_apiserver_role *x) {
    struct boot_role b = {x->name, "", NULL, x->rules};
    json_object *o = role_object(cr, &b);
    int e = reconcile(s, cr, o, "rules");
    json_object_put(o);
    if (e < 0) return e;
    o = skeleton(crb, x->name);
    _cleanup_free_ char *ref = kite_asprintf("{\"apiGroup\":\"" KITE_RBAC_GROUP "\",\"kind\":\"ClusterRole\",\"name\":\"%s\"}", x->name);
    _cleanup_free_ char *subj =
        kite_asprintf("[{\"kind\":\"User\",\"apiGroup\":\"rbac.authorization.k8s.io\",\"name\":\"%s\"}]", x->user);
    kite_obj_set(o, "roleRef", parse(ref));
    kite_obj_set(o, "subjects", parse(subj));
    e = reconcile(s, crb, o, "subjects");
    json_object_put(o);
    return e;
}

int kite_apiserver_rbac_bootstrap(struct kite_apiserver *s, const struct kite_apiserver_role *extra, size_t n_extra) {
    const struct kite_resource *cr = kite_registry_find(KITE_RBAC_GROUP, "v1", "clusterroles");
    const struct kite_resource *crb = kite_registry_find(KITE_RBAC_GROUP, "v1", "clusterrolebindings");
    if (!cr || !crb) return -ENOENT;
    int e = 0;
    for (size_t i = 0; e >= 0 && i < KITE_ARRAY_SIZE(ROLES); i++) {
        json_object *o = role_object(cr, &ROLES[i]);
        if (ROLES[i].aggregation) initial_aggregation(cr, o);
        e = reconcile(s, cr, o, "rules");
        json_object_put(o);
    }
    for (size_t i = 0; e >= 0 && i < KITE_ARRAY_SIZE(BINDINGS); i++) {
        json_object *o = skeleton(crb, BINDINGS[i].name);
        _cleanup_free_ char *ref =
            kite_asprintf("{\"apiGroup\":\"" KITE_RBAC_GROUP "\",\"kind\":\"ClusterRole\",\"name\":\"%s\"}", BINDINGS[i].role);
        kite_obj_set(o, "roleRef", parse(ref));
        kite_obj_set(o, "subjects", parse(BINDINGS[i].subjects));
        e = reconcile(s, crb, o, "subjects");
        json_object_put(o);
    }
    for (size_t i = 0; e >= 0 && i < n_extra; i++) e = reconcile_extra(s, cr, crb, &extra[i]);
    return e;
}
