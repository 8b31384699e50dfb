/* Port-forward over SPDY/3.1 (pfspdy.c), as kubectl speaks it: inside WebSocket binary messages
 * (subprotocol SPDY/3.1+portforward.k8s.io, kubectl 1.31+) or on the upgraded connection itself
 * (Upgrade: SPDY/3.1, X-Stream-Protocol-Version: portforward.k8s.io). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define KITE_PF_SPDY_WS_PROTOCOL "SPDY/3.1+portforward.k8s.io"
#define KITE_PF_SPDY_PROTOCOL "portforward.k8s.io"
/* Forwarded connections (stream pairs) open at once in one session (-> RST_STREAM REFUSED_STREAM). */
#define KITE_PF_SPDY_MAX_PAIRS 128
/* A pair's second stream not there this long after its first: the pair fails (the kubelet's
 * streamCreationTimeout). */
#define KITE_PF_SPDY_PAIR_TIMEOUT_S 30

struct kite_http_tunnel;
/* Serves one session on t (after the 101) until the client leaves, sends GOAWAY and its streams
 * ended, or nothing moved for KITE_STREAM_IDLE_S. ws: SPDY inside WebSocket messages. Ports are
 * reached at 127.0.0.1 in the network namespace of process pid (the pod's). buffer: bytes waiting
 * each way before that side is not read (--stream-buffer). */
void kite_pf_spdy_run(struct kite_http_tunnel *t, bool ws, pid_t pid, const char *ns, const char *pod, size_t buffer);

/* exec.c: a non-blocking socket in pid's network namespace connecting to 127.0.0.1:port, or -errno. */
int kite_pf_dial(pid_t pid, uint16_t port);
