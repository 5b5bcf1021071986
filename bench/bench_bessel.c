/* bench_bessel.c - single-thread throughput of ghfit's Bessel K evaluators,
 * side by side with GSL's gsl_sf_bessel_lnKnu_e on the same points.
 *
 *   bench_bessel [output file] [grid csv]
 *
 * Point sets:
 *   grid      the (v, z) points of tests/data/bessel_grid.csv (|v| <= 1000.5,
 *             z in [1e-12, 1e5]; another folder: GHF_BESSEL_TEST_DATA=DIR);
 *             skipped if the file is not found
 *   wide      20,000 random points over the same range (log-uniform z)
 *   estep-d   E-step use: one fixed order v = p - d/2 (p = 0.3) and 20,000
 *             z spread log-uniformly over 3 decades around max(1, |v|)
 * Columns (ns per point, CPU time of this thread, best of several runs):
 *   log_kv    ghf_log_kv (one output)
 *   fused     ghf_bessel_fused (log K, both log ratios, d/dv log K)
 *   plan      the fixed-order plan as the CPU backend evaluates it: with
 *             ghf_bessel_plan_eval_avx2 where the CPU has AVX2 (the same bits),
 *             else ghf_bessel_plan_eval (fixed-order sets only; build apart)
 *   plan-x86  ghf_bessel_plan_eval, baseline x86-64 code (SSE2)
 *   gsl       gsl_sf_bessel_lnKnu_e (log K only)
 * Targets: fused <= gsl (per point), plan >= 5x faster than fused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_sf_bessel.h>

#include "bessel.h"
#include "bessel_plan.h"

#ifndef GHF_BENCH_SOURCE_DIR /* set by bench/bessel.cmake */
#define GHF_BENCH_SOURCE_DIR "."
#endif

#define NPTS 20000
#define REPS 7

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned long long g_rng = 0x2545f4914f6cdd1dULL;
static double urand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
}

volatile double g_sink;
static double g_v[NPTS], g_z[NPTS];
static ghf_bessel_plan g_plan;

enum { F_LOGKV, F_FUSED, F_PLAN, F_PLAN_BASE, F_GSL };
static int g_avx2;

static double time_one(int which, int n)
{
    double best = INFINITY;
    for (int rep = 0; rep < REPS; rep++) {
        /* four independent accumulators: a single running sum would chain
         * every point's outputs and time the adds instead of the evaluator */
        double s = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, t0 = cpu_now();
        switch (which) {
        case F_LOGKV:
            for (int i = 0; i < n; i++) s += ghf_log_kv(g_v[i], g_z[i]);
            break;
        case F_FUSED:
            for (int i = 0; i < n; i++) {
                ghf_bessel_eval e = ghf_bessel_fused(g_v[i], g_z[i]);
                s += e.logk_s;
                s1 += e.log_ratio_up;
                s2 += e.log_ratio_dn;
                s3 += e.dlogk_dv;
            }
            break;
        case F_PLAN:
#ifdef GHF_BESSEL_PLAN_AVX2
            if (g_avx2) {
                for (int i = 0; i < n; i++) {
                    ghf_bessel_eval e = ghf_bessel_plan_eval_avx2(&g_plan, g_z[i]);
                    s += e.logk_s;
                    s1 += e.log_ratio_up;
                    s2 += e.log_ratio_dn;
                    s3 += e.dlogk_dv;
                }
                break;
            }
#endif
            /* fall through */
        case F_PLAN_BASE:
            for (int i = 0; i < n; i++) {
                ghf_bessel_eval e = ghf_bessel_plan_eval(&g_plan, g_z[i]);
                s += e.logk_s;
                s1 += e.log_ratio_up;
                s2 += e.log_ratio_dn;
                s3 += e.dlogk_dv;
            }
            break;
        default:
            for (int i = 0; i < n; i++) {
                gsl_sf_result r;
                gsl_sf_bessel_lnKnu_e(fabs(g_v[i]), g_z[i], &r);
                s += r.val;
            }
            break;
        }
        double t = cpu_now() - t0;
        g_sink = s + s1 + s2 + s3;
        if (t < best) best = t;
    }
    return best / n * 1e9;
}

static int load_grid(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    if (!f) return 0;
    if (!fgets(line, sizeof line, f)) n = -1;
    while (n >= 0 && n < NPTS && fgets(line, sizeof line, f)) {
        char *p = strchr(line, ',');
        if (!p || !(p = strchr(p + 1, ','))) break; /* id, region */
        g_v[n] = strtod(p + 1, &p);
        g_z[n] = strtod(p + 1, &p);
        n++;
    }
    fclose(f);
    return n > 0 ? n : 0;
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "bench_bessel.txt";
    const char *grid = argc > 2 ? argv[2] : NULL;
    char gridbuf[4096];
    char table[16384];
    size_t len = 0;
    gsl_set_error_handler_off();
#ifdef GHF_BESSEL_PLAN_AVX2
    g_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    printf("plan column: %s\n", g_avx2 ? "ghf_bessel_plan_eval_avx2 (this CPU has AVX2)"
                                        : "ghf_bessel_plan_eval (no AVX2 here)");
    if (!grid) {
        const char *d = getenv("GHF_BESSEL_TEST_DATA");
        snprintf(gridbuf, sizeof gridbuf, "%s/bessel_grid.csv", d && *d ? d : GHF_BENCH_SOURCE_DIR "/tests/data");
        grid = gridbuf;
    }
    len += (size_t)snprintf(table + len, sizeof table - len,
                            "%-14s %7s %9s %9s %9s %9s %9s %9s %10s %11s\n", "set", "points", "log_kv", "fused",
                            "plan", "plan-x86", "gsl", "gsl/fused", "fused/plan", "build(us)");
    const int dims[] = {1, 2, 10, 50, 100, 500, 1000};
    const int nsets = 2 + (int)(sizeof dims / sizeof dims[0]);
    for (int s = 0; s < nsets; s++) {
        char name[32];
        int n = NPTS, fixed = 0;
        double build_us = 0.0;
        if (s == 0) {
            snprintf(name, sizeof name, "grid");
            n = load_grid(grid);
            if (n == 0) {
                fprintf(stderr, "grid %s not found; skipping that set\n", grid);
                continue;
            }
        } else if (s == 1) {
            snprintf(name, sizeof name, "wide");
            for (int i = 0; i < n; i++) {
                double u = urand();
                g_v[i] = (u < 0.5) ? -1000.5 + 2001.0 * urand() : (u < 0.8 ? -12.0 + 24.0 * urand() : 1e-6 * urand());
                g_z[i] = pow(10.0, -12.0 + 17.0 * urand());
            }
        } else {
            int d = dims[s - 2];
            double v = 0.3 - 0.5 * d, zc = fabs(v) > 1.0 ? fabs(v) : 1.0;
            double zlo = zc * 0.03, zhi = zc * 30.0;
            snprintf(name, sizeof name, "estep-d%d", d);
            for (int i = 0; i < n; i++) {
                g_v[i] = v;
                g_z[i] = zlo * pow(zhi / zlo, urand());
            }
            fixed = 1;
            double t0 = cpu_now();
            for (int rep = 0; rep < 5; rep++) ghf_bessel_plan_build(&g_plan, v, zlo, zhi);
            build_us = (cpu_now() - t0) / 5 * 1e6;
        }
        double tl = time_one(F_LOGKV, n), tf = time_one(F_FUSED, n), tg = time_one(F_GSL, n);
        double tp = fixed ? time_one(F_PLAN, n) : NAN, tb = fixed ? time_one(F_PLAN_BASE, n) : NAN;
        char plan_s[48], ratio_s[32], build_s[32];
        if (fixed) snprintf(plan_s, sizeof plan_s, "%9.1f %9.1f", tp, tb);
        else snprintf(plan_s, sizeof plan_s, "%9s %9s", "-", "-");
        if (fixed) snprintf(ratio_s, sizeof ratio_s, "%10.1f", tf / tp);
        else snprintf(ratio_s, sizeof ratio_s, "%10s", "-");
        if (fixed) snprintf(build_s, sizeof build_s, "%11.0f", build_us);
        else snprintf(build_s, sizeof build_s, "%11s", "-");
        char row[256];
        snprintf(row, sizeof row, "%-14s %7d %9.1f %9.1f %s %9.1f %9.2f %s %s\n", name, n, tl, tf, plan_s, tg,
                 tg / tf, ratio_s, build_s);
        fputs(row, stdout);
        fflush(stdout);
        len += (size_t)snprintf(table + len, sizeof table - len, "%s", row);
    }
    printf("\nns per point, single thread (CPU time, best of %d runs)\n%s", REPS, table);
    FILE *f = fopen(out, "w");
    if (f) {
        fprintf(f, "# bench_bessel: ns per point, single thread (CPU time, best of %d runs)\n%s", REPS, table);
        fclose(f);
        printf("written to %s\n", out);
    } else {
        fprintf(stderr, "cannot write %s\n", out);
    }
    return 0;
}
