/* The cluster zone's answers (pure): a query's bytes and the Services and EndpointSlices in, an
 * answer's bytes out (dns.h lists the names). Case: names compare case-insensitively and the
 * answer's owner is the question's name as asked. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include "agent/dns/ldns.h"
#include <string.h>

#include "agent/dns/dns.h"
#include "base/base.h"
#include "json/obj.h"

#define SVC_LABEL "kubernetes.io/service-name"
#define MAX_LABELS 8 /* labels of a name below the domain that can mean something */

static const char *jstr(json_object *o, const char *key) {
    const char *s = kite_obj_str(o, key);
    return s ? s : "";
}
static bool jbool(json_object *o, const char *key, bool dflt) {
    json_object *v = kite_obj_get(o, key);
    return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : dflt;
}

struct q {
    const struct kite_dns_zone *z;
    ldns_pkt *reply;
    ldns_rdf *qname; /* the question's name, as asked (borrowed from the query) */
    ldns_rr_type qtype;
    int answers;
};

static ldns_rr *rr_new(ldns_rdf *owner, ldns_rr_type t, uint32_t ttl) {
    ldns_rr *rr = ldns_rr_new();
    ldns_rr_set_owner(rr, ldns_rdf_clone(owner));
    ldns_rr_set_type(rr, t);
    ldns_rr_set_class(rr, LDNS_RR_CLASS_IN);
    ldns_rr_set_ttl(rr, ttl);
    return rr;
}

static ldns_rdf *dname(const char *s) {
    /* NULL for what is no name (an externalName is validated by the apiserver, still) */
    return ldns_dname_new_frm_str(s);
}

static void push(struct q *q, ldns_pkt_section sec, ldns_rr *rr) {
    ldns_pkt_push_rr(q->reply, sec, rr);
    if (sec == LDNS_SECTION_ANSWER) q->answers++;
}

/* An A record for name; false if ip is no IPv4 address. */
static bool add_a(struct q *q, ldns_pkt_section sec, ldns_rdf *owner, const char *ip) {
    ldns_rdf *a = ldns_rdf_new_frm_str(LDNS_RDF_TYPE_A, ip);
    if (!a) return false;
    ldns_rr *rr = rr_new(owner, LDNS_RR_TYPE_A, KITE_DNS_TTL);
    ldns_rr_push_rdf(rr, a);
    push(q, sec, rr);
    return true;
}

static void add_name_rr(struct q *q, ldns_rdf *owner, ldns_rr_type t, const char *target) {
    ldns_rdf *d = dname(target);
    if (!d) return;
    ldns_rr *rr = rr_new(owner, t, KITE_DNS_TTL);
    ldns_rr_push_rdf(rr, d);
    push(q, LDNS_SECTION_ANSWER, rr);
}

static void add_srv(struct q *q, int weight, int port, const char *target) {
    ldns_rdf *d = dname(target);
    if (!d) return;
    ldns_rr *rr = rr_new(q->qname, LDNS_RR_TYPE_SRV, KITE_DNS_TTL);
    ldns_rr_push_rdf(rr, ldns_native2rdf_int16(LDNS_RDF_TYPE_INT16, 0));
    ldns_rr_push_rdf(rr, ldns_native2rdf_int16(LDNS_RDF_TYPE_INT16, (uint16_t)weight));
    ldns_rr_push_rdf(rr, ldns_native2rdf_int16(LDNS_RDF_TYPE_INT16, (uint16_t)port));
    ldns_rr_push_rdf(rr, d);
    push(q, LDNS_SECTION_ANSWER, rr);
}

/* D's SOA, as CoreDNS writes it (negative answers carry it in the authority section) */
static ldns_rr *soa(const char *domain) {
    _cleanup_free_ char *s = kite_asprintf("%s. %d IN SOA ns.dns.%s. hostmaster.%s. 1 7200 1800 86400 %d", domain,
                                           KITE_DNS_TTL, domain, domain, KITE_DNS_TTL);
    ldns_rr *rr = NULL;
    return ldns_rr_new_frm_str(&rr, s, 0, NULL, NULL) == LDNS_STATUS_OK ? rr : NULL;
}

static json_object *service(const struct kite_dns_zone *z, const char *ns, const char *name) {
    _cleanup_free_ char *key = kite_asprintf("%s/%s", ns, name);
    return kite_obj_get(z->services, key);
}

static bool headless(json_object *svc) {
    const char *cip = jstr(kite_obj_get(svc, "spec"), "clusterIP");
    return !*cip || strcmp(cip, "None") == 0;
}

/* the endpoint's name in the Service's domain: its hostname, else its address dashed */
static void endpoint_label(json_object *ep, const char *addr, char *out, size_t n) {
    const char *h = jstr(ep, "hostname");
    if (*h) {
        snprintf(out, n, "%s", h);
    } else {
        snprintf(out, n, "%s", addr);
        for (char *c = out; *c; c++)
            if (*c == '.') *c = '-';
    }
}

/* Calls fn for each address of a ready (or, with publishNotReadyAddresses, any) IPv4 endpoint
 * of the Service; stops when fn returns false. */
typedef bool (*ep_fn)(struct q *q, json_object *slice, json_object *ep, const char *addr, void *ud);
static void each_endpoint(struct q *q, json_object *svc, const char *ns, const char *name, ep_fn fn, void *ud) {
    bool all = jbool(kite_obj_get(svc, "spec"), "publishNotReadyAddresses", false);
    json_object_object_foreach(q->z->slices, key, sl) {
        (void)key;
        json_object *meta = kite_obj_get(sl, "metadata");
        if (strcmp(jstr(meta, "namespace"), ns) != 0 || strcmp(jstr(kite_obj_get(meta, "labels"), SVC_LABEL), name) != 0 ||
            strcmp(jstr(sl, "addressType"), "IPv4") != 0)
            continue;
        json_object *eps = kite_obj_get(sl, "endpoints");
        size_t n = json_object_is_type(eps, json_type_array) ? json_object_array_length(eps) : 0;
        for (size_t i = 0; i < n; i++) {
            json_object *ep = json_object_array_get_idx(eps, i);
            if (!all && !jbool(kite_obj_get(ep, "conditions"), "ready", true)) continue;
            json_object *addrs = kite_obj_get(ep, "addresses");
            size_t na = json_object_is_type(addrs, json_type_array) ? json_object_array_length(addrs) : 0;
            for (size_t j = 0; j < na; j++) {
                const char *a = json_object_get_string(json_object_array_get_idx(addrs, j));
                if (a && !fn(q, sl, ep, a, ud)) return;
            }
        }
    }
}

static bool ep_add_a(struct q *q, json_object *sl, json_object *ep, const char *addr, void *ud) {
    add_a(q, LDNS_SECTION_ANSWER, q->qname, addr);
    return true;
}

struct match {
    const char *label;
    bool found;
};
static bool ep_match(struct q *q, json_object *sl, json_object *ep, const char *addr, void *ud) {
    struct match *m = ud;
    char l[256];
    endpoint_label(ep, addr, l, sizeof l);
    if (strcasecmp(l, m->label) != 0) return true;
    m->found = true;
    if (q->qtype == LDNS_RR_TYPE_A || q->qtype == LDNS_RR_TYPE_ANY) add_a(q, LDNS_SECTION_ANSWER, q->qname, addr);
    return true;
}

struct srv {
    const char *svcname, *ns, *domain, *port_name, *proto; /* port_name NULL: every named port */
    int weight;
    int count; /* first pass: count only */
};
/* the slice's port of that name and protocol, or 0 */
static int slice_port(json_object *sl, const char *pname, const char *proto) {
    json_object *ports = kite_obj_get(sl, "ports");
    size_t n = json_object_is_type(ports, json_type_array) ? json_object_array_length(ports) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        const char *pr = jstr(p, "protocol");
        if (strcasecmp(jstr(p, "name"), pname) == 0 && strcasecmp(*pr ? pr : "TCP", proto) == 0)
            return json_object_get_int(kite_obj_get(p, "port"));
    }
    return 0;
}
static bool ep_srv(struct q *q, json_object *sl, json_object *ep, const char *addr, void *ud) {
    struct srv *s = ud;
    int port = slice_port(sl, s->port_name, s->proto);
    if (!port) return true;
    if (s->count >= 0) {
        s->count++;
        return true;
    }
    char l[256];
    endpoint_label(ep, addr, l, sizeof l);
    _cleanup_free_ char *target = kite_asprintf("%s.%s.%s.svc.%s.", l, s->svcname, s->ns, s->domain);
    add_srv(q, s->weight, port, target);
    ldns_rdf *t = dname(target);
    if (t) {
        add_a(q, LDNS_SECTION_ADDITIONAL, t, addr);
        ldns_rdf_deep_free(t);
    }
    return true;
}

/* _PORT._PROTO.SVC.NS.svc.D (port_name, proto given) or SVC.NS.svc.D (every named port) */
static void answer_srv(struct q *q, json_object *svc, const char *ns, const char *name, const char *port_name,
                       const char *proto) {
    const char *d = q->z->domain;
    if (!headless(svc)) {
        json_object *ports = kite_obj_get(kite_obj_get(svc, "spec"), "ports");
        size_t n = json_object_is_type(ports, json_type_array) ? json_object_array_length(ports) : 0;
        _cleanup_free_ char *target = kite_asprintf("%s.%s.svc.%s.", name, ns, d);
        int matched = 0;
        for (size_t i = 0; i < n; i++) {
            json_object *p = json_object_array_get_idx(ports, i);
            const char *pn = jstr(p, "name"), *pr = jstr(p, "protocol");
            if (!*pn) continue; /* SRV records are for named ports */
            if (port_name && (strcasecmp(pn, port_name) != 0 || strcasecmp(*pr ? pr : "TCP", proto) != 0)) continue;
            add_srv(q, 100, json_object_get_int(kite_obj_get(p, "port")), target);
            matched++;
        }
        ldns_rdf *t = matched ? dname(target) : NULL;
        if (t) {
            add_a(q, LDNS_SECTION_ADDITIONAL, t, jstr(kite_obj_get(svc, "spec"), "clusterIP"));
            ldns_rdf_deep_free(t);
        }
        return;
    }
    json_object *ports = kite_obj_get(kite_obj_get(svc, "spec"), "ports");
    size_t n = json_object_is_type(ports, json_type_array) ? json_object_array_length(ports) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *p = json_object_array_get_idx(ports, i);
        const char *pn = jstr(p, "name"), *pr = jstr(p, "protocol");
        if (!*pn) continue;
        if (port_name && (strcasecmp(pn, port_name) != 0 || strcasecmp(*pr ? pr : "TCP", proto) != 0)) continue;
        struct srv s = {.svcname = name, .ns = ns, .domain = d, .port_name = pn, .proto = *pr ? pr : "TCP"};
        each_endpoint(q, svc, ns, name, ep_srv, &s); /* count, for the weights */
        s.weight = s.count ? 100 / s.count : 100;
        if (s.weight < 1) s.weight = 1;
        s.count = -1;
        each_endpoint(q, svc, ns, name, ep_srv, &s);
    }
}

static bool any_service_in(const struct kite_dns_zone *z, const char *ns) {
    json_object_object_foreach(z->services, key, svc) {
        (void)key;
        if (strcmp(jstr(kite_obj_get(svc, "metadata"), "namespace"), ns) == 0) return true;
    }
    return false;
}

/* rc for a name in the zone: 0 NOERROR (answers, or NODATA), else NXDOMAIN */
static int answer_cluster(struct q *q, char **l, int n) {
    const char *d = q->z->domain;
    bool a = q->qtype == LDNS_RR_TYPE_A || q->qtype == LDNS_RR_TYPE_ANY;
    if (n == 0) {
        if (q->qtype == LDNS_RR_TYPE_SOA || q->qtype == LDNS_RR_TYPE_ANY) {
            ldns_rr *s = soa(d);
            if (s) push(q, LDNS_SECTION_ANSWER, s);
        }
        if (q->qtype == LDNS_RR_TYPE_NS || q->qtype == LDNS_RR_TYPE_ANY) {
            _cleanup_free_ char *t = kite_asprintf("ns.dns.%s.", d);
            add_name_rr(q, q->qname, LDNS_RR_TYPE_NS, t);
        }
        return LDNS_RCODE_NOERROR;
    }
    if (strcmp(l[n - 1], "pod") == 0) {
        if (n < 3) return LDNS_RCODE_NOERROR;
        if (n != 3) return LDNS_RCODE_NXDOMAIN;
        char ip[64];
        snprintf(ip, sizeof ip, "%s", l[0]);
        for (char *c = ip; *c; c++)
            if (*c == '-') *c = '.';
        struct in_addr in;
        if (inet_pton(AF_INET, ip, &in) != 1) return LDNS_RCODE_NXDOMAIN;
        if (a) add_a(q, LDNS_SECTION_ANSWER, q->qname, ip);
        return LDNS_RCODE_NOERROR;
    }
    if (strcmp(l[n - 1], "svc") != 0) return LDNS_RCODE_NXDOMAIN;
    if (n == 1) return LDNS_RCODE_NOERROR;
    const char *ns = l[n - 2];
    if (n == 2) return any_service_in(q->z, ns) ? LDNS_RCODE_NOERROR : LDNS_RCODE_NXDOMAIN;
    const char *name = l[n - 3];
    json_object *svc = service(q->z, ns, name);
    if (!svc) return LDNS_RCODE_NXDOMAIN;
    json_object *spec = kite_obj_get(svc, "spec");
    if (n == 3) {
        if (strcmp(jstr(spec, "type"), "ExternalName") == 0) {
            _cleanup_free_ char *t = kite_asprintf("%s.", jstr(spec, "externalName"));
            add_name_rr(q, q->qname, LDNS_RR_TYPE_CNAME, t);
            return LDNS_RCODE_NOERROR;
        }
        if (a) {
            if (!headless(svc)) add_a(q, LDNS_SECTION_ANSWER, q->qname, jstr(spec, "clusterIP"));
            else each_endpoint(q, svc, ns, name, ep_add_a, NULL);
        }
        if (q->qtype == LDNS_RR_TYPE_SRV || q->qtype == LDNS_RR_TYPE_ANY) answer_srv(q, svc, ns, name, NULL, NULL);
        return LDNS_RCODE_NOERROR;
    }
    if (n == 4) {
        if (!headless(svc)) return LDNS_RCODE_NXDOMAIN;
        struct match m = {.label = l[0]};
        each_endpoint(q, svc, ns, name, ep_match, &m);
        return m.found ? LDNS_RCODE_NOERROR : LDNS_RCODE_NXDOMAIN;
    }
    if (n == 5 && l[0][0] == '_' && l[1][0] == '_') {
        if (q->qtype == LDNS_RR_TYPE_SRV || q->qtype == LDNS_RR_TYPE_ANY) {
            answer_srv(q, svc, ns, name, l[0] + 1, l[1] + 1);
            return q->answers ? LDNS_RCODE_NOERROR : LDNS_RCODE_NXDOMAIN;
        }
        return LDNS_RCODE_NOERROR;
    }
    return LDNS_RCODE_NXDOMAIN;
}

struct ptr {
    const char *ip;
    char *target; /* found: malloc'ed */
};
static bool ep_ptr(struct q *q, json_object *sl, json_object *ep, const char *addr, void *ud) {
    struct ptr *p = ud;
    if (strcmp(addr, p->ip) != 0 || !*jstr(ep, "hostname")) return true;
    json_object *meta = kite_obj_get(sl, "metadata");
    p->target = kite_asprintf("%s.%s.%s.svc.%s.", jstr(ep, "hostname"), jstr(kite_obj_get(meta, "labels"), SVC_LABEL),
                              jstr(meta, "namespace"), q->z->domain);
    return false;
}

/* D.C.B.A.in-addr.arpa of a ClusterIP or a headless endpoint with a hostname: true if answered */
static bool answer_ptr(struct q *q, char **l, int n) {
    if (n != 4) return false;
    char ip[64];
    snprintf(ip, sizeof ip, "%s.%s.%s.%s", l[3], l[2], l[1], l[0]);
    struct in_addr in;
    if (inet_pton(AF_INET, ip, &in) != 1) return false;
    struct ptr p = {.ip = ip};
    json_object_object_foreach(q->z->services, key, svc) {
        (void)key;
        json_object *meta = kite_obj_get(svc, "metadata");
        if (strcmp(jstr(kite_obj_get(svc, "spec"), "clusterIP"), ip) == 0) {
            p.target = kite_asprintf("%s.%s.svc.%s.", jstr(meta, "name"), jstr(meta, "namespace"), q->z->domain);
            break;
        }
        if (headless(svc)) each_endpoint(q, svc, jstr(meta, "namespace"), jstr(meta, "name"), ep_ptr, &p);
        if (p.target) break;
    }
    if (!p.target) return false;
    if (q->qtype == LDNS_RR_TYPE_PTR || q->qtype == LDNS_RR_TYPE_ANY) add_name_rr(q, q->qname, LDNS_RR_TYPE_PTR, p.target);
    free(p.target);
    return true;
}

/* the reply's header and question, from the query */
static ldns_pkt *reply_for(const ldns_pkt *query) {
    ldns_pkt *r = ldns_pkt_new();
    ldns_pkt_set_id(r, ldns_pkt_id(query));
    ldns_pkt_set_qr(r, true);
    ldns_pkt_set_opcode(r, ldns_pkt_get_opcode(query));
    ldns_pkt_set_rd(r, ldns_pkt_rd(query));
    ldns_pkt_set_ra(r, true);
    ldns_pkt_set_cd(r, ldns_pkt_cd(query));
    ldns_rr_list *qs = ldns_pkt_question(query);
    for (size_t i = 0; i < ldns_rr_list_rr_count(qs); i++)
        ldns_pkt_push_rr(r, LDNS_SECTION_QUESTION, ldns_rr_clone(ldns_rr_list_rr(qs, i)));
    if (ldns_pkt_edns(query)) ldns_pkt_set_edns_udp_size(r, KITE_DNS_EDNS_MAX);
    return r;
}

static int to_wire(ldns_pkt *r, const ldns_pkt *query, size_t max, uint8_t **ret, size_t *ret_len) {
    if (max <= KITE_DNS_UDP_MAX && ldns_pkt_edns(query)) {
        /* over UDP, the client's EDNS payload size, within 512..KITE_DNS_EDNS_MAX */
        size_t e = ldns_pkt_edns_udp_size(query);
        max = e < KITE_DNS_UDP_MAX ? KITE_DNS_UDP_MAX : e > KITE_DNS_EDNS_MAX ? KITE_DNS_EDNS_MAX : e;
    }
    uint8_t *w = NULL;
    size_t n = 0;
    if (ldns_pkt2wire(&w, r, &n) != LDNS_STATUS_OK) return -ENOMEM;
    if (n > max) {
        /* too large for the transport: the header and question alone, TC set (the client asks
         * again over TCP) */
        free(w);
        w = NULL;
        ldns_rr_list_deep_free(ldns_pkt_answer(r));
        ldns_rr_list_deep_free(ldns_pkt_authority(r));
        ldns_rr_list_deep_free(ldns_pkt_additional(r));
        ldns_pkt_set_answer(r, ldns_rr_list_new());
        ldns_pkt_set_authority(r, ldns_rr_list_new());
        ldns_pkt_set_additional(r, ldns_rr_list_new());
        ldns_pkt_set_ancount(r, 0);
        ldns_pkt_set_nscount(r, 0);
        ldns_pkt_set_arcount(r, 0);
        ldns_pkt_set_tc(r, true);
        if (ldns_pkt2wire(&w, r, &n) != LDNS_STATUS_OK) return -ENOMEM;
    }
    *ret = w;
    *ret_len = n;
    return 0;
}

/* the lowercased name without its trailing dot (malloc'ed) */
static char *name_str(const ldns_rdf *d) {
    char *s = ldns_rdf2str(d);
    if (!s) return NULL;
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '.') s[n - 1] = 0;
    for (char *c = s; *c; c++) *c = (char)tolower((unsigned char)*c);
    return s;
}

/* the labels of name before suffix (".suffix" or the name itself), split in place into l;
 * -1 if name is not in suffix or has more than MAX_LABELS labels before it */
static int below(char *name, const char *suffix, char **l) {
    size_t n = strlen(name), sn = strlen(suffix);
    if (n == sn) return strcmp(name, suffix) == 0 ? 0 : -1;
    if (n < sn + 2 || name[n - sn - 1] != '.' || strcmp(name + n - sn, suffix) != 0) return -1;
    name[n - sn - 1] = 0;
    int k = 0;
    for (char *p = name, *tok; (tok = strsep(&p, "."));) {
        if (k == MAX_LABELS) return MAX_LABELS + 1;
        l[k++] = tok;
    }
    return k;
}

int kite_dns_answer(const struct kite_dns_zone *z, const uint8_t *query, size_t len, size_t max_udp,
                    uint8_t **ret_reply, size_t *ret_len) {
    if (kite_ldns_load(NULL) < 0) return -ENOENT;
    ldns_pkt *qp = NULL;
    if (ldns_wire2pkt(&qp, query, len) != LDNS_STATUS_OK) return -EBADMSG;
    if (ldns_pkt_qr(qp)) {
        ldns_pkt_free(qp);
        return -EBADMSG;
    }
    int r = KITE_DNS_FORWARD, rcode = LDNS_RCODE_NOERROR;
    struct q q = {.z = z};
    _cleanup_free_ char *name = NULL;
    char *l[MAX_LABELS + 1];
    int n;
    ldns_rr_list *qs = ldns_pkt_question(qp);
    if (ldns_pkt_get_opcode(qp) != LDNS_PACKET_QUERY || ldns_rr_list_rr_count(qs) != 1) {
        q.reply = reply_for(qp);
        rcode = ldns_pkt_get_opcode(qp) != LDNS_PACKET_QUERY ? LDNS_RCODE_NOTIMPL : LDNS_RCODE_FORMERR;
        goto answer;
    }
    ldns_rr *question = ldns_rr_list_rr(qs, 0);
    q.qname = ldns_rr_owner(question);
    q.qtype = ldns_rr_get_type(question);
    if (!(name = name_str(q.qname))) goto done;
    if ((n = below(name, z->domain, l)) >= 0) {
        q.reply = reply_for(qp);
        rcode = n > MAX_LABELS ? LDNS_RCODE_NXDOMAIN : answer_cluster(&q, l, n);
        ldns_pkt_set_aa(q.reply, true);
        if (!q.answers) {
            ldns_rr *s = soa(z->domain);
            if (s) push(&q, LDNS_SECTION_AUTHORITY, s);
        }
        goto answer;
    }
    if ((n = below(name, "in-addr.arpa", l)) >= 0) {
        q.reply = reply_for(qp);
        if (n <= MAX_LABELS && answer_ptr(&q, l, n)) {
            ldns_pkt_set_aa(q.reply, true);
            goto answer;
        }
        ldns_pkt_free(q.reply);
        q.reply = NULL;
    }
    goto done; /* the host's resolvers answer it */
answer:
    ldns_pkt_set_rcode(q.reply, (uint8_t)rcode);
    r = to_wire(q.reply, qp, max_udp, ret_reply, ret_len);
    if (r == 0) r = KITE_DNS_ANSWERED;
done:
    if (q.reply) ldns_pkt_free(q.reply);
    ldns_pkt_free(qp);
    return r;
}

int kite_dns_servfail(const uint8_t *query, size_t len, uint8_t **ret_reply, size_t *ret_len) {
    if (kite_ldns_load(NULL) < 0) return -ENOENT;
    ldns_pkt *qp = NULL;
    if (ldns_wire2pkt(&qp, query, len) != LDNS_STATUS_OK) return -EBADMSG;
    ldns_pkt *r = reply_for(qp);
    ldns_pkt_set_rcode(r, LDNS_RCODE_SERVFAIL);
    int rc = to_wire(r, qp, KITE_DNS_UDP_MAX, ret_reply, ret_len);
    ldns_pkt_free(r);
    ldns_pkt_free(qp);
    return rc;
}

size_t kite_dns_upstreams(const char *conf, const char *skip, char **out) {
    size_t n = 0;
    for (const char *p = conf; p && *p && n < KITE_DNS_UPSTREAMS_MAX;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        if (len < sizeof line) {
            memcpy(line, p, len);
            line[len] = 0;
            char *save = NULL, *k = strtok_r(line, " \t\r", &save), *v = k ? strtok_r(NULL, " \t\r", &save) : NULL;
            unsigned char buf[16];
            if (k && v && strcmp(k, "nameserver") == 0 && (!skip || strcmp(v, skip) != 0) &&
                (inet_pton(AF_INET, v, buf) == 1 || inet_pton(AF_INET6, v, buf) == 1))
                out[n++] = kite_strdup(v);
        }
        p = eol ? eol + 1 : NULL;
    }
    return n;
}
