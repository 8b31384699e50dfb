/* EndpointSlice (discovery.k8s.io/v1): its Table printer, ahead of the kind's row. */
#include "api/kinds/kind.h"

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

const struct kite_table_printer kite_endpointslice_printer = TABLE_PRINTER(endpointslice_cols);
