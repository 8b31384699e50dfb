/* EndpointSlice (discovery.k8s.io/v1): schema, defaults and validation as kube-apiserver's
 * (pkg/apis/discovery/validation), and kubectl's columns. */
#include "api/internal.h"
#include "api/kinds/kind.h"

#include <arpa/inet.h>

#define KITE_EPS_MAX_ENDPOINTS 1000 /* endpoints of one slice (upstream's maxEndpoints) */
#define KITE_EPS_MAX_ADDRESSES 100  /* addresses of one endpoint */
#define KITE_EPS_MAX_PORTS 100      /* ports of one slice */

/* ---- schema (k8s.io/api discovery/v1 generated.proto) ------------------------------------- */
STRUCT(eps_conditions, "EndpointConditions", FK(1, "ready", B), FK(2, "serving", B), FK(3, "terminating", B));
STRUCT(for_zone, "ForZone", FR(1, "name", S));
LIST(for_zones, NULL, for_zone);
STRUCT(for_node, "ForNode", FR(1, "name", S));
LIST(for_nodes, NULL, for_node);
STRUCT(eps_hints, "EndpointHints", F(1, "forZones", for_zones), F(2, "forNodes", for_nodes));
STRUCT(eps_endpoint, "Endpoint", FR(1, "addresses", SLIST), F(2, "conditions", eps_conditions), FK(3, "hostname", S),
    F(4, "targetRef", kite_schema_object_ref), F(5, "deprecatedTopology", SMAP), FK(6, "nodeName", S), FK(7, "zone", S),
    F(8, "hints", eps_hints));
LIST(eps_endpoints, NULL, eps_endpoint);
STRUCT(eps_port, "EndpointPort", FK(1, "name", S), FK(2, "protocol", S), FK(3, "port", I32), FK(4, "appProtocol", S));
LIST(eps_ports, NULL, eps_port);
ROOT_DOC(kite_schema_endpointslice, "EndpointSlice",
    "EndpointSlice represents a set of service endpoints. Most EndpointSlices are created by the EndpointSlice "
    "controller to represent the Pods selected by Service objects. For a given service there may be multiple "
    "EndpointSlice objects which must be joined to produce the full set of endpoints; you can find all of the slices "
    "for a given service by listing EndpointSlices in the service's namespace whose `kubernetes.io/service-name` "
    "label contains the service's name.",
    TYPE_META, FR(4, "addressType", S), FR(2, "endpoints", eps_endpoints), F(3, "ports", eps_ports));

/* SetDefaults_EndpointPort: a port's name and protocol are pointers defaulted to "" and TCP */
static void endpointslice_defaults(json_object *obj) {
    json_object *ports = OBJ(obj, "ports");
    for (size_t i = 0; i < arr_len(ports); i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        if (!json_object_is_type(p, json_type_object)) continue;
        if (!kite_obj_get(p, "name")) kite_obj_set(p, "name", json_object_new_string(""));
        if (!kite_obj_get(p, "protocol")) kite_obj_set(p, "protocol", json_object_new_string("TCP"));
    }
    if (!kite_obj_get(obj, "endpoints")) kite_obj_set(obj, "endpoints", json_object_new_array());
}

static const char *const ADDRESS_TYPES[] = {"FQDN", "IPv4", "IPv6"};
static const char *const EPS_PROTOCOLS[] = {"SCTP", "TCP", "UDP"};

static void unsupported(struct kite_causes *c, const char *field, const char *v, const char *const *set, size_t n) {
    struct kite_buf b = {0}, q = {0};
    for (size_t i = 0; i < n; i++) kite_buf_printf(&b, "%s\"%s\"", i ? ", " : "", set[i]);
    kite_api_go_quote(&q, v);
    kite_causes_add(c, "FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s", q.p, b.p);
    kite_buf_release(&b);
    kite_buf_release(&q);
}
static bool listed_in(const char *v, const char *const *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v, set[i]) == 0) return true;
    return false;
}

static void invalid_quoted(struct kite_causes *c, const char *field, const char *v, const char *why) {
    struct kite_buf q = {0};
    kite_api_go_quote(&q, v);
    kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: %s", q.p, why);
    kite_buf_release(&q);
}

static void validate_address(struct kite_causes *c, const char *field, const char *type, const char *a) {
    unsigned char buf[16];
    if (strcmp(type, "IPv4") == 0) {
        if (inet_pton(AF_INET, a, buf) != 1) invalid_quoted(c, field, a, "must be a valid IPv4 address");
    } else if (strcmp(type, "IPv6") == 0) {
        if (inet_pton(AF_INET6, a, buf) != 1) invalid_quoted(c, field, a, "must be a valid IPv6 address");
    } else if (strcmp(type, "FQDN") == 0) {
        const char *msgs[KITE_NAME_ERRS_MAX];
        kite_causes_add_invalid(c, field, a, msgs, kite_dns1123_subdomain_errs(a, msgs));
    }
}

static void validate_endpoints(json_object *obj, const char *type, struct kite_causes *c) {
    json_object *eps = OBJ(obj, "endpoints");
    size_t n = arr_len(eps);
    if (n > KITE_EPS_MAX_ENDPOINTS)
        kite_causes_add(c, "FieldValueTooMany", "endpoints", "Too many: %zu: must have at most %d items", n,
                        KITE_EPS_MAX_ENDPOINTS);
    char field[96];
    for (size_t i = 0; i < n && i < KITE_EPS_MAX_ENDPOINTS; i++) {
        json_object *e = json_object_array_get_idx(eps, i);
        json_object *addrs = OBJ(e, "addresses");
        size_t na = arr_len(addrs);
        snprintf(field, sizeof field, "endpoints[%zu].addresses", i);
        if (!na) kite_causes_add(c, "FieldValueRequired", field, "Required value: must contain at least 1 address");
        else if (na > KITE_EPS_MAX_ADDRESSES)
            kite_causes_add(c, "FieldValueTooMany", field, "Too many: %zu: must have at most %d items", na, KITE_EPS_MAX_ADDRESSES);
        for (size_t j = 0; j < na && j < KITE_EPS_MAX_ADDRESSES; j++) {
            snprintf(field, sizeof field, "endpoints[%zu].addresses[%zu]", i, j);
            validate_address(c, field, type, str_of(json_object_array_get_idx(addrs, j)));
        }
        const char *msgs[KITE_NAME_ERRS_MAX];
        const char *node = STR(e, "nodeName"), *host = STR(e, "hostname");
        snprintf(field, sizeof field, "endpoints[%zu].nodeName", i);
        if (*node) kite_causes_add_invalid(c, field, node, msgs, kite_dns1123_subdomain_errs(node, msgs));
        snprintf(field, sizeof field, "endpoints[%zu].hostname", i);
        if (*host) kite_causes_add_invalid(c, field, host, msgs, kite_dns1123_label_errs(host, msgs));
    }
}

static void validate_eps_ports(json_object *obj, struct kite_causes *c) {
    json_object *ports = OBJ(obj, "ports");
    size_t n = arr_len(ports);
    if (n > KITE_EPS_MAX_PORTS)
        kite_causes_add(c, "FieldValueTooMany", "ports", "Too many: %zu: must have at most %d items", n, KITE_EPS_MAX_PORTS);
    char field[64];
    for (size_t i = 0; i < n && i < KITE_EPS_MAX_PORTS; i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        const char *name = STR(p, "name");
        snprintf(field, sizeof field, "ports[%zu].name", i);
        if (*name) {
            const char *msgs[KITE_NAME_ERRS_MAX];
            kite_causes_add_invalid(c, field, name, msgs, kite_dns1123_label_errs(name, msgs));
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(STR(json_object_array_get_idx(ports, j), "name"), name) == 0) {
                struct kite_buf q = {0};
                kite_api_go_quote(&q, name);
                kite_causes_add(c, "FieldValueDuplicate", field, "Duplicate value: %s", q.p);
                kite_buf_release(&q);
                break;
            }
        snprintf(field, sizeof field, "ports[%zu].protocol", i);
        const char *proto = STR(p, "protocol");
        if (!listed_in(proto, EPS_PROTOCOLS, KITE_ARRAY_SIZE(EPS_PROTOCOLS)))
            unsupported(c, field, proto, EPS_PROTOCOLS, KITE_ARRAY_SIZE(EPS_PROTOCOLS));
        json_object *port = OBJ(p, "port");
        snprintf(field, sizeof field, "ports[%zu].port", i);
        if (port && (int_of(port) < 1 || int_of(port) > 65535))
            kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be between 1 and 65535, inclusive",
                            (long long)int_of(port));
    }
}

static void endpointslice_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    const char *type = STR(obj, "addressType");
    if (!*type)
        kite_causes_add(c, "FieldValueRequired", "addressType", "Required value");
    else if (!listed_in(type, ADDRESS_TYPES, KITE_ARRAY_SIZE(ADDRESS_TYPES)))
        unsupported(c, "addressType", type, ADDRESS_TYPES, KITE_ARRAY_SIZE(ADDRESS_TYPES));
    if (old && strcmp(type, STR(old, "addressType")) != 0)
        invalid_quoted(c, "addressType", type, "field is immutable");
    validate_endpoints(obj, type, c);
    validate_eps_ports(obj, c);
}

static const struct kite_smp_rule eps_rules[] = {META_RULES};
static const struct kite_smp_schema eps_smp = {eps_rules, KITE_ARRAY_SIZE(eps_rules)};

/* listWithMoreString: the first LIST_MAX items, then " + N more...", or "<unset>". */
#define LIST_MAX 3
struct short_list {
    struct kite_buf b;
    size_t count;
};
static void short_list_add(struct short_list *l, const char *item) {
    if (l->count < LIST_MAX) {
        if (l->count) kite_buf_putc(&l->b, ',');
        kite_buf_puts(&l->b, item);
    }
    l->count++;
}
static json_object *short_list_cell(struct short_list *l) {
    if (l->count > LIST_MAX)
        kite_buf_printf(&l->b, " + %zu more...", l->count - LIST_MAX);
    else if (!l->b.len)
        kite_buf_puts(&l->b, "<unset>");
    json_object *cell = cell_str(l->b.p);
    kite_buf_release(&l->b);
    return cell;
}

static json_object *endpointslice_address_type(const struct kite_table_row *r) { return cell_str(STR(r->obj, "addressType")); }

static json_object *endpointslice_ports(const struct kite_table_row *r) {
    struct short_list ports = {0};
    json_object *pa = OBJ(r->obj, "ports");
    for (size_t i = 0; i < arr_len(pa); i++) {
        json_object *p = json_object_array_get_idx(pa, i);
        json_object *port = OBJ(p, "port");
        char num[24];
        if (port && json_object_is_type(port, json_type_int)) {
            snprintf(num, sizeof(num), "%lld", (long long)json_object_get_int64(port));
            short_list_add(&ports, num);
        } else {
            short_list_add(&ports, OBJ(p, "name") ? STR(p, "name") : "*");
        }
    }
    return short_list_cell(&ports);
}

static json_object *endpointslice_endpoints(const struct kite_table_row *r) {
    struct short_list eps = {0};
    json_object *ea = OBJ(r->obj, "endpoints");
    for (size_t i = 0; i < arr_len(ea); i++) {
        json_object *addrs = OBJ(json_object_array_get_idx(ea, i), "addresses");
        for (size_t j = 0; j < arr_len(addrs); j++) short_list_add(&eps, str_of(json_object_array_get_idx(addrs, j)));
    }
    return short_list_cell(&eps);
}

static const struct kite_table_column endpointslice_cols[] = {
    COL_NAME,
    {"AddressType", endpointslice_address_type, "string", "",
     "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must "
     "be the same type. This field is immutable after creation. The following address types are currently "
     "supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a "
     "Fully Qualified Domain Name.",
     0},
    {"Ports", endpointslice_ports, "string", "",
     "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a "
     "unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with "
     "a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.",
     0},
    {"Endpoints", endpointslice_endpoints, "string", "",
     "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.", 0},
    COL_AGE,
};

static const struct kite_table_printer printer = TABLE_PRINTER(endpointslice_cols);

const struct kite_resource kite_kind_endpointslice = {
    .schema = &kite_schema_endpointslice,
    KITE_GROUP_VERSION("discovery.k8s.io", "v1"), .kind = "EndpointSlice", .list_kind = "EndpointSliceList",
    .plural = "endpointslices", .singular = "endpointslice", .namespaced = true, .smp = &eps_smp, .table = &printer,
    .defaults = endpointslice_defaults, .validate = endpointslice_validate,
};
