/* pack.c - see pack.h */
#include "pack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------------------
 * Serialisation
 * ------------------------------------------------------------------------- */

void ghf_pack_bytes(ghf_pack *b, const void *x, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        unsigned char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, x, n);
    b->n += n;
}

void ghf_pack_i64(ghf_pack *b, int64_t v) { ghf_pack_bytes(b, &v, sizeof v); }
void ghf_pack_f64(ghf_pack *b, double v) { ghf_pack_bytes(b, &v, sizeof v); }

void ghf_pack_str(ghf_pack *b, const char *s)
{
    if (!s) {
        ghf_pack_i64(b, -1);
        return;
    }
    const int64_t n = (int64_t)strlen(s);
    ghf_pack_i64(b, n);
    ghf_pack_bytes(b, s, (size_t)n);
}

void ghf_pack_f64s(ghf_pack *b, const double *x, int64_t n)
{
    if (!x) {
        ghf_pack_i64(b, -1);
        return;
    }
    ghf_pack_i64(b, n);
    ghf_pack_bytes(b, x, (size_t)n * sizeof(double));
}

void ghf_pack_free(ghf_pack *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int take(ghf_unpack *u, void *x, size_t n)
{
    if (u->bad || u->off + n > u->n) {
        u->bad = 1;
        return -1;
    }
    if (n) memcpy(x, u->p + u->off, n);
    u->off += n;
    return 0;
}

int64_t ghf_unpack_i64(ghf_unpack *u)
{
    int64_t v = 0;
    take(u, &v, sizeof v);
    return v;
}

double ghf_unpack_f64(ghf_unpack *u)
{
    double v = 0;
    take(u, &v, sizeof v);
    return v;
}

char *ghf_unpack_str(ghf_unpack *u)
{
    const int64_t n = ghf_unpack_i64(u);
    if (u->bad || n < 0) return NULL;
    if ((size_t)n > u->n - u->off) {
        u->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        u->bad = 1;
        return NULL;
    }
    take(u, s, (size_t)n);
    s[n] = '\0';
    return s;
}

double *ghf_unpack_f64s(ghf_unpack *u, int64_t *n)
{
    *n = ghf_unpack_i64(u);
    if (u->bad || *n < 0) {
        *n = 0;
        return NULL;
    }
    if ((size_t)*n > (u->n - u->off) / sizeof(double)) {
        u->bad = 1;
        *n = 0;
        return NULL;
    }
    double *x = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(double));
    if (!x) {
        u->bad = 1;
        return NULL;
    }
    take(u, x, (size_t)*n * sizeof(double));
    return x;
}

