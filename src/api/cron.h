/* CronJob schedules, as Kubernetes reads them (robfig/cron/v3's ParseStandard): five fields
 * "minute hour day-of-month month day-of-week", each `*`, `?` (day fields), N, N-M, with /STEP,
 * comma lists, month names JAN-DEC and day names SUN-SAT; or a descriptor (@yearly, @annually,
 * @monthly, @weekly, @daily, @midnight, @hourly). When both day fields are restricted a day
 * matches either (cron's rule); when one is `*` both must match. Times are judged in a time
 * zone: the process's local one, or a TZif file of /usr/share/zoneinfo (spec.timeZone). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define KITE_CRON_SEARCH_YEARS 5 /* next() gives up past this (robfig's bound) */
#define KITE_CRON_ZONEINFO "/usr/share/zoneinfo"
#define KITE_CRON_TZ_MAX_TRANSITIONS 4096

struct kite_cron {
    uint64_t minute, hour, dom, month, dow; /* bit i: value i matches */
    bool dom_star, dow_star;
};

/* 0, or -EINVAL with *ret_err (malloc'ed; may be NULL) in robfig's words. */
int kite_cron_parse(const char *spec, struct kite_cron *ret, char **ret_err);

struct kite_tz; /* a loaded zone; NULL = the process's local time */
/* Loads NAME from KITE_CRON_ZONEINFO ("UTC", "Europe/Paris"): 0, -ENOENT (unknown zone) or
 * -EINVAL (a name with "..", a leading '/', or a file that is no TZif). */
int kite_tz_load(const char *name, struct kite_tz **ret);
void kite_tz_free(struct kite_tz *tz);
/* The zone's UTC offset in seconds at t. */
long kite_tz_offset(const struct kite_tz *tz, time_t t);

/* The first minute strictly after t (Unix seconds) the schedule matches, in tz; -1 if none
 * within KITE_CRON_SEARCH_YEARS. */
time_t kite_cron_next(const struct kite_cron *c, const struct kite_tz *tz, time_t t);
