/* estep.h - the per-observation E-step of GH/NIG EM, shared by the CPU
 * backend and the CUDA kernels.
 *
 * Model: X | Y=y ~ N(mu + gamma y, y Sigma), Y ~ GIG(p, a, b).  With
 * Sigma = L L^T, z = L^-1 (x - mu) and w = L^-1 gamma, each observation needs
 * only q = z.z and zw = z.w.  The posterior of Y is GIG(P, A, B) with
 * P = p - d/2, A = a + w.w, B = b + q (math.md 2.1), so one Bessel evaluation
 * at order P and argument sqrt(A B) gives all three posterior moments and the
 * log-density (math.md 1.4, 2.2).
 *
 * Statistics buffer (one contiguous array of doubles, summed across rows,
 * threads and ranks; layout shared by every backend):
 *   [GHF_ST_N]    number of observations
 *   [GHF_ST_S1]   sum E[1/Y|x]                 (math.md s1)
 *   [GHF_ST_S2]   sum E[Y|x]                   (s2)
 *   [GHF_ST_S3]   sum E[log Y|x]               (s3)
 *   [GHF_ST_LL]   sum log f(x)                 (log-likelihood of the current parameters)
 *   [GHF_ST_NBAD] number of rows whose per-point result was not finite
 *   [GHF_ST_STOP] stop requests (signals), summed
 *   [GHF_ST_ZWABS] sum |zw| over the finite rows (the scale of the rounding
 *                 error of GHF_ST_LL, see ghf_estep_point)
 *   [GHF_ST_S4 ..+d)      sum x                (s4)
 *   [S5 = S4+d ..+d)      sum x E[1/Y|x]       (s5)
 *   [S6 = S4+2d ..+d*d)   sum x x^T E[1/Y|x]   (s6, row-major d x d; backends may fill
 *                                               only the lower triangle, the M-step reads
 *                                               only the lower triangle)
 */
#ifndef GHF_ESTEP_H
#define GHF_ESTEP_H

#include "ghf_defs.h"
#include "bessel.h"
#include "gig.h"

enum {
    GHF_ST_N = 0,
    GHF_ST_S1 = 1,
    GHF_ST_S2 = 2,
    GHF_ST_S3 = 3,
    GHF_ST_LL = 4,
    GHF_ST_NBAD = 5,
    GHF_ST_STOP = 6,
    GHF_ST_ZWABS = 7,
    GHF_ST_S4 = 8
};

GHF_HD static inline int ghf_stats_s5(int d) { return GHF_ST_S4 + d; }
GHF_HD static inline int ghf_stats_s6(int d) { return GHF_ST_S4 + 2 * d; }
GHF_HD static inline int ghf_stats_len(int d) { return GHF_ST_S4 + 2 * d + d * d; }

/* Per-iteration constants, computed once on the host from the parameters. */
typedef struct ghf_estep_consts {
    double P;        /* posterior order p - d/2 */
    double A;        /* posterior a: a + w.w (the same for every row) */
    double b;        /* prior b; the posterior b is b + q */
    double log_A;    /* log(A) */
    double ll_const; /* -(d/2) log 2pi - 1/2 log|Sigma| - (log Z_sub(p,a,b) + R) + log 2 */
    double R;        /* sqrt(p^2 + ab), the scale of the prior's log normaliser */
    double p2;       /* p^2 */
    double a;        /* prior a */
    double w2;       /* w.w = gamma^T Sigma^-1 gamma */
} ghf_estep_consts;

/* Per-row results. */
typedef struct ghf_point {
    double u;  /* E[1/Y | x] */
    double v;  /* E[Y | x] */
    double l;  /* E[log Y | x] */
    double ll; /* log f(x) */
} ghf_point;

/* Bessel argument of a row with squared Mahalanobis distance q. */
GHF_HD static inline double ghf_estep_arg(const ghf_estep_consts *c, double q)
{
    return sqrt(c->A * (c->b + q));
}

/* The row's moments and log-density, given the Bessel quantities at order
 * c->P and argument z = ghf_estep_arg(c, q) (from ghf_bessel_fused or a
 * plan).
 *
 * The log-density is log f = C - log Z_sub + zw + P h + log K_P(z), where
 * log Z_sub ~ -R and log K_P(z) ~ -z are large and cancel near the Gaussian
 * limit (R, z ~ sqrt(ab) -> infinity).  It is formed without that
 * cancellation, from the scaled log normaliser (ll_const holds
 * -(log Z_sub + R)), the scaled log K_s = log K + z, and
 *     R - z = (R^2 - z^2) / (R + z) = (p^2 - a q - w2 b - w2 q) / (R + z). */
/* On a face of the posterior (A = 0: the symmetric Student t, whose
 * posterior is inverse Gamma; B = 0: a variance-gamma row exactly at mu,
 * posterior Gamma) there is no Bessel function: the moments and
 * log Z_post = log int y^(P-1) e^{-(A y + B/y)/2} dy in closed form; +inf
 * moments where they do not exist, NaN where the posterior is improper (the
 * likelihood is unbounded there). */
GHF_HD static inline ghf_point ghf__estep_face(const ghf_estep_consts *c, double B, double zw)
{
    ghf_point r;
    const double P = c->P;
    double lzp;
    if (c->A == 0.0) {
        /* 1/Y ~ Gamma(-P, rate B/2) */
        const double al = -P, be = 0.5 * B;
        if (!(al > 0.0) || !(be > 0.0)) {
            r.u = r.v = r.l = r.ll = NAN;
            return r;
        }
        r.u = al / be;
        r.v = al > 1.0 ? be / (al - 1.0) : INFINITY;
        r.l = log(be) - ghf_digamma(al);
        lzp = lgamma(al) - al * log(be);
    } else {
        /* Y ~ Gamma(P, rate A/2) */
        const double al = P, be = 0.5 * c->A;
        if (!(al > 0.0) || !(be > 0.0)) {
            r.u = r.v = r.l = r.ll = NAN;
            return r;
        }
        r.v = al / be;
        r.u = al > 1.0 ? be / (al - 1.0) : INFINITY;
        r.l = ghf_digamma(al) - log(be);
        lzp = lgamma(al) - al * log(be);
    }
    r.ll = (c->ll_const - GHF_LN2) + c->R + zw + lzp;
    return r;
}

GHF_HD static inline ghf_point ghf_estep_point(const ghf_estep_consts *c, double q, double zw,
                                               ghf_bessel_eval bk)
{
    ghf_point r;
    if (c->A == 0.0 || c->b + q == 0.0) return ghf__estep_face(c, c->b + q, zw);
    /* r = 1/2 log(B/A): E[Y^s|x] = (B/A)^(s/2) K_{P+s}/K_P */
    const double B = c->b + q;
    const double half_log_ba = 0.5 * (log(B) - c->log_A);
    const double z = sqrt(c->A * B);
    const double rmz = (c->p2 - c->a * q - c->w2 * B) / (c->R + z);
    r.u = exp(bk.log_ratio_dn - half_log_ba);
    r.v = exp(bk.log_ratio_up + half_log_ba);
    r.l = bk.dlogk_dv + half_log_ba;
    r.ll = c->ll_const + zw + c->P * half_log_ba + bk.logk_s + rmz;
    return r;
}

#endif /* GHF_ESTEP_H */
