/* The resource table. One row per resource; see registry.h for what each column means. */
#include "api/registry.h"
#include "api/selector.h"
#include "base/buf.h"

#include <stdio.h>

/* --- strategic-merge-patch schemas (patchStrategy/patchMergeKey tags of the Go types) ---- */
#define META_RULES                                                       \
    {"metadata.finalizers", NULL, KITE_SMP_MERGE_PRIMITIVES},            \
    {"metadata.ownerReferences", "uid", KITE_SMP_MERGE}

static const struct kite_smp_rule meta_rules[] = {META_RULES};
static const struct kite_smp_schema meta_schema = {meta_rules, KITE_ARRAY_SIZE(meta_rules)};

static const struct kite_smp_rule node_rules[] = {
    META_RULES,
    /* spec.taints has no patch strategy upstream: atomic, so `kubectl taint k-` removes */
    {"spec.podCIDRs", NULL, KITE_SMP_MERGE_PRIMITIVES},
    {"status.conditions", "type", KITE_SMP_MERGE},
    {"status.addresses", "type", KITE_SMP_MERGE},
    {"status.volumesAttached", "name", KITE_SMP_MERGE},
};
static const struct kite_smp_schema node_schema = {node_rules, KITE_ARRAY_SIZE(node_rules)};

static const struct kite_smp_rule pod_rules[] = {
    META_RULES,
    {"spec.containers", "name", KITE_SMP_MERGE},
    {"spec.containers.ports", "containerPort", KITE_SMP_MERGE},
    {"spec.containers.env", "name", KITE_SMP_MERGE},
    {"spec.containers.volumeMounts", "mountPath", KITE_SMP_MERGE},
    {"spec.containers.volumeDevices", "devicePath", KITE_SMP_MERGE},
    {"spec.initContainers", "name", KITE_SMP_MERGE},
    {"spec.initContainers.ports", "containerPort", KITE_SMP_MERGE},
    {"spec.initContainers.env", "name", KITE_SMP_MERGE},
    {"spec.initContainers.volumeMounts", "mountPath", KITE_SMP_MERGE},
    {"spec.ephemeralContainers", "name", KITE_SMP_MERGE},
    {"spec.volumes", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS},
    {"spec.imagePullSecrets", "name", KITE_SMP_MERGE},
    {"spec.hostAliases", "ip", KITE_SMP_MERGE},
    {"spec.topologySpreadConstraints", "topologyKey", KITE_SMP_MERGE},
    {"spec.resourceClaims", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS},
    {"status.conditions", "type", KITE_SMP_MERGE},
    {"status.podIPs", "ip", KITE_SMP_MERGE},
    {"status.hostIPs", "ip", KITE_SMP_MERGE},
};
static const struct kite_smp_schema pod_schema = {pod_rules, KITE_ARRAY_SIZE(pod_rules)};

static const struct kite_smp_rule ns_rules[] = {
    META_RULES,
    {"status.conditions", "type", KITE_SMP_MERGE},
};
static const struct kite_smp_schema ns_schema = {ns_rules, KITE_ARRAY_SIZE(ns_rules)};

/* --- selectable fields ------------------------------------------------------------------ */
static const char *const node_fields[] = {"spec.unschedulable", NULL};
static const char *const ns_fields[] = {"status.phase", NULL};
static const char *const pod_fields[] = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                         "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                                         "status.podIP", "status.nominatedNodeName", NULL};
static const char *const event_fields[] = {"involvedObject.kind", "involvedObject.namespace",
                                           "involvedObject.name", "involvedObject.uid",
                                           "involvedObject.apiVersion", "involvedObject.resourceVersion",
                                           "involvedObject.fieldPath", "reason", "reportingComponent",
                                           "source", "type", NULL};
static const char *const events_v1_fields[] = {"regarding.kind", "regarding.namespace", "regarding.name",
                                               "regarding.uid", "regarding.apiVersion",
                                               "regarding.resourceVersion", "regarding.fieldPath", "reason",
                                               "reportingController", "type", NULL};

/* --- strategies ------------------------------------------------------------------------- */
static void namespace_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!kite_obj_get(spec, "finalizers")) {
        json_object *f = json_object_new_array();
        json_object_array_add(f, json_object_new_string("kubernetes"));
        kite_obj_set(spec, "finalizers", f);
    }
    json_object *status = kite_obj_ensure(obj, "status");
    if (!kite_obj_str(status, "phase")) kite_obj_set(status, "phase", json_object_new_string("Active"));
    /* the immutable kubernetes.io/metadata.name label, as the NamespaceDefaultLabelName gate does */
    json_object *labels = kite_obj_ensure(kite_obj_ensure(obj, "metadata"), "labels");
    const char *name = kite_meta_str(obj, "name");
    if (name) kite_obj_set(labels, "kubernetes.io/metadata.name", json_object_new_string(name));
}

/* Go's encoding/json never omits struct-typed fields, so every real Node carries nodeInfo with
 * all its strings and daemonEndpoints; clients (python-kubernetes) reject a Node without them. */
static void node_defaults(json_object *obj) {
    static const char *const info[] = {"machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                                       "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                                       "operatingSystem", "architecture"};
    kite_obj_ensure(obj, "spec");
    json_object *status = kite_obj_ensure(obj, "status");
    json_object *ni = kite_obj_ensure(status, "nodeInfo");
    for (size_t i = 0; i < KITE_ARRAY_SIZE(info); i++)
        if (!kite_obj_get(ni, info[i])) kite_obj_set(ni, info[i], json_object_new_string(""));
    json_object *ke = kite_obj_ensure(kite_obj_ensure(status, "daemonEndpoints"), "kubeletEndpoint");
    if (!kite_obj_get(ke, "Port")) kite_obj_set(ke, "Port", json_object_new_int(0));
}

static bool valid_effect(const char *e) {
    return kite_streq(e, "NoSchedule") || kite_streq(e, "PreferNoSchedule") || kite_streq(e, "NoExecute");
}

static void node_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *taints = kite_obj_get(kite_obj_get(obj, "spec"), "taints");
    if (taints && !json_object_is_type(taints, json_type_array)) {
        kite_causes_add(c, "FieldValueInvalid", "spec.taints", "Invalid value: must be a list");
        return;
    }
    size_t n = taints ? json_object_array_length(taints) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(taints, i);
        const char *key = kite_obj_str(t, "key"), *effect = kite_obj_str(t, "effect");
        char field[64];
        snprintf(field, sizeof field, "spec.taints[%zu].key", i);
        if (!key || !*key)
            kite_causes_add(c, "FieldValueRequired", field, "Required value");
        else if (!kite_is_qualified_name(key))
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", key);
        snprintf(field, sizeof field, "spec.taints[%zu].effect", i);
        if (!effect || !*effect)
            kite_causes_add(c, "FieldValueRequired", field, "Required value");
        else if (!valid_effect(effect))
            kite_causes_add(c, "FieldValueNotSupported", field,
                            "Unsupported value: \"%s\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"", effect);
        const char *value = kite_obj_str(t, "value");
        snprintf(field, sizeof field, "spec.taints[%zu].value", i);
        if (value && !kite_is_label_value(value))
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"%s\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", value);
    }
}

static void lease_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = kite_obj_get(obj, "spec");
    json_object *d = kite_obj_get(spec, "leaseDurationSeconds");
    if (d && (!json_object_is_type(d, json_type_int) || json_object_get_int64(d) <= 0))
        kite_causes_add(c, "FieldValueInvalid", "spec.leaseDurationSeconds", "Invalid value: %s: must be greater than 0",
                        json_object_to_json_string(d));
    json_object *t = kite_obj_get(spec, "leaseTransitions");
    if (t && (!json_object_is_type(t, json_type_int) || json_object_get_int64(t) < 0))
        kite_causes_add(c, "FieldValueInvalid", "spec.leaseTransitions", "Invalid value: %s: must be greater than or equal to 0",
                        json_object_to_json_string(t));
}

static void event_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *io = kite_obj_get(obj, "involvedObject");
    const char *ins = kite_obj_str(io, "namespace"), *ns = kite_meta_str(obj, "namespace");
    if (ins && *ins && ns && strcmp(ins, ns) != 0)
        kite_causes_add(c, "FieldValueInvalid", "involvedObject.namespace", "Invalid value: \"%s\": does not match event.namespace", ins);
}

static void pod_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!kite_obj_get(spec, "restartPolicy")) kite_obj_set(spec, "restartPolicy", json_object_new_string("Always"));
    if (!kite_obj_get(spec, "terminationGracePeriodSeconds")) kite_obj_set(spec, "terminationGracePeriodSeconds", json_object_new_int(30));
    if (!kite_obj_get(spec, "dnsPolicy")) kite_obj_set(spec, "dnsPolicy", json_object_new_string("ClusterFirst"));
    if (!kite_obj_get(spec, "schedulerName")) kite_obj_set(spec, "schedulerName", json_object_new_string("default-scheduler"));
    json_object *status = kite_obj_ensure(obj, "status");
    if (!kite_obj_get(status, "phase")) kite_obj_set(status, "phase", json_object_new_string("Pending"));
}

/* events.k8s.io/v1 <-> core/v1 Event field names (the stored form is core/v1). */
static const char *const EVENT_RENAMES[][2] = {
    {"regarding", "involvedObject"},          {"note", "message"},
    {"deprecatedSource", "source"},           {"deprecatedFirstTimestamp", "firstTimestamp"},
    {"deprecatedLastTimestamp", "lastTimestamp"}, {"deprecatedCount", "count"},
    {"reportingController", "reportingComponent"},
};

static void rename_fields(json_object *obj, int from, int to) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(EVENT_RENAMES); i++) {
        json_object *v = kite_obj_get(obj, EVENT_RENAMES[i][from]);
        if (!v) continue;
        json_object_get(v);
        json_object_object_del(obj, EVENT_RENAMES[i][from]);
        json_object_object_add(obj, EVENT_RENAMES[i][to], v);
    }
}
static void event_v1_to_storage(json_object *obj) {
    rename_fields(obj, 0, 1);
    json_object_object_add(obj, "apiVersion", json_object_new_string("v1"));
}
static void event_v1_from_storage(json_object *obj) {
    rename_fields(obj, 1, 0);
    json_object_object_add(obj, "apiVersion", json_object_new_string("events.k8s.io/v1"));
}

const struct kite_resource kite_resources[] = {
    {.group = "", .version = "v1", .kind = "Namespace", .list_kind = "NamespaceList", .plural = "namespaces",
     .singular = "namespace", .short_names = {"ns"}, .has_status = true, .name_rule = KITE_NAME_LABEL,
     .smp = &ns_schema, .schema = &kite_schema_namespace, .fields = ns_fields, .defaults = namespace_defaults},
    {.group = "", .version = "v1", .kind = "Node", .list_kind = "NodeList", .plural = "nodes", .singular = "node",
     .short_names = {"no"}, .has_status = true, .unconditional_update = true, .status_on_create = true,
     .smp = &node_schema, .schema = &kite_schema_node, .fields = node_fields, .defaults = node_defaults, .validate = node_validate},
    {.group = "", .version = "v1", .kind = "Pod", .list_kind = "PodList", .plural = "pods", .singular = "pod",
     .short_names = {"po"}, .categories = {"all"}, .namespaced = true, .has_status = true,
     .unconditional_update = true, .smp = &pod_schema, .schema = &kite_schema_pod, .fields = pod_fields, .defaults = pod_defaults},
    {.group = "", .version = "v1", .kind = "Event", .list_kind = "EventList", .plural = "events", .singular = "event",
     .short_names = {"ev"}, .namespaced = true, .unconditional_update = true, .create_on_update = true,
     .status_on_create = true, .smp = &meta_schema, .schema = &kite_schema_event, .fields = event_fields, .validate = event_validate},
    {.group = "events.k8s.io", .version = "v1", .kind = "Event", .list_kind = "EventList", .plural = "events",
     .singular = "event", .short_names = {"ev"}, .storage = "events", .namespaced = true,
     .unconditional_update = true, .create_on_update = true, .status_on_create = true, .smp = &meta_schema,
     .schema = &kite_schema_event_v1, .fields = events_v1_fields, .validate = event_validate, .to_storage = event_v1_to_storage,
     .from_storage = event_v1_from_storage},
    {.group = "coordination.k8s.io", .version = "v1", .kind = "Lease", .list_kind = "LeaseList", .plural = "leases",
     .singular = "lease", .namespaced = true, .unconditional_update = true, .status_on_create = true,
     .smp = &meta_schema, .schema = &kite_schema_lease, .validate = lease_validate},
    {0},
};

const struct kite_resource *kite_registry_find(const char *group, const char *version, const char *plural) {
    for (const struct kite_resource *r = kite_resources; r->kind; r++)
        if (strcmp(r->group, group) == 0 && strcmp(r->version, version) == 0 && strcmp(r->plural, plural) == 0)
            return r;
    return NULL;
}

const struct kite_resource *kite_registry_find_kind(const char *group, const char *kind) {
    for (const struct kite_resource *r = kite_resources; r->kind; r++)
        if (strcmp(r->group, group) == 0 && strcmp(r->kind, kind) == 0) return r;
    return NULL;
}

const char *kite_resource_api_version(const struct kite_resource *r) {
    if (!*r->group) return r->version;
    if (kite_streq(r->group, "coordination.k8s.io")) return "coordination.k8s.io/v1";
    if (kite_streq(r->group, "events.k8s.io")) return "events.k8s.io/v1";
    return r->version; /* every group is listed above; unreachable for registered rows */
}

void kite_resource_gr(const struct kite_resource *r, char out[128]) {
    snprintf(out, 128, "%s%s%s", r->plural, *r->group ? "." : "", r->group);
}

void kite_resource_gk(const struct kite_resource *r, char out[128]) {
    snprintf(out, 128, "%s%s%s", r->kind, *r->group ? "." : "", r->group);
}

bool kite_resource_field_supported(const struct kite_resource *r, const char *field) {
    if (kite_streq(field, "metadata.name") || kite_streq(field, "metadata.namespace")) return true;
    for (const char *const *f = r->fields; f && *f; f++)
        if (strcmp(*f, field) == 0) return true;
    return false;
}

const char *kite_resource_field(const struct kite_resource *r, json_object *obj, const char *field,
                                struct kite_buf *buf) {
    if (kite_streq(field, "source")) field = "source.component"; /* events: source = source.component */
    const char *v = kite_json_path_string(obj, field, buf);
    return v ? v : "";
}
