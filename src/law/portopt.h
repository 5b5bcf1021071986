/* portopt.h - portfolios of minimum risk under one fitted law (`ghfit
 * optimize`): minimum-risk, target-return and tangency portfolios and
 * efficient frontiers for the risk measures sd, VaR and ES of the loss,
 * under a budget and box constraints, by NLopt's SLSQP with analytic
 * gradients through the univariate law of w'X (uni1d.h; docs/math.md
 * "Portfolio optimisation").
 *
 * X are returns (the loss is L = -w'X, the return w'X) or losses (L = w'X,
 * the return -w'X).  Given the fit, L = m + g Y + s sqrt(Y) Z with
 * m = sgn w'mu, g = sgn w'gamma, s = sqrt(w'Sigma w), sgn = -1 for returns,
 * +1 for losses; every measure is a function of (m, g, s) and its gradient
 * in w is  sgn (f_m mu + f_g gamma) + f_s Sigma w / s.
 * The dispersion enters only through ghf_opt_disp (w'Sigma w and Sigma w),
 * so that a structured Sigma (factor form) can plug in without forming it.
 */
#ifndef GHF_LAW_PORTOPT_H
#define GHF_LAW_PORTOPT_H

#include "uni1d.h"

enum { GHF_OPT_SD = 0, GHF_OPT_VAR = 1, GHF_OPT_ES = 2 };
enum { GHF_OPT_MIN_RISK = 0, GHF_OPT_TARGET = 1, GHF_OPT_TANGENCY = 2 };

/* Sigma w into Sw [d] and w'Sigma w into *wsw. */
typedef void (*ghf_opt_quad_fn)(const void *ctx, int d, const double *w, double *Sw, double *wsw);

typedef struct ghf_opt_disp {
    ghf_opt_quad_fn quad;
    const void *ctx;
} ghf_opt_disp;

/* The dense Sigma [d*d] (row-major, symmetric): ctx = sigma. */
void ghf_opt_quad_dense(const void *ctx, int d, const double *w, double *Sw, double *wsw);

/* The factor form Sigma = B B' + diag(D) (docs/math.md 9), never formed:
 * ctx = a ghf_opt_factor; w'Sigma w = |B'w|^2 + w'Dw and
 * Sigma w = B (B'w) + D w, O(d nf) per evaluation. */
typedef struct ghf_opt_factor {
    int nf;                      /* R (0: diagonal) */
    const double *B, *D;         /* B [d*nf] row-major, D [d] */
} ghf_opt_factor;
void ghf_opt_quad_factor(const void *ctx, int d, const double *w, double *Sw, double *wsw);

typedef struct ghf_opt_law {
    int d, gauss;
    double p, a, b;              /* GIG(p, a, b) unless gauss */
    const double *mu, *gamma;    /* [d] */
    ghf_opt_disp disp;
    int losses;                  /* 0: X are returns; 1: X are losses */
    /* derived (ghf_opt_law_init) */
    ghf_uni_mix mix;
    double ey, vy;               /* E[Y], Var[Y] (1, 0 for gauss; inf when they do not exist) */
} ghf_opt_law;

/* 0, or GHF_UNI_EDOM when (p, a, b) is outside the family's domain. */
int ghf_opt_law_init(ghf_opt_law *law);

/* What a measure needs of the law: NULL if it is defined for every w (then
 * the optimiser may run), else a phrase saying what is missing ("the fit's
 * variance does not exist (E[Y] = inf)"...). need_mean: the expected return
 * is used (target-return, tangency, frontier; always reported). */
const char *ghf_opt_law_lacks(const ghf_opt_law *law, int measure, int need_mean);

/* The expected return and its gradient [d] (grad may be NULL). */
double ghf_opt_return(const ghf_opt_law *law, const double *w, double *grad);

/* One measure of w at alpha with its gradient (grad may be NULL); *u_hint
 * (may be NULL): the standardised VaR of a nearby w (NaN: none), updated.
 * Returns a ghf_uni_status. */
int ghf_opt_risk(const ghf_opt_law *law, int measure, double alpha, const double *w, double *risk, double *grad,
                 double *u_hint);

/* All three measures of w: sd, VaR and ES at alpha. */
int ghf_opt_measures(const ghf_opt_law *law, double alpha, const double *w, double *sd, double *var, double *es);

/* The constraints: sum w = budget, lo <= w <= hi ([d] each; -inf/+inf for none). */
typedef struct ghf_opt_cons {
    double budget;
    const double *lo, *hi;
} ghf_opt_cons;

/* 0 if the box holds a point with sum w = budget, else -1 with a message. */
int ghf_opt_feasible(const ghf_opt_cons *c, int d, char *err, size_t errlen);
/* The highest expected return over the feasible set and a portfolio that
 * attains it (w may be NULL); +inf when unbounded (a lower bound is -inf). */
double ghf_opt_max_return(const ghf_opt_law *law, const ghf_opt_cons *c, double *w);

typedef struct ghf_opt_result {
    double risk, ret;       /* the measure optimised and the expected return */
    double sd, var, es;     /* all three measures */
    double kkt;             /* first-order residual, relative to the gradient's size */
    int status;             /* NLopt's result code of the run kept (0: not optimised, the LP vertex) */
    int converged;          /* NLopt succeeded, the point is feasible and kkt <= 1e-6 */
    int law_status;         /* the worst ghf_uni_status of the measures */
    int n_eval;             /* objective evaluations */
    int n_active;           /* bounds active at the point */
} ghf_opt_result;

typedef struct ghf_opt_spec {
    int measure, type;
    double alpha;
    double target;          /* GHF_OPT_TARGET */
    double rf;              /* GHF_OPT_TANGENCY: maximise (ret - rf budget) / risk */
} ghf_opt_spec;

/* One portfolio into w [d].  w0 (may be NULL): a start.  VaR (not convex)
 * is started from the ES optimum at the same alpha, from the minimum-sd
 * portfolio and from w0 or the equal-weight point, and the best converged run
 * kept.  Returns 0, or -1 when out of memory. */
int ghf_opt_solve(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, const double *w0,
                  double *w, ghf_opt_result *res);

/* The first-order residual of w for the problem (the KKT conditions with
 * multipliers fitted by least squares on the coordinates off their bounds):
 * max violation / max |gradient|.  n_active: bounds active (within 1e-9). */
double ghf_opt_kkt(const ghf_opt_law *law, const ghf_opt_cons *c, const ghf_opt_spec *sp, const double *w,
                   int *n_active);

/* K >= 2 frontier points: the minimum-risk portfolio, then targets evenly
 * up to rmax (the highest attainable return when rmax is NaN; that last
 * point is then the LP's vertex, status 0).  W [K][d], res [K]. */
int ghf_opt_frontier(const ghf_opt_law *law, const ghf_opt_cons *c, int measure, double alpha, int K, double rmax,
                     double *W, ghf_opt_result *res);

#endif
