/* util.c - see util.h */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ghf_parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    const double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int ghf_parse_int64(const char *s, int64_t *out)
{
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (end != s && (*end == 'e' || *end == 'E')) {
        /* allow 1e6 style when it is an exact integer */
        double dv;
        if (ghf_parse_double(s, &dv) == 0 && dv == floor(dv) && fabs(dv) < 9.0e18) {
            *out = (int64_t)dv;
            return 0;
        }
        return -1;
    }
    if (end == s || *end != '\0' || errno == ERANGE) return -1;
    *out = (int64_t)v;
    return 0;
}

int ghf_parse_int(const char *s, int *out)
{
    int64_t v;
    if (ghf_parse_int64(s, &v) != 0 || v < -2147483647LL || v > 2147483647LL) return -1;
    *out = (int)v;
    return 0;
}

int ghf_parse_vec(const char *s, int n, double *out)
{
    if (!s || !*s) return -1;
    if (!strchr(s, ',')) {
        double v;
        if (ghf_parse_double(s, &v) != 0) return -1;
        for (int i = 0; i < n; i++) out[i] = v;
        return 0;
    }
    char *copy = strdup(s);
    if (!copy) return -1;
    int k = 0, rc = 0;
    for (char *tok = copy, *next; tok; tok = next) { /* an empty item ("1,,2") is an error */
        next = strchr(tok, ',');
        if (next) *next++ = '\0';
        if (k >= n || ghf_parse_double(tok, &out[k]) != 0) {
            rc = -1;
            break;
        }
        k++;
    }
    free(copy);
    return (rc == 0 && k == n) ? 0 : -1;
}

static int world_rank(void)
{
    int init = 0, r = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* stdout first, so that a log with both streams keeps their order */
static void vmsg0(const char *prefix, const char *fmt, va_list ap)
{
    if (world_rank() != 0) return;
    fflush(stdout);
    fputs(prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
}

void ghf_error0(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg0("ghfit: error: ", fmt, ap);
    va_end(ap);
}

void ghf_note0(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg0("ghfit: note: ", fmt, ap);
    va_end(ap);
}

void ghf_warning0(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg0("ghfit: warning: ", fmt, ap);
    va_end(ap);
}

void ghf_print0(const char *fmt, ...)
{
    if (world_rank() != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static char g_cmdline[4096];

void ghf_set_command_line(int argc, char **argv)
{
    size_t off = 0;
    g_cmdline[0] = '\0';
    for (int i = 0; i < argc && off + 2 < sizeof g_cmdline; i++) {
        const int w = snprintf(g_cmdline + off, sizeof g_cmdline - off, "%s%s", i ? " " : "", argv[i]);
        if (w < 0) break;
        off += (size_t)w;
        if (off >= sizeof g_cmdline) {
            off = sizeof g_cmdline - 1;
            break;
        }
    }
}

const char *ghf_command_line(void) { return g_cmdline; }

void ghf_iso8601_now(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tmv;
    gmtime_r(&t, &tmv);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}
