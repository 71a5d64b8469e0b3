/*
 * fpcall.c: hostile_call_with_fp(fp, fn, arg): call fn(arg) with the
 * frame-pointer register set to fp (see hostile.h). The callee's frame
 * record, if it makes one, then links to `fp` as its caller's frame.
 */
#include "tests/hostile_fixtures/hostile.h"

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl hostile_call_with_fp\n"
        ".type hostile_call_with_fp, @function\n"
        "hostile_call_with_fp:\n"
        "  push %rbp\n"        /* rsp is now 16-byte aligned for the call */
        "  mov %rdi, %rbp\n"
        "  mov %rdx, %rdi\n"
        "  call *%rsi\n"
        "  pop %rbp\n"
        "  ret\n"
        ".size hostile_call_with_fp, .-hostile_call_with_fp\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl hostile_call_with_fp\n"
        ".type hostile_call_with_fp, %function\n"
        "hostile_call_with_fp:\n"
        "  stp x29, x30, [sp, #-16]!\n"
        "  mov x29, x0\n"
        "  mov x0, x2\n"
        "  blr x1\n"
        "  ldp x29, x30, [sp], #16\n"
        "  ret\n"
        ".size hostile_call_with_fp, .-hostile_call_with_fp\n");
#else
#error "hostile_call_with_fp: x86_64 and aarch64 only"
#endif
