/* The simulator's fibers: switches in and out keep each side's registers, stack and floating
 * point state; a fiber runs on its own stack; many switches in a row. */
#include "sim/fiber.h"

#include <criterion/criterion.h>
#include <fenv.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define STACK (64u << 10)

static struct kite_fiber loop_f, a_f, b_f;
static char *stack_a, *stack_b;

/* ---- ping-pong: each side's locals survive the other's work ---- */

static volatile uint64_t trace;
static void pinger(void *arg) {
    struct kite_fiber *me = arg;
    uint64_t acc = 7; /* lives across switches (in a callee-saved register at -O2) */
    for (unsigned i = 0;; i++) {
        acc = acc * 31 + i;
        trace = acc;
        kite_fiber_switch(me, &loop_f);
    }
}

Test(fiber, ping_pong_keeps_both_sides_locals) {
    stack_a = malloc(STACK);
    stack_b = malloc(STACK);
    kite_fiber_init(&a_f, stack_a, STACK, pinger, &a_f);
    kite_fiber_init(&b_f, stack_b, STACK, pinger, &b_f);
    uint64_t want_a = 7, want_b = 7, mine = 12345;
    for (unsigned i = 0; i < 1000000; i++) {
        kite_fiber_switch(&loop_f, &a_f);
        want_a = want_a * 31 + i;
        cr_assert_eq(trace, want_a, "fiber a at switch %u", i);
        kite_fiber_switch(&loop_f, &b_f);
        want_b = want_b * 31 + i;
        cr_assert_eq(trace, want_b, "fiber b at switch %u", i);
        mine = mine * 17 + i;
    }
    uint64_t check = 12345;
    for (unsigned i = 0; i < 1000000; i++) check = check * 17 + i;
    cr_assert_eq(mine, check);
    free(stack_a);
    free(stack_b);
}

/* ---- the fiber's frames are on its own stack ---- */

static uintptr_t seen_sp;
static unsigned depth_reached;
static unsigned recurse(unsigned n) {
    volatile char pad[256];
    memset((char *)pad, (int)n, sizeof pad);
    if (n == 0) {
        seen_sp = (uintptr_t)pad;
        return 0;
    }
    unsigned below = recurse(n - 1);
    return below + 1 + (pad[n % sizeof pad] != (char)n); /* pad still holds n: its frame was kept */
}
static void deep(void *arg) {
    depth_reached = recurse(100);
    kite_fiber_switch(&a_f, &loop_f);
    abort(); /* never switched back in */
}

Test(fiber, frames_are_on_the_fibers_stack) {
    stack_a = malloc(STACK);
    kite_fiber_init(&a_f, stack_a, STACK, deep, NULL);
    kite_fiber_switch(&loop_f, &a_f);
    cr_assert_eq(depth_reached, 100u);
    cr_assert(seen_sp >= (uintptr_t)stack_a && seen_sp < (uintptr_t)stack_a + STACK,
              "the fiber's deepest frame at %#lx, its stack at %p", (unsigned long)seen_sp, (void *)stack_a);
    free(stack_a);
}

/* ---- floating point: a fiber starts with the default rounding, and switching keeps each
 * side's mode (the control words are saved with the registers) ---- */

static int fiber_round;
static double fiber_sum;
static void fp(void *arg) {
    fiber_round = fegetround();
    volatile double x = 1.0;
    for (;;) {
        fiber_sum += x / 3.0;
        kite_fiber_switch(&a_f, &loop_f);
    }
}

Test(fiber, floating_point_state_per_side) {
    stack_a = malloc(STACK);
    kite_fiber_init(&a_f, stack_a, STACK, fp, NULL);
    cr_assert_eq(fesetround(FE_UPWARD), 0);
    kite_fiber_switch(&loop_f, &a_f);
    cr_assert_eq(fiber_round, FE_TONEAREST, "a new fiber rounds to nearest");
    cr_assert_eq(fegetround(), FE_UPWARD, "the loop keeps its own rounding across the switch");
    for (int i = 0; i < 10; i++) kite_fiber_switch(&loop_f, &a_f);
    cr_assert_eq(fegetround(), FE_UPWARD);
    fesetround(FE_TONEAREST);
    volatile double x = 1.0, want = 0;
    for (int i = 0; i < 11; i++) want += x / 3.0;
    cr_assert_eq(fiber_sum, want, "the fiber's sums were rounded to nearest");
    free(stack_a);
}
