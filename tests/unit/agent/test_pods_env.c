/* The kubelet's environment rules, pure parts: $(VAR) expansion, Service link variables,
 * resourceFieldRef values and environment variable names. */
#include <criterion/criterion.h>
#include <string.h>

#include "agent/pods/pods-int.h"
#include "base/base.h"

static const char *lookup(void *ud, const char *name, size_t len) { return kite_pods_env_get(ud, name, len); }

static char *expand(const struct pods_env *e, const char *in) { return kite_pods_env_expand(in, lookup, (void *)e); }

Test(pods_env, expansion_as_the_kubelet) {
    struct pods_env e = {0};
    kite_pods_env_set(&e, "A", "x");
    kite_pods_env_set(&e, "B", "$(A)y"); /* values are not expanded again */
    static const char *const cases[][2] = {
        {"$(A)", "x"},           {"a$(A)b", "axb"},        {"$(B)", "$(A)y"},      {"$$(A)", "$(A)"},
        {"$$$(A)", "$x"},        {"$(C)", "$(C)"},         {"$(A", "$(A"},         {"$", "$"},
        {"a$", "a$"},            {"$a", "$a"},             {"$()", "$()"},         {"$(A)$(A)", "xx"},
        {"no refs", "no refs"},  {"", ""},                 {"$$", "$"},            {"($(A))", "(x)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *r = expand(&e, cases[i][0]);
        cr_assert_str_eq(r, cases[i][1], "%s", cases[i][0]);
        free(r);
    }
    kite_pods_env_set(&e, "A", "z"); /* replaced in place */
    cr_assert_eq(e.n, 2);
    cr_assert_str_eq(kite_pods_env_get(&e, "A", 1), "z");
    kite_pods_env_del(&e, "A");
    cr_assert_null(kite_pods_env_get(&e, "A", 1));
    kite_pods_env_release(&e);
}

Test(pods_env, service_links) {
    json_object *svc = json_tokener_parse(
        "{\"metadata\":{\"name\":\"my-svc\"},\"spec\":{\"clusterIP\":\"10.0.0.7\",\"ports\":["
        "{\"name\":\"http\",\"port\":80},{\"name\":\"dns-udp\",\"port\":53,\"protocol\":\"UDP\"}]}}");
    struct pods_env e = {0};
    kite_pods_env_service(&e, svc);
    static const char *const want[][2] = {
        {"MY_SVC_SERVICE_HOST", "10.0.0.7"},      {"MY_SVC_SERVICE_PORT", "80"},
        {"MY_SVC_SERVICE_PORT_HTTP", "80"},       {"MY_SVC_SERVICE_PORT_DNS_UDP", "53"},
        {"MY_SVC_PORT", "tcp://10.0.0.7:80"},     {"MY_SVC_PORT_80_TCP", "tcp://10.0.0.7:80"},
        {"MY_SVC_PORT_80_TCP_PROTO", "tcp"},      {"MY_SVC_PORT_80_TCP_PORT", "80"},
        {"MY_SVC_PORT_80_TCP_ADDR", "10.0.0.7"},  {"MY_SVC_PORT_53_UDP", "udp://10.0.0.7:53"},
        {"MY_SVC_PORT_53_UDP_PROTO", "udp"},      {"MY_SVC_PORT_53_UDP_ADDR", "10.0.0.7"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *v = kite_pods_env_get(&e, want[i][0], strlen(want[i][0]));
        cr_assert_not_null(v, "%s", want[i][0]);
        cr_assert_str_eq(v, want[i][1], "%s", want[i][0]);
    }
    cr_assert_eq(e.n, 13);
    kite_pods_env_release(&e);
    json_object_put(svc);
    /* headless and ExternalName Services give nothing */
    svc = json_tokener_parse("{\"metadata\":{\"name\":\"h\"},\"spec\":{\"clusterIP\":\"None\",\"ports\":[{\"port\":1}]}}");
    kite_pods_env_service(&e, svc);
    cr_assert_eq(e.n, 0);
    json_object_put(svc);
}

Test(pods_env, resource_field_values) {
    json_object *c = json_tokener_parse("{\"resources\":{\"limits\":{\"cpu\":\"250m\",\"memory\":\"64Mi\"},"
                                        "\"requests\":{\"memory\":\"32Mi\"}}}");
    static const struct {
        const char *res, *div, *want;
    } cases[] = {
        {"limits.cpu", NULL, "1"},          {"limits.cpu", "1m", "250"},     {"limits.memory", NULL, "67108864"},
        {"limits.memory", "1Mi", "64"},     {"limits.memory", "1M", "68"},   {"requests.memory", "1Mi", "32"},
        {"requests.cpu", "1m", "250"},      /* requests default to limits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *v = NULL, *err = NULL;
        cr_assert_eq(kite_pods_env_resource_value(c, cases[i].res, cases[i].div, -1, -1, &v, &err), 0);
        cr_assert_str_eq(v, cases[i].want, "%s / %s", cases[i].res, cases[i].div);
        free(v);
    }
    json_object *none = json_tokener_parse("{}");
    char *v = NULL, *err = NULL;
    cr_assert_eq(kite_pods_env_resource_value(none, "limits.cpu", NULL, 2000, 8000000, &v, &err), 0);
    cr_assert_str_eq(v, "2", "unset limits are the node's allocatable");
    free(v);
    cr_assert_lt(kite_pods_env_resource_value(none, "limits.gpu", NULL, 2000, 8000000, &v, &err), 0);
    cr_assert_str_eq(err, "unsupported container resource : limits.gpu");
    free(err);
    json_object_put(none);
    json_object_put(c);
}

Test(pods_env, names) {
    cr_assert(kite_pods_env_name_valid("FOO_bar.1-x"));
    cr_assert(kite_pods_env_name_valid("_x"));
    cr_assert_not(kite_pods_env_name_valid("1X"));
    cr_assert_not(kite_pods_env_name_valid("a b"));
    cr_assert_not(kite_pods_env_name_valid("a=b"));
    cr_assert_not(kite_pods_env_name_valid(""));
}

static json_object *spec_of(const char *s) { return json_tokener_parse(s); }

Test(pods_env, resolv_conf_as_the_kubelet) {
    const char *host = "# comment\nnameserver 9.9.9.9\nnameserver 8.8.8.8\nsearch old.example\n"
                       "search corp.example\noptions rotate ndots:3\n";
    json_object *s = spec_of("{}");
    char *r = kite_pods_resolv_content(s, "ns", NULL, NULL, host);
    cr_assert_str_eq(r, "search corp.example\nnameserver 9.9.9.9\nnameserver 8.8.8.8\noptions rotate ndots:3\n",
                     "ClusterFirst with no cluster DNS is the host's");
    free(r);
    r = kite_pods_resolv_content(s, "ns", "10.0.0.10,10.0.0.11", "c.test", host);
    cr_assert_str_eq(r, "search ns.svc.c.test svc.c.test c.test corp.example\nnameserver 10.0.0.10\n"
                        "nameserver 10.0.0.11\noptions ndots:5\n");
    free(r);
    json_object_put(s);
    s = spec_of("{\"hostNetwork\":true}");
    r = kite_pods_resolv_content(s, "ns", "10.0.0.10", NULL, host);
    cr_assert(strstr(r, "nameserver 9.9.9.9"), "ClusterFirst on the host network is Default: %s", r);
    free(r);
    json_object_put(s);
    s = spec_of("{\"dnsPolicy\":\"Default\",\"dnsConfig\":{\"nameservers\":[\"1.1.1.1\",\"2.2.2.2\"],"
                "\"options\":[{\"name\":\"ndots\",\"value\":\"1\"}]}}");
    r = kite_pods_resolv_content(s, "ns", "10.0.0.10", NULL, host);
    cr_assert_str_eq(r, "search corp.example\nnameserver 9.9.9.9\nnameserver 8.8.8.8\nnameserver 1.1.1.1\n"
                        "options rotate ndots:1\n", "3 nameservers at most; an option replaced by name");
    free(r);
    json_object_put(s);
}

Test(pods_env, hosts_file) {
    json_object *ha = json_tokener_parse("[{\"ip\":\"1.2.3.4\",\"hostnames\":[\"a\",\"b\"]}]");
    char *r = kite_pods_hosts_content("10.0.0.5", "h", NULL, NULL, NULL);
    cr_assert(strstr(r, "127.0.0.1\tlocalhost\n"));
    cr_assert(strstr(r, "\n10.0.0.5\th\n"));
    free(r);
    r = kite_pods_hosts_content(NULL, "h", NULL, ha, "127.0.0.1 node\n");
    cr_assert_str_eq(r, "# Kubernetes-managed hosts file (host network).\n127.0.0.1 node\n"
                        "\n# Entries added by HostAliases.\n1.2.3.4\ta\tb\n");
    free(r);
    json_object_put(ha);
}
