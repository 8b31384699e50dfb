/* libldns, loaded with dlopen when the cluster DNS first needs it rather than linked: libldns
 * brings OpenSSL's libssl and libcrypto along, whose constructors and relocations touch ~1.9 MB
 * of pages at load (BENCHMARKS.md, "The agent's idle memory"), in every agent process although
 * only one started with --serve-dns (`kite up`'s) answers DNS. As libarchive.h: the types and
 * constants come from ldns's own headers; the calls go through a table of the functions the
 * responder uses.
 *
 * The DNS sources include this header instead of <ldns/ldns.h> and call ldns_*() as written in
 * ldns's documentation: each name below is defined to the table's slot. The defines are written
 * out one per function because the preprocessor cannot generate a #define; one that is missing
 * leaves a direct call to libldns, which neither kite nor kite-agent links, so their link fails.
 * Callers load the table first (kite_ldns_load): every entry point of dns.h that parses or
 * builds a packet does. */
#pragma once
#include <ldns/ldns.h>

#define KITE_LDNS_SONAME "libldns.so.3"

/* X(name) for every ldns function the responder calls */
#define KITE_LDNS_FUNCTIONS(X) \
    X(ldns_dname_new_frm_str) \
    X(ldns_native2rdf_int16) \
    X(ldns_pkt2wire) \
    X(ldns_pkt_additional) \
    X(ldns_pkt_ancount) \
    X(ldns_pkt_answer) \
    X(ldns_pkt_authority) \
    X(ldns_pkt_cd) \
    X(ldns_pkt_edns) \
    X(ldns_pkt_edns_udp_size) \
    X(ldns_pkt_free) \
    X(ldns_pkt_get_opcode) \
    X(ldns_pkt_get_rcode) \
    X(ldns_pkt_id) \
    X(ldns_pkt_new) \
    X(ldns_pkt_push_rr) \
    X(ldns_pkt_qdcount) \
    X(ldns_pkt_qr) \
    X(ldns_pkt_question) \
    X(ldns_pkt_rd) \
    X(ldns_pkt_set_aa) \
    X(ldns_pkt_set_additional) \
    X(ldns_pkt_set_ancount) \
    X(ldns_pkt_set_answer) \
    X(ldns_pkt_set_arcount) \
    X(ldns_pkt_set_authority) \
    X(ldns_pkt_set_cd) \
    X(ldns_pkt_set_edns_udp_size) \
    X(ldns_pkt_set_id) \
    X(ldns_pkt_set_nscount) \
    X(ldns_pkt_set_opcode) \
    X(ldns_pkt_set_qr) \
    X(ldns_pkt_set_question) \
    X(ldns_pkt_set_ra) \
    X(ldns_pkt_set_rcode) \
    X(ldns_pkt_set_rd) \
    X(ldns_pkt_set_tc) \
    X(ldns_pkt_tc) \
    X(ldns_rdf2native_int32) \
    X(ldns_rdf2str) \
    X(ldns_rdf_clone) \
    X(ldns_rdf_deep_free) \
    X(ldns_rdf_new_frm_str) \
    X(ldns_rr_clone) \
    X(ldns_rr_get_class) \
    X(ldns_rr_get_type) \
    X(ldns_rr_list_clone) \
    X(ldns_rr_list_deep_free) \
    X(ldns_rr_list_new) \
    X(ldns_rr_list_rr) \
    X(ldns_rr_list_rr_count) \
    X(ldns_rr_new) \
    X(ldns_rr_new_frm_str) \
    X(ldns_rr_owner) \
    X(ldns_rr_push_rdf) \
    X(ldns_rr_rd_count) \
    X(ldns_rr_rdf) \
    X(ldns_rr_set_class) \
    X(ldns_rr_set_owner) \
    X(ldns_rr_set_ttl) \
    X(ldns_rr_set_type) \
    X(ldns_rr_ttl) \
    X(ldns_wire2pkt)

struct kite_ldns {
#define KITE_LDNS_SLOT(name) __typeof__(name) *name;
    KITE_LDNS_FUNCTIONS(KITE_LDNS_SLOT)
#undef KITE_LDNS_SLOT
};
/* The table, filled once by kite_ldns_load (read-only afterwards). */
extern struct kite_ldns kite_ldns;

/* Loads libldns once for the process (thread-safe): 0, or -ENOENT with *ret_err (a new string;
 * ret_err may be NULL) naming what is missing. */
int kite_ldns_load(char **ret_err);

#ifndef KITE_LDNS_LOADER
#define ldns_dname_new_frm_str (kite_ldns.ldns_dname_new_frm_str)
#define ldns_native2rdf_int16 (kite_ldns.ldns_native2rdf_int16)
#define ldns_pkt2wire (kite_ldns.ldns_pkt2wire)
#define ldns_pkt_additional (kite_ldns.ldns_pkt_additional)
#define ldns_pkt_ancount (kite_ldns.ldns_pkt_ancount)
#define ldns_pkt_answer (kite_ldns.ldns_pkt_answer)
#define ldns_pkt_authority (kite_ldns.ldns_pkt_authority)
#define ldns_pkt_cd (kite_ldns.ldns_pkt_cd)
#define ldns_pkt_edns (kite_ldns.ldns_pkt_edns)
#define ldns_pkt_edns_udp_size (kite_ldns.ldns_pkt_edns_udp_size)
#define ldns_pkt_free (kite_ldns.ldns_pkt_free)
#define ldns_pkt_get_opcode (kite_ldns.ldns_pkt_get_opcode)
#define ldns_pkt_get_rcode (kite_ldns.ldns_pkt_get_rcode)
#define ldns_pkt_id (kite_ldns.ldns_pkt_id)
#define ldns_pkt_new (kite_ldns.ldns_pkt_new)
#define ldns_pkt_push_rr (kite_ldns.ldns_pkt_push_rr)
#define ldns_pkt_qdcount (kite_ldns.ldns_pkt_qdcount)
#define ldns_pkt_qr (kite_ldns.ldns_pkt_qr)
#define ldns_pkt_question (kite_ldns.ldns_pkt_question)
#define ldns_pkt_rd (kite_ldns.ldns_pkt_rd)
#define ldns_pkt_set_aa (kite_ldns.ldns_pkt_set_aa)
#define ldns_pkt_set_additional (kite_ldns.ldns_pkt_set_additional)
#define ldns_pkt_set_ancount (kite_ldns.ldns_pkt_set_ancount)
#define ldns_pkt_set_answer (kite_ldns.ldns_pkt_set_answer)
#define ldns_pkt_set_arcount (kite_ldns.ldns_pkt_set_arcount)
#define ldns_pkt_set_authority (kite_ldns.ldns_pkt_set_authority)
#define ldns_pkt_set_cd (kite_ldns.ldns_pkt_set_cd)
#define ldns_pkt_set_edns_udp_size (kite_ldns.ldns_pkt_set_edns_udp_size)
#define ldns_pkt_set_id (kite_ldns.ldns_pkt_set_id)
#define ldns_pkt_set_nscount (kite_ldns.ldns_pkt_set_nscount)
#define ldns_pkt_set_opcode (kite_ldns.ldns_pkt_set_opcode)
#define ldns_pkt_set_qr (kite_ldns.ldns_pkt_set_qr)
#define ldns_pkt_set_question (kite_ldns.ldns_pkt_set_question)
#define ldns_pkt_set_ra (kite_ldns.ldns_pkt_set_ra)
#define ldns_pkt_set_rcode (kite_ldns.ldns_pkt_set_rcode)
#define ldns_pkt_set_rd (kite_ldns.ldns_pkt_set_rd)
#define ldns_pkt_set_tc (kite_ldns.ldns_pkt_set_tc)
#define ldns_pkt_tc (kite_ldns.ldns_pkt_tc)
#define ldns_rdf2native_int32 (kite_ldns.ldns_rdf2native_int32)
#define ldns_rdf2str (kite_ldns.ldns_rdf2str)
#define ldns_rdf_clone (kite_ldns.ldns_rdf_clone)
#define ldns_rdf_deep_free (kite_ldns.ldns_rdf_deep_free)
#define ldns_rdf_new_frm_str (kite_ldns.ldns_rdf_new_frm_str)
#define ldns_rr_clone (kite_ldns.ldns_rr_clone)
#define ldns_rr_get_class (kite_ldns.ldns_rr_get_class)
#define ldns_rr_get_type (kite_ldns.ldns_rr_get_type)
#define ldns_rr_list_clone (kite_ldns.ldns_rr_list_clone)
#define ldns_rr_list_deep_free (kite_ldns.ldns_rr_list_deep_free)
#define ldns_rr_list_new (kite_ldns.ldns_rr_list_new)
#define ldns_rr_list_rr (kite_ldns.ldns_rr_list_rr)
#define ldns_rr_list_rr_count (kite_ldns.ldns_rr_list_rr_count)
#define ldns_rr_new (kite_ldns.ldns_rr_new)
#define ldns_rr_new_frm_str (kite_ldns.ldns_rr_new_frm_str)
#define ldns_rr_owner (kite_ldns.ldns_rr_owner)
#define ldns_rr_push_rdf (kite_ldns.ldns_rr_push_rdf)
#define ldns_rr_rd_count (kite_ldns.ldns_rr_rd_count)
#define ldns_rr_rdf (kite_ldns.ldns_rr_rdf)
#define ldns_rr_set_class (kite_ldns.ldns_rr_set_class)
#define ldns_rr_set_owner (kite_ldns.ldns_rr_set_owner)
#define ldns_rr_set_ttl (kite_ldns.ldns_rr_set_ttl)
#define ldns_rr_set_type (kite_ldns.ldns_rr_set_type)
#define ldns_rr_ttl (kite_ldns.ldns_rr_ttl)
#define ldns_wire2pkt (kite_ldns.ldns_wire2pkt)
#endif
