/* kite pki: CA, serving and client certificates with GnuTLS x509.
 *
 * Every cert is X.509 v3, ECDSA P-256 / SHA-256, with subject and authority key ids. Leaf
 * certs carry an extended key usage (serverAuth or clientAuth) because Kubernetes clients and
 * servers check it. `ensure` is idempotent: it only writes what is missing or unusable, so
 * restarting `kite up` keeps the credentials users already copied into kubeconfigs. */
#include "pki/pki.h"
#include "base/base64.h"
#include "base/buf.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CA_DAYS (10 * 365)
#define LEAF_DAYS 365
#define RENEW_BEFORE_S (30 * 24 * 3600)  /* reissue leaves this close to expiry */
#define MAX_FILE_BYTES (16u * 1024 * 1024)

static int gerr(int rc) {
    return rc == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL;
}

int kite_pki_read_file(const char *path, char **ret) { return kite_read_file(path, MAX_FILE_BYTES, ret, NULL); }

/* Writes via a temp file + rename so a crash never leaves a half-written key. */
static int write_file(const char *path, const char *data, mode_t mode) {
    _cleanup_free_ char *tmp = kite_asprintf("%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    size_t len = strlen(data), off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = -errno;
            close(fd);
            unlink(tmp);
            return e;
        }
        off += (size_t)n;
    }
    if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
        int e = -errno;
        close(fd);
        unlink(tmp);
        return e;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int e = -errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

static int datum_to_str(gnutls_datum_t *d, char **ret) {
    char *s = kite_malloc(d->size + 1);
    memcpy(s, d->data, d->size);
    s[d->size] = 0;
    gnutls_free(d->data);
    *ret = s;
    return 0;
}

static int crt_to_pem(gnutls_x509_crt_t crt, char **ret) {
    gnutls_datum_t d;
    int rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &d);
    return rc < 0 ? gerr(rc) : datum_to_str(&d, ret);
}

static int key_to_pem(gnutls_x509_privkey_t key, char **ret) {
    gnutls_datum_t d;
    int rc = gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &d);
    return rc < 0 ? gerr(rc) : datum_to_str(&d, ret);
}

static int crt_from_pem(const char *pem, gnutls_x509_crt_t *ret) {
    gnutls_x509_crt_t crt;
    int rc = gnutls_x509_crt_init(&crt);
    if (rc < 0)
        return gerr(rc);
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    rc = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        gnutls_x509_crt_deinit(crt);
        return gerr(rc);
    }
    *ret = crt;
    return 0;
}

static int key_from_pem(const char *pem, gnutls_x509_privkey_t *ret) {
    gnutls_x509_privkey_t key;
    int rc = gnutls_x509_privkey_init(&key);
    if (rc < 0)
        return gerr(rc);
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    rc = gnutls_x509_privkey_import2(key, &d, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN);
    if (rc < 0) {
        gnutls_x509_privkey_deinit(key);
        return gerr(rc);
    }
    *ret = key;
    return 0;
}

static int load_pair(const char *dir, const char *base, gnutls_x509_crt_t *ret_crt,
                     gnutls_x509_privkey_t *ret_key) {
    _cleanup_free_ char *cp = kite_asprintf("%s/%s.crt", dir, base);
    _cleanup_free_ char *kp = kite_asprintf("%s/%s.key", dir, base);
    _cleanup_free_ char *cpem = NULL, *kpem = NULL;
    int rc = kite_pki_read_file(cp, &cpem);
    if (rc < 0)
        return rc;
    rc = kite_pki_read_file(kp, &kpem);
    if (rc < 0)
        return rc;
    gnutls_x509_crt_t crt;
    gnutls_x509_privkey_t key;
    rc = crt_from_pem(cpem, &crt);
    if (rc < 0)
        return rc;
    rc = key_from_pem(kpem, &key);
    if (rc < 0) {
        gnutls_x509_crt_deinit(crt);
        return rc;
    }
    /* The pair must belong together: compare the public key ids. */
    unsigned char a[64], b[64];
    size_t al = sizeof(a), bl = sizeof(b);
    if (gnutls_x509_crt_get_key_id(crt, 0, a, &al) < 0 ||
        gnutls_x509_privkey_get_key_id(key, 0, b, &bl) < 0 || al != bl || memcmp(a, b, al) != 0) {
        gnutls_x509_crt_deinit(crt);
        gnutls_x509_privkey_deinit(key);
        return -EINVAL;
    }
    *ret_crt = crt;
    *ret_key = key;
    return 0;
}

static int save_pair(const char *dir, const char *base, gnutls_x509_crt_t crt,
                     gnutls_x509_privkey_t key) {
    _cleanup_free_ char *cp = kite_asprintf("%s/%s.crt", dir, base);
    _cleanup_free_ char *kp = kite_asprintf("%s/%s.key", dir, base);
    _cleanup_free_ char *cpem = NULL, *kpem = NULL;
    int rc = crt_to_pem(crt, &cpem);
    if (rc < 0)
        return rc;
    rc = key_to_pem(key, &kpem);
    if (rc < 0)
        return rc;
    rc = write_file(kp, kpem, 0600);
    return rc < 0 ? rc : write_file(cp, cpem, 0644);
}

/* The certificate and key as PEM (malloc'ed), both released: 0, or a GnuTLS error with nothing
 * returned. */
static int take_pem_pair(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, char **ret_cert_pem, char **ret_key_pem) {
    char *cpem = NULL, *kpem = NULL;
    int rc = crt_to_pem(crt, &cpem);
    if (rc >= 0)
        rc = key_to_pem(key, &kpem);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    if (rc < 0) {
        free(cpem);
        return rc;
    }
    *ret_cert_pem = cpem;
    *ret_key_pem = kpem;
    return 0;
}

struct cert_spec {
    const char *cn;
    const char *const *orgs;
    size_t n_orgs;
    bool is_ca;
    const char *key_purpose;          /* GNUTLS_KP_* or NULL */
    const char *const *sans;
    size_t n_sans;
    int days;
};

static int gen_key(gnutls_x509_privkey_t *ret) {
    gnutls_x509_privkey_t key;
    int rc = gnutls_x509_privkey_init(&key);
    if (rc < 0)
        return gerr(rc);
    rc = gnutls_x509_privkey_generate2(key, GNUTLS_PK_ECDSA,
                                       GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0, NULL, 0);
    if (rc < 0) {
        gnutls_x509_privkey_deinit(key);
        return gerr(rc);
    }
    *ret = key;
    return 0;
}

static int add_san(gnutls_x509_crt_t crt, const char *san) {
    unsigned char ip[16];
    if (inet_pton(AF_INET, san, ip) == 1)
        return gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, ip, 4, GNUTLS_FSAN_APPEND);
    if (inet_pton(AF_INET6, san, ip) == 1)
        return gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, ip, 16, GNUTLS_FSAN_APPEND);
    return gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, san, (unsigned)strlen(san),
                                                GNUTLS_FSAN_APPEND);
}

/* Builds and signs a cert for key. ca_crt/ca_key NULL = self-signed. */
static int make_cert(const struct cert_spec *sp, gnutls_x509_privkey_t key, gnutls_x509_crt_t ca_crt,
                     gnutls_x509_privkey_t ca_key, gnutls_x509_crt_t *ret) {
    gnutls_x509_crt_t crt;
    int rc = gnutls_x509_crt_init(&crt);
    if (rc < 0)
        return gerr(rc);
    unsigned char serial[16], id[64];
    size_t idl = sizeof(id);
    time_t now = time(NULL);
    rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
    serial[0] &= 0x7f; /* positive */
    serial[0] |= 0x01; /* no leading zero byte */
    if (rc >= 0) rc = gnutls_x509_crt_set_version(crt, 3);
    if (rc >= 0) rc = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
    /* Back-date a little: clocks of clients on the same host may lag by a second or two. */
    if (rc >= 0) rc = gnutls_x509_crt_set_activation_time(crt, now - 3600);
    if (rc >= 0) rc = gnutls_x509_crt_set_expiration_time(crt, now + (time_t)sp->days * 86400);
    for (size_t i = 0; rc >= 0 && i < sp->n_orgs; i++)
        rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, sp->orgs[i],
                                           (unsigned)strlen(sp->orgs[i]));
    if (rc >= 0)
        rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, sp->cn,
                                           (unsigned)strlen(sp->cn));
    if (rc >= 0) rc = gnutls_x509_crt_set_key(crt, key);
    if (rc >= 0) rc = gnutls_x509_crt_set_basic_constraints(crt, sp->is_ca, -1);
    if (rc >= 0)
        rc = gnutls_x509_crt_set_key_usage(crt, sp->is_ca ? GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN |
                                                                GNUTLS_KEY_DIGITAL_SIGNATURE
                                                          : GNUTLS_KEY_DIGITAL_SIGNATURE);
    if (rc >= 0 && sp->key_purpose)
        rc = gnutls_x509_crt_set_key_purpose_oid(crt, sp->key_purpose, 1);
    for (size_t i = 0; rc >= 0 && i < sp->n_sans; i++)
        rc = add_san(crt, sp->sans[i]);
    if (rc >= 0) rc = gnutls_x509_crt_get_key_id(crt, 0, id, &idl);
    if (rc >= 0) rc = gnutls_x509_crt_set_subject_key_id(crt, id, idl);
    if (rc >= 0 && ca_crt) {
        idl = sizeof(id);
        rc = gnutls_x509_crt_get_subject_key_id(ca_crt, id, &idl, NULL);
        if (rc >= 0)
            rc = gnutls_x509_crt_set_authority_key_id(crt, id, idl);
    }
    if (rc >= 0)
        rc = gnutls_x509_crt_sign2(crt, ca_crt ? ca_crt : crt, ca_key ? ca_key : key, GNUTLS_DIG_SHA256, 0);
    if (rc < 0) {
        gnutls_x509_crt_deinit(crt);
        return gerr(rc);
    }
    *ret = crt;
    return 0;
}

static bool expiring(gnutls_x509_crt_t crt) {
    time_t exp = gnutls_x509_crt_get_expiration_time(crt);
    return exp == (time_t)-1 || exp < time(NULL) + RENEW_BEFORE_S;
}

static bool signed_by(gnutls_x509_crt_t crt, gnutls_x509_crt_t ca) {
    unsigned status = 0;
    return gnutls_x509_crt_verify(crt, &ca, 1, 0, &status) >= 0 && status == 0;
}

static bool has_san(gnutls_x509_crt_t crt, const char *san) {
    unsigned char ip[16];
    if (inet_pton(AF_INET, san, ip) == 1)
        return gnutls_x509_crt_check_ip(crt, ip, 4, 0);
    if (inet_pton(AF_INET6, san, ip) == 1)
        return gnutls_x509_crt_check_ip(crt, ip, 16, 0);
    return gnutls_x509_crt_check_hostname2(crt, san, GNUTLS_VERIFY_DO_NOT_ALLOW_WILDCARDS);
}

/* Issues a fresh leaf, signed by ca, and saves it as base.{crt,key} when dir != NULL. */
static int issue(const struct cert_spec *sp, gnutls_x509_crt_t ca_crt, gnutls_x509_privkey_t ca_key,
                 gnutls_x509_crt_t *ret_crt, gnutls_x509_privkey_t *ret_key) {
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    int rc = gen_key(&key);
    if (rc < 0)
        return rc;
    rc = make_cert(sp, key, ca_crt, ca_key, &crt);
    if (rc < 0) {
        gnutls_x509_privkey_deinit(key);
        return rc;
    }
    *ret_crt = crt;
    *ret_key = key;
    return 0;
}

/* Keeps dir/base if it is a valid leaf of ca (and has every SAN), else issues and saves one. */
static int ensure_leaf(const char *dir, const char *base, const struct cert_spec *sp, bool force,
                       gnutls_x509_crt_t ca_crt, gnutls_x509_privkey_t ca_key) {
    gnutls_x509_crt_t crt;
    gnutls_x509_privkey_t key;
    if (!force && load_pair(dir, base, &crt, &key) == 0) {
        bool ok = !expiring(crt) && signed_by(crt, ca_crt);
        for (size_t i = 0; ok && i < sp->n_sans; i++)
            ok = has_san(crt, sp->sans[i]);
        gnutls_x509_crt_deinit(crt);
        gnutls_x509_privkey_deinit(key);
        if (ok)
            return 0;
    }
    int rc = issue(sp, ca_crt, ca_key, &crt, &key);
    if (rc < 0)
        return rc;
    rc = save_pair(dir, base, crt, key);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    return rc;
}

int kite_pki_ensure(const char *dir, const char *const *extra_sans, size_t n_extra) {
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    gnutls_x509_crt_t ca_crt = NULL;
    gnutls_x509_privkey_t ca_key = NULL;
    bool fresh_ca = false;
    int rc = load_pair(dir, "ca", &ca_crt, &ca_key);
    if (rc == 0) {
        unsigned ca_flag = 0;
        if (gnutls_x509_crt_get_basic_constraints(ca_crt, NULL, &ca_flag, NULL) < 0 || !ca_flag ||
            gnutls_x509_crt_get_expiration_time(ca_crt) <= time(NULL)) {
            gnutls_x509_crt_deinit(ca_crt);
            gnutls_x509_privkey_deinit(ca_key);
            rc = -EINVAL;
        }
    }
    if (rc < 0) {
        static const char *const ca_orgs[] = {"kite"};
        struct cert_spec sp = {.cn = "kite-ca", .orgs = ca_orgs, .n_orgs = 1, .is_ca = true, .days = CA_DAYS};
        rc = gen_key(&ca_key);
        if (rc < 0)
            return rc;
        rc = make_cert(&sp, ca_key, NULL, NULL, &ca_crt);
        if (rc < 0) {
            gnutls_x509_privkey_deinit(ca_key);
            return rc;
        }
        rc = save_pair(dir, "ca", ca_crt, ca_key);
        fresh_ca = true;
    }

    char host[HOST_NAME_MAX + 1] = "";
    if (gethostname(host, sizeof(host)) < 0)
        host[0] = 0;
    host[HOST_NAME_MAX] = 0;
    size_t n_sans = 0;
    const char **sans = kite_calloc(4 + n_extra, sizeof(*sans));
    sans[n_sans++] = "127.0.0.1";
    sans[n_sans++] = "::1";
    sans[n_sans++] = "localhost";
    if (host[0] && !kite_streq(host, "localhost"))
        sans[n_sans++] = host;
    for (size_t i = 0; i < n_extra; i++)
        sans[n_sans++] = extra_sans[i];
    struct cert_spec server = {.cn = "kite-apiserver", .key_purpose = GNUTLS_KP_TLS_WWW_SERVER,
                               .sans = sans, .n_sans = n_sans, .days = LEAF_DAYS};
    static const char *const admin_orgs[] = {"system:masters"};
    struct cert_spec admin = {.cn = "kite-admin", .orgs = admin_orgs, .n_orgs = 1,
                              .key_purpose = GNUTLS_KP_TLS_WWW_CLIENT, .days = LEAF_DAYS};
    if (rc >= 0)
        rc = ensure_leaf(dir, "server", &server, fresh_ca, ca_crt, ca_key);
    /* the API server's identity towards node agents (pods/log), as kube-apiserver's
     * apiserver-kubelet-client pair */
    struct cert_spec kubelet_client = {.cn = KITE_PKI_KUBELET_CLIENT_CN, .orgs = admin_orgs, .n_orgs = 1,
                                       .key_purpose = GNUTLS_KP_TLS_WWW_CLIENT, .days = LEAF_DAYS};
    if (rc >= 0)
        rc = ensure_leaf(dir, "admin", &admin, fresh_ca, ca_crt, ca_key);
    if (rc >= 0)
        rc = ensure_leaf(dir, "kubelet-client", &kubelet_client, fresh_ca, ca_crt, ca_key);
    /* the controllers' own identity, bound by RBAC to system:kube-controller-manager */
    struct cert_spec cm = {.cn = "system:kube-controller-manager", .key_purpose = GNUTLS_KP_TLS_WWW_CLIENT, .days = LEAF_DAYS};
    if (rc >= 0)
        rc = ensure_leaf(dir, "controller-manager", &cm, fresh_ca, ca_crt, ca_key);
    /* the scheduler's, bound by RBAC to system:kube-scheduler */
    struct cert_spec sched = {.cn = "system:kube-scheduler", .key_purpose = GNUTLS_KP_TLS_WWW_CLIENT, .days = LEAF_DAYS};
    if (rc >= 0)
        rc = ensure_leaf(dir, "scheduler", &sched, fresh_ca, ca_crt, ca_key);
    free(sans);
    gnutls_x509_crt_deinit(ca_crt);
    gnutls_x509_privkey_deinit(ca_key);
    return rc;
}

int kite_pki_issue_client(const char *dir, const char *cn, const char *const *orgs, size_t n_orgs,
                          char **ret_cert_pem, char **ret_key_pem) {
    gnutls_x509_crt_t ca_crt, crt;
    gnutls_x509_privkey_t ca_key, key;
    int rc = load_pair(dir, "ca", &ca_crt, &ca_key);
    if (rc < 0)
        return rc;
    struct cert_spec sp = {.cn = cn, .orgs = orgs, .n_orgs = n_orgs,
                           .key_purpose = GNUTLS_KP_TLS_WWW_CLIENT, .days = LEAF_DAYS};
    rc = issue(&sp, ca_crt, ca_key, &crt, &key);
    gnutls_x509_crt_deinit(ca_crt);
    gnutls_x509_privkey_deinit(ca_key);
    if (rc < 0)
        return rc;
    return take_pem_pair(crt, key, ret_cert_pem, ret_key_pem);
}

static void put_base64(struct kite_buf *b, const char *s) { kite_base64_append(b, s, strlen(s), false); }

/* JSON string literals are valid YAML double-quoted scalars: safe for any name or URL. */
char *kite_pki_kubeconfig(const char *name, const char *server_url, const char *ca_pem,
                          const char *cert_pem, const char *key_pem, const char *token) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "apiVersion: v1\nkind: Config\nclusters:\n- name: ");
    kite_buf_json_str(&b, name);
    kite_buf_puts(&b, "\n  cluster:\n    server: ");
    kite_buf_json_str(&b, server_url);
    if (ca_pem) {
        kite_buf_puts(&b, "\n    certificate-authority-data: ");
        put_base64(&b, ca_pem);
    }
    kite_buf_puts(&b, "\nusers:\n- name: ");
    kite_buf_json_str(&b, name);
    kite_buf_puts(&b, "\n  user:");
    if (cert_pem) {
        kite_buf_puts(&b, "\n    client-certificate-data: ");
        put_base64(&b, cert_pem);
        if (key_pem) {
            kite_buf_puts(&b, "\n    client-key-data: ");
            put_base64(&b, key_pem);
        }
    } else if (token) {
        kite_buf_puts(&b, "\n    token: ");
        kite_buf_json_str(&b, token);
    } else {
        kite_buf_puts(&b, " {}");
    }
    kite_buf_puts(&b, "\ncontexts:\n- name: ");
    kite_buf_json_str(&b, name);
    kite_buf_puts(&b, "\n  context:\n    cluster: ");
    kite_buf_json_str(&b, name);
    kite_buf_puts(&b, "\n    user: ");
    kite_buf_json_str(&b, name);
    kite_buf_puts(&b, "\ncurrent-context: ");
    kite_buf_json_str(&b, name);
    kite_buf_puts(&b, "\npreferences: {}\n");
    return kite_buf_detach(&b, NULL);
}

int kite_pki_self_signed(const char *cn, const char *const *sans, size_t n_sans, char **ret_cert_pem,
                         char **ret_key_pem) {
    struct cert_spec sp = {.cn = cn, .key_purpose = GNUTLS_KP_TLS_WWW_SERVER, .sans = sans, .n_sans = n_sans,
                           .days = LEAF_DAYS};
    gnutls_x509_crt_t crt;
    gnutls_x509_privkey_t key;
    int rc = issue(&sp, NULL, NULL, &crt, &key);
    if (rc < 0)
        return rc;
    return take_pem_pair(crt, key, ret_cert_pem, ret_key_pem);
}
