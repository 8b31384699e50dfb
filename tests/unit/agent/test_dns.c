/* The cluster DNS's answers (agent/dns/zone.c), pure: queries built and answers read with ldns,
 * against Services and EndpointSlices given as JSON. */
#include <criterion/criterion.h>
#include <ldns/ldns.h>
#include <string.h>

#include "agent/dns/dns.h"
#include "base/base.h"
#include "base/buf.h"

TestSuite(dns, .timeout = 30);

static json_object *services, *slices;
static struct kite_dns_zone zone;

static void add(json_object *map, const char *key, const char *js) {
    json_object *o = json_tokener_parse(js);
    cr_assert_not_null(o, "bad fixture: %s", js);
    json_object_object_add(map, key, o);
}

static void setup(void) {
    services = json_object_new_object();
    slices = json_object_new_object();
    zone = (struct kite_dns_zone){.domain = "cluster.local", .services = services, .slices = slices};
    add(services, "default/web",
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"web\"},\"spec\":{\"clusterIP\":\"10.96.0.20\","
        "\"ports\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\"},{\"port\":81}]}}");
    add(services, "default/db",
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"db\"},\"spec\":{\"clusterIP\":\"None\","
        "\"ports\":[{\"name\":\"pg\",\"port\":5432,\"protocol\":\"TCP\"}]}}");
    add(services, "other/ext",
        "{\"metadata\":{\"namespace\":\"other\",\"name\":\"ext\"},\"spec\":{\"type\":\"ExternalName\","
        "\"externalName\":\"example.org\"}}");
    add(slices, "default/db-abc",
        "{\"metadata\":{\"namespace\":\"default\",\"name\":\"db-abc\",\"labels\":{\"kubernetes.io/service-name\":\"db\"}},"
        "\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"pg\",\"port\":5433,\"protocol\":\"TCP\"}],\"endpoints\":["
        "{\"addresses\":[\"10.88.0.5\"],\"hostname\":\"db-0\",\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.88.0.6\"],\"hostname\":\"db-1\",\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.88.0.7\"],\"conditions\":{\"ready\":true}},"
        "{\"addresses\":[\"10.88.0.8\"],\"hostname\":\"db-3\",\"conditions\":{\"ready\":false}}]}");
}

static void teardown(void) {
    json_object_put(services);
    json_object_put(slices);
}

/* the answer to (name, type), parsed; NULL when the query is to be forwarded */
static ldns_pkt *ask_edns(const char *name, ldns_rr_type t, size_t max, int edns) {
    ldns_pkt *q = NULL;
    cr_assert_eq(ldns_pkt_query_new_frm_str(&q, name, t, LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
    ldns_pkt_set_id(q, 4242);
    if (edns) ldns_pkt_set_edns_udp_size(q, (uint16_t)edns);
    uint8_t *w = NULL;
    size_t n = 0;
    cr_assert_eq(ldns_pkt2wire(&w, q, &n), LDNS_STATUS_OK);
    ldns_pkt_free(q);
    uint8_t *a = NULL;
    size_t an = 0;
    int r = kite_dns_answer(&zone, w, n, max, &a, &an);
    free(w);
    if (r == KITE_DNS_FORWARD) return NULL;
    cr_assert_eq(r, KITE_DNS_ANSWERED, "%s: %d", name, r);
    ldns_pkt *p = NULL;
    cr_assert_eq(ldns_wire2pkt(&p, a, an), LDNS_STATUS_OK);
    free(a);
    cr_assert_eq(ldns_pkt_id(p), 4242);
    cr_assert(ldns_pkt_qr(p));
    return p;
}
static ldns_pkt *ask(const char *name, ldns_rr_type t) { return ask_edns(name, t, KITE_DNS_UDP_MAX, 0); }

/* the answer section's rdata as text, sorted, joined by "|" */
static char *answers(ldns_pkt *p, ldns_rr_type t) {
    ldns_rr_list *l = ldns_pkt_rr_list_by_type(p, t, LDNS_SECTION_ANSWER);
    if (!l) return kite_strdup("");
    ldns_rr_list_sort(l);
    struct kite_buf b = {0};
    for (size_t i = 0; i < ldns_rr_list_rr_count(l); i++) {
        ldns_rr *rr = ldns_rr_list_rr(l, i);
        cr_assert_eq(ldns_rr_ttl(rr), KITE_DNS_TTL);
        for (size_t j = 0; j < ldns_rr_rd_count(rr); j++) {
            char *s = ldns_rdf2str(ldns_rr_rdf(rr, j));
            kite_buf_printf(&b, "%s%s", j ? " " : (i ? "|" : ""), s);
            free(s);
        }
    }
    ldns_rr_list_deep_free(l);
    return kite_buf_detach(&b, NULL);
}

static void expect(const char *name, ldns_rr_type t, ldns_pkt_rcode rc, const char *want) {
    ldns_pkt *p = ask(name, t);
    cr_assert_not_null(p, "%s was forwarded", name);
    cr_expect_eq(ldns_pkt_get_rcode(p), rc, "%s: rcode %d", name, ldns_pkt_get_rcode(p));
    cr_expect(ldns_pkt_aa(p), "%s: not authoritative", name);
    _cleanup_free_ char *got = answers(p, t);
    cr_expect_str_eq(got, want, "%s: got %s", name, got);
    if (!*want) /* negative answers carry the zone's SOA for negative caching */
        cr_expect_eq(ldns_pkt_nscount(p), 1, "%s: no SOA", name);
    ldns_pkt_free(p);
}

Test(dns, service_a_records, .init = setup, .fini = teardown) {
    expect("web.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.96.0.20");
    expect("WEB.Default.SVC.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.96.0.20");
    /* headless: the ready endpoints */
    expect("db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.5|10.88.0.6|10.88.0.7");
    /* NODATA for an existing name without records of the type */
    expect("web.default.svc.cluster.local.", LDNS_RR_TYPE_AAAA, LDNS_RCODE_NOERROR, "");
    /* unknown names inside the domain (what a search path tries first) */
    expect("nope.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("web.default.svc.cluster.local.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("web.nope.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("foo.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "");
    expect("nope.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
}

Test(dns, headless_endpoint_names, .init = setup, .fini = teardown) {
    expect("db-0.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.5");
    expect("db-1.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.6");
    expect("10-88-0-7.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.0.7");
    /* not ready: not published */
    expect("db-3.db.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    /* a ClusterIP Service has no per-endpoint names */
    expect("x.web.default.svc.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
}

Test(dns, srv_records, .init = setup, .fini = teardown) {
    expect("_http._tcp.web.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NOERROR,
           "0 100 80 web.default.svc.cluster.local.");
    expect("_http._udp.web.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NXDOMAIN, "");
    expect("_nope._tcp.web.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NXDOMAIN, "");
    /* headless: one per ready endpoint, the endpoint's port, weights shared */
    expect("_pg._tcp.db.default.svc.cluster.local.", LDNS_RR_TYPE_SRV, LDNS_RCODE_NOERROR,
           "0 33 5433 db-0.db.default.svc.cluster.local.|0 33 5433 db-1.db.default.svc.cluster.local.|"
           "0 33 5433 10-88-0-7.db.default.svc.cluster.local."); /* (ldns's canonical order) */
    ldns_pkt *p = ask("_pg._tcp.db.default.svc.cluster.local.", LDNS_RR_TYPE_SRV);
    cr_expect_eq(ldns_pkt_arcount(p), 3, "the targets' A records are additional");
    ldns_pkt_free(p);
}

Test(dns, pods_external_names_and_ptr, .init = setup, .fini = teardown) {
    expect("10-88-1-2.default.pod.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NOERROR, "10.88.1.2");
    expect("10-88-1-x.default.pod.cluster.local.", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, "");
    expect("ext.other.svc.cluster.local.", LDNS_RR_TYPE_CNAME, LDNS_RCODE_NOERROR, "example.org.");
    expect("20.0.96.10.in-addr.arpa.", LDNS_RR_TYPE_PTR, LDNS_RCODE_NOERROR, "web.default.svc.cluster.local.");
    expect("5.0.88.10.in-addr.arpa.", LDNS_RR_TYPE_PTR, LDNS_RCODE_NOERROR, "db-0.db.default.svc.cluster.local.");
    /* another address's PTR is the upstream's */
    cr_expect_null(ask("1.1.168.192.in-addr.arpa.", LDNS_RR_TYPE_PTR));
    expect("cluster.local.", LDNS_RR_TYPE_SOA, LDNS_RCODE_NOERROR,
           "ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30");
}

Test(dns, other_names_are_forwarded, .init = setup, .fini = teardown) {
    cr_expect_null(ask("example.org.", LDNS_RR_TYPE_A));
    cr_expect_null(ask("cluster.local.example.org.", LDNS_RR_TYPE_A));
    cr_expect_null(ask("xcluster.local.", LDNS_RR_TYPE_A));
}

Test(dns, large_answers_truncate, .init = setup, .fini = teardown) {
    struct kite_buf b = {0};
    kite_buf_printf(&b, "{\"metadata\":{\"namespace\":\"default\",\"name\":\"big-x\",\"labels\":{\"kubernetes.io/"
                        "service-name\":\"db\"}},\"addressType\":\"IPv4\",\"endpoints\":[");
    for (int i = 0; i < 100; i++) kite_buf_printf(&b, "%s{\"addresses\":[\"10.89.0.%d\"]}", i ? "," : "", i + 1);
    kite_buf_printf(&b, "]}");
    _cleanup_free_ char *js = kite_buf_detach(&b, NULL);
    add(slices, "default/big-x", js);
    ldns_pkt *p = ask("db.default.svc.cluster.local.", LDNS_RR_TYPE_A);
    cr_expect(ldns_pkt_tc(p));
    cr_expect_eq(ldns_pkt_ancount(p), 0);
    ldns_pkt_free(p);
    /* EDNS: up to the client's size, at most KITE_DNS_EDNS_MAX (103 A records ~1.7 KB: still TC) */
    p = ask_edns("db.default.svc.cluster.local.", LDNS_RR_TYPE_A, KITE_DNS_UDP_MAX, 4096);
    cr_expect(ldns_pkt_tc(p));
    ldns_pkt_free(p);
    /* TCP: whole */
    p = ask_edns("db.default.svc.cluster.local.", LDNS_RR_TYPE_A, 65535, 0);
    cr_expect(!ldns_pkt_tc(p));
    cr_expect_eq(ldns_pkt_ancount(p), 103);
    ldns_pkt_free(p);
}

Test(dns, garbage_is_not_answered, .init = setup, .fini = teardown) {
    uint8_t junk[5] = {1, 2, 3, 4, 5}, *a = NULL;
    size_t an = 0;
    cr_expect_eq(kite_dns_answer(&zone, junk, sizeof junk, KITE_DNS_UDP_MAX, &a, &an), -EBADMSG);
    cr_expect_eq(kite_dns_servfail(junk, sizeof junk, &a, &an), -EBADMSG);
}

Test(dns, upstreams_from_resolv_conf) {
    char *up[KITE_DNS_UPSTREAMS_MAX];
    size_t n = kite_dns_upstreams("# x\nsearch a b\nnameserver 10.88.0.1\nnameserver 192.0.2.1 \n"
                                  "nameserver ::1\nnameserver bogus\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n",
                                  "10.88.0.1", up);
    cr_assert_eq(n, 3);
    cr_expect_str_eq(up[0], "192.0.2.1");
    cr_expect_str_eq(up[1], "::1");
    cr_expect_str_eq(up[2], "192.0.2.2");
    for (size_t i = 0; i < n; i++) free(up[i]);
}
