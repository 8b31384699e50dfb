/* Fibers for the simulator's lanes: a stack each, switched to and from the loop by hand.
 *
 * glibc's swapcontext saves and restores the signal mask with a system call on every switch
 * (and getcontext/setcontext do too): with a lane switched in and out several times per node
 * step, that was ~20,000 rt_sigprocmask calls a second at 5,000 renewals/s, ~11% of the
 * simulator's CPU. A lane's signal mask never changes, so on x86-64 the switch here saves only
 * the callee-saved registers and the FPU control words, as boost.context does. Elsewhere, and
 * under the sanitizers (ASan intercepts swapcontext to follow the stack switch), it is
 * ucontext as before. Under ThreadSanitizer each fiber is announced as one (its fiber API): else
 * the locks a parked lane holds look held by the lane that runs next, and each switch orders the
 * two sides' memory as the loop's hand-over does. */
#pragma once
#include <stddef.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define KITE_FIBER_ASM 1
#else
#include <ucontext.h>
#endif

struct kite_fiber {
#ifdef KITE_FIBER_ASM
    void *sp; /* the saved stack pointer while switched out */
#else
    ucontext_t uc;
#endif
#ifdef __SANITIZE_THREAD__
    void *tsan; /* ThreadSanitizer's context for it: each fiber its own, as a thread is */
#endif
};

/* Makes f run fn(arg) on stack[0..size) at its first switch-in. fn must never return: it ends
 * by switching away for good. A fiber that is only switched out of (the loop's) needs no init. */
void kite_fiber_init(struct kite_fiber *f, void *stack, size_t size, void (*fn)(void *arg), void *arg);

/* Saves the running context in *from and runs *to. Returns when something switches back to
 * *from. */
void kite_fiber_switch(struct kite_fiber *from, struct kite_fiber *to);
