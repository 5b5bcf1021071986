/* se_pass.c - the passes of the standard errors over a rank's rows: the
 * per-row posterior of the mixing variable (its log-normaliser's first and
 * second derivatives, by quadrature: kernels/gig.h), the sums the
 * structured part of the information needs, and the row part
 * sum_i d2G/dB2_i g_i g_i^T, either formed (BLAS dsyrk on blocks of
 * B-vectors) or applied to a block of vectors (two dgemm per block).
 * OpenMP threads take blocks of rows, each with its own partial sums
 * (merged in thread order); ranks are summed with MPI. */
#include "se_int.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"

#define SE_BLOCK 128           /* rows per block of a thread */
#define SE_BIG_BLOCK 1024      /* rows per block when the threads share one matrix */
#define SE_THREAD_DOUBLES ((size_t)1 << 24) /* per-thread copies of the matrix up to 128 MiB in all */
#define SE_NSC 7               /* s1 s2 s3 spp spa saa nbad */
#define SE_MPI_CHUNK ((int64_t)1 << 26)

/* z = L^-1 (x - mu) for nb rows */
static void block_z(const ghf__se_ctx *c, const double *xb, int nb, double *zb)
{
    const int d = c->d;
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < d; j++) zb[(size_t)i * d + j] = xb[(size_t)i * d + j] - c->th->mu[j];
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, nb, d, 1.0, c->der.Linv, d, zb, d);
}

/* The rows of one block: their B-vectors (scaled by sqrt(d2G/dB2)) into
 * G[nb x kB], the sums into sc[SE_NSC] and m5[5 kB], the weights into rw. */
static void block_rows(const ghf__se_ctx *c, const double *xb, int nb, double *zb, double *G, double *sc, double *m5,
                       double *rw)
{
    const int d = c->d, kB = c->kB;
    block_z(c, xb, nb, zb);
    for (int i = 0; i < nb; i++) {
        const double *z = zb + (size_t)i * d;
        double *g = G + (size_t)i * kB;
        double q = 0.0;
        for (int j = 0; j < d; j++) q += z[j] * z[j];
        ghf__se_post r;
        if (ghf__se_post_eval(c, q, &r)) {
            sc[6] += 1.0;
            memset(g, 0, (size_t)kB * sizeof(double));
            rw[i] = 0.0;
            continue;
        }
        sc[0] += r.u;
        sc[1] += r.v;
        sc[2] += r.l;
        sc[3] += r.hpp;
        sc[4] += r.hpa;
        sc[5] += r.haa;
        ghf__se_bvec(c, z, g);
        double *mu_ = m5, *mpb = m5 + kB, *mab = m5 + 2 * kB, *m1 = m5 + 3 * kB, *hd = m5 + 4 * kB;
        for (int k = 0; k < kB; k++) {
            const double gk = g[k];
            mu_[k] += r.u * gk;
            mpb[k] += r.wpb * gk;
            mab[k] += r.wab * gk;
            m1[k] += gk;
        }
        rw[i] = r.wbb;
        const double s = sqrt(r.wbb);
        for (int k = 0; k < kB; k++) {
            g[k] *= s;
            hd[k] += g[k] * g[k];
        }
    }
}

/* rank 0 of the group: a line after 10 s and every 60 s after that, with
 * the time left (never silent for hours, whatever --quiet says) */
static void progress(ghf__se_ctx *c, double frac, const char *what)
{
    if (!c->is_root || !(frac > 0.0)) return;
    const double now = MPI_Wtime(), el = now - c->t_start;
    if (el < 10.0 || now - c->t_last_print < 60.0) return;
    c->t_last_print = now;
    const double left = el * (1.0 - frac) / frac;
    printf("ghfit: %s: standard errors: %s %.0f%% done in %.0f s, about %.0f s left\n", c->label ? c->label : "fit",
           what, 100.0 * frac, el, left);
    fflush(stdout);
}

/* sum a[0..n) over the ranks into rank 0 (root_only) or every rank, in chunks */
static void reduce_chunks(MPI_Comm comm, double *a, int64_t n, int root_only)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    for (int64_t o = 0; o < n; o += SE_MPI_CHUNK) {
        const int cnt = (int)(n - o < SE_MPI_CHUNK ? n - o : SE_MPI_CHUNK);
        if (!root_only) MPI_Allreduce(MPI_IN_PLACE, a + o, cnt, MPI_DOUBLE, MPI_SUM, comm);
        else if (rank == 0) MPI_Reduce(MPI_IN_PLACE, a + o, cnt, MPI_DOUBLE, MPI_SUM, 0, comm);
        else MPI_Reduce(a + o, NULL, cnt, MPI_DOUBLE, MPI_SUM, 0, comm);
    }
}

/* per-thread partial sums of the pass: [nt][SE_NSC + 5 kB] */
static void merge_small(ghf__se_ctx *c, const double *acc, int nt, double *out)
{
    const int len = SE_NSC + 5 * c->kB;
    memset(out, 0, (size_t)len * sizeof(double));
    for (int t = 0; t < nt; t++)
        for (int i = 0; i < len; i++) out[i] += acc[(size_t)t * len + i];
}

/* threads with their own matrix: blocks of SE_BLOCK rows */
static void pass_threads(ghf__se_ctx *c, double *heavy, double *heavy_t, double *acc, double *zb, double *G)
{
    const int kB = c->kB, d = c->d, nt = c->nthreads, len = SE_NSC + 5 * kB;
    const int64_t n = c->nrows, nblk = (n + SE_BLOCK - 1) / SE_BLOCK;
    int64_t done = 0;
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num();
        double *h = !heavy ? NULL : t == 0 ? heavy : heavy_t + (size_t)(t - 1) * kB * kB;
        double *zt = zb + (size_t)t * SE_BLOCK * d, *Gt = G + (size_t)t * SE_BLOCK * kB;
        double *sc = acc + (size_t)t * len;
#pragma omp for schedule(static)
        for (int64_t bi = 0; bi < nblk; bi++) {
            const int64_t r0 = bi * SE_BLOCK;
            const int nb = (int)(r0 + SE_BLOCK <= n ? SE_BLOCK : n - r0);
            block_rows(c, c->x + (size_t)r0 * d, nb, zt, Gt, sc, sc + SE_NSC, c->rw + r0);
            if (h) cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, kB, nb, 1.0, Gt, kB, 1.0, h, kB);
            int64_t dn;
#pragma omp atomic capture
            dn = ++done;
            if (t == 0) progress(c, (double)dn / (double)nblk, "rows");
        }
    }
    if (heavy)
        for (int t = 1; t < nt; t++) {
            const double *h = heavy_t + (size_t)(t - 1) * kB * kB;
            for (int j = 0; j < kB; j++)
                for (int k = 0; k <= j; k++) heavy[(size_t)j * kB + k] += h[(size_t)j * kB + k];
        }
}

/* threads sharing one matrix: blocks of SE_BIG_BLOCK rows, their B-vectors
 * made by the threads, then one multi-threaded dsyrk */
static void pass_shared(ghf__se_ctx *c, double *heavy, double *acc, double *zb, double *G)
{
    const int kB = c->kB, d = c->d, nt = c->nthreads, len = SE_NSC + 5 * kB;
    const int64_t n = c->nrows;
    for (int64_t r0 = 0; r0 < n; r0 += SE_BIG_BLOCK) {
        const int nb = (int)(r0 + SE_BIG_BLOCK <= n ? SE_BIG_BLOCK : n - r0);
        const int nsub = (nb + SE_BLOCK - 1) / SE_BLOCK;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int sb = 0; sb < nsub; sb++) {
            const int t = omp_get_thread_num(), o = sb * SE_BLOCK;
            const int m = o + SE_BLOCK <= nb ? SE_BLOCK : nb - o;
            block_rows(c, c->x + (size_t)(r0 + o) * d, m, zb + (size_t)t * SE_BLOCK * d, G + (size_t)o * kB,
                       acc + (size_t)t * len, acc + (size_t)t * len + SE_NSC, c->rw + r0 + o);
        }
        const int old = ghf__se_blas_threads(nt);
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, kB, nb, 1.0, G, kB, 1.0, heavy, kB);
        ghf__se_blas_threads(old);
        progress(c, (double)(r0 + nb) / (double)n, "rows");
    }
}

int ghf__se_pass(MPI_Comm comm, ghf__se_ctx *c, double *heavy)
{
    const int kB = c->kB, d = c->d, nt = c->nthreads, len = SE_NSC + 5 * kB;
    const int threads_own = !heavy || ((size_t)nt * kB * kB <= SE_THREAD_DOUBLES && !ghf__se_test_flag("shared"));
    double *acc = calloc((size_t)nt * len, sizeof(double)), *sum = calloc((size_t)len, sizeof(double));
    double *zb = malloc((size_t)nt * SE_BLOCK * d * sizeof(double));
    double *G = malloc((size_t)(threads_own ? nt * SE_BLOCK : SE_BIG_BLOCK) * kB * sizeof(double));
    double *heavy_t = threads_own && heavy && nt > 1 ? calloc((size_t)(nt - 1) * kB * kB, sizeof(double)) : NULL;
    c->rw = malloc((size_t)(c->nrows > 0 ? c->nrows : 1) * sizeof(double));
    const int fail = !acc || !sum || !zb || !G || !c->rw || (threads_own && heavy && nt > 1 && !heavy_t);
    if (ghf_any(comm, fail)) {
        free(acc), free(sum), free(zb), free(G), free(heavy_t);
        return -1;
    }
    ghf__se_plan_build(comm, c);
    const int old = ghf__se_blas_threads(1);
    if (threads_own) pass_threads(c, heavy, heavy_t, acc, zb, G);
    else pass_shared(c, heavy, acc, zb, G);
    ghf__se_blas_threads(old);
    merge_small(c, acc, nt, sum);
    free(acc), free(zb), free(G), free(heavy_t);
    reduce_chunks(comm, sum, len, 0);
    c->s1 = sum[0];
    c->s2 = sum[1];
    c->s3 = sum[2];
    c->spp = sum[3];
    c->spa = sum[4];
    c->saa = sum[5];
    c->nbad = sum[6];
    memcpy(c->m_u, sum + SE_NSC, (size_t)5 * kB * sizeof(double));
    free(sum);
    if (heavy) reduce_chunks(comm, heavy, (int64_t)kB * kB, 1);
    ghf__se_ctx_finish(c);
    return 0;
}

int ghf__se_heavy_apply(MPI_Comm comm, ghf__se_ctx *c, const double *X, int s, double *Y)
{
    const int kB = c->kB, d = c->d, nt = c->nthreads;
    const int64_t n = c->nrows, nblk = (n + SE_BLOCK - 1) / SE_BLOCK;
    const size_t ys = (size_t)kB * s;
    double *Yt = calloc((size_t)nt * ys, sizeof(double));
    double *zb = malloc((size_t)nt * SE_BLOCK * d * sizeof(double));
    double *G = malloc((size_t)nt * SE_BLOCK * kB * sizeof(double));
    double *T = malloc((size_t)nt * SE_BLOCK * s * sizeof(double));
    if (ghf_any(comm, !Yt || !zb || !G || !T)) {
        free(Yt), free(zb), free(G), free(T);
        return -1;
    }
    const int old = ghf__se_blas_threads(1);
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num();
        double *zt = zb + (size_t)t * SE_BLOCK * d, *Gt = G + (size_t)t * SE_BLOCK * kB;
        double *Tt = T + (size_t)t * SE_BLOCK * s, *Ytt = Yt + (size_t)t * ys;
#pragma omp for schedule(static)
        for (int64_t bi = 0; bi < nblk; bi++) {
            const int64_t r0 = bi * SE_BLOCK;
            const int nb = (int)(r0 + SE_BLOCK <= n ? SE_BLOCK : n - r0);
            block_z(c, c->x + (size_t)r0 * d, nb, zt);
            for (int i = 0; i < nb; i++) {
                double *g = Gt + (size_t)i * kB;
                ghf__se_bvec(c, zt + (size_t)i * d, g);
                const double sw = sqrt(c->rw[r0 + i]);
                for (int k = 0; k < kB; k++) g[k] *= sw;
            }
            /* T = G X (nb x s); Y^T += T^T G (X, Y column-major = row-major s x kB) */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, s, kB, 1.0, Gt, kB, X, kB, 0.0, Tt, s);
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, kB, nb, 1.0, Tt, s, Gt, kB, 1.0, Ytt, kB);
        }
    }
    ghf__se_blas_threads(old);
    memcpy(Y, Yt, ys * sizeof(double));
    for (int t = 1; t < nt; t++)
        for (size_t i = 0; i < ys; i++) Y[i] += Yt[(size_t)t * ys + i];
    free(Yt), free(zb), free(G), free(T);
    reduce_chunks(comm, Y, (int64_t)ys, 0);
    return 0;
}
