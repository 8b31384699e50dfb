#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/backoff.h"
#include "base/base.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/gotime.h"
#include "base/log.h"
#include "base/map.h"
#include "base/wgroup.h"

Test(base, buf_printf_and_json_escape) {
    struct kite_buf b = {0};
    kite_buf_printf(&b, "%d-%s", 42, "x");
    kite_buf_json_str(&b, "a\"b\\c\n\x01");
    cr_assert_str_eq(b.p, "42-x\"a\\\"b\\\\c\\n\\u0001\"");
    kite_buf_release(&b);
}

/* a query value: unreserved characters (and ':') as they are, every other byte percent-encoded,
 * a UTF-8 one byte by byte */
Test(base, buf_query_value) {
    struct kite_buf b = {0};
    kite_buf_query_value(&b, "aZ09-._:~ +/=&?%\xc3\xa9");
    cr_assert_str_eq(b.p, "aZ09-._:~%20%2B%2F%3D%26%3F%25%C3%A9");
    kite_buf_release(&b);
}

/* printf writes in place when the text fits and grows then prints again when it does not */
Test(base, buf_printf_fits_and_grows) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "ab");
    char big[1000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = 0;
    kite_buf_printf(&b, "[%s]", big);
    cr_assert_eq(b.len, 2 + 2 + 999);
    cr_assert_eq(b.p[0], 'a');
    cr_assert_eq(b.p[2], '[');
    cr_assert_eq(b.p[1002], ']');
    cr_assert_eq(b.p[1003], 0);
    kite_buf_printf(&b, "%s", "");
    cr_assert_eq(b.len, 1003);
    cr_assert_eq(b.p[1003], 0);
    for (int i = 0; i < 100; i++) kite_buf_printf(&b, "%d,", i);
    cr_assert(strstr(b.p, "]0,1,2,") && strstr(b.p, ",98,99,"));
    kite_buf_release(&b);
}

Test(base, map_put_get_del_grow) {
    struct kite_map m = {0};
    char key[32];
    for (long i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%ld", i);
        cr_assert_null(kite_map_put(&m, key, (void *)(i + 1)));
    }
    for (long i = 0; i < 1000; i += 2) {
        snprintf(key, sizeof key, "k%ld", i);
        cr_assert_eq((long)kite_map_del(&m, key), i + 1);
    }
    cr_assert_eq(m.len, 500);
    for (long i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%ld", i);
        cr_assert_eq((long)kite_map_get(&m, key), i % 2 ? i + 1 : 0);
    }
    size_t it = 0, n = 0;
    while (kite_map_next(&m, &it, NULL, NULL)) n++;
    cr_assert_eq(n, 500);
    kite_map_release(&m);
}

Test(base, time_roundtrip) {
    int64_t t;
    cr_assert_eq(kite_time_parse("2026-12-02T15:42:26Z", &t), 0);
    char s[21], us[28];
    kite_time_format(t, s);
    cr_assert_str_eq(s, "2026-12-02T15:42:26Z");
    cr_assert_eq(kite_time_parse("2026-12-02T16:42:26.250000+01:00", &t), 0);
    kite_microtime_format(t, us);
    cr_assert_str_eq(us, "2026-12-02T15:42:26.250000Z");
    cr_assert_eq(kite_time_parse("2026-12-02 15:42:26", &t), -EINVAL);
}

/* RFC 3339 spans years 1-9999; instants are clamped to KITE_TIME_MIN..MAX (1823-2116) and keep
 * their order: year 1 is long ago, year 9999 far ahead, and differences never overflow. */
Test(base, time_years_past_int64_ns_clamp_and_keep_their_order) {
    int64_t y1, y1677, y1824, y1970, y2116, y2263, y9999, t;
    cr_assert_eq(kite_time_parse("0001-01-01T00:00:00Z", &y1), 0);
    cr_assert_eq(kite_time_parse("1677-01-01T00:00:00Z", &y1677), 0);
    cr_assert_eq(kite_time_parse("1824-01-01T00:00:00Z", &y1824), 0);
    cr_assert_eq(kite_time_parse("1970-01-01T00:00:00Z", &y1970), 0);
    cr_assert_eq(kite_time_parse("2116-01-01T00:00:00.5Z", &y2116), 0);
    cr_assert_eq(kite_time_parse("2263-01-01T00:00:00Z", &y2263), 0);
    cr_assert_eq(kite_time_parse("9999-12-31T23:59:59.999999999Z", &y9999), 0);
    cr_assert_eq(y1, KITE_TIME_MIN);
    cr_assert_eq(y1677, KITE_TIME_MIN);
    cr_assert_eq(y2263, KITE_TIME_MAX);
    cr_assert_eq(y9999, KITE_TIME_MAX);
    cr_assert_eq(y1970, 0);
    cr_assert(y1 < y1824 && y1824 < y1970 && y1970 < y2116 && y2116 < y9999);
    cr_assert(y9999 - y1 > 0, "the widest difference fits");
    /* inside the range a time goes round exactly, before 1970 too */
    char s[21], us[28];
    kite_time_format(y1824, s);
    cr_assert_str_eq(s, "1824-01-01T00:00:00Z");
    kite_microtime_format(y2116, us);
    cr_assert_str_eq(us, "2116-01-01T00:00:00.500000Z");
    cr_assert_eq(kite_time_parse("1969-12-31T23:59:59.25Z", &t), 0);
    kite_microtime_format(t, us);
    cr_assert_str_eq(us, "1969-12-31T23:59:59.250000Z");
    /* the extremes still print as times */
    kite_time_format(y1, s);
    cr_assert_str_eq(s, "1823-11-12T00:06:21Z");
    kite_time_format(y9999, s);
    cr_assert_str_eq(s, "2116-02-20T23:53:38Z");
    /* a huge duration from now is the far end, not a wrapped past */
    int64_t now = INT64_C(1765000000) * KITE_NS_PER_SEC;
    cr_assert_eq(kite_time_add(now, kite_sec_to_ns(INT64_MAX)), KITE_TIME_MAX);
    cr_assert_eq(kite_time_add(now, -kite_sec_to_ns(INT64_MAX)), KITE_TIME_MIN);
    cr_assert_eq(kite_time_add(now, kite_sec_to_ns(30)), now + 30 * KITE_NS_PER_SEC);
}

Test(base, saturating_arithmetic) {
    cr_assert_eq(kite_sat_add(1, 2), 3);
    cr_assert_eq(kite_sat_add(INT64_MAX, 1), INT64_MAX);
    cr_assert_eq(kite_sat_add(INT64_MIN, -1), INT64_MIN);
    cr_assert_eq(kite_sat_add(INT64_MAX, INT64_MIN), -1);
    cr_assert_eq(kite_sat_sub(INT64_MIN, 1), INT64_MIN);
    cr_assert_eq(kite_sat_sub(1, INT64_MIN), INT64_MAX);
    cr_assert_eq(kite_sat_sub(-5, 3), -8);
    cr_assert_eq(kite_sat_mul(INT64_MAX, 1000), INT64_MAX);
    cr_assert_eq(kite_sat_mul(INT64_C(9300000000), KITE_NS_PER_SEC), INT64_MAX);
    cr_assert_eq(kite_sat_mul(-INT64_C(9300000000), KITE_NS_PER_SEC), INT64_MIN);
    cr_assert_eq(kite_sat_mul(INT64_MIN, -1), INT64_MAX);
    cr_assert_eq(kite_sat_mul(-3, 7), -21);
    cr_assert_eq(kite_sec_to_ns(INT64_MAX), INT64_MAX);
    cr_assert_eq(kite_sec_to_ns(2), 2 * KITE_NS_PER_SEC);
}

Test(base, backoff_doubles_to_cap) {
    struct kite_backoff b;
    kite_backoff_init(&b, 100 * KITE_NS_PER_MS, 7 * KITE_NS_PER_SEC, 2.0, 0, 1);
    int64_t want[] = {100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(want); i++)
        cr_assert_eq(kite_backoff_next(&b), want[i] * KITE_NS_PER_MS, "step %zu", i);
}

Test(base, fake_clock_moves_only_when_told) {
    struct kite_fake_clock f;
    kite_fake_clock_init(&f, 1000);
    int64_t m = kite_now_mono(&f.clock);
    cr_assert_eq(kite_now_mono(&f.clock), m);
    kite_fake_clock_advance(&f, 5);
    cr_assert_eq(kite_now_wall(&f.clock), 1005);
    cr_assert_eq(kite_now_mono(&f.clock), m + 5);
}

Test(base, read_file_whole_and_bounded) {
    char path[] = "/tmp/kite-read-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    char data[10000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (char)('a' + i % 26);
    cr_assert_eq(write(fd, data, sizeof data), (ssize_t)sizeof data);
    close(fd);
    char *s = NULL;
    size_t len = 0;
    cr_assert_eq(kite_read_file(path, 1 << 20, &s, &len), 0);
    cr_assert_eq(len, sizeof data);
    cr_assert_eq(memcmp(s, data, len), 0);
    cr_assert_eq(s[len], 0);
    free(s);
    cr_assert_eq(kite_read_file(path, 4096, &s, &len), -EFBIG);
    unlink(path);
    cr_assert_eq(kite_read_file(path, 4096, &s, &len), -ENOENT);
}

Test(base, log_ratelimit_one_line_per_interval_with_the_count_held_back) {
    struct kite_log_ratelimit rl = {.interval_ns = 1000};
    uint64_t held = 99;
    cr_assert(kite_log_ratelimit_allow(&rl, 5000, &held));
    cr_assert_eq(held, 0);
    for (int i = 0; i < 7; i++) cr_assert_not(kite_log_ratelimit_allow(&rl, 5000 + 999, &held));
    cr_assert(kite_log_ratelimit_allow(&rl, 6000, &held));
    cr_assert_eq(held, 7);
    cr_assert_not(kite_log_ratelimit_allow(&rl, 6001, &held));
    cr_assert(kite_log_ratelimit_allow(&rl, 100000, &held));
    cr_assert_eq(held, 1);
}

/* A deadline from kite_cond_deadline is on CLOCK_MONOTONIC (since boot, far before the wall
 * clock's now): on a condition on CLOCK_REALTIME it would lie decades in the past and the wait
 * would return at once. */
Test(base, cond_mono_timed_wait_waits_its_time) {
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c;
    kite_cond_init_mono(&c);
    struct timespec ts;
    int64_t t0 = kite_now_mono(kite_clock_real());
    kite_cond_deadline(&ts, 50 * KITE_NS_PER_MS);
    pthread_mutex_lock(&mu);
    int r;
    while ((r = pthread_cond_timedwait(&c, &mu, &ts)) == 0) {}
    pthread_mutex_unlock(&mu);
    cr_assert_eq(r, ETIMEDOUT);
    cr_assert_geq(kite_now_mono(kite_clock_real()) - t0, 50 * KITE_NS_PER_MS);
    pthread_cond_destroy(&c);
}

/* client-go's per-item exponential limiter (and the scheduler's pod back-off): base x 2^n, capped. */
Test(backoff, exp_doubles_per_failure_to_the_cap) {
    cr_assert_eq(kite_backoff_exp(5, 1000, 0), 5);
    cr_assert_eq(kite_backoff_exp(5, 1000, 1), 10);
    cr_assert_eq(kite_backoff_exp(5, 1000, 3), 40);
    cr_assert_eq(kite_backoff_exp(5, 1000, 8), 1000);
    cr_assert_eq(kite_backoff_exp(5, 1000, 4000), 1000, "no overflow for many failures");
}

/* One RFC 3339 parser (Go's, base/gotime.c) behind kite_time_parse: the strict rules hold there
 * too, and the formatters print what it reads back. */
Test(gotime, kite_time_parse_is_as_strict_as_go) {
    int64_t t;
    cr_assert_eq(kite_time_parse("2026-12-02T15:42:26Z", &t), 0);
    cr_assert_eq(t, INT64_C(1796226146) * KITE_NS_PER_SEC);
    cr_assert_eq(kite_time_parse("2026-12-02T16:42:26.5+01:00", &t), 0);
    cr_assert_eq(t, INT64_C(1796226146) * KITE_NS_PER_SEC + KITE_NS_PER_SEC / 2);
    cr_assert_eq(kite_time_parse("2026-12-2T15:42:26Z", &t), -EINVAL, "one-digit day");
    cr_assert_eq(kite_time_parse("2026-02-30T15:42:26Z", &t), -EINVAL, "day out of range");
    cr_assert_eq(kite_time_parse("2026-12-02T15:42:26", &t), -EINVAL, "no zone");
    cr_assert_eq(kite_time_parse("2026-12-02T15:42:26Zx", &t), -EINVAL, "extra text");
    char s[21], m[28];
    kite_time_format(t, s);
    cr_assert_str_eq(s, "2026-12-02T15:42:26Z");
    kite_microtime_format(t, m);
    cr_assert_str_eq(m, "2026-12-02T15:42:26.500000Z");
    char *err = NULL;
    int64_t sec;
    int32_t nsec;
    cr_assert_eq(kite_gotime_parse("2026-13-02T15:42:26Z", false, &sec, &nsec, &err), -EINVAL);
    cr_assert_str_eq(err, "parsing time \"2026-13-02T15:42:26Z\": month out of range");
    free(err);
}

/* flowcontrol.Backoff.Next without jitter: initial, then doubled, capped at the maximum (the
 * kubelet's 10 s doubling to 300 s crash-loop back-off). */
Test(backoff, step_doubles_each_item_to_the_cap) {
    int64_t d = 0, want[] = {10, 20, 40, 80, 160, 300, 300};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        d = kite_backoff_step(d, 10 * KITE_NS_PER_SEC, 300 * KITE_NS_PER_SEC);
        cr_assert_eq(d, want[i] * KITE_NS_PER_SEC, "step %zu", i);
    }
    cr_assert_eq(kite_backoff_step(INT64_MAX / 2 + 1, 1, INT64_MAX), INT64_MAX, "saturates");
}

static pthread_barrier_t trim_start;
static void *trim_at_once(void *arg) {
    pthread_barrier_wait(&trim_start);
    kite_mem_trim();
    return arg;
}

/* Threads trimming at once, the first trims of their process (an HTTP server's workers sweeping
 * together): under the sanitizers' allocators glibc's arenas are first set up by such a trim,
 * and two at once crashed half the time. Each of 20 children races 16 threads. */
Test(base, mem_trim_from_many_threads_at_once) {
    int crashed = 0;
    for (int k = 0; k < 20; k++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            enum { N = 16 };
            pthread_t t[N];
            pthread_barrier_init(&trim_start, NULL, N);
            for (int i = 0; i < N; i++) pthread_create(&t[i], NULL, trim_at_once, NULL);
            for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) crashed++;
    }
    cr_assert_eq(crashed, 0, "%d of 20 processes crashed trimming from 16 threads at once", crashed);
}

/* Detached threads whose owner frees what they use once wait() returns: each one's last writes
 * land before it (under ASan a write after the free would be reported). */
struct wg_owner {
    struct kite_wgroup g;
    int *slots;
};
struct wg_job {
    struct wg_owner *o;
    int i;
};

static void *wg_thread(void *ud) {
    struct wg_job *j = ud;
    struct wg_owner *o = j->o;
    usleep((useconds_t)(j->i % 4) * 5000);
    o->slots[j->i] = j->i + 1;
    free(j);
    kite_wgroup_done(&o->g);
    return NULL;
}

Test(base, wgroup_waits_for_every_detached_thread) {
    struct wg_owner *o = kite_calloc(1, sizeof *o);
    o->slots = kite_calloc(16, sizeof *o->slots);
    kite_wgroup_init(&o->g);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < 16; i++) {
        struct wg_job *j = kite_calloc(1, sizeof *j);
        *j = (struct wg_job){o, i};
        kite_wgroup_add(&o->g);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, &at, wg_thread, j), 0);
    }
    pthread_attr_destroy(&at);
    kite_wgroup_wait(&o->g);
    for (int i = 0; i < 16; i++) cr_assert_eq(o->slots[i], i + 1, "thread %d had not finished", i);
    free(o->slots);
    free(o);
}
