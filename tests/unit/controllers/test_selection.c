/* --controllers as kube-controller-manager reads it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/controllers.h"

#define NAMES(...) ((char *[]){__VA_ARGS__}), (sizeof((char *[]){__VA_ARGS__}) / sizeof(char *))

static unsigned off_of(char *const *names, size_t n) {
    unsigned off = 0xdead;
    char *err = NULL;
    cr_assert_eq(kite_controllers_off(names, n, &off, &err), 0, "%s", err ? err : "");
    return off;
}

Test(selection, empty_and_star_run_everything) {
    cr_assert_eq(off_of(NULL, 0), 0);
    cr_assert_eq(off_of(NAMES("*")), 0);
}

Test(selection, a_minus_turns_one_off_upstream_name_or_alias) {
    cr_assert_eq(off_of(NAMES("*", "-nodelifecycle")), KITE_CTL_NODE_LIFECYCLE);
    cr_assert_eq(off_of(NAMES("*", "-node-lifecycle-controller", "-podgc")), KITE_CTL_NODE_LIFECYCLE | KITE_CTL_POD_GC);
}

Test(selection, names_without_a_star_run_only_those) {
    unsigned off = off_of(NAMES("namespace", "garbage-collector-controller"));
    cr_assert_eq(off & (KITE_CTL_NAMESPACE | KITE_CTL_GARBAGE_COLLECTOR), 0);
    cr_assert(off & KITE_CTL_NODE_LIFECYCLE);
    cr_assert(off & KITE_CTL_CSR_SIGNING);
    cr_assert(off & KITE_CTL_ENDPOINTSLICE);
}

Test(selection, off_wins_over_on) {
    cr_assert(off_of(NAMES("job", "-job")) & KITE_CTL_JOB);
}

Test(selection, an_unknown_name_is_an_error_naming_it) {
    unsigned off = 0;
    char *err = NULL;
    cr_assert_eq(kite_controllers_off(NAMES("*", "-bogus"), &off, &err), -EINVAL);
    cr_assert(err && strstr(err, "\"bogus\""), "%s", err ? err : "(none)");
    free(err);
}

Test(selection, the_help_names_every_controller_and_each_is_accepted) {
    char *names = strdup(kite_controllers_names()), *save = NULL;
    unsigned all = 0;
    size_t n = 0;
    for (char *s = strtok_r(names, ", ", &save); s; s = strtok_r(NULL, ", ", &save), n++) {
        char neg[128];
        snprintf(neg, sizeof neg, "-%s", s);
        unsigned off = off_of(NAMES("*", neg));
        cr_assert(off && !(off & (off - 1)), "%s turns exactly one controller off", s);
        cr_assert(!(all & off), "%s named twice", s);
        all |= off;
    }
    free(names);
    cr_assert_eq(n, 19);
    cr_assert_eq(off_of(NAMES("job")), all & ~KITE_CTL_JOB, "every controller is named");
}
