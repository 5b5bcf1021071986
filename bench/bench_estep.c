/* bench_estep.c - the CPU backend's E-step alone (a benchmark, not a test).
 *
 * Each rank draws its shard of N rows of a d-dimensional GH sample (per-row
 * streams, so the data do not depend on the rank count), builds the CPU
 * backend and times R E-step calls at the true parameters: wall time per
 * call (max over ranks, MPI_Barrier before each call) and this process's CPU
 * time per call (max over ranks; on a shared machine CPU time is the steadier
 * of the two).  Prints medians.
 *
 *   mpirun -np P bench_estep [--n N] [--d D] [--reps R] [--p P --a A --b B]
 *                            [--path vec|ref] [--plan auto|on|off] [--weights 1]
 *
 * --weights 1 times the weighted E-step (observation weights 0.5 .. 2,
 * not all 1: the weighted kernels run).
 *
 * --eval 1 also times `ghfit eval`'s computation on the same rows and law
 * (ghf_score_loglik: the per-row arrays, the backend, the pass, the sums;
 * not the reading and writing) in R rounds of one E-step and one eval, and
 * prints the median ratio eval / E-step (issue 11: at most one E-step).
 * Built against an older ghfit that has ghf_score_loglik (before spend_x),
 * define GHF_BENCH_HAVE_EVAL too.
 *
 * --path ref selects the scalar reference path of the per-row work
 * (ghf_backend_cpu_tune_path), --small-d the largest d of the plain-loop
 * kernels (BLAS above).
 *
 * It also prints an estimate of the E-step's floor on this machine, per
 * rank: the larger of one streaming pass over the shard (measured, CPU time:
 * a sum of every element) and the least arithmetic, counted in eight-lane
 * fused multiply-adds at the rate measured here (16 independent chains, as
 * if every row's plan coefficients were at hand):
 * d(d+1)/2 + 2d for q and zw, d(d+1)/2 + 2d for s6, s4, s5, 60 for the four
 * degree-15 plan polynomials and 20 for the rest of the moments, per row.
 * Built against an older ghfit (-DGHF_BENCH_BEFORE, bench/bench_cpu.sh) it
 * times that ghfit's E-step and prints no floor. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#ifndef GHF_BENCH_BEFORE
#include "cpu_block.h"
#endif
#include "model.h"
#include "sample.h"
#if !defined(GHF_BENCH_BEFORE) || defined(GHF_BENCH_HAVE_EVAL)
#define BENCH_EVAL 1
#include "score.h"
#endif

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Sigma: unit diagonal, equicorrelation 0.3; mu_j = 0.1 (j mod 5); gamma_j = 0.2, -0.1, ... */
static void make_params(ghf_params *t, int d, double p, double a, double b)
{
    ghf_params_alloc(t, d);
    for (int j = 0; j < d; j++) {
        t->mu[j] = 0.1 * (j % 5);
        t->gamma[j] = (j % 2 ? -0.1 : 0.2);
        for (int k = 0; k < d; k++) t->sigma[j * d + k] = j == k ? 1.0 : 0.3;
    }
    t->p = p;
    t->a = a;
    t->b = b;
}

/* rows r0 .. r0+n of the sample: x = mu + gamma y + sqrt(y) L e */
static void draw(const ghf_params *t, const ghf_derived *g, int64_t r0, int64_t n, double *x)
{
    const int d = t->d;
    double e[512];
    for (int64_t i = 0; i < n; i++) {
        ghf_rng r;
        ghf_rng_seed(&r, 7, (uint64_t)(r0 + i));
        double y = t->a > 0.0 && t->b > 0.0 ? ghf_rng_gig(&r, t->p, t->a, t->b) : 1.0;
        if (!isfinite(y)) y = 1.0;
        for (int j = 0; j < d; j++) e[j] = ghf_rng_normal(&r);
        for (int j = 0; j < d; j++) {
            double s = 0.0;
            for (int k = 0; k <= j; k++) s += g->L[j * d + k] * e[k];
            x[i * d + j] = t->mu[j] + t->gamma[j] * y + sqrt(y) * s;
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int64_t N = 1000000;
    int d = 10, reps = 15, ref = 0, plan = -1, small_d = -1, weighted = 0, eval = 0;
    double p = -1.5, a = 2.0, b = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n")) N = (int64_t)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--d")) d = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--p")) p = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--a")) a = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--b")) b = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--small-d")) small_d = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--weights")) weighted = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--eval")) eval = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--path")) ref = !strcmp(argv[i + 1], "ref");
        else if (!strcmp(argv[i], "--plan")) plan = !strcmp(argv[i + 1], "on") ? 1 : !strcmp(argv[i + 1], "off") ? 0 : -1;
        else {
            fprintf(stderr, "bench_estep: unknown option %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (d < 1 || d > 512 || reps < 1 || N < np) MPI_Abort(MPI_COMM_WORLD, 2);
    /* shards at multiples of 256 rows, as ghfit reads them */
    const int64_t blocks = (N + 255) / 256;
    const int64_t r0 = blocks * rank / np * 256, r1 = rank == np - 1 ? N : blocks * (rank + 1) / np * 256;
    const int64_t n = r1 - r0;
    ghf_params t;
    ghf_derived g;
    make_params(&t, d, p, a, b);
    ghf_derived_alloc(&g, d);
    if (ghf_derive(&t, &g) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    double *x = malloc((size_t)(n > 0 ? n : 1) * d * sizeof(double));
    draw(&t, &g, r0, n, x);
    char err[256];
    ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_WORLD, x, n, d, err, sizeof err);
    if (!be) MPI_Abort(MPI_COMM_WORLD, 1);
    double *wts = NULL;
#ifndef GHF_BENCH_BEFORE
    ghf_backend_cpu_tune_path(be, ref);
    if (weighted) {
        wts = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
        for (int64_t i = 0; i < n; i++) wts[i] = 0.5 + 0.25 * (double)((r0 + i) % 7);
        be->weights = wts;
    }
#else
    if (weighted && rank == 0) fprintf(stderr, "bench_estep: this build has no weights\n");
    if (ref && rank == 0) fprintf(stderr, "bench_estep: this build has one path only\n");
#endif
    if (small_d >= 0 || plan != -1) ghf_backend_cpu_tune(be, small_d >= 0 ? small_d : 1000, plan);
    ghf_estep_input in = {d, t.mu, g.Linv, g.w, g.c, 0};
    const int len = ghf_stats_len(d);
    double *st = malloc((size_t)len * sizeof(double));
    double *wall = malloc((size_t)reps * sizeof(double)), *cpu = malloc((size_t)reps * sizeof(double));
    be->estep(be, &in, st, err, sizeof err); /* warm-up: pages, plan */
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double w0 = MPI_Wtime(), c0 = cpu_now();
        be->estep(be, &in, st, err, sizeof err);
        double tt[2] = {MPI_Wtime() - w0, cpu_now() - c0};
        MPI_Allreduce(MPI_IN_PLACE, tt, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        wall[r] = tt[0];
        cpu[r] = tt[1];
    }
    double ev_wall = 0.0, ev_cpu = 0.0, ev_ll = 0.0, ev_rw = 0.0, ev_rc = 0.0;
#ifdef BENCH_EVAL
    if (eval) { /* `ghfit eval` on the same rows and law, alternating with E-steps */
        ghf_fit_law law;
        memset(&law, 0, sizeof law);
        snprintf(law.name, sizeof law.name, "bench");
        snprintf(law.family, sizeof law.family, "gh");
        law.d = d, law.mu = t.mu, law.gamma = t.gamma, law.sigma = t.sigma, law.p = t.p, law.a = t.a, law.b = t.b;
        ghf_shard sh;
        memset(&sh, 0, sizeof sh);
        sh.d = d, sh.nrows = n, sh.n_global = N, sh.row0 = r0;
        /* eval spends its rows (their memory takes its results): a copy per round, made before the clock */
        double *xc = malloc((size_t)(n > 0 ? n : 1) * d * sizeof(double));
        int64_t nobs = 0;
        /* rounds of one E-step and one eval each (the same load on both), ratios per round */
        double *ew = malloc((size_t)reps * sizeof(double)), *ec = malloc((size_t)reps * sizeof(double));
        double *rw = malloc((size_t)reps * sizeof(double)), *rc = malloc((size_t)reps * sizeof(double));
        for (int r = 0; r < reps; r++) {
            double tt[4];
            memcpy(xc, x, (size_t)n * d * sizeof(double));
            sh.x = xc;
            for (int k = 0; k < 2; k++) {
                MPI_Barrier(MPI_COMM_WORLD);
                const double w0 = MPI_Wtime(), c0 = cpu_now();
                if (k == 0)
                    be->estep(be, &in, st, err, sizeof err);
#ifdef GHF_BENCH_BEFORE /* before ghf_score_loglik took spend_x (it scored a copy of the rows) */
                else if (ghf_score_loglik(MPI_COMM_WORLD, &law, GHF_FAMILY_GH, &sh, &ev_ll, &nobs, err, sizeof err))
#else
                else if (ghf_score_loglik(MPI_COMM_WORLD, &law, GHF_FAMILY_GH, &sh, 1, &ev_ll, &nobs, err, sizeof err))
#endif
                    MPI_Abort(MPI_COMM_WORLD, 1);
                tt[2 * k] = MPI_Wtime() - w0;
                tt[2 * k + 1] = cpu_now() - c0;
            }
            MPI_Allreduce(MPI_IN_PLACE, tt, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            ew[r] = tt[2], ec[r] = tt[3];
            rw[r] = tt[2] / tt[0], rc[r] = tt[3] / tt[1];
        }
        ev_wall = median(ew, reps);
        ev_cpu = median(ec, reps);
        ev_rw = median(rw, reps);
        ev_rc = median(rc, reps);
        free(ew), free(ec), free(rw), free(rc), free(xc);
    }
#endif
    /* the memory floor: one streaming pass over the shard (a sum of every element) */
    double *rd = malloc((size_t)reps * sizeof(double)), sink = 0.0;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double w0 = cpu_now(); /* CPU time: steadier on a shared machine */
        double a4[8] = {0};
        for (int64_t i = 0; i + 8 <= n * d; i += 8)
            for (int k = 0; k < 8; k++) a4[k] += x[i + k];
        for (int k = 0; k < 8; k++) sink += a4[k];
        double tt = cpu_now() - w0;
        MPI_Allreduce(MPI_IN_PLACE, &tt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        rd[r] = tt;
    }
    double floor_ms = 0.0, fp_ms = 0.0;
    const char *isa = "";
#ifndef GHF_BENCH_BEFORE
    {
        const ghf_cpu_kernels *k = ghf__cpu_kernels();
        const long nf = 2000000;
        const double c0 = cpu_now();
        sink += k->fma_loop(nf);
        const double rate = 16.0 * nf / (cpu_now() - c0); /* eight-lane FMAs per second */
        const double ops = d * (d + 1.0) + 4.0 * d + 80.0;  /* per row, see above */
        fp_ms = 1e3 * (double)n * ops / 8.0 / rate;
        double mx = fp_ms;
        MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        fp_ms = mx;
        isa = k->isa;
    }
#endif
    const double rd_ms = 1e3 * median(rd, reps);
    floor_ms = fp_ms > rd_ms ? fp_ms : rd_ms;
    if (rank == 0 && eval)
        printf("eval N=%lld d=%d ranks=%d: wall %.2f ms, cpu %.2f ms (median of %d); eval / E-step (median "
               "over rounds of one each): wall %.2f, cpu %.2f; loglik %.17g\n",
               (long long)N, d, np, 1e3 * ev_wall, 1e3 * ev_cpu, reps, ev_rw, ev_rc, ev_ll);
    if (rank == 0) {
        printf("estep N=%lld d=%d ranks=%d path=%s plan=%d%s: wall %.2f ms, cpu %.2f ms (median of %d); "
               "ll %.17g; read x once %.2f ms%s\n",
               (long long)N, d, np, ref ? "ref" : "vec", be->last_used_plan, wts ? " weighted" : "", 1e3 * median(wall, reps),
               1e3 * median(cpu, reps), reps, st[GHF_ST_LL], rd_ms, sink == 1.2345 ? " " : "");
        if (fp_ms > 0.0)
            printf("floor per rank: %.2f ms = max(read x once %.2f ms, arithmetic %.2f ms at the measured "
                   "FMA rate; kernels %s)\n",
                   floor_ms, rd_ms, fp_ms, isa);
    }
    free(rd);
    be->destroy(be);
    free(wts);
    free(st);
    free(wall);
    free(cpu);
    free(x);
    ghf_derived_free(&g);
    ghf_params_free(&t);
    MPI_Finalize();
    return 0;
}
