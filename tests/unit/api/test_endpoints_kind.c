/* core/v1 Endpoints: defaults, validation as upstream's validateEndpointSubsets, the canonical
 * form (RepackSubsets) and kubectl's ENDPOINTS column. */
#include "api/kinds/endpoints.h"
#include "api/kinds/kinds.h"
#include "api/registry.h"
#include "api/table.h"
#include "json/patch.h"

#include <criterion/criterion.h>
#include <string.h>

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "bad test json: %s", s);
    return o;
}

/* The causes validation gives s (after the defaults), "field: message" joined by "\n". */
static char *causes_of(const char *s) {
    json_object *o = parse(s);
    kite_kind_endpoints.defaults(o);
    struct kite_causes c = {0};
    kite_kind_endpoints.validate(o, NULL, &c);
    struct kite_buf b = {0};
    kite_buf_puts(&b, "");
    for (size_t i = 0; i < c.n; i++) kite_buf_printf(&b, "%s%s: %s", i ? "\n" : "", c.v[i].field, c.v[i].message);
    kite_causes_release(&c);
    json_object_put(o);
    return b.p;
}

#define EP(subsets) "{\"metadata\":{\"name\":\"e\",\"namespace\":\"d\"},\"subsets\":" subsets "}"

Test(endpoints_kind, valid_and_defaulted) {
    json_object *o = parse(EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\",\"nodeName\":\"n1\",\"hostname\":\"h\"}],"
                              "\"notReadyAddresses\":[{\"ip\":\"fd00::1\"}],\"ports\":[{\"port\":80}]}]"));
    kite_kind_endpoints.defaults(o);
    struct kite_causes c = {0};
    kite_kind_endpoints.validate(o, NULL, &c);
    cr_assert_eq(c.n, 0, "%s", c.n ? c.v[0].message : "");
    kite_causes_release(&c);
    json_object *port = json_object_array_get_idx(
        kite_obj_get(json_object_array_get_idx(kite_obj_get(o, "subsets"), 0), "ports"), 0);
    cr_assert_str_eq(kite_obj_str(port, "protocol"), "TCP");
    json_object_put(o);
    char *none = causes_of(EP("[]"));
    cr_assert_str_eq(none, "");
    free(none);
}

Test(endpoints_kind, invalid) {
    static const struct {
        const char *json, *want;
    } cases[] = {
        {EP("[{\"ports\":[{\"port\":80}]}]"), "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"},
        {EP("[{\"addresses\":[{\"ip\":\"1.2.3\"}]}]"),
         "subsets[0].addresses[0].ip: Invalid value: \"1.2.3\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"},
        {EP("[{\"addresses\":[{\"ip\":\"127.0.0.1\"}]}]"),
         "subsets[0].addresses[0].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)"},
        {EP("[{\"notReadyAddresses\":[{\"ip\":\"169.254.1.1\"}]}]"),
         "subsets[0].notReadyAddresses[0].ip: Invalid value: \"169.254.1.1\": may not be in the link-local range "
         "(169.254.0.0/16, fe80::/10)"},
        {EP("[{\"addresses\":[{\"ip\":\"0.0.0.0\"}]}]"),
         "subsets[0].addresses[0].ip: Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)"},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\",\"hostname\":\"A_b\"}]}]"), "subsets[0].addresses[0].hostname: Invalid value: \"A_b\""},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\",\"nodeName\":\"\"}]}]"), "subsets[0].addresses[0].nodeName: Invalid value: \"\""},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":0}]}]"),
         "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":65536}]}]"),
         "subsets[0].ports[0].port: Invalid value: 65536: must be between 1 and 65535, inclusive"},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80,\"protocol\":\"ICMP\"}]}]"),
         "subsets[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""},
        /* a name is required once a subset has several ports */
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80},{\"name\":\"b\",\"port\":81}]}]"),
         "subsets[0].ports[0].name: Required value"},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"name\":\"Web\",\"port\":80}]}]"),
         "subsets[0].ports[0].name: Invalid value: \"Web\""},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80,\"appProtocol\":\"a b\"}]}]"),
         "subsets[0].ports[0].appProtocol: Invalid value: \"a b\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = causes_of(cases[i].json);
        cr_assert(strncmp(got, cases[i].want, strlen(cases[i].want)) == 0, "case %zu: got\n%s\nwant\n%s", i, got, cases[i].want);
        free(got);
    }
}

static void repacks_to(const char *in, const char *want) {
    json_object *i = parse(in), *w = parse(want);
    json_object *got = kite_endpoints_repack(i);
    cr_assert(kite_json_equal(got, w), "got %s\nwant %s", json_object_to_json_string_ext(got, JSON_C_TO_STRING_PLAIN), want);
    json_object_put(got);
    json_object_put(i);
    json_object_put(w);
}

Test(endpoints_kind, repack) {
    /* one address per subset, the same ports: one subset, addresses sorted */
    repacks_to("[{\"addresses\":[{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]},"
               "{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}]",
               "[{\"addresses\":[{\"ip\":\"10.0.0.1\"},{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}]");
    /* a port only some addresses serve gets its own subset; ports of one address set joined */
    repacks_to("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"name\":\"b\",\"port\":81,\"protocol\":\"TCP\"}]},"
               "{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"name\":\"a\",\"port\":80,\"protocol\":\"TCP\"}]},"
               "{\"addresses\":[{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"name\":\"a\",\"port\":80,\"protocol\":\"TCP\"}]}]",
               "[{\"addresses\":[{\"ip\":\"10.0.0.1\"},{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"name\":\"a\",\"port\":80,\"protocol\":\"TCP\"}]},"
               "{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"name\":\"b\",\"port\":81,\"protocol\":\"TCP\"}]}]");
    /* not ready wins over ready for the same address and port */
    repacks_to("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]},"
               "{\"notReadyAddresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]},"
               "{\"addresses\":[{\"ip\":\"10.0.0.3\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}]",
               "[{\"addresses\":[{\"ip\":\"10.0.0.3\"}],\"notReadyAddresses\":[{\"ip\":\"10.0.0.1\"}],"
               "\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}]");
    /* addresses without ports (a headless Service) are kept */
    repacks_to("[{\"addresses\":[{\"ip\":\"10.0.0.9\"}]},{\"addresses\":[{\"ip\":\"10.0.0.8\"}]}]",
               "[{\"addresses\":[{\"ip\":\"10.0.0.8\"},{\"ip\":\"10.0.0.9\"}]}]");
    /* the same port, its members in another order */
    repacks_to("[{\"addresses\":[{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]},"
               "{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"protocol\":\"TCP\",\"port\":80}]}]",
               "[{\"addresses\":[{\"ip\":\"10.0.0.1\"},{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}]");
    repacks_to("[]", "[]");
    repacks_to("[{\"ports\":[{\"port\":80}]}]", "[]");
}

Test(endpoints_kind, validation_repacks_valid_subsets) {
    json_object *o = parse(EP("[{\"addresses\":[{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"port\":80}]},"
                              "{\"addresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80}]}]"));
    kite_kind_endpoints.defaults(o);
    struct kite_causes c = {0};
    kite_kind_endpoints.validate(o, NULL, &c);
    cr_assert_eq(c.n, 0);
    cr_assert_eq(json_object_array_length(kite_obj_get(o, "subsets")), 1);
    json_object_put(o);
}

static char *cell(const char *json) {
    json_object *obj = parse(json), *cells = json_object_new_array();
    kite_table_cells(kite_kind_endpoints.table, obj, 0, cells);
    char *s = strdup(json_object_get_string(json_object_array_get_idx(cells, 1)));
    json_object_put(cells);
    json_object_put(obj);
    return s;
}

Test(endpoints_kind, table) {
    static const struct {
        const char *json, *want;
    } cases[] = {
        {EP("[]"), "<none>"},
        {"{\"metadata\":{\"name\":\"e\"}}", "<none>"},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"},{\"ip\":\"10.0.0.2\"}],\"ports\":[{\"port\":80}]}]"), "10.0.0.1:80,10.0.0.2:80"},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"},{\"ip\":\"10.0.0.2\"},{\"ip\":\"10.0.0.3\"}],"
            "\"ports\":[{\"name\":\"a\",\"port\":80},{\"name\":\"b\",\"port\":81}]}]"),
         "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 3 more..."},
        {EP("[{\"addresses\":[{\"ip\":\"10.0.0.1\"}]}]"), "10.0.0.1"},
        {EP("[{\"addresses\":[{\"ip\":\"fd00::1\"}],\"ports\":[{\"port\":443}]}]"), "[fd00::1]:443"},
        {EP("[{\"notReadyAddresses\":[{\"ip\":\"10.0.0.1\"}],\"ports\":[{\"port\":80}]}]"), ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = cell(cases[i].json);
        cr_assert_str_eq(got, cases[i].want, "case %zu", i);
        free(got);
    }
}
