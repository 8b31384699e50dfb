/* The service-account signing key and JWS signatures over it (RS256, or ES256 for an ECDSA
 * P-256 key), as kube-apiserver's --service-account-signing-key-file and
 * --service-account-key-file: one key signs and verifies. The key's id is upstream's
 * keyIDFromPublicKey (base64url of the SHA-256 of its PKIX DER), written as the JWT's kid.
 *
 * Signing and verifying only read the GnuTLS handles, so one signer serves every thread. */
#include "pki/pki.h"
#include "base/base64.h"

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <string.h>

#define SA_KEY_BITS 2048
#define ES256_HALF 32 /* bytes of r and of s in an ES256 signature */

struct kite_pki_signer {
    gnutls_privkey_t priv;
    gnutls_pubkey_t pub;
    gnutls_sign_algorithm_t algo;
    const char *alg; /* "RS256" or "ES256" */
    char *kid;
};

int kite_pki_sa_key_ensure(const char *path, char **ret_key_pem) {
    char *pem = NULL;
    int r = kite_pki_read_file(path, &pem);
    if (r == 0) {
        *ret_key_pem = pem;
        return 0;
    }
    if (r != -ENOENT) return r;
    gnutls_x509_privkey_t key;
    if (gnutls_x509_privkey_init(&key) < 0) return -ENOMEM;
    gnutls_datum_t d = {0};
    if (gnutls_x509_privkey_generate(key, GNUTLS_PK_RSA, SA_KEY_BITS, 0) < 0 ||
        gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &d) < 0) {
        gnutls_x509_privkey_deinit(key);
        return -EIO;
    }
    gnutls_x509_privkey_deinit(key);
    pem = kite_strndup((const char *)d.data, d.size);
    explicit_bzero(d.data, d.size);
    gnutls_free(d.data);
    if ((r = kite_write_file_atomic(path, pem, strlen(pem), 0600, false)) < 0) {
        explicit_bzero(pem, strlen(pem));
        free(pem);
        return r;
    }
    *ret_key_pem = pem;
    return 0;
}

void kite_pki_signer_free(struct kite_pki_signer *s) {
    if (!s) return;
    if (s->priv) gnutls_privkey_deinit(s->priv);
    if (s->pub) gnutls_pubkey_deinit(s->pub);
    free(s->kid);
    free(s);
}

int kite_pki_signer_new(const char *key_pem, struct kite_pki_signer **ret) {
    struct kite_pki_signer *s = kite_calloc(1, sizeof *s);
    gnutls_datum_t in = {(unsigned char *)key_pem, (unsigned)strlen(key_pem)}, der = {0};
    int r = -EINVAL;
    if (gnutls_privkey_init(&s->priv) < 0 || gnutls_pubkey_init(&s->pub) < 0) goto fail;
    if (gnutls_privkey_import_x509_raw(s->priv, &in, GNUTLS_X509_FMT_PEM, NULL, 0) < 0) goto fail;
    if (gnutls_pubkey_import_privkey(s->pub, s->priv, 0, 0) < 0) goto fail;
    unsigned bits = 0;
    int pk = gnutls_privkey_get_pk_algorithm(s->priv, &bits);
    if (pk == GNUTLS_PK_RSA) {
        s->algo = GNUTLS_SIGN_RSA_SHA256, s->alg = "RS256";
    } else if (pk == GNUTLS_PK_ECDSA && bits == 256) {
        s->algo = GNUTLS_SIGN_ECDSA_SHA256, s->alg = "ES256";
    } else {
        r = -EOPNOTSUPP;
        goto fail;
    }
    if (gnutls_pubkey_export2(s->pub, GNUTLS_X509_FMT_DER, &der) < 0) goto fail;
    unsigned char sum[32];
    int h = gnutls_hash_fast(GNUTLS_DIG_SHA256, der.data, der.size, sum);
    gnutls_free(der.data);
    if (h < 0) goto fail;
    s->kid = kite_base64_encode(sum, sizeof sum, true);
    *ret = s;
    return 0;
fail:
    kite_pki_signer_free(s);
    return r;
}

const char *kite_pki_signer_alg(const struct kite_pki_signer *s) { return s->alg; }
const char *kite_pki_signer_kid(const struct kite_pki_signer *s) { return s->kid; }

/* An ECDSA signature's DER (r, s) as JWS writes it: r and s big-endian, 32 bytes each. */
static int der_to_raw(const gnutls_datum_t *der, unsigned char out[2 * ES256_HALF]) {
    gnutls_datum_t r = {0}, s = {0};
    if (gnutls_decode_rs_value(der, &r, &s) < 0) return -EINVAL;
    int rc = 0;
    const gnutls_datum_t *v[2] = {&r, &s};
    memset(out, 0, 2 * ES256_HALF);
    for (int i = 0; i < 2; i++) {
        const unsigned char *p = v[i]->data;
        size_t n = v[i]->size;
        while (n > ES256_HALF && *p == 0) p++, n--; /* a leading zero keeps DER integers positive */
        if (n > ES256_HALF) rc = -EINVAL;
        else memcpy(out + i * ES256_HALF + (ES256_HALF - n), p, n);
    }
    gnutls_free(r.data);
    gnutls_free(s.data);
    return rc;
}

int kite_pki_sign(const struct kite_pki_signer *s, const void *data, size_t len, unsigned char **ret_sig,
                  size_t *ret_len) {
    gnutls_datum_t in = {(unsigned char *)data, (unsigned)len}, sig = {0};
    if (gnutls_privkey_sign_data2(s->priv, s->algo, 0, &in, &sig) < 0) return -EIO;
    if (s->algo == GNUTLS_SIGN_ECDSA_SHA256) {
        unsigned char *raw = kite_malloc(2 * ES256_HALF);
        int r = der_to_raw(&sig, raw);
        gnutls_free(sig.data);
        if (r < 0) {
            free(raw);
            return r;
        }
        *ret_sig = raw, *ret_len = 2 * ES256_HALF;
        return 0;
    }
    *ret_sig = kite_malloc(sig.size);
    memcpy(*ret_sig, sig.data, sig.size);
    *ret_len = sig.size;
    gnutls_free(sig.data);
    return 0;
}

int kite_pki_verify(const struct kite_pki_signer *s, const void *data, size_t len, const unsigned char *sig,
                    size_t sig_len) {
    gnutls_datum_t in = {(unsigned char *)data, (unsigned)len}, sd = {(unsigned char *)sig, (unsigned)sig_len};
    gnutls_datum_t der = {0};
    if (s->algo == GNUTLS_SIGN_ECDSA_SHA256) {
        if (sig_len != 2 * ES256_HALF) return -EBADMSG;
        gnutls_datum_t r = {(unsigned char *)sig, ES256_HALF}, ss = {(unsigned char *)sig + ES256_HALF, ES256_HALF};
        if (gnutls_encode_rs_value(&der, &r, &ss) < 0) return -EBADMSG;
        sd = der;
    }
    int rc = gnutls_pubkey_verify_data2(s->pub, s->algo, 0, &in, &sd);
    gnutls_free(der.data);
    return rc < 0 ? -EBADMSG : 0;
}
