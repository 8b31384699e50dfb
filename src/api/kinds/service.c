/* Service (core/v1): defaults and validation as kube-apiserver's (pkg/apis/core/v1/defaults.go,
 * pkg/apis/core/validation), its allocated values (cluster IPs, node ports: the server's pools,
 * registry.h) and kubectl's columns. kite serves IPv4 single-stack services. */
#include "api/internal.h"
#include "api/kinds/kind.h"

#include <arpa/inet.h>

/* ---- schema (k8s.io/api core/v1 generated.proto) ------------------------------------------------ */
STRUCT(service_port, "ServicePort", F(1, "name", S), F(2, "protocol", S), F(6, "appProtocol", S), FR(3, "port", I32),
    F(4, "targetPort", kite_schema_int_or_string), F(5, "nodePort", I32));
LIST(service_ports, NULL, service_port);
STRUCT(client_ip_config, "ClientIPConfig", FK(1, "timeoutSeconds", I32));
STRUCT(session_affinity_config, "SessionAffinityConfig", F(1, "clientIP", client_ip_config));
STRUCT(service_spec, "ServiceSpec", F(1, "ports", service_ports), F(2, "selector", SMAP), F(3, "clusterIP", S),
    F(18, "clusterIPs", SLIST), F(4, "type", S), F(5, "externalIPs", SLIST), F(7, "sessionAffinity", S),
    F(8, "loadBalancerIP", S), F(9, "loadBalancerSourceRanges", SLIST), F(10, "externalName", S),
    F(11, "externalTrafficPolicy", S), F(12, "healthCheckNodePort", I32), F(13, "publishNotReadyAddresses", B),
    F(14, "sessionAffinityConfig", session_affinity_config), F(19, "ipFamilies", SLIST), FK(17, "ipFamilyPolicy", S),
    FK(20, "allocateLoadBalancerNodePorts", B), FK(21, "loadBalancerClass", S), FK(22, "internalTrafficPolicy", S),
    FK(23, "trafficDistribution", S));
STRUCT(port_status, "PortStatus", FR(1, "port", I32), FR(2, "protocol", S), FK(3, "error", S));
LIST(port_statuses, NULL, port_status);
STRUCT(lb_ingress, "LoadBalancerIngress", F(1, "ip", S), F(2, "hostname", S), FK(3, "ipMode", S),
    F(4, "ports", port_statuses));
LIST(lb_ingresses, NULL, lb_ingress);
STRUCT(lb_status, "LoadBalancerStatus", F(1, "ingress", lb_ingresses));
STRUCT(meta_condition, "Condition", FR(1, "type", S), FR(2, "status", S), F(3, "observedGeneration", I64),
    FR(4, "lastTransitionTime", T), FR(5, "reason", S), FR(6, "message", S));
LIST(meta_conditions, NULL, meta_condition);
STRUCT(service_status, "ServiceStatus", F(1, "loadBalancer", lb_status), F(2, "conditions", meta_conditions));
ROOT_DOC(kite_schema_service, "Service",
    "Service is a named abstraction of software service (for example, mysql) consisting of local port (for example "
    "3306) that the proxy listens on, and the selector that determines which pods will answer requests sent through "
    "the proxy.",
    TYPE_META, F(2, "spec", service_spec), F(3, "status", service_status));

static const struct kite_smp_rule rules[] = {
    META_RULES,
    {"spec.ports", "port", KITE_SMP_MERGE, "port,protocol=TCP"},
    {"status.conditions", "type", KITE_SMP_MERGE, NULL},
};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

/* ---- small readers ----------------------------------------------------------------------------- */

static const char *svc_type(json_object *spec) {
    const char *t = STR(spec, "type");
    return *t ? t : "ClusterIP";
}
static bool is_type(json_object *spec, const char *t) { return strcmp(svc_type(spec), t) == 0; }
static bool needs_node_ports(json_object *spec) { return is_type(spec, "NodePort") || is_type(spec, "LoadBalancer"); }
static bool needs_health_check_port(json_object *spec) {
    return is_type(spec, "LoadBalancer") && strcmp(STR(spec, "externalTrafficPolicy"), "Local") == 0;
}
static bool needs_cluster_ip(json_object *spec) { return !is_type(spec, "ExternalName"); }

static bool parse_ip4(const char *s, uint32_t *ret) {
    struct in_addr a;
    if (!s || inet_pton(AF_INET, s, &a) != 1) return false;
    *ret = ntohl(a.s_addr);
    return true;
}
static void format_ip4(uint32_t v, char out[INET_ADDRSTRLEN]) {
    struct in_addr a = {.s_addr = htonl(v)};
    inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}
static bool is_ip(const char *s) {
    unsigned char buf[16];
    return s && (inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1);
}

/* int32 of a JSON value, or def when absent or not an integer */
static int64_t int_or(json_object *o, int64_t def) {
    return o && json_object_is_type(o, json_type_int) ? json_object_get_int64(o) : def;
}

/* ---- defaults (SetDefaults_Service, and the storage's clusterIP/clusterIPs normalisation) ---- */

static void set_str_default(json_object *o, const char *k, const char *v) {
    if (!*STR(o, k)) kite_obj_set(o, k, json_object_new_string(v));
}

static void service_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    set_str_default(spec, "sessionAffinity", "None");
    set_str_default(spec, "type", "ClusterIP");
    if (strcmp(STR(spec, "sessionAffinity"), "ClientIP") == 0) {
        json_object *cip = kite_obj_ensure(kite_obj_ensure(spec, "sessionAffinityConfig"), "clientIP");
        if (!kite_obj_get(cip, "timeoutSeconds")) kite_obj_set(cip, "timeoutSeconds", json_object_new_int(10800));
    }
    json_object *ports = OBJ(spec, "ports");
    for (size_t i = 0; i < arr_len(ports); i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        if (!json_object_is_type(p, json_type_object)) continue;
        set_str_default(p, "protocol", "TCP");
        json_object *tp = kite_obj_get(p, "targetPort");
        bool unset = !tp || (json_object_is_type(tp, json_type_int) && json_object_get_int64(tp) == 0) ||
                     (json_object_is_type(tp, json_type_string) && !*json_object_get_string(tp));
        if (unset && kite_obj_get(p, "port")) kite_obj_set(p, "targetPort", json_object_get(kite_obj_get(p, "port")));
    }
    if (needs_node_ports(spec)) set_str_default(spec, "externalTrafficPolicy", "Cluster");
    if (is_type(spec, "LoadBalancer") && !kite_obj_get(spec, "allocateLoadBalancerNodePorts"))
        kite_obj_set(spec, "allocateLoadBalancerNodePorts", json_object_new_boolean(true));
    if (needs_cluster_ip(spec)) {
        set_str_default(spec, "internalTrafficPolicy", "Cluster");
        /* clusterIP and clusterIPs[0] name the same address: either fills the other */
        json_object *ips = OBJ(spec, "clusterIPs");
        const char *ip = STR(spec, "clusterIP");
        if (*ip && !arr_len(ips)) {
            json_object *a = json_object_new_array();
            json_object_array_add(a, json_object_new_string(ip));
            kite_obj_set(spec, "clusterIPs", a);
        } else if (!*ip && arr_len(ips)) {
            kite_obj_set(spec, "clusterIP", json_object_new_string(str_of(json_object_array_get_idx(ips, 0))));
        }
        set_str_default(spec, "ipFamilyPolicy", "SingleStack");
        if (!arr_len(OBJ(spec, "ipFamilies"))) {
            json_object *a = json_object_new_array();
            json_object_array_add(a, json_object_new_string("IPv4"));
            kite_obj_set(spec, "ipFamilies", a);
        }
    }
    /* Go's ServiceStatus always carries loadBalancer (a struct, never omitted) */
    kite_obj_ensure(kite_obj_ensure(obj, "status"), "loadBalancer");
}

/* ---- allocation ------------------------------------------------------------------------------ */

static void set_cluster_ip(json_object *spec, const char *ip) {
    kite_obj_set(spec, "clusterIP", json_object_new_string(ip));
    json_object *a = json_object_new_array();
    json_object_array_add(a, json_object_new_string(ip));
    kite_obj_set(spec, "clusterIPs", a);
}

/* `[]string{"10.96.0.10"}`, as Go's %#v prints the clusterIPs in allocation errors */
static void go_string_slice(json_object *a, struct kite_buf *b) {
    kite_buf_puts(b, "[]string{");
    for (size_t i = 0; i < arr_len(a); i++) {
        if (i) kite_buf_puts(b, ", ");
        kite_api_go_quote(b, str_of(json_object_array_get_idx(a, i)));
    }
    kite_buf_putc(b, '}');
}

static void allocate_cluster_ip(json_object *spec, json_object *old_spec, struct kite_pools *ps, struct kite_causes *c) {
    const char *ip = STR(spec, "clusterIP");
    /* an update that leaves clusterIP out keeps the one allocated (kube-apiserver's patchAllocatedValues) */
    if (!*ip && old_spec && needs_cluster_ip(old_spec) && *STR(old_spec, "clusterIP")) {
        set_cluster_ip(spec, STR(old_spec, "clusterIP"));
        return;
    }
    if (strcmp(ip, "None") == 0) return;
    if (old_spec && needs_cluster_ip(old_spec) && strcmp(STR(old_spec, "clusterIP"), ip) == 0 && *ip)
        return; /* held already */
    uint32_t v;
    if (!*ip) {
        if (ps->pick(ps, KITE_POOL_SERVICE_IP, &v) < 0) {
            kite_causes_add(c, "FieldValueInvalid", "spec.clusterIPs", "Invalid value: []string(nil): failed to allocate a "
                            "serviceIP: range is full");
            return;
        }
        char s[INET_ADDRSTRLEN];
        format_ip4(v, s);
        set_cluster_ip(spec, s);
        return;
    }
    if (!parse_ip4(ip, &v)) return; /* validation names it */
    int r = ps->take(ps, KITE_POOL_SERVICE_IP, v);
    if (r == 0) return;
    struct kite_buf val = {0};
    go_string_slice(OBJ(spec, "clusterIPs"), &val);
    if (r == -ERANGE)
        kite_causes_add(c, "FieldValueInvalid", "spec.clusterIPs",
                        "Invalid value: %s: failed to allocate IP %s: the provided IP (%s) is not in the valid range. "
                        "The range of valid IPs is %s", val.p, ip, ip, ps->range(ps, KITE_POOL_SERVICE_IP));
    else
        kite_causes_add(c, "FieldValueInvalid", "spec.clusterIPs",
                        "Invalid value: %s: failed to allocate IP %s: provided IP is already allocated", val.p, ip);
    kite_buf_release(&val);
}

/* The old port with the same port number and protocol (an update keeps its node port). */
static json_object *old_port(json_object *old_spec, json_object *p) {
    json_object *ports = OBJ(old_spec, "ports");
    for (size_t i = 0; i < arr_len(ports); i++) {
        json_object *o = json_object_array_get_idx(ports, i);
        if (int_or(kite_obj_get(o, "port"), -1) == int_or(kite_obj_get(p, "port"), -2) &&
            strcmp(STR(o, "protocol"), STR(p, "protocol")) == 0)
            return o;
    }
    return NULL;
}

static bool old_holds_port(json_object *old_spec, int64_t port) {
    if (!old_spec || !needs_node_ports(old_spec)) return false;
    json_object *ports = OBJ(old_spec, "ports");
    for (size_t i = 0; i < arr_len(ports); i++)
        if (int_or(kite_obj_get(json_object_array_get_idx(ports, i), "nodePort"), 0) == port) return true;
    return needs_health_check_port(old_spec) && int_or(kite_obj_get(old_spec, "healthCheckNodePort"), 0) == port;
}

/* Takes or picks the node port at o[key] (field names it in messages). */
static void allocate_node_port(json_object *o, const char *key, const char *field, json_object *old_spec,
                               struct kite_pools *ps, struct kite_causes *c) {
    int64_t np = int_or(kite_obj_get(o, key), 0);
    if (np && old_holds_port(old_spec, np)) return;
    if (!np) {
        uint32_t v;
        if (ps->pick(ps, KITE_POOL_NODE_PORT, &v) < 0)
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: 0: failed to allocate a nodePort: range is full");
        else
            kite_obj_set(o, key, json_object_new_int((int32_t)v));
        return;
    }
    int r = np > 0 && np <= 65535 ? ps->take(ps, KITE_POOL_NODE_PORT, (uint32_t)np) : -ERANGE;
    if (r == -ERANGE)
        kite_causes_add(c, "FieldValueInvalid", field,
                        "Invalid value: %lld: provided port is not in the valid range. The range of valid ports is %s",
                        (long long)np, ps->range(ps, KITE_POOL_NODE_PORT));
    else if (r == -ENOSPC)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: more than %d allocated values in one Service",
                        (long long)np, KITE_POOL_VALUES_MAX);
    else if (r < 0)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: provided port is already allocated",
                        (long long)np);
}

/* dropTypeDependentFields: a type change drops what the old type had allocated and the new
 * one does not use, when the update left it as it was (the cluster IP of a Service that
 * becomes an ExternalName, the node ports of one that stops being a NodePort). */
static void drop_unchanged(json_object *spec, json_object *old_spec, const char *k) {
    if (kite_obj_get(spec, k) && kite_json_equal(kite_obj_get(spec, k), kite_obj_get(old_spec, k)))
        json_object_object_del(spec, k);
}

static void drop_type_dependent(json_object *spec, json_object *old_spec) {
    if (!needs_cluster_ip(spec) && needs_cluster_ip(old_spec)) {
        static const char *const keys[] = {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"};
        for (size_t i = 0; i < KITE_ARRAY_SIZE(keys); i++) drop_unchanged(spec, old_spec, keys[i]);
    }
    if (!needs_node_ports(spec) && needs_node_ports(old_spec)) {
        json_object *ports = OBJ(spec, "ports");
        for (size_t i = 0; i < arr_len(ports); i++) {
            json_object *p = json_object_array_get_idx(ports, i), *op = old_port(old_spec, p);
            if (op && kite_obj_get(p, "nodePort") && int_or(kite_obj_get(p, "nodePort"), 0) == int_or(kite_obj_get(op, "nodePort"), -1))
                json_object_object_del(p, "nodePort");
        }
    }
    if (!needs_health_check_port(spec) && needs_health_check_port(old_spec)) drop_unchanged(spec, old_spec, "healthCheckNodePort");
}

static void service_allocate(json_object *obj, json_object *old, struct kite_pools *ps, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec"), *old_spec = old ? OBJ(old, "spec") : NULL;
    if (!spec || !json_object_is_type(spec, json_type_object)) return;
    if (old_spec) drop_type_dependent(spec, old_spec);
    if (needs_cluster_ip(spec)) allocate_cluster_ip(spec, old_spec, ps, c);
    if (!needs_node_ports(spec)) return;
    json_object *ports = OBJ(spec, "ports");
    for (size_t i = 0; i < arr_len(ports); i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        if (!json_object_is_type(p, json_type_object)) continue;
        if (is_type(spec, "LoadBalancer") && kite_obj_get(spec, "allocateLoadBalancerNodePorts") &&
            !json_object_get_boolean(kite_obj_get(spec, "allocateLoadBalancerNodePorts")) && !kite_obj_get(p, "nodePort"))
            continue;
        json_object *op = old_spec && needs_node_ports(old_spec) ? old_port(old_spec, p) : NULL;
        if (!int_or(kite_obj_get(p, "nodePort"), 0) && op && int_or(kite_obj_get(op, "nodePort"), 0))
            kite_obj_set(p, "nodePort", json_object_get(kite_obj_get(op, "nodePort")));
        char field[48];
        snprintf(field, sizeof field, "spec.ports[%zu].nodePort", i);
        allocate_node_port(p, "nodePort", field, old_spec, ps, c);
    }
    if (needs_health_check_port(spec)) {
        if (!int_or(kite_obj_get(spec, "healthCheckNodePort"), 0) && old_spec && needs_health_check_port(old_spec))
            kite_obj_set(spec, "healthCheckNodePort", json_object_get(kite_obj_get(old_spec, "healthCheckNodePort")));
        allocate_node_port(spec, "healthCheckNodePort", "spec.healthCheckNodePort", old_spec, ps, c);
    }
}

static size_t service_held(json_object *obj, struct kite_pool_value *out, size_t max) {
    json_object *spec = OBJ(obj, "spec");
    size_t n = 0;
    uint32_t ip;
    if (needs_cluster_ip(spec) && parse_ip4(STR(spec, "clusterIP"), &ip) && n < max)
        out[n++] = (struct kite_pool_value){KITE_POOL_SERVICE_IP, ip};
    if (!needs_node_ports(spec)) return n;
    json_object *ports = OBJ(spec, "ports");
    for (size_t i = 0; i < arr_len(ports) && n < max; i++) {
        int64_t np = int_or(kite_obj_get(json_object_array_get_idx(ports, i), "nodePort"), 0);
        if (np > 0 && np <= 65535) out[n++] = (struct kite_pool_value){KITE_POOL_NODE_PORT, (uint32_t)np};
    }
    int64_t hc = int_or(kite_obj_get(spec, "healthCheckNodePort"), 0);
    if (needs_health_check_port(spec) && hc > 0 && hc <= 65535 && n < max)
        out[n++] = (struct kite_pool_value){KITE_POOL_NODE_PORT, (uint32_t)hc};
    return n;
}

/* ---- validation (ValidateService, ValidateServiceUpdate) -------------------------------------- */

static const char *const TYPES[] = {"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"};
static const char *const PROTOCOLS[] = {"SCTP", "TCP", "UDP"};
static const char *const AFFINITIES[] = {"ClientIP", "None"};
static const char *const POLICIES[] = {"PreferDualStack", "RequireDualStack", "SingleStack"};
static const char *const TRAFFIC[] = {"Cluster", "Local"};

static bool one_of(const char *v, const char *const *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v, set[i]) == 0) return true;
    return false;
}

static void not_supported(struct kite_causes *c, const char *field, const char *v, const char *const *set, size_t n) {
    struct kite_buf b = {0}, q = {0};
    for (size_t i = 0; i < n; i++) kite_buf_printf(&b, "%s\"%s\"", i ? ", " : "", set[i]);
    kite_api_go_quote(&q, v);
    kite_causes_add(c, "FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s", q.p, b.p);
    kite_buf_release(&b);
    kite_buf_release(&q);
}
#define CHECK_ENUM(c, field, v, set) \
    do { if (!one_of(v, set, KITE_ARRAY_SIZE(set))) not_supported(c, field, v, set, KITE_ARRAY_SIZE(set)); } while (0)

/* validation.IsValidPortName: an IANA service name */
static const char *port_name_error(const char *s) {
    size_t n = strlen(s);
    if (n > 15) return "must be no more than 15 characters";
    bool letter = false;
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)";
        if (s[i] >= 'a' && s[i] <= 'z') letter = true;
    }
    if (strstr(s, "--")) return "must not contain consecutive hyphens";
    if (!letter) return "must contain at least one letter (a-z)";
    if (n && (s[0] == '-' || s[n - 1] == '-')) return "must not begin or end with a hyphen";
    return NULL;
}

static void validate_port_number(struct kite_causes *c, const char *field, json_object *v) {
    int64_t p = int_or(v, 0);
    if (p < 1 || p > 65535)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be between 1 and 65535, inclusive",
                        (long long)p);
}

static void validate_ports(json_object *spec, struct kite_causes *c) {
    json_object *ports = OBJ(spec, "ports");
    size_t n = arr_len(ports);
    if (!n && !is_type(spec, "ExternalName") && strcmp(STR(spec, "clusterIP"), "None") != 0) {
        kite_causes_add(c, "FieldValueRequired", "spec.ports", "Required value");
        return;
    }
    char field[64];
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        const char *name = STR(p, "name");
        snprintf(field, sizeof field, "spec.ports[%zu].name", i);
        if (n > 1 && !*name) {
            kite_causes_add(c, "FieldValueRequired", field, "Required value");
        } else if (*name) {
            const char *msgs[KITE_NAME_ERRS_MAX];
            kite_causes_add_invalid(c, field, name, msgs, kite_dns1123_label_errs(name, msgs));
            for (size_t j = 0; j < i; j++)
                if (strcmp(STR(json_object_array_get_idx(ports, j), "name"), name) == 0) {
                    struct kite_buf q = {0};
                    kite_api_go_quote(&q, name);
                    kite_causes_add(c, "FieldValueDuplicate", field, "Duplicate value: %s", q.p);
                    kite_buf_release(&q);
                    break;
                }
        }
        snprintf(field, sizeof field, "spec.ports[%zu].port", i);
        validate_port_number(c, field, kite_obj_get(p, "port"));
        snprintf(field, sizeof field, "spec.ports[%zu].protocol", i);
        CHECK_ENUM(c, field, STR(p, "protocol"), PROTOCOLS);
        json_object *tp = kite_obj_get(p, "targetPort");
        snprintf(field, sizeof field, "spec.ports[%zu].targetPort", i);
        if (tp && json_object_is_type(tp, json_type_string)) {
            const char *why = port_name_error(json_object_get_string(tp));
            if (why) {
                struct kite_buf q = {0};
                kite_api_go_quote(&q, json_object_get_string(tp));
                kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: %s", q.p, why);
                kite_buf_release(&q);
            }
        } else if (tp) {
            validate_port_number(c, field, tp);
        }
        int64_t np = int_or(kite_obj_get(p, "nodePort"), 0);
        snprintf(field, sizeof field, "spec.ports[%zu].nodePort", i);
        if (np && !needs_node_ports(spec))
            kite_causes_add(c, "FieldValueForbidden", field, "Forbidden: may not be used when `type` is '%s'", svc_type(spec));
        /* the same port and protocol twice */
        for (size_t j = 0; j < i; j++) {
            json_object *o = json_object_array_get_idx(ports, j);
            if (int_or(kite_obj_get(o, "port"), -1) == int_or(kite_obj_get(p, "port"), -2) &&
                strcmp(STR(o, "protocol"), STR(p, "protocol")) == 0) {
                snprintf(field, sizeof field, "spec.ports[%zu]", i);
                kite_causes_add(c, "FieldValueDuplicate", field,
                                "Duplicate value: core.ServicePort{Name:\"\", Protocol:\"%s\", AppProtocol:(*string)(nil), "
                                "Port:%lld, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}",
                                STR(p, "protocol"), (long long)int_or(kite_obj_get(p, "port"), 0));
                break;
            }
        }
    }
}

static void validate_cluster_ips(json_object *spec, struct kite_causes *c) {
    json_object *ips = OBJ(spec, "clusterIPs");
    const char *ip = STR(spec, "clusterIP");
    if (is_type(spec, "ExternalName")) {
        if (*ip)
            kite_causes_add(c, "FieldValueForbidden", "spec.clusterIPs", "Forbidden: may not be set for ExternalName services");
        return;
    }
    if (arr_len(ips) && strcmp(ip, str_of(json_object_array_get_idx(ips, 0))) != 0) {
        struct kite_buf q = {0};
        go_string_slice(ips, &q);
        kite_causes_add(c, "FieldValueInvalid", "spec.clusterIPs", "Invalid value: %s: first value must match `clusterIP`", q.p);
        kite_buf_release(&q);
    }
    if (arr_len(ips) > 1)
        kite_causes_add(c, "FieldValueInvalid", "spec.clusterIPs",
                        "Invalid value: %zu: this cluster is not configured for dual-stack services", arr_len(ips));
    for (size_t i = 0; i < arr_len(ips); i++) {
        const char *v = str_of(json_object_array_get_idx(ips, i));
        char field[40];
        snprintf(field, sizeof field, "spec.clusterIPs[%zu]", i);
        if (strcmp(v, "None") == 0) {
            if (needs_node_ports(spec))
                kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"None\": may not be set to 'None' for %s services",
                                svc_type(spec));
            continue;
        }
        if (!is_ip(v)) {
            struct kite_buf q = {0};
            kite_api_go_quote(&q, v);
            kite_causes_add(c, "FieldValueInvalid", field,
                            "Invalid value: %s: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)", q.p);
            kite_buf_release(&q);
        }
    }
}

static void validate_families(json_object *spec, struct kite_causes *c) {
    if (is_type(spec, "ExternalName")) return;
    const char *policy = STR(spec, "ipFamilyPolicy");
    if (*policy) CHECK_ENUM(c, "spec.ipFamilyPolicy", policy, POLICIES);
    if (strcmp(policy, "RequireDualStack") == 0)
        kite_causes_add(c, "FieldValueInvalid", "spec.ipFamilyPolicy",
                        "Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services");
    json_object *fams = OBJ(spec, "ipFamilies");
    for (size_t i = 0; i < arr_len(fams); i++) {
        const char *f = str_of(json_object_array_get_idx(fams, i));
        char field[40];
        snprintf(field, sizeof field, "spec.ipFamilies[%zu]", i);
        if (strcmp(f, "IPv4") != 0 && strcmp(f, "IPv6") != 0) {
            static const char *const FAMS[] = {"IPv4", "IPv6"};
            not_supported(c, field, f, FAMS, 2);
        } else if (strcmp(f, "IPv6") == 0) {
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: \"IPv6\": not configured on this cluster");
        }
    }
}

static void validate_selector(json_object *spec, struct kite_causes *c) {
    json_object *sel = OBJ(spec, "selector");
    if (!sel || !json_object_is_type(sel, json_type_object)) return;
    json_object_object_foreach(sel, k, v) {
        char field[320];
        snprintf(field, sizeof field, "spec.selector");
        const char *msgs[KITE_NAME_ERRS_MAX];
        kite_causes_add_invalid(c, field, k, msgs, kite_qualified_name_errs(k, msgs));
        const char *val = str_of(v);
        snprintf(field, sizeof field, "spec.selector");
        kite_causes_add_invalid(c, field, val, msgs, kite_label_value_errs(val, msgs));
    }
}

static void validate_update(json_object *spec, json_object *old_spec, struct kite_causes *c) {
    /* the clusterIP of a service that has one is immutable, unless it becomes an ExternalName */
    if (!needs_cluster_ip(spec) || !needs_cluster_ip(old_spec) || !*STR(old_spec, "clusterIP")) return;
    if (strcmp(STR(spec, "clusterIP"), STR(old_spec, "clusterIP")) != 0) {
        struct kite_buf q = {0};
        kite_api_go_quote(&q, STR(spec, "clusterIP"));
        kite_causes_add(c, "FieldValueInvalid", "spec.clusterIP", "Invalid value: %s: field is immutable", q.p);
        kite_buf_release(&q);
    }
}

static void service_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec");
    CHECK_ENUM(c, "spec.type", svc_type(spec), TYPES);
    CHECK_ENUM(c, "spec.sessionAffinity", STR(spec, "sessionAffinity"), AFFINITIES);
    if (is_type(spec, "ExternalName")) {
        const char *en = STR(spec, "externalName");
        if (!*en) kite_causes_add(c, "FieldValueRequired", "spec.externalName", "Required value");
    }
    if (*STR(spec, "internalTrafficPolicy")) CHECK_ENUM(c, "spec.internalTrafficPolicy", STR(spec, "internalTrafficPolicy"), TRAFFIC);
    if (*STR(spec, "externalTrafficPolicy")) CHECK_ENUM(c, "spec.externalTrafficPolicy", STR(spec, "externalTrafficPolicy"), TRAFFIC);
    json_object *to = OBJ(spec, "sessionAffinityConfig", "clientIP", "timeoutSeconds");
    if (to && (int_or(to, 0) <= 0 || int_or(to, 0) > 86400))
        kite_causes_add(c, "FieldValueInvalid", "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                        "Invalid value: %lld: must be greater than 0 and less than 86400", (long long)int_or(to, 0));
    validate_ports(spec, c);
    validate_cluster_ips(spec, c);
    validate_families(spec, c);
    validate_selector(spec, c);
    json_object *eips = OBJ(spec, "externalIPs");
    for (size_t i = 0; i < arr_len(eips); i++) {
        const char *v = str_of(json_object_array_get_idx(eips, i));
        if (is_ip(v)) continue;
        char field[40];
        snprintf(field, sizeof field, "spec.externalIPs[%zu]", i);
        struct kite_buf q = {0};
        kite_api_go_quote(&q, v);
        kite_causes_add(c, "FieldValueInvalid", field,
                        "Invalid value: %s: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)", q.p);
        kite_buf_release(&q);
    }
    if (old) validate_update(spec, OBJ(old, "spec"), c);
}

/* ---- kubectl's columns (printService) -------------------------------------------------------- */

static json_object *svc_type_cell(const struct kite_table_row *r) { return cell_str(STR(r->obj, "spec", "type")); }
static json_object *svc_cluster_ip(const struct kite_table_row *r) { return cell_or(STR(r->obj, "spec", "clusterIP"), "<none>"); }

static void join_strings(json_object *a, struct kite_buf *b) {
    for (size_t i = 0; i < arr_len(a); i++) {
        if (b->len) kite_buf_putc(b, ',');
        kite_buf_puts(b, str_of(json_object_array_get_idx(a, i)));
    }
}

static json_object *svc_external_ip(const struct kite_table_row *r) {
    json_object *spec = OBJ(r->obj, "spec");
    const char *t = STR(spec, "type");
    struct kite_buf b = {0};
    json_object *cell;
    if (strcmp(t, "ClusterIP") == 0 || strcmp(t, "NodePort") == 0) {
        join_strings(OBJ(spec, "externalIPs"), &b);
        cell = cell_str(b.len ? b.p : "<none>");
    } else if (strcmp(t, "LoadBalancer") == 0) {
        struct kite_buf lb = {0};
        json_object *ing = OBJ(r->obj, "status", "loadBalancer", "ingress");
        for (size_t i = 0; i < arr_len(ing); i++) {
            json_object *e = json_object_array_get_idx(ing, i);
            const char *v = *STR(e, "ip") ? STR(e, "ip") : STR(e, "hostname");
            if (!*v) continue;
            if (lb.len) kite_buf_putc(&lb, ',');
            kite_buf_puts(&lb, v);
        }
        join_strings(OBJ(spec, "externalIPs"), &b);
        if (lb.len) {
            if (b.len) kite_buf_putc(&b, ',');
            kite_buf_puts(&b, lb.p);
            cell = cell_str(b.p);
        } else {
            cell = cell_str("<pending>");
        }
        kite_buf_release(&lb);
    } else if (strcmp(t, "ExternalName") == 0) {
        cell = cell_str(STR(spec, "externalName"));
    } else {
        cell = cell_str("<unknown>");
    }
    kite_buf_release(&b);
    return cell;
}

static json_object *svc_ports(const struct kite_table_row *r) {
    json_object *ports = OBJ(r->obj, "spec", "ports");
    struct kite_buf b = {0};
    for (size_t i = 0; i < arr_len(ports); i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        if (i) kite_buf_putc(&b, ',');
        int64_t np = int_or(kite_obj_get(p, "nodePort"), 0);
        if (np > 0)
            kite_buf_printf(&b, "%lld:%lld/%s", (long long)int_or(kite_obj_get(p, "port"), 0), (long long)np, STR(p, "protocol"));
        else
            kite_buf_printf(&b, "%lld/%s", (long long)int_or(kite_obj_get(p, "port"), 0), STR(p, "protocol"));
    }
    json_object *cell = cell_str(b.len ? b.p : "<none>");
    kite_buf_release(&b);
    return cell;
}

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* labels.FormatLabels: k=v pairs by key, "<none>" when empty */
static json_object *svc_selector(const struct kite_table_row *r) {
    json_object *sel = OBJ(r->obj, "spec", "selector");
    size_t n = sel && json_object_is_type(sel, json_type_object) ? (size_t)json_object_object_length(sel) : 0;
    if (!n) return cell_str("<none>");
    const char **keys = kite_calloc(n, sizeof *keys);
    size_t k = 0;
    json_object_object_foreach(sel, key, v) {
        (void)v;
        keys[k++] = key;
    }
    qsort(keys, k, sizeof *keys, cmp_key);
    struct kite_buf b = {0};
    for (size_t i = 0; i < k; i++) kite_buf_printf(&b, "%s%s=%s", i ? "," : "", keys[i], STR(sel, keys[i]));
    free(keys);
    json_object *cell = cell_str(b.p);
    kite_buf_release(&b);
    return cell;
}

static const struct kite_table_column service_cols[] = {
    COL_NAME,
    {"Type", svc_type_cell, "string", "",
     "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, "
     "NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to "
     "endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an "
     "Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the "
     "endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and "
     "allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on "
     "NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same "
     "endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other "
     "fields do not apply to ExternalName services. More info: "
     "https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
     0},
    {"Cluster-IP", svc_cluster_ip, "string", "",
     "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified "
     "manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; "
     "otherwise creation of the service will fail. This field may not be changed through updates unless the type "
     "field is also being changed to ExternalName (which requires this field to be blank) or the type field is being "
     "changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid "
     "values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless "
     "service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not "
     "required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when "
     "creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service "
     "to type ExternalName. More info: "
     "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
     0},
    {"External-IP", svc_external_ip, "string", "",
     "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this "
     "service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives "
     "at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes "
     "system.",
     0},
    {"Port(s)", svc_ports, "string", "",
     "The list of ports that are exposed by this service. More info: "
     "https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
     0},
    COL_AGE,
    {"Selector", svc_selector, "string", "",
     "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the "
     "service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only "
     "applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: "
     "https://kubernetes.io/docs/concepts/services-networking/service/",
     1},
};
static const struct kite_table_printer printer = TABLE_PRINTER(service_cols);

const struct kite_resource kite_kind_service = {
    .schema = &kite_schema_service,
    KITE_CORE_V1, .kind = "Service", .list_kind = "ServiceList", .plural = "services", .singular = "service",
    .short_names = {"svc"}, .categories = {"all"}, .namespaced = true, .has_status = true,
    .name_rule = KITE_NAME_DNS1035, .smp = &smp, .table = &printer, .defaults = service_defaults,
    .validate = service_validate, .allocate = service_allocate, .held = service_held,
};
