/* Cron schedules and time zones (cron.h). */
#include "api/cron.h"
#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const MONTHS[] = {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const DAYS[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

struct bounds {
    int min, max;
    const char *const *names; /* names[i] is min + i */
    size_t nnames;
};
static const struct bounds B_MIN = {0, 59, NULL, 0}, B_HOUR = {0, 23, NULL, 0}, B_DOM = {1, 31, NULL, 0},
                           B_MONTH = {1, 12, MONTHS, 12}, B_DOW = {0, 6, DAYS, 7};

static int fail(char **ret_err, const char *fmt, const char *arg) {
    if (ret_err) *ret_err = kite_asprintf(fmt, arg);
    return -EINVAL;
}

/* a number or a name of the field */
static int value(const char *s, size_t n, const struct bounds *b, int *out) {
    if (n == 0 || n > 15) return -EINVAL;
    char buf[16];
    memcpy(buf, s, n);
    buf[n] = 0;
    for (size_t i = 0; i < b->nnames; i++)
        if (strcasecmp(buf, b->names[i]) == 0) return *out = b->min + (int)i, 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)buf[i])) return -EINVAL;
    *out = atoi(buf);
    return 0;
}

/* one comma-separated range of a field (robfig's getRange) */
static int range(const char *s, size_t n, const struct bounds *b, uint64_t *bits, bool *star, char **err) {
    _cleanup_free_ char *expr = kite_strndup(s, n), *orig = kite_strndup(s, n);
    char *slash = strchr(expr, '/');
    int lo, hi, step = 1;
    if (slash) {
        *slash = 0;
        if (value(slash + 1, strlen(slash + 1), &(struct bounds){0, 0, NULL, 0}, &step) < 0 || step <= 0)
            return fail(err, "failed to parse int from %s", slash + 1);
    }
    if (strcmp(expr, "*") == 0 || strcmp(expr, "?") == 0) {
        lo = b->min, hi = b->max;
        if (!slash) *star = true;
    } else {
        char *dash = strchr(expr, '-');
        if (dash) *dash = 0;
        if (value(expr, strlen(expr), b, &lo) < 0) return fail(err, "failed to parse int from %s", expr);
        if (dash) {
            if (value(dash + 1, strlen(dash + 1), b, &hi) < 0) return fail(err, "failed to parse int from %s", dash + 1);
        } else {
            hi = slash ? b->max : lo; /* "N/STEP" runs from N to the end */
        }
    }
    if (lo < b->min) return fail(err, "beginning of range below minimum: %s", orig);
    if (hi > b->max) return fail(err, "end of range above maximum: %s", orig);
    if (lo > hi) return fail(err, "beginning of range after end: %s", orig);
    for (int v = lo; v <= hi; v += step) *bits |= 1ull << v;
    return 0;
}

static int field(const char *s, const struct bounds *b, uint64_t *bits, bool *star, char **err) {
    *bits = 0;
    *star = false;
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        int r = range(p, n, b, bits, star, err);
        if (r < 0) return r;
        if (!comma) return 0;
        p = comma + 1;
    }
}

static const struct {
    const char *name, *spec;
} DESCRIPTORS[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
                   {"@weekly", "0 0 * * 0"},  {"@daily", "0 0 * * *"},     {"@midnight", "0 0 * * *"},
                   {"@hourly", "0 * * * *"}};

int kite_cron_parse(const char *spec, struct kite_cron *ret, char **ret_err) {
    if (ret_err) *ret_err = NULL;
    while (*spec == ' ' || *spec == '\t') spec++;
    if (!*spec) return fail(ret_err, "empty spec string%s", "");
    if (strncmp(spec, "TZ=", 3) == 0 || strncmp(spec, "CRON_TZ=", 8) == 0)
        return fail(ret_err, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead%s", "");
    if (*spec == '@') {
        for (size_t i = 0; i < KITE_ARRAY_SIZE(DESCRIPTORS); i++)
            if (strcmp(spec, DESCRIPTORS[i].name) == 0) return kite_cron_parse(DESCRIPTORS[i].spec, ret, ret_err);
        return fail(ret_err, "unrecognized descriptor: %s", spec);
    }
    _cleanup_free_ char *copy = kite_strdup(spec);
    char *f[6], *save = NULL;
    int n = 0;
    for (char *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (n == 5) return fail(ret_err, "expected exactly 5 fields, found 6 or more: %s", spec);
        f[n++] = t;
    }
    if (n != 5) {
        if (ret_err) *ret_err = kite_asprintf("expected exactly 5 fields, found %d: [%s]", n, spec);
        return -EINVAL;
    }
    struct kite_cron c = {0};
    bool star;
    int r;
    if ((r = field(f[0], &B_MIN, &c.minute, &star, ret_err)) < 0 || (r = field(f[1], &B_HOUR, &c.hour, &star, ret_err)) < 0 ||
        (r = field(f[2], &B_DOM, &c.dom, &c.dom_star, ret_err)) < 0 ||
        (r = field(f[3], &B_MONTH, &c.month, &star, ret_err)) < 0 || (r = field(f[4], &B_DOW, &c.dow, &c.dow_star, ret_err)) < 0)
        return r;
    *ret = c;
    return 0;
}

/* ---- time zones: TZif files (RFC 8536), the version 1 (32-bit) data block ---- */

struct kite_tz {
    size_t n;
    int64_t *at;       /* transition times */
    long *off_after;   /* the UTC offset from at[i] on */
    long off_before;   /* before the first transition (the first standard type) */
};

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

int kite_tz_load(const char *name, struct kite_tz **ret) {
    if (!name || !*name || name[0] == '/' || strstr(name, "..")) return -EINVAL;
    _cleanup_free_ char *path = kite_asprintf("%s/%s", KITE_CRON_ZONEINFO, name);
    _cleanup_free_ char *d = NULL;
    size_t len = 0;
    int r = kite_read_file(path, 1 << 20, &d, &len);
    if (r < 0) return r == -ENOENT || r == -EISDIR ? -ENOENT : r;
    const unsigned char *p = (const unsigned char *)d;
    if (len < 44 || memcmp(p, "TZif", 4) != 0) return -EINVAL;
    uint32_t isutc = be32(p + 20), isstd = be32(p + 24), leap = be32(p + 28), timecnt = be32(p + 32),
             typecnt = be32(p + 36), charcnt = be32(p + 40);
    size_t need = 44 + (size_t)timecnt * 5 + (size_t)typecnt * 6 + charcnt + (size_t)leap * 8 + isstd + isutc;
    if (typecnt == 0 || timecnt > KITE_CRON_TZ_MAX_TRANSITIONS || typecnt > 256 || need > len) return -EINVAL;
    struct kite_tz *tz = kite_calloc(1, sizeof *tz);
    tz->n = timecnt;
    tz->at = kite_calloc(timecnt + 1, sizeof *tz->at);
    tz->off_after = kite_calloc(timecnt + 1, sizeof *tz->off_after);
    const unsigned char *times = p + 44, *idx = times + (size_t)timecnt * 4, *types = idx + timecnt;
    for (uint32_t i = 0; i < timecnt; i++) {
        unsigned t = idx[i];
        if (t >= typecnt) {
            kite_tz_free(tz);
            return -EINVAL;
        }
        tz->at[i] = (int32_t)be32(times + (size_t)i * 4);
        tz->off_after[i] = (int32_t)be32(types + (size_t)t * 6);
    }
    tz->off_before = (int32_t)be32(types);
    *ret = tz;
    return 0;
}

void kite_tz_free(struct kite_tz *tz) {
    if (!tz) return;
    free(tz->at);
    free(tz->off_after);
    free(tz);
}

long kite_tz_offset(const struct kite_tz *tz, time_t t) {
    if (!tz) {
        struct tm tm;
        localtime_r(&t, &tm);
        return tm.tm_gmtoff;
    }
    if (tz->n == 0 || t < tz->at[0]) return tz->n ? tz->off_before : tz->off_before;
    size_t lo = 0, hi = tz->n; /* the last transition at or before t */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (tz->at[mid] <= t) lo = mid;
        else hi = mid;
    }
    return tz->off_after[lo];
}

static bool day_matches(const struct kite_cron *c, const struct tm *tm) {
    bool dom = c->dom >> tm->tm_mday & 1, dow = c->dow >> tm->tm_wday & 1;
    if (!(c->month >> (tm->tm_mon + 1) & 1)) return false;
    return c->dom_star || c->dow_star ? dom && dow : dom || dow;
}

time_t kite_cron_next(const struct kite_cron *c, const struct kite_tz *tz, time_t t) {
    time_t at = t - (t % 60 + 60) % 60 + 60; /* the next whole minute */
    time_t end = t + (time_t)KITE_CRON_SEARCH_YEARS * 366 * 86400;
    while (at <= end) {
        time_t local = at + kite_tz_offset(tz, at);
        struct tm tm;
        gmtime_r(&local, &tm);
        if (!day_matches(c, &tm)) { /* to the next local midnight */
            at += (time_t)(86400 - (tm.tm_hour * 3600 + tm.tm_min * 60));
            continue;
        }
        if (!(c->hour >> tm.tm_hour & 1)) { /* to the next local hour */
            at += (time_t)(3600 - tm.tm_min * 60);
            continue;
        }
        if (c->minute >> tm.tm_min & 1) return at;
        at += 60;
    }
    return -1;
}
