/* Certificate signing requests: a request made by kite_pki_new_csr parses back to its subject,
 * a tampered one is refused, and the signer's certificate carries the request's subject and
 * key, signed by the CA, for the requested time. */
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static char d[64];

static void setup(void) {
    strcpy(d, "/tmp/kite-csr-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    cr_assert_eq(kite_pki_ensure(d, NULL, 0), 0);
}

static void teardown(void) {
    char *cmd = kite_asprintf("rm -rf %s", d);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
}

TestSuite(csr, .init = setup, .fini = teardown);

static char *file(const char *name) {
    char *p = kite_asprintf("%s/%s", d, name), *s = NULL;
    cr_assert_eq(kite_pki_read_file(p, &s), 0);
    free(p);
    return s;
}

Test(csr, request_parses_back_to_its_subject) {
    const char *orgs[] = {"system:nodes"};
    char *csr = NULL, *key = NULL;
    cr_assert_eq(kite_pki_new_csr("system:node:n1", orgs, 1, &csr, &key), 0);
    cr_assert(strstr(csr, "BEGIN CERTIFICATE REQUEST"));
    cr_assert(strstr(key, "BEGIN PRIVATE KEY"));
    struct kite_pki_csr_info info;
    cr_assert_eq(kite_pki_csr_parse(csr, &info), 0);
    cr_assert_str_eq(info.cn, "system:node:n1");
    cr_assert_eq(info.n_orgs, 1);
    cr_assert_str_eq(info.orgs[0], "system:nodes");
    cr_assert(!info.has_sans);
    kite_pki_csr_info_release(&info);
    free(csr), free(key);
}

Test(csr, garbage_and_tampered_requests_are_refused) {
    struct kite_pki_csr_info info;
    cr_assert_eq(kite_pki_csr_parse("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
                                    &info), -EINVAL);
    cr_assert_eq(kite_pki_csr_parse("not pem", &info), -EINVAL);
    /* a request whose subject was changed after signing: re-encode with another CN by swapping
     * the signature of a second request onto the first one's body is fiddly in PEM; instead
     * flip one byte inside the base64 of the signature area */
    char *csr = NULL, *key = NULL;
    cr_assert_eq(kite_pki_new_csr("system:node:n1", NULL, 0, &csr, &key), 0);
    char *end = strstr(csr, "-----END");
    cr_assert_not_null(end);
    char *p = end - 8; /* inside the last base64 line: the signature's bytes */
    *p = *p == 'A' ? 'B' : 'A';
    cr_assert_eq(kite_pki_csr_parse(csr, &info), -EBADMSG);
    free(csr), free(key);
}

Test(csr, signer_issues_the_requested_subject) {
    const char *orgs[] = {"system:nodes"};
    char *csr = NULL, *key = NULL, *crt = NULL;
    cr_assert_eq(kite_pki_new_csr("system:node:n1", orgs, 1, &csr, &key), 0);
    char *ca = file("ca.crt"), *cakey = file("ca.key");
    cr_assert_eq(kite_pki_sign_csr(ca, cakey, csr, 3600, &crt), 0);
    int64_t nb, na;
    cr_assert_eq(kite_pki_cert_times(crt, &nb, &na), 0);
    int64_t now = time(NULL);
    cr_assert(nb <= now - 290 && nb >= now - 310, "back-dated 5 minutes");
    cr_assert(na >= now + 3590 && na <= now + 3610, "valid for the requested time");
    gnutls_x509_crt_t c, cac;
    gnutls_x509_crt_init(&c);
    gnutls_x509_crt_init(&cac);
    gnutls_datum_t dc = {(unsigned char *)crt, (unsigned)strlen(crt)}, dca = {(unsigned char *)ca, (unsigned)strlen(ca)};
    cr_assert_eq(gnutls_x509_crt_import(c, &dc, GNUTLS_X509_FMT_PEM), 0);
    cr_assert_eq(gnutls_x509_crt_import(cac, &dca, GNUTLS_X509_FMT_PEM), 0);
    unsigned status = 1;
    cr_assert_eq(gnutls_x509_crt_verify(c, &cac, 1, 0, &status), 0);
    cr_assert_eq(status, 0, "signed by the CA");
    char dn[256];
    size_t dl = sizeof dn;
    cr_assert_eq(gnutls_x509_crt_get_dn_by_oid(c, GNUTLS_OID_X520_COMMON_NAME, 0, 0, dn, &dl), 0);
    cr_assert_str_eq(dn, "system:node:n1");
    dl = sizeof dn;
    cr_assert_eq(gnutls_x509_crt_get_dn_by_oid(c, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, 0, dn, &dl), 0);
    cr_assert_str_eq(dn, "system:nodes");
    /* the certificate's key is the request's: the private key makes a pair with it */
    gnutls_x509_privkey_t k;
    gnutls_x509_privkey_init(&k);
    gnutls_datum_t dk = {(unsigned char *)key, (unsigned)strlen(key)};
    cr_assert_eq(gnutls_x509_privkey_import2(k, &dk, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN), 0);
    unsigned char id1[64], id2[64];
    size_t l1 = sizeof id1, l2 = sizeof id2;
    cr_assert_eq(gnutls_x509_crt_get_key_id(c, 0, id1, &l1), 0);
    cr_assert_eq(gnutls_x509_privkey_get_key_id(k, 0, id2, &l2), 0);
    cr_assert_eq(l1, l2);
    cr_assert_eq(memcmp(id1, id2, l1), 0);
    gnutls_x509_privkey_deinit(k);
    gnutls_x509_crt_deinit(c);
    gnutls_x509_crt_deinit(cac);
    free(csr), free(key), free(crt), free(ca), free(cakey);
}
