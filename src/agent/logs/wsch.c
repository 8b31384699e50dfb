/* The Kubernetes channel protocols over WebSocket: protocol choice, the handshake's accept
 * key, messages in and out, and what the error channel says (wsch.h). */
#include "agent/logs/wsch.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "base/base64.h"

static const struct {
    const char *name;
    enum kite_wsch_proto p;
} protos[] = {
    {"v5.channel.k8s.io", KITE_WSCH_V5}, {"v4.channel.k8s.io", KITE_WSCH_V4},
    {"v3.channel.k8s.io", KITE_WSCH_V3}, {"v2.channel.k8s.io", KITE_WSCH_V2},
    {"channel.k8s.io", KITE_WSCH_V1},    {"base64.channel.k8s.io", KITE_WSCH_BASE64},
};

enum kite_wsch_proto kite_wsch_select(const char *const *offers, size_t n) {
    if (!n) return KITE_WSCH_V1;
    enum kite_wsch_proto best = KITE_WSCH_NONE;
    int best_rank = (int)KITE_ARRAY_SIZE(protos);
    for (size_t i = 0; i < n; i++) {
        const char *s = offers[i];
        while (s && *s) {
            s += strspn(s, " \t,");
            size_t len = strcspn(s, " \t,");
            for (size_t k = 0; k < KITE_ARRAY_SIZE(protos); k++)
                if (len == strlen(protos[k].name) && strncasecmp(s, protos[k].name, len) == 0 && (int)k < best_rank) {
                    best_rank = (int)k;
                    best = protos[k].p;
                }
            s += len;
        }
    }
    return best;
}

const char *kite_wsch_name(enum kite_wsch_proto p) {
    for (size_t k = 0; k < KITE_ARRAY_SIZE(protos); k++)
        if (protos[k].p == p) return protos[k].name;
    return "";
}

bool kite_wsch_is_text(enum kite_wsch_proto p) { return p == KITE_WSCH_BASE64; }

void kite_ws_accept(const char *key, char out[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    struct kite_buf in = {0};
    kite_buf_puts(&in, key);
    kite_buf_puts(&in, guid);
    unsigned char sha[20];
    gnutls_hash_fast(GNUTLS_DIG_SHA1, in.p, in.len, sha);
    kite_buf_release(&in);
    char *b = kite_base64_encode(sha, sizeof sha, false);
    snprintf(out, 29, "%s", b);
    free(b);
}

void kite_wsch_encode(enum kite_wsch_proto p, uint8_t ch, const void *data, size_t len, struct kite_buf *out) {
    if (kite_wsch_is_text(p)) {
        kite_buf_putc(out, (char)('0' + ch));
        kite_base64_append(out, data, len, false);
        return;
    }
    kite_buf_putc(out, (char)ch);
    kite_buf_append(out, data, len);
}

int kite_wsch_decode(enum kite_wsch_proto p, const uint8_t *msg, size_t len, uint8_t *ret_ch, struct kite_buf *out) {
    if (!len) return -EINVAL;
    if (kite_wsch_is_text(p)) {
        if (msg[0] < '0' || msg[0] > '9') return -EINVAL;
        *ret_ch = (uint8_t)(msg[0] - '0');
        return kite_base64_decode_std((const char *)msg + 1, len - 1, out, NULL) < 0 ? -EINVAL : 0;
    }
    *ret_ch = msg[0];
    kite_buf_append(out, msg + 1, len - 1);
    return 0;
}

/* {"Width":W,"Height":H} (remotecommand.TerminalSize), keys as Go's decoder matches them:
 * case-insensitively. */
int kite_wsch_parse_resize(const char *data, size_t len, uint16_t *ret_w, uint16_t *ret_h) {
    char buf[256];
    if (len >= sizeof buf) return -EINVAL;
    memcpy(buf, data, len);
    buf[len] = 0;
    long vals[2] = {-1, -1};
    static const char *const keys[] = {"\"width\"", "\"height\""};
    for (int k = 0; k < 2; k++) {
        const char *at = strcasestr(buf, keys[k]);
        if (!at) continue;
        at += strlen(keys[k]);
        at += strspn(at, " \t\r\n");
        if (*at++ != ':') return -EINVAL;
        char *end;
        long v = strtol(at, &end, 10);
        if (end == at || v < 0 || v > 65535) return -EINVAL;
        vals[k] = v;
    }
    if (vals[0] < 0 && vals[1] < 0) return -EINVAL;
    *ret_w = (uint16_t)(vals[0] < 0 ? 0 : vals[0]);
    *ret_h = (uint16_t)(vals[1] < 0 ? 0 : vals[1]);
    return 0;
}

static void command_text(const char *const *argv, size_t argc, struct kite_buf *b) {
    kite_buf_putc(b, '[');
    for (size_t i = 0; i < argc; i++) kite_buf_printf(b, "%s%s", i ? " " : "", argv[i]);
    kite_buf_putc(b, ']');
}

void kite_wsch_exit_status(enum kite_wsch_proto p, int code, const char *const *argv, size_t argc, struct kite_buf *out) {
    struct kite_buf msg = {0};
    kite_buf_puts(&msg, "command terminated with non-zero exit code: error executing command ");
    command_text(argv, argc, &msg);
    kite_buf_printf(&msg, ", exit code %d", code);
    if (p < KITE_WSCH_V4) {
        /* the older protocols say nothing on success; a failure is its text */
        if (code) kite_buf_append(out, msg.p, msg.len);
    } else if (code == 0) {
        kite_buf_puts(out, "{\"metadata\":{},\"status\":\"Success\"}");
    } else {
        /* as the kubelet's remotecommand server (errors.go) writes it: kubectl and the
         * python client take the code from the ExitCode cause */
        kite_buf_puts(out, "{\"metadata\":{},\"status\":\"Failure\",\"message\":");
        kite_buf_json_str(out, msg.p);
        kite_buf_printf(out, ",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"%d\"}]}}", code);
    }
    kite_buf_release(&msg);
}

void kite_wsch_error_status(enum kite_wsch_proto p, const char *message, struct kite_buf *out) {
    if (p < KITE_WSCH_V4) {
        kite_buf_puts(out, message);
        return;
    }
    kite_buf_puts(out, "{\"metadata\":{},\"status\":\"Failure\",\"message\":");
    kite_buf_json_str(out, message);
    kite_buf_puts(out, ",\"reason\":\"InternalError\",\"code\":500}");
}
