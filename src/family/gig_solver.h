/* gig_solver.h - the GIG M-step: expectation parameters -> (p, a, b).
 *
 * Given eta = (E log Y, E 1/Y, E Y) (the GH M-step passes s3/n, s1/n, s2/n),
 * find GIG(p, a, b) with those moments, i.e. minimise the convex Bregman
 * objective F(theta) = psi(theta) - theta.eta, theta = (p-1, -b/2, -a/2)
 * (math.md 3.3).  Newton with the analytic gradient and Hessian of psi
 * (kernels/gig.h: E t(Y) and Cov t(Y)); the step is taken along a path that
 * keeps a, b > 0 (multiplicative in a and b), globalised by
 * Levenberg-Marquardt damping judged on F, |p| <= p_max, on the
 * eta-rescaled problem E[Y~] = E[1/Y~] (math.md 3.3), mapped back at the end.
 * Warm start from the previous (p, a, b); cold start from the Gamma,
 * inverse-Gamma, inverse-Gaussian and p = 1/2 moment fits (best F first).
 *
 * Status:
 *   GHF_GIG_OK          eta reproduced to tol (relative; E log Y relative to
 *                       |E log Y~| + sd(log Y), see gig_solver.c).
 *   GHF_GIG_INFEASIBLE  eta violates Jensen: E Y E 1/Y <= 1, or
 *                       E log Y >= log E Y, or E log Y <= -log E 1/Y.
 *                       out = warm, or a finite placeholder.
 *   GHF_GIG_MAXITER     not converged in max_iter Newton steps from any start;
 *                       out = the point with the smallest residual.
 *   GHF_GIG_BOUNDARY    the minimiser lies on the edge of the domain: b = 0
 *                       (Gamma; then out = the Gamma fit (p, a, 0), which
 *                       matches E log Y and E Y), a = 0 (inverse Gamma;
 *                       out = (p, 0, b) matching E log Y and E 1/Y), or
 *                       |p| = p_max (out = the constrained optimum).
 *   GHF_GIG_BADINPUT    eta not finite, E 1/Y <= 0 or E Y <= 0.
 * out never holds NaN.
 */
#ifndef GHF_GIG_SOLVER_H
#define GHF_GIG_SOLVER_H

typedef enum {
    GHF_GIG_OK = 0,
    GHF_GIG_INFEASIBLE = 1,
    GHF_GIG_MAXITER = 2,
    GHF_GIG_BOUNDARY = 3,
    GHF_GIG_BADINPUT = 4
} ghf_gig_status;

typedef struct ghf_gig_solver_opts {
    int max_iter;  /* Newton steps per start (default 100) */
    double tol;    /* relative residual in eta (default 1e-13) */
    double p_max;  /* bound on |p| (default 50, math.md GIG_P_MAX) */
} ghf_gig_solver_opts;

void ghf_gig_solver_defaults(ghf_gig_solver_opts *o);

/* warm: previous (p,a,b) or NULL for a cold start.  out: (p,a,b).  iters
 * (may be NULL): Newton steps taken, all starts together.  o may be NULL
 * (defaults).  Never returns NaN in out. */
ghf_gig_status ghf_gig_solve(const double eta[3], const double *warm, const ghf_gig_solver_opts *o,
                             double out[3], int *iters);

const char *ghf_gig_status_str(ghf_gig_status s);

/* p held fixed: solve E[1/Y] = eta_inv, E[Y] = eta_y for (a, b), warm start
 * (a0, b0) (Newton in (log b, log a) with backtracking on the relative
 * residual).  Returns 0 on success, 1 when a or b runs to 0 (the optimum lies
 * on a face: a = 0 needs p < 0, b = 0 needs p > 0), 2 on failure. */
int ghf_gig_solve_fixed_p(double p, double eta_inv, double eta_y, double a0, double b0, double *a, double *b);

/* Shape of the Gamma distribution with E log X - log E X = c (c < 0):
 * the root of digamma(al) - log(al) = c (math.md 3.2).  NaN if c >= 0. */
double ghf_gamma_shape_from_logmean_gap(double c);

#endif /* GHF_GIG_SOLVER_H */
