/* test_bessel.c - table-driven tests of kernels/bessel.h and bessel_plan.h.
 *
 * 1. tests/data/bessel_grid.csv (2,706 points, 50-digit references; its
 *    provenance is in tests/data/README.md):
 *    log K, log(K_{v+1}/K_v) and d/dv log K at every point; also
 *    log(K_{v-1}/K_v) at order v+1 against -log(K_{v+1}/K_v).
 * 2. tests/data/bessel_ref_random.csv (random points from
 *    tests/data/gen_bessel_ref.py, an independent mpmath trapezoid): the same
 *    plus log(K_{v-1}/K_v).
 * 2b. tests/data/bessel_turning.csv (4,801 points of the turning region
 *    z in [0.5|v|, 2|v|], half within 0.1|v| of z = 0.66|v| where log K ~ 0,
 *    |v| from 1 to 1000; tests/data/gen_bessel_turning.py, 50 digits): log K
 *    itself from ghf_log_kv and ghf_bessel_logk, and the scaled log K + z.
 * 3. Evenness in v, public wrappers, finiteness for z from 1e-300 to 1e300,
 *    monotonicity in z, an order finite difference (loose, independent), and
 *    the slow saddle-point trapezoid of bessel_trap.h (an independent method,
 *    kept as the reference) against the fused evaluator.
 * 4. Plans against the fused evaluator on dense random samples (E-step
 *    orders v = p - d/2 and others), bitwise independence of the requested
 *    range, and the parallel build order.
 * 5. Folded plans (bessel_fplan.h: the E-step's log and exps folded in)
 *    against the fused evaluator: G = log K_s + v log z, the ratios
 *    K_{v+-1}/K_v themselves, D = d/dv log K + log z; bitwise independence of
 *    the range.  The ratios must be as accurate as exp of the plan's log
 *    ratios, the E-step's reference (TOL_RATIO x max(1, |log ratio|)).
 *
 * Tolerances (relative, scaled by max(1, |ref|) for logs):
 *    log K 45 eps (~1e-14), log ratios 450 eps (~1e-13), d/dv log K 1e-10
 *    (absolute where the reference is 0).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bessel.h"
#include "bessel_plan.h"
#include "bessel_fplan.h"

#define TOL_LOGK (45.0 * DBL_EPSILON)
#define TOL_RATIO (450.0 * DBL_EPSILON)
#define TOL_DLOGK 1e-10

#ifndef GHF_TEST_SOURCE_DIR
#define GHF_TEST_SOURCE_DIR "."
#endif

static int g_fail = 0;
static long g_checks = 0;

typedef struct worst {
    const char *name;
    double err; /* in units of the tolerance */
    double v, z;
    long n;
} worst;

static void check(worst *w, double got, long double ref, double tol, int scale_by_ref, double v, double z)
{
    double e;
    long double den;
    if (scale_by_ref == 1)
        den = fabsl(ref) > 1.0L ? fabsl(ref) : 1.0L;
    else
        den = (ref == 0.0L) ? 1.0L : fabsl(ref);
    e = (double)(fabsl((long double)got - ref) / den) / tol;
    if (!isfinite(got)) e = INFINITY;
    w->n++;
    g_checks++;
    if (!(e <= w->err)) {
        w->err = e;
        w->v = v;
        w->z = z;
    }
    if (!(e <= 1.0)) {
        if (g_fail < 30)
            fprintf(stderr, "FAIL %s v=%.17g z=%.17g got %.17g ref %.17Lg (%.3g x tol)\n", w->name, v, z, got,
                    ref, e);
        g_fail++;
    }
}

static void report(const worst *w)
{
    printf("  %-28s n=%-6ld worst %.3g x tol at v=%.17g z=%.17g\n", w->name, w->n, w->err, w->v, w->z);
}

static FILE *open_data(const char *env, const char *fallback_rel, const char *file)
{
    char path[4096];
    const char *d = getenv(env);
    FILE *f = NULL;
    if (d && *d) {
        snprintf(path, sizeof path, "%s/%s", d, file);
        f = fopen(path, "r");
    }
    if (!f) {
        snprintf(path, sizeof path, "%s/%s/%s", GHF_TEST_SOURCE_DIR, fallback_rel, file);
        f = fopen(path, "r");
    }
    if (!f) fprintf(stderr, "cannot open %s (set %s)\n", file, env);
    else printf("reading %s\n", path);
    return f;
}

/* ---------------------------------------------------------------------- */
static void test_grid(void)
{
    FILE *f = open_data("GHF_BESSEL_TEST_DATA", "tests/data", "bessel_grid.csv");
    char line[4096];
    worst wl = {"grid log K", 0, 0, 0, 0}, wr = {"grid log ratio up", 0, 0, 0, 0};
    worst wd = {"grid d/dv log K", 0, 0, 0, 0}, wn = {"grid log ratio dn (v+1)", 0, 0, 0, 0};
    worst wp = {"grid public == fused", 0, 0, 0, 0}, wls = {"grid log K + z (scaled)", 0, 0, 0, 0};
    long rows = 0;
    if (!f) {
        g_fail++;
        return;
    }
    if (!fgets(line, sizeof line, f)) g_fail++;
    while (fgets(line, sizeof line, f)) {
        double x[13];
        char *p = line;
        /* id,region,v,z,logk_hi,logk_lo,dlogk_hi,dlogk_lo,ratio_hi,ratio_lo,logratio_hi,logratio_lo,xcheck */
        x[0] = strtod(p, &p);
        p = strchr(p + 1, ','); /* skip region */
        if (!p) break;
        for (int k = 2; k < 13; k++) {
            p++;
            x[k] = strtod(p, &p);
        }
        double v = x[2], z = x[3];
        long double L = (long double)x[4] + x[5], D = (long double)x[6] + x[7];
        long double Q = (long double)x[10] + x[11];
        ghf_bessel_eval e = ghf_bessel_fused(v, z), e2;
        const double lk = ghf_bessel_logk(v, z, &e2);
        check(&wl, lk, L, TOL_LOGK, 1, v, z);
        /* the scaled log K + z keeps that accuracy relative to its own size */
        check(&wls, e.logk_s, L + (long double)z, TOL_LOGK, 1, v, z);
        check(&wr, e.log_ratio_up, Q, TOL_RATIO, 1, v, z);
        check(&wd, e.dlogk_dv, D, TOL_DLOGK, 0, v, z);
        /* log(K_v / K_{v+1}) is log_ratio_dn at order v+1 */
        check(&wn, ghf_bessel_fused(v + 1.0, z).log_ratio_dn, -Q, TOL_RATIO, 1, v, z);
        /* the public single-output functions are the fused fields (log K:
         * ghf_bessel_logk's, whose evaluation is bitwise the fused one) */
        double pub = fabs(ghf_log_kv(v, z) - lk) + fabs(ghf_dlog_kv_dv(v, z) - e.dlogk_dv)
                     + fabs(ghf_log_kv_ratio(v, z) - e.log_ratio_up) + (memcmp(&e, &e2, sizeof e) != 0);
        check(&wp, pub, 0.0L, TOL_LOGK, 1, v, z);
        rows++;
    }
    fclose(f);
    if (rows != 2706) {
        fprintf(stderr, "FAIL grid: read %ld rows, expected 2706\n", rows);
        g_fail++;
    }
    report(&wl);
    report(&wls);
    report(&wr);
    report(&wn);
    report(&wd);
    report(&wp);
}

/* ---------------------------------------------------------------------- */
static void test_random_ref(void)
{
    FILE *f = open_data("GHF_BESSEL_TEST_DATA", "tests/data", "bessel_ref_random.csv");
    char line[4096];
    worst wl = {"random log K", 0, 0, 0, 0}, wu = {"random log ratio up", 0, 0, 0, 0};
    worst wn = {"random log ratio dn", 0, 0, 0, 0}, wd = {"random d/dv log K", 0, 0, 0, 0};
    long rows = 0;
    if (!f) {
        g_fail++;
        return;
    }
    if (!fgets(line, sizeof line, f)) g_fail++;
    while (fgets(line, sizeof line, f)) {
        double x[11];
        char *p = line;
        /* v,z,logk_hi,logk_lo,dlogk_hi,dlogk_lo,up_hi,up_lo,dn_hi,dn_lo,xcheck */
        for (int k = 0; k < 11; k++) {
            x[k] = strtod(p, &p);
            if (*p == ',') p++;
        }
        double v = x[0], z = x[1];
        ghf_bessel_eval e = ghf_bessel_fused(v, z);
        check(&wl, ghf_log_kv(v, z), (long double)x[2] + x[3], TOL_LOGK, 1, v, z);
        check(&wl, e.logk_s, (long double)x[2] + x[3] + (long double)z, TOL_LOGK, 1, v, z);
        check(&wd, e.dlogk_dv, (long double)x[4] + x[5], TOL_DLOGK, 0, v, z);
        check(&wu, e.log_ratio_up, (long double)x[6] + x[7], TOL_RATIO, 1, v, z);
        check(&wn, e.log_ratio_dn, (long double)x[8] + x[9], TOL_RATIO, 1, v, z);
        rows++;
    }
    fclose(f);
    if (rows < 1000) {
        fprintf(stderr, "FAIL random reference: only %ld rows\n", rows);
        g_fail++;
    }
    report(&wl);
    report(&wu);
    report(&wn);
    report(&wd);
}

/* ---------------------------------------------------------------------- */
/* The turning region, densely: log K itself (not only the scaled log K + z)
 * where log K ~ 0 while z is large (z ~ 0.66 |v|), the points of issue 25
 * (log K formed as (log K + z) - z lost up to 4.1e-14 at v = -970,
 * z = 641.37).  Both public forms of log K, and the scaled value relative to
 * its own size. */
static void test_turning(void)
{
    FILE *f = open_data("GHF_BESSEL_TEST_DATA", "tests/data", "bessel_turning.csv");
    char line[4096];
    worst wl = {"turning log K (ghf_log_kv)", 0, 0, 0, 0}, wb = {"turning log K (bessel_logk)", 0, 0, 0, 0};
    worst ws = {"turning log K + z (scaled)", 0, 0, 0, 0};
    long rows = 0;
    if (!f) {
        g_fail++;
        return;
    }
    if (!fgets(line, sizeof line, f)) g_fail++;
    while (fgets(line, sizeof line, f)) {
        double x[5];
        char *p = line;
        /* v,z,logk_hi,logk_lo,xcheck */
        for (int k = 0; k < 5; k++) {
            x[k] = strtod(p, &p);
            if (*p == ',') p++;
        }
        const double v = x[0], z = x[1];
        const long double L = (long double)x[2] + x[3];
        ghf_bessel_eval e;
        check(&wl, ghf_log_kv(v, z), L, TOL_LOGK, 1, v, z);
        check(&wb, ghf_bessel_logk(v, z, &e), L, TOL_LOGK, 1, v, z);
        check(&ws, e.logk_s, L + (long double)z, TOL_LOGK, 1, v, z);
        rows++;
    }
    fclose(f);
    if (rows < 4000) {
        fprintf(stderr, "FAIL turning sweep: only %ld rows\n", rows);
        g_fail++;
    }
    report(&wl);
    report(&wb);
    report(&ws);
}

/* ---------------------------------------------------------------------- */
static unsigned long long g_rng = 0x9e3779b97f4a7c15ULL;
static double urand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
}

static void test_properties(void)
{
    worst ws = {"evenness in v (bitwise)", 0, 0, 0, 0}, wfin = {"finite for extreme z", 0, 0, 0, 0};
    worst wmono = {"log K decreasing in z", 0, 0, 0, 0}, wfd = {"d/dv log K vs order FD", 0, 0, 0, 0};
    const double vs[] = {0.0, 1e-300, 1e-12, 1e-8, 1e-3, 0.25, 0.5, 0.999, 1.0, 1.5, 2.0, 7.3,
                         20.5, 34.999, 35.0, 35.001, 60.25, 150.0, 499.5, 1000.5, 3000.0};
    const int nv = (int)(sizeof vs / sizeof vs[0]);
    /* evenness: K_{-v} = K_v, ratios swap, derivative flips */
    for (int i = 0; i < 3000; i++) {
        double v = (urand() < 0.5) ? vs[(int)(urand() * nv)] : 1000.0 * urand();
        double z = pow(10.0, -12.0 + 17.0 * urand());
        ghf_bessel_eval a = ghf_bessel_fused(v, z), b = ghf_bessel_fused(-v, z);
        double bad = (a.logk_s != b.logk_s) + (a.log_ratio_up != b.log_ratio_dn) + (a.log_ratio_dn != b.log_ratio_up)
                     + (a.dlogk_dv != -b.dlogk_dv);
        check(&ws, bad, 0.0L, 0.5, 1, v, z);
    }
    /* finite over the whole z range */
    for (int i = 0; i < nv; i++) {
        for (double le = -300.0; le <= 300.0; le += 12.5) {
            double z = pow(10.0, le);
            ghf_bessel_eval e = ghf_bessel_fused(vs[i], z);
            double bad = !isfinite(e.logk_s) + !isfinite(e.log_ratio_up) + !isfinite(e.log_ratio_dn)
                         + !isfinite(e.dlogk_dv) + !isfinite(ghf_log_kv(vs[i], z));
            check(&wfin, bad, 0.0L, 0.5, 1, vs[i], z);
        }
    }
    /* monotone in z: d/dz log K = -(K_{v-1} + K_{v+1}) / (2 K_v) < 0 */
    for (int i = 0; i < nv; i++) {
        double prev = INFINITY;
        for (double le = -12.0; le <= 5.0; le += 0.05) {
            double l = ghf_log_kv(vs[i], pow(10.0, le));
            check(&wmono, (l < prev) ? 0.0 : 1.0, 0.0L, 0.5, 1, vs[i], pow(10.0, le));
            prev = l;
        }
    }
    /* the order derivative against a central finite difference (loose: the
     * FD itself is good to ~1e-8 here) */
    for (int i = 0; i < 400; i++) {
        double v = 0.5 + 200.0 * urand(), z = pow(10.0, -3.0 + 6.0 * urand());
        double h = 1e-4 * (1.0 + v);
        long double fd = ((long double)ghf_log_kv(v + h, z) - ghf_log_kv(v - h, z)) / (2.0L * h);
        check(&wfd, ghf_dlog_kv_dv(v, z), fd, 1e-6, 0, v, z);
    }
    /* the reference trapezoid (bessel_trap.h) agrees with the fused
     * evaluator; it loses digits where its peak value cancels (large |v|,
     * z ~ 0.66|v|) and, for d/dv, near v = 0 (absolute accuracy only) */
    {
        worst wt = {"trapezoid ref: log K", 0, 0, 0, 0}, wtr = {"trapezoid ref: log ratios", 0, 0, 0, 0};
        worst wtd = {"trapezoid ref: d/dv (|v|>=1)", 0, 0, 0, 0};
        for (int i = 0; i < 600; i++) {
            double v = (urand() < 0.5) ? vs[(int)(urand() * nv)] : -1000.0 + 2000.0 * urand();
            double z = pow(10.0, -12.0 + 17.0 * urand());
            ghf_bessel_eval a = ghf__bessel_fused_trap(v, z), b = ghf_bessel_fused(v, z);
            check(&wt, ghf__trap_eval(fabs(v), z).logk, ghf_log_kv(v, z), 2e-12, 1, v, z);
            check(&wtr, a.log_ratio_up, b.log_ratio_up, 2e-12, 1, v, z);
            check(&wtr, a.log_ratio_dn, b.log_ratio_dn, 2e-12, 1, v, z);
            if (fabs(v) >= 1.0) check(&wtd, a.dlogk_dv, b.dlogk_dv, 1e-10, 0, v, z);
        }
        report(&wt);
        report(&wtr);
        report(&wtd);
    }
    /* invalid arguments give NaN, not garbage */
    {
        ghf_bessel_eval e = ghf_bessel_fused(1.0, -1.0);
        worst wn = {"NaN for z <= 0", 0, 0, 0, 0};
        check(&wn, isnan(e.logk_s) ? 0.0 : 1.0, 0.0L, 0.5, 1, 1.0, -1.0);
        report(&wn);
    }
    report(&ws);
    report(&wfin);
    report(&wmono);
    report(&wfd);
}

/* ---------------------------------------------------------------------- */
static ghf_bessel_plan g_pl, g_pl2;

static void test_plans(void)
{
    worst wl = {"plan log K", 0, 0, 0, 0}, wu = {"plan log ratio up", 0, 0, 0, 0};
    worst wn = {"plan log ratio dn", 0, 0, 0, 0}, wd = {"plan d/dv log K", 0, 0, 0, 0};
    worst wb = {"plan range independence", 0, 0, 0, 0}, wo = {"plan build order", 0, 0, 0, 0};
    worst wf = {"plan outside range == fused", 0, 0, 0, 0};
    worst wv = {"plan AVX2 == portable, bitwise", 0, 0, 0, 0};
    int avx2 = 0;
#ifdef GHF_BESSEL_PLAN_AVX2
    avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    const int dims[] = {1, 2, 3, 5, 8, 10, 20, 50, 70, 100, 200, 500, 1000};
    const double extra[] = {0.0, 1e-9, 0.5, -0.5, 34.99, 35.0, -1000.5};
    int nd = (int)(sizeof dims / sizeof dims[0]), ne = (int)(sizeof extra / sizeof extra[0]);
    for (int t = 0; t < nd + ne; t++) {
        double v = (t < nd) ? (-10.0 + 20.0 * urand()) - 0.5 * dims[t] : extra[t - nd];
        /* a range of a few decades around where the E-step puts z */
        double zc = (fabs(v) > 1.0) ? fabs(v) : 1.0;
        double lo = zc * pow(10.0, -4.0 + 3.0 * urand()), hi = lo * pow(10.0, 1.0 + 5.0 * urand());
        if (hi > 1e5) hi = 1e5;
        ghf_bessel_plan_build(&g_pl, v, lo, hi);
        for (int i = 0; i < 4000; i++) {
            double z;
            if (i % 3 == 0 && fabs(v) > 2.0)
                z = fabs(v) * (0.3 + 1.7 * urand()); /* the steep turning region */
            else
                z = lo * pow(hi / lo, urand());
            ghf_bessel_eval a = ghf_bessel_plan_eval(&g_pl, z);
#ifdef GHF_BESSEL_PLAN_AVX2
            if (avx2) {
                ghf_bessel_eval a2 = ghf_bessel_plan_eval_avx2(&g_pl, z);
                check(&wv, memcmp(&a, &a2, sizeof a) ? 1.0 : 0.0, 0.0L, 0.5, 1, v, z);
            }
#endif
            double llo;
            ghf_bessel_eval b = ghf__bessel_fused_ext(v, z, &llo);
            check(&wl, a.logk_s, (long double)b.logk_s + llo, TOL_LOGK, 1, v, z);
            check(&wu, a.log_ratio_up, b.log_ratio_up, TOL_RATIO, 1, v, z);
            check(&wn, a.log_ratio_dn, b.log_ratio_dn, TOL_RATIO, 1, v, z);
            check(&wd, a.dlogk_dv, b.dlogk_dv, TOL_DLOGK, 0, v, z);
        }
        /* a second plan over an overlapping, shifted range: the common pieces
         * must give the same bits */
        double lo2 = lo * pow(10.0, 0.3 + urand()), hi2 = hi * 3.7;
        ghf_bessel_plan_build(&g_pl2, v, lo2, hi2);
        for (int i = 0; i < 500; i++) {
            double z = lo2 * pow(hi / lo2, urand());
            ghf_bessel_eval a = ghf_bessel_plan_eval(&g_pl, z), b = ghf_bessel_plan_eval(&g_pl2, z);
            check(&wb, memcmp(&a, &b, sizeof a) ? 1.0 : 0.0, 0.0L, 0.5, 1, v, z);
        }
        /* building node by node in another order gives the same plan */
        ghf_bessel_plan_setup(&g_pl2, v, lo, hi);
        for (int i = ghf_bessel_plan_num_nodes(&g_pl2) - 1; i >= 0; i--) ghf_bessel_plan_node(&g_pl2, i);
        for (int k = ghf_bessel_plan_num_pieces(&g_pl2) - 1; k >= 0; k--) ghf_bessel_plan_finish_piece(&g_pl2, k);
        for (int i = 0; i < 200; i++) {
            double z = lo * pow(hi / lo, urand());
            ghf_bessel_eval a = ghf_bessel_plan_eval(&g_pl, z), b = ghf_bessel_plan_eval(&g_pl2, z);
            check(&wo, memcmp(&a, &b, sizeof a) ? 1.0 : 0.0, 0.0L, 0.5, 1, v, z);
        }
        /* outside the pieces the plan is the fused evaluator */
        {
            double z = lo * 1e-3;
            ghf_bessel_eval a = ghf_bessel_plan_eval(&g_pl, z), b = ghf_bessel_fused(v, z);
            check(&wf, memcmp(&a, &b, sizeof a) ? 1.0 : 0.0, 0.0L, 0.5, 1, v, z);
        }
    }
    printf("  plan: %d pieces max, %zu bytes\n", GHF_BESSEL_PLAN_MAX_PIECES, sizeof(ghf_bessel_plan));
    report(&wl);
    report(&wu);
    report(&wn);
    report(&wd);
    report(&wb);
    report(&wo);
    report(&wf);
    if (avx2) report(&wv);
    else printf("  (no AVX2 on this CPU: the AVX2 plan evaluation is not checked)\n");
}

/* ---------------------------------------------------------------------- */
static ghf_bessel_fplan g_fp, g_fp2;

static void build_folded(ghf_bessel_plan *pl, ghf_bessel_fplan *fp, double v, double lo, double hi)
{
    ghf_bessel_plan_setup(pl, v, lo, hi);
    ghf_bessel_fplan_setup(fp, pl);
    for (int i = 0; i < ghf_bessel_plan_num_nodes(pl); i++) ghf_bessel_plan_node(pl, i);
    for (int k = ghf_bessel_plan_num_pieces(pl) - 1; k >= 0; k--) {
        ghf_bessel_fplan_fold(fp, pl, k);
        ghf_bessel_plan_finish_piece(pl, k);
    }
}

static void test_fplans(void)
{
    worst wg = {"fplan G = log K_s + v log z", 0, 0, 0, 0}, wu = {"fplan ratio up", 0, 0, 0, 0};
    worst wn = {"fplan ratio dn", 0, 0, 0, 0}, wd = {"fplan D = d/dv log K + log z", 0, 0, 0, 0};
    worst wb = {"fplan range independence", 0, 0, 0, 0};
    worst weu = {"exp(plan log ratio up) (ref)", 0, 0, 0, 0}, wen = {"exp(plan log ratio dn) (ref)", 0, 0, 0, 0};
    long unusable = 0;
    const int dims[] = {1, 2, 3, 5, 8, 10, 20, 50, 70, 100, 200, 500, 1000};
    const double extra[] = {0.0, 1e-9, 0.5, -0.5, 34.99, 35.0, -1000.5, -3e4};
    int nd = (int)(sizeof dims / sizeof dims[0]), ne = (int)(sizeof extra / sizeof extra[0]);
    for (int t = 0; t < nd + ne; t++) {
        double v = (t < nd) ? (-10.0 + 20.0 * urand()) - 0.5 * dims[t] : extra[t - nd];
        double zc = (fabs(v) > 1.0) ? fabs(v) : 1.0;
        double lo = zc * pow(10.0, -4.0 + 3.0 * urand()), hi = lo * pow(10.0, 1.0 + 5.0 * urand());
        if (hi > 1e5) hi = 1e5;
        build_folded(&g_pl, &g_fp, v, lo, hi);
        for (int i = 0; i < 4000; i++) {
            double z = (i % 3 == 0 && fabs(v) > 2.0) ? fabs(v) * (0.3 + 1.7 * urand()) : lo * pow(hi / lo, urand());
            const ghf_bessel_fplan_piece *F = ghf_bessel_fplan_piece_of(&g_fp, z);
            if (!F) {
                unusable += ghf_bessel_plan_eval(&g_pl, z).logk_s == ghf_bessel_fused(v, z).logk_s ? 0 : 1;
                continue;
            }
            double r[4], llo;
            ghf_bessel_fplan_eval_piece(F, z, r);
            const ghf_bessel_eval b = ghf__bessel_fused_ext(v, z, &llo), a = ghf_bessel_plan_eval(&g_pl, z);
            const long double lz = logl((long double)z);
            const long double gref = (long double)b.logk_s + llo + (long double)v * lz;
            const double gs = fmax(1.0, fmax(fabs(b.logk_s), fabs(v * (double)lz)));
            check(&wg, (double)(((long double)r[0] - gref) / gs), 0.0L, TOL_LOGK, 0, v, z);
            const long double ru = expl((long double)b.log_ratio_up), rn = expl((long double)b.log_ratio_dn);
            const double su = fmax(1.0, fabs(b.log_ratio_up)), sn = fmax(1.0, fabs(b.log_ratio_dn));
            check(&wu, (double)(((long double)r[1] - ru) / ru / su), 0.0L, TOL_RATIO, 0, v, z);
            check(&wn, (double)(((long double)r[2] - rn) / rn / sn), 0.0L, TOL_RATIO, 0, v, z);
            check(&weu, (double)(((long double)exp(a.log_ratio_up) - ru) / ru / su), 0.0L, TOL_RATIO, 0, v, z);
            check(&wen, (double)(((long double)exp(a.log_ratio_dn) - rn) / rn / sn), 0.0L, TOL_RATIO, 0, v, z);
            const double ds = fmax(1.0, fmax(fabs(b.dlogk_dv), fabs((double)lz)));
            check(&wd, (double)(((long double)r[3] - ((long double)b.dlogk_dv + lz)) / ds), 0.0L, TOL_DLOGK, 0, v,
                  z);
        }
        /* another range: the common pieces have the same bits */
        double lo2 = lo * pow(10.0, 0.3 + urand()), hi2 = hi * 3.7;
        build_folded(&g_pl2, &g_fp2, v, lo2, hi2);
        for (int i = 0; i < 500; i++) {
            double z = lo2 * pow(hi / lo2, urand());
            const ghf_bessel_fplan_piece *F = ghf_bessel_fplan_piece_of(&g_fp, z),
                                         *F2 = ghf_bessel_fplan_piece_of(&g_fp2, z);
            double r[4] = {0}, r2[4] = {0};
            if (F) ghf_bessel_fplan_eval_piece(F, z, r);
            if (F2) ghf_bessel_fplan_eval_piece(F2, z, r2);
            check(&wb, ((F == 0) != (F2 == 0) || memcmp(r, r2, sizeof r)) ? 1.0 : 0.0, 0.0L, 0.5, 1, v, z);
        }
    }
    /* a piece with a value that is not finite (a ratio overflowing at a
     * node) is marked unusable; rows there take the per-row path */
    {
        worst wx = {"fplan unusable piece", 0, 0, 0, 0};
        ghf_bessel_plan_setup(&g_pl, -3.5, 0.5, 8.0);
        ghf_bessel_fplan_setup(&g_fp, &g_pl);
        for (int i = 0; i < ghf_bessel_plan_num_nodes(&g_pl); i++) ghf_bessel_plan_node(&g_pl, i);
        g_pl.piece[1].buf[2 * GHF_BESSEL_PLAN_NODES + 3] = 1e300; /* log ratio up at a node of piece 1 */
        for (int k = 0; k < ghf_bessel_plan_num_pieces(&g_pl); k++) ghf_bessel_fplan_fold(&g_fp, &g_pl, k);
        const double z1 = 0.5 * (ghf__plan_piece_left(g_pl.kfirst + 1) + ghf__plan_piece_left(g_pl.kfirst + 2));
        check(&wx, ghf_bessel_fplan_piece_of(&g_fp, z1) == 0 ? 0.0 : 1.0, 0.0L, 0.5, 1, -3.5, z1);
        check(&wx, ghf_bessel_fplan_piece_of(&g_fp, 0.6) != 0 ? 0.0 : 1.0, 0.0L, 0.5, 1, -3.5, 0.6);
        report(&wx);
    }
    report(&wg);
    report(&wu);
    report(&wn);
    report(&wd);
    report(&wb);
    report(&weu);
    report(&wen);
    if (unusable) {
        fprintf(stderr, "FAIL: %ld points outside the folded plan's usable pieces are not the plan's\n", unusable);
        g_fail++;
    }
}

int main(void)
{
    printf("tolerances: log K %.3g (45 eps), log ratios %.3g (450 eps), d/dv log K %.3g\n", TOL_LOGK, TOL_RATIO,
           TOL_DLOGK);
    test_grid();
    test_random_ref();
    test_turning();
    test_properties();
    test_plans();
    test_fplans();
    printf("%ld checks, %d failures\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
