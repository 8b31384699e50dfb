/* The channel protocols' glue (wsch.h): the subprotocol a server picks, RFC 6455's accept key,
 * messages both ways in binary and base64, resize messages and what the error channel says. */
#include <criterion/criterion.h>
#include <string.h>

#include "agent/logs/wsch.h"

Test(wsch, select_prefers_the_newest_known) {
    const char *kubectl[] = {"v5.channel.k8s.io, v4.channel.k8s.io, v3.channel.k8s.io, v2.channel.k8s.io"};
    cr_assert_eq(kite_wsch_select(kubectl, 1), KITE_WSCH_V5);
    const char *python[] = {"v4.channel.k8s.io"};
    cr_assert_eq(kite_wsch_select(python, 1), KITE_WSCH_V4);
    /* repeated headers count as one list; order does not decide, the server's preference does */
    const char *two[] = {"base64.channel.k8s.io", "channel.k8s.io,v3.channel.k8s.io"};
    cr_assert_eq(kite_wsch_select(two, 2), KITE_WSCH_V3);
    const char *unknown[] = {"SPDY/3.1+portforward.k8s.io, chat"};
    cr_assert_eq(kite_wsch_select(unknown, 1), KITE_WSCH_NONE);
    const char *prefix[] = {"v5.channel.k8s.iox"};
    cr_assert_eq(kite_wsch_select(prefix, 1), KITE_WSCH_NONE);
    /* no header at all: channel.k8s.io, as wsstream */
    cr_assert_eq(kite_wsch_select(NULL, 0), KITE_WSCH_V1);
    cr_assert_str_eq(kite_wsch_name(KITE_WSCH_V5), "v5.channel.k8s.io");
    cr_assert_str_eq(kite_wsch_name(KITE_WSCH_BASE64), "base64.channel.k8s.io");
}

Test(wsch, accept_key_of_rfc6455) {
    char out[29];
    kite_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out); /* RFC 6455 §1.3's example */
    cr_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

Test(wsch, binary_messages_both_ways) {
    struct kite_buf b = {0};
    kite_wsch_encode(KITE_WSCH_V5, 1, "out\n", 4, &b);
    cr_assert_eq(b.len, 5);
    cr_assert(memcmp(b.p, "\x01out\n", 5) == 0);
    uint8_t ch = 9;
    struct kite_buf d = {0};
    cr_assert_eq(kite_wsch_decode(KITE_WSCH_V5, (const uint8_t *)"\x00hi", 3, &ch, &d), 0);
    cr_assert_eq(ch, 0);
    cr_assert_eq(d.len, 2);
    cr_assert(memcmp(d.p, "hi", 2) == 0);
    kite_buf_reset(&d);
    /* the v5 close signal: channel 255 naming the channel */
    cr_assert_eq(kite_wsch_decode(KITE_WSCH_V5, (const uint8_t *)"\xff\x00", 2, &ch, &d), 0);
    cr_assert_eq(ch, 255);
    cr_assert_eq(d.len, 1);
    cr_assert_eq(d.p[0], 0);
    kite_buf_reset(&d);
    cr_assert_eq(kite_wsch_decode(KITE_WSCH_V4, (const uint8_t *)"", 0, &ch, &d), -EINVAL);
    kite_buf_release(&b);
    kite_buf_release(&d);
}

Test(wsch, base64_messages) {
    struct kite_buf b = {0};
    kite_wsch_encode(KITE_WSCH_BASE64, 2, "err", 3, &b);
    cr_assert_str_eq(b.p, "2ZXJy");
    uint8_t ch;
    struct kite_buf d = {0};
    cr_assert_eq(kite_wsch_decode(KITE_WSCH_BASE64, (const uint8_t *)"0aGVsbG8=", 9, &ch, &d), 0);
    cr_assert_eq(ch, 0);
    cr_assert_eq(d.len, 5);
    cr_assert(memcmp(d.p, "hello", 5) == 0);
    kite_buf_reset(&d);
    cr_assert_eq(kite_wsch_decode(KITE_WSCH_BASE64, (const uint8_t *)"x", 1, &ch, &d), -EINVAL);
    cr_assert_eq(kite_wsch_decode(KITE_WSCH_BASE64, (const uint8_t *)"0!!!", 4, &ch, &d), -EINVAL);
    kite_buf_release(&b);
    kite_buf_release(&d);
}

Test(wsch, resize) {
    uint16_t w = 0, h = 0;
    const char *m = "{\"Width\":101,\"Height\":33}";
    cr_assert_eq(kite_wsch_parse_resize(m, strlen(m), &w, &h), 0);
    cr_assert_eq(w, 101);
    cr_assert_eq(h, 33);
    m = "{\"height\": 7, \"width\": 9}";
    cr_assert_eq(kite_wsch_parse_resize(m, strlen(m), &w, &h), 0);
    cr_assert_eq(w, 9);
    cr_assert_eq(h, 7);
    m = "{\"Width\":-1}";
    cr_assert_eq(kite_wsch_parse_resize(m, strlen(m), &w, &h), -EINVAL);
    m = "{}";
    cr_assert_eq(kite_wsch_parse_resize(m, strlen(m), &w, &h), -EINVAL);
    m = "{\"Width\":70000,\"Height\":1}";
    cr_assert_eq(kite_wsch_parse_resize(m, strlen(m), &w, &h), -EINVAL);
}

Test(wsch, exit_status) {
    const char *argv[] = {"sh", "-c", "exit 3"};
    struct kite_buf b = {0};
    kite_wsch_exit_status(KITE_WSCH_V4, 0, argv, 3, &b);
    cr_assert_str_eq(b.p, "{\"metadata\":{},\"status\":\"Success\"}");
    kite_buf_reset(&b);
    kite_wsch_exit_status(KITE_WSCH_V5, 3, argv, 3, &b);
    cr_assert_str_eq(b.p, "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command terminated with non-zero exit code: "
                          "error executing command [sh -c exit 3], exit code 3\",\"reason\":\"NonZeroExitCode\","
                          "\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"3\"}]}}");
    /* the older protocols: text, and nothing for success */
    kite_buf_reset(&b);
    kite_wsch_exit_status(KITE_WSCH_V1, 0, argv, 3, &b);
    cr_assert_eq(b.len, 0);
    kite_wsch_exit_status(KITE_WSCH_V2, 2, argv, 3, &b);
    cr_assert_str_eq(b.p, "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 2");
    kite_buf_reset(&b);
    kite_wsch_error_status(KITE_WSCH_V4, "no \"such\" file", &b);
    cr_assert_str_eq(b.p, "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"no \\\"such\\\" file\",\"reason\":\"InternalError\",\"code\":500}");
    kite_buf_release(&b);
}
