/* cpu_block.c - the CPU E-step's hot loops on one block of rows (see cpu_block.h). */
#include "cpu_block.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The hot loops are also compiled for AVX2 and AVX-512 and picked at run
 * time (GCC function multiversioning).  FP contraction is off and every
 * vector lane does the operations of the scalar code in the same order, so
 * every clone gives the same bits (tests/test_cpu_isa.c compiles this file
 * once per instruction set, GHF_CPU_NO_CLONES, and compares). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(GHF_CPU_NO_CLONES)
#define GHF_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GHF_CPU_CLONES
#endif

#define BLK GHF_CPU_BLOCK

/* The helpers below take and return vectors by value; they are inlined into
 * each clone, so the ABI note GCC gives for them does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* Lanes: eight rows, or the four polynomials of a plan piece for two rows
 * (GCC/Clang vector extensions; lowered to whatever the clone's instruction
 * set has, lane by lane). */
typedef double v8d __attribute__((vector_size(64)));
typedef double v4d __attribute__((vector_size(32)));

/* two four-lane halves of an eight-lane vector (vinsertf64x4 on AVX-512) */
static inline v8d load4x2(const double *a, const double *b)
{
    v4d lo, hi;
    memcpy(&lo, a, sizeof lo);
    memcpy(&hi, b, sizeof hi);
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
}

static inline v8d load8(const double *p)
{
    v8d r;
    memcpy(&r, p, sizeof r);
    return r;
}

static inline double hsum8(v8d a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

GHF_CPU_CLONES
void ghf__cpu_pack(int d, const double *xb, int nb, double *xP)
{
    const int ng = (nb + 7) / 8;
    for (int g = 0; g < ng; g++) {
        const double *src = xb + (size_t)g * 8 * d;
        double *dst = xP + (size_t)g * 8 * d;
        const int nr = nb - 8 * g < 8 ? nb - 8 * g : 8;
        if (nr == 8) {
            for (int k = 0; k < d; k++)
                for (int r = 0; r < 8; r++) dst[k * 8 + r] = src[r * d + k];
        } else {
            for (int k = 0; k < d; k++)
                for (int r = 0; r < 8; r++) dst[k * 8 + r] = r < nr ? src[r * d + k] : 0.0;
        }
    }
}

/* Eight rows at a time, everything in registers: z_j = sum_k<=j Linv_jk (x_k - mu_k)
 * in k order, q and zw accumulated in j order (0 + first term first); the
 * padding rows of the last group are computed too (and ignored). */
GHF_CPU_CLONES
void ghf__cpu_qzw_small(int d, const double *xP, int nb, const double *mu, const double *linv,
                        const double *w, double *q, double *zw)
{
    const int ng = (nb + 7) / 8;
    for (int g = 0; g < ng; g++) {
        const double *xg = xP + (size_t)g * 8 * d;
        v8d dv[GHF_CPU_SMALL_D];
        for (int k = 0; k < d; k++) dv[k] = load8(xg + 8 * k) - mu[k];
        v8d qa = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, za = qa;
        for (int j = 0; j < d; j++) {
            const double *lj = linv + (size_t)j * d;
            v8d z = lj[0] * dv[0];
            for (int k = 1; k <= j; k++) z += lj[k] * dv[k];
            qa += z * z;
            za += z * w[j];
        }
        memcpy(q + 8 * g, &qa, sizeof qa);
        memcpy(zw + 8 * g, &za, sizeof za);
    }
}

/* The reference: ghf_estep_point on the plan's (or the fused evaluator's) values. */
GHF_CPU_CLONES
void ghf__cpu_moments_ref(const ghf_cpu_bessel *bs, const double *q, const double *zw, int nb, double *u,
                          double *v, double *l, double *ll)
{
    const ghf_estep_consts *kc = bs->kc;
    for (int i = 0; i < nb; i++) {
        const double z = ghf_estep_arg(kc, q[i]);
        ghf_bessel_eval bk;
        if (!bs->plan)
            bk = ghf_bessel_fused(kc->P, z);
#ifdef GHF_BESSEL_PLAN_AVX2
        else if (bs->plan_avx2)
            bk = ghf_bessel_plan_eval_avx2(bs->plan, z);
#endif
        else
            bk = ghf_bessel_plan_eval(bs->plan, z);
        const ghf_point pt = ghf_estep_point(kc, q[i], zw[i], bk);
        u[i] = pt.u;
        v[i] = pt.v;
        l[i] = pt.l;
        ll[i] = pt.ll;
    }
}

/* The folded plan's four polynomials at z0 on F0 and z1 on F1; lanes = (row,
 * polynomial), each lane doing the operations of ghf__plan_estrin4 on the
 * host in the same order (so the same bits as ghf_bessel_fplan_eval_piece). */
static inline void fplan_eval2(const ghf_bessel_fplan_piece *F0, double z0, const ghf_bessel_fplan_piece *F1,
                               double z1, double *r0, double *r1)
{
    const double x0 = (z0 - F0->c) * F0->ihw, x1 = (z1 - F1->c) * F1->ihw;
    const v8d x = {x0, x0, x0, x0, x1, x1, x1, x1};
    const v8d x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
    v8d b[8];
    for (int m = 0; m < 8; m++) {
        const v8d lo = load4x2(F0->buf + 8 * m, F1->buf + 8 * m);
        const v8d hi = load4x2(F0->buf + 8 * m + 4, F1->buf + 8 * m + 4);
        b[m] = lo + hi * x;
    }
    for (int m = 0; m < 4; m++) b[m] = b[2 * m] + b[2 * m + 1] * x2;
    for (int m = 0; m < 2; m++) b[m] = b[2 * m] + b[2 * m + 1] * x4;
    b[0] = b[0] + b[1] * x8;
    r0[0] = F0->ga_hi + (F0->ga_lo + (z0 - F0->za) * b[0][0]);
    r0[1] = b[0][1];
    r0[2] = b[0][2];
    r0[3] = b[0][3];
    r1[0] = F1->ga_hi + (F1->ga_lo + (z1 - F1->za) * b[0][4]);
    r1[1] = b[0][5];
    r1[2] = b[0][6];
    r1[3] = b[0][7];
}

/* rows the folded plan does not cover point here (values ignored) */
static const ghf_bessel_fplan_piece fplan_none;

/* u = R_dn A/z, v = R_up z (1/A), l = D - log A, ll = (C - P log A) + zw + G + (R - z)
 * over the block (vectorised: no dependence between rows) */
static inline void moments_fold(const ghf_estep_consts *kc, int nb, const double *restrict q,
                                const double *restrict zw, const double *restrict zv, const double *restrict g,
                                const double *restrict ru, const double *restrict rd,
                                const double *restrict dd, double *restrict u, double *restrict v,
                                double *restrict l, double *restrict ll)
{
    const double A = kc->A, b = kc->b, logA = kc->log_A, K = kc->ll_const - kc->P * kc->log_A;
    const double p2 = kc->p2, a = kc->a, w2 = kc->w2, R = kc->R, iA = 1.0 / A;
    for (int i = 0; i < nb; i++) {
        const double z = zv[i], B = b + q[i];
        const double rmz = (p2 - a * q[i] - w2 * B) / (R + z);
        u[i] = rd[i] * (A / z);
        v[i] = ru[i] * (z * iA);
        l[i] = dd[i] - logA;
        ll[i] = ((K + zw[i]) + g[i]) + rmz;
    }
}

/* pk[i] = the plan piece of zv[i] (ghf_bessel_fplan_piece_of without the
 * usability check), or -1: branch-free, so that it vectorises. */
static inline void plan_pieces(const ghf_bessel_fplan *fp, const double *restrict zv, int nb,
                               int64_t *restrict pk)
{
    const int64_t k0 = fp->kfirst, np = fp->npieces;
    for (int i = 0; i < nb; i++) {
        uint64_t u;
        memcpy(&u, &zv[i], sizeof u);
        const int64_t e = (int64_t)(u >> 52); /* sign and exponent: 1..0x7fe for positive normal z */
        const int64_t k = 2 * (e - 1023) + ((u & 0xfffffffffffffULL) >= GHF__SQRT2_MANT ? 1 : 0) - k0;
        pk[i] = (e >= 1 && e <= 0x7fe && k >= 0 && k < np) ? k : -1;
    }
}

/* The vector path: z over the block; the folded polynomials row by row; the
 * moments over the block; the rows the folded plan does not cover, by the
 * reference. */
GHF_CPU_CLONES
void ghf__cpu_moments_vec(const ghf_cpu_bessel *bs, const double *q, const double *zw, int nb, double *u,
                          double *v, double *l, double *ll)
{
    const ghf_estep_consts *kc = bs->kc;
    const ghf_bessel_fplan *fp = bs->fplan;
    if (!fp || kc->A == 0.0) { /* no plan, or the Student t face: every row by the reference */
        ghf__cpu_moments_ref(bs, q, zw, nb, u, v, l, ll);
        return;
    }
    double zv[BLK], g[BLK], ru[BLK], rd[BLK], dd[BLK];
    const ghf_bessel_fplan_piece *pc[BLK];
    const double A = kc->A, b = kc->b;
    for (int i = 0; i < nb; i++) zv[i] = sqrt(A * (b + q[i])); /* ghf_estep_arg */
    int64_t pk[BLK];
    plan_pieces(fp, zv, nb, pk);
    int nmiss = 0;
    for (int i = 0; i < nb; i++) {
        const ghf_bessel_fplan_piece *F = pk[i] >= 0 ? &fp->piece[pk[i]] : 0;
        if (F && F->ok == 0.0) F = 0;
        nmiss += F == 0;
        pc[i] = F ? F : &fplan_none;
    }
    for (int i = 0; i < nb; i += 2) {
        const int i1 = i + 1 < nb ? i + 1 : i;
        double r0[4], r1[4];
        fplan_eval2(pc[i], zv[i], pc[i1], zv[i1], r0, r1);
        g[i] = r0[0];
        ru[i] = r0[1];
        rd[i] = r0[2];
        dd[i] = r0[3];
        g[i1] = r1[0];
        ru[i1] = r1[1];
        rd[i1] = r1[2];
        dd[i1] = r1[3];
    }
    moments_fold(kc, nb, q, zw, zv, g, ru, rd, dd, u, v, l, ll);
    if (nmiss) {
        for (int i = 0; i < nb; i++)
            if (pc[i] == &fplan_none) ghf__cpu_moments_ref(bs, q + i, zw + i, 1, u + i, v + i, l + i, ll + i);
    }
}

/* The block's sums of the finite rows' moments, eight lanes (lane r: rows r,
 * r + 8, ... in order; then ((0+1)+(2+3))+((4+5)+(6+7))).  A row with a
 * non-finite moment is counted in out[4] and its u set to 0; u is also 0 on
 * the padding rows up to the end of the last group of eight. */
typedef long long v8l __attribute__((vector_size(64)));

/* x where the lane's mask is all ones, +0 where it is 0 */
static inline v8d sel8(v8l m, v8d x)
{
    return (v8d)((v8l)x & m);
}

static inline v8d fabs8(v8d x)
{
    return (v8d)((v8l)x & 0x7fffffffffffffffLL);
}

/* all ones where x is finite, 0 where not (exponent bits 0x7ff), by integer
 * arithmetic only (vector comparisons lower poorly on some targets) */
static inline v8l finite8(v8d x)
{
    const v8l e = ((v8l)x >> 52) & 0x7ff;
    return ((e + 1) >> 11) - 1;
}

GHF_CPU_CLONES
void ghf__cpu_row_sums(int nb, double *u, const double *v, const double *l, const double *ll,
                       const double *zw, double *out)
{
    const v8d zero = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const v8d one = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
    v8d a[6] = {zero, zero, zero, zero, zero, zero};
    int i = 0;
    for (; i + 8 <= nb; i += 8) {
        const v8d u8 = load8(u + i), v8 = load8(v + i), l8 = load8(l + i), ll8 = load8(ll + i);
        const v8l ok = finite8(u8) & finite8(v8) & finite8(l8) & finite8(ll8);
        const v8d uo = sel8(ok, u8), z8 = load8(zw + i);
        a[0] += uo;
        a[1] += sel8(ok, v8);
        a[2] += sel8(ok, l8);
        a[3] += sel8(ok, ll8);
        a[4] += sel8(~ok, one);
        a[5] += sel8(ok, fabs8(z8));
        memcpy(u + i, &uo, sizeof uo);
    }
    /* the last, partial group: the same lanes, one row at a time */
    double t[6][8];
    for (int k = 0; k < 6; k++)
        for (int r = 0; r < 8; r++) t[k][r] = a[k][r];
    for (int r = 0; i + r < nb; r++) {
        const int j = i + r;
        const int ok = isfinite(u[j]) && isfinite(v[j]) && isfinite(l[j]) && isfinite(ll[j]);
        const double uj = ok ? u[j] : 0.0;
        t[0][r] += uj;
        t[1][r] += ok ? v[j] : 0.0;
        t[2][r] += ok ? l[j] : 0.0;
        t[3][r] += ok ? ll[j] : 0.0;
        t[4][r] += ok ? 0.0 : 1.0;
        t[5][r] += ok ? fabs(zw[j]) : 0.0;
        u[j] = uj;
    }
    for (int j = nb; j % 8; j++) u[j] = 0.0;
    for (int k = 0; k < 6; k++)
        out[k] = ((t[k][0] + t[k][1]) + (t[k][2] + t[k][3])) + ((t[k][4] + t[k][5]) + (t[k][6] + t[k][7]));
}

/* Sums over the block's groups of eight rows with eight-lane accumulators
 * (lane r holds rows r, r + 8, ... in order), then ((0+1)+(2+3))+((4+5)+(6+7));
 * the padding rows have x = 0 and u = 0 and add exact zeros.  The s6 dot
 * products four at a time, so each u x_j is loaded once per four. */
GHF_CPU_CLONES
void ghf__cpu_sums_small(int d, const double *xP, int nb, const double *ub, double *ux, double *s4,
                         double *s5, double *s6)
{
    const int ng = (nb + 7) / 8;
    const size_t gs = (size_t)8 * d; /* stride between groups */
    const v8d zero = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (int j = 0; j < d; j++) {
        v8d a4 = zero, a5 = zero;
        for (int g = 0; g < ng; g++) {
            const v8d xj = load8(xP + g * gs + 8 * j), uj = load8(ub + 8 * g) * xj;
            memcpy(ux + 8 * g, &uj, sizeof uj);
            a4 += xj;
            a5 += uj;
        }
        s4[j] += hsum8(a4);
        s5[j] += hsum8(a5);
        double *row = s6 + (size_t)j * d;
        int k = 0;
        for (; k + 4 <= j + 1; k += 4) {
            v8d c0 = zero, c1 = zero, c2 = zero, c3 = zero;
            for (int g = 0; g < ng; g++) {
                const v8d uj = load8(ux + 8 * g);
                const double *xg = xP + g * gs + 8 * k;
                c0 += uj * load8(xg);
                c1 += uj * load8(xg + 8);
                c2 += uj * load8(xg + 16);
                c3 += uj * load8(xg + 24);
            }
            row[k] += hsum8(c0);
            row[k + 1] += hsum8(c1);
            row[k + 2] += hsum8(c2);
            row[k + 3] += hsum8(c3);
        }
        for (; k <= j; k++) {
            v8d c0 = zero;
            for (int g = 0; g < ng; g++) c0 += load8(ux + 8 * g) * load8(xP + g * gs + 8 * k);
            row[k] += hsum8(c0);
        }
    }
}
