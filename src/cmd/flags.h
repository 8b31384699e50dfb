/* The subcommands' long flags: one table per command (as git's parse-options), each row a
 * name, a kind, its help, its default and a typed target. kite_cmd_flags_parse() parses --name value
 * and --name=value, checks every value the same way ("kite CMD: --threads: \"x\" is not a
 * number from 1 to 256") and prints the help, defaults included, from the rows. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum flag_kind {
    FLAG_STRING,
    FLAG_INT,      /* decimal, from min to max */
    FLAG_DURATION, /* Go duration ("90s", "1h30m"), at least min (ns); stored in ns */
    FLAG_BOOL,     /* --name, --name=true|false, or --name true|false */
    FLAG_LIST,     /* comma-separated; given again, it appends (as pflag's string slices) */
    FLAG_FLOAT,    /* a decimal number from fmin to fmax */
};

/* A FLAG_LIST target: malloc'ed strings; kite_cmd_flag_list_release() frees them. */
struct flag_list {
    char **v;
    size_t n;
};
void kite_cmd_flag_list_release(struct flag_list *l);

struct flag {
    const char *name;
    enum flag_kind kind;
    const char *arg;      /* the value's name in the help ("FILE"); NULL: the kind's ("N", "DURATION") */
    const char *help;     /* may hold '\n' */
    const char *def;      /* default, parsed into the target before the command line; shown in the help */
    const char *def_note; /* shown as the default when the command computes it (def is NULL) */
    int64_t min, max;     /* FLAG_INT bounds; FLAG_DURATION: min, in ns */
    double fmin, fmax;    /* FLAG_FLOAT bounds */
    bool required;
    const char *unless;   /* a required flag is not needed when this (boolean) flag is given */
    /* Not stored here: handed as given to flags_parse's forward() (kubelet-style agent flags,
     * which the agent's config code checks as it checks its config file). */
    bool forward;
    union {
        const char **str;
        int64_t *num; /* FLAG_INT, FLAG_DURATION (ns) */
        bool *boolean;
        struct flag_list *list;
        double *real;
    } to;
};

/* Parses argv[1..] into the rows' targets; rows end with FLAG_END. Returns 0 when parsed, 1
 * after printing the help for --help or -h, -1 after printing why to stderr. forward(name,
 * value, ud) takes the rows marked forward (returning <0 = error already printed); it may be
 * NULL when no row is. */
int kite_cmd_flags_parse(const char *cmd, const char *summary, const struct flag *flags, int argc, char **argv,
                int (*forward)(const char *name, const char *value, void *ud), void *ud);

/* "kite " for a subcommand's name ("agent" -> "kite agent"); "" for a program of its own
 * ("kite-agent"): messages and the help name the command as it was run. */
const char *kite_cmd_flags_prog_prefix(const char *cmd);

/* Rows. Trailing arguments are more designators: FLAG_INT(..., .required = true). */
#define FLAG_STR(n, a, h, d, t, ...) {.name = (n), .kind = FLAG_STRING, .arg = (a), .help = (h), .def = (d), .to.str = (t), __VA_ARGS__}
#define FLAG_INT(n, h, d, lo, hi, t, ...)                                                                            \
    {.name = (n), .kind = FLAG_INT, .help = (h), .def = (d), .min = (lo), .max = (hi), .to.num = (t), __VA_ARGS__}
#define FLAG_DURATION(n, h, d, lo, t, ...)                                                                           \
    {.name = (n), .kind = FLAG_DURATION, .help = (h), .def = (d), .min = (lo), .to.num = (t), __VA_ARGS__}
#define FLAG_BOOLEAN(n, h, t, ...) {.name = (n), .kind = FLAG_BOOL, .help = (h), .to.boolean = (t), __VA_ARGS__}
#define FLAG_LIST(n, a, h, d, t, ...) {.name = (n), .kind = FLAG_LIST, .arg = (a), .help = (h), .def = (d), .to.list = (t), __VA_ARGS__}
#define FLAG_FORWARD(n, k, a, h, d, ...) {.name = (n), .kind = (k), .arg = (a), .help = (h), .def = (d), .forward = true, __VA_ARGS__}
#define FLAG_FLOAT(n, h, d, lo, hi, t, ...)                                                                          \
    {.name = (n), .kind = FLAG_FLOAT, .help = (h), .def = (d), .fmin = (lo), .fmax = (hi), .to.real = (t), __VA_ARGS__}
#define FLAG_END {.name = NULL}
