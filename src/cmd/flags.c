#include "cmd/flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(const char *cmd, const char *summary, const struct flag *flags, const char *other_help) {
    printf("usage: kite %s [flags]\n\n%s\n\nflags:\n", cmd, summary);
    for (const struct flag *f = flags; f->name; f++) {
        char left[96];
        snprintf(left, sizeof left, "%s%s", f->name, f->kind == FLAG_BOOL ? "" : " VALUE");
        printf("  --%-34s %s\n", left, f->help);
    }
    if (other_help) printf("%s", other_help);
    printf("  --%-34s %s\n", "help", "show this help");
}

int flags_parse(const char *cmd, const char *summary, const struct flag *flags, int argc, char **argv,
                int (*other)(const char *name, const char *value, void *ud), void *ud, const char *other_help) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(cmd, summary, flags, other_help);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "kite %s: unexpected argument '%s'\n", cmd, a);
            return -1;
        }
        char name[128];
        const char *eq = strchr(a + 2, '='), *value = NULL;
        size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, a + 2, n);
        name[n] = 0;
        const struct flag *f = flags;
        while (f->name && strcmp(f->name, name) != 0) f++;
        bool is_bool = f->name && f->kind == FLAG_BOOL;
        if (eq) value = eq + 1;
        else if (!is_bool && i + 1 < argc && (f->name || strncmp(argv[i + 1], "--", 2) != 0)) value = argv[++i];
        if (!f->name) {
            if (!other) {
                fprintf(stderr, "kite %s: unknown flag --%s (see kite %s --help)\n", cmd, name, cmd);
                return -1;
            }
            if (other(name, value ? value : "true", ud) < 0) return -1;
            continue;
        }
        if (is_bool) {
            *f->boolean = !value || strcmp(value, "true") == 0 || strcmp(value, "1") == 0;
            continue;
        }
        if (!value) {
            fprintf(stderr, "kite %s: flag --%s needs a value\n", cmd, name);
            return -1;
        }
        *f->str = value;
    }
    return 0;
}
