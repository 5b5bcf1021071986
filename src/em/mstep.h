/* mstep.h - the M-step: closed-form mu, gamma, Sigma from the summed
 * statistics, then the subordinator (NIG closed form; GH through the GIG
 * solver), then the |Sigma| = 1 gauge. */
#ifndef GHF_MSTEP_H
#define GHF_MSTEP_H

#include <stddef.h>
#include "model.h"

typedef enum {
    GHF_MSTEP_OK = 0,
    GHF_MSTEP_BOUNDARY = 1, /* the update runs into the edge of the parameter space */
    GHF_MSTEP_FAILED = 2,   /* a numerical failure (non-finite statistics, ...) */
    GHF_MSTEP_GAUSS = 3     /* the Gaussian limit: the statistics say the mixing variable is a
                               constant to rounding (E[Y]E[1/Y] -> 1); the EM driver decides */
} ghf_mstep_status;

typedef struct ghf_mstep_opts {
    double p_max;   /* |p| bound of a free p (0: the family's) */
    int n_kept;     /* out: M-steps whose GIG solve did not improve on the current (p, a, b),
                       which were kept (a generalised EM step: the likelihood still rises) */
} ghf_mstep_opts;

/* stats: globally summed statistics (kernels/estep.h layout); cur: current
 * parameters (warm start); next: output (allocated, same d).  On a status
 * other than OK, next holds finite values but should not be used; why
 * explains.
 *
 * The expected complete-data log-likelihood separates into a normal part
 * (mu, gamma, Sigma; maximised in closed form) and a subordinator part
 * (p, a, b; the GIG problem).  The subordinator update is kept only if it
 * does not lower its part (judged on the GIG Bregman objective, with a
 * rounding margin); otherwise the current (p, a, b) is kept.  Either way the
 * step is a generalised EM step, so the likelihood never falls and a GIG
 * solve that does not converge never aborts a fit. */
ghf_mstep_status ghf_mstep(const ghf_model *m, ghf_mstep_opts *o, const double *stats, const ghf_params *cur,
                           ghf_params *next, char *why, size_t whylen);

/* The subordinator part alone (what ghf_mstep does after mu, gamma,
 * Sigma): (p, a, b) of next from s1..s3 (per observation) through the
 * family table, kept only if it improves; cur's otherwise.  The factor-form
 * EM (em_factor.c) shares it. */
/* The CM step of mu and gamma (math.md 3.1), which does not depend on Sigma:
 * from s1 = E[1/Y], s2 = E[Y] (averages) and the sums S4 = sum u x,
 * S5 = sum E[1/Y|x] x over n rows.  symmetric: gamma = 0.  Returns OK, or
 * GAUSS with `why` when E[Y]E[1/Y] -> 1.  Shared by the full and the factor
 * M-steps. */
ghf_mstep_status ghf_mstep_location(int symmetric, int d, double n, double s1, double s2, const double *S4,
                                    const double *S5, double *mu, double *gamma, char *why, size_t whylen);
ghf_mstep_status ghf_mstep_sub(const ghf_model *m, ghf_mstep_opts *o, int d, double s1, double s2, double s3,
                               const ghf_params *cur, ghf_params *next, char *why, size_t whylen);


#endif
