/* Go's time layouts as Kubernetes' metav1.Time and MicroTime use them (gotime.h). */
#include "base/gotime.h"

#include "base/clock.h"

#include <stdio.h>

#define LAYOUT_TIME "2006-01-02T15:04:05Z07:00"
#define LAYOUT_MICRO "2006-01-02T15:04:05.000000Z07:00"


/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static unsigned days_in(unsigned m, int64_t y) {
    static const unsigned dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

/* n digits at s (exactly) into *v. */
static bool digits(const char *s, int n, int *v) {
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        *v = *v * 10 + (s[i] - '0');
    }
    return true;
}

/* Parses s; on error, *err (malloc'ed) as Go's time.Parse words it for layout. */
int kite_gotime_parse(const char *s, bool micro, int64_t *ret_sec, int32_t *ret_nsec, char **err) {
    const char *layout = micro ? LAYOUT_MICRO : LAYOUT_TIME;
    static const struct { int width; const char *elem; char after; } parts[] = {
        {4, "2006", '-'}, {2, "01", '-'}, {2, "02", 'T'}, {2, "15", ':'}, {2, "04", ':'}, {2, "05", 0},
    };
    static const char *const seps[] = {"-", "-", "T", ":", ":"};
    int v[6];
    const char *p = s;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(parts); i++) {
        if (!digits(p, parts[i].width, &v[i])) {
            if (err) *err = kite_asprintf("parsing time \"%s\" as \"%s\": cannot parse \"%s\" as \"%s\"", s, layout, p, parts[i].elem);
            return -EINVAL;
        }
        p += parts[i].width;
        if (parts[i].after) {
            if (*p != parts[i].after) {
                if (err) *err = kite_asprintf("parsing time \"%s\" as \"%s\": cannot parse \"%s\" as \"%s\"", s, layout, p, seps[i]);
                return -EINVAL;
            }
            p++;
        }
    }
    const char *range = NULL;
    if (v[1] < 1 || v[1] > 12) range = "month";
    else if (v[2] < 1 || (unsigned)v[2] > days_in((unsigned)v[1], v[0])) range = "day";
    else if (v[3] > 23) range = "hour";
    else if (v[4] > 59) range = "minute";
    else if (v[5] > 59) range = "second";
    if (range) {
        if (err) *err = kite_asprintf("parsing time \"%s\": %s out of range", s, range);
        return -EINVAL;
    }
    int64_t frac = 0;
    if (*p == '.' && p[1] >= '0' && p[1] <= '9') {
        int64_t scale = KITE_NS_PER_SEC / 10;
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10) frac += (*p - '0') * scale;
    }
    int64_t off = 0;
    if (*p == 'Z') {
        p++;
    } else if ((*p == '+' || *p == '-') && digits(p + 1, 2, &v[0]) && p[3] == ':' && digits(p + 4, 2, &v[1])) {
        if (v[0] > 23 || v[1] > 59) {
            if (err) *err = kite_asprintf("parsing time \"%s\": time zone offset out of range", s);
            return -EINVAL;
        }
        off = (int64_t)(v[0] * 3600 + v[1] * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        if (err) *err = kite_asprintf("parsing time \"%s\" as \"%s\": cannot parse \"%s\" as \"Z07:00\"", s, layout, p);
        return -EINVAL;
    }
    if (*p) {
        if (err) *err = kite_asprintf("parsing time \"%s\": extra text: \"%s\"", s, p);
        return -EINVAL;
    }
    /* v[0..5] were overwritten by the offset only after use; recompute from the text */
    int y, mo, d, h, mi, se;
    digits(s, 4, &y), digits(s + 5, 2, &mo), digits(s + 8, 2, &d);
    digits(s + 11, 2, &h), digits(s + 14, 2, &mi), digits(s + 17, 2, &se);
    int64_t secs = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se - off;
    int64_t ys;
    unsigned m2, d2;
    civil_from_days(secs >= 0 ? secs / 86400 : (secs - 86399) / 86400, &ys, &m2, &d2);
    if (ys < 0 || ys > 9999) {
        if (err) *err = kite_strdup("Time.MarshalJSON: year outside of range [0,9999]");
        return -EINVAL;
    }
    *ret_sec = secs; /* years 0..9999 overflow int64 nanoseconds: kept apart */
    *ret_nsec = (int32_t)frac;
    return 0;
}

/* "2006-01-02T15:04:05Z" or with ".000000" (micro). out holds 32 bytes. */
static void format_time(int64_t secs, int32_t sub, bool micro, char out[32]) {
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400, rem = secs - days * 86400;
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    int n = snprintf(out, 32, "%04d-%02u-%02uT%02d:%02d:%02d", (int)y, m, d, (int)(rem / 3600), (int)(rem / 60 % 60),
                     (int)(rem % 60));
    if (micro) snprintf(out + n, (size_t)(32 - n), ".%06dZ", (int)(sub / 1000));
    else snprintf(out + n, (size_t)(32 - n), "Z");
}

int kite_gotime_format(int64_t sec, int32_t nsec, bool micro, char out[32]) {
    /* 0000-01-01 and the last second of 9999 */
    if (sec < -62167219200LL || sec > 253402300799LL || nsec < 0 || nsec >= KITE_NS_PER_SEC) return -EINVAL;
    format_time(sec, nsec, micro, out);
    return 0;
}
