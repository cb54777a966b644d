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

/* A macro argument that holds commas. */
#define P(...) __VA_ARGS__

/* Exported variadic function `name(params, ...)`, whose last named
 * parameter is `last`: it calls `vcall(vargs, ap)`. */
#define VARIADIC(name, params, last, vcall, vargs)                              \
    __attribute__((visibility("default"))) int name(params, ...) {              \
        va_list ap;                                                             \
        va_start(ap, last);                                                     \
        int r = vcall(vargs, ap);                                               \
        va_end(ap);                                                             \
        return r;                                                               \
    }

int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap);

VARIADIC(printf, const char *fmt, fmt, vfprintf, P(stdout, fmt))
VARIADIC(fprintf, P(FILE *f, const char *fmt), fmt, vfprintf, P(f, fmt))
VARIADIC(__printf_chk, P(int flag, const char *fmt), fmt, __vfprintf_chk, P(stdout, flag, fmt))
VARIADIC(__fprintf_chk, P(FILE *f, int flag, const char *fmt), fmt, __vfprintf_chk, P(f, flag, fmt))

/* The conversions' variadic forms: glibc's headers name them
 * __isoc99_scanf and __isoc99_fscanf (C99's %a), and scanf and fscanf
 * only for GNU C89 (%a as a malloc flag). The headers redirect the plain
 * names, so these take theirs by asm labels. */
int __isoc99_vfscanf(FILE *f, const char *fmt, va_list ap);
int gnu_vfscanf(FILE *f, const char *fmt, va_list ap) __asm__("vfscanf");
int gnu_scanf(const char *fmt, ...) __asm__("scanf");
int gnu_fscanf(FILE *f, const char *fmt, ...) __asm__("fscanf");

VARIADIC(gnu_scanf, const char *fmt, fmt, gnu_vfscanf, P(stdin, fmt))
VARIADIC(gnu_fscanf, P(FILE *f, const char *fmt), fmt, gnu_vfscanf, P(f, fmt))
VARIADIC(__isoc99_scanf, const char *fmt, fmt, __isoc99_vfscanf, P(stdin, fmt))
VARIADIC(__isoc99_fscanf, P(FILE *f, const char *fmt), fmt, __isoc99_vfscanf, P(f, fmt))

/* The wide-character output calls. */
VARIADIC(wprintf, const wchar_t *fmt, fmt, vfwprintf, P(stdout, fmt))
VARIADIC(fwprintf, P(FILE *f, const wchar_t *fmt), fmt, vfwprintf, P(f, fmt))
