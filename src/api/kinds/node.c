/* Node (core/v1): the object a node agent registers and whose status it reports. */
#include "api/kinds/kind.h"

/* ---- core/v1 Node ---------------------------------------------------------------------------- */
STRUCT(taint_schema, "Taint", FR(1, "key", S), F(2, "value", S), FR(3, "effect", S), F(4, "timeAdded", T));
LIST(taints_schema, NULL, taint_schema);
STRUCT(node_spec, "NodeSpec", F(1, "podCIDR", S), F(7, "podCIDRs", SLIST), F(3, "providerID", S), F(4, "unschedulable", B),
    F(5, "taints", taints_schema), F(6, "configSource", RAW), F(2, "externalID", S));
STRUCT(node_condition, "NodeCondition", FR(1, "type", S), FR(2, "status", S), F(3, "lastHeartbeatTime", T),
    F(4, "lastTransitionTime", T), F(5, "reason", S), F(6, "message", S));
LIST(node_conditions, NULL, node_condition);
STRUCT(node_address_schema, "NodeAddress", FR(1, "type", S), FR(2, "address", S));
LIST(node_addresses, NULL, node_address_schema);
STRUCT(daemon_endpoint, "DaemonEndpoint", FR(1, "Port", I32));
STRUCT(daemon_endpoints, "NodeDaemonEndpoints", F(1, "kubeletEndpoint", daemon_endpoint));
STRUCT(node_swap, "NodeSwapStatus", FK(1, "capacity", I64));
STRUCT(node_info, "NodeSystemInfo", FR(1, "machineID", S), FR(2, "systemUUID", S), FR(3, "bootID", S), FR(4, "kernelVersion", S),
    FR(5, "osImage", S), FR(6, "containerRuntimeVersion", S), FR(7, "kubeletVersion", S), FR(8, "kubeProxyVersion", S),
    FR(9, "operatingSystem", S), FR(10, "architecture", S), F(11, "swap", node_swap));
STRUCT(container_image, "ContainerImage", F(1, "names", SLIST), F(2, "sizeBytes", I64));
LIST(container_images, NULL, container_image);
LIST(volumes_in_use, "[]v1.UniqueVolumeName", S);
STRUCT(attached_volume, "AttachedVolume", FR(1, "name", S), FR(2, "devicePath", S));
LIST(attached_volumes, NULL, attached_volume);
STRUCT(runtime_features, "NodeRuntimeHandlerFeatures", FK(1, "recursiveReadOnlyMounts", B), FK(2, "userNamespaces", B));
STRUCT(runtime_handler, "NodeRuntimeHandler", FK(1, "name", S), F(2, "features", runtime_features));
LIST(runtime_handlers, NULL, runtime_handler);
STRUCT(node_features, "NodeFeatures", FK(1, "supplementalGroupsPolicy", B));
STRUCT(node_status_schema, "NodeStatus", F(1, "capacity", RLIST), F(2, "allocatable", RLIST), F(3, "phase", S),
    F(4, "conditions", node_conditions), F(5, "addresses", node_addresses), F(6, "daemonEndpoints", daemon_endpoints),
    F(7, "nodeInfo", node_info), F(8, "images", container_images), F(9, "volumesInUse", volumes_in_use),
    F(10, "volumesAttached", attached_volumes), F(11, "config", RAW), F(12, "runtimeHandlers", runtime_handlers),
    F(13, "features", node_features));
ROOT_DOC(kite_schema_node, "Node",
    "Node is a worker node in Kubernetes. Each node will have a unique identifier in the cache (i.e. in etcd).", TYPE_META, F(2, "spec", node_spec), F(3, "status", node_status_schema));

static const struct kite_smp_rule rules[] = {
    META_RULES,
    /* spec.taints has no patch strategy upstream: atomic, so `kubectl taint k-` removes */
    {"spec.podCIDRs", NULL, KITE_SMP_MERGE_PRIMITIVES, NULL},
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
    {"status.addresses", "type", KITE_SMP_MERGE, NULL},
    {"status.volumesAttached", "name", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

static const char *const fields[] = {"spec.unschedulable", NULL};

/* Go's encoding/json never omits struct-typed fields, so every real Node carries nodeInfo with
 * all its strings and daemonEndpoints; clients (python-kubernetes) reject a Node without them. */
/* spec.podCIDR is podCIDRs[0], as upstream's conversion keeps it: a podCIDR that differs from
 * podCIDRs[0] wins (older clients set only podCIDR), else podCIDRs gives podCIDR. */
static void pod_cidrs_normalize(json_object *spec) {
    const char *one = kite_obj_str(spec, "podCIDR");
    json_object *list = kite_obj_get(spec, "podCIDRs");
    size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    const char *first = n ? json_object_get_string(json_object_array_get_idx(list, 0)) : NULL;
    if (one && *one && (!first || strcmp(one, first) != 0)) {
        json_object *l = json_object_new_array();
        json_object_array_add(l, json_object_new_string(one));
        kite_obj_set(spec, "podCIDRs", l);
    } else if (first && *first) {
        kite_obj_set(spec, "podCIDR", json_object_new_string(first));
    }
}

static void node_defaults(json_object *obj) {
    static const char *const info[] = {"machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                                       "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                                       "operatingSystem", "architecture"};
    pod_cidrs_normalize(kite_obj_ensure(obj, "spec"));
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

/* Once set, the pod CIDRs and the provider ID never change, whoever writes (upstream's
 * ValidateNodeUpdate): the node IPAM controller and the cloud provider set them from "". */
static void node_validate_update(json_object *spec, json_object *ospec, struct kite_causes *c) {
    json_object *oc = kite_obj_get(ospec, "podCIDRs");
    if (json_object_is_type(oc, json_type_array) && json_object_array_length(oc) > 0 &&
        !kite_json_equal(oc, kite_obj_get(spec, "podCIDRs")))
        kite_causes_add(c, "FieldValueForbidden", "spec.podCIDRs",
                        "Forbidden: node updates may not change podCIDR except from \"\" to valid");
    const char *op = kite_obj_str(ospec, "providerID"), *np = kite_obj_str(spec, "providerID");
    if (op && *op && !kite_streq(op, np))
        kite_causes_add(c, "FieldValueForbidden", "spec.providerID",
                        "Forbidden: node updates may not change providerID except from \"\" to valid");
}

static void node_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    if (old) node_validate_update(kite_obj_get(obj, "spec"), kite_obj_get(old, "spec"), c);
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

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void node_roles(json_object *labels, struct kite_buf *out) {
    static const char prefix[] = "node-role.kubernetes.io/";
    size_t n = 0, cap = 0;
    const char **roles = NULL;
    if (labels && json_object_is_type(labels, json_type_object)) {
        json_object_object_foreach(labels, k, v) {
            const char *role = NULL;
            if (kite_startswith(k, prefix) && k[sizeof(prefix) - 1])
                role = k + sizeof(prefix) - 1;
            else if (strcmp(k, "kubernetes.io/role") == 0 && *str_of(v))
                role = str_of(v);
            if (!role) continue;
            if (n == cap) roles = kite_realloc(roles, (cap = cap ? cap * 2 : 4) * sizeof(*roles));
            roles[n++] = role;
        }
    }
    if (n > 1) qsort(roles, n, sizeof(*roles), cmp_cstr);
    for (size_t i = 0; i < n; i++) {
        if (i && strcmp(roles[i], roles[i - 1]) == 0) continue; /* a set: dedup */
        if (out->len) kite_buf_putc(out, ',');
        kite_buf_puts(out, roles[i]);
    }
    free(roles);
}

static const char *node_address(json_object *obj, const char *type) {
    json_object *addrs = OBJ(obj, "status", "addresses");
    for (size_t i = 0; i < arr_len(addrs); i++) {
        json_object *a = json_object_array_get_idx(addrs, i);
        if (strcmp(STR(a, "type"), type) == 0) return STR(a, "address");
    }
    return "";
}

static json_object *node_status(const struct kite_table_row *r) {
    json_object *conds = OBJ(r->obj, "status", "conditions");
    const char *ready = NULL;
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(STR(c, "type"), "Ready") == 0) ready = STR(c, "status"); /* the last one wins, as in a Go map */
    }
    struct kite_buf b = {0};
    kite_buf_puts(&b, !ready ? "Unknown" : strcmp(ready, "True") == 0 ? "Ready" : "NotReady");
    json_object *unsched = OBJ(r->obj, "spec", "unschedulable");
    if (unsched && json_object_is_type(unsched, json_type_boolean) && json_object_get_boolean(unsched))
        kite_buf_puts(&b, ",SchedulingDisabled");
    json_object *cell = cell_str(b.p);
    kite_buf_release(&b);
    return cell;
}

static json_object *node_roles_cell(const struct kite_table_row *r) {
    struct kite_buf b = {0};
    node_roles(OBJ(r->obj, "metadata", "labels"), &b);
    json_object *cell = cell_str(b.len ? b.p : "<none>");
    kite_buf_release(&b);
    return cell;
}

static json_object *node_version(const struct kite_table_row *r) { return cell_str(STR(r->obj, "status", "nodeInfo", "kubeletVersion")); }
static json_object *node_internal_ip(const struct kite_table_row *r) { return cell_or(node_address(r->obj, "InternalIP"), "<none>"); }
static json_object *node_external_ip(const struct kite_table_row *r) { return cell_or(node_address(r->obj, "ExternalIP"), "<none>"); }
static json_object *node_os_image(const struct kite_table_row *r) {
    return cell_or(STR(r->obj, "status", "nodeInfo", "osImage"), "<unknown>");
}
static json_object *node_kernel(const struct kite_table_row *r) {
    return cell_or(STR(r->obj, "status", "nodeInfo", "kernelVersion"), "<unknown>");
}
static json_object *node_runtime(const struct kite_table_row *r) {
    return cell_or(STR(r->obj, "status", "nodeInfo", "containerRuntimeVersion"), "<unknown>");
}

static const struct kite_table_column node_cols[] = {
    COL_NAME,
    {"Status", node_status, "string", "", "The status of the node", 0},
    {"Roles", node_roles_cell, "string", "", "The roles of the node", 0},
    COL_AGE,
    {"Version", node_version, "string", "", "Kubelet Version reported by the node.", 0},
    {"Internal-IP", node_internal_ip, "string", "", "List of addresses reachable to the node.", 1},
    {"External-IP", node_external_ip, "string", "", "List of addresses reachable to the node.", 1},
    {"OS-Image", node_os_image, "string", "", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1},
    {"Kernel-Version", node_kernel, "string", "", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1},
    {"Container-Runtime", node_runtime, "string", "",
     "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(node_cols);

const struct kite_resource kite_kind_node = {
    .schema = &kite_schema_node,
    KITE_CORE_V1, .kind = "Node", .list_kind = "NodeList", .plural = "nodes", .singular = "node",
    .short_names = {"no"}, .has_status = true, .unconditional_update = true, .status_on_create = true,
    .smp = &smp, .table = &printer, .fields = fields, .defaults = node_defaults, .validate = node_validate,
};
