/* bessel_plan.h - fixed-order fast path for the fused Bessel evaluator.
 *
 * In one EM iteration every observation has the same order v; only z varies.
 * A plan, built once per order, stores per piece of a FIXED grid in z a
 * degree-15 polynomial for each fused output, so that evaluating a point is
 * a bit-level piece lookup plus four short polynomials.
 *
 * Grid: piece k covers [a_k, a_{k+1}) with a_{2e} = 2^e and a_{2e+1} =
 * 2^e * s, s = the double nearest sqrt(2) (half-octaves).  The piece of z is
 * read from its exponent and mantissa bits.  Piece k's coefficients depend
 * only on (v, k), never on the range a plan was built for, so results do
 * not depend on how rows are split across ranks.  Points outside the built
 * pieces (or z <= 0, subnormal, non-finite) fall back to ghf_bessel_fused.
 *
 * Per piece: 16 Chebyshev nodes of the first kind plus one anchor node; the
 * fused evaluator is called at each (log K as a double-double, see
 * ghf__bessel_fused_ext); finish_piece turns node values into monomial
 * coefficients in x = (z - c)/hw.  The scaled log K_s = log K + z (what the
 * evaluators return: exact at large z, where log K ~ -z) is stored in
 * anchored form
 *     log K_s(z) = L_a + (z - z_a) A(z),   A = divided difference,
 * with L_a a double-double and z_a, between two Chebyshev nodes, near
 * max(zeta0 |v|, 0.6), where log K ~ 0 (log K is decreasing in z, so this is
 * also near the smallest |log K| of the piece).  z - z_a is exact (Sterbenz),
 * so the result keeps full relative accuracy even where log K crosses zero
 * with a slope of ~|v| (large orders, z ~ 0.66|v|).
 *
 * Build cost: 17 fused evaluations per piece (npieces <= 64), plus, for
 * |v| >= 20, one double-double peak value (~ a few fused evaluations' worth)
 * per node.  A plan over [zmin, zmax] has about 2 log2(zmax/zmin) + 1
 * pieces, so it pays off once a shard has more than ~50-100 points per
 * piece.
 *
 * Building in parallel (e.g. on a GPU):
 *   ghf_bessel_plan_setup(pl, v, zmin, zmax);          serial, cheap
 *   for i < ghf_bessel_plan_num_nodes(pl): ghf_bessel_plan_node(pl, i);   independent
 *   for k < ghf_bessel_plan_num_pieces(pl): ghf_bessel_plan_finish_piece(pl, k);  independent
 * (every node of a piece before that piece's finish; finish once).
 */
#ifndef GHF_BESSEL_PLAN_H
#define GHF_BESSEL_PLAN_H

#include "ghf_defs.h"
#include "bessel.h"
#include "ddouble.h"

#include <stdint.h>
#include <string.h>

#define GHF_BESSEL_PLAN_MAX_PIECES 64
#define GHF_BESSEL_PLAN_NODES 16 /* Chebyshev nodes per piece; polynomials of degree 15 */
#define GHF__PLAN_NPP (GHF_BESSEL_PLAN_NODES + 1) /* + the anchor */

typedef struct ghf_bessel_plan_piece {
    double c, ihw;            /* centre and 1/half-width: x = (z - c) ihw */
    double za, la_hi, la_lo;  /* anchor: log K(za) + za = la_hi + la_lo */
    /* before finish_piece: node values, buf[r * 16 + j] for node j and row r
     * = logk_s hi, logk_s lo, ratio up, ratio dn, dlogk/dv;
     * after: monomial coefficients in x, interleaved, buf[4 j + l] for x^j
     * and l = A, ratio up, ratio dn, dlogk/dv */
    double buf[5 * GHF_BESSEL_PLAN_NODES];
} ghf_bessel_plan_piece;

typedef struct ghf_bessel_plan {
    double v;
    int kfirst;   /* global grid index of piece 0 */
    int npieces;  /* 0 .. GHF_BESSEL_PLAN_MAX_PIECES */
    ghf_bessel_plan_piece piece[GHF_BESSEL_PLAN_MAX_PIECES];
} ghf_bessel_plan;

#define GHF__SQRT2_MANT 0x6a09e667f3bcdULL
#define GHF__SQRT2_D 1.4142135623730951

/* Global piece index of a positive normal double. */
GHF_HD static inline int ghf__plan_piece_index(double z)
{
    uint64_t u;
    memcpy(&u, &z, sizeof u);
    int e = (int)((u >> 52) & 0x7ff) - 1023;
    uint64_t m = u & 0xfffffffffffffULL;
    return 2 * e + (m >= GHF__SQRT2_MANT ? 1 : 0);
}

/* Left end of global piece k. */
GHF_HD static inline double ghf__plan_piece_left(int k)
{
    int e = (k >= 0) ? k / 2 : -((-k + 1) / 2); /* floor(k/2) */
    return ldexp((k - 2 * e) ? GHF__SQRT2_D : 1.0, e);
}

/* cos(pi m / 32) for any integer m, from a table of cos(pi i/32), i = 0..16
 * (correctly rounded literals: the same bits on every platform). */
GHF_HD static inline double ghf__cos_pi32(int m)
{
    const double c[17] = {
        1.0, 0.9951847266721969, 0.9807852804032304, 0.9569403357322088, 0.9238795325112867,
        0.881921264348355, 0.8314696123025452, 0.773010453362737, 0.7071067811865476,
        0.6343932841636455, 0.5555702330196022, 0.47139673682599764, 0.3826834323650898,
        0.2902846772544624, 0.19509032201612828, 0.0980171403295606, 0.0};
    m %= 64;
    if (m < 0) m += 64;
    if (m > 32) m = 64 - m;         /* cos is even, period 64 */
    return (m <= 16) ? c[m] : -c[32 - m];
}

/* Chebyshev nodes of the first kind, cos(pi (2j+1)/32), j = 0..15. */
GHF_HD static inline double ghf__cheb16_node(int j)
{
    return ghf__cos_pi32(2 * j + 1);
}

GHF_HD static inline int ghf_bessel_plan_setup(ghf_bessel_plan *pl, double v, double zmin, double zmax)
{
    pl->v = v;
    pl->kfirst = 0;
    pl->npieces = 0;
    if (!(zmin > 0.0) || !(zmax >= zmin) || isinf(zmax) || isnan(v) || isinf(v)) return -1;
    if (zmin < 1e-290) zmin = 1e-290; /* keeps exp(log ratios) finite at the nodes */
    if (zmax < zmin) zmax = zmin;
    int k0 = ghf__plan_piece_index(zmin);
    int k1 = ghf__plan_piece_index(zmax);
    int n = k1 - k0 + 1;
    if (n > GHF_BESSEL_PLAN_MAX_PIECES) n = GHF_BESSEL_PLAN_MAX_PIECES;
    if (k0 + n > 2047) n = 2047 - k0; /* last normal piece is 2*1023+1 */
    pl->kfirst = k0;
    pl->npieces = n;
    for (int i = 0; i < n; i++) {
        double a = ghf__plan_piece_left(k0 + i), b = ghf__plan_piece_left(k0 + i + 1);
        ghf_bessel_plan_piece *P = &pl->piece[i];
        P->c = 0.5 * (a + b);
        P->ihw = 2.0 / (b - a);
        /* anchor: the midpoint of the gap between Chebyshev nodes j and j+1
         * (1 <= j <= 13) nearest to where log K ~ 0, so that it is never
         * close to a node (divided differences would amplify node errors) */
        double zr = GHF__OLVER_ZETA0_HI * fabs(v);
        if (zr < 0.6) zr = 0.6;
        double xr = (zr - P->c) * P->ihw;
        int g = 1;
        while (g < 13 && ghf__cheb16_node(g + 1) > xr) g++;
        P->za = P->c + 0.5 * (ghf__cheb16_node(g) + ghf__cheb16_node(g + 1)) / P->ihw;
        P->la_hi = P->la_lo = 0.0;
    }
    return 0;
}

GHF_HD static inline int ghf_bessel_plan_num_nodes(const ghf_bessel_plan *pl)
{
    return pl->npieces * GHF__PLAN_NPP;
}

GHF_HD static inline int ghf_bessel_plan_num_pieces(const ghf_bessel_plan *pl)
{
    return pl->npieces;
}

/* z of node j of a piece (the same expression in node and finish_piece) */
GHF_HD static inline double ghf__plan_node_z(const ghf_bessel_plan_piece *P, int j)
{
    return P->c + ghf__cheb16_node(j) / P->ihw;
}

GHF_HD static inline void ghf_bessel_plan_node(ghf_bessel_plan *pl, int i)
{
    if (i < 0 || i >= ghf_bessel_plan_num_nodes(pl)) return;
    ghf_bessel_plan_piece *P = &pl->piece[i / GHF__PLAN_NPP];
    int j = i % GHF__PLAN_NPP;
    double lo;
    if (j == GHF_BESSEL_PLAN_NODES) { /* the anchor */
        ghf_bessel_eval ea = ghf__bessel_fused_ext(pl->v, P->za, &lo);
        ghf__dd la = ghf__quick_two_sum(ea.logk_s, lo);
        P->la_hi = la.hi;
        P->la_lo = la.lo;
        return;
    }
    ghf_bessel_eval e = ghf__bessel_fused_ext(pl->v, ghf__plan_node_z(P, j), &lo);
    P->buf[0 * GHF_BESSEL_PLAN_NODES + j] = e.logk_s;
    P->buf[1 * GHF_BESSEL_PLAN_NODES + j] = lo;
    P->buf[2 * GHF_BESSEL_PLAN_NODES + j] = e.log_ratio_up;
    P->buf[3 * GHF_BESSEL_PLAN_NODES + j] = e.log_ratio_dn;
    P->buf[4 * GHF_BESSEL_PLAN_NODES + j] = e.dlogk_dv;
}

/* Node values f[j] at the Chebyshev nodes -> monomial coefficients in x. */
GHF_HD static inline void ghf__plan_fit(double *f)
{
    const int n = GHF_BESSEL_PLAN_NODES;
    double ch[GHF_BESSEL_PLAN_NODES], mono[GHF_BESSEL_PLAN_NODES];
    double tm1[GHF_BESSEL_PLAN_NODES], t0[GHF_BESSEL_PLAN_NODES], t1[GHF_BESSEL_PLAN_NODES];
    /* take out a constant first: the transform's rounding then scales with
     * the variation of f over the piece, not with its size */
    double f0 = f[n / 2];
    for (int k = 0; k < n; k++) {
        double s = 0.0;
        for (int j = 0; j < n; j++) s += (f[j] - f0) * ghf__cos_pi32(k * (2 * j + 1)); /* T_k(x_j) */
        ch[k] = s * ((k == 0) ? 1.0 / n : 2.0 / n);
    }
    ch[0] += f0;
    /* Chebyshev -> monomial: T_{k+1} = 2x T_k - T_{k-1} on coefficient vectors */
    for (int k = 0; k < n; k++) { mono[k] = 0.0; tm1[k] = 0.0; t0[k] = 0.0; }
    tm1[0] = 1.0;  /* T_0 */
    t0[1] = 1.0;   /* T_1 */
    mono[0] = ch[0];
    mono[1] = ch[1];
    for (int k = 2; k < n; k++) {
        t1[0] = -tm1[0];
        for (int m = 1; m < n; m++) t1[m] = 2.0 * t0[m - 1] - tm1[m];
        for (int m = 0; m < n; m++) {
            mono[m] += ch[k] * t1[m];
            tm1[m] = t0[m];
            t0[m] = t1[m];
        }
    }
    for (int k = 0; k < n; k++) f[k] = mono[k];
}

GHF_HD static inline void ghf_bessel_plan_finish_piece(ghf_bessel_plan *pl, int piece)
{
    if (piece < 0 || piece >= pl->npieces) return;
    ghf_bessel_plan_piece *P = &pl->piece[piece];
    const int n = GHF_BESSEL_PLAN_NODES;
    double za = P->za;
    ghf__dd la = ghf__dd_make(P->la_hi, P->la_lo);
    double f[4][GHF_BESSEL_PLAN_NODES];
    const double *lh = P->buf, *ll = P->buf + n;
    for (int j = 0; j < n; j++) {
        double up = P->buf[2 * n + j], dn = P->buf[3 * n + j];
        f[1][j] = up;
        f[2][j] = dn;
        f[3][j] = P->buf[4 * n + j];
        /* divided differences (log K_s(z_j) - L_a) / (z_j - z_a); should a
         * node coincide with the anchor, d/dz log K_s = 1 - (K_{v-1} + K_{v+1}) / (2 K_v) */
        double zj = ghf__plan_node_z(P, j);
        if (zj == za) {
            f[0][j] = 1.0 - 0.5 * (exp(up) + exp(dn));
        } else {
            ghf__dd d = ghf__dd_add(ghf__quick_two_sum(lh[j], ll[j]), ghf__dd_neg(la));
            f[0][j] = (d.hi + d.lo) / (zj - za);
        }
    }
    for (int l = 0; l < 4; l++) ghf__plan_fit(f[l]);
    for (int j = 0; j < n; j++)
        for (int l = 0; l < 4; l++) P->buf[4 * j + l] = f[l][j];
}

GHF_HD static inline void ghf_bessel_plan_build(ghf_bessel_plan *pl, double v, double zmin, double zmax)
{
    ghf_bessel_plan_setup(pl, v, zmin, zmax);
    int n = ghf_bessel_plan_num_nodes(pl);
    for (int i = 0; i < n; i++) ghf_bessel_plan_node(pl, i);
    for (int k = 0; k < ghf_bessel_plan_num_pieces(pl); k++) ghf_bessel_plan_finish_piece(pl, k);
}

/* four degree-15 polynomials at once: on the host by Estrin's scheme
 * (lane-parallel so that the compiler can use SIMD) */
GHF_HD static inline void ghf__plan_estrin4(const double *c, double x, double *r)
{
#ifdef __CUDA_ARCH__
    /* GPU: four interleaved Horner chains of fused multiply-adds (coefficient
     * k of lane l is c[4k + l]); 4 live accumulators instead of Estrin's 32
     * keeps the E-step kernels' register count, hence occupancy, up. */
    double h[4];
    for (int l = 0; l < 4; l++) h[l] = c[60 + l];
    for (int k = 14; k >= 0; k--)
        for (int l = 0; l < 4; l++) h[l] = fma(h[l], x, c[4 * k + l]);
    for (int l = 0; l < 4; l++) r[l] = h[l];
#else
    double x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
    double b[8][4];
    for (int m = 0; m < 8; m++)
        for (int l = 0; l < 4; l++) b[m][l] = c[8 * m + l] + c[8 * m + 4 + l] * x;
    for (int m = 0; m < 4; m++)
        for (int l = 0; l < 4; l++) b[m][l] = b[2 * m][l] + b[2 * m + 1][l] * x2;
    for (int m = 0; m < 2; m++)
        for (int l = 0; l < 4; l++) b[m][l] = b[2 * m][l] + b[2 * m + 1][l] * x4;
    for (int l = 0; l < 4; l++) r[l] = b[0][l] + b[1][l] * x8;
#endif
}

/* Outside the plan's range: the fused evaluator.  On the GPU it is a real
 * call, so that its registers do not count against the hot path of every
 * kernel that evaluates a plan. */
#ifdef __CUDACC__
__host__ __device__ __noinline__ static ghf_bessel_eval ghf__plan_fallback(double v, double z)
{
    return ghf_bessel_fused(v, z);
}
#else
#define ghf__plan_fallback ghf_bessel_fused
#endif

/* The piece holding z, or NULL outside the plan (then: the fused evaluator). */
GHF_HD static inline const ghf_bessel_plan_piece *ghf__plan_piece(const ghf_bessel_plan *pl, double z)
{
    if (z > 0.0) {
        unsigned i = (unsigned)(ghf__plan_piece_index(z) - pl->kfirst);
        if (i < (unsigned)pl->npieces && z >= 2.2250738585072014e-308 && z <= 1.7976931348623157e308)
            return &pl->piece[i];
    }
    return NULL;
}

GHF_HD static inline ghf_bessel_eval ghf__plan_result(const ghf_bessel_plan_piece *P, double z,
                                                      const double *p)
{
    ghf_bessel_eval r;
    r.logk_s = P->la_hi + (P->la_lo + (z - P->za) * p[0]);
    r.log_ratio_up = p[1];
    r.log_ratio_dn = p[2];
    r.dlogk_dv = p[3];
    return r;
}

GHF_HD static inline ghf_bessel_eval ghf_bessel_plan_eval(const ghf_bessel_plan *pl, double z)
{
    const ghf_bessel_plan_piece *P = ghf__plan_piece(pl, z);
    if (!P) return ghf__plan_fallback(pl->v, z);
    double p[4];
    ghf__plan_estrin4(P->buf, (z - P->c) * P->ihw, p);
    return ghf__plan_result(P, z, p);
}

/* x86-64 hosts with AVX2 (GCC, Clang): the same evaluation with the four
 * polynomials as the four lanes of one 256-bit vector.  Every lane does the
 * same multiplies and adds, in the same order, as ghf__plan_estrin4 (no FMA:
 * the target is avx2 only and the build uses -ffp-contract=off), so the
 * results are bitwise those of ghf_bessel_plan_eval (tested); about twice as
 * fast.  Callers check for AVX2 at run time (__builtin_cpu_supports). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__CUDACC__)
#define GHF_BESSEL_PLAN_AVX2 1
__attribute__((target("avx2"))) static inline void ghf__plan_estrin4_avx2(const double *c, double x,
                                                                         double *r)
{
    typedef double v4d __attribute__((vector_size(32)));
    const double x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
    v4d b[8];
    for (int m = 0; m < 8; m++) {
        v4d lo, hi;
        memcpy(&lo, c + 8 * m, sizeof lo);
        memcpy(&hi, c + 8 * m + 4, sizeof hi);
        b[m] = lo + hi * x;
    }
    for (int m = 0; m < 4; m++) b[m] = b[2 * m] + b[2 * m + 1] * x2;
    for (int m = 0; m < 2; m++) b[m] = b[2 * m] + b[2 * m + 1] * x4;
    b[0] = b[0] + b[1] * x8;
    memcpy(r, &b[0], sizeof b[0]);
}

__attribute__((target("avx2"))) static inline ghf_bessel_eval
ghf_bessel_plan_eval_avx2(const ghf_bessel_plan *pl, double z)
{
    const ghf_bessel_plan_piece *P = ghf__plan_piece(pl, z);
    if (!P) return ghf__plan_fallback(pl->v, z);
    double p[4];
    ghf__plan_estrin4_avx2(P->buf, (z - P->c) * P->ihw, p);
    return ghf__plan_result(P, z, p);
}
#endif

#endif /* GHF_BESSEL_PLAN_H */
