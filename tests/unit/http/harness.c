#include "harness.h"
#include "pki/pki.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct fixture fx;
size_t fx_raw_sent;
size_t fx_raw_pause_at = SIZE_MAX;
enum fx_half_close fx_raw_half_close = FX_KEEP_OPEN;

int64_t fx_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *fx_path(const char *name) {
    return kite_asprintf("%s/%s", fx.dir, name);
}

static char *slurp(const char *name) {
    char *p = fx_path(name), *s = NULL;
    cr_assert_eq(kite_pki_read_file(p, &s), 0);
    free(p);
    return s;
}

void fx_certs(void) {
    memset(&fx, 0, sizeof(fx));
    strcpy(fx.dir, "/tmp/kite-http-XXXXXX");
    cr_assert_not_null(mkdtemp(fx.dir));
    cr_assert_eq(kite_pki_ensure(fx.dir, NULL, 0), 0);
    fx.ca_pem = slurp("ca.crt");
    fx.cert_pem = slurp("server.crt");
    fx.key_pem = slurp("server.key");
    fx.ca_path = fx_path("ca.crt");
    fx.token_path = fx_path("tokens.csv");
    FILE *f = fopen(fx.token_path, "w");
    fputs("# comment\n"
          "tok-bob,bob,uid-bob,\"g1,g2\"\n"
          "tok-carol,carol,uid-carol\n", f);
    fclose(f);
}

void fx_start(struct kite_http_config *cfg) {
    if (!cfg->listen) cfg->listen = "127.0.0.1:0";
    if (!cfg->cert_pem) cfg->cert_pem = fx.cert_pem;
    if (!cfg->key_pem) cfg->key_pem = fx.key_pem;
    if (!cfg->client_ca_pem) cfg->client_ca_pem = fx.ca_pem;
    if (!cfg->token_file) cfg->token_file = fx.token_path;
    if (!cfg->threads) cfg->threads = 2;
    int rc = kite_http_start(cfg, &fx.srv);
    cr_assert_eq(rc, 0, "start: %d", rc);
    cr_assert_neq(kite_http_port(fx.srv), 0);
    snprintf(fx.base, sizeof(fx.base), "https://127.0.0.1:%u", kite_http_port(fx.srv));
}

void fx_stop(void) {
    kite_http_stop(fx.srv);
    fx.srv = NULL;
}

void fx_cleanup(void) {
    if (fx.srv)
        fx_stop();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx.dir);
    cr_assert_eq(system(cmd), 0);
    free(fx.ca_pem);
    free(fx.cert_pem);
    free(fx.key_pem);
    free(fx.ca_path);
    free(fx.token_path);
}

static size_t on_write(char *p, size_t sz, size_t n, void *ud) {
    kite_buf_append(ud, p, sz * n);
    return sz * n;
}

CURL *fx_curl(void) {
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_CAINFO, fx.ca_path);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    return c;
}

long fx_req(CURL *c, const char *method, const char *path, const char *body, struct curl_slist *hdrs,
            struct kite_buf *out) {
    char *url = kite_asprintf("%s%s", fx.base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    kite_buf_reset(out);
    kite_buf_puts(out, "");
    CURLcode rc = curl_easy_perform(c);
    free(url);
    if (rc != CURLE_OK)
        return -(long)rc;
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

/* A TLS client connection to the fixture server, not yet handshaken (the CA is not checked). */
static gnutls_session_t tls_open(int *ret_fd, gnutls_certificate_credentials_t *ret_cred) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(kite_http_port(fx.srv))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    gnutls_certificate_credentials_t cred;
    gnutls_certificate_allocate_credentials(&cred);
    gnutls_session_t s;
    gnutls_init(&s, GNUTLS_CLIENT);
    gnutls_set_default_priority(s);
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
    gnutls_transport_set_int(s, fd);
    gnutls_handshake_set_timeout(s, 5000);
    *ret_fd = fd;
    *ret_cred = cred;
    return s;
}

long fx_raw_tls(const char *data, size_t len, struct kite_buf *out, int timeout_ms,
                const char *const *alpn, size_t n_alpn, char *ret_alpn, size_t alpn_cap) {
    int fd;
    gnutls_certificate_credentials_t cred;
    gnutls_session_t s = tls_open(&fd, &cred);
    if (n_alpn) {
        gnutls_datum_t p[4];
        for (size_t i = 0; i < n_alpn && i < 4; i++)
            p[i] = (gnutls_datum_t){(unsigned char *)alpn[i], (unsigned)strlen(alpn[i])};
        gnutls_alpn_set_protocols(s, p, (unsigned)KITE_MIN(n_alpn, 4), 0);
    }
    int rc;
    do
        rc = gnutls_handshake(s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    long total = -1;
    if (rc >= 0) {
        total = 0;
        if (ret_alpn) {
            gnutls_datum_t sel;
            ret_alpn[0] = 0;
            if (gnutls_alpn_get_selected_protocol(s, &sel) == 0)
                snprintf(ret_alpn, alpn_cap, "%.*s", (int)sel.size, sel.data);
        }
        size_t sent = 0;
        for (; sent < len;) { /* one record per call: loop for long inputs */
            ssize_t k = gnutls_record_send(s, data + sent, len - sent);
            if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                continue;
            if (k < 0)
                break; /* the server closed: read what it answered */
            if (sent < fx_raw_pause_at && sent + (size_t)k >= fx_raw_pause_at)
                usleep(200 * 1000); /* let the server act on what it got so far */
            sent += (size_t)k;
        }
        fx_raw_sent = sent;
        if (fx_raw_half_close == FX_HALF_CLOSE_TLS)
            cr_assert_eq(gnutls_bye(s, GNUTLS_SHUT_WR), 0);
        else if (fx_raw_half_close == FX_HALF_CLOSE_TCP)
            cr_assert_eq(shutdown(fd, SHUT_WR), 0);
        int64_t deadline = fx_mono_ms() + timeout_ms;
        for (;;) {
            int64_t left = deadline - fx_mono_ms();
            if (left <= 0)
                break;
            if (gnutls_record_check_pending(s) == 0) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                if (poll(&pfd, 1, (int)left) <= 0)
                    break;
            }
            char buf[4096];
            ssize_t n = gnutls_record_recv(s, buf, sizeof(buf));
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
                continue;
            if (n <= 0)
                break;
            kite_buf_append(out, buf, (size_t)n);
            total += n;
        }
    }
    gnutls_deinit(s);
    gnutls_certificate_free_credentials(cred);
    close(fd);
    return total;
}

long fx_trickle_tls(const char *head, const char *drip, int interval_ms, int max_ms) {
    int fd;
    gnutls_certificate_credentials_t cred;
    gnutls_session_t s = tls_open(&fd, &cred);
    int rc;
    do
        rc = gnutls_handshake(s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    cr_assert_geq(rc, 0, "handshake: %s", gnutls_strerror(rc));
    int64_t t0 = fx_mono_ms();
    long closed_ms = -1;
    cr_assert_eq(gnutls_record_send(s, head, strlen(head)), (ssize_t)strlen(head));
    for (size_t i = 0; fx_mono_ms() - t0 < max_ms; i++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, interval_ms) > 0) { /* the server only ever closes here */
            char buf[256];
            ssize_t n = gnutls_record_recv(s, buf, sizeof(buf));
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
            cr_assert_leq(n, 0, "the server answered a request it never got whole: %.*s", (int)n, buf);
            closed_ms = (long)(fx_mono_ms() - t0);
            break;
        }
        if (gnutls_record_send(s, drip + i % strlen(drip), 1) < 0) {
            closed_ms = (long)(fx_mono_ms() - t0);
            break;
        }
    }
    gnutls_deinit(s);
    gnutls_certificate_free_credentials(cred);
    close(fd);
    return closed_ms;
}
