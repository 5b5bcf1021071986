/* test_portopt.c - src/law/portopt.c (ghfit optimize's core) and the
 * gradients of VaR/ES in uni1d.c, on laws of all six families, d = 3 and 10:
 *   gradients     the analytic gradient of sd, VaR and ES in w against
 *                 central finite differences (relative 1e-6), returns and losses
 *   optimality    min-risk (long-only, box, long-short), target-return and
 *                 tangency portfolios: converged, feasible, first-order (KKT)
 *                 residual <= 1e-6 with the active bounds as found
 *   random        no one of 2000 random feasible portfolios (1000 spread over
 *                 the set, 1000 near the optimum) has a lower risk than the
 *                 minimum-risk one (within 1e-9 relative); VaR included
 *   closed form   Gaussian, sd, long-short: the minimum-variance portfolio
 *                 S Sigma^-1 1 / 1'Sigma^-1 1 and the tangency portfolio
 *                 S Sigma^-1 (mu - rf 1) / 1'Sigma^-1 (mu - rf 1) to 1e-9
 *   frontier      returns increasing from the minimum-risk point to the LP's
 *                 highest return, ES non-decreasing along it
 *   working set   d = 250 long-only (sd, ES): the working-set path reaches
 *                 the full problem's KKT point, no nearby feasible move lower
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "portopt.h"
#include "risk.h"
#include "testutil.h"

#define NRAND 1000

static unsigned long long g_rng = 0x9e3779b97f4a7c15ULL;
static double urand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return ((g_rng >> 11) + 0.5) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2.0 * log(urand())) * cos(2.0 * M_PI * urand()); }

typedef struct fam {
    const char *name;
    int gauss;
    double p, a, b;
} fam;

static const fam FAMS[] = {{"gauss", 1, 0, 0, 0},     {"t", 0, -4.0, 0.0, 6.0}, {"nig", 0, -0.5, 2.0, 2.0},
                           {"vg", 0, 2.0, 4.0, 0.0},  {"hyp", 0, 1.0, 1.5, 1.5}, {"gh", 0, -1.3, 1.0, 2.0}};
#define NFAM (int)(sizeof FAMS / sizeof FAMS[0])

typedef struct problem {
    int d;
    double mu[10], gamma[10], sigma[100];
} problem;

/* daily-return-like scales: mu ~ 5e-4, sd ~ 1e-2, gamma ~ +-2e-4, correlated */
static void make_problem(problem *P, int d, int skew)
{
    double A[100];
    P->d = d;
    for (int i = 0; i < d; i++) {
        P->mu[i] = 2e-4 + 8e-4 * urand();
        P->gamma[i] = skew ? -3e-4 + 4e-4 * urand() : 0.0;
        for (int k = 0; k < d; k++) A[i * d + k] = nrand() * 0.006;
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            double s = i == j ? (0.004 + 0.01 * (i + 1) / d) * (0.004 + 0.01 * (i + 1) / d) : 0.0;
            for (int k = 0; k < d; k++) s += A[i * d + k] * A[j * d + k];
            P->sigma[i * d + j] = s;
        }
}

static void make_law(ghf_opt_law *L, const fam *f, const problem *P, int losses)
{
    memset(L, 0, sizeof *L);
    L->d = P->d, L->gauss = f->gauss, L->p = f->p, L->a = f->a, L->b = f->b;
    L->mu = P->mu, L->gamma = P->gamma;
    L->disp.quad = ghf_opt_quad_dense, L->disp.ctx = P->sigma;
    L->losses = losses;
    ghf_opt_law_init(L);
}

static const char *MNAME[3] = {"sd", "var", "es"};

static void test_gradients(void)
{
    double worst = 0.0;
    for (int fi = 0; fi < NFAM; fi++)
        for (int dd = 0; dd < 2; dd++)
            for (int losses = 0; losses < 2; losses++) {
                problem P;
                ghf_opt_law L;
                make_problem(&P, dd ? 10 : 3, 1);
                make_law(&L, &FAMS[fi], &P, losses);
                double w[10], g[10], wp[10];
                for (int i = 0; i < P.d; i++) w[i] = 1.0 / P.d + 0.3 * nrand() / P.d;
                for (int m = 0; m < 3; m++) {
                    double r;
                    const int st = ghf_opt_risk(&L, m, 0.975, w, &r, g, NULL);
                    CHECK(st == GHF_UNI_OK, "%s d=%d %s: status %d", FAMS[fi].name, P.d, MNAME[m], st);
                    double gmax = 0.0, err = 0.0;
                    for (int i = 0; i < P.d; i++) gmax = fmax(gmax, fabs(g[i]));
                    for (int i = 0; i < P.d; i++) {
                        const double h = 1e-5;
                        double rp, rm;
                        memcpy(wp, w, sizeof wp);
                        wp[i] = w[i] + h;
                        ghf_opt_risk(&L, m, 0.975, wp, &rp, NULL, NULL);
                        wp[i] = w[i] - h;
                        ghf_opt_risk(&L, m, 0.975, wp, &rm, NULL, NULL);
                        err = fmax(err, fabs((rp - rm) / (2 * h) - g[i]));
                    }
                    worst = fmax(worst, err / gmax);
                    CHECK(err <= 1e-6 * gmax, "%s d=%d losses=%d %s: gradient off by %.3g (|g| %.3g)",
                          FAMS[fi].name, P.d, losses, MNAME[m], err, gmax);
                }
            }
    printf("gradients: worst |fd - analytic| / max|g| = %.3g\n", worst);
}

/* the risk of n portfolios (W [n][d]) */
static double risk_of(const ghf_opt_law *L, int m, const double *w)
{
    double r = NAN;
    ghf_opt_risk(L, m, 0.975, w, &r, NULL, NULL);
    return r;
}

/* a random feasible point: spread (Dirichlet / normal) or near w (a move
 * along a feasible direction: + e (e_i - e_j) kept in the box) */
static void rand_feasible(const ghf_opt_cons *c, int d, const double *wopt, int near, double *w)
{
    if (near) {
        memcpy(w, wopt, (size_t)d * sizeof(double));
        const int moves = 1 + (int)(3 * urand());
        for (int k = 0; k < moves; k++) {
            const int i = (int)(d * urand()) % d, j = (int)(d * urand()) % d;
            if (i == j) continue;
            double e = pow(10.0, -6.0 + 5.0 * urand());
            e = fmin(e, fmin(c->hi[i] - w[i], w[j] - c->lo[j]));
            if (e > 0.0) w[i] += e, w[j] -= e;
        }
        return;
    }
    if (isfinite(c->lo[0]) && c->lo[0] == 0.0 && !isfinite(c->hi[0])) { /* long-only: uniform on the simplex */
        double s = 0.0;
        for (int i = 0; i < d; i++) s += (w[i] = -log(urand()));
        for (int i = 0; i < d; i++) w[i] *= c->budget / s;
        return;
    }
    for (int tries = 0; tries < 100000; tries++) { /* box or none: uniform (or normal) then shifted; kept if inside */
        double s = 0.0;
        int in = 1;
        for (int i = 0; i < d; i++)
            s += (w[i] = isfinite(c->hi[i]) ? c->lo[i] + (c->hi[i] - c->lo[i]) * urand() : c->budget / d + nrand() * 0.5);
        for (int i = 0; i < d; i++) {
            w[i] += (c->budget - s) / d;
            in &= w[i] >= c->lo[i] && w[i] <= c->hi[i];
        }
        if (in) return;
    }
}

static void test_optimality(void)
{
    double worst_kkt = 0.0;
    int n_vs = 0;
    for (int fi = 0; fi < NFAM; fi++)
        for (int dd = 0; dd < 2; dd++) {
            problem P;
            ghf_opt_law L;
            const int d = dd ? 10 : 3;
            make_problem(&P, d, 1);
            make_law(&L, &FAMS[fi], &P, 0);
            double lo0[10], hi0[10], lo1[10], hi1[10], lob[10], hib[10];
            for (int i = 0; i < d; i++) {
                lo0[i] = 0.0, hi0[i] = INFINITY;      /* long-only */
                lo1[i] = -INFINITY, hi1[i] = INFINITY; /* long-short */
                lob[i] = -0.1, hib[i] = d > 3 ? 0.3 : 0.6; /* box */
            }
            const ghf_opt_cons cs[3] = {{1.0, lo0, hi0}, {1.0, lo1, hi1}, {1.0, lob, hib}};
            const char *cn[3] = {"long-only", "long-short", "box"};
            for (int m = 0; m < 3; m++)
                for (int ci = 0; ci < 3; ci++) {
                    double w[10], v[10];
                    ghf_opt_result res;
                    ghf_opt_spec sp = {m, GHF_OPT_MIN_RISK, 0.975, 0.0, 0.0};
                    CHECK(ghf_opt_solve(&L, &cs[ci], &sp, NULL, w, &res) == 0, "solve");
                    CHECK(res.converged && res.kkt <= 1e-6, "%s d=%d %s %s min-risk: converged %d kkt %.3g status %d",
                          FAMS[fi].name, d, MNAME[m], cn[ci], res.converged, res.kkt, res.status);
                    const double k2 = ghf_opt_kkt(&L, &cs[ci], &sp, w, NULL);
                    CHECK(k2 <= 1e-6, "kkt recomputed %.3g", k2);
                    worst_kkt = fmax(worst_kkt, res.kkt);
                    /* random feasible portfolios: none lower (evaluated by ghfit risk's batch path,
                     * src/law/risk.c, not the optimiser's) */
                    const double r0 = risk_of(&L, m, w);
                    int lower = 0;
                    double wr = 0.0;
                    static double V[2 * NRAND * 10], rv[2 * NRAND], re[2 * NRAND];
                    for (int t = 0; t < 2 * NRAND; t++) rand_feasible(&cs[ci], d, w, t >= NRAND, V + (size_t)t * d);
                    if (m == GHF_OPT_SD) {
                        for (int t = 0; t < 2 * NRAND; t++) rv[t] = re[t] = risk_of(&L, m, V + (size_t)t * d);
                    } else {
                        const ghf_risk_law rl = {L.gauss, d, L.p, L.a, L.b, P.mu, P.gamma, P.sigma, 0, NULL, NULL};
                        const double al = 0.975;
                        int64_t bad = -1;
                        ghf_risk_portfolios(&rl, 1, &al, 2 * NRAND, V, 2 * NRAND, 0, rv, re, &bad);
                    }
                    for (int t = 0; t < 2 * NRAND; t++) {
                        const double r = m == GHF_OPT_ES ? re[t] : rv[t];
                        if (r < r0 - 1e-9 * fabs(r0)) lower++, wr = fmin(wr, (r - r0) / fabs(r0));
                        n_vs++;
                    }
                    CHECK(lower == 0, "%s d=%d %s %s: %d of %d random feasible portfolios have a lower risk (by %.3g rel)",
                          FAMS[fi].name, d, MNAME[m], cn[ci], lower, 2 * NRAND, wr);
                    /* target return halfway to the highest attainable (box, long-only) or +50% (long-short) */
                    if (ci != 1 || m != GHF_OPT_VAR) {
                        const double rmax = ghf_opt_max_return(&L, &cs[ci], NULL);
                        sp.type = GHF_OPT_TARGET;
                        sp.target = isfinite(rmax) ? 0.5 * (res.ret + rmax) : res.ret * 1.5;
                        CHECK(ghf_opt_solve(&L, &cs[ci], &sp, NULL, v, &res) == 0, "solve");
                        CHECK(res.converged && res.kkt <= 1e-6 && fabs(res.ret - sp.target) <= 1e-9 * fabs(sp.target),
                              "%s d=%d %s %s target: converged %d kkt %.3g ret %.12g target %.12g status %d",
                              FAMS[fi].name, d, MNAME[m], cn[ci], res.converged, res.kkt, res.ret, sp.target, res.status);
                        worst_kkt = fmax(worst_kkt, res.kkt);
                    }
                    if (m != GHF_OPT_VAR && ci != 1) {
                        sp.type = GHF_OPT_TANGENCY;
                        sp.rf = 1e-4;
                        CHECK(ghf_opt_solve(&L, &cs[ci], &sp, NULL, v, &res) == 0, "solve");
                        CHECK(res.converged && res.kkt <= 1e-6, "%s d=%d %s %s tangency: converged %d kkt %.3g status %d",
                              FAMS[fi].name, d, MNAME[m], cn[ci], res.converged, res.kkt, res.status);
                        worst_kkt = fmax(worst_kkt, res.kkt);
                    }
                }
        }
    printf("optimality: worst KKT residual %.3g; %d random feasible portfolios, none lower\n", worst_kkt, n_vs);
}

/* solve S x = b (d x d, Gaussian elimination with partial pivoting) */
static void solve(int d, const double *S, const double *b, double *x)
{
    double M[10][11];
    for (int i = 0; i < d; i++) {
        for (int j = 0; j < d; j++) M[i][j] = S[i * d + j];
        M[i][d] = b[i];
    }
    for (int c = 0; c < d; c++) {
        int pv = c;
        for (int r = c + 1; r < d; r++)
            if (fabs(M[r][c]) > fabs(M[pv][c])) pv = r;
        for (int j = 0; j <= d; j++) {
            const double t = M[c][j];
            M[c][j] = M[pv][j], M[pv][j] = t;
        }
        for (int r = c + 1; r < d; r++) {
            const double f = M[r][c] / M[c][c];
            for (int j = c; j <= d; j++) M[r][j] -= f * M[c][j];
        }
    }
    for (int i = d - 1; i >= 0; i--) {
        double s = M[i][d];
        for (int j = i + 1; j < d; j++) s -= M[i][j] * x[j];
        x[i] = s / M[i][i];
    }
}

static void test_closed_form(void)
{
    double worst = 0.0;
    for (int dd = 0; dd < 2; dd++)
        for (int bi = 0; bi < 2; bi++) {
            const int d = dd ? 10 : 3;
            const double S = bi ? 2.5 : 1.0, rf = 1e-4;
            problem P;
            ghf_opt_law L;
            make_problem(&P, d, 0);
            make_law(&L, &FAMS[0], &P, 0);
            double lo[10], hi[10], one[10], ex[10], x[10], w[10];
            for (int i = 0; i < d; i++) lo[i] = -INFINITY, hi[i] = INFINITY, one[i] = 1.0, ex[i] = P.mu[i] - rf;
            const ghf_opt_cons c = {S, lo, hi};
            ghf_opt_result res;
            /* minimum variance */
            solve(d, P.sigma, one, x);
            double s = 0.0;
            for (int i = 0; i < d; i++) s += x[i];
            ghf_opt_spec sp = {GHF_OPT_SD, GHF_OPT_MIN_RISK, 0.975, 0.0, 0.0};
            ghf_opt_solve(&L, &c, &sp, NULL, w, &res);
            double e = 0.0;
            for (int i = 0; i < d; i++) e = fmax(e, fabs(w[i] - S * x[i] / s));
            CHECK(e <= 1e-9 && res.converged, "gauss d=%d S=%g min-variance: |w - closed form| = %.3g (kkt %.3g status %d)", d, S, e, res.kkt, res.status);
            worst = fmax(worst, e);
            /* tangency */
            solve(d, P.sigma, ex, x);
            s = 0.0;
            for (int i = 0; i < d; i++) s += x[i];
            sp.type = GHF_OPT_TANGENCY;
            sp.rf = rf;
            ghf_opt_solve(&L, &c, &sp, NULL, w, &res);
            e = 0.0;
            for (int i = 0; i < d; i++) e = fmax(e, fabs(w[i] - S * x[i] / s));
            CHECK(e <= 1e-9 && res.converged, "gauss d=%d S=%g tangency: |w - closed form| = %.3g", d, S, e);
            worst = fmax(worst, e);
        }
    printf("closed form: worst |w - Sigma^-1 ...| = %.3g\n", worst);
}

static void test_frontier(void)
{
    for (int fi = 1; fi < NFAM; fi += 2) {
        problem P;
        ghf_opt_law L;
        const int d = 10, K = 8;
        make_problem(&P, d, 1);
        make_law(&L, &FAMS[fi], &P, 0);
        double lo[10], hi[10], W[8 * 10], wmax[10];
        for (int i = 0; i < d; i++) lo[i] = 0.0, hi[i] = INFINITY;
        const ghf_opt_cons c = {1.0, lo, hi};
        ghf_opt_result res[8];
        CHECK(ghf_opt_frontier(&L, &c, GHF_OPT_ES, 0.975, K, NAN, W, res) == 0, "frontier");
        const double rmax = ghf_opt_max_return(&L, &c, wmax);
        CHECK(fabs(res[K - 1].ret - rmax) <= 1e-12 * fabs(rmax), "%s frontier top %.15g vs %.15g", FAMS[fi].name,
              res[K - 1].ret, rmax);
        for (int k = 0; k < K; k++) {
            CHECK(res[k].converged, "%s frontier point %d not converged (status %d kkt %.3g)", FAMS[fi].name, k,
                  res[k].status, res[k].kkt);
            if (k) {
                CHECK(res[k].ret > res[k - 1].ret, "%s frontier returns not increasing at %d", FAMS[fi].name, k);
                CHECK(res[k].es >= res[k - 1].es * (1 - 1e-9) - 1e-15, "%s frontier ES decreasing at %d",
                      FAMS[fi].name, k);
            }
        }
    }
}

/* d = 250 long-only: the working set (portopt.c, above 200 assets) reaches
 * the full problem's KKT point; no one of 1000 feasible moves near it is lower */
static void test_working_set(void)
{
    const int d = 250;
    double *mu = malloc(d * sizeof(double)), *ga = malloc(d * sizeof(double)), *S = malloc((size_t)d * d * sizeof(double));
    double *be = malloc(d * sizeof(double)), *lo = malloc(d * sizeof(double)), *hi = malloc(d * sizeof(double));
    double *w = malloc(d * sizeof(double)), *v = malloc(d * sizeof(double));
    for (int i = 0; i < d; i++) {
        mu[i] = 2e-4 + 6e-4 * urand(), ga[i] = -2e-4 + 2e-4 * urand(), be[i] = 0.5 + urand();
        lo[i] = 0.0, hi[i] = INFINITY;
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            const double idio = 0.008 + 0.012 * urand();
            S[(size_t)i * d + j] = 1e-4 * be[i] * be[j] + (i == j ? idio * idio : 0.0);
        }
    for (int i = 0; i < d; i++) /* symmetric (the diagonal drawn once) */
        for (int j = 0; j < i; j++) S[(size_t)j * d + i] = S[(size_t)i * d + j];
    const ghf_opt_cons c = {1.0, lo, hi};
    for (int fi = 0; fi < 3; fi += 2) { /* gauss (sd), nig (es) */
        ghf_opt_law L = {.d = d, .gauss = FAMS[fi].gauss, .p = FAMS[fi].p, .a = FAMS[fi].a, .b = FAMS[fi].b, .mu = mu,
                         .gamma = ga, .disp = {ghf_opt_quad_dense, S}};
        ghf_opt_law_init(&L);
        const int m = fi == 0 ? GHF_OPT_SD : GHF_OPT_ES;
        const ghf_opt_spec sp = {m, GHF_OPT_MIN_RISK, 0.975, 0.0, 0.0};
        ghf_opt_result r;
        CHECK(ghf_opt_solve(&L, &c, &sp, NULL, w, &r) == 0, "solve");
        CHECK(r.converged && r.kkt <= 1e-6, "d = 250 %s long-only: converged %d kkt %.3g", MNAME[m], r.converged, r.kkt);
        const double r0 = risk_of(&L, m, w);
        int lower = 0;
        for (int t = 0; t < 1000; t++) {
            rand_feasible(&c, d, w, 1, v);
            if (risk_of(&L, m, v) < r0 - 1e-9 * r0) lower++;
        }
        CHECK(lower == 0, "d = 250 %s: %d of 1000 feasible moves are lower", MNAME[m], lower);
        printf("working set d = 250 %s: kkt %.3g, %d active bounds, %d evaluations\n", MNAME[m], r.kkt, r.n_active,
               r.n_eval);
    }
    free(mu), free(ga), free(S), free(be), free(lo), free(hi), free(w), free(v);
}

/* The factor form (Sigma = B B' + diag(D), never formed): w'Sigma w and
 * Sigma w through B, D equal the dense Sigma's, and the optimum through
 * B, D equals the optimum through the dense Sigma formed from them (weights
 * within 1e-9), for sd (gauss) and ES (nig), long-only and unconstrained. */
static void test_factor_form(void)
{
    const int d = 60, R = 3;
    double *mu = malloc(d * sizeof(double)), *ga = malloc(d * sizeof(double)), *S = malloc((size_t)d * d * sizeof(double));
    double *B = malloc((size_t)d * R * sizeof(double)), *D = malloc(d * sizeof(double));
    double *lo = malloc(d * sizeof(double)), *hi = malloc(d * sizeof(double)), *fre = malloc(d * sizeof(double));
    double *w1 = malloc(d * sizeof(double)), *w2 = malloc(d * sizeof(double));
    double *s1 = malloc(d * sizeof(double)), *s2 = malloc(d * sizeof(double));
    for (int i = 0; i < d; i++) {
        mu[i] = 2e-4 + 6e-4 * urand(), ga[i] = -2e-4 + 2e-4 * urand();
        const double idio = 0.008 + 0.012 * urand();
        D[i] = idio * idio;
        for (int k = 0; k < R; k++) B[i * R + k] = 0.01 * nrand();
        lo[i] = 0.0, hi[i] = INFINITY, fre[i] = -INFINITY;
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            double t = i == j ? D[i] : 0.0;
            for (int k = 0; k < R; k++) t += B[i * R + k] * B[j * R + k];
            S[(size_t)i * d + j] = t;
        }
    const ghf_opt_factor fac = {R, B, D};
    double qmax = 0.0;
    for (int t = 0; t < 20; t++) {
        for (int i = 0; i < d; i++) w1[i] = nrand();
        double q1, q2;
        ghf_opt_quad_dense(S, d, w1, s1, &q1);
        ghf_opt_quad_factor(&fac, d, w1, s2, &q2);
        double e = fabs(q1 - q2) / q1;
        for (int i = 0; i < d; i++) e = fmax(e, fabs(s1[i] - s2[i]) / sqrt(q1 * S[(size_t)i * d + i]));
        qmax = fmax(qmax, e);
    }
    CHECK(qmax <= 1e-13, "factor form: w'Sigma w, Sigma w off the dense Sigma's by %.3g", qmax);
    double wmax = 0.0;
    for (int fi = 0; fi < 3; fi += 2) /* gauss (sd), nig (es) */
        for (int ci = 0; ci < 2; ci++) {
            const ghf_opt_cons c = {1.0, ci ? lo : fre, hi};
            ghf_opt_law L = {.d = d, .gauss = FAMS[fi].gauss, .p = FAMS[fi].p, .a = FAMS[fi].a, .b = FAMS[fi].b,
                             .mu = mu, .gamma = ga, .disp = {ghf_opt_quad_dense, S}};
            ghf_opt_law_init(&L);
            ghf_opt_law F = L;
            F.disp = (ghf_opt_disp){ghf_opt_quad_factor, &fac};
            const int m = fi == 0 ? GHF_OPT_SD : GHF_OPT_ES;
            const ghf_opt_spec sp = {m, GHF_OPT_MIN_RISK, 0.975, 0.0, 0.0};
            ghf_opt_result r1, r2;
            CHECK(ghf_opt_solve(&L, &c, &sp, NULL, w1, &r1) == 0 && ghf_opt_solve(&F, &c, &sp, NULL, w2, &r2) == 0,
                  "solve");
            CHECK(r1.converged && r2.converged, "factor form %s %s: converged %d (dense) %d (B, D)", MNAME[m],
                  ci ? "long-only" : "free", r1.converged, r2.converged);
            double e = 0.0;
            for (int i = 0; i < d; i++) e = fmax(e, fabs(w1[i] - w2[i]));
            CHECK(e <= 1e-9, "factor form %s %s: |w(B, D) - w(dense Sigma)| = %.3g", MNAME[m],
                  ci ? "long-only" : "free", e);
            CHECK(fabs(r1.risk - r2.risk) <= 1e-12 * r1.risk, "factor form %s: risk %.17g vs %.17g", MNAME[m],
                  r2.risk, r1.risk);
            wmax = fmax(wmax, e);
        }
    printf("factor form d = %d R = %d: quad off by %.3g, optimum weights off by %.3g\n", d, R, qmax, wmax);
    free(mu), free(ga), free(S), free(B), free(D), free(lo), free(hi), free(fre), free(w1), free(w2), free(s1), free(s2);
}

int main(void)
{
    test_gradients();
    test_closed_form();
    test_optimality();
    test_frontier();
    test_working_set();
    test_factor_form();
    return test_summary("test_portopt");
}
