/* The variadic stdio calls (printf, fprintf, the _FORTIFY_SOURCE
 * forms gcc emits for them, scanf and the wide printf): each calls the
 * runtime's v-form, which takes
 * the stream's lock in the log's order (weft_runtime.c, "stdio"). Built
 * apart from weft_runtime.c, without -mgeneral-regs-only: a variadic
 * function saves the vector registers its floating-point arguments come
 * in (it only reads them), and needs its own frame where its stack
 * arguments are, so it takes no scrubbing stub (the v-form's does). */
#include <stdarg.h>
#include <stdio.h>
#include <wchar.h>

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

/* The conversions' variadic forms: glibc's headers name them
 * __isoc99_scanf and __isoc99_fscanf (C99's %a), and scanf and fscanf
 * only for GNU C89 (%a as a malloc flag). The headers redirect the plain
 * names, so these take theirs by asm labels. */
int __isoc99_vfscanf(FILE *f, const char *fmt, va_list ap);
int gnu_vfscanf(FILE *f, const char *fmt, va_list ap) __asm__("vfscanf");

__attribute__((visibility("default"))) int gnu_scanf(const char *fmt, ...) __asm__("scanf");
int gnu_scanf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = gnu_vfscanf(stdin, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((visibility("default"))) int gnu_fscanf(FILE *f, const char *fmt, ...) __asm__("fscanf");
int gnu_fscanf(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = gnu_vfscanf(f, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((visibility("default"))) int __isoc99_scanf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = __isoc99_vfscanf(stdin, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((visibility("default"))) int __isoc99_fscanf(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = __isoc99_vfscanf(f, fmt, ap);
    va_end(ap);
    return r;
}

/* The wide-character output calls. */
__attribute__((visibility("default"))) int wprintf(const wchar_t *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfwprintf(stdout, fmt, ap);
    va_end(ap);
    return r;
}

__attribute__((visibility("default"))) int fwprintf(FILE *f, const wchar_t *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfwprintf(f, fmt, ap);
    va_end(ap);
    return r;
}
