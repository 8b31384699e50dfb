/* Certificate signing requests (PKCS#10) with GnuTLS: what a node agent joining with a
 * bootstrap token sends (kite_pki_new_csr), what the API checks of it (kite_pki_csr_parse: the
 * request's own signature, its subject) and what the signer issues (kite_pki_sign_csr). */
#include "pki/pki.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <string.h>
#include <time.h>

static int gerr(int rc) { return rc == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL; }

static char *datum_str(gnutls_datum_t *d) {
    char *s = kite_malloc(d->size + 1);
    memcpy(s, d->data, d->size);
    s[d->size] = 0;
    gnutls_free(d->data);
    return s;
}

static int import_crq(const char *pem, gnutls_x509_crq_t *ret) {
    gnutls_x509_crq_t crq;
    int rc = gnutls_x509_crq_init(&crq);
    if (rc < 0) return gerr(rc);
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    if ((rc = gnutls_x509_crq_import(crq, &d, GNUTLS_X509_FMT_PEM)) < 0) {
        gnutls_x509_crq_deinit(crq);
        return gerr(rc);
    }
    *ret = crq;
    return 0;
}

int kite_pki_new_csr(const char *cn, const char *const *orgs, size_t n_orgs, char **ret_csr_pem, char **ret_key_pem) {
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crq_t crq = NULL;
    int rc = gnutls_x509_privkey_init(&key);
    if (rc >= 0)
        rc = gnutls_x509_privkey_generate2(key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0,
                                           NULL, 0);
    if (rc >= 0) rc = gnutls_x509_crq_init(&crq);
    if (rc >= 0) rc = gnutls_x509_crq_set_version(crq, 1);
    for (size_t i = 0; rc >= 0 && i < n_orgs; i++)
        rc = gnutls_x509_crq_set_dn_by_oid(crq, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, orgs[i], (unsigned)strlen(orgs[i]));
    if (rc >= 0) rc = gnutls_x509_crq_set_dn_by_oid(crq, GNUTLS_OID_X520_COMMON_NAME, 0, cn, (unsigned)strlen(cn));
    if (rc >= 0) rc = gnutls_x509_crq_set_key(crq, key);
    if (rc >= 0) rc = gnutls_x509_crq_sign2(crq, key, GNUTLS_DIG_SHA256, 0);
    gnutls_datum_t der = {0}, c = {0}, k = {0};
    /* "CERTIFICATE REQUEST", the block Kubernetes' CSR API takes (GnuTLS's PEM says "NEW ...") */
    if (rc >= 0) rc = gnutls_x509_crq_export2(crq, GNUTLS_X509_FMT_DER, &der);
    if (rc >= 0) rc = gnutls_pem_base64_encode2("CERTIFICATE REQUEST", &der, &c);
    gnutls_free(der.data);
    if (rc >= 0) rc = gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &k);
    if (crq) gnutls_x509_crq_deinit(crq);
    if (key) gnutls_x509_privkey_deinit(key);
    if (rc < 0) {
        gnutls_free(c.data);
        return gerr(rc);
    }
    *ret_csr_pem = datum_str(&c);
    *ret_key_pem = datum_str(&k);
    return 0;
}

void kite_pki_csr_info_release(struct kite_pki_csr_info *info) {
    free(info->cn);
    for (size_t i = 0; i < info->n_orgs; i++) free(info->orgs[i]);
    free(info->orgs);
    *info = (struct kite_pki_csr_info){0};
}

static char *crq_dn(gnutls_x509_crq_t crq, const char *oid, unsigned idx) {
    size_t len = 0;
    if (gnutls_x509_crq_get_dn_by_oid(crq, oid, idx, 0, NULL, &len) != GNUTLS_E_SHORT_MEMORY_BUFFER) return NULL;
    char *s = kite_malloc(len + 1);
    if (gnutls_x509_crq_get_dn_by_oid(crq, oid, idx, 0, s, &len) < 0) {
        free(s);
        return NULL;
    }
    s[len] = 0;
    return s;
}

static int csr_read(const char *csr_pem, bool verify, struct kite_pki_csr_info *ret) {
    gnutls_x509_crq_t crq;
    int rc = import_crq(csr_pem, &crq);
    if (rc < 0) return rc;
    /* the request is signed by the key it asks a certificate for */
    if (verify && gnutls_x509_crq_verify(crq, 0) < 0) {
        gnutls_x509_crq_deinit(crq);
        return -EBADMSG;
    }
    struct kite_pki_csr_info info = {.cn = crq_dn(crq, GNUTLS_OID_X520_COMMON_NAME, 0)};
    for (char *o; (o = crq_dn(crq, GNUTLS_OID_X520_ORGANIZATION_NAME, (unsigned)info.n_orgs));) {
        info.orgs = kite_realloc(info.orgs, (info.n_orgs + 1) * sizeof(char *));
        info.orgs[info.n_orgs++] = o;
    }
    char san[256];
    size_t sl = sizeof san;
    info.has_sans = gnutls_x509_crq_get_subject_alt_name(crq, 0, san, &sl, NULL, NULL) >= 0 ||
                    sl > sizeof san;
    gnutls_x509_crq_deinit(crq);
    *ret = info;
    return 0;
}

int kite_pki_csr_parse(const char *csr_pem, struct kite_pki_csr_info *ret) { return csr_read(csr_pem, true, ret); }

int kite_pki_csr_read(const char *csr_pem, struct kite_pki_csr_info *ret) { return csr_read(csr_pem, false, ret); }

int kite_pki_sign_csr(const char *ca_cert_pem, const char *ca_key_pem, const char *csr_pem, int64_t seconds,
                      char **ret_cert_pem) {
    gnutls_x509_crt_t ca = NULL, crt = NULL;
    gnutls_x509_privkey_t ca_key = NULL;
    gnutls_x509_crq_t crq = NULL;
    int rc = import_crq(csr_pem, &crq);
    if (rc < 0) return rc;
    if (gnutls_x509_crq_verify(crq, 0) < 0) {
        gnutls_x509_crq_deinit(crq);
        return -EBADMSG;
    }
    gnutls_datum_t cd = {(unsigned char *)ca_cert_pem, (unsigned)strlen(ca_cert_pem)};
    gnutls_datum_t kd = {(unsigned char *)ca_key_pem, (unsigned)strlen(ca_key_pem)};
    unsigned char serial[16], id[64];
    size_t idl = sizeof id;
    time_t now = time(NULL);
    rc = gnutls_x509_crt_init(&ca);
    if (rc >= 0) rc = gnutls_x509_crt_import(ca, &cd, GNUTLS_X509_FMT_PEM);
    if (rc >= 0) rc = gnutls_x509_privkey_init(&ca_key);
    if (rc >= 0) rc = gnutls_x509_privkey_import2(ca_key, &kd, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN);
    if (rc >= 0) rc = gnutls_x509_crt_init(&crt);
    /* subject and public key from the request; nothing else of it (extensions) is trusted */
    if (rc >= 0) rc = gnutls_x509_crt_set_crq(crt, crq);
    if (rc >= 0) rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
    serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x01);
    if (rc >= 0) rc = gnutls_x509_crt_set_version(crt, 3);
    if (rc >= 0) rc = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    /* back-dated as kube-controller-manager's signer does (5 minutes: clock skew) */
    if (rc >= 0) rc = gnutls_x509_crt_set_activation_time(crt, now - 300);
    if (rc >= 0) rc = gnutls_x509_crt_set_expiration_time(crt, now + (time_t)seconds);
    if (rc >= 0) rc = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
    if (rc >= 0) rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE | GNUTLS_KEY_KEY_ENCIPHERMENT);
    if (rc >= 0) rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_CLIENT, 1);
    if (rc >= 0) rc = gnutls_x509_crt_get_key_id(crt, 0, id, &idl);
    if (rc >= 0) rc = gnutls_x509_crt_set_subject_key_id(crt, id, idl);
    idl = sizeof id;
    if (rc >= 0 && gnutls_x509_crt_get_subject_key_id(ca, id, &idl, NULL) >= 0)
        rc = gnutls_x509_crt_set_authority_key_id(crt, id, idl);
    if (rc >= 0) rc = gnutls_x509_crt_sign2(crt, ca, ca_key, GNUTLS_DIG_SHA256, 0);
    gnutls_datum_t out = {0};
    if (rc >= 0) rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &out);
    if (crt) gnutls_x509_crt_deinit(crt);
    if (ca) gnutls_x509_crt_deinit(ca);
    if (ca_key) gnutls_x509_privkey_deinit(ca_key);
    gnutls_x509_crq_deinit(crq);
    if (rc < 0) return gerr(rc);
    *ret_cert_pem = datum_str(&out);
    return 0;
}

int kite_pki_cert_times(const char *cert_pem, int64_t *ret_not_before, int64_t *ret_not_after) {
    gnutls_x509_crt_t crt;
    int rc = gnutls_x509_crt_init(&crt);
    if (rc < 0) return gerr(rc);
    gnutls_datum_t d = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)};
    if ((rc = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM)) < 0) {
        gnutls_x509_crt_deinit(crt);
        return gerr(rc);
    }
    *ret_not_before = gnutls_x509_crt_get_activation_time(crt);
    *ret_not_after = gnutls_x509_crt_get_expiration_time(crt);
    gnutls_x509_crt_deinit(crt);
    return 0;
}
