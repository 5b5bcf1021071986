/* summary.c - see summary.h */
#include "summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Summary table
 * ------------------------------------------------------------------------- */

int ghf_sort_key_parse(const char *s, ghf_sort_key *k)
{
    if (!strcmp(s, "aic")) *k = GHF_SORT_AIC;
    else if (!strcmp(s, "bic")) *k = GHF_SORT_BIC;
    else if (!strcmp(s, "loglik")) *k = GHF_SORT_LOGLIK;
    else if (!strcmp(s, "name")) *k = GHF_SORT_NAME;
    else if (!strcmp(s, "icl")) *k = GHF_SORT_ICL;
    else if (!strcmp(s, "none")) *k = GHF_SORT_NONE;
    else return -1;
    return 0;
}

static ghf_sort_key g_key;

/* ICL of a row: a mixture's, a single law's BIC (K = 1: no entropy term) */
static double icl_of(const ghf_summary_row *r) { return r->n_components >= 2 ? r->icl : r->s.bic; }

/* NaN sorts last */
static int cmp_num(double a, double b)
{
    const int na = isnan(a), nb = isnan(b);
    if (na || nb) return na - nb;
    return (a > b) - (a < b);
}

static int cmp_rows(const void *pa, const void *pb)
{
    const ghf_summary_row *a = pa, *b = pb;
    int c = 0;
    switch (g_key) {
    case GHF_SORT_AIC: c = cmp_num(a->s.aic, b->s.aic); break;
    case GHF_SORT_BIC: c = cmp_num(a->s.bic, b->s.bic); break;
    case GHF_SORT_ICL: c = cmp_num(icl_of(a), icl_of(b)); break;
    case GHF_SORT_LOGLIK: c = -cmp_num(a->s.loglik, b->s.loglik); if (isnan(a->s.loglik) || isnan(b->s.loglik)) c = -c; break;
    default: break;
    }
    if (c) return c;
    if (g_key != GHF_SORT_NONE) {
        c = strcmp(a->s.name, b->s.name);
        if (c) return c;
        if (a->file && b->file) c = strcmp(a->file, b->file);
    }
    return c;
}

void ghf_summary_print(FILE *f, ghf_summary_row *rows, int n, ghf_sort_key key)
{
    g_key = key;
    if (key != GHF_SORT_NONE && n > 1) qsort(rows, (size_t)n, sizeof *rows, cmp_rows);
    int wname = 4, wfile = 0;
    for (int i = 0; i < n; i++) {
        const int l = (int)strlen(rows[i].s.name);
        if (l > wname) wname = l;
        if (rows[i].file) {
            const int lf = (int)strlen(rows[i].file);
            if (lf > wfile) wfile = lf;
        }
    }
    if (wfile > 0 && wfile < 4) wfile = 4;
    int mix = 0; /* the selection over K: K and ICL beside BIC */
    for (int i = 0; i < n; i++) mix |= rows[i].n_components >= 2;
    const char *dname = key == GHF_SORT_AIC ? "dAIC" : key == GHF_SORT_BIC ? "dBIC" : key == GHF_SORT_LOGLIK ? "dloglik"
                        : key == GHF_SORT_ICL ? "dICL" : NULL;
    double best = NAN;
    if (dname && n > 0)
        best = key == GHF_SORT_AIC ? rows[0].s.aic : key == GHF_SORT_BIC ? rows[0].s.bic
               : key == GHF_SORT_ICL ? icl_of(&rows[0]) : rows[0].s.loglik;
    if (wfile) fprintf(f, "%-*s  ", wfile, "file");
    fprintf(f, "%-*s  %-6s %10s %4s %22s %16s %16s", wname, "name", "family", "n", "d", "loglik", "aic", "bic");
    if (mix) fprintf(f, " %3s %16s", "K", "icl");
    if (dname) fprintf(f, " %12s", dname);
    fprintf(f, " %6s %4s %9s\n", "iters", "conv", "seconds");
    for (int i = 0; i < n; i++) {
        const ghf_fit_summary *s = &rows[i].s;
        if (wfile) fprintf(f, "%-*s  ", wfile, rows[i].file ? rows[i].file : "");
        fprintf(f, "%-*s  %-6s %10lld %4d %22.15e %16.8e %16.8e", wname, s->name, s->family, (long long)s->n, s->d,
                s->loglik, s->aic, s->bic);
        if (mix) {
            const int K = rows[i].n_components >= 2 ? rows[i].n_components : 1;
            fprintf(f, " %3d %16.8e", K, icl_of(&rows[i]));
        }
        if (dname) {
            const double v = key == GHF_SORT_AIC ? s->aic : key == GHF_SORT_BIC ? s->bic
                             : key == GHF_SORT_ICL ? icl_of(&rows[i]) : s->loglik;
            fprintf(f, " %12.4f", key == GHF_SORT_LOGLIK ? best - v : v - best);
        }
        const int failed = strncmp(s->status, "failed", 6) == 0;
        fprintf(f, " %6d %4s %9.3f\n", s->n_iter, failed ? "fail" : s->converged ? "yes" : "no", s->seconds);
    }
    fflush(f);
}
