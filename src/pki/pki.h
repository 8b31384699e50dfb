/* kite pki: the local cluster's certificate authority and credentials (GnuTLS).
 *
 * Layout of a pki dir (what `kite certs` writes and `kite up` reads):
 *   ca.crt ca.key          self-signed CA (10 years)
 *   server.crt server.key  serving cert, SANs 127.0.0.1, ::1, localhost, hostname + extras
 *   admin.crt admin.key    client cert CN=kite-admin, O=system:masters
 *   kubelet-client.crt .key  the API server's client cert towards node agents (pods/log):
 *                          CN=kube-apiserver-kubelet-client, O=system:masters, as kube-apiserver's
 *   controller-manager.crt controller-manager.key
 *                          client cert CN=system:kube-controller-manager (the controllers)
 * Keys are ECDSA P-256, PEM (PKCS#8 unencrypted), mode 0600. The CA
 * lives 10 years, leaf certs 1 year; ensure reissues a leaf within 30 days of expiry. */
#pragma once
#include "base/base.h"

/* Ensures dir (created 0700 if missing) holds a usable CA, server, admin and controller-manager pair. Existing
 * valid files are kept (idempotent); a server cert lacking a requested SAN, expired or not
 * signed by the CA is reissued; a missing/broken CA regenerates everything. extra_sans are DNS
 * names or IP literals. 0 or -errno. */
int kite_pki_ensure(const char *dir, const char *const *extra_sans, size_t n_extra);
/* The CN of the API server's client certificate towards node agents; agents serve logs to it
 * alone. */
#define KITE_PKI_KUBELET_CLIENT_CN "kube-apiserver-kubelet-client"

/* Issues a client cert (clientAuth) signed by dir's CA: CN=cn, one O per org. PEM out-params
 * (malloc'ed, caller frees), set only on success. 0 or -errno. */
int kite_pki_issue_client(const char *dir, const char *cn, const char *const *orgs, size_t n_orgs,
                          char **ret_cert_pem, char **ret_key_pem);
/* A self-signed serving cert (serverAuth, 1 year) for cn with the given SANs (DNS names or IP
 * literals): a node agent's default, as the kubelet's. PEM out-params set only on success. */
int kite_pki_self_signed(const char *cn, const char *const *sans, size_t n_sans, char **ret_cert_pem,
                         char **ret_key_pem);
/* Renders a kubeconfig (YAML) with embedded base64 certificate-authority-data,
 * client-certificate-data and client-key-data (or `token` when cert_pem is NULL; neither when
 * token is NULL too), one cluster, one user, one context named `name`, current-context set.
 * Returns malloc'ed text (never NULL). */
char *kite_pki_kubeconfig(const char *name, const char *server_url, const char *ca_pem,
                          const char *cert_pem, const char *key_pem, const char *token);
/* Reads a whole file (malloc'ed, NUL-terminated) into *ret. 0 or -errno. */
int kite_pki_read_file(const char *path, char **ret);

/* ---- certificate signing requests (csr.c) ---- */

/* A new ECDSA P-256 key and a PKCS#10 request signed by it for CN=cn, one O per org (PEM,
 * malloc'ed; set only on success). 0 or -errno. */
int kite_pki_new_csr(const char *cn, const char *const *orgs, size_t n_orgs, char **ret_csr_pem, char **ret_key_pem);
/* What a request asks for. Release with kite_pki_csr_info_release. */
struct kite_pki_csr_info {
    char *cn;      /* NULL when the subject has none */
    char **orgs;
    size_t n_orgs;
    bool has_sans; /* DNS names, IPs, emails or URIs requested */
};
/* Parses a PEM request and checks its self-signature: -EINVAL when it is no request, -EBADMSG
 * when its signature does not verify. */
int kite_pki_csr_parse(const char *csr_pem, struct kite_pki_csr_info *ret);
/* The same without the signature check (what x509.ParseCertificateRequest gives: admission
 * judges the subject asked for, the signer the signature). -EINVAL when it is no request. */
int kite_pki_csr_read(const char *csr_pem, struct kite_pki_csr_info *ret);
void kite_pki_csr_info_release(struct kite_pki_csr_info *info);
/* Signs the request with the CA (PEM cert and key): the request's subject and public key only,
 * clientAuth, valid from 5 minutes ago for `seconds`. */
int kite_pki_sign_csr(const char *ca_cert_pem, const char *ca_key_pem, const char *csr_pem, int64_t seconds,
                      char **ret_cert_pem);
/* A certificate's validity (unix seconds). */
int kite_pki_cert_times(const char *cert_pem, int64_t *ret_not_before, int64_t *ret_not_after);

/* ---- the service-account signing key (jws.c) ---- */

/* The key at path (PEM), made on first use: RSA 2048, PKCS#8, mode 0600. *ret_key_pem
 * malloc'ed. 0 or -errno. */
int kite_pki_sa_key_ensure(const char *path, char **ret_key_pem);
/* A key loaded for JWS signatures: RS256 for an RSA key, ES256 for ECDSA P-256 (-EOPNOTSUPP
 * otherwise, -EINVAL when key_pem is no private key). Safe to share between threads. */
struct kite_pki_signer;
int kite_pki_signer_new(const char *key_pem, struct kite_pki_signer **ret);
void kite_pki_signer_free(struct kite_pki_signer *s); /* NULL is a no-op */
/* The JWS "alg" ("RS256", "ES256") and "kid" (base64url SHA-256 of the PKIX public key, as
 * kube-apiserver's keyIDFromPublicKey). Borrowed. */
const char *kite_pki_signer_alg(const struct kite_pki_signer *s);
const char *kite_pki_signer_kid(const struct kite_pki_signer *s);
/* The JWS signature of data (ES256: r||s, 64 bytes), malloc'ed. 0 or -errno. */
int kite_pki_sign(const struct kite_pki_signer *s, const void *data, size_t len, unsigned char **ret_sig,
                  size_t *ret_len);
/* 0 when sig is the key's signature of data, else -EBADMSG. */
int kite_pki_verify(const struct kite_pki_signer *s, const void *data, size_t len, const unsigned char *sig,
                    size_t sig_len);
