/* wslay over an HTTP tunnel (wstunnel.h). */
#include "agent/logs/wstunnel.h"

#include <errno.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "http/http.h"

ssize_t kite_ws_tunnel_io(wslay_event_context_ptr ctx, struct kite_http_tunnel *t, uint8_t *in, const uint8_t *out, size_t len,
                          bool more, int64_t *last_active, bool *gone) {
    ssize_t k = in ? kite_http_tunnel_read(t, in, len) : kite_http_tunnel_write_more(t, out, len, more);
    if (in ? k > 0 : k >= 0) {
        *last_active = kite_now_mono(kite_clock_real());
        return k;
    }
    if (k == -EAGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    *gone = true; /* the end of the stream, or an error */
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

bool kite_pf_flush(int fd, struct kite_buf *out, size_t *off) {
    while (*off < out->len) {
        ssize_t n = send(fd, out->p + *off, out->len - *off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
        if (n <= 0) return false;
        *off += (size_t)n;
    }
    kite_buf_reset(out);
    *off = 0;
    return true;
}
