/* The agent's streaming endpoints (the kubelet's `/exec/{namespace}/{pod}/{container}` and
 * `/attach/...`): WebSocket with the Kubernetes channel protocols (wsch.h; RFC 6455 framing by
 * libwslay), for the API server alone, as the log endpoint.
 *
 * One thread per session. It finds the container, starts the command (`runc exec` in the
 * foreground with pipes, or with a pty for a tty) or connects to conmon's attach socket,
 * answers 101 and then polls the tunnel and the process's descriptors until the command ended
 * (its exit code goes to the error channel) or the client left (the command is killed: a
 * process that outlives its client would be left over). Flow control both ways: the command's
 * output is read only while less than --stream-buffer bytes (KITE_STREAM_BUFFER) wait for the
 * client, and the client is read only while less than that waits for the command's stdin.
 * No byte moving either way for KITE_STREAM_IDLE_S ends the session, as the kubelet's
 * streamingConnectionIdleTimeout. Port-forward also speaks SPDY/3.1 (pfspdy.c); exec and attach
 * over SPDY are not served (the answer says so). */
#include "agent/logs/logs.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "agent/logs/pfspdy.h"
#include "agent/logs/wsch.h"
#include "agent/logs/wstunnel.h"
#include "agent/pods/pods.h"
#include "base/base.h"
#include "base/clock.h"
#include "http/http.h"

#define OUT_CHUNK (32u * 1024)

static atomic_int sessions;

/* One forwarded port: a TCP connection in the pod's network namespace. */
struct pf_port {
    uint16_t port;
    int fd;
    bool connecting, open;
    struct kite_buf out; /* from the client, not yet written to the connection */
    size_t out_off;
};

struct session {
    struct kite_http_req *r;
    struct kite_pods *pods;
    bool attach, pf;
    int spdy; /* port-forward over SPDY/3.1: 1 inside a WebSocket, 2 on the connection (pfspdy.h) */
    struct pf_port *ports;
    size_t n_ports;
    char *ns, *pod, *ctr;
    char **argv;
    size_t argc;
    bool want_in, want_out, want_err, tty;
    enum kite_wsch_proto proto;
    char accept[29];

    struct kite_http_tunnel *t;
    wslay_event_context_ptr ws;
    struct kite_exec_session ex;
    int attach_fd;
    char *ctl_path;            /* attach to a terminal: conmon's control fifo (resize) */
    bool attach_in_shut;       /* attach: the end of the client's stdin passed on */
    struct kite_buf stdin_buf;
    size_t stdin_off;
    bool stdin_eof;            /* the client closed stdin (v5): close it once written */
    size_t buffer;             /* bytes waiting each way before that side is not read (--stream-buffer) */
    bool client_gone, exited, reaped;
    bool out_open, err_open;
    int exit_code;
    int64_t last_active;
};

static void reply_text(struct kite_http_req *r, int code, const char *fmt, ...) KITE_PRINTF(3, 4);
static void reply_text(struct kite_http_req *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0) m = NULL;
    va_end(ap);
    size_t len = m ? strlen(m) : 0;
    kite_http_respond(r, code, "text/plain; charset=utf-8", m, len);
}

static void session_free(struct session *s) {
    free(s->ns);
    free(s->pod);
    free(s->ctr);
    free(s->ctl_path);
    for (size_t i = 0; i < s->argc; i++) free(s->argv[i]);
    free(s->argv);
    kite_buf_release(&s->stdin_buf);
    for (size_t i = 0; i < s->n_ports; i++) {
        if (s->ports[i].fd >= 0) close(s->ports[i].fd);
        kite_buf_release(&s->ports[i].out);
    }
    free(s->ports);
    free(s);
    atomic_fetch_sub(&sessions, 1);
}

/* ---- WebSocket I/O (libwslay callbacks on the tunnel) ---- */

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud) {
    struct session *s = ud;
    return kite_ws_tunnel_io(ctx, s->t, buf, NULL, len, false, &s->last_active, &s->client_gone);
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *ud) {
    struct session *s = ud;
    return kite_ws_tunnel_io(ctx, s->t, NULL, data, len, flags & WSLAY_MSG_MORE, &s->last_active, &s->client_gone);
}

static void resize(struct session *s, const char *data, size_t len) {
    uint16_t w, h;
    if (s->ctl_path && kite_wsch_parse_resize(data, len, &w, &h) == 0) {
        /* conmon's control fifo: "1 HEIGHT WIDTH\n" resizes the container's terminal. conmon
         * (2.1) acts on the first line of what one read gives it, so a message goes only once
         * the one before was read (kubectl attach sends its size + 1, then its size, at once) */
        int fd = open(s->ctl_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            int unread = 0;
            for (int i = 0; i < 50 && ioctl(fd, FIONREAD, &unread) == 0 && unread > 0; i++) usleep(2000);
            char line[32];
            int n = snprintf(line, sizeof line, "1 %u %u\n", (unsigned)h, (unsigned)w);
            if (write(fd, line, (size_t)n) < 0) { /* conmon gone: nothing to resize */ }
            close(fd);
        }
        return;
    }
    if (s->ex.pty_fd < 0 || kite_wsch_parse_resize(data, len, &w, &h) < 0) return;
    struct winsize ws = {.ws_row = h, .ws_col = w};
    ioctl(s->ex.pty_fd, TIOCSWINSZ, &ws);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *ud) {
    struct session *s = ud;
    if (arg->opcode != WSLAY_BINARY_FRAME && arg->opcode != WSLAY_TEXT_FRAME) return;
    uint8_t ch;
    struct kite_buf data = {0};
    if (kite_wsch_decode(s->proto, arg->msg, arg->msg_length, &ch, &data) == 0) {
        if (s->pf) {
            /* port i's data is channel 2i; 2i+1 (its errors) is the server's to write */
            size_t i = ch / 2;
            if (ch % 2 == 0 && i < s->n_ports && (s->ports[i].open || s->ports[i].connecting))
                kite_buf_append(&s->ports[i].out, data.p, data.len);
        } else if (ch == KITE_WSCH_STDIN && s->want_in && !s->stdin_eof) {
            kite_buf_append(&s->stdin_buf, data.p, data.len);
        } else if (ch == KITE_WSCH_RESIZE) {
            resize(s, data.p, data.len);
        } else if (ch == KITE_WSCH_CLOSE && s->proto >= KITE_WSCH_V5 && data.len >= 1 &&
                   (uint8_t)data.p[0] == KITE_WSCH_STDIN) {
            s->stdin_eof = true;
        }
    }
    kite_buf_release(&data);
}

static void send_channel(struct session *s, uint8_t ch, const void *data, size_t len) {
    struct kite_buf m = {0};
    kite_wsch_encode(s->proto, ch, data, len, &m);
    struct wslay_event_msg msg = {.opcode = kite_wsch_is_text(s->proto) ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
                                  .msg = (const uint8_t *)m.p, .msg_length = m.len};
    wslay_event_queue_msg(s->ws, &msg); /* copies */
    kite_buf_release(&m);
}

/* ---- the command's side ---- */

/* Reads what fd has (once) and sends it on ch. false at its end. */
static bool pump_out(struct session *s, int fd, uint8_t ch) {
    char buf[OUT_CHUNK];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
        s->last_active = kite_now_mono(kite_clock_real());
        send_channel(s, ch, buf, (size_t)n);
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false; /* EOF, or EIO: a pty whose every slave is closed */
}

/* conmon's attach socket: one packet per read, its first byte the stream. */
static bool pump_attach(struct session *s) {
    char buf[OUT_CHUNK + 1];
    ssize_t n = recv(s->attach_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
        s->last_active = kite_now_mono(kite_clock_real());
        if (buf[0] == 2 && s->want_out) send_channel(s, KITE_WSCH_STDOUT, buf + 1, (size_t)n - 1);
        else if (buf[0] == 3 && s->want_err) send_channel(s, KITE_WSCH_STDERR, buf + 1, (size_t)n - 1);
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;
}

static int stdin_fd(struct session *s) {
    if (s->attach) return s->attach_fd;
    return s->ex.pty_fd >= 0 ? s->ex.pty_fd : s->ex.in_fd;
}

/* Whether the client is read: less than the stream buffer waits for the command. */
static bool stdin_room(const struct session *s) { return s->stdin_buf.len - s->stdin_off < s->buffer; }

static void pump_in(struct session *s) {
    int fd = stdin_fd(s);
    while (fd >= 0 && s->stdin_off < s->stdin_buf.len) {
        ssize_t n = s->attach ? send(fd, s->stdin_buf.p + s->stdin_off, s->stdin_buf.len - s->stdin_off, MSG_DONTWAIT | MSG_NOSIGNAL)
                              : write(fd, s->stdin_buf.p + s->stdin_off, s->stdin_buf.len - s->stdin_off);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) { /* the command closed its stdin: what the client sends is dropped */
            s->stdin_off = s->stdin_buf.len;
            break;
        }
        s->stdin_off += (size_t)n;
    }
    if (s->stdin_off == s->stdin_buf.len) {
        kite_buf_reset(&s->stdin_buf);
        s->stdin_off = 0;
        /* the end of the client's stdin is the command's (pipes; a terminal has no end) */
        if (s->stdin_eof && !s->attach && s->ex.in_fd >= 0) {
            close(s->ex.in_fd);
            s->ex.in_fd = -1;
        }
        /* attached: conmon closes the container's stdin at the end of ours, unless it is to
         * stay open (stdinOnce false) */
        if (s->stdin_eof && s->attach && !s->attach_in_shut && s->attach_fd >= 0) {
            shutdown(s->attach_fd, SHUT_WR);
            s->attach_in_shut = true;
        }
    }
}

static int wait_code(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 255;
}

/* Sends what is queued for at most a few seconds, then the close (libwslay sends control
 * frames before queued messages: a close queued with them would go first). */
static void drain(struct session *s) {
    int64_t deadline = kite_now_mono(kite_clock_real()) + 5 * KITE_NS_PER_SEC;
    while (!s->client_gone && wslay_event_want_write(s->ws)) {
        if (wslay_event_send(s->ws) < 0) break;
        if (!wslay_event_want_write(s->ws)) break;
        int64_t left = (deadline - kite_now_mono(kite_clock_real())) / KITE_NS_PER_MS;
        if (left <= 0) break;
        struct pollfd p = {.fd = kite_http_tunnel_fd(s->t), .events = POLLOUT};
        poll(&p, 1, (int)left);
    }
}

static void drain_close(struct session *s) {
    drain(s);
    wslay_event_queue_close(s->ws, 1000, NULL, 0);
    drain(s);
}

/* The WebSocket on the upgraded tunnel, the session active from now; false: no memory. */
static bool ws_start(struct session *s) {
    struct wslay_event_callbacks cb = {.recv_callback = ws_recv, .send_callback = ws_send, .on_msg_recv_callback = on_msg};
    if (wslay_event_context_server_init(&s->ws, &cb, s) != 0) return false;
    wslay_event_config_set_max_recv_msg_length(s->ws, KITE_STREAM_MAX_MESSAGE);
    s->last_active = kite_now_mono(kite_clock_real());
    return true;
}

/* The session after the upgrade: until the command ends or the client leaves. */
static void run(struct session *s) {
    if (!ws_start(s)) return;
    int out_fd = s->attach ? s->attach_fd : s->ex.pty_fd >= 0 ? s->ex.pty_fd : s->ex.out_fd;
    int err_fd = s->attach ? -1 : s->ex.pty_fd >= 0 ? -1 : s->ex.err_fd;
    s->out_open = out_fd >= 0;
    s->err_open = err_fd >= 0;
    bool idle = false;
    for (;;) {
        if (!s->client_gone && stdin_room(s) && wslay_event_want_read(s->ws) && kite_http_tunnel_pending(s->t))
            if (wslay_event_recv(s->ws) != 0) s->client_gone = true;
        pump_in(s);
        if (!s->client_gone && wslay_event_want_write(s->ws) && wslay_event_send(s->ws) != 0) s->client_gone = true;
        /* the client sent its close (or its end): the command is not waited for */
        if (s->client_gone || (!wslay_event_want_read(s->ws) && !wslay_event_want_write(s->ws))) break;
        bool outputs_done = !s->out_open && !s->err_open;
        if (outputs_done && (s->attach || s->exited)) break;
        /* what poll waits for is decided on the state the steps above left: a stdin buffer
         * that was full at the top of the loop and was written out whole since must open the
         * tunnel to reading again, or nothing would ever wake the loop */
        bool room = wslay_event_get_queued_msg_length(s->ws) < s->buffer;
        bool take_in = stdin_room(s);
        if (take_in && !s->client_gone && wslay_event_want_read(s->ws) && kite_http_tunnel_pending(s->t))
            continue; /* bytes TLS holds already: poll would not see them */
        int64_t now = kite_now_mono(kite_clock_real());
        int64_t left = (s->last_active + (int64_t)KITE_STREAM_IDLE_S * KITE_NS_PER_SEC - now) / KITE_NS_PER_MS;
        if (left <= 0) {
            idle = true;
            break;
        }
        enum { P_TUN, P_OUT, P_ERR, P_IN, P_PID, P_N };
        struct pollfd p[P_N];
        for (int i = 0; i < P_N; i++) p[i] = (struct pollfd){.fd = -1};
        p[P_TUN].fd = kite_http_tunnel_fd(s->t);
        p[P_TUN].events = (take_in && wslay_event_want_read(s->ws) ? POLLIN : 0) | (wslay_event_want_write(s->ws) ? POLLOUT : 0);
        if (s->out_open && room) p[P_OUT] = (struct pollfd){.fd = out_fd, .events = POLLIN};
        if (s->err_open && room) p[P_ERR] = (struct pollfd){.fd = err_fd, .events = POLLIN};
        /* (a pty is one descriptor both ways: poll takes it twice) */
        if (s->stdin_off < s->stdin_buf.len && stdin_fd(s) >= 0) p[P_IN] = (struct pollfd){.fd = stdin_fd(s), .events = POLLOUT};
        if (!s->attach && !s->exited) p[P_PID] = (struct pollfd){.fd = s->ex.pidfd, .events = POLLIN};
        int n = poll(p, P_N, (int)KITE_MIN(left, INT64_C(60000)));
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (p[P_TUN].revents & (POLLIN | POLLHUP | POLLERR))
            if (wslay_event_recv(s->ws) != 0) s->client_gone = true;
        if (p[P_OUT].revents & (POLLIN | POLLHUP | POLLERR)) {
            bool more = s->attach ? pump_attach(s) : pump_out(s, out_fd, KITE_WSCH_STDOUT);
            if (!more) s->out_open = false;
        }
        if (p[P_ERR].revents & (POLLIN | POLLHUP | POLLERR))
            if (!pump_out(s, err_fd, KITE_WSCH_STDERR)) s->err_open = false;
        if (p[P_PID].revents & POLLIN) s->exited = true;
    }
    if (s->client_gone || idle || (!s->attach && !s->exited)) {
        /* the client left (or the session went idle): the command goes too */
        if (!s->attach) {
            kite_exec_session_kill(&s->ex);
            wait_code(s->ex.pid);
            s->reaped = true;
        }
        if (!s->client_gone) {
            drain_close(s);
        }
    } else {
        struct kite_buf st = {0};
        if (s->attach) {
            if (s->proto >= KITE_WSCH_V4) kite_wsch_exit_status(s->proto, 0, NULL, 0, &st);
        } else {
            s->exit_code = wait_code(s->ex.pid);
            s->reaped = true;
            kite_wsch_exit_status(s->proto, s->exit_code, (const char *const *)s->argv, s->argc, &st);
        }
        if (st.len || s->proto >= KITE_WSCH_V4) send_channel(s, KITE_WSCH_ERROR, st.p, st.len);
        kite_buf_release(&st);
        drain_close(s);
    }
    wslay_event_context_free(s->ws);
}

/* ---- port-forward ---- */

/* The client's bytes for port p, written as far as the connection takes them. false: broken. */
static bool pf_flush(struct pf_port *p) { return kite_pf_flush(p->fd, &p->out, &p->out_off); }

static void pf_fail(struct session *s, size_t i, int err) {
    struct pf_port *p = &s->ports[i];
    char *msg = kite_asprintf("error forwarding port %u to pod %s/%s: dial tcp4 127.0.0.1:%u: connect: %s", p->port,
                              s->ns, s->pod, p->port, strerror(err));
    send_channel(s, (uint8_t)(2 * i + 1), msg, strlen(msg));
    free(msg);
    p->open = p->connecting = false;
}

static void pf_close(struct pf_port *p) {
    p->open = p->connecting = false;
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
}

/* Whether the client is read: no port has the stream buffer's bytes waiting for it. */
static bool pf_room(const struct session *s) {
    for (size_t i = 0; i < s->n_ports; i++)
        if (s->ports[i].out.len - s->ports[i].out_off >= s->buffer) return false;
    return true;
}

/* Every port's connection until they all ended or the client left. */
static void run_pf(struct session *s) {
    if (!ws_start(s)) return;
    /* each channel's first message names its port (little-endian), as the kubelet's */
    for (size_t i = 0; i < s->n_ports; i++) {
        uint8_t le[2] = {(uint8_t)(s->ports[i].port & 0xff), (uint8_t)(s->ports[i].port >> 8)};
        send_channel(s, (uint8_t)(2 * i), le, 2);
        send_channel(s, (uint8_t)(2 * i + 1), le, 2);
        if (s->ports[i].fd < 0) pf_fail(s, i, ECONNREFUSED);
    }
    struct pollfd *p = kite_calloc(s->n_ports + 1, sizeof *p);
    bool idle = false;
    for (;;) {
        if (!s->client_gone && pf_room(s) && wslay_event_want_read(s->ws) && kite_http_tunnel_pending(s->t))
            if (wslay_event_recv(s->ws) != 0) s->client_gone = true;
        for (size_t i = 0; i < s->n_ports; i++)
            if (s->ports[i].open && !pf_flush(&s->ports[i])) pf_close(&s->ports[i]);
        if (!s->client_gone && wslay_event_want_write(s->ws) && wslay_event_send(s->ws) != 0) s->client_gone = true;
        if (s->client_gone || (!wslay_event_want_read(s->ws) && !wslay_event_want_write(s->ws))) break;
        /* (decided after the steps above, as in run()) */
        bool room = wslay_event_get_queued_msg_length(s->ws) < s->buffer;
        bool take_in = pf_room(s);
        if (take_in && !s->client_gone && wslay_event_want_read(s->ws) && kite_http_tunnel_pending(s->t)) continue;
        bool any = false;
        for (size_t i = 0; i < s->n_ports; i++) any |= s->ports[i].open || s->ports[i].connecting;
        if (!any) break;
        int64_t left = (s->last_active + (int64_t)KITE_STREAM_IDLE_S * KITE_NS_PER_SEC - kite_now_mono(kite_clock_real())) /
                       KITE_NS_PER_MS;
        if (left <= 0) {
            idle = true;
            break;
        }
        p[0] = (struct pollfd){.fd = kite_http_tunnel_fd(s->t),
                               .events = (short)((take_in && wslay_event_want_read(s->ws) ? POLLIN : 0) |
                                                 (wslay_event_want_write(s->ws) ? POLLOUT : 0))};
        for (size_t i = 0; i < s->n_ports; i++) {
            struct pf_port *q = &s->ports[i];
            p[i + 1] = (struct pollfd){.fd = q->open || q->connecting ? q->fd : -1};
            if (q->connecting) p[i + 1].events = POLLOUT;
            else if (q->open) p[i + 1].events = (short)((room ? POLLIN : 0) | (q->out_off < q->out.len ? POLLOUT : 0));
        }
        int n = poll(p, s->n_ports + 1, (int)KITE_MIN(left, INT64_C(60000)));
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
            if (wslay_event_recv(s->ws) != 0) s->client_gone = true;
        for (size_t i = 0; i < s->n_ports; i++) {
            struct pf_port *q = &s->ports[i];
            short ev = p[i + 1].revents;
            if (!ev) continue;
            if (q->connecting) {
                int err = 0;
                socklen_t sl = sizeof err;
                getsockopt(q->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
                if (err) {
                    pf_fail(s, i, err);
                    pf_close(q);
                } else {
                    q->connecting = false;
                    q->open = true;
                    s->last_active = kite_now_mono(kite_clock_real());
                }
                continue;
            }
            if (ev & (POLLIN | POLLHUP | POLLERR)) {
                char buf[OUT_CHUNK];
                ssize_t k = recv(q->fd, buf, sizeof buf, MSG_DONTWAIT);
                if (k > 0) {
                    s->last_active = kite_now_mono(kite_clock_real());
                    send_channel(s, (uint8_t)(2 * i), buf, (size_t)k);
                } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                    pf_close(q); /* the pod's side ended: so does this port */
                }
            }
        }
    }
    free(p);
    if (!s->client_gone) drain_close(s);
    (void)idle;
    wslay_event_context_free(s->ws);
}

/* A socket in the network namespace of process pid, connecting to 127.0.0.1:port (without
 * waiting): the kubelet's port-forward reaches the pod's loopback too. -errno. */
int kite_pf_dial(pid_t pid, uint16_t port) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    int target = open(path, O_RDONLY | O_CLOEXEC), self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = -1, e = 0;
    if (target < 0 || self < 0) e = -errno;
    if (e == 0 && setns(target, CLONE_NEWNET) < 0) e = -errno;
    if (e == 0) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) e = -errno;
        /* this thread goes back to the agent's namespace (the socket stays in the pod's); it
         * makes no other socket before it ends, should that fail */
        if (setns(self, CLONE_NEWNET) < 0 && e == 0) {
            e = -errno;
            close(fd);
        }
    }
    if (target >= 0) close(target);
    if (self >= 0) close(self);
    if (e < 0) return e;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
        e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

/* ---- the request ---- */

static void *pf_thread(struct session *s) {
    char *id = NULL;
    int e = kite_pods_container_lookup(s->pods, s->ns, s->pod, NULL, &id);
    struct kite_runtime *rt = kite_pods_runtime(s->pods);
    struct kite_container_status st = {0};
    if (e == 0) {
        e = rt->ops->container_status(rt, id, 0, &st);
        if (e == 0 && st.pid <= 0) e = -ENOTCONN;
    }
    free(id);
    if (e == -ENOENT) reply_text(s->r, 404, "pod \"%s/%s\" does not exist\n", s->ns, s->pod);
    else if (e < 0) reply_text(s->r, 400, "pod \"%s\" has no running container to forward into\n", s->pod);
    if (e < 0) {
        kite_container_status_release(&st);
        session_free(s);
        return NULL;
    }
    if (s->spdy) {
        pid_t pid = st.pid;
        kite_container_status_release(&st);
        kite_http_add_header(s->r, "Connection", "Upgrade");
        if (s->spdy == 1) {
            kite_http_add_header(s->r, "Upgrade", "websocket");
            kite_http_add_header(s->r, "Sec-WebSocket-Accept", s->accept);
            kite_http_add_header(s->r, "Sec-WebSocket-Protocol", KITE_PF_SPDY_WS_PROTOCOL);
        } else {
            kite_http_add_header(s->r, "Upgrade", "SPDY/3.1");
            kite_http_add_header(s->r, "X-Stream-Protocol-Version", KITE_PF_SPDY_PROTOCOL);
        }
        if (kite_http_upgrade(s->r, &s->t) == 0) kite_pf_spdy_run(s->t, s->spdy == 1, pid, s->ns, s->pod, s->buffer);
        kite_http_tunnel_close(s->t);
        session_free(s);
        return NULL;
    }
    for (size_t i = 0; i < s->n_ports; i++) {
        int fd = kite_pf_dial(st.pid, s->ports[i].port);
        s->ports[i].fd = fd < 0 ? -1 : fd;
        s->ports[i].connecting = fd >= 0;
    }
    kite_container_status_release(&st);
    kite_http_add_header(s->r, "Upgrade", "websocket");
    kite_http_add_header(s->r, "Connection", "Upgrade");
    kite_http_add_header(s->r, "Sec-WebSocket-Accept", s->accept);
    if (*kite_wsch_name(s->proto)) kite_http_add_header(s->r, "Sec-WebSocket-Protocol", kite_wsch_name(s->proto));
    if (kite_http_upgrade(s->r, &s->t) == 0) run_pf(s);
    kite_http_tunnel_close(s->t);
    session_free(s);
    return NULL;
}

/* The running container of an exec or attach (*ret_id), or false after answering why not. */
static bool lookup_container(struct kite_http_req *r, struct kite_pods *pods, const char *ns, const char *pod,
                             const char *ctr, char **ret_id) {
    int e = kite_pods_container_lookup(pods, ns, pod, ctr, ret_id);
    if (e == -ENOENT) reply_text(r, 404, "pod \"%s/%s\" does not exist\n", ns, pod);
    else if (e == -ESRCH) reply_text(r, 404, "container \"%s\" not found in pod \"%s/%s\"\n", ctr, ns, pod);
    else if (e == -ENOTCONN) reply_text(r, 400, "container \"%s\" in pod \"%s\" is not running\n", ctr, pod);
    return e == 0;
}

static void *session_thread(void *ud) {
    struct session *s = ud;
    if (s->pf) return pf_thread(s);
    char *id = NULL;
    int e;
    if (!lookup_container(s->r, s->pods, s->ns, s->pod, s->ctr, &id)) {
        session_free(s);
        return NULL;
    }
    struct kite_runtime *rt = kite_pods_runtime(s->pods);
    char *err = NULL, *sock = NULL;
    s->attach_fd = -1;
    s->ex = (struct kite_exec_session){.pid = -1, .pidfd = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .pty_fd = -1};
    if (s->attach) {
        e = rt->ops->attach_socket ? rt->ops->attach_socket(rt, id, &sock) : -ENOTSUP;
        if (e == 0) {
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            /* past sun_path's 108 bytes (a deep data dir), the socket is reached through its
             * directory's descriptor, as conmon binds it */
            int dfd = -1;
            const char *slash = strrchr(sock, '/');
            if (strlen(sock) >= sizeof sa.sun_path && slash) {
                _cleanup_free_ char *dir = kite_strndup(sock, (size_t)(slash - sock));
                dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0) snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd, slash + 1);
            } else if (strlen(sock) < sizeof sa.sun_path) {
                memcpy(sa.sun_path, sock, strlen(sock) + 1);
            }
            if (!sa.sun_path[0]) {
                e = dfd < 0 && strlen(sock) >= sizeof sa.sun_path ? -ENAMETOOLONG : -ENOENT;
            } else {
                s->attach_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (s->attach_fd < 0 || connect(s->attach_fd, (struct sockaddr *)&sa, sizeof sa) < 0) e = -errno;
            }
            if (dfd >= 0) close(dfd);
            if (e < 0) err = kite_asprintf("connecting to the attach socket %s: %s", sock, strerror(-e));
            /* conmon's control fifo is beside its attach socket */
            if (e == 0 && s->tty && strrchr(sock, '/'))
                s->ctl_path = kite_asprintf("%.*s/ctl", (int)(strrchr(sock, '/') - sock), sock);
        }
    } else {
        e = rt->ops->exec_start ? rt->ops->exec_start(rt, id, (const char *const *)s->argv, s->argc, s->tty, s->want_in,
                                                      s->want_out, s->want_err && !s->tty, &s->ex, &err)
                                : -ENOTSUP;
    }
    free(id);
    free(sock);
    if (e < 0) {
        if (e == -ENOTCONN) reply_text(s->r, 400, "container \"%s\" in pod \"%s\" is not running\n", s->ctr, s->pod);
        else if (e == -ENOTSUP) reply_text(s->r, 501, "the runtime cannot %s\n", s->attach ? "attach" : "exec");
        else reply_text(s->r, 500, "%s\n", err ? err : strerror(-e));
        free(err);
        if (s->attach_fd >= 0) close(s->attach_fd);
        session_free(s);
        return NULL;
    }
    free(err);
    kite_http_add_header(s->r, "Upgrade", "websocket");
    kite_http_add_header(s->r, "Connection", "Upgrade");
    kite_http_add_header(s->r, "Sec-WebSocket-Accept", s->accept);
    if (*kite_wsch_name(s->proto)) kite_http_add_header(s->r, "Sec-WebSocket-Protocol", kite_wsch_name(s->proto));
    e = kite_http_upgrade(s->r, &s->t);
    if (e == 0) run(s);
    if (!s->attach) {
        if (!s->reaped) { /* no session (the client left before the 101): the command goes */
            kite_exec_session_kill(&s->ex);
            wait_code(s->ex.pid);
        }
        kite_exec_session_release(&s->ex);
    }
    if (s->attach_fd >= 0) close(s->attach_fd);
    kite_http_tunnel_close(s->t);
    session_free(s);
    return NULL;
}

static bool param_true(const char *v) {
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0);
}

/* A query parameter in either of its names (the API's "stdin", the kubelet's "input"). */
static bool flag(struct kite_http_req *r, const char *api, const char *kubelet) {
    return param_true(kite_http_query(r, api)) || param_true(kite_http_query(r, kubelet));
}

/* Every value of `name` in the raw query, decoded ('+' is a space, as url.Values encodes it). */
static char **query_all(const char *target, const char *name, size_t *ret_n) {
    const char *q = strchr(target, '?');
    char **v = NULL;
    size_t n = 0, nl = strlen(name);
    while (q && *q) {
        q++;
        size_t len = strcspn(q, "&");
        if (len > nl && strncmp(q, name, nl) == 0 && q[nl] == '=') {
            struct kite_buf b = {0};
            for (size_t i = nl + 1; i < len; i++) {
                char c = q[i];
                if (c == '+') c = ' ';
                else if (c == '%' && i + 2 < len && isxdigit((unsigned char)q[i + 1]) && isxdigit((unsigned char)q[i + 2])) {
                    char hex[3] = {q[i + 1], q[i + 2], 0};
                    c = (char)strtol(hex, NULL, 16);
                    i += 2;
                }
                kite_buf_putc(&b, c);
            }
            v = kite_realloc(v, (n + 1) * sizeof *v);
            v[n++] = b.p ? kite_buf_detach(&b, NULL) : kite_strdup("");
        }
        q += len;
    }
    *ret_n = n;
    return v;
}

void kite_logsrv_stream(struct kite_http_req *r, struct kite_pods *pods, size_t buffer, bool attach, const char *ns, const char *pod,
                        const char *ctr) {
    bool pf = ctr == NULL;
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "POST") != 0) {
        reply_text(r, 405, "405: Method Not Allowed");
        return;
    }
    const char *up = kite_http_header(r, "Upgrade");
    int spdy = 0;
    if (pf && up && strcasecmp(up, "SPDY/3.1") == 0) {
        /* the plain SPDY upgrade (kubectl before 1.31, or its fallback) */
        const char *offers[8];
        size_t n_off = kite_http_header_all(r, "X-Stream-Protocol-Version", offers, KITE_ARRAY_SIZE(offers));
        bool ok = n_off == 0; /* no offer: the one protocol there is, as the kubelet's handshake */
        for (size_t i = 0; i < KITE_MIN(n_off, KITE_ARRAY_SIZE(offers)); i++)
            if (offers[i] && strstr(offers[i], KITE_PF_SPDY_PROTOCOL)) ok = true;
        if (!ok) {
            reply_text(r, 403, "unable to upgrade: unable to negotiate protocol: server accepts [%s]", KITE_PF_SPDY_PROTOCOL);
            return;
        }
        if (!kite_http_can_upgrade(r)) {
            reply_text(r, 400, "a SPDY upgrade needs HTTP/1.1");
            return;
        }
        spdy = 2;
    } else if (!up || strcasecmp(up, "websocket") != 0) {
        char *id = NULL;
        /* kubectl tries SPDY after a WebSocket upgrade was answered anything but 101: what it
         * reports is this answer, so a container that cannot be reached says why here too */
        if (up && strncasecmp(up, "SPDY/", 5) == 0 && (pf || lookup_container(r, pods, ns, pod, ctr, &id)))
            reply_text(r, 400, "SPDY/3.1 exec and attach streams are not served by this node; upgrade to a WebSocket "
                               "(kubectl 1.30+ does by default)");
        else if (!up || strncasecmp(up, "SPDY/", 5) != 0) reply_text(r, 400, "Upgrade request required");
        free(id);
        return;
    }
    const char *key = kite_http_header(r, "Sec-WebSocket-Key");
    const char *ver = kite_http_header(r, "Sec-WebSocket-Version");
    if (!spdy && (!key || !*key || !ver || strcmp(ver, "13") != 0 || !kite_http_can_upgrade(r))) {
        reply_text(r, 400, "a WebSocket upgrade needs HTTP/1.1, Sec-WebSocket-Key and Sec-WebSocket-Version 13");
        return;
    }
    const char *offers[8];
    size_t n_off = spdy ? 0 : kite_http_header_all(r, "Sec-WebSocket-Protocol", offers, KITE_ARRAY_SIZE(offers));
    enum kite_wsch_proto proto = kite_wsch_select(offers, KITE_MIN(n_off, KITE_ARRAY_SIZE(offers)));
    /* SPDY inside the WebSocket (kubectl 1.31+), preferred as kube-apiserver does */
    for (size_t i = 0; pf && !spdy && i < KITE_MIN(n_off, KITE_ARRAY_SIZE(offers)); i++)
        if (offers[i] && strstr(offers[i], KITE_PF_SPDY_WS_PROTOCOL)) spdy = 1;
    if (proto == KITE_WSCH_NONE && !spdy && pf) {
        reply_text(r, 400, "no supported WebSocket subprotocol: offer " KITE_PF_SPDY_WS_PROTOCOL " or v4.channel.k8s.io");
        return;
    }
    if (proto == KITE_WSCH_NONE && !spdy) {
        reply_text(r, 400, "no supported WebSocket subprotocol: offer v5.channel.k8s.io, v4.channel.k8s.io, "
                           "v3.channel.k8s.io, v2.channel.k8s.io, channel.k8s.io or base64.channel.k8s.io");
        return;
    }
    struct session *s = kite_calloc(1, sizeof *s);
    s->r = r;
    s->pods = pods;
    s->buffer = buffer;
    s->attach = attach;
    s->pf = pf;
    s->proto = proto;
    s->spdy = spdy;
    if (key) kite_ws_accept(key, s->accept);
    s->want_in = flag(r, "stdin", "input");
    s->want_out = flag(r, "stdout", "output");
    s->want_err = flag(r, "stderr", "error");
    s->tty = flag(r, "tty", "tty");
    if (!attach && !pf) s->argv = query_all(kite_http_target(r), "command", &s->argc);
    atomic_fetch_add(&sessions, 1);
    s->ns = kite_strdup(ns);
    s->pod = kite_strdup(pod);
    s->ctr = kite_strdup(pf ? "" : ctr);
    if (pf) {
        /* ports=1234,1235 or port=1234&port=1235 (the API's name, the kubelet's) */
        size_t n[2];
        char **v[2] = {query_all(kite_http_target(r), "ports", &n[0]), query_all(kite_http_target(r), "port", &n[1])};
        const char *bad = NULL;
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < n[k]; i++) {
                for (char *tok = v[k][i], *next; tok; tok = next) {
                    next = strchr(tok, ',');
                    if (next) *next++ = 0;
                    char *end;
                    long port = strtol(tok, &end, 10);
                    if (!*tok || *end || port < 1 || port > 65535) {
                        if (!bad) bad = tok;
                        continue;
                    }
                    if (s->n_ports < KITE_STREAM_MAX_PORTS) {
                        s->ports = kite_realloc(s->ports, (s->n_ports + 1) * sizeof *s->ports);
                        s->ports[s->n_ports++] = (struct pf_port){.port = (uint16_t)port, .fd = -1};
                    } else if (!bad) {
                        bad = "(too many ports)";
                    }
                }
            }
        if (bad) reply_text(r, 400, "invalid port: %s (1 to 65535; at most %d ports)", bad, KITE_STREAM_MAX_PORTS);
        else if (!s->n_ports && !spdy) reply_text(r, 400, "query parameter \"port\" is required");
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < n[k]; i++) free(v[k][i]);
            free(v[k]);
        }
        if (bad || (!s->n_ports && !spdy)) { /* (SPDY's ports come in its streams' headers) */
            session_free(s);
            return;
        }
    } else if (!s->want_in && !s->want_out && !s->want_err) {
        reply_text(r, 400, "you must specify at least 1 of stdin, stdout, stderr");
        session_free(s);
        return;
    }
    if (!pf && !attach && !s->argc) {
        reply_text(r, 400, "you must specify a command to run");
        session_free(s);
        return;
    }
    if (atomic_load(&sessions) > KITE_STREAM_MAX_SESSIONS) {
        reply_text(r, 429, "too many exec and attach sessions on this node (%d)", KITE_STREAM_MAX_SESSIONS);
        session_free(s);
        return;
    }
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 512 * 1024);
    int e = pthread_create(&th, &at, session_thread, s);
    pthread_attr_destroy(&at);
    if (e != 0) {
        reply_text(r, 500, "starting the session: %s", strerror(e));
        session_free(s);
    }
}
