/* bessel_fplan.h - the E-step's per-row log and exps folded into the fixed-order plan.
 *
 * For a row with posterior (P, A, B) and z = sqrt(A B), ghf_estep_point needs
 * h = 1/2 log(B/A) = log z - log A and
 *     u = exp(log R_dn - h),  v = exp(log R_up + h),  l = d/dv log K + h,
 *     ll = ... + P h + log K_s,
 * with R_up = K_{P+1}/K_P and R_dn = K_{P-1}/K_P at z: one log and two exps
 * per row.  Since exp(-h) = A / z, the same quantities are
 *     u = R_dn(z) (A/z),  v = R_up(z) (z/A),  l = D(z) - log A,
 *     ll = ... - P log A + G(z),
 * with D = d/dv log K + log z and G = log K_s + P log z functions of z alone
 * at the iteration's order.  A folded plan stores, on the pieces of a
 * ghf_bessel_plan (same grid, same Chebyshev nodes, same node values), the
 * degree-15 polynomials of G (anchored like log K_s in the plan), R_up, R_dn
 * and D, so a row costs one piece lookup, four polynomials and a few
 * multiplies and one division: no log or exp.
 *
 * Accuracy (tested in tests/test_bessel.c against the fused evaluator): the
 * ratios are interpolated directly, so their relative error is a few ulps
 * where exp(log R +- h) carries |log R| + |h| ulps of the logs; D and G carry
 * the absolute error of log z (one ulp) next to that of the plan's log K_s
 * and d/dv log K, as the per-row log did.  G is anchored at the plan's anchor
 * z_a: G = G_a + (z - z_a) A_G(z), G_a = L_a + P log z_a in double-double,
 * and the divided differences at the nodes use P log1p((z_j - z_a)/z_a)
 * (z_j - z_a is exact), so no digits are lost near z_a.
 *
 * Building: after ghf_bessel_plan_node has filled a piece's node values and
 * BEFORE ghf_bessel_plan_finish_piece turns them into the plan's own
 * coefficients, ghf_bessel_fplan_fold(fp, pl, k) reads them (any order of
 * pieces, independent).  Piece k's polynomials depend only on (v, k), so a
 * row's values do not depend on the range or on the ranks.  A piece whose
 * values are not all finite (extreme orders at tiny z, where R_dn would
 * overflow) is marked unusable; rows there take the per-row path.
 */
#ifndef GHF_BESSEL_FPLAN_H
#define GHF_BESSEL_FPLAN_H

#include "bessel_plan.h"

typedef struct ghf_bessel_fplan_piece {
    double c, ihw;           /* as in the plan: x = (z - c) ihw */
    double za, ga_hi, ga_lo; /* G(za) = ga_hi + ga_lo */
    double ok;               /* 1 if every coefficient is finite */
    double pad[2];
    /* monomial coefficients in x, interleaved: buf[4 j + l], l = A_G, R_up, R_dn, D */
    double buf[4 * GHF_BESSEL_PLAN_NODES];
} ghf_bessel_fplan_piece;

typedef struct ghf_bessel_fplan {
    double v;
    int kfirst, npieces; /* those of the plan it was folded from */
    ghf_bessel_fplan_piece piece[GHF_BESSEL_PLAN_MAX_PIECES];
} ghf_bessel_fplan;

/* The piece layout of a plan set up by ghf_bessel_plan_setup (call once,
 * before folding). */
GHF_HD static inline void ghf_bessel_fplan_setup(ghf_bessel_fplan *fp, const ghf_bessel_plan *pl)
{
    fp->v = pl->v;
    fp->kfirst = pl->kfirst;
    fp->npieces = pl->npieces;
    for (int k = 0; k < pl->npieces; k++) fp->piece[k].ok = 0.0;
}

/* Fold piece k of pl (node values computed, not yet finished) into fp. */
GHF_HD static inline void ghf_bessel_fplan_fold(ghf_bessel_fplan *fp, const ghf_bessel_plan *pl, int k)
{
    if (k < 0 || k >= pl->npieces) return;
    const int n = GHF_BESSEL_PLAN_NODES;
    const ghf_bessel_plan_piece *P = &pl->piece[k];
    ghf_bessel_fplan_piece *F = &fp->piece[k];
    const double v = pl->v, za = P->za;
    F->c = P->c;
    F->ihw = P->ihw;
    F->za = za;
    /* G(za) = L_a + v log za, in double-double */
    const ghf__dd lza = ghf__dd_log(ghf__dd_make(za, 0.0));
    const ghf__dd ga = ghf__dd_add(ghf__dd_make(P->la_hi, P->la_lo), ghf__dd_mul_d(lza, v));
    F->ga_hi = ga.hi;
    F->ga_lo = ga.lo;
    double f[4][GHF_BESSEL_PLAN_NODES];
    const ghf__dd la = ghf__dd_make(P->la_hi, P->la_lo);
    for (int j = 0; j < n; j++) {
        const double zj = ghf__plan_node_z(P, j);
        const double up = P->buf[2 * n + j], dn = P->buf[3 * n + j];
        f[1][j] = exp(up);
        f[2][j] = exp(dn);
        f[3][j] = P->buf[4 * n + j] + log(zj);
        if (zj == za) { /* d/dz G = 1 - (R_up + R_dn)/2 + v/z (never on the grid as built) */
            f[0][j] = 1.0 - 0.5 * (f[1][j] + f[2][j]) + v / za;
        } else {
            const double dz = zj - za; /* exact: both lie in one half-octave */
            const ghf__dd dl = ghf__dd_add(ghf__quick_two_sum(P->buf[j], P->buf[n + j]), ghf__dd_neg(la));
            f[0][j] = ((dl.hi + dl.lo) + v * log1p(dz / za)) / dz;
        }
    }
    for (int l = 0; l < 4; l++) ghf__plan_fit(f[l]);
    int ok = isfinite(F->ga_hi) && isfinite(F->ga_lo);
    for (int j = 0; j < n; j++)
        for (int l = 0; l < 4; l++) {
            F->buf[4 * j + l] = f[l][j];
            ok = ok && isfinite(f[l][j]);
        }
    F->ok = ok ? 1.0 : 0.0;
}

/* The usable piece holding z, or NULL (outside the plan, or a piece marked
 * unusable): then the caller takes the per-row path. */
GHF_HD static inline const ghf_bessel_fplan_piece *ghf_bessel_fplan_piece_of(const ghf_bessel_fplan *fp,
                                                                            double z)
{
    if (z > 0.0) {
        unsigned i = (unsigned)(ghf__plan_piece_index(z) - fp->kfirst);
        if (i < (unsigned)fp->npieces && z >= 2.2250738585072014e-308 && z <= 1.7976931348623157e308 &&
            fp->piece[i].ok != 0.0)
            return &fp->piece[i];
    }
    return 0;
}

/* Folded values at z on its piece F: r[0] = G, r[1] = R_up, r[2] = R_dn, r[3] = D. */
GHF_HD static inline void ghf_bessel_fplan_eval_piece(const ghf_bessel_fplan_piece *F, double z, double *r)
{
    double p[4];
    ghf__plan_estrin4(F->buf, (z - F->c) * F->ihw, p);
    r[0] = F->ga_hi + (F->ga_lo + (z - F->za) * p[0]);
    r[1] = p[1];
    r[2] = p[2];
    r[3] = p[3];
}

#endif /* GHF_BESSEL_FPLAN_H */
