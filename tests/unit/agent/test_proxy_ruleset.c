/* The Service proxy's ruleset (agent/proxy/ruleset.c), pure: Services and EndpointSlices in,
 * nftables script out. Checks its shape (which endpoints, which chains, which maps) and, as
 * root, that the kernel accepts it (libnftables dry run). */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "agent/proxy/proxy.h"
#include "base/base.h"

TestSuite(proxy_ruleset, .timeout = 30);

static const struct kite_proxy_ruleset_options OPTS = {
    .table = "kite-proxy-unit", .node_name = "n1", .pod_cidr = "10.88.0.0/16", .masquerade_pod_traffic = true};

static json_object *parse(const char *s) {
    json_object *o = json_tokener_parse(s);
    cr_assert_not_null(o, "bad fixture: %s", s);
    return o;
}

static json_object *svc(const char *name, const char *spec) {
    _cleanup_free_ char *s = kite_asprintf("{\"metadata\":{\"namespace\":\"default\",\"name\":\"%s\"},\"spec\":%s}", name, spec);
    return parse(s);
}

/* a slice of svc with port 8080 and endpoints given as JSON */
static json_object *slice(const char *svcname, const char *endpoints) {
    _cleanup_free_ char *s = kite_asprintf(
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"%s-x\",\"labels\":{\"kubernetes.io/service-name\":\"%s\"}},"
        "\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"\",\"port\":8080,\"protocol\":\"TCP\"}],\"endpoints\":%s}",
        svcname, svcname, endpoints);
    return parse(s);
}

static char *build(json_object *svcs, json_object *slices) {
    char *s = kite_proxy_ruleset(&OPTS, svcs, slices);
    if (geteuid() == 0) {
        char *err = NULL;
        cr_expect_eq(kite_proxy_nft_run(s, true, &err), 0, "nftables refused:\n%s\n%s", err ? err : "", s);
        free(err);
    }
    json_object_put(svcs);
    json_object_put(slices);
    return s;
}

static json_object *one(const char *key, json_object *v) {
    json_object *m = json_object_new_object();
    if (v) json_object_object_add(m, key, v);
    return m;
}

#define EP(ip, ready, extra) "{\"addresses\":[\"" ip "\"],\"conditions\":{\"ready\":" ready "}" extra "}"

Test(proxy_ruleset, cluster_ip_to_ready_endpoints_at_random) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}")),
        one("default/web-x", slice("web", "[" EP("10.88.0.5", "true", ",\"nodeName\":\"n1\"") ","
                                          EP("10.88.0.6", "false", "") "," EP("10.88.0.7", "true", "") "]")));
    cr_assert(strstr(s, "table ip kite-proxy-unit\ndelete table ip kite-proxy-unit\ntable ip kite-proxy-unit {\n"), "%s", s);
    cr_assert(strstr(s, "10.96.0.20 . tcp . 80 : goto cip-0"), "%s", s);
    cr_assert(strstr(s, "numgen random mod 2 vmap { 0 : goto ep-0-0, 1 : goto ep-0-1 }"), "%s", s);
    cr_assert(strstr(s, "dnat to 10.88.0.5:8080"), "%s", s);
    cr_assert(strstr(s, "dnat to 10.88.0.7:8080"), "%s", s);
    cr_assert_null(strstr(s, "10.88.0.6"), "a not-ready endpoint is not used:\n%s", s);
    /* hairpin: an endpoint reaching itself is masqueraded */
    cr_assert(strstr(s, "ip saddr 10.88.0.5 meta mark set meta mark | 0x4000"), "%s", s);
    /* sources outside the pod network are masqueraded */
    cr_assert(strstr(s, "ip saddr != 10.88.0.0/16 meta mark set meta mark | 0x4000\n    goto all-0"), "%s", s);
    cr_assert(strstr(s, "ip saddr 10.88.0.0/16 ip daddr != 10.88.0.0/16 masquerade"), "%s", s);
    cr_assert_null(strstr(s, "aff-"), "no affinity unless asked:\n%s", s);
}

Test(proxy_ruleset, terminating_serving_endpoints_when_none_is_ready) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"ports\":[{\"port\":80}]}")),
        one("default/web-x",
            slice("web", "[{\"addresses\":[\"10.88.0.6\"],\"conditions\":{\"ready\":false,\"serving\":true,"
                         "\"terminating\":true}},{\"addresses\":[\"10.88.0.8\"],\"conditions\":{\"ready\":false,"
                         "\"serving\":false,\"terminating\":true}}]")));
    cr_assert(strstr(s, "dnat to 10.88.0.6:8080"), "%s", s);
    cr_assert_null(strstr(s, "10.88.0.8"), "%s", s);
    cr_assert(strstr(s, "numgen random mod 1 "), "%s", s);
}

Test(proxy_ruleset, no_endpoints_rejects) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"type\":\"NodePort\",\"ports\":[{\"port\":80,"
                                      "\"nodePort\":30080}]}")),
        one("default/web-x", slice("web", "[]")));
    cr_assert(strstr(s, "set no-ep { type ipv4_addr . inet_proto . inet_service; elements = { 10.96.0.20 . tcp . 80 }; }"),
              "%s", s);
    cr_assert(strstr(s, "set no-ep-np { type inet_proto . inet_service; elements = { tcp . 30080 }; }"), "%s", s);
    cr_assert(strstr(s, "meta l4proto tcp reject with tcp reset\n    reject\n"), "%s", s);
    cr_assert(strstr(s, "map cluster-ips { type ipv4_addr . inet_proto . inet_service : verdict; }"), "%s", s);
    cr_assert_null(strstr(s, "chain cip-"), "%s", s);
}

Test(proxy_ruleset, session_affinity_sets_with_timeout) {
    _cleanup_free_ char *s = build(
        one("default/web", svc("web", "{\"clusterIP\":\"10.96.0.20\",\"sessionAffinity\":\"ClientIP\","
                                      "\"sessionAffinityConfig\":{\"clientIP\":{\"timeoutSeconds\":60}},"
                                      "\"ports\":[{\"port\":80}]}")),
        one("default/web-x", slice("web", "[" EP("10.88.0.5", "true", "") "]")));
    cr_assert(strstr(s, "set aff-0-0 { type ipv4_addr; flags dynamic,timeout; timeout 60s; }"), "%s", s);
    cr_assert(strstr(s, "ip saddr @aff-0-0 goto ep-0-0\n"), "%s", s);
    cr_assert(strstr(s, "update @aff-0-0 { ip saddr }"), "%s", s);
}

Test(proxy_ruleset, nodeport_and_traffic_policies) {
    json_object *svcs = json_object_new_object();
    json_object_object_add(svcs, "default/c",
                           svc("c", "{\"clusterIP\":\"10.96.0.30\",\"type\":\"NodePort\",\"ports\":[{\"port\":80,"
                                    "\"nodePort\":30080}]}"));
    json_object_object_add(svcs, "default/l",
                           svc("l", "{\"clusterIP\":\"10.96.0.31\",\"type\":\"NodePort\",\"externalTrafficPolicy\":"
                                    "\"Local\",\"internalTrafficPolicy\":\"Local\",\"ports\":[{\"port\":80,"
                                    "\"nodePort\":30081}]}"));
    json_object *slices = json_object_new_object();
    json_object_object_add(slices, "default/c-x", slice("c", "[" EP("10.88.0.5", "true", ",\"nodeName\":\"n2\"") "]"));
    json_object_object_add(slices, "default/l-x",
                           slice("l", "[" EP("10.88.0.6", "true", ",\"nodeName\":\"n1\"") ","
                                      EP("10.88.0.7", "true", ",\"nodeName\":\"n2\"") "]"));
    _cleanup_free_ char *s = build(svcs, slices);
    /* Cluster: the NodePort is masqueraded and reaches every endpoint */
    cr_assert(strstr(s, "tcp . 30080 : goto np-0"), "%s", s);
    cr_assert(strstr(s, "chain np-0 {\n    meta mark set meta mark | 0x4000\n    goto all-0\n"), "%s", s);
    /* Local: this node's endpoints only, the client's address kept */
    cr_assert(strstr(s, "chain np-1 {\n    goto loc-1\n"), "%s", s);
    cr_assert(strstr(s, "chain loc-1 {\n    numgen random mod 1 vmap { 0 : goto ep-1-0 }"), "%s", s);
    cr_assert(strstr(s, "    goto loc-1\n  }\n"), "%s", s);
    cr_assert(strstr(s, "10.96.0.31 . tcp . 80 : goto cip-1"), "%s", s);
    /* node ports on local addresses but loopback, as kube-proxy's nftables mode */
    cr_assert(strstr(s, "ip daddr != 127.0.0.0/8 fib daddr type local meta l4proto . th dport vmap @node-ports"), "%s", s);
}

Test(proxy_ruleset, headless_external_name_and_no_masquerade_flag) {
    json_object *svcs = json_object_new_object();
    json_object_object_add(svcs, "default/h", svc("h", "{\"clusterIP\":\"None\",\"ports\":[{\"port\":80}]}"));
    json_object_object_add(svcs, "default/e", svc("e", "{\"type\":\"ExternalName\",\"externalName\":\"x.example\"}"));
    struct kite_proxy_ruleset_options o = OPTS;
    o.masquerade_pod_traffic = false;
    _cleanup_free_ char *s = kite_proxy_ruleset(&o, svcs, json_object_new_object());
    cr_assert_null(strstr(s, "chain cip-"), "%s", s);
    cr_assert_null(strstr(s, "ip daddr != 10.88.0.0/16 masquerade"), "%s", s);
    json_object_put(svcs);
}

Test(proxy_ruleset, cleanup_script_removes_only_its_table) {
    _cleanup_free_ char *s = kite_proxy_cleanup_script("kite-proxy-unit");
    cr_assert_str_eq(s, "table ip kite-proxy-unit\ndelete table ip kite-proxy-unit\n");
}
