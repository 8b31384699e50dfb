/* Fibers (fiber.h). */
#include "sim/fiber.h"

#include <stdint.h>

#ifdef KITE_FIBER_ASM

/* kite_fiber_swap(save, to): pushes the callee-saved registers (System V: rbx, rbp, r12-r15)
 * and the SSE/x87 control words on the running stack, stores the stack pointer in *save, loads
 * `to` and pops the same from there. A new fiber's stack is laid out as if it had been switched
 * out just before kite_fiber_boot, which calls r13(r12). */
void kite_fiber_swap(void **save, void *to) __attribute__((visibility("hidden")));
extern char kite_fiber_boot[] __attribute__((visibility("hidden")));

__asm__(".text\n"
        ".globl kite_fiber_swap\n"
        ".hidden kite_fiber_swap\n"
        ".type kite_fiber_swap,@function\n"
        "kite_fiber_swap:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size kite_fiber_swap,.-kite_fiber_swap\n"
        ".globl kite_fiber_boot\n"
        ".hidden kite_fiber_boot\n"
        ".type kite_fiber_boot,@function\n"
        "kite_fiber_boot:\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size kite_fiber_boot,.-kite_fiber_boot\n");

void kite_fiber_init(struct kite_fiber *f, void *stack, size_t size, void (*fn)(void *arg), void *arg) {
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    /* 16-aligned, so that after the switch's ret the boot's call sees the ABI's alignment */
    uint64_t *sp = (uint64_t *)(top - 16 - 8 * sizeof(uint64_t));
    sp[0] = 0x1F80 | ((uint64_t)0x037F << 32); /* MXCSR and x87 control word: the ABI's defaults */
    sp[1] = 0;                                 /* r15 */
    sp[2] = 0;                                 /* r14 */
    sp[3] = (uint64_t)(uintptr_t)fn;           /* r13 */
    sp[4] = (uint64_t)(uintptr_t)arg;          /* r12 */
    sp[5] = 0;                                 /* rbx */
    sp[6] = 0;                                 /* rbp: the end of the frame chain */
    sp[7] = (uint64_t)(uintptr_t)kite_fiber_boot;
    f->sp = sp;
}

void kite_fiber_switch(struct kite_fiber *from, struct kite_fiber *to) {
    kite_fiber_swap(&from->sp, to->sp);
}

#else

static void boot(unsigned lo, unsigned hi, unsigned flo, unsigned fhi) {
    void *arg = (void *)(((uintptr_t)hi << 32) | lo);
    void (*fn)(void *) = (void (*)(void *))(((uintptr_t)fhi << 32) | flo);
    fn(arg);
    __builtin_trap(); /* fn must switch away for good, not return */
}

#ifdef __SANITIZE_THREAD__
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

void kite_fiber_init(struct kite_fiber *f, void *stack, size_t size, void (*fn)(void *arg), void *arg) {
#ifdef __SANITIZE_THREAD__
    f->tsan = __tsan_create_fiber(0);
#endif
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = stack;
    f->uc.uc_stack.ss_size = size;
    f->uc.uc_link = NULL;
    uintptr_t p = (uintptr_t)arg, q = (uintptr_t)fn;
    makecontext(&f->uc, (void (*)(void))boot, 4, (unsigned)(p & 0xffffffffu), (unsigned)((uint64_t)p >> 32),
                (unsigned)(q & 0xffffffffu), (unsigned)((uint64_t)q >> 32));
}

void kite_fiber_switch(struct kite_fiber *from, struct kite_fiber *to) {
#ifdef __SANITIZE_THREAD__
    if (!from->tsan) from->tsan = __tsan_get_current_fiber(); /* the loop's: never made by init */
    __tsan_switch_to_fiber(to->tsan, 0);
#endif
    swapcontext(&from->uc, &to->uc);
}

#endif
