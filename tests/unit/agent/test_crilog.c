/* The CRI log reader: rendering (prefix stripped, partial lines joined, timestamps as the
 * kubelet prints them, sinceSeconds), tailLines as the kubelet counts, limitBytes, reading in
 * chunks and over-long lines. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "agent/logs/logs.h"
#include "base/clock.h"

static char path[64];

static void setup(void) {
    strcpy(path, "/tmp/kite-crilog-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
}
static void teardown(void) { unlink(path); }
TestSuite(crilog, .init = setup, .fini = teardown);

static void write_file(const char *text, size_t n) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, n, f), n);
    fclose(f);
}

/* Everything the reader gives for text with options o; *ret_rc the last read's value. */
static char *read_all(const char *text, struct kite_crilog_options o, int *ret_rc) {
    write_file(text, strlen(text));
    struct kite_crilog l;
    cr_assert_eq(kite_crilog_open(&l, path, &o), 0);
    struct kite_buf out = {0};
    int r;
    while ((r = kite_crilog_read(&l, &out)) == 1) {}
    kite_crilog_close(&l);
    if (ret_rc) *ret_rc = r;
    return out.p ? out.p : strdup("");
}

static const struct kite_crilog_options ALL = {.tail_lines = -1};

#define LOG3 "2026-01-02T03:04:05.123456789Z stdout F one\n" \
             "2026-01-02T03:04:06.100000000Z stderr F two\n" \
             "2026-01-02T03:04:07Z stdout F three\n"

Test(crilog, strips_the_prefix_of_both_streams) {
    char *s = read_all(LOG3, ALL, NULL);
    cr_assert_str_eq(s, "one\ntwo\nthree\n");
    free(s);
}

Test(crilog, joins_partial_lines) {
    char *s = read_all("2026-01-02T03:04:05Z stdout P par\n2026-01-02T03:04:05Z stdout P t-\n"
                       "2026-01-02T03:04:05Z stdout F end\n2026-01-02T03:04:06Z stdout F \n", ALL, NULL);
    cr_assert_str_eq(s, "part-end\n\n");
    free(s);
}

Test(crilog, timestamps_in_utc_with_go_fractions_once_per_line) {
    struct kite_crilog_options o = {.tail_lines = -1, .timestamps = true};
    char *s = read_all("2026-01-02T05:04:05.120000000+02:00 stdout P a\n2026-01-02T03:04:05.5Z stdout F b\n"
                       "2026-01-02T03:04:07Z stdout F c\n", o, NULL);
    cr_assert_str_eq(s, "2026-01-02T03:04:05.12Z ab\n2026-01-02T03:04:07Z c\n");
    free(s);
}

Test(crilog, skips_lines_that_do_not_parse) {
    char *s = read_all("garbage\nnot-a-time stdout F x\n2026-01-02T03:04:05Z stdlog F y\n"
                       "2026-01-02T03:04:05Z stdout\n2026-01-02T03:04:05Z stdout F ok\n", ALL, NULL);
    cr_assert_str_eq(s, "ok\n");
    free(s);
}

Test(crilog, since_drops_older_lines) {
    struct kite_crilog_options o = {.tail_lines = -1};
    /* 2026-01-02T03:04:06Z */
    o.since_ns = INT64_C(1767323046) * KITE_NS_PER_SEC;
    char *s = read_all(LOG3, o, NULL);
    cr_assert_str_eq(s, "two\nthree\n");
    free(s);
}

Test(crilog, tail_counts_raw_lines_from_the_end) {
    struct kite_crilog_options o = {.tail_lines = 2};
    char *s = read_all(LOG3, o, NULL);
    cr_assert_str_eq(s, "two\nthree\n");
    free(s);
    o.tail_lines = 0;
    s = read_all(LOG3, o, NULL);
    cr_assert_str_eq(s, "");
    free(s);
    o.tail_lines = 10;
    s = read_all(LOG3, o, NULL);
    cr_assert_str_eq(s, "one\ntwo\nthree\n");
    free(s);
    o.tail_lines = 3;
    s = read_all(LOG3, o, NULL);
    cr_assert_str_eq(s, "one\ntwo\nthree\n");
    free(s);
}

Test(crilog, tail_offset_of_a_file_whose_last_line_is_unfinished) {
    const char *t = "a\nb\nc";
    write_file(t, strlen(t));
    int fd = open(path, O_RDONLY);
    cr_assert_eq(kite_crilog_tail_offset(fd, 5, 1), 4);
    cr_assert_eq(kite_crilog_tail_offset(fd, 5, 2), 2);
    cr_assert_eq(kite_crilog_tail_offset(fd, 5, 3), 0);
    cr_assert_eq(kite_crilog_tail_offset(fd, 5, 0), 5);
    cr_assert_eq(kite_crilog_tail_offset(fd, 0, 2), 0);
    close(fd);
}

Test(crilog, limit_bytes_cuts_mid_line_and_ends) {
    struct kite_crilog_options o = {.tail_lines = -1, .limit_bytes = 6};
    int rc = 0;
    char *s = read_all(LOG3, o, &rc);
    cr_assert_str_eq(s, "one\ntw");
    cr_assert_eq(rc, 2);
    free(s);
    o.limit_bytes = 1000;
    s = read_all(LOG3, o, &rc);
    cr_assert_str_eq(s, "one\ntwo\nthree\n");
    cr_assert_eq(rc, 0);
    free(s);
}

Test(crilog, reads_in_chunks_and_follows_appends) {
    /* lines across chunk boundaries: the carried part joins the rest */
    struct kite_buf big = {0}, want = {0};
    for (int i = 0; i < 5000; i++) {
        kite_buf_printf(&big, "2026-01-02T03:04:05.000000001Z stdout F line %d\n", i);
        kite_buf_printf(&want, "line %d\n", i);
    }
    cr_assert_gt(big.len, 2 * KITE_CRILOG_READ_CHUNK);
    write_file(big.p, big.len);
    struct kite_crilog l;
    cr_assert_eq(kite_crilog_open(&l, path, &ALL), 0);
    struct kite_buf out = {0};
    int r, reads = 0;
    while ((r = kite_crilog_read(&l, &out)) == 1) reads++;
    cr_assert_eq(r, 0);
    cr_assert_geq(reads, 2);
    cr_assert_str_eq(out.p, want.p);
    /* half a line appended, then its end: nothing until the '\n' comes */
    FILE *f = fopen(path, "a");
    fputs("2026-01-02T03:04:05Z stdout F la", f);
    fflush(f);
    kite_buf_reset(&out);
    cr_assert_eq(kite_crilog_read(&l, &out), 0);
    cr_assert_eq(out.len, 0);
    fputs("te\n", f);
    fclose(f);
    cr_assert_eq(kite_crilog_read(&l, &out), 0);
    cr_assert_str_eq(out.p, "late\n");
    kite_crilog_close(&l);
    kite_buf_release(&out);
    kite_buf_release(&big);
    kite_buf_release(&want);
}

Test(crilog, an_over_long_line_is_dropped) {
    struct kite_buf t = {0};
    kite_buf_puts(&t, "2026-01-02T03:04:05Z stdout F ");
    for (size_t i = 0; i < KITE_CRILOG_MAX_LINE + 10; i++) kite_buf_putc(&t, 'x');
    kite_buf_puts(&t, "\n2026-01-02T03:04:05Z stdout F after\n");
    char *s = read_all(t.p, ALL, NULL);
    cr_assert_str_eq(s, "after\n");
    free(s);
    kite_buf_release(&t);
}
