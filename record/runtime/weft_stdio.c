/* The variadic stdio output calls (printf, fprintf and the _FORTIFY_SOURCE
 * forms gcc emits for them): each calls the runtime's v-form, which takes
 * the stream's lock in the log's order (weft_runtime.c, "stdio"). Built
 * apart from weft_runtime.c, without -mgeneral-regs-only: a variadic
 * function saves the vector registers its floating-point arguments come
 * in (it only reads them), and needs its own frame where its stack
 * arguments are, so it takes no scrubbing stub (the v-form's does). */
#include <stdarg.h>
#include <stdio.h>

int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap);

__attribute__((visibility("default"))) int printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(stdout, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((visibility("default"))) int fprintf(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(f, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((visibility("default"))) int __printf_chk(int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = __vfprintf_chk(stdout, flag, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((visibility("default"))) int __fprintf_chk(FILE *f, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = __vfprintf_chk(f, flag, fmt, ap);
    va_end(ap);
    return r;
}
