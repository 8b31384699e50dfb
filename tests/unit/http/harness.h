/* Test harness for the http module: a server on 127.0.0.1:0 with certs from pki in a temp dir,
 * libcurl clients, and a raw GnuTLS client for malformed input and ALPN checks. */
#pragma once
#include "base/buf.h"
#include "http/http.h"

#include <curl/curl.h>
#include <pthread.h>

struct fixture {
    char dir[64];
    char *ca_pem, *cert_pem, *key_pem;
    char *ca_path, *token_path;
    struct kite_http_server *srv;
    char base[64];     /* https://127.0.0.1:PORT */
};
extern struct fixture fx;

/* Creates the temp dir and certs (no server). */
void fx_certs(void);
/* Starts the server with cfg defaults filled (listen, certs, CA, token file, handler). */
void fx_start(struct kite_http_config *cfg);
void fx_stop(void);
void fx_cleanup(void);
char *fx_path(const char *name);
/* A curl easy handle trusting the fixture CA. */
CURL *fx_curl(void);
/* Performs a request; returns the HTTP status (or -curl error) and the body in out. */
long fx_req(CURL *c, const char *method, const char *path, const char *body, struct curl_slist *hdrs,
            struct kite_buf *out);
/* Raw TLS: connects, sends data, reads until close or timeout_ms; returns bytes read into out
 * or -1 if the handshake failed. alpn (optional) offers these protocols; ret_alpn gets the
 * selected one (static buffer). */
extern size_t fx_raw_pause_at; /* fx_raw_tls pauses 200 ms once it sent this many bytes */
extern size_t fx_raw_sent; /* bytes the last fx_raw_tls got sent before the server closed */
/* How fx_raw_tls ends its sending side once the data is sent: not (the default), with TLS
 * close_notify (gnutls_bye(GNUTLS_SHUT_WR)), or with a bare TCP shutdown(SHUT_WR). */
enum fx_half_close { FX_KEEP_OPEN, FX_HALF_CLOSE_TLS, FX_HALF_CLOSE_TCP };
extern enum fx_half_close fx_raw_half_close;
long fx_raw_tls(const char *data, size_t len, struct kite_buf *out, int timeout_ms,
                const char *const *alpn, size_t n_alpn, char *ret_alpn, size_t alpn_cap);
int64_t fx_mono_ms(void);
/* Raw TLS, a slow client: sends head, then one byte of drip (cycling) every interval_ms.
 * Returns the ms from the head to the server closing the connection, or -1 if it was still
 * open after max_ms. Fails the test if the server answers. */
long fx_trickle_tls(const char *head, const char *drip, int interval_ms, int max_ms);
