/* The subcommands' flag table: typed rows, defaults, bounds and the one message for a bad value. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>

#include "base/clock.h"
#include "cmd/flags.h"

#define ARGV(...) ((char *[]){"cmd", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"cmd", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(flags, ...) kite_cmd_flags_parse("test", "A test.", flags, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), NULL, NULL)

struct opts {
    const char *name;
    int64_t threads, ttl;
    bool on;
    struct flag_list modes;
};

static void table(struct opts *o, struct flag out[7]) {
    const struct flag f[] = {
        FLAG_STR("name", "NAME", "a name", "dflt", &o->name),
        FLAG_INT("threads", "worker threads", "4", 1, 256, &o->threads),
        FLAG_DURATION("ttl", "how long", "1h", KITE_NS_PER_SEC, &o->ttl),
        FLAG_BOOLEAN("on", "switch", &o->on),
        FLAG_LIST("modes", "MODE,...", "modes in order", "Node,RBAC", &o->modes),
        FLAG_END,
    };
    memcpy(out, f, sizeof f);
}

Test(flags, defaults_come_from_the_rows) {
    struct opts o = {0};
    struct flag f[7];
    table(&o, f);
    char *argv[] = {"cmd", NULL};
    cr_assert_eq(kite_cmd_flags_parse("test", "A test.", f, 1, argv, NULL, NULL), 0);
    cr_assert_str_eq(o.name, "dflt");
    cr_assert_eq(o.threads, 4);
    cr_assert_eq(o.ttl, 3600 * KITE_NS_PER_SEC);
    cr_assert_not(o.on);
    cr_assert_eq(o.modes.n, 2);
    cr_assert_str_eq(o.modes.v[0], "Node");
    cr_assert_str_eq(o.modes.v[1], "RBAC");
    kite_cmd_flag_list_release(&o.modes);
}

Test(flags, typed_values_both_spellings) {
    struct opts o = {0};
    struct flag f[7];
    table(&o, f);
    cr_assert_eq(PARSE(f, "--name", "x", "--threads=256", "--ttl", "90s", "--on", "--modes", "AlwaysAllow"), 0);
    cr_assert_str_eq(o.name, "x");
    cr_assert_eq(o.threads, 256);
    cr_assert_eq(o.ttl, 90 * KITE_NS_PER_SEC);
    cr_assert(o.on);
    cr_assert_eq(o.modes.n, 1, "a given list replaces the default");
    cr_assert_str_eq(o.modes.v[0], "AlwaysAllow");
    kite_cmd_flag_list_release(&o.modes);
}

Test(flags, bool_takes_an_optional_true_or_false) {
    struct opts o = {0};
    struct flag f[7];
    table(&o, f);
    cr_assert_eq(PARSE(f, "--on", "false", "--name", "n"), 0);
    cr_assert_not(o.on);
    cr_assert_eq(PARSE(f, "--on=true"), 0);
    cr_assert(o.on);
    cr_assert_eq(PARSE(f, "--on=0"), 0);
    cr_assert_not(o.on);
    kite_cmd_flag_list_release(&o.modes);
}

Test(flags, list_given_again_appends) {
    struct opts o = {0};
    struct flag f[7];
    table(&o, f);
    cr_assert_eq(PARSE(f, "--modes=Node,,RBAC", "--modes", "Webhook"), 0);
    cr_assert_eq(o.modes.n, 3);
    cr_assert_str_eq(o.modes.v[0], "Node");
    cr_assert_str_eq(o.modes.v[1], "RBAC");
    cr_assert_str_eq(o.modes.v[2], "Webhook");
    kite_cmd_flag_list_release(&o.modes);
}

static int parse_err(const char *a, const char *b) {
    struct opts o = {0};
    struct flag f[7];
    table(&o, f);
    char *argv[] = {"cmd", (char *)a, (char *)b, NULL};
    int r = kite_cmd_flags_parse("test", "A test.", f, b ? 3 : 2, argv, NULL, NULL);
    kite_cmd_flag_list_release(&o.modes);
    return r;
}

Test(flags, int_out_of_range, .init = cr_redirect_stderr) {
    cr_assert_eq(parse_err("--threads", "0"), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("kite test: --threads: \"0\" is not a number from 1 to 256\n");
}

Test(flags, int_not_a_number, .init = cr_redirect_stderr) {
    cr_assert_eq(parse_err("--threads=12x", NULL), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("kite test: --threads: \"12x\" is not a number from 1 to 256\n");
}

Test(flags, duration_below_minimum, .init = cr_redirect_stderr) {
    cr_assert_eq(parse_err("--ttl", "500ms"), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("kite test: --ttl: \"500ms\" is not a duration of at least 1s\n");
}

Test(flags, bad_bool, .init = cr_redirect_stderr) {
    cr_assert_eq(parse_err("--on=yes", NULL), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("kite test: --on: \"yes\" is not true or false\n");
}

Test(flags, unknown_flag_and_missing_value, .init = cr_redirect_stderr) {
    cr_assert_eq(parse_err("--nope", NULL), -1);
    cr_assert_eq(parse_err("--name", NULL), -1);
    cr_assert_eq(parse_err("stray", NULL), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("kite test: unknown flag --nope (see kite test --help)\n"
                            "kite test: flag --name needs a value\n"
                            "kite test: unexpected argument \"stray\" (see kite test --help)\n");
}

Test(flags, required, .init = cr_redirect_stderr) {
    const char *dir = NULL;
    const struct flag f[] = {FLAG_STR("data-dir", "DIR", "where", NULL, &dir, .required = true), FLAG_END};
    char *argv[] = {"cmd", NULL};
    cr_assert_eq(kite_cmd_flags_parse("test", "A test.", f, 1, argv, NULL, NULL), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("kite test: --data-dir is required\n");
}

struct seen {
    char buf[256];
};
static int record(const char *name, const char *value, void *ud) {
    struct seen *s = ud;
    size_t n = strlen(s->buf);
    snprintf(s->buf + n, sizeof s->buf - n, "%s=%s;", name, value);
    return strcmp(value, "bad") == 0 ? -1 : 0;
}

Test(flags, forwarded_rows_go_to_the_callback_in_order) {
    struct seen s = {{0}};
    const struct flag f[] = {
        FLAG_FORWARD("max-pods", FLAG_INT, NULL, "pods", "110"),
        FLAG_FORWARD("register-node", FLAG_BOOL, NULL, "register", "true"),
        FLAG_END,
    };
    char *argv[] = {"cmd", "--register-node", "false", "--max-pods", "7", "--register-node", NULL};
    cr_assert_eq(kite_cmd_flags_parse("test", "A test.", f, 6, argv, record, &s), 0);
    cr_assert_str_eq(s.buf, "register-node=false;max-pods=7;register-node=true;", "defaults are not forwarded");
    char *bad[] = {"cmd", "--max-pods", "bad", NULL};
    cr_assert_eq(kite_cmd_flags_parse("test", "A test.", f, 3, bad, record, &s), -1);
}

Test(flags, help_prints_defaults_from_the_rows, .init = cr_redirect_stdout) {
    struct opts o = {0};
    struct flag f[7];
    table(&o, f);
    cr_assert_eq(PARSE(f, "--help"), 1);
    kite_cmd_flag_list_release(&o.modes);
    fflush(stdout);
    char out[4096] = {0};
    FILE *fp = cr_get_redirected_stdout();
    size_t n = fread(out, 1, sizeof out - 1, fp);
    out[n] = 0;
    cr_assert(strstr(out, "usage: kite test [flags]"), "%s", out);
    cr_assert(strstr(out, "--name NAME"), "%s", out);
    cr_assert(strstr(out, "a name (default: dflt)"), "%s", out);
    cr_assert(strstr(out, "worker threads (from 1 to 256, default: 4)"), "%s", out);
    cr_assert(strstr(out, "how long (at least 1s, default: 1h)"), "%s", out);
    cr_assert(strstr(out, "modes in order (default: Node,RBAC)"), "%s", out);
    cr_assert(strstr(out, "--help"), "%s", out);
}

Test(flags, float_values_and_bounds, .init = cr_redirect_stderr) {
    double rate = 0;
    const struct flag f[] = {FLAG_FLOAT("rate", "a share", "0.55", 0, 1, &rate), FLAG_END};
    cr_assert_eq(PARSE(f, "--help-not", "x"), -1);
    char *argv[] = {"cmd", NULL};
    cr_assert_eq(kite_cmd_flags_parse("test", "A test.", f, 1, argv, NULL, NULL), 0);
    cr_assert_float_eq(rate, 0.55, 1e-12);
    cr_assert_eq(PARSE(f, "--rate=0.01"), 0);
    cr_assert_float_eq(rate, 0.01, 1e-12);
    cr_assert_eq(PARSE(f, "--rate", "1.5"), -1);
    cr_assert_eq(PARSE(f, "--rate", "0.5x"), -1);
    cr_assert_eq(PARSE(f, "--rate", "nan"), -1);
    cr_assert_eq(PARSE(f, "--rate", ""), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("kite test: unknown flag --help-not (see kite test --help)\n"
                            "kite test: --rate: \"1.5\" is not a number from 0 to 1\n"
                            "kite test: --rate: \"0.5x\" is not a number from 0 to 1\n"
                            "kite test: --rate: \"nan\" is not a number from 0 to 1\n"
                            "kite test: --rate: \"\" is not a number from 0 to 1\n");
}

/* A one-letter name is also given with one dash (kite kubeconfig -o FILE, as kubectl's -o). */
Test(flags, one_letter_names_take_one_dash, .init = cr_redirect_stderr) {
    const char *out = NULL, *name = NULL;
    const struct flag f[] = {FLAG_STR("o", "FILE", "output", NULL, &out), FLAG_STR("name", "N", "a name", NULL, &name),
                             FLAG_END};
    cr_assert_eq(PARSE(f, "-o", "a.kc"), 0);
    cr_assert_str_eq(out, "a.kc");
    cr_assert_eq(PARSE(f, "-o=b.kc"), 0);
    cr_assert_str_eq(out, "b.kc");
    cr_assert_eq(PARSE(f, "--o", "c.kc"), 0);
    cr_assert_str_eq(out, "c.kc");
    cr_assert_eq(PARSE(f, "-x", "v"), -1, "an unknown one-letter flag");
    cr_assert_eq(PARSE(f, "-name", "v"), -1, "a long name needs two dashes");
    cr_assert_eq(PARSE(f, "-"), -1);
}
