/* A small long-flag parser shared by the subcommands: --name value or --name=value; a flag
 * of kind FLAG_BOOL takes an optional =value. Flags are a table, as git's parse-options. */
#pragma once
#include <stdbool.h>

enum flag_kind { FLAG_STRING, FLAG_BOOL };

struct flag {
    const char *name;
    enum flag_kind kind;
    const char *help;
    const char **str; /* FLAG_STRING target */
    bool *boolean;    /* FLAG_BOOL target */
};

/* Parses argv[1..]. Flags not in the table go to `other(name, value, ud)` when it is given
 * (returning <0 = error already printed), else are an error. Prints the usage for --help and
 * returns 1; returns 0 when parsed, -1 on error (message printed to stderr). */
int flags_parse(const char *cmd, const char *summary, const struct flag *flags, int argc, char **argv,
                int (*other)(const char *name, const char *value, void *ud), void *ud, const char *other_help);

#define FLAG_STR(name, help, target) {name, FLAG_STRING, help, target, NULL}
#define FLAG_BOOLEAN(name, help, target) {name, FLAG_BOOL, help, NULL, target}
#define FLAG_END {NULL, FLAG_STRING, NULL, NULL, NULL}
