/* The agent's log endpoint: `GET /containerLogs/{namespace}/{pod}/{container}` over HTTPS for
 * the API server alone (its kubelet-client certificate), as the kubelet's, and the reader of
 * the CRI-format files conmon writes (`<RFC3339Nano> stdout|stderr F|P <text>`). */
#pragma once
#include <sys/types.h>

#include "base/buf.h"

/* A raw CRI line longer than this (conmon splits at 8 KiB) is dropped up to its end. */
#define KITE_CRILOG_MAX_LINE (64u * 1024)
/* File bytes read per kite_crilog_read call: a streamed answer is read in pieces. */
#define KITE_CRILOG_READ_CHUNK (64u * 1024)

/* What kubectl asks (PodLogOptions): tailLines (< 0 = all), limitBytes (0 = none), sinceSeconds
 * turned into an instant (since_ns, wall clock; 0 = none), timestamps. */
struct kite_crilog_options {
    int64_t tail_lines;
    int64_t limit_bytes;
    int64_t since_ns;
    bool timestamps;
};

/* An open log file and how far it was read. */
struct kite_crilog {
    int fd;
    off_t off;
    struct kite_crilog_options o;
    int64_t left;          /* bytes limitBytes still allows; < 0 = no limit */
    struct kite_buf carry; /* a raw line whose '\n' has not been written yet */
    bool skipping;         /* inside an over-long line, dropped up to its '\n' */
    bool mid_line;         /* the last line printed was partial (P): no timestamp before the next */
};

/* Opens path positioned at the last tail_lines lines (counted as the kubelet counts: raw
 * lines of the file). 0 or -errno. */
int kite_crilog_open(struct kite_crilog *l, const char *path, const struct kite_crilog_options *o);
void kite_crilog_close(struct kite_crilog *l);
/* Renders what the file holds beyond the last read, up to KITE_CRILOG_READ_CHUNK of it, into
 * out. Returns 1 when more is there now (call again), 0 at the end of what is written, 2 when
 * limitBytes is reached (nothing more will come), or -errno. */
int kite_crilog_read(struct kite_crilog *l, struct kite_buf *out);
/* Renders one raw CRI line (without its '\n') into out as the kubelet prints it; lines whose
 * time is before since_ns, or that do not parse, print nothing. Updates mid_line and left.
 * Exposed for tests. */
void kite_crilog_render(struct kite_crilog *l, const char *line, size_t n, struct kite_buf *out);
/* Offset of the start of the last n raw lines of fd's first size bytes (0 when fewer). */
off_t kite_crilog_tail_offset(int fd, off_t size, int64_t n);

struct kite_pods;
struct kite_runtime;
struct kite_logsrv;
struct kite_logsrv_options {
    const char *listen;                 /* "0.0.0.0:10250"; port 0 = any free one */
    const char *cert_pem, *key_pem;     /* serving pair; NULL = self-signed at start */
    const char *client_ca_pem;          /* trust for client certificates (the cluster CA) */
    const char *node_name;              /* CN of the self-signed cert */
    const char *const *sans;            /* extra SANs of the self-signed cert (node IPs) */
    size_t n_sans;
    struct kite_pods *pods;             /* borrowed: where the log files are */
    struct kite_runtime *runtime;       /* borrowed: the containers' usage (/metrics/resource); NULL = none */
    size_t stream_buffer;               /* exec/attach/port-forward bytes waiting each way; 0 = KITE_STREAM_BUFFER */
};
/* Starts the endpoint. 0 or -errno, *ret_err (may be NULL) explains. */
int kite_logsrv_start(const struct kite_logsrv_options *o, struct kite_logsrv **ret, char **ret_err);
uint16_t kite_logsrv_port(struct kite_logsrv *s);
/* Ends streams and the server; accepts NULL. */
void kite_logsrv_stop(struct kite_logsrv *s);

/* exec.c: `/exec/{namespace}/{pod}/{container}?command=...&stdin=&stdout=&stderr=&tty=` and
 * `/attach/...` over WebSocket (the API's parameter names, or the kubelet's input, output and
 * error). Limits: */
#define KITE_STREAM_MAX_SESSIONS 512          /* exec and attach sessions at once (-> 429) */
#define KITE_STREAM_IDLE_S (4 * 3600)         /* no byte either way: ended (streamingConnectionIdleTimeout) */
#define KITE_STREAM_MAX_MESSAGE (1u << 20)    /* a WebSocket message from the client (-> close 1009) */
#define KITE_STREAM_BUFFER (256u * 1024)      /* default of --stream-buffer: output waiting for the client
                                                 before the command's is not read, and stdin waiting for
                                                 the command before the client is not read */
#define KITE_STREAM_MAX_PORTS 64              /* ports of one port-forward session (-> 400) */
struct kite_http_req;
/* `/portForward/{namespace}/{pod}?ports=P1,P2` when ctr is NULL. */
void kite_logsrv_stream(struct kite_http_req *r, struct kite_pods *pods, size_t buffer, bool attach, const char *ns, const char *pod,
                        const char *ctr);
