/* libwslay's recv and send callbacks over an upgraded HTTP tunnel, for the exec, attach and
 * port-forward sessions: the bytes moved mark the session active, a tunnel that would block
 * asks wslay to wait, and a closed or failed one marks the client gone. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <wslay/wslay.h>

#include "base/buf.h"

struct kite_http_tunnel;

/* Reads into in (in != NULL: the recv callback) or writes out (the send callback; more: wslay's
 * WSLAY_MSG_MORE, more of the message follows), len bytes at most: what the callback returns. */
ssize_t kite_ws_tunnel_io(wslay_event_context_ptr ctx, struct kite_http_tunnel *t, uint8_t *in, const uint8_t *out, size_t len,
                          bool more, int64_t *last_active, bool *gone);

/* A forwarded port's pending client bytes (out from *off on) written to its connection fd, as
 * far as it takes them without blocking; all written: out emptied and *off 0. false: the
 * connection is broken. */
bool kite_pf_flush(int fd, struct kite_buf *out, size_t *off);
