/* cpu_block.c - the CPU E-step's hot loops on one block of rows (see cpu_block.h). */
#include "cpu_block.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The hot loops are also compiled for x86-64-v3 (AVX2, FMA) and x86-64-v4
 * (AVX-512) and picked at run time (GCC function multiversioning).  FP
 * contraction is off; the d x d work uses explicit fused multiply-adds
 * (fma8, correctly rounded everywhere: one instruction where the clone has
 * FMA, glibc's exact software fma in the baseline clone, so CPUs without FMA
 * give the same bits, slowly); every vector lane does the operations of the
 * scalar code in the same order, so every clone gives the same bits
 * (tests/test_cpu_isa.c compiles this file once per instruction set,
 * GHF_CPU_NO_CLONES, and compares). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(GHF_CPU_NO_CLONES)
#define GHF_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GHF_CPU_CLONES
#endif

#define BLK GHF_CPU_BLOCK
/* helpers are inlined into each clone (compiled for its instruction set) */
#define AI static inline __attribute__((always_inline))

/* The helpers below take and return vectors by value; they are inlined into
 * each clone, so the ABI note GCC gives for them does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* Lanes: eight rows, or the four polynomials of a plan piece for two rows
 * (GCC/Clang vector extensions; lowered to whatever the clone's instruction
 * set has, lane by lane). */
typedef double v8d __attribute__((vector_size(64)));
typedef double v4d __attribute__((vector_size(32)));

/* two four-lane halves of an eight-lane vector (vinsertf64x4 on AVX-512) */
AI v8d load4x2(const double *a, const double *b)
{
    v4d lo, hi;
    memcpy(&lo, a, sizeof lo);
    memcpy(&hi, b, sizeof hi);
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
}

AI v8d load8(const double *p)
{
    v8d r;
    memcpy(&r, p, sizeof r);
    return r;
}

AI v8d bcast8(double s)
{
    const v8d r = {s, s, s, s, s, s, s, s};
    return r;
}

/* a b + c, lane by lane, rounded once (vfmadd where the target has FMA) */
AI v8d fma8(v8d a, v8d b, v8d c)
{
    v8d r;
    for (int l = 0; l < 8; l++) r[l] = __builtin_fma(a[l], b[l], c[l]);
    return r;
}

AI double hsum8(v8d a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* dst[8 c + r] = src[r * ld + c] for r, c < 8: an 8 x 8 transpose in
 * registers (data movement only) */
AI void transpose8(const double *src, int ld, double *dst)
{
    v8d r0 = load8(src), r1 = load8(src + ld), r2 = load8(src + 2 * ld), r3 = load8(src + 3 * ld);
    v8d r4 = load8(src + 4 * ld), r5 = load8(src + 5 * ld), r6 = load8(src + 6 * ld), r7 = load8(src + 7 * ld);
    /* pairs of rows, interleaved: t0 = r0[0] r1[0] r0[2] r1[2] ..., t1 = r0[1] r1[1] ... */
    const v8d t0 = __builtin_shufflevector(r0, r1, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8d t1 = __builtin_shufflevector(r0, r1, 1, 9, 3, 11, 5, 13, 7, 15);
    const v8d t2 = __builtin_shufflevector(r2, r3, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8d t3 = __builtin_shufflevector(r2, r3, 1, 9, 3, 11, 5, 13, 7, 15);
    const v8d t4 = __builtin_shufflevector(r4, r5, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8d t5 = __builtin_shufflevector(r4, r5, 1, 9, 3, 11, 5, 13, 7, 15);
    const v8d t6 = __builtin_shufflevector(r6, r7, 0, 8, 2, 10, 4, 12, 6, 14);
    const v8d t7 = __builtin_shufflevector(r6, r7, 1, 9, 3, 11, 5, 13, 7, 15);
    /* quads: u0 = column 0 of rows 0-3, column 4 of rows 0-3; u1 = columns 2, 6; u2 = 1, 5; u3 = 3, 7 */
    const v8d u0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8d u1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8d u2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8d u3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8d u4 = __builtin_shufflevector(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8d u5 = __builtin_shufflevector(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8d u6 = __builtin_shufflevector(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8d u7 = __builtin_shufflevector(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8d c0 = __builtin_shufflevector(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11);
    const v8d c4 = __builtin_shufflevector(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15);
    const v8d c2 = __builtin_shufflevector(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11);
    const v8d c6 = __builtin_shufflevector(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15);
    const v8d c1 = __builtin_shufflevector(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11);
    const v8d c5 = __builtin_shufflevector(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15);
    const v8d c3 = __builtin_shufflevector(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11);
    const v8d c7 = __builtin_shufflevector(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15);
    memcpy(dst, &c0, sizeof c0);
    memcpy(dst + 8, &c1, sizeof c1);
    memcpy(dst + 16, &c2, sizeof c2);
    memcpy(dst + 24, &c3, sizeof c3);
    memcpy(dst + 32, &c4, sizeof c4);
    memcpy(dst + 40, &c5, sizeof c5);
    memcpy(dst + 48, &c6, sizeof c6);
    memcpy(dst + 56, &c7, sizeof c7);
}

GHF_CPU_CLONES
void ghf__cpu_pack(int d, const double *xb, int nb, double *xP)
{
    const int ng = (nb + 7) / 8, dp = ghf__cpu_pack_stride(d);
    for (int g = 0; g < ng; g++) {
        const double *src = xb + (size_t)g * 8 * d;
        double *dst = xP + (size_t)g * 8 * dp;
        const int nr = nb - 8 * g < 8 ? nb - 8 * g : 8;
        int k = 0;
        if (nr == 8)
            for (; k + 8 <= d; k += 8) transpose8(src + k, d, dst + 8 * k);
        for (; k < d; k++)
            for (int r = 0; r < 8; r++) dst[k * 8 + r] = r < nr ? src[r * d + k] : 0.0;
        for (int c = d; c < dp; c++)
            for (int r = 0; r < 8; r++) dst[c * 8 + r] = 0.0;
    }
}

/* q and zw of the groups g and g + 1 (two = 2) or of g alone (two = 1):
 * z_j = sum_k<=j Linv_jk (x_k - mu_k) in k order by fused multiply-adds, four
 * rows j of L^-1 at a time (with two groups, eight independent chains in
 * flight), q and zw accumulated in j order from 0. */
AI void qzw_groups(int d, int dp, const double *xg, int two, const double *mu, const double *linv,
                              const double *w, double *q, double *zw)
{
    v8d dv[2][GHF_CPU_SMALL_D];
    const v8d zero = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (int h = 0; h < two; h++)
        for (int k = 0; k < d; k++) dv[h][k] = load8(xg + (size_t)h * 8 * dp + 8 * k) - mu[k];
    if (two == 1)
        for (int k = 0; k < d; k++) dv[1][k] = zero;
    v8d qa = zero, za = zero, qb = zero, zb = zero;
    int j = 0;
    for (; j + 4 <= d; j += 4) {
        const double *l0 = linv + (size_t)j * d, *l1 = l0 + d, *l2 = l1 + d, *l3 = l2 + d;
        v8d a0 = l0[0] * dv[0][0], a1 = l1[0] * dv[0][0], a2 = l2[0] * dv[0][0], a3 = l3[0] * dv[0][0];
        v8d b0 = l0[0] * dv[1][0], b1 = l1[0] * dv[1][0], b2 = l2[0] * dv[1][0], b3 = l3[0] * dv[1][0];
        for (int k = 1; k <= j; k++) {
            const v8d m0 = bcast8(l0[k]), m1 = bcast8(l1[k]), m2 = bcast8(l2[k]), m3 = bcast8(l3[k]);
            a0 = fma8(m0, dv[0][k], a0);
            a1 = fma8(m1, dv[0][k], a1);
            a2 = fma8(m2, dv[0][k], a2);
            a3 = fma8(m3, dv[0][k], a3);
            b0 = fma8(m0, dv[1][k], b0);
            b1 = fma8(m1, dv[1][k], b1);
            b2 = fma8(m2, dv[1][k], b2);
            b3 = fma8(m3, dv[1][k], b3);
        }
        /* the triangle's corner: k = j + 1 .. j + 3 */
        a1 = fma8(bcast8(l1[j + 1]), dv[0][j + 1], a1);
        a2 = fma8(bcast8(l2[j + 1]), dv[0][j + 1], a2);
        a2 = fma8(bcast8(l2[j + 2]), dv[0][j + 2], a2);
        a3 = fma8(bcast8(l3[j + 1]), dv[0][j + 1], a3);
        a3 = fma8(bcast8(l3[j + 2]), dv[0][j + 2], a3);
        a3 = fma8(bcast8(l3[j + 3]), dv[0][j + 3], a3);
        b1 = fma8(bcast8(l1[j + 1]), dv[1][j + 1], b1);
        b2 = fma8(bcast8(l2[j + 1]), dv[1][j + 1], b2);
        b2 = fma8(bcast8(l2[j + 2]), dv[1][j + 2], b2);
        b3 = fma8(bcast8(l3[j + 1]), dv[1][j + 1], b3);
        b3 = fma8(bcast8(l3[j + 2]), dv[1][j + 2], b3);
        b3 = fma8(bcast8(l3[j + 3]), dv[1][j + 3], b3);
        const v8d w0 = bcast8(w[j]), w1 = bcast8(w[j + 1]), w2 = bcast8(w[j + 2]), w3 = bcast8(w[j + 3]);
        qa = fma8(a3, a3, fma8(a2, a2, fma8(a1, a1, fma8(a0, a0, qa))));
        za = fma8(a3, w3, fma8(a2, w2, fma8(a1, w1, fma8(a0, w0, za))));
        qb = fma8(b3, b3, fma8(b2, b2, fma8(b1, b1, fma8(b0, b0, qb))));
        zb = fma8(b3, w3, fma8(b2, w2, fma8(b1, w1, fma8(b0, w0, zb))));
    }
    for (; j < d; j++) {
        const double *lj = linv + (size_t)j * d;
        v8d a = lj[0] * dv[0][0], b = lj[0] * dv[1][0];
        for (int k = 1; k <= j; k++) {
            a = fma8(bcast8(lj[k]), dv[0][k], a);
            b = fma8(bcast8(lj[k]), dv[1][k], b);
        }
        qa = fma8(a, a, qa);
        za = fma8(a, bcast8(w[j]), za);
        qb = fma8(b, b, qb);
        zb = fma8(b, bcast8(w[j]), zb);
    }
    memcpy(q, &qa, sizeof qa);
    memcpy(zw, &za, sizeof za);
    if (two == 2) {
        memcpy(q + 8, &qb, sizeof qb);
        memcpy(zw + 8, &zb, sizeof zb);
    }
}

/* Eight rows a vector, sixteen at a time; the padding rows of the last group
 * are computed too (and ignored). */
GHF_CPU_CLONES
void ghf__cpu_qzw_small(int d, const double *xP, int nb, const double *mu, const double *linv,
                        const double *w, double *q, double *zw, const double *next, int nnext)
{
    const int ng = (nb + 7) / 8, dp = ghf__cpu_pack_stride(d);
    for (int g = 0; g < ng; g += 2) {
        /* the next block's rows, while this one is computed: its reads then
         * overlap this block's arithmetic */
        if (next && 8 * g < nnext) {
            const char *pf = (const char *)(next + (size_t)g * 8 * d);
            const int nl = (int)(((8 * g + 16 <= nnext ? 16 : nnext - 8 * g) * d * sizeof(double) + 63) / 64);
            for (int i = 0; i < nl; i++) __builtin_prefetch(pf + 64 * i, 0, 3);
        }
        const int two = g + 1 < ng ? 2 : 1;
        qzw_groups(d, dp, xP + (size_t)g * 8 * dp, two, mu, linv, w, q + 8 * g, zw + 8 * g);
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
AI void fplan_eval2(const ghf_bessel_fplan_piece *F0, double z0, const ghf_bessel_fplan_piece *F1,
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
AI void moments_fold(const ghf_estep_consts *kc, int nb, const double *restrict q,
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
AI void plan_pieces(const ghf_bessel_fplan *fp, const double *restrict zv, int nb,
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
AI v8d sel8(v8l m, v8d x)
{
    return (v8d)((v8l)x & m);
}

AI v8d fabs8(v8d x)
{
    return (v8d)((v8l)x & 0x7fffffffffffffffLL);
}

/* all ones where x is finite, 0 where not (exponent bits 0x7ff), by integer
 * arithmetic only (vector comparisons lower poorly on some targets) */
AI v8l finite8(v8d x)
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
 * the padding rows have x = 0 and u = 0 and add exact zeros.  Products are
 * added by fused multiply-adds.  s6 by 4 x 4 tiles of (j, k) in registers
 * (u x_j formed on the fly, rounded as if once per row), so that each
 * group's x is loaded once per tile; the padding columns of the packed block
 * are zero and their entries are not stored. */
GHF_CPU_CLONES
void ghf__cpu_sums_small(int d, const double *xP, int nb, const double *ub, double *s4, double *s5,
                         double *s6, double *tacc)
{
    const int ng = (nb + 7) / 8, dp = ghf__cpu_pack_stride(d);
    const size_t gs = (size_t)8 * dp; /* stride between groups */
    const v8d zero = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (int j = 0; j < d; j++) {
        v8d a4 = zero, a5 = zero;
        for (int g = 0; g < ng; g++) {
            const v8d xj = load8(xP + g * gs + 8 * j);
            a4 += xj;
            a5 = fma8(load8(ub + 8 * g), xj, a5);
        }
        s4[j] += hsum8(a4);
        s5[j] += hsum8(a5);
    }
    /* s6: chunks of groups that stay in L1 across all the tiles; each tile's
     * accumulators are kept in acc between chunks (the same order of
     * additions as one pass) */
    const int gc = dp <= 16 ? ng : 8;
    v8d *acc = (v8d *)tacc;
    for (int t = 0; t < 16 * ghf__cpu_sums_tiles(d); t++) acc[t] = zero;
    for (int g0 = 0; g0 < ng; g0 += gc) {
        const int g1 = g0 + gc < ng ? g0 + gc : ng;
        v8d *A = acc;
        for (int jt = 0; jt < dp; jt += 4)
            for (int kt = 0; kt <= jt; kt += 4, A += 16) {
                /* sixteen named accumulators, so that they stay in registers */
                v8d c00 = A[0], c01 = A[1], c02 = A[2], c03 = A[3], c10 = A[4], c11 = A[5], c12 = A[6],
                    c13 = A[7];
                v8d c20 = A[8], c21 = A[9], c22 = A[10], c23 = A[11], c30 = A[12], c31 = A[13], c32 = A[14],
                    c33 = A[15];
                for (int g = g0; g < g1; g++) {
                    const double *xg = xP + g * gs;
                    const v8d u8 = load8(ub + 8 * g);
                    const v8d k0 = load8(xg + 8 * kt), k1 = load8(xg + 8 * kt + 8), k2 = load8(xg + 8 * kt + 16),
                              k3 = load8(xg + 8 * kt + 24);
                    const v8d u0 = u8 * load8(xg + 8 * jt), u1 = u8 * load8(xg + 8 * jt + 8);
                    const v8d u2 = u8 * load8(xg + 8 * jt + 16), u3 = u8 * load8(xg + 8 * jt + 24);
                    c00 = fma8(u0, k0, c00);
                    c01 = fma8(u0, k1, c01);
                    c02 = fma8(u0, k2, c02);
                    c03 = fma8(u0, k3, c03);
                    c10 = fma8(u1, k0, c10);
                    c11 = fma8(u1, k1, c11);
                    c12 = fma8(u1, k2, c12);
                    c13 = fma8(u1, k3, c13);
                    c20 = fma8(u2, k0, c20);
                    c21 = fma8(u2, k1, c21);
                    c22 = fma8(u2, k2, c22);
                    c23 = fma8(u2, k3, c23);
                    c30 = fma8(u3, k0, c30);
                    c31 = fma8(u3, k1, c31);
                    c32 = fma8(u3, k2, c32);
                    c33 = fma8(u3, k3, c33);
                }
                A[0] = c00, A[1] = c01, A[2] = c02, A[3] = c03, A[4] = c10, A[5] = c11, A[6] = c12, A[7] = c13;
                A[8] = c20, A[9] = c21, A[10] = c22, A[11] = c23, A[12] = c30, A[13] = c31, A[14] = c32,
                A[15] = c33;
            }
    }
    const v8d *A = acc;
    for (int jt = 0; jt < dp; jt += 4)
        for (int kt = 0; kt <= jt; kt += 4, A += 16)
            for (int a = 0; a < 4 && jt + a < d; a++)
                for (int b = 0; b < 4 && kt + b <= jt + a; b++) s6[(size_t)(jt + a) * d + kt + b] += hsum8(A[4 * a + b]);
}
