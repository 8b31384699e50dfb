#include "pki/pki.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void setup(void) {
    strcpy(dir, "/tmp/kite-pki-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
    static const char *files[] = {"ca.crt", "ca.key", "server.crt", "server.key", "admin.crt", "admin.key"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(files); i++) {
        char *p = kite_asprintf("%s/%s", dir, files[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

static char *slurp(const char *name) {
    char *p = kite_asprintf("%s/%s", dir, name), *s = NULL;
    cr_assert_eq(kite_pki_read_file(p, &s), 0, "read %s", p);
    free(p);
    return s;
}

static gnutls_x509_crt_t load(const char *pem) {
    gnutls_x509_crt_t c;
    cr_assert_eq(gnutls_x509_crt_init(&c), 0);
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    cr_assert_eq(gnutls_x509_crt_import(c, &d, GNUTLS_X509_FMT_PEM), 0);
    return c;
}

static void assert_chain(gnutls_x509_crt_t leaf, gnutls_x509_crt_t ca) {
    unsigned status = 99;
    cr_assert_geq(gnutls_x509_crt_verify(leaf, &ca, 1, 0, &status), 0);
    cr_assert_eq(status, 0, "chain does not verify: %u", status);
}

static char *dn_part(gnutls_x509_crt_t c, const char *oid, unsigned idx) {
    char buf[256];
    size_t n = sizeof(buf);
    if (gnutls_x509_crt_get_dn_by_oid(c, oid, idx, 0, buf, &n) < 0)
        return NULL;
    return kite_strndup(buf, n);
}

static bool has_purpose(gnutls_x509_crt_t c, const char *kp) {
    for (unsigned i = 0;; i++) {
        char oid[128];
        size_t n = sizeof(oid);
        if (gnutls_x509_crt_get_key_purpose_oid(c, i, oid, &n, NULL) < 0)
            return false;
        if (strcmp(oid, kp) == 0)
            return true;
    }
}

TestSuite(pki, .init = setup, .fini = teardown);

Test(pki, ensure_creates_valid_chain_and_sans) {
    const char *extra[] = {"10.1.2.3", "kite.example.com"};
    cr_assert_eq(kite_pki_ensure(dir, extra, 2), 0);
    _cleanup_free_ char *ca_pem = slurp("ca.crt"), *srv_pem = slurp("server.crt"), *adm_pem = slurp("admin.crt");
    gnutls_x509_crt_t ca = load(ca_pem), srv = load(srv_pem), adm = load(adm_pem);
    unsigned is_ca = 0;
    cr_assert_geq(gnutls_x509_crt_get_basic_constraints(ca, NULL, &is_ca, NULL), 0);
    cr_assert(is_ca);
    assert_chain(srv, ca);
    assert_chain(adm, ca);

    unsigned char v4[4], v6[16], x4[4];
    inet_pton(AF_INET, "127.0.0.1", v4);
    inet_pton(AF_INET6, "::1", v6);
    inet_pton(AF_INET, "10.1.2.3", x4);
    cr_assert(gnutls_x509_crt_check_ip(srv, v4, 4, 0));
    cr_assert(gnutls_x509_crt_check_ip(srv, v6, 16, 0));
    cr_assert(gnutls_x509_crt_check_ip(srv, x4, 4, 0));
    cr_assert(gnutls_x509_crt_check_hostname(srv, "localhost"));
    cr_assert(gnutls_x509_crt_check_hostname(srv, "kite.example.com"));
    cr_assert_not(gnutls_x509_crt_check_hostname(srv, "other.example.com"));
    char host[256];
    cr_assert_eq(gethostname(host, sizeof(host)), 0);
    cr_assert(gnutls_x509_crt_check_hostname(srv, host));
    cr_assert(has_purpose(srv, GNUTLS_KP_TLS_WWW_SERVER));

    _cleanup_free_ char *cn = dn_part(adm, GNUTLS_OID_X520_COMMON_NAME, 0);
    _cleanup_free_ char *o = dn_part(adm, GNUTLS_OID_X520_ORGANIZATION_NAME, 0);
    cr_assert_str_eq(cn, "kite-admin");
    cr_assert_str_eq(o, "system:masters");
    cr_assert(has_purpose(adm, GNUTLS_KP_TLS_WWW_CLIENT));
    cr_assert_eq(gnutls_x509_crt_get_pk_algorithm(adm, NULL), GNUTLS_PK_ECDSA);

    const char *keys[] = {"ca.key", "server.key", "admin.key"};
    for (size_t i = 0; i < 3; i++) {
        char *p = kite_asprintf("%s/%s", dir, keys[i]);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0600, "%s mode %o", keys[i], st.st_mode & 0777);
        free(p);
    }
    gnutls_x509_crt_deinit(ca);
    gnutls_x509_crt_deinit(srv);
    gnutls_x509_crt_deinit(adm);
}

Test(pki, ensure_is_idempotent_and_adds_missing_sans) {
    cr_assert_eq(kite_pki_ensure(dir, NULL, 0), 0);
    _cleanup_free_ char *ca1 = slurp("ca.crt"), *srv1 = slurp("server.crt"), *adm1 = slurp("admin.key");
    cr_assert_eq(kite_pki_ensure(dir, NULL, 0), 0);
    _cleanup_free_ char *ca2 = slurp("ca.crt"), *srv2 = slurp("server.crt"), *adm2 = slurp("admin.key");
    cr_assert_str_eq(ca1, ca2);
    cr_assert_str_eq(srv1, srv2);
    cr_assert_str_eq(adm1, adm2);

    /* A new SAN reissues only the server cert, under the same CA. */
    const char *extra[] = {"192.168.7.7"};
    cr_assert_eq(kite_pki_ensure(dir, extra, 1), 0);
    _cleanup_free_ char *ca3 = slurp("ca.crt"), *srv3 = slurp("server.crt"), *adm3 = slurp("admin.key");
    cr_assert_str_eq(ca1, ca3);
    cr_assert_str_neq(srv1, srv3);
    cr_assert_str_eq(adm1, adm3);
    gnutls_x509_crt_t ca = load(ca3), srv = load(srv3);
    assert_chain(srv, ca);
    unsigned char ip[4];
    inet_pton(AF_INET, "192.168.7.7", ip);
    cr_assert(gnutls_x509_crt_check_ip(srv, ip, 4, 0));
    gnutls_x509_crt_deinit(ca);
    gnutls_x509_crt_deinit(srv);
}

Test(pki, broken_ca_regenerates_everything) {
    cr_assert_eq(kite_pki_ensure(dir, NULL, 0), 0);
    _cleanup_free_ char *ca1 = slurp("ca.crt"), *srv1 = slurp("server.crt");
    char *p = kite_asprintf("%s/ca.key", dir);
    FILE *f = fopen(p, "w");
    fputs("garbage\n", f);
    fclose(f);
    free(p);
    cr_assert_eq(kite_pki_ensure(dir, NULL, 0), 0);
    _cleanup_free_ char *ca2 = slurp("ca.crt"), *srv2 = slurp("server.crt"), *adm = slurp("admin.crt");
    cr_assert_str_neq(ca1, ca2);
    cr_assert_str_neq(srv1, srv2);
    gnutls_x509_crt_t ca = load(ca2), s = load(srv2), a = load(adm);
    assert_chain(s, ca);
    assert_chain(a, ca);
    gnutls_x509_crt_deinit(ca);
    gnutls_x509_crt_deinit(s);
    gnutls_x509_crt_deinit(a);
}

Test(pki, issue_client_sets_cn_and_every_org) {
    cr_assert_eq(kite_pki_ensure(dir, NULL, 0), 0);
    const char *orgs[] = {"system:nodes", "dev-team"};
    char *cert = NULL, *key = NULL;
    cr_assert_eq(kite_pki_issue_client(dir, "system:node:n1", orgs, 2, &cert, &key), 0);
    cr_assert(strstr(cert, "BEGIN CERTIFICATE"));
    cr_assert(strstr(key, "PRIVATE KEY"));
    _cleanup_free_ char *ca_pem = slurp("ca.crt");
    gnutls_x509_crt_t ca = load(ca_pem), c = load(cert);
    assert_chain(c, ca);
    _cleanup_free_ char *cn = dn_part(c, GNUTLS_OID_X520_COMMON_NAME, 0);
    _cleanup_free_ char *o0 = dn_part(c, GNUTLS_OID_X520_ORGANIZATION_NAME, 0);
    _cleanup_free_ char *o1 = dn_part(c, GNUTLS_OID_X520_ORGANIZATION_NAME, 1);
    _cleanup_free_ char *o2 = dn_part(c, GNUTLS_OID_X520_ORGANIZATION_NAME, 2);
    cr_assert_str_eq(cn, "system:node:n1");
    cr_assert_str_eq(o0, "system:nodes");
    cr_assert_str_eq(o1, "dev-team");
    cr_assert_null(o2);
    /* The key belongs to the cert. */
    gnutls_x509_privkey_t k;
    gnutls_x509_privkey_init(&k);
    gnutls_datum_t d = {(unsigned char *)key, (unsigned)strlen(key)};
    cr_assert_eq(gnutls_x509_privkey_import(k, &d, GNUTLS_X509_FMT_PEM), 0);
    unsigned char a[64], b[64];
    size_t al = sizeof(a), bl = sizeof(b);
    cr_assert_eq(gnutls_x509_crt_get_key_id(c, 0, a, &al), 0);
    cr_assert_eq(gnutls_x509_privkey_get_key_id(k, 0, b, &bl), 0);
    cr_assert_eq(al, bl);
    cr_assert_eq(memcmp(a, b, al), 0);
    gnutls_x509_privkey_deinit(k);
    gnutls_x509_crt_deinit(ca);
    gnutls_x509_crt_deinit(c);
    free(cert);
    free(key);
}

Test(pki, issue_client_without_ca_fails) {
    char *cert = NULL, *key = NULL;
    cr_assert_eq(kite_pki_issue_client(dir, "x", NULL, 0, &cert, &key), -ENOENT);
    cr_assert_null(cert);
}

Test(pki, kubeconfig_with_certs) {
    char *y = kite_pki_kubeconfig("kite", "https://127.0.0.1:6443", "CA", "CERT", "KEY!", NULL);
    const char *want[] = {
        "apiVersion: v1\nkind: Config\n",
        "clusters:\n- name: \"kite\"\n  cluster:\n    server: \"https://127.0.0.1:6443\"\n"
        "    certificate-authority-data: Q0E=\n",
        "users:\n- name: \"kite\"\n  user:\n    client-certificate-data: Q0VSVA==\n"
        "    client-key-data: S0VZIQ==\n",
        "contexts:\n- name: \"kite\"\n  context:\n    cluster: \"kite\"\n    user: \"kite\"\n",
        "current-context: \"kite\"\n",
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(want); i++)
        cr_assert(strstr(y, want[i]), "missing %s in\n%s", want[i], y);
    cr_assert_null(strstr(y, "token"));
    free(y);
}

Test(pki, kubeconfig_with_token_and_quoting) {
    char *y = kite_pki_kubeconfig("a\"b", "https://[::1]:6443", "CA", NULL, NULL, "tok-1");
    cr_assert(strstr(y, "    token: \"tok-1\"\n"), "%s", y);
    cr_assert(strstr(y, "current-context: \"a\\\"b\"\n"), "%s", y);
    cr_assert_null(strstr(y, "client-certificate-data"));
    free(y);
}

Test(pki, read_file_missing) {
    char *s = NULL;
    cr_assert_eq(kite_pki_read_file("/nonexistent/kite/x", &s), -ENOENT);
    cr_assert_null(s);
}
