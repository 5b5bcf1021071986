/* bench_portopt.c - speed of ghfit optimize's core (src/law/portopt.c; a
 * benchmark, not a test).
 *
 *   bench_portopt [d ...]   for each d (default 100 1000): a NIG law of d
 *                           assets (one-factor Sigma plus idiosyncratic
 *                           variances, daily-return scales, skewness gamma)
 *                           and its minimum-ES long-only portfolio at
 *                           alpha = 0.975, then (d <= 100) a 50-point ES
 *                           frontier; prints wall seconds, objective
 *                           evaluations, the first-order residual, active
 *                           bounds and whether every point converged;
 *                           wall and CPU seconds (CPU: fair on a loaded machine).
 *   Run on one core: OMP_NUM_THREADS=1 (the optimiser is serial).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "portopt.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned long long g_s = 0x2545f4914f6cdd1dULL;
static double urand(void)
{
    g_s ^= g_s << 13, g_s ^= g_s >> 7, g_s ^= g_s << 17;
    return ((g_s >> 11) + 0.5) / 9007199254740992.0;
}

static void one(int d)
{
    double *mu = malloc((size_t)d * sizeof(double)), *ga = malloc((size_t)d * sizeof(double));
    double *S = malloc((size_t)d * d * sizeof(double)), *beta = malloc((size_t)d * sizeof(double));
    double *lo = malloc((size_t)d * sizeof(double)), *hi = malloc((size_t)d * sizeof(double));
    double *w = malloc((size_t)d * sizeof(double));
    for (int i = 0; i < d; i++) {
        mu[i] = 2e-4 + 6e-4 * urand();
        ga[i] = -2e-4 + 2e-4 * urand();
        beta[i] = 0.5 + urand();
        lo[i] = 0.0, hi[i] = INFINITY;
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            const double idio = 0.008 + 0.012 * (double)((i * 7919) % d) / d;
            S[(size_t)i * d + j] = 1e-4 * beta[i] * beta[j] + (i == j ? idio * idio : 0.0);
        }
    ghf_opt_law L = {.d = d, .gauss = 0, .p = -0.5, .a = 2.0, .b = 2.0, .mu = mu, .gamma = ga,
                     .disp = {ghf_opt_quad_dense, S}, .losses = 0};
    ghf_opt_law_init(&L);
    const ghf_opt_cons c = {1.0, lo, hi};
    const ghf_opt_spec sp = {GHF_OPT_ES, GHF_OPT_MIN_RISK, 0.975, 0.0, 0.0};
    ghf_opt_result r;
    double t0 = now(), c0 = cpu();
    ghf_opt_solve(&L, &c, &sp, NULL, w, &r);
    double t1 = now(), c1 = cpu();
    printf("min-ES long-only  d = %4d: %8.3f s (cpu %8.3f s)  evals %5d  ES %.6g  kkt %.2g  active %d  converged %d  status %d\n", d,
           t1 - t0, c1 - c0, r.n_eval, r.es, r.kkt, r.n_active, r.converged, r.status);
    fflush(stdout);
    if (d <= 100) {
        const int K = 50;
        double *W = malloc((size_t)K * d * sizeof(double));
        ghf_opt_result *res = malloc((size_t)K * sizeof *res);
        t0 = now(), c0 = cpu();
        ghf_opt_frontier(&L, &c, GHF_OPT_ES, 0.975, K, NAN, W, res);
        t1 = now(), c1 = cpu();
        int conv = 0, ev = 0;
        double kmax = 0.0;
        for (int k = 0; k < K; k++) {
            conv += res[k].converged, ev += res[k].n_eval;
            if (isfinite(res[k].kkt)) kmax = fmax(kmax, res[k].kkt);
        }
        printf("ES frontier 50 pts d = %4d: %8.3f s (cpu %8.3f s)  evals %5d  converged %d/%d  max kkt %.2g\n", d,
               t1 - t0, c1 - c0, ev, conv,
               K, kmax);
        free(W), free(res);
    }
    free(mu), free(ga), free(S), free(beta), free(lo), free(hi), free(w);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        one(100);
        one(1000);
    }
    for (int i = 1; i < argc; i++) one(atoi(argv[i]));
    return 0;
}
