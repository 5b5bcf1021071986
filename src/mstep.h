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
    int fix_p;      /* GH: keep p fixed at its current value (solve for a, b only) */
    double p_max;   /* |p| bound for GH (default 50) */
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
ghf_mstep_status ghf_mstep(ghf_family fam, ghf_mstep_opts *o, const double *stats,
                           const ghf_params *cur, ghf_params *next, char *why, size_t whylen);

/* GIG (p fixed): solve E[1/Y] = eta_inv, E[Y] = eta_y for (a, b).  warm: a0, b0.
 * Returns 0 on success, 1 at the boundary, 2 on failure. */
int ghf_gig_solve_fixed_p(double p, double eta_inv, double eta_y, double a0, double b0,
                          double *a, double *b);

#endif
