/* cpu_block.h - the CPU E-step's work on one block of rows (src/backend's, and src/em/em_missing.c's for the rows with missing coordinates).
 *
 * A block is GHF_CPU_BLOCK (256) consecutive rows of a shard (a quarter of
 * an exact-sum block, GHF_ROW_BLOCK); every kernel computes each row's
 * values from that row alone, in an order that does not depend on where the
 * row sits in the block or in a vector register, and forms sums over the
 * block in row order with fixed eight-lane accumulators.  So the statistics
 * have the same bits whatever the number of threads and ranks and whichever
 * instruction set the kernels were compiled for (FP contraction is off;
 * multiply-adds are explicit fused ones).
 *
 * The per-row moments have two paths:
 *   ref: ghf_estep_point on the Bessel quantities of the plan (or the fused
 *        evaluator): one log and two exps per row (the reference, tested);
 *   vec: the folded plan (kernels/bessel_fplan.h), arrays over the block
 *        (no log or exp); rows it does not cover (outside the plan, faces,
 *        unusable pieces) take the ref path.
 * They agree to about 1e-15 relative per row (tests/test_cpu_estep.c).
 *
 * The kernels are compiled three times, for x86-64-v4 (AVX-512), x86-64-v3
 * (AVX2, FMA) and the baseline (cpu_block_v4.c, cpu_block_v3.c,
 * cpu_block_base.c from cpu_block_impl.h), and the best one this CPU runs is
 * picked at run time; all three give the same bits (tests/test_cpu_isa.c). */
#ifndef GHF_CPU_BLOCK_H
#define GHF_CPU_BLOCK_H

#include "bessel_fplan.h"
#include "estep.h"

#define GHF_CPU_BLOCK 256 /* divides GHF_ROW_BLOCK (src/dist/xreduce.h) */
/* up to this d the d x d work is these kernels (faster than OpenBLAS's
 * dtrmm/dsyrk on 256-row blocks: 1.3-1.7x at d = 50-128), BLAS above */
#define GHF_CPU_SMALL_D 128

/* How the Bessel quantities of a block's rows are evaluated. */
typedef struct ghf_cpu_bessel {
    const ghf_estep_consts *kc;
    const ghf_bessel_plan *plan;   /* NULL: the fused evaluator for every row */
    const ghf_bessel_fplan *fplan; /* NULL: the ref path for every row */
    int plan_avx2;                 /* evaluate plan with ghf_bessel_plan_eval_avx2 (same bits) */
} ghf_cpu_bessel;

/* Small d: the block packed as groups of eight rows, each group column by
 * column, with dp = ghf__cpu_pack_stride(d) columns: xP[g*8*dp + 8*k + r] =
 * x[8g + r][k]; the last group is padded with zero rows and every group with
 * zero columns up to dp (ceil(nb/8) groups, at most GHF_CPU_BLOCK * dp doubles). */
static inline int ghf__cpu_pack_stride(int d)
{
    return (d + 3) & ~3;
}

/* doubles of scratch for the sums: the accumulators of the lower triangle
 * of s6's tiles, 8 lanes each (tiles of 4 x 4 or 2 x 2; the larger count) */
static inline int ghf__cpu_sums_scratch(int d)
{
    const int t4 = ghf__cpu_pack_stride(d) / 4, t2 = 2 * t4;
    const int n4 = 128 * (t4 * (t4 + 1) / 2), n2 = 32 * (t2 * (t2 + 1) / 2);
    return n4 > n2 ? n4 : n2;
}

/* The kernels, compiled once per instruction set (cpu_block_impl.h). */
typedef struct ghf_cpu_kernels {
    const char *isa; /* for people: "x86-64-v4 (AVX-512)", ... */
    /* Small d: pack the block (see above). */
    void (*pack)(int d, const double *xb, int nb, double *xP);
    /* q = |L^-1 (x - mu)|^2 and zw = (L^-1 (x - mu)).w of the block's rows
     * from the packed block (d <= GHF_CPU_SMALL_D); q and zw are filled up to
     * the end of the last group.  next (may be NULL): the nnext rows
     * (row-major) to be packed after these, prefetched meanwhile. */
    void (*qzw)(int d, const double *xP, int nb, const double *mu, const double *linv, const double *w,
                double *q, double *zw, const double *next, int nnext);
    /* Per-row moments (u = E[1/Y|x], v = E[Y|x], l = E[log Y|x], ll = log f(x)). */
    void (*moments_ref)(const ghf_cpu_bessel *bs, const double *q, const double *zw, int nb, double *u,
                        double *v, double *l, double *ll);
    void (*moments_vec)(const ghf_cpu_bessel *bs, const double *q, const double *zw, int nb, double *u,
                        double *v, double *l, double *ll);
    /* out[0..5] = the block's sums of u, v, l, ll over the rows whose four
     * moments are finite, the number of other rows, and the sum of |zw| over
     * the finite ones; u is set to 0 on the other rows and on the padding rows
     * up to the end of the last group of eight (u, v, l, ll, zw hold nb rows;
     * u has room for the padding). */
    void (*row_sums)(int nb, double *u, const double *v, const double *l, const double *ll, const double *zw,
                     double *out);
    /* The block's s4 += sum x (sum w x when wb is set: weighted EM), s5 +=
     * sum u x and the lower triangle of s6 += sum u x x^T from the packed
     * block (d <= GHF_CPU_SMALL_D); ub (and wb) must be 0 on the padding rows
     * of the last group; tacc: ghf__cpu_sums_scratch(d) doubles. */
    void (*sums)(int d, const double *xP, int nb, const double *ub, const double *wb, double *s4, double *s5,
                 double *s6, double *tacc);
    /* Benchmarks: 16 n eight-lane fused multiply-adds, independent (the peak). */
    double (*fma_loop)(long n);
} ghf_cpu_kernels;

enum { GHF_CPU_ISA_BASE = 0, GHF_CPU_ISA_V3 = 1, GHF_CPU_ISA_V4 = 2 };

/* The kernels built for isa, or NULL if this build or this CPU lacks them. */
const ghf_cpu_kernels *ghf__cpu_kernels_isa(int isa);
/* The best of them for this CPU (GHFIT_CPU_ISA=base|v3|v4 caps the choice). */
const ghf_cpu_kernels *ghf__cpu_kernels(void);

#endif
