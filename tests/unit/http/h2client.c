#include "h2client.h"
#include "harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

struct h2c_stream *h2c_stream(struct h2c *h, int32_t id) {
    cr_assert(id > 0 && (id - 1) / 2 < H2C_MAX_STREAMS);
    return &h->streams[(id - 1) / 2];
}

static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *ud) {
    struct h2c *h = ud;
    ssize_t k = gnutls_record_send(h->tls, data, len);
    if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) return NGHTTP2_ERR_WOULDBLOCK;
    return k < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : k;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *ud) {
    struct h2c_stream *s = h2c_stream(ud, frame->hd.stream_id);
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) s->status = atoi((const char *)value);
    kite_buf_append(&s->headers, name, namelen);
    kite_buf_puts(&s->headers, ": ");
    kite_buf_append(&s->headers, value, valuelen);
    kite_buf_puts(&s->headers, "\n");
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
    kite_buf_append(&h2c_stream(ud, id)->body, data, len);
    return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud) {
    struct h2c_stream *s = h2c_stream(ud, id);
    s->closed = true;
    s->error_code = error_code;
    return 0;
}

static int on_frame(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
    if (frame->hd.type == NGHTTP2_GOAWAY) ((struct h2c *)ud)->goaway = true;
    return 0;
}

struct h2c *h2c_open(void) {
    struct h2c *h = kite_calloc(1, sizeof(*h));
    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(kite_http_port(fx.srv))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(h->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    gnutls_session_t s;
    gnutls_init(&s, GNUTLS_CLIENT);
    gnutls_certificate_credentials_t cred;
    gnutls_certificate_allocate_credentials(&cred);
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
    gnutls_set_default_priority(s);
    gnutls_datum_t protos[2] = {{(unsigned char *)"h2", 2}, {(unsigned char *)"http/1.1", 8}};
    gnutls_alpn_set_protocols(s, protos, 2, 0);
    gnutls_transport_set_int(s, h->fd);
    gnutls_handshake_set_timeout(s, 5000);
    cr_assert_geq(gnutls_handshake(s), 0);
    h->tls = s;
    h->cred = cred;
    gnutls_datum_t sel;
    if (gnutls_alpn_get_selected_protocol(s, &sel) == 0)
        snprintf(h->alpn, sizeof h->alpn, "%.*s", (int)sel.size, sel.data);
    if (strcmp(h->alpn, "h2") != 0) {
        gnutls_deinit(s);
        gnutls_certificate_free_credentials(cred);
        close(h->fd);
        free(h);
        return NULL;
    }
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    cr_assert_eq(nghttp2_session_client_new(&h->ng, cb, h), 0);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000}};
    nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, 1);
    return h;
}

static ssize_t read_upload(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                           nghttp2_data_source *src, void *ud) {
    struct h2c *h = ud;
    size_t n = h->upload_len - h->upload_off;
    if (n > length) n = length;
    memcpy(buf, h->upload + h->upload_off, n);
    h->upload_off += n;
    if (h->upload_off == h->upload_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

int32_t h2c_request(struct h2c *h, const char *method, const char *path, const char *body, size_t len,
                    const char *const *extra, size_t n_extra) {
    nghttp2_nv nv[16];
    size_t n = 0;
#define NV(k, v) nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), NGHTTP2_NV_FLAG_NONE}
    NV(":method", method);
    NV(":scheme", "https");
    NV(":authority", "127.0.0.1");
    NV(":path", path);
    for (size_t i = 0; i + 1 < 2 * n_extra && n < 16; i += 2) NV(extra[i], extra[i + 1]);
#undef NV
    nghttp2_data_provider prd = {.read_callback = read_upload};
    if (body) {
        h->upload = body;
        h->upload_len = len;
        h->upload_off = 0;
    }
    int32_t id = nghttp2_submit_request(h->ng, NULL, nv, n, body ? &prd : NULL, NULL);
    cr_assert_gt(id, 0);
    return id;
}

/* One round of I/O: sends what is queued, waits up to ms for input and feeds it. */
static void io(struct h2c *h, int ms) {
    nghttp2_session_send(h->ng);
    if (h->eof) return;
    gnutls_session_t s = h->tls;
    if (gnutls_record_check_pending(s) == 0) {
        struct pollfd p = {.fd = h->fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0) return;
    }
    char buf[65536];
    ssize_t k = gnutls_record_recv(s, buf, sizeof buf);
    if (k <= 0) {
        if (k != GNUTLS_E_AGAIN && k != GNUTLS_E_INTERRUPTED) h->eof = true;
        return;
    }
    cr_assert_geq(nghttp2_session_mem_recv(h->ng, (uint8_t *)buf, (size_t)k), 0);
    nghttp2_session_send(h->ng);
}

bool h2c_run(struct h2c *h, const int32_t *ids, size_t n, int timeout_ms) {
    int64_t end = fx_mono_ms() + timeout_ms;
    while (fx_mono_ms() < end && !h->eof) {
        bool all = n > 0;
        for (size_t i = 0; i < n; i++) all &= h2c_stream(h, ids[i])->closed;
        if (all) return true;
        io(h, n ? 20 : 100);
        if (!n) return true;
    }
    bool all = true;
    for (size_t i = 0; i < n; i++) all &= h2c_stream(h, ids[i])->closed;
    return all;
}

bool h2c_run_body(struct h2c *h, int32_t id, size_t min_bytes, int timeout_ms) {
    int64_t end = fx_mono_ms() + timeout_ms;
    struct h2c_stream *s = h2c_stream(h, id);
    while (s->body.len < min_bytes && !s->closed && !h->eof && fx_mono_ms() < end) io(h, 20);
    return s->body.len >= min_bytes;
}

void h2c_reset(struct h2c *h, int32_t id) {
    nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    nghttp2_session_send(h->ng);
}

void h2c_close(struct h2c *h) {
    if (!h) return;
    nghttp2_session_del(h->ng);
    gnutls_deinit(h->tls);
    gnutls_certificate_free_credentials(h->cred);
    close(h->fd);
    for (size_t i = 0; i < H2C_MAX_STREAMS; i++) {
        kite_buf_release(&h->streams[i].body);
        kite_buf_release(&h->streams[i].headers);
    }
    free(h);
}
