/* bench_uni1d.c - speed of the portfolio VaR/ES batch (src/law/uni1d.c) and
 * its Monte Carlo cross-check (a benchmark, not a test).
 *
 *   bench_uni1d batch [P] [K]     P portfolios (default 10000) of a d = 10 fit
 *                                 of each of the six families, K alphas
 *                                 (default 3: 0.975, 0.99, 0.999; K = 4 adds
 *                                 0.9999); prints the time of ghf_uni_batch
 *                                 (OMP_NUM_THREADS threads), quadratures per
 *                                 portfolio, and the largest difference from
 *                                 the single-combination path (seconds: wall;
 *                                 cpu_s: CPU of all threads, what a loaded
 *                                 machine still measures fairly)
 *   bench_uni1d mc [N] [seed]     N draws (default 1e8) of two laws with the
 *                                 project's generator (ghf_rng_gig,
 *                                 ghf_rng_normal; one stream per block of 2^16
 *                                 draws, so the result does not depend on the
 *                                 thread count): a d = 3 NIG fit with
 *                                 |gamma| >> sigma seen through a portfolio
 *                                 (loss L = -w'X, X drawn in full), and a
 *                                 univariate GH with p = -8 and strong skew.
 *                                 For alpha = 0.99, 0.999, 0.9999: the
 *                                 exceedance rate of our VaR against 1 - alpha,
 *                                 the Monte Carlo quantile against our VaR, and
 *                                 the Monte Carlo mean of L over L >= our VaR
 *                                 against our ES, each with its standard error
 *                                 and z-score.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uni1d.h"
#include "sample.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int gauss;
    double p, a, b;
} fam_t;

static int cmp_dbl(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int run_batch(long P, int K)
{
    enum { D = 10 };
    static const fam_t fams[6] = {
        {"gh", 0, -1.3, 1.7, 0.9},  {"hyp", 0, 5.5, 2.0, 0.5}, {"nig", 0, -0.5, 1.5, 1.5},
        {"vg", 0, 1.2, 2.4, 0.0},   {"t", 0, -2.5, 0.0, 3.0},  {"gauss", 1, 0, 0, 0}};
    static const double alpha_all[4] = {0.975, 0.99, 0.999, 0.9999};
    double mu[D], gam[D], A[D * D], S[D * D];
    double *m = malloc(P * sizeof *m), *g = malloc(P * sizeof *g), *s = malloc(P * sizeof *s);
    double *var = malloc(P * K * sizeof *var), *es = malloc(P * K * sizeof *es);
    int *st = malloc(P * K * sizeof *st);
    ghf_rng r;
    if (!m || !g || !s || !var || !es || !st) return 1;
    ghf_rng_seed(&r, 7, 0);
    for (int i = 0; i < D; i++) {
        mu[i] = 0.05 * ghf_rng_normal(&r);
        gam[i] = 0.3 * ghf_rng_normal(&r);
        for (int j = 0; j < D; j++) A[i * D + j] = ghf_rng_normal(&r) / sqrt((double)D);
    }
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            double v = i == j ? 0.2 : 0.0;
            for (int k = 0; k < D; k++) v += A[i * D + k] * A[j * D + k];
            S[i * D + j] = v;
        }
    for (long i = 0; i < P; i++) { /* random weights; every fourth long-only */
        double w[D], ww = 0.0, sw = 0.0, mw = 0.0, gw = 0.0;
        for (int j = 0; j < D; j++) {
            w[j] = (i % 4 == 0) ? ghf_rng_uniform(&r) : ghf_rng_normal(&r);
            ww += fabs(w[j]);
        }
        for (int j = 0; j < D; j++) {
            w[j] /= ww;
            mw += w[j] * mu[j];
            gw += w[j] * gam[j];
        }
        for (int j = 0; j < D; j++)
            for (int k = 0; k < D; k++) sw += w[j] * S[j * D + k] * w[k];
        m[i] = -mw; /* loss L = -w'X */
        g[i] = -gw;
        s[i] = sqrt(sw);
    }
    printf("batch: %ld portfolios of a d = %d fit, K = %d alphas (", P, D, K);
    for (int k = 0; k < K; k++) printf("%s%g", k ? ", " : "", alpha_all[k]);
    printf("), OMP_NUM_THREADS=%s\n", getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "(unset)");
    printf("%-6s %9s %9s %10s %10s %10s %12s %s\n", "family", "seconds", "cpu_s", "us/portf", "quad/portf", "eval/quad",
           "max|diff|", "status");
    for (int f = 0; f < 6; f++) {
        ghf_uni_mix mx;
        long q0, e0, q1, e1;
        double t0, t1, maxd = 0.0;
        clock_t c0, c1;
        int worst;
        if (ghf_uni_mix_init(&mx, fams[f].gauss, fams[f].p, fams[f].a, fams[f].b) != GHF_UNI_OK) return 1;
        ghf__uni_counts(&q0, &e0);
        t0 = now();
        c0 = clock();
        worst = ghf_uni_batch(&mx, (size_t)P, m, g, s, K, alpha_all, var, es, st);
        c1 = clock();
        t1 = now();
        ghf__uni_counts(&q1, &e1);
        for (long i = 0; i < P; i += P / 50 > 0 ? P / 50 : 1) { /* against the single path */
            ghf_uni_law L = {&mx, m[i], g[i], s[i]};
            for (int k = 0; k < K; k++) {
                double v, e;
                ghf_uni_var_es(&L, alpha_all[k], &v, &e);
                maxd = fmax(maxd, fabs(v - var[i * K + k]) / fabs(v));
                if (isfinite(e)) maxd = fmax(maxd, fabs(e - es[i * K + k]) / fabs(e));
            }
        }
        printf("%-6s %9.3f %9.3f %10.1f %10.2f %10.1f %12.2e %s\n", fams[f].name, t1 - t0,
               (double)(c1 - c0) / CLOCKS_PER_SEC, 1e6 * (t1 - t0) / P,
               (double)(q1 - q0) / P, q1 > q0 ? (double)(e1 - e0) / (q1 - q0) : 0.0, maxd,
               ghf_uni_status_str(worst));
    }
    free(m);
    free(g);
    free(s);
    free(var);
    free(es);
    free(st);
    return 0;
}

/* ------------------------------------------------------------------------- */

enum { MC_K = 3, MC_BLOCK = 1 << 16 };

typedef struct {
    const char *name;
    int d;
    double p, a, b;
    double mu[3], gam[3], L[9], w[3]; /* L: lower Cholesky factor of Sigma; d = 1 uses [0] */
} mc_law;

typedef struct {
    double var[MC_K], es[MC_K], lo[MC_K], hi[MC_K];
    long n_exc[MC_K], n_below[MC_K];
    double s1[MC_K], s2[MC_K];
    double *win[MC_K];
    long nwin[MC_K], capwin[MC_K];
} mc_acc;

static double mc_draw(const mc_law *Lw, ghf_rng *r)
{
    const double y = ghf_rng_gig(r, Lw->p, Lw->a, Lw->b), sy = sqrt(y);
    if (Lw->d == 1) return Lw->mu[0] + Lw->gam[0] * y + Lw->L[0] * sy * ghf_rng_normal(r);
    {
        double z[3], x, loss = 0.0;
        for (int i = 0; i < Lw->d; i++) z[i] = ghf_rng_normal(r);
        for (int i = 0; i < Lw->d; i++) {
            double lz = 0.0;
            for (int j = 0; j <= i; j++) lz += Lw->L[i * 3 + j] * z[j];
            x = Lw->mu[i] + Lw->gam[i] * y + sy * lz;
            loss -= Lw->w[i] * x; /* L = -w'X */
        }
        return loss;
    }
}

static void mc_push(mc_acc *A, int k, double x)
{
    if (A->nwin[k] == A->capwin[k]) {
        A->capwin[k] = A->capwin[k] ? 2 * A->capwin[k] : 1024;
        A->win[k] = realloc(A->win[k], (size_t)A->capwin[k] * sizeof(double));
    }
    A->win[k][A->nwin[k]++] = x;
}

static void mc_run(const mc_law *Lw, long N, uint64_t seed)
{
    static const double alpha[MC_K] = {0.99, 0.999, 0.9999};
    ghf_uni_mix mx;
    ghf_uni_law L;
    mc_acc T;
    double m = 0.0, g = 0.0, s2 = 0.0, t0;
    long nblk = (N + MC_BLOCK - 1) / MC_BLOCK;
    memset(&T, 0, sizeof T);
    if (Lw->d == 1) {
        m = Lw->mu[0];
        g = Lw->gam[0];
        s2 = Lw->L[0] * Lw->L[0];
    } else {
        for (int i = 0; i < Lw->d; i++) {
            double lw = 0.0;
            m -= Lw->w[i] * Lw->mu[i];
            g -= Lw->w[i] * Lw->gam[i];
            for (int j = i; j < Lw->d; j++) lw += Lw->L[j * 3 + i] * Lw->w[j]; /* (L^T w)_i */
            s2 += lw * lw;
        }
    }
    ghf_uni_mix_init(&mx, 0, Lw->p, Lw->a, Lw->b);
    L.mix = &mx;
    L.m = m;
    L.g = g;
    L.s = sqrt(s2);
    for (int k = 0; k < MC_K; k++) {
        double lp, se_q;
        ghf_uni_var_es(&L, alpha[k], &T.var[k], &T.es[k]);
        ghf_uni_logpdf(&L, T.var[k], &lp);
        se_q = sqrt(alpha[k] * (1.0 - alpha[k]) / (double)N) / exp(lp);
        T.lo[k] = T.var[k] - 6.0 * se_q;
        T.hi[k] = T.var[k] + 6.0 * se_q;
    }
    printf("\n%s: L = m + g Y + s sqrt(Y) Z with m = %.6g, g = %.6g, s = %.6g, GIG(%g, %g, %g); N = %ld\n",
           Lw->name, m, g, L.s, Lw->p, Lw->a, Lw->b, N);
    t0 = now();
#pragma omp parallel
    {
        mc_acc A;
        memset(&A, 0, sizeof A);
#pragma omp for schedule(dynamic, 4)
        for (long b = 0; b < nblk; b++) {
            ghf_rng r;
            const long n = (b == nblk - 1) ? N - b * MC_BLOCK : MC_BLOCK;
            ghf_rng_seed(&r, seed, (uint64_t)b);
            for (long i = 0; i < n; i++) {
                const double x = mc_draw(Lw, &r);
                for (int k = 0; k < MC_K; k++) {
                    if (x >= T.var[k]) {
                        A.n_exc[k]++;
                        A.s1[k] += x;
                        A.s2[k] += x * x;
                    }
                    if (x < T.lo[k]) A.n_below[k]++;
                    else if (x <= T.hi[k]) mc_push(&A, k, x);
                }
            }
        }
#pragma omp critical(mc_merge)
        for (int k = 0; k < MC_K; k++) {
            T.n_exc[k] += A.n_exc[k];
            T.s1[k] += A.s1[k];
            T.s2[k] += A.s2[k];
            T.n_below[k] += A.n_below[k];
            for (long i = 0; i < A.nwin[k]; i++) mc_push(&T, k, A.win[k][i]);
            free(A.win[k]);
        }
    }
    printf("  %.1f s of sampling\n", now() - t0);
    printf("  %-7s %-22s %-22s %9s %-22s %-22s %9s %-12s %-12s %7s\n", "alpha", "VaR (uni1d)", "VaR (MC)",
           "z", "ES (uni1d)", "ES (MC, L >= VaR)", "z", "exceed rate", "1 - alpha", "z");
    for (int k = 0; k < MC_K; k++) {
        const double q = 1.0 - alpha[k], ne = (double)T.n_exc[k];
        const double rate = ne / (double)N, z_rate = (rate - q) / sqrt(q * (1.0 - q) / (double)N);
        const double mean = T.s1[k] / ne, sd = sqrt(fmax(T.s2[k] / ne - mean * mean, 0.0));
        const double z_es = (mean - T.es[k]) / (sd / sqrt(ne));
        const long rank = (long)ceil(alpha[k] * (double)N); /* the alpha-quantile is the rank-th order statistic */
        double vmc = NAN, lp, z_q = NAN;
        qsort(T.win[k], (size_t)T.nwin[k], sizeof(double), cmp_dbl);
        if (rank - T.n_below[k] >= 1 && rank - T.n_below[k] <= T.nwin[k]) vmc = T.win[k][rank - T.n_below[k] - 1];
        ghf_uni_logpdf(&L, T.var[k], &lp);
        z_q = (vmc - T.var[k]) / (sqrt(alpha[k] * q / (double)N) / exp(lp));
        printf("  %-7g %-22.15g %-22.15g %9.2f %-22.15g %-22.15g %9.2f %-12.6e %-12.6e %7.2f\n", alpha[k], T.var[k],
               vmc, z_q, T.es[k], mean, z_es, rate, q, z_rate);
        free(T.win[k]);
    }
}

static int run_mc(long N, uint64_t seed)
{
    mc_law nig3 = {"nig d=3, |gamma| >> sigma, portfolio w = (0.5, 0.3, 0.2)", 3, -0.5, 1.0, 1.0,
                   {0.1, -0.2, 0.3}, {-1.5, -0.8, -2.0}, {0.3, 0, 0, 0.1, 0.2, 0, -0.05, 0.1, 0.25},
                   {0.5, 0.3, 0.2}};
    mc_law gh1 = {"gh d=1, p = -8, gamma = 1.5, sigma = 0.7", 1, -8.0, 1.0, 20.0,
                  {-0.2, 0, 0}, {1.5, 0, 0}, {0.7, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 0, 0}};
    mc_run(&nig3, N, seed);
    mc_run(&gh1, N, seed + 1);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "batch")) {
        const long P = argc > 2 ? atol(argv[2]) : 10000;
        const int K = argc > 3 ? atoi(argv[3]) : 3;
        if (P < 1 || K < 1 || K > 4) return 2;
        return run_batch(P, K);
    }
    if (argc >= 2 && !strcmp(argv[1], "mc")) {
        const long N = argc > 2 ? (long)atof(argv[2]) : 100000000L;
        const uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 20240611ULL;
        if (N < 1000) return 2;
        return run_mc(N, seed);
    }
    fprintf(stderr, "usage: bench_uni1d batch [P] [K] | mc [N] [seed]\n");
    return 2;
}
