/* summary.h - the summary table of fits shared by `ghfit run` and
 * `ghfit summary`. */
#ifndef GHF_SUMMARY_H
#define GHF_SUMMARY_H

#include <stdio.h>

#include "h5io.h"

/* ---- the summary table ---- */

typedef enum { GHF_SORT_NONE, GHF_SORT_AIC, GHF_SORT_BIC, GHF_SORT_LOGLIK, GHF_SORT_NAME, GHF_SORT_ICL } ghf_sort_key;
int ghf_sort_key_parse(const char *s, ghf_sort_key *k);

typedef struct ghf_summary_row {
    ghf_fit_summary s;
    const char *file; /* NULL: no file column */
    int n_components; /* a mixture's K (0 or 1: a single law) */
    double icl;       /* a mixture's ICL (NaN or anything for a single law: printed as its BIC) */
} ghf_summary_row;

/* Sort rows by key (aic/bic ascending, loglik descending, name ascending; ties by
 * file then name) and print a table with a delta column for aic/bic/loglik.
 * When a row is a mixture (n_components >= 2), the columns K and icl
 * follow bic (a single law: K = 1, ICL = BIC, as for R's mclust). */
void ghf_summary_print(FILE *f, ghf_summary_row *rows, int n, ghf_sort_key key);

#endif
