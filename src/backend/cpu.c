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
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "backend.h"
#include "bessel_plan.h"
#include "xreduce.h"

#define CPU_BLOCK GHF_ROW_BLOCK
/* The hot loops are also compiled for AVX2 and picked at run time (GCC
 * function multiversioning); FP contraction stays off, so the results are
 * the same bits on every x86-64. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define GHF_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GHF_CPU_CLONES
#endif
/* up to this d the d x d work is plain loops (BLAS call overhead dominates below) */
#define CPU_SMALL_D 32
/* per-thread scratch: two blocks of rows and five row vectors */
#define CPU_TBUF(d) (2 * CPU_BLOCK * (d) + 5 * CPU_BLOCK)
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
    double xnorm_max;   /* largest row norm over all ranks */
    double *tstats;     /* [nthreads][len] a block's partial sums */
    ghf_xsum *txs;      /* [nthreads][len] the blocks' partials, added exactly */
    double *tbuf;       /* [nthreads][CPU_TBUF(d)] */
    ghf_bessel_plan *plan;
    int plan_avx2; /* evaluate the plan with ghf_bessel_plan_eval_avx2 (same bits) */
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
        free(c);
    }
    free(be);
}

/* Small d: the block's partial sums s4 += sum x, s5 += sum u x and the lower
 * triangle of s6 += sum u x x^T, as dot products over the block's rows
 * (columns contiguous).  Two interleaved accumulators per dot product: the
 * compiler keeps them in one vector register without reassociating anything,
 * so every instruction set gives the same bits. */
#if defined(__GNUC__)
/* Four-lane accumulators: the sums are formed lane by lane in the same order
 * whatever the vector width the compiler lowers them to. */
typedef double ghf_v4d __attribute__((vector_size(32)));
static inline double dot_v4(const double *a, const double *b, int n)
{
    ghf_v4d acc = {0.0, 0.0, 0.0, 0.0};
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        ghf_v4d va, vb;
        memcpy(&va, a + i, sizeof va);
        memcpy(&vb, b + i, sizeof vb);
        acc += va * vb;
    }
    double t = 0.0;
    for (; i < n; i++) t += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + t;
}
static inline double sum_v4(const double *a, int n)
{
    ghf_v4d acc = {0.0, 0.0, 0.0, 0.0};
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        ghf_v4d va;
        memcpy(&va, a + i, sizeof va);
        acc += va;
    }
    double t = 0.0;
    for (; i < n; i++) t += a[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + t;
}
#else
static inline double dot_v4(const double *a, const double *b, int n)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) acc[l] += a[i + l] * b[i + l];
    double t = 0.0;
    for (; i < n; i++) t += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + t;
}
static inline double sum_v4(const double *a, int n)
{
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) acc[l] += a[i + l];
    double t = 0.0;
    for (; i < n; i++) t += a[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + t;
}
#endif

/* Small d: the block's partial sums s4 += sum x, s5 += sum u x and the lower
 * triangle of s6 += sum u x x^T, as dot products over the block's rows
 * (columns contiguous), with four-lane accumulators (the same bits for every
 * instruction set the function is compiled for). */
GHF_CPU_CLONES
static void block_sums_small(int d, const double *xb, int nb, const double *ub, double *restrict xT,
                             double *restrict ux, double *s4, double *s5, double *s6)
{
    for (int j = 0; j < d; j++) {
        double *restrict col = xT + (size_t)j * CPU_BLOCK;
        for (int i = 0; i < nb; i++) col[i] = xb[(size_t)i * d + j];
    }
    for (int j = 0; j < d; j++) {
        const double *restrict xj = xT + (size_t)j * CPU_BLOCK;
        for (int i = 0; i < nb; i++) ux[i] = ub[i] * xj[i];
        s4[j] += sum_v4(xj, nb);
        s5[j] += sum_v4(ux, nb);
        double *row = s6 + (size_t)j * d;
        for (int kk = 0; kk <= j; kk++) row[kk] += dot_v4(ux, xT + (size_t)kk * CPU_BLOCK, nb);
    }
}

/* q and zw of the block's rows (into qv, zwv); scratch has CPU_TBUF(d) doubles
 * and the first CPU_BLOCK*d + 2*CPU_BLOCK of it are used. */
GHF_CPU_CLONES
static void block_qzw(const cpu_impl *c, const ghf_estep_input *in, const double *xb, int nb,
                      double *scratch, double *qv, double *zwv)
{
    const int d = c->d;
    if (d <= c->small_d) {
        /* small d: the block transposed (columns contiguous), so every loop
         * below runs over rows and vectorises */
        double *restrict dT = scratch, *restrict zj = scratch + (size_t)CPU_BLOCK * d;
        for (int j = 0; j < d; j++) {
            const double m = in->mu[j];
            double *col = dT + (size_t)j * CPU_BLOCK;
            for (int i = 0; i < nb; i++) col[i] = xb[(size_t)i * d + j] - m;
        }
        for (int i = 0; i < nb; i++) qv[i] = zwv[i] = 0.0;
        for (int j = 0; j < d; j++) {
            const double *lj = in->linv + (size_t)j * d;
            const double wj = in->w[j];
            for (int i = 0; i < nb; i++) zj[i] = lj[0] * dT[i];
            for (int kk = 1; kk <= j; kk++) {
                const double l = lj[kk];
                const double *restrict col = dT + (size_t)kk * CPU_BLOCK;
                for (int i = 0; i < nb; i++) zj[i] += l * col[i];
            }
            for (int i = 0; i < nb; i++) {
                qv[i] += zj[i] * zj[i];
                zwv[i] += zj[i] * wj;
            }
        }
        return;
    }
    double *zb = scratch;
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

static int cpu_estep(ghf_backend *be, const ghf_estep_input *in, double *stats, char *err,
                     size_t errlen)
{
    cpu_impl *c = be->impl;
    const int d = c->d, len = c->len;
    const int64_t n = c->nrows;
    const int64_t nblk = (n + CPU_BLOCK - 1) / CPU_BLOCK;
    const ghf_estep_consts kc = in->c;
    const double t0 = MPI_Wtime();

    /* The plan's range of Bessel arguments, from global quantities only (so
     * every rank builds the same pieces): q = |L^-1 (x - mu)|^2 <=
     * |L^-1|_F^2 (max|x| + |mu|)^2.  Pieces lie on a fixed grid; arguments
     * outside the built pieces fall back to direct evaluation. */
    int use_plan = 0;
    if (c->n_global > 0 && c->plan_mode != 0) {
        double lf = 0.0, mu2 = 0.0;
        for (int i = 0; i < d * d; i++) lf += in->linv[i] * in->linv[i];
        for (int j = 0; j < d; j++) mu2 += in->mu[j] * in->mu[j];
        const double r = c->xnorm_max + sqrt(mu2);
        const double zmin = ghf_estep_arg(&kc, 0.0), zmax = ghf_estep_arg(&kc, lf * r * r);
        if (isfinite(zmax) && ghf_bessel_plan_setup(c->plan, kc.P, zmin, zmax) == 0) {
            const int nn = ghf_bessel_plan_num_nodes(c->plan);
            if (c->plan_mode == 1 || (int64_t)nn * CPU_PLAN_ROWS_PER_NODE <= c->n_global) {
                use_plan = 1;
                const int np = ghf_bessel_plan_num_pieces(c->plan);
#pragma omp parallel num_threads(c->nthreads)
                {
#pragma omp for schedule(dynamic, 4)
                    for (int i = 0; i < nn; i++) ghf_bessel_plan_node(c->plan, i);
#pragma omp for schedule(static)
                    for (int i = 0; i < np; i++) ghf_bessel_plan_finish_piece(c->plan, i);
                }
            }
        }
    }
    be->last_used_plan = use_plan;

    /* one pass: quadratic forms, moments and sums, block by block */
#pragma omp parallel num_threads(c->nthreads)
    {
        const int tid = omp_get_thread_num();
        double *acc = c->tstats + (size_t)tid * (size_t)len;
        ghf_xsum *xs = c->txs + (size_t)tid * (size_t)len;
        double *wb = c->tbuf + (size_t)tid * (size_t)CPU_TBUF(d);
        /* scratch layout: [CPU_BLOCK*d] rows | ub | ux | qv | zwv */
        double *ub = wb + (size_t)CPU_BLOCK * d;
        double *qv = ub + 2 * CPU_BLOCK, *zwv = qv + CPU_BLOCK;
        double *scratch2 = wb + (size_t)CPU_BLOCK * d + 4 * CPU_BLOCK; /* [CPU_BLOCK*d + CPU_BLOCK] */
        const ghf_bessel_plan *plan = c->plan;
        for (int i = 0; i < len; i++) ghf_xsum_init(&xs[i]);
#pragma omp for schedule(static)
        for (int64_t bi = 0; bi < nblk; bi++) {
            const int64_t r0 = bi * CPU_BLOCK;
            const int nb = (int)((r0 + CPU_BLOCK <= n) ? CPU_BLOCK : n - r0);
            const double *xb = c->x + (size_t)r0 * d;
            block_qzw(c, in, xb, nb, scratch2, qv, zwv);
            double s1 = 0.0, s2 = 0.0, s3 = 0.0, ll = 0.0, bad = 0.0, zwa = 0.0;
            for (int i = 0; i < nb; i++) {
                const double q = qv[i];
                const double z = ghf_estep_arg(&kc, q);
                ghf_bessel_eval bk;
                if (!use_plan)
                    bk = ghf_bessel_fused(kc.P, z);
#ifdef GHF_BESSEL_PLAN_AVX2
                else if (c->plan_avx2)
                    bk = ghf_bessel_plan_eval_avx2(plan, z);
#endif
                else
                    bk = ghf_bessel_plan_eval(plan, z);
                const ghf_point pt = ghf_estep_point(&kc, q, zwv[i], bk);
                if (isfinite(pt.u) && isfinite(pt.v) && isfinite(pt.l) && isfinite(pt.ll)) {
                    s1 += pt.u;
                    s2 += pt.v;
                    s3 += pt.l;
                    ll += pt.ll;
                    zwa += fabs(zwv[i]);
                    ub[i] = pt.u;
                } else {
                    bad += 1.0;
                    ub[i] = 0.0;
                }
            }
            /* the block's partial sums: scalars, s4, s5, lower triangle of s6 */
            acc[GHF_ST_N] = nb;
            acc[GHF_ST_S1] = s1;
            acc[GHF_ST_S2] = s2;
            acc[GHF_ST_S3] = s3;
            acc[GHF_ST_LL] = ll;
            acc[GHF_ST_NBAD] = bad;
            acc[GHF_ST_STOP] = 0.0; /* the stop flag is added once, below */
            acc[GHF_ST_ZWABS] = zwa;
            double *s4 = acc + GHF_ST_S4, *s5 = acc + ghf_stats_s5(d), *s6 = acc + ghf_stats_s6(d);
            for (int j = 0; j < d; j++) s4[j] = s5[j] = 0.0;
            for (int j = 0; j < d; j++)
                for (int k = 0; k <= j; k++) s6[j * d + k] = 0.0;
            if (d <= c->small_d) {
                block_sums_small(d, xb, nb, ub, wb, ub + CPU_BLOCK, s4, s5, s6);
            } else {
                for (int i = 0; i < nb; i++) {
                    const double su = sqrt(ub[i]);
                    for (int j = 0; j < d; j++) wb[(size_t)i * d + j] = su * xb[(size_t)i * d + j];
                }
                for (int i = 0; i < nb; i++)
                    for (int j = 0; j < d; j++) s4[j] += xb[(size_t)i * d + j];
                cblas_dgemv(CblasRowMajor, CblasTrans, nb, d, 1.0, xb, d, ub, 1, 0.0, s5, 1);
                cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, nb, 1.0, wb, d, 0.0, s6, d);
            }
            for (int i = 0; i < GHF_ST_S4 + 2 * d; i++) ghf_xsum_add(&xs[i], acc[i]);
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
#ifdef GHF_BESSEL_PLAN_AVX2
    c->plan_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    c->plan_mode = -1;
    c->nthreads = omp_get_max_threads();
    if (c->nthreads < 1) c->nthreads = 1;
    c->tstats = malloc((size_t)c->nthreads * (size_t)c->len * sizeof(double));
    c->txs = malloc((size_t)c->nthreads * (size_t)c->len * sizeof(ghf_xsum));
    c->tbuf = malloc((size_t)c->nthreads * (size_t)CPU_TBUF(d) * sizeof(double));
    c->plan = malloc(sizeof *c->plan);
    int fail = !c->tstats || !c->txs || !c->tbuf || !c->plan;
    if (fail) snprintf(err, errlen, "out of memory creating the CPU backend (%lld rows x %d)", (long long)nrows, d);
    if (ghf_test_fail("backend", err, errlen)) fail = 1;
    if (ghf_agree(comm, fail, err, errlen)) { /* before the collectives below: every rank leaves */
        cpu_destroy(be);
        return NULL;
    }
    /* the largest row norm over all ranks bounds the Bessel arguments */
    double xm = 0.0;
    for (int64_t i = 0; i < nrows; i++) {
        double r2 = 0.0;
        for (int j = 0; j < d; j++) r2 += x[i * d + j] * x[i * d + j];
        xm = fmax(xm, r2);
    }
    MPI_Allreduce(MPI_IN_PLACE, &xm, 1, MPI_DOUBLE, MPI_MAX, comm);
    c->xnorm_max = sqrt(xm);
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

void ghf_backend_cpu_tune(ghf_backend *be, int small_d_max, int plan_mode)
{
    cpu_impl *c = be->impl;
    c->small_d = small_d_max < 0 ? 0 : (small_d_max > CPU_SMALL_D ? CPU_SMALL_D : small_d_max);
    c->plan_mode = plan_mode;
}
