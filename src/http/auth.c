/* kite http authentication: client certificates (per connection) and static bearer tokens.
 *
 * Semantics follow kube-apiserver's union authenticator: x509 first, then tokens; the first
 * valid credential wins; authn_failed only when something was presented and nothing worked.
 * The certificate result is computed once per TLS connection and cached on it. */
#include "http/http-internal.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <strings.h>

#define MAX_TOKEN_FILE_BYTES (16u * 1024 * 1024)
#define MAX_DN_ATTR 1024 /* longest CN/O accepted from a client cert */

void kite_http_auth_user_free(struct kite_http_user *u) {
    if (!u)
        return;
    for (size_t i = 0; i < u->n_groups; i++)
        free(u->groups[i]);
    free(u->groups);
    free(u->name);
    free(u->uid);
    free(u);
}

static void add_group(struct kite_http_user *u, char *g) {
    u->groups = kite_realloc(u->groups, (u->n_groups + 1) * sizeof(*u->groups));
    u->groups[u->n_groups++] = g;
}

/* ---- tokens: Kubernetes' --token-auth-file CSV: token,user,uid[,"group1,group2"] ---- */

/* Splits one CSV line into fields (RFC 4180 quoting). Returns the number of fields. */
static size_t csv_fields(const char *line, char ***ret) {
    char **f = NULL;
    size_t n = 0;
    const char *p = line;
    for (;;) {
        struct kite_buf b = {0};
        kite_buf_puts(&b, "");
        if (*p == '"') {
            p++;
            while (*p) {
                if (*p == '"' && p[1] == '"') {
                    kite_buf_putc(&b, '"');
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else
                    kite_buf_putc(&b, *p++);
            }
            while (*p && *p != ',')
                p++;
        } else {
            while (*p && *p != ',')
                kite_buf_putc(&b, *p++);
        }
        f = kite_realloc(f, (n + 1) * sizeof(*f));
        f[n++] = kite_buf_detach(&b, NULL);
        if (*p != ',')
            break;
        p++;
    }
    *ret = f;
    return n;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = 0;
    return s;
}

int kite_http_auth_load_tokens(struct kite_http_server *srv, const char *path) {
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0, total = 0;
    ssize_t len;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        total += (size_t)len;
        if (total > MAX_TOKEN_FILE_BYTES) {
            rc = -EFBIG;
            break;
        }
        char *l = trim(line);
        if (!*l || *l == '#')
            continue;
        char **fields;
        size_t n = csv_fields(l, &fields);
        if (n >= 3 && *trim(fields[0]) && *trim(fields[1])) {
            struct kite_http_user *u = kite_calloc(1, sizeof(*u));
            u->name = kite_strdup(trim(fields[1]));
            u->uid = kite_strdup(trim(fields[2]));
            if (n >= 4) {
                char *save = NULL;
                for (char *g = strtok_r(fields[3], ",", &save); g; g = strtok_r(NULL, ",", &save))
                    if (*trim(g))
                        add_group(u, kite_strdup(trim(g)));
            }
            /* Duplicate token: the last line wins, as in Kubernetes. */
            kite_http_auth_user_free(kite_map_put(&srv->tokens, trim(fields[0]), u));
        } else
            rc = -EINVAL;
        for (size_t i = 0; i < n; i++)
            free(fields[i]);
        free(fields);
        if (rc < 0)
            break;
    }
    free(line);
    fclose(f);
    return rc;
}

void kite_http_auth_free_tokens(struct kite_http_server *srv) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&srv->tokens, &i, &k, &v);)
        kite_http_auth_user_free(v);
    kite_map_release(&srv->tokens);
}

/* ---- client certificates ---- */

static char *dn_attr(gnutls_x509_crt_t crt, const char *oid, unsigned idx) {
    char buf[MAX_DN_ATTR];
    size_t n = sizeof(buf);
    if (gnutls_x509_crt_get_dn_by_oid(crt, oid, idx, 0, buf, &n) < 0)
        return NULL;
    return kite_strndup(buf, n);
}

/* Verifies the peer's certificate (if any) against the client CA, for client authentication,
 * and builds the user from CN and every O. */
static void check_cert(struct conn *c) {
    c->tls_checked = true;
    gnutls_session_t sess = c->tls;
    unsigned n_certs = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(sess, &n_certs);
    if (!certs || n_certs == 0)
        return; /* no client cert: anonymous or token */
    if (!c->w->srv->client_ca) {
        c->cert_failed = true;
        return;
    }
    unsigned status = 0;
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
    if (gnutls_certificate_verify_peers(sess, &purpose, 1, &status) < 0 || status != 0) {
        c->cert_failed = true;
        return;
    }
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0) {
        c->cert_failed = true;
        return;
    }
    if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) < 0) {
        gnutls_x509_crt_deinit(crt);
        c->cert_failed = true;
        return;
    }
    char *cn = dn_attr(crt, GNUTLS_OID_X520_COMMON_NAME, 0);
    if (!cn || !*cn) {
        /* Kubernetes rejects certs without a CN: there is no user name. */
        free(cn);
        gnutls_x509_crt_deinit(crt);
        c->cert_failed = true;
        return;
    }
    struct kite_http_user *u = kite_calloc(1, sizeof(*u));
    u->name = cn;
    u->uid = kite_strdup("");
    char *o;
    for (unsigned i = 0; (o = dn_attr(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, i)); i++)
        add_group(u, o);
    gnutls_x509_crt_deinit(crt);
    c->cert_user = u;
}

void kite_http_auth_request(struct conn *c, struct req *r) {
    if (!c->tls_checked)
        check_cert(c);
    r->pub.user = c->cert_user;
    r->pub.authn_failed = false;
    if (r->pub.user)
        return;
    bool failed = c->cert_failed;
    const char *auth = kite_http_header(&r->pub, "Authorization");
    if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
        const char *tok = auth + 7;
        while (*tok == ' ')
            tok++;
        const struct kite_http_user *u = *tok ? kite_map_get(&c->w->srv->tokens, tok) : NULL;
        if (u) {
            r->pub.user = u;
            return;
        }
        failed = true;
    }
    r->pub.authn_failed = failed;
}
