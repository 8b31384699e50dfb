/* Endpoints (core/v1): schema, defaults, validation and canonical form as kube-apiserver's
 * (pkg/apis/core/validation validateEndpointSubsets, pkg/registry/core/endpoint), and
 * kubectl's columns (NAME, ENDPOINTS, AGE). */
#include "api/internal.h"
#include "api/kinds/kind.h"
#include "api/kinds/endpoints.h"
#include "base/map.h"

#include <arpa/inet.h>

/* ---- schema (k8s.io/api core/v1 generated.proto) ----------------------------------------- */
STRUCT(ep_address, "EndpointAddress", FR(1, "ip", S), FK(3, "hostname", S), FK(4, "nodeName", S),
       F(2, "targetRef", kite_schema_object_ref));
LIST(ep_addresses, NULL, ep_address);
STRUCT(ep_port, "EndpointPort", FK(1, "name", S), FR(2, "port", I32), FK(3, "protocol", S), FK(4, "appProtocol", S));
LIST(ep_ports, NULL, ep_port);
STRUCT(ep_subset, "EndpointSubset", F(1, "addresses", ep_addresses), F(2, "notReadyAddresses", ep_addresses),
       F(3, "ports", ep_ports));
LIST(ep_subsets, NULL, ep_subset);
ROOT_DOC(kite_schema_endpoints, "Endpoints",
    "Endpoints is a collection of endpoints that implement the actual service. Example:\n\n\t Name: \"mysvc\",\n\t "
    "Subsets: [\n\t   {\n\t     Addresses: [{\"ip\": \"10.10.1.1\"}, {\"ip\": \"10.10.2.2\"}],\n\t     Ports: "
    "[{\"name\": \"a\", \"port\": 8675}, {\"name\": \"b\", \"port\": 309}]\n\t   },\n\t   {\n\t     Addresses: "
    "[{\"ip\": \"10.10.3.3\"}],\n\t     Ports: [{\"name\": \"a\", \"port\": 93}, {\"name\": \"b\", \"port\": 76}]\n\t "
    "  },\n\t]",
    TYPE_META, F(2, "subsets", ep_subsets));

/* SetDefaults_EndpointPort: an empty protocol is TCP */
static void endpoints_defaults(json_object *obj) {
    json_object *subsets = OBJ(obj, "subsets");
    for (size_t i = 0; i < arr_len(subsets); i++) {
        json_object *ports = OBJ(json_object_array_get_idx(subsets, i), "ports");
        for (size_t j = 0; j < arr_len(ports); j++) {
            json_object *p = json_object_array_get_idx(ports, j);
            if (json_object_is_type(p, json_type_object) && !*STR(p, "protocol"))
                kite_obj_set(p, "protocol", json_object_new_string("TCP"));
        }
    }
}

/* ---- validation ------------------------------------------------------------------------------ */

static const char *const EP_PROTOCOLS[] = {"SCTP", "TCP", "UDP"};

static void invalid_quoted(struct kite_causes *c, const char *field, const char *v, const char *why) {
    struct kite_buf q = {0};
    kite_api_go_quote(&q, v);
    kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %s: %s", q.p, why);
    kite_buf_release(&q);
}

/* IsValidIP, then ValidateEndpointIP: no unspecified, loopback or link-local address. */
static void validate_ip(struct kite_causes *c, const char *field, const char *ip) {
    unsigned char b[16];
    if (inet_pton(AF_INET, ip, b) == 1) {
        char why[64];
        snprintf(why, sizeof why, "may not be unspecified (%s)", ip);
        if (!memcmp(b, "\0\0\0\0", 4)) invalid_quoted(c, field, ip, why);
        if (b[0] == 127) invalid_quoted(c, field, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)");
        if (b[0] == 169 && b[1] == 254)
            invalid_quoted(c, field, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)");
        if (b[0] == 224 && b[1] == 0 && b[2] == 0)
            invalid_quoted(c, field, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)");
    } else if (inet_pton(AF_INET6, ip, b) == 1) {
        static const unsigned char zero[16], one[16] = {[15] = 1};
        char why[80];
        snprintf(why, sizeof why, "may not be unspecified (%s)", ip);
        if (!memcmp(b, zero, 16)) invalid_quoted(c, field, ip, why);
        if (!memcmp(b, one, 16)) invalid_quoted(c, field, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)");
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
            invalid_quoted(c, field, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)");
        if (b[0] == 0xff && (b[1] & 0x0f) == 0x02)
            invalid_quoted(c, field, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)");
    } else {
        invalid_quoted(c, field, ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
    }
}

static void validate_address(struct kite_causes *c, const char *path, json_object *a) {
    char field[160];
    const char *msgs[KITE_NAME_ERRS_MAX];
    snprintf(field, sizeof field, "%s.ip", path);
    validate_ip(c, field, STR(a, "ip"));
    const char *host = STR(a, "hostname");
    snprintf(field, sizeof field, "%s.hostname", path);
    if (*host) kite_causes_add_invalid(c, field, host, msgs, kite_dns1123_label_errs(host, msgs));
    if (OBJ(a, "nodeName")) {
        const char *node = STR(a, "nodeName");
        snprintf(field, sizeof field, "%s.nodeName", path);
        kite_causes_add_invalid(c, field, node, msgs, kite_dns1123_subdomain_errs(node, msgs));
    }
}

static void validate_port(struct kite_causes *c, const char *path, json_object *p, bool require_name) {
    char field[160];
    const char *msgs[KITE_NAME_ERRS_MAX];
    const char *name = STR(p, "name");
    snprintf(field, sizeof field, "%s.name", path);
    if (require_name && !*name) kite_causes_add(c, "FieldValueRequired", field, "Required value");
    else if (*name) kite_causes_add_invalid(c, field, name, msgs, kite_dns1123_label_errs(name, msgs));
    int64_t port = int_of(OBJ(p, "port"));
    snprintf(field, sizeof field, "%s.port", path);
    if (port < 1 || port > 65535)
        kite_causes_add(c, "FieldValueInvalid", field, "Invalid value: %lld: must be between 1 and 65535, inclusive",
                        (long long)port);
    const char *proto = STR(p, "protocol");
    snprintf(field, sizeof field, "%s.protocol", path);
    bool known = false;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(EP_PROTOCOLS); i++) known = known || !strcmp(proto, EP_PROTOCOLS[i]);
    if (!*proto) {
        kite_causes_add(c, "FieldValueRequired", field, "Required value");
    } else if (!known) {
        struct kite_buf q = {0};
        kite_api_go_quote(&q, proto);
        kite_causes_add(c, "FieldValueNotSupported", field, "Unsupported value: %s: supported values: \"SCTP\", \"TCP\", \"UDP\"", q.p);
        kite_buf_release(&q);
    }
    if (OBJ(p, "appProtocol")) {
        const char *ap = STR(p, "appProtocol");
        snprintf(field, sizeof field, "%s.appProtocol", path);
        kite_causes_add_invalid(c, field, ap, msgs, kite_qualified_name_errs(ap, msgs));
    }
}

static void endpoints_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    (void)old;
    size_t before = c->n;
    json_object *subsets = OBJ(obj, "subsets");
    char path[128];
    for (size_t i = 0; i < arr_len(subsets); i++) {
        json_object *ss = json_object_array_get_idx(subsets, i);
        json_object *ready = OBJ(ss, "addresses"), *not_ready = OBJ(ss, "notReadyAddresses"), *ports = OBJ(ss, "ports");
        snprintf(path, sizeof path, "subsets[%zu]", i);
        if (!arr_len(ready) && !arr_len(not_ready))
            kite_causes_add(c, "FieldValueRequired", path, "Required value: must specify `addresses` or `notReadyAddresses`");
        for (size_t j = 0; j < arr_len(ready); j++) {
            snprintf(path, sizeof path, "subsets[%zu].addresses[%zu]", i, j);
            validate_address(c, path, json_object_array_get_idx(ready, j));
        }
        for (size_t j = 0; j < arr_len(not_ready); j++) {
            snprintf(path, sizeof path, "subsets[%zu].notReadyAddresses[%zu]", i, j);
            validate_address(c, path, json_object_array_get_idx(not_ready, j));
        }
        for (size_t j = 0; j < arr_len(ports); j++) {
            snprintf(path, sizeof path, "subsets[%zu].ports[%zu]", i, j);
            validate_port(c, path, json_object_array_get_idx(ports, j), arr_len(ports) > 1);
        }
    }
    /* the strategy's Canonicalize, which upstream runs after a validation that passed: the
     * subsets as RepackSubsets regroups them */
    if (c->n == before && subsets && json_object_is_type(subsets, json_type_array))
        kite_obj_set(obj, "subsets", kite_endpoints_repack(subsets));
}

/* ---- RepackSubsets ----------------------------------------------------------------------------- */

struct repack {
    json_object **addrs;     /* unique addresses (borrowed from the input) */
    size_t n_addrs;
    struct kite_map addr_at; /* "ip\nuid" -> index + 1 */
    char **ports;            /* unique ports' JSON ("" = a subset without ports) */
    json_object **port_obj;  /* borrowed (NULL for "") */
    unsigned char **state;   /* [port][addr]: 0 absent, 1 ready, 2 not ready */
    size_t n_ports;
    struct kite_map port_at;
};

static size_t addr_index(struct repack *r, json_object *a) {
    _cleanup_free_ char *key = kite_asprintf("%s\n%s", STR(a, "ip"), STR(a, "targetRef", "uid"));
    uintptr_t at = (uintptr_t)kite_map_get(&r->addr_at, key);
    if (at) return at - 1;
    r->addrs = kite_realloc(r->addrs, (r->n_addrs + 1) * sizeof *r->addrs);
    r->addrs[r->n_addrs] = a;
    for (size_t p = 0; p < r->n_ports; p++) {
        r->state[p] = kite_realloc(r->state[p], r->n_addrs + 1);
        r->state[p][r->n_addrs] = 0;
    }
    kite_map_put(&r->addr_at, key, (void *)(uintptr_t)(r->n_addrs + 1));
    return r->n_addrs++;
}

/* A port is its four fields (Go's struct equality), whatever the order of its JSON members. */
static size_t port_index(struct repack *r, json_object *p) {
    _cleanup_free_ char *key = p ? kite_asprintf("%s\n%lld\n%s\n%s%s", STR(p, "name"), (long long)int_of(OBJ(p, "port")),
                                                 STR(p, "protocol"), OBJ(p, "appProtocol") ? "=" : "", STR(p, "appProtocol"))
                                 : kite_strdup("");
    uintptr_t at = (uintptr_t)kite_map_get(&r->port_at, key);
    if (at) return at - 1;
    r->ports = kite_realloc(r->ports, (r->n_ports + 1) * sizeof *r->ports);
    r->port_obj = kite_realloc(r->port_obj, (r->n_ports + 1) * sizeof *r->port_obj);
    r->state = kite_realloc(r->state, (r->n_ports + 1) * sizeof *r->state);
    r->ports[r->n_ports] = kite_strdup(key);
    r->port_obj[r->n_ports] = p;
    r->state[r->n_ports] = kite_calloc(r->n_addrs + 1, 1);
    kite_map_put(&r->port_at, key, (void *)(uintptr_t)(r->n_ports + 1));
    return r->n_ports++;
}

/* mapAddressByPort: not ready wins over ready */
static void map_addresses(struct repack *r, json_object *list, json_object *port, bool ready) {
    for (size_t i = 0; i < arr_len(list); i++) {
        json_object *a = json_object_array_get_idx(list, i);
        if (!json_object_is_type(a, json_type_object)) continue;
        size_t ai = addr_index(r, a), pi = port_index(r, port);
        if (r->state[pi][ai] != 2) r->state[pi][ai] = ready ? 1 : 2;
    }
}

static int cmp_str_null(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : ""); }

/* addrsByIPAndUID: by ip; an address without targetRef first among equal ips */
static int cmp_addr(const void *x, const void *y) {
    json_object *a = *(json_object *const *)x, *b = *(json_object *const *)y;
    int c = strcmp(STR(a, "ip"), STR(b, "ip"));
    if (c) return c;
    bool ra = OBJ(a, "targetRef") != NULL, rb = OBJ(b, "targetRef") != NULL;
    if (!ra || !rb) return (int)ra - (int)rb;
    return strcmp(STR(a, "targetRef", "uid"), STR(b, "targetRef", "uid"));
}

static int cmp_port(const void *x, const void *y) {
    json_object *a = *(json_object *const *)x, *b = *(json_object *const *)y;
    int c = strcmp(STR(a, "name"), STR(b, "name"));
    if (c) return c;
    int64_t pa = int_of(OBJ(a, "port")), pb = int_of(OBJ(b, "port"));
    if (pa != pb) return pa < pb ? -1 : 1;
    c = strcmp(STR(a, "protocol"), STR(b, "protocol"));
    return c ? c : cmp_str_null(STR(a, "appProtocol"), STR(b, "appProtocol"));
}

static int cmp_subset(const void *x, const void *y) {
    json_object *a = *(json_object *const *)x, *b = *(json_object *const *)y;
    static const char *const keys[] = {"ports", "addresses", "notReadyAddresses"};
    for (size_t k = 0; k < KITE_ARRAY_SIZE(keys); k++) {
        json_object *va = OBJ(a, keys[k]), *vb = OBJ(b, keys[k]);
        int c = strcmp(va ? json_object_to_json_string_ext(va, JSON_C_TO_STRING_PLAIN) : "",
                       vb ? json_object_to_json_string_ext(vb, JSON_C_TO_STRING_PLAIN) : "");
        if (c) return c;
    }
    return 0;
}

static json_object *copy_of(json_object *o) {
    json_object *c = NULL;
    json_object_deep_copy(o, &c, NULL);
    return c;
}

static json_object *sorted_array(json_object **v, size_t n, int (*cmp)(const void *, const void *)) {
    qsort(v, n, sizeof *v, cmp);
    json_object *a = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n; i++) json_object_array_add(a, copy_of(v[i]));
    return a;
}

json_object *kite_endpoints_repack(json_object *subsets) {
    struct repack r = {0};
    for (size_t i = 0; i < arr_len(subsets); i++) {
        json_object *ss = json_object_array_get_idx(subsets, i), *ports = OBJ(ss, "ports");
        if (!json_object_is_type(ss, json_type_object)) continue;
        for (size_t j = 0; j < KITE_MAX(arr_len(ports), (size_t)1); j++) {
            json_object *p = arr_len(ports) ? json_object_array_get_idx(ports, j) : NULL;
            map_addresses(&r, OBJ(ss, "addresses"), p, true);
            map_addresses(&r, OBJ(ss, "notReadyAddresses"), p, false);
        }
    }
    /* the ports offered by the same addresses, each as ready, form one subset */
    json_object *out = json_object_new_array();
    bool *done = r.n_ports ? kite_calloc(r.n_ports, sizeof *done) : NULL;
    json_object **ready = kite_calloc(r.n_addrs + 1, sizeof *ready), **not_ready = kite_calloc(r.n_addrs + 1, sizeof *not_ready),
                **ports = kite_calloc(r.n_ports + 1, sizeof *ports);
    for (size_t p = 0; p < r.n_ports; p++) {
        if (done[p]) continue;
        size_t nr = 0, nn = 0, np = 0;
        for (size_t q = p; q < r.n_ports; q++) {
            if (done[q] || memcmp(r.state[p], r.state[q], r.n_addrs) != 0) continue;
            done[q] = true;
            if (r.port_obj[q]) ports[np++] = r.port_obj[q];
        }
        for (size_t a = 0; a < r.n_addrs; a++) {
            if (r.state[p][a] == 1) ready[nr++] = r.addrs[a];
            else if (r.state[p][a] == 2) not_ready[nn++] = r.addrs[a];
        }
        json_object *ss = json_object_new_object();
        if (nr) kite_obj_set(ss, "addresses", sorted_array(ready, nr, cmp_addr));
        if (nn) kite_obj_set(ss, "notReadyAddresses", sorted_array(not_ready, nn, cmp_addr));
        if (np) kite_obj_set(ss, "ports", sorted_array(ports, np, cmp_port));
        json_object_array_add(out, ss);
    }
    json_object_array_sort(out, cmp_subset);
    free(ready);
    free(not_ready);
    free(ports);
    free(done);
    for (size_t p = 0; p < r.n_ports; p++) {
        free(r.ports[p]);
        free(r.state[p]);
    }
    free(r.ports);
    free(r.port_obj);
    free(r.state);
    free(r.addrs);
    kite_map_release(&r.addr_at);
    kite_map_release(&r.port_at);
    return out;
}

/* ---- strategic merge: no patch strategy beyond ObjectMeta's (subsets are replaced) --------- */

static const struct kite_smp_rule ep_rules[] = {META_RULES};
static const struct kite_smp_schema ep_smp = {ep_rules, KITE_ARRAY_SIZE(ep_rules)};

/* ---- table (printers.go printEndpoints, formatEndpoints) ------------------------------------- */

#define LIST_MAX 3

static json_object *endpoints_cell(const struct kite_table_row *row) {
    json_object *subsets = OBJ(row->obj, "subsets");
    if (!arr_len(subsets)) return cell_str("<none>");
    struct kite_buf b = {0};
    size_t listed = 0, count = 0;
    bool more = false;
    for (size_t i = 0; i < arr_len(subsets); i++) {
        json_object *ss = json_object_array_get_idx(subsets, i);
        json_object *addrs = OBJ(ss, "addresses"), *ports = OBJ(ss, "ports");
        /* a headless Service's subset may have no ports: the addresses alone */
        for (size_t p = 0; p < KITE_MAX(arr_len(ports), (size_t)1); p++) {
            json_object *port = arr_len(ports) ? json_object_array_get_idx(ports, p) : NULL;
            count += arr_len(addrs);
            for (size_t a = 0; a < arr_len(addrs); a++) {
                if (listed == LIST_MAX) {
                    more = true;
                    break;
                }
                const char *ip = STR(json_object_array_get_idx(addrs, a), "ip");
                if (listed++) kite_buf_putc(&b, ',');
                if (!port) kite_buf_puts(&b, ip);
                else if (strchr(ip, ':')) kite_buf_printf(&b, "[%s]:%lld", ip, (long long)int_of(OBJ(port, "port")));
                else kite_buf_printf(&b, "%s:%lld", ip, (long long)int_of(OBJ(port, "port")));
            }
        }
    }
    if (more) kite_buf_printf(&b, " + %zu more...", count - LIST_MAX);
    json_object *cell = cell_str(b.p ? b.p : "");
    kite_buf_release(&b);
    return cell;
}

static const struct kite_table_column endpoints_cols[] = {
    COL_NAME,
    {"Endpoints", endpoints_cell, "string", "",
     "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs "
     "they share. A single address with multiple ports, some of which are ready and some of which are not (because "
     "they come from different containers) will result in the address being displayed in different subsets for the "
     "different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of "
     "addresses and ports that comprise a service.",
     0},
    COL_AGE,
};

static const struct kite_table_printer printer = TABLE_PRINTER(endpoints_cols);

const struct kite_resource kite_kind_endpoints = {
    .schema = &kite_schema_endpoints,
    KITE_CORE_V1, .kind = "Endpoints", .list_kind = "EndpointsList", .plural = "endpoints", .singular = "endpoints",
    .short_names = {"ep"}, .namespaced = true, .unconditional_update = true, .create_on_update = true,
    .smp = &ep_smp, .table = &printer, .defaults = endpoints_defaults, .validate = endpoints_validate,
};
