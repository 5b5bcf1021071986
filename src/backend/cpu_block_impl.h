/* cpu_block_impl.h - the CPU E-step's kernels on one block of rows, compiled once per instruction set by cpu_block_v4.c, cpu_block_v3.c and cpu_block_base.c (see cpu_block.h).
 *
 * Included after defining GHF_CPU_KERNELS, the name of the kernel table the
 * translation unit defines.  FP contraction is off in the whole build; the
 * d x d work uses explicit fused multiply-adds (v8_fma); every vector lane
 * does the operations of the scalar code in the same order, and the scalar
 * loops below are vectorised (or not) by the compiler without reassociation,
 * so every instruction set gives the same bits (tests/test_cpu_isa.c). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_block.h"
#include "cpu_vec.h"

#define BLK GHF_CPU_BLOCK

static void pack(int d, const double *xb, int nb, double *xP)
{
    const int ng = (nb + 7) / 8, dp = ghf__cpu_pack_stride(d);
    for (int g = 0; g < ng; g++) {
        const double *src = xb + (size_t)g * 8 * d;
        double *dst = xP + (size_t)g * 8 * dp;
        const int nr = nb - 8 * g < 8 ? nb - 8 * g : 8;
        int k = 0;
        if (nr == 8)
            for (; k + 8 <= d; k += 8) v8_transpose8(src + k, d, dst + 8 * k);
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
    vec8 dv[2][GHF_CPU_SMALL_D];
    for (int h = 0; h < two; h++)
        for (int k = 0; k < d; k++) dv[h][k] = v8_sub(v8_load(xg + (size_t)h * 8 * dp + 8 * k), v8_bcast(mu[k]));
    if (two == 1)
        for (int k = 0; k < d; k++) dv[1][k] = v8_zero();
    vec8 qa = v8_zero(), za = v8_zero(), qb = v8_zero(), zb = v8_zero();
    int j = 0;
    for (; j + 4 <= d; j += 4) {
        const double *l0 = linv + (size_t)j * d, *l1 = l0 + d, *l2 = l1 + d, *l3 = l2 + d;
        vec8 a0 = v8_mul(v8_bcast(l0[0]), dv[0][0]), a1 = v8_mul(v8_bcast(l1[0]), dv[0][0]);
        vec8 a2 = v8_mul(v8_bcast(l2[0]), dv[0][0]), a3 = v8_mul(v8_bcast(l3[0]), dv[0][0]);
        vec8 b0 = v8_mul(v8_bcast(l0[0]), dv[1][0]), b1 = v8_mul(v8_bcast(l1[0]), dv[1][0]);
        vec8 b2 = v8_mul(v8_bcast(l2[0]), dv[1][0]), b3 = v8_mul(v8_bcast(l3[0]), dv[1][0]);
        for (int k = 1; k <= j; k++) {
            const vec8 m0 = v8_bcast(l0[k]), m1 = v8_bcast(l1[k]), m2 = v8_bcast(l2[k]), m3 = v8_bcast(l3[k]);
            a0 = v8_fma(m0, dv[0][k], a0);
            a1 = v8_fma(m1, dv[0][k], a1);
            a2 = v8_fma(m2, dv[0][k], a2);
            a3 = v8_fma(m3, dv[0][k], a3);
            b0 = v8_fma(m0, dv[1][k], b0);
            b1 = v8_fma(m1, dv[1][k], b1);
            b2 = v8_fma(m2, dv[1][k], b2);
            b3 = v8_fma(m3, dv[1][k], b3);
        }
        /* the triangle's corner: k = j + 1 .. j + 3 */
        const vec8 m11 = v8_bcast(l1[j + 1]), m21 = v8_bcast(l2[j + 1]), m22 = v8_bcast(l2[j + 2]);
        const vec8 m31 = v8_bcast(l3[j + 1]), m32 = v8_bcast(l3[j + 2]), m33 = v8_bcast(l3[j + 3]);
        a1 = v8_fma(m11, dv[0][j + 1], a1);
        a2 = v8_fma(m22, dv[0][j + 2], v8_fma(m21, dv[0][j + 1], a2));
        a3 = v8_fma(m33, dv[0][j + 3], v8_fma(m32, dv[0][j + 2], v8_fma(m31, dv[0][j + 1], a3)));
        b1 = v8_fma(m11, dv[1][j + 1], b1);
        b2 = v8_fma(m22, dv[1][j + 2], v8_fma(m21, dv[1][j + 1], b2));
        b3 = v8_fma(m33, dv[1][j + 3], v8_fma(m32, dv[1][j + 2], v8_fma(m31, dv[1][j + 1], b3)));
        const vec8 w0 = v8_bcast(w[j]), w1 = v8_bcast(w[j + 1]), w2 = v8_bcast(w[j + 2]), w3 = v8_bcast(w[j + 3]);
        qa = v8_fma(a3, a3, v8_fma(a2, a2, v8_fma(a1, a1, v8_fma(a0, a0, qa))));
        za = v8_fma(a3, w3, v8_fma(a2, w2, v8_fma(a1, w1, v8_fma(a0, w0, za))));
        qb = v8_fma(b3, b3, v8_fma(b2, b2, v8_fma(b1, b1, v8_fma(b0, b0, qb))));
        zb = v8_fma(b3, w3, v8_fma(b2, w2, v8_fma(b1, w1, v8_fma(b0, w0, zb))));
    }
    for (; j < d; j++) {
        const double *lj = linv + (size_t)j * d;
        vec8 a = v8_mul(v8_bcast(lj[0]), dv[0][0]), b = v8_mul(v8_bcast(lj[0]), dv[1][0]);
        for (int k = 1; k <= j; k++) {
            a = v8_fma(v8_bcast(lj[k]), dv[0][k], a);
            b = v8_fma(v8_bcast(lj[k]), dv[1][k], b);
        }
        const vec8 wj = v8_bcast(w[j]);
        qa = v8_fma(a, a, qa);
        za = v8_fma(a, wj, za);
        qb = v8_fma(b, b, qb);
        zb = v8_fma(b, wj, zb);
    }
    v8_store(q, qa);
    v8_store(zw, za);
    if (two == 2) {
        v8_store(q + 8, qb);
        v8_store(zw + 8, zb);
    }
}

/* Eight rows a vector, sixteen at a time; the padding rows of the last group
 * are computed too (and ignored).  The next block's rows are prefetched
 * meanwhile, so that their reads overlap this block's arithmetic. */
static void qzw_small(int d, const double *xP, int nb, const double *mu, const double *linv, const double *w,
                      double *q, double *zw, const double *next, int nnext)
{
    const int ng = (nb + 7) / 8, dp = ghf__cpu_pack_stride(d);
    for (int g = 0; g < ng; g += 2) {
        if (next && 8 * g < nnext) {
            const char *pf = (const char *)(next + (size_t)g * 8 * d);
            const int nl = (int)(((8 * g + 16 <= nnext ? 16 : nnext - 8 * g) * d * sizeof(double) + 63) / 64);
            for (int i = 0; i < nl; i++) __builtin_prefetch(pf + 64 * i, 0, 3);
        }
        /* with few registers (AVX2: 16 halves) one group at a time: four
         * chains of two halves each */
        const int two = GHF_CPU_VEC_REGS >= 32 && g + 1 < ng ? 2 : 1;
        qzw_groups(d, dp, xP + (size_t)g * 8 * dp, two, mu, linv, w, q + 8 * g, zw + 8 * g);
        if (two == 1 && g + 1 < ng)
            qzw_groups(d, dp, xP + (size_t)(g + 1) * 8 * dp, 1, mu, linv, w, q + 8 * (g + 1), zw + 8 * (g + 1));
    }
}

/* The reference: ghf_estep_point on the plan's (or the fused evaluator's) values. */
static void moments_ref(const ghf_cpu_bessel *bs, const double *q, const double *zw, int nb, double *u,
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
 * host in the same order; the raw values to r0[0..3] and r1[0..3]. */
AI void fplan_eval2(const ghf_bessel_fplan_piece *F0, double z0, const ghf_bessel_fplan_piece *F1, double z1,
                    double *r0, double *r1)
{
    const double x0 = (z0 - F0->c) * F0->ihw, x1 = (z1 - F1->c) * F1->ihw;
    const double x0v[4] = {x0, x0, x0, x0}, x1v[4] = {x1, x1, x1, x1};
    const vec8 x = v8_load4x2(x0v, x1v);
    const vec8 x2 = v8_mul(x, x), x4 = v8_mul(x2, x2), x8 = v8_mul(x4, x4);
    vec8 b[8];
    for (int m = 0; m < 8; m++) {
        const vec8 lo = v8_load4x2(F0->buf + 8 * m, F1->buf + 8 * m);
        const vec8 hi = v8_load4x2(F0->buf + 8 * m + 4, F1->buf + 8 * m + 4);
        b[m] = v8_add(lo, v8_mul(hi, x));
    }
    for (int m = 0; m < 4; m++) b[m] = v8_add(b[2 * m], v8_mul(b[2 * m + 1], x2));
    for (int m = 0; m < 2; m++) b[m] = v8_add(b[2 * m], v8_mul(b[2 * m + 1], x4));
    v8_store4x2(r0, r1, v8_add(b[0], v8_mul(b[1], x8)));
}

/* rows the folded plan does not cover point here (values ignored) */
static const ghf_bessel_fplan_piece fplan_none;

/* u = R_dn A/z, v = R_up z (1/A), l = D - log A, ll = (C - P log A) + zw + G + (R - z)
 * over the block (no dependence between rows: vectorised) */
AI void moments_fold(const ghf_estep_consts *kc, int nb, const double *restrict q, const double *restrict zw,
                     const double *restrict zv, const double *restrict g, const double *restrict res,
                     double *restrict u, double *restrict v, double *restrict l, double *restrict ll)
{
    const double A = kc->A, b = kc->b, logA = kc->log_A, K = kc->ll_const - kc->P * kc->log_A;
    const double p2 = kc->p2, a = kc->a, w2 = kc->w2, R = kc->R, iA = 1.0 / A;
    for (int i = 0; i < nb; i++) {
        const double z = zv[i], B = b + q[i];
        const double rmz = (p2 - a * q[i] - w2 * B) / (R + z);
        u[i] = res[4 * i + 2] * (A / z);
        v[i] = res[4 * i + 1] * (z * iA);
        l[i] = res[4 * i + 3] - logA;
        ll[i] = ((K + zw[i]) + g[i]) + rmz;
    }
}

/* pk[i] = the plan piece of zv[i] (ghf_bessel_fplan_piece_of without the
 * usability check), or -1: branch-free, so that it vectorises. */
AI void plan_pieces(const ghf_bessel_fplan *fp, const double *restrict zv, int nb, int64_t *restrict pk)
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

/* The vector path: z over the block; the folded polynomials two rows at a
 * time; the moments over the block; the rows the folded plan does not cover,
 * by the reference. */
static void moments_vec(const ghf_cpu_bessel *bs, const double *q, const double *zw, int nb, double *u,
                        double *v, double *l, double *ll)
{
    const ghf_estep_consts *kc = bs->kc;
    const ghf_bessel_fplan *fp = bs->fplan;
    if (!fp || kc->A == 0.0) { /* no plan, or the Student t face: every row by the reference */
        moments_ref(bs, q, zw, nb, u, v, l, ll);
        return;
    }
    double zv[BLK], g[BLK], res[4 * BLK];
    int64_t pk[BLK];
    const ghf_bessel_fplan_piece *pc[BLK];
    const double A = kc->A, b = kc->b;
    for (int i = 0; i < nb; i++) zv[i] = sqrt(A * (b + q[i])); /* ghf_estep_arg */
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
        const ghf_bessel_fplan_piece *F0 = pc[i], *F1 = pc[i1];
        fplan_eval2(F0, zv[i], F1, zv[i1], res + 4 * i, res + 4 * i1);
        /* G = G(za) + (z - za) A_G(z), as ghf_bessel_fplan_eval_piece */
        g[i] = F0->ga_hi + (F0->ga_lo + (zv[i] - F0->za) * res[4 * i]);
        g[i1] = F1->ga_hi + (F1->ga_lo + (zv[i1] - F1->za) * res[4 * i1]);
    }
    moments_fold(kc, nb, q, zw, zv, g, res, u, v, l, ll);
    if (nmiss) {
        for (int i = 0; i < nb; i++)
            if (pc[i] == &fplan_none) moments_ref(bs, q + i, zw + i, 1, u + i, v + i, l + i, ll + i);
    }
}

/* The block's sums of the finite rows' moments, eight lanes (lane r: rows r,
 * r + 8, ... in order; then ((0+1)+(2+3))+((4+5)+(6+7))); a non-finite row
 * adds +0 to the sums and 1 to the count (the same bits as skipping it). */
static void row_sums(int nb, double *u, const double *v, const double *l, const double *ll, const double *zw,
                     double *out)
{
    vec8 a[6] = {v8_zero(), v8_zero(), v8_zero(), v8_zero(), v8_zero(), v8_zero()};
    int i = 0;
    for (; i + 8 <= nb; i += 8) {
        const vec8 u8 = v8_load(u + i), v8 = v8_load(v + i), l8 = v8_load(l + i), ll8 = v8_load(ll + i);
        vec8 bad;
        const vec8 uo = v8_keep_finite(u8, v8, l8, ll8, u8, &bad);
        a[0] = v8_add(a[0], uo);
        a[1] = v8_add(a[1], v8_keep_finite(u8, v8, l8, ll8, v8, &bad));
        a[2] = v8_add(a[2], v8_keep_finite(u8, v8, l8, ll8, l8, &bad));
        a[3] = v8_add(a[3], v8_keep_finite(u8, v8, l8, ll8, ll8, &bad));
        a[4] = v8_add(a[4], bad);
        a[5] = v8_add(a[5], v8_keep_finite(u8, v8, l8, ll8, v8_abs(v8_load(zw + i)), &bad));
        v8_store(u + i, uo);
    }
    /* the last, partial group: the same lanes, one row at a time */
    double t[6][8];
    for (int k = 0; k < 6; k++) v8_store(t[k], a[k]);
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

/* One TJ x TK tile of s6's accumulators (A, lane by lane) over the groups
 * g0 .. g1 - 1: named accumulators, so that they stay in registers (4 x 4
 * with 32 vector registers, 2 x 2 with 16 AVX2 halves). */
#if GHF_CPU_VEC_REGS >= 32
#define TJ 4
#define TK 4
AI void sums_tile(const double *xP, const double *ub, size_t gs, int g0, int g1, int jt, int kt, double *A)
{
    vec8 c00 = v8_load(A), c01 = v8_load(A + 8), c02 = v8_load(A + 16), c03 = v8_load(A + 24);
    vec8 c10 = v8_load(A + 32), c11 = v8_load(A + 40), c12 = v8_load(A + 48), c13 = v8_load(A + 56);
    vec8 c20 = v8_load(A + 64), c21 = v8_load(A + 72), c22 = v8_load(A + 80), c23 = v8_load(A + 88);
    vec8 c30 = v8_load(A + 96), c31 = v8_load(A + 104), c32 = v8_load(A + 112), c33 = v8_load(A + 120);
    for (int g = g0; g < g1; g++) {
        const double *xg = xP + g * gs;
        const vec8 u8 = v8_load(ub + 8 * g);
        const vec8 k0 = v8_load(xg + 8 * kt), k1 = v8_load(xg + 8 * kt + 8);
        const vec8 k2 = v8_load(xg + 8 * kt + 16), k3 = v8_load(xg + 8 * kt + 24);
        const vec8 u0 = v8_mul(u8, v8_load(xg + 8 * jt)), u1 = v8_mul(u8, v8_load(xg + 8 * jt + 8));
        const vec8 u2 = v8_mul(u8, v8_load(xg + 8 * jt + 16)), u3 = v8_mul(u8, v8_load(xg + 8 * jt + 24));
        c00 = v8_fma(u0, k0, c00);
        c01 = v8_fma(u0, k1, c01);
        c02 = v8_fma(u0, k2, c02);
        c03 = v8_fma(u0, k3, c03);
        c10 = v8_fma(u1, k0, c10);
        c11 = v8_fma(u1, k1, c11);
        c12 = v8_fma(u1, k2, c12);
        c13 = v8_fma(u1, k3, c13);
        c20 = v8_fma(u2, k0, c20);
        c21 = v8_fma(u2, k1, c21);
        c22 = v8_fma(u2, k2, c22);
        c23 = v8_fma(u2, k3, c23);
        c30 = v8_fma(u3, k0, c30);
        c31 = v8_fma(u3, k1, c31);
        c32 = v8_fma(u3, k2, c32);
        c33 = v8_fma(u3, k3, c33);
    }
    v8_store(A, c00), v8_store(A + 8, c01), v8_store(A + 16, c02), v8_store(A + 24, c03);
    v8_store(A + 32, c10), v8_store(A + 40, c11), v8_store(A + 48, c12), v8_store(A + 56, c13);
    v8_store(A + 64, c20), v8_store(A + 72, c21), v8_store(A + 80, c22), v8_store(A + 88, c23);
    v8_store(A + 96, c30), v8_store(A + 104, c31), v8_store(A + 112, c32), v8_store(A + 120, c33);
}
#else
#define TJ 2
#define TK 2
AI void sums_tile(const double *xP, const double *ub, size_t gs, int g0, int g1, int jt, int kt, double *A)
{
    vec8 c00 = v8_load(A), c01 = v8_load(A + 8), c10 = v8_load(A + 16), c11 = v8_load(A + 24);
    for (int g = g0; g < g1; g++) {
        const double *xg = xP + g * gs;
        const vec8 u8 = v8_load(ub + 8 * g);
        const vec8 k0 = v8_load(xg + 8 * kt), k1 = v8_load(xg + 8 * kt + 8);
        const vec8 u0 = v8_mul(u8, v8_load(xg + 8 * jt)), u1 = v8_mul(u8, v8_load(xg + 8 * jt + 8));
        c00 = v8_fma(u0, k0, c00);
        c01 = v8_fma(u0, k1, c01);
        c10 = v8_fma(u1, k0, c10);
        c11 = v8_fma(u1, k1, c11);
    }
    v8_store(A, c00), v8_store(A + 8, c01), v8_store(A + 16, c10), v8_store(A + 24, c11);
}
#endif

/* Sums over the block's groups of eight rows with eight-lane accumulators
 * (lane r holds rows r, r + 8, ... in order), then ((0+1)+(2+3))+((4+5)+(6+7));
 * the padding rows have x = 0 and u = 0 and add exact zeros.  Products are
 * added by fused multiply-adds.  s6 by tiles of (j, k) in registers
 * (u x_j formed on the fly, rounded as if once per row) over chunks of groups
 * that stay in L1 across the tiles (each tile's accumulators kept in tacc
 * between chunks: the same order of additions as one pass); the padding
 * columns of the packed block are zero and their entries are not stored. */
static void sums_small(int d, const double *xP, int nb, const double *ub, const double *wb, double *s4, double *s5,
                       double *s6, double *tacc)
{
    const int ng = (nb + 7) / 8, dp = ghf__cpu_pack_stride(d);
    const size_t gs = (size_t)8 * dp; /* stride between groups */
    for (int j = 0; j < d; j++) {
        vec8 a4 = v8_zero(), a5 = v8_zero();
        if (wb) /* weighted EM: s4 = sum w x */
            for (int g = 0; g < ng; g++) {
                const vec8 xj = v8_load(xP + g * gs + 8 * j);
                a4 = v8_fma(v8_load(wb + 8 * g), xj, a4);
                a5 = v8_fma(v8_load(ub + 8 * g), xj, a5);
            }
        else
            for (int g = 0; g < ng; g++) {
                const vec8 xj = v8_load(xP + g * gs + 8 * j);
                a4 = v8_add(a4, xj);
                a5 = v8_fma(v8_load(ub + 8 * g), xj, a5);
            }
        s4[j] += v8_hsum(a4);
        s5[j] += v8_hsum(a5);
    }
    const int gc = dp <= 16 ? ng : 8;
    for (int t = 0; t < ghf__cpu_sums_scratch(d); t++) tacc[t] = 0.0;
    for (int g0 = 0; g0 < ng; g0 += gc) {
        const int g1 = g0 + gc < ng ? g0 + gc : ng;
        double *A = tacc;
        for (int jt = 0; jt < dp; jt += TJ)
            for (int kt = 0; kt <= jt; kt += TK, A += 8 * TJ * TK) sums_tile(xP, ub, gs, g0, g1, jt, kt, A);
    }
    const double *A = tacc;
    for (int jt = 0; jt < dp; jt += TJ)
        for (int kt = 0; kt <= jt; kt += TK, A += 8 * TJ * TK)
            for (int a = 0; a < TJ && jt + a < d; a++)
                for (int b = 0; b < TK && kt + b <= jt + a; b++)
                    s6[(size_t)(jt + a) * d + kt + b] += v8_hsum(v8_load(A + 8 * (TK * a + b)));
}

/* Benchmarks: n rounds of 16 independent eight-lane fused multiply-adds
 * (the kernels' arithmetic peak); returns a value that depends on all of them. */
static double fma_loop(long n)
{
    vec8 a[16];
    for (int i = 0; i < 16; i++) a[i] = v8_bcast(1.0 + 1e-3 * i);
    const vec8 m = v8_bcast(0.999999), c = v8_bcast(1e-6);
    for (long r = 0; r < n; r++)
        for (int i = 0; i < 16; i++) a[i] = v8_fma(a[i], m, c);
    double t = 0.0;
    for (int i = 0; i < 16; i++) t += v8_hsum(a[i]);
    return t;
}

const ghf_cpu_kernels GHF_CPU_KERNELS = {GHF_CPU_VEC_NAME, pack,       qzw_small, moments_ref, moments_vec,
                                         row_sums,         sums_small, fma_loop};
