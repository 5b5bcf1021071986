/* lrt.h - likelihood-ratio tests between nested fits of the same data, as
 * `ghfit summary --lrt` prints them (docs/user-guide.md, "Model selection").
 *
 * Fits are grouped by their data (data file, dataset, rows, n_obs, dim,
 * dropped rows; files without that record are grouped by file).  Within a
 * group the best fit (highest log-likelihood) of each model (family,
 * symmetric, fixed p) is used.  Nested pairs and the reference law of
 * LR = 2 (loglik_full - loglik_restricted):
 *   symmetric against asymmetric, same family and p: chi2(d) (gamma = 0 is
 *     interior);
 *   nig (p = -1/2), hyp (p = (d+1)/2) and gh with p fixed against gh, and vg
 *     or t with p fixed against the same family: chi2(1);
 *   vg (b = 0) and t (a = 0) against gh: one parameter on the boundary of
 *     its domain, so LR is asymptotically the 50:50 mixture of chi2(0) and
 *     chi2(1) (S. G. Self and K.-Y. Liang, JASA 82 (1987) 605-610; Chernoff
 *     1954): p = P(chi2(1) > LR) / 2 for LR > 0;
 *   gauss is the limit of the others at infinite parameters: no test.
 * Weighted fits (loglik_unweighted present and not equal to loglik, as the
 * Python lr_tests) and failed fits are not tested; a note line counts the
 * weighted ones. */
#ifndef GHF_LRT_H
#define GHF_LRT_H

#include <stdio.h>

#include "h5io.h"

/* One fit as the tests see it. */
typedef struct ghf_lrt_fit {
    const ghf_fit_summary *s;
    const ghf_fit_model_info *m;
    const char *file; /* the result file (the group key of fits without data identity) */
} ghf_lrt_fit;

/* Prints the tests among the n fits to f; returns how many were printed. */
int ghf_lrt_print(FILE *f, const ghf_lrt_fit *fits, int n);

#endif
