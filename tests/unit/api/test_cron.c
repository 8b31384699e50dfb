/* CronJob schedules (api/cron.c): robfig/cron's standard syntax, the day-field rule, next
 * activations in UTC and in a TZif zone. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/cron.h"

TestSuite(cron, .timeout = 30);

static time_t utc(const char *s) { /* "YYYY-MM-DD HH:MM" */
    struct tm tm = {0};
    cr_assert_not_null(strptime(s, "%Y-%m-%d %H:%M", &tm), "%s", s);
    return timegm(&tm);
}

static void expect_next(const char *spec, const struct kite_tz *tz, const char *from, const char *want) {
    struct kite_cron c;
    char *err = NULL;
    cr_assert_eq(kite_cron_parse(spec, &c, &err), 0, "%s: %s", spec, err ? err : "");
    time_t got = kite_cron_next(&c, tz, utc(from));
    char buf[32] = "none";
    if (got >= 0) strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", gmtime(&got));
    cr_expect_str_eq(buf, want, "%s from %s", spec, from);
}

static struct kite_tz *zone(const char *name) {
    struct kite_tz *tz = NULL;
    cr_assert_eq(kite_tz_load(name, &tz), 0, "%s", name);
    return tz;
}

Test(cron, next_times_in_utc) {
    struct kite_tz *u = zone("UTC");
    expect_next("*/1 * * * *", u, "2026-12-06 08:20", "2026-12-06 08:21");
    expect_next("*/15 * * * *", u, "2026-12-06 08:20", "2026-12-06 08:30");
    expect_next("5 4 * * *", u, "2026-12-06 08:20", "2026-12-07 04:05");
    expect_next("0 0 1 JAN *", u, "2026-12-06 08:20", "2027-01-01 00:00");
    expect_next("0 9 * * mon-fri", u, "2026-12-05 10:00", "2026-12-07 09:00"); /* Saturday -> Monday */
    expect_next("30 1 1,15 * *", u, "2026-12-02 00:00", "2026-12-15 01:30");
    expect_next("0 12 */10 * *", u, "2026-12-06 00:00", "2026-12-11 12:00"); /* 1, 11, 21, 31 */
    expect_next("0 0 29 2 *", u, "2026-03-01 00:00", "2028-02-29 00:00");
    expect_next("0 0 31 2 *", u, "2026-03-01 00:00", "none");
    /* both day fields restricted: either matches; one a star: both must */
    expect_next("0 0 13 * 5", u, "2026-12-06 00:00", "2026-12-11 00:00"); /* Friday the 11th comes first */
    expect_next("0 0 13 * *", u, "2026-12-06 00:00", "2026-12-13 00:00");
    expect_next("0 0 ? * 0", u, "2026-12-06 00:00", "2026-12-13 00:00"); /* Sunday */
    expect_next("@hourly", u, "2026-12-06 08:20", "2026-12-06 09:00");
    expect_next("@daily", u, "2026-12-06 08:20", "2026-12-07 00:00");
    expect_next("@weekly", u, "2026-12-06 08:20", "2026-12-13 00:00");
    expect_next("@monthly", u, "2026-12-06 08:20", "2027-01-01 00:00");
    expect_next("@yearly", u, "2026-12-06 08:20", "2027-01-01 00:00");
    kite_tz_free(u);
}

Test(cron, time_zones) {
    struct kite_tz *ny = zone("America/New_York"), *tokyo = zone("Asia/Tokyo");
    /* 09:00 in New York is 14:00 UTC in winter, 13:00 in summer */
    expect_next("0 9 * * *", ny, "2026-12-06 00:00", "2026-12-06 14:00");
    expect_next("0 9 * * *", ny, "2026-07-06 00:00", "2026-07-06 13:00");
    expect_next("0 0 * * *", tokyo, "2026-12-06 00:00", "2026-12-06 15:00");
    cr_expect_eq(kite_tz_offset(tokyo, utc("2026-12-06 00:00")), 9 * 3600);
    kite_tz_free(ny);
    kite_tz_free(tokyo);
    struct kite_tz *tz = NULL;
    cr_expect_eq(kite_tz_load("Mars/Olympus_Mons", &tz), -ENOENT);
    cr_expect_eq(kite_tz_load("../etc/passwd", &tz), -EINVAL);
    cr_expect_eq(kite_tz_load("/etc/localtime", &tz), -EINVAL);
}

Test(cron, errors_in_robfigs_words) {
    static const struct {
        const char *spec, *err;
    } cases[] = {
        {"", "empty spec string"},
        {"* * * *", "expected exactly 5 fields, found 4: [* * * *]"},
        {"* * * * * *", "expected exactly 5 fields, found 6 or more: * * * * * *"},
        {"60 * * * *", "end of range above maximum: 60"},
        {"* 24 * * *", "end of range above maximum: 24"},
        {"* * 0 * *", "beginning of range below minimum: 0"},
        {"5-1 * * * *", "beginning of range after end: 5-1"},
        {"x * * * *", "failed to parse int from x"},
        {"*/0 * * * *", "failed to parse int from 0"},
        {"@reboot", "unrecognized descriptor: @reboot"},
        {"TZ=UTC * * * * *", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct kite_cron c;
        char *err = NULL;
        cr_expect_eq(kite_cron_parse(cases[i].spec, &c, &err), -EINVAL, "%s", cases[i].spec);
        cr_expect_str_eq(err ? err : "", cases[i].err, "%s", cases[i].spec);
        free(err);
    }
}
