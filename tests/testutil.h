/* testutil.h - a tiny check harness for ghfit's C tests.
 * CHECK(cond, fmt, ...) records a failure with file:line; test_summary() prints
 * "N passed, M failed" and returns the exit status. */
#ifndef GHF_TESTUTIL_H
#define GHF_TESTUTIL_H

#include <stdio.h>

static int g_checks = 0, g_fails = 0;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        g_checks++;                                                         \
        if (!(cond)) {                                                      \
            g_fails++;                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);            \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

static inline int test_summary(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, g_checks - g_fails, g_fails);
    return g_fails ? 1 : 0;
}

#endif
