/* cpu.c - the CPU E-step: OpenMP over row blocks, OpenBLAS for the
 * d x d work, one MPI_Allreduce of the statistics per iteration.
 *
 * One pass over the shard per iteration, block by block: z = L^-1 (x - mu)
 * (plain loops for small d, dtrmm above), q = z.z, zw = z.w; the Bessel
 * quantities at the iteration's order (through a fixed-order plan built for a
 * global bound on the arguments when the shard is large enough to pay for
 * it); the posterior moments; and the weighted sums s5 = X^T u and
 * s6 = X^T diag(u) X (dot products for small d, dgemv/dsyrk above).
 * Every block's partial sums are formed in row order by one thread and then
 * added exactly (src/dist/xreduce.h, kernels/xsum.h), per thread and across
 * ranks, so the statistics have the same bits whatever the number of
 * threads and ranks (shards start at multiples of the block). */
#include <cblas.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "backend.h"
#include "cpu_block.h"
#include "xreduce.h"

/* sub-blocks of the kernels; the exact sums add one partial per GHF_ROW_BLOCK rows */
#define CPU_BLOCK GHF_CPU_BLOCK
#define CPU_UNIT GHF_ROW_BLOCK
_Static_assert(GHF_ROW_BLOCK % GHF_CPU_BLOCK == 0, "cpu_block.h and xreduce.h agree on the blocks");
_Static_assert(GHF_SCORE_BLOCK == GHF_CPU_BLOCK, "backend.h and cpu_block.h agree on the blocks");
#define CPU_SMALL_D GHF_CPU_SMALL_D
/* per-thread scratch (doubles, a multiple of 8): two blocks of rows (d + 3
 * columns), eight row vectors, the s6 tiles' accumulators */
#define CPU_TBUF(d) (2 * CPU_BLOCK * ((d) + 3) + 8 * CPU_BLOCK + ((d) <= CPU_SMALL_D ? ghf__cpu_sums_scratch(d) : 0))
/* Build the plan only when the fit (all ranks) has this many rows per plan node. */
#define CPU_PLAN_ROWS_PER_NODE 4

typedef struct cpu_impl {
    MPI_Comm comm;
    const double *x;
    int64_t nrows;
    int64_t n_global;   /* rows over all ranks: whether the plan pays is decided on it,
                           so that every row is evaluated the same way on any rank count */
    int d;
    int nthreads;
    int len;
    int small_d;   /* d up to which plain loops replace BLAS */
    int plan_mode; /* -1 auto, 0 never, 1 always */
    int ref_path;  /* 1: the per-row moments by the scalar reference (ghf_estep_point) */
    double xnorm_max;   /* largest row norm over all ranks; < 0: not yet known (the first estep finds it) */
    double *tstats;     /* [nthreads][len] a block's partial sums */
    ghf_xsum *txs;      /* [nthreads][len] the blocks' partials, added exactly */
    double *tbuf;       /* [nthreads][CPU_TBUF(d)] */
    ghf_bessel_plan *plan;
    ghf_bessel_fplan *fplan; /* the plan folded with the per-row log and exps */
    int plan_avx2; /* evaluate the plan with ghf_bessel_plan_eval_avx2 (same bits) */
    const ghf_cpu_kernels *k; /* the block kernels for this CPU's instruction set */
    const double *w; /* the rows' weights during an estep (be->weights), or NULL */
} cpu_impl;

static void cpu_destroy(ghf_backend *be)
{
    if (!be) return;
    cpu_impl *c = be->impl;
    if (c) {
        free(c->tstats);
        free(c->txs);
        free(c->tbuf);
        free(c->plan);
        free(c->fplan);
        free(c);
    }
    free(be);
}

/* Large d: q and zw of the block's rows by BLAS (dtrmm); scratch holds
 * CPU_BLOCK*d doubles. */
static void block_qzw_blas(const cpu_impl *c, const ghf_estep_input *in, const double *xb, int nb,
                           double *zb, double *qv, double *zwv)
{
    const int d = c->d;
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < d; j++) zb[(size_t)i * d + j] = xb[(size_t)i * d + j] - in->mu[j];
    /* Z = (X - mu) L^-T, i.e. row i becomes L^-1 (x_i - mu) */
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, nb, d, 1.0, in->linv, d,
                zb, d);
    for (int i = 0; i < nb; i++) {
        const double *zi = zb + (size_t)i * d;
        double qq = 0.0, zz = 0.0;
        for (int j = 0; j < d; j++) {
            qq += zi[j] * zi[j];
            zz += zi[j] * in->w[j];
        }
        qv[i] = qq;
        zwv[i] = zz;
    }
}

/* q and zw of the nb rows from r0: the packed register kernels for small d
 * (xT: the packed rows; the next block prefetched), else through BLAS (zb). */
static void block_qzw(const cpu_impl *c, const ghf_estep_input *in, int64_t r0, int nb, double *xT, double *zb,
                      double *qv, double *zwv)
{
    const int d = c->d;
    const double *xb = c->x + (size_t)r0 * d;
    if (d <= c->small_d) {
        const int64_t r1 = r0 + CPU_BLOCK;
        const int nn = r1 < c->nrows ? (int)(c->nrows - r1 < CPU_BLOCK ? c->nrows - r1 : CPU_BLOCK) : 0;
        c->k->pack(d, xb, nb, xT);
        c->k->qzw(d, xT, nb, in->mu, in->linv, in->w, qv, zwv, nn ? xb + (size_t)CPU_BLOCK * d : NULL, nn);
    } else {
        block_qzw_blas(c, in, xb, nb, zb, qv, zwv);
    }
}

/* Weighted EM: the block's per-row moments (and |zw|, the scale of the
 * log-likelihood's rounding) times the rows' weights; a row of weight 0
 * contributes exact zeros (also where its moments are not finite).  wpad
 * gets the weights padded with zeros to the end of the last group of
 * eight; returns the block's sum of the weights (eight lanes, as row_sums). */
static double block_weigh(const double *wt, int nb, double *ub, double *vb, double *lb, double *llb, double *zwv,
                          double *wpad)
{
    for (int i = 0; i < nb; i++) {
        const double w = wt[i];
        const int z = w == 0.0;
        ub[i] = z ? 0.0 : ub[i] * w;
        vb[i] = z ? 0.0 : vb[i] * w;
        lb[i] = z ? 0.0 : lb[i] * w;
        llb[i] = z ? 0.0 : llb[i] * w;
        zwv[i] = z ? 0.0 : zwv[i] * w;
        wpad[i] = w;
    }
    int ng = (nb + 7) / 8;
    for (int i = nb; i < 8 * ng; i++) wpad[i] = 0.0;
    double t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int g = 0; g < ng; g++)
        for (int r = 0; r < 8; r++) t[r] += wpad[8 * g + r];
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

/* Weighted EM: s4 += sum w x over the block's rows, in row order. */
static void block_s4_weighted(int d, const double *xb, int nb, const double *wt, double *s4)
{
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < d; j++) s4[j] += wt[i] * xb[(size_t)i * d + j];
}

/* Large d: the sub-block's s4 (sum x, or sum w x when wt is set), s5 and the
 * lower triangle of s6 added by BLAS (dgemv, dsyrk). */
static void block_sums_blas(int d, const double *xb, int nb, const double *ub, double *wb, double *s4,
                            double *s5, double *s6, const double *wt)
{
    for (int i = 0; i < nb; i++) {
        const double su = sqrt(ub[i]);
        for (int j = 0; j < d; j++) wb[(size_t)i * d + j] = su * xb[(size_t)i * d + j];
    }
    if (wt)
        block_s4_weighted(d, xb, nb, wt, s4);
    else
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < d; j++) s4[j] += xb[(size_t)i * d + j];
    cblas_dgemv(CblasRowMajor, CblasTrans, nb, d, 1.0, xb, d, ub, 1, 1.0, s5, 1);
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, nb, 1.0, wb, d, 1.0, s6, d);
}

/* One sub-block of CPU_BLOCK rows: its partial sums added to acc[len] (the
 * layout of the statistics; only the lower triangle of s6). */
static void cpu_block(const cpu_impl *c, const ghf_estep_input *in, const ghf_cpu_bessel *bs, int64_t bi,
                      double *wb, double *acc)
{
    const int d = c->d;
    const int64_t r0 = bi * CPU_BLOCK;
    const int nb = (int)((r0 + CPU_BLOCK <= c->nrows) ? CPU_BLOCK : c->nrows - r0);
    const double *xb = c->x + (size_t)r0 * d;
    /* scratch: [CPU_BLOCK*(d+3)] packed rows or sqrt(u) x | [CPU_BLOCK*(d+3)] z rows |
     * q zw u v l ll (ux unused) | s6 tile accumulators */
    double *xT = wb, *zb = wb + (size_t)CPU_BLOCK * (d + 3);
    double *qv = zb + (size_t)CPU_BLOCK * (d + 3), *zwv = qv + CPU_BLOCK, *ub = zwv + CPU_BLOCK;
    double *vb = ub + CPU_BLOCK, *lb = vb + CPU_BLOCK, *llb = lb + CPU_BLOCK, *ux = llb + CPU_BLOCK;
    const int small = d <= c->small_d;
    block_qzw(c, in, r0, nb, xT, zb, qv, zwv);
    if (c->ref_path)
        c->k->moments_ref(bs, qv, zwv, nb, ub, vb, lb, llb);
    else
        c->k->moments_vec(bs, qv, zwv, nb, ub, vb, lb, llb);
    const double *wt = c->w ? c->w + r0 : NULL;
    double *wpad = ux; /* weighted, small d: the weights padded with zeros to the last group of eight */
    if (wt) acc[GHF_ST_N] += block_weigh(wt, nb, ub, vb, lb, llb, zwv, wpad);
    else acc[GHF_ST_N] += nb;
    double rs[6]; /* s1 s2 s3 ll bad zwa */
    c->k->row_sums(nb, ub, vb, lb, llb, zwv, rs);
    /* the sub-block's partial sums: scalars, s4, s5, lower triangle of s6 */
    acc[GHF_ST_S1] += rs[0];
    acc[GHF_ST_S2] += rs[1];
    acc[GHF_ST_S3] += rs[2];
    acc[GHF_ST_LL] += rs[3];
    acc[GHF_ST_NBAD] += rs[4];
    acc[GHF_ST_ZWABS] += rs[5]; /* the stop flag is added once, by the caller */
    double *s4 = acc + GHF_ST_S4, *s5 = acc + ghf_stats_s5(d), *s6 = acc + ghf_stats_s6(d);
    if (small)
        c->k->sums(d, xT, nb, ub, wt ? wpad : NULL, s4, s5, s6, ux + CPU_BLOCK);
    else
        block_sums_blas(d, xb, nb, ub, wb, s4, s5, s6, wt);
}

/* The plan (and its folded form) for this iteration's order over the Bessel
 * arguments of q in [0, qmax], qmax a global quantity (so every rank builds
 * the same pieces).  Pieces lie on a fixed grid (a piece's values do not
 * depend on the range); arguments outside the built pieces fall back to
 * direct evaluation.  Returns 1 if the plan is used. */
static int cpu_build_plan_q(cpu_impl *c, const ghf_estep_input *in, double qmax)
{
    const ghf_estep_consts *kc = &in->c;
    if (c->n_global <= 0 || c->plan_mode == 0) return 0;
    const double zmax = ghf_estep_arg(kc, qmax);
    double zmin = ghf_estep_arg(kc, 0.0);
    /* b = 0 (vg): z = sqrt(A q) reaches 0 at mu; the plan covers the top 30
     * octaves and the rows below them (q < 2^-60 of the bound) are evaluated
     * directly */
    if (zmin == 0.0) zmin = ldexp(zmax, -30);
    if (!isfinite(zmax) || ghf_bessel_plan_setup(c->plan, kc->P, zmin, zmax) != 0) return 0;
    const int nn = ghf_bessel_plan_num_nodes(c->plan);
    if (c->plan_mode != 1 && (int64_t)nn * CPU_PLAN_ROWS_PER_NODE > c->n_global) return 0;
    const int np = ghf_bessel_plan_num_pieces(c->plan);
    const int fold = !c->ref_path;
    ghf_bessel_fplan_setup(c->fplan, c->plan);
#pragma omp parallel num_threads(c->nthreads)
    {
#pragma omp for schedule(dynamic, 4)
        for (int i = 0; i < nn; i++) ghf_bessel_plan_node(c->plan, i);
#pragma omp for schedule(static)
        for (int i = 0; i < np; i++) {
            if (fold) ghf_bessel_fplan_fold(c->fplan, c->plan, i); /* reads the node values */
            ghf_bessel_plan_finish_piece(c->plan, i);
        }
    }
    return 1;
}

/* The E-step's plan: q = |L^-1 (x - mu)|^2 <= |L^-1|_F^2 (max|x| + |mu|)^2. */
static int cpu_build_plan(cpu_impl *c, const ghf_estep_input *in)
{
    const int d = c->d;
    double lf = 0.0, mu2 = 0.0;
    for (int i = 0; i < d * d; i++) lf += in->linv[i] * in->linv[i];
    for (int j = 0; j < d; j++) mu2 += in->mu[j] * in->mu[j];
    const double r = c->xnorm_max + sqrt(mu2);
    return cpu_build_plan_q(c, in, lf * r * r);
}

/* Collective: the largest row norm over all ranks (it bounds the Bessel
 * arguments of every E-step), once, at the first estep. */
static void cpu_xnorm(cpu_impl *c)
{
    const int d = c->d;
    double xm = 0.0;
#pragma omp parallel for schedule(static) reduction(max : xm) num_threads(c->nthreads)
    for (int64_t i = 0; i < c->nrows; i++) {
        double r2 = 0.0;
        for (int j = 0; j < d; j++) r2 += c->x[i * d + j] * c->x[i * d + j];
        xm = fmax(xm, r2);
    }
    MPI_Allreduce(MPI_IN_PLACE, &xm, 1, MPI_DOUBLE, MPI_MAX, c->comm);
    c->xnorm_max = sqrt(xm);
}

static int cpu_estep(ghf_backend *be, const ghf_estep_input *in, double *stats, char *err,
                     size_t errlen)
{
    cpu_impl *c = be->impl;
    const int d = c->d, len = c->len;
    const int64_t nunit = (c->nrows + CPU_UNIT - 1) / CPU_UNIT;
    if (c->xnorm_max < 0.0) cpu_xnorm(c);
    const double t0 = MPI_Wtime();
    c->w = be->weights;
    const int use_plan = cpu_build_plan(c, in);
    be->last_used_plan = use_plan;
    const ghf_cpu_bessel bs = {&in->c, use_plan ? c->plan : NULL,
                               use_plan && !c->ref_path ? c->fplan : NULL, c->plan_avx2};

    /* one pass: quadratic forms, moments and sums, unit by unit (each in
     * sub-blocks), one exact addition per unit and statistic */
#pragma omp parallel num_threads(c->nthreads)
    {
        const int tid = omp_get_thread_num();
        double *acc = c->tstats + (size_t)tid * (size_t)len;
        ghf_xsum *xs = c->txs + (size_t)tid * (size_t)len;
        double *wb = c->tbuf + (size_t)tid * (size_t)CPU_TBUF(d);
        for (int i = 0; i < len; i++) ghf_xsum_init(&xs[i]);
#pragma omp for schedule(static)
        for (int64_t ui = 0; ui < nunit; ui++) {
            memset(acc, 0, (size_t)len * sizeof(double));
            const int64_t b1 = ((ui + 1) * CPU_UNIT < c->nrows ? (ui + 1) * CPU_UNIT : c->nrows);
            for (int64_t bi = ui * (CPU_UNIT / CPU_BLOCK); bi * CPU_BLOCK < b1; bi++) cpu_block(c, in, &bs, bi, wb, acc);
            for (int i = 0; i < GHF_ST_S4 + 2 * d; i++) ghf_xsum_add(&xs[i], acc[i]);
            const double *s6 = acc + ghf_stats_s6(d);
            for (int j = 0; j < d; j++)
                for (int k = 0; k <= j; k++) ghf_xsum_add(&xs[ghf_stats_s6(d) + j * d + k], s6[j * d + k]);
        }
    }
    /* threads, then ranks: exact, in any order */
    for (int t = 1; t < c->nthreads; t++)
        for (int i = 0; i < len; i++) ghf_xsum_merge(&c->txs[i], &c->txs[(size_t)t * len + i]);
    if (in->stop_request) ghf_xsum_add(&c->txs[GHF_ST_STOP], 1.0);
    const double t1 = MPI_Wtime();
    const int rc = ghf_xsum_allreduce(c->comm, c->txs, len);
    for (int i = 0; i < len; i++) stats[i] = ghf_xsum_value(&c->txs[i]);
    const double t2 = MPI_Wtime();
    be->t_estep += t1 - t0;
    be->t_allreduce += t2 - t1;
    be->n_calls++;
    if (rc != 0) {
        snprintf(err, errlen, "the all-reduce of the E-step statistics failed");
        return 1;
    }
    return 0;
}

ghf_backend *ghf_backend_cpu_create(MPI_Comm comm, const double *x, int64_t nrows, int d, char *err,
                                    size_t errlen)
{
    ghf_backend *be = calloc(1, sizeof *be);
    cpu_impl *c = calloc(1, sizeof *c);
    if (ghf_agree(comm, !be || !c, NULL, 0)) goto oom;
    be->impl = c;
    be->name = "cpu";
    snprintf(be->device, sizeof be->device, "cpu");
    be->estep = cpu_estep;
    be->destroy = cpu_destroy;
    /* BLAS runs inside our OpenMP threads: keep it single-threaded there. */
    openblas_set_num_threads(1);
    c->comm = comm;
    c->x = x;
    c->nrows = nrows;
    c->d = d;
    c->len = ghf_stats_len(d);
    c->small_d = CPU_SMALL_D;
    c->k = ghf__cpu_kernels();
#ifdef GHF_BESSEL_PLAN_AVX2
    c->plan_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    c->plan_mode = -1;
    c->nthreads = omp_get_max_threads();
    if (c->nthreads < 1) c->nthreads = 1;
    c->tstats = malloc((size_t)c->nthreads * (size_t)c->len * sizeof(double));
    c->txs = malloc((size_t)c->nthreads * (size_t)c->len * sizeof(ghf_xsum));
    c->tbuf = aligned_alloc(64, (size_t)c->nthreads * (size_t)CPU_TBUF(d) * sizeof(double)); /* vectors of 8 */
    c->plan = malloc(sizeof *c->plan);
    c->fplan = malloc(sizeof *c->fplan);
    int fail = !c->tstats || !c->txs || !c->tbuf || !c->plan || !c->fplan;
    if (fail) snprintf(err, errlen, "out of memory creating the CPU backend (%lld rows x %d)", (long long)nrows, d);
    if (ghf_test_fail("backend", err, errlen)) fail = 1;
    if (ghf_agree(comm, fail, err, errlen)) { /* before the collectives below: every rank leaves */
        cpu_destroy(be);
        return NULL;
    }
    c->xnorm_max = -1.0; /* found by the first estep (ghf_backend_cpu_score does not need it) */
    c->n_global = nrows;
    MPI_Allreduce(MPI_IN_PLACE, &c->n_global, 1, MPI_INT64_T, MPI_SUM, comm);
    return be;
oom:
    snprintf(err, errlen, "out of memory creating the CPU backend (%lld rows x %d)", (long long)nrows, d);
    if (be) {
        be->impl = c;
        cpu_destroy(be);
    } else {
        free(c);
    }
    return NULL;
}

/* ---------------------------------------------------------------------------
 * `ghfit eval`: the rows' own values, without the statistics
 * ------------------------------------------------------------------------- */

/* dst[0..n) = src[0..n) with non-temporal stores where dst is 16-byte
 * aligned (the pass's arrays are read back only after the whole pass: no
 * read-for-ownership of their lines) */
void ghf__stream_fence(void)
{
#ifdef __SSE2__
    _mm_sfence();
#endif
}

void ghf__stream_copy(double *dst, const double *src, int n)
{
#ifdef __SSE2__
    if (((uintptr_t)dst & 15) == 0) {
        int i = 0;
        for (; i + 2 <= n; i += 2) _mm_stream_pd(dst + i, _mm_loadu_pd(src + i));
        for (; i < n; i++) dst[i] = src[i];
        return;
    }
#endif
    memcpy(dst, src, (size_t)n * sizeof(double));
}

/* eval's Bessel plan for q in [0, qmax] (or none where it does not pay) and
 * the evaluator over it. */
static ghf_cpu_bessel score_plan(ghf_backend *be, const ghf_estep_input *in, double qmax)
{
    cpu_impl *c = be->impl;
    const int use_plan = cpu_build_plan_q(c, in, qmax);
    be->last_used_plan = use_plan;
    return (ghf_cpu_bessel){&in->c, use_plan ? c->plan : NULL, use_plan && !c->ref_path ? c->fplan : NULL,
                            c->plan_avx2};
}

/* rows in sub-block bi */
static int score_nb(const cpu_impl *c, int64_t bi)
{
    const int64_t r0 = bi * CPU_BLOCK;
    return (int)(r0 + CPU_BLOCK <= c->nrows ? CPU_BLOCK : c->nrows - r0);
}

static int row_is_finite(const double *xi, int d)
{
    int ok = 1;
    for (int j = 0; j < d; j++) ok &= isfinite(xi[j]) ? 1 : 0;
    return ok;
}

/* First pass, one sub-block: q and zw of its rows (the E-step's kernels) to
 * q[] and zwo[] (NULL: not kept); a row with a non-finite value (its q is never finite) is
 * flagged 1 and gets q = zw = 0 (the values of x = mu).  Returns the largest
 * finite q of the rows not flagged. */
static double score_block_q(const cpu_impl *c, const ghf_estep_input *in, int64_t bi, double *wb, double *q,
                            double *zwo, unsigned char *flag)
{
    const int d = c->d;
    const int64_t r0 = bi * CPU_BLOCK;
    const int nb = score_nb(c, bi);
    const double *xb = c->x + (size_t)r0 * d;
    double *xT = wb, *zb = wb + (size_t)CPU_BLOCK * (d + 3);
    double *qv = zb + (size_t)CPU_BLOCK * (d + 3), *zwv = qv + CPU_BLOCK;
    block_qzw(c, in, r0, nb, xT, zb, qv, zwv);
    double qm = 0.0;
    for (int i = 0; i < nb; i++) {
        if (!isfinite(qv[i]) && !row_is_finite(xb + (size_t)i * d, d)) {
            flag[r0 + i] = 1;
            qv[i] = zwv[i] = 0.0;
        }
        qm = qv[i] > qm && qv[i] <= DBL_MAX ? qv[i] : qm; /* not NaN, nor inf (a finite row's overflow) */
    }
    ghf__stream_copy(q + r0, qv, nb);
    if (zwo) ghf__stream_copy(zwo + r0, zwv, nb);
    return qm;
}

/* One pass: the plan's range from the sampled sub-blocks (global index a
 * multiple of GHF_SCORE_SAMPLE): GHF_SCORE_MARGIN times their largest finite
 * q over all ranks.  Collective. */
static int score_sample_qmax(const cpu_impl *c, const ghf_estep_input *in, int64_t row0, double *qmax)
{
    const int d = c->d;
    const int64_t nblk = (c->nrows + CPU_BLOCK - 1) / CPU_BLOCK, g0 = row0 / CPU_BLOCK;
    const int64_t first = (GHF_SCORE_SAMPLE - g0 % GHF_SCORE_SAMPLE) % GHF_SCORE_SAMPLE;
    double qs = 0.0;
#pragma omp parallel num_threads(c->nthreads) reduction(max : qs)
    {
        double *wb = c->tbuf + (size_t)omp_get_thread_num() * (size_t)CPU_TBUF(d);
        double *xT = wb, *zb = wb + (size_t)CPU_BLOCK * (d + 3);
        double *qv = zb + (size_t)CPU_BLOCK * (d + 3), *zwv = qv + CPU_BLOCK;
#pragma omp for schedule(static)
        for (int64_t bi = first; bi < nblk; bi += GHF_SCORE_SAMPLE) {
            const int nb = score_nb(c, bi);
            block_qzw(c, in, bi * CPU_BLOCK, nb, xT, zb, qv, zwv);
            for (int i = 0; i < nb; i++) qs = qv[i] > qs && qv[i] <= DBL_MAX ? qv[i] : qs;
        }
    }
    *qmax = qs;
    return MPI_Allreduce(MPI_IN_PLACE, qmax, 1, MPI_DOUBLE, MPI_MAX, c->comm) != MPI_SUCCESS;
}

/* Second pass, one sub-block: the moments from q and zw into the thread's
 * scratch (ll, E[Y|x], E[1/Y|x], E[log Y|x] not kept), then fn. */
static void score_block_moments(const cpu_impl *c, const ghf_cpu_bessel *bs, int64_t bi, double *wb,
                                double *q, const double *zw, unsigned char *flag, ghf_score_fn fn, void *ctx)
{
    const int64_t r0 = bi * CPU_BLOCK;
    const int nb = score_nb(c, bi);
    double *ll = wb, *v = wb + CPU_BLOCK, *u = wb + 2 * CPU_BLOCK, *lb = wb + 3 * CPU_BLOCK;
    if (c->ref_path)
        c->k->moments_ref(bs, q + r0, zw + r0, nb, u, v, lb, ll);
    else
        c->k->moments_vec(bs, q + r0, zw + r0, nb, u, v, lb, ll);
    const ghf_score_block b = {bi, r0, nb, q + r0, ll, v, u, flag + r0};
    fn(ctx, &b);
}

int ghf_backend_cpu_score(ghf_backend *be, const ghf_estep_input *in, int64_t row0, double *q, double *zw,
                          unsigned char *flag, ghf_score_fn fn, void *ctx, char *err, size_t errlen)
{
    cpu_impl *c = be->impl;
    const int d = c->d;
    const int64_t nblk = (c->nrows + CPU_BLOCK - 1) / CPU_BLOCK;
    const int moments = zw != NULL;
    double qmax = 0.0;
#pragma omp parallel num_threads(c->nthreads) reduction(max : qmax)
    {
        double *wb = c->tbuf + (size_t)omp_get_thread_num() * (size_t)CPU_TBUF(d);
#pragma omp for schedule(static)
        for (int64_t bi = 0; bi < nblk; bi++) {
            const double m = score_block_q(c, in, bi, wb, q, zw, flag);
            qmax = m > qmax ? m : qmax;
        }
        ghf__stream_fence(); /* this thread's streamed q and zw, before the other threads read them */
    }
    /* x is not read from here on */
    if (!moments) {
#pragma omp parallel num_threads(c->nthreads)
        {
#pragma omp for schedule(static)
            for (int64_t bi = 0; bi < nblk; bi++) {
                const ghf_score_block b = {bi, bi * CPU_BLOCK, score_nb(c, bi), q + bi * CPU_BLOCK, NULL, NULL, NULL,
                                           flag + bi * CPU_BLOCK};
                fn(ctx, &b);
            }
            ghf__stream_fence(); /* fn's streamed stores */
        }
        return 0;
    }
    /* the plan's range: as the one pass where eval may take it (the same
     * values whichever pass), else the largest q over all ranks */
    int rc;
    if (d >= 3 && d <= GHF_SCORE_ONE_PASS_MAX_D && !ghf_any(c->comm, row0 < 0 || row0 % CPU_BLOCK != 0)) {
        rc = score_sample_qmax(c, in, row0, &qmax);
        qmax *= GHF_SCORE_MARGIN;
    } else {
        rc = MPI_Allreduce(MPI_IN_PLACE, &qmax, 1, MPI_DOUBLE, MPI_MAX, c->comm) != MPI_SUCCESS;
    }
    if (rc) {
        snprintf(err, errlen, "the all-reduce of the rows' largest quadratic form failed");
        return 1;
    }
    const ghf_cpu_bessel bs = score_plan(be, in, qmax);
#pragma omp parallel num_threads(c->nthreads)
    {
        double *wb = c->tbuf + (size_t)omp_get_thread_num() * (size_t)CPU_TBUF(d);
#pragma omp for schedule(static)
        for (int64_t bi = 0; bi < nblk; bi++) score_block_moments(c, &bs, bi, wb, q, zw, flag, fn, ctx);
        ghf__stream_fence(); /* fn's streamed stores */
    }
    return 0;
}

/* One pass, one sub-block: q, zw, flags (as score_block_q), the moments,
 * then fn, all in the thread's scratch. */
static void score_block_one(const cpu_impl *c, const ghf_cpu_bessel *bs, const ghf_estep_input *in, int64_t bi,
                            int in_rows, double *wb, unsigned char *flag, ghf_score_fn fn, void *ctx)
{
    const int d = c->d;
    const int64_t r0 = bi * CPU_BLOCK;
    const int nb = score_nb(c, bi);
    const double *xb = c->x + (size_t)r0 * d;
    double *xT = wb, *zb = wb + (size_t)CPU_BLOCK * (d + 3);
    double *qv = zb + (size_t)CPU_BLOCK * (d + 3), *zwv = qv + CPU_BLOCK;
    double *ll = zwv + CPU_BLOCK, *v = ll + CPU_BLOCK, *u = v + CPU_BLOCK, *lb = u + CPU_BLOCK;
    if (in_rows && d >= 3 && nb % 8 == 0) { /* straight into the block's rows (the kernels fill whole groups of 8) */
        ll = (double *)xb, v = ll + nb, u = v + nb;
    }
    block_qzw(c, in, r0, nb, xT, zb, qv, zwv);
    int bad = 0;
    for (int i = 0; i < nb; i++) bad |= !(qv[i] <= DBL_MAX); /* NaN or inf */
    if (bad) /* rare */
        for (int i = 0; i < nb; i++)
            if (!isfinite(qv[i]) && !row_is_finite(xb + (size_t)i * d, d)) {
                flag[r0 + i] = 1;
                qv[i] = zwv[i] = 0.0;
            }
    if (c->ref_path)
        c->k->moments_ref(bs, qv, zwv, nb, u, v, lb, ll);
    else
        c->k->moments_vec(bs, qv, zwv, nb, u, v, lb, ll);
    const ghf_score_block b = {bi, r0, nb, qv, ll, v, u, flag + r0};
    fn(ctx, &b);
}

int ghf_backend_cpu_score1(ghf_backend *be, const ghf_estep_input *in, int64_t row0, int in_rows,
                           unsigned char *flag, ghf_score_fn fn, void *ctx, char *err, size_t errlen)
{
    cpu_impl *c = be->impl;
    const int d = c->d;
    const int64_t nblk = (c->nrows + CPU_BLOCK - 1) / CPU_BLOCK;
    double qs = 0.0;
    if (score_sample_qmax(c, in, row0, &qs)) {
        snprintf(err, errlen, "the all-reduce of the sampled rows' largest quadratic form failed");
        return 1;
    }
    const ghf_cpu_bessel bs = score_plan(be, in, GHF_SCORE_MARGIN * qs);
#pragma omp parallel num_threads(c->nthreads)
    {
        double *wb = c->tbuf + (size_t)omp_get_thread_num() * (size_t)CPU_TBUF(d);
#pragma omp for schedule(static)
        for (int64_t bi = 0; bi < nblk; bi++) score_block_one(c, &bs, in, bi, in_rows, wb, flag, fn, ctx);
        ghf__stream_fence(); /* fn's streamed stores */
    }
    return 0;
}

void ghf_backend_cpu_tune(ghf_backend *be, int small_d_max, int plan_mode)
{
    cpu_impl *c = be->impl;
    c->small_d = small_d_max < 0 ? 0 : (small_d_max > CPU_SMALL_D ? CPU_SMALL_D : small_d_max);
    c->plan_mode = plan_mode;
}

void ghf_backend_cpu_tune_path(ghf_backend *be, int ref)
{
    cpu_impl *c = be->impl;
    c->ref_path = ref ? 1 : 0;
}
