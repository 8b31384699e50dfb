#include "cmd/flags.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/quantity.h"
#include "base/base.h"
#include "base/buf.h"
#include "base/clock.h"

#define HELP_COLUMN 36 /* where the help texts start */
#define HELP_WIDTH 80  /* help text per line, after the column, before the extra goes to its own line */

void kite_cmd_flag_list_release(struct flag_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    *l = (struct flag_list){0};
}

/* "1h", "5m", "1s", "250ms": the unit that divides ns evenly, for help and messages. */
static void format_duration(int64_t ns, char out[32]) {
    static const struct {
        int64_t ns;
        const char *unit;
    } units[] = {{3600 * KITE_NS_PER_SEC, "h"}, {60 * KITE_NS_PER_SEC, "m"}, {KITE_NS_PER_SEC, "s"},
                 {1000000, "ms"},              {1000, "us"}};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(units); i++)
        if (ns != 0 && ns % units[i].ns == 0) {
            snprintf(out, 32, "%" PRId64 "%s", ns / units[i].ns, units[i].unit);
            return;
        }
    snprintf(out, 32, "%" PRId64 "ns", ns);
}

static const char *value_name(const struct flag *f) {
    if (f->arg) return f->arg;
    switch (f->kind) {
    case FLAG_INT: return "N";
    case FLAG_DURATION: return "DURATION";
    case FLAG_LIST: return "A,B,...";
    case FLAG_FLOAT: return "X";
    case FLAG_BOOL: return "";
    default: return "VALUE";
    }
}

/* "  --name VALUE   help (extra)": a name too long for its column, or an extra too long for
 * the help's last line, continues on the next line at the help column. */
static void print_row(const char *left, const char *help, const char *extra) {
    int w = printf("  %s", left);
    if (w >= HELP_COLUMN) printf("\n%*s", HELP_COLUMN + 1, "");
    else printf("%*s ", HELP_COLUMN - w, "");
    size_t line = 0;
    for (const char *p = help; *p; p++, line++) {
        putchar(*p);
        if (*p == '\n') printf("%*s", HELP_COLUMN + 1, ""), line = (size_t)-1;
    }
    if (extra && *extra) {
        if (line + strlen(extra) + 3 > HELP_WIDTH) printf("\n%*s(%s)", HELP_COLUMN + 1, "", extra);
        else printf(" (%s)", extra);
    }
    putchar('\n');
}

const char *kite_cmd_flags_prog_prefix(const char *cmd) {
    return strncmp(cmd, "kite-", 5) == 0 ? "" : "kite ";
}
/* Two printf arguments for a "%s%s" naming the command: "kite agent", "kite-agent". */
#define PROG(cmd) kite_cmd_flags_prog_prefix(cmd), (cmd)

static void usage(const char *cmd, const char *summary, const struct flag *flags) {
    printf("usage: %s%s", PROG(cmd));
    for (const struct flag *f = flags; f->name; f++)
        if (f->required) printf(" --%s %s", f->name, value_name(f));
    printf(" [flags]\n\n%s\n\nflags:\n", summary);
    for (const struct flag *f = flags; f->name; f++) {
        _cleanup_free_ char *left = kite_asprintf("-%s%s%s%s", f->name[1] ? "-" : "", f->name, f->kind == FLAG_BOOL ? "" : " ",
                                                  value_name(f));
        struct kite_buf extra = {0};
        char d[32];
        if (f->kind == FLAG_INT && !f->forward) kite_buf_printf(&extra, "from %lld to %lld", (long long)f->min, (long long)f->max);
        if (f->kind == FLAG_FLOAT) kite_buf_printf(&extra, "from %g to %g", f->fmin, f->fmax);
        if (f->kind == FLAG_DURATION && !f->forward && f->min > 0) {
            format_duration(f->min, d);
            kite_buf_printf(&extra, "at least %s", d);
        }
        if (f->required) kite_buf_printf(&extra, "%srequired", extra.len ? ", " : "");
        const char *def = f->def && *f->def ? f->def : f->def_note;
        if (def) kite_buf_printf(&extra, "%sdefault: %s", extra.len ? ", " : "", def);
        print_row(left, f->help, extra.p);
        kite_buf_release(&extra);
    }
    print_row("--help", "show this help", NULL);
}

static bool parse_bool(const char *v, bool *ret) {
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0) *ret = true;
    else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) *ret = false;
    else return false;
    return true;
}

/* Stores v in f's target; `again` = the flag was given before (a list appends). */
static int set(const char *cmd, const struct flag *f, const char *v, bool again) {
    int64_t n = 0;
    char d[32];
    switch (f->kind) {
    case FLAG_STRING:
        *f->to.str = v;
        return 0;
    case FLAG_INT:
        if (kite_parse_int64(v, &n) < 0 || n < f->min || n > f->max) {
            fprintf(stderr, "%s%s: --%s: \"%s\" is not a number from %lld to %lld\n", PROG(cmd), f->name, v,
                    (long long)f->min, (long long)f->max);
            return -1;
        }
        *f->to.num = n;
        return 0;
    case FLAG_DURATION:
        if (kite_duration_parse(v, &n) < 0 || n < f->min) {
            format_duration(f->min, d);
            fprintf(stderr, "%s%s: --%s: \"%s\" is not a duration of at least %s\n", PROG(cmd), f->name, v,
                    f->min > 0 ? d : "0s");
            return -1;
        }
        *f->to.num = n;
        return 0;
    case FLAG_FLOAT: {
        char *end = NULL;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno || !(x >= f->fmin && x <= f->fmax)) {
            fprintf(stderr, "%s%s: --%s: \"%s\" is not a number from %g to %g\n", PROG(cmd), f->name, v, f->fmin, f->fmax);
            return -1;
        }
        *f->to.real = x;
        return 0;
    }
    case FLAG_BOOL:
        if (!parse_bool(v, f->to.boolean)) {
            fprintf(stderr, "%s%s: --%s: \"%s\" is not true or false\n", PROG(cmd), f->name, v);
            return -1;
        }
        return 0;
    case FLAG_LIST:
        if (!again) kite_cmd_flag_list_release(f->to.list);
        for (const char *p = v; *p;) {
            size_t len = strcspn(p, ",");
            if (len) {
                f->to.list->v = kite_realloc(f->to.list->v, (f->to.list->n + 1) * sizeof(char *));
                f->to.list->v[f->to.list->n++] = kite_strndup(p, len);
            }
            p += len;
            if (*p) p++;
        }
        return 0;
    }
    return -1;
}

int kite_cmd_flags_parse(const char *cmd, const char *summary, const struct flag *flags, int argc, char **argv,
                int (*forward)(const char *name, const char *value, void *ud), void *ud) {
    size_t n_flags = 0;
    while (flags[n_flags].name) n_flags++;
    _cleanup_free_ bool *given = kite_calloc(n_flags + 1, sizeof(bool));
    for (const struct flag *f = flags; f->name; f++)
        if (!f->forward && f->def && set(cmd, f, f->def, false) < 0) return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(cmd, summary, flags);
            return 1;
        }
        /* --name, or -x for a one-letter name (pflag's shorthand: kubectl's -o) */
        bool shorthand = a[0] == '-' && a[1] && a[1] != '-' && (!a[2] || a[2] == '=');
        if (!shorthand && (strncmp(a, "--", 2) != 0 || !a[2])) {
            fprintf(stderr, "%s%s: unexpected argument \"%s\" (see %s%s --help)\n", PROG(cmd), a, PROG(cmd));
            return -1;
        }
        const char *start = a + (shorthand ? 1 : 2), *eq = strchr(start, '=');
        _cleanup_free_ char *name = eq ? kite_strndup(start, (size_t)(eq - start)) : kite_strdup(start);
        size_t k = 0;
        while (k < n_flags && strcmp(flags[k].name, name) != 0) k++;
        if (k == n_flags) {
            fprintf(stderr, "%s%s: unknown flag --%s (see %s%s --help)\n", PROG(cmd), name, PROG(cmd));
            return -1;
        }
        const struct flag *f = &flags[k];
        const char *value = eq ? eq + 1 : NULL;
        bool ignored;
        if (!value && f->kind == FLAG_BOOL) value = i + 1 < argc && parse_bool(argv[i + 1], &ignored) ? argv[++i] : "true";
        else if (!value && i + 1 < argc) value = argv[++i];
        if (!value) {
            fprintf(stderr, "%s%s: flag --%s needs a value\n", PROG(cmd), name);
            return -1;
        }
        if (f->forward ? forward(f->name, value, ud) < 0 : set(cmd, f, value, given[k]) < 0) return -1;
        given[k] = true;
    }
    for (size_t k = 0; k < n_flags; k++) {
        bool excused = false;
        for (size_t u = 0; flags[k].unless && u < n_flags; u++)
            excused |= given[u] && strcmp(flags[u].name, flags[k].unless) == 0;
        if (flags[k].required && !given[k] && !excused) {
            fprintf(stderr, "%s%s: --%s is required\n", PROG(cmd), flags[k].name);
            return -1;
        }
    }
    return 0;
}
